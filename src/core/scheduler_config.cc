#include "core/scheduler_config.h"

#include <string>

#include "base/units.h"

namespace gpusched::core {

void SchedulerConfig::TakeLiveFields(const SchedulerConfig& from) {
  t1_ms = from.t1_ms;
  t2_ms = from.t2_ms;
  node_timeout_ms = from.node_timeout_ms;
  node_lost_after_ms = from.node_lost_after_ms;
  task_timeout_ms = from.task_timeout_ms;
  max_placement_failures = from.max_placement_failures;
}

Status SchedulerConfig::Validate() const {
  GS_RETURN_IF_ERROR(scoring.Validate());
  GS_RETURN_IF_ERROR(queue_order.Validate());
  GS_RETURN_IF_ERROR(fair_share.Validate());
  auto positive = [](const char* field, int64_t v) {
    return v > 0 ? Status::Ok()
                 : InvalidArgument(std::string(field) + ": must be > 0, got " + std::to_string(v));
  };
  GS_RETURN_IF_ERROR(positive("t1", t1_ms));
  GS_RETURN_IF_ERROR(positive("t2", t2_ms));
  GS_RETURN_IF_ERROR(positive("node_timeout", node_timeout_ms));
  GS_RETURN_IF_ERROR(positive("task_timeout", task_timeout_ms));
  if (node_lost_after_ms < node_timeout_ms) {
    return InvalidArgument("node_lost_after: " + FormatDurationMs(node_lost_after_ms) +
                           " must not be shorter than node_timeout " +
                           FormatDurationMs(node_timeout_ms));
  }
  GS_RETURN_IF_ERROR(positive("default_duration", default_duration_ms));
  GS_RETURN_IF_ERROR(positive("max_placement_failures", max_placement_failures));
  if (memory_retry_growth_percent < 0) {
    return InvalidArgument("memory_retry_growth_percent: must be >= 0, got " +
                           std::to_string(memory_retry_growth_percent));
  }
  if (fail_max < 0) {
    return InvalidArgument("fail_max: must be >= 0, got " + std::to_string(fail_max));
  }
  if (max_priority_value < 1) {
    return InvalidArgument("max_priority_value: must be >= 1, got " +
                           std::to_string(max_priority_value));
  }
  if (placement.parallel_chunks < 1) return InvalidArgument("parallel_chunks: must be >= 1");
  for (int s = 0; s < kNumScorers; ++s) {
    if (placement.weights.weight[s] < 0) {
      return InvalidArgument(std::string("weights.") + ScorerName(s) + ": must be >= 0");
    }
  }
  GS_RETURN_IF_ERROR(positive("gang_timeout", gang_timeout_ms));
  if (preemption_grace_ms < 0) {
    return InvalidArgument("preemption_grace: must be >= 0, got " +
                           std::to_string(preemption_grace_ms));
  }
  for (size_t i = 0; i < priority_classes.size(); ++i) {
    const std::string& name = priority_classes[i].name;
    if (name.empty()) return InvalidArgument("priority_classes: a class has no name");
    for (size_t j = 0; j < i; ++j) {
      if (priority_classes[j].name == name) {
        return InvalidArgument("priority_classes: \"" + name + "\" named twice");
      }
    }
  }
  if (!PriorityOf(default_priority_class)) {
    return InvalidArgument("default_priority_class: \"" + default_priority_class +
                           "\" is not one of priority_classes");
  }
  if (!priority_grants.default_max.empty() && !PriorityOf(priority_grants.default_max)) {
    return InvalidArgument("default_max_priority: \"" + priority_grants.default_max +
                           "\" is not one of priority_classes");
  }
  for (const auto& [team, name] : priority_grants.teams) {
    if (name.empty() || !PriorityOf(name)) {
      return InvalidArgument("priority_grants." + team + ": \"" + name +
                             "\" is not one of priority_classes");
    }
  }
  return Status::Ok();
}

std::optional<int64_t> SchedulerConfig::PriorityOf(const std::string& name) const {
  const std::string& n = name.empty() ? default_priority_class : name;
  for (const PriorityClass& c : priority_classes) {
    if (c.name == n) return c.value;
  }
  return std::nullopt;
}

}  // namespace gpusched::core
