// Issue 36, findings 1 and 8, end to end: a real `gpusched server --auth token` with two users
// (alice, bob) and an admin; the real CLI, raw gRPC and raw HTTP. Another user reads no
// environment of a task (show, ls --json, REST, gRPC GetTask, ListTasks, Watch), --export
// never sends the CLI's token, GPUSCHED_* names are refused at submission on every door,
// private_data hides another user's command and working directory, /metrics wants a token.

#include <grpcpp/grpcpp.h>

#include "cluster_fixture.h"
#include "gpusched/v1/gpusched.grpc.pb.h"
#include "rpc/channel.h"

namespace gpusched::testing {
namespace {

const std::string kSecret = "alice-secret-4f1d9c";

class SecretsTest : public AuthClusterTest {
 protected:
  std::vector<std::string> WithServer(std::vector<std::string> args) {
    args.insert(args.begin() + 1, {"--server", server()});
    return args;
  }
  CliResult RunAs(const std::string& token, const std::vector<std::string>& args,
                  std::map<std::string, std::string> env = {}) {
    env["GPUSCHED_TOKEN"] = token;
    return Cli(WithServer(args), env);
  }
  uint64_t SubmitAs(const std::string& token, std::vector<std::string> args,
                    std::map<std::string, std::string> env = {}) {
    args.insert(args.begin(), "submit");
    CliResult r = RunAs(token, args, std::move(env));
    EXPECT_EQ(r.code, 0) << r.err;
    return r.code == 0 ? std::stoull(r.out) : 0;
  }
  std::unique_ptr<v1::Scheduler::Stub> Stub() {
    return v1::Scheduler::NewStub(rpc::MakeChannel(server()));
  }
  static void As(grpc::ClientContext& ctx, const std::string& token) {
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    ctx.AddMetadata("authorization", "Bearer " + token);
  }
  // Everything gRPC hands `token` about task `id`: GetTask, ListTasks and Watch's first
  // message, in their wire bytes (strings appear there as they are).
  std::string GrpcViews(const std::string& token, uint64_t id) {
    auto stub = Stub();
    std::string all;
    {
      grpc::ClientContext ctx;
      As(ctx, token);
      v1::GetTaskRequest req;
      req.set_id(id);
      v1::Task t;
      EXPECT_TRUE(stub->GetTask(&ctx, req, &t).ok());
      all += t.SerializeAsString();
    }
    {
      grpc::ClientContext ctx;
      As(ctx, token);
      v1::ListTasksResponse page;
      EXPECT_TRUE(stub->ListTasks(&ctx, v1::ListTasksRequest(), &page).ok());
      all += page.SerializeAsString();
    }
    for (bool by_id : {true, false}) {
      grpc::ClientContext ctx;
      As(ctx, token);
      v1::WatchRequest req;
      if (by_id) req.add_ids(id);
      auto reader = stub->Watch(&ctx, req);
      v1::Task t;
      EXPECT_TRUE(reader->Read(&t));
      all += t.SerializeAsString();
      ctx.TryCancel();
      while (reader->Read(&t)) {
      }
      reader->Finish();
    }
    return all;
  }
  // Everything `token` reads about task `id` through the CLI (show, show --json, ls --json),
  // REST (the task, the listing, the queues) and gRPC (GrpcViews), in one text.
  std::string AllViews(const std::string& token, uint64_t id) {
    const std::string i = std::to_string(id);
    std::string all;
    for (const std::vector<std::string>& cmd : std::vector<std::vector<std::string>>{
             {"show", i}, {"show", i, "--json"}, {"ls", "--all", "--json"}}) {
      CliResult r = RunAs(token, cmd);
      EXPECT_EQ(r.code, 0) << cmd[0] << ": " << r.err;
      all += r.out;
    }
    for (const std::string& url : {"/api/v1/tasks/" + i, std::string("/api/v1/tasks"),
                                   std::string("/api/v1/queues")}) {
      HttpResult r = Http("GET", url, token);
      EXPECT_EQ(r.status, 200) << url << ": " << r.body;
      all += r.body;
    }
    return all + GrpcViews(token, id);
  }
  HttpResult Http(const std::string& method, const std::string& url, const std::string& token,
                  const std::string& body = "") {
    std::vector<std::string> headers;
    if (!token.empty()) headers.push_back("Authorization: Bearer " + token);
    if (method == "POST") headers.push_back("Content-Type: application/json");
    return HttpRequest(http_port_, method, url, headers, body);
  }
  // The server again, with `line` added to its config file.
  void RestartWith(const std::string& line) {
    server_.Kill(SIGTERM);
    WriteFile(path("server.yaml"), ReadFile(path("server.yaml")) + line + "\n");
    StartServer();
  }
};

TEST_F(SecretsTest, Issue36_AnotherUserReadsNoEnvironmentOnAnyPathButTheOwnerAndAnAdminDo) {
  const std::string alice = CreateToken("alice", "ml");
  const std::string bob = CreateToken("bob", "ml");
  // A job file's env: (as every version takes it); --export=VAR sends one the same way.
  WriteFile(path("job.yaml"), "command: [\"true\"]\nenv: {MY_SECRET: " + kSecret + "}\n");
  const uint64_t id = SubmitAs(alice, {"-f", path("job.yaml")});
  ASSERT_NE(id, 0u);
  const uint64_t exported =
      SubmitAs(alice, {"--export=MY_SECRET", "--", "true"}, {{"MY_SECRET", kSecret}});
  EXPECT_EQ(AllViews(bob, exported).find(kSecret), std::string::npos);
  const std::string i = std::to_string(id);

  // bob: show, show --json, ls --json, REST task, listing and queues, gRPC GetTask,
  // ListTasks and Watch.
  const std::string bob_sees = AllViews(bob, id);
  EXPECT_EQ(bob_sees.find(kSecret), std::string::npos) << bob_sees;
  EXPECT_EQ(bob_sees.find("MY_SECRET"), std::string::npos) << bob_sees;  // nor its name
  {
    grpc::ClientContext ctx;
    As(ctx, bob);
    v1::GetTaskRequest req;
    req.set_id(id);
    v1::Task t;
    ASSERT_TRUE(Stub()->GetTask(&ctx, req, &t).ok());
    EXPECT_TRUE(t.spec().env().empty());
    EXPECT_EQ(std::vector<std::string>(t.redacted().begin(), t.redacted().end()),
              std::vector<std::string>{"env"});
  }
  const Json bob_show = Json::parse(RunAs(bob, {"show", i, "--json"}).out);
  EXPECT_TRUE(bob_show["env"].empty()) << bob_show;
  EXPECT_EQ(bob_show["redacted"], Json::array({"env"})) << bob_show;

  // The owner and an admin read it on the same paths.
  EXPECT_EQ(Json::parse(RunAs(alice, {"show", i, "--json"}).out)["env"]["MY_SECRET"], kSecret);
  EXPECT_EQ(Json::parse(Http("GET", "/api/v1/tasks/" + i, admin_).body)["env"]["MY_SECRET"],
            kSecret);
  EXPECT_NE(GrpcViews(alice, id).find(kSecret), std::string::npos);
  EXPECT_NE(GrpcViews(admin_, id).find(kSecret), std::string::npos);
}

TEST_F(SecretsTest, Issue36_ExportWithoutAListSendsTheEnvironmentButNeverTheToken) {
  const std::string alice = CreateToken("alice", "ml");
  const uint64_t id = SubmitAs(alice, {"--export", "--", "true"},
                               {{"MY_SETTING", "on"}, {"GPUSCHED_SERVER", server()}});
  ASSERT_NE(id, 0u);
  auto stub = Stub();
  grpc::ClientContext ctx;
  As(ctx, admin_);
  v1::GetTaskRequest req;
  req.set_id(id);
  v1::Task t;
  ASSERT_TRUE(stub->GetTask(&ctx, req, &t).ok());
  const auto& env = t.spec().env();
  EXPECT_EQ(env.count("MY_SETTING"), 1u) << t.spec().env().size() << " variables";  // --export = ALL
  for (const auto& [name, value] : env) {
    EXPECT_NE(name.rfind("GPUSCHED_", 0), 0u) << name << " travelled with the task";
    EXPECT_EQ(value.find(alice), std::string::npos) << name << " carries alice's token";
  }
  // Without --export, nothing of the caller's environment travels (as before).
  const uint64_t plain = SubmitAs(alice, {"--", "true"}, {{"MY_SETTING", "on"}});
  grpc::ClientContext ctx2;
  As(ctx2, admin_);
  req.set_id(plain);
  ASSERT_TRUE(stub->GetTask(&ctx2, req, &t).ok());
  EXPECT_TRUE(t.spec().env().empty()) << t.spec().env().size() << " variables";
}

TEST_F(SecretsTest, Issue36_AGpuschedNameIsRefusedOnGrpcRestCliAndJobFileNamingIt) {
  const std::string alice = CreateToken("alice", "ml");
  const std::string name = "GPUSCHED_TASK_CREDS";
  // gRPC: INVALID_ARGUMENT naming it.
  auto stub = Stub();
  grpc::ClientContext ctx;
  As(ctx, alice);
  v1::SubmitRequest req;
  req.mutable_spec()->add_command("id");
  (*req.mutable_spec()->mutable_env())[name] = "0:0:";
  v1::SubmitResponse resp;
  const grpc::Status g = stub->Submit(&ctx, req, &resp);
  EXPECT_EQ(g.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << g.error_message();
  EXPECT_NE(g.error_message().find("env: " + name + " is reserved"), std::string::npos)
      << g.error_message();
  // REST: 400 naming it.
  const HttpResult rest =
      Http("POST", "/api/v1/tasks", alice, R"({"command": ["id"], "env": {")" + name +
                                               R"(": "0:0:"}})");
  EXPECT_EQ(rest.status, 400) << rest.body;
  EXPECT_NE(rest.body.find(name + " is reserved"), std::string::npos) << rest.body;
  // CLI: exit 2 naming it, from a flag and from a job file.
  CliResult flag = RunAs(alice, {"submit", "--export=" + name + "=0:0:", "--", "id"});
  EXPECT_EQ(flag.code, 2) << flag.err;
  EXPECT_NE(flag.err.find(name + " is reserved"), std::string::npos) << flag.err;
  WriteFile(path("job.yaml"), "command: [id]\nenv:\n  " + name + ": \"0:0:\"\n");
  CliResult file = RunAs(alice, {"submit", "-f", path("job.yaml")});
  EXPECT_EQ(file.code, 2) << file.err;
  EXPECT_NE(file.err.find(name + " is reserved"), std::string::npos) << file.err;
  // None of them made a task.
  EXPECT_EQ(Json::parse(RunAs(alice, {"ls", "--all", "--json"}).out).size(), 0u);
}

TEST_F(SecretsTest, Issue36_PrivateDataHidesAnotherUsersCommandWorkdirAndLogs) {
  RestartWith("private_data: true");
  const std::string alice = CreateToken("alice", "ml");
  const std::string bob = CreateToken("bob", "ml");
  const std::string word = "private-word-8c2e";
  const std::string workdir = path("alice-project");
  std::filesystem::create_directories(workdir);
  const uint64_t id = SubmitAs(alice, {"--workdir", workdir, "--", "echo", word});
  ASSERT_NE(id, 0u);
  const std::string i = std::to_string(id);
  const std::string bob_sees = AllViews(bob, id);
  EXPECT_EQ(bob_sees.find(word), std::string::npos) << bob_sees;
  EXPECT_EQ(bob_sees.find(workdir), std::string::npos) << bob_sees;
  const Json bob_ls = Json::parse(RunAs(bob, {"ls", "--all", "--json"}).out);
  ASSERT_EQ(bob_ls.size(), 1u);  // the task is still listed, with its owner
  EXPECT_EQ(bob_ls[0]["user"], "alice");
  EXPECT_EQ(bob_ls[0]["redacted"], Json::array({"env", "command", "workdir"}));
  EXPECT_EQ(RunAs(bob, {"logs", i}).code, 4);
  EXPECT_EQ(Http("GET", "/api/v1/tasks/" + i + "/logs", bob).status, 403);
  // Its owner and an admin see all of it.
  EXPECT_NE(RunAs(alice, {"show", i}).out.find(word), std::string::npos);
  EXPECT_NE(Http("GET", "/api/v1/tasks/" + i, admin_).body.find(workdir), std::string::npos);
  // /metrics names no team to bob; an admin's token reads the team series.
  ASSERT_EQ(Cli({"quota", "set", "ml", "--gpus", "1", "--server", server()}).code, 0);
  const HttpResult bob_metrics = Http("GET", "/metrics", bob);
  EXPECT_EQ(bob_metrics.status, 200);
  EXPECT_EQ(bob_metrics.body.find("team="), std::string::npos) << bob_metrics.body;
  EXPECT_NE(bob_metrics.body.find("gpusched_tasks{"), std::string::npos);
  EXPECT_NE(Http("GET", "/metrics", admin_).body.find("team=\"ml\""), std::string::npos);
}

TEST_F(SecretsTest, Issue36_MetricsWithoutATokenIs401UnderAuthentication) {
  const HttpResult none = Http("GET", "/metrics", "");
  EXPECT_EQ(none.status, 401) << none.body;
  EXPECT_EQ(none.body.find("gpusched_"), std::string::npos) << none.body;
  EXPECT_EQ(Http("GET", "/metrics", "gst_0123456789abcdef_" + std::string(64, 'a')).status, 401);
  const std::string alice = CreateToken("alice", "ml");
  const HttpResult with = Http("GET", "/metrics", alice);
  EXPECT_EQ(with.status, 200);
  EXPECT_NE(with.body.find("gpusched_tasks"), std::string::npos);
  // Without private_data every token reads the team series, as before.
  ASSERT_EQ(Cli({"quota", "set", "ml", "--gpus", "1", "--server", server()}).code, 0);
  EXPECT_NE(Http("GET", "/metrics", alice).body.find("team=\"ml\""), std::string::npos);
}

TEST_F(ClusterTest, Issue36_WithAuthenticationOffMetricsStayOpen) {
  EXPECT_EQ(HttpRequest(http_port_, "GET", "/metrics").status, 200);
}

}  // namespace
}  // namespace gpusched::testing
