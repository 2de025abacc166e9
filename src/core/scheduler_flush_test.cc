// The lazy FQ flush (scheduler_flush.cc) against the eager one: the same events drive two
// schedulers, one with SchedulerConfig::lazy_failure_queue off, and everything a client can
// read (queue orders, every task's record, actions, decisions) must be the same, while the
// lazy one visits only one task per request shape at a flush where nothing fits.
// The randomized test prints its seed; rerun one with GPUSCHED_SEED=<seed>.

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "base/rng.h"
#include "core/testing/scheduler_fixture.h"

namespace gpusched::core {
namespace {

using testing::SeedFromEnv;
using testing::kGiB;
using testing::MakeNode;
using testing::SharedTask;
using testing::WholeGpuTask;

// Everything a client reads of the queues and the tasks, as text.
std::string Render(const Scheduler& s) {
  std::string out = "Q";
  for (TaskId id : s.MainQueueOrder()) out += " " + id.ToString();
  out += "\nFQ";
  for (TaskId id : s.FailureQueueOrder()) out += " " + id.ToString();
  out += "\n";
  for (const Task* t : s.Tasks()) {
    out += t->id.ToString() + " " + TaskStateName(t->state) + " claim " +
           std::to_string(static_cast<int>(t->claim)) + " queue " +
           std::to_string(static_cast<int>(t->queue)) + " pt " + std::to_string(t->pt) +
           " pf " + std::to_string(t->placement_failures) + " fail " +
           std::to_string(t->fail_cnt) + " att " + std::to_string(t->attempts) + " [" +
           t->reason + "] [" + t->last_report_summary + "] " +
           (t->placement ? t->placement->node : "-");
    if (t->placement) {
      for (int g : t->placement->gpus) out += " g" + std::to_string(g);
    }
    out += "\n";
  }
  const SchedulerStats& st = s.stats();
  out += "passes " + std::to_string(st.passes) + " decisions " + std::to_string(st.decisions) +
         " placed " + std::to_string(st.placed) + " fq " +
         std::to_string(s.failure_queue_size()) + "\n";
  return out;
}

std::string RenderActions(const std::vector<Action>& actions) {
  std::string out;
  for (const Action& a : actions) {
    out += std::to_string(static_cast<int>(a.kind)) + " " + a.task.ToString() + " " + a.node +
           " " + std::to_string(a.attempt);
    for (int g : a.gpus) out += " g" + std::to_string(g);
    out += "\n";
  }
  return out;
}

// One scheduler on its own clock, driven the way the server's loop drives it.
struct Side {
  explicit Side(bool lazy) {
    SchedulerConfig config;
    config.lazy_failure_queue = lazy;
    // Nor with reservations for wide tasks: a parked group's one answer would stand for the
    // holder, whose own answer differs (LazyFlushActive).
    config.wide_task_reservation = false;
    // The lazy flush applies without fair share (as under the simulator's gpusched policy).
    config.fair_share.fair_share_weight = 0;
    auto s = Scheduler::Create(config, clock);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    sched = std::move(s).value();
  }
  // Per 1 s step: every node and every active task sends its heartbeat, then Tick; every
  // assignment is reported started. Returns the actions, as text.
  std::string Advance(DurationMs ms) {
    std::string actions;
    for (DurationMs done = 0; done < ms; done += 1000) {
      clock.AdvanceMs(1000);
      for (const NodeState& n : sched->cluster().nodes()) {
        EXPECT_TRUE(sched->HandleNodeHeartbeat({n.name, {}, {}, {}}).ok());
      }
      for (const Task* t : sched->Tasks()) {
        if (t->state == TaskState::kAssigned || t->state == TaskState::kRunning) {
          EXPECT_TRUE(sched->TaskHeartbeat(t->id, t->attempts).ok());
        }
      }
      sched->Tick();
      actions += Start();
    }
    return actions;
  }
  std::string Start() {
    const std::vector<Action> actions = sched->TakeActions();
    for (const Action& a : actions) {
      if (a.kind == Action::Kind::kAssign) {
        EXPECT_TRUE(sched->TaskStarted(a.task, a.attempt).ok());
      }
    }
    return RenderActions(actions);
  }
  int64_t Visited() const { return sched->stats().decisions - sched->stats().parked_waits; }

  FakeClock clock{0};
  std::unique_ptr<Scheduler> sched;
};

class LazyFlushTest : public ::testing::Test {
 protected:
  void AddNode(const NodeSpec& n) {
    ASSERT_TRUE(lazy_.sched->RegisterNode(n).ok());
    ASSERT_TRUE(eager_.sched->RegisterNode(n).ok());
  }
  TaskId Submit(const TaskSpec& spec) {
    auto a = lazy_.sched->Submit(spec);
    auto b = eager_.sched->Submit(spec);
    EXPECT_EQ(a.ok(), b.ok());
    EXPECT_TRUE(a.ok()) << a.status().ToString();
    return a.ok() ? *a : TaskId();
  }
  // Both advance; their actions and everything they show must agree.
  void Advance(DurationMs ms) {
    const std::string a = lazy_.Advance(ms), b = eager_.Advance(ms);
    ASSERT_EQ(a, b);
    ExpectSame();
  }
  void ExpectSame() {
    ASSERT_EQ(Render(*lazy_.sched), Render(*eager_.sched));
    Status s = lazy_.sched->CheckInvariants();
    ASSERT_TRUE(s.ok()) << s.ToString();
  }

  Side lazy_{true};
  Side eager_{false};
};

// PATENTS.md section 6 (CN115981827A claim 3 at scale): a t2 flush after which nothing was
// freed re-tries one task per request shape, not every FQ task, and leaves the queues, the
// demotions and the counters as the eager flush does.
TEST_F(LazyFlushTest, FlushWithNothingFreedVisitsOneTaskPerShapeAndKeepsTheEagerOrder) {
  AddNode(MakeNode("n0", 4, 16 * kGiB));
  const TaskId blocker = Submit(WholeGpuTask(4, "blocker"));
  Advance(1000);
  ASSERT_EQ(lazy_.sched->GetTask(blocker)->state, TaskState::kRunning);
  std::vector<TaskId> waiting;
  for (int i = 0; i < 30; ++i) {
    waiting.push_back(Submit(i % 3 == 0 ? WholeGpuTask(2) : WholeGpuTask(1)));
  }
  Advance(1000);
  // Ten flushes: every waiting task is demoted to the cap (5 + FAIL_MAX) and parked.
  Advance(10 * 30'000);
  for (TaskId id : waiting) ASSERT_EQ(lazy_.sched->GetTask(id)->pt, 8);
  ASSERT_EQ(lazy_.sched->failure_queue_size(), 30u);

  const int64_t decisions = lazy_.sched->stats().decisions;
  const int64_t lazy_visited = lazy_.Visited(), eager_visited = eager_.Visited();
  const int64_t pf = lazy_.sched->GetTask(waiting.back())->placement_failures;
  Advance(30'000);  // one flush, nothing freed
  EXPECT_EQ(lazy_.sched->stats().decisions - decisions, 30);  // every task waited once more
  EXPECT_EQ(lazy_.Visited() - lazy_visited, 2);               // one per shape
  EXPECT_EQ(eager_.Visited() - eager_visited, 30);
  EXPECT_EQ(lazy_.sched->GetTask(waiting.back())->placement_failures, pf + 1);

  // Capacity comes back: the next flush places in Q order (Pt, first submission), the same
  // tasks on the same GPUs, and the rest wait on.
  ASSERT_TRUE(lazy_.sched->TaskFinished(blocker, 1, 0, 0).ok());
  ASSERT_TRUE(eager_.sched->TaskFinished(blocker, 1, 0, 0).ok());
  Advance(30'000);
  EXPECT_EQ(lazy_.sched->GetTask(waiting[0])->state, TaskState::kRunning);  // 2 GPUs
  EXPECT_EQ(lazy_.sched->GetTask(waiting[1])->state, TaskState::kRunning);
  EXPECT_EQ(lazy_.sched->GetTask(waiting[2])->state, TaskState::kRunning);
  EXPECT_EQ(lazy_.sched->GetTask(waiting[3])->state, TaskState::kPending);
  EXPECT_EQ(lazy_.sched->failure_queue_size(), 27u);

  // Cancelling a parked task catches its record up first and takes it out of FQ.
  ASSERT_TRUE(lazy_.sched->Cancel(waiting[10]).ok());
  ASSERT_TRUE(eager_.sched->Cancel(waiting[10]).ok());
  ExpectSame();
  Advance(60'000);
}

// A quota set while tasks are parked returns them to the plain FQ in FQ order.
TEST_F(LazyFlushTest, QuotaUnparksInFailureQueueOrder) {
  AddNode(MakeNode("n0", 2, 16 * kGiB));
  Submit(WholeGpuTask(2));
  for (int i = 0; i < 6; ++i) Submit(i % 2 ? WholeGpuTask(1) : SharedTask(4 * kGiB));
  Advance(10 * 30'000);
  ASSERT_TRUE(lazy_.sched->SetQuota({"a", 1, 0, 0, ""}).ok());
  ASSERT_TRUE(eager_.sched->SetQuota({"a", 1, 0, 0, ""}).ok());
  ExpectSame();
  Advance(3 * 30'000);
}


// Random arrivals of several shapes (whole GPUs, shares, a GPU model, node rules), successes,
// execution failures, cancels and lost nodes: the lazy and the eager flush never differ in
// anything a client reads.
TEST_F(LazyFlushTest, RandomEventsGiveTheSameDecisionsAsTheEagerFlush) {
  const uint64_t seed = SeedFromEnv(1616);
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  Rng rng(seed);
  for (int i = 0; i < 6; ++i) {
    NodeSpec n = MakeNode("n" + std::to_string(i), static_cast<int>(rng.UniformInt(1, 4)),
                          rng.UniformInt(1, 2) * 16 * kGiB, i % 3 == 0 ? "V100" : "A100");
    if (i % 2 == 0) n.labels["zone"] = "a";
    AddNode(n);
  }
  std::vector<TaskId> ids;
  for (int e = 0; e < 1500; ++e) {
    const double p = rng.Uniform01();
    if (p < 0.3) {
      TaskSpec t = rng.Bernoulli(0.5) ? WholeGpuTask(static_cast<int>(rng.UniformInt(1, 4)))
                                      : SharedTask(rng.UniformInt(1, 4) * 4 * kGiB);
      t.duration_ms = rng.UniformInt(1, 30) * 3'600'000;
      t.keep_pending_if_infeasible = true;  // some ask for more than every node has
      if (rng.Bernoulli(0.1)) t.gpu_model = "V100";
      if (rng.Bernoulli(0.1)) t.node_selector["zone"] = "a";
      if (rng.Bernoulli(0.05)) t.gpu_model = "H100";  // no such node yet: never parked
      const TaskId id = Submit(t);
      if (id.valid()) ids.push_back(id);
    } else if (p < 0.5 && !ids.empty()) {
      const TaskId id = ids[static_cast<size_t>(rng.UniformInt(0, static_cast<int64_t>(ids.size()) - 1))];
      const Task* t = lazy_.sched->GetTask(id);
      if (t->state == TaskState::kRunning) {
        const int code = rng.Bernoulli(0.2) ? 1 : 0;
        ASSERT_TRUE(lazy_.sched->TaskFinished(id, t->attempts, code, 0).ok());
        ASSERT_TRUE(eager_.sched->TaskFinished(id, t->attempts, code, 0).ok());
      } else if (rng.Bernoulli(0.05)) {
        EXPECT_EQ(lazy_.sched->Cancel(id).ok(), eager_.sched->Cancel(id).ok());
      }
    } else if (p < 0.53) {
      const std::string n = "n" + std::to_string(rng.UniformInt(0, 5));
      const bool up = rng.Bernoulli(0.5);
      ASSERT_TRUE(lazy_.sched->SetNodeReachable(n, up).ok());
      ASSERT_TRUE(eager_.sched->SetNodeReachable(n, up).ok());
    } else if (p < 0.535 && e > 1000) {
      AddNode(MakeNode("h" + std::to_string(e), 2, 80 * kGiB, "H100"));
    } else {
      Advance(rng.UniformInt(1, 40) * 1000);
    }
    ASSERT_NO_FATAL_FAILURE(ExpectSame()) << "seed " << seed << " event " << e;
  }
  EXPECT_LT(lazy_.Visited(), eager_.Visited());
}

}  // namespace
}  // namespace gpusched::core
