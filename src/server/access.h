#pragma once
// Who may do what once authenticated (issue 11). One rule set for gRPC (api_service.cc) and
// REST (rest_api.cc):
//  - everyone: submit, list, show, why, nodes, watch;
//  - the task's owner or an admin: cancel a task, read its logs;
//  - admins only: cordon, uncordon, drain, and creating, listing and revoking tokens.
// With authentication off every caller is an admin (tokens.h), so everything is allowed.
// Refusals are PermissionDenied naming what was refused and why.
//
// What a caller may read of a task (issue 36): its environment (tokens, keys, passwords) is
// its owner's and the admins' only; with the server's `private_data` (after Slurm's
// PrivateData) so are its command and working directory, as its logs always are.
//
// Pure: no I/O, no state.

#include <string>

#include "base/status.h"
#include "gpusched/v1/gpusched.pb.h"
#include "server/tokens.h"

namespace gpusched::server {

// `what`: the refused action as a phrase, e.g. "drain node n1".
Status RequireAdmin(const Caller& caller, const std::string& what);
// `what`: e.g. "cancel task 7". A task without a recorded user (submitted before
// authentication existed) is an admin's only.
Status RequireOwnerOrAdmin(const Caller& caller, const v1::Task& task, const std::string& what);

// Whether `caller` is `task`'s owner or an admin.
bool OwnsOrAdmin(const Caller& caller, const v1::Task& task);

// The one redaction of a task on its way to a caller: every path that hands out tasks (gRPC
// GetTask, ListTasks, Watch, Cancel; REST tasks, queues and cancel; the dashboard reads REST)
// passes each task here. Empties what `caller` may not read (spec.env; with `private_data`
// also spec.command and spec.workdir) and names each emptied field in task.redacted.
void RedactForCaller(const Caller& caller, bool private_data, v1::Task* task);

}  // namespace gpusched::server
