#pragma once
// AsyncSubmit: gpusched.v1.Scheduler.Submit on the server's completion queue (AsyncQueue).
//
// With gRPC's synchronous server a submission held one of its threads from the request to
// the commit: a poller handed the call to it, it waited for the group commit on a condition
// variable (or led it, writing the store itself), then answered. Here the queue's thread
// authenticates and validates the call where it lands and posts the task to the control
// plane's loop (ControlPlane::PostSubmission); the loop admits it, stores it in its next
// group commit and answers the call itself (Finish does not wait). No thread waits for a
// submission.
//
// Arrays and idempotency keys (the CLI sends one with every submit) take the same way
// (ControlPlane::PostSubmissions, issue 40): the loop reads the key in the store and a keyed
// retry waits for the first submission's commit there; they once took a synchronous path on
// four worker threads behind an unbounded queue. Bounded: a full inbox answers UNAVAILABLE
// ("submit again"), and nothing was queued.
//
// Lifecycle: Start after BuildAndStart (before the queue's), Stop after the gRPC server's
// Shutdown and before the queue's Stop. A call the control plane answers after Stop gets no
// answer from here (the server cancelled it when it shut down).
// Thread-safety: Start and Stop from one thread; answers come from any thread.

#include <memory>
#include <mutex>

#include "server/api_service.h"
#include "server/async_queue.h"

namespace gpusched::server {

class AsyncSubmit {
 public:
  AsyncSubmit(ApiService& api, AsyncQueue& queue);
  ~AsyncSubmit();  // Stop
  AsyncSubmit(const AsyncSubmit&) = delete;
  AsyncSubmit& operator=(const AsyncSubmit&) = delete;

  void Start();
  // Idempotent. Accepts no more calls; answers after it are not sent.
  void Stop();

 private:
  class Call;
  // Whether answers may still be sent: shared with every call, which may outlive this.
  struct Answering {
    std::mutex mu;
    bool open = true;  // guarded by mu
  };
  void Accept();

  ApiService& api_;
  AsyncQueue& queue_;
  const std::shared_ptr<Answering> answering_ = std::make_shared<Answering>();
  std::mutex accept_mu_;  // Accept against Stop: no request on a queue that shut down
  bool accepting_ = false;  // guarded by accept_mu_: between Start and Stop
};

}  // namespace gpusched::server
