#include "preload/share_ledger.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <new>

namespace gpusched::preload {
namespace {

uint64_t Load(const uint64_t* p) { return __atomic_load_n(p, __ATOMIC_SEQ_CST); }

}  // namespace

ShareLedger* ShareLedger::Open(const char* path, const char** error) {
  void* map = MAP_FAILED;
  const size_t size = sizeof(LedgerLayout);
  if (path != nullptr && path[0] != '\0') {
    const int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) {
      *error = "cannot open $GPUSCHED_PRELOAD_STATE";
      return nullptr;
    }
    // A new file is zero-filled by ftruncate, which is the empty ledger; concurrent openers
    // grow it to the same size, and a file already that size is left as it is.
    struct stat st;
    bool sized = fstat(fd, &st) == 0 && static_cast<size_t>(st.st_size) >= size;
    if (!sized) sized = ftruncate(fd, static_cast<off_t>(size)) == 0;
    if (sized) map = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (map == MAP_FAILED) {
      *error = "cannot map $GPUSCHED_PRELOAD_STATE";
      return nullptr;
    }
  } else {
    map = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (map == MAP_FAILED) {
      *error = "cannot map an anonymous ledger";
      return nullptr;
    }
  }
  // The ledger object itself lives for the life of the process (never freed: wrappers may
  // run from other libraries' destructors).
  void* self = mmap(nullptr, sizeof(ShareLedger), PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (self == MAP_FAILED) {
    *error = "cannot map the ledger object";
    return nullptr;
  }
  return new (self) ShareLedger(static_cast<LedgerLayout*>(map));
}

LedgerSlot* ShareLedger::MySlot() {
  const pid_t me = getpid();
  if (__atomic_load_n(&slot_pid_, __ATOMIC_ACQUIRE) == me) {
    return __atomic_load_n(&slot_, __ATOMIC_RELAXED);
  }
  pthread_mutex_lock(&claim_mu_);
  LedgerSlot* slot = nullptr;
  if (__atomic_load_n(&slot_pid_, __ATOMIC_ACQUIRE) == me) {
    slot = __atomic_load_n(&slot_, __ATOMIC_RELAXED);
  } else {
    // First use, or after a fork: the child has its own driver state and holds nothing yet.
    slot = ClaimSlot(me);
    if (slot != nullptr) {
      __atomic_store_n(&slot_, slot, __ATOMIC_RELAXED);
      __atomic_store_n(&slot_pid_, me, __ATOMIC_RELEASE);
    }
  }
  pthread_mutex_unlock(&claim_mu_);
  return slot;
}

LedgerSlot* ShareLedger::ClaimSlot(pid_t me) {
  for (int round = 0; round < 2; ++round) {
    for (LedgerSlot& s : layout_->slots) {
      int32_t expected = 0;
      if (__atomic_compare_exchange_n(&s.pid, &expected, me, false, __ATOMIC_SEQ_CST,
                                      __ATOMIC_SEQ_CST)) {
        for (uint64_t& b : s.bytes) __atomic_store_n(&b, 0, __ATOMIC_SEQ_CST);
        return &s;
      }
    }
    ReapDead();
  }
  return nullptr;  // kSlots live processes in one task: Charge refuses
}

void ShareLedger::ReapDead() {
  for (LedgerSlot& s : layout_->slots) {
    int32_t pid = __atomic_load_n(&s.pid, __ATOMIC_SEQ_CST);
    if (pid <= 0 || kill(pid, 0) == 0 || errno != ESRCH) continue;
    // Only one reaper wins the slot; it clears the bytes before freeing it.
    if (!__atomic_compare_exchange_n(&s.pid, &pid, -1, false, __ATOMIC_SEQ_CST,
                                     __ATOMIC_SEQ_CST)) {
      continue;
    }
    for (uint64_t& b : s.bytes) __atomic_store_n(&b, 0, __ATOMIC_SEQ_CST);
    __atomic_store_n(&s.pid, 0, __ATOMIC_SEQ_CST);
  }
}

uint64_t ShareLedger::Sum(int device) const {
  uint64_t total = 0;
  for (const LedgerSlot& s : layout_->slots) total += Load(&s.bytes[device]);
  return total;
}

bool ShareLedger::Charge(int device, uint64_t bytes, uint64_t limit_bytes) {
  if (device < 0 || device >= kMaxDevices) return false;
  LedgerSlot* slot = MySlot();
  if (slot == nullptr) return false;
  __atomic_fetch_add(&slot->bytes[device], bytes, __ATOMIC_SEQ_CST);
  uint64_t total = Sum(device);
  if (total > limit_bytes) {
    ReapDead();  // a dead process's charge may be what is in the way
    total = Sum(device);
  }
  if (total <= limit_bytes) {
    uint64_t peak = Load(&layout_->peak_bytes[device]);
    while (peak < total && !__atomic_compare_exchange_n(&layout_->peak_bytes[device], &peak, total,
                                                        false, __ATOMIC_SEQ_CST,
                                                        __ATOMIC_SEQ_CST)) {
    }
    return true;
  }
  __atomic_fetch_sub(&slot->bytes[device], bytes, __ATOMIC_SEQ_CST);
  return false;
}

void ShareLedger::Release(int device, uint64_t bytes) {
  if (device < 0 || device >= kMaxDevices) return;
  LedgerSlot* slot = MySlot();
  if (slot == nullptr) return;
  // Never below zero: a free in a forked child of memory its parent charged is not this
  // slot's to give back (the parent's slot keeps it until the parent frees or exits).
  uint64_t held = Load(&slot->bytes[device]);
  while (held > 0) {
    const uint64_t next = held > bytes ? held - bytes : 0;
    if (__atomic_compare_exchange_n(&slot->bytes[device], &held, next, false, __ATOMIC_SEQ_CST,
                                    __ATOMIC_SEQ_CST)) {
      return;
    }
  }
}

uint64_t ShareLedger::Held(int device) {
  if (device < 0 || device >= kMaxDevices) return 0;
  ReapDead();
  return Sum(device);
}

void ShareLedger::LeaveProcess() {
  pthread_mutex_lock(&claim_mu_);
  if (__atomic_load_n(&slot_pid_, __ATOMIC_ACQUIRE) == getpid()) {
    LedgerSlot* slot = __atomic_load_n(&slot_, __ATOMIC_RELAXED);
    for (uint64_t& b : slot->bytes) __atomic_store_n(&b, 0, __ATOMIC_SEQ_CST);
    __atomic_store_n(&slot->pid, 0, __ATOMIC_SEQ_CST);
    __atomic_store_n(&slot_pid_, 0, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&claim_mu_);
}

}  // namespace gpusched::preload
