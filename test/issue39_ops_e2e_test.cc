// Issue 39, "A store that disappears is noticed", "task ids and agent-side files carry a
// cluster id" and "Nodes that leave", through the real binaries: state.db removed under a
// running server; a server restarted on a new store, with an agent that ran the old store's
// tasks; `gpusched node rm` (refused with a running task, --force requeues it elsewhere, a
// lost node, non-admins, unknown names, and a removed node stays gone across a restart).

#include <filesystem>

#include "cluster_fixture.h"

namespace gpusched::testing {
namespace {

class Issue39OpsTest : public ClusterTest {
 protected:
  // `node rm` takes --server after `rm` (ClusterTest::Run puts it after the first word).
  CliResult NodeRm(std::vector<std::string> args,
                   const std::map<std::string, std::string>& env = {}) {
    args.insert(args.begin(), {"node", "rm", "--server", server()});
    return Cli(args, env);
  }
  std::set<std::string> NodeNames() {
    std::set<std::string> out;
    CliResult r = Run({"nodes", "--json"});
    if (r.code != 0) return out;
    for (const Json& n : Json::parse(r.out)) out.insert(n["name"].get<std::string>());
    return out;
  }
};

// The server used to go on acknowledging tasks into the unlinked file, all lost at the next
// restart (and task ids restarted at 1).
TEST_F(Issue39OpsTest, Issue39_StateDbRemovedUnderARunningServerRefusesSubmissionsNamingWhy) {
  ASSERT_GT(Submit({"--", "true"}), 0u);
  ASSERT_TRUE(std::filesystem::remove(path("data/state.db")));
  CliResult r = Run({"submit", "--", "true"});
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_EQ(r.out, "");  // no id: nothing acknowledged
  EXPECT_NE(r.err.find("store file " + path("data/state.db") + " was removed"),
            std::string::npos) << r.err;
  EXPECT_NE(r.err.find("restart the server"), std::string::npos) << r.err;
  CliResult keyed = Run({"submit", "--idempotency-key", "k1", "--", "true"});
  EXPECT_EQ(keyed.code, 1);
  EXPECT_NE(keyed.err.find("was removed"), std::string::npos) << keyed.err;
  HttpResult health = HttpRequest(http_port_, "GET", "/healthz");
  EXPECT_EQ(health.status, 503);
  EXPECT_NE(health.body.find("was removed"), std::string::npos) << health.body;
  EXPECT_NE(HttpGet(http_port_, "/metrics").find("gpusched_store_writable 0"), std::string::npos);
  CliResult status = Run({"status", "--json"});
  ASSERT_EQ(status.code, 0) << status.err;
  EXPECT_NE(Json::parse(status.out)["servers"][0]["detail"].get<std::string>().find("was removed"),
            std::string::npos) << status.out;
  EXPECT_NE(ReadFile(path("server.log")).find("this server takes no more writes"),
            std::string::npos);
}

TEST_F(Issue39OpsTest, Issue39_NodeRmRefusesARunningTaskAndForceRequeuesItElsewhere) {
  StartAgent("a", "1x16GiB");
  const uint64_t id = Submit({"--gpus", "1", "--", "sh", "-c", Gated("t", "true")});
  ASSERT_TRUE(WaitState(id, "running"));
  CliResult refused = NodeRm({"a"});
  EXPECT_EQ(refused.code, 1);
  EXPECT_NE(refused.err.find("node a has 1 assigned or running task(s) (" + std::to_string(id)),
            std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find("--force"), std::string::npos) << refused.err;
  EXPECT_TRUE(NodeNames().count("a"));

  StartAgent("b", "1x16GiB");
  agents_["a"]->Kill(SIGKILL);  // the machine went away with its task
  CliResult forced = NodeRm({"a", "--force", "--json"});
  ASSERT_EQ(forced.code, 0) << forced.err;
  const Json j = Json::parse(forced.out);
  EXPECT_EQ(j["node"], "a");
  EXPECT_EQ(j["removed"], true);
  EXPECT_EQ(j["requeued"], Json::array({id}));
  EXPECT_EQ(NodeNames(), std::set<std::string>{"b"});
  ASSERT_TRUE(PollUntil([&] { return Task(id).value("node", "") == "b"; }, kDeadline));
  EXPECT_EQ(Task(id)["fail_cnt"], 0);  // a removal is not the task's failure
  OpenGate("t");
  ASSERT_TRUE(WaitState(id, "succeeded"));

  // After a restart the node is still gone: the store no longer holds it, so the server
  // does not wait for its agent either ("1 nodes" restored: b's).
  server_.Kill(SIGTERM);
  StartServer();
  EXPECT_EQ(NodeNames().count("a"), 0u);
  EXPECT_NE(ReadFile(path("server.log")).find(", 1 nodes,"), std::string::npos)
      << ReadFile(path("server.log"));
}

TEST_F(Issue39OpsTest, Issue39_NodeRmOfALostNodeAndOfAnUnknownOne) {
  StartAgent("c", "1x16GiB");
  StartAgent("d", "1x16GiB");  // alive: with c alone silent, evictions are not held (issue 37)
  agents_["c"]->Kill(SIGKILL);
  ASSERT_TRUE(PollUntil(
      [&] {
        for (const Json& n : Json::parse(Run({"nodes", "--json"}).out)) {
          if (n["name"] == "c" && n.value("lost", false)) return true;
        }
        return false;
      },
      kDeadline));
  CliResult r = NodeRm({"c"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "node c removed\n");
  EXPECT_EQ(NodeNames(), std::set<std::string>{"d"});
  CliResult unknown = NodeRm({"nosuch"});
  EXPECT_EQ(unknown.code, 1);
  EXPECT_NE(unknown.err.find("node nosuch: no such node"), std::string::npos) << unknown.err;
  // REST: the same rules (DELETE /api/v1/nodes/NAME).
  HttpResult rest = HttpRequest(http_port_, "DELETE", "/api/v1/nodes/nosuch",
                                {"Content-Type: application/json"});
  EXPECT_EQ(rest.status, 404) << rest.body;
  EXPECT_NE(rest.body.find("nosuch"), std::string::npos) << rest.body;
}

// Issue 39, "task ids and agent-side files carry a cluster id". A server started on a new
// store numbers its tasks from 1 again; the agent's data dir still holds the old task 1's
// log, which the new task 1 used to append to ("old" then "new"), and the old cluster's
// running tasks were reported into the new one.
class Issue39ClusterTest : public Issue39OpsTest {
 protected:
  // The server again, on a new store (state.db and its WAL removed) and the same port.
  void RestartOnANewStore() {
    server_.Kill(SIGTERM);
    for (const auto& e : std::filesystem::directory_iterator(path("data"))) {
      if (e.path().filename().string().rfind("state.db", 0) == 0) std::filesystem::remove(e);
    }
    StartServer();
  }
  bool Connected(const std::string& node) {
    for (const Json& n : Json::parse(Run({"nodes", "--json"}).out)) {
      if (n["name"] == node && n["connected"] == true && n["available"] == true) return true;
    }
    return false;
  }
  std::string ClusterIdOf(const std::string& agent) {
    std::string id = ReadFile(path(agent + "/cluster_id"));
    if (!id.empty() && id.back() == '\n') id.pop_back();
    return id;
  }
  // Every file under DIR/clusters/ID/logs of agent `agent` whose contents are `text`.
  int ArchivedLogsHolding(const std::string& agent, const std::string& id,
                          const std::string& text) {
    int n = 0;
    const std::string logs = path(agent + "/clusters/" + id + "/logs");
    if (!std::filesystem::is_directory(logs)) return 0;
    for (const auto& e : std::filesystem::directory_iterator(logs)) {
      if (ReadFile(e.path().string()) == text) ++n;
    }
    return n;
  }
};

TEST_F(Issue39ClusterTest, Issue39_ANewStoresTask1NeverReusesTheOldTask1sLog) {
  StartAgent("a", "1x16GiB");
  ASSERT_EQ(Submit({"--", "echo", "old"}), 1u);
  ASSERT_TRUE(WaitState(1, "succeeded"));
  EXPECT_EQ(Run({"logs", "1"}).out, "old\n");
  const std::string old_cluster = ClusterIdOf("a");

  RestartOnANewStore();
  ASSERT_TRUE(PollUntil([&] { return Connected("a"); }, kDeadline)) << ReadFile(path("a.log"));
  ASSERT_EQ(Submit({"--", "echo", "new"}), 1u);  // ids start again at 1
  ASSERT_TRUE(WaitState(1, "succeeded")) << ReadFile(path("a.log"));
  EXPECT_EQ(Run({"logs", "1"}).out, "new\n");  // not "old\nnew\n"
  EXPECT_EQ(old_cluster.size(), 32u) << old_cluster;
  const std::string new_cluster = ClusterIdOf("a");
  EXPECT_EQ(new_cluster.size(), 32u);
  EXPECT_NE(new_cluster, old_cluster);
  EXPECT_EQ(ArchivedLogsHolding("a", old_cluster, "old\n"), 1) << ReadFile(path("a.log"));
}

// The old cluster's task still runs when the agent meets the new store: the server does not
// adopt it (its id is another cluster's), the agent stops it, never reports its exit, and
// moves its log aside before it runs the new cluster's task 1.
TEST_F(Issue39ClusterTest, Issue39_TheOldClustersRunningTaskIsStoppedNotAdoptedNorReported) {
  StartAgent("a", "1x16GiB");
  ASSERT_EQ(Submit({"--", "sh", "-c", "echo old; " + Gated("never", "true")}), 1u);
  ASSERT_TRUE(WaitState(1, "running"));
  const std::string old_cluster = ClusterIdOf("a");

  RestartOnANewStore();
  ASSERT_TRUE(PollUntil([&] { return Connected("a"); }, kDeadline)) << ReadFile(path("a.log"));
  EXPECT_TRUE(Tasks().empty());  // nothing adopted from the old cluster
  ASSERT_TRUE(PollUntil([&] { return ArchivedLogsHolding("a", old_cluster, "old\n") == 1; },
                        kDeadline))
      << ReadFile(path("a.log"));
  EXPECT_NE(ReadFile(path("server.log")).find("comes from cluster " + old_cluster),
            std::string::npos) << ReadFile(path("server.log"));
  ASSERT_EQ(Submit({"--", "echo", "new"}), 1u);
  ASSERT_TRUE(WaitState(1, "succeeded")) << ReadFile(path("a.log"));
  const Json t = Task(1);
  EXPECT_EQ(t["fail_cnt"], 0) << t.dump();  // the old task's kill was not applied to it
  EXPECT_EQ(Run({"logs", "1"}).out, "new\n");
  EXPECT_NE(ReadFile(path("a.log")).find("of the previous cluster ended"), std::string::npos)
      << ReadFile(path("a.log"));
}

class Issue39AuthOpsTest : public AuthClusterTest {};

TEST_F(Issue39AuthOpsTest, Issue39_NodeRmIsForAdminsOnly) {
  StartAgent("a", "1x16GiB");
  const std::string alice = CreateToken("alice", "ml");
  CliResult r = Cli({"node", "rm", "--server", server(), "a"}, {{"GPUSCHED_TOKEN", alice}});
  EXPECT_EQ(r.code, 4) << r.err;
  HttpResult rest = HttpRequest(http_port_, "DELETE", "/api/v1/nodes/a",
                                {"Content-Type: application/json",
                                 "Authorization: Bearer " + alice});
  EXPECT_EQ(rest.status, 403) << rest.body;
  CliResult nodes = Cli({"nodes", "--json", "--server", server()});
  ASSERT_EQ(nodes.code, 0);
  EXPECT_EQ(Json::parse(nodes.out).size(), 1u);  // still there
  CliResult admin = Cli({"node", "rm", "--server", server(), "a", "--json"});
  EXPECT_EQ(admin.code, 0) << admin.err;
}

}  // namespace
}  // namespace gpusched::testing

namespace gpusched::testing {
namespace {

// Issue 39, "SIGHUP (or `gpusched admin reload`) reloads what can change without a restart
// and says what needs one".
class Issue39ReloadTest : public ClusterTest {
 protected:
  static constexpr const char* kBase =
      "t1: 500ms\nt2: 300ms\nfail_max: 2\nnode_timeout: 2s\nnode_lost_after: 2s\n"
      "task_timeout: 4s\nnode_heartbeat: 200ms\ntask_heartbeat: 300ms\nprobe_interval: 1s\n";
  CliResult Reload() { return Cli({"admin", "reload", "--server", server(), "--json"}); }
};

TEST_F(Issue39ReloadTest, Issue39_ReloadAppliesLiveKeysReportsRestartKeysAndABadFileChangesNothing) {
  StartAgent("a", "1x16GiB");
  // Never fits a 1-GPU node; kept pending: with max_placement_failures unlimited it waits.
  const uint64_t id = Submit({"--gpus", "2", "--keep-pending", "--", "true"});
  ASSERT_GT(id, 0u);

  // A bad file: nothing applied, the error names the key and the value.
  WriteFile(path("server.yaml"),
            std::string(kBase) + "kill_grace: banana\nmax_placement_failures: 3\n");
  CliResult bad = Reload();
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.err.find("kill_grace"), std::string::npos) << bad.err;
  EXPECT_NE(bad.err.find("banana"), std::string::npos) << bad.err;
  EXPECT_EQ(Task(id)["state"], "pending");

  // A live key and a restart-only one.
  WriteFile(path("server.yaml"),
            std::string(kBase) + "kill_grace: 3s\nmax_placement_failures: 3\n");
  CliResult good = Reload();
  ASSERT_EQ(good.code, 0) << good.err;
  const Json j = Json::parse(good.out);
  EXPECT_EQ(j["file"], path("server.yaml"));
  EXPECT_EQ(j["applied"], Json::array({"max_placement_failures"}));  // not applied before
  EXPECT_EQ(j["needs_restart"], Json::array({"kill_grace"}));
  ASSERT_TRUE(WaitState(id, "failed"));  // given up after 3 passes without a fitting node
  EXPECT_NE(Task(id)["reason"].get<std::string>().find("gave up after"), std::string::npos);

  // SIGHUP does the same: the restart-only key is reported again until a restart.
  server_.Signal(SIGHUP);
  ASSERT_TRUE(PollUntil(
      [&] {
        return ReadFile(path("server.log")).find("changed but need a restart: kill_grace\n") !=
               ReadFile(path("server.log")).rfind("changed but need a restart: kill_grace\n");
      },
      kDeadline))
      << ReadFile(path("server.log"));
  EXPECT_EQ(Run({"nodes"}).code, 0);  // and the server still serves
}

}  // namespace
}  // namespace gpusched::testing
