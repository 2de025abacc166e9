#pragma once
// The server's HTTP routes (/metrics in Prometheus text format, /healthz, the REST API under
// /api/v1 and the dashboard at /), registered on any
// httplib::Server: the listening one of `gpusched server`, and the unbound one the HTTP fuzz
// target feeds raw requests to (fuzz/http_fuzzer.cc), so both run the very same handlers.

#include <httplib.h>

#include "server/control_plane.h"

namespace gpusched::server {

// REQUIRES: `cp` outlives `http`.
void RegisterHttpRoutes(httplib::Server& http, ControlPlane& cp);

}  // namespace gpusched::server
