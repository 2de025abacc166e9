#include "store/etcd_client.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "base/host_port.h"
#include "base/log.h"
#include "etcd/rpc.grpc.pb.h"
#include "store/etcd_convert.h"

namespace gpusched::store {

namespace {

using Clock = std::chrono::steady_clock;

// One endpoint: its channel (a connection of its own, see ChannelArgs) and etcd's services.
struct Endpoint {
  std::string url;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<etcdserverpb::KV::Stub> kv;
  std::unique_ptr<etcdserverpb::Lease::Stub> lease;
  std::unique_ptr<etcdserverpb::Watch::Stub> watch;
  std::unique_ptr<etcdserverpb::Maintenance::Stub> maintenance;
  std::unique_ptr<etcdserverpb::Auth::Stub> auth;
};

// gRPC takes deadlines as the system clock's time points or as gpr_timespec: ours are the
// monotonic clock's, handed over as such.
gpr_timespec ToGpr(Clock::time_point t) {
  const int64_t left_ms = std::max<int64_t>(
      0, std::chrono::duration_cast<std::chrono::milliseconds>(t - Clock::now()).count());
  return gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_millis(left_ms, GPR_TIMESPAN));
}

bool IsHttps(const std::string& url) { return url.rfind("https://", 0) == 0; }

std::string HostPortOf(const std::string& url) {
  const size_t scheme = url.find("://");
  return scheme == std::string::npos ? url : url.substr(scheme + 3);
}

grpc::ChannelArguments ChannelArgs() {
  grpc::ChannelArguments args;
  // etcd is dialled directly, never through an HTTP proxy of the environment.
  args.SetInt(GRPC_ARG_ENABLE_HTTP_PROXY, 0);
  // A connection of this client's own: the leader election's keep-alives never queue
  // behind the store's large commits on one shared connection.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  // A member that comes back is dialled again within a second, not after gRPC's default
  // backoff of up to two minutes. (The minimum stays gRPC's: it is also how long one
  // connection attempt may take, and a member starting up under load can be slow.)
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1'000);
  // etcd answers a range of every task in one message.
  args.SetMaxReceiveMessageSize(512 * 1024 * 1024);
  return args;
}

Endpoint MakeEndpoint(const std::string& url, const EtcdTls& tls) {
  std::shared_ptr<grpc::ChannelCredentials> creds = grpc::InsecureChannelCredentials();
  if (IsHttps(url)) {
    grpc::SslCredentialsOptions o;
    o.pem_root_certs = tls.ca_pem;
    o.pem_private_key = tls.key_pem;
    o.pem_cert_chain = tls.cert_pem;
    creds = grpc::SslCredentials(o);
  }
  Endpoint e;
  e.url = url;
  e.channel = grpc::CreateCustomChannel(HostPortOf(url), creds, ChannelArgs());
  e.kv = etcdserverpb::KV::NewStub(e.channel);
  e.lease = etcdserverpb::Lease::NewStub(e.channel);
  e.watch = etcdserverpb::Watch::NewStub(e.channel);
  e.maintenance = etcdserverpb::Maintenance::NewStub(e.channel);
  e.auth = etcdserverpb::Auth::NewStub(e.channel);
  return e;
}

// What a failed call says about its endpoint.
enum class Outcome {
  kAnswered,     // etcd answered with an error: the caller gets it
  kNoAnswer,     // reached but not answered in time, or etcd's raft has no leader: retry
  kUnreachable,  // nothing reached: try the next endpoint
};

bool EtcdSaid(const grpc::Status& s) { return s.error_message().rfind("etcdserver:", 0) == 0; }

Outcome Classify(const grpc::Status& s) {
  if (s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) return Outcome::kNoAnswer;
  if (s.error_code() == grpc::StatusCode::UNAVAILABLE) {
    return EtcdSaid(s) ? Outcome::kNoAnswer : Outcome::kUnreachable;
  }
  if (s.error_code() == grpc::StatusCode::CANCELLED && !EtcdSaid(s)) return Outcome::kUnreachable;
  return Outcome::kAnswered;
}

bool TokenExpired(const grpc::Status& s) {
  return s.error_code() == grpc::StatusCode::UNAUTHENTICATED ||
         s.error_message().find("invalid auth token") != std::string::npos;
}

Status EtcdError(const std::string& url, const grpc::Status& s) {
  const std::string what = "etcd at " + url + ": " + s.error_message();
  switch (s.error_code()) {
    case grpc::StatusCode::INVALID_ARGUMENT: return InvalidArgument(what);
    case grpc::StatusCode::NOT_FOUND: return NotFound(what);
    case grpc::StatusCode::FAILED_PRECONDITION:
    case grpc::StatusCode::OUT_OF_RANGE:  // a compacted revision
      return FailedPrecondition(what);
    case grpc::StatusCode::UNAUTHENTICATED: return Unauthenticated(what);
    case grpc::StatusCode::PERMISSION_DENIED: return PermissionDenied(what);
    case grpc::StatusCode::RESOURCE_EXHAUSTED: return ResourceExhausted(what);
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DEADLINE_EXCEEDED: return Unavailable(what);
    default: return Internal(what + " (gRPC code " + std::to_string(s.error_code()) + ")");
  }
}

std::string Describe(const grpc::Status& s) {
  return s.error_message().empty() ? "gRPC code " + std::to_string(s.error_code())
                                   : s.error_message();
}

}  // namespace

// ---- the client's insides ----

// A bidirectional stream driven through a completion queue of its own, so that every step
// waits a bounded time and a stuck one can be cancelled (the synchronous API blocks).
template <class Req, class Resp>
class TimedStream {
 public:
  using Prepare = std::function<std::unique_ptr<grpc::ClientAsyncReaderWriter<Req, Resp>>(
      grpc::ClientContext*, grpc::CompletionQueue*)>;
  TimedStream(const Prepare& prepare, const std::string& token) {
    if (!token.empty()) ctx_.AddMetadata("token", token);
    rw_ = prepare(&ctx_, &cq_);
    rw_->StartCall(Tag());
  }
  ~TimedStream() { Close(); }
  TimedStream(const TimedStream&) = delete;
  TimedStream& operator=(const TimedStream&) = delete;

  // Each waits until `deadline` for the step (and the steps before it) to finish.
  bool Started(Clock::time_point deadline) { return WaitAll(deadline); }
  bool Write(const Req& r, Clock::time_point deadline) {
    rw_->Write(r, Tag());
    return WaitAll(deadline);
  }
  bool Read(Resp* r, Clock::time_point deadline) {
    rw_->Read(r, Tag());
    return WaitAll(deadline);
  }
  // Ends a step in progress from another thread (it then fails).
  void Cancel() { ctx_.TryCancel(); }
  bool timed_out() const { return timed_out_; }
  // Why the stream ended (after a failed step). Cancels it first.
  grpc::Status Close() {
    if (closed_) return final_;
    closed_ = true;
    ctx_.TryCancel();
    Drain();
    rw_->Finish(&final_, Tag());
    Drain();
    cq_.Shutdown();
    void* tag = nullptr;
    bool ok = false;
    while (cq_.Next(&tag, &ok)) {
    }
    return final_;
  }

 private:
  void* Tag() {
    ++pending_;
    return reinterpret_cast<void*>(static_cast<intptr_t>(pending_));
  }
  bool WaitAll(Clock::time_point deadline) {
    bool all_ok = true;
    while (pending_ > 0) {
      void* tag = nullptr;
      bool ok = false;
      const auto r = cq_.AsyncNext(&tag, &ok, ToGpr(deadline));
      if (r == grpc::CompletionQueue::TIMEOUT) {
        timed_out_ = true;
        return false;
      }
      if (r != grpc::CompletionQueue::GOT_EVENT) return false;
      --pending_;
      all_ok = all_ok && ok;
    }
    return all_ok;
  }
  void Drain() {
    while (pending_ > 0) {
      void* tag = nullptr;
      bool ok = false;
      if (!cq_.Next(&tag, &ok)) break;
      --pending_;
    }
  }

  grpc::ClientContext ctx_;
  grpc::CompletionQueue cq_;
  std::unique_ptr<grpc::ClientAsyncReaderWriter<Req, Resp>> rw_;
  int pending_ = 0;
  bool timed_out_ = false;
  bool closed_ = false;
  grpc::Status final_;
};

using KeepAliveStream =
    TimedStream<etcdserverpb::LeaseKeepAliveRequest, etcdserverpb::LeaseKeepAliveResponse>;
using WatchStream = TimedStream<etcdserverpb::WatchRequest, etcdserverpb::WatchResponse>;

struct EtcdClient::Impl {
  Options options;
  std::vector<Endpoint> endpoints;
  std::atomic<size_t> current{0};

  std::mutex token_mu;
  std::string token;  // etcd's auth token; "" = none yet (or no user)

  std::mutex keepalive_mu;  // one keep-alive at a time on the stream
  std::unique_ptr<KeepAliveStream> keepalive;
  size_t keepalive_endpoint = 0;

  std::mutex watch_mu;
  bool watches_cancelled = false;
  std::vector<WatchStream*> watches;

  Clock::time_point Deadline() const {
    return Clock::now() + std::chrono::milliseconds(options.request_timeout_ms);
  }
  std::string Token() {
    std::lock_guard<std::mutex> lock(token_mu);
    return token;
  }
  // A token for calls to `e` (authenticating there when none is held); "" without a user.
  StatusOr<std::string> EnsureToken(Endpoint& e);
  void ForgetToken(const std::string& stale) {
    std::lock_guard<std::mutex> lock(token_mu);
    if (token == stale) token.clear();
  }
  // One unary call on `e` with the deadline and the token; authenticates again once when
  // etcd says the token expired.
  template <class Resp, class Fn>
  grpc::Status Invoke(Endpoint& e, Fn& fn, Resp* resp);
};

StatusOr<std::string> EtcdClient::Impl::EnsureToken(Endpoint& e) {
  if (options.user.empty()) return std::string();
  if (std::string t = Token(); !t.empty()) return t;
  etcdserverpb::AuthenticateRequest req;
  req.set_name(options.user);
  req.set_password(options.password);
  etcdserverpb::AuthenticateResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(ToGpr(Deadline()));
  const grpc::Status s = e.auth->Authenticate(&ctx, req, &resp);
  if (!s.ok()) {
    if (Classify(s) != Outcome::kAnswered) return Unavailable(e.url + ": " + Describe(s));
    return Unauthenticated("etcd at " + e.url + ": user \"" + options.user +
                           "\" was not let in (--etcd-user, --etcd-password-file): " +
                           Describe(s));
  }
  std::lock_guard<std::mutex> lock(token_mu);
  token = resp.token();
  return token;
}

namespace {
// Waits up to `timeout_ms` for `e`'s connection to finish connecting: DEADLINE_EXCEEDED when
// it does not (a stopped member that accepts TCP but never answers).
//
// A channel whose last attempt failed stays TRANSIENT_FAILURE while gRPC dials again in the
// background, and a call on it fails at once. That dial makes progress only while some thread
// polls gRPC: a caller that only retried failing calls would leave it to gRPC's backup poller,
// every 5 s (a restarted member was reached after 10-20 s). So a failed channel is waited on
// too, for at most kFailedWaitMs, which polls; then the call is made and fails or succeeds.
constexpr int kFailedWaitMs = 250;

grpc::Status Connected(Endpoint& e, int timeout_ms) {
  grpc_connectivity_state st = e.channel->GetState(/*try_to_connect=*/true);
  if (st == GRPC_CHANNEL_TRANSIENT_FAILURE) {
    e.channel->WaitForStateChange(
        st, ToGpr(Clock::now() + std::chrono::milliseconds(std::min(timeout_ms, kFailedWaitMs))));
    return grpc::Status::OK;
  }
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  while (st == GRPC_CHANNEL_IDLE || st == GRPC_CHANNEL_CONNECTING) {
    if (!e.channel->WaitForStateChange(st, ToGpr(deadline))) {
      return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                          "not connected in " + std::to_string(timeout_ms) + " ms");
    }
    st = e.channel->GetState(/*try_to_connect=*/true);
  }
  return grpc::Status::OK;
}
}  // namespace

template <class Resp, class Fn>
grpc::Status EtcdClient::Impl::Invoke(Endpoint& e, Fn& fn, Resp* resp) {
  if (grpc::Status c = Connected(e, options.connect_timeout_ms); !c.ok()) return c;
  for (int attempt = 0;; ++attempt) {
    StatusOr<std::string> t = EnsureToken(e);
    if (!t.ok()) {
      const bool reached = t.status().code() != StatusCode::kUnavailable;
      return grpc::Status(reached ? grpc::StatusCode::UNAUTHENTICATED
                                  : grpc::StatusCode::UNAVAILABLE,
                          t.status().message());
    }
    grpc::ClientContext ctx;
    ctx.set_deadline(ToGpr(Deadline()));
    if (!t->empty()) ctx.AddMetadata("token", *t);
    grpc::Status s = fn(e, ctx, resp);
    if (s.ok() || attempt > 0 || t->empty() || !TokenExpired(s)) return s;
    ForgetToken(*t);
  }
}

namespace {

// Calls `fn(endpoint, ctx, resp)` on one endpoint after another as the header describes.
template <class Resp, class Fn>
StatusOr<Resp> CallAny(EtcdClient& client, EtcdClient::Impl& impl, Fn fn) {
  GS_RETURN_IF_ERROR(client.Identity());
  const auto deadline = Clock::now() + std::chrono::milliseconds(impl.options.retry_for_ms);
  const size_t n = impl.endpoints.size();
  std::string errors;
  for (;;) {
    bool reached = false;  // some endpoint took the request but did not answer in time
    errors.clear();
    const size_t start = impl.current.load();
    for (size_t tried = 0; tried < n; ++tried) {
      const size_t i = (start + tried) % n;
      Endpoint& e = impl.endpoints[i];
      Resp resp;
      const grpc::Status s = impl.Invoke(e, fn, &resp);
      const Outcome o = s.ok() ? Outcome::kAnswered : Classify(s);
      if (o == Outcome::kAnswered) {
        impl.current.store(i);
        if (!s.ok()) return EtcdError(e.url, s);
        GS_RETURN_IF_ERROR(client.CheckCluster(e.url, resp.header().cluster_id()));
        return resp;
      }
      reached = reached || o == Outcome::kNoAnswer;
      errors += (errors.empty() ? "" : "; ") + e.url + ": " + Describe(s);
    }
    if (!reached || Clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return Unavailable("etcd unreachable (" + errors + ")");
}

}  // namespace

// ---- the calls ----

EtcdOp EtcdOp::Put(std::string key, std::string value, int64_t lease) {
  EtcdOp op;
  op.kind = Kind::kPut;
  op.key = std::move(key);
  op.value = std::move(value);
  op.lease = lease;
  return op;
}

EtcdOp EtcdOp::Delete(std::string key, std::string range_end) {
  EtcdOp op;
  op.kind = Kind::kDelete;
  op.key = std::move(key);
  op.range_end = std::move(range_end);
  return op;
}

EtcdOp EtcdOp::Get(std::string key, std::string range_end, int64_t limit) {
  EtcdOp op;
  op.kind = Kind::kRange;
  op.key = std::move(key);
  op.range_end = std::move(range_end);
  op.limit = limit;
  return op;
}

StatusOr<EtcdRange> EtcdClient::Range(const std::string& key, const std::string& range_end,
                                      int64_t limit, int64_t revision) {
  const etcdserverpb::RangeRequest req =
      ToRangeRequest(EtcdOp::Get(key, range_end, limit), revision);
  GS_ASSIGN_OR_RETURN(
      etcdserverpb::RangeResponse resp,
      (CallAny<etcdserverpb::RangeResponse>(
          *this, *impl_, [&req](Endpoint& e, grpc::ClientContext& ctx, auto* r) {
            return e.kv->Range(&ctx, req, r);
          })));
  return FromRangeResponse(resp);
}

StatusOr<EtcdTxnResult> EtcdClient::Txn(const std::vector<EtcdCompare>& compare,
                                        const std::vector<EtcdOp>& success,
                                        const std::vector<EtcdOp>& failure) {
  const etcdserverpb::TxnRequest req = ToTxnRequest(compare, success, failure);
  GS_ASSIGN_OR_RETURN(
      etcdserverpb::TxnResponse resp,
      (CallAny<etcdserverpb::TxnResponse>(
          *this, *impl_, [&req](Endpoint& e, grpc::ClientContext& ctx, auto* r) {
            return e.kv->Txn(&ctx, req, r);
          })));
  return FromTxnResponse(resp);
}

StatusOr<int64_t> EtcdClient::LeaseGrant(int64_t ttl_s) {
  etcdserverpb::LeaseGrantRequest req;
  req.set_ttl(ttl_s);
  GS_ASSIGN_OR_RETURN(
      etcdserverpb::LeaseGrantResponse resp,
      (CallAny<etcdserverpb::LeaseGrantResponse>(
          *this, *impl_, [&req](Endpoint& e, grpc::ClientContext& ctx, auto* r) {
            return e.lease->LeaseGrant(&ctx, req, r);
          })));
  if (!resp.error().empty()) return Unavailable("etcd: lease grant: " + resp.error());
  if (resp.id() == 0) return Internal("etcd: lease grant answered no lease id");
  return resp.id();
}

Status EtcdClient::LeaseRevoke(int64_t lease) {
  etcdserverpb::LeaseRevokeRequest req;
  req.set_id(lease);
  auto resp = CallAny<etcdserverpb::LeaseRevokeResponse>(
      *this, *impl_, [&req](Endpoint& e, grpc::ClientContext& ctx, auto* r) {
        return e.lease->LeaseRevoke(&ctx, req, r);
      });
  if (!resp.ok() && resp.status().code() != StatusCode::kNotFound) return resp.status();
  return Status::Ok();
}

Status EtcdClient::Compact(int64_t revision) {
  etcdserverpb::CompactionRequest req;
  req.set_revision(revision);
  auto resp = CallAny<etcdserverpb::CompactionResponse>(
      *this, *impl_, [&req](Endpoint& e, grpc::ClientContext& ctx, auto* r) {
        return e.kv->Compact(&ctx, req, r);
      });
  // Already compacted past it: nothing to do.
  if (!resp.ok() && resp.status().message().find("compacted") != std::string::npos) {
    return Status::Ok();
  }
  return resp.status();
}

std::vector<EtcdMemberStatus> EtcdClient::MemberStatuses() {
  std::vector<EtcdMemberStatus> out;
  for (Endpoint& e : impl_->endpoints) {
    auto call = [](Endpoint& ep, grpc::ClientContext& ctx, etcdserverpb::StatusResponse* r) {
      return ep.maintenance->Status(&ctx, etcdserverpb::StatusRequest(), r);
    };
    etcdserverpb::StatusResponse resp;
    const grpc::Status s = impl_->Invoke(e, call, &resp);
    if (s.ok()) {
      out.push_back(FromStatusResponse(e.url, resp));
    } else {
      EtcdMemberStatus m;
      m.endpoint = e.url;
      m.error = Describe(s);
      out.push_back(std::move(m));
    }
  }
  return out;
}

// ---- streams ----

StatusOr<int64_t> EtcdClient::LeaseKeepAlive(int64_t lease) {
  GS_RETURN_IF_ERROR(Identity());
  std::lock_guard<std::mutex> lock(impl_->keepalive_mu);
  Impl& im = *impl_;
  const auto deadline = im.Deadline();
  if (im.keepalive == nullptr) {
    im.keepalive_endpoint = im.current.load() % im.endpoints.size();
    Endpoint& e = im.endpoints[im.keepalive_endpoint];
    StatusOr<std::string> token = im.EnsureToken(e);
    if (!token.ok()) return token.status();
    im.keepalive = std::make_unique<KeepAliveStream>(
        [&e](grpc::ClientContext* c, grpc::CompletionQueue* q) {
          return e.lease->PrepareAsyncLeaseKeepAlive(c, q);
        },
        *token);
  }
  const std::string& url = im.endpoints[im.keepalive_endpoint].url;
  etcdserverpb::LeaseKeepAliveRequest req;
  req.set_id(lease);
  etcdserverpb::LeaseKeepAliveResponse resp;
  const bool ok = im.keepalive->Started(deadline) && im.keepalive->Write(req, deadline) &&
                  im.keepalive->Read(&resp, deadline);
  if (!ok) {
    // A new stream next time, on the next endpoint when this one did not answer.
    const bool timed_out = im.keepalive->timed_out();
    const grpc::Status why = im.keepalive->Close();
    im.keepalive.reset();
    if (TokenExpired(why)) im.ForgetToken(im.Token());
    im.current.store((im.keepalive_endpoint + 1) % im.endpoints.size());
    return Unavailable("etcd at " + url + ": lease keep-alive " +
                       (timed_out ? "not answered in " +
                                        std::to_string(im.options.request_timeout_ms) + " ms"
                                  : "stream ended: " + Describe(why)));
  }
  GS_RETURN_IF_ERROR(CheckCluster(url, resp.header().cluster_id()));
  return resp.ttl() > 0 ? resp.ttl() : 0;
}

StatusOr<std::vector<EtcdEvent>> EtcdClient::WatchKey(const std::string& key,
                                                      int64_t start_revision, int timeout_ms) {
  GS_RETURN_IF_ERROR(Identity());
  Impl& im = *impl_;
  Endpoint& e = im.endpoints[im.current.load() % im.endpoints.size()];
  GS_ASSIGN_OR_RETURN(std::string token, im.EnsureToken(e));
  WatchStream stream(
      [&e](grpc::ClientContext* c, grpc::CompletionQueue* q) {
        return e.watch->PrepareAsyncWatch(c, q);
      },
      token);
  {
    std::lock_guard<std::mutex> lock(im.watch_mu);
    if (im.watches_cancelled) return std::vector<EtcdEvent>{};
    im.watches.push_back(&stream);
  }
  struct Unregister {
    Impl& im;
    WatchStream* s;
    ~Unregister() {
      std::lock_guard<std::mutex> lock(im.watch_mu);
      std::erase(im.watches, s);
    }
  } unregister{im, &stream};
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  etcdserverpb::WatchRequest req;
  req.mutable_create_request()->set_key(key);
  req.mutable_create_request()->set_start_revision(start_revision);
  if (!stream.Started(im.Deadline()) || !stream.Write(req, im.Deadline())) {
    if (stream.timed_out()) return Unavailable("etcd at " + e.url + ": watch not answered");
    const grpc::Status why = stream.Close();
    if (why.error_code() == grpc::StatusCode::CANCELLED) return std::vector<EtcdEvent>{};
    return Unavailable("etcd at " + e.url + ": watch: " + Describe(why));
  }
  for (;;) {
    etcdserverpb::WatchResponse resp;
    if (!stream.Read(&resp, deadline)) return std::vector<EtcdEvent>{};  // timeout or cancel
    GS_RETURN_IF_ERROR(CheckCluster(e.url, resp.header().cluster_id()));
    GS_ASSIGN_OR_RETURN(std::vector<EtcdEvent> events, FromWatchResponse(resp));
    if (!events.empty()) return events;
  }
}

void EtcdClient::CancelWatches() {
  std::lock_guard<std::mutex> lock(impl_->watch_mu);
  impl_->watches_cancelled = true;
  for (WatchStream* s : impl_->watches) s->Cancel();
}

void EtcdClient::ResumeWatches() {
  std::lock_guard<std::mutex> lock(impl_->watch_mu);
  impl_->watches_cancelled = false;
}

// ---- set-up ----

std::string EtcdClient::PrefixEnd(const std::string& prefix) {
  std::string end = prefix;
  while (!end.empty()) {
    if (static_cast<uint8_t>(end.back()) < 0xff) {
      end.back() = static_cast<char>(static_cast<uint8_t>(end.back()) + 1);
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');  // every key
}

StatusOr<std::vector<std::string>> ParseEtcdEndpoints(const std::string& list,
                                                      const std::string& field) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    if (comma == std::string::npos) comma = list.size();
    std::string e = list.substr(start, comma - start);
    start = comma + 1;
    if (e.empty()) continue;
    const bool tls = e.rfind("https://", 0) == 0;
    if (e.find("://") != std::string::npos && !tls && e.rfind("http://", 0) != 0) {
      return InvalidArgument(field + ": \"" + e + "\": the scheme must be http:// or https://");
    }
    std::string hostport = HostPortOf(e);
    while (!hostport.empty() && hostport.back() == '/') hostport.pop_back();
    if (const auto hp = ParseHostPort(hostport, field); !hp.ok()) {
      return InvalidArgument(field + ": \"" + e + "\" is not http(s)://HOST:PORT (" +
                             hp.status().message() + ")");
    }
    out.push_back((tls ? "https://" : "http://") + hostport);
  }
  if (out.empty()) return InvalidArgument(field + ": no etcd endpoint in \"" + list + "\"");
  return out;
}

bool EtcdEndpointIsLoopback(const std::string& url) {
  const StatusOr<HostPort> hp = ParseHostPort(HostPortOf(url), "etcd");
  if (!hp.ok()) return false;
  return hp->host == "localhost" || hp->host == "::1" || hp->host.rfind("127.", 0) == 0;
}

namespace {
StatusOr<std::string> ReadPem(const std::string& file, const std::string& flag) {
  if (file.empty()) return std::string();
  std::ifstream in(file, std::ios::binary);
  std::stringstream text;
  if (!in || !(text << in.rdbuf())) {
    return InvalidArgument(flag + ": cannot read \"" + file + "\"");
  }
  if (text.str().find("-----BEGIN ") == std::string::npos) {
    return InvalidArgument(flag + ": \"" + file + "\" holds no PEM block");
  }
  return text.str();
}
}  // namespace

StatusOr<EtcdTls> LoadEtcdTls(const std::string& ca_file, const std::string& cert_file,
                              const std::string& key_file) {
  if (cert_file.empty() != key_file.empty()) {
    return InvalidArgument(std::string(cert_file.empty() ? "--etcd-cert" : "--etcd-key") +
                           ": missing; a client certificate needs both --etcd-cert and "
                           "--etcd-key");
  }
  EtcdTls tls;
  GS_ASSIGN_OR_RETURN(tls.ca_pem, ReadPem(ca_file, "--etcd-ca"));
  GS_ASSIGN_OR_RETURN(tls.cert_pem, ReadPem(cert_file, "--etcd-cert"));
  GS_ASSIGN_OR_RETURN(tls.key_pem, ReadPem(key_file, "--etcd-key"));
  return tls;
}

StatusOr<std::string> ReadEtcdPassword(const std::string& file) {
  std::ifstream in(file);
  std::string line;
  if (!in || !std::getline(in, line)) {
    return InvalidArgument("--etcd-password-file: cannot read \"" + file + "\"");
  }
  if (!line.empty() && line.back() == '\r') line.pop_back();
  if (line.empty()) return InvalidArgument("--etcd-password-file: \"" + file + "\" is empty");
  return line;
}

StatusOr<std::unique_ptr<EtcdClient>> EtcdClient::Create(std::vector<std::string> endpoints,
                                                         Options options) {
  if (endpoints.empty()) return InvalidArgument("etcd: at least one endpoint is needed");
  return std::unique_ptr<EtcdClient>(new EtcdClient(std::move(endpoints), std::move(options)));
}

EtcdClient::EtcdClient(std::vector<std::string> endpoints, Options options)
    : endpoints_(std::move(endpoints)), impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
  for (const std::string& url : endpoints_) {
    impl_->endpoints.push_back(MakeEndpoint(url, impl_->options.tls));
  }
}

const EtcdClient::Options& EtcdClient::options() const { return impl_->options; }

EtcdClient::~EtcdClient() {
  CancelWatches();
  std::lock_guard<std::mutex> lock(impl_->keepalive_mu);
  impl_->keepalive.reset();
}

Status EtcdClient::Identity() const {
  if (!other_cluster_.load(std::memory_order_acquire)) return Status::Ok();
  std::lock_guard<std::mutex> lock(identity_mu_);
  return FailedPrecondition(identity_error_);
}

Status EtcdClient::CheckCluster(const std::string& url, uint64_t id) {
  if (id == 0) return Status::Ok();
  uint64_t first = 0;
  if (cluster_id_.compare_exchange_strong(first, id, std::memory_order_acq_rel) || first == id) {
    return Status::Ok();
  }
  std::lock_guard<std::mutex> lock(identity_mu_);
  if (!other_cluster_.load(std::memory_order_relaxed)) {
    identity_error_ = "etcd at " + url + " belongs to cluster " + std::to_string(id) +
                      ", not to cluster " + std::to_string(first) +
                      ", the one this server first reached: it was rebuilt or restored under "
                      "the server, or the endpoint list names another cluster. This server "
                      "takes no more reads or writes from etcd: put the original etcd back (or "
                      "restore its snapshot) and restart the server";
    other_cluster_.store(true, std::memory_order_release);
    logging::Error("store", identity_error_);
  }
  return FailedPrecondition(identity_error_);
}

}  // namespace gpusched::store
