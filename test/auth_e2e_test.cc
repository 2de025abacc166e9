// Users, tokens and authorization end to end: a real `gpusched server --auth token` (SQLite in
// a fresh data directory), real agents, the real CLI, raw gRPC and raw HTTP calls.

#include <grpcpp/grpcpp.h>
#include <pwd.h>
#include <sys/stat.h>

#include <cstdlib>

#include "cluster_fixture.h"
#include "gpusched/v1/gpusched.grpc.pb.h"
#include "rpc/channel.h"

namespace gpusched::testing {
namespace {

const std::string kWellFormedUnknownToken = "gst_0123456789abcdef_" + std::string(64, 'a');

class AuthTest : public AuthClusterTest {
 protected:
  // --server after the (sub)command: `token create --server X`, `ls --server X`.
  std::vector<std::string> WithServer(std::vector<std::string> args) {
    const size_t at = args.size() > 1 && args[0] == "token" ? 2 : 1;
    args.insert(args.begin() + static_cast<std::ptrdiff_t>(at), {"--server", server()});
    return args;
  }
  // As the admin (GPUSCHED_TOKEN of this process).
  CliResult Run(const std::vector<std::string>& args) { return Cli(WithServer(args)); }
  // `token` "" = none at all.
  CliResult RunAs(const std::string& token, const std::vector<std::string>& args) {
    return Cli(WithServer(args), {{"GPUSCHED_TOKEN", token}});
  }
  std::string TokenId(const std::string& user) {
    for (const Json& t : Json::parse(Run({"token", "ls", "--json"}).out)) {
      if (t["user"] == user) return t["id"].get<std::string>();
    }
    return "";
  }
  uint64_t SubmitAs(const std::string& token, std::vector<std::string> args) {
    args.insert(args.begin(), "submit");
    CliResult r = RunAs(token, args);
    EXPECT_EQ(r.code, 0) << r.err;
    return r.code == 0 ? std::stoull(r.out) : 0;
  }
  // A raw gRPC ListTasks with `authorization` metadata ("" = none).
  grpc::StatusCode GrpcList(const std::string& authorization) {
    auto stub = v1::Scheduler::NewStub(rpc::MakeChannel(server()));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    if (!authorization.empty()) ctx.AddMetadata("authorization", authorization);
    v1::ListTasksRequest req;
    v1::ListTasksResponse resp;
    return stub->ListTasks(&ctx, req, &resp).error_code();
  }
  HttpResult Get(const std::string& url, const std::string& token) {
    std::vector<std::string> headers;
    if (!token.empty()) headers.push_back("Authorization: Bearer " + token);
    return HttpRequest(http_port_, "GET", url, headers);
  }
  HttpResult Post(const std::string& url, const std::string& token, const std::string& body) {
    std::vector<std::string> headers{"Content-Type: application/json"};
    if (!token.empty()) headers.push_back("Authorization: Bearer " + token);
    return HttpRequest(http_port_, "POST", url, headers, body);
  }
};

TEST_F(AuthTest, GrpcCallsWithoutAWrongOrARevokedTokenAreUnauthenticatedAndTheCliExits4) {
  EXPECT_EQ(GrpcList(""), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(GrpcList("Bearer " + kWellFormedUnknownToken), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(GrpcList("Bearer not-a-token"), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(GrpcList("Basic YWRtaW46eA=="), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(GrpcList("Bearer " + admin_), grpc::StatusCode::OK);

  CliResult none = RunAs("", {"ls"});
  EXPECT_EQ(none.code, 4) << none.err;
  EXPECT_NE(none.err.find("not authenticated by " + server()), std::string::npos) << none.err;
  EXPECT_NE(none.err.find("set GPUSCHED_TOKEN"), std::string::npos) << none.err;
  EXPECT_NE(none.err.find("gpusched token create --user NAME"), std::string::npos) << none.err;
  CliResult garbage = RunAs("gst_\x01 x", {"ls"});
  EXPECT_EQ(garbage.code, 4) << garbage.err;
  EXPECT_NE(garbage.err.find("control or non-ASCII character"), std::string::npos) << garbage.err;
  CliResult wrong = RunAs(kWellFormedUnknownToken, {"submit", "--", "true"});
  EXPECT_EQ(wrong.code, 4) << wrong.err;
  EXPECT_NE(wrong.err.find("refused"), std::string::npos) << wrong.err;
  EXPECT_EQ(wrong.err.find(kWellFormedUnknownToken), std::string::npos);  // never echoed

  const std::string alice = CreateToken("alice", "ml");
  EXPECT_EQ(RunAs(alice, {"ls"}).code, 0);
  EXPECT_EQ(GrpcList("Bearer " + alice), grpc::StatusCode::OK);
  const std::string id = TokenId("alice");
  ASSERT_FALSE(id.empty());
  CliResult revoke = Run({"token", "revoke", id});
  ASSERT_EQ(revoke.code, 0) << revoke.err;
  // Refused at once, by the next call.
  EXPECT_EQ(RunAs(alice, {"ls"}).code, 4);
  EXPECT_EQ(GrpcList("Bearer " + alice), grpc::StatusCode::UNAUTHENTICATED);
  // A token file works like the variable.
  const std::string config = path("config");
  std::filesystem::create_directories(config + "/gpusched");
  WriteFile(config + "/gpusched/token", admin_ + "\n");
  CliResult from_file = Cli({"ls", "--server", server()},
                            {{"GPUSCHED_TOKEN", ""}, {"XDG_CONFIG_HOME", config}});
  EXPECT_EQ(from_file.code, 0) << from_file.err;
}

TEST_F(AuthTest, RestCallsWithoutAWrongOrARevokedTokenGet401WithTheUsualErrorShape) {
  HttpResult none = Get("/api/v1/tasks", "");
  ASSERT_EQ(none.status, 401) << none.body;
  const Json e = Json::parse(none.body)["error"];
  EXPECT_EQ(e["status"], 401);
  EXPECT_EQ(e["code"], "unauthenticated");
  EXPECT_FALSE(e["message"].get<std::string>().empty());
  EXPECT_EQ(Get("/api/v1/tasks", kWellFormedUnknownToken).status, 401);
  EXPECT_EQ(Get("/api/v1/nodes", "garbage").status, 401);
  EXPECT_EQ(Get("/api/v1/events", "").status, 401);
  EXPECT_EQ(Post("/api/v1/tasks", "", R"({"command": ["true"]})").status, 401);
  EXPECT_EQ(Get("/api/v1/tasks", admin_).status, 200);
  const std::string alice = CreateToken("alice", "ml");
  EXPECT_EQ(Get("/api/v1/nodes", alice).status, 200);
  ASSERT_EQ(Run({"token", "revoke", TokenId("alice")}).code, 0);
  EXPECT_EQ(Get("/api/v1/nodes", alice).status, 401);
  // Open without a token: health, the dashboard's files, the API description. /metrics
  // wants one (issue 36: secrets_e2e_test.cc).
  EXPECT_EQ(Get("/healthz", "").status, 200);
  EXPECT_EQ(Get("/metrics", "").status, 401);
  EXPECT_EQ(Get("/", "").status, 200);
  EXPECT_EQ(Get("/api/v1/openapi.json", "").status, 200);
}

TEST_F(AuthTest, AUserCannotCancelOrReadTheLogsOfAnothersTaskButItsOwnerAndAnAdminCan) {
  StartAgent("n1", "2x16GiB");
  const std::string alice = CreateToken("alice", "ml");
  const std::string bob = CreateToken("bob", "ml");
  const uint64_t done = SubmitAs(alice, {"--", "sh", "-c", "echo hi-from-alice"});
  ASSERT_TRUE(WaitState(done, "succeeded"));
  const std::string d = std::to_string(done);

  CliResult bob_logs = RunAs(bob, {"logs", d});
  EXPECT_EQ(bob_logs.code, 4) << bob_logs.err;
  EXPECT_NE(bob_logs.err.find("bob may not read the logs of task " + d), std::string::npos)
      << bob_logs.err;
  EXPECT_EQ(bob_logs.out.find("hi-from-alice"), std::string::npos);
  EXPECT_EQ(RunAs(alice, {"logs", d}).out, "hi-from-alice\n");
  EXPECT_EQ(Run({"logs", d}).out, "hi-from-alice\n");  // the admin
  EXPECT_EQ(Get("/api/v1/tasks/" + d + "/logs", bob).status, 403);
  EXPECT_EQ(Get("/api/v1/tasks/" + d + "/logs?follow=1", bob).status, 403);
  EXPECT_EQ(Get("/api/v1/tasks/" + d + "/logs", alice).status, 200);

  const uint64_t running = SubmitAs(alice, {"--", "sh", "-c", Gated("end", "true")});
  const std::string r = std::to_string(running);
  CliResult bob_cancel = RunAs(bob, {"cancel", r});
  EXPECT_EQ(bob_cancel.code, 4) << bob_cancel.err;
  EXPECT_NE(bob_cancel.err.find("bob may not cancel task " + r), std::string::npos)
      << bob_cancel.err;
  HttpResult rest_cancel = Post("/api/v1/tasks/" + r + "/cancel", bob, "{}");
  EXPECT_EQ(rest_cancel.status, 403) << rest_cancel.body;
  EXPECT_EQ(Json::parse(rest_cancel.body)["error"]["code"], "permission_denied");
  // `cancel --state` leaves the tasks of others alone instead of failing on them.
  CliResult bob_all = RunAs(bob, {"cancel", "--state", "pending,assigned,running"});
  EXPECT_EQ(bob_all.code, 0) << bob_all.err;
  EXPECT_NE(bob_all.err.find("left alone: "), std::string::npos) << bob_all.err;
  EXPECT_NE(bob_all.err.find("other user"), std::string::npos)
      << bob_all.err;
  EXPECT_NE(Task(running)["state"], "cancelled");
  CliResult owner_cancel = RunAs(alice, {"cancel", r});
  EXPECT_EQ(owner_cancel.code, 0) << owner_cancel.err;
  const uint64_t other = SubmitAs(alice, {"--", "sh", "-c", Gated("end", "true")});
  CliResult admin_cancel = Run({"cancel", std::to_string(other)});
  EXPECT_EQ(admin_cancel.code, 0) << admin_cancel.err;

  for (const std::vector<std::string>& admin_only : std::vector<std::vector<std::string>>{
           {"cordon", "n1"}, {"uncordon", "n1"}, {"drain", "n1"},
           {"token", "create", "--user", "eve"}, {"token", "ls"}, {"token", "revoke", "x"}}) {
    CliResult refused = RunAs(bob, admin_only);
    EXPECT_EQ(refused.code, 4) << admin_only[0] << ": " << refused.err;
    EXPECT_NE(refused.err.find("for admins only"), std::string::npos) << refused.err;
  }
  EXPECT_EQ(Run({"cordon", "n1"}).code, 0);
  OpenGate("end");
}

TEST_F(AuthTest, TokensSurviveARestartAndTheirSecretIsNowhereInTheDataDirectory) {
  struct stat st {};
  ASSERT_EQ(stat(path("data/admin-token").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  const std::string alice = CreateToken("alice", "ml");
  const std::string id = TokenId("alice");
  SubmitAs(alice, {"--", "true"});  // more writes after the token's
  server_.Kill(SIGKILL);
  StartServer();
  EXPECT_EQ(RunAs(alice, {"ls"}).code, 0);
  EXPECT_EQ(Trimmed(ReadFile(path("data/admin-token"))), admin_);  // not made again
  EXPECT_EQ(Json::parse(Run({"token", "ls", "--json"}).out).size(), 2u);

  const std::string secret = alice.substr(alice.rfind('_') + 1);
  ASSERT_EQ(secret.size(), 64u);
  bool id_seen = false;
  for (const auto& f : std::filesystem::recursive_directory_iterator(path("data"))) {
    if (!f.is_regular_file()) continue;
    const std::string bytes = ReadFile(f.path().string());
    EXPECT_EQ(bytes.find(secret), std::string::npos) << f.path();
    id_seen |= bytes.find(id) != std::string::npos;
  }
  EXPECT_TRUE(id_seen) << "the token's record should be in the data directory";
}

TEST_F(AuthTest, TasksRecordTheUserAndTeamOfTheirTokenNotWhatTheClientClaims) {
  const std::string alice = CreateToken("alice", "ml");
  const uint64_t id = SubmitAs(alice, {"--", "true"});
  // What a client says about itself counts only with authentication off.
  auto stub = v1::Scheduler::NewStub(rpc::MakeChannel(server()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  ctx.AddMetadata("authorization", "Bearer " + alice);
  ctx.AddMetadata("x-gpusched-user", "mallory");
  v1::SubmitRequest req;
  req.mutable_spec()->add_command("true");
  req.mutable_spec()->set_user("mallory");
  req.mutable_spec()->set_team("admins");
  v1::SubmitResponse resp;
  ASSERT_TRUE(stub->Submit(&ctx, req, &resp).ok());
  const HttpResult rest = Post("/api/v1/tasks", alice, R"({"command": ["true"]})");
  ASSERT_EQ(rest.status, 201) << rest.body;
  const uint64_t rest_id = Json::parse(rest.body)["id"].get<uint64_t>();
  for (uint64_t task : {id, resp.id(), rest_id}) {
    const Json t = Tasks().at(task);
    EXPECT_EQ(t["user"], "alice") << task;
    EXPECT_EQ(t["team"], "ml") << task;
  }
  CliResult ls = Run({"ls"});
  EXPECT_NE(ls.out.find("USER"), std::string::npos) << ls.out;
  EXPECT_NE(ls.out.find("TEAM"), std::string::npos) << ls.out;
  EXPECT_NE(ls.out.find("alice"), std::string::npos) << ls.out;
  CliResult show = Run({"show", std::to_string(id)});
  EXPECT_NE(show.out.find("user:"), std::string::npos) << show.out;
  EXPECT_NE(show.out.find("alice"), std::string::npos) << show.out;
}

TEST_F(ClusterTest, WithAuthOffTasksRecordTheCliUsersUnixNameInTeamDefault) {
  const passwd* pw = getpwuid(geteuid());
  ASSERT_NE(pw, nullptr);
  const uint64_t id = Submit({"--", "true"});
  const Json t = Tasks().at(id);
  EXPECT_EQ(t["user"], pw->pw_name);
  EXPECT_EQ(t["team"], "default");
  // Everything stays allowed without tokens, cordon included.
  StartAgent("n1", "1x16GiB");
  EXPECT_EQ(Run({"cordon", "n1"}).code, 0);
}

}  // namespace
}  // namespace gpusched::testing
