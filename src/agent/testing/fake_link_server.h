#pragma once
// FakeServer: an in-process AgentLink service that tests script, one agent stream at a time
// (agent_link_test.cc, server_link_test.cc). Thread-safe.

#include <grpcpp/grpcpp.h>

#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "agent/runner_test_support.h"
#include "gpusched/v1/gpusched.grpc.pb.h"

namespace gpusched::agent::testing {

// One AgentLink peer at a time: records what the agent sends, sends what the test says.
class FakeServer final : public v1::AgentLink::Service {
 public:
  grpc::Status Connect(grpc::ServerContext* ctx,
                       grpc::ServerReaderWriter<v1::ServerMessage, v1::AgentMessage>* stream)
      override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++connects_;
      if (!refusal_.empty()) return grpc::Status(grpc::StatusCode::UNAVAILABLE, refusal_);
      stream_ = stream;
      ctx_ = ctx;
    }
    v1::AgentMessage m;
    bool first = true;
    while (stream->Read(&m)) {
      std::lock_guard<std::mutex> lock(mu_);
      if (first) firsts_.push_back(m);
      first = false;
      received_.push_back(m);
    }
    std::lock_guard<std::mutex> lock(mu_);
    stream_ = nullptr;
    ctx_ = nullptr;
    return grpc::Status::OK;
  }
  bool Send(const v1::ServerMessage& m) {
    std::lock_guard<std::mutex> lock(mu_);
    return stream_ != nullptr && stream_->Write(m);
  }
  // Waits for the first message (from the start) that `match` accepts.
  std::optional<v1::AgentMessage> WaitFor(
      const std::function<bool(const v1::AgentMessage&)>& match) {
    std::optional<v1::AgentMessage> found;
    PollUntil([&] {
      std::lock_guard<std::mutex> lock(mu_);
      for (const v1::AgentMessage& m : received_) {
        if (match(m)) {
          found = m;
          return true;
        }
      }
      return false;
    });
    return found;
  }
  size_t Count(const std::function<bool(const v1::AgentMessage&)>& match) {
    std::lock_guard<std::mutex> lock(mu_);
    size_t n = 0;
    for (const v1::AgentMessage& m : received_) n += match(m);
    return n;
  }
  void Forget() {
    std::lock_guard<std::mutex> lock(mu_);
    received_.clear();
  }
  bool connected() {
    std::lock_guard<std::mutex> lock(mu_);
    return stream_ != nullptr;
  }
  int connects() {
    std::lock_guard<std::mutex> lock(mu_);
    return connects_;
  }
  // Every later Connect is answered at once with Unavailable and `message`.
  void Refuse(const std::string& message) {
    std::lock_guard<std::mutex> lock(mu_);
    refusal_ = message;
  }
  // Ends the open stream from the server's side, as a server that restarts would.
  void Drop() {
    std::lock_guard<std::mutex> lock(mu_);
    if (ctx_ != nullptr) ctx_->TryCancel();
  }
  std::vector<v1::AgentMessage> Received() {
    std::lock_guard<std::mutex> lock(mu_);
    return {received_.begin(), received_.end()};
  }
  // The first message of every stream so far, in the order the streams opened (Forget
  // does not clear them).
  std::vector<v1::AgentMessage> FirstOfEachStream() {
    std::lock_guard<std::mutex> lock(mu_);
    return firsts_;
  }

 private:
  std::mutex mu_;
  int connects_ = 0;
  std::string refusal_;
  grpc::ServerContext* ctx_ = nullptr;
  grpc::ServerReaderWriter<v1::ServerMessage, v1::AgentMessage>* stream_ = nullptr;
  std::deque<v1::AgentMessage> received_;
  std::vector<v1::AgentMessage> firsts_;
};

// Serves `fake` on a free loopback port and sets `address` to it; null when it cannot.
inline std::unique_ptr<grpc::Server> Serve(FakeServer& fake, std::string& address) {
  grpc::ServerBuilder b;
  int port = 0;
  b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  b.RegisterService(&fake);
  std::unique_ptr<grpc::Server> server = b.BuildAndStart();
  if (!server || port == 0) return nullptr;
  address = "127.0.0.1:" + std::to_string(port);
  return server;
}

}  // namespace gpusched::agent::testing
