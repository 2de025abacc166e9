#pragma once
// A job: the DAG of stages of one Spark-style application (CN110955526B steps (1)-(4)), and
// its validation into an execution plan. Stages read named buffers and write one named buffer;
// a stage depends on the stages that write its inputs and on those it names in `after`.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/status.h"
#include "dispatch/chunks/kernels.h"
#include "dispatch/chunks/splitter.h"

namespace gpusched::chunks {

// A named host buffer. An input buffer has data; a stage output may have data (the caller's
// destination, e.g. JVM off-heap memory: it must have the output's exact size) or none (the
// runner allocates it). `cache` persists the buffer's chunks in GPU memory (the CACHE subtask
// kind of CN110955526B step 8): an input is cached by step (9) before its first use, an output
// stays on the GPU that computed it.
//
// `keep` keeps a cached input's chunks on the GPUs after the job, so a later job of the same
// runner over the same host memory finds them in the cache map (CN110955526B's cache map across
// jobs) instead of copying them again. gpusched cannot see the host memory change, so the
// chunks are found again only by a buffer of the same address, size and `version`: the caller
// changes `version` whenever it changes the contents, and a buffer at the same address with
// another size or version frees the old chunks. REQUIRES: cache, data, not a stage output.
struct BufferSpec {
  std::string name;
  HostBuffer host;
  bool cache = false;
  bool keep = false;
  uint64_t version = 0;
};

struct StageSpec {
  std::string name;
  std::string kernel;
  KernelParams params;
  std::vector<std::string> inputs;  // buffer names; as many as the kernel takes
  std::string output;               // buffer name this stage writes
  std::vector<std::string> after;   // extra dependencies, by stage name
  int tasks = 1;                    // Spark tasks: the buffer's chunks are split among them
};

struct JobSpec {
  std::vector<BufferSpec> buffers;
  std::vector<StageSpec> stages;
};

struct JobPlan {
  std::vector<int> order;                  // stage indices; dependencies first, then index
  std::map<std::string, int64_t> sizes;    // every buffer's size in bytes
  std::vector<const Kernel*> kernels;      // per stage index
};

// Validates `job` against `kernels` and orders its stages. Errors name the stage or buffer and
// the bad value: unknown kernel or buffer, wrong input count, mismatched input sizes, a buffer
// written twice, a null input buffer, tasks <= 0, a destination of the wrong size, a cycle, a
// kept buffer that is not a cached input with data.
StatusOr<JobPlan> PlanJob(const JobSpec& job, const KernelRegistry& kernels);

}  // namespace gpusched::chunks
