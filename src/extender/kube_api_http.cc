#include "extender/kube_api_http.h"

#include <httplib.h>

#include <cctype>
#include <fstream>
#include <sstream>

#include "extender/json_reader.h"
#include "extender/json_writer.h"

namespace gpusched::extender {
namespace {

constexpr int kPageSize = 500;
constexpr DurationMs kTokenRereadMs = 60'000;

// Query-string escaping of a continue token or resource version (opaque strings).
std::string QueryEscape(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if ((u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z') || (u >= '0' && u <= '9') ||
        c == '-' || c == '_' || c == '.' || c == '~') {
      out += c;
    } else {
      out += '%';
      out += kHex[u >> 4];
      out += kHex[u & 0xF];
    }
  }
  return out;
}

// The message of a Kubernetes Status body, or the start of the body.
std::string StatusMessage(const std::string& body) {
  auto doc = JsonDoc::Parse(body, "status");
  if (doc.ok()) {
    if (auto m = doc->root().Get("message").String(); m && !m->empty()) return *m;
  }
  return body.substr(0, 200);
}

Status FromHttp(const std::string& what, int http_status, const std::string& body) {
  const std::string message =
      what + ": HTTP " + std::to_string(http_status) + ": " + StatusMessage(body);
  switch (http_status) {
    case 401:
    case 403:
      return FailedPrecondition(message + " (check the token and the RBAC rules of the "
                                          "extender's service account)");
    case 404: return NotFound(message);
    case 409: return AlreadyExists(message);
    case 410: return FailedPrecondition(message);
    default:
      return http_status >= 500 ? Unavailable(message) : InvalidArgument(message);
  }
}

template <typename T, typename ParseFn>
StatusOr<WatchEvent<T>> ParseEvent(std::string_view line, ParseFn parse) {
  GS_ASSIGN_OR_RETURN(JsonDoc doc, JsonDoc::Parse(line, "watch event"));
  const JsonValue root = doc.root();
  const JsonValue object = root.Get("object");
  const std::string type = root.Get("type").StringOr();
  WatchEvent<T> e;
  if (type == "ERROR") {
    const int64_t code = object.Get("code").Int().value_or(0);
    const std::string message = "watch: " + object.Get("message").StringOr("error event");
    return code == 410 ? FailedPrecondition(message) : Unavailable(message);
  }
  if (type == "BOOKMARK") {
    e.type = WatchEventType::kBookmark;
    e.object.resource_version = object.Get("metadata").Get("resourceVersion").StringOr();
    return e;
  }
  if (type == "ADDED") {
    e.type = WatchEventType::kAdded;
  } else if (type == "MODIFIED") {
    e.type = WatchEventType::kModified;
  } else if (type == "DELETED") {
    e.type = WatchEventType::kDeleted;
  } else {
    return InvalidArgument("watch event: unknown type \"" + type + "\"");
  }
  GS_ASSIGN_OR_RETURN(e.object, parse(object));
  return e;
}

StatusOr<KubeNode> ParseNodeDefault(JsonValue v) { return ParseNode(v); }

}  // namespace

StatusOr<WatchEvent<KubeNode>> ParseNodeWatchEvent(std::string_view line) {
  return ParseEvent<KubeNode>(line, ParseNodeDefault);
}

StatusOr<WatchEvent<KubePod>> ParsePodWatchEvent(std::string_view line) {
  return ParseEvent<KubePod>(line, ParsePod);
}

HttpKubeApi::HttpKubeApi(KubeApiOptions options, Clock& clock)
    : options_(std::move(options)), clock_(clock) {}

HttpKubeApi::~HttpKubeApi() { Shutdown(); }

StatusOr<std::unique_ptr<HttpKubeApi>> HttpKubeApi::Create(KubeApiOptions options, Clock& clock) {
  const std::string& url = options.url;
  if (url.rfind("http://", 0) != 0 && url.rfind("https://", 0) != 0) {
    return InvalidArgument("--kube-api: \"" + url + "\" must start with http:// or https://");
  }
  std::unique_ptr<HttpKubeApi> api(new HttpKubeApi(std::move(options), clock));
  if (!api->options_.token_file.empty()) GS_RETURN_IF_ERROR(api->Bearer().status());
  api->client_ = api->NewClient(api->options_.request_timeout_s);
  if (!api->client_->is_valid()) return InvalidArgument("--kube-api: \"" + url + "\" is not a valid URL");
  return api;
}

std::unique_ptr<httplib::Client> HttpKubeApi::NewClient(int read_timeout_s) const {
  auto c = std::make_unique<httplib::Client>(options_.url);
  c->set_connection_timeout(5, 0);
  c->set_read_timeout(read_timeout_s, 0);
  c->set_write_timeout(options_.request_timeout_s, 0);
  c->set_keep_alive(true);
  c->set_tcp_nodelay(true);
  if (options_.url.rfind("https://", 0) == 0) {
    if (!options_.ca_file.empty()) c->set_ca_cert_path(options_.ca_file);
    c->enable_server_certificate_verification(true);
  }
  return c;
}

StatusOr<std::string> HttpKubeApi::Bearer() {
  if (options_.token_file.empty()) return std::string();
  std::lock_guard lock(token_mu_);
  const TimeMs now = clock_.NowMs();
  if (token_read_ms_ < 0 || now - token_read_ms_ >= kTokenRereadMs) {
    std::ifstream in(options_.token_file);
    std::stringstream ss;
    ss << in.rdbuf();
    std::string token = ss.str();
    while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back()))) {
      token.pop_back();
    }
    if (!in || token.empty()) {
      if (token_.empty()) {
        return InvalidArgument("--token-file: cannot read a token from \"" +
                               options_.token_file + "\"");
      }
      // Keep the last token: a rotation in progress.
    } else {
      token_ = std::move(token);
    }
    token_read_ms_ = now;
  }
  return "Bearer " + token_;
}

StatusOr<std::string> HttpKubeApi::Get(const std::string& path) {
  GS_ASSIGN_OR_RETURN(const std::string bearer, Bearer());
  httplib::Headers headers{{"Accept", "application/json"}};
  if (!bearer.empty()) headers.emplace("Authorization", bearer);
  std::lock_guard lock(client_mu_);
  if (shut_down_) return Unavailable("GET " + path + ": the API client is shut down");
  auto res = client_->Get(path, headers);
  if (!res) return Unavailable("GET " + path + ": " + httplib::to_string(res.error()));
  if (res->status != 200) return FromHttp("GET " + path, res->status, res->body);
  return std::move(res->body);
}

template <typename T, typename ParseFn>
StatusOr<KubeList<T>> HttpKubeApi::ListAll(const std::string& path, ParseFn parse) {
  KubeList<T> list;
  std::string next;
  const char sep = path.find('?') == std::string::npos ? '?' : '&';
  do {
    std::string page = path + sep + "limit=" + std::to_string(kPageSize);
    if (!next.empty()) page += "&continue=" + QueryEscape(next);
    GS_ASSIGN_OR_RETURN(const std::string body, Get(page));
    GS_ASSIGN_OR_RETURN(JsonDoc doc, JsonDoc::Parse(body, "list " + path));
    const JsonValue meta = doc.root().Get("metadata");
    list.resource_version = meta.Get("resourceVersion").StringOr();
    next = meta.Get("continue").StringOr();
    doc.root().Get("items").ForEachItem([&](JsonValue item) {
      auto object = parse(item);
      if (object.ok()) list.items.push_back(std::move(*object));  // nameless: not an object
      return true;
    });
  } while (!next.empty());
  return list;
}

StatusOr<KubeList<KubeNode>> HttpKubeApi::ListNodes() {
  return ListAll<KubeNode>("/api/v1/nodes", ParseNodeDefault);
}

StatusOr<KubeList<KubePod>> HttpKubeApi::ListPods() {
  return ListAll<KubePod>(
      "/api/v1/pods?fieldSelector=" + QueryEscape("status.phase!=Succeeded,status.phase!=Failed"),
      ParsePod);
}

namespace {

// A watch's body as lines (the API server writes one JSON event per line), each handed to
// `on_line` until it says stop (`go_on` false) or fails.
class WatchLines {
 public:
  explicit WatchLines(const std::function<Status(std::string_view, bool&)>& on_line)
      : on_line_(on_line) {}
  // False once the watch should end.
  bool Feed(const char* data, size_t n) {
    buffer_.append(data, n);
    Consume(false);
    return Going();
  }
  // The last line, when the body does not end with a newline.
  void Flush() { Consume(true); }
  bool Going() const { return go_on_ && error_.ok(); }
  bool stopped() const { return !go_on_; }
  const Status& error() const { return error_; }

 private:
  void Consume(bool flush) {
    size_t start = 0;
    while (Going()) {
      size_t nl = buffer_.find('\n', start);
      if (nl == std::string::npos) {
        if (!flush || start >= buffer_.size()) break;
        nl = buffer_.size();
      }
      const std::string_view line(buffer_.data() + start, nl - start);
      if (line.find_first_not_of(" \r\t") != std::string_view::npos) {
        error_ = on_line_(line, go_on_);
      }
      start = nl + 1;
    }
    buffer_.erase(0, std::min(start, buffer_.size()));
  }

  const std::function<Status(std::string_view, bool&)>& on_line_;
  std::string buffer_;
  bool go_on_ = true;
  Status error_;
};

}  // namespace

std::string HttpKubeApi::WatchPath(const std::string& collection,
                                   const std::string& resource_version) const {
  return collection + (collection.find('?') == std::string::npos ? "?" : "&") +
         "watch=1&allowWatchBookmarks=true&timeoutSeconds=" +
         std::to_string(options_.watch_timeout_s) +
         "&resourceVersion=" + QueryEscape(resource_version);
}

Status HttpKubeApi::Watch(const std::string& collection, const std::string& resource_version,
                          const std::function<Status(std::string_view, bool&)>& on_line) {
  GS_ASSIGN_OR_RETURN(const std::string bearer, Bearer());
  httplib::Headers headers{{"Accept", "application/json"}};
  if (!bearer.empty()) headers.emplace("Authorization", bearer);
  std::unique_ptr<httplib::Client> client = NewClient(options_.watch_timeout_s + 30);
  {
    std::lock_guard lock(watches_mu_);
    if (shut_down_) return Unavailable("watch: the API client is shut down");
    watches_.insert(client.get());
  }
  int http_status = 0;
  WatchLines lines(on_line);
  auto res = client->Get(
      WatchPath(collection, resource_version), headers,
      [&](const httplib::Response& r) {
        http_status = r.status;
        return r.status == 200;
      },
      [&](const char* data, size_t n) { return lines.Feed(data, n); });
  if (res && lines.Going()) lines.Flush();
  bool shut_down;
  {
    std::lock_guard lock(watches_mu_);
    watches_.erase(client.get());
    shut_down = shut_down_;
  }
  if (!lines.error().ok()) return lines.error();
  if (lines.stopped()) return Status::Ok();
  if (shut_down) return Unavailable("watch: the API client is shut down");
  if (http_status != 0 && http_status != 200) {
    return FromHttp("watch " + collection, http_status, "");
  }
  if (!res) return Unavailable("watch " + collection + ": " + httplib::to_string(res.error()));
  return Status::Ok();
}

Status HttpKubeApi::WatchNodes(const std::string& resource_version, const NodeEventFn& on_event) {
  return Watch("/api/v1/nodes", resource_version, [&](std::string_view line, bool& go_on) {
    GS_ASSIGN_OR_RETURN(const WatchEvent<KubeNode> e, ParseNodeWatchEvent(line));
    go_on = on_event(e);
    return Status::Ok();
  });
}

Status HttpKubeApi::WatchPods(const std::string& resource_version, const PodEventFn& on_event) {
  const std::string pods =
      "/api/v1/pods?fieldSelector=" + QueryEscape("status.phase!=Succeeded,status.phase!=Failed");
  return Watch(pods, resource_version, [&](std::string_view line, bool& go_on) {
    GS_ASSIGN_OR_RETURN(const WatchEvent<KubePod> e, ParsePodWatchEvent(line));
    go_on = on_event(e);
    return Status::Ok();
  });
}

StatusOr<KubePod> HttpKubeApi::GetPod(const std::string& ns, const std::string& name) {
  GS_ASSIGN_OR_RETURN(const std::string body,
                      Get("/api/v1/namespaces/" + ns + "/pods/" + name));
  GS_ASSIGN_OR_RETURN(JsonDoc doc, JsonDoc::Parse(body, "pod " + ns + "/" + name));
  return ParsePod(doc.root());
}

Status HttpKubeApi::PatchPodAnnotations(const std::string& ns, const std::string& name,
                                        const std::map<std::string, std::string>& annotations) {
  JsonWriter w;
  w.BeginObject().Key("metadata").BeginObject().Key("annotations").BeginObject();
  for (const auto& [k, v] : annotations) w.Key(k).String(v);
  w.EndObject().EndObject().EndObject();
  GS_ASSIGN_OR_RETURN(const std::string bearer, Bearer());
  httplib::Headers headers{{"Accept", "application/json"}};
  if (!bearer.empty()) headers.emplace("Authorization", bearer);
  const std::string path = "/api/v1/namespaces/" + ns + "/pods/" + name;
  std::lock_guard lock(client_mu_);
  if (shut_down_) return Unavailable("PATCH " + path + ": the API client is shut down");
  auto res = client_->Patch(path, headers, w.str(), "application/strategic-merge-patch+json");
  if (!res) return Unavailable("PATCH " + path + ": " + httplib::to_string(res.error()));
  if (res->status != 200) return FromHttp("PATCH " + path, res->status, res->body);
  return Status::Ok();
}

Status HttpKubeApi::PostBinding(const std::string& ns, const std::string& name,
                                const std::string& uid, const std::string& node) {
  JsonWriter w;
  w.BeginObject().Key("kind").String("Binding").Key("apiVersion").String("v1");
  w.Key("metadata").BeginObject().Key("name").String(name).Key("namespace").String(ns);
  w.Key("uid").String(uid).EndObject();
  w.Key("target").BeginObject().Key("kind").String("Node").Key("name").String(node).EndObject();
  w.EndObject();
  GS_ASSIGN_OR_RETURN(const std::string bearer, Bearer());
  httplib::Headers headers{{"Accept", "application/json"}};
  if (!bearer.empty()) headers.emplace("Authorization", bearer);
  const std::string path = "/api/v1/namespaces/" + ns + "/pods/" + name + "/binding";
  std::lock_guard lock(client_mu_);
  if (shut_down_) return Unavailable("POST " + path + ": the API client is shut down");
  auto res = client_->Post(path, headers, w.str(), "application/json");
  if (!res) return Unavailable("POST " + path + ": " + httplib::to_string(res.error()));
  if (res->status != 200 && res->status != 201) {
    return FromHttp("POST " + path, res->status, res->body);
  }
  return Status::Ok();
}

void HttpKubeApi::Shutdown() {
  {
    std::lock_guard lock(watches_mu_);
    if (shut_down_) return;
    shut_down_ = true;
    for (httplib::Client* c : watches_) c->stop();
  }
  // A request in flight on the shared client ends with an error; later ones fail fast.
  if (client_) client_->stop();
}

}  // namespace gpusched::extender
