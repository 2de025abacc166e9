#include "extender/extender_server.h"

#include <httplib.h>

#include "base/host_port.h"

namespace gpusched::extender {
namespace {

// The prefix as a literal inside a std::regex.
std::string RegexEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (std::string_view(".^$|()[]{}*+?\\").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

std::string NormalizeUrlPrefix(const std::string& prefix) {
  std::string p = prefix;
  while (!p.empty() && p.back() == '/') p.pop_back();
  if (!p.empty() && p.front() != '/') p.insert(p.begin(), '/');
  return p;
}

StatusOr<std::unique_ptr<ExtenderServer>> ExtenderServer::Start(Extender& extender,
                                                                const ServerOptions& options,
                                                                std::function<bool()> ready) {
  GS_ASSIGN_OR_RETURN(HostPort listen,
                      ParseHostPort(options.listen, "--listen", /*allow_empty_host=*/true));
  if (listen.host.empty()) listen.host = "0.0.0.0";
  std::unique_ptr<ExtenderServer> s(new ExtenderServer());
  s->prefix_ = NormalizeUrlPrefix(options.url_prefix);
  s->http_ = std::make_unique<httplib::Server>();
  // Answers leave at once: with Nagle on, a small answer to a keep-alive client waits for
  // the delayed ACK of the previous one (about 40 ms on Linux).
  s->http_->set_tcp_nodelay(true);
  // kube-scheduler's Go client asks for gzip; httplib compresses "application/json" bodies
  // for such clients, which costs more than it saves on loopback and in-cluster links for
  // NodeList answers of megabytes. The charset parameter keeps the body as it is.
  constexpr const char* kJson = "application/json; charset=utf-8";
  s->http_->Post(RegexEscape(s->prefix_) + "/(.+)",
                 [&extender, kJson](const httplib::Request& req, httplib::Response& res) {
                   res.status = 200;
                   res.set_content(extender.HandleRequest(req.matches[1].str(), req.body), kJson);
                 });
  s->http_->Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("ok\n", "text/plain");
  });
  s->http_->Get("/readyz", [ready](const httplib::Request&, httplib::Response& res) {
    const bool ok = !ready || ready();
    res.status = ok ? 200 : 503;
    res.set_content(ok ? "ready\n" : "node cache not synced\n", "text/plain");
  });
  s->port_ = listen.port == 0
                 ? s->http_->bind_to_any_port(listen.host)
                 : (s->http_->bind_to_port(listen.host, listen.port) ? listen.port : -1);
  if (s->port_ <= 0) {
    return FailedPrecondition("--listen: cannot listen on " + options.listen +
                              " (address already in use?)");
  }
  httplib::Server* http = s->http_.get();
  s->thread_ = std::thread([http] { http->listen_after_bind(); });
  // stop() is a no-op until the loop runs, so Stop() right after Start() would hang the
  // join: wait for it (a matter of microseconds; not a timing assumption of any test).
  while (!http->is_running()) std::this_thread::yield();
  return s;
}

ExtenderServer::~ExtenderServer() { Stop(); }

void ExtenderServer::Stop() {
  if (!http_) return;
  http_->stop();
  if (thread_.joinable()) thread_.join();
  http_.reset();
}

}  // namespace gpusched::extender
