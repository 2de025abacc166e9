#include "store/etcd_client.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <chrono>
#include <functional>
#include <thread>
#include <nlohmann/json.hpp>

#include "base/host_port.h"
#include "base/log.h"

namespace gpusched::store {

using Json = nlohmann::json;

namespace {
// Bounds on what a peer may send: one header line, one answer.
constexpr size_t kMaxHttpLine = 64 * 1024;
constexpr size_t kMaxHttpBody = 64 * 1024 * 1024;
}  // namespace

// One keep-alive HTTP/1.1 connection to one endpoint. Our own small client rather than
// cpp-httplib: etcd's gateway ends error answers with a chunked trailer
// (Grpc-Trailer-Content-Type), which cpp-httplib 0.11 reports as a read error, so an etcd
// error would look like an unreachable endpoint.
struct EtcdClient::Conn {
  std::string url;
  std::string host;
  int port = 0;
  int fd = -1;
  int connect_timeout_ms = 1'000;
  int request_timeout_ms = 5'000;
  bool timed_out = false;  // the last exchange failed for want of an answer in time

  ~Conn() { Drop(); }
  void Drop() {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }

  // "" on success, else what failed.
  std::string Connect() {
    addrinfo hints{}, *res = nullptr;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res) != 0 || res == nullptr) {
      return "cannot resolve " + host;
    }
    std::string error = "connection refused";
    for (addrinfo* a = res; a != nullptr; a = a->ai_next) {
      const int s = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
      if (s < 0) continue;
      int rc = ::connect(s, a->ai_addr, a->ai_addrlen);
      if (rc != 0 && errno == EINPROGRESS) {
        pollfd p{s, POLLOUT, 0};
        rc = ::poll(&p, 1, connect_timeout_ms) == 1 ? 0 : -1;
        int err = 0;
        socklen_t len = sizeof err;
        if (rc == 0 && (getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0)) rc = -1;
        if (rc != 0) error = err != 0 ? std::strerror(err) : "connect timed out";
      } else if (rc != 0) {
        error = std::strerror(errno);
      }
      if (rc == 0) {
        const int flags = fcntl(s, F_GETFL);
        fcntl(s, F_SETFL, flags & ~O_NONBLOCK);
        timeval tv{request_timeout_ms / 1000, (request_timeout_ms % 1000) * 1000};
        setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        const int one = 1;
        setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        fd = s;
        freeaddrinfo(res);
        return "";
      }
      ::close(s);
    }
    freeaddrinfo(res);
    return error;
  }

  bool Fill(std::string& buf) {
    char chunk[16384];
    const ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) timed_out = true;
    if (n <= 0) return false;
    buf.append(chunk, static_cast<size_t>(n));
    return true;
  }

  // POSTs once on the open (or a new) connection. Transport failures set `error`;
  // `alive` tells that the endpoint took the request but did not answer in time (as opposed
  // to refusing the connection or closing it).
  bool Post(const std::string& path, const std::string& body, int& status, std::string& answer,
            std::string& error, bool& alive) {
    alive = false;
    for (int attempt = 0; attempt < 2; ++attempt) {
      const bool reused = fd >= 0;
      if (!reused) {
        error = Connect();
        if (!error.empty()) return false;
      }
      timed_out = false;
      if (Exchange(path, body, status, answer, error)) return true;
      Drop();
      if (timed_out) {
        alive = true;
        return false;
      }
      if (!reused) return false;  // a kept-alive connection may have been closed by etcd: retry once
    }
    return false;
  }

  bool Exchange(const std::string& path, const std::string& body, int& status, std::string& answer,
                std::string& error) {
    const std::string req = "POST " + path + " HTTP/1.1\r\nHost: " + FormatHostPort(host, port) +
                            "\r\nContent-Type: application/json\r\nContent-Length: " +
                            std::to_string(body.size()) + "\r\n\r\n" + body;
    size_t sent = 0;
    while (sent < req.size()) {
      const ssize_t n = ::send(fd, req.data() + sent, req.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) {
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) timed_out = true;
        error = std::string("send: ") + std::strerror(errno);
        return false;
      }
      sent += static_cast<size_t>(n);
    }
    std::string buf;
    auto answer_or = ReadHttpAnswer([this](std::string& b) { return Fill(b); }, buf);
    if (!answer_or.ok()) {
      error = answer_or.status().message();
      return false;
    }
    status = answer_or->status;
    answer = std::move(answer_or->body);
    const bool close_after = answer_or->close;
    if (close_after) Drop();
    return true;
  }
};

namespace {

constexpr char kB64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

// The gateway writes int64 as a JSON string and omits zero values.
int64_t Int(const Json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return 0;
  if (it->is_number_integer()) return it->get<int64_t>();
  if (it->is_number_unsigned()) return static_cast<int64_t>(it->get<uint64_t>());
  if (it->is_string()) {
    try {
      return std::stoll(it->get<std::string>());
    } catch (const std::exception&) {
      return 0;
    }
  }
  return 0;
}

uint64_t Uint(const Json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_string()) return it != j.end() && it->is_number() ? it->get<uint64_t>() : 0;
  try {
    return std::stoull(it->get<std::string>());
  } catch (const std::exception&) {
    return 0;
  }
}

StatusOr<std::string> Bytes(const Json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_string()) return std::string();
  return EtcdClient::Base64Decode(it->get<std::string>());
}

StatusOr<EtcdRange> ParseRange(const Json& j) {
  EtcdRange r;
  if (auto h = j.find("header"); h != j.end()) r.revision = Int(*h, "revision");
  r.more = j.value("more", false);
  r.count = Int(j, "count");
  if (auto kvs = j.find("kvs"); kvs != j.end() && kvs->is_array()) {
    for (const Json& e : *kvs) {
      EtcdKv kv;
      GS_ASSIGN_OR_RETURN(kv.key, Bytes(e, "key"));
      GS_ASSIGN_OR_RETURN(kv.value, Bytes(e, "value"));
      kv.create_revision = Int(e, "create_revision");
      kv.mod_revision = Int(e, "mod_revision");
      kv.version = Int(e, "version");
      kv.lease = Int(e, "lease");
      r.kvs.push_back(std::move(kv));
    }
  }
  return r;
}

Json OpJson(const EtcdOp& op) {
  switch (op.kind) {
    case EtcdOp::Kind::kPut: {
      Json p = {{"key", EtcdClient::Base64Encode(op.key)},
                {"value", EtcdClient::Base64Encode(op.value)}};
      if (op.lease != 0) p["lease"] = std::to_string(op.lease);
      return Json{{"request_put", p}};
    }
    case EtcdOp::Kind::kDelete: {
      Json d = {{"key", EtcdClient::Base64Encode(op.key)}};
      if (!op.range_end.empty()) d["range_end"] = EtcdClient::Base64Encode(op.range_end);
      return Json{{"request_delete_range", d}};
    }
    case EtcdOp::Kind::kRange: {
      Json g = {{"key", EtcdClient::Base64Encode(op.key)}};
      if (!op.range_end.empty()) g["range_end"] = EtcdClient::Base64Encode(op.range_end);
      if (op.limit > 0) g["limit"] = std::to_string(op.limit);
      return Json{{"request_range", g}};
    }
  }
  return Json::object();
}

Json CompareJson(const EtcdCompare& c) {
  Json j = {{"key", EtcdClient::Base64Encode(c.key)}, {"result", "EQUAL"}};
  switch (c.target) {
    case EtcdCompare::Target::kCreateRevision:
      j["target"] = "CREATE";
      j["create_revision"] = std::to_string(c.number);
      break;
    case EtcdCompare::Target::kModRevision:
      j["target"] = "MOD";
      j["mod_revision"] = std::to_string(c.number);
      break;
    case EtcdCompare::Target::kVersion:
      j["target"] = "VERSION";
      j["version"] = std::to_string(c.number);
      break;
    case EtcdCompare::Target::kValue:
      j["target"] = "VALUE";
      j["value"] = EtcdClient::Base64Encode(c.value);
      break;
  }
  return j;
}

// etcd answers errors as {"error": ..., "code": <gRPC code>, "message": ...}.
Status EtcdError(const std::string& url, int http_status, const std::string& body) {
  std::string message = body;
  int code = 0;
  try {
    Json j = Json::parse(body);
    message = j.value("message", j.value("error", body));
    code = j.value("code", 0);
  } catch (const std::exception&) {  // not JSON: keep the body
  }
  const std::string what = "etcd at " + url + ": " + message;
  switch (code) {
    case 3: return InvalidArgument(what);
    case 5: return NotFound(what);
    case 9: return FailedPrecondition(what);
    case 11: return FailedPrecondition(what);  // out of range: compacted revision
    case 14: return Unavailable(what);
    default:
      if (http_status == 503) return Unavailable(what);
      return Internal(what + " (HTTP " + std::to_string(http_status) + ")");
  }
}

// Lines and counted bytes from `buf`, refilled by `fill` (false: the connection ended).
class HttpReader {
 public:
  HttpReader(const std::function<bool(std::string&)>& fill, std::string& buf)
      : fill_(fill), buf_(buf) {}
  bool Line(std::string& out) {
    for (;;) {
      const size_t eol = buf_.find("\r\n");
      if (eol != std::string::npos) {
        out = buf_.substr(0, eol);
        buf_.erase(0, eol + 2);
        return true;
      }
      if (buf_.size() > kMaxHttpLine || !fill_(buf_)) return false;
    }
  }
  bool Exactly(size_t n, std::string& out) {
    while (buf_.size() < n) {
      if (!fill_(buf_)) return false;
    }
    out.append(buf_, 0, n);
    buf_.erase(0, n);
    return true;
  }
  // Everything until the connection closes (at most about kMaxHttpBody).
  std::string Rest() {
    while (buf_.size() <= kMaxHttpBody && fill_(buf_)) {
    }
    std::string all = std::move(buf_);
    buf_.clear();
    return all;
  }

 private:
  const std::function<bool(std::string&)>& fill_;
  std::string& buf_;
};

struct HttpHeaders {
  int64_t length = -1;
  bool chunked = false;
};

HttpHeaders ReadHeaders(HttpReader& in, HttpAnswer& a) {
  HttpHeaders h;
  std::string l;
  while (in.Line(l) && !l.empty()) {
    std::string lower = l;
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (lower.rfind("content-length:", 0) == 0) h.length = std::atoll(lower.c_str() + 15);
    if (lower.rfind("transfer-encoding:", 0) == 0 && lower.find("chunked") != std::string::npos) {
      h.chunked = true;
    }
    if (lower.rfind("connection:", 0) == 0 && lower.find("close") != std::string::npos) a.close = true;
  }
  return h;
}

Status ReadChunkedBody(HttpReader& in, std::string& body) {
  std::string l;
  for (;;) {
    if (!in.Line(l)) return Unavailable("answer cut short");
    char* end = nullptr;
    const unsigned long size = std::strtoul(l.c_str(), &end, 16);
    if (end == l.c_str()) return Unavailable("bad chunk size \"" + l.substr(0, 16) + "\"");
    if (size == 0) break;
    if (size > kMaxHttpBody || body.size() + size > kMaxHttpBody) return Unavailable("answer too large");
    std::string crlf;
    if (!in.Exactly(size, body) || !in.Exactly(2, crlf)) return Unavailable("answer cut short");
  }
  while (in.Line(l) && !l.empty()) {  // trailers (etcd sends one on errors)
  }
  return Status::Ok();
}

}  // namespace

StatusOr<HttpAnswer> ReadHttpAnswer(const std::function<bool(std::string&)>& fill,
                                    std::string& buf) {
  HttpReader in(fill, buf);
  HttpAnswer a;
  std::string l;
  if (!in.Line(l) || l.size() < 12 || l.compare(0, 5, "HTTP/") != 0 || !std::isdigit(uint8_t(l[9]))) {
    return Unavailable("no HTTP answer");
  }
  a.status = std::atoi(l.c_str() + 9);
  const HttpHeaders h = ReadHeaders(in, a);
  if (h.length > static_cast<int64_t>(kMaxHttpBody)) {
    return Unavailable("answer of " + std::to_string(h.length) + " bytes is too large");
  }
  if (h.chunked) {
    GS_RETURN_IF_ERROR(ReadChunkedBody(in, a.body));
  } else if (h.length >= 0) {
    if (!in.Exactly(static_cast<size_t>(h.length), a.body)) return Unavailable("answer cut short");
  } else {
    a.body = in.Rest();
    a.close = true;
  }
  return a;
}

StatusOr<EtcdRange> ParseRangeAnswer(const std::string& text) {
  try {
    return ParseRange(Json::parse(text));
  } catch (const std::exception& e) {
    return Internal(std::string("etcd: unreadable range answer: ") + e.what());
  }
}

StatusOr<EtcdTxnResult> ParseTxnAnswer(const std::string& text) {
  try {
    Json j = Json::parse(text);
    EtcdTxnResult r;
    r.succeeded = j.value("succeeded", false);
    if (auto h = j.find("header"); h != j.end()) r.revision = Int(*h, "revision");
    if (auto rs = j.find("responses"); rs != j.end() && rs->is_array()) {
      for (const Json& e : *rs) {
        if (auto rr = e.find("response_range"); rr != e.end()) {
          GS_ASSIGN_OR_RETURN(EtcdRange range, ParseRange(*rr));
          r.ranges.push_back(std::move(range));
        }
      }
    }
    return r;
  } catch (const std::exception& e) {
    return Internal(std::string("etcd: unreadable txn answer: ") + e.what());
  }
}

EtcdOp EtcdOp::Put(std::string key, std::string value, int64_t lease) {
  EtcdOp op;
  op.kind = Kind::kPut;
  op.key = std::move(key);
  op.value = std::move(value);
  op.lease = lease;
  return op;
}

EtcdOp EtcdOp::Delete(std::string key, std::string range_end) {
  EtcdOp op;
  op.kind = Kind::kDelete;
  op.key = std::move(key);
  op.range_end = std::move(range_end);
  return op;
}

EtcdOp EtcdOp::Get(std::string key, std::string range_end, int64_t limit) {
  EtcdOp op;
  op.kind = Kind::kRange;
  op.key = std::move(key);
  op.range_end = std::move(range_end);
  op.limit = limit;
  return op;
}

std::string EtcdClient::Base64Encode(const std::string& bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    const uint32_t v = (uint8_t(bytes[i]) << 16) | (uint8_t(bytes[i + 1]) << 8) | uint8_t(bytes[i + 2]);
    out += kB64[v >> 18];
    out += kB64[(v >> 12) & 63];
    out += kB64[(v >> 6) & 63];
    out += kB64[v & 63];
  }
  if (i + 1 == bytes.size()) {
    const uint32_t v = uint8_t(bytes[i]) << 16;
    out += kB64[v >> 18];
    out += kB64[(v >> 12) & 63];
    out += "==";
  } else if (i + 2 == bytes.size()) {
    const uint32_t v = (uint8_t(bytes[i]) << 16) | (uint8_t(bytes[i + 1]) << 8);
    out += kB64[v >> 18];
    out += kB64[(v >> 12) & 63];
    out += kB64[(v >> 6) & 63];
    out += '=';
  }
  return out;
}

StatusOr<std::string> EtcdClient::Base64Decode(const std::string& text) {
  auto digit = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+' || c == '-') return 62;
    if (c == '/' || c == '_') return 63;
    return -1;
  };
  std::string out;
  out.reserve(text.size() / 4 * 3);
  uint32_t acc = 0;
  int bits = 0;
  size_t n = text.size();
  while (n > 0 && text[n - 1] == '=') --n;
  for (size_t i = 0; i < n; ++i) {
    const int d = digit(text[i]);
    if (d < 0) return DataLoss("etcd: invalid base64 at offset " + std::to_string(i));
    acc = (acc << 6) | static_cast<uint32_t>(d);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xff);
    }
  }
  return out;
}

std::string EtcdClient::PrefixEnd(const std::string& prefix) {
  std::string end = prefix;
  while (!end.empty()) {
    if (static_cast<uint8_t>(end.back()) < 0xff) {
      end.back() = static_cast<char>(static_cast<uint8_t>(end.back()) + 1);
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');  // every key
}

StatusOr<std::vector<std::string>> ParseEtcdEndpoints(const std::string& list,
                                                      const std::string& field) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    if (comma == std::string::npos) comma = list.size();
    std::string e = list.substr(start, comma - start);
    start = comma + 1;
    if (e.empty()) continue;
    if (e.rfind("https://", 0) == 0) {
      return InvalidArgument(field + ": \"" + e + "\": TLS to etcd is not supported yet; use http://");
    }
    std::string hostport = e.rfind("http://", 0) == 0 ? e.substr(7) : e;
    while (!hostport.empty() && hostport.back() == '/') hostport.pop_back();
    if (const auto hp = ParseHostPort(hostport, field); !hp.ok()) {
      return InvalidArgument(field + ": \"" + e + "\" is not http://HOST:PORT (" +
                             hp.status().message() + ")");
    }
    out.push_back("http://" + hostport);
  }
  if (out.empty()) return InvalidArgument(field + ": no etcd endpoint in \"" + list + "\"");
  return out;
}

StatusOr<std::unique_ptr<EtcdClient>> EtcdClient::Create(std::vector<std::string> endpoints,
                                                         Options options) {
  if (endpoints.empty()) return InvalidArgument("etcd: at least one endpoint is needed");
  return std::unique_ptr<EtcdClient>(new EtcdClient(std::move(endpoints), options));
}

EtcdClient::EtcdClient(std::vector<std::string> endpoints, Options options)
    : endpoints_(std::move(endpoints)), options_(options) {
  for (const std::string& url : endpoints_) {
    auto c = std::make_unique<Conn>();
    c->url = url;
    std::string hostport = url.rfind("http://", 0) == 0 ? url.substr(7) : url;
    const StatusOr<HostPort> hp = ParseHostPort(hostport, "etcd");
    c->host = hp.ok() ? hp->host : hostport;  // no port: etcd's own
    c->port = hp.ok() ? hp->port : 2379;
    c->connect_timeout_ms = options_.connect_timeout_ms;
    c->request_timeout_ms = options_.request_timeout_ms;
    conns_.push_back(std::move(c));
  }
}

EtcdClient::~EtcdClient() = default;

uint64_t AnswerClusterId(std::string_view answer) {
  constexpr std::string_view kKey = "\"cluster_id\":\"";
  const std::string_view head = answer.substr(0, 512);
  const size_t at = head.find(kKey);
  if (at == std::string_view::npos) return 0;
  const std::string_view digits = head.substr(at + kKey.size());
  uint64_t id = 0;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), id);
  return error == std::errc() && end != digits.data() && *end == '"' ? id : 0;
}

Status EtcdClient::Identity() const {
  if (!other_cluster_.load(std::memory_order_acquire)) return Status::Ok();
  std::lock_guard<std::mutex> lock(identity_mu_);
  return FailedPrecondition(identity_error_);
}

Status EtcdClient::CheckCluster(const std::string& url, uint64_t id) {
  if (id == 0) return Status::Ok();
  uint64_t first = 0;
  if (cluster_id_.compare_exchange_strong(first, id, std::memory_order_acq_rel) || first == id) {
    return Status::Ok();
  }
  std::lock_guard<std::mutex> lock(identity_mu_);
  if (!other_cluster_.load(std::memory_order_relaxed)) {
    identity_error_ = "etcd at " + url + " belongs to cluster " + std::to_string(id) +
                      ", not to cluster " + std::to_string(first) +
                      ", the one this server first reached: it was rebuilt or restored under "
                      "the server, or the endpoint list names another cluster. This server "
                      "takes no more reads or writes from etcd: put the original etcd back (or "
                      "restore its snapshot) and restart the server";
    other_cluster_.store(true, std::memory_order_release);
    logging::Error("store", identity_error_);
  }
  return FailedPrecondition(identity_error_);
}

StatusOr<std::string> EtcdClient::Post(const std::string& path, const std::string& body) {
  std::lock_guard<std::mutex> lock(mu_);
  GS_RETURN_IF_ERROR(Identity());
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.retry_for_ms);
  std::string errors;
  for (;;) {
    bool reached = false;  // some endpoint took the request but did not answer in time
    errors.clear();
    for (size_t tried = 0; tried < conns_.size(); ++tried) {
      Conn& c = *conns_[(current_ + tried) % conns_.size()];
      int status = 0;
      bool alive = false;
      std::string answer, error;
      if (!c.Post(path, body, status, answer, error, alive)) {
        reached = reached || alive;
        if (!errors.empty()) errors += "; ";
        errors += c.url + ": " + error;
        continue;
      }
      current_ = (current_ + tried) % conns_.size();
      if (status != 200) return EtcdError(c.url, status, answer);
      GS_RETURN_IF_ERROR(CheckCluster(c.url, AnswerClusterId(answer)));
      return answer;
    }
    if (!reached || std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return Unavailable("etcd unreachable (" + errors + ")");
}

StatusOr<EtcdRange> EtcdClient::Range(const std::string& key, const std::string& range_end,
                                      int64_t limit, int64_t revision) {
  Json req = OpJson(EtcdOp::Get(key, range_end, limit))["request_range"];
  if (revision > 0) req["revision"] = std::to_string(revision);
  GS_ASSIGN_OR_RETURN(std::string body, Post("/v3/kv/range", req.dump()));
  return ParseRangeAnswer(body);
}

StatusOr<EtcdTxnResult> EtcdClient::Txn(const std::vector<EtcdCompare>& compare,
                                        const std::vector<EtcdOp>& success,
                                        const std::vector<EtcdOp>& failure) {
  Json req = Json::object();
  Json cmp = Json::array(), ok = Json::array(), bad = Json::array();
  for (const EtcdCompare& c : compare) cmp.push_back(CompareJson(c));
  for (const EtcdOp& op : success) ok.push_back(OpJson(op));
  for (const EtcdOp& op : failure) bad.push_back(OpJson(op));
  if (!cmp.empty()) req["compare"] = cmp;
  if (!ok.empty()) req["success"] = ok;
  if (!bad.empty()) req["failure"] = bad;
  GS_ASSIGN_OR_RETURN(std::string body, Post("/v3/kv/txn", req.dump()));
  return ParseTxnAnswer(body);
}

StatusOr<int64_t> EtcdClient::LeaseGrant(int64_t ttl_s) {
  Json req = {{"TTL", std::to_string(ttl_s)}};
  GS_ASSIGN_OR_RETURN(std::string body, Post("/v3/lease/grant", req.dump()));
  try {
    Json j = Json::parse(body);
    if (j.contains("error") && !j["error"].get<std::string>().empty()) {
      return Unavailable("etcd: lease grant: " + j["error"].get<std::string>());
    }
    const int64_t id = Int(j, "ID");
    if (id == 0) return Internal("etcd: lease grant answered no ID: " + body);
    return id;
  } catch (const std::exception& e) {
    return Internal(std::string("etcd: unreadable lease answer: ") + e.what());
  }
}

StatusOr<int64_t> EtcdClient::LeaseKeepAlive(int64_t lease) {
  Json req = {{"ID", std::to_string(lease)}};
  GS_ASSIGN_OR_RETURN(std::string body, Post("/v3/lease/keepalive", req.dump()));
  // A stream endpoint: one {"result": ...} (or {"error": ...}) per line.
  const std::string line = body.substr(0, body.find('\n'));
  try {
    Json j = Json::parse(line);
    if (auto e = j.find("error"); e != j.end()) {
      return EtcdError(endpoints_[current_], 500, e->dump());
    }
    return Int(j.value("result", Json::object()), "TTL");
  } catch (const std::exception& e) {
    return Internal(std::string("etcd: unreadable keepalive answer: ") + e.what());
  }
}

Status EtcdClient::LeaseRevoke(int64_t lease) {
  Json req = {{"ID", std::to_string(lease)}};
  auto body = Post("/v3/lease/revoke", req.dump());
  if (!body.ok() && body.status().code() != StatusCode::kNotFound) return body.status();
  return Status::Ok();
}

Status EtcdClient::Compact(int64_t revision) {
  Json req = {{"revision", std::to_string(revision)}, {"physical", false}};
  auto body = Post("/v3/kv/compaction", req.dump());
  // Already compacted past it: nothing to do.
  if (!body.ok() && body.status().message().find("compacted") != std::string::npos) {
    return Status::Ok();
  }
  return body.ok() ? Status::Ok() : body.status();
}

std::vector<EtcdMemberStatus> EtcdClient::MemberStatuses() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<EtcdMemberStatus> out;
  for (auto& c : conns_) {
    EtcdMemberStatus m;
    m.endpoint = c->url;
    int status = 0;
    bool alive = false;
    std::string answer, error;
    if (!c->Post("/v3/maintenance/status", "{}", status, answer, error, alive)) {
      m.error = error;
    } else if (status != 200) {
      m.error = EtcdError(c->url, status, answer).message();
    } else {
      try {
        Json j = Json::parse(answer);
        m.healthy = true;
        m.version = j.value("version", "");
        m.member_id = Uint(j.value("header", Json::object()), "member_id");
        m.leader_id = Uint(j, "leader");
        m.db_size = Int(j, "dbSize");
        m.raft_term = Int(j, "raftTerm");
        if (auto errs = j.find("errors"); errs != j.end() && errs->is_array() && !errs->empty()) {
          m.healthy = false;
          m.error = (*errs)[0].get<std::string>();
        }
        if (m.leader_id == 0) {
          m.healthy = false;
          if (m.error.empty()) m.error = "no raft leader";
        }
      } catch (const std::exception& e) {
        m.error = std::string("unreadable status: ") + e.what();
      }
    }
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace gpusched::store
