#include "server/http_routes.h"

#include "server/dashboard.h"
#include "server/rest_api.h"

namespace gpusched::server {

void RegisterHttpRoutes(httplib::Server& http, ControlPlane& cp, const PeerIdentity* peers) {
  // With authentication on, /metrics wants a token (any valid one: a scraper gets a token of
  // its own, `gpusched token create --user prometheus`); with private_data on, only an
  // admin's token reads the per-team series (issue 36).
  http.Get("/metrics", [&cp](const httplib::Request& req, httplib::Response& res) {
    StatusOr<Caller> caller = cp.Authenticate(req.get_header_value("Authorization"),
                                              req.get_header_value("X-Gpusched-User"));
    if (!caller.ok()) {
      res.status = 401;
      res.set_header("WWW-Authenticate", "Bearer realm=\"gpusched\"");
      res.set_content(caller.status().message() + "\n", "text/plain");
      return;
    }
    const bool teams = !cp.config().private_data || caller->admin;
    res.set_content(cp.MetricsText(teams), "text/plain; version=0.0.4");
  });
  http.Get("/healthz", [&cp](const httplib::Request&, httplib::Response& res) {
    // Issue 39: a server whose store file was removed or replaced is not healthy (503).
    if (Status store = cp.StoreHealth(); !store.ok()) {
      res.status = 503;
      res.set_content("store: " + store.message() + "\n", "text/plain");
      return;
    }
    res.set_content("ok\n", "text/plain");
  });
  RegisterRestApi(http, cp, peers);
  RegisterDashboard(http);
}

}  // namespace gpusched::server
