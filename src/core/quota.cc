#include "core/quota.h"

namespace gpusched::core {

std::string TeamOf(const TaskSpec& spec) { return spec.team.empty() ? kDefaultTeam : spec.team; }

Status TeamQuota::Validate() const {
  if (team.empty()) return InvalidArgument("team: must not be empty");
  for (char c : team) {
    if (c == ' ' || c == '\t' || c == '\n' || c == '"' || c == '\\' || c < 0x20) {
      return InvalidArgument("team: \"" + team + "\" may not contain spaces, quotes or control characters");
    }
  }
  if (guaranteed_gpus < 0) {
    return InvalidArgument("gpus: must be >= 0, got " + std::to_string(guaranteed_gpus));
  }
  if (guaranteed_gpu_mem_mib < 0) {
    return InvalidArgument("gpu_mem: must be >= 0, got " + std::to_string(guaranteed_gpu_mem_mib) +
                           " MiB");
  }
  if (borrow_gpus < 0 && borrow_gpus != kUnlimitedBorrow) {
    return InvalidArgument("borrow: must be >= 0 (or unlimited), got " + std::to_string(borrow_gpus));
  }
  return Status::Ok();
}

namespace {
bool ParseCount(std::string_view s, int64_t& out) {
  if (s.empty() || s.size() > 12) return false;
  int64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  out = v;
  return true;
}
}  // namespace

StatusOr<int64_t> ParseGpuCount(std::string_view text, std::string_view field,
                                bool allow_unlimited) {
  if (allow_unlimited && text == "unlimited") return kUnlimitedBorrow;
  int64_t v = 0;
  if (!ParseCount(text, v) || v > 1'000'000) {
    return InvalidArgument(std::string(field) + ": \"" + std::string(text) +
                           "\" is not a GPU count (a whole number from 0 to 1000000" +
                           (allow_unlimited ? ", or unlimited)" : ")"));
  }
  return v;
}

StatusOr<TeamQuota> ParseTeamQuota(std::string_view text) {
  const std::string quoted = "\"" + std::string(text) + "\"";
  const size_t eq = text.find('=');
  if (eq == std::string_view::npos || eq == 0) {
    return InvalidArgument("--quota: " + quoted + " is not TEAM=GPUS[:BORROW]");
  }
  TeamQuota q;
  q.team = std::string(text.substr(0, eq));
  std::string_view rest = text.substr(eq + 1);
  std::string_view borrow;
  if (const size_t colon = rest.find(':'); colon != std::string_view::npos) {
    borrow = rest.substr(colon + 1);
    rest = rest.substr(0, colon);
    if (borrow.empty()) return InvalidArgument("--quota: " + quoted + ": BORROW after ':' is empty");
  }
  if (!ParseCount(rest, q.guaranteed_gpus)) {
    return InvalidArgument("--quota: " + quoted + ": GPUS \"" + std::string(rest) +
                           "\" is not a whole number");
  }
  if (borrow == "unlimited") {
    q.borrow_gpus = kUnlimitedBorrow;
  } else if (!borrow.empty() && !ParseCount(borrow, q.borrow_gpus)) {
    return InvalidArgument("--quota: " + quoted + ": BORROW \"" + std::string(borrow) +
                           "\" is not a whole number or \"unlimited\"");
  }
  Status s = q.Validate();
  if (!s.ok()) return InvalidArgument("--quota: " + quoted + ": " + s.message());
  return q;
}

bool TeamQuota::Limits() const {
  return guaranteed_gpus > 0 || guaranteed_gpu_mem_mib > 0 || borrow_gpus != kUnlimitedBorrow;
}

Status QuotaPolicy::Set(const TeamQuota& quota) {
  GS_RETURN_IF_ERROR(quota.Validate());
  auto [it, fresh] = quotas_.try_emplace(quota.team, quota);
  if (!fresh) {
    if (it->second.Limits()) --limiting_;
    it->second = quota;
  }
  if (quota.Limits()) ++limiting_;
  return Status::Ok();
}

void QuotaPolicy::Remove(const std::string& team) {
  auto it = quotas_.find(team);
  if (it == quotas_.end()) return;
  if (it->second.Limits()) --limiting_;
  quotas_.erase(it);
}

TeamQuota QuotaPolicy::Of(const std::string& team) const {
  auto it = quotas_.find(team);
  if (it != quotas_.end()) return it->second;
  TeamQuota q;
  q.team = team;
  q.borrow_gpus = kUnlimitedBorrow;
  return q;
}

QuotaClass QuotaPolicy::Classify(const std::string& team, const TeamUsage& used, int64_t gpus,
                                 MiB gpu_mem_mib) const {
  const TeamQuota q = Of(team);
  const int64_t after = used.gpus + gpus;
  const bool mem_ok = q.guaranteed_gpu_mem_mib == 0 ||
                      used.gpu_mem_mib + gpu_mem_mib <= q.guaranteed_gpu_mem_mib;
  if (after <= q.guaranteed_gpus && mem_ok) return QuotaClass::kWithinGuarantee;
  if (q.borrow_gpus != kUnlimitedBorrow && after > q.guaranteed_gpus + q.borrow_gpus) {
    return QuotaClass::kOverLimit;
  }
  return QuotaClass::kBorrowing;
}

bool QuotaPolicy::IsBorrowing(const std::string& team, const TeamUsage& used) const {
  const TeamQuota q = Of(team);
  return used.gpus > q.guaranteed_gpus ||
         (q.guaranteed_gpu_mem_mib > 0 && used.gpu_mem_mib > q.guaranteed_gpu_mem_mib);
}

std::string QuotaPolicy::DescribeLimit(const std::string& team, const TeamUsage& used) const {
  const TeamQuota q = Of(team);
  return "team " + team + " is at its quota: " + std::to_string(used.gpus) +
         " GPUs in use, guarantee " + std::to_string(q.guaranteed_gpus) + " + borrow " +
         (q.borrow_gpus == kUnlimitedBorrow ? std::string("unlimited")
                                            : std::to_string(q.borrow_gpus));
}

}  // namespace gpusched::core
