// Seeded randomized property test: thousands of random submit, finish, heartbeat, node-loss,
// drain and cancel events never over-commit GPU memory, GPU count, CPU or RAM on any node,
// never lose a task, and leave every task in exactly one terminal state.
// The seed is printed; rerun one with GPUSCHED_SEED=<seed>.

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>

#include "base/rng.h"
#include "core/testing/scheduler_fixture.h"

namespace gpusched::core {
namespace {

using testing::SeedFromEnv;
using testing::kGiB;
using testing::MakeNode;


class PropertyTest : public testing::SchedulerTest,
                     public ::testing::WithParamInterface<CapacityWait> {
 protected:
  void Run(uint64_t seed, int events) {
    std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
    Rng rng(seed);
    SchedulerConfig config;
    config.capacity_wait = GetParam();
    config.fail_max = 2;
    Init(config);
    const int nodes = 12;
    for (int i = 0; i < nodes; ++i) {
      AddNode(MakeNode("n" + std::to_string(i), static_cast<int>(rng.UniformInt(1, 8)),
                       rng.UniformInt(1, 4) * 16 * kGiB));
    }
    std::map<TaskId, bool> will_fail;
    int submitted = 0;
    for (int e = 0; e < events; ++e) {
      const double p = rng.Uniform01();
      if (p < 0.35) {
        TaskSpec t;
        if (rng.Bernoulli(0.3)) {
          t.gpus = rng.UniformInt(1, 4);  // whole GPUs
        } else if (rng.Bernoulli(0.9)) {
          t.gpus = rng.UniformInt(1, 2);
          t.gpu_mem_mib = rng.UniformInt(1, 16) * kGiB;
        }
        t.resources = {rng.UniformInt(0, 16'000), rng.UniformInt(0, 64) * kGiB};
        t.keep_pending_if_infeasible = true;  // some ask for more than the small nodes have
        auto id = sched_->Submit(t);
        ASSERT_TRUE(id.ok()) << id.status().ToString();
        will_fail[*id] = rng.Bernoulli(0.2);
        ++submitted;
      } else if (p < 0.65) {
        FinishSomething(rng, will_fail);
      } else if (p < 0.70) {
        silent_node_.insert("n" + std::to_string(rng.UniformInt(0, nodes - 1)));
      } else if (p < 0.78) {
        silent_node_.clear();
      } else if (p < 0.80) {
        const std::string n = "n" + std::to_string(rng.UniformInt(0, nodes - 1));
        ASSERT_TRUE(sched_->Drain(n, true).ok());
        ASSERT_TRUE(sched_->Cordon(n, false).ok());
      } else if (p < 0.82) {
        const TaskId id(static_cast<uint64_t>(rng.UniformInt(1, std::max(1, submitted))));
        sched_->Cancel(id).ok();  // may legitimately fail on a finished task
      } else if (p < 0.84) {
        ASSERT_TRUE(sched_->SetNodeReachable("n" + std::to_string(rng.UniformInt(0, nodes - 1)),
                                             rng.Bernoulli(0.5))
                        .ok());
      } else {
        AdvanceAlive(rng.UniformInt(1, 15) * 1000);
      }
      sched_->Tick();
      StartAssigned();
      Status inv = sched_->CheckInvariants();
      ASSERT_TRUE(inv.ok()) << "event " << e << ": " << inv.ToString();
    }
    // Wind down: everything alive and reachable; finish what runs until every task is final.
    silent_node_.clear();
    for (int i = 0; i < nodes; ++i) {
      ASSERT_TRUE(sched_->SetNodeReachable("n" + std::to_string(i), true).ok());
    }
    for (int round = 0; round < 2000; ++round) {
      AdvanceAlive(sched_->config().t2_ms);
      sched_->Tick();
      StartAssigned();
      for (const Task* t : sched_->Tasks()) {
        if (t->state == TaskState::kRunning) {
          ASSERT_TRUE(sched_->TaskFinished(t->id, t->attempts, 0, 0).ok());
        }
      }
      bool all_final = true;
      for (const Task* t : sched_->Tasks()) all_final &= IsTerminal(t->state);
      if (all_final) break;
    }
    ASSERT_EQ(static_cast<int>(sched_->Tasks().size()), submitted) << "a task was lost";
    for (const Task* t : sched_->Tasks()) {
      EXPECT_TRUE(IsTerminal(t->state)) << "task " << t->id.value() << " is "
                                        << TaskStateName(t->state) << ": " << t->reason;
      EXPECT_EQ(t->queue, QueueMembership::kNone);
      EXPECT_FALSE(t->placement.has_value());
    }
    for (const NodeState& n : sched_->cluster().nodes()) {
      EXPECT_EQ(n.gpu_allocated_mib, 0) << n.name;
      EXPECT_EQ(n.allocated, Resources{}) << n.name;
      EXPECT_EQ(n.running_tasks, 0) << n.name;
    }
    ExpectInvariants();
  }

  void FinishSomething(Rng& rng, std::map<TaskId, bool>& will_fail) {
    std::vector<const Task*> running;
    for (const Task* t : sched_->Tasks()) {
      if (t->state == TaskState::kRunning) running.push_back(t);
    }
    if (running.empty()) return;
    const Task* t = running[static_cast<size_t>(rng.UniformInt(0, static_cast<int64_t>(running.size()) - 1))];
    if (rng.Bernoulli(0.1)) {
      silent_task_.insert(t->id);  // goes quiet: reclaimed by the task heartbeat rule
      return;
    }
    silent_task_.erase(t->id);
    const int code = will_fail[t->id] ? 1 : 0;
    ASSERT_TRUE(sched_->TaskFinished(t->id, t->attempts, code, 0).ok());
  }
};

TEST_P(PropertyTest, RandomEventsNeverOverCommitOrLoseTasks) {
  const uint64_t base = SeedFromEnv(1130);
  for (uint64_t k = 0; k < 3; ++k) Run(base + k, 2000);
}

INSTANTIATE_TEST_SUITE_P(CapacityWaitModes, PropertyTest,
                         ::testing::Values(CapacityWait::kFailureQueue, CapacityWait::kStayQueued),
                         [](const ::testing::TestParamInfo<CapacityWait>& param_info) {
                           return param_info.param == CapacityWait::kFailureQueue
                                      ? "FailureQueue"
                                      : "StayQueued";
                         });

}  // namespace
}  // namespace gpusched::core
