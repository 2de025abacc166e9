#pragma once
// AgentConnection: the server's end of one agent's AgentLink stream (an AgentChannel).
// Messages to the agent (assign, kill, ack) are queued by Send without blocking the caller
// (who holds the control plane's lock) and written by the connection's own writer thread.
// The outbox is bounded: an agent that stops reading is cut off instead of growing the
// server's memory; it reconciles when it reconnects.
//
// Thread-safety: Send and Close may be called from any thread; Close never waits for the
// writer (a write to a hung peer is cancelled through the call's context). The stream is
// read only by the gRPC handler that owns this object; it must call Join() before returning.

#include <grpcpp/grpcpp.h>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "gpusched/v1/gpusched.grpc.pb.h"
#include "server/agent_channel.h"

namespace gpusched::server {

class AgentConnection final : public AgentChannel {
 public:
  using Stream = grpc::ServerReaderWriter<v1::ServerMessage, v1::AgentMessage>;
  static constexpr size_t kMaxOutbox = 65'536;

  // `context` is the call's; Close cancels it so that a blocked Write returns.
  AgentConnection(grpc::ServerContext* context, Stream* stream);
  ~AgentConnection() override;  // Close + Join
  AgentConnection(const AgentConnection&) = delete;
  AgentConnection& operator=(const AgentConnection&) = delete;

  bool Send(v1::ServerMessage m) override;
  void Close() override;
  // Waits for the writer thread; safe from several threads at once. REQUIRES: Close() was
  // called; not from the writer itself.
  void Join();

 private:
  void WriterLoop();

  grpc::ServerContext* context_;
  Stream* stream_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<v1::ServerMessage> outbox_;
  bool closed_ = false;
  std::mutex join_mu_;
  std::thread writer_;
};

}  // namespace gpusched::server
