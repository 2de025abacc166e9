#include "core/queue_order.h"

#include <algorithm>
#include <limits>
#include <string>

namespace gpusched::core {
namespace {
constexpr int64_t kUnknownDuration = std::numeric_limits<int64_t>::max();
}  // namespace

const char* QueueOrderName(QueueOrder order) {
  switch (order) {
    case QueueOrder::kPriority: return "priority";
    case QueueOrder::kSubmission: return "submission";
    case QueueOrder::kShortestDuration: return "shortest-duration";
    case QueueOrder::kShortestRemaining: return "shortest-remaining";
    case QueueOrder::kLeastAttained: return "least-attained";
  }
  return "unknown";
}

Status QueueOrderOptions::Validate() const {
  for (size_t i = 0; i < las_thresholds_gpu_ms.size(); ++i) {
    const int64_t v = las_thresholds_gpu_ms[i];
    if (v <= 0 || (i > 0 && v <= las_thresholds_gpu_ms[i - 1])) {
      return InvalidArgument("queue_order.las_thresholds[" + std::to_string(i) +
                             "]: must be > 0 and ascending, got " + std::to_string(v) + " GPU-ms");
    }
  }
  return Status::Ok();
}

DurationMs AttainedMs(const Task& t, TimeMs now) {
  const bool active = t.state == TaskState::kAssigned || t.state == TaskState::kRunning;
  return t.attained_ms + (active ? std::max<DurationMs>(0, now - t.assigned_ms) : 0);
}

int64_t AttainedGpuMs(const Task& t, DurationMs attained_ms) {
  return attained_ms * std::max<int64_t>(1, t.spec.gpus);
}

int LasQueueIndex(const QueueOrderOptions& options, int64_t attained_gpu_ms) {
  const auto& th = options.las_thresholds_gpu_ms;
  return static_cast<int>(std::upper_bound(th.begin(), th.end(), attained_gpu_ms) - th.begin());
}

QueueKey MakeQueueKey(const QueueOrderOptions& options, const Task& t, DurationMs attained_ms) {
  QueueKey key{t.pt, t.seq, t.id, 0};
  if (options.order == QueueOrder::kPriority) return key;
  key.pt = 0;  // the baselines ignore the CN115981827A priority
  const int64_t duration = t.spec.duration_ms.value_or(kUnknownDuration);
  switch (options.order) {
    case QueueOrder::kPriority:
    case QueueOrder::kSubmission:
      break;
    case QueueOrder::kShortestDuration:
      key.rank = duration;
      break;
    case QueueOrder::kShortestRemaining:
      key.rank = duration == kUnknownDuration ? duration
                                              : std::max<int64_t>(0, duration - attained_ms);
      break;
    case QueueOrder::kLeastAttained:
      key.rank = LasQueueIndex(options, AttainedGpuMs(t, attained_ms));
      break;
  }
  return key;
}

}  // namespace gpusched::core
