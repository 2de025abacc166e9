#pragma once
// ShareLedger: how much GPU memory a task holds, per device, across every process of the task,
// and the check that keeps it within the task's share (the preload library's core).
//
// The ledger lives in a MAP_SHARED mapping: the file named by $GPUSCHED_PRELOAD_STATE when
// set (the agent gives each task attempt its own), so a task's processes (a launcher and its
// workers) share one limit; otherwise an anonymous mapping (this process and its forks). It
// holds kSlots process slots, each {pid, bytes held per device}. A process charges only its
// own slot; the total is the sum over slots. Slots of dead processes are reaped (a process
// killed with memory held frees it in the driver, so its charge must go too).
//
// Guarantee: Charge succeeds only if, at the moment it reads the total (its own addition
// included, every addition seq_cst), the total is within the limit. Of any set of
// successful charges the last to add saw all the others, so the granted bytes never exceed
// the limit together, whatever the threads and processes do.
//
// Thread- and process-safety: every method may be called from any thread of any process
// sharing the ledger. No allocation, no libstdc++ runtime (it runs inside foreign programs).

#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

namespace gpusched::preload {

inline constexpr int kMaxDevices = 16;
inline constexpr int kSlots = 256;

struct LedgerSlot {
  int32_t pid;                  // 0 = free, -1 = being reaped
  int32_t reserved;
  uint64_t bytes[kMaxDevices];  // held on each device (CUDA ordinal in this process)
};
struct LedgerLayout {
  uint64_t refused;                  // allocations refused for the share, all processes
  uint64_t peak_bytes[kMaxDevices];  // the most the task held at once on each device
  LedgerSlot slots[kSlots];
};

class ShareLedger {
 public:
  // Maps the ledger: the file at `path` (created when missing), or an anonymous mapping when
  // `path` is null or empty. Null when the mapping fails (`error` then says why).
  static ShareLedger* Open(const char* path, const char** error);

  // Adds `bytes` to this process's charge on `device` if the task's total stays within
  // `limit_bytes`; false (nothing charged) otherwise.
  bool Charge(int device, uint64_t bytes, uint64_t limit_bytes);
  // Gives back what Charge granted.
  void Release(int device, uint64_t bytes);
  // The task's total on `device` (live processes; dead ones are reaped first).
  uint64_t Held(int device);
  // Counts an allocation refused for the share (the agent reads it after the task ends).
  void NoteRefused() { __atomic_fetch_add(&layout_->refused, 1, __ATOMIC_SEQ_CST); }
  // Forgets this process's slot (at exit; the driver frees a process's memory when it ends).
  void LeaveProcess();

 private:
  explicit ShareLedger(LedgerLayout* layout) : layout_(layout) {}
  LedgerSlot* MySlot();  // claims one for the calling process on first use (and after fork)
  LedgerSlot* ClaimSlot(pid_t me);
  uint64_t Sum(int device) const;
  void ReapDead();

  LedgerLayout* layout_;
  // The calling process's slot, published with release/acquire; claimed under claim_mu_ so
  // two threads of one process never take two slots. A forked child sees slot_pid_ != its
  // pid and claims its own (the mutex is re-initialised in the child: see preload.cc).
  pthread_mutex_t claim_mu_ = PTHREAD_MUTEX_INITIALIZER;
  pid_t slot_pid_ = 0;
  LedgerSlot* slot_ = nullptr;

 public:
  void ResetAfterFork() { pthread_mutex_init(&claim_mu_, nullptr); }
};

}  // namespace gpusched::preload
