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
// An array or an idempotency key goes the synchronous way (ControlPlane::Submit and
// SubmitArray) on one of a few worker threads: a keyed retry waits for the first
// submission's commit, and the key's lookup reads the store.
//
// Lifecycle: Start after BuildAndStart (before the queue's), Stop after the gRPC server's
// Shutdown and before the queue's Stop. A call the control plane answers after Stop gets no
// answer from here (the server cancelled it when it shut down).
// Thread-safety: Start and Stop from one thread; answers come from any thread.

#include <memory>
#include <mutex>

#include "base/work_pool.h"
#include "server/api_service.h"
#include "server/async_queue.h"

namespace gpusched::server {

class AsyncSubmit {
 public:
  // `blocking_workers`: the threads for arrays and keyed submissions.
  AsyncSubmit(ApiService& api, AsyncQueue& queue, size_t blocking_workers = 4);
  ~AsyncSubmit();  // Stop
  AsyncSubmit(const AsyncSubmit&) = delete;
  AsyncSubmit& operator=(const AsyncSubmit&) = delete;

  void Start();
  // Idempotent. Joins the worker threads (their submissions end first).
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
  const size_t blocking_workers_;
  const std::shared_ptr<Answering> answering_ = std::make_shared<Answering>();
  std::mutex accept_mu_;  // Accept against Stop: no request on a queue that shut down
  // Between Start and Stop (guarded by accept_mu_): calls are accepted while it exists.
  std::unique_ptr<WorkPool> blocking_;
};

}  // namespace gpusched::server
