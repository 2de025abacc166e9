// Issue 37, patient and correct node loss, through the real binaries: agent restarts, server
// and agent pauses (SIGSTOP), two agents under one name, and steps of the wall clock of one
// process (libfaketime, CLOCK_REALTIME only).
//
// Timings are scaled down from the issue's (node_timeout 10 s, node_lost_after 5 min;
// pauses of 15 s, 35 s, 45 s): node_timeout 1-2 s and node_lost_after 3-6 s, each pause
// chosen on the same side of them as the issue's.

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>

#include <sstream>
#include <thread>

#include "cluster_fixture.h"

namespace gpusched::testing {
namespace {

class NodeLossE2eTest : public ClusterTest {
 protected:
  // Restarts the server with `node_timeout` and `node_lost_after` (and short periods).
  void Restart(const std::string& node_timeout, const std::string& lost_after) {
    WriteFile(path("server.yaml"),
              "t1: 500ms\nt2: 300ms\nfail_max: 3\nnode_timeout: " + node_timeout +
                  "\nnode_lost_after: " + lost_after +
                  "\ntask_timeout: 4s\nnode_heartbeat: 200ms\ntask_heartbeat: 300ms\n"
                  "kill_grace: 1s\n");
    server_.Kill(SIGTERM);
    StartServer();
  }
  // A task that logs "start ATTEMPT NODE" to runs.txt, waits for gate `gate`, then logs
  // "end ATTEMPT"; stopped (SIGTERM) it logs "stopped ATTEMPT".
  uint64_t SubmitLogged(const std::string& gate) {
    const std::string runs = path("runs.txt");
    const std::string body =
        "echo \"start $GPUSCHED_TASK_ID $GPUSCHED_ATTEMPT $GPUSCHED_NODE\" >> " + runs +
        "; trap 'echo \"stopped $GPUSCHED_TASK_ID $GPUSCHED_ATTEMPT\" >> " + runs +
        "; exit 143' TERM; " + Gated(gate, "echo \"end $GPUSCHED_TASK_ID $GPUSCHED_ATTEMPT\" >> " + runs);
    return Submit({"--gpus", "1", "--", "sh", "-c", body});
  }
  // Restarts the server with these timings and runs one gated task ("end") on agent "a".
  uint64_t RunOnA(const std::string& node_timeout, const std::string& lost_after) {
    Restart(node_timeout, lost_after);
    StartAgent("a", "1x16GiB");
    const uint64_t id = SubmitLogged("end");
    EXPECT_TRUE(WaitState(id, "running"));
    return id;
  }
  int Count(const std::string& needle) {
    const std::string text = ReadFile(path("runs.txt"));
    int n = 0;
    for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) {
      ++n;
    }
    return n;
  }
  bool AllRunning(const std::vector<uint64_t>& ids) {
    for (uint64_t id : ids) {
      if (Task(id).value("state", "") != "running") return false;
    }
    return true;
  }
  // Each task succeeded on its first attempt with no failure counted, and ran once.
  void ExpectRanOnce(const std::vector<uint64_t>& ids) {
    for (uint64_t id : ids) {
      const Json t = Task(id);
      EXPECT_EQ(t["state"], "succeeded") << t.dump();
      EXPECT_EQ(t["attempts"], 1) << t.dump();
      EXPECT_EQ(t["fail_cnt"], 0) << t.dump();
      EXPECT_EQ(Count("start " + std::to_string(id) + " "), 1) << ReadFile(path("runs.txt"));
    }
  }
};

// Issue 37 "must show": an agent killed (kill -9) and restarted after more than node_timeout
// but less than node_lost_after (the issue's 12-15 s blip against 10 s / 5 min: here 3 s
// against 2 s / 6 s): its task is adopted, attempts unchanged, no failure counted.
TEST_F(NodeLossE2eTest, Issue37_AgentRestartedAfterNodeTimeoutBeforeNodeLostAfterKeepsItsTask) {
  const uint64_t id = RunOnA("2s", "6s");
  ASSERT_FALSE(HasFailure());
  StartAgent("b", "1x16GiB");  // somewhere else to run it: a re-run would show
  agents_["a"]->Kill(SIGKILL);
  std::this_thread::sleep_for(3s);  // past node_timeout
  EXPECT_EQ(Task(id)["node"], "a");
  StartAgent("a", "1x16GiB");
  OpenGate("end");
  ASSERT_TRUE(WaitState(id, "succeeded")) << Task(id).dump();
  ExpectRanOnce({id});
}

// The issue's server paused 15 s and 35 s (node_timeout 10 s, node_lost_after 5 min): here
// 2 s and 4 s against 1 s / 3 s. Tasks that end during the second pause are kept as
// successes; nothing runs twice.
TEST_F(NodeLossE2eTest, Issue37_ServerPausedPastNodeTimeoutAndNodeLostAfterRerunsNothing) {
  Restart("1s", "3s");
  StartAgent("a", "2x16GiB");
  StartAgent("b", "2x16GiB");
  std::vector<uint64_t> early, late;
  for (int i = 0; i < 2; ++i) early.push_back(SubmitLogged("early"));
  for (int i = 0; i < 2; ++i) late.push_back(SubmitLogged("late"));
  std::vector<uint64_t> all = early;
  all.insert(all.end(), late.begin(), late.end());
  ASSERT_TRUE(PollUntil([&] { return AllRunning(all); }, kDeadline));
  server_.Signal(SIGSTOP);
  std::this_thread::sleep_for(2s);  // past node_timeout
  server_.Signal(SIGCONT);
  std::this_thread::sleep_for(1s);
  EXPECT_TRUE(AllRunning(all));
  server_.Signal(SIGSTOP);
  OpenGate("early");  // they end while the server is paused
  std::this_thread::sleep_for(4s);  // past node_lost_after
  server_.Signal(SIGCONT);
  ASSERT_TRUE(PollUntil([&] { return Task(early[0])["state"] == "succeeded" &&
                                     Task(early[1])["state"] == "succeeded"; },
                        kDeadline))
      << Task(early[0]).dump();
  EXPECT_TRUE(AllRunning(late));
  OpenGate("late");
  for (uint64_t id : late) ASSERT_TRUE(WaitState(id, "succeeded")) << Task(id).dump();
  ExpectRanOnce(all);
  EXPECT_NE(ReadFile(path("server.log")).find("did not run for"), std::string::npos);
}

// The issue's agent paused 45 s: here past node_lost_after 4 s (node_timeout 1 s). Its task
// is re-placed only after node_lost_after; on waking the agent stops the stale copy first.
TEST_F(NodeLossE2eTest, Issue37_AgentPausedPastNodeLostAfterIsReplacedOnlyThenAndStopsItsCopy) {
  const uint64_t id = RunOnA("1s", "4s");
  ASSERT_FALSE(HasFailure());
  StartAgent("b", "1x16GiB");
  const auto paused = std::chrono::steady_clock::now();
  agents_["a"]->Signal(SIGSTOP);
  std::this_thread::sleep_for(2s);  // past node_timeout: unreachable, the task stays
  EXPECT_EQ(Task(id)["node"], "a");
  EXPECT_EQ(Task(id)["attempts"], 1);
  const std::string nodes = Run({"nodes"}).out;
  EXPECT_NE(nodes.find("unreachable"), std::string::npos) << nodes;
  ASSERT_TRUE(PollUntil([&] { return Task(id)["node"] == "b"; }, kDeadline));
  // node_lost_after from its last heartbeat, which came one period (200 ms) before the pause,
  // or more when a loaded machine delayed the agent (CI saw 3.65 s): well after node_timeout
  // (1 s), when the code before issue 37 re-placed it.
  EXPECT_GE(std::chrono::steady_clock::now() - paused, 3s);
  ASSERT_TRUE(PollUntil([&] { return Count("start " + std::to_string(id) + " 2 b") == 1; },
                        kDeadline));
  std::this_thread::sleep_for(500ms);
  agents_["a"]->Signal(SIGCONT);
  ASSERT_TRUE(PollUntil([&] { return Count("stopped " + std::to_string(id) + " 1") == 1; },
                        kDeadline))
      << ReadFile(path("runs.txt")) << ReadFile(path("a.log"));
  const std::string log = ReadFile(path("a.log"));
  EXPECT_NE(log.find("stopping 1 stale task copies"), std::string::npos) << log;
  OpenGate("end");
  ASSERT_TRUE(WaitState(id, "succeeded"));
  EXPECT_EQ(Task(id)["attempts"], 2);
  EXPECT_EQ(Count("end " + std::to_string(id) + " 1"), 0) << ReadFile(path("runs.txt"));
}

// The issue's two agents under one name replaced each other about once a second. The second
// is refused, naming the first's address, until the first falls silent.
TEST_F(NodeLossE2eTest, Issue37_SecondAgentUnderALiveNodesNameIsRefusedNamingTheFirst) {
  const uint64_t id = RunOnA("1s", "3s");
  ASSERT_FALSE(HasFailure());
  std::string address;
  for (const Json& n : Json::parse(Run({"nodes", "--json"}).out)) {
    if (n["name"] == "a") address = n["address"];
  }
  ASSERT_FALSE(address.empty());
  Proc twin({"agent", "--server", server(), "--name", "a", "--gpus", "1x16GiB", "--simulate",
             "--data-dir", path("a-twin")},
            path("twin.log"));
  ASSERT_TRUE(PollUntil([&] { return ReadFile(path("twin.log")).find("refused by") !=
                                     std::string::npos; },
                        kDeadline))
      << ReadFile(path("twin.log"));
  const std::string said = ReadFile(path("twin.log"));
  EXPECT_NE(said.find("node a is alive"), std::string::npos) << said;
  EXPECT_NE(said.find(address), std::string::npos) << said;
  std::this_thread::sleep_for(2s);  // the twin keeps retrying; the first keeps its node
  EXPECT_EQ(Task(id)["state"], "running");
  EXPECT_EQ(Task(id)["attempts"], 1);
  EXPECT_EQ(ReadFile(path("a.log")).find("lost"), std::string::npos) << ReadFile(path("a.log"));
  // The first falls silent: the twin gets the name.
  agents_["a"]->Signal(SIGSTOP);
  EXPECT_TRUE(PollUntil([&] { return ReadFile(path("twin.log")).find("connected to") !=
                                     std::string::npos; },
                        kDeadline))
      << ReadFile(path("twin.log"));
  agents_["a"]->Signal(SIGCONT);
  OpenGate("end");
}

// Steps of the wall clock (CLOCK_REALTIME only, through libfaketime) of the server and of an
// agent: +1 h and -1 h each. No node is lost, nothing runs twice, passes keep coming.
TEST_F(NodeLossE2eTest, Issue37_WallClockStepsOfServerAndAgentChangeNothing) {
  const char* lib = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";
  if (access(lib, R_OK) != 0) GTEST_SKIP() << "libfaketime not installed (scripts/install-deps)";
  const std::string server_time = path("server.faketime"), agent_time = path("agent.faketime");
  WriteFile(server_time, "+0\n");
  WriteFile(agent_time, "+0\n");
  auto faked = [&](const std::string& file, const std::function<void()>& start) {
    setenv("LD_PRELOAD", lib, 1);
    setenv("FAKETIME_TIMESTAMP_FILE", file.c_str(), 1);
    setenv("FAKETIME_DONT_FAKE_MONOTONIC", "1", 1);
    setenv("FAKETIME_CACHE_DURATION", "0", 1);
    setenv("ASAN_OPTIONS", "verify_asan_link_order=0:detect_leaks=0", 1);
    start();
    for (const char* v : {"LD_PRELOAD", "FAKETIME_TIMESTAMP_FILE", "FAKETIME_DONT_FAKE_MONOTONIC",
                          "FAKETIME_CACHE_DURATION", "ASAN_OPTIONS"}) {
      unsetenv(v);
    }
  };
  // node_lost_after = node_timeout: any silence the server believed would re-run tasks. 3 s
  // against an hour's step (with 2 s, one CI run lost the unfaked node b, 12 s in).
  WriteFile(path("server.yaml"),
            "t1: 500ms\nt2: 300ms\nnode_timeout: 3s\nnode_lost_after: 3s\ntask_timeout: 4s\n"
            "node_heartbeat: 200ms\ntask_heartbeat: 300ms\nkill_grace: 1s\n");
  server_.Kill(SIGTERM);
  faked(server_time, [&] { StartServer(); });
  faked(agent_time, [&] { StartAgent("a", "2x16GiB"); });
  StartAgent("b", "2x16GiB");
  std::vector<uint64_t> ids;
  for (int i = 0; i < 4; ++i) ids.push_back(SubmitLogged("end"));
  ASSERT_TRUE(PollUntil([&] { return AllRunning(ids); }, kDeadline));
  for (const auto& [file, step] : std::vector<std::pair<std::string, std::string>>{
           {server_time, "+3600"}, {server_time, "-3600"}, {agent_time, "-3600"},
           {agent_time, "+3600"}}) {
    WriteFile(file, step + "\n");
    std::this_thread::sleep_for(3500ms);  // past node_timeout and node_lost_after
    EXPECT_TRUE(AllRunning(ids)) << file << " " << step;
  }
  // Passes keep coming an hour behind: a new task starts.
  const uint64_t more = Submit({"--", "true"});
  EXPECT_TRUE(WaitState(more, "succeeded"));
  OpenGate("end");
  for (uint64_t id : ids) ASSERT_TRUE(WaitState(id, "succeeded")) << Task(id).dump();
  ExpectRanOnce(ids);
}

}  // namespace
}  // namespace gpusched::testing
