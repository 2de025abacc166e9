#include "server/http_routes.h"

#include "server/dashboard.h"
#include "server/rest_api.h"

namespace gpusched::server {

void RegisterHttpRoutes(httplib::Server& http, ControlPlane& cp, const PeerIdentity* peers) {
  http.Get("/metrics", [&cp](const httplib::Request&, httplib::Response& res) {
    res.set_content(cp.MetricsText(), "text/plain; version=0.0.4");
  });
  http.Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("ok\n", "text/plain");
  });
  RegisterRestApi(http, cp, peers);
  RegisterDashboard(http);
}

}  // namespace gpusched::server
