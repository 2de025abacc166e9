#include "server/async_submit.h"

#include "rpc/convert.h"
#include "rpc/grpc_status.h"

namespace gpusched::server {

// One Submit call. The queue holds it (self_) from its request until the request completes,
// then whoever answers it (the control plane's callback), then the queue again
// from the answer until its Finish completes.
class AsyncSubmit::Call final : public std::enable_shared_from_this<Call> {
 public:
  explicit Call(AsyncSubmit& owner) : owner_(owner), answering_(owner.answering_) {}

  // Waits for the next call. REQUIRES: `self` owns this call.
  void Request(std::shared_ptr<Call> self) {
    Hold(std::move(self));
    grpc::ServerCompletionQueue* cq = owner_.queue_.cq();
    owner_.api_.RequestSubmit(&ctx_, &req_, &responder_, cq, cq, &requested_);
  }

 private:
  enum class Op { kRequested, kFinished };
  struct Tag final : AsyncQueue::Tag {
    Tag(Call* c, Op o) : call(c), op(o) {}
    void Complete(bool ok) override {
      // The queue's reference: the call may be freed when it goes, after the handler.
      std::shared_ptr<Call> held = call->Release();
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
    // Issue 40: keyed submissions (the CLI's) and arrays are posted too; no thread waits.
    const bool array = req_.has_array();
    StatusOr<std::vector<core::TaskSpec>> specs = Specs(std::move(plan->spec));
    if (!specs.ok()) {
      Answer(specs.status(), {});
      return;
    }
    ControlPlane& cp = *plan->cp;
    cp.PostSubmissions(std::move(specs).value(), req_.idempotency_key(),
                       [self = std::move(self), array](StatusOr<std::vector<TaskId>> ids) {
                         v1::SubmitResponse resp;
                         if (ids.ok()) {
                           resp.set_id(ids->front().value());
                           for (TaskId id : *ids) {
                             if (array) resp.add_ids(id.value());
                           }
                         }
                         self->Answer(ids.status(), resp);
                       });
  }

  // The request's task, or its array's tasks.
  StatusOr<std::vector<core::TaskSpec>> Specs(core::TaskSpec spec) const {
    if (!req_.has_array()) {
      std::vector<core::TaskSpec> one;
      one.push_back(std::move(spec));
      return one;
    }
    GS_ASSIGN_OR_RETURN(const IndexRange range, rpc::IndexRangeFromProto(req_.array()));
    return ControlPlane::ArraySpecs(spec, range);
  }

  void Answer(const Status& s, const v1::SubmitResponse& resp) {
    std::lock_guard<std::mutex> lock(answering_->mu);
    if (!answering_->open) return;  // the server shut down: the call was cancelled
    Hold(shared_from_this());       // until the Finish completes
    if (s.ok()) {
      responder_.Finish(resp, grpc::Status::OK, &finished_);
    } else {
      responder_.FinishWithError(rpc::ToGrpc(s), &finished_);
    }
  }

  // The queue's reference, held by whoever starts an operation (Request, Answer) and
  // released on the queue's thread when it completes. gRPC's queue orders the two, but
  // through its own locks, which ThreadSanitizer cannot see: self_mu_ states the order.
  void Hold(std::shared_ptr<Call> self) {
    std::lock_guard<std::mutex> lock(self_mu_);
    self_ = std::move(self);
  }
  std::shared_ptr<Call> Release() {
    std::lock_guard<std::mutex> lock(self_mu_);
    return std::move(self_);
  }

  AsyncSubmit& owner_;  // used on the queue's thread only, before Stop
  const std::shared_ptr<Answering> answering_;
  Tag requested_{this, Op::kRequested};
  Tag finished_{this, Op::kFinished};
  grpc::ServerContext ctx_;
  v1::SubmitRequest req_;
  grpc::ServerAsyncResponseWriter<v1::SubmitResponse> responder_{&ctx_};
  std::mutex self_mu_;
  std::shared_ptr<Call> self_;  // guarded by self_mu_: the queue's reference
};

AsyncSubmit::AsyncSubmit(ApiService& api, AsyncQueue& queue) : api_(api), queue_(queue) {}

AsyncSubmit::~AsyncSubmit() { Stop(); }

void AsyncSubmit::Start() {
  {
    std::lock_guard<std::mutex> lock(accept_mu_);
    accepting_ = true;
  }
  Accept();
}

void AsyncSubmit::Stop() {
  {
    std::lock_guard<std::mutex> lock(accept_mu_);
    accepting_ = false;
  }
  std::lock_guard<std::mutex> lock(answering_->mu);
  answering_->open = false;
}

void AsyncSubmit::Accept() {
  std::lock_guard<std::mutex> lock(accept_mu_);
  if (!accepting_) return;  // not started, or stopped
  auto call = std::make_shared<Call>(*this);
  call->Request(call);
}

}  // namespace gpusched::server
