// CN109992422A: GPU-memory placement, shared GPUs, preset principles, heartbeats and reclaim
// (PATENTS.md section 2 tests 2-6).

#include <gtest/gtest.h>

#include "core/testing/scheduler_fixture.h"

namespace gpusched::core {
namespace {

using testing::kGiB;
using testing::MakeNode;
using testing::SchedulerTest;
using testing::SharedTask;
using testing::WholeGpuTask;

class CN109992422ATest : public SchedulerTest {
 protected:
  void UseLoadBalance() {
    SchedulerConfig config;
    config.placement.node_order = NodeOrder::kLoadBalance;
    config.capacity_wait = CapacityWait::kStayQueued;
    Init(config);
  }
};

// PATENTS.md section 2 test 2, with the loads built by pinned tasks: S1 runs 3 tasks and S2
// runs 2 (so that S2's two GPUs can sit at 50 % and 20 %); S2's GPU0 is 40 GiB and its GPU1
// 10 GiB, so that GPU1 can lack memory while GPU0 has it.
TEST_F(CN109992422ATest, Claim4_LeastLoadedServerThenLeastOccupiedGpu) {
  UseLoadBalance();
  NodeSpec s1 = MakeNode("S1", 2, 40 * kGiB);
  s1.labels = {{"name", "S1"}};
  NodeSpec s2 = MakeNode("S2", 2, 40 * kGiB);
  s2.gpus[1].total_mib = 10 * kGiB;
  s2.labels = {{"name", "S2"}};
  AddNode(s1);
  AddNode(s2);
  auto pinned = [&](const std::string& node, MiB mib) {
    TaskSpec t = SharedTask(mib);
    t.node_selector = {{"name", node}};
    const TaskId id = Submit(t);
    sched_->Schedule();
    EXPECT_EQ(T(id).placement->node, node);
    return id;
  };
  for (int i = 0; i < 3; ++i) pinned("S1", kGiB);
  const TaskId half = pinned("S2", 20 * kGiB);  // GPU0: 20/40 = 50 %
  EXPECT_EQ(T(half).placement->gpus, std::vector<int>{0});
  const TaskId fifth = pinned("S2", 2 * kGiB);   // (20+2)/40 = 55 % vs 2/10 = 20 % -> GPU1
  EXPECT_EQ(T(fifth).placement->gpus, std::vector<int>{1});

  // S1 runs 3, S2 runs 2 -> S2; inside S2, GPU1 (20 %) before GPU0 (50 %).
  const TaskId next = Submit(SharedTask(kGiB));
  sched_->Schedule();
  EXPECT_EQ(T(next).placement->node, "S2");
  EXPECT_EQ(T(next).placement->gpus, std::vector<int>{1});

  // S1 gets a 4th task; S2 runs 3. A 12 GiB task: GPU1 has 7 GiB free -> GPU0.
  pinned("S1", kGiB);
  const TaskId big = Submit(SharedTask(12 * kGiB));
  sched_->Schedule();
  EXPECT_EQ(T(big).placement->node, "S2");
  EXPECT_EQ(T(big).placement->gpus, std::vector<int>{0});
  EXPECT_EQ(T(big).last_report.breakdown[0].name, "RunningTasks");
  ExpectInvariants();
}

// CN109992422A claim 4, third preset principle (satisfaction of the remaining memory):
// a task is admitted only where one GPU holds all of its request, and the final tie-break is
// best fit, which keeps the large hole for a later large task. GPU0 is 20 GiB, GPU1 40 GiB;
// with 10 GiB already on GPU1 a second 10 GiB task puts both GPUs at 50 % (a tie of the
// occupancy principle), so best fit decides: GPU0 (10 GiB left) and not GPU1 (20 left),
// and a 25 GiB task then still fits GPU1. Worst fit would leave 20 + 20 and strand it.
TEST_F(CN109992422ATest, Claim4_SatisfactionPrincipleKeepsTheLargeHoleAndNeverSplitsARequest) {
  SchedulerConfig config;
  config.capacity_wait = CapacityWait::kStayQueued;
  Init(config);
  NodeSpec s = MakeNode("S", 2, 20 * kGiB);
  s.gpus[1].total_mib = 40 * kGiB;
  AddNode(s);
  const TaskId first = Submit(SharedTask(10 * kGiB));
  sched_->Schedule();
  ASSERT_EQ(T(first).placement->gpus, std::vector<int>{1});  // 25 % beats 50 %
  const TaskId tie = Submit(SharedTask(10 * kGiB));
  sched_->Schedule();
  EXPECT_EQ(T(tie).placement->gpus, std::vector<int>{0}) << "best fit breaks the 50 % tie";
  const TaskId large = Submit(SharedTask(25 * kGiB));
  sched_->Schedule();
  ASSERT_TRUE(T(large).placement.has_value()) << T(large).last_report_summary;
  EXPECT_EQ(T(large).placement->gpus, std::vector<int>{1});

  // Free now: GPU0 10 GiB, GPU1 5 GiB; 15 GiB in all, but no one GPU holds 12 GiB.
  const TaskId split = Submit(SharedTask(12 * kGiB));
  sched_->Schedule();
  EXPECT_EQ(T(split).state, TaskState::kPending);
  EXPECT_NE(T(split).last_report_summary.find("1 insufficient GPU memory"), std::string::npos)
      << T(split).last_report_summary;
  // The 10 GiB share on GPU0 ends: GPU0 has 20 GiB free and the waiting task gets it whole.
  StartAssigned();
  ASSERT_TRUE(sched_->TaskFinished(tie, T(tie).attempts, 0, 0).ok());
  sched_->Schedule();
  ASSERT_TRUE(T(split).placement.has_value()) << T(split).last_report_summary;
  EXPECT_EQ(T(split).placement->gpus, std::vector<int>{0});
  EXPECT_EQ(T(split).placement->gpu_mem_mib, std::vector<MiB>{12 * kGiB});
  ExpectInvariants();
}

TEST_F(CN109992422ATest, Claim3_GpuWithoutMemoryFallsBackToTheOther) {
  AddNode(MakeNode("S", 2, 10 * kGiB));
  // GPU0 at 50 %, GPU1 at 80 %.
  const TaskId a = Submit(SharedTask(5 * kGiB));
  sched_->Schedule();
  ASSERT_EQ(T(a).placement->gpus, std::vector<int>{0});
  const TaskId b = Submit(SharedTask(8 * kGiB));
  sched_->Schedule();
  ASSERT_EQ(T(b).placement->gpus, std::vector<int>{1});
  // 4 GiB: GPU1 (2 free) lacks the memory -> GPU0.
  const TaskId c = Submit(SharedTask(4 * kGiB));
  sched_->Schedule();
  EXPECT_EQ(T(c).placement->gpus, std::vector<int>{0});
}

TEST_F(CN109992422ATest, Claim2_TwoTasksShareOneGpuAndTheThirdWaits) {
  AddNode(MakeNode("n1", 1, 16 * kGiB));
  const TaskId a = Submit(SharedTask(6 * kGiB));
  const TaskId b = Submit(SharedTask(6 * kGiB));
  const TaskId c = Submit(SharedTask(6 * kGiB));
  EXPECT_EQ(sched_->Schedule(), 2u);
  EXPECT_EQ(T(a).placement->gpus, std::vector<int>{0});
  EXPECT_EQ(T(b).placement->gpus, std::vector<int>{0});
  EXPECT_EQ(T(c).state, TaskState::kPending);
  EXPECT_EQ(sched_->cluster().node(0).gpus[0].allocated_mib, 12 * kGiB);
  EXPECT_EQ(sched_->cluster().node(0).gpus[0].tasks, 2);
  EXPECT_NE(T(c).last_report_summary.find("1 insufficient GPU memory"), std::string::npos);
}

TEST_F(CN109992422ATest, Claim2_WholeGpuTasksAreExclusiveAndMultiGpuGetsDistinctGpus) {
  AddNode(MakeNode("n1", 4, 16 * kGiB));
  const TaskId shared = Submit(SharedTask(kGiB));
  sched_->Schedule();
  const TaskId whole = Submit(WholeGpuTask(3));
  sched_->Schedule();
  ASSERT_TRUE(T(whole).placement.has_value());
  const auto& g = T(whole).placement->gpus;
  EXPECT_EQ(g.size(), 3u);
  for (int gpu : g) EXPECT_NE(gpu, T(shared).placement->gpus[0]);  // never a shared GPU
  EXPECT_EQ(T(whole).placement->gpu_mem_mib, (std::vector<MiB>{16 * kGiB, 16 * kGiB, 16 * kGiB}));
  // Every GPU is now taken or full: another whole GPU waits, a small share still fits GPU0.
  const TaskId more = Submit(WholeGpuTask(1));
  const TaskId small = Submit(SharedTask(kGiB));
  sched_->Schedule();
  EXPECT_EQ(T(more).state, TaskState::kPending);
  EXPECT_EQ(T(small).placement->gpus, T(shared).placement->gpus);
  ExpectInvariants();
}

TEST_F(CN109992422ATest, Claim5_SilentServerGetsNoTasksUntilItsNextHeartbeat) {
  AddNode(MakeNode("quiet", 1, 80 * kGiB));
  AddNode(MakeNode("loud", 1, 16 * kGiB));
  silent_node_.insert("quiet");
  AdvanceAlive(sched_->config().node_timeout_ms + 1000);
  sched_->Tick();
  EXPECT_FALSE(sched_->cluster().node(0).available);
  const TaskId a = Submit(SharedTask(kGiB));
  sched_->Tick();
  EXPECT_EQ(T(a).placement->node, "loud");
  EXPECT_EQ(T(a).last_report.rejected[kFilterAvailable], 1);
  // Claim 6 + [choice]: a server that sends a heartbeat again becomes available again.
  Heartbeat("quiet");
  const TaskId b = Submit(SharedTask(20 * kGiB));  // only "quiet" can fit it
  sched_->Tick();
  ASSERT_TRUE(T(b).placement.has_value());
  EXPECT_EQ(T(b).placement->node, "quiet");
}

TEST_F(CN109992422ATest, Claim8_SilentTaskIsReclaimedAndThePendingTaskPlaced) {
  SchedulerConfig config;
  config.capacity_wait = CapacityWait::kStayQueued;
  Init(config);
  AddNode(MakeNode("n1", 1, 16 * kGiB));
  const TaskId silent = Submit(SharedTask(12 * kGiB));
  sched_->Tick();
  StartAssigned();
  const TaskId waiting = Submit(SharedTask(12 * kGiB));
  sched_->Tick();
  EXPECT_EQ(T(waiting).state, TaskState::kPending);
  silent_task_.insert(silent);
  AdvanceAlive(config.task_timeout_ms + 1000);
  sched_->Tick();
  // The silent task's memory is reclaimed, a kill is sent, and the waiting task is placed.
  EXPECT_EQ(T(silent).state, TaskState::kPending);
  EXPECT_EQ(T(silent).fail_cnt, 1);
  bool recorded = false;
  for (const Transition& tr : T(silent).history) {
    recorded |= tr.reason.find("task heartbeat lost") != std::string::npos;
  }
  EXPECT_TRUE(recorded) << "the reclaim reason is in the task's history";
  auto actions = sched_->TakeActions();
  bool killed = false, assigned = false;
  for (const Action& a : actions) {
    killed |= a.kind == Action::Kind::kKill && a.task == silent;
    assigned |= a.kind == Action::Kind::kAssign && a.task == waiting;
  }
  EXPECT_TRUE(killed);
  EXPECT_TRUE(assigned);
  EXPECT_EQ(sched_->stats().tasks_reclaimed, 1);
  ExpectInvariants();
}

// Claims 7-8: the heartbeats of a task go on, but its executor says it is hung (every process
// stopped): after T_task it is reclaimed like a silent task, its GPU memory freed, a kill
// sent, and the pending task placed. One that runs again within T_task is kept.
TEST_F(CN109992422ATest, Claim8_HungTaskIsReclaimedAfterTTaskAndThePendingTaskPlaced) {
  SchedulerConfig config;
  config.capacity_wait = CapacityWait::kStayQueued;
  Init(config);
  AddNode(MakeNode("n1", 2, 16 * kGiB));
  const TaskId hung = Submit(SharedTask(12 * kGiB));
  const TaskId recovers = Submit(SharedTask(12 * kGiB));
  sched_->Tick();
  StartAssigned();
  const TaskId waiting = Submit(SharedTask(12 * kGiB));
  sched_->Tick();
  EXPECT_EQ(T(waiting).state, TaskState::kPending);
  const ExecutorReport stopped{ExecutorStatus::kStopped, "stopped: every process in state T"};
  hung_task_[hung] = stopped;
  hung_task_[recovers] = stopped;
  AdvanceAlive(config.task_timeout_ms - 1000);
  sched_->Tick();
  // Within T_task nothing is reclaimed; the status is recorded (claim 7).
  EXPECT_EQ(T(hung).state, TaskState::kRunning);
  EXPECT_EQ(T(hung).executor_status, ExecutorStatus::kStopped);
  EXPECT_EQ(T(hung).executor_detail, "stopped: every process in state T");
  EXPECT_EQ(T(hung).last_heartbeat_ms, 0);  // not seen alive since its start
  EXPECT_EQ(T(waiting).state, TaskState::kPending);
  hung_task_[recovers] = {ExecutorStatus::kRunning, ""};  // SIGCONT: alive again
  (void)sched_->TakeActions();
  AdvanceAlive(2000);
  sched_->Tick();
  EXPECT_EQ(T(recovers).state, TaskState::kRunning);
  EXPECT_EQ(T(recovers).executor_status, ExecutorStatus::kRunning);
  EXPECT_EQ(T(hung).state, TaskState::kPending);  // reclaimed, retried like a failed run
  EXPECT_EQ(T(hung).fail_cnt, 1);
  bool recorded = false;  // the reason is in its history (a later pass says why it waits)
  for (const Transition& tr : T(hung).history) {
    recorded |= tr.reason.find("task hung on n1: stopped: every process in state T (not seen "
                               "running for 31s)") != std::string::npos;
  }
  EXPECT_TRUE(recorded);
  bool killed = false, assigned = false;
  for (const Action& a : sched_->TakeActions()) {
    killed |= a.kind == Action::Kind::kKill && a.task == hung;
    assigned |= a.kind == Action::Kind::kAssign && a.task == waiting;
  }
  EXPECT_TRUE(killed);
  EXPECT_TRUE(assigned);
  // The hung task's GPU went to the waiting one: its 12 GiB are held once, not twice.
  ASSERT_TRUE(T(waiting).placement.has_value());
  const GpuState& gpu = sched_->cluster().node(0).gpus[T(waiting).placement->gpus[0]];
  EXPECT_EQ(gpu.allocated_mib, 12 * kGiB);
  EXPECT_EQ(gpu.tasks, 1);
  EXPECT_EQ(sched_->stats().tasks_reclaimed, 1);
  ExpectInvariants();
}

TEST_F(CN109992422ATest, Claim2_ReservationVisibleToTheNextRequestBeforeAnyHeartbeat) {
  AddNode(MakeNode("n1", 1, 16 * kGiB));
  AddNode(MakeNode("n2", 1, 16 * kGiB));
  const TaskId a = Submit(SharedTask(10 * kGiB));
  sched_->Schedule();
  const TaskId b = Submit(SharedTask(10 * kGiB));
  sched_->Schedule();  // no heartbeat in between
  EXPECT_NE(T(a).placement->node, T(b).placement->node);
}

// Claim 9: task management (admission: the memory table, the task table, Q) and resource
// management (the state table, placement) are separate; the first computes what a task needs,
// the second decides where it goes, and the pass commits exactly that answer.
TEST_F(CN109992422ATest, Claim9_TaskSideTakesTheMemoryFromTheTableResourceSidePicksTheGpu) {
  SchedulerConfig scan;
  scan.placement.index = false;  // a placement through the index counts only what it examined
  Init(scan);
  ASSERT_TRUE(sched_->memory_table().AddRow({{"classify", "resnet50", 32, 224, 224}, 5000}).ok());
  AddNode(MakeNode("small", 2, 4 * kGiB));  // no GPU of it holds 5000 MiB
  AddNode(MakeNode("big", 2, 16 * kGiB));
  TaskSpec spec;
  spec.profile = MemoryProfile{"classify", "resnet50", 32, 224, 224};  // no memory given
  const TaskId id = Submit(spec);

  StatusOr<ResourceRequest> request = sched_->RequestFor(id);
  ASSERT_TRUE(request.ok()) << request.status().ToString();
  EXPECT_EQ(request->task, id);
  EXPECT_EQ(request->shape.gpus, 1);
  EXPECT_EQ(request->shape.gpu_mem_mib, 5000);  // the table's row
  EXPECT_FALSE(request->shape.exclusive);

  const PlacementResult answer = sched_->resources().Answer(*request);
  ASSERT_EQ(answer.outcome, PlaceOutcome::kPlaced) << answer.reason;
  EXPECT_EQ(answer.placement.node, "big");
  EXPECT_EQ(answer.placement.gpu_mem_mib, std::vector<MiB>{5000});
  EXPECT_EQ(answer.report.rejected[kFilterGpuMemory], 1);  // "small"
  // Asking changed nothing: the state table holds no reservation yet.
  EXPECT_EQ(sched_->cluster().node(1).gpus[0].allocated_mib, 0);

  sched_->Schedule();
  ASSERT_TRUE(T(id).placement.has_value());
  EXPECT_EQ(T(id).placement->node, answer.placement.node);
  EXPECT_EQ(T(id).placement->gpus, answer.placement.gpus);
  EXPECT_EQ(sched_->resources().TasksOn(1), std::vector<TaskId>{id});  // t -> (s, g, req)
  EXPECT_EQ(sched_->cluster().node(1).gpus[static_cast<size_t>(answer.placement.gpus[0])]
                .allocated_mib,
            5000);
  EXPECT_EQ(sched_->RequestFor(id).status().code(), StatusCode::kFailedPrecondition);
}

// Claim 10: the resource request is a value task management sends; resource management
// answers it from the state table as heartbeats and reservations leave it.
TEST_F(CN109992422ATest, Claim10_TheSameRequestIsAnsweredFromTheStateTableAsItChanges) {
  SchedulerConfig config;
  config.capacity_wait = CapacityWait::kStayQueued;
  Init(config);
  AddNode(MakeNode("S1", 1, 16 * kGiB));
  const TaskId first = Submit(SharedTask(10 * kGiB));
  const TaskId second = Submit(SharedTask(10 * kGiB));
  const ResourceRequest request = *sched_->RequestFor(second);
  const ResourceManager& resources = sched_->resources();
  EXPECT_EQ(resources.Answer(request).outcome, PlaceOutcome::kPlaced);

  // The server falls silent past T_srv: the state table marks it unavailable.
  silent_node_.insert("S1");
  AdvanceAlive(sched_->config().node_timeout_ms + 1000);
  sched_->Tick();
  PlacementResult answer = resources.Answer(request);
  EXPECT_EQ(answer.outcome, PlaceOutcome::kRetryLater);
  EXPECT_EQ(answer.reason, "0/1 nodes fit: 1 unavailable (no heartbeat)");

  // Its next heartbeat makes it eligible again; the first task's reservation is in the table
  // before any heartbeat reports it, so the second request now waits for memory.
  silent_node_.clear();
  Heartbeat("S1");
  EXPECT_EQ(resources.Answer(request).outcome, PlaceOutcome::kPlaced);
  sched_->Schedule();
  ASSERT_TRUE(T(first).placement.has_value());
  EXPECT_FALSE(T(second).placement.has_value());
  answer = resources.Answer(request);
  EXPECT_EQ(answer.outcome, PlaceOutcome::kRetryLater);
  EXPECT_EQ(answer.reason, "0/1 nodes fit: 1 insufficient GPU memory");

  // More GPUs than any server has: infeasible, whatever is released.
  TaskSpec two = WholeGpuTask(2);
  two.keep_pending_if_infeasible = true;
  const TaskId wide = Submit(two);
  answer = resources.Answer(*sched_->RequestFor(wide));
  EXPECT_EQ(answer.outcome, PlaceOutcome::kInfeasible);
  EXPECT_EQ(answer.reason, "0/1 nodes fit: 1 too few GPUs");
}

}  // namespace
}  // namespace gpusched::core
