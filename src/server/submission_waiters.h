#pragma once
// SubmissionWaiters (issue 40: out of ControlPlane): the asynchronous submitters waiting for
// their answer. A posted submission the loop admitted waits for the commit carrying its tasks
// (by its first task; a keyed retry racing that commit waits on the first submission's), and
// is answered with its ids when that commit is stored, or kNotStored when it fails or the
// server stops. Answers decided under the control plane's lock are kept here and called by
// the control plane once it has released the lock (TakeAnswers): a callback never runs under
// it.
//
// Thread-safety: none. ControlPlane calls it under its lock (ControlPlane::mu_).

#include <cstddef>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/ids.h"
#include "base/status.h"
#include "server/loop_inbox.h"

namespace gpusched::server {

class SubmissionWaiters {
 public:
  using Result = StatusOr<std::vector<TaskId>>;
  using Answer = std::pair<SubmitManyDone, Result>;

  // first, first+1, ..., first+n-1: the ids of a submission of n tasks (consecutive: the
  // control plane admits all of a request's tasks at once, under its lock).
  static std::vector<TaskId> ConsecutiveIds(TaskId first, size_t n);

  // Requests waiting for a commit.
  size_t waiting() const { return awaiting_.size(); }
  // `done` is answered `result` (at the next TakeAnswers).
  void Decide(SubmitManyDone done, Result result);
  // `done` waits for the commit carrying `first`: then it gets its `count` ids from `first`.
  void Await(TaskId first, SubmitManyDone done, size_t count);
  // The commit carrying `first` is stored: those waiting on it get their ids.
  void Committed(TaskId first);
  // The commit carrying `first` failed: those waiting on it are answered `why`. Returns the
  // ids of their requests (every task of each).
  std::vector<TaskId> Failed(TaskId first, const Status& why);
  // Every waiting request is answered `why` (the server stops); returns the ids they held.
  std::vector<TaskId> AbandonAll(const Status& why);
  // The answers decided so far, in the order decided, to call without the lock.
  std::vector<Answer> TakeAnswers() { return std::exchange(answers_, {}); }
  bool has_answers() const { return !answers_.empty(); }

 private:
  struct Awaiting {
    SubmitManyDone done;
    size_t count = 1;
  };
  std::unordered_multimap<TaskId, Awaiting> awaiting_;
  std::vector<Answer> answers_;
};

}  // namespace gpusched::server
