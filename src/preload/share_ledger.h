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
// The file is the task's own (it must be writable by every process of the task), so it
// shares usage between the task's processes but is no authority: a task that truncates or
// rewrites it may erase what its *other* processes hold, never what the calling process
// holds. Each process keeps its own usage in process memory (the floor): Charge counts the
// calling process at that figure, whatever its slot in the file says, and regrows a
// truncated file. The agent's watchdog (NVML per-process usage) is the enforcement that
// overrides the ledger (README.md).
//
// It also lists what the task's processes exported for sharing (IPC handles, pool
// pointers, file descriptors), as fingerprints, so that an import of memory a process of
// the same task exported (already charged there) is not charged twice.
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
inline constexpr int kExports = 1024;

struct LedgerSlot {
  int32_t pid;                  // 0 = free, -1 = being reaped
  int32_t reserved;
  uint64_t bytes[kMaxDevices];  // held on each device (CUDA ordinal in this process)
};
struct LedgerLayout {
  uint64_t refused;                  // allocations refused for the share, all processes
  uint64_t peak_bytes[kMaxDevices];  // the most the task held at once on each device
  LedgerSlot slots[kSlots];
  uint64_t export_next;              // the next entry of `exported` to write (mod kExports)
  uint64_t exported[kExports];       // fingerprints of exports, 0 = none (a ring)
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
  // What the calling process holds on `device` by its own count (the floor).
  uint64_t HeldByThisProcess(int device);
  // Records that a process of the task exported the object with fingerprint `print` (non-zero).
  void NoteExported(uint64_t print);
  // True when a process of the task exported the object with fingerprint `print`.
  bool WasExported(uint64_t print) const;

 private:
  ShareLedger(LedgerLayout* layout, int fd) : layout_(layout), fd_(fd) {}
  LedgerSlot* MySlot();  // claims one for the calling process on first use (and after fork)
  LedgerSlot* ClaimSlot(pid_t me);
  // The task's total on `device`: the other processes' slots plus this process's own count.
  uint64_t Total(int device, const LedgerSlot* mine) const;
  void ReapDead();
  void RegrowIfTruncated();

  LedgerLayout* layout_;
  int fd_;  // the ledger file (kept open to regrow it), -1 for an anonymous mapping
  // What this process holds per device by its own count (atomic access); zeroed when the
  // process claims its slot (first use, and in a forked child).
  uint64_t mine_[kMaxDevices] = {};
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
