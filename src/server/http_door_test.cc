#include "server/http_door.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace gpusched::server
