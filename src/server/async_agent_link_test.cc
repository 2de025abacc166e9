// AsyncAgentLink over a real gRPC server on loopback, with a real control plane (memory
// store) behind it and raw AgentLink clients as agents: the first message must register,
// a standby refuses, an agent that closes its side is disconnected, and a peer that stops
// reading neither blocks Close (the control plane's lock is held there) nor grows the
// outbox without bound; the server still shuts down with such a peer connected.

#include "server/async_agent_link.h"

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <thread>

#include "rpc/channel.h"
#include "server/control_plane.h"
#include "store/memory_store.h"

namespace gpusched::server {
namespace {

using namespace std::chrono_literals;

v1::AgentMessage Registration(const std::string& name) {
  v1::AgentMessage m;
  v1::RegisterNode* r = m.mutable_register_();
  r->set_name(name);
  r->set_address("127.0.0.1:1");
  r->set_cpu_milli(8'000);
  r->set_mem_mib(16 * 1024);
  v1::Gpu* g = r->add_gpus();
  g->set_index(0);
  g->set_model("A100");
  g->set_total_mib(81920);
  return m;
}

AgentOrder Big() {
  TaskAssignment a;
  a.command = {std::string(256 * 1024, 'x')};
  return a;
}

class AsyncAgentLinkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto cp = ControlPlane::Create(config_, clock_, std::make_unique<store::MemoryStore>());
    ASSERT_TRUE(cp.ok()) << cp.status().ToString();
    cp_ = std::shared_ptr<ControlPlane>(std::move(cp).value());
    cp_->StartLoop();  // it admits the registrations (issue 43)
    gate_.SetLeader(cp_, "self:1");
    link_ = std::make_unique<AsyncAgentLink>(
        gate_, queue_, /*require_client_cert=*/false,
        [this](const std::shared_ptr<AgentChannel>& ch) { registered_.set_value(ch); });
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    link_->Register(builder);
    queue_.Register(builder);
    server_ = builder.BuildAndStart();
    ASSERT_NE(port, 0);
    link_->Start();
    queue_.Start();
    stub_ = v1::AgentLink::NewStub(rpc::MakeChannel("127.0.0.1:" + std::to_string(port)));
  }
  void TearDown() override {
    if (stream_) ctx_.TryCancel();
    // Every call ends (a hung peer's included) and the queue drains: neither may hang.
    auto stopped = std::async(std::launch::async, [&] {
      server_->Shutdown(std::chrono::system_clock::now() + 2s);
      link_->Stop();
      // As Server::Shutdown does: the loop stops, and the control plane lets go of the calls
      // (a disconnection posted but not applied leaves one in its registry) while the server
      // and the queue still exist.
      cp_->StopLoop();
      cp_->DisconnectAgents();
      queue_.Stop();
    });
    EXPECT_EQ(stopped.wait_for(20s), std::future_status::ready) << "shutdown hung";
  }

  // Opens the stream and sends `first`. False when the write failed: a server that refuses
  // the call may end it before the write completes.
  bool Open(const v1::AgentMessage& first) {
    stream_ = stub_->Connect(&ctx_);
    return stream_->Write(first);
  }
  // Opens the stream with `first`, which the server must refuse: the status it ended with.
  grpc::Status Refused(const v1::AgentMessage& first) {
    (void)Open(first);
    stream_->WritesDone();
    v1::ServerMessage m;
    EXPECT_FALSE(stream_->Read(&m)) << "the call went on: message " << m.msg_case();
    const grpc::Status s = stream_->Finish();
    stream_.reset();
    return s;
  }
  // Opens the stream, registers as `name` and returns the server's end of it.
  std::shared_ptr<AgentChannel> Connect(const std::string& name) {
    EXPECT_TRUE(Open(Registration(name)));
    auto future = registered_.get_future();
    EXPECT_EQ(future.wait_for(10s), std::future_status::ready) << "never registered";
    return future.get();
  }
  std::optional<bool> Reachable(const std::string& node) {
    for (const NodeView& n : cp_->ListNodes()) {
      if (n.node.name == node) return n.node.reachable;
    }
    return std::nullopt;
  }

  ServerConfig config_;
  FakeClock clock_{1'000'000};
  ControlPlaneGate gate_;
  std::shared_ptr<ControlPlane> cp_;
  std::promise<std::shared_ptr<AgentChannel>> registered_;
  AsyncQueue queue_;  // outlives the server
  std::unique_ptr<AsyncAgentLink> link_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::AgentLink::Stub> stub_;
  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::AgentMessage, v1::ServerMessage>> stream_;
};

TEST_F(AsyncAgentLinkTest, RegisteredAgentGetsTheServersSettingsFirstAndIsReachable) {
  auto ch = Connect("dev-1");
  v1::ServerMessage m;
  ASSERT_TRUE(stream_->Read(&m));
  ASSERT_TRUE(m.has_registered()) << "message " << m.msg_case();
  EXPECT_EQ(m.registered().kill_grace_ms(), cp_->config().kill_grace_ms);
  EXPECT_EQ(Reachable("dev-1"), true);
  ASSERT_TRUE(ch->Send(TaskKill{TaskId(42), 1, "preempted", 5'000}));
  ASSERT_TRUE(stream_->Read(&m));
  EXPECT_EQ(m.kill().id(), 42u);  // built by the door (agent_convert.h)
  EXPECT_EQ(m.kill().attempt(), 1);
  EXPECT_EQ(m.kill().reason(), "preempted");
  EXPECT_EQ(m.kill().grace_ms(), 5'000);
}

TEST_F(AsyncAgentLinkTest, FirstMessageThatIsNotARegistrationEndsTheCall) {
  v1::AgentMessage hb;
  hb.mutable_heartbeat()->add_gpu_free_mib(1);
  const grpc::Status s = Refused(hb);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("must be register"), std::string::npos) << s.error_message();
}

TEST_F(AsyncAgentLinkTest, InvalidRegistrationNamesTheField) {
  const grpc::Status s = Refused(Registration(""));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("name"), std::string::npos) << s.error_message();
}

TEST_F(AsyncAgentLinkTest, StandbyRefusesNamingTheLeader) {
  (void)gate_.SetStandby("leader.example:7070", "");
  const grpc::Status s = Refused(Registration("dev-1"));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_NE(s.error_message().find("leader.example:7070"), std::string::npos)
      << s.error_message();
}

TEST_F(AsyncAgentLinkTest, AgentThatClosesItsSideIsDisconnectedAndTheCallEndsOk) {
  auto ch = Connect("dev-1");
  ASSERT_EQ(Reachable("dev-1"), true);
  stream_->WritesDone();
  v1::ServerMessage m;
  while (stream_->Read(&m)) {
  }
  EXPECT_TRUE(stream_->Finish().ok());
  stream_.reset();
  // The disconnection is posted to the loop (issue 43), which applies it in its next round.
  for (int i = 0; i < 200 && Reachable("dev-1") != false; ++i) std::this_thread::sleep_for(50ms);
  EXPECT_EQ(Reachable("dev-1"), false);
  EXPECT_FALSE(ch->Send(Big())) << "a call that ended still queues";
}

TEST_F(AsyncAgentLinkTest, CloseDoesNotWaitForAWriteBlockedOnAPeerThatStoppedReading) {
  auto ch = Connect("hung");
  // 64 MiB: far beyond any flow-control window, so a write waits for the peer.
  for (int i = 0; i < 256; ++i) ASSERT_TRUE(ch->Send(Big()));
  auto closed = std::async(std::launch::async, [&] { ch->Close(); });
  EXPECT_EQ(closed.wait_for(5s), std::future_status::ready) << "Close waited for the peer";
  EXPECT_FALSE(ch->Send(Big())) << "a closed channel still queues";
  // The cancelled call's read ended: the node is disconnected.
  for (int i = 0; i < 200 && Reachable("hung") != false; ++i) std::this_thread::sleep_for(50ms);
  EXPECT_EQ(Reachable("hung"), false);
}

TEST_F(AsyncAgentLinkTest, OutboxIsBoundedWhileThePeerDoesNotRead) {
  auto ch = Connect("hung");
  for (int i = 0; i < 256; ++i) ASSERT_TRUE(ch->Send(Big()));
  const AgentOrder small = TaskKill{TaskId(1), 1, "", std::nullopt};
  size_t accepted = 0;
  while (accepted < 2 * AsyncAgentLink::kMaxOutbox && ch->Send(small)) ++accepted;
  // The large messages not yet written wait in the outbox as well.
  EXPECT_LE(accepted, AsyncAgentLink::kMaxOutbox);
  EXPECT_GE(accepted + 256, AsyncAgentLink::kMaxOutbox);
}

}  // namespace
}  // namespace gpusched::server
