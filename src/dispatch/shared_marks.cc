#include "dispatch/shared_marks.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstring>
#include <thread>

namespace gpusched::dispatch {

// The segment's layout. `magic` is stored last by the creator, so a process that sees it may
// use the rest. Changing the layout means changing kLayout.
struct SharedSegment {
  std::atomic<uint64_t> magic;
  uint32_t layout;
  std::atomic<uint32_t> futex_word;  // bumped by NotifyAll; waiters sleep on it
  uint32_t policy;  // layout 3: MarkPolicy of the creator; another policy is refused
  pthread_mutex_t mu;
  MarkTable table;
  SharedMetricsTable metrics;  // layout 2 (issue 42); zero-filled by ftruncate at creation
};

namespace {

constexpr uint64_t kMagic = 0x6770757363686d6bULL;  // "gpuschmk"
constexpr uint32_t kLayout = 3;  // 2: the shared metrics (issue 42); 3: policy, literal marks
constexpr int kOpenWaitMs = 2000;  // how long to wait for another process to finish creating

static_assert(std::atomic<uint32_t>::is_always_lock_free);
static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));

Status Errno(const std::string& what) {
  return Unavailable(what + ": " + std::strerror(errno));
}

Status CheckName(const std::string& name) {
  if (name.size() < 2 || name.size() > 201 || name[0] != '/' ||
      name.find('/', 1) != std::string::npos) {
    return InvalidArgument("shared marks name: must be \"/\" followed by 1-200 characters "
                           "other than \"/\", got \"" + name + "\"");
  }
  return Status::Ok();
}

Status InitMutex(pthread_mutex_t* mu) {
  pthread_mutexattr_t a;
  pthread_mutexattr_init(&a);
  int r = pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
  if (r == 0) r = pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
  if (r == 0) r = pthread_mutex_init(mu, &a);
  pthread_mutexattr_destroy(&a);
  if (r != 0) return Internal(std::string("shared marks: pthread_mutex_init: ") + std::strerror(r));
  return Status::Ok();
}

bool ProcessGone(int32_t pid) {
  return pid > 0 && pid != getpid() && kill(pid, 0) == -1 && errno == ESRCH;
}

// Opens the segment `name`, creating and sizing it when it does not exist (`creator`), and
// waits until it has its full size (another process may still be sizing it).
StatusOr<int> OpenSegment(const std::string& name, size_t size, bool* creator) {
  *creator = true;
  int fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0 && errno == EEXIST) {
    *creator = false;
    fd = shm_open(name.c_str(), O_RDWR, 0600);
  }
  if (fd < 0) return Errno("shm_open(\"" + name + "\")");
  if (*creator && ftruncate(fd, static_cast<off_t>(size)) != 0) {
    const Status s = Errno("ftruncate(\"" + name + "\")");
    close(fd);
    shm_unlink(name.c_str());
    return s;
  }
  for (int waited = 0;; ++waited) {
    struct stat st;
    if (fstat(fd, &st) != 0) {
      const Status s = Errno("fstat(\"" + name + "\")");
      close(fd);
      return s;
    }
    if (static_cast<size_t>(st.st_size) >= size) return fd;
    if (waited >= kOpenWaitMs) {
      close(fd);
      return Unavailable("shared marks \"" + name + "\": the segment is " +
                         std::to_string(st.st_size) + " bytes, not " + std::to_string(size) +
                         " (another layout, or its creator died; Unlink it)");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

// A segment another process created: waits for its magic, then checks its layout.
Status AwaitInitialised(const SharedSegment* seg, const std::string& name) {
  for (int waited = 0; seg->magic.load(std::memory_order_acquire) != kMagic; ++waited) {
    if (waited >= kOpenWaitMs) {
      return Unavailable("shared marks \"" + name + "\": never initialised (its creator "
                         "died?); Unlink it");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (seg->layout != kLayout) {
    return InvalidArgument("shared marks \"" + name + "\": layout " +
                           std::to_string(seg->layout) + ", this library uses " +
                           std::to_string(kLayout));
  }
  return Status::Ok();
}

const char* PolicyName(uint32_t policy) {
  switch (static_cast<MarkPolicy>(policy)) {
    case MarkPolicy::kGpusched: return "gpusched";
    case MarkPolicy::kLiteral: return "literal";
  }
  return "unknown";
}

// One segment serves one policy: the two read different fields of the table.
Status CheckPolicy(const SharedSegment* seg, MarkPolicy policy, const std::string& name) {
  if (seg->policy == static_cast<uint32_t>(policy)) return Status::Ok();
  return InvalidArgument("shared_marks: segment \"" + name + "\" holds the " +
                         PolicyName(seg->policy) + " policy's marks; a " +
                         PolicyName(static_cast<uint32_t>(policy)) +
                         " dispatcher cannot share it (use another name)");
}

}  // namespace

StatusOr<std::unique_ptr<SharedMarkStore>> SharedMarkStore::Open(const std::string& name,
                                                                 int gpu_count, Clock& clock,
                                                                 MarkPolicy policy) {
  GS_RETURN_IF_ERROR(CheckName(name));
  if (gpu_count < 1 || gpu_count > kMaxMarkGpus) {
    return InvalidArgument("gpu_count: must be in [1, " + std::to_string(kMaxMarkGpus) +
                           "] for shared marks, got " + std::to_string(gpu_count));
  }
  const size_t size = sizeof(SharedSegment);
  bool creator = true;
  GS_ASSIGN_OR_RETURN(const int fd, OpenSegment(name, size, &creator));
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) return Errno("mmap(\"" + name + "\")");
  auto* seg = static_cast<SharedSegment*>(p);
  std::unique_ptr<SharedMarkStore> store(new SharedMarkStore(seg, name));
  if (creator) {
    seg->layout = kLayout;
    seg->policy = static_cast<uint32_t>(policy);
    seg->futex_word.store(0);
    GS_RETURN_IF_ERROR(InitMutex(&seg->mu));
    InitMarkTable(seg->table, gpu_count, clock.NowNs());
    seg->magic.store(kMagic, std::memory_order_release);
  } else {
    GS_RETURN_IF_ERROR(AwaitInitialised(seg, name));
    GS_RETURN_IF_ERROR(CheckPolicy(seg, policy, name));
  }
  GS_RETURN_IF_ERROR(store->Lock());
  const int existing = seg->table.gpu_count;
  store->Unlock();
  if (existing != gpu_count) {
    return InvalidArgument("gpu_count: " + std::to_string(gpu_count) + " differs from the " +
                           std::to_string(existing) + " of shared marks \"" + name + "\"");
  }
  return store;
}

Status SharedMarkStore::Unlink(const std::string& name) {
  GS_RETURN_IF_ERROR(CheckName(name));
  if (shm_unlink(name.c_str()) != 0) {
    if (errno == ENOENT) return NotFound("shared marks \"" + name + "\": no such segment");
    return Errno("shm_unlink(\"" + name + "\")");
  }
  return Status::Ok();
}

SharedMarkStore::SharedMarkStore(SharedSegment* segment, std::string name)
    : segment_(segment), name_(std::move(name)) {}

SharedMarkStore::~SharedMarkStore() { munmap(segment_, sizeof(SharedSegment)); }

MarkTable& SharedMarkStore::table() { return segment_->table; }

SharedMetricsTable* SharedMarkStore::shared_metrics() { return &segment_->metrics; }

Status SharedMarkStore::Lock() {
  const int r = pthread_mutex_lock(&segment_->mu);
  if (r == 0) return Status::Ok();
  if (r == EOWNERDEAD) {
    // The holder died mid-update: make the table consistent, then the mutex.
    RepairLocked();
    pthread_mutex_consistent(&segment_->mu);
    repairs_++;
    return Status::Ok();
  }
  return Internal("shared marks \"" + name_ + "\": pthread_mutex_lock: " + std::strerror(r));
}

void SharedMarkStore::Unlock() { pthread_mutex_unlock(&segment_->mu); }

void SharedMarkStore::RepairLocked() {
  MarkTable& t = segment_->table;
  if (t.gpu_count < 1 || t.gpu_count > kMaxMarkGpus) t.gpu_count = 1;
  for (int g = 0; g < t.gpu_count; ++g) {
    GpuSlots& gs = t.gpus[g];
    gs.count = std::clamp(gs.count, 0, kMaxCoRunners);
  }
  ReclaimDead();
  NotifyAll();  // the dead holder may have died before it could wake anyone
}

int SharedMarkStore::ReclaimDead() {
  MarkTable& t = segment_->table;
  int dropped = 0;
  for (int g = 0; g < t.gpu_count; ++g) {
    GpuSlots& gs = t.gpus[g];
    int kept = 0;  // keeps grant order
    for (int i = 0; i < gs.count; ++i) {
      if (ProcessGone(gs.running[i].pid)) {
        dropped++;
        // The literal policy's mark held by the dead lease is reset as the owner's release
        // would have (CN113051059B claim 5): no owner, fin_time past.
        if (gs.mark_owner == gs.running[i].ticket) {
          gs.mark_owner = 0;
          gs.mark_fin_ms = 0;
        }
      } else {
        gs.running[kept++] = gs.running[i];
      }
    }
    gs.count = kept;
  }
  return dropped;
}

Status SharedMarkStore::Wait(DurationMs max_ms) {
  const uint32_t seen = segment_->futex_word.load();
  Unlock();
  struct timespec ts;
  ts.tv_sec = max_ms / 1000;
  ts.tv_nsec = (max_ms % 1000) * 1'000'000;
  // Returns at once when the word changed since `seen` (no lost wake-up), on a wake, or after
  // the timeout; every return is fine, the caller re-checks.
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&segment_->futex_word), FUTEX_WAIT, seen, &ts,
          nullptr, 0);
  return Lock();
}

void SharedMarkStore::NotifyAll() {
  segment_->futex_word.fetch_add(1);
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&segment_->futex_word), FUTEX_WAKE, INT32_MAX,
          nullptr, nullptr, 0);
}

}  // namespace gpusched::dispatch
