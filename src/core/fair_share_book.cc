#include "core/fair_share_book.h"

#include <algorithm>

namespace gpusched::core {

FairShareBook::FairShareBook(const FairShareOptions& options, const QuotaPolicy& quotas,
                             const Clock& clock)
    : options_(options),
      quotas_(quotas),
      clock_(clock),
      usage_(options.half_life_ms),
      next_recalc_ms_(clock.NowMs() + options.recalc_ms) {}

void FairShareBook::CountLive(const std::string& team, const std::string& user, int delta) {
  auto key = std::make_pair(team, user);
  if ((live_[key] += delta) <= 0) live_.erase(key);
}

void FairShareBook::RestoreUsage(const std::string& team, const std::string& user,
                                 int64_t gpus, DurationMs service_ms, TimeMs at_ms) {
  if (gpus <= 0 || service_ms <= 0) return;
  usage_.Restore(team, user, double(gpus) * double(service_ms), at_ms);
  dirty_ = true;
}

void FairShareBook::StartCharging(TaskId id, const std::string& team, const std::string& user,
                                  double gpus, TimeMs at_ms) {
  charging_[id] = Charging{team, user, gpus, at_ms};
}

void FairShareBook::Charge(Charging& c, TimeMs until_ms) {
  const DurationMs ms = std::max<DurationMs>(0, until_ms - c.until_ms);
  usage_.Charge(c.team, c.user, c.gpus * double(ms), until_ms);
  c.until_ms = std::max(c.until_ms, until_ms);
}

void FairShareBook::StopCharging(TaskId id, TimeMs until_ms) {
  auto it = charging_.find(id);
  if (it == charging_.end()) return;
  Charge(it->second, until_ms);
  charging_.erase(it);
}

double FairShareBook::CachedFactor(std::string_view team, std::string_view user) const {
  auto it = factors_.find(GroupLess::View{team, user});
  if (it != factors_.end()) return it->second;
  dirty_ = true;  // a newcomer: refresh at the next pass
  return 1.0;     // nothing used yet, as of the last recalc
}

FairShareBook::Groups FairShareBook::KnownGroups() const {
  Groups users;
  for (const auto& [tm, us] : usage_.users_by_team()) {
    for (const auto& [u, unused] : us) users[tm].insert(u);
  }
  for (const auto& [tm, q] : quotas_.quotas()) users[tm];
  for (const auto& [group, n] : live_) users[group.first].insert(group.second);
  return users;
}

// Shares [choice, core/fair_share.h]: a team's guaranteed GPUs (at least 1); a team not
// among `groups` counts as one more sibling; users of one team share equally.
double FairShareBook::FactorAmong(const Groups& groups, const std::string& team,
                                  const std::string& user) const {
  const TimeMs now = clock_.NowMs();
  auto shares = [&](const std::string& tm) {
    return static_cast<double>(std::max<int64_t>(1, quotas_.Of(tm).guaranteed_gpus));
  };
  double total_shares = groups.count(team) ? 0 : shares(team);
  for (const auto& [tm, us] : groups) total_shares += shares(tm);
  const double total = usage_.Total(now), team_used = usage_.Team(team, now);
  const double f_team =
      FairShareFactor(total > 0 ? team_used / total : 0, shares(team) / total_shares);
  auto it = groups.find(team);
  double n_users = it == groups.end() ? 1 : static_cast<double>(it->second.size());
  if (it != groups.end() && it->second.count(user) == 0) n_users += 1;
  const double f_user = FairShareFactor(
      team_used > 0 ? usage_.User(team, user, now) / team_used : 0, 1.0 / n_users);
  return f_team * f_user;
}

double FairShareBook::FactorOf(const std::string& team, const std::string& user) const {
  return FactorAmong(KnownGroups(), team, user);
}

void FairShareBook::Recalc() {
  const TimeMs now = clock_.NowMs();
  for (auto& [id, c] : charging_) Charge(c, now);
  next_recalc_ms_ = now + options_.recalc_ms;
  dirty_ = false;
  factors_.clear();
  // Every known (team, user), not only those in Q: a task of a known group entering Q later
  // finds its factor instead of asking for another recomputation.
  const Groups all = KnownGroups();
  for (const auto& [team, users] : all) {
    for (const std::string& user : users) factors_[{team, user}] = FactorAmong(all, team, user);
  }
}

std::map<std::string, double> FairShareBook::TeamGpuMs() const {
  std::map<std::string, double> out = usage_.team_totals();
  const TimeMs now = clock_.NowMs();
  for (const auto& [id, c] : charging_) {
    out[c.team] += c.gpus * double(std::max<DurationMs>(0, now - c.until_ms));
  }
  return out;
}

}  // namespace gpusched::core
