#include "server/http_door.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "base/clock.h"
#include "base/host_port.h"

namespace gpusched::server {
namespace {

constexpr size_t kMaxHead = 64 << 10;       // request line and headers
constexpr size_t kFramingSlack = 16 << 10;  // chunk sizes and trailers around a body
constexpr int64_t kLingerMs = 1'000;        // reading what a refused client still sends
constexpr size_t kLingerBytes = 1 << 20;

int64_t MonoMs() {
  static RealClock clock;
  return clock.NowNs() / 1'000'000;
}

// Waits until `fd` is ready for `events` or `deadline_ms` (monotonic) passed.
bool WaitFd(int fd, short events, int64_t deadline_ms) {
  for (;;) {
    const int64_t left = deadline_ms - MonoMs();
    if (left <= 0) return false;
    pollfd p{fd, events, 0};
    const int r = poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 1'000)));
    if (r > 0) return true;
    if (r < 0 && errno != EINTR) return false;
  }
}

void AddressOf(int fd, bool peer, std::string& ip, int& port) {
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  if ((peer ? getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len)
            : getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len)) != 0) {
    return;
  }
  char buf[INET6_ADDRSTRLEN] = {};
  if (a.ss_family == AF_INET) {
    auto* v4 = reinterpret_cast<sockaddr_in*>(&a);
    inet_ntop(AF_INET, &v4->sin_addr, buf, sizeof buf);
    port = ntohs(v4->sin_port);
  } else if (a.ss_family == AF_INET6) {
    auto* v6 = reinterpret_cast<sockaddr_in6*>(&a);
    inet_ntop(AF_INET6, &v6->sin6_addr, buf, sizeof buf);
    port = ntohs(v6->sin6_port);
  }
  ip = buf;
}

// One connection's bytes, plain or TLS, under the door's limits (http_door.h).
// Not thread-safe: one connection, one thread.
class DoorStream final : public httplib::Stream {
 public:
  // `stopping`: whether the server stops (a wait for a client's bytes then gives up).
  DoorStream(int fd, SSL* ssl, const HttpDoorLimits& limits, int64_t read_timeout_ms,
             int64_t write_timeout_ms, std::function<bool()> stopping)
      : fd_(fd), ssl_(ssl), limits_(limits), read_timeout_ms_(read_timeout_ms),
        write_timeout_ms_(write_timeout_ms), stopping_(std::move(stopping)) {}

  // A new request starts: its head must arrive within the header deadline.
  void BeginRequest() {
    used_ = 0;
    budget_ = kMaxHead;
    over_limit_ = false;
    head_deadline_ms_ = MonoMs() + limits_.header_timeout_ms;
    in_head_ = true;
  }
  // The head was read: the body may use max_body more bytes, each read read_timeout_ms.
  void HeadDone() {
    in_head_ = false;
    budget_ = used_ + limits_.max_body + kFramingSlack;
  }
  void CloseAfterAnswer() { close_after_ = true; }
  bool ending() const { return close_after_ || broken_; }
  // The request's body went past max_body (a chunked body: a declared length is refused
  // before it is read).
  bool body_over_limit() const { return over_limit_; }

  // Waits up to `idle_ms` for the next request; false when none came or the server stops.
  bool WaitForRequest(int64_t idle_ms) {
    return Buffered() || WaitReadable(MonoMs() + idle_ms);
  }

  // Lets a refused client read its answer: no more writes, what it still sends is read
  // and dropped for a short while, then the socket closes.
  void Linger() {
    if (ssl_ != nullptr) SSL_shutdown(ssl_);
    shutdown(fd_, SHUT_WR);
    const int64_t deadline = MonoMs() + kLingerMs;
    size_t drained = 0;
    char sink[16 << 10];
    while (drained < kLingerBytes && WaitFd(fd_, POLLIN, deadline)) {
      const ssize_t n = recv(fd_, sink, sizeof sink, MSG_DONTWAIT);
      if (n <= 0) break;
      drained += static_cast<size_t>(n);
    }
  }

  bool is_readable() const override { return Buffered() || WaitReadable(ReadDeadline()); }
  bool is_writable() const override {
    return WaitFd(fd_, POLLOUT, MonoMs() + write_timeout_ms_);
  }

  ssize_t read(char* ptr, size_t size) override {
    if (pos_ >= len_ && !Fill()) return -1;
    const size_t n = std::min(size, len_ - pos_);
    std::memcpy(ptr, buf_ + pos_, n);
    pos_ += n;
    return static_cast<ssize_t>(n);
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (ssl_ != nullptr) {
      const int n = SSL_write(ssl_, ptr, static_cast<int>(std::min<size_t>(size, INT32_MAX)));
      if (n <= 0) broken_ = true;
      return n > 0 ? n : -1;
    }
    if (!is_writable()) {
      broken_ = true;
      return -1;
    }
    const ssize_t n = send(fd_, ptr, size, MSG_NOSIGNAL);
    if (n < 0) broken_ = true;
    return n;
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    AddressOf(fd_, true, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    AddressOf(fd_, false, ip, port);
  }
  socket_t socket() const override { return fd_; }

 private:
  bool Buffered() const { return pos_ < len_ || (ssl_ != nullptr && SSL_pending(ssl_) > 0); }
  // Readable before `deadline_ms`, looking every 100 ms whether the server stops.
  bool WaitReadable(int64_t deadline_ms) const {
    while (!stopping_()) {
      if (WaitFd(fd_, POLLIN, std::min(deadline_ms, MonoMs() + 100))) return true;
      if (MonoMs() >= deadline_ms) return false;
    }
    return false;
  }
  int64_t ReadDeadline() const {
    return in_head_ ? head_deadline_ms_ : MonoMs() + read_timeout_ms_;
  }

  // Reads what is there into buf_ (within the request's budget and deadline).
  bool Fill() {
    if (used_ >= budget_) {  // over the body limit (or the head's)
      over_limit_ = !in_head_;
      return Fail();
    }
    const size_t want = std::min(sizeof buf_, budget_ - used_);
    const int64_t deadline = ReadDeadline();
    for (;;) {
      if (!(ssl_ != nullptr && SSL_pending(ssl_) > 0) && !WaitReadable(deadline)) {
        return Fail();  // the header deadline, or a body that stopped coming
      }
      ssize_t n = 0;
      if (ssl_ != nullptr) {
        n = SSL_read(ssl_, buf_, static_cast<int>(want));
        if (n <= 0) {
          const int err = SSL_get_error(ssl_, static_cast<int>(n));
          if (err == SSL_ERROR_WANT_READ && MonoMs() < deadline) continue;
          return Fail();
        }
      } else {
        n = recv(fd_, buf_, want, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return Fail();
      }
      used_ += static_cast<size_t>(n);
      pos_ = 0;
      len_ = static_cast<size_t>(n);
      return true;
    }
  }
  bool Fail() {
    broken_ = true;
    return false;
  }

  const int fd_;
  SSL* const ssl_;
  const HttpDoorLimits limits_;
  const int64_t read_timeout_ms_;
  const int64_t write_timeout_ms_;
  const std::function<bool()> stopping_;
  char buf_[16 << 10];
  size_t pos_ = 0, len_ = 0;
  size_t used_ = 0, budget_ = kMaxHead;
  int64_t head_deadline_ms_ = 0;
  bool in_head_ = true;
  bool close_after_ = false;
  bool broken_ = false;
  bool over_limit_ = false;
};

thread_local DoorStream* current_stream = nullptr;

// Issue 41: a request with neither Content-Length nor Transfer-Encoding has no body (RFC 9112
// 6.3), as `curl -X POST URL` sends it. httplib 0.11 would read such a POST's body until the
// client closes or its read timeout passes (5 s, then 400): it is told the length, 0.
void WithoutFramingNoBody(httplib::Request& req) {
  if (!req.has_header("Content-Length") && !req.has_header("Transfer-Encoding")) {
    req.headers.emplace("Content-Length", "0");
  }
}

// Runs a connection's requests one after another until one ends it (httplib's keep-alive
// loop, with the door's stream). `process` is Server::process_request.
void ServeRequests(int sock, SSL* ssl, const HttpDoorLimits& limits, const DoorTiming& t,
                   std::function<bool()> stopping, const ProcessFn& process) {
  DoorStream strm(sock, ssl, limits, t.read_ms, t.write_ms, std::move(stopping));
  current_stream = &strm;
  for (size_t n = 0; n < t.max_requests; ++n) {
    if (!strm.WaitForRequest(t.idle_ms)) break;
    strm.BeginRequest();
    bool closed = false;
    const bool ok = process(strm, n + 1 == t.max_requests, closed,
                            [&strm](httplib::Request& req) {
                              strm.HeadDone();
                              WithoutFramingNoBody(req);
                            });
    if (!ok || closed || strm.ending()) break;
  }
  current_stream = nullptr;
  if (strm.ending()) strm.Linger();
}

// Counts a connection for its lifetime; `admitted` is false above the cap.
class ConnectionSlot {
 public:
  ConnectionSlot(std::atomic<size_t>& open, size_t cap) : open_(open) {
    admitted_ = open_.fetch_add(1) < cap;
  }
  ~ConnectionSlot() { open_.fetch_sub(1); }
  bool admitted() const { return admitted_; }

 private:
  std::atomic<size_t>& open_;
  bool admitted_ = false;
};

void RefuseConnection(int fd, size_t cap) {
  const std::string body = "{\"error\":{\"status\":503,\"code\":\"unavailable\",\"message\":"
                           "\"connections: " + std::to_string(cap) +
                           " are open, the most http_max_connections allows; retry later\"}}\n";
  const std::string text = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json"
                           "\r\nRetry-After: 1\r\nConnection: close\r\nContent-Length: " +
                           std::to_string(body.size()) + "\r\n\r\n" + body;
  (void)send(fd, text.data(), text.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
}

void CloseSocket(int fd) {
  shutdown(fd, SHUT_RDWR);
  close(fd);
}

// One thread per connection: a slow connection holds its own thread, never a shared
// worker. shutdown() waits for every connection to end.
class ConnectionThreads final : public httplib::TaskQueue {
 public:
  void enqueue(std::function<void()> fn) override {
    auto state = state_;
    {
      std::lock_guard<std::mutex> lock(state->mu);
      ++state->running;
    }
    std::thread([state, fn = std::move(fn)] {
      fn();
      std::lock_guard<std::mutex> lock(state->mu);
      if (--state->running == 0) state->cv.notify_all();
    }).detach();
  }
  void shutdown() override {
    std::unique_lock<std::mutex> lock(state_->mu);
    state_->cv.wait(lock, [&] { return state_->running == 0; });
  }

 private:
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    size_t running = 0;
  };
  std::shared_ptr<State> state_ = std::make_shared<State>();
};

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

bool IsIpLiteral(const std::string& host) {
  in6_addr a6;
  in_addr a4;
  return inet_pton(AF_INET, host.c_str(), &a4) == 1 ||
         inet_pton(AF_INET6, host.c_str(), &a6) == 1;
}

// The API's error answer ({"error": {...}}, as rest_api.cc's SendError writes it).
void SetJsonError(httplib::Response& res, int status, const std::string& code,
                  const std::string& message) {
  nlohmann::json j = {{"error", {{"status", status}, {"code", code}, {"message", message},
                                 {"field", message.substr(0, message.find(':'))}}}};
  res.status = status;
  res.set_header("Cache-Control", "no-store");
  if (status == 401) res.set_header("WWW-Authenticate", "Bearer realm=\"gpusched\"");
  res.set_content(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n",
                  "application/json");
}

void Refuse(httplib::Response& res, int status, const std::string& code,
            const std::string& message) {
  SetJsonError(res, status, code, message);
  res.set_header("Connection", "close");
  CloseConnectionAfterAnswer();
}

// httplib's own refusal of `status` as the API answers it.
struct Refusal {
  int status;
  std::string code, message;
};
Refusal HttplibRefusal(const httplib::Request& req, int status) {
  const bool too_big = status == 413 || (status == 400 && current_stream != nullptr &&
                                         current_stream->body_over_limit());
  if (too_big) {
    return {413, "invalid_argument", "body: over the limit of the server's http_max_body"};
  }
  switch (status) {
    case 400:
      return {400, "invalid_argument", "request: not a well-formed HTTP request (request line, "
                                       "headers or body framing), or its body stopped coming"};
    case 404: return {404, "not_found", "path: no " + req.method + " " + req.path + " here"};
    case 414: return {414, "invalid_argument", "path: the request line is too long"};
    case 416:
      return {416, "invalid_argument", "Range: \"" + req.get_header_value("Range") +
                                           "\" is not a range of this answer"};
    default:
      return {status, status >= 500 ? "internal" : "invalid_argument",
              "request: refused (HTTP " + std::to_string(status) + ")"};
  }
}

bool HasBody(const httplib::Request& req) {
  return req.has_header("Transfer-Encoding") ||
         (req.has_header("Content-Length") && req.get_header_value("Content-Length") != "0");
}

httplib::TaskQueue* NewConnectionThreads() { return new ConnectionThreads; }

}  // namespace

void AnswerErrorsAsJson(httplib::Server& http) {
  using R = httplib::Server::HandlerResponse;
  http.set_error_handler(httplib::Server::HandlerWithResponse(
      [](const httplib::Request& req, httplib::Response& res) {
        if (!res.body.empty()) return R::Unhandled;
        const Refusal r = HttplibRefusal(req, res.status);
        SetJsonError(res, r.status, r.code, r.message);
        return R::Handled;
      }));
  http.set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "unknown exception";
        try {
          std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        SetJsonError(res, 500, "internal", "internal error: " + what);
      });
}

void CloseConnectionAfterAnswer() {
  if (current_stream != nullptr) current_stream->CloseAfterAnswer();
}

bool HostAllowList::Allowed(const std::string& host, int port) const {
  if (port != 0 && port != port_) return false;
  const std::string h = Lower(host);
  char name[256] = {};
  const bool own_name = gethostname(name, sizeof name - 1) == 0 && h == Lower(name);
  return IsIpLiteral(h) || h == "localhost" || own_name || names_.count(h) > 0;
}

Status HostAllowList::CheckHost(const std::string& host_header) const {
  // HTTP/1.0 may leave Host out; a browser (the rebinding page) always sends it.
  if (host_header.empty()) return Status::Ok();
  // "name", "name:port", "[v6]" or "[v6]:port".
  std::string text = host_header;
  if (!text.empty() && text.back() != ']' && text.find(':') == std::string::npos) text += ":0";
  if (!text.empty() && text.back() == ']') text += ":0";
  StatusOr<HostPort> hp = ParseHostPort(text, "Host");
  std::string names = "an IP address, localhost, this machine's name";
  for (const std::string& n : names_) names += ", " + n;
  if (!hp.ok() || !Allowed(hp->host, hp->port)) {
    return PermissionDenied("Host: \"" + host_header + "\" is not a name this server answers "
                            "to (" + names + ", port " + std::to_string(port_) +
                            "); a page whose name was re-pointed at this server is refused. "
                            "Add the name to the server's http_hosts if it is yours");
  }
  return Status::Ok();
}

Status HostAllowList::CheckOrigin(const std::string& origin) const {
  if (origin.empty()) return Status::Ok();
  const size_t scheme = origin.find("://");
  const std::string rest = scheme == std::string::npos ? "" : origin.substr(scheme + 3);
  if (rest.empty() || rest.find('/') != std::string::npos || !CheckHost(rest).ok()) {
    return PermissionDenied("Origin: \"" + origin + "\" is another site; this server takes "
                            "writes from its own pages and from programs (which send no "
                            "Origin) only");
  }
  return Status::Ok();
}

httplib::Server::HandlerResponse CheckAtTheDoor(const HostAllowList& hosts, size_t max_body,
                                                const Authenticator& authenticate,
                                                const httplib::Request& req,
                                                httplib::Response& res) {
  using R = httplib::Server::HandlerResponse;
  if (Status s = hosts.CheckHost(req.get_header_value("Host")); !s.ok()) {
    Refuse(res, 403, "permission_denied", s.message());
    return R::Handled;
  }
  const bool write = req.method != "GET" && req.method != "HEAD" && req.method != "OPTIONS";
  if (write) {
    if (Status s = hosts.CheckOrigin(req.get_header_value("Origin")); !s.ok()) {
      Refuse(res, 403, "permission_denied", s.message());
      return R::Handled;
    }
  }
  if (!HasBody(req)) return R::Unhandled;
  if (authenticate) {
    if (Status s = authenticate(req); !s.ok()) {
      Refuse(res, s.code() == StatusCode::kUnauthenticated ? 401 : 403,
             std::string(StatusCodeName(s.code())), s.message());
      return R::Handled;
    }
  }
  const std::string length = req.get_header_value("Content-Length");
  if (!length.empty() && (length.size() > 19 || length.find_first_not_of("0123456789") !=
                                                    std::string::npos ||
                          std::stoull(length) > max_body)) {
    Refuse(res, 413, "invalid_argument",
           "body: Content-Length " + length + " is over the limit of " +
               std::to_string(max_body) + " bytes (server key http_max_body)");
    return R::Handled;
  }
  return R::Unhandled;
}

GuardedHttpServer::GuardedHttpServer(HttpDoorLimits limits)
    : limits_(limits), connections_(std::make_shared<std::atomic<size_t>>(0)) {
  new_task_queue = NewConnectionThreads;
}

bool GuardedHttpServer::process_and_close_socket(socket_t sock) {
  ConnectionSlot slot(*connections_, limits_.max_connections);
  if (!slot.admitted()) {
    RefuseConnection(sock, limits_.max_connections);
    CloseSocket(sock);
    return false;
  }
  ServeRequests(sock, nullptr, limits_, Timing(), [this] { return svr_sock_ == INVALID_SOCKET; },
                [this](httplib::Stream& s, bool last, bool& closed, const SetupFn& setup) {
                  return process_request(s, last, closed, setup);
                });
  CloseSocket(sock);
  return true;
}

GuardedHttpsServer::GuardedHttpsServer(const char* cert_file, const char* key_file,
                                       HttpDoorLimits limits)
    : httplib::SSLServer(cert_file, key_file),
      limits_(limits),
      connections_(std::make_shared<std::atomic<size_t>>(0)) {
  new_task_queue = NewConnectionThreads;
}

bool GuardedHttpsServer::process_and_close_socket(socket_t sock) {
  ConnectionSlot slot(*connections_, limits_.max_connections);
  SSL* ssl = slot.admitted() ? SSL_new(ssl_context()) : nullptr;
  if (ssl == nullptr) {
    CloseSocket(sock);
    return false;
  }
  // Blocking reads give up after a second, so the handshake and each TLS record keep to
  // the deadlines (DoorStream retries SSL_ERROR_WANT_READ until then).
  timeval tv{1, 0};
  setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  timeval wtv{static_cast<time_t>(write_timeout_sec_), 0};
  setsockopt(sock, SOL_SOCKET, SO_SNDTIMEO, &wtv, sizeof wtv);
  SSL_set_fd(ssl, sock);
  const int64_t deadline = MonoMs() + limits_.header_timeout_ms;
  int r = SSL_accept(ssl);
  while (r <= 0 && SSL_get_error(ssl, r) == SSL_ERROR_WANT_READ && MonoMs() < deadline) {
    r = SSL_accept(ssl);
  }
  if (r == 1) {
    ServeRequests(sock, ssl, limits_, Timing(), [this] { return svr_sock_ == INVALID_SOCKET; },
                  [this](httplib::Stream& s, bool last, bool& closed, const SetupFn& setup) {
                    return process_request(s, last, closed, setup);
                  });
  }
  SSL_free(ssl);
  CloseSocket(sock);
  return true;
}

}  // namespace gpusched::server
