// Team quotas and accounting end to end (issue 11): the real server, agents and CLI.
// `quota set` / `quota ls --json` (kept across a restart), a borrower's task stopped with
// SIGTERM and requeued (not failed) when the owner team submits, and `acct --json` totals.
//
// The server runs with `--auth token`: a task's team and user are those of the token it was
// submitted with (AuthClusterTest makes one per user), the quota commands go as the admin.

#include <thread>

#include "cluster_fixture.h"
#include "gpusched/v1/gpusched.grpc.pb.h"
#include "rpc/channel.h"

namespace gpusched::testing {
namespace {

class QuotaClusterTest : public AuthClusterTest {
 protected:
  uint64_t SubmitAs(const std::string& team, const std::string& user, int gpus,
                    const std::string& script) {
    std::string& token = tokens_[user];
    if (token.empty()) token = CreateToken(user, team);
    auto stub = v1::Scheduler::NewStub(rpc::MakeChannel(server()));
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer " + token);
    v1::SubmitRequest req;
    v1::TaskSpec* s = req.mutable_spec();
    s->set_gpus(gpus);
    s->set_name(team + "-" + user);
    for (const char* a : {"sh", "-c"}) s->add_command(a);
    s->add_command(script);
    v1::SubmitResponse resp;
    grpc::Status st = stub->Submit(&ctx, req, &resp);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return resp.id();
  }
  // `quota set|ls` take --server after the second word.
  CliResult Quota(std::vector<std::string> args) {
    args.insert(args.begin(), "quota");
    args.insert(args.begin() + 2, {"--server", server()});
    return Cli(args);
  }
  Json Quotas() {
    CliResult r = Quota({"ls", "--json"});
    EXPECT_EQ(r.code, 0) << r.err;
    Json by_team = Json::object();
    if (r.code == 0) {
      for (const Json& t : Json::parse(r.out)) by_team[t["team"].get<std::string>()] = t;
    }
    return by_team;
  }

  std::map<std::string, std::string> tokens_;  // user -> token
};

TEST_F(QuotaClusterTest, QuotaSetAndLsJsonSurviveARestart) {
  CliResult r = Quota({"set", "a", "--gpus", "2", "--gpu-mem", "32GiB", "--borrow", "1"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("team a: 2 GPUs guaranteed (32GiB GPU memory), borrows up to 1 more"),
            std::string::npos)
      << r.out;
  ASSERT_EQ(Quota({"set", "b", "--gpus", "0", "--borrow", "unlimited"}).code, 0);
  Json q = Quotas();
  ASSERT_TRUE(q.contains("a")) << q.dump();
  EXPECT_EQ(q["a"]["guaranteed_gpus"], 2);
  EXPECT_EQ(q["a"]["guaranteed_gpu_mem_mib"], 32768);
  EXPECT_EQ(q["a"]["borrow_gpus"], 1);
  EXPECT_EQ(q["a"]["used_gpus"], 0);
  EXPECT_EQ(q["a"]["borrowed_gpus"], 0);
  EXPECT_EQ(q["a"]["pending"], 0);
  EXPECT_EQ(q["b"]["borrow_gpus"], -1);

  // Bad flags name the flag and the value; nothing is stored.
  r = Quota({"set", "a", "--gpus", "two"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--gpus: \"two\" is not a GPU count"), std::string::npos) << r.err;
  r = Quota({"set", "a", "--gpus", "1", "--borrow=lots"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--borrow: \"lots\""), std::string::npos) << r.err;
  r = Quota({"set", "a", "--gpus", "1", "--gpu-mem", "12XB"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--gpu-mem"), std::string::npos) << r.err;
  r = Quota({"set", "a b", "--gpus", "1"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("team: \"a b\""), std::string::npos) << r.err;
  // A team no token can name (token create --team) was accepted.
  r = Quota({"set", "x/y", "--gpus", "1"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("team: \"x/y\" must be 1-64 letters"), std::string::npos) << r.err;

  server_.Kill(SIGTERM);
  StartServer();
  q = Quotas();
  EXPECT_EQ(q["a"]["guaranteed_gpus"], 2) << q.dump();
  EXPECT_EQ(q["a"]["guaranteed_gpu_mem_mib"], 32768);
  EXPECT_EQ(q["b"]["borrow_gpus"], -1);
}

TEST_F(QuotaClusterTest, BorrowersTaskGetsSigtermAndIsRequeuedWhenTheOwnerSubmits) {
  StartAgent("n1", "2x16GiB");
  ASSERT_EQ(Quota({"set", "a", "--gpus", "2"}).code, 0);
  ASSERT_EQ(Quota({"set", "b", "--gpus", "0", "--borrow", "2"}).code, 0);
  // Runs until stopped, or until the test's folder is gone (tasks outlive their agents).
  auto borrower = [&](const std::string& name) {
    return "trap 'echo term >> \"" + path("term-" + name) +
           "\"; exit 143' TERM; echo $GPUSCHED_ATTEMPT >> \"" + path("runs-" + name) +
           "\"; while [ -d '" + dir_.string() + "' ]; do sleep 0.05; done";
  };
  const uint64_t b1 = SubmitAs("b", "bob", 1, borrower("b1"));
  ASSERT_TRUE(WaitState(b1, "running"));
  const uint64_t b2 = SubmitAs("b", "bob", 1, borrower("b2"));
  ASSERT_TRUE(WaitState(b2, "running"));  // b borrows both GPUs

  const uint64_t a1 = SubmitAs("a", "ann", 1, Gated("a1", "true"));
  ASSERT_TRUE(WaitState(a1, "running")) << Task(a1).dump();
  // b2, the newest borrowed task, got SIGTERM (its trap ran) and waits again; b1 runs on.
  ASSERT_TRUE(PollUntil([&] { return !ReadFile(path("term-b2")).empty(); }, kDeadline));
  Json t = Task(b2);
  EXPECT_EQ(t["state"], "pending") << t.dump();
  EXPECT_EQ(t["fail_cnt"], 0);
  bool preempted = false;  // the reason may have moved on to "no capacity" since
  for (const Json& h : t["history"]) {
    preempted |= h["state"] == "pending" &&
                 h["reason"] == "preempted: team a reclaims its guaranteed GPUs";
  }
  EXPECT_TRUE(preempted) << t.dump();
  EXPECT_EQ(Task(b1)["state"], "running");
  EXPECT_TRUE(ReadFile(path("term-b1")).empty());
  Json q = Quotas();
  EXPECT_EQ(q["a"]["used_gpus"], 1);
  EXPECT_EQ(q["b"]["used_gpus"], 1);
  EXPECT_EQ(q["b"]["borrowed_gpus"], 1);
  EXPECT_EQ(q["b"]["pending"], 1);
  // Authentication is on: /metrics wants a token (issue 36).
  const std::string metrics =
      HttpRequest(http_port_, "GET", "/metrics", {"Authorization: Bearer " + admin_}).body;
  EXPECT_NE(metrics.find("gpusched_team_gpus_in_use{team=\"a\"} 1"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("gpusched_quota_reclaims_total 1"), std::string::npos);
  EXPECT_NE(metrics.find("gpusched_team_gpu_seconds_total{team=\"b\"}"), std::string::npos);

  // The owner is done: the requeued task runs again (a second attempt, not a failure).
  OpenGate("a1");
  ASSERT_TRUE(WaitState(a1, "succeeded"));
  ASSERT_TRUE(WaitState(b2, "running"));
  t = Task(b2);
  EXPECT_EQ(t["attempts"], 2);
  EXPECT_EQ(t["fail_cnt"], 0);
  EXPECT_EQ(ReadFile(path("runs-b2")), "1\n2\n");
}

TEST_F(QuotaClusterTest, AcctJsonTotalsPerUserAndTeam) {
  StartAgent("n1", "4x16GiB");
  const uint64_t alice = SubmitAs("a", "alice", 1, Gated("end", "true"));
  const uint64_t bob = SubmitAs("b", "bob", 2, Gated("end", "true"));
  ASSERT_TRUE(WaitState(alice, "running"));
  ASSERT_TRUE(WaitState(bob, "running"));
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  OpenGate("end");
  ASSERT_TRUE(WaitState(alice, "succeeded"));
  ASSERT_TRUE(WaitState(bob, "succeeded"));

  CliResult r = Run({"acct", "--since", "1h", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const Json j = Json::parse(r.out);
  std::map<std::string, Json> users, teams;
  for (const Json& u : j["users"]) users[u["user"].get<std::string>()] = u;
  for (const Json& t : j["teams"]) teams[t["team"].get<std::string>()] = t;
  ASSERT_EQ(users.size(), 2u) << r.out;
  ASSERT_EQ(teams.size(), 2u) << r.out;
  EXPECT_EQ(users["alice"]["team"], "a");
  EXPECT_EQ(users["bob"]["team"], "b");
  EXPECT_EQ(users["alice"]["tasks"], 1);
  const double ha = users["alice"]["gpu_hours"], hb = users["bob"]["gpu_hours"];
  // Each ran about 1.5 s (at least the 1.5 s the test slept): 1 GPU and 2 GPUs.
  EXPECT_GE(ha, 1.5 / 3600);
  EXPECT_LT(ha, 30.0 / 3600);
  EXPECT_GT(hb / ha, 1.4);
  EXPECT_LT(hb / ha, 2.8);
  EXPECT_DOUBLE_EQ(teams["a"]["gpu_hours"].get<double>(), ha);
  EXPECT_DOUBLE_EQ(users["bob"]["gpu_mem_gib_hours"].get<double>(), 16 * hb);  // whole 16 GiB GPUs

  r = Run({"acct", "--user", "alice", "--since", "2020-01-01", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(Json::parse(r.out)["users"].size(), 1u) << r.out;
  r = Run({"acct", "--since", "yesterday"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--since: \"yesterday\" is not a date"), std::string::npos) << r.err;
  r = Run({"acct", "--since", "1h", "--until", "2h"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--since: \"1h\" is not before --until (\"2h\")"), std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace gpusched::testing
