// Team quotas and accounting end to end (issue 11): the real server, agents and CLI.
// `quota set` / `quota ls --json` (kept across a restart), a borrower's task stopped with
// SIGTERM and requeued (not failed) when the owner team submits, and `acct --json` totals.
//
// The server runs with `--auth token`: a task's team and user are those of the token it was
// submitted with (AuthClusterTest makes one per user), the quota commands go as the admin.

#include <functional>
#include <thread>

#include "cluster_fixture.h"
#include "gpusched/v1/gpusched.grpc.pb.h"
#include "rpc/channel.h"

namespace gpusched::testing {
namespace {

class QuotaClusterTest : public AuthClusterTest {
 protected:
  uint64_t SubmitAs(const std::string& team, const std::string& user, int gpus,
                    const std::string& script,
                    const std::function<void(v1::TaskSpec&)>& more = nullptr) {
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
    if (more) more(*s);
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

  // Runs until stopped (a SIGTERM is written to term-NAME), or until the test's folder is
  // gone (tasks outlive their agents).
  std::string Borrower(const std::string& name) {
    return "trap 'echo term >> \"" + path("term-" + name) +
           "\"; exit 143' TERM; echo $GPUSCHED_ATTEMPT >> \"" + path("runs-" + name) +
           "\"; while [ -d '" + dir_.string() + "' ]; do sleep 0.05; done";
  }
  bool Stopped(const std::string& name) { return !ReadFile(path("term-" + name)).empty(); }

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
  // Each ran at least the 1.5 s the test slept: 1 GPU and 2 GPUs for its own run time (the
  // two starts may be seconds apart on a loaded machine, so no fixed ratio between them).
  const double run_a = Task(alice)["elapsed_ms"].get<double>() / 3'600'000.0;
  const double run_b = Task(bob)["elapsed_ms"].get<double>() / 3'600'000.0;
  EXPECT_GE(ha, 1.5 / 3600);
  EXPECT_LT(ha, 60.0 / 3600);
  EXPECT_NEAR(ha, 1 * run_a, 0.05 / 3600) << r.out;
  EXPECT_NEAR(hb, 2 * run_b, 0.1 / 3600) << r.out;
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

// Issue 37, point 4: reclaim stopped the borrower's newest tasks wherever they ran. With the
// newest two on a node vision may not use (a taint), all three newest were stopped (two for
// nothing, and those two restarted there). Now only the task on the node vision can use.
TEST_F(QuotaClusterTest, Issue37_ReclaimStopsOnlyATaskOnANodeTheClaimantCanUse) {
  StartAgent("plain", "2x16GiB");
  ASSERT_EQ(Quota({"set", "vision", "--gpus", "1"}).code, 0);
  ASSERT_EQ(Quota({"set", "nlp", "--gpus", "0", "--borrow", "unlimited"}).code, 0);
  auto tolerating = [](v1::TaskSpec& s) {
    v1::Toleration* t = s.add_tolerations();
    t->set_key("dedicated");
    t->set_value("nlp");
  };
  std::map<std::string, uint64_t> nlp;
  for (const std::string name : {"p1", "p2"}) {
    nlp[name] = SubmitAs("nlp", "nora", 1, Borrower(name), tolerating);
    ASSERT_TRUE(WaitState(nlp[name], "running"));
  }
  StartAgent("tainted", "2x16GiB", {"--taint", "dedicated=nlp:NoSchedule"});
  for (const std::string name : {"t1", "t2"}) {  // the newest, on the tainted node
    nlp[name] = SubmitAs("nlp", "nora", 1, Borrower(name), tolerating);
    ASSERT_TRUE(WaitState(nlp[name], "running"));
    ASSERT_EQ(Task(nlp[name])["node"], "tainted") << Task(nlp[name]).dump();
  }

  const uint64_t v = SubmitAs("vision", "vera", 1, Gated("v", "true"));
  ASSERT_TRUE(WaitState(v, "running")) << Task(v).dump();
  EXPECT_EQ(Task(v)["node"], "plain");
  ASSERT_TRUE(PollUntil([&] { return Stopped("p2"); }, kDeadline));
  for (const std::string name : {"p1", "t1", "t2"}) {
    const Json t = Task(nlp[name]);
    EXPECT_EQ(t["state"], "running") << name << ": " << t.dump();
    EXPECT_EQ(t["attempts"], 1) << name;
    EXPECT_FALSE(Stopped(name)) << name;
  }
  const Json p2 = Task(nlp["p2"]);
  EXPECT_EQ(p2["fail_cnt"], 0) << p2.dump();
  Json q = Quotas();
  EXPECT_EQ(q["vision"]["used_gpus"], 1) << q.dump();
  EXPECT_EQ(q["nlp"]["used_gpus"], 3);
}

// Issue 37, point 4: vision's unused guarantee of 2 waited forever while nlp borrowed 2, its
// newest tasks one on each node (stopping them left 1 GPU free on each; then nlp no longer
// borrowed and nothing was stopped). Now two tasks on one node are stopped, within a pass,
// and `why` says so.
TEST_F(QuotaClusterTest, Issue37_ATeamBelowItsGuaranteeGetsItsGpusBack) {
  StartAgent("n1", "2x16GiB", {"--label", "host=n1"});
  StartAgent("n2", "2x16GiB", {"--label", "host=n2"});
  ASSERT_EQ(Quota({"set", "vision", "--gpus", "2"}).code, 0);
  ASSERT_EQ(Quota({"set", "nlp", "--gpus", "2", "--borrow", "2"}).code, 0);
  std::vector<uint64_t> nlp;
  for (int i = 0; i < 4; ++i) {  // n1, n2, n1, n2
    const std::string host = i % 2 == 0 ? "n1" : "n2";
    nlp.push_back(SubmitAs("nlp", "nora", 1, Borrower("b" + std::to_string(i)),
                           [&](v1::TaskSpec& s) { (*s.mutable_node_selector())["host"] = host; }));
    ASSERT_TRUE(WaitState(nlp.back(), "running"));
  }

  const uint64_t v = SubmitAs("vision", "vera", 2, Gated("v", "true"));
  ASSERT_TRUE(WaitState(v, "running")) << Task(v).dump();
  EXPECT_EQ(Task(v)["node"], "n1");
  CliResult why = Run({"why", std::to_string(v), "--json"});
  ASSERT_EQ(why.code, 0) << why.err;
  EXPECT_NE(Json::parse(why.out)["summary"].get<std::string>().find(
                "team vision at 0/2 guaranteed GPUs; reclaiming 2 from nlp, ready in 30s"),
            std::string::npos)
      << why.out;
  // The two on n1 were stopped and wait again, no failure counted; n2's run on.
  ASSERT_TRUE(PollUntil([&] { return Stopped("b0") && Stopped("b2"); }, kDeadline));
  for (int i : {0, 2}) {
    const Json t = Task(nlp[i]);
    EXPECT_EQ(t["state"], "pending") << t.dump();
    EXPECT_EQ(t["fail_cnt"], 0);
  }
  for (int i : {1, 3}) {
    EXPECT_EQ(Task(nlp[i])["state"], "running");
    EXPECT_FALSE(Stopped("b" + std::to_string(i)));
  }
  Json q = Quotas();
  EXPECT_EQ(q["vision"]["used_gpus"], 2) << q.dump();
  EXPECT_EQ(q["nlp"]["used_gpus"], 2);
}

}  // namespace
}  // namespace gpusched::testing
