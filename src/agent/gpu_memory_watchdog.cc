#include "agent/gpu_memory_watchdog.h"

namespace gpusched::agent {

std::vector<WatchdogStop> MemoryWatchdog::Observe(
    const std::map<TaskKey, TaskShare>& tasks,
    const std::map<TaskKey, std::map<int, MiB>>& used, TimeMs now) {
  std::vector<WatchdogStop> stops;
  // Forget tasks that are gone.
  for (auto it = over_since_.begin(); it != over_since_.end();) {
    it = tasks.count(it->first) ? std::next(it) : over_since_.erase(it);
  }
  for (auto it = stopped_.begin(); it != stopped_.end();) {
    it = tasks.count(*it) ? std::next(it) : stopped_.erase(it);
  }
  for (const auto& [key, share] : tasks) {
    auto held = used.find(key);
    int over_gpu = -1;
    MiB over_used = 0, over_share = 0;
    if (held != used.end()) {
      for (size_t k = 0; k < share.gpus.size() && k < share.share_mib.size(); ++k) {
        auto g = held->second.find(share.gpus[k]);
        if (share.share_mib[k] <= 0 || g == held->second.end() || g->second <= share.share_mib[k]) {
          continue;
        }
        over_gpu = share.gpus[k];
        over_used = g->second;
        over_share = share.share_mib[k];
        break;
      }
    }
    if (over_gpu < 0) {
      over_since_.erase(key);
      continue;
    }
    const TimeMs since = over_since_.emplace(key, now).first->second;
    if (now - since < grace_ms_ || stopped_.count(key)) continue;
    stopped_.insert(key);
    stops.push_back({key, "exceeded its GPU memory share: " + std::to_string(over_used) +
                              " MiB of " + std::to_string(over_share) + " MiB on GPU " +
                              std::to_string(over_gpu) + " for " + FormatDurationMs(now - since)});
  }
  return stops;
}

}  // namespace gpusched::agent
