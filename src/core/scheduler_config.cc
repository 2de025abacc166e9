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

namespace {

Status Positive(const char* field, int64_t v) {
  return v > 0 ? Status::Ok()
               : InvalidArgument(std::string(field) + ": must be > 0, got " + std::to_string(v));
}

// The periods and timeouts (t1, t2, liveness), in the order Validate reports them.
Status ValidateDurations(const SchedulerConfig& c) {
  GS_RETURN_IF_ERROR(Positive("t1", c.t1_ms));
  GS_RETURN_IF_ERROR(Positive("t2", c.t2_ms));
  GS_RETURN_IF_ERROR(Positive("node_timeout", c.node_timeout_ms));
  GS_RETURN_IF_ERROR(Positive("task_timeout", c.task_timeout_ms));
  if (c.node_lost_after_ms < c.node_timeout_ms) {
    return InvalidArgument("node_lost_after: " + FormatDurationMs(c.node_lost_after_ms) +
                           " must not be shorter than node_timeout " +
                           FormatDurationMs(c.node_timeout_ms));
  }
  return Positive("default_duration", c.default_duration_ms);
}

// Retry limits, placement knobs, gangs and preemption.
Status ValidateLimits(const SchedulerConfig& c) {
  GS_RETURN_IF_ERROR(Positive("max_placement_failures", c.max_placement_failures));
  if (c.memory_retry_growth_percent < 0) {
    return InvalidArgument("memory_retry_growth_percent: must be >= 0, got " +
                           std::to_string(c.memory_retry_growth_percent));
  }
  if (c.fail_max < 0) {
    return InvalidArgument("fail_max: must be >= 0, got " + std::to_string(c.fail_max));
  }
  if (c.max_priority_value < 1) {
    return InvalidArgument("max_priority_value: must be >= 1, got " +
                           std::to_string(c.max_priority_value));
  }
  if (c.placement.parallel_chunks < 1) return InvalidArgument("parallel_chunks: must be >= 1");
  for (int s = 0; s < kNumScorers; ++s) {
    if (c.placement.weights.weight[s] < 0) {
      return InvalidArgument(std::string("weights.") + ScorerName(s) + ": must be >= 0");
    }
  }
  GS_RETURN_IF_ERROR(Positive("gang_timeout", c.gang_timeout_ms));
  if (c.preemption_grace_ms < 0) {
    return InvalidArgument("preemption_grace: must be >= 0, got " +
                           std::to_string(c.preemption_grace_ms));
  }
  return Status::Ok();
}

// Priority classes: named, once each; the default class and every grant name one of them.
Status ValidatePriorityClasses(const SchedulerConfig& c) {
  for (size_t i = 0; i < c.priority_classes.size(); ++i) {
    const std::string& name = c.priority_classes[i].name;
    if (name.empty()) return InvalidArgument("priority_classes: a class has no name");
    for (size_t j = 0; j < i; ++j) {
      if (c.priority_classes[j].name == name) {
        return InvalidArgument("priority_classes: \"" + name + "\" named twice");
      }
    }
  }
  if (!c.PriorityOf(c.default_priority_class)) {
    return InvalidArgument("default_priority_class: \"" + c.default_priority_class +
                           "\" is not one of priority_classes");
  }
  const SchedulerConfig::PriorityGrants& grants = c.priority_grants;
  if (!grants.default_max.empty() && !c.PriorityOf(grants.default_max)) {
    return InvalidArgument("default_max_priority: \"" + grants.default_max +
                           "\" is not one of priority_classes");
  }
  for (const auto& [team, name] : grants.teams) {
    if (name.empty() || !c.PriorityOf(name)) {
      return InvalidArgument("priority_grants." + team + ": \"" + name +
                             "\" is not one of priority_classes");
    }
  }
  return Status::Ok();
}

}  // namespace

Status SchedulerConfig::Validate() const {
  GS_RETURN_IF_ERROR(scoring.Validate());
  GS_RETURN_IF_ERROR(queue_order.Validate());
  GS_RETURN_IF_ERROR(fair_share.Validate());
  GS_RETURN_IF_ERROR(ValidateDurations(*this));
  GS_RETURN_IF_ERROR(ValidateLimits(*this));
  return ValidatePriorityClasses(*this);
}

std::optional<int64_t> SchedulerConfig::PriorityOf(const std::string& name) const {
  const std::string& n = name.empty() ? default_priority_class : name;
  for (const PriorityClass& c : priority_classes) {
    if (c.name == n) return c.value;
  }
  return std::nullopt;
}

}  // namespace gpusched::core
