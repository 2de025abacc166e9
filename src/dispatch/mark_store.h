#pragma once
// Where the gpusched policy keeps its per-GPU marks and co-runners, and how they are locked.
//
// MarkTable is plain data of fixed size, so it can live in this process's memory
// (LocalMarkStore) or in a shared-memory segment that several processes map
// (SharedMarkStore, shared_marks.h): then every inference-server process on the machine sees
// the same marks, as CN113051059B's globally unique marks require. A MarkStore locks it and
// lets a waiter sleep until another thread, or process, changes it.

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <condition_variable>

#include "base/clock.h"
#include "base/status.h"
#include "dispatch/dispatch_metrics.h"

namespace gpusched::dispatch {

inline constexpr int kMaxMarkGpus = 64;
inline constexpr int kMaxCoRunners = 128;  // leases at once on one GPU, whatever max_per_gpu

// One running lease as the marks see it. Whoever granted it may be another process, so the
// slot carries what a co-runner needs to know: its expected run time, not a service index.
struct RunningSlot {
  uint64_t ticket;
  double expected_ms;  // expected run time on an idle GPU, fixed at the grant
  double received_ms;  // work done so far: integral of 1 / co-runners over the run
  double spread;       // log-scale standard deviation of its run time around expected_ms
  int32_t pid;         // the process that holds the lease (reclaimed when it dies)
  int32_t reserved;
};

struct GpuSlots {
  int64_t updated_ns;  // every slot's received_ms is current at this clock time
  int32_t enabled;     // 0: out of service
  int32_t count;       // slots in use: running[0, count)
  RunningSlot running[kMaxCoRunners];
  // The literal policy's signal mark of CN113051059B (lock owner, fin_time in ms), kept here
  // so that shared marks give every process one mark per GPU; the gpusched policy leaves
  // them 0. A lease reclaimed from a dead process clears the owner it held.
  uint64_t mark_owner;
  int64_t mark_fin_ms;
};

struct MarkTable {
  int32_t gpu_count;
  int32_t reserved;
  uint64_t next_ticket;  // the next lease's number, unique among everyone sharing the table
  GpuSlots gpus[kMaxMarkGpus];
};

// Issue 42: the metrics every process sharing the marks adds to, so that each one's metrics
// text gives the machine's figures: per service (matched by name) its released and failed
// requests and, per GPU, its latency and queue-wait histograms. Fixed size: kMaxSharedServices
// names of at most kSharedServiceNameBytes - 1 bytes; a service beyond them (or with a longer
// name) keeps per-process figures. Plain data, zero = empty.
inline constexpr int kMaxSharedServices = 32;
inline constexpr int kSharedServiceNameBytes = 64;

struct SharedServiceMetrics {
  char name[kSharedServiceNameBytes];  // NUL-terminated; "" = a free slot
  uint64_t completed;
  uint64_t failed;
  Histogram latency[kMaxMarkGpus];
  Histogram queue_wait[kMaxMarkGpus];
};

struct SharedMetricsTable {
  SharedServiceMetrics services[kMaxSharedServices];
};

// REQUIRES: the table's store locked. The slot of `name`, claimed when absent; null when every
// slot is taken or the name does not fit.
SharedServiceMetrics* ClaimSharedService(SharedMetricsTable& t, const std::string& name);
// REQUIRES: locked. Adds one released request to `s` (as MetricsRecorder::OnComplete does).
void RecordShared(SharedServiceMetrics& s, int gpu, double queue_ms, double run_ms, bool failed);
// REQUIRES: locked. Replaces, in `m`, the figures the table holds for m's services
// (all_completed, all_failed, the cells' histograms) with the table's: every process's.
void OverlaySharedMetrics(const SharedMetricsTable& t, DispatchMetrics& m);

// Which policy a table's marks belong to: a shared segment records its creator's, and a
// dispatcher of the other policy is refused (the two read different fields of GpuSlots).
enum class MarkPolicy : uint32_t { kGpusched = 1, kLiteral = 2 };

// Sets up an empty table of `gpu_count` GPUs, all in service, as of `now_ns`.
void InitMarkTable(MarkTable& t, int gpu_count, int64_t now_ns);

class MarkStore {
 public:
  virtual ~MarkStore() = default;
  // REQUIRES: locked, except for gpu_count.
  virtual MarkTable& table() = 0;
  virtual bool shared() const = 0;
  // Blocks until this thread holds the table. A shared store whose previous holder died with
  // the lock repairs the table first (dropping the leases of dead processes).
  virtual Status Lock() = 0;
  virtual void Unlock() = 0;
  // REQUIRES: locked. Releases the lock, sleeps until NotifyAll (from any thread or process
  // sharing the table) or up to `max_ms`, and locks again. May return early.
  virtual Status Wait(DurationMs max_ms) = 0;
  // REQUIRES: locked. Wakes every Wait.
  virtual void NotifyAll() = 0;
  // REQUIRES: locked. Drops the leases of processes that no longer exist; returns how many.
  // A no-op for a local store.
  virtual int ReclaimDead() { return 0; }
  // REQUIRES: locked. The metrics shared with the other processes; null for a local store.
  virtual SharedMetricsTable* shared_metrics() { return nullptr; }
};

// The table in this process, locked by a std::mutex; waits go through `clock`, so FakeClock
// drives them in tests.
class LocalMarkStore final : public MarkStore {
 public:
  LocalMarkStore(int gpu_count, Clock& clock);
  MarkTable& table() override { return *table_; }
  bool shared() const override { return false; }
  Status Lock() override;
  void Unlock() override { mu_.unlock(); }
  Status Wait(DurationMs max_ms) override;
  void NotifyAll() override;

 private:
  Clock& clock_;
  std::unique_ptr<MarkTable> table_;
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t generation_ = 0;  // bumped by NotifyAll; Wait returns when it changed
};

}  // namespace gpusched::dispatch
