#pragma once
// AgentWorkQueue: the server's assignments, kills, acks and cluster changes on their way from
// the agent's link thread to its work thread (issue 40: split out of Agent::Impl), so a slow
// account lookup or launch never stops the stream. First in, first out; bounded for
// assignments only (one past the bound is refused, so the caller can answer it "launch
// failed" and the server places it again), every other message always queued. The
// assignment the work thread took and has not finished handling is `launching`: still the
// agent's, like the queued ones (heartbeats and registrations name both).
//
// Thread-safety: none of its own. It shares its owner's mutex: every method REQUIRES that
// mutex held; Pop waits on it (a condition variable of the queue's), so a Push or Close on
// any thread wakes it.

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <optional>
#include <vector>

#include "agent/task_executor.h"
#include "gpusched/v1/gpusched.pb.h"

namespace gpusched::agent {

class AgentWorkQueue {
 public:
  static constexpr size_t kMaxAssigns = 1024;

  explicit AgentWorkQueue(size_t max_assigns = kMaxAssigns) : max_assigns_(max_assigns) {}

  // Queues `m` behind the others and wakes Pop. False, with nothing queued, for an
  // assignment while max_assigns() wait (the one being launched not counted).
  bool Push(::gpusched::v1::ServerMessage m);
  // Waits on `lock` (holding the owner's mutex) for a message; nullopt once closed, even
  // with messages queued (the next registration reconciles them). A popped assignment is
  // `launching` until Done.
  std::optional<::gpusched::v1::ServerMessage> Pop(std::unique_lock<std::mutex>& lock);
  // The message Pop returned is handled: no assignment is launching any more.
  void Done() { launching_.reset(); }
  // Pop returns nullopt from now on; wakes a waiting Pop.
  void Close();
  // Drops every queued message (`launching` stays until Done).
  void Clear();

  // The queued assignments, in order.
  std::vector<TaskKey> QueuedAssigns() const;
  const std::optional<TaskKey>& launching() const { return launching_; }
  size_t max_assigns() const { return max_assigns_; }

 private:
  const size_t max_assigns_;
  std::deque<::gpusched::v1::ServerMessage> messages_;
  size_t assigns_ = 0;  // how many of messages_ are assignments
  std::optional<TaskKey> launching_;
  bool closed_ = false;
  std::condition_variable cv_;
};

}  // namespace gpusched::agent
