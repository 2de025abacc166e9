#pragma once
// AllocationTable: what each live allocation of this process was charged (device and bytes),
// so a free gives back exactly that. Keys are (kind, handle): device pointers, cuMemCreate
// handles and arrays live in different name spaces.
//
// Thread-safety: every method may be called from any thread (one mutex; the critical
// sections are a hash probe). No libstdc++ runtime: storage is calloc'ed.

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

namespace gpusched::preload {

enum class AllocKind : uint8_t { kDevicePtr = 1, kHandle = 2, kArray = 3 };

struct Charged {
  int device = -1;
  uint64_t bytes = 0;
};

class AllocationTable {
 public:
  // False when memory for the table cannot be had (the caller then refuses the allocation).
  bool Insert(AllocKind kind, uint64_t key, Charged charged);
  // The charge recorded for (kind, key), removed; {-1, 0} when unknown (not allocated
  // through the wrappers, or already freed).
  Charged Remove(AllocKind kind, uint64_t key);

  void ResetAfterFork() { pthread_mutex_init(&mu_, nullptr); }

 private:
  struct Entry {
    uint64_t key;
    uint8_t kind;   // 0 = empty
    bool deleted;   // tombstone
    Charged charged;
  };
  size_t Find(AllocKind kind, uint64_t key) const;  // index, or capacity_ when absent
  bool Grow();

  pthread_mutex_t mu_ = PTHREAD_MUTEX_INITIALIZER;
  Entry* entries_ = nullptr;
  size_t capacity_ = 0;  // a power of two
  size_t used_ = 0;      // live entries and tombstones
};

}  // namespace gpusched::preload
