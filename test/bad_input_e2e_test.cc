// Bad input on every interface gets a clear error and a trustworthy exit code, and the server
// keeps serving: CLI flags, YAML specs, raw gRPC fields, garbage bytes on the port.

#include <algorithm>
#include <limits>

#include "cluster_fixture.h"
#include "gpusched/v1/gpusched.grpc.pb.h"
#include "rpc/channel.h"

namespace gpusched::testing {
namespace {

TEST_F(ClusterTest, BadCliFlagsAndSpecsAreUsageErrors) {
  StartAgent("n1", "1x16GiB");
  struct Case {
    std::vector<std::string> args;
    int code;
    std::string needle;
  };
  WriteFile(path("typo.yaml"), "name: x\ngpus: 1\ngpu_memory: 6GiB\ncommand: [\"true\"]\n");
  WriteFile(path("selector.yaml"), "node_selector: {\"zone!\": a}\ncommand: [\"true\"]\n");
  const std::vector<Case> cases = {
      {{"submit", "--gpu-mem", "12XB", "--", "true"}, 2, "--gpu-mem"},
      {{"submit", "--gpus", "-1", "--", "true"}, 2, "--gpus"},
      {{"submit", "--gpus", "1"}, 2, "command"},
      {{"submit", "--duration", "soon", "--", "true"}, 2, "--duration"},
      // Values the wire would have turned into others: a gang of 0 nodes ran on 1, a
      // 0-byte share ran with no GPU at all.
      {{"submit", "--nodes", "0", "--gpus", "1", "--", "true"}, 2, "nodes: must be >= 1, got 0"},
      {{"submit", "--tasks-per-node", "0", "--", "true"}, 2, "tasks_per_node: must be >= 1"},
      {{"submit", "--gpu-mem", "0", "--", "true"}, 2, "--gpu-mem: \"0\" is no memory"},
      {{"submit", "--cpu", "2x", "--", "true"}, 2, "--cpu: \"2x\" is not a CPU amount"},
      {{"submit", "-f", path("selector.yaml")}, 2, "node_selector: \"zone!=a\""},
      {{"submit", "--gpus", "9", "--", "true"}, 2, "gpus"},  // no node has 9 GPUs
      {{"submit", "-f", path("typo.yaml")}, 2, "gpu_memory"},
      {{"submit", "-f", path("missing.yaml")}, 2, "missing.yaml"},
      {{"show", "abc"}, 2, "id"},
      {{"show", "999"}, 1, "999"},
      {{"ls", "--state", "done"}, 2, "state"},
      {{"logs", "0"}, 2, "id"},
      {{"cordon", "nope"}, 1, "nope"},
      {{"frobnicate"}, 2, ""},
  };
  for (const Case& c : cases) {
    CliResult r = Run(c.args);
    EXPECT_EQ(r.code, c.code) << c.args[0] << " " << (c.args.size() > 1 ? c.args[1] : "") << ": "
                              << r.err;
    EXPECT_NE(r.err.find(c.needle), std::string::npos) << r.err;
  }
  // A bench takes no --server: it starts its own cluster, after checking its flags.
  CliResult bench = Cli({"bench", "e2e", "--capacity-wait", "sometimes"});
  EXPECT_EQ(bench.code, 2) << bench.err;
  EXPECT_NE(bench.err.find("--capacity-wait: \"sometimes\""), std::string::npos) << bench.err;
  EXPECT_TRUE(Tasks().empty());  // nothing bad was accepted
  // Millicores, as job files and Kubernetes write CPU (docs/job-spec.md).
  const uint64_t milli = Submit({"--cpu", "500m", "--", "true"});
  EXPECT_EQ(Task(milli)["request"]["cpu_milli"], 500) << Task(milli).dump();
}

TEST_F(ClusterTest, UnreachableServerIsExitCodeThree) {
  CliResult r = Cli({"ls", "--server", "127.0.0.1:" + std::to_string(FreePort())});
  EXPECT_EQ(r.code, 3);
  EXPECT_NE(r.err.find("cannot reach the server"), std::string::npos) << r.err;
}

// A malformed address is a usage error naming where it came from, before anything connects
// or listens: gRPC itself would take port 99999 as 34463 (99999 - 65536) and listen there,
// and retry a malformed server address forever.
TEST_F(ClusterTest, MalformedAddressesAreUsageErrorsNamingTheirSource) {
  struct Case {
    std::vector<std::string> args;
    std::map<std::string, std::string> env;
    std::string needle;
  };
  const std::vector<Case> cases = {
      {{"ls", "--server", "127.0.0.1:99999"}, {}, "--server: \"127.0.0.1:99999\" has port 99999"},
      {{"--server", "10.0.0.1", "status"}, {}, "--server: \"10.0.0.1\" has no port"},
      {{"submit", "--server", server() + ",", "--", "true"}, {}, ""},  // a trailing comma is fine
      {{"ls", "--server", ","}, {}, "--server: no address in \",\""},
      {{"ls"}, {{"GPUSCHED_SERVER", "localhost:x"}}, "GPUSCHED_SERVER: \"localhost:x\""},
      {{"extender", "--listen", "127.0.0.1:99999"}, {}, "--listen: \"127.0.0.1:99999\""},
      // Its syntax before whether it is exposed (it was "reachable from other machines").
      {{"server", "--listen", "127.0.0.1:99999", "--data-dir", path("s")}, {},
       "listen: \"127.0.0.1:99999\" has port 99999"},
  };
  for (const Case& c : cases) {
    CliResult r = Cli(c.args, c.env);
    if (c.needle.empty()) {
      EXPECT_EQ(r.code, 0) << r.err;
      continue;
    }
    EXPECT_EQ(r.code, 2) << c.args[0] << ": " << r.err;
    EXPECT_NE(r.err.find(c.needle), std::string::npos) << r.err;
  }
  // An agent stops at once with the same error; before, it listened on port 34463, or
  // retried the server forever.
  // A node name follows the certificates' rule (it registered as "bad name!" and stayed listed).
  for (const auto& [flag, needle] :
       {std::pair{"--listen", "listen: \"127.0.0.1:99999\" has port 99999"},
        std::pair{"--server", "server: \"127.0.0.1:99999\" has port 99999"},
        std::pair{"--name", "name: \"bad name!\" may only hold letters, digits"}}) {
    std::vector<std::string> args{"agent", "--server", server(), "--listen", "127.0.0.1:0",
                                  "--name", "bad", "--gpus", "1x16GiB", "--simulate",
                                  "--data-dir", path("bad")};
    const auto at = std::find(args.begin(), args.end(), flag);
    *(at + 1) = std::string(flag) == "--name" ? "bad name!" : "127.0.0.1:99999";
    Proc agent(args, path("bad.log"));
    EXPECT_TRUE(PollUntil([&] { return agent.Log().find(needle) != std::string::npos; },
                          std::chrono::seconds(20)))
        << agent.Log();
    EXPECT_EQ(agent.Log().find("serving on"), std::string::npos) << agent.Log();
  }
}

TEST_F(ClusterTest, BadGrpcFieldsAreInvalidArgument) {
  auto stub = v1::Scheduler::NewStub(rpc::MakeChannel(server()));
  auto submit = [&](const v1::TaskSpec& spec) {
    grpc::ClientContext ctx;
    v1::SubmitRequest req;
    *req.mutable_spec() = spec;
    v1::SubmitResponse resp;
    return stub->Submit(&ctx, req, &resp);
  };
  v1::TaskSpec s;
  EXPECT_EQ(submit(s).error_code(), grpc::StatusCode::INVALID_ARGUMENT);  // no command
  s.add_command("true");
  s.set_gpus(-3);
  grpc::Status st = submit(s);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("gpus"), std::string::npos) << st.error_message();
  s.set_gpus(0);
  s.add_tolerations()->set_effect("Sometimes");
  EXPECT_EQ(submit(s).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  grpc::ClientContext ctx;
  v1::GetTaskRequest get;
  v1::Task t;
  EXPECT_EQ(stub->GetTask(&ctx, get, &t).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  // An agent stream that does not start with register is refused.
  auto link = v1::AgentLink::NewStub(rpc::MakeChannel(server()));
  grpc::ClientContext lctx;
  auto stream = link->Connect(&lctx);
  v1::AgentMessage hb;
  hb.mutable_heartbeat();
  stream->Write(hb);
  stream->WritesDone();
  v1::ServerMessage ignored;
  while (stream->Read(&ignored)) {
  }
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Run({"ls"}).code, 0);
}

// Issue 40: the array {0, INT64_MAX} overflowed the size check (last - first + 1 < 0) and
// the server built tasks until it was killed; now refused, naming the field and the values.
TEST_F(ClusterTest, Issue40_ArrayToInt64MaxIsRefusedAndTheServerServesOn) {
  auto stub = v1::Scheduler::NewStub(rpc::MakeChannel(server()));
  for (const bool keyed : {false, true}) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::SubmitRequest req;
    req.mutable_spec()->add_command("true");
    req.mutable_array()->set_first(0);
    req.mutable_array()->set_last(std::numeric_limits<int64_t>::max());
    if (keyed) req.set_idempotency_key("issue40-array");
    v1::SubmitResponse resp;
    const grpc::Status st = stub->Submit(&ctx, req, &resp);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << st.error_message();
    EXPECT_NE(st.error_message().find("array: 0-9223372036854775807"), std::string::npos)
        << st.error_message();
  }
  EXPECT_EQ(Run({"ls"}).code, 0);
}

TEST_F(ClusterTest, GarbageBytesOnThePortDoNotStopTheServer) {
  std::string junk;
  for (int i = 0; i < 4096; ++i) junk += static_cast<char>((i * 131 + 7) % 256);
  for (int i = 0; i < 5; ++i) SendGarbage(port_, junk);
  SendGarbage(port_, "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
  SendGarbage(http_port_, junk);
  EXPECT_EQ(Run({"ls"}).code, 0);
  EXPECT_EQ(HttpGet(http_port_, "/healthz"), "ok\n");
  StartAgent("n1", "1x16GiB");
  EXPECT_TRUE(WaitState(Submit({"--gpus", "1", "--", "true"}), "succeeded"));
}

}  // namespace
}  // namespace gpusched::testing
