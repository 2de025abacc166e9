#pragma once
// Which Unix account a task runs as on this node (issue 11, "run as the user"). An agent
// running as root starts each task as the account its spec names (the submitter); an agent
// running as an ordinary user runs every task as itself.
//
// Thread-safety: reentrant (getpwnam_r, getgrouplist).

#include <optional>
#include <string>

#include "agent/task_executor.h"
#include "base/status.h"

namespace gpusched::agent {

// Looks `user` up on this node (node: its name, for messages): uid, primary gid and the
// supplementary groups initgroups would set. Errors, all permanent for the task:
//   NotFound          "user 'alice' does not exist on node n1"
//   FailedPrecondition  the account has uid 0 and `allow_root` is false
StatusOr<TaskUser> LookUpTaskUser(const std::string& user, const std::string& node,
                                  bool allow_root);

// Whether this process may start tasks as other users (it runs as root).
bool CanRunTasksAsOtherUsers();

// The account this process runs as, for the start-up line ("alice (uid 1001)").
std::string DescribeOwnUser();

}  // namespace gpusched::agent
