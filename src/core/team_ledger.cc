#include "core/team_ledger.h"

#include <algorithm>
#include <optional>

namespace gpusched::core {

Status TeamLedger::SetQuota(const TeamQuota& quota) {
  if (!quota.max_priority.empty() && !config_.PriorityOf(quota.max_priority)) {
    std::string known;
    for (const auto& c : config_.priority_classes) known += (known.empty() ? "" : ", ") + c.name;
    return InvalidArgument("max_priority: \"" + quota.max_priority +  // --max-priority
                           "\" is not a priority class (known: " + known + ")");
  }
  return quotas_.Set(quota);
}

void TeamLedger::CountUsage(const std::string& team, const Placement& p,
                            const std::vector<Placement>& gang, int sign) {
  TeamUsage& u = usage_[team];
  MiB mem = 0;
  int64_t gpus = static_cast<int64_t>(p.gpus.size());
  for (MiB m : p.gpu_mem_mib) mem += m;
  for (const Placement& g : gang) {  // a gang's other ranks
    gpus += static_cast<int64_t>(g.gpus.size());
    for (MiB m : g.gpu_mem_mib) mem += m;
  }
  u.gpus += sign * gpus;
  u.gpu_mem_mib += sign * mem;
  u.tasks += sign;
}

std::map<std::string, TeamStatus> TeamLedger::Teams(
    const std::map<std::string, int64_t>& pending) const {
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
  for (const auto& [team, u] : usage_) {
    if (u.tasks > 0) entry(team).used = u;
  }
  for (const auto& [team, n] : pending) entry(team).pending += n;
  for (auto& [team, s] : out) {
    s.borrowed_gpus = std::max<int64_t>(0, s.used.gpus - s.quota.guaranteed_gpus);
  }
  return out;
}

std::string TeamLedger::GrantedClass(const std::string& team) const {
  const SchedulerConfig::PriorityGrants& g = config_.priority_grants;
  const std::string name = team.empty() ? kDefaultTeam : team;
  if (auto it = quotas_.quotas().find(name);
      it != quotas_.quotas().end() && !it->second.max_priority.empty()) {
    return it->second.max_priority;
  }
  if (auto it = g.teams.find(name); it != g.teams.end()) return it->second;
  return g.default_max.empty() ? config_.default_priority_class : g.default_max;
}

Status TeamLedger::CheckPriorityGrant(const TaskSpec& spec) const {
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

int64_t TeamLedger::PreemptingPriority(int64_t priority, const std::string& team) const {
  if (!config_.priority_grants.enforce) return priority;
  const std::optional<int64_t> may = config_.PriorityOf(GrantedClass(team));
  return may ? std::min(priority, *may) : priority;
}

}  // namespace gpusched::core
