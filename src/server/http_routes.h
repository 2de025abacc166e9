#pragma once
// The server's HTTP routes (/metrics in Prometheus text format, /healthz, the REST API under
// /api/v1 and the dashboard at /), registered on any
// httplib::Server: the listening one of `gpusched server`, and the unbound one the HTTP fuzz
// target feeds raw requests to (fuzz/http_fuzzer.cc), so both run the very same handlers.

#include <httplib.h>

#include "server/control_plane.h"
#include "server/peer_identity.h"

namespace gpusched::server {

// REQUIRES: `cp` (and `peers`) outlive `http`. `peers`: RegisterRestApi's.
void RegisterHttpRoutes(httplib::Server& http, ControlPlane& cp,
                        const PeerIdentity* peers = nullptr);

}  // namespace gpusched::server
