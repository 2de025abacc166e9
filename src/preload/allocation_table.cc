#include "preload/allocation_table.h"

#include <stdlib.h>

namespace gpusched::preload {
namespace {

size_t Hash(AllocKind kind, uint64_t key) {
  uint64_t h = key ^ (static_cast<uint64_t>(kind) << 56);
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  return static_cast<size_t>(h);
}

}  // namespace

size_t AllocationTable::Find(AllocKind kind, uint64_t key) const {
  if (capacity_ == 0) return capacity_;
  const size_t mask = capacity_ - 1;
  for (size_t i = Hash(kind, key) & mask, n = 0; n < capacity_; i = (i + 1) & mask, ++n) {
    const Entry& e = entries_[i];
    if (e.kind == 0 && !e.deleted) return capacity_;
    if (!e.deleted && e.kind == static_cast<uint8_t>(kind) && e.key == key) return i;
  }
  return capacity_;
}

// Rehashes into twice the room (dropping tombstones). REQUIRES: mu_ held.
bool AllocationTable::Grow() {
  const size_t capacity = capacity_ == 0 ? 1024 : capacity_ * 2;
  Entry* entries = static_cast<Entry*>(calloc(capacity, sizeof(Entry)));
  if (entries == nullptr) return false;
  size_t used = 0;
  for (size_t i = 0; i < capacity_; ++i) {
    const Entry& e = entries_[i];
    if (e.kind == 0 || e.deleted) continue;
    size_t j = Hash(static_cast<AllocKind>(e.kind), e.key) & (capacity - 1);
    while (entries[j].kind != 0) j = (j + 1) & (capacity - 1);
    entries[j] = e;
    ++used;
  }
  free(entries_);
  entries_ = entries;
  capacity_ = capacity;
  used_ = used;
  return true;
}

bool AllocationTable::Insert(AllocKind kind, uint64_t key, Charged charged) {
  pthread_mutex_lock(&mu_);
  bool ok = true;
  const size_t found = Find(kind, key);
  if (found != capacity_) {
    entries_[found].charged = charged;  // the driver reused a handle we missed the free of
  } else if ((used_ + 1) * 2 > capacity_ && !Grow()) {
    ok = false;
  } else {
    size_t i = Hash(kind, key) & (capacity_ - 1);
    while (entries_[i].kind != 0 && !entries_[i].deleted) i = (i + 1) & (capacity_ - 1);
    if (entries_[i].kind == 0) ++used_;  // a tombstone reused does not add to used_
    entries_[i] = Entry{key, static_cast<uint8_t>(kind), false, charged};
  }
  pthread_mutex_unlock(&mu_);
  return ok;
}

Charged AllocationTable::Remove(AllocKind kind, uint64_t key) {
  pthread_mutex_lock(&mu_);
  Charged out;
  const size_t found = Find(kind, key);
  if (found != capacity_) {
    out = entries_[found].charged;
    entries_[found].deleted = true;
  }
  pthread_mutex_unlock(&mu_);
  return out;
}

Charged AllocationTable::Get(AllocKind kind, uint64_t key) {
  pthread_mutex_lock(&mu_);
  Charged out;
  const size_t found = Find(kind, key);
  if (found != capacity_) out = entries_[found].charged;
  pthread_mutex_unlock(&mu_);
  return out;
}

bool AllocationTable::MarkFreedInOwner(AllocKind kind, uint64_t key) {
  pthread_mutex_lock(&mu_);
  const size_t found = Find(kind, key);
  if (found != capacity_) entries_[found].charged.freed_in_owner = true;
  pthread_mutex_unlock(&mu_);
  return found != capacity_;
}

void AllocationTable::RemoveFreedInOwner(AllocKind kind, uint64_t owner,
                                         void (*fn)(const Charged&)) {
  pthread_mutex_lock(&mu_);
  for (size_t i = 0; i < capacity_; ++i) {
    Entry& e = entries_[i];
    if (e.kind != static_cast<uint8_t>(kind) || e.deleted) continue;
    if (e.charged.owner != owner || !e.charged.freed_in_owner) continue;
    e.deleted = true;
    fn(e.charged);
  }
  pthread_mutex_unlock(&mu_);
}

}  // namespace gpusched::preload
