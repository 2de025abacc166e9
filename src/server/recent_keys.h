#pragma once
// RecentKeys (issue 40: split out of ControlPlane): the idempotency keys of recent
// submissions, so that a retry racing the first submission's commit finds its tasks without a
// store read, and a retry after it finds them without one too while the key is recent. Older
// keys are the store's (StateStore::LookupIdempotencyKey).
//
// A key is remembered with the first task id of its submission and stays "held" until the
// commit carrying that submission ends: Committed keeps it (bounded, oldest forgotten first),
// Withdraw forgets it (the submission was not stored; the same key may be submitted again).
//
// Thread-safety: none; the control plane calls it under its lock.

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>

#include "base/ids.h"

namespace gpusched::server {

class RecentKeys {
 public:
  // Keeps at most `capacity` keys (>= 1); the oldest remembered leave first.
  explicit RecentKeys(size_t capacity);

  // `key` names the submission whose first task is `first`, held until its commit ends.
  // A key already known is remembered anew (a withdrawn key submitted again).
  void Remember(const std::string& key, TaskId first);
  // The first task of the submission `key` names, if it is known here.
  std::optional<TaskId> Find(const std::string& key) const;
  // The commit carrying `first` succeeded: its key is no longer held (and stays known).
  void Committed(TaskId first);
  // The commit carrying `first` failed: its key is forgotten and returned (none when the
  // submission had no key).
  std::optional<std::string> Withdraw(TaskId first);

  size_t size() const { return keys_.size(); }
  size_t held() const { return held_.size(); }

 private:
  struct Entry {
    TaskId first;
    uint64_t generation;  // which Remember put it there (order_ may hold older ones)
  };
  void Evict();

  const size_t capacity_;
  std::unordered_map<std::string, Entry> keys_;
  // Remember order: (key, generation); an entry whose generation is no longer the key's is
  // stale (withdrawn or remembered again) and is skipped when it reaches the front.
  std::deque<std::pair<std::string, uint64_t>> order_;
  std::map<TaskId, std::string> held_;  // held submissions' first task -> key
  uint64_t next_generation_ = 0;
};

}  // namespace gpusched::server
