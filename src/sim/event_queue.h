#pragma once
// The simulator's event queue: events ordered by (time, sequence). The sequence is the order
// in which events were scheduled, so two events at the same time are handled in the order
// they were created, and a replay is deterministic.
//
// Thread-safety: none.

#include <cstdint>
#include <queue>
#include <vector>

#include "base/clock.h"

namespace gpusched::sim {

enum class EventKind {
  kFinish,         // a running task's last attempt completes
  kLasThreshold,   // a running task crosses an LAS threshold (re-decide)
  kTick,           // Scheduler::Tick is due (FQ -> Q every t2)
};

struct Event {
  TimeMs at_ms = 0;
  uint64_t seq = 0;
  EventKind kind = EventKind::kTick;
  size_t job = 0;         // index in the trace
  int64_t attempt = 0;    // the task attempt the event belongs to (stale ones are ignored)
};

class EventQueue {
 public:
  void Push(TimeMs at_ms, EventKind kind, size_t job = 0, int64_t attempt = 0) {
    heap_.push(Event{at_ms, next_seq_++, kind, job, attempt});
  }
  bool empty() const { return heap_.empty(); }
  const Event& top() const { return heap_.top(); }
  Event Pop() {
    Event e = heap_.top();
    heap_.pop();
    return e;
  }
  size_t size() const { return heap_.size(); }

 private:
  struct Later {
    bool operator()(const Event& a, const Event& b) const {
      return a.at_ms != b.at_ms ? a.at_ms > b.at_ms : a.seq > b.seq;
    }
  };
  std::priority_queue<Event, std::vector<Event>, Later> heap_;
  uint64_t next_seq_ = 0;
};

}  // namespace gpusched::sim
