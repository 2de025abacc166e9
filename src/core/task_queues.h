#pragma once
// CN115981827A claims 2, 3 and 8: the main queue Q, served in (Pt, first-submission order),
// and the failure queue FQ whose tasks are demoted (Pt + 1) and returned to Q every t2.
//
// Both hold task ids only; the Task records live in the Scheduler.
// Thread-safety: none (the Scheduler is single-threaded).

#include <compare>
#include <cstdint>
#include <set>
#include <unordered_map>
#include <vector>

#include "base/ids.h"

namespace gpusched::core {

struct QueueKey {
  int pt = 0;
  uint64_t seq = 0;
  TaskId id;
  // The rank of a baseline QueueOrder (core/queue_order.h), compared before everything else.
  // It is 0 under the default order, so Q is served in (Pt, seq) as CN115981827A claim 2 says.
  int64_t rank = 0;

  std::strong_ordering operator<=>(const QueueKey& o) const {
    if (auto c = rank <=> o.rank; c != 0) return c;
    if (auto c = pt <=> o.pt; c != 0) return c;
    if (auto c = seq <=> o.seq; c != 0) return c;
    return id <=> o.id;
  }
  bool operator==(const QueueKey&) const = default;
};

class MainQueue {
 public:
  void Push(const QueueKey& key) { keys_.insert(key); }
  bool Erase(const QueueKey& key) { return keys_.erase(key) > 0; }
  size_t size() const { return keys_.size(); }
  bool empty() const { return keys_.empty(); }
  // The order of one dispatch pass: Pt ascending, then first-submission order.
  std::vector<QueueKey> Snapshot() const { return {keys_.begin(), keys_.end()}; }

 private:
  std::set<QueueKey> keys_;
};

// FQ keeps the order tasks failed in; Drain() returns them all (they are then demoted and
// pushed back to Q by the Scheduler).
class FailureQueue {
 public:
  void Push(TaskId id);
  bool Erase(TaskId id);
  size_t size() const { return order_.size(); }
  // The tasks in the order they failed, without removing them.
  std::vector<TaskId> Snapshot() const;
  std::vector<TaskId> Drain();

 private:
  std::set<std::pair<uint64_t, TaskId>> order_;
  std::unordered_map<TaskId, uint64_t> position_;
  uint64_t next_ = 0;
};

}  // namespace gpusched::core
