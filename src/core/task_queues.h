#pragma once
// CN115981827A claims 2, 3 and 8: the main queue Q, served in (Pt, first-submission order),
// and the failure queue FQ whose tasks are demoted (Pt + 1) and returned to Q every t2.
//
// Both hold task ids only; the Task records live in the Scheduler.
// Thread-safety: none (the Scheduler is single-threaded).

#include <compare>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/clock.h"
#include "base/ids.h"
#include "base/units.h"
#include "core/placement_report.h"

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
  // (position, id) in failure order. Positions grow with every Push and are never reused, so
  // the position a Push will take next splits the tasks queued before and after it.
  std::vector<std::pair<uint64_t, TaskId>> Entries() const { return {order_.begin(), order_.end()}; }
  uint64_t next_position() const { return next_; }

 private:
  std::set<std::pair<uint64_t, TaskId>> order_;
  std::unordered_map<TaskId, uint64_t> position_;
  uint64_t next_ = 0;
};

// What a placement request needs, as the pass's failed-shape memo compares it: GPU count, GPU
// memory per GPU, exclusive, GPU model id, CPU millicores, RAM MiB (all per node), nodes.
using RequestShape = std::tuple<int64_t, MiB, bool, int, int64_t, MiB, int64_t>;

// The settled part of FQ, kept lazily (the Scheduler's lazy flush, README.md): tasks whose Pt
// is at the demotion cap (a flush no longer changes their key) and whose request shape found
// no node in the latest flush pass. They are grouped by shape, each group in Q order, with
// the report of the shape's latest failure. A flush pass tries a group's first task only;
// when it does not fit, the whole group waits again without being visited, and each task's
// placement_failures, last report and reason are caught up when it is read (`round` says up
// to which flush pass its own record is current).
class ParkedQueue {
 public:
  struct Group {
    std::set<QueueKey> keys;   // Q order
    PlacementReport report;    // of the shape's latest failure
    std::string summary;       // DescribeReport(report), the waiting tasks' reason
    int64_t report_seq = 0;    // SetReport's count when it was set (newer = larger)
    int64_t report_pass = 0;   // the pass that made it, and when (Task::report_pass)
    TimeMs report_ms = 0;
  };
  struct Entry {
    RequestShape shape;
    QueueKey key;
    int64_t round = 0;       // the task's own counters are current up to this flush pass
    int64_t report_seq = 0;  // its own report is current up to this group report
  };

  // Parks `key.id`; a new group takes `report` and `summary` (of pass `pass` at `at_ms`) as
  // its latest failure.
  void Park(const RequestShape& shape, const QueueKey& key, int64_t round,
            const PlacementReport& report, const std::string& summary, int64_t pass,
            TimeMs at_ms);
  // The group's latest failure, seen by each of its tasks when next read (issue 37: a pass
  // that a release triggered refreshes the reason without counting a placement failure).
  void SetReport(Group& g, PlacementReport report, std::string summary, int64_t pass,
                 TimeMs at_ms);
  bool Erase(TaskId id);
  Entry* Find(TaskId id);
  const Entry* Find(TaskId id) const;
  Group& GroupOf(const Entry& e) { return groups_.at(e.shape); }
  const Group& GroupOf(const Entry& e) const { return groups_.at(e.shape); }
  const std::map<RequestShape, Group>& groups() const { return groups_; }
  const std::unordered_map<TaskId, Entry>& entries() const { return entries_; }
  size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }
  void Clear();

 private:
  std::map<RequestShape, Group> groups_;
  std::unordered_map<TaskId, Entry> entries_;
  int64_t report_seq_ = 0;
};

}  // namespace gpusched::core
