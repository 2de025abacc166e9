#pragma once
// Test support for core: a Scheduler on a FakeClock with helpers to build nodes and tasks.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "base/clock.h"
#include "core/scheduler.h"

namespace gpusched::core::testing {

inline constexpr MiB kGiB = 1024;
inline constexpr DurationMs kS = 1000;  // one second

// The seed of a randomized test: GPUSCHED_SEED when set (to replay a printed seed), else
// the test's fixed one.
inline uint64_t SeedFromEnv(uint64_t fallback) {
  const char* s = std::getenv("GPUSCHED_SEED");
  return s != nullptr ? std::strtoull(s, nullptr, 10) : fallback;
}

inline NodeSpec MakeNode(const std::string& name, int gpus, MiB gpu_mib,
                         const std::string& model = "A100") {
  NodeSpec n;
  n.name = name;
  n.address = name + ":7071";
  n.capacity = {64'000, 512 * kGiB};
  n.gpus.assign(static_cast<size_t>(gpus), GpuSpec{model, gpu_mib});
  return n;
}

inline TaskSpec SharedTask(MiB gpu_mib, const std::string& name = "") {
  TaskSpec t;
  t.name = name;
  t.gpus = 1;
  t.gpu_mem_mib = gpu_mib;
  return t;
}

inline TaskSpec WholeGpuTask(int gpus, const std::string& name = "") {
  TaskSpec t;
  t.name = name;
  t.gpus = gpus;
  return t;
}

class SchedulerTest : public ::testing::Test {
 protected:
  // Builds (or rebuilds) the scheduler with `config`.
  void Init(SchedulerConfig config = {}, Executor* executor = nullptr) {
    auto s = Scheduler::Create(std::move(config), clock_, executor);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    sched_ = std::move(s).value();
  }
  void SetUp() override { Init(); }

  void AddNode(const NodeSpec& n) { ASSERT_TRUE(sched_->RegisterNode(n).ok()); }

  TaskId Submit(const TaskSpec& spec) {
    auto id = sched_->Submit(spec);
    EXPECT_TRUE(id.ok()) << id.status().ToString();
    return id.ok() ? *id : TaskId();
  }

  const Task& T(TaskId id) { return *sched_->GetTask(id); }

  // Reports start for every assignment of the last pass, returns the actions.
  std::vector<Action> StartAssigned() {
    std::vector<Action> actions = sched_->TakeActions();
    for (const Action& a : actions) {
      if (a.kind == Action::Kind::kAssign) {
        EXPECT_TRUE(sched_->TaskStarted(a.task, a.attempt).ok());
      }
    }
    return actions;
  }

  void Heartbeat(const std::string& node) {
    ASSERT_TRUE(sched_->HandleNodeHeartbeat({node, {}, {}, {}}).ok());
  }

  // Advances time in 1 s steps; every node and every active task not marked silent sends its
  // heartbeat at each step, so nothing times out unless the test wants it to.
  void AdvanceAlive(DurationMs ms) {
    for (DurationMs done = 0; done < ms;) {
      const DurationMs step = std::min<DurationMs>(1000, ms - done);
      clock_.AdvanceMs(step);
      done += step;
      for (const NodeState& n : sched_->cluster().nodes()) {
        if (!silent_node_.count(n.name)) Heartbeat(n.name);
      }
      for (const Task* t : sched_->Tasks()) {
        if (t->state == TaskState::kAssigned || t->state == TaskState::kRunning) {
          if (!silent_task_.count(t->id)) {
            auto hung = hung_task_.find(t->id);
            const ExecutorReport executor = hung == hung_task_.end() ? ExecutorReport{}
                                                                     : hung->second;
            EXPECT_TRUE(sched_->TaskHeartbeat(t->id, t->attempts, std::nullopt, executor).ok());
          }
        }
      }
    }
  }

  // AdvanceAlive with the scheduler's loop running: Tick() after every 1 s step, as the
  // server's loop does (passes every t1, FQ flushed every t2). Returns the tasks placed.
  size_t RunFor(DurationMs ms) {
    size_t placed = 0;
    for (DurationMs done = 0; done < ms;) {
      const DurationMs step = std::min<DurationMs>(1000, ms - done);
      AdvanceAlive(step);
      done += step;
      placed += sched_->Tick();
    }
    return placed;
  }

  void ExpectInvariants() {
    Status s = sched_->CheckInvariants();
    EXPECT_TRUE(s.ok()) << s.ToString();
  }

  std::set<std::string> silent_node_;  // AdvanceAlive skips these
  std::set<TaskId> silent_task_;
  // AdvanceAlive's task heartbeats carry this executor status for these tasks.
  std::map<TaskId, ExecutorReport> hung_task_;
  FakeClock clock_{0};
  std::unique_ptr<Scheduler> sched_;
};

// The scheduler as the server runs it: a task that does not fit waits in Q for capacity
// (CapacityWait::kStayQueued) instead of going to FQ.
class StayQueuedSchedulerTest : public SchedulerTest {
 protected:
  void SetUp() override {
    SchedulerConfig config;
    config.capacity_wait = CapacityWait::kStayQueued;
    Init(config);
  }
};

}  // namespace gpusched::core::testing
