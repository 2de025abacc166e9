#include "server/accounting.h"

#include <algorithm>
#include <unordered_set>

#include "server/api_convert.h"
#include "server/control_plane.h"

namespace gpusched::server {
namespace {

constexpr double kMsPerHour = 3'600'000.0;

}  // namespace

TaskOwner OwnerOf(const v1::Task& t) {
  const std::string& user = t.spec().user();
  const std::string& team = t.spec().team();
  return {user.empty() ? "default" : user, team.empty() ? "default" : team};
}

Accounting::Accounting(AccountingQuery q,
                       std::map<std::pair<std::string, int>, int64_t> gpu_total_mib)
    : q_(std::move(q)), gpu_total_mib_(std::move(gpu_total_mib)) {
  steps_ = static_cast<size_t>((q_.until_ms - q_.since_ms + q_.step_ms - 1) / q_.step_ms);
}

void Accounting::Add(const v1::Task& t) {
  const TaskOwner owner = OwnerOf(t);
  if (!q_.user.empty() && owner.user != q_.user) return;
  if (!q_.team.empty() && owner.team != q_.team) return;
  // What the task holds while it runs: whole GPUs' worth and GiB.
  double gpus = 0, gib = 0;
  for (int i = 0; i < t.gpus_size(); ++i) {
    const int64_t mib = i < t.gpu_mem_mib_size() ? t.gpu_mem_mib(i) : 0;
    auto total = gpu_total_mib_.find({t.node(), t.gpus(i)});
    const bool known = total != gpu_total_mib_.end() && total->second > 0;
    gpus += known ? std::min(1.0, double(mib) / double(total->second)) : 1.0;
    gib += double(mib) / 1024.0;
  }
  if (t.gpus_size() == 0) return;  // never placed: nothing held
  // Run intervals, cut to the window.
  std::vector<std::pair<int64_t, int64_t>> runs;
  int64_t start = -1;
  auto close = [&](int64_t end) {
    const int64_t from = std::max(start, q_.since_ms), to = std::min(end, q_.until_ms);
    if (to > from) runs.emplace_back(from, to);
    start = -1;
  };
  for (const auto& h : t.history()) {
    if (start >= 0 && h.state() != "running") close(h.at_ms());
    if (start < 0 && h.state() == "running") start = h.at_ms();
  }
  if (start >= 0) close(t.finished_ms() > 0 ? t.finished_ms() : q_.now_ms);
  if (runs.empty()) return;
  using By = AccountingQuery::By;
  const std::string name = q_.by == By::kUser      ? owner.user
                           : q_.by == By::kTeam    ? owner.team
                           : q_.by == By::kFailure ? (t.failure().empty() ? "none" : t.failure())
                                                   : owner.team + "/" + owner.user;
  AccountingGroup& g = groups_[name];
  g.name = name;
  if (q_.by == By::kTeam || q_.by == By::kTeamUser) g.team = owner.team;
  if (q_.by == By::kUser || q_.by == By::kTeamUser) g.user = owner.user;
  g.gpu_hours_by_step.resize(steps_);
  ++g.tasks;
  for (const auto& [from, to] : runs) AddInterval(g, from, to, gpus, gib);
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
  // Issue 38: a task archived and not yet deleted from the store is in both; counted once.
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
  for (uint64_t after = 0;;) {  // what history_retention moved to the archive
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
