#include "base/host_port.h"

#include <gtest/gtest.h>

namespace gpusched {
namespace {

TEST(ParseHostPort, HostNameAndIpv4) {
  auto a = ParseHostPort("127.0.0.1:7070", "listen");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->host, "127.0.0.1");
  EXPECT_EQ(a->port, 7070);
  auto b = ParseHostPort("etcd-0.local:0", "listen");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->host, "etcd-0.local");
  EXPECT_EQ(b->port, 0);
  EXPECT_EQ(ParseHostPort("h:65535", "listen")->port, 65535);
}

TEST(ParseHostPort, Ipv6InBracketsLosesTheBrackets) {
  auto a = ParseHostPort("[::1]:80", "listen");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->host, "::1");
  EXPECT_EQ(a->port, 80);
  EXPECT_EQ(ParseHostPort("[fe80::1%eth0]:9", "listen")->host, "fe80::1%eth0");
}

TEST(ParseHostPort, EmptyHostOnlyWhenAllowed) {
  EXPECT_FALSE(ParseHostPort(":8080", "listen").ok());
  auto a = ParseHostPort(":8080", "listen", /*allow_empty_host=*/true);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->host, "");
  EXPECT_EQ(a->port, 8080);
}

TEST(ParseHostPort, ErrorsNameTheFieldAndTheValue) {
  struct Case {
    const char* text;
    const char* message;
  };
  const Case cases[] = {
      {"localhost", "http: \"localhost\" has no port"},
      {"localhost:", "http: \"localhost:\" has no port"},
      {"[::1]", "http: \"[::1]\" has no port"},
      {"[::1]:", "http: \"[::1]:\" has no port"},
      {"[::1", "http: \"[::1\" has no closing ]"},
      {"[::1]x:80", "http: \"[::1]x:80\" has text between ] and :"},
      {"::1:80", "http: \"::1:80\" has an IPv6 host without brackets"},
      {"h:65536", "http: \"h:65536\" has port 65536, out of range 0..65535"},
      {"h:123456", "http: \"h:123456\" has port \"123456\", not a number from 0 to 65535"},
      {"h:http", "http: \"h:http\" has port \"http\", not a number from 0 to 65535"},
      {"h:-1", "http: \"h:-1\" has port \"-1\", not a number from 0 to 65535"},
      {"h: 80", "http: \"h: 80\" has port \" 80\", not a number from 0 to 65535"},
      {":80", "http: \":80\" has no host"},
      {"", "http: \"\" has no port"},
  };
  for (const Case& c : cases) {
    auto r = ParseHostPort(c.text, "http");
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_TRUE(r.status().message().starts_with(c.message)) << r.status().message();
  }
}

TEST(FormatHostPort, BracketsIpv6AndRoundTrips) {
  EXPECT_EQ(FormatHostPort("10.0.0.1", 7070), "10.0.0.1:7070");
  EXPECT_EQ(FormatHostPort("::1", 80), "[::1]:80");
  EXPECT_EQ(FormatHostPort("fd00::1", "443"), "[fd00::1]:443");
  for (const char* text : {"[::1]:80", "a.b:1", "[2001:db8::2]:65535"}) {
    auto hp = ParseHostPort(text, "x");
    ASSERT_TRUE(hp.ok());
    EXPECT_EQ(FormatHostPort(hp->host, hp->port), text);
  }
}

}  // namespace
}  // namespace gpusched
