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

void SubtractSaturating(uint64_t* p, uint64_t bytes) {
  uint64_t held = Load(p);
  while (held > 0) {
    const uint64_t next = held > bytes ? held - bytes : 0;
    if (__atomic_compare_exchange_n(p, &held, next, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
      return;
    }
  }
}

}  // namespace

ShareLedger* ShareLedger::Open(const char* path, const char** error) {
  void* map = MAP_FAILED;
  int fd = -1;
  const size_t size = sizeof(LedgerLayout);
  if (path != nullptr && path[0] != '\0') {
    fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
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
    if (map == MAP_FAILED) {
      close(fd);
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
  return new (self) ShareLedger(static_cast<LedgerLayout*>(map), fd);
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
    for (uint64_t& b : mine_) __atomic_store_n(&b, 0, __ATOMIC_SEQ_CST);
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

uint64_t ShareLedger::Total(int device, const LedgerSlot* mine) const {
  uint64_t total = Load(&mine_[device]);
  for (const LedgerSlot& s : layout_->slots) {
    if (&s != mine) total += Load(&s.bytes[device]);
  }
  return total;
}

// A task that truncated its ledger would make the next access a SIGBUS: the file is grown
// back (zero-filled: the other processes' charges are lost, this one's floor is not).
void ShareLedger::RegrowIfTruncated() {
  struct stat st;
  if (fd_ >= 0 && fstat(fd_, &st) == 0 && static_cast<size_t>(st.st_size) < sizeof(LedgerLayout)) {
    (void)!ftruncate(fd_, static_cast<off_t>(sizeof(LedgerLayout)));
  }
}

bool ShareLedger::Charge(int device, uint64_t bytes, uint64_t limit_bytes) {
  if (device < 0 || device >= kMaxDevices) return false;
  RegrowIfTruncated();
  LedgerSlot* slot = MySlot();
  if (slot == nullptr) return false;
  // The slot tells the other processes; the floor is what counts for this one.
  __atomic_fetch_add(&mine_[device], bytes, __ATOMIC_SEQ_CST);
  __atomic_fetch_add(&slot->bytes[device], bytes, __ATOMIC_SEQ_CST);
  uint64_t total = Total(device, slot);
  if (total > limit_bytes) {
    ReapDead();  // a dead process's charge may be what is in the way
    total = Total(device, slot);
  }
  if (total <= limit_bytes) {
    uint64_t peak = Load(&layout_->peak_bytes[device]);
    while (peak < total && !__atomic_compare_exchange_n(&layout_->peak_bytes[device], &peak, total,
                                                        false, __ATOMIC_SEQ_CST,
                                                        __ATOMIC_SEQ_CST)) {
    }
    return true;
  }
  SubtractSaturating(&mine_[device], bytes);
  SubtractSaturating(&slot->bytes[device], bytes);
  return false;
}

void ShareLedger::Release(int device, uint64_t bytes) {
  if (device < 0 || device >= kMaxDevices) return;
  RegrowIfTruncated();
  LedgerSlot* slot = MySlot();
  if (slot == nullptr) return;
  // Never below zero: a free in a forked child of memory its parent charged is not this
  // process's to give back (the parent keeps it until the parent frees or exits).
  SubtractSaturating(&mine_[device], bytes);
  SubtractSaturating(&slot->bytes[device], bytes);
}

uint64_t ShareLedger::Held(int device) {
  if (device < 0 || device >= kMaxDevices) return 0;
  RegrowIfTruncated();
  ReapDead();
  return Total(device, MySlot());
}

uint64_t ShareLedger::HeldByThisProcess(int device) {
  if (device < 0 || device >= kMaxDevices) return 0;
  MySlot();  // a forked child holds nothing yet
  return Load(&mine_[device]);
}

void ShareLedger::NoteExported(uint64_t print) {
  RegrowIfTruncated();
  const uint64_t i = __atomic_fetch_add(&layout_->export_next, 1, __ATOMIC_SEQ_CST);
  __atomic_store_n(&layout_->exported[i % kExports], print, __ATOMIC_SEQ_CST);
}

bool ShareLedger::WasExported(uint64_t print) const {
  if (print == 0) return false;
  for (const uint64_t& e : layout_->exported) {
    if (Load(&e) == print) return true;
  }
  return false;
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
