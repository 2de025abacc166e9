// Backfill with reservations end to end (issue 37, "Wide tasks starve"): a real server, two
// agents of 4 GPUs and the CLI. The issue's scenario, scaled to seconds: 8 GPUs busy with
// 1-GPU `sleep 8` tasks (--time 10s), a 4-GPU task, then a 1-GPU task (--time 10s) every
// 0.5 s. (Under ASan, where each CLI call costs about 0.3 s, the 8 tasks start over seconds:
// they run 8 s so that the 4-GPU task waits long enough for `why` to be read.) Before issue 37 the stream took every GPU that freed and the 4-GPU task never
// started while it lasted; now it reserves a node and starts no later than the longest time
// limit of the tasks running when it arrived.

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

#include "cluster_fixture.h"

namespace gpusched::testing {
namespace {

TEST_F(ClusterTest, Issue37_WideTaskStartsWithinTheLongestTimeLimitDespiteAStream) {
  StartAgent("n1", "4x80GiB");
  StartAgent("n2", "4x80GiB");
  const std::vector<std::string> small{"--gpus", "1", "--time", "10s", "--", "sleep", "8"};
  std::vector<uint64_t> first;
  for (int i = 0; i < 8; ++i) first.push_back(Submit(small));
  for (uint64_t id : first) ASSERT_TRUE(WaitState(id, "running")) << Task(id).dump();
  int64_t limits_end_ms = 0;  // the latest end of their time limits (server clock)
  for (uint64_t id : first) {
    limits_end_ms =
        std::max<int64_t>(limits_end_ms, Task(id)["started_ms"].get<int64_t>() + 10'000);
  }
  const uint64_t wide = Submit({"--gpus", "4", "--", "sleep", "1"});
  bool said_why = false;
  const auto until = std::chrono::steady_clock::now() + 16s;
  std::string state;
  for (int n = 0; std::chrono::steady_clock::now() < until; ++n) {
    if (n > 0) Submit(small);  // the first look is before any of the stream
    const Json t = Task(wide);
    state = t.value("state", "");
    if (state != "pending") break;
    if (!said_why) {
      const std::string why = Run({"why", std::to_string(wide)}).out;
      said_why = why.find("reserved 4 GPUs on n") != std::string::npos &&
                 why.find("(time limits of tasks") != std::string::npos;
    }
    std::this_thread::sleep_for(500ms);
  }
  ASSERT_NE(state, "pending") << "the 4-GPU task never started while the stream lasted\n"
                              << Run({"why", std::to_string(wide)}).out;
  EXPECT_TRUE(said_why) << "`why` never named the reservation";
  const Json t = Task(wide);
  // The bound: the latest time limit of the tasks running at its arrival, plus one pass and
  // the agent's start report.
  EXPECT_LE(t["started_ms"].get<int64_t>(), limits_end_ms + 1500) << t.dump();
}

}  // namespace
}  // namespace gpusched::testing
