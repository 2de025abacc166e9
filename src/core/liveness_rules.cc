// LivenessRules: the verdicts of CN109992422A claims 5-8 (issue 37), applied by the Scheduler.

#include "core/liveness_rules.h"

#include <algorithm>
#include <limits>

namespace gpusched::core {

// Claims 5-6, patiently (issue 37): a node silent for more than T_srv (node_timeout) is
// unavailable, "unreachable": it gets no new task, and its tasks keep running and are not
// reclaimed for their own silence (CheckTasks). Only silent for more than node_lost_after is
// it lost: its tasks are failed and re-queued; unless evictions are held.
NodeVerdicts LivenessRules::CheckNodes(TimeMs now, std::span<const NodeState> nodes) {
  NodeVerdicts v;
  if (!NodeScanDue(now)) {
    eviction_hold_.clear();  // no node is silent
    return v;
  }
  std::vector<size_t> overdue;
  node_floor_ = std::numeric_limits<TimeMs>::max();
  for (size_t i = 0; i < nodes.size(); ++i) {
    const NodeState& n = nodes[i];
    if (!n.lost) node_floor_ = std::min(node_floor_, n.last_heartbeat_ms);
    const DurationMs silent = now - n.last_heartbeat_ms;
    if (n.lost || silent <= config_.node_timeout_ms) continue;
    if (n.available) v.unavailable.push_back(i);
    if (silent > config_.node_lost_after_ms) overdue.push_back(i);
  }
  UpdateEvictionHold(now, nodes);
  if (!eviction_hold_.empty()) return v;
  for (size_t i : overdue) {
    const NodeState& n = nodes[i];
    v.lost.push_back({i, "node " + n.name + " lost: no heartbeat for " +
                             FormatDurationMs(now - n.last_heartbeat_ms) + " (node_lost_after " +
                             FormatDurationMs(config_.node_lost_after_ms) + ")"});
  }
  return v;
}

// Kubernetes' node lifecycle controller stops evicting when a zone is fully disrupted: so
// many nodes silent at once point at the server's own network, or at something every node
// shares, not at the nodes. Here: more than half of the nodes not yet lost fell silent (past
// node_timeout) within one node_timeout of each other.
void LivenessRules::UpdateEvictionHold(TimeMs now, std::span<const NodeState> nodes) {
  std::vector<TimeMs> heard;  // last heartbeats of the silent nodes
  size_t total = 0;
  for (const NodeState& n : nodes) {
    if (n.lost) continue;
    ++total;
    if (now - n.last_heartbeat_ms > config_.node_timeout_ms) heard.push_back(n.last_heartbeat_ms);
  }
  std::sort(heard.begin(), heard.end());
  size_t most = 0;
  for (size_t lo = 0, hi = 0; hi < heard.size(); ++hi) {
    while (heard[hi] - heard[lo] > config_.node_timeout_ms) ++lo;
    most = std::max(most, hi - lo + 1);
  }
  eviction_hold_.clear();
  if (most * 2 > total) {
    eviction_hold_ = std::to_string(most) + " of " + std::to_string(total) +
                     " nodes fell silent within one node_timeout (" +
                     FormatDurationMs(config_.node_timeout_ms) +
                     "): their tasks are kept until fewer are silent";
  }
}

// CN109992422A claims 7-8: a task silent, or hung by its executor's account, for more than
// T_task has its resources reclaimed (killed on its node, retried like a failed execution).
std::vector<TaskVerdict> LivenessRules::CheckTasks(TimeMs now,
                                                   std::span<const Task* const> active,
                                                   std::span<const NodeState> nodes) {
  // No active task has been silent since before the floor: none can be silent for T_task yet
  // (a Tick every second of the simulator's months would otherwise visit every running task).
  std::vector<TaskVerdict> reclaim;
  if (!TaskScanDue(now)) return reclaim;
  TimeMs floor = std::numeric_limits<TimeMs>::max();
  for (const Task* t : active) {
    floor = std::min(floor, t->last_heartbeat_ms);
    if (now - t->last_heartbeat_ms <= config_.task_timeout_ms) continue;
    const NodeState& n = nodes[t->placement->node_index];
    if (!n.available) continue;  // the node rule handles it
    reclaim.push_back({t->id, ReclaimReason(now, *t, n)});
  }
  heartbeat_floor_ = floor;
  return reclaim;
}

std::string LivenessRules::ReclaimReason(TimeMs now, const Task& t, const NodeState& n) const {
  const std::string quiet = FormatDurationMs(now - t.last_heartbeat_ms);
  if (!IsHung(t.executor_status)) return "task heartbeat lost for " + quiet + " on " + n.name;
  return "task hung on " + n.name + ": " +
         (t.executor_detail.empty() ? ExecutorStatusName(t.executor_status)
                                    : t.executor_detail) +
         " (not seen running for " + quiet + ")";
}

// Slurm's --time: an attempt that runs past the task's limit is killed (SIGTERM, the kill
// grace, SIGKILL) and the task fails; a retry would only hit the same limit.
std::vector<TaskVerdict> LivenessRules::CheckTimeLimits(TimeMs now,
                                                        std::span<const Task* const> limited) {
  std::vector<TaskVerdict> over;
  for (const Task* t : limited) {
    if (now - t->assigned_ms <= *t->spec.time_limit_ms) continue;
    over.push_back({t->id, "time limit " + FormatDurationMs(*t->spec.time_limit_ms) +
                               " reached on " + t->placement->node});
  }
  return over;
}

TimeMs LivenessRules::Forgiven(TimeMs now, TimeMs heard_ms, DurationMs paused_ms) {
  return std::min(now, heard_ms + std::max<DurationMs>(paused_ms, 0));
}

}  // namespace gpusched::core
