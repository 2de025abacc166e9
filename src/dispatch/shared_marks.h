#pragma once
// SharedMarkStore: the gpusched (or the literal) policy's marks and co-runners in a named POSIX shared-memory
// segment (shm_open, so /dev/shm/<name> on Linux), so that every process on the machine that
// opens the same name — several inference servers, say — dispatches against one set of marks:
// a GPU's mark and co-runners count every lease on it, whichever process granted it, and
// lease tickets are unique across them all.
//
// Locking: one process-shared robust pthread mutex. A process that dies holding it (SIGKILL,
// a crash) does not wedge the others: the next locker gets EOWNERDEAD, drops the leases of
// processes that no longer exist, checks the table and marks the mutex consistent. A waiter
// sleeps on a futex word bumped at every change, so a release in one process wakes a blocked
// acquire in another at once. Leases of a process that died without the lock are reclaimed
// when a waiter's sleep times out (every kReclaimPeriodMs at most) and at every repair.
//
// The segment outlives the processes (it is a file in /dev/shm) until Unlink. Every process
// must open it with the same gpu count, and all must run in one pid namespace (dead processes
// are found by pid). The clock must be the real (monotonic) one: expected finish times are
// compared across processes.
//
// Thread-safety: as MarkStore; any number of threads and processes.

#include <memory>
#include <string>

#include "dispatch/mark_store.h"

namespace gpusched::dispatch {

struct SharedSegment;  // shared_marks.cc

class SharedMarkStore final : public MarkStore {
 public:
  // Opens the segment `name` ("/" then 1-200 characters, none of them "/"), creating and
  // initialising it for `gpu_count` GPUs of `policy` when it does not exist. InvalidArgument
  // for a bad name, a gpu_count or a policy that differs from the segment's; Unavailable when
  // the OS refuses (the message carries errno's text) or another process created it and
  // never finished.
  static StatusOr<std::unique_ptr<SharedMarkStore>> Open(
      const std::string& name, int gpu_count, Clock& clock,
      MarkPolicy policy = MarkPolicy::kGpusched);
  // Removes the name (processes that have it open keep using it). NotFound when absent.
  static Status Unlink(const std::string& name);
  ~SharedMarkStore() override;

  MarkTable& table() override;
  bool shared() const override { return true; }
  Status Lock() override;
  void Unlock() override;
  Status Wait(DurationMs max_ms) override;
  void NotifyAll() override;
  int ReclaimDead() override;
  SharedMetricsTable* shared_metrics() override;

  // How many times a dead holder's lock was repaired through this store (tests).
  int repairs() const { return repairs_; }

 private:
  SharedMarkStore(SharedSegment* segment, std::string name);
  void RepairLocked();

  SharedSegment* const segment_;
  const std::string name_;
  int repairs_ = 0;
};

}  // namespace gpusched::dispatch
