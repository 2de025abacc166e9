// The C ABI of gpusched_chunks_c.h over ChunkScheduler and StageRunner.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/executor.h"
#include "dispatch/c_api/gpusched_chunks_c.h"
#include "dispatch/chunks/stage_runner.h"
#include "dispatch/sim_device.h"

using gpusched::chunks::ChunkConfig;
using gpusched::chunks::ChunkScheduler;
using gpusched::chunks::JobResult;
using gpusched::chunks::JobSpec;
using gpusched::chunks::Kernel;
using gpusched::chunks::KernelRegistry;
using gpusched::chunks::StageRunner;

struct gpusched_chunks_runtime {
  gpusched::RealClock clock;
  std::vector<std::unique_ptr<gpusched::dispatch::SimDevice>> devices;
  std::unique_ptr<KernelRegistry> kernels = KernelRegistry::WithBuiltins();
  std::unique_ptr<ChunkScheduler> scheduler;
  std::unique_ptr<gpusched::ThreadPool> pool;
  std::unique_ptr<StageRunner> runner;
};

struct gpusched_chunks_job {
  JobSpec spec;
  std::optional<JobResult> result;
};

namespace {

thread_local std::string last_error;

int Fail(const gpusched::Status& s) {
  last_error = s.ToString();
  return static_cast<int>(s.code());
}

int Null(const char* what) {
  return Fail(gpusched::InvalidArgument(std::string(what) + ": must not be null"));
}

}  // namespace

extern "C" {

int gpusched_chunks_create_sim(int num_gpus, int64_t gpu_memory_mib, int64_t chunk_bytes,
                               gpusched_chunks_runtime** out) {
  if (out == nullptr) return Null("out");
  if (num_gpus <= 0) {
    return Fail(gpusched::InvalidArgument("num_gpus: must be > 0, got " + std::to_string(num_gpus)));
  }
  if (gpu_memory_mib <= 0) {
    return Fail(gpusched::InvalidArgument("gpu_memory_mib: must be > 0, got " + std::to_string(gpu_memory_mib)));
  }
  ChunkConfig config;
  if (chunk_bytes != 0) config.chunk_bytes = chunk_bytes;
  if (gpusched::Status s = config.Validate(); !s.ok()) return Fail(s);
  auto rt = std::make_unique<gpusched_chunks_runtime>();
  std::vector<gpusched::dispatch::Device*> raw;
  for (int i = 0; i < num_gpus; ++i) {
    rt->devices.push_back(std::make_unique<gpusched::dispatch::SimDevice>(
        gpusched::dispatch::SimDeviceOptions{i, "", gpu_memory_mib, config.streams_per_gpu}, rt->clock));
    raw.push_back(rt->devices.back().get());
  }
  rt->scheduler = std::make_unique<ChunkScheduler>(raw, config, rt->clock);
  // One driver thread per stream keeps every stream busy (they block in Synchronize).
  rt->pool = std::make_unique<gpusched::ThreadPool>(static_cast<size_t>(num_gpus * config.streams_per_gpu));
  rt->runner = std::make_unique<StageRunner>(*rt->scheduler, *rt->kernels, *rt->pool);
  *out = rt.release();
  return 0;
}

void gpusched_chunks_destroy(gpusched_chunks_runtime* runtime) { delete runtime; }

int gpusched_chunks_register_kernel(gpusched_chunks_runtime* runtime, const char* name, int kind,
                                    int inputs, int64_t element_bytes, int64_t result_bytes,
                                    gpusched_chunks_kernel_fn run,
                                    gpusched_chunks_combine_fn combine, void* user) {
  if (runtime == nullptr) return Null("runtime");
  if (name == nullptr) return Null("name");
  if (run == nullptr) return Null("run");
  if (kind != 0 && kind != 1) return Fail(gpusched::InvalidArgument("kind: must be 0 (map) or 1 (reduce), got " + std::to_string(kind)));
  Kernel k;
  k.name = name;
  k.kind = kind == 0 ? gpusched::chunks::KernelKind::kMap : gpusched::chunks::KernelKind::kReduce;
  k.inputs = inputs;
  k.element_bytes = element_bytes;
  k.run = [run, user](const gpusched::chunks::ChunkIo& io, const gpusched::chunks::KernelParams&) {
    run(io.in0, io.in1, io.in_bytes, io.out, io.out_bytes, user);
  };
  if (kind == 1) {
    k.result_bytes = [result_bytes](const gpusched::chunks::KernelParams&) { return result_bytes; };
    if (combine != nullptr) {
      k.combine = [combine, user](std::byte* acc, const std::byte* p, int64_t n) { combine(acc, p, n, user); };
    }
  }
  gpusched::Status s = runtime->kernels->Register(std::move(k));
  return s.ok() ? 0 : Fail(s);
}

gpusched_chunks_job* gpusched_chunks_job_new(void) { return new gpusched_chunks_job(); }
void gpusched_chunks_job_free(gpusched_chunks_job* job) { delete job; }

int gpusched_chunks_job_add_buffer(gpusched_chunks_job* job, const char* name, void* data,
                                   int64_t bytes, int cache) {
  if (job == nullptr) return Null("job");
  if (name == nullptr) return Null("name");
  job->spec.buffers.push_back({name, {data, bytes}, cache != 0});
  return 0;
}

int gpusched_chunks_job_add_stage(gpusched_chunks_job* job, const char* name, const char* kernel,
                                  const char* inputs, const char* output, double scalar,
                                  int64_t bins) {
  if (job == nullptr) return Null("job");
  if (name == nullptr || kernel == nullptr || inputs == nullptr || output == nullptr) {
    return Null("name, kernel, inputs and output");
  }
  gpusched::chunks::StageSpec st;
  st.name = name;
  st.kernel = kernel;
  st.output = output;
  st.params.scalar = scalar;
  if (bins != 0) st.params.bins = bins;
  std::string list = inputs;
  for (size_t start = 0; start <= list.size();) {
    const size_t comma = std::min(list.find(',', start), list.size());
    if (comma > start) st.inputs.push_back(list.substr(start, comma - start));
    start = comma + 1;
  }
  job->spec.stages.push_back(std::move(st));
  return 0;
}

int gpusched_chunks_job_add_dependency(gpusched_chunks_job* job, const char* stage, const char* after) {
  if (job == nullptr || stage == nullptr || after == nullptr) return Null("job, stage and after");
  for (auto& st : job->spec.stages) {
    if (st.name == stage) {
      st.after.push_back(after);
      return 0;
    }
  }
  return Fail(gpusched::NotFound(std::string("stage: unknown stage \"") + stage + "\""));
}

int gpusched_chunks_run(gpusched_chunks_runtime* runtime, gpusched_chunks_job* job) {
  if (runtime == nullptr) return Null("runtime");
  if (job == nullptr) return Null("job");
  job->result.reset();
  gpusched::StatusOr<JobResult> result = runtime->runner->Run(job->spec);
  if (!result.ok()) return Fail(result.status());
  job->result.emplace(std::move(result).value());
  return 0;
}

const void* gpusched_chunks_output_data(const gpusched_chunks_job* job, const char* name) {
  if (job == nullptr || name == nullptr || !job->result) return nullptr;
  auto it = job->result->outputs.find(name);
  return it == job->result->outputs.end() ? nullptr : it->second.data;
}

int64_t gpusched_chunks_output_bytes(const gpusched_chunks_job* job, const char* name) {
  if (job == nullptr || name == nullptr || !job->result) return -1;
  auto it = job->result->outputs.find(name);
  return it == job->result->outputs.end() ? -1 : it->second.bytes;
}

int64_t gpusched_chunks_stat(const gpusched_chunks_job* job, const char* name) {
  if (job == nullptr || name == nullptr || !job->result) return -1;
  const gpusched::chunks::ChunkStats& s = job->result->stats;
  const std::string n = name;
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

const char* gpusched_chunks_last_error(void) { return last_error.c_str(); }

}  // extern "C"
