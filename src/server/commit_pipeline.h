#pragma once
// CommitPipeline (issue 40: split out of ControlPlane): the books of the control plane's
// group commits (DESIGN.md "State", persist before act). It numbers the commits, keeps what
// the next one carries (PendingWrite), the messages for agents that wait for the commit of
// the record explaining them (released in the order they were held, once that commit is
// durable), the submissions a failed commit withdrew, and the retry backoff after failures,
// measured on the monotonic clock it is given.
//
// One commit at a time: Begin takes what is staged so far, as much of it as fits what one
// store commit may carry (issue 38: StateStore::Limits, estimated by the Budget's costs); the
// rest, and what is staged meanwhile, rides in the next one. A submission (Stage's unit: its
// tasks and their idempotency keys) is never split between commits, and submissions are
// taken in the order staged. A commit is durable for waiters (IsDurable, the held messages)
// once everything staged for it is: a commit that left part of it behind does not count until
// a later one took all that was staged. A failed commit's writes are staged again (what was
// staged since wins) and its messages stay held. The store write, the locking and what a commit means for the
// scheduler are the control plane's.
//
// Thread-safety: none. ControlPlane calls it under its lock (ControlPlane::mu_) only; the
// store write between Begin and Committed/Failed happens with that lock released.

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "base/clock.h"
#include "base/ids.h"
#include "base/status.h"
#include "base/units.h"
#include "core/scheduler.h"
#include "server/agent_channel.h"
#include "store/state_store.h"

namespace gpusched::server {

class CommitPipeline {
 public:
  // What the next commit carries.
  struct PendingWrite {
    std::set<TaskId> tasks;                  // records encoded when the commit starts
    std::map<std::string, store::NodeRecord> nodes;
    std::set<std::string> removed_nodes;     // `node rm`; a name is in one of the two at most
    std::map<std::string, uint64_t> keys;
    std::set<core::MemoryProfile> peaks;
    std::map<std::string, std::optional<store::TokenRecord>> tokens;  // nullopt = revoked
    std::map<std::string, std::optional<core::TeamQuota>> quotas;  // nullopt = `quota rm`
    // Issue 38: submissions, by first task: their task count (consecutive ids). Each goes
    // whole into one commit with the keys naming its tasks.
    std::map<TaskId, size_t> submissions;
    // Issue 43: records whose only change is the task's Pt (CN115981827A claim 3: the FQ
    // flush demotes every waiting task). They are written in the background, at most
    // kDemotionsPerCommit in a commit, and no commit waits for them to be durable: a flush
    // that demotes a million tasks does not hold the decisions staged after it (nor the
    // loop) behind a million writes. A crash loses the demotions not written yet: those
    // tasks come back one or more flushes less demoted.
    std::set<TaskId> demotions;
    // Nothing staged that a commit waits for (demotions aside).
    bool settled() const {
      return tasks.empty() && nodes.empty() && removed_nodes.empty() && keys.empty() &&
             peaks.empty() && tokens.empty() && quotas.empty() && submissions.empty();
    }
    bool empty() const { return settled() && demotions.empty(); }
  };
  // Issue 43: the most demotions one commit writes (PendingWrite::demotions): about 0.1 s of
  // SQLite writes on this project's reference machine.
  static constexpr size_t kDemotionsPerCommit = 4'096;
  // A message for an agent that waits until commit `commit` is durable.
  struct Outbound {
    uint64_t commit = 0;
    enum class Kind { kAssign, kKill, kAck } kind = Kind::kAssign;
    core::Action action;                    // kAssign, kKill
    std::weak_ptr<AgentChannel> channel;    // kAck: the connection that reported the exit
    uint64_t task = 0;                      // kAck
    int64_t attempt = 0;                    // kAck
  };
  // The commit Begin started: its number and what it writes.
  struct Started {
    uint64_t seq = 0;
    PendingWrite write;
    bool complete = true;  // it took everything staged
  };
  // Issue 38: what one commit may carry, and what a staged task or learned peak costs against
  // it (an upper bound; none: free). Begin() with the default budget takes everything.
  struct Budget {
    store::CommitLimits limits;
    std::function<store::CommitCost(TaskId)> task;
    std::function<store::CommitCost(const core::MemoryProfile&)> peak;
  };
  // The first retry waits this long; each failure in a row doubles it, up to retry_max_ms.
  static constexpr DurationMs kFirstRetryMs = 50;

  // `clock`: its monotonic time times the backoff. `retry_max_ms`: the longest backoff.
  CommitPipeline(const Clock& clock, DurationMs retry_max_ms)
      : clock_(clock), retry_max_ms_(retry_max_ms) {}

  // ---- staging ----
  // What the next commit carries; callers add to it.
  PendingWrite& pending() { return pending_; }
  const PendingWrite& pending() const { return pending_; }
  // The commit that will carry what is staged now.
  uint64_t next_commit() const { return next_commit_; }
  // Holds the scheduler's action (an Assign or a Kill) until next_commit() is durable.
  void HoldAction(core::Action a);
  // Holds the acknowledgement of (task, attempt)'s exit, for `channel`, until next_commit()
  // is durable: the agent keeps the exit in its journal until then.
  void HoldAck(std::weak_ptr<AgentChannel> channel, uint64_t task, int64_t attempt);
  // Whether the assignment of (task, attempt) to `node` is held, not sent yet.
  bool AssignHeld(uint64_t task, int64_t attempt, const std::string& node) const;
  // Whether `id`'s latest record is not durable yet: staged, or in the commit being written.
  bool Unstored(TaskId id) const;
  // Something to commit: staged writes, or held messages whose commit has not been led yet.
  bool HasWork() const;
  // Whether the loop should lead a commit now: none in flight, no backoff running, work.
  bool ShouldLead() const;
  bool committing() const { return committing_; }

  // ---- one commit ----
  // Starts commit next_commit(): takes the staged writes that fit `budget` (at least one
  // thing when anything is staged). REQUIRES: !committing().
  Started Begin(const Budget& budget = {});
  // The commit `seq` is stored: it and every one before it are durable; the backoff resets.
  void Committed(uint64_t seq);
  // The commit `seq` failed with `s`: `w` (what it carried, less what must not be retried)
  // is staged again under what was staged since, its messages stay held. Returns the
  // backoff before the next try.
  DurationMs Failed(uint64_t seq, const Status& s, PendingWrite w);
  // The held messages whose commit is durable, in the order they were held.
  std::vector<Outbound> TakeReleasable();
  bool IsDurable(uint64_t seq) const { return durable_ >= seq; }
  // The failure of the last failed commit when that commit carried `seq`'s changes (it is
  // `seq` or a later one), else none.
  std::optional<Status> FailureOf(uint64_t seq) const;
  int consecutive_failures() const { return consecutive_failures_; }

  // ---- withdrawn submissions (for a synchronous submitter) ----
  void Withdrawn(TaskId id, Status why) { withdrawn_[id] = std::move(why); }
  // Why `id` was withdrawn, once; none when it was not.
  std::optional<Status> TakeWithdrawn(TaskId id);

 private:
  const Clock& clock_;
  const DurationMs retry_max_ms_;
  PendingWrite pending_;
  std::map<TaskId, Status> withdrawn_;       // submissions whose commit failed (for waiters)
  uint64_t next_commit_ = 1;                 // the commit that will carry pending_
  uint64_t durable_ = 0;                     // every commit <= durable_ succeeded
  uint64_t last_failed_ = 0;                 // the last commit that failed
  Status last_failure_ = Status::Ok();
  bool committing_ = false;
  bool in_flight_complete_ = true;           // the commit being written took all staged
  uint64_t left_since_ = 0;                  // 0, or the first commit since which some of
                                             // what was staged is not durable yet
  std::set<TaskId> in_flight_;               // tasks of the commit being written
  std::deque<Outbound> held_;                // ascending commit
  // (task, attempt, node) of the assignments not yet sent (a gang has one per rank's node).
  std::set<std::tuple<uint64_t, int64_t, std::string>> held_assigns_;
  int consecutive_failures_ = 0;
  TimeMs next_retry_ms_ = 0;                 // monotonic
};

}  // namespace gpusched::server
