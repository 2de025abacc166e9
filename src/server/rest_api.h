#pragma once
// The REST API under /api/v1 (JSON) on the server's HTTP port: tasks (list with filters and
// pagination, one task with its history and explanation, logs, submit, cancel), nodes with
// each GPU's memory split by the tasks sharing it, the queues Q and FQ, accounting, a stream
// of changes (server-sent events) and its OpenAPI document (/api/v1/openapi.json).
//
// Every answer is JSON; errors are {"error": {"status", "code", "message", "field"}} where the
// message names the parameter or field and quotes the value. Every route goes through one
// access check (Authorize in rest_api.cc), where the security issue's bearer tokens plug in.
// The JSON shapes of tasks and nodes are those of `gpusched ls/show/nodes --json`.
//
// Thread-safety: handlers run on the connections' threads (server/http_door.h); all state
// is in ControlPlane.

#include <httplib.h>

#include "server/control_plane.h"
#include "server/peer_identity.h"

namespace gpusched::server {

// REQUIRES: `cp` (and `peers`) outlive `http`. Streams count against cp.streams().
// `peers`: who a caller is with authentication off (issue 35); null = every such caller is
// cp's default_user.
void RegisterRestApi(httplib::Server& http, ControlPlane& cp,
                     const PeerIdentity* peers = nullptr);

}  // namespace gpusched::server
