#include "server/http_routes.h"

namespace gpusched::server {

void RegisterHttpRoutes(httplib::Server& http, ControlPlane& cp) {
  http.Get("/metrics", [&cp](const httplib::Request&, httplib::Response& res) {
    res.set_content(cp.MetricsText(), "text/plain; version=0.0.4");
  });
  http.Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("ok\n", "text/plain");
  });
}

}  // namespace gpusched::server
