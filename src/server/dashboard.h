#pragma once
// The web dashboard at / (cluster, queues, task, accounting views), served from the files
// built into the binary (dashboard_assets.h). It reads the REST API (rest_api.h) and follows
// /api/v1/events for live updates.

#include <httplib.h>

namespace gpusched::server {

void RegisterDashboard(httplib::Server& http);

}  // namespace gpusched::server
