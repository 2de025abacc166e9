#pragma once
// AgentConnection: the server's end of one agent's AgentLink stream. Messages to the agent
// (assign, kill, ack) are queued by Send without blocking the caller (who holds the control
// plane's lock) and written by the connection's own writer thread.
//
// Thread-safety: Send and Close may be called from any thread. The stream is read only by
// the gRPC handler that owns this object; it must Close() before returning.

#include <grpcpp/grpcpp.h>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "gpusched/v1/gpusched.grpc.pb.h"

namespace gpusched::server {

namespace v1 = ::gpusched::v1;

class AgentConnection {
 public:
  using Stream = grpc::ServerReaderWriter<v1::ServerMessage, v1::AgentMessage>;
  explicit AgentConnection(Stream* stream);
  ~AgentConnection();
  AgentConnection(const AgentConnection&) = delete;
  AgentConnection& operator=(const AgentConnection&) = delete;

  // Queues `m`; dropped once the connection is closed.
  void Send(v1::ServerMessage m);
  // Stops the writer (pending messages are dropped) and waits for it. Idempotent.
  void Close();

 private:
  void WriterLoop();

  Stream* stream_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<v1::ServerMessage> outbox_;
  bool closed_ = false;
  std::thread writer_;
};

}  // namespace gpusched::server
