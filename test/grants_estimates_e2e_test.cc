// Issue 36, findings 5 and 6, end to end with the real server, agents and CLI under token
// authentication:
//   - priority classes are granted per team (`quota set TEAM --max-priority CLASS`): a
//     submission above its team's grant is refused with exit 4 on gRPC (the CLI), a job file
//     and REST, and preempts nothing; with the grant it preempts;
//   - the GPU-memory table learns only from peaks the agent measured: a task's own peak file
//     (simulated GPUs) cannot raise another user's estimate; `profile ls` / `profile rm` are
//     for admins.

#include <chrono>
#include <sstream>
#include <thread>

#include "cluster_fixture.h"

namespace gpusched::testing {
namespace {


class GrantsTest : public AuthClusterTest {
 protected:
  CliResult RunAs(const std::string& token, std::vector<std::string> args) {
    args.insert(args.begin() + 1, {"--server", server()});
    return Cli(args, {{"GPUSCHED_TOKEN", token}});
  }
  // `quota|profile SUB` take --server after the second word.
  CliResult Admin(std::vector<std::string> args) {
    args.insert(args.begin() + 2, {"--server", server()});
    return Cli(args);
  }
  CliResult AdminAs(const std::string& token, std::vector<std::string> args) {
    args.insert(args.begin() + 2, {"--server", server()});
    return Cli(args, {{"GPUSCHED_TOKEN", token}});
  }
  HttpResult Post(const std::string& url, const std::string& token, const std::string& body) {
    return HttpRequest(http_port_, "POST", url,
                       {"Content-Type: application/json", "Authorization: Bearer " + token},
                       body);
  }
  Json QuotaOf(const std::string& team) {
    CliResult r = Admin({"quota", "ls", "--json"});
    EXPECT_EQ(r.code, 0) << r.err;
    if (r.code != 0) return Json::object();
    for (const Json& t : Json::parse(r.out)) {
      if (t["team"] == team) return t;
    }
    return Json::object();
  }
  bool WasPreempted(uint64_t id) {
    const Json t = Task(id);  // kept: a range over Task(id)["history"] would dangle
    for (const Json& h : t["history"]) {
      if (h.value("reason", "").find("preempt") != std::string::npos) return true;
    }
    return false;
  }
};

TEST_F(GrantsTest, Issue36_HighPriorityNeedsTheTeamsGrantAndOnlyThenPreempts) {
  StartAgent("n1", "1x16GiB");
  const std::string bob = CreateToken("bob", "vision");
  const std::string carol = CreateToken("carol", "nlp");
  // Bob's task holds the only GPU until the test's folder is gone.
  CliResult r = RunAs(bob, {"submit", "--gpus", "1", "--", "sh", "-c",
                            "while [ -d '" + dir_.string() + "' ]; do sleep 0.05; done"});
  ASSERT_EQ(r.code, 0) << r.err;
  const uint64_t held = std::stoull(r.out);
  ASSERT_TRUE(WaitState(held, "running"));
  const size_t tasks_before = Tasks().size();

  // gRPC (the CLI): refused, exit 4, naming the class and the team's grant.
  const std::string refusal =
      "priority high: team nlp may use up to normal (gpusched quota set nlp --max-priority high)";
  r = RunAs(carol, {"submit", "--gpus", "1", "--priority", "high", "--", "true"});
  EXPECT_EQ(r.code, 4) << r.out << r.err;
  EXPECT_TRUE(Has(r.err, refusal)) << r.err;
  // A job file.
  WriteFile(path("job.yaml"), "command: [\"true\"]\ngpus: 1\npriority: high\n");
  r = RunAs(carol, {"submit", "-f", path("job.yaml")});
  EXPECT_EQ(r.code, 4) << r.out << r.err;
  EXPECT_TRUE(Has(r.err, refusal)) << r.err;
  // REST.
  HttpResult rest =
      Post("/api/v1/tasks", carol, R"({"command": ["true"], "gpus": 1, "priority": "high"})");
  EXPECT_EQ(rest.status, 403) << rest.body;
  EXPECT_TRUE(Has(rest.body, refusal)) << rest.body;
  // Nothing was created, nothing was stopped; the default class is hers to use.
  EXPECT_EQ(Tasks().size(), tasks_before);
  EXPECT_EQ(Task(held)["state"], "running");
  EXPECT_FALSE(WasPreempted(held)) << Task(held).dump();
  Json q = QuotaOf("vision");
  EXPECT_EQ(q["granted_priority"], "normal") << q.dump();

  // Granting is for admins; a user cannot grant herself.
  r = AdminAs(carol, {"quota", "set", "nlp", "--max-priority", "high"});
  EXPECT_EQ(r.code, 4) << r.err;
  r = Admin({"quota", "set", "nlp", "--max-priority", "urgent"});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(Has(r.err, "max_priority: \"urgent\" is not a priority class")) << r.err;
  r = Admin({"quota", "set", "nlp", "--max-priority", "high"});
  ASSERT_EQ(r.code, 0) << r.err;
  q = QuotaOf("nlp");
  EXPECT_EQ(q["max_priority"], "high") << q.dump();
  EXPECT_EQ(q["granted_priority"], "high");
  EXPECT_EQ(q["borrow_gpus"], -1);  // the grant alone keeps the implicit quota
  EXPECT_EQ(q["guaranteed_gpus"], 0);

  // With the grant, the same submission is taken and preempts bob's task.
  r = RunAs(carol, {"submit", "--gpus", "1", "--priority", "high", "--", "true"});
  ASSERT_EQ(r.code, 0) << r.err;
  const uint64_t urgent = std::stoull(r.out);
  ASSERT_TRUE(WaitState(urgent, "succeeded")) << Task(urgent).dump();
  EXPECT_TRUE(WasPreempted(held)) << Task(held).dump();

  // The grant is stored with the quota.
  server_.Kill(SIGTERM);
  StartServer();
  EXPECT_EQ(QuotaOf("nlp")["max_priority"], "high");
}

class EstimatesTest : public GrantsTest {
 protected:
  void SetUp() override {
    GrantsTest::SetUp();
    WriteFile(path("gpu-memory.yaml"), "rows:\n  - {model: resnet50, mib: 6GiB}\n");
    server_.Kill(SIGTERM);
    server_flags_.insert(server_flags_.end(), {"--memory-table", path("gpu-memory.yaml")});
  }
  // A task of the resnet50 profile that says its peak was `mib` in its peak file.
  uint64_t SubmitClaimingPeak(const std::string& token, int mib) {
    CliResult r = RunAs(token, {"submit", "--profile", "resnet50", "--", "sh", "-c",
                                "echo " + std::to_string(mib) + " > $GPUSCHED_PEAK_MIB_FILE"});
    EXPECT_EQ(r.code, 0) << r.err;
    return r.code == 0 ? std::stoull(r.out) : 0;
  }
};

TEST_F(EstimatesTest, Issue36_TaskWrittenPeakCannotRaiseAnotherUsersEstimate) {
  StartServer();
  StartAgent("n1", "1x16GiB");
  const std::string mallory = CreateToken("mallory", "x");
  const std::string alice = CreateToken("alice", "y");
  const uint64_t poison = SubmitClaimingPeak(mallory, 16000);
  ASSERT_TRUE(WaitState(poison, "succeeded")) << Task(poison).dump();

  CliResult r = RunAs(alice, {"submit", "--profile", "resnet50", "--", "true"});
  ASSERT_EQ(r.code, 0) << r.err;
  const uint64_t victim = std::stoull(r.out);
  ASSERT_TRUE(WaitState(victim, "succeeded")) << Task(victim).dump();
  EXPECT_EQ(Task(victim)["gpu_mem_mib"], 6144);
  EXPECT_EQ(Task(victim)["mem_source"], "table");
  r = Admin({"profile", "ls", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(Json::parse(r.out), Json::array()) << r.out;
}

TEST_F(EstimatesTest, Issue36_ProfileLsAndRmAreForAdminsAndRmIsDurable) {
  // The demo setting: task-written peaks are learned (simulated GPUs measure nothing).
  WriteFile(path("server.yaml"),
            ReadFile(path("server.yaml")) + "learn_task_written_peaks: true\n");
  StartServer();
  StartAgent("n1", "1x16GiB");
  const std::string alice = CreateToken("alice", "y");
  const uint64_t t = SubmitClaimingPeak(alice, 7000);
  ASSERT_TRUE(WaitState(t, "succeeded")) << Task(t).dump();

  CliResult r = Admin({"profile", "ls", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  Json ls = Json::parse(r.out);
  ASSERT_EQ(ls.size(), 1u) << ls.dump();
  EXPECT_EQ(ls[0]["key"], "resnet50");
  EXPECT_EQ(ls[0]["recent_peaks_mib"], Json::array({7000}));
  EXPECT_EQ(ls[0]["estimate_mib"], 7700);
  r = Admin({"profile", "ls"});
  EXPECT_TRUE(Has(r.out, "resnet50")) << r.out;

  // A user may neither list nor forget.
  r = AdminAs(alice, {"profile", "ls"});
  EXPECT_EQ(r.code, 4) << r.err;
  EXPECT_TRUE(Has(r.err, "profile ls is for admins only")) << r.err;
  r = AdminAs(alice, {"profile", "rm", "resnet50"});
  EXPECT_EQ(r.code, 4) << r.err;
  EXPECT_EQ(Json::parse(Admin({"profile", "ls", "--json"}).out).size(), 1u);

  r = Admin({"profile", "rm", "vgg16"});
  EXPECT_NE(r.code, 0);
  EXPECT_TRUE(Has(r.err, "profile \"vgg16\": nothing learned for it")) << r.err;
  r = Admin({"profile", "rm", "resnet50"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(Has(r.out, "profile resnet50: forgot 1 peaks; its tasks now get 6GiB")) << r.out;

  // Forgotten for good: after a restart the next task gets the table's row.
  server_.Kill(SIGKILL);
  StartServer();
  EXPECT_EQ(Json::parse(Admin({"profile", "ls", "--json"}).out), Json::array());
  r = RunAs(alice, {"submit", "--profile", "resnet50", "--", "true"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(Task(std::stoull(r.out))["gpu_mem_mib"], 6144);
}

#ifdef GPUSCHED_FAKE_NVML_DIR
// The measured path: an agent on "real" GPUs (the test-only fake NVML, reading its process
// list from a file) whose driver shows 9000 MiB held by task 1's own process learns that
// peak, marked as measured, and the next task of the profile gets it plus headroom. The
// agent finds the process's task by its cgroup (issue 35), so the process is the task's.
TEST_F(EstimatesTest, Issue36_APeakTheAgentMeasuredIsLearned) {
  StartServer();
  setenv("FAKE_NVML_GPUS", "H200:16384", 1);
  setenv("FAKE_NVML_PROCS_FILE", path("procs").c_str(), 1);
  setenv("LD_LIBRARY_PATH", GPUSCHED_FAKE_NVML_DIR, 1);
  std::vector<std::string> args = {"agent",     "--server",   server(),   "--name",
                                   "g1",        "--data-dir", path("g1"), "--run-as-self"};
  for (const std::string& f : AgentAuthFlags("g1")) args.push_back(f);
  agents_["g1"] = std::make_unique<Proc>(args, path("g1.log"));
  for (const char* v : {"FAKE_NVML_GPUS", "FAKE_NVML_PROCS_FILE", "LD_LIBRARY_PATH"}) {
    unsetenv(v);
  }
  const std::string alice = CreateToken("alice", "y");
  const std::string pid_file = path("task.pid"), gate = path("task.gate");
  CliResult r = RunAs(alice, {"submit", "--profile", "resnet50", "--", "sh", "-c",
                              "echo $$ > '" + pid_file + "'; while [ ! -e '" + gate +
                                  "' ]; do sleep 0.1; done"});
  ASSERT_EQ(r.code, 0) << r.err;
  const uint64_t id = std::stoull(r.out);
  EXPECT_EQ(id, 1u);
  pid_t pid = 0;
  ASSERT_TRUE(PollUntil([&] {
    std::istringstream in(ReadFile(pid_file));
    return static_cast<bool>(in >> pid);
  }, kDeadline)) << Task(id).dump() << ReadFile(path("g1.log"));
  WriteFile(path("procs"), std::to_string(pid) + ":0:9000");
  // The watchdog samples NVML twice a heartbeat (1 s): give it a few samples.
  std::this_thread::sleep_for(std::chrono::seconds(3));
  WriteFile(gate, "");
  const bool done = WaitState(id, "succeeded");
  ASSERT_TRUE(done) << Task(id).dump() << ReadFile(path("g1.log"));
  r = Admin({"profile", "ls", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const Json ls = Json::parse(r.out);
  ASSERT_EQ(ls.size(), 1u) << ls.dump() << ReadFile(path("g1.log"));
  EXPECT_EQ(ls[0]["recent_peaks_mib"], Json::array({9000}));
  EXPECT_EQ(ls[0]["estimate_mib"], 9900);
}
#endif

}  // namespace
}  // namespace gpusched::testing
