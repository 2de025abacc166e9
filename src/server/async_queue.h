#pragma once
// AsyncQueue: one completion queue of the gRPC server and the one thread that takes its
// events: every agent's stream (AsyncAgentLink) and every submission (AsyncSubmit). A thread
// that takes an event handles it where it lands, so a message read or a call answered costs
// no hand-off between threads; sharing one thread lets events that arrive together be taken
// in one wake-up.
//
// Lifecycle: Register with the builder before BuildAndStart; the services request their
// first calls, then Start; on the way down, the gRPC server's Shutdown, then every service
// stops requesting, then Stop (which shuts the queue down, takes what is left and joins).
// Thread-safety: Register, Start and Stop from one thread.

#include <grpcpp/grpcpp.h>

#include <memory>
#include <thread>

namespace gpusched::server {

class AsyncQueue {
 public:
  // What an operation started on the queue is tagged with. Complete runs on the queue's
  // thread once the operation ended (`ok` as gRPC reports it); it may destroy the object
  // that holds the tag if it touches nothing of it afterwards.
  class Tag {
   public:
    virtual void Complete(bool ok) = 0;

   protected:
    ~Tag() = default;
  };

  AsyncQueue() = default;
  ~AsyncQueue();  // Stop
  AsyncQueue(const AsyncQueue&) = delete;
  AsyncQueue& operator=(const AsyncQueue&) = delete;

  void Register(grpc::ServerBuilder& builder);
  grpc::ServerCompletionQueue* cq() { return cq_.get(); }
  void Start();
  // Idempotent. Never started: nothing was taken from the queue, and destroying it is enough.
  void Stop();

 private:
  std::unique_ptr<grpc::ServerCompletionQueue> cq_;
  bool stopped_ = false;
  std::thread thread_;
};

}  // namespace gpusched::server
