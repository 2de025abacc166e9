#include "server/dashboard.h"

#include <string>

#include "server/dashboard_assets.h"

namespace gpusched::server {
namespace {

// Scripts and styles only from this server's files: no inline code, no third party.
constexpr char kPolicy[] =
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

void Serve(const Asset& a, httplib::Response& res) {
  res.set_header("Content-Security-Policy", kPolicy);
  res.set_header("X-Content-Type-Options", "nosniff");
  res.set_header("Cache-Control", "no-cache");
  res.set_content(std::string(a.body), std::string(a.content_type));
}

}  // namespace

void RegisterDashboard(httplib::Server& http) {
  http.Get("/", [](const httplib::Request&, httplib::Response& res) {
    Serve(*FindAsset("index.html"), res);
  });
  http.Get("/ui/([A-Za-z0-9_.-]+)", [](const httplib::Request& req, httplib::Response& res) {
    const Asset* a = FindAsset(std::string(req.matches[1]));
    if (a == nullptr) {
      res.status = 404;
      res.set_content("no such file\n", "text/plain");
      return;
    }
    Serve(*a, res);
  });
}

}  // namespace gpusched::server
