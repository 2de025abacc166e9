#include "server/http_door.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <stdexcept>
#include <thread>

namespace gpusched::server {
namespace {

TEST(HostAllowListTest, Issue36_AnswersToItsNamesAndAddressesOnItsPortOnly) {
  const HostAllowList hosts({"gpu-master.example"}, 8080);
  for (const char* ok : {"127.0.0.1:8080", "localhost:8080", "LOCALHOST:8080", "[::1]:8080",
                         "10.1.2.3:8080", "gpu-master.example:8080", "gpu-master.example",
                         "127.0.0.1", ""}) {
    EXPECT_TRUE(hosts.CheckHost(ok).ok()) << ok;
  }
  for (const char* bad : {"attacker.example:8080", "attacker.example", "127.0.0.1:8081",
                          "localhost.attacker.example:8080", "[::1]:1", "a b"}) {
    Status s = hosts.CheckHost(bad);
    EXPECT_EQ(s.code(), StatusCode::kPermissionDenied) << bad;
    EXPECT_NE(s.message().find(std::string("\"") + bad + "\""), std::string::npos) << s.message();
  }
}

TEST(HostAllowListTest, Issue36_AnOriginIsItsOwnPagesOrAbsent) {
  const HostAllowList hosts({}, 8080);
  EXPECT_TRUE(hosts.CheckOrigin("").ok());
  EXPECT_TRUE(hosts.CheckOrigin("http://127.0.0.1:8080").ok());
  EXPECT_TRUE(hosts.CheckOrigin("https://localhost:8080").ok());
  for (const char* bad : {"http://attacker.example:8080", "null", "http://127.0.0.1:9999",
                          "http://localhost:8080/x", "file://"}) {
    EXPECT_EQ(hosts.CheckOrigin(bad).code(), StatusCode::kPermissionDenied) << bad;
  }
}

// Issue 41: httplib's own answers (no route, a handler that threw, a malformed request) carry
// the API's JSON error like every other refusal; an answer with a body keeps it.
TEST(HttpErrorsTest, Issue41_HttplibsOwnRefusalsHaveAJsonBody) {
  GuardedHttpServer http(HttpDoorLimits{});
  AnswerErrorsAsJson(http);
  http.Get("/throws", [](const httplib::Request&, httplib::Response&) {
    throw std::runtime_error("boom");
  });
  http.Get("/teapot", [](const httplib::Request&, httplib::Response& res) {
    res.status = 418;
    res.set_content("short and stout\n", "text/plain");
  });
  const int port = http.bind_to_any_port("127.0.0.1");
  ASSERT_GT(port, 0);
  std::thread serving([&] { http.listen_after_bind(); });
  httplib::Client client("127.0.0.1", port);
  auto error_of = [](const httplib::Result& r) {
    EXPECT_TRUE(r) << "no answer";
    if (!r) return nlohmann::json();
    EXPECT_EQ(r->get_header_value("Content-Type"), "application/json") << r->body;
    return nlohmann::json::parse(r->body, nullptr, false)["error"];
  };
  nlohmann::json e = error_of(client.Post("/nowhere", "", "application/json"));
  EXPECT_EQ(e["status"], 404);
  EXPECT_EQ(e["code"], "not_found");
  EXPECT_EQ(e["message"], "path: no POST /nowhere here");
  EXPECT_EQ(e["field"], "path");
  e = error_of(client.Get("/throws"));
  EXPECT_EQ(e["status"], 500);
  EXPECT_EQ(e["message"], "internal error: boom");
  auto teapot = client.Get("/teapot");
  ASSERT_TRUE(teapot);
  EXPECT_EQ(teapot->status, 418);
  EXPECT_EQ(teapot->body, "short and stout\n");
  http.stop();
  serving.join();
}

}  // namespace
}  // namespace gpusched::server
