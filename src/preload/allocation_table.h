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

// kGraphAlloc: a graph's memory allocation node, keyed by its address, owned by the graph.
// kPool: a memory pool's device (bytes 0). kIpcPtr: memory opened from an IPC handle.
// kImportedHandle: a VMM handle imported from outside the task (bytes 0: charged per
// mapping). kMapping: a mapping of such a handle, keyed by its address.
enum class AllocKind : uint8_t {
  kDevicePtr = 1, kHandle = 2, kArray = 3, kMipmap = 4, kGraphAlloc = 5, kPool = 6,
  kIpcPtr = 7, kImportedHandle = 8, kMapping = 9,
};

struct Charged {
  int device = -1;
  uint64_t bytes = 0;
  uint64_t owner = 0;     // kGraphAlloc: the graph
  bool freed_in_owner = false;  // kGraphAlloc: the graph has a free node for it
};

class AllocationTable {
 public:
  // False when memory for the table cannot be had (the caller then refuses the allocation).
  bool Insert(AllocKind kind, uint64_t key, Charged charged);
  // The charge recorded for (kind, key), removed; {-1, 0} when unknown (not allocated
  // through the wrappers, or already freed).
  Charged Remove(AllocKind kind, uint64_t key);
  // The charge recorded for (kind, key), left in place; {-1, 0} when unknown.
  Charged Get(AllocKind kind, uint64_t key);
  // Marks (kind, key) as freed by its owner; false when unknown.
  bool MarkFreedInOwner(AllocKind kind, uint64_t key);
  // Removes every entry of `kind` owned by `owner` and freed in it, passing each to `fn`
  // (called with the table's mutex held: it must not call back into the table).
  void RemoveFreedInOwner(AllocKind kind, uint64_t owner, void (*fn)(const Charged&));

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
