#include "server/async_queue.h"

#include "base/thread_name.h"

namespace gpusched::server {

AsyncQueue::~AsyncQueue() { Stop(); }

void AsyncQueue::Register(grpc::ServerBuilder& builder) { cq_ = builder.AddCompletionQueue(); }

void AsyncQueue::Start() {
  thread_ = std::thread([this] {
    NameThisThread("gs-grpc-queue");
    void* tag = nullptr;
    bool ok = false;
    while (cq_->Next(&tag, &ok)) static_cast<Tag*>(tag)->Complete(ok);
  });
}

void AsyncQueue::Stop() {
  if (cq_ == nullptr || stopped_) return;
  stopped_ = true;
  if (!thread_.joinable()) return;
  cq_->Shutdown();
  thread_.join();
}

}  // namespace gpusched::server
