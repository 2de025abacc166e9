// CN113051059B scenario 8 and the thread-safety contract of RealtimeDispatcher, run under
// ThreadSanitizer by `./run tsan` (ctest label `concurrency`).
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "dispatch/realtime_dispatcher.h"

namespace gpusched::dispatch {
namespace {

DispatcherConfig Config(int gpus) {
  DispatcherConfig c;
  c.gpu_count = gpus;
  c.services = {{.name = "a", .cost_time = 100, .wait_time = 50, .try_time = 10},
                {.name = "b", .cost_time = 100, .wait_time = 50, .try_time = 10}};
  return c;
}

// Scenario 8 (PATENTS.md section 1; the patent has 7 claims): claim 4's marks under 8 racing
// threads, with the clock frozen at t = 0. Every grab writes
// {owner = ticket, fin = 100} and every owner's release writes {none, 0}, so a reader must
// only ever see those two shapes: anything else is a torn update.
TEST(CN113051059B, Claim4_RacingThreadsKeepMarksConsistent) {
  FakeClock clock(0);
  DispatcherConfig c = Config(1);
  c.learning = CostLearning::kOffline;  // keep cost 100 so the invariant is exact
  auto d = std::move(RealtimeDispatcher::Create(c, clock)).value();
  constexpr int kThreads = 8, kRounds = 2000;
  std::atomic<bool> done{false};
  std::atomic<int> torn{0};
  std::thread reader([&] {
    while (!done.load()) {
      const SignalMark m = d->mark(0);
      if ((m.owner == 0) != (m.fin_time == 0) || (m.owner != 0 && m.fin_time != 100)) ++torn;
    }
  });
  std::vector<std::thread> workers;
  std::atomic<int> ran{0};
  for (int t = 0; t < kThreads; ++t) {
    workers.emplace_back([&, t] {
      for (int i = 0; i < kRounds; ++i) {
        Status s = d->Run(t % 2 == 0 ? "a" : "b", [&](int gpu) {
          EXPECT_EQ(gpu, 0);
          ran.fetch_add(1);
        });
        EXPECT_TRUE(s.ok());
      }
    });
  }
  for (auto& w : workers) w.join();
  done = true;
  reader.join();
  EXPECT_EQ(torn.load(), 0);
  EXPECT_EQ(ran.load(), kThreads * kRounds);
  // The last owner released: the mark is back to {none, 0}.
  EXPECT_EQ(d->mark(0).owner, 0u);
  EXPECT_EQ(d->mark(0).fin_time, 0);
  DispatchMetrics m = d->Metrics();
  EXPECT_EQ(m.services[0].completed + m.services[1].completed,
            static_cast<uint64_t>(kThreads * kRounds));
  EXPECT_EQ(m.gpus[0].running, 0);
  EXPECT_EQ(m.gpus[0].started, static_cast<uint64_t>(kThreads * kRounds));
}

// Many Submits through a WorkPool while a driver thread moves the clock: every request is
// granted exactly once, waits only while some GPU is busy, and all marks end released.
TEST(RealtimeDispatcherRace, SubmitFromManyThreadsWithMovingClock) {
  FakeClock clock(0);
  WorkPool pool(16);
  auto d = std::move(RealtimeDispatcher::Create(Config(4), clock, &pool)).value();
  constexpr int kSubmitters = 4, kEach = 200;
  std::vector<std::future<StatusOr<int>>> futures[kSubmitters];
  std::vector<std::thread> submitters;
  for (int t = 0; t < kSubmitters; ++t) {
    submitters.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        futures[t].push_back(d->Submit(i % 2 ? "a" : "b", [](int gpu) { return gpu; }));
      }
    });
  }
  for (auto& s : submitters) s.join();
  std::atomic<bool> stop{false};
  std::thread ticker([&] {
    while (!stop.load()) {
      if (clock.sleepers() > 0) clock.AdvanceMs(1);
      std::this_thread::yield();
    }
  });
  int per_gpu[4] = {0, 0, 0, 0};
  for (auto& fs : futures) {
    for (auto& f : fs) {
      StatusOr<int> gpu = f.get();
      ASSERT_TRUE(gpu.ok());
      ASSERT_GE(*gpu, 0);
      ASSERT_LT(*gpu, 4);
      per_gpu[*gpu]++;
    }
  }
  stop = true;
  ticker.join();
  EXPECT_EQ(per_gpu[0] + per_gpu[1] + per_gpu[2] + per_gpu[3], kSubmitters * kEach);
  for (int g = 0; g < 4; ++g) {
    EXPECT_EQ(d->mark(g).owner, 0u) << "gpu " << g;
    EXPECT_EQ(d->Metrics().gpus[g].running, 0);
  }
}

}  // namespace
}  // namespace gpusched::dispatch
