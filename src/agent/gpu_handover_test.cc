// GpuHandover (issue 40: split out of Agent::Impl): a preemptor waits for the task it
// preempts to exit before it starts on that task's GPUs.

#include "agent/gpu_handover.h"

#include <gtest/gtest.h>

#include <map>

namespace gpusched::agent {
namespace {

namespace v1 = ::gpusched::v1;

v1::Assign Assign(uint64_t id, int64_t attempt, std::vector<int> gpus) {
  v1::Assign a;
  a.set_id(id);
  a.set_attempt(attempt);
  for (int g : gpus) a.add_gpus(g);
  return a;
}

std::vector<TaskKey> Keys(const std::vector<v1::Assign>& assigns) {
  std::vector<TaskKey> out;
  for (const v1::Assign& a : assigns) out.emplace_back(a.id(), a.attempt());
  return out;
}

// The GPUs of the tasks running here, as the GPU monitor knows them.
struct HandoverFixture {
  std::map<TaskKey, std::vector<int>> gpus = {{{1, 1}, {0, 1}}, {{2, 1}, {2}}, {{3, 1}, {}}};
  GpuHandover handover{[this](const TaskKey& task) {
    auto it = gpus.find(task);
    return it == gpus.end() ? std::vector<int>() : it->second;
  }};
};

// An assignment on a GPU of a task being stopped waits for it; one on other GPUs, or on a
// GPU of a task not told to stop, does not.
TEST(GpuHandoverTest, Issue40_AssignmentOnStoppingTasksGpuWaits) {
  HandoverFixture f;
  EXPECT_FALSE(f.handover.Defer(Assign(10, 1, {1})));  // task 1 runs on, not stopping
  EXPECT_FALSE(f.handover.OnKill({1, 1}));
  EXPECT_EQ(f.handover.Defer(Assign(10, 1, {1, 3})), (std::optional<TaskKey>{{1, 1}}));
  EXPECT_FALSE(f.handover.Defer(Assign(11, 1, {2, 3})));  // other GPUs pass through
  EXPECT_FALSE(f.handover.Defer(Assign(12, 1, {})));      // no GPU at all
  EXPECT_EQ(f.handover.Waiting(), (std::vector<TaskKey>{{10, 1}}));
}

// A task without GPUs (or unknown to the monitor) that is killed holds nothing back.
TEST(GpuHandoverTest, Issue40_TaskWithoutGpusStopsNothing) {
  HandoverFixture f;
  EXPECT_FALSE(f.handover.OnKill({3, 1}));
  EXPECT_FALSE(f.handover.OnKill({9, 1}));
  EXPECT_FALSE(f.handover.Defer(Assign(10, 1, {0, 1, 2, 3})));
  EXPECT_TRUE(f.handover.Waiting().empty());
}

// The server repeats an assignment (a reconnect): it waits once.
TEST(GpuHandoverTest, Issue40_RepeatedAssignmentQueuedOnce) {
  HandoverFixture f;
  f.handover.OnKill({1, 1});
  EXPECT_TRUE(f.handover.Defer(Assign(10, 1, {0})));
  EXPECT_TRUE(f.handover.Defer(Assign(10, 1, {0})));
  EXPECT_TRUE(f.handover.Defer(Assign(10, 2, {0})));  // another attempt is another task
  EXPECT_EQ(f.handover.Waiting(), (std::vector<TaskKey>{{10, 1}, {10, 2}}));
  EXPECT_EQ(Keys(f.handover.OnExit({1, 1})), (std::vector<TaskKey>{{10, 1}, {10, 2}}));
}

// An exit releases exactly the assignments that no stopping task holds a GPU of any more,
// in the order they came; the others wait on for theirs.
TEST(GpuHandoverTest, Issue40_ExitReleasesExactlyTheWaitingOnesInOrder) {
  HandoverFixture f;
  f.handover.OnKill({1, 1});
  f.handover.OnKill({2, 1});
  f.handover.Defer(Assign(20, 1, {1}));
  f.handover.Defer(Assign(21, 1, {1, 2}));  // needs both victims gone
  f.handover.Defer(Assign(22, 1, {2}));
  f.handover.Defer(Assign(23, 1, {0}));
  EXPECT_TRUE(f.handover.OnExit({7, 1}).empty());  // an unrelated exit frees nothing
  EXPECT_EQ(Keys(f.handover.OnExit({1, 1})), (std::vector<TaskKey>{{20, 1}, {23, 1}}));
  EXPECT_EQ(f.handover.Waiting(), (std::vector<TaskKey>{{21, 1}, {22, 1}}));
  EXPECT_EQ(Keys(f.handover.OnExit({2, 1})), (std::vector<TaskKey>{{21, 1}, {22, 1}}));
  EXPECT_TRUE(f.handover.Waiting().empty());
  EXPECT_FALSE(f.handover.Defer(Assign(24, 1, {0, 1, 2})));  // nothing stops any more
}

// A kill of a waiting assignment drops it (it never runs); clearing drops them all; a
// forgotten victim (issue 39) releases nothing but holds no GPU any more.
TEST(GpuHandoverTest, Issue40_KilledWhileWaitingNeverRuns) {
  HandoverFixture f;
  f.handover.OnKill({1, 1});
  f.handover.Defer(Assign(30, 1, {0}));
  f.handover.Defer(Assign(31, 1, {1}));
  EXPECT_TRUE(f.handover.OnKill({30, 1}));
  EXPECT_FALSE(f.handover.OnKill({30, 1}));
  EXPECT_EQ(Keys(f.handover.OnExit({1, 1})), (std::vector<TaskKey>{{31, 1}}));
  f.handover.OnKill({2, 1});
  f.handover.Defer(Assign(32, 1, {2}));
  f.handover.Forget({2, 1});
  EXPECT_EQ(f.handover.Waiting(), (std::vector<TaskKey>{{32, 1}}));
  f.handover.ClearWaiting();
  EXPECT_TRUE(f.handover.Waiting().empty());
  EXPECT_FALSE(f.handover.Defer(Assign(33, 1, {2})));
}

}  // namespace
}  // namespace gpusched::agent
