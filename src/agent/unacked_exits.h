#pragma once
// UnackedExits: the final statuses the agent reported and the server has not acknowledged
// (issue 40: split out of Agent::Impl), one per task attempt. Every registration carries them
// all (two-way reconciliation, with how long ago each task ended), an assignment of an
// attempt kept here is answered with its status rather than run twice, and a task's files
// are not removed while its exit is kept. With the process executor the journal backs them:
// an agent restarted before the ack refills them from there.
//
// Thread-safety: none of its own. It shares its owner's mutex: every method REQUIRES that
// mutex held.

#include <map>
#include <optional>
#include <vector>

#include "agent/task_executor.h"
#include "base/clock.h"
#include "gpusched/v1/gpusched.pb.h"

namespace gpusched::agent {

// How long before `now` the reported task ended, on this node's clock alone (the server
// subtracts it from its own: no offset between the clocks enters); 0 when `st` has no end.
int64_t EndedAgoMs(const ::gpusched::v1::TaskStatus& st, TimeMs now);

class UnackedExits {
 public:
  // Keeps `st` (a FINISHED status being reported) until acknowledged; replaces one kept for
  // the same attempt.
  void Keep(const ::gpusched::v1::TaskStatus& st);
  // The server acknowledged the exit of `task`: forgotten. False when none was kept.
  bool Acknowledge(const TaskKey& task);
  // The status kept for `task`, if any.
  std::optional<::gpusched::v1::TaskStatus> Find(const TaskKey& task) const;
  // Every attempt whose exit is kept, in order.
  std::vector<TaskKey> Tasks() const;
  // Forgets every exit (issue 39: they were the old cluster's); returns their attempts.
  std::vector<TaskKey> TakeAll();
  // Adds every kept status to `r->finished`, each with how long before `now` it ended.
  void AddTo(::gpusched::v1::RegisterNode* r, TimeMs now) const;

 private:
  std::map<TaskKey, ::gpusched::v1::TaskStatus> exits_;
};

}  // namespace gpusched::agent
