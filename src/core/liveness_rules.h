#pragma once
// LivenessRules: what the heartbeats say (CN109992422A claims 5-8, issue 37; issue 40).
// From the timeouts of the config and a read-only view of the nodes and tasks, it returns
// verdicts: nodes to mark unavailable, nodes to lose (with their reason), tasks to reclaim
// for their silence or their hang, tasks past their time limit. It changes neither nodes nor
// tasks: the Scheduler applies the verdicts (README.md, "Node loss"). It keeps the two pieces
// of state the rules carry from one check to the next: the eviction hold, and the heartbeat
// floor that lets a check skip the scan of the active tasks.
//
// Thread-safety: none (owned by the Scheduler, which is single-threaded).

#include <algorithm>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/ids.h"
#include "base/units.h"
#include "core/node.h"
#include "core/scheduler_config.h"
#include "core/task.h"

namespace gpusched::core {

struct NodeVerdicts {
  // Available nodes silent past node_timeout, by index, ascending: no new task.
  std::vector<size_t> unavailable;
  // Nodes silent past node_lost_after, by index, ascending, with the reason their tasks fail
  // for (claim 6). Empty while evictions are held.
  struct Loss {
    size_t index = 0;
    std::string reason;
  };
  std::vector<Loss> lost;
};

// A task whose resources are taken back (claims 7-8) or that ran out of time, and why.
struct TaskVerdict {
  TaskId id;
  std::string reason;
};

class LivenessRules {
 public:
  // `config` (node_timeout_ms, node_lost_after_ms, task_timeout_ms, read at every check so
  // that a live reload applies) must outlive the rules.
  explicit LivenessRules(const SchedulerConfig& config) : config_(config) {}
  LivenessRules(const LivenessRules&) = delete;
  LivenessRules& operator=(const LivenessRules&) = delete;

  // Claims 5-6, patiently: `nodes` is the state table, by index. Also sets eviction_hold().
  // Scans only when NodeScanDue(now) (issue 43: the loop ticks on every batch of messages,
  // and a scan of 10,000 nodes on each was a tenth of the server's CPU); otherwise no node
  // is silent, so there is no verdict and no hold.
  NodeVerdicts CheckNodes(TimeMs now, std::span<const NodeState> nodes);
  // A node was heard from (registered) at `heard_ms`: keeps the node floor at or below every
  // node's last heartbeat. A heartbeat only moves a node's time later, which needs no call.
  void NodeHeardFrom(TimeMs heard_ms) { node_floor_ = std::min(node_floor_, heard_ms); }
  // Whether some node not lost may be silent past node_timeout at `now`.
  bool NodeScanDue(TimeMs now) const { return now - config_.node_timeout_ms > node_floor_; }
  // Why evictions are held ("" = they are not): more than half of the nodes not yet lost
  // fell silent within one node_timeout of each other (Kubernetes' full disruption). As of
  // the last CheckNodes.
  const std::string& eviction_hold() const { return eviction_hold_; }

  // An active task was heard from at `heard_ms` (assigned, started, heartbeat, adopted):
  // keeps the floor at or below every active task's last heartbeat. REQUIRES: called for
  // every such change, or a silent task may be missed.
  void HeardFrom(TimeMs heard_ms) { heartbeat_floor_ = std::min(heartbeat_floor_, heard_ms); }
  // Whether some active task may be silent past task_timeout at `now` (CheckTasks scans).
  bool TaskScanDue(TimeMs now) const { return now - config_.task_timeout_ms > heartbeat_floor_; }
  // Claims 7-8: the active tasks silent, or hung by their executor's account, past
  // task_timeout, in the order of `active`; those on an unavailable node are left to the
  // node rule. `active`: every active task (each with its placement); `nodes` as above.
  // Resets the floor to the oldest heartbeat of `active`. Nothing when !TaskScanDue(now).
  std::vector<TaskVerdict> CheckTasks(TimeMs now, std::span<const Task* const> active,
                                      std::span<const NodeState> nodes);
  // Slurm's --time: the tasks of `limited` (each with a time limit and a placement) that
  // have run past their limit since their assignment, in order.
  static std::vector<TaskVerdict> CheckTimeLimits(TimeMs now,
                                                  std::span<const Task* const> limited);
  // ForgiveSilence's rule: heard at `heard_ms` before a pause of `paused_ms`, counts as heard
  // that much later, at most `now`.
  static TimeMs Forgiven(TimeMs now, TimeMs heard_ms, DurationMs paused_ms);

 private:
  void UpdateEvictionHold(TimeMs now, std::span<const NodeState> nodes);
  std::string ReclaimReason(TimeMs now, const Task& t, const NodeState& n) const;

  const SchedulerConfig& config_;
  std::string eviction_hold_;
  // At most the last heartbeat of every active task (exact after each scan).
  TimeMs heartbeat_floor_ = std::numeric_limits<TimeMs>::max();
  // At most the last heartbeat of every node not lost (exact after each scan); the first
  // CheckNodes scans.
  TimeMs node_floor_ = std::numeric_limits<TimeMs>::min() / 2;
};

}  // namespace gpusched::core
