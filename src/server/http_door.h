#pragma once
// The HTTP endpoint's door: what every connection and request passes before a route sees it
// (issue 36). cpp-httplib 0.11 reads a request's whole body before its handler runs, gives a
// slow client a worker for as long as it likes and keeps no count of connections; the
// servers here replace its per-connection loop (process_and_close_socket) with one that
//  - reads through a DoorStream: the request line and headers must arrive within
//    `header_timeout_ms` (slowloris), a request reads at most its head plus `max_body`
//    bytes however it is framed (a larger body ends the connection), and a refused
//    request's body is never read: the connection closes after the answer;
//  - serves each connection on a thread of its own, at most `max_connections` at once
//    (more are answered 503 and closed at once), so slow connections never take the
//    workers that /healthz needs.
// HttpDoorPolicy then refuses, before the body is read, a Host that is not one of the
// server's names (DNS rebinding: a page whose name now points at 127.0.0.1), a write whose
// Origin is another site's, a body over the limit (413) and an unauthenticated body (401).

#include <httplib.h>

#include <atomic>
#include <functional>
#include <memory>
#include <set>
#include <string>

#include "base/status.h"

namespace gpusched::server {

struct HttpDoorLimits {
  size_t max_body = 1 << 20;          // bytes of a request body (http_max_body)
  int64_t header_timeout_ms = 10'000;  // request line and headers (http_header_timeout)
  size_t max_connections = 256;       // open connections at once (http_max_connections)
};

// The names a request's Host (and a write's Origin) may carry: any IP literal (a browser
// that reached the server by address is on its origin already; DNS rebinding needs a
// name), "localhost", this machine's host name, and `names` (the --listen, --http and
// --advertise hosts, config http_hosts). A port, when given, must be `port`.
class HostAllowList {
 public:
  HostAllowList(std::set<std::string> names, int port) : names_(std::move(names)), port_(port) {}
  // OK, or PermissionDenied naming the Host and what the server answers to.
  Status CheckHost(const std::string& host_header) const;
  // "" (absent) is fine; otherwise "http(s)://HOST[:PORT]" whose HOST:PORT passes CheckHost.
  Status CheckOrigin(const std::string& origin) const;

 private:
  bool Allowed(const std::string& host, int port) const;
  std::set<std::string> names_;  // lower case
  int port_;
};

// Refusals before routing. Returns Handled with the answer in `res` (and the connection
// marked to close) or Unhandled. `authenticate` checks the request's credentials (OK or
// the status to answer); it runs only for a request that carries a body.
using Authenticator = std::function<Status(const httplib::Request&)>;
httplib::Server::HandlerResponse CheckAtTheDoor(const HostAllowList& hosts, size_t max_body,
                                                const Authenticator& authenticate,
                                                const httplib::Request& req,
                                                httplib::Response& res);

// Issue 41: every error answer has the API's JSON body ({"error": {"status", "code",
// "message", "field"}}), httplib's own too: a malformed request (400), a chunked body past
// http_max_body (413), no route (404), a handler that threw (500). Answers that have a body
// already are left alone.
void AnswerErrorsAsJson(httplib::Server& http);

// Ends the connection that is being served on this thread once its current answer is
// written; what the client sent after the head is not read.
void CloseConnectionAfterAnswer();

// httplib's keep-alive settings as the door's loop uses them.
struct DoorTiming {
  size_t max_requests = 0;  // per connection
  int64_t idle_ms = 0, read_ms = 0, write_ms = 0;
};
using SetupFn = std::function<void(httplib::Request&)>;
using ProcessFn = std::function<bool(httplib::Stream&, bool last, bool& closed, const SetupFn&)>;

// httplib::Server (plain HTTP) with the door's connection loop.
class GuardedHttpServer : public httplib::Server {
 public:
  explicit GuardedHttpServer(HttpDoorLimits limits);

 private:
  bool process_and_close_socket(socket_t sock) override;
  DoorTiming Timing() const {
    return {keep_alive_max_count_, keep_alive_timeout_sec_ * 1000,
            read_timeout_sec_ * 1000 + read_timeout_usec_ / 1000,
            write_timeout_sec_ * 1000 + write_timeout_usec_ / 1000};
  }
  HttpDoorLimits limits_;
  std::shared_ptr<std::atomic<size_t>> connections_;
};

// The same over TLS (the handshake also has header_timeout_ms).
class GuardedHttpsServer : public httplib::SSLServer {
 public:
  GuardedHttpsServer(const char* cert_file, const char* key_file, HttpDoorLimits limits);

 private:
  bool process_and_close_socket(socket_t sock) override;
  DoorTiming Timing() const {
    return {keep_alive_max_count_, keep_alive_timeout_sec_ * 1000,
            read_timeout_sec_ * 1000 + read_timeout_usec_ / 1000,
            write_timeout_sec_ * 1000 + write_timeout_usec_ / 1000};
  }
  HttpDoorLimits limits_;
  std::shared_ptr<std::atomic<size_t>> connections_;
};

}  // namespace gpusched::server
