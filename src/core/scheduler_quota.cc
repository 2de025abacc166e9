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
  fair_share_.MarkDirty();  // shares follow guarantees
  return Status::Ok();
}

void Scheduler::RemoveQuota(const std::string& team) {
  quotas_.Remove(team);
  UnparkAll();  // as SetQuota: the pass changes
  pass_requested_ = true;
  capacity_event_ = true;
  fair_share_.MarkDirty();
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

void Scheduler::RecalcFairShare() {
  fair_share_.Recalc();
  std::vector<QueueKey> keys = main_queue_.Snapshot();
  for (const QueueKey& k : keys) {
    Task& t = *Find(k.id);
    main_queue_.Erase(k);
    t.fs_rank = FairShareRank(config_.fair_share, t.pt, config_.max_priority_value,
                              fair_share_.CachedFactor(TeamOf(t.spec), t.spec.user));
    main_queue_.Push(KeyOf(t));
  }
}

}  // namespace gpusched::core
