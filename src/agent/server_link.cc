#include "agent/server_link.h"

#include <algorithm>
#include <deque>

#include "rpc/leader_hint.h"

namespace gpusched::agent {

// One connection's stream on gRPC's completion-queue API. The link thread alone waits on
// its queue (reads, write completions, the final status). Any thread sends: under send_mu_
// it queues the message and, when no write is in flight (one at a time on a stream), starts
// it. So no sender waits for the network or hands its write to another thread, and the
// messages leave in the order they were queued.
struct ServerLink::Stream {
  enum Tag : intptr_t { kRead = 1, kWrite, kFinish };
  static void* TagOf(Tag t) { return reinterpret_cast<void*>(t); }

  // Declared first, destroyed last: the call goes before its queue.
  grpc::CompletionQueue cq;
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientAsyncReaderWriterInterface<v1::AgentMessage, v1::ServerMessage>>
      rw;
  std::deque<v1::AgentMessage> outbox;  // send_mu_
  bool writing = false;                 // send_mu_: a Write awaits its completion
  v1::ServerMessage incoming;           // the read in flight fills it
  // Link thread only: the operations not yet completed (the queue is shut down once none
  // is left), whether the stream is over, and whether the registration was written.
  bool reading = true, finishing = false, ended = false, connected = false;
  grpc::Status status;

  // REQUIRES: send_mu_ held, !writing, a message queued. Write serializes the message at
  // once, so it leaves the outbox here.
  void WriteNext() {
    writing = true;
    rw->Write(outbox.front(), TagOf(kWrite));
    outbox.pop_front();
  }
  void ReadNext() { rw->Read(&incoming, TagOf(kRead)); }
};

ServerLink::ServerLink(Options options, Hooks hooks, const Clock& clock)
    : options_(std::move(options)), hooks_(std::move(hooks)), clock_(clock) {}

ServerLink::~ServerLink() = default;

void ServerLink::Send(v1::AgentMessage m) {
  std::lock_guard<std::mutex> lock(send_mu_);
  SendLocked(std::move(m));
}

void ServerLink::SendWith(const std::function<std::optional<v1::AgentMessage>()>& make) {
  std::lock_guard<std::mutex> lock(send_mu_);
  if (std::optional<v1::AgentMessage> m = make()) SendLocked(std::move(*m));
}

void ServerLink::SendLocked(v1::AgentMessage m) {
  if (stream_ == nullptr) return;
  stream_->outbox.push_back(std::move(m));
  if (!stream_->writing) stream_->WriteNext();
}

void ServerLink::Stop() {
  std::lock_guard<std::mutex> lock(mu_);
  stop_ = true;
  if (ctx_ != nullptr) ctx_->TryCancel();
  cv_.notify_all();
}

void ServerLink::Run() {
  DurationMs backoff = 100;
  for (;;) {
    const std::string server = options_.servers[current_];
    const StreamEnd end = RunStream(server, &backoff);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) return;
    }
    if (FollowLeader(server, end.status)) {
      backoff = 100;
      continue;
    }
    current_ = (current_ + 1) % options_.servers.size();
    SayWhy(server, end);
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, std::chrono::milliseconds(backoff), [&] { return stop_; });
    if (stop_) return;
    backoff = std::min<DurationMs>(backoff * 2, 1000);
  }
}

ServerLink::StreamEnd ServerLink::RunStream(const std::string& server, DurationMs* backoff) {
  auto& stub = stubs_[server];
  // Keepalive pings: a leader that stops answering (SIGSTOP, a partition) is left within
  // seconds, not when TCP gives up.
  if (!stub) {
    stub = v1::AgentLink::NewStub(rpc::MakeChannel(server, /*keepalive=*/true, &options_.tls));
  }
  Stream conn;
  // The call's metadata leaves with its first message (the registration), so that write need
  // not wait for a start of its own.
  conn.context.set_initial_metadata_corked(true);
  if (!options_.token.empty()) {
    conn.context.AddMetadata("authorization", "Bearer " + options_.token);
  }
  conn.rw = stub->PrepareAsyncConnect(&conn.context, &conn.cq);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return {};
    ctx_ = &conn.context;
  }
  conn.rw->StartCall(nullptr);  // corked: no operation, no tag
  {
    // The registration is queued under send_mu_ like every other message, and the stream is
    // published only after it, in the same critical section: it is always the first.
    std::lock_guard<std::mutex> lock(send_mu_);
    conn.outbox.push_back(hooks_.make_register());
    conn.WriteNext();
    stream_ = &conn;
  }
  conn.ReadNext();
  void* tag = nullptr;
  bool ok = false;
  while (conn.cq.Next(&tag, &ok) && OnCompletion(conn, tag, ok, server, backoff)) {
  }
  conn.cq.Shutdown();
  while (conn.cq.Next(&tag, &ok)) {
  }
  std::lock_guard<std::mutex> lock(mu_);
  ctx_ = nullptr;
  return {conn.status, conn.connected};
}

bool ServerLink::OnCompletion(Stream& conn, void* tag, bool ok, const std::string& server,
                              DurationMs* backoff) {
  bool failed = false;
  switch (static_cast<Stream::Tag>(reinterpret_cast<intptr_t>(tag))) {
    case Stream::kRead:
      if (!ok) {
        conn.reading = false;
        failed = true;
        break;
      }
      // Once the stream is over, what still arrives is read and dropped (Finish completes
      // only when every incoming message was read): the server reconciles it with the next
      // registration.
      if (!conn.ended) {
        if (conn.incoming.has_registered()) {
          hooks_.log("connected to " + server, logging::Level::kInfo);
          *backoff = 100;
          unreachable_said_.clear();
        }
        hooks_.on_message(conn.incoming);
      }
      conn.ReadNext();
      break;
    case Stream::kWrite: {
      std::lock_guard<std::mutex> lock(send_mu_);
      conn.writing = false;
      if (!ok) {
        failed = true;
      } else {
        conn.connected = true;  // the registration, at least, was written
        if (stream_ == &conn && !conn.outbox.empty()) conn.WriteNext();
      }
      break;
    }
    case Stream::kFinish:
      conn.finishing = false;
      break;
  }
  // A read or a write failed: the stream is over. No new sends, and the status is asked for
  // once.
  if (failed && !conn.ended) {
    conn.ended = true;
    {
      std::lock_guard<std::mutex> lock(send_mu_);
      stream_ = nullptr;
    }
    conn.finishing = true;
    conn.rw->Finish(&conn.status, Stream::TagOf(Stream::kFinish));
  }
  // Checked after every completion, whatever it was: the last one to complete may be a write
  // that succeeded after the stream ended.
  std::lock_guard<std::mutex> lock(send_mu_);
  return !(conn.ended && !conn.reading && !conn.writing && !conn.finishing);
}

bool ServerLink::FollowLeader(const std::string& server, const grpc::Status& status) {
  const std::string hint = rpc::LeaderHint(status.error_message());
  if (hint.empty() || hint == server) return false;
  auto& servers = options_.servers;
  auto it = std::find(servers.begin(), servers.end(), hint);
  if (it == servers.end()) it = servers.insert(servers.end(), hint);
  current_ = static_cast<size_t>(it - servers.begin());
  hooks_.log(server + " is not the leader; following it to " + hint, logging::Level::kInfo);
  return true;
}

void ServerLink::SayWhy(const std::string& server, const StreamEnd& end) {
  const grpc::Status& st = end.status;
  // ALREADY_EXISTS: another agent serves this node's name (issue 37).
  const bool refused = st.error_code() == grpc::StatusCode::UNAUTHENTICATED ||
                       st.error_code() == grpc::StatusCode::PERMISSION_DENIED ||
                       st.error_code() == grpc::StatusCode::ALREADY_EXISTS;
  if (end.connected && !refused && !rpc::IsNotLeader(st.error_message())) {
    hooks_.log("link to " + server + " lost: " + st.error_message(), logging::Level::kInfo);
    return;
  }
  if (!refused && (end.connected || st.error_code() != grpc::StatusCode::UNAVAILABLE)) return;
  const TimeMs now = clock_.MonoMs();
  auto [it, first] = unreachable_said_.try_emplace(server, st.error_message(), now);
  if (!first && it->second.first == st.error_message() && now - it->second.second < 60'000) {
    return;
  }
  // A plaintext agent to a TLS server sees the connection closed, nothing more.
  const bool maybe_tls =
      !options_.tls.enabled() && st.error_message().find("Socket closed") != std::string::npos;
  hooks_.log(std::string(refused ? "refused by " : "cannot reach ") + server + ": " +
                 st.error_message() + "; retrying every second" +
                 (maybe_tls ? " (if the server runs with --tls-dir, start this agent with "
                              "--tls-dir too: it connects without TLS)"
                            : ""),
             logging::Level::kInfo);
  it->second = {st.error_message(), now};
}

}  // namespace gpusched::agent
