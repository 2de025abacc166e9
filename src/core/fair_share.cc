#include "core/fair_share.h"

#include <cmath>
#include <sstream>

namespace gpusched::core {

namespace {
std::string Num(double v) {
  std::ostringstream o;
  o << v;
  return o.str();
}
}  // namespace

Status FairShareOptions::Validate() const {
  if (!(fair_share_weight >= 0) || !std::isfinite(fair_share_weight)) {
    return InvalidArgument("fair_share_weight: must be >= 0, got " + Num(fair_share_weight));
  }
  if (!(priority_weight >= 0) || !std::isfinite(priority_weight)) {
    return InvalidArgument("priority_weight: must be >= 0, got " + Num(priority_weight));
  }
  if (fair_share_weight > 1e9 || priority_weight > 1e9) {
    return InvalidArgument("fair_share_weight/priority_weight: must be <= 1e9");
  }
  if (half_life_ms < 0) {
    return InvalidArgument("fair_share_half_life: must be >= 0, got " + std::to_string(half_life_ms) + " ms");
  }
  if (recalc_ms <= 0) {
    return InvalidArgument("fair_share_recalc: must be > 0, got " + std::to_string(recalc_ms) + " ms");
  }
  return Status::Ok();
}

double FairShareFactor(double usage_norm, double share_norm) {
  if (usage_norm <= 0) return 1.0;
  if (share_norm <= 0) return 0.0;
  return std::exp2(-usage_norm / share_norm);
}

int64_t FairShareRank(const FairShareOptions& o, int pt, int max_pt, double factor) {
  const double span = max_pt > 1 ? double(max_pt - 1) : 1.0;
  const double p = o.priority_weight * double(max_pt - pt) / span + o.fair_share_weight * factor;
  // Scaled so that weights of 1000 resolve factors to 1e-6; -P so that higher P sorts first.
  return -std::llround(p * 1000.0);
}

double FairShareUsage::At(const Decayed& d, TimeMs now_ms) const {
  if (half_life_ms_ <= 0 || now_ms <= d.at_ms) return d.value;
  return d.value * std::exp2(-double(now_ms - d.at_ms) / double(half_life_ms_));
}

void FairShareUsage::Add(Decayed& d, double v, TimeMs at_ms) const {
  if (at_ms >= d.at_ms) {
    d.value = At(d, at_ms) + v;
    d.at_ms = at_ms;
    return;
  }
  // A charge older than the sum (restored records come in id order, not time order): it has
  // decayed from at_ms to the sum's time already.
  d.value += half_life_ms_ <= 0 ? v : v * std::exp2(-double(d.at_ms - at_ms) / double(half_life_ms_));
}

void FairShareUsage::Restore(const std::string& team, const std::string& user, double gpu_ms,
                             TimeMs at_ms) {
  users_by_team_[team][user];
  if (gpu_ms <= 0) return;
  Add(total_, gpu_ms, at_ms);
  Add(teams_[team], gpu_ms, at_ms);
  Add(users_[{team, user}], gpu_ms, at_ms);
}

void FairShareUsage::Charge(const std::string& team, const std::string& user, double gpu_ms,
                            TimeMs at_ms) {
  Restore(team, user, gpu_ms, at_ms);
  if (gpu_ms > 0) team_totals_[team] += gpu_ms;
}

double FairShareUsage::Team(const std::string& team, TimeMs now_ms) const {
  auto it = teams_.find(team);
  return it == teams_.end() ? 0 : At(it->second, now_ms);
}

double FairShareUsage::User(const std::string& team, const std::string& user, TimeMs now_ms) const {
  auto it = users_.find({team, user});
  return it == users_.end() ? 0 : At(it->second, now_ms);
}

double FairShareUsage::Total(TimeMs now_ms) const { return At(total_, now_ms); }

}  // namespace gpusched::core
