// The dispatcher and simulated-device half of gpusched_c.h. Every entry point converts Status
// to an int code plus a thread-local message, and catches exceptions: none may cross the ABI.
#include "gpusched_c.h"

#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "base/clock.h"
#include "dispatch/realtime_dispatcher.h"
#include "dispatch/sim_device.h"

using gpusched::Status;
using gpusched::StatusOr;
using namespace gpusched::dispatch;

struct gpusched_dispatcher {
  gpusched::RealClock clock;
  std::unique_ptr<WorkPool> pool;
  std::unique_ptr<RealtimeDispatcher> dispatcher;
};

struct gpusched_sim_devices {
  gpusched::RealClock clock;
  std::vector<std::unique_ptr<SimDevice>> devices;
};

namespace {

thread_local std::string dispatch_c_error;

int Fail(const Status& s) {
  dispatch_c_error = s.ToString();
  return static_cast<int>(s.code());
}

int Check(const Status& s) {
  if (s.ok()) {
    dispatch_c_error.clear();
    return 0;
  }
  return Fail(s);
}

// Runs `body` (returning a Status), turning exceptions into kInternal.
template <typename Body>
int Guard(Body&& body) {
  try {
    return Check(body());
  } catch (const std::exception& e) {
    return Fail(gpusched::Internal(std::string("exception: ") + e.what()));
  } catch (...) {
    return Fail(gpusched::Internal("unknown exception"));
  }
}

Status Null(const char* what) { return gpusched::InvalidArgument(std::string(what) + ": null"); }

DispatcherConfig ToConfig(const gpusched_dispatcher_options& o,
                          const gpusched_service_config* services, int32_t count) {
  DispatcherConfig c;
  c.gpu_count = o.gpu_count;
  for (int32_t i = 0; i < count; ++i) {
    c.services.push_back({services[i].name ? services[i].name : "", services[i].cost_time_ms,
                          services[i].wait_time_ms, services[i].try_time_ms});
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

Status CheckGpu(int32_t gpu, int32_t count) {
  if (gpu < 0 || gpu >= count) {
    return gpusched::InvalidArgument("gpu: " + std::to_string(gpu) + " out of range [0, " +
                                     std::to_string(count) + ")");
  }
  return Status::Ok();
}

}  // namespace

extern "C" {

const char* gpusched_last_error(void) { return dispatch_c_error.c_str(); }

int gpusched_dispatcher_create(const gpusched_dispatcher_options* options,
                               const gpusched_service_config* services, int32_t service_count,
                               gpusched_dispatcher** out) {
  return Guard([&]() -> Status {
    if (!options || !out || (!services && service_count > 0)) return Null("options/services/out");
    auto d = std::make_unique<gpusched_dispatcher>();
    d->pool = std::make_unique<WorkPool>(options->submit_threads > 0 ? options->submit_threads : 16);
    StatusOr<std::unique_ptr<RealtimeDispatcher>> r = RealtimeDispatcher::Create(
        ToConfig(*options, services, service_count), d->clock, d->pool.get());
    if (!r.ok()) return r.status();
    d->dispatcher = std::move(r).value();
    *out = d.release();
    return Status::Ok();
  });
}

void gpusched_dispatcher_destroy(gpusched_dispatcher* d) { delete d; }

int gpusched_dispatcher_acquire(gpusched_dispatcher* d, const char* service,
                                gpusched_lease* out) {
  return Guard([&]() -> Status {
    if (!d || !service || !out) return Null("dispatcher/service/out");
    GS_ASSIGN_OR_RETURN(int index, d->dispatcher->ServiceIndex(service));
    GS_ASSIGN_OR_RETURN(Lease l, d->dispatcher->Acquire(index));
    *out = {l.gpu, l.service, l.ticket, l.locked ? 1 : 0, l.attempts, l.requested_ns,
            l.granted_ns};
    return Status::Ok();
  });
}

int gpusched_dispatcher_release(gpusched_dispatcher* d, const gpusched_lease* lease) {
  return Guard([&]() -> Status {
    if (!d || !lease) return Null("dispatcher/lease");
    GS_RETURN_IF_ERROR(CheckGpu(lease->gpu, d->dispatcher->gpu_count()));
    if (lease->service < 0 ||
        lease->service >= static_cast<int32_t>(d->dispatcher->config().services.size())) {
      return gpusched::InvalidArgument("lease.service: out of range");
    }
    d->dispatcher->Complete(FromC(*lease));
    return Status::Ok();
  });
}

int gpusched_dispatcher_run(gpusched_dispatcher* d, const char* service, gpusched_run_fn fn,
                            void* user, int32_t* fn_result) {
  return Guard([&]() -> Status {
    if (!d || !service || !fn) return Null("dispatcher/service/fn");
    StatusOr<int32_t> r = d->dispatcher->Run(service, [&](int gpu) { return fn(gpu, user); });
    if (!r.ok()) return r.status();
    if (fn_result) *fn_result = *r;
    return Status::Ok();
  });
}

int gpusched_dispatcher_mark(gpusched_dispatcher* d, int32_t gpu, uint64_t* owner,
                             int64_t* fin_time_ms) {
  return Guard([&]() -> Status {
    if (!d) return Null("dispatcher");
    GS_RETURN_IF_ERROR(CheckGpu(gpu, d->dispatcher->gpu_count()));
    const SignalMark m = d->dispatcher->mark(gpu);
    if (owner) *owner = m.owner;
    if (fin_time_ms) *fin_time_ms = m.fin_time;
    return Status::Ok();
  });
}

int gpusched_dispatcher_service_metrics(gpusched_dispatcher* d, const char* service,
                                        gpusched_service_metrics* out) {
  return Guard([&]() -> Status {
    if (!d || !service || !out) return Null("dispatcher/service/out");
    GS_ASSIGN_OR_RETURN(int index, d->dispatcher->ServiceIndex(service));
    const ServiceMetrics m = d->dispatcher->Metrics().services[index];
    *out = {m.completed,   m.give_ups,   m.direct_grabs, m.queue_ms_mean, m.queue_ms_max,
            m.run_ms_mean, m.run_ms_max, m.cost_time_ms};
    return Status::Ok();
  });
}

int gpusched_dispatcher_gpu_metrics(gpusched_dispatcher* d, int32_t gpu,
                                    gpusched_gpu_metrics* out) {
  return Guard([&]() -> Status {
    if (!d || !out) return Null("dispatcher/out");
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
    if (count < 1) return gpusched::InvalidArgument("count: must be >= 1");
    if (memory_mib < 1) return gpusched::InvalidArgument("memory_mib: must be >= 1");
    if (streams < 1) return gpusched::InvalidArgument("streams: must be >= 1");
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

void gpusched_sim_devices_destroy(gpusched_sim_devices* s) { delete s; }

int gpusched_sim_devices_compute(gpusched_sim_devices* s, int32_t gpu, double ms) {
  return Guard([&]() -> Status {
    if (!s) return Null("devices");
    GS_RETURN_IF_ERROR(CheckGpu(gpu, static_cast<int32_t>(s->devices.size())));
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
    GS_RETURN_IF_ERROR(CheckGpu(gpu, static_cast<int32_t>(s->devices.size())));
    if (used_bytes) *used_bytes = static_cast<int64_t>(s->devices[gpu]->used_bytes());
    if (total_bytes) *total_bytes = static_cast<int64_t>(s->devices[gpu]->total_bytes());
    return Status::Ok();
  });
}

int gpusched_sim_devices_scale(gpusched_sim_devices* s, int32_t gpu, float* host, int64_t count,
                               float factor) {
  return Guard([&]() -> Status {
    if (!s || !host) return Null("devices/host");
    if (count < 1) return gpusched::InvalidArgument("count: must be >= 1");
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
