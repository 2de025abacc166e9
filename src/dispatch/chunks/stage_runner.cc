#include "dispatch/chunks/stage_runner.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "dispatch/chunks/executor_choice.h"

namespace gpusched::chunks {
namespace {

// Page-locking costs time per page and gains nothing on small copies.
constexpr int64_t kMinPinBytes = kMiB;

// Task t of `tasks` over `n` chunks: chunks [first, last), sizes differing by at most one.
std::pair<size_t, size_t> TaskRange(size_t n, size_t tasks, size_t t) {
  return {n * t / tasks, n * (t + 1) / tasks};
}

}  // namespace

// The host ranges pinned for a run or a stage; unpinned on destruction, so declare it after
// the memory it pins.
class StageRunner::HostPins {
 public:
  HostPins(ChunkScheduler& scheduler, const std::function<void(const std::string&)>& log,
           JobResult& result)
      : scheduler_(scheduler), log_(log), result_(result) {}
  ~HostPins() {
    for (void* p : pinned_) (void)scheduler_.UnpinHost(p);
  }
  HostPins(const HostPins&) = delete;
  HostPins& operator=(const HostPins&) = delete;

  void Pin(const std::string& what, void* data, int64_t bytes) {
    if (data == nullptr || bytes < kMinPinBytes) return;
    StatusOr<bool> pinned = scheduler_.PinHost(data, static_cast<size_t>(bytes));
    if (!pinned.ok()) {
      ++result_.pin_failures;
      if (log_) log_(what + ": not pinned (" + pinned.status().message() + "); streamed from pageable memory");
      return;
    }
    if (!*pinned) return;  // simulated devices: host memory already
    pinned_.push_back(data);
    result_.pinned_bytes += bytes;
  }

 private:
  ChunkScheduler& scheduler_;
  const std::function<void(const std::string&)>& log_;
  JobResult& result_;
  std::vector<void*> pinned_;
};

std::atomic<uint64_t> StageRunner::next_buffer_id_{1};

// The chunk-key buffer ids of one run. A chunk key is (buffer id, chunk index), and an index is
// another byte range under another chunk size, so a buffer has one id per chunk size it is cut
// by. A kept buffer's ids are the runner's (KeptId), found again by later runs; the others are
// the run's own, and their cached chunks are freed when it ends (the job's unpersist).
class StageRunner::BufferIds {
 public:
  BufferIds(StageRunner& runner, const JobSpec& job) : runner_(runner) {
    for (const BufferSpec& b : job.buffers) {
      if (!b.keep) continue;
      kept_[b.name] = &b;
      runner_.DropStaleKept(b);
    }
  }
  ~BufferIds() {
    for (uint64_t id : run_only_) runner_.scheduler_.DropCached(id);
  }
  BufferIds(const BufferIds&) = delete;
  BufferIds& operator=(const BufferIds&) = delete;

  uint64_t Of(const std::string& name, int64_t chunk_bytes) {
    if (auto k = kept_.find(name); k != kept_.end()) return runner_.KeptId(*k->second, chunk_bytes);
    auto [it, fresh] = ids_.try_emplace({name, chunk_bytes}, 0);
    if (fresh) {
      it->second = next_buffer_id_.fetch_add(1);
      run_only_.push_back(it->second);
    }
    return it->second;
  }

 private:
  StageRunner& runner_;
  std::map<std::string, const BufferSpec*> kept_;
  std::map<std::pair<std::string, int64_t>, uint64_t> ids_;
  std::vector<uint64_t> run_only_;
};

void StageRunner::DropStaleKept(const BufferSpec& b) {
  for (auto it = kept_.begin(); it != kept_.end();) {
    const KeptKey& k = it->first;
    if (k.data != b.host.data || (k.bytes == b.host.bytes && k.version == b.version)) {
      ++it;
      continue;
    }
    scheduler_.DropCached(it->second);
    it = kept_.erase(it);
  }
}

uint64_t StageRunner::KeptId(const BufferSpec& b, int64_t chunk_bytes) {
  auto [it, fresh] = kept_.try_emplace(KeptKey{b.host.data, b.host.bytes, b.version, chunk_bytes}, 0);
  if (fresh) it->second = next_buffer_id_.fetch_add(1);
  return it->second;
}

int StageRunner::ForgetKept(const void* data) {
  int forgotten = 0;
  for (auto it = kept_.begin(); it != kept_.end();) {
    if (it->first.data != data) {
      ++it;
      continue;
    }
    scheduler_.DropCached(it->second);
    it = kept_.erase(it);
    ++forgotten;
  }
  return forgotten;
}

StatusOr<JobResult> StageRunner::Run(const JobSpec& job) {
  GS_ASSIGN_OR_RETURN(JobPlan plan, PlanJob(job, kernels_));
  JobResult result;
  std::map<std::string, HostBuffer> buffers;
  BufferIds ids(*this, job);  // its end frees the job's cached chunks, kept buffers' excepted
  std::vector<std::string> cached;
  for (const BufferSpec& b : job.buffers) {
    buffers[b.name] = b.host;
    if (b.cache) cached.push_back(b.name);
  }
  for (const auto& [name, bytes] : plan.sizes) {
    HostBuffer& h = buffers[name];
    if (h.data == nullptr && bytes > 0) {  // a stage output without a destination
      result.storage.push_back(std::unique_ptr<std::byte[]>(new std::byte[static_cast<size_t>(bytes)]));
      h = HostBuffer{result.storage.back().get(), bytes};
    }
    h.bytes = bytes;
  }
  const ChunkStats before = scheduler_.stats();
  cache_done_.clear();
  HostPins pins(scheduler_, log_, result);  // after result.storage: unpinned before it is freed
  for (const auto& [name, h] : buffers) pins.Pin("buffer \"" + name + "\"", h.data, h.bytes);
  Status status;
  for (int s : plan.order) {  // CN110955526B step (11): stage by stage, a barrier after each
    const StageSpec& st = job.stages[s];
    status = RunStage(st, *plan.kernels[s], s, buffers, ids, cached, result);
    if (!status.ok()) {
      status = Status(status.code(), "stage " + st.name + ": " + status.message());
      break;
    }
    result.stage_order.push_back(st.name);
    result.outputs[st.output] = buffers.at(st.output);
  }
  GS_RETURN_IF_ERROR(status);
  const ChunkStats after = scheduler_.stats();
  result.stats = ChunkStats{after.subtasks - before.subtasks,   after.bytes_h2d - before.bytes_h2d,
                            after.bytes_d2h - before.bytes_d2h, after.cached - before.cached,
                            after.kept_in_host - before.kept_in_host, after.cache_hits - before.cache_hits,
                            after.moves - before.moves,         after.waits - before.waits,
                            after.cpu_runs - before.cpu_runs};
  return result;
}

std::vector<Subtask> StageRunner::CacheSubtasks(const StageSpec& st, int stage_index,
                                                const std::map<std::string, HostBuffer>& buffers,
                                                const std::map<std::string, uint64_t>& ids,
                                                const std::vector<std::string>& cached,
                                                const std::vector<ChunkRange>& chunks) {
  std::vector<Subtask> cache_subtasks;
  for (const std::string& name : st.inputs) {
    if (std::find(cached.begin(), cached.end(), name) == cached.end()) continue;
    if (!cache_done_.insert(ids.at(name)).second) continue;  // resident already
    const HostBuffer& b = buffers.at(name);
    for (const ChunkRange& c : chunks) {
      Subtask sub;
      sub.kind = Subtask::Kind::kCache;
      sub.key = ChunkKey{ids.at(name), c.index};
      sub.host_in0 = static_cast<const std::byte*>(b.data) + c.offset;
      sub.in_bytes = c.bytes;
      sub.stage = stage_index;
      cache_subtasks.push_back(sub);
    }
  }
  return cache_subtasks;
}

namespace {

// A STREAM subtask per chunk of `st`. A reduce writes chunk i's partial result at
// partials + i * partial_bytes; a map writes its output in place.
std::vector<Subtask> StreamSubtasks(const StageSpec& st, const Kernel& kernel, int stage_index,
                                    const std::map<std::string, HostBuffer>& buffers,
                                    const std::map<std::string, uint64_t>& ids,
                                    const std::vector<ChunkRange>& chunks, bool cache_output,
                                    std::byte* partials, int64_t partial_bytes) {
  const bool reduce = kernel.kind == KernelKind::kReduce;
  const HostBuffer& in0 = buffers.at(st.inputs[0]);
  const HostBuffer* in1 = st.inputs.size() > 1 ? &buffers.at(st.inputs[1]) : nullptr;
  const HostBuffer& out = buffers.at(st.output);
  std::vector<Subtask> subtasks;
  subtasks.reserve(chunks.size());
  for (const ChunkRange& c : chunks) {
    Subtask sub;
    sub.key = ChunkKey{ids.at(st.inputs[0]), c.index};
    sub.host_in0 = static_cast<const std::byte*>(in0.data) + c.offset;
    if (in1 != nullptr) {
      sub.key1 = ChunkKey{ids.at(st.inputs[1]), c.index};
      sub.host_in1 = static_cast<const std::byte*>(in1->data) + c.offset;
    }
    sub.in_bytes = c.bytes;
    sub.kernel = &kernel;
    sub.params = &st.params;
    sub.host_out = reduce ? partials + c.index * partial_bytes : static_cast<std::byte*>(out.data) + c.offset;
    sub.out_bytes = reduce ? partial_bytes : c.bytes;
    if (cache_output && !reduce) sub.cache_output = ChunkKey{ids.at(st.output), c.index};
    sub.stage = stage_index;
    subtasks.push_back(sub);
  }
  return subtasks;
}

// Issue 42: a spread chunk is at most what lets every stream of the smallest GPU hold one chunk
// subtask (`inputs` input chunks and an output chunk) at once, so small GPUs still take chunks.
int64_t SubtaskMemoryCap(const ChunkScheduler& scheduler, size_t inputs) {
  int64_t smallest = 0;
  for (const GpuView& g : scheduler.GpuSnapshot()) {
    if (smallest == 0 || g.total_bytes < smallest) smallest = g.total_bytes;
  }
  return SpreadMemoryCap(smallest, scheduler.config().streams_per_gpu, static_cast<int>(inputs) + 1);
}

// A reduce's result: the partials folded on the host, in chunk order (zeros without chunks).
void FoldPartials(const Kernel& kernel, const std::vector<std::byte>& partials, size_t chunk_count,
                  const HostBuffer& out) {
  auto* acc = static_cast<std::byte*>(out.data);
  if (chunk_count == 0) {
    std::memset(acc, 0, static_cast<size_t>(out.bytes));
    return;
  }
  std::memcpy(acc, partials.data(), static_cast<size_t>(out.bytes));
  for (size_t i = 1; i < chunk_count; ++i) kernel.combine(acc, partials.data() + i * out.bytes, out.bytes);
}

}  // namespace

Status StageRunner::RunStage(const StageSpec& st, const Kernel& kernel, int stage_index,
                             const std::map<std::string, HostBuffer>& buffers, BufferIds& buffer_ids,
                             const std::vector<std::string>& cached, JobResult& result) {
  const HostBuffer& in0 = buffers.at(st.inputs[0]);
  const HostBuffer& out = buffers.at(st.output);
  const int64_t chunk_bytes =  // step (7)
      ChunkBytesFor(scheduler_.config(), in0.bytes, scheduler_.num_gpus(), kernel.element_bytes,
                    SubtaskMemoryCap(scheduler_, st.inputs.size()));
  GS_ASSIGN_OR_RETURN(std::vector<ChunkRange> chunks,
                      SplitIntoChunks(in0.bytes, chunk_bytes, kernel.element_bytes));
  std::map<std::string, uint64_t> ids;  // this stage's buffers under its chunk size
  for (const std::string& name : st.inputs) ids[name] = buffer_ids.Of(name, chunk_bytes);
  ids[st.output] = buffer_ids.Of(st.output, chunk_bytes);

  // CN110955526B step (9): CACHE subtasks for persisted inputs not yet resident.
  std::vector<Subtask> cache_subtasks = CacheSubtasks(st, stage_index, buffers, ids, cached, chunks);
  if (!cache_subtasks.empty()) GS_RETURN_IF_ERROR(scheduler_.Run(std::move(cache_subtasks), executor_));

  // CN110955526B steps (7)-(8), (10): one STREAM subtask per chunk. Tasks are contiguous runs
  // of chunks; the chunk keys do not depend on them, so locality carries across stages.
  const bool reduce = kernel.kind == KernelKind::kReduce;
  const int64_t partial_bytes = reduce ? out.bytes : 0;
  std::vector<std::byte> partials(static_cast<size_t>(partial_bytes) * chunks.size());
  HostPins partial_pins(scheduler_, log_, result);  // after partials: unpinned first
  partial_pins.Pin("stage " + st.name + " partials", partials.data(), static_cast<int64_t>(partials.size()));
  const bool cache_output = std::find(cached.begin(), cached.end(), st.output) != cached.end();
  const std::vector<Subtask> subtasks = StreamSubtasks(st, kernel, stage_index, buffers, ids, chunks,
                                                       cache_output, partials.data(), partial_bytes);
  const int64_t first_chunk = chunks.empty() ? 0 : chunks.front().bytes;
  const int64_t subtask_bytes =  // what one chunk subtask needs on a GPU (the largest chunk)
      first_chunk * (st.inputs.size() > 1 ? 2 : 1) + (reduce ? partial_bytes : first_chunk);
  GS_RETURN_IF_ERROR(RunTasks(subtasks, st.tasks, subtask_bytes, result));  // the stage barrier
  if (cache_output && !reduce) cache_done_.insert(ids.at(st.output));  // resident where computed
  if (reduce && out.bytes > 0) FoldPartials(kernel, partials, chunks.size(), out);
  return Status::Ok();
}

Status StageRunner::RunTasks(const std::vector<Subtask>& subtasks, int tasks,
                             int64_t subtask_bytes, JobResult& result) {
  const ChunkConfig& config = scheduler_.config();
  const size_t n = std::min(subtasks.size(), static_cast<size_t>(std::max(tasks, 1)));
  const TaskDemand demand{subtask_bytes, config.task_cpus};
  size_t next = 0;
  while (next < n) {  // one wave: as many tasks as the free CPUs hold
    const std::vector<GpuView> gpus = scheduler_.GpuSnapshot();
    int free_cpus = config.free_cpus == 0 ? -1 : config.free_cpus;
    std::vector<Subtask> wave;
    const size_t first = next;
    for (; next < n; ++next) {
      const ExecutorDecision d = ChooseExecutor(gpus, free_cpus, demand);  // CN110955526B claim 2
      if (std::holds_alternative<NoExecutor>(d)) break;
      const bool on_cpu = std::holds_alternative<CpuExecutor>(d);
      ++(on_cpu ? result.cpu_tasks : result.gpu_tasks);
      if (free_cpus >= 0) free_cpus -= config.task_cpus;
      const auto [begin, end] = TaskRange(subtasks.size(), n, next);
      for (size_t i = begin; i < end; ++i) {
        wave.push_back(subtasks[i]);
        wave.back().on_cpu = on_cpu;
      }
    }
    if (next == first) {  // ChunkConfig::Validate makes free_cpus >= task_cpus
      return Internal("claim 2: no executor for a task with every CPU free");
    }
    ++result.task_waves;
    GS_RETURN_IF_ERROR(scheduler_.Run(std::move(wave), executor_));
  }
  return Status::Ok();
}

}  // namespace gpusched::chunks
