// Issue 39, upgrades: the recorded messages of each version (test/compat/VERSION/) replayed,
// byte for byte, against today's real server (`gpusched server`): an agent of that version
// registers, heartbeats, runs a task and reports its exit; a CLI of that version submits,
// shows, lists, explains, cancels and cordons. And messages carrying fields this version does
// not know (a newer agent's or CLI's) are accepted, the fields ignored.

#include <gtest/gtest.h>
#include <signal.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "base/testing/test_dir.h"
#include "compat_support.h"
#include "gpusched/v1/gpusched.grpc.pb.h"
#include "harness.h"
#include "rpc/channel.h"

namespace gpusched::testing {
namespace {

using Json = nlohmann::json;
using namespace std::chrono_literals;
constexpr auto kDeadline = 60s;

// The agent link of a recorded agent: sends recorded AgentMessages as they are, collects what
// the server sends back.
class RecordedAgent {
 public:
  explicit RecordedAgent(const std::string& server)
      : stub_(v1::AgentLink::NewStub(rpc::MakeChannel(server))) {
    stream_ = stub_->Connect(&ctx_);
    reader_ = std::thread([this] {
      v1::ServerMessage m;
      while (stream_->Read(&m)) {
        std::lock_guard<std::mutex> lock(mu_);
        received_.push_back(m);
        cv_.notify_all();
      }
    });
  }
  ~RecordedAgent() {
    ctx_.TryCancel();
    reader_.join();
    (void)stream_->Finish();  // CANCELLED
  }
  void Send(const v1::AgentMessage& m) {
    std::lock_guard<std::mutex> lock(write_mu_);
    EXPECT_TRUE(stream_->Write(m));
  }
  // The first message received (and not taken yet) that `match` accepts.
  std::optional<v1::ServerMessage> Take(const std::function<bool(const v1::ServerMessage&)>& match) {
    std::unique_lock<std::mutex> lock(mu_);
    std::optional<v1::ServerMessage> found;
    cv_.wait_for(lock, kDeadline, [&] {
      for (auto it = received_.begin(); it != received_.end(); ++it) {
        if (match(*it)) {
          found = *it;
          received_.erase(it);
          return true;
        }
      }
      return false;
    });
    return found;
  }

 private:
  std::unique_ptr<v1::AgentLink::Stub> stub_;
  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::AgentMessage, v1::ServerMessage>> stream_;
  std::mutex write_mu_, mu_;
  std::condition_variable cv_;
  std::deque<v1::ServerMessage> received_;
  std::thread reader_;
};

class CompatReplayTest : public ::testing::Test {
 protected:
  // A fresh server. Liveness periods are long: the recorded agent heartbeats only when the
  // replay sends its recorded heartbeat.
  void StartServer() {
    server_.Kill(SIGTERM);
    std::filesystem::remove_all(dir_ / "data");
    WriteFile((dir_ / "server.yaml").string(),
              "node_heartbeat: 10s\nnode_timeout: 60s\nnode_lost_after: 120s\n"
              "task_heartbeat: 10s\ntask_timeout: 60s\nprobe_interval: 300ms\nt2: 300ms\n");
    port_ = FreePort();
    http_port_ = FreePort();
    server_ = Proc({"server", "--listen", Address(), "--http",
                    "127.0.0.1:" + std::to_string(http_port_), "--data-dir",
                    (dir_ / "data").string(), "--config", (dir_ / "server.yaml").string()},
                   (dir_ / "server.log").string());
    ASSERT_TRUE(PollUntil([&] { return Cli({"nodes", "--server", Address()}).code == 0; },
                          kDeadline))
        << server_.Log();
    stub_ = v1::Scheduler::NewStub(rpc::MakeChannel(Address()));
  }
  void TearDown() override {
    if (HasFailure()) std::cerr << "server log:\n" << server_.Log() << "\n";
    server_.Kill(SIGTERM);
  }
  std::string Address() const { return "127.0.0.1:" + std::to_string(port_); }

  // Calls `method` with `request` on the Scheduler service; the status, the answer in `out`.
  template <typename Req, typename Resp>
  grpc::Status Call(grpc::Status (v1::Scheduler::Stub::*method)(grpc::ClientContext*,
                                                                 const Req&, Resp*),
                    const Req& request, Resp* out) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 20s);
    return (stub_.get()->*method)(&ctx, request, out);
  }
  v1::Task Show(uint64_t id) {
    v1::GetTaskRequest req;
    req.set_id(id);
    v1::Task t;
    (void)Call(&v1::Scheduler::Stub::GetTask, req, &t);
    return t;
  }
  Json Node(const std::string& name) {
    CliResult r = Cli({"nodes", "--json", "--server", Address()});
    if (r.code != 0) return Json::object();
    for (const Json& n : Json::parse(r.out)) {
      if (n["name"] == name) return n;
    }
    return Json::object();
  }
  // Registers the recorded agent and waits until the server places tasks on it. Its address
  // is replaced by one that accepts the server's TCP probe (CN115981827A claim 9): the server's
  // own HTTP port, as the recorded agent serves nothing.
  void Register(RecordedAgent& agent, v1::AgentMessage reg) {
    reg.mutable_register_()->set_address("127.0.0.1:" + std::to_string(http_port_));
    agent.Send(reg);
    auto registered = agent.Take([](const v1::ServerMessage& m) { return m.has_registered(); });
    ASSERT_TRUE(registered.has_value()) << "no Registered answer";
    EXPECT_EQ(registered->registered().node_heartbeat_ms(), 10'000);
    ASSERT_TRUE(PollUntil(
        [&] {
          Json n = Node(reg.register_().name());
          return n.value("available", false) && n.value("reachable", false);
        },
        kDeadline))
        << Node(reg.register_().name()).dump();
  }
  v1::ServerMessage TakeAssign(RecordedAgent& agent, uint64_t id) {
    auto m = agent.Take([id](const v1::ServerMessage& s) {
      return s.has_assign() && s.assign().id() == id;
    });
    EXPECT_TRUE(m.has_value()) << "no assignment of task " << id;
    return m.value_or(v1::ServerMessage());
  }

  void ReplayAgentAndCli(const std::filesystem::path& version);

  TestDir dir_{"gpusched_compat_e2e"};
  Proc server_;
  int port_ = 0, http_port_ = 0;
  std::unique_ptr<v1::Scheduler::Stub> stub_;
};

void CompatReplayTest::ReplayAgentAndCli(const std::filesystem::path& version) {
  auto rec = [&](const std::string& name) { return ReadRecording(version / name); };
  RecordedAgent agent(Address());
  Register(agent, ParseRecording<v1::AgentMessage>(rec("agent_register.binpb")));
  if (HasFatalFailure()) return;

  // The CLI's submission; the server assigns it to the recorded agent, which runs it.
  const auto submit = ParseRecording<v1::SubmitRequest>(rec("cli_submit.binpb"));
  v1::SubmitResponse submitted;
  grpc::Status st = Call(&v1::Scheduler::Stub::Submit, submit, &submitted);
  ASSERT_TRUE(st.ok()) << st.error_message();
  ASSERT_EQ(submitted.id(), 1u);
  const v1::Assign assign = TakeAssign(agent, 1).assign();
  EXPECT_EQ(assign.attempt(), 1);
  EXPECT_EQ(assign.gpu_mem_mib(0), 4096);
  EXPECT_EQ(ValueOr(assign.env(), "COMPAT"), "1");
  EXPECT_EQ(assign.stop_signal(), 15);
  agent.Send(ParseRecording<v1::AgentMessage>(rec("agent_task_started.binpb")));
  ASSERT_TRUE(PollUntil([&] { return Show(1).state() == "running"; }, kDeadline))
      << Show(1).state();
  agent.Send(ParseRecording<v1::AgentMessage>(rec("agent_heartbeat.binpb")));
  agent.Send(ParseRecording<v1::AgentMessage>(rec("agent_task_heartbeats.binpb")));
  EXPECT_TRUE(PollUntil([&] { return Show(1).gpu_util() == 50; }, kDeadline));
  agent.Send(ParseRecording<v1::AgentMessage>(rec("agent_task_finished.binpb")));
  EXPECT_TRUE(agent.Take([](const v1::ServerMessage& m) { return m.has_ack() && m.ack().id() == 1; })
                  .has_value());

  // The CLI's reads of it.
  v1::Task shown;
  st = Call(&v1::Scheduler::Stub::GetTask,
            ParseRecording<v1::GetTaskRequest>(rec("cli_get_task.binpb")), &shown);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(shown.state(), "succeeded");
  EXPECT_EQ(shown.exit_code(), 0);
  EXPECT_EQ(shown.node(), kCompatNode);
  v1::ListTasksResponse listed;
  st = Call(&v1::Scheduler::Stub::ListTasks,
            ParseRecording<v1::ListTasksRequest>(rec("cli_list_tasks.binpb")), &listed);
  ASSERT_TRUE(st.ok()) << st.error_message();
  ASSERT_EQ(listed.tasks_size(), 1);
  EXPECT_EQ(listed.tasks(0).id(), 1u);
  v1::WhyResponse why;
  st = Call(&v1::Scheduler::Stub::Why, ParseRecording<v1::WhyRequest>(rec("cli_why.binpb")), &why);
  EXPECT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(why.id(), 1u);

  // A second task, cancelled while assigned: the agent is told to kill it.
  st = Call(&v1::Scheduler::Stub::Submit, submit, &submitted);
  ASSERT_TRUE(st.ok()) << st.error_message();
  ASSERT_EQ(submitted.id(), 2u);
  TakeAssign(agent, 2);
  v1::CancelResponse cancelled;
  st = Call(&v1::Scheduler::Stub::Cancel,
            ParseRecording<v1::CancelRequest>(rec("cli_cancel.binpb")), &cancelled);
  EXPECT_TRUE(st.ok()) << st.error_message();
  EXPECT_TRUE(agent.Take([](const v1::ServerMessage& m) { return m.has_kill() && m.kill().id() == 2; })
                  .has_value());

  // An array with an idempotency key: a retry of the same bytes gets the same tasks.
  const auto array = ParseRecording<v1::SubmitRequest>(rec("cli_submit_array.binpb"));
  v1::SubmitResponse first, again;
  ASSERT_TRUE(Call(&v1::Scheduler::Stub::Submit, array, &first).ok());
  ASSERT_TRUE(Call(&v1::Scheduler::Stub::Submit, array, &again).ok());
  EXPECT_EQ(first.ids_size(), 3);
  EXPECT_EQ(std::vector<uint64_t>(first.ids().begin(), first.ids().end()),
            std::vector<uint64_t>(again.ids().begin(), again.ids().end()));

  v1::NodeResponse cordoned;
  st = Call(&v1::Scheduler::Stub::Cordon,
            ParseRecording<v1::CordonRequest>(rec("cli_cordon.binpb")), &cordoned);
  EXPECT_TRUE(st.ok()) << st.error_message();
  EXPECT_TRUE(cordoned.node().cordoned());
}

// Server N accepts the agents and CLIs of N-1 and N (docs/upgrades.md): the recordings of the
// two newest versions in the tree, each against a fresh server. (One version is recorded
// today; the next release's recordings make this the N-1 check it is meant to be.)
TEST_F(CompatReplayTest, Issue39_RecordedAgentAndCliOfTheLastVersionsDriveTodaysServer) {
  std::vector<std::filesystem::path> versions = VersionDirs();
  ASSERT_FALSE(versions.empty());
  if (versions.size() > 2) versions.erase(versions.begin(), versions.end() - 2);
  for (const auto& version : versions) {
    SCOPED_TRACE(version.string());
    StartServer();
    ReplayAgentAndCli(version);
    if (HasFatalFailure()) return;
  }
}

// Fields a newer agent or CLI adds (numbers this version does not know) are ignored: the
// registration, heartbeat and submission carrying them are served as without them.
TEST_F(CompatReplayTest, Issue39_FieldsThisVersionDoesNotKnowAreIgnored) {
  StartServer();
  const std::filesystem::path version = VersionDirs().back();
  // AgentMessage.register (1): RegisterNode with a field 1998 it does not know; and 1999.
  const auto reg = ParseRecording<v1::AgentMessage>(
      ReadRecording(version / "agent_register.binpb") + VarintField(1999, 7) +
      BytesField(1, VarintField(1998, 1)));
  EXPECT_GT(reg.ByteSizeLong(), ReadRecording(version / "agent_register.binpb").size())
      << "the unknown fields are kept, and sent";
  RecordedAgent agent(Address());
  Register(agent, reg);
  if (HasFatalFailure()) return;
  // AgentMessage.heartbeat (2).
  const auto hb = ParseRecording<v1::AgentMessage>(
      ReadRecording(version / "agent_heartbeat.binpb") + BytesField(2, VarintField(1996, 3)));
  agent.Send(hb);

  // SubmitRequest and its spec (1).
  const auto submit = ParseRecording<v1::SubmitRequest>(
      ReadRecording(version / "cli_submit.binpb") + VarintField(1999, 1) +
      BytesField(1, VarintField(1999, 1)));
  v1::SubmitResponse submitted;
  grpc::Status st = Call(&v1::Scheduler::Stub::Submit, submit, &submitted);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(TakeAssign(agent, submitted.id()).assign().gpu_mem_mib(0), 4096);
  EXPECT_EQ(Show(submitted.id()).spec().name(), "compat");
}

}  // namespace
}  // namespace gpusched::testing
