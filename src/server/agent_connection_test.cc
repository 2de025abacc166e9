// AgentConnection over a real gRPC stream on loopback, with a peer that stops reading: the
// writer blocks in Write once flow control is exhausted. Close must return at once (it used
// to join the writer, under the control plane's lock, which then hung every API call), and
// the bounded outbox must refuse messages instead of growing.

#include "server/agent_connection.h"

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <thread>

#include "rpc/channel.h"

namespace gpusched::server {
namespace {

using namespace std::chrono_literals;

// Hands the handler's connection to the test and keeps the call open until told.
class HoldingService final : public v1::AgentLink::Service {
 public:
  grpc::Status Connect(grpc::ServerContext* ctx, AgentConnection::Stream* stream) override {
    v1::AgentMessage first;
    if (!stream->Read(&first)) return grpc::Status::OK;
    auto conn = std::make_shared<AgentConnection>(ctx, stream);
    connection_.set_value(conn);
    v1::AgentMessage m;
    while (stream->Read(&m)) {
    }
    conn->Close();
    conn->Join();
    return grpc::Status::OK;
  }
  std::future<std::shared_ptr<AgentConnection>> connection() { return connection_.get_future(); }

 private:
  std::promise<std::shared_ptr<AgentConnection>> connection_;
};

v1::ServerMessage Big() {
  v1::ServerMessage m;
  m.mutable_assign()->add_command(std::string(256 * 1024, 'x'));
  return m;
}

// A real server with HoldingService, and a client that registers and never reads again.
class AgentConnectionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(port, 0);
    stub_ = v1::AgentLink::NewStub(rpc::MakeChannel("127.0.0.1:" + std::to_string(port)));
    stream_ = stub_->Connect(&ctx_);
    v1::AgentMessage hello;
    hello.mutable_register_()->set_name("hung");
    ASSERT_TRUE(stream_->Write(hello));
    auto future = service_.connection();
    ASSERT_EQ(future.wait_for(10s), std::future_status::ready);
    conn_ = future.get();
    // 64 MiB: far beyond any flow-control window, so the writer blocks in Write.
    for (int i = 0; i < 256; ++i) ASSERT_TRUE(conn_->Send(Big()));
    std::this_thread::sleep_for(300ms);  // let the writer take them and block
  }
  void TearDown() override {
    conn_->Close();
    ctx_.TryCancel();
    server_->Shutdown(std::chrono::system_clock::now() + 2s);
  }

  HoldingService service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::AgentLink::Stub> stub_;
  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::AgentMessage, v1::ServerMessage>> stream_;
  std::shared_ptr<AgentConnection> conn_;
};

TEST_F(AgentConnectionTest, CloseDoesNotWaitForAWriteBlockedOnAPeerThatStoppedReading) {
  auto closed = std::async(std::launch::async, [&] { conn_->Close(); });
  EXPECT_EQ(closed.wait_for(5s), std::future_status::ready) << "Close waited for the writer";
  EXPECT_FALSE(conn_->Send(Big())) << "a closed connection still queues";
  auto joined = std::async(std::launch::async, [&] { conn_->Join(); });
  EXPECT_EQ(joined.wait_for(10s), std::future_status::ready)
      << "the cancelled call did not unblock the writer";
}

TEST_F(AgentConnectionTest, OutboxIsBoundedWhileThePeerDoesNotRead) {
  v1::ServerMessage small;
  small.mutable_kill()->set_id(1);
  size_t accepted = 0;
  while (accepted < 2 * AgentConnection::kMaxOutbox && conn_->Send(small)) ++accepted;
  // Some of the 256 large messages may still sit in the outbox (the writer took the rest).
  EXPECT_LE(accepted, AgentConnection::kMaxOutbox);
  EXPECT_GE(accepted + 256, AgentConnection::kMaxOutbox);
}

}  // namespace
}  // namespace gpusched::server
