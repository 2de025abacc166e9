// Issue 43: `gpusched bench scale` as a user runs it, small. Many simulated agents against a
// real server process: every task submitted starts, every agent heartbeats on the server's
// period, and the JSON carries the figures the closing table quotes; with --pending, a queue
// that survives a kill -9 of the server and drains to zero with every task run once.

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "harness.h"

namespace gpusched::testing {
namespace {

using Json = nlohmann::json;

TEST(ScaleE2eTest, Issue43_ManySimulatedAgentsOneServerReportEveryFigure) {
  CliResult r = Cli({"bench", "scale", "--agents", "40", "--tasks", "200", "--task-ms", "50",
                     "--idle-seconds", "4", "--clients", "4", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const Json out = Json::parse(r.out);
  EXPECT_EQ(out["agents"], 40);
  EXPECT_EQ(out["tasks_started"], 200);
  EXPECT_EQ(out["submit_errors"], 0);
  EXPECT_EQ(out["streams_ended"], 0);
  // Each FINISHED was acknowledged once its exit was committed: one lag each.
  EXPECT_EQ(out["heartbeat_to_state_samples"], 200);
  // 40 agents on the default node_heartbeat (2 s): 20 a second.
  EXPECT_NEAR(out["heartbeats_per_s"].get<double>(), 20.0, 4.0);
  for (const char* key : {"server_cpu_us_per_heartbeat", "server_rss_mib", "pass_p99_ms",
                          "heartbeat_to_state_p99_ms", "rpc_limit_per_s", "connect_seconds"}) {
    ASSERT_TRUE(out.contains(key)) << key;
    EXPECT_GT(out[key].get<double>(), 0.0) << key;
  }
  EXPECT_GT(out["server_rss_mib"].get<double>(), out["server_rss_mib_no_agents"].get<double>());
  EXPECT_LE(out["pass_p50_ms"].get<double>(), out["pass_p99_ms"].get<double>());
  EXPECT_LE(out["submit_to_start_p50_ms"].get<double>(),
            out["submit_to_start_p99_ms"].get<double>());
}

TEST(ScaleE2eTest, Issue43_PendingQueueSurvivesAKilledServerAndDrainsEveryTaskOnce) {
  CliResult r = Cli({"bench", "scale", "--agents", "10", "--pending", "3000", "--idle-seconds",
                     "1", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const Json out = Json::parse(r.out);
  EXPECT_EQ(out["pending"], 3000);
  // The blockers were cancelled; the 3,000 that waited each ran once, after the restart too.
  EXPECT_EQ(out["succeeded"], 3000);
  EXPECT_GT(out["kib_per_pending_task"].get<double>(), 0.0);
  EXPECT_GT(out["passes_measured"].get<double>(), 0.0);
  for (const char* key : {"restart_seconds", "ls_first_page_ms", "ls_middle_page_ms",
                          "rest_page_ms", "why_ms", "drain_seconds"}) {
    ASSERT_TRUE(out.contains(key)) << key;
    EXPECT_GT(out[key].get<double>(), 0.0) << key;
  }
  EXPECT_GE(out["restart_seconds"].get<double>(), out["restart_answer_seconds"].get<double>());
}

TEST(ScaleE2eTest, Issue43_BadFlagsAreRefusedNamingTheFlagAndTheValue) {
  CliResult r = Cli({"bench", "scale", "--agents", "0"});
  EXPECT_NE(r.code, 0);
  EXPECT_TRUE(Has(r.err, "--agents: 0")) << r.err;
  r = Cli({"bench", "scale", "--capacity-wait", "later"});
  EXPECT_NE(r.code, 0);
  EXPECT_TRUE(Has(r.err, "--capacity-wait: \"later\"")) << r.err;
  r = Cli({"bench", "scale", "--pending", "-5"});
  EXPECT_NE(r.code, 0);
  EXPECT_TRUE(Has(r.err, "--pending: -5")) << r.err;
}

}  // namespace
}  // namespace gpusched::testing
