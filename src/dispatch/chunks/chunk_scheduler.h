#pragma once
// ChunkScheduler: runs chunk subtasks on a server's GPUs (dispatch::Device) by CN110955526B
// steps (9) and (10). It owns the mechanism (the cache map of resident chunks, the streams and
// device memory of subtasks in flight, the wait queue); the decisions are the pure functions of
// placement.h over a snapshot taken under the scheduler's lock.
//
// A subtask's life: pending -> placed (stream acquired, memory allocated, decision committed
// under the lock) -> run (copies, kernel, copy back on its stream, outside the lock) ->
// released (stream and transient memory returned; waiting subtasks are reconsidered).
// A subtask whose decision is Wait stays pending: it is requeued until a stream or memory is
// released (CN110955526B, the [choice] at (10-6), (10-8) and (10-9)).
//
// Threads: Run() borrows the caller's Executor; each of its workers places and drives one
// subtask at a time, blocking in Device::Synchronize, so an executor of (GPUs x streams)
// workers keeps every stream busy. The scheduler starts no threads of its own.
// Thread-safety: Run() may be called from one thread at a time; the accessors from any thread.

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/executor.h"
#include "base/status.h"
#include "dispatch/chunks/config.h"
#include "dispatch/chunks/kernels.h"
#include "dispatch/chunks/placement.h"
#include "dispatch/device.h"

namespace gpusched::chunks {

// How stream subtasks are placed. kPatent is CN110955526B step (10); kRoundRobin is the
// locality-blind baseline `gpusched bench chunks` compares it with.
enum class StreamPolicy { kPatent, kRoundRobin };

// One chunk subtask (CN110955526B step 8). Host pointers are owned by the caller and must stay
// valid until Run() returns.
struct Subtask {
  enum class Kind { kCache, kStream };
  Kind kind = Kind::kStream;
  ChunkKey key;                        // the chunk of the first input: the cache-map key
  const std::byte* host_in0 = nullptr;
  std::optional<ChunkKey> key1;        // second input (two-input kernels)
  const std::byte* host_in1 = nullptr;
  int64_t in_bytes = 0;
  // Stream subtasks only:
  const Kernel* kernel = nullptr;
  const KernelParams* params = nullptr;
  std::byte* host_out = nullptr;
  int64_t out_bytes = 0;
  // When set, the output stays resident on the GPU that computed it, under this key (a
  // persisted stage output), so a later stage finds it in the cache map.
  std::optional<ChunkKey> cache_output;
  // CN110955526B claim 2: the task's executor is the CPU; the kernel runs on the host buffers.
  bool on_cpu = false;
  int stage = 0;                       // for events only
};

struct ChunkStats {
  int64_t subtasks = 0;       // completed
  int64_t bytes_h2d = 0;      // copied host -> device
  int64_t bytes_d2h = 0;      // copied device -> host
  int64_t cached = 0;         // step (9) cache copies made
  int64_t kept_in_host = 0;   // step (9) chunks no GPU had room for
  int64_t cache_hits = 0;     // (10-5) runs on the caching GPU
  int64_t moves = 0;          // (10-6) moves
  int64_t waits = 0;          // Wait decisions (each time a worker found nothing to start)
  int64_t cpu_runs = 0;       // (10-8)/(10-9) CPU fallbacks and claim 2 CPU-executor subtasks
};

struct SchedulerEvent {
  enum class Kind { kPlaced, kWaiting, kCompleted };
  Kind kind;
  int stage = 0;
  ChunkKey key;
  int gpu = -1;               // -1 for host/CPU and for kWaiting
  std::string decision;       // DescribeDecision(...) of the decision taken
};

class ChunkScheduler {
 public:
  // `devices` in any order, ids from Device::index(); they and `clock` must outlive this.
  // REQUIRES: config.Validate().ok().
  ChunkScheduler(std::vector<dispatch::Device*> devices, ChunkConfig config, Clock& clock,
                 StreamPolicy policy = StreamPolicy::kPatent);
  ~ChunkScheduler();  // frees every cached chunk
  ChunkScheduler(const ChunkScheduler&) = delete;
  ChunkScheduler& operator=(const ChunkScheduler&) = delete;

  // Runs every subtask and returns when all are done (a barrier). The first error (a failed
  // copy or launch, a subtask that cannot fit any GPU even when idle) is returned after the
  // subtasks already started have finished.
  Status Run(std::vector<Subtask> subtasks, Executor& executor);

  // Page-locks a host range for streaming through the lowest-id device (pinning is
  // process-wide); see Device::PinHost. False: nothing to pin (simulated devices).
  StatusOr<bool> PinHost(void* ptr, size_t bytes);
  Status UnpinHost(void* ptr);
  // Every GPU as the policies see it now (free memory, streams free to this scheduler).
  std::vector<GpuView> GpuSnapshot() const;
  // The GPU holding `key`'s cached copy, if any.
  std::optional<int> CachedOn(const ChunkKey& key) const;
  // Frees every cached chunk of `buffer_id` (Spark's unpersist).
  void DropCached(uint64_t buffer_id);
  ChunkStats stats() const;
  void ResetStats();
  // Called under the scheduler's lock for every placement, wait and completion: keep it short.
  void SetObserver(std::function<void(const SchedulerEvent&)> observer);
  const ChunkConfig& config() const { return config_; }
  int num_gpus() const { return static_cast<int>(devices_.size()); }

 private:
  struct CacheEntry {
    int gpu;
    void* ptr;
    int64_t bytes;
    int pins = 0;            // running subtasks reading it
    bool drop = false;       // free when pins reaches 0
  };
  struct Placed;             // a committed subtask (chunk_scheduler.cc)

  void WorkerLoop();
  // REQUIRES: mu_ held. Tries the pending subtasks in order; commits the first that can start.
  std::optional<Placed> TryPlaceOne();
  std::optional<Placed> Commit(const Subtask& s, int gpu, bool use_cached, bool move);
  std::vector<GpuView> Snapshot() const;  // REQUIRES: mu_ held
  dispatch::Device* DeviceOf(int gpu) const;
  Status Execute(Placed& p);
  // Execute's GPU work on p.stream (copies in, the kernel, the copy out), not waited for;
  // the first step that fails ends it. Execute synchronises the stream after, whatever this
  // returned.
  Status EnqueueOnStream(Placed& p);
  void Release(Placed& p, const Status& result);  // REQUIRES: mu_ held
  void Unpin(const ChunkKey& key);                // REQUIRES: mu_ held
  void Emit(SchedulerEvent::Kind kind, const Subtask& s, int gpu, std::string decision);

  std::vector<dispatch::Device*> devices_;
  const ChunkConfig config_;
  Clock& clock_;
  const StreamPolicy policy_;

  mutable std::mutex mu_;
  std::condition_variable released_cv_;
  std::deque<Subtask> pending_;
  int in_flight_ = 0;
  Status first_error_;
  std::map<ChunkKey, CacheEntry> cache_;
  CacheMap cache_map_;                 // mirrors cache_ for the pure policy
  std::map<int, int> streams_in_use_;  // gpu -> streams this scheduler holds
  uint64_t round_robin_next_ = 0;
  ChunkStats stats_;
  std::function<void(const SchedulerEvent&)> observer_;
};

}  // namespace gpusched::chunks
