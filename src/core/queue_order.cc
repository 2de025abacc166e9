#include "core/queue_order.h"

#include <algorithm>
#include <cmath>
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
    case QueueOrder::kTwoDimLas: return "two-dim-las";
  }
  return "unknown";
}

namespace {
Status ValidateThresholds(const std::vector<int64_t>& th, const std::string& field) {
  for (size_t i = 0; i < th.size(); ++i) {
    if (th[i] <= 0 || (i > 0 && th[i] <= th[i - 1])) {
      return InvalidArgument("queue_order." + field + "[" + std::to_string(i) +
                             "]: must be > 0 and ascending, got " + std::to_string(th[i]) +
                             " GPU-ms");
    }
  }
  return Status::Ok();
}
}  // namespace

Status QueueOrderOptions::Validate() const {
  GS_RETURN_IF_ERROR(ValidateThresholds(las_thresholds_gpu_ms, "las_thresholds"));
  GS_RETURN_IF_ERROR(ValidateThresholds(dlas_thresholds_gpu_ms, "dlas_thresholds"));
  if (!(dlas_promote_knob >= 0 && dlas_promote_knob <= 1e6)) {  // NaN fails too
    return InvalidArgument("queue_order.dlas_promote_knob: must be in [0, 1e6], got " +
                           std::to_string(dlas_promote_knob));
  }
  if (quantum_ms < 0 || quantum_ms > 366LL * 24 * 3'600'000) {
    return InvalidArgument("queue_order.quantum: must be in [0, 366d], got " +
                           std::to_string(quantum_ms) + " ms");
  }
  return Status::Ok();
}

bool IsPreemptiveOrder(QueueOrder order) {
  return order == QueueOrder::kShortestRemaining || order == QueueOrder::kLeastAttained ||
         order == QueueOrder::kTwoDimLas;
}

DurationMs AttainedMs(const Task& t, TimeMs now) {
  const bool active = t.state == TaskState::kAssigned || t.state == TaskState::kRunning;
  return t.attained_ms + (active ? std::max<DurationMs>(0, now - t.assigned_ms) : 0);
}

int64_t AttainedGpuMs(const Task& t, DurationMs attained_ms) {
  return attained_ms * std::max<int64_t>(1, TotalGpus(t.spec));
}

int64_t LasServiceGpuMs(const Task& t, DurationMs attained_ms) {
  return AttainedGpuMs(t, std::max<DurationMs>(0, attained_ms - t.las_base_ms));
}

const std::vector<int64_t>& LasThresholds(const QueueOrderOptions& options) {
  return options.order == QueueOrder::kTwoDimLas ? options.dlas_thresholds_gpu_ms
                                                 : options.las_thresholds_gpu_ms;
}

int LasQueueIndex(const QueueOrderOptions& options, int64_t attained_gpu_ms) {
  const auto& th = LasThresholds(options);
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
    case QueueOrder::kTwoDimLas: {
      // Inside a queue the tasks holding GPUs go first (Tiresias); Q holds only pending ones.
      const bool active = t.state == TaskState::kAssigned || t.state == TaskState::kRunning;
      key.rank = 2 * int64_t{LasQueueIndex(options, LasServiceGpuMs(t, attained_ms))} +
                 (active ? 0 : 1);
      break;
    }
  }
  return key;
}

std::optional<TimeMs> PromotionDueMs(const QueueOrderOptions& options, const Task& t) {
  if (options.order != QueueOrder::kTwoDimLas || options.dlas_promote_knob <= 0 ||
      !IsPending(t.state)) {
    return std::nullopt;
  }
  const DurationMs executed = t.attained_ms - t.las_base_ms;
  if (executed <= 0) return std::nullopt;
  const double wait_ms = std::ceil(options.dlas_promote_knob * static_cast<double>(executed));
  return t.released_ms + static_cast<DurationMs>(wait_ms);
}

}  // namespace gpusched::core
