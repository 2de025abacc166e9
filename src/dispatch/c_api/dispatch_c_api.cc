// The dispatcher and simulated-device half of gpusched_c.h. Every entry point passes its
// handle's CallGate (so destroy can wait for it), converts Status to an int code plus a
// thread-local message, and catches exceptions: none may cross the ABI.
#include "gpusched_c.h"

#include <cmath>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "base/clock.h"
#include "dispatch/c_api/c_status.h"
#include "dispatch/c_api/call_gate.h"
#include "dispatch/realtime_dispatcher.h"
#include "dispatch/sim_device.h"

using gpusched::Status;
using gpusched::StatusOr;
using gpusched::capi::CallGate;
using gpusched::capi::Guard;
using gpusched::capi::Null;
using namespace gpusched::dispatch;

struct gpusched_dispatcher {
  gpusched::RealClock clock;
  std::unique_ptr<RealtimeDispatcher> dispatcher;
  CallGate gate;
  std::mutex mu;
  // Tickets granted by gpusched_dispatcher_acquire and not yet released. A lease held inside
  // gpusched_dispatcher_run is not among them, so no caller can release it from outside.
  std::set<uint64_t> api_tickets;
};

struct gpusched_sim_devices {
  gpusched::RealClock clock;
  std::vector<std::unique_ptr<SimDevice>> devices;
  CallGate gate;
};

namespace {

Status Flag(const char* name, int32_t value) {
  if (value == 0 || value == 1) return Status::Ok();
  return gpusched::InvalidArgument(std::string("options.") + name + ": must be 0 or 1, got " +
                                   std::to_string(value));
}

StatusOr<DispatcherConfig> ToConfig(const gpusched_dispatcher_options& o,
                                    const gpusched_service_config* services, int32_t count) {
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
  DispatcherConfig c;
  c.gpu_count = o.gpu_count;
  for (int32_t i = 0; i < count; ++i) {
    if (services[i].name == nullptr) {
      return Null(("services[" + std::to_string(i) + "].name").c_str());
    }
    c.services.push_back({services[i].name, services[i].cost_time_ms, services[i].wait_time_ms,
                          services[i].try_time_ms});
  }
  c.release = o.literal_release ? ReleaseMode::kLiteral : ReleaseMode::kOwnerChecked;
  c.fin_update = o.max_fin_time ? FinTimeUpdate::kMax : FinTimeUpdate::kLiteral;
  c.scan = o.earliest_finish_scan ? ScanOrder::kEarliestFinish : ScanOrder::kIndex;
  c.budget = o.elapsed_budget ? WaitBudget::kElapsed : WaitBudget::kSubtractTryTime;
  c.direct = o.direct_no_lock ? DirectMode::kNoLock : DirectMode::kLockEarliestFinish;
  c.learning = o.cost_learning == 1   ? CostLearning::kEma
               : o.cost_learning == 2 ? CostLearning::kOffline
                                      : CostLearning::kCumulativeMean;
  c.ema_alpha = o.ema_alpha > 0 ? o.ema_alpha : 0.2;
  c.max_per_gpu = o.max_per_gpu;
  c.acquire_timeout = o.acquire_timeout_ms;
  return c;
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

}  // namespace

extern "C" {

int gpusched_abi_version(void) { return GPUSCHED_C_ABI_VERSION; }

const char* gpusched_last_error(void) { return gpusched::capi::LastError(); }

int gpusched_dispatcher_create(const gpusched_dispatcher_options* options,
                               const gpusched_service_config* services, int32_t service_count,
                               gpusched_dispatcher** out) {
  return Guard([&]() -> Status {
    if (!options) return Null("options");
    if (!out) return Null("out");
    if (!services && service_count > 0) return Null("services");
    GS_ASSIGN_OR_RETURN(DispatcherConfig config, ToConfig(*options, services, service_count));
    auto d = std::make_unique<gpusched_dispatcher>();
    GS_ASSIGN_OR_RETURN(d->dispatcher, RealtimeDispatcher::Create(std::move(config), d->clock));
    *out = d.release();
    return Status::Ok();
  });
}

int gpusched_dispatcher_destroy(gpusched_dispatcher* d) {
  if (d == nullptr) return 0;
  const int rc = Guard([&]() -> Status {
    {
      std::lock_guard lock(d->mu);
      if (!d->api_tickets.empty()) {
        return gpusched::FailedPrecondition(
            "gpusched_dispatcher_destroy: " + std::to_string(d->api_tickets.size()) +
            " lease(s) still out; release them first (the dispatcher stays usable)");
      }
    }
    d->dispatcher->Shutdown(true);  // waiting acquires fail at their next round
    if (Status s = d->gate.Close("gpusched_dispatcher_destroy"); !s.ok()) return s;
    // An acquire in flight may have been granted before the shutdown: refuse, and reopen.
    std::lock_guard lock(d->mu);
    if (!d->api_tickets.empty()) {
      d->dispatcher->Shutdown(false);
      d->gate.Reopen();
      return gpusched::FailedPrecondition(
          "gpusched_dispatcher_destroy: " + std::to_string(d->api_tickets.size()) +
          " lease(s) were granted while destroying; release them first");
    }
    return Status::Ok();
  });
  if (rc == 0) delete d;
  return rc;
}

int gpusched_dispatcher_shutdown(gpusched_dispatcher* d, int32_t stop) {
  return Guard([&]() -> Status {
    if (!d) return Null("dispatcher");
    if (stop != 0 && stop != 1) {
      return gpusched::InvalidArgument("stop: must be 0 or 1, got " + std::to_string(stop));
    }
    CallGate::Pass pass(d->gate, "gpusched_dispatcher_shutdown");
    GS_RETURN_IF_ERROR(pass.status());
    d->dispatcher->Shutdown(stop == 1);
    return Status::Ok();
  });
}

int gpusched_dispatcher_acquire(gpusched_dispatcher* d, const char* service,
                                gpusched_lease* out) {
  return Guard([&]() -> Status {
    if (!d) return Null("dispatcher");
    if (!service) return Null("service");
    if (!out) return Null("out");
    CallGate::Pass pass(d->gate, "gpusched_dispatcher_acquire");
    GS_RETURN_IF_ERROR(pass.status());
    GS_ASSIGN_OR_RETURN(int index, d->dispatcher->ServiceIndex(service));
    GS_ASSIGN_OR_RETURN(Lease l, d->dispatcher->Acquire(index));
    std::lock_guard lock(d->mu);
    d->api_tickets.insert(l.ticket);
    *out = ToC(l);
    return Status::Ok();
  });
}

int gpusched_dispatcher_release(gpusched_dispatcher* d, const gpusched_lease* lease,
                                int32_t outcome) {
  return Guard([&]() -> Status {
    if (!d) return Null("dispatcher");
    if (!lease) return Null("lease");
    CallGate::Pass pass(d->gate, "gpusched_dispatcher_release", /*allowed_while_closing=*/true);
    GS_RETURN_IF_ERROR(pass.status());
    GS_ASSIGN_OR_RETURN(Outcome o, ToOutcome(outcome));
    std::lock_guard lock(d->mu);  // keeps api_tickets in step with the dispatcher's leases
    if (!d->api_tickets.contains(lease->ticket)) {  // a run's lease is not the caller's either
      return gpusched::NotFound("lease: ticket " + std::to_string(lease->ticket) +
                                " is not outstanding on this dispatcher (released already, "
                                "never granted by gpusched_dispatcher_acquire, or another "
                                "dispatcher's)");
    }
    GS_RETURN_IF_ERROR(d->dispatcher->Release(FromC(*lease), o));
    d->api_tickets.erase(lease->ticket);
    return Status::Ok();
  });
}

int gpusched_dispatcher_run(gpusched_dispatcher* d, const char* service, gpusched_run_fn fn,
                            void* user, int32_t* fn_result) {
  return Guard([&]() -> Status {
    if (!d) return Null("dispatcher");
    if (!service) return Null("service");
    if (!fn) return Null("fn");
    CallGate::Pass pass(d->gate, "gpusched_dispatcher_run");
    GS_RETURN_IF_ERROR(pass.status());
    GS_ASSIGN_OR_RETURN(int index, d->dispatcher->ServiceIndex(service));
    GS_ASSIGN_OR_RETURN(Lease lease, d->dispatcher->Acquire(index));
    int32_t r = 0;
    try {
      r = fn(lease.gpu, user);
    } catch (...) {  // a C++ callback that throws: free the GPU, then report it (Guard)
      (void)d->dispatcher->Release(lease, Outcome::kFailed);
      throw;
    }
    GS_RETURN_IF_ERROR(d->dispatcher->Release(lease, r == 0 ? Outcome::kSucceeded : Outcome::kFailed));
    if (fn_result) *fn_result = r;
    return Status::Ok();
  });
}

int gpusched_dispatcher_mark(gpusched_dispatcher* d, int32_t gpu, uint64_t* owner,
                             int64_t* fin_time_ms) {
  return Guard([&]() -> Status {
    if (!d) return Null("dispatcher");
    CallGate::Pass pass(d->gate, "gpusched_dispatcher_mark");
    GS_RETURN_IF_ERROR(pass.status());
    GS_RETURN_IF_ERROR(CheckGpu(gpu, d->dispatcher->gpu_count()));
    const SignalMark m = d->dispatcher->mark(gpu);
    if (owner) *owner = m.owner;
    if (fin_time_ms) *fin_time_ms = m.fin_time;
    return Status::Ok();
  });
}

int gpusched_dispatcher_set_gpu_enabled(gpusched_dispatcher* d, int32_t gpu, int32_t enabled) {
  return Guard([&]() -> Status {
    if (!d) return Null("dispatcher");
    CallGate::Pass pass(d->gate, "gpusched_dispatcher_set_gpu_enabled");
    GS_RETURN_IF_ERROR(pass.status());
    if (enabled != 0 && enabled != 1) {
      return gpusched::InvalidArgument("enabled: must be 0 or 1, got " + std::to_string(enabled));
    }
    return d->dispatcher->SetGpuEnabled(gpu, enabled == 1);
  });
}

int gpusched_dispatcher_service_metrics(gpusched_dispatcher* d, const char* service,
                                        gpusched_service_metrics* out) {
  return Guard([&]() -> Status {
    if (!d) return Null("dispatcher");
    if (!service) return Null("service");
    if (!out) return Null("out");
    CallGate::Pass pass(d->gate, "gpusched_dispatcher_service_metrics");
    GS_RETURN_IF_ERROR(pass.status());
    GS_ASSIGN_OR_RETURN(int index, d->dispatcher->ServiceIndex(service));
    const ServiceMetrics m = d->dispatcher->Metrics().services[index];
    *out = {m.completed,     m.failed,       m.give_ups,    m.direct_grabs, m.queue_ms_mean,
            m.queue_ms_max,  m.run_ms_mean,  m.run_ms_max,  m.cost_time_ms};
    return Status::Ok();
  });
}

int gpusched_dispatcher_gpu_metrics(gpusched_dispatcher* d, int32_t gpu,
                                    gpusched_gpu_metrics* out) {
  return Guard([&]() -> Status {
    if (!d) return Null("dispatcher");
    if (!out) return Null("out");
    CallGate::Pass pass(d->gate, "gpusched_dispatcher_gpu_metrics");
    GS_RETURN_IF_ERROR(pass.status());
    GS_RETURN_IF_ERROR(CheckGpu(gpu, d->dispatcher->gpu_count()));
    const GpuMetrics m = d->dispatcher->Metrics().gpus[gpu];
    *out = {m.running, m.started, m.busy_ms, m.occupancy, m.mean_running};
    return Status::Ok();
  });
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
    auto s = std::make_unique<gpusched_sim_devices>();
    for (int32_t i = 0; i < count; ++i) {
      s->devices.push_back(std::make_unique<SimDevice>(
          SimDeviceOptions{.index = i, .name = "", .memory_mib = memory_mib, .streams = streams},
          s->clock));
    }
    *out = s.release();
    return Status::Ok();
  });
}

int gpusched_sim_devices_destroy(gpusched_sim_devices* s) {
  if (s == nullptr) return 0;
  const int rc = Guard([&] { return s->gate.Close("gpusched_sim_devices_destroy"); });
  if (rc == 0) delete s;
  return rc;
}

int gpusched_sim_devices_compute(gpusched_sim_devices* s, int32_t gpu, double ms) {
  return Guard([&]() -> Status {
    if (!s) return Null("devices");
    CallGate::Pass pass(s->gate, "gpusched_sim_devices_compute");
    GS_RETURN_IF_ERROR(pass.status());
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

int gpusched_sim_devices_memory(gpusched_sim_devices* s, int32_t gpu, int64_t* used_bytes,
                                int64_t* total_bytes) {
  return Guard([&]() -> Status {
    if (!s) return Null("devices");
    CallGate::Pass pass(s->gate, "gpusched_sim_devices_memory");
    GS_RETURN_IF_ERROR(pass.status());
    GS_RETURN_IF_ERROR(CheckGpu(gpu, static_cast<int32_t>(s->devices.size())));
    if (used_bytes) *used_bytes = static_cast<int64_t>(s->devices[gpu]->used_bytes());
    if (total_bytes) *total_bytes = static_cast<int64_t>(s->devices[gpu]->total_bytes());
    return Status::Ok();
  });
}

int gpusched_sim_devices_scale(gpusched_sim_devices* s, int32_t gpu, float* host, int64_t count,
                               float factor) {
  return Guard([&]() -> Status {
    if (!s) return Null("devices");
    if (!host) return Null("host");
    CallGate::Pass pass(s->gate, "gpusched_sim_devices_scale");
    GS_RETURN_IF_ERROR(pass.status());
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

}  // extern "C"
