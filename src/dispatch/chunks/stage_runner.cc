#include "dispatch/chunks/stage_runner.h"

#include <algorithm>
#include <cstring>

namespace gpusched::chunks {

std::atomic<uint64_t> StageRunner::next_buffer_id_{1};

StatusOr<JobResult> StageRunner::Run(const JobSpec& job) {
  GS_ASSIGN_OR_RETURN(JobPlan plan, PlanJob(job, kernels_));
  JobResult result;
  std::map<std::string, HostBuffer> buffers;
  std::map<std::string, uint64_t> ids;  // job-unique chunk-key ids, so caches never alias
  std::vector<std::string> cached;
  for (const BufferSpec& b : job.buffers) {
    buffers[b.name] = b.host;
    if (b.cache) cached.push_back(b.name);
  }
  for (const auto& [name, bytes] : plan.sizes) {
    ids[name] = next_buffer_id_.fetch_add(1);
    HostBuffer& h = buffers[name];
    if (h.data == nullptr && bytes > 0) {  // a stage output without a destination
      result.storage.push_back(std::unique_ptr<std::byte[]>(new std::byte[static_cast<size_t>(bytes)]));
      h = HostBuffer{result.storage.back().get(), bytes};
    }
    h.bytes = bytes;
  }
  const ChunkStats before = scheduler_.stats();
  cache_done_.clear();
  Status status;
  for (int s : plan.order) {  // CN110955526B step (11): stage by stage, a barrier after each
    const StageSpec& st = job.stages[s];
    status = RunStage(st, *plan.kernels[s], s, buffers, ids, cached);
    if (!status.ok()) {
      status = Status(status.code(), "stage " + st.name + ": " + status.message());
      break;
    }
    result.stage_order.push_back(st.name);
    result.outputs[st.output] = buffers.at(st.output);
  }
  for (const auto& [name, id] : ids) scheduler_.DropCached(id);  // the job's unpersist
  GS_RETURN_IF_ERROR(status);
  const ChunkStats after = scheduler_.stats();
  result.stats = ChunkStats{after.subtasks - before.subtasks,   after.bytes_h2d - before.bytes_h2d,
                            after.bytes_d2h - before.bytes_d2h, after.cached - before.cached,
                            after.kept_in_host - before.kept_in_host, after.cache_hits - before.cache_hits,
                            after.moves - before.moves,         after.waits - before.waits,
                            after.cpu_runs - before.cpu_runs};
  return result;
}

Status StageRunner::RunStage(const StageSpec& st, const Kernel& kernel, int stage_index,
                             const std::map<std::string, HostBuffer>& buffers,
                             const std::map<std::string, uint64_t>& ids,
                             const std::vector<std::string>& cached) {
  const HostBuffer& in0 = buffers.at(st.inputs[0]);
  const HostBuffer* in1 = st.inputs.size() > 1 ? &buffers.at(st.inputs[1]) : nullptr;
  const HostBuffer& out = buffers.at(st.output);
  const int64_t chunk_bytes =
      ChunkBytesFor(scheduler_.config(), in0.bytes, scheduler_.num_gpus(), kernel.element_bytes);  // step (7)
  GS_ASSIGN_OR_RETURN(std::vector<ChunkRange> chunks,
                      SplitIntoChunks(in0.bytes, chunk_bytes, kernel.element_bytes));

  // CN110955526B step (9): CACHE subtasks for persisted inputs not yet resident.
  std::vector<Subtask> cache_subtasks;
  for (const std::string& name : st.inputs) {
    if (std::find(cached.begin(), cached.end(), name) == cached.end() || cache_done_[name]) continue;
    cache_done_[name] = true;
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
  if (!cache_subtasks.empty()) GS_RETURN_IF_ERROR(scheduler_.Run(std::move(cache_subtasks), executor_));

  // CN110955526B steps (7)-(8), (10): one STREAM subtask per chunk. Tasks are contiguous runs
  // of chunks; the chunk keys do not depend on them, so locality carries across stages.
  const bool reduce = kernel.kind == KernelKind::kReduce;
  const int64_t partial_bytes = reduce ? out.bytes : 0;
  std::vector<std::byte> partials(static_cast<size_t>(partial_bytes) * chunks.size());
  const bool cache_output = std::find(cached.begin(), cached.end(), st.output) != cached.end();
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
    sub.host_out = reduce ? partials.data() + c.index * partial_bytes
                          : static_cast<std::byte*>(out.data) + c.offset;
    sub.out_bytes = reduce ? partial_bytes : c.bytes;
    if (cache_output && !reduce) sub.cache_output = ChunkKey{ids.at(st.output), c.index};
    sub.stage = stage_index;
    subtasks.push_back(sub);
  }
  GS_RETURN_IF_ERROR(scheduler_.Run(std::move(subtasks), executor_));  // the stage barrier
  if (cache_output && !reduce) cache_done_[st.output] = true;  // resident where computed

  if (reduce && out.bytes > 0) {  // fold the partials on the host, in chunk order
    auto* acc = static_cast<std::byte*>(out.data);
    if (chunks.empty()) {
      std::memset(acc, 0, static_cast<size_t>(out.bytes));
    } else {
      std::memcpy(acc, partials.data(), static_cast<size_t>(out.bytes));
      for (size_t i = 1; i < chunks.size(); ++i) kernel.combine(acc, partials.data() + i * partial_bytes, out.bytes);
    }
  }
  return Status::Ok();
}

}  // namespace gpusched::chunks
