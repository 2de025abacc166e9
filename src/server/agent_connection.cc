#include "server/agent_connection.h"

#include "base/thread_name.h"

namespace gpusched::server {

AgentConnection::AgentConnection(grpc::ServerContext* context, Stream* stream)
    : context_(context), stream_(stream) {
  writer_ = std::thread([this] {
    NameThisThread("gs-agent-writer");
    WriterLoop();
  });
}

AgentConnection::~AgentConnection() {
  Close();
  Join();
}

bool AgentConnection::Send(v1::ServerMessage m) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_ || outbox_.size() >= kMaxOutbox) return false;
    outbox_.push_back(std::move(m));
  }
  cv_.notify_one();
  return true;
}

void AgentConnection::Close() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return;
    closed_ = true;
    outbox_.clear();
  }
  cv_.notify_one();
  // A Write blocked on a peer that stopped reading returns once the call is cancelled; the
  // handler's Read returns false too, so the handler thread ends and joins the writer.
  if (context_ != nullptr) context_->TryCancel();
}

void AgentConnection::Join() {
  std::lock_guard<std::mutex> lock(join_mu_);  // the handler and the destructor may both join
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
