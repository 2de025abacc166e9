#include "server/async_submit.h"

#include "rpc/grpc_status.h"

namespace gpusched::server {

// One Submit call. The queue holds it (self_) from its request until the request completes,
// then whoever answers it (the control plane's callback, or a worker), then the queue again
// from the answer until its Finish completes.
class AsyncSubmit::Call final : public std::enable_shared_from_this<Call> {
 public:
  explicit Call(AsyncSubmit& owner) : owner_(owner), answering_(owner.answering_) {}

  // Waits for the next call. REQUIRES: `self` owns this call.
  void Request(std::shared_ptr<Call> self) {
    self_ = std::move(self);
    grpc::ServerCompletionQueue* cq = owner_.queue_.cq();
    owner_.api_.RequestSubmit(&ctx_, &req_, &responder_, cq, cq, &requested_);
  }

 private:
  enum class Op { kRequested, kFinished };
  struct Tag final : AsyncQueue::Tag {
    Tag(Call* c, Op o) : call(c), op(o) {}
    void Complete(bool ok) override {
      // The queue's reference: the call may be freed when it goes, after the handler.
      std::shared_ptr<Call> held = std::move(call->self_);
      if (op == Op::kRequested && ok) call->OnRequested(std::move(held));
    }
    Call* call;
    Op op;
  };

  void OnRequested(std::shared_ptr<Call> self) {
    owner_.Accept();  // the next call's
    StatusOr<ApiService::SubmitPlan> plan = owner_.api_.PrepareSubmit(&ctx_, req_);
    if (!plan.ok()) {
      Answer(plan.status(), {});
      return;
    }
    if (req_.has_array() || !req_.idempotency_key().empty()) {
      std::lock_guard<std::mutex> lock(owner_.accept_mu_);
      if (owner_.blocking_ == nullptr) {
        Answer(Unavailable("the server is stopping; nothing was queued: submit again"), {});
        return;
      }
      owner_.blocking_->Post([self, p = std::move(plan).value()]() mutable {
        v1::SubmitResponse resp;
        const Status s = ApiService::SubmitBlocking(std::move(p), self->req_, &resp);
        self->Answer(s, resp);
      });
      return;
    }
    ControlPlane& cp = *plan->cp;
    cp.PostSubmission(std::move(plan->spec), [self = std::move(self)](StatusOr<TaskId> id) {
      v1::SubmitResponse resp;
      if (id.ok()) resp.set_id(id->value());
      self->Answer(id.status(), resp);
    });
  }

  void Answer(const Status& s, const v1::SubmitResponse& resp) {
    std::lock_guard<std::mutex> lock(answering_->mu);
    if (!answering_->open) return;  // the server shut down: the call was cancelled
    self_ = shared_from_this();     // until the Finish completes
    if (s.ok()) {
      responder_.Finish(resp, grpc::Status::OK, &finished_);
    } else {
      responder_.FinishWithError(rpc::ToGrpc(s), &finished_);
    }
  }

  AsyncSubmit& owner_;  // used on the queue's thread only, before Stop
  const std::shared_ptr<Answering> answering_;
  Tag requested_{this, Op::kRequested};
  Tag finished_{this, Op::kFinished};
  grpc::ServerContext ctx_;
  v1::SubmitRequest req_;
  grpc::ServerAsyncResponseWriter<v1::SubmitResponse> responder_{&ctx_};
  std::shared_ptr<Call> self_;  // the queue's reference
};

AsyncSubmit::AsyncSubmit(ApiService& api, AsyncQueue& queue, size_t blocking_workers)
    : api_(api), queue_(queue), blocking_workers_(blocking_workers) {}

AsyncSubmit::~AsyncSubmit() { Stop(); }

void AsyncSubmit::Start() {
  {
    std::lock_guard<std::mutex> lock(accept_mu_);
    blocking_ = std::make_unique<WorkPool>(blocking_workers_);
  }
  Accept();
}

void AsyncSubmit::Stop() {
  std::unique_ptr<WorkPool> blocking;
  {
    std::lock_guard<std::mutex> lock(accept_mu_);
    blocking = std::move(blocking_);
  }
  blocking.reset();  // the submissions it runs end, and are answered, first
  std::lock_guard<std::mutex> lock(answering_->mu);
  answering_->open = false;
}

void AsyncSubmit::Accept() {
  std::lock_guard<std::mutex> lock(accept_mu_);
  if (blocking_ == nullptr) return;  // not started, or stopped
  auto call = std::make_shared<Call>(*this);
  call->Request(call);
}

}  // namespace gpusched::server
