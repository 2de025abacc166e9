// Backfill with reservations for wide tasks (issue 37; core/backfill.h), on the fake clock.

#include "core/backfill.h"

#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "core/testing/scheduler_fixture.h"

namespace gpusched::core {
namespace {

using testing::kGiB;
using testing::MakeNode;
using testing::WholeGpuTask;

// A 1-GPU task pinned to `node` (label name=NODE), with a time limit and/or an expected
// duration (0 = none).
TaskSpec OneGpuOn(const std::string& node, DurationMs time_limit_ms,
                  DurationMs expected_ms = 0) {
  TaskSpec t = WholeGpuTask(1);
  t.node_selector = {{"name", node}};
  if (time_limit_ms > 0) t.time_limit_ms = time_limit_ms;
  if (expected_ms > 0) t.duration_ms = expected_ms;
  return t;
}

TaskSpec Limited(int gpus, DurationMs time_limit_ms) {
  TaskSpec t = WholeGpuTask(gpus);
  t.time_limit_ms = time_limit_ms;
  return t;
}

class BackfillTest : public testing::SchedulerTest {
 protected:
  void SetUp() override {
    SchedulerConfig config;
    config.capacity_wait = CapacityWait::kStayQueued;
    Init(config);
    AddNodes();
  }
  void AddNodes() {
    for (const char* name : {"n0", "n1"}) {
      NodeSpec n = MakeNode(name, 4, 80 * kGiB);
      n.labels = {{"name", name}};
      AddNode(n);
    }
  }
  // Submits one task per entry and places it now; returns the ids in order.
  std::vector<TaskId> Fill(const std::vector<TaskSpec>& specs) {
    std::vector<TaskId> ids;
    for (const TaskSpec& s : specs) {
      ids.push_back(Submit(s));
      sched_->Schedule();
      StartAssigned();
      EXPECT_EQ(T(ids.back()).state, TaskState::kRunning);
    }
    return ids;
  }
  // Four 1-GPU tasks on each node with these time limits; returns n0's.
  std::vector<TaskId> FillNodes(DurationMs n0_limit_ms, DurationMs n1_limit_ms) {
    const std::vector<TaskId> n0 = Fill(std::vector<TaskSpec>(4, OneGpuOn("n0", n0_limit_ms)));
    Fill(std::vector<TaskSpec>(4, OneGpuOn("n1", n1_limit_ms)));
    return n0;
  }
  void Finish(TaskId id) { ASSERT_TRUE(sched_->TaskFinished(id, T(id).attempts, 0, 0).ok()); }
  TaskId Place(const TaskSpec& s) {
    const TaskId id = Submit(s);
    sched_->Schedule();
    StartAssigned();
    return id;
  }
  const std::string& Why(TaskId id) { return T(id).last_report_summary; }
  std::string ReservedNode() {
    const auto& r = sched_->reservation();
    return r && r->nodes.size() == 1 ? sched_->cluster().node(r->nodes[0].index).name : "";
  }
};

// The wide task reserves the node whose running tasks' time limits end first: n0's end at
// 10-16 s, n1's last one at 30 s; it plans to start at 16 s on n0, and `why` says so.
TEST_F(BackfillTest, Issue37_EarliestStartFromTimeLimits) {
  Fill({OneGpuOn("n0", 10'000), OneGpuOn("n0", 12'000), OneGpuOn("n0", 14'000),
        OneGpuOn("n0", 16'000), OneGpuOn("n1", 8'000), OneGpuOn("n1", 9'000),
        OneGpuOn("n1", 10'000), OneGpuOn("n1", 30'000)});
  clock_.AdvanceMs(1000);
  const TaskId wide = Place(WholeGpuTask(4));
  ASSERT_TRUE(sched_->reservation().has_value());
  EXPECT_EQ(sched_->reservation()->task, wide);
  EXPECT_EQ(sched_->reservation()->start_ms, 16'000);
  EXPECT_EQ(ReservedNode(), "n0");
  EXPECT_EQ(sched_->reservation()->nodes[0].gpus, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_NE(Why(wide).find("reserved 4 GPUs on n0 from ~15s (time limits of tasks 1, 2, 3, 4)"),
            std::string::npos)
      << Why(wide);
  ExpectInvariants();
}

// With no time limit, the start comes from the expected durations (`--duration`), and `why`
// says which; a task with neither makes the start unknown.
TEST_F(BackfillTest, Issue37_EarliestStartFromExpectedDurationsWhenNoLimit) {
  Fill({OneGpuOn("n0", 0, 5'000), OneGpuOn("n0", 0, 6'000), OneGpuOn("n0", 7'000),
        OneGpuOn("n0", 0, 8'000), OneGpuOn("n1", 0, 60'000), OneGpuOn("n1", 0),
        OneGpuOn("n1", 0, 1'000), OneGpuOn("n1", 0, 1'000)});
  const TaskId wide = Place(WholeGpuTask(4));
  ASSERT_TRUE(sched_->reservation().has_value());
  EXPECT_EQ(sched_->reservation()->start_ms, 8'000);
  EXPECT_EQ(ReservedNode(), "n0");
  EXPECT_NE(Why(wide).find("reserved 4 GPUs on n0 from ~8s (time limit of task 3; expected "
                           "durations of tasks 1, 2, 4)"),
            std::string::npos)
      << Why(wide);
  // n0's tasks end early; wide starts there. Now both nodes hold a task that says nothing
  // of its end (6 on n1, wide itself on n0): the start of the next wide task is unknown, and
  // the tie goes to the lower index.
  for (uint64_t id = 1; id <= 4; ++id) Finish(TaskId(id));
  ASSERT_TRUE(sched_->reservation().has_value());
  const TaskId wide2 = Place(WholeGpuTask(4));
  EXPECT_EQ(T(wide).state, TaskState::kRunning);
  ASSERT_TRUE(sched_->reservation().has_value());
  EXPECT_EQ(sched_->reservation()->task, wide2);
  EXPECT_FALSE(sched_->reservation()->start_known());
  EXPECT_NE(Why(wide2).find("reserved 4 GPUs on n0, start unknown: task " + wide.ToString() +
                            " has no time limit or expected duration"),
            std::string::npos)
      << Why(wide2);
  ExpectInvariants();
}

// n0 is reserved from 20 s; one of its GPUs frees at 2 s. A task whose --time (10 s) ends
// before 20 s backfills onto it; one of 30 s would delay the wide task and waits; one with no
// time limit (only an expected duration, which nothing enforces) waits too.
TEST_F(BackfillTest, Issue37_ShortTaskBackfillsOnlyIfItsTimeLimitEndsBeforeTheReservation) {
  const std::vector<TaskId> n0 = FillNodes(20'000, 60'000);
  const TaskId wide = Place(WholeGpuTask(4));
  EXPECT_EQ(ReservedNode(), "n0");
  clock_.AdvanceMs(2000);
  Finish(n0[0]);
  const TaskId lng = Place(Limited(1, 30'000));
  EXPECT_EQ(T(lng).state, TaskState::kPending);
  EXPECT_NE(Why(lng).find("4 GPUs on n0 are reserved for task " + wide.ToString() +
                          " and its time limit would not end before the reservation starts"),
            std::string::npos)
      << Why(lng);
  TaskSpec unlimited = WholeGpuTask(1);
  unlimited.duration_ms = 1000;
  const TaskId none = Place(unlimited);
  EXPECT_EQ(T(none).state, TaskState::kPending);
  EXPECT_NE(Why(none).find("and it has no time limit to backfill by"), std::string::npos)
      << Why(none);
  const TaskId shrt = Place(Limited(1, 10'000));
  EXPECT_EQ(T(shrt).state, TaskState::kRunning);
  EXPECT_EQ(T(shrt).placement->node, "n0");
  EXPECT_EQ(sched_->reservation()->start_ms, 20'000);  // the backfilled task ends by 12 s
  ExpectInvariants();
}

// The reservation is planned anew at each pass: when n1's long tasks end early, n1 fits
// sooner than n0 and the reservation moves there; once n1 is free the wide task starts.
TEST_F(BackfillTest, Issue37_ReservationMovesAsTasksEndEarly) {
  Fill({OneGpuOn("n0", 20'000), OneGpuOn("n0", 20'000), OneGpuOn("n0", 20'000),
        OneGpuOn("n0", 20'000)});
  const std::vector<TaskId> n1 = Fill({OneGpuOn("n1", 10'000), OneGpuOn("n1", 30'000),
                                       OneGpuOn("n1", 30'000), OneGpuOn("n1", 30'000)});
  clock_.AdvanceMs(1000);
  const TaskId wide = Place(WholeGpuTask(4));
  EXPECT_EQ(ReservedNode(), "n0");
  EXPECT_EQ(sched_->reservation()->start_ms, 20'000);
  clock_.AdvanceMs(2000);
  for (size_t i = 1; i < 4; ++i) Finish(n1[i]);
  sched_->Schedule();
  StartAssigned();
  EXPECT_EQ(ReservedNode(), "n1");
  EXPECT_EQ(sched_->reservation()->start_ms, 10'000);
  EXPECT_NE(Why(wide).find("reserved 4 GPUs on n1 from ~7s (time limit of task 5)"),
            std::string::npos)
      << Why(wide);
  clock_.AdvanceMs(3000);
  Finish(n1[0]);  // ends before its limit too
  sched_->Schedule();
  StartAssigned();
  EXPECT_EQ(T(wide).state, TaskState::kRunning);
  EXPECT_EQ(T(wide).placement->node, "n1");
  EXPECT_FALSE(sched_->reservation().has_value());
  ExpectInvariants();
}

// Only the first wide task in queue order that does not fit reserves; the next one waits
// behind it (its time limit would not end before) and reserves once the first has started.
TEST_F(BackfillTest, Issue37_OnlyTheFirstBlockedWideTaskReserves) {
  const std::vector<TaskId> n0 = FillNodes(10'000, 20'000);
  const TaskId first = Submit(Limited(4, 60'000));
  const TaskId second = Submit(Limited(2, 60'000));
  sched_->Schedule();
  ASSERT_TRUE(sched_->reservation().has_value());
  EXPECT_EQ(sched_->reservation()->task, first);
  EXPECT_NE(Why(second).find("are reserved for task " + first.ToString()), std::string::npos)
      << Why(second);
  clock_.AdvanceMs(10'000);
  for (TaskId id : n0) Finish(id);
  sched_->Schedule();
  StartAssigned();
  EXPECT_EQ(T(first).state, TaskState::kRunning);
  ASSERT_TRUE(sched_->reservation().has_value());
  EXPECT_EQ(sched_->reservation()->task, second);
  EXPECT_EQ(ReservedNode(), "n1");
  EXPECT_EQ(sched_->reservation()->nodes[0].gpus.size(), 2u);
  ExpectInvariants();
}

// The issue's scenario on the scheduler the server runs (FQ, t2 = 30 s): 8 GPUs busy with
// 1-GPU tasks (--time 20s, each ends after 15 s), a 4-GPU task, then a 1-GPU task (--time
// 20s) every 1.5 s. With reservations the wide task starts within 20 s of its arrival (the
// longest time limit of the tasks running then); without, it still waits after 100 s.
class BackfillStreamTest : public testing::SchedulerTest {
 protected:
  // Returns when the wide task started (-1: never within 100 s).
  TimeMs RunStream(bool reservations) {
    SchedulerConfig config;
    config.wide_task_reservation = reservations;
    Init(config);
    for (const char* name : {"n0", "n1"}) AddNode(MakeNode(name, 4, 80 * kGiB));
    std::map<TaskId, TimeMs> ends;  // running tasks and when their program exits
    auto start_assigned = [&] {
      for (const Action& a : StartAssigned()) {
        if (a.kind == Action::Kind::kAssign) ends[a.task] = clock_.NowMs() + 15'000;
      }
    };
    for (int i = 0; i < 8; ++i) Submit(Limited(1, 20'000));
    sched_->Schedule();
    start_assigned();
    clock_.AdvanceMs(500);
    const TaskId wide = Submit(WholeGpuTask(4));
    const TimeMs arrived = clock_.NowMs();
    for (TimeMs t = 0; t < 100'000; t += 500) {
      if (t % 1500 == 0) Submit(Limited(1, 20'000));
      RunFor(500);
      for (auto it = ends.begin(); it != ends.end();) {
        if (it->second > clock_.NowMs()) {
          ++it;
          continue;
        }
        EXPECT_TRUE(sched_->TaskFinished(it->first, T(it->first).attempts, 0, 0).ok());
        it = ends.erase(it);
      }
      sched_->Tick();
      start_assigned();
      if (T(wide).state == TaskState::kRunning) return clock_.NowMs() - arrived;
    }
    return -1;
  }
};

TEST_F(BackfillStreamTest, Issue37_WideTaskStartsWithinTheLongestTimeLimitDespiteAStream) {
  const TimeMs waited = RunStream(true);
  EXPECT_GE(waited, 0);
  EXPECT_LE(waited, 20'000);
  ExpectInvariants();
}

// The pure computation: ties between nodes go to the lower index, ties between ends to the
// lower task id, and the same inputs give the same reservation.
TEST(PlanEarliestStartTest, Issue37_TiesByIndexAndIdAndDeterministic) {
  ClusterState view;
  for (const char* name : {"a", "b"}) {
    NodeSpec n = MakeNode(name, 2, 80 * kGiB);
    ASSERT_TRUE(view.Upsert(n, 0).ok());
  }
  std::vector<Placement> held;
  for (size_t node = 0; node < 2; ++node) {
    for (int g = 0; g < 2; ++g) {
      Placement p;
      p.node_index = node;
      p.node = node == 0 ? "a" : "b";
      p.gpus = {g};
      p.gpu_mem_mib = {80 * kGiB};
      p.exclusive = true;
      held.push_back(p);
    }
  }
  for (const Placement& p : held) view.Reserve(p);
  TaskSpec spec = WholeGpuTask(2);
  spec.time_limit_ms = 5'000;
  std::vector<std::vector<Holding>> holdings(2);
  for (size_t i = 0; i < held.size(); ++i) {
    holdings[held[i].node_index].push_back(
        {TaskId(10 - i), EndOfAttempt(spec, 0, 0, 0), &held[i]});
  }
  PlacementRequest shape;
  shape.gpus = 2;
  shape.exclusive = true;
  const auto r = PlanEarliestStart(TaskId(99), view, shape, 1, holdings, FilterOptions{}, 0);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->start_ms, 5'000);
  ASSERT_EQ(r->nodes.size(), 1u);
  EXPECT_EQ(r->nodes[0].index, 0u);
  EXPECT_EQ(r->waits_for, (std::vector<std::pair<TaskId, EndBasis>>{
                              {TaskId(9), EndBasis::kTimeLimit}, {TaskId(10), EndBasis::kTimeLimit}}));
  const auto again = PlanEarliestStart(TaskId(99), view, shape, 1, holdings, FilterOptions{}, 0);
  EXPECT_EQ(again->nodes[0].gpus, r->nodes[0].gpus);
  EXPECT_EQ(again->start_ms, r->start_ms);
}

TEST(EndOfAttemptTest, Issue37_TimeLimitThenExpectedDurationThenUnknown) {
  TaskSpec s;
  EXPECT_EQ(EndOfAttempt(s, 1000, 0, 2000).basis, EndBasis::kUnknown);
  s.duration_ms = 10'000;
  EXPECT_EQ(EndOfAttempt(s, 1000, 4000, 2000).at_ms, 7000);  // less the service attained
  EXPECT_EQ(EndOfAttempt(s, 1000, 4000, 2000).basis, EndBasis::kExpectedDuration);
  s.time_limit_ms = 20'000;
  EXPECT_EQ(EndOfAttempt(s, 1000, 4000, 2000).at_ms, 21'000);
  EXPECT_EQ(EndOfAttempt(s, 1000, 4000, 2000).basis, EndBasis::kTimeLimit);
  EXPECT_EQ(EndOfAttempt(s, 1000, 0, 50'000).at_ms, 50'000);  // overdue: any moment
}

}  // namespace
}  // namespace gpusched::core

namespace gpusched::core {
namespace {

// Slurm's rule by default; the simulator's stated durations may stand in for a time limit.
TEST(MayBackfillTest, Issue37_OnlyATimeLimitUnlessExpectedDurationsAreTrusted) {
  Reservation r;
  r.task = TaskId(1);
  r.start_ms = 10'000;
  TaskSpec s;
  s.duration_ms = 5'000;
  EXPECT_TRUE(MayBackfill(TaskId(1), s, r, 0));  // the holder
  EXPECT_FALSE(MayBackfill(TaskId(2), s, r, 0));
  EXPECT_TRUE(MayBackfill(TaskId(2), s, r, 0, /*trust_expected=*/true));
  s.time_limit_ms = 10'000;
  EXPECT_TRUE(MayBackfill(TaskId(2), s, r, 0));
  EXPECT_FALSE(MayBackfill(TaskId(2), s, r, 1));  // ends 1 ms after the start
  r.start_ms = kUnknownTime;
  EXPECT_FALSE(MayBackfill(TaskId(2), s, r, 0));
}

}  // namespace
}  // namespace gpusched::core
