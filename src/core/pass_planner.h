#pragma once
// PassPlanner: the dispatch pass's planner (issue 40), apart from the Scheduler that applies
// its plan (Scheduler::CommitPlan). Over a const view of the scheduler (the queues, the task
// table, the state table through its ResourceManager, the team ledger and the reservation)
// it walks Q as a pass would and returns the PassPlan; it changes nothing the scheduler
// shows. Scheduler::PlanPass() is PassPlanner(*this).Plan().
//
// The view holds references: a planner is valid while its scheduler lives, and plans the
// scheduler's state as it is when Plan() is called. Not to be used by two threads at once,
// nor two planners of one scheduler at once: the plan's copies of the state table reuse the
// buffers the scheduler keeps between passes.

#include <array>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/scheduler.h"

namespace gpusched::core {

class PassPlanner {
 public:
  explicit PassPlanner(const Scheduler& scheduler);

  // The pass Scheduler::Schedule() would make now (Scheduler::PlanPass()).
  PassPlan Plan() const;

 private:
  using Shape = RequestShape;
  // A request shape that found no node in a pass: the report and the reason its tasks share,
  // and the plan's verdicts (PassPlan::verdicts) its refreshes refer to, one per variant of
  // what the reservation says of a task (no time limit, or one): -1 until the first refresh.
  struct FailedShape {
    PlacementReport report;
    std::string reason;
    std::array<int32_t, 2> verdicts{-1, -1};
  };
  // A pass's memo of request shapes that found no node.
  using FailedShapes = std::map<Shape, FailedShape>;
  struct Planning;  // a pass being planned: the plan and its view of the state table

  // ---- what the planner reads of the scheduler ----
  const Task* GetTask(TaskId id) const { return scheduler_.GetTask(id); }
  ResourceRequest MakeRequest(const Task& t) const { return scheduler_.MakeRequest(t); }
  bool MayPreemptByPriority(const Task& t) const { return scheduler_.MayPreemptByPriority(t); }
  Shape ShapeOf(const ResourceRequest& req) const { return scheduler_.ShapeOf(req); }
  std::vector<QueueKey> PassSnapshot(bool release_pass) const {
    return scheduler_.PassSnapshot(release_pass);
  }
  MiB TaskGpuMemMib(const Task& t) const { return scheduler_.TaskGpuMemMib(t); }
  int64_t PreemptingPriority(const Task& t) const { return scheduler_.PreemptingPriority(t); }
  static const Placement* PlacementOn(const Task& t, size_t index) {
    return Scheduler::PlacementOn(t, index);
  }

  // ---- the pass (pass_planner.cc) ----
  // One placement attempt inside a plan. Returns false when the task did not fit (head-of-line
  // blocking stops there). `reclaim`: a within-guarantee task may stop borrowers' tasks.
  bool PlanPlace(const Task& t, Planning& p, bool reclaim) const;
  // PlanPlace's answer when `t` did not fit: a kWait step with the reason, remembered in
  // `memo` (null: not memoised), and the reservation a wide task plans.
  void PlanWait(const Task& t, const ResourceRequest& req, PlacementResult result,
                FailedShapes* memo, bool blocked, bool reclaim, Planning& p) const;
  // Issue 43: `t` waits in FQ and a release pass's memo answered it (`failed`): the index of
  // its verdict in the plan, made once per shape, view and reservation variant.
  uint32_t VerdictOf(FailedShape& failed, const Task& t, bool blocked, Planning& p) const;
  // Plan under team quotas: the tasks within their guarantee, then the borrowers.
  void PlanWithQuotas(const std::vector<QueueKey>& snapshot, Planning& p) const;
  // A flush pass with parked groups: the Q snapshot and each group's tasks merged in Q order,
  // a group's tasks visited only while they are placed.
  void PlanWithParked(const std::vector<QueueKey>& snapshot, Planning& p) const;
  // Plans stopping the newest tasks of borrowing teams until `t` fits, then places it. False
  // (nothing planned) when no such set of tasks makes room.
  bool PlanReclaim(const Task& t, const ResourceRequest& r, Planning& p) const;
  // A gang: all ranks on distinct nodes of the plan's view, or none (and a reservation).
  bool PlanGang(const Task& t, Planning& p) const;
  // All `nodes` ranks of `req` on distinct nodes of `view`; false with the reason otherwise.
  // `view` is tried on and left as it was.
  bool PlaceGangOn(ClusterState& view, const ResourceRequest& req, int64_t nodes,
                   std::vector<Placement>* ranks, PlacementReport* report,
                   std::string* why) const;
  // The GPUs a waiting wide task or gang should hold and when it could start on them, from
  // the known ends of the active tasks and of the plan's own assignments (core/backfill.h).
  std::optional<Reservation> PlanReservation(const Task& t, const ResourceRequest& req,
                                             const Planning& p) const;
  // Whether `t` may use the reserved GPUs this pass (the holder, or its time limit ends
  // before the planned start).
  bool CanBackfill(const Task& t, const Planning& p) const;
  // After `t` (wide or a gang) did not fit: when it is the first such task of the pass (or
  // holds the reservation), plans its reservation anew; `reason` gains what `why` says of it.
  void PlanHold(const Task& t, const ResourceRequest& req, Planning& p,
                std::string& reason) const;
  // Whether `t` would plan a reservation if it did not fit now.
  bool WouldReserve(const Task& t, const Planning& p) const;
  // The reservation holder waits in FQ: a pass that would not otherwise visit it tries it
  // first, so it starts as soon as its GPUs are free, not at the next t2.
  void PlanHolderFirst(Planning& p) const;
  // Plans stopping lower-priority preemptible tasks (a gang counts whole) until `t` fits.
  bool PlanPreempt(const Task& t, const ResourceRequest& req, Planning& p) const;
  struct PreemptCandidate;  // an active task PlanPreempt may stop (pass_planner.cc)
  struct VictimSet;         // candidates whose stop makes a request fit on one node
  // The active preemptible tasks below `t`'s preempting priority, not stopped by the plan;
  // `on_node` gains each one's index under every node it holds a rank on.
  std::vector<PreemptCandidate> PreemptCandidates(
      const Task& t, const Planning& p, std::vector<std::vector<size_t>>& on_node) const;
  // The cheapest subset of `here` (candidate indices on node `i`, the first 12 tried) whose
  // stop makes `shape` fit on node `i` of `view`; nullopt: none does.
  std::optional<VictimSet> CheapestVictimsOn(const ClusterState& view, size_t i,
                                             const PlacementRequest& shape,
                                             const std::vector<PreemptCandidate>& cands,
                                             const std::vector<size_t>& here) const;
  // Stops `victims` in the plan and places `t` (every rank) where they were; false (nothing
  // planned) when it still does not fit.
  bool PlanPreemptStep(const Task& t, const ResourceRequest& req,
                       const std::vector<const Task*>& victims, bool blocked,
                       Planning& p) const;

  // The view: the scheduler's parts, read only (the names the planning code has always used).
  const Scheduler& scheduler_;
  const SchedulerConfig& config_;
  const Clock& clock_;
  const ResourceManager& resources_;
  const TaskTable& tasks_;
  const TeamLedger& ledger_;
  const ParkedQueue& parked_;
  const std::optional<Reservation>& reservation_;
  const bool& flush_pass_due_;
  const bool& capacity_event_;
  const std::unordered_set<TaskId>& fq_capacity_;
  // The plan's copies of the state table: the scheduler's buffers, reused pass after pass.
  ClusterState& plan_view_buffer_;
  ClusterState& plan_blocked_buffer_;
};

}  // namespace gpusched::core
