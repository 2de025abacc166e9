#include "dispatch/chunks/chunk_scheduler.h"

#include <algorithm>
#include <utility>

#include "base/check.h"

namespace gpusched::chunks {
namespace {

// How many pending subtasks one placement attempt looks at. A waiting subtask is requeued,
// not a barrier: later ones may start past it, within this window.
constexpr size_t kScanWindow = 64;

}  // namespace

struct ChunkScheduler::Placed {
  explicit Placed(const Subtask& sub, std::string d = {}) : s(sub), decision(std::move(d)) {}
  Subtask s;
  std::string decision;
  enum class Where { kNothing, kGpu, kCpu } where = Where::kNothing;
  int gpu = -1;
  dispatch::Device* dev = nullptr;
  dispatch::StreamId stream = 0;
  void* d_in0 = nullptr;
  void* d_in1 = nullptr;
  void* d_out = nullptr;
  bool copy_in0 = false, copy_in1 = false;
  bool pinned0 = false, pinned1 = false;
  bool in0_becomes_cache = false;  // a step (9) cache copy or a (10-6) move
  std::optional<int> move_from;    // (10-6): the GPU whose copy is dropped
  std::vector<void*> transient;    // freed on release
  std::string kernel_error;        // set by the launched kernel
};

ChunkScheduler::ChunkScheduler(std::vector<dispatch::Device*> devices, ChunkConfig config,
                               Clock& clock, StreamPolicy policy)
    : devices_(std::move(devices)), config_(std::move(config)), clock_(clock), policy_(policy) {
  GS_CHECK(config_.Validate().ok());
  std::sort(devices_.begin(), devices_.end(),
            [](const dispatch::Device* a, const dispatch::Device* b) { return a->index() < b->index(); });
}

ChunkScheduler::~ChunkScheduler() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [key, e] : cache_) (void)DeviceOf(e.gpu)->Free(e.ptr);
}

dispatch::Device* ChunkScheduler::DeviceOf(int gpu) const {
  for (dispatch::Device* d : devices_) {
    if (d->index() == gpu) return d;
  }
  return nullptr;
}

std::vector<GpuView> ChunkScheduler::Snapshot() const {
  std::vector<GpuView> gpus;
  gpus.reserve(devices_.size());
  for (const dispatch::Device* d : devices_) {
    auto it = streams_in_use_.find(d->index());
    const int ours = it == streams_in_use_.end() ? 0 : it->second;
    // The scheduler uses at most streams_per_gpu streams of each device.
    const int streams = std::min(d->free_streams(), config_.streams_per_gpu - ours);
    gpus.push_back({d->index(), static_cast<int64_t>(d->free_bytes()),
                    static_cast<int64_t>(d->total_bytes()), std::max(0, streams)});
  }
  return gpus;
}

Status ChunkScheduler::Run(std::vector<Subtask> subtasks, Executor& executor) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const Subtask& s : subtasks) {
      if (s.host_in0 == nullptr && s.in_bytes > 0) return InvalidArgument("subtask: host_in0 is null");
      if (s.kind == Subtask::Kind::kStream && (s.kernel == nullptr || s.params == nullptr)) {
        return InvalidArgument("subtask: a stream subtask needs a kernel and params");
      }
    }
    pending_.assign(subtasks.begin(), subtasks.end());
    first_error_ = Status::Ok();
  }
  const size_t workers = std::max<size_t>(1, std::min(executor.concurrency(), subtasks.size()));
  executor.ParallelFor(workers, [this](size_t) { WorkerLoop(); });
  std::lock_guard<std::mutex> lock(mu_);
  pending_.clear();
  return first_error_;
}

void ChunkScheduler::WorkerLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  int64_t idle_since_ms = -1;
  while (first_error_.ok() && !pending_.empty()) {
    std::optional<Placed> p = TryPlaceOne();
    if (p) {
      idle_since_ms = -1;
      ++in_flight_;
      lock.unlock();
      const Status result = Execute(*p);
      lock.lock();
      Release(*p, result);
      continue;
    }
    // Wait: requeued until a stream or memory is released (CN110955526B (10-6), (10-8), (10-9)).
    ++stats_.waits;
    Emit(SchedulerEvent::Kind::kWaiting, pending_.front(), -1, "wait");
    if (in_flight_ > 0) {
      released_cv_.wait(lock);
      continue;
    }
    // Nothing of ours will release anything: only other users of the GPUs can. Poll.
    if (idle_since_ms < 0) idle_since_ms = clock_.NowMs();
    if (clock_.NowMs() - idle_since_ms >= config_.idle_wait_ms) {
      first_error_ = ResourceExhausted(
          "chunk subtask of " + std::to_string(pending_.front().in_bytes) + " bytes (buffer " +
          std::to_string(pending_.front().key.buffer_id) + " chunk " +
          std::to_string(pending_.front().key.index) + ") found no GPU stream and memory for " +
          std::to_string(config_.idle_wait_ms) + " ms with nothing else running");
      break;
    }
    lock.unlock();
    clock_.SleepMs(1);
    lock.lock();
  }
  released_cv_.notify_all();
}

std::optional<ChunkScheduler::Placed> ChunkScheduler::TryPlaceOne() {
  const std::vector<GpuView> gpus = Snapshot();
  const size_t window = std::min(pending_.size(), kScanWindow);
  for (size_t i = 0; i < window; ++i) {
    const Subtask& s = pending_[i];
    std::optional<Placed> placed;
    if (s.kind == Subtask::Kind::kCache) {
      if (cache_.count(s.key) != 0) {  // already resident: nothing to do
        placed = Placed(s, "already cached");
      } else {
        const CacheDecision d = PlaceCache(gpus, s.in_bytes, config_);  // CN110955526B step (9)
        if (const auto* c = std::get_if<CacheOnGpu>(&d)) {
          placed = Commit(s, c->gpu, /*use_cached=*/false, /*move=*/false);
        } else {
          ++stats_.kept_in_host;  // step (9): no GPU has room; the chunk stays in host memory
          placed = Placed(s, "keep-in-host");
        }
        if (placed) placed->decision = DescribeDecision(d);
      }
    } else if (s.on_cpu) {  // CN110955526B claim 2: the task went to the CPU executor
      placed = Placed(s, "cpu-executor");
      placed->where = Placed::Where::kCpu;
    } else {
      const int64_t bytes = s.in_bytes * (s.key1 ? 2 : 1) + s.out_bytes;
      const StreamDecision d =
          policy_ == StreamPolicy::kPatent
              ? PlaceStream(gpus, cache_map_, s.key, bytes, config_)  // CN110955526B step (10)
              : PlaceRoundRobin(gpus, cache_map_, s.key, bytes, round_robin_next_);
      if (const auto* r = std::get_if<RunOnCachedGpu>(&d)) {
        placed = Commit(s, r->gpu, true, false);
      } else if (const auto* m = std::get_if<MoveToGpu>(&d)) {
        placed = Commit(s, m->to_gpu, m->to_gpu == m->from_gpu, m->to_gpu != m->from_gpu);
      } else if (const auto* g = std::get_if<StreamOnGpu>(&d)) {
        placed = Commit(s, g->gpu, false, false);
      } else if (std::holds_alternative<RunOnCpu>(d)) {
        placed = Placed(s);
        placed->where = Placed::Where::kCpu;
      }
      if (placed) {
        placed->decision = DescribeDecision(d);
        if (policy_ == StreamPolicy::kRoundRobin) ++round_robin_next_;
      }
    }
    if (placed) {
      pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(i));
      Emit(SchedulerEvent::Kind::kPlaced, placed->s, placed->gpu, placed->decision);
      return placed;
    }
  }
  return std::nullopt;
}

std::optional<ChunkScheduler::Placed> ChunkScheduler::Commit(const Subtask& s, int gpu,
                                                             bool use_cached, bool move) {
  dispatch::Device* dev = DeviceOf(gpu);
  if (dev == nullptr) return std::nullopt;
  StatusOr<dispatch::StreamId> stream = dev->AcquireStream();
  if (!stream.ok()) return std::nullopt;  // taken by another user since the snapshot: wait
  Placed p(s);
  p.where = Placed::Where::kGpu;
  p.gpu = gpu;
  p.dev = dev;
  p.stream = *stream;
  std::vector<void*> allocated;
  bool failed = false;
  auto alloc = [&](int64_t bytes) -> void* {
    if (failed || bytes <= 0) return nullptr;
    StatusOr<void*> ptr = dev->Allocate(static_cast<size_t>(bytes));
    if (!ptr.ok()) { failed = true; return nullptr; }
    allocated.push_back(*ptr);
    return *ptr;
  };
  auto cached_here = [&](const ChunkKey& key) -> CacheEntry* {
    auto it = cache_.find(key);
    const bool here = it != cache_.end() && it->second.gpu == gpu && it->second.bytes == s.in_bytes;
    return here ? &it->second : nullptr;
  };
  if (CacheEntry* e = use_cached ? cached_here(s.key) : nullptr) {
    p.d_in0 = e->ptr;
    p.pinned0 = true;
  } else {
    p.d_in0 = alloc(s.in_bytes);
    p.copy_in0 = true;
    p.in0_becomes_cache = s.kind == Subtask::Kind::kCache || move;
    if (move) p.move_from = cache_map_.at(s.key);
  }
  if (s.key1) {
    if (CacheEntry* e = cached_here(*s.key1)) {
      p.d_in1 = e->ptr;
      p.pinned1 = true;
    } else {
      p.d_in1 = alloc(s.in_bytes);
      p.copy_in1 = true;
    }
  }
  if (s.kind == Subtask::Kind::kStream) p.d_out = alloc(s.out_bytes);
  if (failed) {  // memory taken by another user since the snapshot: undo and wait
    for (void* ptr : allocated) (void)dev->Free(ptr);
    (void)dev->ReleaseStream(p.stream);
    return std::nullopt;
  }
  if (p.pinned0) ++cache_.at(s.key).pins;
  if (p.pinned1) ++cache_.at(*s.key1).pins;
  for (void* ptr : allocated) {
    const bool kept = (ptr == p.d_in0 && p.in0_becomes_cache) || (ptr == p.d_out && s.cache_output);
    if (!kept) p.transient.push_back(ptr);
  }
  ++streams_in_use_[gpu];
  return p;
}

Status ChunkScheduler::Execute(Placed& p) {
  const Subtask& s = p.s;
  if (p.where == Placed::Where::kNothing) return Status::Ok();
  const ChunkIo host_io{s.host_in0, s.host_in1, s.in_bytes, s.host_out, s.out_bytes};
  if (p.where == Placed::Where::kCpu) {  // CN110955526B (10-8)/(10-9) [choice]: CPU fallback
    const Status ran = s.kernel->run(host_io, *s.params);
    if (!ran.ok()) return FailedPrecondition("kernel " + s.kernel->name + ": " + ran.message());
    return Status::Ok();
  }
  // Issue 40: the stream is synchronised on every way out, a failed step's included: work
  // enqueued before the failure may still read or write the buffers Release frees.
  const Status enqueued = EnqueueOnStream(p);
  const Status synced = p.dev->Synchronize(p.stream);
  GS_RETURN_IF_ERROR(enqueued);
  GS_RETURN_IF_ERROR(synced);
  if (!p.kernel_error.empty()) return FailedPrecondition(p.kernel_error);
  return Status::Ok();
}

Status ChunkScheduler::EnqueueOnStream(Placed& p) {
  const Subtask& s = p.s;
  const auto n = static_cast<size_t>(s.in_bytes);
  if (p.copy_in0 && n > 0) GS_RETURN_IF_ERROR(p.dev->CopyToDevice(p.stream, p.d_in0, s.host_in0, n));
  if (p.copy_in1 && n > 0) GS_RETURN_IF_ERROR(p.dev->CopyToDevice(p.stream, p.d_in1, s.host_in1, n));
  if (s.kind == Subtask::Kind::kStream) {
    const ChunkIo io{static_cast<const std::byte*>(p.d_in0), static_cast<const std::byte*>(p.d_in1),
                     s.in_bytes, static_cast<std::byte*>(p.d_out), s.out_bytes};
    GS_RETURN_IF_ERROR(p.dev->Launch(p.stream, [&p, io](const dispatch::KernelContext& ctx) {
      if (ctx.native_stream == nullptr) {
        const Status ran = p.s.kernel->run(io, *p.s.params);
        if (!ran.ok()) p.kernel_error = "kernel " + p.s.kernel->name + ": " + ran.message();
      } else if (p.s.kernel->native_run) {
        const Status launched = p.s.kernel->native_run(io, *p.s.params, ctx.native_stream);
        if (!launched.ok()) p.kernel_error = "kernel " + p.s.kernel->name + ": " + launched.message();
      } else {
        p.kernel_error = "kernel " + p.s.kernel->name + ": has no native (CUDA) implementation";
      }
    }));
    if (s.out_bytes > 0) {
      GS_RETURN_IF_ERROR(p.dev->CopyToHost(p.stream, s.host_out, p.d_out, static_cast<size_t>(s.out_bytes)));
    }
  }
  return Status::Ok();
}

void ChunkScheduler::Release(Placed& p, const Status& result) {
  const Subtask& s = p.s;
  --in_flight_;
  if (p.where == Placed::Where::kGpu) {
    for (void* ptr : p.transient) (void)p.dev->Free(ptr);
    (void)p.dev->ReleaseStream(p.stream);
    --streams_in_use_[p.gpu];
    if (p.pinned0) Unpin(s.key);
    if (p.pinned1) Unpin(*s.key1);
    stats_.bytes_h2d += (p.copy_in0 ? s.in_bytes : 0) + (p.copy_in1 ? s.in_bytes : 0);
    stats_.bytes_d2h += s.kind == Subtask::Kind::kStream ? s.out_bytes : 0;
    auto keep = [&](const ChunkKey& key, void* ptr, int64_t bytes) {
      if (!result.ok()) { (void)p.dev->Free(ptr); return; }
      if (auto it = cache_.find(key); it != cache_.end()) {
        // Still read by a running subtask: keep the old copy, drop the new one.
        if (it->second.pins > 0) return (void)p.dev->Free(ptr);
        (void)DeviceOf(it->second.gpu)->Free(it->second.ptr);  // replaced (a (10-6) move)
        cache_.erase(it);
      }
      cache_.emplace(key, CacheEntry{p.gpu, ptr, bytes});
      cache_map_[key] = p.gpu;
    };
    if (p.in0_becomes_cache) keep(s.key, p.d_in0, s.in_bytes);
    if (s.cache_output && p.d_out != nullptr) keep(*s.cache_output, p.d_out, s.out_bytes);
    if (s.kind == Subtask::Kind::kCache) ++stats_.cached;
    if (p.move_from) ++stats_.moves;
    if (p.pinned0 && s.kind == Subtask::Kind::kStream) ++stats_.cache_hits;
  } else if (p.where == Placed::Where::kCpu) {
    ++stats_.cpu_runs;
  }
  ++stats_.subtasks;
  if (!result.ok() && first_error_.ok()) first_error_ = result;
  Emit(SchedulerEvent::Kind::kCompleted, s, p.gpu, p.decision);
  released_cv_.notify_all();
}

void ChunkScheduler::Unpin(const ChunkKey& key) {
  auto it = cache_.find(key);
  if (it == cache_.end()) return;
  if (--it->second.pins == 0 && it->second.drop) {
    (void)DeviceOf(it->second.gpu)->Free(it->second.ptr);
    cache_.erase(it);
  }
}

StatusOr<bool> ChunkScheduler::PinHost(void* ptr, size_t bytes) {
  if (devices_.empty()) return false;
  return devices_.front()->PinHost(ptr, bytes);
}

Status ChunkScheduler::UnpinHost(void* ptr) {
  if (devices_.empty()) return Status::Ok();
  return devices_.front()->UnpinHost(ptr);
}

std::vector<GpuView> ChunkScheduler::GpuSnapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  return Snapshot();
}

std::optional<int> ChunkScheduler::CachedOn(const ChunkKey& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = cache_map_.find(key);
  return it == cache_map_.end() ? std::nullopt : std::optional<int>(it->second);
}

void ChunkScheduler::DropCached(uint64_t buffer_id) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = cache_.begin(); it != cache_.end();) {
    if (it->first.buffer_id != buffer_id) { ++it; continue; }
    cache_map_.erase(it->first);
    if (it->second.pins > 0) { it->second.drop = true; ++it; continue; }
    (void)DeviceOf(it->second.gpu)->Free(it->second.ptr);
    it = cache_.erase(it);
  }
}

ChunkStats ChunkScheduler::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void ChunkScheduler::ResetStats() {
  std::lock_guard<std::mutex> lock(mu_);
  stats_ = ChunkStats{};
}

void ChunkScheduler::SetObserver(std::function<void(const SchedulerEvent&)> observer) {
  std::lock_guard<std::mutex> lock(mu_);
  observer_ = std::move(observer);
}

void ChunkScheduler::Emit(SchedulerEvent::Kind kind, const Subtask& s, int gpu, std::string decision) {
  if (observer_) observer_(SchedulerEvent{kind, s.stage, s.key, gpu, std::move(decision)});
}

}  // namespace gpusched::chunks
