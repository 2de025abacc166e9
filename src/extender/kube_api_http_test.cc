// HttpKubeApi against a loopback HTTP server that answers like the Kubernetes API server.

#include "extender/kube_api_http.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "extender/testing/fixtures.h"

namespace gpusched::extender {
namespace {

using nlohmann::json;

// Routes are added between construction (the port is bound) and Start (the listening thread
// starts): a thread started first would see them only through the test's requests, an order
// ThreadSanitizer cannot see.
class FakeApiServer {
 public:
  FakeApiServer() { port_ = server_.bind_to_any_port("127.0.0.1"); }
  void Start() {
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::yield();
  }
  ~FakeApiServer() {
    if (!thread_.joinable()) return;
    server_.stop();
    thread_.join();
  }
  httplib::Server& http() { return server_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  httplib::Server server_;
  std::thread thread_;
  int port_ = 0;
};

struct Seen {
  std::mutex mu;
  std::vector<std::string> authorizations, paths;
  std::string patch_body, patch_type, binding_body;
};

class HttpKubeApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    token_path_ = std::filesystem::temp_directory_path() /
                  ("gpusched-extender-token-" + std::to_string(::getpid()));
    std::ofstream(token_path_) << "secret-token\n";
    auto& http = server_.http();
    const auto note = [this](const httplib::Request& req) {
      std::lock_guard lock(seen_.mu);
      seen_.authorizations.push_back(req.get_header_value("Authorization"));
      seen_.paths.push_back(req.path + "?" + (req.has_param("fieldSelector") ? req.get_param_value("fieldSelector") : ""));
    };
    http.Get("/api/v1/nodes", [this, note](const httplib::Request& req, httplib::Response& res) {
      note(req);
      if (req.has_param("watch")) {
        if (req.get_param_value("resourceVersion") == "expired") {
          res.status = 410;
          return;
        }
        const std::string events =
            "{\"type\":\"ADDED\",\"object\":" + testing::NodeJson(testing::MakeNode("n3", 2, 1024)) +
            "}\n{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"Node\",\"metadata\":{\"resourceVersion\":\"77\"}}}\n"
            "{\"type\":\"DELETED\",\"object\":" + testing::NodeJson(testing::MakeNode("n1", 1, 1024)) +
            "}\n{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"code\":410,\"message\":\"too old resource version\"}}\n";
        res.set_chunked_content_provider("application/json", [events](size_t, httplib::DataSink& sink) {
          // Split mid-line, as a network would.
          sink.write(events.data(), 10);
          sink.write(events.data() + 10, events.size() - 10);
          sink.done();
          return true;
        });
        return;
      }
      // Two pages: the continue token leads to the second.
      const bool second = req.has_param("continue");
      EXPECT_EQ(req.get_param_value("limit"), "500");
      const std::string item = testing::NodeJson(testing::MakeNode(second ? "n2" : "n1", 4, 16384));
      res.set_content("{\"kind\":\"NodeList\",\"metadata\":{\"resourceVersion\":\"42\",\"continue\":\"" +
                          std::string(second ? "" : "tok/1") + "\"},\"items\":[" + item + "]}",
                      "application/json");
    });
    http.Get("/api/v1/pods", [this, note](const httplib::Request& req, httplib::Response& res) {
      note(req);
      res.set_content("{\"metadata\":{\"resourceVersion\":\"9\"},\"items\":[" +
                          testing::PodJson(testing::BoundPod(testing::MakePod("a", 1, 0), "n1", {0})) + "]}",
                      "application/json");
    });
    http.Get("/api/v1/namespaces/inference/pods/bert", [note](const httplib::Request& req, httplib::Response& res) {
      note(req);
      res.set_content(testing::PodJson(testing::MakePod("bert", 0, 8192, "inference")), "application/json");
    });
    http.Get("/api/v1/namespaces/inference/pods/gone", [](const httplib::Request&, httplib::Response& res) {
      res.status = 404;
      res.set_content(R"({"kind":"Status","message":"pods \"gone\" not found","code":404})", "application/json");
    });
    http.Patch("/api/v1/namespaces/inference/pods/bert", [this](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard lock(seen_.mu);
      seen_.patch_body = req.body;
      seen_.patch_type = req.get_header_value("Content-Type");
      res.set_content("{}", "application/json");
    });
    http.Post("/api/v1/namespaces/inference/pods/bert-infer-6c8d7f9b4-q9w7z/binding",
              [this](const httplib::Request& req, httplib::Response& res) {
                std::lock_guard lock(seen_.mu);
                seen_.binding_body = req.body;
                res.status = 201;
                res.set_content(R"({"kind":"Status","status":"Success","code":201})", "application/json");
              });
    server_.Start();
    KubeApiOptions options;
    options.url = server_.url();
    options.token_file = token_path_.string();
    auto api = HttpKubeApi::Create(options, clock_);
    ASSERT_TRUE(api.ok()) << api.status().ToString();
    api_ = std::move(api).value();
  }
  void TearDown() override { std::filesystem::remove(token_path_); }

  FakeClock clock_;
  Seen seen_;  // before server_: the handlers write it until server_ has stopped
  FakeApiServer server_;
  std::filesystem::path token_path_;
  std::unique_ptr<HttpKubeApi> api_;
};

TEST_F(HttpKubeApiTest, ListsFollowContinueTokensAndSendTheBearerToken) {
  auto nodes = api_->ListNodes();
  ASSERT_TRUE(nodes.ok()) << nodes.status().ToString();
  ASSERT_EQ(nodes->items.size(), 2u);
  EXPECT_EQ(nodes->items[1].name, "n2");
  EXPECT_EQ(nodes->items[0].gpu_count, 4);
  EXPECT_EQ(nodes->resource_version, "42");
  auto pods = api_->ListPods();
  ASSERT_TRUE(pods.ok());
  EXPECT_EQ(pods->items[0].node_name, "n1");
  std::lock_guard lock(seen_.mu);
  for (const std::string& a : seen_.authorizations) EXPECT_EQ(a, "Bearer secret-token");
  EXPECT_EQ(seen_.paths.back(), "/api/v1/pods?status.phase!=Succeeded,status.phase!=Failed");
}

TEST_F(HttpKubeApiTest, WatchDeliversEventsAcrossChunksAndMapsErrorEventsTo410) {
  std::vector<std::pair<WatchEventType, std::string>> events;
  const Status st = api_->WatchNodes("42", [&](const WatchEvent<KubeNode>& e) {
    events.emplace_back(e.type, e.type == WatchEventType::kBookmark ? e.object.resource_version
                                                                    : e.object.name);
    return true;
  });
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition) << st.ToString();
  EXPECT_NE(st.message().find("too old resource version"), std::string::npos);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0], std::make_pair(WatchEventType::kAdded, std::string("n3")));
  EXPECT_EQ(events[1], std::make_pair(WatchEventType::kBookmark, std::string("77")));
  EXPECT_EQ(events[2], std::make_pair(WatchEventType::kDeleted, std::string("n1")));
  const Status gone = api_->WatchNodes("expired", [](const WatchEvent<KubeNode>&) { return true; });
  EXPECT_EQ(gone.code(), StatusCode::kFailedPrecondition) << gone.ToString();
}

TEST_F(HttpKubeApiTest, BindSendsTheStrategicMergePatchAndTheBindingOfTheFixtures) {
  auto pod = api_->GetPod("inference", "bert");
  ASSERT_TRUE(pod.ok());
  EXPECT_EQ(pod->ask.shared_mib, 8192);
  EXPECT_EQ(api_->GetPod("inference", "gone").status().code(), StatusCode::kNotFound);
  const json patch = json::parse(testing::ReadFixture("apiserver-pod-annotation-patch.gpumem.json"));
  ASSERT_TRUE(api_->PatchPodAnnotations("inference", "bert",
                                        patch["metadata"]["annotations"].get<std::map<std::string, std::string>>())
                  .ok());
  const json binding = json::parse(testing::ReadFixture("apiserver-binding.gpumem.json"));
  ASSERT_TRUE(api_->PostBinding("inference", "bert-infer-6c8d7f9b4-q9w7z",
                                "2c4e6a8b-1d3f-4a5c-9e7b-0d2f4a6c8e0a", "share-v100-node-01")
                  .ok());
  std::lock_guard lock(seen_.mu);
  EXPECT_EQ(json::parse(seen_.patch_body), patch);
  EXPECT_EQ(seen_.patch_type, "application/strategic-merge-patch+json");
  EXPECT_EQ(json::parse(seen_.binding_body), binding);
}

TEST(HttpKubeApiCreate, BadUrlsAndTokenFilesAreNamed) {
  FakeClock clock;
  KubeApiOptions o;
  o.url = "127.0.0.1:6443";
  EXPECT_EQ(HttpKubeApi::Create(o, clock).status().message(),
            "--kube-api: \"127.0.0.1:6443\" must start with http:// or https://");
  o.url = "http://127.0.0.1:1";
  o.token_file = "/nonexistent/token";
  EXPECT_EQ(HttpKubeApi::Create(o, clock).status().message(),
            "--token-file: cannot read a token from \"/nonexistent/token\"");
  o.token_file.clear();
  auto api = HttpKubeApi::Create(o, clock);
  ASSERT_TRUE(api.ok());
  EXPECT_EQ((*api)->ListNodes().status().code(), StatusCode::kUnavailable);  // nothing listens
}

}  // namespace
}  // namespace gpusched::extender
