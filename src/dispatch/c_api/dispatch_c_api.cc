// The dispatcher and simulated-device half of gpusched_c.h. Every entry point finds its object
// through its handle (handle_registry.h: a handle is a slot and a generation, not an address, so
// a stale or made-up handle is an error, not a crash) and passes the object's CallGate (so
// destroy can wait for it), converts Status to an int code plus a thread-local message, and
// catches exceptions: none may cross the ABI.
#include "gpusched_c.h"

#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstring>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "dispatch/c_api/async_requests.h"
#include "dispatch/c_api/c_status.h"
#include "dispatch/c_api/call_gate.h"
#include "dispatch/c_api/handle_registry.h"
#include "dispatch/cancel_token.h"
#include "dispatch/gpusched_policy.h"
#include "dispatch/prometheus_text.h"
#include "dispatch/realtime_dispatcher.h"
#include "dispatch/shared_marks.h"
#include "dispatch/sim_device.h"

using gpusched::Status;
using gpusched::StatusOr;
using gpusched::capi::CallGate;
using gpusched::capi::CloseHandle;
using gpusched::capi::Enter;
using gpusched::capi::HandleKind;
using gpusched::capi::NewHandle;
using gpusched::capi::RemoveHandle;
using gpusched::capi::Guard;
using gpusched::capi::Null;
using namespace gpusched::dispatch;

namespace {

struct CDispatcher {
  gpusched::RealClock clock;
  std::unique_ptr<NodeDispatcher> dispatcher;  // GpuschedPolicy or RealtimeDispatcher
  CallGate gate;
  std::mutex mu;
  // Under mu: tickets (-> GPU) granted by gpusched_dispatcher_acquire and not yet released. A
  // lease held inside gpusched_dispatcher_run is not among them, so no caller can release it
  // from outside; it is in run_tickets until its run releases it.
  std::map<uint64_t, int32_t> api_tickets;
  std::map<uint64_t, int32_t> run_tickets;
  int acquiring = 0;      // acquires inside the policy (a grant not yet in a map above)
  bool draining = false;  // gpusched_dispatcher_drain was called: nothing is granted, for good
  std::condition_variable leases_cv;  // notified when a lease comes back or an acquire ends
  int64_t acquire_timeout_ms = 0;     // the options', for queued asynchronous requests
  std::vector<uint64_t> timeouts;     // under mu, by service: blocking acquires timed out
  std::unique_ptr<gpusched::capi::AsyncRequests> async;  // gpusched_dispatcher_acquire_async
};

struct CCancel {
  CancelToken token;
  CallGate gate;
};

struct CSimDevices {
  gpusched::RealClock clock;
  std::vector<std::unique_ptr<SimDevice>> devices;
  CallGate gate;
};

// Declares `d`, the dispatcher of live handle `handle`, and holds its gate for the rest of the
// call.
#define GS_ENTER_DISPATCHER(d, handle, call, ...)  \
  std::optional<CallGate::Pass> pass_;             \
  CDispatcher* d = nullptr;                        \
  GS_RETURN_IF_ERROR(Enter(handle, HandleKind::kDispatcher, "dispatcher", call, pass_, d, ##__VA_ARGS__))
#define GS_ENTER_SIM_DEVICES(s, handle, call) \
  std::optional<CallGate::Pass> pass_;        \
  CSimDevices* s = nullptr;                   \
  GS_RETURN_IF_ERROR(Enter(handle, HandleKind::kSimDevices, "devices", call, pass_, s))

Status Flag(const char* name, int32_t value) {
  if (value == 0 || value == 1) return Status::Ok();
  return gpusched::InvalidArgument(std::string("options.") + name + ": must be 0 or 1, got " +
                                   std::to_string(value));
}

Status CheckOptions(const gpusched_dispatcher_options& o, int32_t count) {
  GS_RETURN_IF_ERROR(Flag("literal_release", o.literal_release));
  GS_RETURN_IF_ERROR(Flag("max_fin_time", o.max_fin_time));
  GS_RETURN_IF_ERROR(Flag("earliest_finish_scan", o.earliest_finish_scan));
  GS_RETURN_IF_ERROR(Flag("elapsed_budget", o.elapsed_budget));
  GS_RETURN_IF_ERROR(Flag("direct_no_lock", o.direct_no_lock));
  if (o.cost_learning < 0 || o.cost_learning > 2) {
    return gpusched::InvalidArgument(
        "options.cost_learning: must be 0 (cumulative mean), 1 (EMA) or 2 (offline), got " +
        std::to_string(o.cost_learning));
  }
  if (!(o.ema_alpha >= 0 && o.ema_alpha <= 1)) {  // also refuses NaN
    return gpusched::InvalidArgument("options.ema_alpha: must be in (0, 1] (0: 0.2), got " +
                                     std::to_string(o.ema_alpha));
  }
  if (count < 0) {
    return gpusched::InvalidArgument("service_count: must be >= 0, got " + std::to_string(count));
  }
  return Status::Ok();
}

StatusOr<std::vector<ServiceConfig>> ToServices(const gpusched_service_config* services,
                                                int32_t count) {
  std::vector<ServiceConfig> out;
  for (int32_t i = 0; i < count; ++i) {
    if (services[i].name == nullptr) {
      return Null(("services[" + std::to_string(i) + "].name").c_str());
    }
    out.push_back({services[i].name, services[i].cost_time_ms, services[i].wait_time_ms,
                   services[i].try_time_ms});
  }
  return out;
}

CostLearning ToLearning(int32_t cost_learning) {
  return cost_learning == 1   ? CostLearning::kEma
         : cost_learning == 2 ? CostLearning::kOffline
                              : CostLearning::kCumulativeMean;
}

StatusOr<DispatcherConfig> ToConfig(const gpusched_dispatcher_options& o,
                                    std::vector<ServiceConfig> services) {
  DispatcherConfig c;
  c.gpu_count = o.gpu_count;
  c.services = std::move(services);
  c.release = o.literal_release ? ReleaseMode::kLiteral : ReleaseMode::kOwnerChecked;
  c.fin_update = o.max_fin_time ? FinTimeUpdate::kMax : FinTimeUpdate::kLiteral;
  c.scan = o.earliest_finish_scan ? ScanOrder::kEarliestFinish : ScanOrder::kIndex;
  c.budget = o.elapsed_budget ? WaitBudget::kElapsed : WaitBudget::kSubtractTryTime;
  c.direct = o.direct_no_lock ? DirectMode::kNoLock : DirectMode::kLockEarliestFinish;
  c.learning = ToLearning(o.cost_learning);
  c.ema_alpha = o.ema_alpha > 0 ? o.ema_alpha : 0.2;
  c.max_per_gpu = o.max_per_gpu;
  c.acquire_timeout = o.acquire_timeout_ms;
  return c;
}

// The gpusched policy takes the options every policy shares; a claim flag is an error.
StatusOr<GpuschedConfig> ToGpuschedConfig(const gpusched_dispatcher_options& o,
                                          std::vector<ServiceConfig> services) {
  const std::pair<const char*, int32_t> claim_flags[] = {
      {"literal_release", o.literal_release}, {"max_fin_time", o.max_fin_time},
      {"earliest_finish_scan", o.earliest_finish_scan}, {"elapsed_budget", o.elapsed_budget},
      {"direct_no_lock", o.direct_no_lock}};
  for (const auto& [name, value] : claim_flags) {
    if (value != 0) {
      return gpusched::InvalidArgument(
          std::string("options.") + name + ": an option of the literal policy only; select it "
          "with gpusched_dispatcher_create_ex(\"literal\", ...)");
    }
  }
  // The literal policy's checks of the services (claim 7 and try_time), so a config valid
  // for one policy is valid for the other.
  DispatcherConfig check;
  check.gpu_count = std::max(o.gpu_count, 1);
  check.services = services;
  GS_RETURN_IF_ERROR(ValidateConfig(check));
  GpuschedConfig c;
  c.gpu_count = o.gpu_count;
  c.services = std::move(services);
  c.learning = ToLearning(o.cost_learning);
  c.ema_alpha = o.ema_alpha > 0 ? o.ema_alpha : 0.2;
  c.max_per_gpu = o.max_per_gpu;
  c.acquire_timeout = o.acquire_timeout_ms;
  return c;
}

// Issue 42, item 5: the placement options into `c` (its gpu_count set). NULL: none.
Status ApplyPlacement(const gpusched_placement_options* p, GpuschedConfig& c) {
  if (p == nullptr) return Status::Ok();
  if (p->struct_size != sizeof(gpusched_placement_options)) {
    return gpusched::InvalidArgument(
        "placement.struct_size: must be sizeof(gpusched_placement_options) = " +
        std::to_string(sizeof(gpusched_placement_options)) + ", got " +
        std::to_string(p->struct_size));
  }
  const size_t n = static_cast<size_t>(std::max(c.gpu_count, 0));
  if (p->gpu_memory_mib != nullptr) c.gpu_memory_mib.assign(p->gpu_memory_mib, p->gpu_memory_mib + n);
  if (p->gpu_speed != nullptr) c.gpu_speed.assign(p->gpu_speed, p->gpu_speed + n);
  c.affinity_margin_ms = p->affinity_margin_ms;
  if (p->models_per_gpu != 0) c.models_per_gpu = p->models_per_gpu;
  GS_RETURN_IF_ERROR(Flag("placement.fixed_speed", p->fixed_speed));
  c.learn_speed = p->fixed_speed == 0;
  return Status::Ok();
}

// The literal policy has no placement inputs: a set one is an error naming it.
Status RefusePlacementForLiteral(const gpusched_placement_options* p) {
  if (p == nullptr) return Status::Ok();
  const char* field = p->gpu_memory_mib != nullptr     ? "gpu_memory_mib"
                      : p->gpu_speed != nullptr        ? "gpu_speed"
                      : p->affinity_margin_ms != 0     ? "affinity_margin_ms"
                      : p->models_per_gpu != 0         ? "models_per_gpu"
                      : p->fixed_speed != 0            ? "fixed_speed"
                                                       : nullptr;
  if (field == nullptr) return Status::Ok();
  return gpusched::InvalidArgument(std::string("placement.") + field +
                                   ": the literal policy (CN113051059B) places by time only; "
                                   "use the gpusched policy");
}

StatusOr<std::unique_ptr<NodeDispatcher>> MakeDispatcher(const char* policy,
                                                         const char* shared_marks,
                                                         const gpusched_dispatcher_options& o,
                                                         std::vector<ServiceConfig> services,
                                                         const gpusched_placement_options* placement,
                                                         gpusched::Clock& clock) {
  const std::string name = policy == nullptr ? "gpusched" : policy;
  if (name == "gpusched") {
    GS_ASSIGN_OR_RETURN(GpuschedConfig config, ToGpuschedConfig(o, std::move(services)));
    GS_RETURN_IF_ERROR(ApplyPlacement(placement, config));
    GS_RETURN_IF_ERROR(ValidateGpuschedConfig(config));
    std::unique_ptr<MarkStore> store;
    if (shared_marks != nullptr) {
      GS_ASSIGN_OR_RETURN(store, SharedMarkStore::Open(shared_marks, config.gpu_count, clock));
    }
    GS_ASSIGN_OR_RETURN(std::unique_ptr<GpuschedPolicy> p,
                        GpuschedPolicy::Create(std::move(config), clock, std::move(store)));
    return std::unique_ptr<NodeDispatcher>(std::move(p));
  }
  if (name == "literal" || name == "patent") {
    GS_RETURN_IF_ERROR(RefusePlacementForLiteral(placement));
    GS_ASSIGN_OR_RETURN(DispatcherConfig config, ToConfig(o, std::move(services)));
    GS_RETURN_IF_ERROR(ValidateConfig(config));  // before a segment is created for it
    // CN113051059B claim 1's globally unique marks: the signal marks in the segment.
    std::unique_ptr<MarkStore> store;
    if (shared_marks != nullptr) {
      GS_ASSIGN_OR_RETURN(store, SharedMarkStore::Open(shared_marks, config.gpu_count, clock,
                                                       MarkPolicy::kLiteral));
    }
    GS_ASSIGN_OR_RETURN(std::unique_ptr<RealtimeDispatcher> d,
                        RealtimeDispatcher::Create(std::move(config), clock, nullptr,
                                                   std::move(store)));
    return std::unique_ptr<NodeDispatcher>(std::move(d));
  }
  return gpusched::InvalidArgument("policy: must be \"gpusched\" (or NULL) or \"literal\" "
                                   "(alias \"patent\"), got \"" + name + "\"");
}

Lease FromC(const gpusched_lease& l) {
  Lease lease;
  lease.gpu = l.gpu;
  lease.service = l.service;
  lease.ticket = l.ticket;
  lease.locked = l.locked != 0;
  lease.attempts = l.attempts;
  lease.requested_ns = l.requested_ns;
  lease.granted_ns = l.granted_ns;
  return lease;
}

gpusched_lease ToC(const Lease& l) {
  return {l.gpu, l.service, l.ticket, l.locked ? 1 : 0, l.attempts, l.requested_ns, l.granted_ns};
}

Status CheckGpu(int32_t gpu, int32_t count) {
  if (gpu < 0 || gpu >= count) {
    return gpusched::InvalidArgument("gpu: " + std::to_string(gpu) + " out of range [0, " +
                                     std::to_string(count) + ")");
  }
  return Status::Ok();
}

StatusOr<Outcome> ToOutcome(int32_t outcome) {
  if (outcome == GPUSCHED_SUCCEEDED) return Outcome::kSucceeded;
  if (outcome == GPUSCHED_FAILED) return Outcome::kFailed;
  return gpusched::InvalidArgument("outcome: must be 0 (GPUSCHED_SUCCEEDED) or 1 (GPUSCHED_FAILED), got " +
                                   std::to_string(outcome));
}

// What an acquire entry point reports beyond its Status, decided where it failed.
struct AcquireFailure {
  bool drained = false;  // refused or ended by a drain: GPUSCHED_E_DRAINING
  bool cancelled = false;
  bool deadline_passed = false;
  int service = -1;  // its index, once known
};

// Acquire through the policy, counted for gpusched_dispatcher_drain: refused when draining;
// a grant goes into api_tickets (or run_tickets for a run) before drain can see the count
// drop, so a drain never misses a lease granted under it.
StatusOr<Lease> CountedAcquire(CDispatcher* d, int service, const AcquireOptions& options,
                               bool run, AcquireFailure& failure) {
  {
    std::lock_guard lock(d->mu);
    if (d->draining) {
      failure.drained = true;
      return gpusched::FailedPrecondition("draining");
    }
    ++d->acquiring;
  }
  StatusOr<Lease> l = gpusched::Internal("acquire: not run");
  try {
    l = d->dispatcher->Acquire(service, options);
  } catch (...) {  // Guard reports it; a drain must not wait for this acquire any more
    std::lock_guard lock(d->mu);
    --d->acquiring;
    d->leases_cv.notify_all();
    throw;
  }
  std::lock_guard lock(d->mu);
  --d->acquiring;
  if (l.ok()) {
    (run ? d->run_tickets : d->api_tickets)[l->ticket] = l->gpu;
  } else {
    failure.drained = d->draining;  // the drain's shutdown ended this wait: one drain error
  }
  d->leases_cv.notify_all();
  return l;
}

// Releases a lease held by gpusched_dispatcher_run and wakes a drain.
Status ReleaseRunLease(CDispatcher* d, const Lease& lease, Outcome outcome) {
  std::lock_guard lock(d->mu);
  const Status st = d->dispatcher->Release(lease, outcome);
  d->run_tickets.erase(lease.ticket);
  d->leases_cv.notify_all();
  return st;
}

int DrainingError(const char* call) {
  return gpusched::capi::ReportCode(
      GPUSCHED_E_DRAINING, std::string(call) + ": the dispatcher is draining "
                           "(gpusched_dispatcher_drain); no lease is granted any more");
}

// The leases a drain still waits for: "ticket 7 (gpu 0), ticket 9 (gpu 1, in a run)".
// REQUIRES: d->mu held.
std::string LeasesOutLocked(const CDispatcher& d) {
  std::string out;
  for (const auto* tickets : {&d.api_tickets, &d.run_tickets}) {
    for (const auto& [ticket, gpu] : *tickets) {
      if (!out.empty()) out += ", ";
      out += "ticket " + std::to_string(ticket) + " (gpu " + std::to_string(gpu) +
             (tickets == &d.run_tickets ? ", in a run)" : ")");
    }
  }
  return out;
}

// The acquire entry points: a wait with options, or (try_only) one round that never waits.
struct AcquireRequest {
  int64_t deadline_ms = 0;
  gpusched_cancel* cancel = nullptr;
  double expected_ms = 0;
  bool try_only = false;
  // Issue 42, item 5 (gpusched_request).
  int64_t expected_mem_mib = 0;
  const char* model = nullptr;
  int32_t priority = 0;
};

// The literal policy places by time only: a request's memory, model or priority is an error
// naming the field.
Status CheckInputsForPolicy(const NodeDispatcher& p, const AcquireRequest& r) {
  if (p.name() == "gpusched") return Status::Ok();
  const char* field = r.expected_mem_mib != 0                   ? "expected_mem_mib"
                      : (r.model != nullptr && *r.model != 0)  ? "model"
                      : r.priority != 0                         ? "priority"
                                                                : nullptr;
  if (field == nullptr) return Status::Ok();
  return gpusched::InvalidArgument(std::string("request.") + field + ": not supported by the " +
                                   std::string(p.name()) + " policy (CN113051059B places by "
                                   "time only); use the gpusched policy");
}

Status CheckAcquireArgs(const char* service, const gpusched_lease* out, const AcquireRequest& r) {
  if (!service) return Null("service");
  if (!out) return Null("out");
  if (r.deadline_ms < 0) {
    return gpusched::InvalidArgument("deadline_ms: must be >= 0 (0: none), got " +
                                     std::to_string(r.deadline_ms));
  }
  if (!(r.expected_ms >= 0) || !std::isfinite(r.expected_ms)) {
    return gpusched::InvalidArgument("expected_ms: must be finite and >= 0 (0: the service's "
                                     "cost), got " + std::to_string(r.expected_ms));
  }
  return Status::Ok();
}

Status AcquireInto(gpusched_dispatcher* handle, const char* service, const AcquireRequest& r,
                   gpusched_lease* out, AcquireFailure& failure) {
  GS_ENTER_DISPATCHER(d, handle, "gpusched_dispatcher_acquire");
  GS_RETURN_IF_ERROR(CheckAcquireArgs(service, out, r));
  std::optional<CallGate::Pass> cancel_pass;  // keeps `cancel` alive while we wait on it
  CCancel* cancel = nullptr;
  if (r.cancel != nullptr) {
    GS_RETURN_IF_ERROR(Enter(r.cancel, HandleKind::kCancel, "cancel",
                             "gpusched_dispatcher_acquire_ex", cancel_pass, cancel));
  }
  GS_RETURN_IF_ERROR(CheckInputsForPolicy(*d->dispatcher, r));
  GS_ASSIGN_OR_RETURN(int index, d->dispatcher->ServiceIndex(service));
  failure.service = index;
  AcquireOptions options;
  options.cancel = cancel != nullptr ? &cancel->token : nullptr;
  options.expected_ms = r.expected_ms;
  options.expected_mem_mib = r.expected_mem_mib;
  if (r.model != nullptr) options.model = r.model;
  options.priority = r.priority;
  // A try: a deadline that has passed already, so the policy tries one round and stops.
  if (r.try_only) options.deadline_ns = d->clock.NowNs();
  if (r.deadline_ms > 0) options.deadline_ns = d->clock.NowNs() + r.deadline_ms * 1'000'000;
  StatusOr<Lease> l = CountedAcquire(d, index, options, /*run=*/false, failure);
  if (!l.ok()) {
    failure.cancelled = cancel != nullptr && cancel->token.cancelled();
    failure.deadline_passed = r.deadline_ms > 0 && d->clock.NowNs() >= options.deadline_ns;
    if (l.status().code() == gpusched::StatusCode::kUnavailable && !r.try_only &&
        !failure.cancelled && !failure.drained) {
      std::lock_guard lock(d->mu);  // a deadline or acquire_timeout: a timeout in the metrics
      d->timeouts[index]++;
    }
    return l.status();
  }
  *out = ToC(*l);
  return Status::Ok();
}

// Unavailable from a policy that stopped waiting, or any refusal of a drain: say why, with the
// codes of gpusched_c.h.
int AcquireC(gpusched_dispatcher* d, const char* service, const AcquireRequest& r,
             gpusched_lease* out) {
  AcquireFailure failure;
  const int rc = Guard([&] { return AcquireInto(d, service, r, out, failure); });
  const std::string why = std::string(" (") + gpusched::capi::LastError() + ")";
  if (rc != 0 && failure.drained) return DrainingError("acquire");
  if (rc != GPUSCHED_E_UNAVAILABLE) return rc;
  if (failure.cancelled) {
    return gpusched::capi::ReportCode(GPUSCHED_E_CANCELLED, "acquire: cancelled" + why);
  }
  if (r.try_only) {
    return gpusched::capi::ReportCode(  // the policy's "deadline passed" would mislead here
        GPUSCHED_E_BUSY, "try_acquire: no GPU can be granted now (every GPU at max_per_gpu or "
                         "out of service; the literal policy: none in its first round)");
  }
  if (failure.deadline_passed) {
    return gpusched::capi::ReportCode(GPUSCHED_E_DEADLINE_EXCEEDED,
                                      "acquire: deadline_ms " + std::to_string(r.deadline_ms) +
                                          " passed before a GPU was granted" + why);
  }
  return rc;
}


// What the policy is asked for a queued asynchronous request (no deadline: the queue keeps it).
AcquireOptions AsyncOptions(const gpusched::capi::AsyncRequest& r) {
  AcquireOptions options;
  options.expected_ms = r.expected_ms;
  options.requested_ns = r.requested_ns;
  options.expected_mem_mib = r.expected_mem_mib;
  options.model = r.model;
  options.priority = r.priority;
  return options;
}

// One try of a queued asynchronous request: a round that never waits, counted like any acquire
// (its lease goes into api_tickets: the caller releases it).
gpusched::capi::AsyncTry TryGrantAsync(CDispatcher* d, const gpusched::capi::AsyncRequest& r) {
  AcquireOptions options = AsyncOptions(r);
  options.deadline_ns = d->clock.NowNs();  // one round
  AcquireFailure failure;
  StatusOr<Lease> l = CountedAcquire(d, r.service, options, /*run=*/false, failure);
  gpusched::capi::AsyncTry t;
  if (l.ok()) {
    t.code = 0;
    t.lease = *l;
  } else if (failure.drained) {
    t.code = GPUSCHED_E_DRAINING;
    t.message = "acquire_async: the dispatcher is draining (gpusched_dispatcher_drain); no "
                "lease is granted any more";
  } else if (l.status().code() != gpusched::StatusCode::kUnavailable) {
    t.code = static_cast<int>(l.status().code());
    t.message = "acquire_async: " + l.status().ToString();
  }  // else busy: stays queued
  return t;
}

// Retries the queued asynchronous requests: capacity may have freed. REQUIRES: d->mu not held.
void PumpAsync(CDispatcher* d) {
  d->async->Pump([d](const gpusched::capi::AsyncRequest& r) { return TryGrantAsync(d, r); });
}

// Checks and queues an asynchronous request (both acquire_async entry points): every
// argument error is returned here, as the blocking acquire would return it, and nothing is
// queued then.
Status SubmitAsync(gpusched_dispatcher* handle, const char* call, const char* service,
                   const AcquireRequest& a, uint64_t* request_out) {
  GS_ENTER_DISPATCHER(d, handle, call);
  if (!request_out) return Null("request_out");
  gpusched_lease unused;  // CheckAcquireArgs checks an out pointer; the result comes later
  GS_RETURN_IF_ERROR(CheckAcquireArgs(service, &unused, a));
  if (a.cancel != nullptr) {
    return gpusched::InvalidArgument("req.cancel: must be NULL for an asynchronous acquire "
                                     "(end it with gpusched_dispatcher_cancel_async)");
  }
  GS_RETURN_IF_ERROR(CheckInputsForPolicy(*d->dispatcher, a));
  GS_ASSIGN_OR_RETURN(int index, d->dispatcher->ServiceIndex(service));
  gpusched::capi::AsyncRequest r;
  r.service = index;
  r.expected_ms = a.expected_ms;
  r.expected_mem_mib = a.expected_mem_mib;
  if (a.model != nullptr) r.model = a.model;
  r.priority = a.priority;
  GS_RETURN_IF_ERROR(d->dispatcher->CheckRequest(index, AsyncOptions(r)));
  r.requested_ns = d->clock.NowNs();
  if (a.deadline_ms > 0) r.deadline_ns = r.requested_ns + a.deadline_ms * 1'000'000;
  const int64_t timeout_ns =
      d->acquire_timeout_ms > 0 ? r.requested_ns + d->acquire_timeout_ms * 1'000'000 : 0;
  if (timeout_ns > 0 && (r.deadline_ns == 0 || timeout_ns < r.deadline_ns)) {
    r.deadline_ns = timeout_ns;
    r.deadline_is_timeout = true;
  }
  *request_out = d->async->Submit(
      std::move(r), [d](const gpusched::capi::AsyncRequest& q) { return TryGrantAsync(d, q); });
  return Status::Ok();
}

// A gpusched_request as the acquire entry points take it: NULL and struct_size refused (this
// library knows the one size of its header).
Status FromC(const gpusched_request* req, AcquireRequest& r) {
  if (req == nullptr) return Null("req");
  if (req->struct_size != sizeof(gpusched_request)) {
    return gpusched::InvalidArgument("req.struct_size: must be sizeof(gpusched_request) = " +
                                     std::to_string(sizeof(gpusched_request)) + ", got " +
                                     std::to_string(req->struct_size));
  }
  r = {req->deadline_ms, req->cancel, req->expected_ms, /*try_only=*/false};
  r.expected_mem_mib = req->expected_mem_mib;
  r.model = req->model;
  r.priority = req->priority;
  return Status::Ok();
}

void ToC(const gpusched::capi::AsyncCompletion& c, gpusched_async_result& out) {
  out = {};
  out.request = c.id;
  out.status = c.code;
  if (c.code == 0) out.lease = ToC(c.lease);
  const size_t n = std::min(c.message.size(), sizeof out.message - 1);
  std::memcpy(out.message, c.message.data(), n);
  out.message[n] = '\0';
}

}  // namespace

extern "C" {

int gpusched_abi_version(void) { return GPUSCHED_C_ABI_VERSION; }

const char* gpusched_last_error(void) { return gpusched::capi::LastError(); }

int gpusched_dispatcher_create(const gpusched_dispatcher_options* options,
                               const gpusched_service_config* services, int32_t service_count,
                               gpusched_dispatcher** out) {
  return gpusched_dispatcher_create_ex(nullptr, nullptr, options, services, service_count, out);
}

int gpusched_dispatcher_create_ex(const char* policy, const char* shared_marks,
                                  const gpusched_dispatcher_options* options,
                                  const gpusched_service_config* services,
                                  int32_t service_count, gpusched_dispatcher** out) {
  return gpusched_dispatcher_create_ex2(policy, shared_marks, options, services, service_count,
                                        nullptr, out);
}

int gpusched_dispatcher_create_ex2(const char* policy, const char* shared_marks,
                                   const gpusched_dispatcher_options* options,
                                   const gpusched_service_config* services,
                                   int32_t service_count,
                                   const gpusched_placement_options* placement,
                                   gpusched_dispatcher** out) {
  return Guard([&]() -> Status {
    if (!options) return Null("options");
    if (!out) return Null("out");
    if (!services && service_count > 0) return Null("services");
    GS_RETURN_IF_ERROR(CheckOptions(*options, service_count));
    GS_ASSIGN_OR_RETURN(std::vector<ServiceConfig> list, ToServices(services, service_count));
    auto d = std::make_unique<CDispatcher>();
    GS_ASSIGN_OR_RETURN(d->dispatcher,
                        MakeDispatcher(policy, shared_marks, *options, std::move(list), placement,
                                       d->clock));
    d->acquire_timeout_ms = options->acquire_timeout_ms;
    d->timeouts.assign(static_cast<size_t>(service_count), 0);
    // Shared marks: capacity may free in another process, which no Pump here sees.
    GS_ASSIGN_OR_RETURN(d->async, gpusched::capi::AsyncRequests::Create(
                                      d->clock, shared_marks != nullptr ? 100 : 0));
    GS_ASSIGN_OR_RETURN(*out, NewHandle<gpusched_dispatcher>(std::move(d), HandleKind::kDispatcher));
    return Status::Ok();
  });
}

int gpusched_shared_marks_unlink(const char* name) {
  return Guard([&]() -> Status {
    if (!name) return Null("name");
    return SharedMarkStore::Unlink(name);
  });
}

int gpusched_dispatcher_destroy(gpusched_dispatcher* handle) {
  if (handle == nullptr) return 0;
  CDispatcher* closed = nullptr;  // freed once the handle is removed
  const int rc = Guard([&]() -> Status {
    {
      GS_ENTER_DISPATCHER(d, handle, "gpusched_dispatcher_destroy");  // held until the shutdown
      {
        std::lock_guard lock(d->mu);
        if (!d->api_tickets.empty()) {
          return gpusched::FailedPrecondition(
              "gpusched_dispatcher_destroy: " + std::to_string(d->api_tickets.size()) +
              " lease(s) still out; release them first (the dispatcher stays usable)");
        }
        d->dispatcher->Shutdown(true);  // waiting acquires fail
      }
      PumpAsync(d);      // queued asynchronous requests fail (FAILED_PRECONDITION)
      d->async->Wake();  // a gpusched_dispatcher_wait_async returns, so CloseHandle can finish
    }
    GS_ASSIGN_OR_RETURN(CDispatcher* d, CloseHandle<CDispatcher>(handle, HandleKind::kDispatcher, "dispatcher",
                                                                 "gpusched_dispatcher_destroy"));
    // An acquire in flight may have been granted before the shutdown: refuse, and reopen.
    std::lock_guard lock(d->mu);
    if (!d->api_tickets.empty()) {
      if (!d->draining) d->dispatcher->Shutdown(false);
      d->gate.Reopen();
      return gpusched::FailedPrecondition(
          "gpusched_dispatcher_destroy: " + std::to_string(d->api_tickets.size()) +
          " lease(s) were granted while destroying; release them first");
    }
    RemoveHandle(handle);
    closed = d;
    return Status::Ok();
  });
  if (rc == 0) delete closed;
  return rc;
}

int gpusched_dispatcher_shutdown(gpusched_dispatcher* handle, int32_t stop) {
  bool drained = false;
  const int rc = Guard([&]() -> Status {
    GS_ENTER_DISPATCHER(d, handle, "gpusched_dispatcher_shutdown");
    if (stop != 0 && stop != 1) {
      return gpusched::InvalidArgument("stop: must be 0 or 1, got " + std::to_string(stop));
    }
    std::lock_guard lock(d->mu);
    drained = stop == 0 && d->draining;  // a drain is for good
    if (drained) return gpusched::FailedPrecondition("draining");
    d->dispatcher->Shutdown(stop == 1);
    return Status::Ok();
  });
  if (rc == 0 && stop == 1) {  // queued asynchronous requests fail, as waiting acquires do
    (void)Guard([&]() -> Status {
      GS_ENTER_DISPATCHER(d, handle, "gpusched_dispatcher_shutdown");
      PumpAsync(d);
      return Status::Ok();
    });
  }
  return drained ? DrainingError("gpusched_dispatcher_shutdown(stop = 0)") : rc;
}

int gpusched_dispatcher_acquire(gpusched_dispatcher* d, const char* service,
                                gpusched_lease* out) {
  return gpusched_dispatcher_acquire_ex(d, service, 0, nullptr, 0, out);
}

int gpusched_dispatcher_acquire_ex(gpusched_dispatcher* d, const char* service,
                                   int64_t deadline_ms, gpusched_cancel* cancel,
                                   double expected_ms, gpusched_lease* out) {
  return AcquireC(d, service, {deadline_ms, cancel, expected_ms, /*try_only=*/false}, out);
}

int gpusched_dispatcher_try_acquire(gpusched_dispatcher* d, const char* service,
                                    gpusched_lease* out) {
  return AcquireC(d, service, {0, nullptr, 0, /*try_only=*/true}, out);
}

int gpusched_dispatcher_acquire2(gpusched_dispatcher* d, const gpusched_request* req,
                                 gpusched_lease* out) {
  AcquireRequest r;
  if (const int rc = Guard([&] { return FromC(req, r); }); rc != 0) return rc;
  return AcquireC(d, req->service, r, out);
}

int gpusched_dispatcher_release(gpusched_dispatcher* handle, const gpusched_lease* lease,
                                int32_t outcome) {
  return Guard([&]() -> Status {
    GS_ENTER_DISPATCHER(d, handle, "gpusched_dispatcher_release", /*allowed_while_closing=*/true);
    if (!lease) return Null("lease");
    GS_ASSIGN_OR_RETURN(Outcome o, ToOutcome(outcome));
    {
      std::lock_guard lock(d->mu);  // keeps api_tickets in step with the dispatcher's leases
      if (!d->api_tickets.contains(lease->ticket)) {  // a run's lease is not the caller's either
        return gpusched::NotFound("lease: ticket " + std::to_string(lease->ticket) +
                                  " is not outstanding on this dispatcher (released already, "
                                  "never granted by gpusched_dispatcher_acquire, or another "
                                  "dispatcher's)");
      }
      GS_RETURN_IF_ERROR(d->dispatcher->Release(FromC(*lease), o));
      d->api_tickets.erase(lease->ticket);
      d->leases_cv.notify_all();  // a drain may be waiting for it
    }
    PumpAsync(d);  // the freed capacity goes to the oldest queued asynchronous request
    return Status::Ok();
  });
}

int gpusched_dispatcher_run(gpusched_dispatcher* handle, const char* service, gpusched_run_fn fn,
                            void* user, int32_t* fn_result) {
  AcquireFailure failure;
  int32_t r = 0, gpu = -1;
  const int rc = Guard([&]() -> Status {
    GS_ENTER_DISPATCHER(d, handle, "gpusched_dispatcher_run");
    if (!service) return Null("service");
    if (!fn) return Null("fn");
    GS_ASSIGN_OR_RETURN(int index, d->dispatcher->ServiceIndex(service));
    GS_ASSIGN_OR_RETURN(Lease lease, CountedAcquire(d, index, {}, /*run=*/true, failure));
    gpu = lease.gpu;
    try {
      r = fn(lease.gpu, user);
    } catch (...) {  // a C++ callback that throws: free the GPU, then report it (Guard)
      (void)ReleaseRunLease(d, lease, Outcome::kFailed);
      throw;
    }
    if (fn_result) *fn_result = r;
    const Status released = ReleaseRunLease(d, lease, r == 0 ? Outcome::kSucceeded : Outcome::kFailed);
    PumpAsync(d);
    return released;
  });
  if (rc != 0 && failure.drained) return DrainingError("gpusched_dispatcher_run");
  if (rc != 0 || r == 0) return rc;
  // Issue 42: a failed request is an outcome the caller sees, not a success.
  return gpusched::capi::ReportCode(
      GPUSCHED_E_RUN_FAILED, "gpusched_dispatcher_run: fn returned " + std::to_string(r) +
                                 " on gpu " + std::to_string(gpu) +
                                 "; the lease was released as GPUSCHED_FAILED");
}

int gpusched_dispatcher_drain(gpusched_dispatcher* handle, int64_t deadline_ms) {
  std::string out;  // the leases still out at the deadline
  const int rc = Guard([&]() -> Status {
    GS_ENTER_DISPATCHER(d, handle, "gpusched_dispatcher_drain");
    if (deadline_ms < 0) {
      return gpusched::InvalidArgument("deadline_ms: must be >= 0 (0: do not wait), got " +
                                       std::to_string(deadline_ms));
    }
    {
      std::lock_guard lock(d->mu);
      d->draining = true;
      d->dispatcher->Shutdown(true);  // the acquires waiting now fail (once: CountedAcquire)
    }
    PumpAsync(d);  // so do the queued asynchronous requests, each once
    std::unique_lock lock(d->mu);
    const bool idle = d->clock.WaitFor(lock, d->leases_cv, deadline_ms, [d] {
      return d->api_tickets.empty() && d->run_tickets.empty() && d->acquiring == 0;
    });
    if (!idle) out = LeasesOutLocked(*d);
    if (!idle && out.empty()) out = "an acquire still returning";
    return Status::Ok();
  });
  if (rc != 0 || out.empty()) return rc;
  return gpusched::capi::ReportCode(
      GPUSCHED_E_DEADLINE_EXCEEDED, "gpusched_dispatcher_drain: deadline_ms " +
                                        std::to_string(deadline_ms) +
                                        " passed with leases still out: " + out);
}

int gpusched_dispatcher_mark(gpusched_dispatcher* handle, int32_t gpu, uint64_t* owner,
                             int64_t* fin_time_ms) {
  return Guard([&]() -> Status {
    GS_ENTER_DISPATCHER(d, handle, "gpusched_dispatcher_mark");
    GS_RETURN_IF_ERROR(CheckGpu(gpu, d->dispatcher->gpu_count()));
    const SignalMark m = d->dispatcher->mark(gpu);
    if (owner) *owner = m.owner;
    if (fin_time_ms) *fin_time_ms = m.fin_time;
    return Status::Ok();
  });
}

int gpusched_dispatcher_set_gpu_enabled(gpusched_dispatcher* handle, int32_t gpu, int32_t enabled) {
  return Guard([&]() -> Status {
    GS_ENTER_DISPATCHER(d, handle, "gpusched_dispatcher_set_gpu_enabled");
    if (enabled != 0 && enabled != 1) {
      return gpusched::InvalidArgument("enabled: must be 0 or 1, got " + std::to_string(enabled));
    }
    GS_RETURN_IF_ERROR(d->dispatcher->SetGpuEnabled(gpu, enabled == 1));
    if (enabled == 1) PumpAsync(d);
    return Status::Ok();
  });
}

int gpusched_dispatcher_service_metrics(gpusched_dispatcher* handle, const char* service,
                                        gpusched_service_metrics* out) {
  return Guard([&]() -> Status {
    GS_ENTER_DISPATCHER(d, handle, "gpusched_dispatcher_service_metrics");
    if (!service) return Null("service");
    if (!out) return Null("out");
    GS_ASSIGN_OR_RETURN(int index, d->dispatcher->ServiceIndex(service));
    const ServiceMetrics m = d->dispatcher->Metrics().services[index];
    *out = {m.completed,     m.failed,       m.give_ups,    m.direct_grabs, m.queue_ms_mean,
            m.queue_ms_max,  m.run_ms_mean,  m.run_ms_max,  m.cost_time_ms};
    return Status::Ok();
  });
}

int gpusched_dispatcher_gpu_metrics(gpusched_dispatcher* handle, int32_t gpu,
                                    gpusched_gpu_metrics* out) {
  return Guard([&]() -> Status {
    GS_ENTER_DISPATCHER(d, handle, "gpusched_dispatcher_gpu_metrics");
    if (!out) return Null("out");
    GS_RETURN_IF_ERROR(CheckGpu(gpu, d->dispatcher->gpu_count()));
    const GpuMetrics m = d->dispatcher->Metrics().gpus[gpu];
    *out = {m.running, m.started, m.busy_ms, m.occupancy, m.mean_running};
    return Status::Ok();
  });
}

int gpusched_cancel_create(gpusched_cancel** out) {
  return Guard([&]() -> Status {
    if (!out) return Null("out");
    GS_ASSIGN_OR_RETURN(*out, NewHandle<gpusched_cancel>(std::make_unique<CCancel>(), HandleKind::kCancel));
    return Status::Ok();
  });
}

int gpusched_cancel_fire(gpusched_cancel* handle) {
  return Guard([&]() -> Status {
    std::optional<CallGate::Pass> pass;
    CCancel* c = nullptr;
    GS_RETURN_IF_ERROR(Enter(handle, HandleKind::kCancel, "cancel", "gpusched_cancel_fire", pass, c));
    c->token.Cancel();
    return Status::Ok();
  });
}

int gpusched_cancel_reset(gpusched_cancel* handle) {
  return Guard([&]() -> Status {
    std::optional<CallGate::Pass> pass;
    CCancel* c = nullptr;
    GS_RETURN_IF_ERROR(Enter(handle, HandleKind::kCancel, "cancel", "gpusched_cancel_reset", pass, c));
    c->token.Reset();
    return Status::Ok();
  });
}

int gpusched_cancel_fired(gpusched_cancel* handle, int32_t* fired) {
  return Guard([&]() -> Status {
    std::optional<CallGate::Pass> pass;
    CCancel* c = nullptr;
    GS_RETURN_IF_ERROR(Enter(handle, HandleKind::kCancel, "cancel", "gpusched_cancel_fired", pass, c));
    if (!fired) return Null("fired");
    *fired = c->token.cancelled() ? 1 : 0;
    return Status::Ok();
  });
}

int gpusched_cancel_destroy(gpusched_cancel* handle) {
  if (handle == nullptr) return 0;
  CCancel* closed = nullptr;  // freed once the handle is removed
  const int rc = Guard([&]() -> Status {
    {
      std::optional<CallGate::Pass> pass;
      CCancel* c = nullptr;
      GS_RETURN_IF_ERROR(Enter(handle, HandleKind::kCancel, "cancel", "gpusched_cancel_destroy", pass, c));
      c->token.Cancel();  // the acquires waiting with it return now
    }
    GS_ASSIGN_OR_RETURN(closed, CloseHandle<CCancel>(handle, HandleKind::kCancel, "cancel", "gpusched_cancel_destroy"));
    RemoveHandle(handle);
    return Status::Ok();
  });
  if (rc == 0) delete closed;
  return rc;
}

int gpusched_sim_devices_create(int32_t count, int64_t memory_mib, int32_t streams,
                                gpusched_sim_devices** out) {
  return Guard([&]() -> Status {
    if (!out) return Null("out");
    if (count < 1) return gpusched::InvalidArgument("count: must be >= 1, got " + std::to_string(count));
    if (memory_mib < 1) {
      return gpusched::InvalidArgument("memory_mib: must be >= 1, got " + std::to_string(memory_mib));
    }
    if (streams < 1) return gpusched::InvalidArgument("streams: must be >= 1, got " + std::to_string(streams));
    auto s = std::make_unique<CSimDevices>();
    for (int32_t i = 0; i < count; ++i) {
      s->devices.push_back(std::make_unique<SimDevice>(
          SimDeviceOptions{.index = i, .name = "", .memory_mib = memory_mib, .streams = streams},
          s->clock));
    }
    GS_ASSIGN_OR_RETURN(*out, NewHandle<gpusched_sim_devices>(std::move(s), HandleKind::kSimDevices));
    return Status::Ok();
  });
}

int gpusched_sim_devices_destroy(gpusched_sim_devices* handle) {
  if (handle == nullptr) return 0;
  CSimDevices* closed = nullptr;  // freed once the handle is removed
  const int rc = Guard([&]() -> Status {
    GS_ASSIGN_OR_RETURN(closed, CloseHandle<CSimDevices>(handle, HandleKind::kSimDevices, "devices",
                                                         "gpusched_sim_devices_destroy"));
    RemoveHandle(handle);
    return Status::Ok();
  });
  if (rc == 0) delete closed;
  return rc;
}

int gpusched_sim_devices_compute(gpusched_sim_devices* handle, int32_t gpu, double ms) {
  return Guard([&]() -> Status {
    GS_ENTER_SIM_DEVICES(s, handle, "gpusched_sim_devices_compute");
    GS_RETURN_IF_ERROR(CheckGpu(gpu, static_cast<int32_t>(s->devices.size())));
    if (!std::isfinite(ms) || ms < 0) {
      return gpusched::InvalidArgument("ms: must be finite and >= 0, got " + std::to_string(ms));
    }
    SimDevice& dev = *s->devices[gpu];
    GS_ASSIGN_OR_RETURN(StreamId stream, dev.AcquireStream());
    Status st = dev.Launch(stream, [&dev, ms](const KernelContext&) { dev.ComputeMs(ms); });
    if (st.ok()) st = dev.Synchronize(stream);
    GS_RETURN_IF_ERROR(dev.ReleaseStream(stream));
    return st;
  });
}

int gpusched_sim_devices_memory(gpusched_sim_devices* handle, int32_t gpu, int64_t* used_bytes,
                                int64_t* total_bytes) {
  return Guard([&]() -> Status {
    GS_ENTER_SIM_DEVICES(s, handle, "gpusched_sim_devices_memory");
    GS_RETURN_IF_ERROR(CheckGpu(gpu, static_cast<int32_t>(s->devices.size())));
    if (used_bytes) *used_bytes = static_cast<int64_t>(s->devices[gpu]->used_bytes());
    if (total_bytes) *total_bytes = static_cast<int64_t>(s->devices[gpu]->total_bytes());
    return Status::Ok();
  });
}

int gpusched_sim_devices_scale(gpusched_sim_devices* handle, int32_t gpu, float* host, int64_t count,
                               float factor) {
  return Guard([&]() -> Status {
    GS_ENTER_SIM_DEVICES(s, handle, "gpusched_sim_devices_scale");
    if (!host) return Null("host");
    if (count < 1) return gpusched::InvalidArgument("count: must be >= 1, got " + std::to_string(count));
    if (!std::isfinite(factor)) {
      return gpusched::InvalidArgument("factor: must be finite, got " + std::to_string(factor));
    }
    GS_RETURN_IF_ERROR(CheckGpu(gpu, static_cast<int32_t>(s->devices.size())));
    SimDevice& dev = *s->devices[gpu];
    const size_t bytes = static_cast<size_t>(count) * sizeof(float);
    GS_ASSIGN_OR_RETURN(void* buf, dev.Allocate(bytes));
    StatusOr<StreamId> stream = dev.AcquireStream();
    if (!stream.ok()) {
      (void)dev.Free(buf);
      return stream.status();
    }
    Status st = dev.CopyToDevice(*stream, buf, host, bytes);
    if (st.ok()) {
      st = dev.Launch(*stream, [buf, count, factor](const KernelContext&) {
        float* p = static_cast<float*>(buf);
        for (int64_t i = 0; i < count; ++i) p[i] *= factor;
      });
    }
    if (st.ok()) st = dev.CopyToHost(*stream, host, buf, bytes);
    const Status sync = dev.Synchronize(*stream);
    (void)dev.ReleaseStream(*stream);
    (void)dev.Free(buf);
    return st.ok() ? sync : st;
  });
}

int gpusched_dispatcher_acquire_async(gpusched_dispatcher* handle, const char* service,
                                      int64_t deadline_ms, double expected_ms,
                                      uint64_t* request_out) {
  return Guard([&] {
    return SubmitAsync(handle, "gpusched_dispatcher_acquire_async", service,
                       {deadline_ms, nullptr, expected_ms}, request_out);
  });
}

int gpusched_dispatcher_acquire2_async(gpusched_dispatcher* handle, const gpusched_request* req,
                                       uint64_t* request_out) {
  return Guard([&]() -> Status {
    AcquireRequest r;
    GS_RETURN_IF_ERROR(FromC(req, r));
    return SubmitAsync(handle, "gpusched_dispatcher_acquire2_async", req->service, r, request_out);
  });
}

int gpusched_dispatcher_event_fd(gpusched_dispatcher* handle, int32_t* fd_out) {
  return Guard([&]() -> Status {
    GS_ENTER_DISPATCHER(d, handle, "gpusched_dispatcher_event_fd");
    if (!fd_out) return Null("fd_out");
    *fd_out = d->async->fd();
    return Status::Ok();
  });
}

int gpusched_dispatcher_poll_async(gpusched_dispatcher* handle, gpusched_async_result* out,
                                   size_t cap, size_t* n_out) {
  return Guard([&]() -> Status {
    GS_ENTER_DISPATCHER(d, handle, "gpusched_dispatcher_poll_async", /*allowed_while_closing=*/true);
    if (!out) return Null("out");
    if (!n_out) return Null("n_out");
    if (cap < 1) return gpusched::InvalidArgument("cap: must be >= 1, got 0");
    const std::vector<gpusched::capi::AsyncCompletion> done = d->async->Take(
        cap, [d](const gpusched::capi::AsyncRequest& q) { return TryGrantAsync(d, q); });
    for (size_t i = 0; i < done.size(); ++i) ToC(done[i], out[i]);
    *n_out = done.size();
    return Status::Ok();
  });
}

int gpusched_dispatcher_cancel_async(gpusched_dispatcher* handle, uint64_t request) {
  return Guard([&]() -> Status {
    GS_ENTER_DISPATCHER(d, handle, "gpusched_dispatcher_cancel_async");
    GS_RETURN_IF_ERROR(d->async->Cancel(request));
    PumpAsync(d);  // the cancelled request may have been the one holding the queue
    return Status::Ok();
  });
}

int gpusched_dispatcher_wait_async(gpusched_dispatcher* handle, int64_t timeout_ms, int32_t* ready) {
  return Guard([&]() -> Status {
    GS_ENTER_DISPATCHER(d, handle, "gpusched_dispatcher_wait_async");
    if (timeout_ms < 0 || timeout_ms > INT_MAX) {
      return gpusched::InvalidArgument("timeout_ms: must be in [0, 2147483647], got " +
                                       std::to_string(timeout_ms));
    }
    pollfd p{d->async->fd(), POLLIN, 0};
    const int n = ::poll(&p, 1, static_cast<int>(timeout_ms));
    if (n < 0 && errno != EINTR) {
      return gpusched::Internal(std::string("wait_async: poll failed: ") + std::strerror(errno));
    }
    if (ready) *ready = n > 0 ? 1 : 0;
    return Status::Ok();
  });
}

int gpusched_dispatcher_metrics_text(gpusched_dispatcher* handle, char* buf, size_t cap,
                                     size_t* len_out) {
  return Guard([&]() -> Status {
    GS_ENTER_DISPATCHER(d, handle, "gpusched_dispatcher_metrics_text");
    if (!len_out) return Null("len_out");
    if (!buf && cap > 0) return Null("buf (with cap > 0)");
    DispatchMetrics m = d->dispatcher->Metrics();
    std::vector<uint64_t> timeouts;
    {
      std::lock_guard lock(d->mu);
      timeouts = d->timeouts;
    }
    for (size_t s = 0; s < m.services.size(); ++s) {  // not under d->mu: the async lock comes first
      m.services[s].timeouts = timeouts[s] + d->async->expired(static_cast<int>(s));
    }
    const std::string text = PrometheusText(m);
    *len_out = text.size();
    if (cap < text.size() + 1) {
      return gpusched::ResourceExhausted(
          "cap: " + std::to_string(cap) + " bytes is too small; the metrics text needs " +
          std::to_string(text.size() + 1) + " (its length, in *len_out, plus the NUL)");
    }
    std::memcpy(buf, text.c_str(), text.size() + 1);
    return Status::Ok();
  });
}

}  // extern "C"
