#include "core/filters.h"

namespace gpusched::core {

const char* FilterName(int id) {
  return id >= 0 && id < kNumFilters ? kFilters[kFilterRow[static_cast<size_t>(id)]].name
                                     : "none";
}

const char* FilterReason(int id) {
  return id >= 0 && id < kNumFilters ? kFilters[kFilterRow[static_cast<size_t>(id)]].reason
                                     : "none";
}

bool RejectsForWhatTheNodeIs(int id) {
  return id >= 0 && id < kNumFilters &&
         kFilters[kFilterRow[static_cast<size_t>(id)]].judges == Judges::kWhatTheNodeIs;
}

namespace {

bool Tolerates(const Taint& t, const Toleration& tol) {
  if (tol.has_effect && tol.effect != t.effect) return false;
  if (tol.key.empty()) return tol.exists;  // empty key + Exists tolerates everything
  if (tol.key != t.key) return false;
  return tol.exists || tol.value == t.value;
}

}  // namespace

bool ToleratesAll(const std::vector<Taint>& taints, const std::vector<Toleration>* tolerations) {
  for (const Taint& t : taints) {
    // PreferNoSchedule is a soft preference: it never filters.
    if (t.effect == TaintEffect::kPreferNoSchedule) continue;
    bool ok = false;
    if (tolerations != nullptr) {
      for (const Toleration& tol : *tolerations) {
        if (Tolerates(t, tol)) {
          ok = true;
          break;
        }
      }
    }
    if (!ok) return false;
  }
  return true;
}

bool MatchesSelector(const std::map<std::string, std::string>& labels,
                     const std::map<std::string, std::string>* selector) {
  if (selector == nullptr) return true;
  for (const auto& [key, value] : *selector) {
    auto it = labels.find(key);
    if (it == labels.end() || it->second != value) return false;
  }
  return true;
}

}  // namespace gpusched::core
