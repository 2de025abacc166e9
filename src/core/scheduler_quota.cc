// Scheduler: team quotas with borrowing and reclaim (core/quota.h) and fair share
// (core/fair_share.h). The pass that uses them is Scheduler::Schedule (scheduler.cc).

#include <algorithm>
#include <set>

#include "core/explain_need.h"
#include "core/scheduler.h"

namespace gpusched::core {

MiB Scheduler::TaskGpuMemMib(const Task& t) const {
  if (t.placement) {
    MiB sum = 0;
    for (MiB m : t.placement->gpu_mem_mib) sum += m;
    for (const Placement& g : t.gang_placements) {
      for (MiB m : g.gpu_mem_mib) sum += m;
    }
    return sum;
  }
  if (t.exclusive) return TotalGpus(t.spec) * ExtremesFor(t.spec.gpu_model).max_gpu_mib;
  return TotalGpus(t.spec) * t.gpu_mem_need_mib;
}

void Scheduler::CountUsage(const Task& t, const Placement& p, int sign) {
  TeamUsage& u = team_usage_[TeamOf(t.spec)];
  MiB mem = 0;
  int64_t gpus = static_cast<int64_t>(p.gpus.size());
  for (MiB m : p.gpu_mem_mib) mem += m;
  for (const Placement& g : t.gang_placements) {  // a gang's other ranks
    gpus += static_cast<int64_t>(g.gpus.size());
    for (MiB m : g.gpu_mem_mib) mem += m;
  }
  u.gpus += sign * gpus;
  u.gpu_mem_mib += sign * mem;
  u.tasks += sign;
}

Status Scheduler::SetQuota(const TeamQuota& quota) {
  if (!quota.max_priority.empty() && !config_.PriorityOf(quota.max_priority)) {
    std::string known;
    for (const auto& c : config_.priority_classes) known += (known.empty() ? "" : ", ") + c.name;
    return InvalidArgument("max_priority: \"" + quota.max_priority +  // --max-priority
                           "\" is not a priority class (known: " + known + ")");
  }
  GS_RETURN_IF_ERROR(quotas_.Set(quota));
  UnparkAll();  // quotas change the pass: the lazy flush no longer applies
  pass_requested_ = true;
  capacity_event_ = true;  // a quota change may let tasks waiting in FQ start (issue 37)
  fs_dirty_ = true;  // shares follow guarantees
  return Status::Ok();
}

void Scheduler::RemoveQuota(const std::string& team) {
  quotas_.Remove(team);
  UnparkAll();  // as SetQuota: the pass changes
  pass_requested_ = true;
  capacity_event_ = true;
  fs_dirty_ = true;
}

std::string Scheduler::GrantedClass(const std::string& team) const {
  const SchedulerConfig::PriorityGrants& g = config_.priority_grants;
  const std::string name = team.empty() ? kDefaultTeam : team;
  if (auto it = quotas_.quotas().find(name);
      it != quotas_.quotas().end() && !it->second.max_priority.empty()) {
    return it->second.max_priority;
  }
  if (auto it = g.teams.find(name); it != g.teams.end()) return it->second;
  return g.default_max.empty() ? config_.default_priority_class : g.default_max;
}

Status Scheduler::CheckPriorityGrant(const TaskSpec& spec) const {
  if (!config_.priority_grants.enforce) return Status::Ok();
  const std::string granted = GrantedClass(spec.team);
  const std::optional<int64_t> want = config_.PriorityOf(spec.priority_class);
  const std::optional<int64_t> may = config_.PriorityOf(granted);
  if (!want || (may && *want <= *may)) return Status::Ok();
  const std::string cls = spec.priority_class.empty() ? config_.default_priority_class
                                                      : spec.priority_class;
  const std::string team = TeamOf(spec);
  return PermissionDenied("priority " + cls + ": team " + team + " may use up to " + granted +
                          " (gpusched quota set " + team + " --max-priority " + cls + ")");
}

int64_t Scheduler::PreemptingPriority(const Task& t) const {
  if (!config_.priority_grants.enforce) return t.priority;
  const std::optional<int64_t> may = config_.PriorityOf(GrantedClass(t.spec.team));
  return may ? std::min(t.priority, *may) : t.priority;
}

std::map<std::string, TeamStatus> Scheduler::Teams() const {
  std::map<std::string, TeamStatus> out;
  auto entry = [&](const std::string& team) -> TeamStatus& {
    auto [it, fresh] = out.try_emplace(team);
    if (fresh) {
      it->second.quota = quotas_.Of(team);
      it->second.has_quota = quotas_.quotas().count(team) > 0;
    }
    return it->second;
  };
  for (const auto& [team, q] : quotas_.quotas()) entry(team);
  for (const auto& [team, u] : team_usage_) {
    if (u.tasks > 0) entry(team).used = u;
  }
  for (const auto& [raw, t] : tasks_) {
    if (IsPending(t.state) && held_.count(t.id) == 0) ++entry(TeamOf(t.spec)).pending;
  }
  for (auto& [team, s] : out) s.borrowed_gpus = std::max<int64_t>(0, s.used.gpus - s.quota.guaranteed_gpus);
  return out;
}

// ---------------------------------------------------------------- reclaim

void Scheduler::QuotaWait(Task& t, const std::string& reason) {
  if (t.reason != reason || t.last_report_summary != reason) {
    t.reason = reason;
    t.last_report_summary = reason;
    changed_.push_back(t.id);
  }
}

// ---------------------------------------------------------------- fair share

void Scheduler::Charge(const Task& t, TimeMs until_ms) {
  auto it = charged_until_.find(t.id);
  if (it == charged_until_.end() || !t.placement) return;
  const double gpus = static_cast<double>(t.placement->gpus.size() *
                                          (1 + t.gang_placements.size()));
  const DurationMs ms = std::max<DurationMs>(0, until_ms - it->second);
  fs_usage_.Charge(TeamOf(t.spec), t.spec.user, gpus * double(ms), until_ms);
  it->second = std::max(it->second, until_ms);
}

void Scheduler::RestoreUsage(const TaskSpec& spec, int64_t gpus, DurationMs service_ms,
                             TimeMs at_ms) {
  if (gpus <= 0 || service_ms <= 0) return;
  fs_usage_.Restore(TeamOf(spec), spec.user, double(gpus) * double(service_ms), at_ms);
  fs_dirty_ = true;
}

double Scheduler::CachedFactor(const std::string& team, const std::string& user) const {
  auto it = fs_factor_.find({team, user});
  if (it != fs_factor_.end()) return it->second;
  fs_dirty_ = true;  // a newcomer: refresh at the next pass
  return 1.0;  // nothing used yet, as of the last recalc
}

// Teams: every team with a quota, usage or a live task; users: those of a team with
// usage or a live task.
std::map<std::string, std::set<std::string>> Scheduler::FairShareGroups() const {
  std::map<std::string, std::set<std::string>> users;
  for (const auto& [tm, us] : fs_usage_.users_by_team()) {
    for (const auto& [u, unused] : us) users[tm].insert(u);
  }
  for (const auto& [tm, q] : quotas_.quotas()) users[tm];
  for (const auto& [group, n] : live_by_group_) users[group.first].insert(group.second);
  return users;
}

double Scheduler::FactorAmong(const std::map<std::string, std::set<std::string>>& groups,
                              const std::string& team, const std::string& user) const {
  const TimeMs now = clock_.NowMs();
  auto shares = [&](const std::string& tm) {
    return static_cast<double>(std::max<int64_t>(1, quotas_.Of(tm).guaranteed_gpus));
  };
  double total_shares = groups.count(team) ? 0 : shares(team);
  for (const auto& [tm, us] : groups) total_shares += shares(tm);
  const double total = fs_usage_.Total(now), team_used = fs_usage_.Team(team, now);
  const double f_team =
      FairShareFactor(total > 0 ? team_used / total : 0, shares(team) / total_shares);
  auto it = groups.find(team);
  double n_users = it == groups.end() ? 1 : static_cast<double>(it->second.size());
  if (it != groups.end() && it->second.count(user) == 0) n_users += 1;
  const double f_user = FairShareFactor(
      team_used > 0 ? fs_usage_.User(team, user, now) / team_used : 0, 1.0 / n_users);
  return f_team * f_user;
}

double Scheduler::FairShareOf(const std::string& team, const std::string& user) const {
  return FactorAmong(FairShareGroups(), team, user);
}

void Scheduler::RecalcFairShare() {
  const TimeMs now = clock_.NowMs();
  for (TaskId id : active_) Charge(*Find(id), now);
  next_fs_recalc_ms_ = now + config_.fair_share.recalc_ms;
  fs_dirty_ = false;
  fs_factor_.clear();
  // Every known (team, user), not only those in Q: a task of a known group entering Q later
  // finds its factor instead of asking for another recomputation.
  const auto all = FairShareGroups();
  for (const auto& [team, users] : all) {
    for (const std::string& user : users) fs_factor_[{team, user}] = FactorAmong(all, team, user);
  }
  std::vector<QueueKey> keys = main_queue_.Snapshot();
  for (const QueueKey& k : keys) {
    Task& t = *Find(k.id);
    main_queue_.Erase(k);
    t.fs_rank = FairShareRank(config_.fair_share, t.pt, config_.max_priority_value,
                              fs_factor_.at({TeamOf(t.spec), t.spec.user}));
    main_queue_.Push(KeyOf(t));
  }
}

std::map<std::string, double> Scheduler::TeamGpuMs() const {
  std::map<std::string, double> out = fs_usage_.team_totals();
  const TimeMs now = clock_.NowMs();
  for (const auto& [id, since] : charged_until_) {
    const Task* t = GetTask(id);
    if (t == nullptr || !t->placement) continue;
    out[TeamOf(t->spec)] +=
        double(t->placement->gpus.size() * (1 + t->gang_placements.size())) *
        double(std::max<DurationMs>(0, now - since));
  }
  return out;
}

}  // namespace gpusched::core
