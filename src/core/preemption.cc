#include "core/preemption.h"

#include <algorithm>
#include <utility>

namespace gpusched::core {

std::vector<TaskId> SelectPreemptionVictims(const QueueOrderOptions& options,
                                            const std::vector<const Task*>& live,
                                            int64_t total_gpus, TimeMs now) {
  std::vector<std::pair<QueueKey, const Task*>> order;
  order.reserve(live.size());
  for (const Task* t : live) {
    if (IsTerminal(t->state)) continue;
    order.emplace_back(MakeQueueKey(options, *t, AttainedMs(*t, now)), t);
  }
  std::sort(order.begin(), order.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  int64_t free_gpus = total_gpus;
  std::vector<TaskId> victims;
  for (const auto& [key, t] : order) {
    const int64_t need = TotalGpus(t->spec);
    if (need <= free_gpus) {
      free_gpus -= need;
      continue;
    }
    if (t->state == TaskState::kAssigned || t->state == TaskState::kRunning) {
      victims.push_back(t->id);
    }
  }
  std::sort(victims.begin(), victims.end());
  return victims;
}

}  // namespace gpusched::core
