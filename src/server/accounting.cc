#include "server/accounting.h"

#include <algorithm>
#include <unordered_set>

#include "server/api_convert.h"
#include "server/control_plane.h"

namespace gpusched::server {
namespace {

constexpr double kMsPerHour = 3'600'000.0;
constexpr int64_t kRowHourMs = 3'600'000;  // a rollup row's hour slot

}  // namespace

TaskOwner OwnerOf(const v1::Task& t) {
  const std::string& user = t.spec().user();
  const std::string& team = t.spec().team();
  return {user.empty() ? "default" : user, team.empty() ? "default" : team};
}

TaskUsage UsageOf(const v1::Task& t, const GpuTotals& gpu_total_mib, int64_t now_ms) {
  TaskUsage u;
  u.owner = OwnerOf(t);
  u.failure = t.failure().empty() ? "none" : t.failure();
  if (t.gpus_size() == 0) return u;  // never placed: nothing held
  // What the task holds while it runs: whole GPUs' worth and MiB.
  for (int i = 0; i < t.gpus_size(); ++i) {
    const int64_t mib = i < t.gpu_mem_mib_size() ? t.gpu_mem_mib(i) : 0;
    auto total = gpu_total_mib.find({t.node(), t.gpus(i)});
    const bool known = total != gpu_total_mib.end() && total->second > 0;
    u.gpus += known ? std::min(1.0, double(mib) / double(total->second)) : 1.0;
    u.mem_mib += mib;
  }
  int64_t start = -1;
  for (const auto& h : t.history()) {
    if (start >= 0 && h.state() != "running") {
      u.runs.emplace_back(start, h.at_ms());
      start = -1;
    }
    if (start < 0 && h.state() == "running") start = h.at_ms();
  }
  if (start >= 0) u.runs.emplace_back(start, t.finished_ms() > 0 ? t.finished_ms() : now_ms);
  return u;
}

Accounting::Accounting(AccountingQuery q, GpuTotals gpu_total_mib)
    : q_(std::move(q)), gpu_total_mib_(std::move(gpu_total_mib)) {
  steps_ = static_cast<size_t>((q_.until_ms - q_.since_ms + q_.step_ms - 1) / q_.step_ms);
}

bool Accounting::Wanted(const TaskOwner& owner) const {
  return (q_.user.empty() || owner.user == q_.user) && (q_.team.empty() || owner.team == q_.team);
}

AccountingGroup& Accounting::GroupOf(const TaskOwner& owner, const std::string& failure) {
  using By = AccountingQuery::By;
  const std::string name = q_.by == By::kUser      ? owner.user
                           : q_.by == By::kTeam    ? owner.team
                           : q_.by == By::kFailure ? failure
                                                   : owner.team + "/" + owner.user;
  AccountingGroup& g = groups_[name];
  g.name = name;
  if (q_.by == By::kTeam || q_.by == By::kTeamUser) g.team = owner.team;
  if (q_.by == By::kUser || q_.by == By::kTeamUser) g.user = owner.user;
  g.gpu_hours_by_step.resize(steps_);
  return g;
}

void Accounting::Add(const v1::Task& t) {
  const TaskUsage u = UsageOf(t, gpu_total_mib_, q_.now_ms);
  if (!Wanted(u.owner)) return;
  // Run intervals, cut to the window.
  std::vector<std::pair<int64_t, int64_t>> runs;
  for (const auto& [start, end] : u.runs) {
    const int64_t from = std::max(start, q_.since_ms), to = std::min(end, q_.until_ms);
    if (to > from) runs.emplace_back(from, to);
  }
  if (runs.empty()) return;
  AccountingGroup& g = GroupOf(u.owner, u.failure);
  ++g.tasks;
  const double gib = double(u.mem_mib) / 1024.0;
  for (const auto& [from, to] : runs) AddInterval(g, from, to, u.gpus, gib);
}

void Accounting::AddRollup(const store::RollupRow& row) {
  const TaskOwner owner{row.user, row.team};
  if (!Wanted(owner)) return;
  for (int h = 0; h < store::RollupRow::kHours; ++h) {
    const store::RollupSlot& slot = row.hours[static_cast<size_t>(h)];
    const int64_t lo = (row.day * 24 + h) * kRowHourMs;
    const int64_t from = std::max(lo, q_.since_ms), to = std::min(lo + kRowHourMs, q_.until_ms);
    if (to <= from || slot == store::RollupSlot{}) continue;
    AccountingGroup& g = GroupOf(owner, row.failure);
    g.tasks += slot.tasks;
    // The hour's use as a constant rate: its average GPUs and GiB over the hour.
    AddInterval(g, from, to, double(slot.gpu_micro_ms) * 1e-6 / kMsPerHour,
                double(slot.gpu_mem_mib_ms) / 1024.0 / kMsPerHour);
  }
}

void Accounting::AddInterval(AccountingGroup& g, int64_t from, int64_t to, double gpus,
                             double gib) {
  g.gpu_hours += gpus * double(to - from) / kMsPerHour;
  g.gpu_mem_gib_hours += gib * double(to - from) / kMsPerHour;
  for (size_t i = static_cast<size_t>((from - q_.since_ms) / q_.step_ms); i < steps_; ++i) {
    const int64_t lo = q_.since_ms + int64_t(i) * q_.step_ms, hi = lo + q_.step_ms;
    if (lo >= to) break;
    const int64_t overlap = std::min(hi, to) - std::max(lo, from);
    if (overlap > 0) g.gpu_hours_by_step[i] += gpus * double(overlap) / kMsPerHour;
  }
}

std::vector<AccountingGroup> Accounting::Groups() const {
  std::vector<AccountingGroup> out;
  for (const auto& [name, g] : groups_) out.push_back(g);
  return out;
}

namespace {

// Whether `t` may have run inside the window.
bool MayHaveRun(const core::Task& t, const AccountingQuery& q) {
  // Never ran: no attempt. (started_ms is the current attempt's: 0 while a task that ran
  // before waits again, and its earlier runs count.)
  if (t.attempts == 0) return false;
  if (t.finished_ms != 0 && t.finished_ms < q.since_ms) return false;
  return t.submitted_ms < q.until_ms;
}

}  // namespace

StatusOr<std::vector<AccountingGroup>> CollectAccounting(ControlPlane& cp, Accounting& acct,
                                                         const AccountingQuery& q) {
  GS_RETURN_IF_ERROR(CollectAccountingInto(cp, {&acct}, q));
  return acct.Groups();
}

Status CollectAccountingInto(ControlPlane& cp, const std::vector<Accounting*>& accts,
                             const AccountingQuery& q) {
  // Issue 38: a task archived by an older version and not yet deleted from the store is in
  // both; counted once.
  std::unordered_set<uint64_t> finished_in_store;
  for (uint64_t after = 0;;) {
    GS_ASSIGN_OR_RETURN(ListPage page, cp.ListTasks(std::nullopt, after, 1000));
    for (const TaskView& v : page.tasks) {
      if (core::IsTerminal(v.task.state)) finished_in_store.insert(v.id());
      if (!MayHaveRun(v.task, q)) continue;
      const v1::Task t = TaskToProto(v, /*with_history=*/true);  // the page holds the record
      for (Accounting* acct : accts) acct->Add(t);
    }
    if (page.next_after_id == 0) break;
    after = page.next_after_id;
  }
  // Issue 38: what history_retention deleted from the store, hour by hour. A task is in the
  // store or in the rows, never both: the rows are written in the commit deleting it.
  GS_ASSIGN_OR_RETURN(std::vector<store::RollupRow> rows, cp.ListRollups(q.since_ms, q.until_ms));
  for (const store::RollupRow& row : rows) {
    for (Accounting* acct : accts) acct->AddRollup(row);
  }
  // Archived by versions before the rows (nothing counts them but the archive).
  for (uint64_t after = 0;;) {
    GS_ASSIGN_OR_RETURN(ListPage page, cp.ListArchived(q.since_ms, after, 1000));
    for (const TaskView& v : page.tasks) {
      if (finished_in_store.count(v.id()) != 0 || !MayHaveRun(v.task, q)) continue;
      const v1::Task t = TaskToProto(v, /*with_history=*/true);
      for (Accounting* acct : accts) acct->Add(t);
    }
    if (page.next_after_id == 0) break;
    after = page.next_after_id;
  }
  return Status::Ok();
}

}  // namespace gpusched::server
