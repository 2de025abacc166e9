#pragma once
// Issue 40: what ControlPlane's client-facing API answers, in core types only (no protobuf).
// The doors (ApiService, the REST API) turn them into gpusched.v1 messages (api_convert.h),
// so a gRPC answer and the REST JSON built from one view are the same as the protos the
// control plane returned before.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/units.h"
#include "core/memory_table.h"
#include "core/node.h"
#include "core/scheduler.h"
#include "core/task.h"

namespace gpusched::server {

// A task as a reader sees it.
struct TaskView {
  core::Task task;
  // Where it ran last: core drops a finished task's placement, `ls` still names its node.
  std::optional<core::Placement> last_placement;
  // A gang's nodes of its latest attempt in rank order, shown once it no longer holds them.
  std::vector<std::string> last_gang;
  // The state of its last durable record when its latest change is not durable yet and
  // differs from it: what a restart now would find, and what is shown (task.state is then
  // shown as the unstored state).
  std::optional<core::TaskState> stored_state;

  uint64_t id() const { return task.id.value(); }
  core::TaskState shown_state() const { return stored_state.value_or(task.state); }
};

// A node with its GPUs' model names and whether its agent is connected.
struct NodeView {
  core::NodeState node;
  std::vector<std::string> gpu_models;  // the model of node.gpus[i]
  bool connected = false;
};

struct ListPage {
  std::vector<TaskView> tasks;
  uint64_t next_after_id = 0;  // 0 = last page
};

// Read-only views for the REST API and the dashboard (control_plane_views.cc).
struct QueuedTask {
  TaskView task;
  std::string why;  // the one-line explanation of `gpusched why`
};
struct QueuesView {
  std::vector<QueuedTask> main, failure;  // Q in dispatch order, FQ in failure order
  size_t main_size = 0, failure_size = 0;  // whole queues (the vectors may be cut)
};
struct ClusterView {
  std::vector<NodeView> nodes;   // by name
  std::vector<TaskView> active;  // assigned or running, ascending id
};

// A team with a quota or a live task (`quota ls`).
struct TeamQuotaView {
  std::string team;
  core::TeamStatus status;
  // The highest priority class the team may submit now; set while grants are enforced.
  std::optional<std::string> granted_priority;
};

// What the GPU-memory table learned for one profile (`profile ls`, issue 36).
struct LearnedProfileView {
  std::string key;  // as `profile ls` prints it (spec::FormatProfileFlag)
  core::MemoryProfile profile;
  core::LearnedPeaks learned;
  std::optional<MiB> estimate_mib;  // the table's estimate for the profile; none without one
};

}  // namespace gpusched::server
