// The control plane end to end: real server, agents and CLI processes on loopback.

#include <set>
#include <sstream>

#include "cluster_fixture.h"

namespace gpusched::testing {
namespace {

TEST_F(ClusterTest, TasksRunAndReportTheirExitCodes) {
  StartAgent("n1", "2x16GiB");
  const uint64_t ok = Submit({"--gpus", "1", "--name", "hello", "--", "sh", "-c", "echo hi"});
  const uint64_t bad = Submit({"--gpus", "1", "--retries", "0", "--", "sh", "-c", "exit 3"});
  ASSERT_TRUE(WaitState(ok, "succeeded"));
  ASSERT_TRUE(WaitState(bad, "failed"));
  const auto tasks = Tasks();
  const Json& a = tasks.at(ok);
  EXPECT_EQ(a["exit_code"], 0);
  EXPECT_EQ(a["node"], "n1");
  EXPECT_EQ(a["name"], "hello");
  EXPECT_EQ(a["attempts"], 1);
  EXPECT_EQ(a["gpus"].size(), 1u);
  EXPECT_EQ(tasks.at(bad)["exit_code"], 3);
  EXPECT_NE(tasks.at(bad)["reason"].get<std::string>().find("code 3"), std::string::npos);
  CliResult logs = Run({"logs", std::to_string(ok)});
  EXPECT_EQ(logs.code, 0);
  EXPECT_EQ(logs.out, "hi\n");
  CliResult ls = Run({"ls", "--state", "failed"});
  EXPECT_EQ(ls.code, 0);
  EXPECT_NE(ls.out.find("failed"), std::string::npos);
  EXPECT_EQ(ls.out.find("succeeded"), std::string::npos);
}

TEST_F(ClusterTest, ConcurrentOneGpuTasksSeeDistinctDevices) {
  StartAgent("n1", "2x16GiB");
  const std::string script = Gated("end", "echo $CUDA_VISIBLE_DEVICES");
  const uint64_t a = Submit({"--gpus", "1", "--", "sh", "-c", script});
  const uint64_t b = Submit({"--gpus", "1", "--", "sh", "-c", script});
  // Both run at the same time on the one node (neither can finish before the gate opens).
  ASSERT_TRUE(PollUntil(
      [&] {
        auto t = Tasks();
        return t[a]["state"] == "running" && t[b]["state"] == "running";
      },
      kDeadline));
  OpenGate("end");
  ASSERT_TRUE(WaitState(a, "succeeded"));
  ASSERT_TRUE(WaitState(b, "succeeded"));
  const std::string da = Run({"logs", std::to_string(a)}).out;
  const std::string db = Run({"logs", std::to_string(b)}).out;
  EXPECT_TRUE(da == "0\n" || da == "1\n") << da;
  EXPECT_TRUE(db == "0\n" || db == "1\n") << db;
  EXPECT_NE(da, db);
}

TEST_F(ClusterTest, TwoSixGibTasksShareASixteenGibGpuWhileAThirdWaits) {
  StartAgent("n1", "1x16GiB");
  std::vector<uint64_t> ids;
  for (int i = 0; i < 3; ++i) {
    ids.push_back(Submit({"--gpu-mem", "6GiB", "--", "sh", "-c",
                          Gated("end", "echo mem=$GPUSCHED_GPU_MEM_MIB gpu=$CUDA_VISIBLE_DEVICES")}));
  }
  ASSERT_TRUE(PollUntil(
      [&] {
        auto t = Tasks();
        return t[ids[0]]["state"] == "running" && t[ids[1]]["state"] == "running";
      },
      kDeadline));
  EXPECT_EQ(Task(ids[2])["state"], "pending");
  CliResult why = Run({"why", std::to_string(ids[2])});
  EXPECT_EQ(why.code, 0);
  EXPECT_NE(why.out.find("GPU memory"), std::string::npos) << why.out;
  EXPECT_NE(why.out.find("needs 6GiB on one GPU; most free is 4GiB on n1 GPU 0"),
            std::string::npos) << why.out;
  CliResult gpus = Run({"nodes", "-v"});  // per GPU: 4GiB free of 16GiB, 2 tasks
  EXPECT_NE(gpus.out.find("4GiB"), std::string::npos) << gpus.out;
  OpenGate("end");
  for (uint64_t id : ids) ASSERT_TRUE(WaitState(id, "succeeded"));
  EXPECT_EQ(Run({"logs", std::to_string(ids[0])}).out, "mem=6144 gpu=0\n");
  // The third started only after one of the first two finished.
  const Json third = Task(ids[2]);
  EXPECT_GE(third["started_ms"].get<int64_t>(),
            std::min(Task(ids[0])["finished_ms"].get<int64_t>(),
                     Task(ids[1])["finished_ms"].get<int64_t>()));
}

TEST_F(ClusterTest, AlwaysFailingTaskIsRetriedFailMaxTimesWithDemotionThenFails) {
  StartAgent("n1", "1x16GiB");
  // Scored at admission: CPU 0 (5), 1 GiB GPU memory (4), RAM 0 (5), default 1 h (5):
  // St = 19, Pt = 4. Reading Pt after submission would race the first failure.
  const int64_t pt0 = 4;
  const uint64_t id = Submit({"--gpu-mem", "1GiB", "--", "sh", "-c", "exit 5"});
  ASSERT_TRUE(WaitState(id, "failed"));
  const Json t = Task(id);
  EXPECT_EQ(t["attempts"], 3);  // the first run and FAIL_MAX = 2 retries
  EXPECT_EQ(t["fail_cnt"], 3);
  EXPECT_EQ(t["exit_code"], 5);
  EXPECT_EQ(t["pt"].get<int64_t>(), pt0 + 2);  // demoted on each of its 2 returns from FQ
  EXPECT_NE(t["reason"].get<std::string>().find("failed 3 times"), std::string::npos)
      << t["reason"];
  int retries = 0;
  for (const Json& h : t["history"]) {
    retries += h["reason"].get<std::string>().find("retry") != std::string::npos;
  }
  EXPECT_EQ(retries, 2);
}

TEST_F(ClusterTest, AgentKilledMidTaskItsTaskRunsAgainOnAnotherAgent) {
  StartAgent("a", "1x16GiB");
  const uint64_t id =
      Submit({"--gpus", "1", "--", "sh", "-c", Gated("end", "echo done on $GPUSCHED_NODE")});
  ASSERT_TRUE(WaitState(id, "running"));
  ASSERT_EQ(Task(id)["node"], "a");
  StartAgent("b", "1x16GiB");
  const auto killed = std::chrono::steady_clock::now();
  agents_["a"]->Kill(SIGKILL);
  ASSERT_TRUE(PollUntil([&] { return Task(id)["node"] == "b"; }, kDeadline));
  // Reassigned within the heartbeat timeout (2 s) plus scheduling slack on a loaded machine.
  EXPECT_LT(std::chrono::steady_clock::now() - killed, 15s);
  OpenGate("end");
  ASSERT_TRUE(WaitState(id, "succeeded"));
  const Json t = Task(id);
  EXPECT_EQ(t["attempts"], 2);
  EXPECT_EQ(Run({"logs", std::to_string(id)}).out, "done on b\n");
  const std::string nodes = Run({"nodes"}).out;
  EXPECT_NE(nodes.find("disconnected"), std::string::npos) << nodes;
}

TEST_F(ClusterTest, ServerKilledNineRestartsWithoutLosingOrRepeatingTasks) {
  StartAgent("n1", "4x16GiB");
  const std::string done = path("completed.txt");
  std::set<uint64_t> acked;
  const std::string script = "sleep 0.3; echo $GPUSCHED_TASK_ID >> " + done;
  for (int i = 0; i < 12; ++i) acked.insert(Submit({"--gpus", "1", "--", "sh", "-c", script}));
  ASSERT_TRUE(PollUntil([&] { return !ReadFile(done).empty(); }, kDeadline));
  server_.Kill(SIGKILL);
  StartServer();
  for (int i = 0; i < 4; ++i) acked.insert(Submit({"--gpus", "1", "--", "sh", "-c", script}));
  ASSERT_TRUE(PollUntil(
      [&] {
        auto t = Tasks();
        if (t.size() != acked.size()) return false;
        for (auto& [id, task] : t) {
          if (task["state"] != "succeeded") return false;
        }
        return true;
      },
      kDeadline))
      << Run({"ls"}).out;
  std::multiset<uint64_t> completions;
  std::istringstream in(ReadFile(done));
  for (uint64_t id; in >> id;) completions.insert(id);
  for (uint64_t id : acked) EXPECT_EQ(completions.count(id), 1u) << "task " << id;
  EXPECT_EQ(completions.size(), acked.size());
}

// A task that ends while the server is down is dated when it ended, not when the server
// hears of it: its run time and the GPU-hours charged for it leave the outage out. The agent
// keeps the exit, with the time its supervisor journaled, until the restarted server
// acknowledges it.
TEST_F(ClusterTest, AnExitWhileTheServerIsDownIsDatedWhenItHappened) {
  StartAgent("n1", "1x16GiB");
  const std::string ended = path("ended");
  const uint64_t id =
      Submit({"--gpus", "1", "--", "sh", "-c", Gated("end", "touch '" + ended + "'")});
  ASSERT_TRUE(WaitState(id, "running"));
  server_.Kill(SIGKILL);
  OpenGate("end");
  ASSERT_TRUE(PollUntil([&] { return std::filesystem::exists(ended); }, kDeadline));
  const auto wall_ms = [] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  };
  std::this_thread::sleep_for(3s);  // the outage
  const int64_t restarted = wall_ms();
  StartServer();
  ASSERT_TRUE(WaitState(id, "succeeded")) << Task(id).dump();
  const Json t = Task(id);
  const int64_t finished = t["finished_ms"];
  // It ended about 3 s before the restart (its supervisor journaled the time just after
  // the marker file); dated on arrival it was after the restart.
  EXPECT_LT(finished, restarted - 2'000) << t.dump();
  EXPECT_GE(finished, t["started_ms"].get<int64_t>()) << t.dump();
  // Accounting charges the run, not the outage: well under the 3 s of one GPU.
  const Json acct = Json::parse(Run({"acct", "--json"}).out);
  ASSERT_EQ(acct["teams"].size(), 1u) << acct.dump();
  EXPECT_LT(acct["teams"][0]["gpu_hours"].get<double>() * 3'600'000, 2'500) << acct.dump();
}

// Tasks outlive their agent: an agent killed with -9 and started again on its data dir
// adopts the task its supervisor kept running. The task runs once, is not counted as a
// failure, and its exit (which happened while no agent was watching) is reported.
TEST_F(ClusterTest, AgentRestartedAfterKillNineAdoptsItsRunningTask) {
  // A node timeout long enough that the restart (slow under ASan) never looks like a loss.
  WriteFile(path("server.yaml"),
            "t1: 500ms\nnode_timeout: 60s\ntask_timeout: 60s\nnode_heartbeat: 200ms\n"
            "task_heartbeat: 300ms\nkill_grace: 1s\n");
  server_.Kill(SIGTERM);
  StartServer();
  StartAgent("a", "1x16GiB");
  const std::string runs = path("runs.txt");
  const uint64_t id = Submit({"--gpus", "1", "--retries", "0", "--", "sh", "-c",
                              Gated("end", "echo $GPUSCHED_ATTEMPT >> " + runs)});
  ASSERT_TRUE(WaitState(id, "running"));
  agents_["a"]->Kill(SIGKILL);
  // Its log is on the dead agent's node: the operation fails (1) naming the node; the
  // server itself answered (it said "cannot reach the server", exit 3).
  CliResult logs = Run({"logs", std::to_string(id)});
  EXPECT_EQ(logs.code, 1) << logs.err;
  EXPECT_NE(logs.err.find("is on node a ("), std::string::npos) << logs.err;
  EXPECT_EQ(logs.err.find("cannot reach the server"), std::string::npos) << logs.err;
  OpenGate("end");  // the task ends while its agent is dead
  ASSERT_TRUE(PollUntil([&] { return !ReadFile(runs).empty(); }, kDeadline));
  StartAgent("a", "1x16GiB");
  ASSERT_TRUE(WaitState(id, "succeeded")) << Task(id).dump();
  const Json t = Task(id);
  EXPECT_EQ(t["attempts"], 1);
  EXPECT_EQ(ReadFile(runs), "1\n");
}

TEST_F(ClusterTest, SubmitWithTheSameIdempotencyKeyCreatesOneTask) {
  const uint64_t a = Submit({"--idempotency-key", "nightly-42", "--", "true"});
  const uint64_t b = Submit({"--idempotency-key", "nightly-42", "--", "true"});
  const uint64_t c = Submit({"--", "true"});  // the CLI makes a fresh key per invocation
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_EQ(Tasks().size(), 2u);
}

TEST_F(ClusterTest, MetricsAndHealthz) {
  StartAgent("n1", "2x16GiB");
  ASSERT_TRUE(WaitState(Submit({"--gpu-mem", "2GiB", "--", "true"}), "succeeded"));
  EXPECT_EQ(HttpGet(http_port_, "/healthz"), "ok\n");
  const std::string m = HttpGet(http_port_, "/metrics");
  for (const char* needle :
       {"gpusched_queue_depth{queue=\"main\"} 0", "gpusched_decision_latency_seconds_bucket",
        "gpusched_node_gpu_memory_mib{node=\"n1\",gpu=\"1\",kind=\"total\"} 16384",
        "gpusched_tasks{state=\"succeeded\"} 1", "# TYPE gpusched_decisions_total counter"}) {
    EXPECT_NE(m.find(needle), std::string::npos) << needle << "\n" << m;
  }
}

TEST_F(ClusterTest, CordonDrainAndCancel) {
  StartAgent("n1", "1x16GiB");
  EXPECT_EQ(Run({"cordon", "n1"}).code, 0);
  const uint64_t id = Submit({"--gpus", "1", "--", "sleep", "30"});
  ASSERT_TRUE(PollUntil([&] { return !Task(id)["reason"].get<std::string>().empty() &&
                                     Task(id)["state"] == "pending"; }, kDeadline));
  EXPECT_NE(Run({"why", std::to_string(id)}).out.find("0/1"), std::string::npos);
  EXPECT_EQ(Run({"uncordon", "n1"}).code, 0);
  ASSERT_TRUE(WaitState(id, "running"));
  EXPECT_EQ(Run({"drain", "--evict", "n1"}).code, 0);
  ASSERT_TRUE(WaitState(id, "pending"));
  CliResult c = Run({"cancel", std::to_string(id)});
  EXPECT_EQ(c.code, 0) << c.err;
  EXPECT_EQ(Task(id)["state"], "cancelled");
  EXPECT_EQ(Run({"cancel", std::to_string(id)}).code, 1);  // already cancelled
  EXPECT_EQ(Run({"drain", "nope"}).code, 1);
}

// `bench e2e` as a user runs it, small: every task submitted by the closed-loop clients
// finishes, none is refused, and the JSON carries the keys the benchmark tables quote.
TEST(BenchE2eTest, NoopRunFinishesEveryTaskAndReportsEveryKey) {
  CliResult r = Cli({"bench", "e2e", "--executor", "noop", "--tasks", "300", "--clients", "5",
                     "--agents", "2", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const Json out = Json::parse(r.out);
  EXPECT_EQ(out["tasks"], 300);
  EXPECT_EQ(out["submit_errors"], 0);
  EXPECT_EQ(out["executor"], "noop");
  for (const char* key : {"tasks_per_s", "cpu_ms_per_task", "rpc_limit_per_s", "seconds"}) {
    ASSERT_TRUE(out.contains(key)) << key;
    EXPECT_GT(out[key].get<double>(), 0.0) << key;
  }
  // Whole milliseconds: 0 on a fast machine.
  for (const char* key : {"submit_to_start_p50_ms", "submit_to_start_p99_ms"}) {
    ASSERT_TRUE(out.contains(key)) << key;
    EXPECT_GE(out[key].get<double>(), 0.0) << key;
  }
  EXPECT_LE(out["submit_to_start_p50_ms"].get<double>(),
            out["submit_to_start_p99_ms"].get<double>());
}

}  // namespace
}  // namespace gpusched::testing
