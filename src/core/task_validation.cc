#include "core/task_validation.h"

#include <string>

#include "base/units.h"
#include "core/node_rules.h"
#include "core/reserved_env.h"
#include "core/stop_signal.h"

namespace gpusched::core {
namespace {

Status Range(const char* field, int64_t value, int64_t lo, int64_t hi, const std::string& shown) {
  if (value < lo) {
    return InvalidArgument(std::string(field) + ": must be >= " + std::to_string(lo) + ", got " +
                           shown);
  }
  if (value > hi) {
    return InvalidArgument(std::string(field) + ": " + shown + " is larger than the limit " +
                           std::to_string(hi));
  }
  return Status::Ok();
}

std::string Mib(MiB v) { return std::to_string(v) + "MiB"; }

// A duration in [lo, hi] ms, both bounds said in the value's units ("must be >= 1s, got
// 500ms"; the bare number 1000 read as seconds).
Status DurationRange(const char* field, DurationMs value, DurationMs lo, DurationMs hi) {
  const std::string shown = std::to_string(value) + "ms";
  if (value < lo) {
    return InvalidArgument(std::string(field) + ": must be at least " + FormatDurationMs(lo) +
                           ", got " + shown);
  }
  if (value > hi) {
    return InvalidArgument(std::string(field) + ": " + shown + " is longer than the limit " +
                           FormatDurationMs(hi));
  }
  return Status::Ok();
}

}  // namespace

Status CheckSubmittedEnv(const TaskSpec& s) {
  for (const auto& [name, value] : s.env) {
    if (!IsReservedEnvName(name)) continue;
    return InvalidArgument("env: " + name + " is reserved for gpusched (every " +
                           std::string(kReservedEnvPrefix) +
                           "* name is the product's own); remove it from the task's "
                           "environment");
  }
  return Status::Ok();
}

namespace {

Status ValidateName(const std::string& name) {
  if (name.size() > kMaxNameLength) {
    return InvalidArgument("name: longer than " + std::to_string(kMaxNameLength) + " characters");
  }
  for (char c : name) {
    if (static_cast<unsigned char>(c) < 0x20) {
      return InvalidArgument("name: contains a control character");
    }
  }
  return Status::Ok();
}

// GPUs, GPU memory, CPU and RAM.
Status ValidateResources(const TaskSpec& s) {
  GS_RETURN_IF_ERROR(Range("gpus", s.gpus, 0, kMaxGpusPerTask, std::to_string(s.gpus)));
  GS_RETURN_IF_ERROR(Range("gpu_mem", s.gpu_mem_mib, 0, kMaxGpuMemMib, Mib(s.gpu_mem_mib)));
  GS_RETURN_IF_ERROR(Range("cpu", s.resources.cpu_milli, 0, kMaxCpuMilli,
                           std::to_string(s.resources.cpu_milli) + "m"));
  GS_RETURN_IF_ERROR(Range("mem", s.resources.mem_mib, 0, kMaxMemMib, Mib(s.resources.mem_mib)));
  return Status::Ok();
}

// Durations and retries.
Status ValidateTimes(const TaskSpec& s) {
  if (s.duration_ms) {
    GS_RETURN_IF_ERROR(DurationRange("duration", *s.duration_ms, 1, kMaxDurationMs));
  }
  if (s.time_limit_ms) {
    GS_RETURN_IF_ERROR(DurationRange("time", *s.time_limit_ms, 1, kMaxDurationMs));
  }
  if (s.heartbeat_timeout_ms) {
    // At least 1 s: the agent looks at the file once per task heartbeat.
    GS_RETURN_IF_ERROR(
        DurationRange("heartbeat_timeout", *s.heartbeat_timeout_ms, 1000, kMaxDurationMs));
  }
  if (s.max_retries) {
    GS_RETURN_IF_ERROR(
        Range("retries", *s.max_retries, 0, kMaxRetries, std::to_string(*s.max_retries)));
  }
  return Status::Ok();
}

Status ValidateProfile(const TaskSpec& s) {
  if (!s.profile) return Status::Ok();
  if (s.profile->model.empty()) return InvalidArgument("profile.model: must be set");
  GS_RETURN_IF_ERROR(Range("profile.batch", s.profile->batch, 1, 1'000'000,
                           std::to_string(s.profile->batch)));
  GS_RETURN_IF_ERROR(Range("profile.height", s.profile->height, 0, 1'000'000,
                           std::to_string(s.profile->height)));
  GS_RETURN_IF_ERROR(Range("profile.width", s.profile->width, 0, 1'000'000,
                           std::to_string(s.profile->width)));
  return Status::Ok();
}

// How the task is stopped, and how long a gang may hold a reservation.
Status ValidateStopping(const TaskSpec& s) {
  if (s.grace_ms) {
    GS_RETURN_IF_ERROR(DurationRange("grace", *s.grace_ms, 0, kMaxDurationMs));
  }
  if (s.stop_signal) GS_RETURN_IF_ERROR(CheckStopSignal(*s.stop_signal, "signal"));
  if (s.gang_timeout_ms) {
    GS_RETURN_IF_ERROR(DurationRange("gang_timeout", *s.gang_timeout_ms, 1, kMaxDurationMs));
  }
  return Status::Ok();
}

// Nodes of a gang and processes per node.
Status ValidateShape(const TaskSpec& s) {
  GS_RETURN_IF_ERROR(Range("nodes", s.nodes, 1, kMaxGangNodes, std::to_string(s.nodes)));
  if (s.nodes > 1 && s.gpus == 0 && s.gpu_mem_mib == 0 && !s.profile) {
    return InvalidArgument("nodes: " + std::to_string(s.nodes) +
                           " nodes need gpus >= 1 per node (a gang places GPUs)");
  }
  GS_RETURN_IF_ERROR(Range("tasks_per_node", s.tasks_per_node, 1, 64,
                           std::to_string(s.tasks_per_node)));
  if (s.tasks_per_node > 1 && (s.gpus == 0 || s.gpus % s.tasks_per_node != 0)) {
    return InvalidArgument("tasks_per_node: " + std::to_string(s.tasks_per_node) +
                           " processes must share " + std::to_string(s.gpus) +
                           " whole GPUs per node evenly (gpus a multiple of tasks_per_node)");
  }
  return Status::Ok();
}

// The rules of `--selector` and `--toleration` (node_rules.h), whatever the spec came from.
Status ValidateNodeRules(const TaskSpec& s) {
  for (const auto& [key, value] : s.node_selector) {
    GS_RETURN_IF_ERROR(ValidateLabel(key, value, "node_selector", key + "=" + value));
  }
  for (const Toleration& t : s.tolerations) {
    if (t.key.empty() && !t.exists) {
      return InvalidArgument("tolerations: an empty key needs operator Exists");
    }
    if (t.exists && !t.value.empty()) {
      return InvalidArgument("tolerations: operator Exists matches any value; drop value \"" +
                             t.value + "\" of key \"" + t.key + "\" or use operator Equal");
    }
    if (!t.key.empty()) {
      GS_RETURN_IF_ERROR(ValidateLabel(t.key, t.value, "tolerations", t.key + "=" + t.value));
    }
  }
  return Status::Ok();
}

}  // namespace

// The first field in error, the fields checked in this order.
Status ValidateTaskSpec(const TaskSpec& s) {
  GS_RETURN_IF_ERROR(ValidateName(s.name));
  GS_RETURN_IF_ERROR(ValidateResources(s));
  GS_RETURN_IF_ERROR(ValidateTimes(s));
  GS_RETURN_IF_ERROR(ValidateProfile(s));
  GS_RETURN_IF_ERROR(ValidateShape(s));
  GS_RETURN_IF_ERROR(ValidateStopping(s));
  return ValidateNodeRules(s);
}

}  // namespace gpusched::core
