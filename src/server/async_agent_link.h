#pragma once
// AsyncAgentLink: the server end of gpusched.v1.AgentLink on gRPC's completion-queue API.
// One call per agent: the first message must register the node; then heartbeats and task
// status flow in while assignments, kills and acks flow out. When the stream ends the node
// becomes unreachable; its tasks are failed over by the liveness rules if it does not come
// back. A standby refuses the stream with "not leader; leader is ADDR"; the agent follows it.
//
// Why a completion queue: with gRPC's synchronous API every message on an agent's stream
// cost two thread hand-offs (the poller that read it woke the call's handler thread, and a
// writer thread per agent woke for every message out). Here the queue's one thread
// (AsyncQueue) takes every event and handles it where it lands: a message read is posted to
// the control plane's loop at once, and a message out is started by whoever sends it (the
// loop), without waiting; the queue's thread only starts the next one when a write
// completes.
//
// Agent identity (mutual TLS): with `require_client_cert` (the server runs with TLS) the
// stream must come with a client certificate the server verified against the cluster CA,
// and the node registered must be named by it (its CN or a DNS SAN): an agent can only
// register and report as its own node. Anything else is refused (UNAUTHENTICATED without a
// certificate, PERMISSION_DENIED for another node's) and logged with both names.
//
// Lifecycle: Register with the builder, Start after BuildAndStart (before the queue's),
// Stop after the gRPC server's Shutdown (which ends every call) and before the queue's Stop
// (which frees what the calls left).
// Thread-safety: Register, Start and Stop from one thread; the rest is internal.

#include <grpcpp/grpcpp.h>

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>

#include "gpusched/v1/gpusched.grpc.pb.h"
#include "server/agent_channel.h"
#include "server/async_queue.h"
#include "server/control_plane_gate.h"

namespace gpusched::server {

// OK when the peer of `ctx` may register as `node` (always without require_client_cert).
grpc::Status CheckAgentIdentity(grpc::ServerContext* ctx, const std::string& node,
                                bool require_client_cert);

class AsyncAgentLink {
 public:
  // Messages queued for one agent, beyond the one being written: an agent that stops
  // reading is cut off at this bound instead of growing the server's memory.
  static constexpr size_t kMaxOutbox = 65'536;

  // Called with each agent's channel once it registered (tests hold it to send on it), on
  // the control plane loop's thread with its lock held; may be empty.
  using OnRegistered = std::function<void(const std::shared_ptr<AgentChannel>&)>;

  AsyncAgentLink(ControlPlaneGate& gate, AsyncQueue& queue, bool require_client_cert,
                 OnRegistered on_registered = nullptr);
  ~AsyncAgentLink();  // Stop
  AsyncAgentLink(const AsyncAgentLink&) = delete;
  AsyncAgentLink& operator=(const AsyncAgentLink&) = delete;

  // Before the builder's BuildAndStart: registers the service.
  void Register(grpc::ServerBuilder& builder);
  // After BuildAndStart: accepts calls.
  void Start();
  // After the gRPC server's Shutdown, before the queue's Stop (the last request of a call
  // is finished on the queue's thread and reads the server): no call is accepted any more,
  // and every call has ended (the queue's thread ends them). Idempotent.
  void Stop();

 private:
  class Call;
  void Accept();
  void CallEnded();  // a call's last event was handled

  ControlPlaneGate& gate_;
  AsyncQueue& queue_;
  const bool require_client_cert_;
  const OnRegistered on_registered_;
  v1::AgentLink::AsyncService service_;
  std::mutex accept_mu_;   // Accept against Stop: no request on a queue that shut down
  std::condition_variable calls_cv_;  // a call ended
  bool accepting_ = false;  // guarded by accept_mu_
  int live_calls_ = 0;      // guarded by accept_mu_: requested and not over
};

}  // namespace gpusched::server
