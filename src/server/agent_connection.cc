#include "server/agent_connection.h"

namespace gpusched::server {

AgentConnection::AgentConnection(Stream* stream) : stream_(stream) {
  writer_ = std::thread([this] { WriterLoop(); });
}

AgentConnection::~AgentConnection() { Close(); }

void AgentConnection::Send(v1::ServerMessage m) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return;
    outbox_.push_back(std::move(m));
  }
  cv_.notify_one();
}

void AgentConnection::Close() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
    outbox_.clear();
  }
  cv_.notify_one();
  if (writer_.joinable() && writer_.get_id() != std::this_thread::get_id()) writer_.join();
}

void AgentConnection::WriterLoop() {
  std::deque<v1::ServerMessage> batch;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return closed_ || !outbox_.empty(); });
      if (closed_) return;
      batch.swap(outbox_);
    }
    while (!batch.empty()) {
      // Only the last message of a burst is flushed at once; the others ride with it.
      grpc::WriteOptions options;
      if (batch.size() > 1) options.set_buffer_hint();
      if (!stream_->Write(batch.front(), options)) return;  // the agent went away
      batch.pop_front();
    }
  }
}

}  // namespace gpusched::server
