#include "core/preemption.h"

#include <algorithm>
#include <tuple>
#include <utility>

namespace gpusched::core {

std::vector<TaskId> SelectPreemptionVictims(const QueueOrderOptions& options,
                                            const std::vector<const Task*>& live,
                                            int64_t total_gpus, TimeMs now) {
  // (not protected by the quantum, higher priority first, queue key)
  using WalkKey = std::tuple<bool, int64_t, QueueKey>;
  std::vector<std::pair<WalkKey, const Task*>> order;
  order.reserve(live.size());
  for (const Task* t : live) {
    if (IsTerminal(t->state)) continue;
    const bool active = t->state == TaskState::kAssigned || t->state == TaskState::kRunning;
    const bool protected_run =
        active && (!t->spec.preemptible || now - t->assigned_ms < options.quantum_ms);
    order.emplace_back(WalkKey{!protected_run, -t->priority,
                               MakeQueueKey(options, *t, AttainedMs(*t, now))},
                       t);
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
