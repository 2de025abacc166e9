#include "server/async_agent_link.h"

#include <algorithm>
#include <chrono>
#include <deque>
#include <iostream>
#include <optional>

#include "base/log.h"
#include "rpc/grpc_status.h"
#include "rpc/log_capability.h"
#include "rpc/tls.h"
#include "server/agent_channel.h"
#include "server/agent_convert.h"
#include "server/control_plane.h"

namespace gpusched::server {

grpc::Status CheckAgentIdentity(grpc::ServerContext* ctx, const std::string& node,
                                bool require_client_cert) {
  // Issue 35: the servers' own certificates name kServerCertName; none of them is a node.
  if (node == rpc::kServerCertName) {
    return {grpc::StatusCode::PERMISSION_DENIED,
            "\"" + node + "\" is the servers' name, not a node's: an agent may not register as it"};
  }
  if (!require_client_cert) return grpc::Status::OK;
  const std::shared_ptr<const grpc::AuthContext> auth = ctx->auth_context();
  if (auth == nullptr || !auth->IsPeerAuthenticated()) {
    logging::Warn("server",
                  "refused agent \"" + node + "\" from " + ctx->peer() + ": no client certificate",
                  logging::NodeF(node));
    return {grpc::StatusCode::UNAUTHENTICATED,
            "agent \"" + node + "\" presented no client certificate; this server requires "
            "one from its CA: create it with `gpusched certs init DIR --agent " + node +
            "` and start the agent with --tls-dir DIR --name " + node};
  }
  std::vector<std::string> names;  // CN, then the SANs; each once (certs init puts the name
                                   // in both: "names a1, a1")
  for (const char* property : {"x509_common_name", "x509_subject_alternative_name"}) {
    for (const grpc::string_ref& v : auth->FindPropertyValues(property)) {
      std::string name(v.data(), v.size());
      if (std::find(names.begin(), names.end(), name) == names.end()) {
        names.push_back(std::move(name));
      }
    }
  }
  if (rpc::CertificateNamesNode(names, node)) return grpc::Status::OK;
  std::string named;
  for (const std::string& n : names) named += (named.empty() ? "" : ", ") + n;
  logging::Warn("server",
                "refused agent \"" + node + "\" from " + ctx->peer() + ": its certificate names " +
                    (named.empty() ? std::string("nothing") : named),
                logging::NodeF(node));
  return {grpc::StatusCode::PERMISSION_DENIED,
          "agent registered as \"" + node + "\" but its certificate names " +
              (named.empty() ? std::string("no node") : "\"" + named + "\"") +
              ": an agent may only register as the node its certificate names (--name must "
              "match the certificate's name)"};
}

// One agent's call. The queue's thread reads it and ends it; any thread may send on it (the
// control plane's, holding its lock: Send never waits). The queue holds the call (self_)
// from its request until its Finish completes; the control plane may hold it longer, as an
// AgentChannel that refuses every message.
class AsyncAgentLink::Call final : public AgentChannel,
                                   public std::enable_shared_from_this<Call> {
 public:
  enum class Op { kAccept, kRead, kWrite, kFinish };
  struct Tag final : AsyncQueue::Tag {
    Tag(Call* c, Op o) : call(c), op(o) {}
    // The call may be freed when `over` goes, after its handler returned.
    void Complete(bool ok) override {
      AsyncAgentLink& link = call->link_;
      if (std::shared_ptr<Call> over = call->Proceed(op, ok)) {
        over.reset();  // after its handler returned
        link.CallEnded();
      }
    }
    Call* call;
    Op op;
  };

  explicit Call(AsyncAgentLink& link) : link_(link) {}

  // Waits for the next agent's call. REQUIRES: `self` owns this call.
  void Request(std::shared_ptr<Call> self) {
    self_ = std::move(self);
    grpc::ServerCompletionQueue* cq = link_.queue_.cq();
    link_.service_.RequestConnect(&ctx_, &stream_, cq, cq, &accept_);
  }

  // Handles one event of the queue. Returns the queue's reference once the call is over:
  // the caller drops it after this returned (it may be the last one).
  std::shared_ptr<Call> Proceed(Op op, bool ok) {
    switch (op) {
      case Op::kAccept:
        if (!ok) return std::move(self_);  // the server shuts down: no call came
        link_.Accept();                    // the next agent's
        OnAccepted();
        return nullptr;
      case Op::kRead:
        OnRead(ok);
        return nullptr;
      case Op::kWrite:
        OnWritten(ok);
        return nullptr;
      case Op::kFinish:
        return std::move(self_);  // nothing of this call is in flight any more
    }
    return nullptr;
  }

  // Issue 40: the control plane's orders are built into the wire message here, outside its
  // structs (the strings are moved).
  bool Send(AgentOrder m) override { return SendProto(AgentOrderToProto(std::move(m))); }

  bool SendProto(v1::ServerMessage m) {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return false;
    if (writing_) {
      if (outbox_.size() >= kMaxOutbox) return false;
      outbox_.push_back(std::move(m));
      return true;
    }
    writing_ = true;
    stream_.Write(m, &write_);  // serialized here; completes on the queue
    return true;
  }

  void Close() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (closed_) return;
      closed_ = true;
      outbox_.clear();
    }
    // The read in flight fails, and the queue's thread ends the call; a write that waits for
    // a peer that stopped reading fails as well.
    ctx_.TryCancel();
  }

 private:
  void OnAccepted() {
    auto gate = link_.gate_.Get();
    if (!gate.ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      EndLocked(rpc::ToGrpc(gate.status()));
      return;
    }
    cp_ = std::move(gate).value();
    stream_.Read(&in_, &read_);
  }

  void OnRead(bool ok) {
    bool registered = false;
    {
      std::lock_guard<std::mutex> lock(mu_);  // written by the loop's thread (Registered)
      registered = registered_;
    }
    if (!ok) {  // the agent closed its side, went away, or the call was cancelled
      if (registered) {
        cp_->PostAgentDisconnected(node_, shared_from_this());
        logging::Info("server", "agent " + node_ + " disconnected", logging::NodeF(node_));
      }
      std::lock_guard<std::mutex> lock(mu_);
      EndLocked(grpc::Status::OK);
      return;
    }
    if (!registered) {
      // Issue 43: the loop answers the registration (Registered); nothing is read until then.
      if (grpc::Status s = PostRegistration(); !s.ok()) {
        std::lock_guard<std::mutex> lock(mu_);
        EndLocked(std::move(s));
      }
      return;
    }
    if (!in_.has_register_()) {  // only the first one counts
      cp_->PostAgentMessage(node_, AgentReportFromProto(in_), shared_from_this());
    }
    in_.Clear();
    stream_.Read(&in_, &read_);
  }

  // The first message: it must register the node, as the one the certificate names. What
  // the call can check itself it checks here; the control plane's loop admits the node
  // (Admitted, Registered), or refuses it.
  grpc::Status PostRegistration() {
    if (!in_.has_register_()) {
      return {grpc::StatusCode::INVALID_ARGUMENT,
              "the first message on AgentLink.Connect must be register"};
    }
    StatusOr<AgentRegistration> reg = RegistrationFromProto(in_.register_());
    if (!reg.ok()) return rpc::ToGrpc(reg.status());
    const std::string name = reg->spec.name;
    if (grpc::Status who = CheckAgentIdentity(&ctx_, name, link_.require_client_cert_);
        !who.ok()) {
      return who;
    }
    if (grpc::Status who = CheckAgentToken(name); !who.ok()) return who;
    auto key = rpc::NewLogReadKey();
    if (!key.ok()) return rpc::ToGrpc(key.status());
    {
      std::lock_guard<std::mutex> lock(mu_);
      log_read_key_ = *key;
      node_ = name;
    }
    const size_t gpus = reg->spec.gpus.size();
    const std::string address = reg->spec.address;
    std::shared_ptr<Call> self = shared_from_this();
    cp_->PostRegistration(
        {std::move(reg).value(), self, [self] { self->Admitted(); },
         [self, gpus, address](const Status& s) { self->Registered(s, gpus, address); }});
    return grpc::Status::OK;
  }

  // The loop's thread, the control plane's lock held: the node is admitted, and the agent
  // gets the server's settings before anything else is sent on this call.
  void Admitted() {
    v1::ServerMessage hello;
    v1::Registered* r = hello.mutable_registered();
    r->set_node_heartbeat_ms(cp_->config().node_heartbeat_ms);
    r->set_task_heartbeat_ms(cp_->config().task_heartbeat_ms);
    r->set_kill_grace_ms(cp_->config().kill_grace_ms);
    r->set_allow_root_tasks(cp_->config().allow_root_tasks);
    r->set_log_read_key(LogReadKey());
    r->set_node_lost_after_ms(cp_->config().scheduler.node_lost_after_ms);
    r->set_cluster_id(cp_->ClusterId());
    SendProto(std::move(hello));
  }

  // The registration's outcome, on the loop's thread with the control plane's lock held
  // (or, refused unseen, on the thread that refused it): the call reads the agent's next
  // message, or ends with the refusal. Nothing here waits.
  void Registered(const Status& s, size_t gpus, const std::string& address) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!s.ok()) {
      logging::Warn("server", "refused agent \"" + node_ + "\" from " + ctx_.peer() + ": " +
                                  s.message(),
                    logging::NodeF(node_));
      EndLocked(rpc::ToGrpc(s));
      return;
    }
    registered_ = true;
    logging::Info("server",
                  "agent " + node_ + " connected (" + std::to_string(gpus) + " GPUs, " +
                      address + ")",
                  logging::NodeF(node_));
    if (link_.on_registered_) link_.on_registered_(shared_from_this());
    in_.Clear();
    stream_.Read(&in_, &read_);  // its completion comes on the queue's thread
  }

  // Issue 35: with authentication on, an agent without a client certificate (checked by
  // CheckAgentIdentity when there is one) must present an agent token bound to `node`.
  grpc::Status CheckAgentToken(const std::string& node) {
    if (!cp_->auth_enabled()) return grpc::Status::OK;
    if (auto auth = ctx_.auth_context(); auth != nullptr && auth->IsPeerAuthenticated()) {
      return grpc::Status::OK;  // a certificate naming the node (CheckAgentIdentity)
    }
    std::string authorization;
    if (auto it = ctx_.client_metadata().find("authorization");
        it != ctx_.client_metadata().end()) {
      authorization.assign(it->second.data(), it->second.size());
    }
    const Status s = cp_->AuthenticateAgent(authorization, node);
    if (s.ok()) return grpc::Status::OK;
    logging::Warn("server",
                  "refused agent \"" + node + "\" from " + ctx_.peer() + ": " + s.message(),
                  logging::NodeF(node));
    return rpc::ToGrpc(s);
  }

  std::string Peer() const override { return ctx_.peer(); }

  std::string LogReadKey() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return log_read_key_;
  }

  void OnWritten(bool ok) {
    std::lock_guard<std::mutex> lock(mu_);
    writing_ = false;
    if (!ok) {  // the call is broken: make sure its read ends too
      closed_ = true;
      outbox_.clear();
      ctx_.TryCancel();
    }
    if (!closed_ && !outbox_.empty()) {
      const v1::ServerMessage m = std::move(outbox_.front());
      outbox_.pop_front();
      // Only the last message of a burst is flushed at once; the others ride with it.
      grpc::WriteOptions options;
      if (!outbox_.empty()) options.set_buffer_hint();
      writing_ = true;
      stream_.Write(m, options, &write_);
      return;
    }
    if (end_ && !finishing_) {
      finishing_ = true;
      stream_.Finish(*end_, &finish_);
    }
  }

  // Nothing more goes out; the call ends with `status` once no write is in flight.
  // REQUIRES: mu_ held, no read in flight.
  void EndLocked(grpc::Status status) {
    closed_ = true;
    outbox_.clear();
    if (!end_) end_ = std::move(status);
    if (!writing_ && !finishing_) {
      finishing_ = true;
      stream_.Finish(*end_, &finish_);
    }
  }

  AsyncAgentLink& link_;
  Tag accept_{this, Op::kAccept};
  Tag read_{this, Op::kRead};
  Tag write_{this, Op::kWrite};
  Tag finish_{this, Op::kFinish};
  grpc::ServerContext ctx_;
  grpc::ServerAsyncReaderWriter<v1::ServerMessage, v1::AgentMessage> stream_{&ctx_};
  std::shared_ptr<Call> self_;  // the queue's reference (its thread only)
  // The queue's thread only, but for the registration's answer (Registered), which the loop's
  // thread gives while no read is in flight, under mu_.
  v1::AgentMessage in_;
  std::shared_ptr<ControlPlane> cp_;  // the leader's when the call came
  std::string node_;  // written once, before the registration is posted

  mutable std::mutex mu_;  // guards what follows
  bool registered_ = false;               // the loop admitted the node
  std::string log_read_key_;              // this registration's (issue 35)
  std::deque<v1::ServerMessage> outbox_;  // waiting for the write in flight
  bool writing_ = false;                  // a Write is in flight
  bool closed_ = false;                   // nothing more goes out
  std::optional<grpc::Status> end_;       // how the call ends, once decided
  bool finishing_ = false;                // Finish started
};

AsyncAgentLink::AsyncAgentLink(ControlPlaneGate& gate, AsyncQueue& queue,
                               bool require_client_cert, OnRegistered on_registered)
    : gate_(gate),
      queue_(queue),
      require_client_cert_(require_client_cert),
      on_registered_(std::move(on_registered)) {}

AsyncAgentLink::~AsyncAgentLink() { Stop(); }

void AsyncAgentLink::Register(grpc::ServerBuilder& builder) { builder.RegisterService(&service_); }

void AsyncAgentLink::Start() {
  {
    std::lock_guard<std::mutex> lock(accept_mu_);
    accepting_ = true;
  }
  Accept();
}

void AsyncAgentLink::Stop() {
  std::unique_lock<std::mutex> lock(accept_mu_);
  accepting_ = false;
  // The server's Shutdown cancelled every call: each ends on the queue's thread, which may
  // start its Finish meanwhile. Once over, a call starts nothing (Send refuses), so the
  // queue may shut down (an operation started on a queue that shut down aborts).
  if (!calls_cv_.wait_for(lock, std::chrono::seconds(10), [&] { return live_calls_ == 0; })) {
    logging::Warn("server", std::to_string(live_calls_) +
                                " agent calls did not end within 10 s of the shutdown");
  }
}

void AsyncAgentLink::Accept() {
  std::lock_guard<std::mutex> lock(accept_mu_);
  if (!accepting_) return;
  ++live_calls_;
  auto call = std::make_shared<Call>(*this);
  call->Request(call);
}

void AsyncAgentLink::CallEnded() {
  {
    std::lock_guard<std::mutex> lock(accept_mu_);
    --live_calls_;
  }
  calls_cv_.notify_all();
}

}  // namespace gpusched::server
