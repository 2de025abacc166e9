#pragma once
// Who may do what once authenticated (issue 11). One rule set for gRPC (api_service.cc) and
// REST (rest_api.cc):
//  - everyone: submit, list, show, why, nodes, watch;
//  - the task's owner or an admin: cancel a task, read its logs;
//  - admins only: cordon, uncordon, drain, and creating, listing and revoking tokens.
// With authentication off every caller is an admin (tokens.h), so everything is allowed.
// Refusals are PermissionDenied naming what was refused and why.
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

}  // namespace gpusched::server
