// The C ABI of gpusched_chunks_c.h over ChunkScheduler and StageRunner. A runtime may be shared
// by many threads: runs take `run_mu` in turn (a ChunkScheduler and its ThreadPool serve one
// job at a time), and the CallGate lets destroy wait for them.

#include <cmath>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/executor.h"
#include "dispatch/c_api/c_status.h"
#include "dispatch/c_api/call_gate.h"
#include "dispatch/c_api/handle_registry.h"
#include "dispatch/c_api/gpusched_chunks_c.h"
#include "dispatch/chunks/stage_runner.h"
#include "dispatch/sim_device.h"
#ifdef GPUSCHED_C_WITH_CUDA
#include "dispatch/c_api/cuda_loader.h"  // the CUDA plugin, dlopened at first use
#endif
#include <cstdio>

using gpusched::Status;
using gpusched::StatusOr;
using gpusched::capi::CallGate;
using gpusched::capi::HandleKind;
using gpusched::capi::Guard;
using gpusched::capi::Null;
using gpusched::chunks::ChunkConfig;
using gpusched::chunks::ChunkScheduler;
using gpusched::chunks::JobResult;
using gpusched::chunks::JobSpec;
using ChunkKernel = gpusched::chunks::Kernel;  // (dispatch has a Kernel too)
using gpusched::chunks::KernelRegistry;
using gpusched::chunks::StageRunner;

namespace {

struct ChunksRuntime {
  gpusched::RealClock clock;
  std::vector<std::unique_ptr<gpusched::dispatch::Device>> devices;
  // gpusched_chunks_create_cuda replaces it with one whose built-ins have CUDA implementations.
  std::unique_ptr<KernelRegistry> kernels = KernelRegistry::WithBuiltins();
  std::unique_ptr<ChunkScheduler> scheduler;
  std::unique_ptr<gpusched::ThreadPool> pool;
  std::unique_ptr<StageRunner> runner;
  std::mutex run_mu;  // one job at a time on the scheduler and pool; callers queue here
  CallGate gate;
};

struct ChunksJob {
  JobSpec spec;
  std::optional<JobResult> result;
};

// Declares `rt`, the runtime of live handle `handle`, and holds its gate for the rest of the
// call.
#define GS_ENTER_RUNTIME(rt, handle, call) \
  std::optional<CallGate::Pass> pass_;     \
  ChunksRuntime* rt = nullptr;             \
  GS_RETURN_IF_ERROR(gpusched::capi::Enter(handle, HandleKind::kChunksRuntime, "runtime", call, pass_, rt))

// Declares `job`, the job of live handle `handle` (not freed, not made up). Jobs have no gate: a
// job belongs to one thread at a time, so nothing frees it during the call but its own thread.
#define GS_CHECK_JOB(job, handle) \
  GS_ASSIGN_OR_RETURN(ChunksJob* job, gpusched::capi::CheckLive<ChunksJob>(handle, HandleKind::kChunksJob, "job"))

// For the getters that return a value, not a status: the job of `handle`, or null (and the
// reason as the thread's last error) when `handle` is not a live job.
const ChunksJob* LiveJob(const gpusched_chunks_job* handle) {
  StatusOr<ChunksJob*> job = gpusched::capi::CheckLive<ChunksJob>(handle, HandleKind::kChunksJob, "job");
  if (!job.ok()) gpusched::capi::Report(job.status());
  return job.ok() ? *job : nullptr;
}

// Every built-in kernel's element size (4 or 8 bytes) divides a multiple of 8.
constexpr int64_t kChunkAlignment = 8;

std::string Got(int64_t v) { return ", got " + std::to_string(v); }

StatusOr<ChunkConfig> ConfigFor(int64_t chunk_bytes) {
  ChunkConfig config;
  if (chunk_bytes < 0 || chunk_bytes % kChunkAlignment != 0) {
    return gpusched::InvalidArgument("chunk_bytes: must be 0 (default) or a positive multiple of " +
                                     std::to_string(kChunkAlignment) + Got(chunk_bytes));
  }
  // 0: spread each input over every GPU, chunks of at most the default 64 MiB (issue 42).
  if (chunk_bytes == 0) config.split = gpusched::chunks::ChunkSplit::kSpreadOverGpus;
  if (chunk_bytes != 0) config.chunk_bytes = chunk_bytes;
  GS_RETURN_IF_ERROR(config.Validate());
  return config;
}

using ChunkRun = std::function<Status(const gpusched::chunks::ChunkIo&, const gpusched::chunks::KernelParams&)>;

// Both register functions: checks the arguments, then registers a user kernel running `run`.
Status RegisterUserKernel(gpusched_chunks_runtime* handle, const char* call, const char* name,
                          int kind, int inputs, int64_t element_bytes, int64_t result_bytes,
                          ChunkRun run, gpusched_chunks_combine_fn combine, void* user) {
  GS_ENTER_RUNTIME(runtime, handle, call);
  if (name == nullptr) return Null("name");
  if (!run) return Null("run");
  if (kind != 0 && kind != 1) return gpusched::InvalidArgument("kind: must be 0 (map) or 1 (reduce)" + Got(kind));
  if (inputs != 1 && inputs != 2) return gpusched::InvalidArgument("inputs: must be 1 or 2" + Got(inputs));
  const int64_t chunk = runtime->scheduler->config().chunk_bytes;
  if (element_bytes <= 0 || chunk % element_bytes != 0) {
    return gpusched::InvalidArgument("element_bytes: must be > 0 and divide the runtime's chunk_bytes " +
                                     std::to_string(chunk) + Got(element_bytes));
  }
  if (kind == 1 && result_bytes <= 0) {
    return gpusched::InvalidArgument("result_bytes: a reduce kernel's partial must be > 0 bytes" + Got(result_bytes));
  }
  if (kind == 1 && combine == nullptr) return Null("combine (required for a reduce kernel)");
  ChunkKernel k;
  k.name = name;
  k.kind = kind == 0 ? gpusched::chunks::KernelKind::kMap : gpusched::chunks::KernelKind::kReduce;
  k.inputs = inputs;
  k.element_bytes = element_bytes;
  k.run = std::move(run);
  if (kind == 1) {
    k.result_bytes = [result_bytes](const gpusched::chunks::KernelParams&) { return result_bytes; };
    k.combine = [combine, user](std::byte* acc, const std::byte* p, int64_t n) { combine(acc, p, n, user); };
  }
  return runtime->kernels->Register(std::move(k));  // the registry is thread-safe
}

// A status kernel's run: its failure, with the message it wrote, fails the chunk.
ChunkRun StatusKernelRun(gpusched_chunks_status_kernel_fn run, void* user) {
  return [run, user](const gpusched::chunks::ChunkIo& io, const gpusched::chunks::KernelParams&) {
    char message[GPUSCHED_CHUNKS_KERNEL_MESSAGE_BYTES] = {};
    const int rc = run(io.in0, io.in1, io.in_bytes, io.out, io.out_bytes, user, message,
                       static_cast<int64_t>(sizeof message));
    if (rc == 0) return Status::Ok();
    message[sizeof message - 1] = '\0';  // a kernel that filled it without a terminator
    return gpusched::FailedPrecondition(message[0] != '\0' ? std::string(message)
                                                            : "failed with status " + std::to_string(rc));
  };
}

// Wires a runtime over `devices` (already opened) and hands it out.
Status Assemble(std::unique_ptr<ChunksRuntime> rt, const ChunkConfig& config,
                gpusched_chunks_runtime** out) {
  std::vector<gpusched::dispatch::Device*> raw;
  for (auto& d : rt->devices) raw.push_back(d.get());
  rt->scheduler = std::make_unique<ChunkScheduler>(raw, config, rt->clock);
  // One driver thread per stream keeps every stream busy (they block in Synchronize).
  rt->pool = std::make_unique<gpusched::ThreadPool>(raw.size() * static_cast<size_t>(config.streams_per_gpu));
  rt->runner = std::make_unique<StageRunner>(*rt->scheduler, *rt->kernels, *rt->pool);
  // The process edge: a buffer streamed from pageable memory is worth a line on stderr.
  rt->runner->SetLog([](const std::string& line) { std::fprintf(stderr, "gpusched: %s\n", line.c_str()); });
  GS_ASSIGN_OR_RETURN(*out, gpusched::capi::NewHandle<gpusched_chunks_runtime>(std::move(rt),
                                                                               HandleKind::kChunksRuntime));
  return Status::Ok();
}

#ifdef GPUSCHED_C_WITH_CUDA
// Opens CUDA devices 0 .. count - 1 through the plugin (0: all), or says why there are none:
// the plugin's or the driver's reason after the count.
Status CreateCuda(int num_gpus, const ChunkConfig& config, gpusched_chunks_runtime** out) {
  StatusOr<int> visible = gpusched::capi::CudaDeviceCount();
  const int seen = visible.ok() ? *visible : 0;
  const int count = num_gpus == 0 ? seen : num_gpus;
  if (count == 0 || count > seen) {
    return gpusched::Unavailable("num_gpus: " + std::to_string(num_gpus) + " asked, " + std::to_string(seen) +
                                 " CUDA device(s) visible" +
                                 (visible.ok() ? std::string() : ": " + visible.status().message()));
  }
  GS_ASSIGN_OR_RETURN(const gpusched::dispatch::CudaPlugin* plugin, gpusched::capi::OpenCudaPlugin());
  auto rt = std::make_unique<ChunksRuntime>();
  rt->kernels = KernelRegistry::WithBuiltins(plugin->add_cuda_implementation);
  for (int i = 0; i < count; ++i) {
    GS_ASSIGN_OR_RETURN(rt->devices.emplace_back(), plugin->open(i, config.streams_per_gpu));
  }
  return Assemble(std::move(rt), config, out);
}
#else
constexpr char kBuiltWithoutCuda[] =
    "this libgpusched_c was built without CUDA (configure with "
    "nvcc on the PATH or at /usr/local/cuda, GPUSCHED_CUDA=AUTO or ON)";
#endif

}  // namespace

extern "C" {

int gpusched_chunks_create_sim(int num_gpus, int64_t gpu_memory_mib, int64_t chunk_bytes,
                               gpusched_chunks_runtime** out) {
  return Guard([&]() -> Status {
    if (out == nullptr) return Null("out");
    if (num_gpus <= 0) return gpusched::InvalidArgument("num_gpus: must be > 0" + Got(num_gpus));
    if (gpu_memory_mib <= 0) {
      return gpusched::InvalidArgument("gpu_memory_mib: must be > 0" + Got(gpu_memory_mib));
    }
    GS_ASSIGN_OR_RETURN(ChunkConfig config, ConfigFor(chunk_bytes));
    auto rt = std::make_unique<ChunksRuntime>();
    for (int i = 0; i < num_gpus; ++i) {
      rt->devices.push_back(std::make_unique<gpusched::dispatch::SimDevice>(
          gpusched::dispatch::SimDeviceOptions{i, "", gpu_memory_mib, config.streams_per_gpu},
          rt->clock));
    }
    return Assemble(std::move(rt), config, out);
  });
}

int gpusched_cuda_device_count(void) {
  int count = 0;  // set on success only, so 0 (or -1) when the reason is the last error
  Guard([&]() -> Status {
#ifdef GPUSCHED_C_WITH_CUDA
    GS_ASSIGN_OR_RETURN(count, gpusched::capi::CudaDeviceCount());
    return Status::Ok();
#else
    count = -1;
    return gpusched::FailedPrecondition(kBuiltWithoutCuda);
#endif
  });
  return count;
}

int gpusched_chunks_create_cuda(int num_gpus, int64_t chunk_bytes, gpusched_chunks_runtime** out) {
  return Guard([&]() -> Status {
    if (out == nullptr) return Null("out");
    if (num_gpus < 0) return gpusched::InvalidArgument("num_gpus: must be >= 0 (0: all)" + Got(num_gpus));
    GS_ASSIGN_OR_RETURN(ChunkConfig config, ConfigFor(chunk_bytes));
#ifdef GPUSCHED_C_WITH_CUDA
    return CreateCuda(num_gpus, config, out);
#else
    (void)config;
    return gpusched::FailedPrecondition(std::string("gpusched_chunks_create_cuda: ") + kBuiltWithoutCuda);
#endif
  });
}

int gpusched_chunks_destroy(gpusched_chunks_runtime* handle) {
  if (handle == nullptr) return 0;
  ChunksRuntime* closed = nullptr;  // freed once the handle is removed
  const int rc = Guard([&]() -> Status {
    GS_ASSIGN_OR_RETURN(closed, gpusched::capi::CloseHandle<ChunksRuntime>(
                                    handle, HandleKind::kChunksRuntime, "runtime", "gpusched_chunks_destroy"));
    gpusched::capi::RemoveHandle(handle);
    return Status::Ok();
  });
  if (rc == 0) delete closed;
  return rc;
}

int gpusched_chunks_register_kernel(gpusched_chunks_runtime* runtime, const char* name, int kind,
                                    int inputs, int64_t element_bytes, int64_t result_bytes,
                                    gpusched_chunks_kernel_fn run,
                                    gpusched_chunks_combine_fn combine, void* user) {
  ChunkRun chunk_run;
  if (run != nullptr) {
    chunk_run = [run, user](const gpusched::chunks::ChunkIo& io, const gpusched::chunks::KernelParams&) {
      run(io.in0, io.in1, io.in_bytes, io.out, io.out_bytes, user);
      return Status::Ok();
    };
  }
  return Guard([&] {
    return RegisterUserKernel(runtime, "gpusched_chunks_register_kernel", name, kind, inputs,
                              element_bytes, result_bytes, std::move(chunk_run), combine, user);
  });
}

int gpusched_chunks_register_status_kernel(gpusched_chunks_runtime* runtime, const char* name,
                                           int kind, int inputs, int64_t element_bytes,
                                           int64_t result_bytes,
                                           gpusched_chunks_status_kernel_fn run,
                                           gpusched_chunks_combine_fn combine, void* user) {
  ChunkRun chunk_run;
  if (run != nullptr) chunk_run = StatusKernelRun(run, user);
  return Guard([&] {
    return RegisterUserKernel(runtime, "gpusched_chunks_register_status_kernel", name, kind, inputs,
                              element_bytes, result_bytes, std::move(chunk_run), combine, user);
  });
}

gpusched_chunks_job* gpusched_chunks_job_new(void) {
  std::unique_ptr<ChunksJob> job(new (std::nothrow) ChunksJob());
  if (job == nullptr) return nullptr;
  StatusOr<gpusched_chunks_job*> handle =
      gpusched::capi::NewHandle<gpusched_chunks_job>(std::move(job), HandleKind::kChunksJob);
  if (!handle.ok()) gpusched::capi::Report(handle.status());
  return handle.ok() ? *handle : nullptr;
}

void gpusched_chunks_job_free(gpusched_chunks_job* handle) {
  if (handle == nullptr) return;
  // A freed or made-up job is not freed (again): the reason is the thread's last error.
  StatusOr<void*> taken = gpusched::capi::TakeHandle(handle, HandleKind::kChunksJob, "job");
  if (!taken.ok()) {
    gpusched::capi::Report(taken.status());
    return;
  }
  delete static_cast<ChunksJob*>(*taken);
}

int gpusched_chunks_job_add_buffer(gpusched_chunks_job* job_handle, const char* name, void* data,
                                   int64_t bytes, int cache) {
  return Guard([&]() -> Status {
    GS_CHECK_JOB(job, job_handle);
    if (name == nullptr) return Null("name");
    const std::string field = std::string("buffer \"") + name + "\": ";
    if (bytes < 0) return gpusched::InvalidArgument(field + "bytes must be >= 0" + Got(bytes));
    if (data == nullptr && bytes != 0) {
      return gpusched::InvalidArgument(field + "data is NULL, so bytes must be 0 (an output the "
                                       "runner allocates)" + Got(bytes));
    }
    if (cache != 0 && cache != 1) return gpusched::InvalidArgument(field + "cache must be 0 or 1" + Got(cache));
    job->spec.buffers.push_back({name, {data, bytes}, cache != 0});
    return Status::Ok();
  });
}

int gpusched_chunks_job_keep_buffer(gpusched_chunks_job* job_handle, const char* name, uint64_t version) {
  return Guard([&]() -> Status {
    GS_CHECK_JOB(job, job_handle);
    if (name == nullptr) return Null("name");
    for (auto& b : job->spec.buffers) {
      if (b.name != name) continue;
      const std::string field = std::string("buffer \"") + name + "\": ";
      if (!b.cache) return gpusched::InvalidArgument(field + "added with cache 0; only cached chunks are kept");
      if (b.host.data == nullptr) return gpusched::InvalidArgument(field + "data is NULL; only inputs are kept");
      b.keep = true;
      b.version = version;
      return Status::Ok();
    }
    return gpusched::NotFound(std::string("name: unknown buffer \"") + name + "\"");
  });
}

int gpusched_chunks_forget_buffer(gpusched_chunks_runtime* handle, const void* data) {
  return Guard([&]() -> Status {
    GS_ENTER_RUNTIME(runtime, handle, "gpusched_chunks_forget_buffer");
    if (data == nullptr) return Null("data");
    std::lock_guard lock(runtime->run_mu);  // the runner's kept buffers change between runs only
    if (runtime->runner->ForgetKept(data) == 0) {
      return gpusched::NotFound("data: no kept buffer at this address");
    }
    return Status::Ok();
  });
}

int gpusched_chunks_job_add_stage(gpusched_chunks_job* job_handle, const char* name, const char* kernel,
                                  const char* inputs, const char* output, double scalar,
                                  int64_t bins) {
  return Guard([&]() -> Status {
    GS_CHECK_JOB(job, job_handle);
    if (name == nullptr || kernel == nullptr || inputs == nullptr || output == nullptr) {
      return Null("name, kernel, inputs and output");
    }
    const std::string field = std::string("stage \"") + name + "\": ";
    if (!std::isfinite(scalar)) {
      return gpusched::InvalidArgument(field + "scalar must be finite, got " + std::to_string(scalar));
    }
    if (bins < 0) return gpusched::InvalidArgument(field + "bins must be >= 0 (0: 256)" + Got(bins));
    gpusched::chunks::StageSpec st;
    st.name = name;
    st.kernel = kernel;
    st.output = output;
    st.params.scalar = scalar;
    if (bins != 0) st.params.bins = bins;
    const std::string list = inputs;
    for (size_t start = 0; start <= list.size();) {
      const size_t comma = std::min(list.find(',', start), list.size());
      if (comma > start) st.inputs.push_back(list.substr(start, comma - start));
      start = comma + 1;
    }
    if (st.inputs.empty()) {
      return gpusched::InvalidArgument(field + "inputs must name 1 or 2 buffers, got \"" + list + "\"");
    }
    job->spec.stages.push_back(std::move(st));
    return Status::Ok();
  });
}

int gpusched_chunks_job_add_dependency(gpusched_chunks_job* job_handle, const char* stage, const char* after) {
  return Guard([&]() -> Status {
    GS_CHECK_JOB(job, job_handle);
    if (stage == nullptr || after == nullptr) return Null("stage and after");
    for (auto& st : job->spec.stages) {
      if (st.name == stage) {
        st.after.push_back(after);
        return Status::Ok();
      }
    }
    return gpusched::NotFound(std::string("stage: unknown stage \"") + stage + "\"");
  });
}

int gpusched_chunks_job_set_tasks(gpusched_chunks_job* job_handle, const char* stage, int tasks) {
  return Guard([&]() -> Status {
    GS_CHECK_JOB(job, job_handle);
    if (stage == nullptr) return Null("stage");
    if (tasks < 1) {
      return gpusched::InvalidArgument(std::string("stage \"") + stage + "\": tasks must be >= 1" + Got(tasks));
    }
    for (auto& st : job->spec.stages) {
      if (st.name == stage) {
        st.tasks = tasks;
        return Status::Ok();
      }
    }
    return gpusched::NotFound(std::string("stage: unknown stage \"") + stage + "\"");
  });
}

int gpusched_chunks_run(gpusched_chunks_runtime* handle, gpusched_chunks_job* job_handle) {
  return Guard([&]() -> Status {
    GS_ENTER_RUNTIME(runtime, handle, "gpusched_chunks_run");
    GS_CHECK_JOB(job, job_handle);
    job->result.reset();
    std::lock_guard lock(runtime->run_mu);  // jobs queue: one at a time over all the GPUs
    GS_ASSIGN_OR_RETURN(JobResult result, runtime->runner->Run(job->spec));
    job->result.emplace(std::move(result));
    return Status::Ok();
  });
}

const void* gpusched_chunks_output_data(const gpusched_chunks_job* handle, const char* name) {
  const ChunksJob* job = LiveJob(handle);
  if (job == nullptr || name == nullptr || !job->result) return nullptr;
  auto it = job->result->outputs.find(name);
  return it == job->result->outputs.end() ? nullptr : it->second.data;
}

int64_t gpusched_chunks_output_bytes(const gpusched_chunks_job* handle, const char* name) {
  const ChunksJob* job = LiveJob(handle);
  if (job == nullptr || name == nullptr || !job->result) return -1;
  auto it = job->result->outputs.find(name);
  return it == job->result->outputs.end() ? -1 : it->second.bytes;
}

int64_t gpusched_chunks_stat(const gpusched_chunks_job* handle, const char* name) {
  const ChunksJob* job = LiveJob(handle);
  if (job == nullptr || name == nullptr || !job->result) return -1;
  const gpusched::chunks::ChunkStats& s = job->result->stats;
  const std::string n = name;
  if (n == "gpu_tasks") return job->result->gpu_tasks;
  if (n == "cpu_tasks") return job->result->cpu_tasks;
  if (n == "task_waves") return job->result->task_waves;
  if (n == "pinned_bytes") return job->result->pinned_bytes;
  if (n == "pin_failures") return job->result->pin_failures;
  if (n == "subtasks") return s.subtasks;
  if (n == "bytes_h2d") return s.bytes_h2d;
  if (n == "bytes_d2h") return s.bytes_d2h;
  if (n == "cached") return s.cached;
  if (n == "cache_hits") return s.cache_hits;
  if (n == "moves") return s.moves;
  if (n == "waits") return s.waits;
  if (n == "cpu_runs") return s.cpu_runs;
  return -1;
}

const char* gpusched_chunks_last_error(void) { return gpusched::capi::LastError(); }

}  // extern "C"
