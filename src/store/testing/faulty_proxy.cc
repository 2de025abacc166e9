#include "store/testing/faulty_proxy.h"

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <functional>

#include "etcd/rpc.grpc.pb.h"

namespace gpusched::store::testing {

struct FaultyProxy::Service final : etcdserverpb::KV::Service {
  explicit Service(const std::string& upstream) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_ENABLE_HTTP_PROXY, 0);
    upstream_ = etcdserverpb::KV::NewStub(
        grpc::CreateCustomChannel(upstream, grpc::InsecureChannelCredentials(), args));
  }

  std::unique_ptr<etcdserverpb::KV::Stub> upstream_;
  std::unique_ptr<grpc::Server> server_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool armed_ = false, faulted_ = false, stopping_ = false;
  Fault fault_ = Fault::kRefuse;
  std::function<std::string()> held_;  // forwards the held call, says what etcd answered
  bool holding_ = false;               // a held call's handler waits for Release
  int forwarded_ = 0;

  // Relays one call through `forward` (which returns etcd's status and a summary), or meets
  // the armed fault.
  grpc::Status Relay(const std::function<grpc::Status(std::string*)>& forward) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!armed_) {
      ++forwarded_;
      lock.unlock();
      return forward(nullptr);
    }
    armed_ = false;
    faulted_ = true;
    cv_.notify_all();
    switch (fault_) {
      case Fault::kRefuse:
        return grpc::Status(grpc::StatusCode::UNAVAILABLE, "faulty proxy: refused");
      case Fault::kLoseAnswer: {
        ++forwarded_;
        lock.unlock();
        (void)forward(nullptr);
        return grpc::Status(grpc::StatusCode::UNAVAILABLE, "faulty proxy: answer lost");
      }
      case Fault::kHold:
        break;
    }
    held_ = [this, forward] {
      std::string summary;
      const grpc::Status s = forward(&summary);
      return s.ok() ? summary : "error: " + s.error_message();
    };
    holding_ = true;
    cv_.wait(lock, [this] { return !holding_ || stopping_; });
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "faulty proxy: held, then released");
  }

  template <class Req, class Resp, class Call>
  grpc::Status Forward(const Req* req, Resp* resp, Call call) {
    return Relay([this, req, resp, call](std::string* summary) {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
      Resp r;
      const grpc::Status s = call(*upstream_, &ctx, *req, &r);
      if (summary != nullptr) *summary = Summary(r);
      if (s.ok()) *resp = r;
      return s;
    });
  }
  static std::string Summary(const etcdserverpb::TxnResponse& r) {
    return r.succeeded() ? "txn succeeded" : "txn failed";
  }
  template <class Resp>
  static std::string Summary(const Resp&) {
    return "ok";
  }

  grpc::Status Range(grpc::ServerContext*, const etcdserverpb::RangeRequest* req,
                     etcdserverpb::RangeResponse* resp) override {
    return Forward(req, resp, [](auto& s, auto* c, auto& q, auto* r) { return s.Range(c, q, r); });
  }
  grpc::Status Put(grpc::ServerContext*, const etcdserverpb::PutRequest* req,
                   etcdserverpb::PutResponse* resp) override {
    return Forward(req, resp, [](auto& s, auto* c, auto& q, auto* r) { return s.Put(c, q, r); });
  }
  grpc::Status DeleteRange(grpc::ServerContext*, const etcdserverpb::DeleteRangeRequest* req,
                           etcdserverpb::DeleteRangeResponse* resp) override {
    return Forward(req, resp,
                   [](auto& s, auto* c, auto& q, auto* r) { return s.DeleteRange(c, q, r); });
  }
  grpc::Status Txn(grpc::ServerContext*, const etcdserverpb::TxnRequest* req,
                   etcdserverpb::TxnResponse* resp) override {
    return Forward(req, resp, [](auto& s, auto* c, auto& q, auto* r) { return s.Txn(c, q, r); });
  }
  grpc::Status Compact(grpc::ServerContext*, const etcdserverpb::CompactionRequest* req,
                       etcdserverpb::CompactionResponse* resp) override {
    return Forward(req, resp,
                   [](auto& s, auto* c, auto& q, auto* r) { return s.Compact(c, q, r); });
  }
};

namespace {
std::string HostPortOf(const std::string& url) {
  const size_t scheme = url.find("://");
  return scheme == std::string::npos ? url : url.substr(scheme + 3);
}
}  // namespace

FaultyProxy::FaultyProxy(int upstream_port)
    : FaultyProxy("127.0.0.1:" + std::to_string(upstream_port)) {}

FaultyProxy::FaultyProxy(const std::string& upstream)
    : service_(std::make_unique<Service>(HostPortOf(upstream))) {
  grpc::ServerBuilder b;
  b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
  b.RegisterService(service_.get());
  service_->server_ = b.BuildAndStart();
}

FaultyProxy::~FaultyProxy() {
  {
    std::lock_guard<std::mutex> lock(service_->mu_);
    service_->stopping_ = true;
    service_->cv_.notify_all();
  }
  if (service_->server_) service_->server_->Shutdown();
}

void FaultyProxy::Arm(Fault fault) {
  std::lock_guard<std::mutex> lock(service_->mu_);
  service_->armed_ = true;
  service_->faulted_ = false;
  service_->fault_ = fault;
}

bool FaultyProxy::WaitFaulted(int timeout_ms) {
  std::unique_lock<std::mutex> lock(service_->mu_);
  return service_->cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                                [this] { return service_->faulted_; });
}

std::string FaultyProxy::Release() {
  std::function<std::string()> held;
  {
    std::lock_guard<std::mutex> lock(service_->mu_);
    if (!service_->holding_) return "";
    held.swap(service_->held_);
  }
  const std::string answer = held();
  std::lock_guard<std::mutex> lock(service_->mu_);
  ++service_->forwarded_;
  service_->holding_ = false;
  service_->cv_.notify_all();
  return answer;
}

int FaultyProxy::forwarded() const {
  std::lock_guard<std::mutex> lock(service_->mu_);
  return service_->forwarded_;
}

}  // namespace gpusched::store::testing
