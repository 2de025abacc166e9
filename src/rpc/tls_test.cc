#include "rpc/tls.h"

#include <gtest/gtest.h>

namespace gpusched::rpc {
namespace {

TEST(TlsNamesTest, LoopbackHosts) {
  for (const char* h : {"127.0.0.1", "127.9.8.7", "localhost", "::1", "[::1]"}) {
    EXPECT_TRUE(IsLoopbackHost(h)) << h;
  }
  for (const char* h : {"0.0.0.0", "::", "[::]", "", "10.0.0.1", "example.com", "128.0.0.1",
                        "localhost.evil.com", "::ffff:10.0.0.1"}) {
    EXPECT_FALSE(IsLoopbackHost(h)) << h;
  }
}

TEST(TlsNamesTest, HostOfAddress) {
  EXPECT_EQ(HostOf("127.0.0.1:7070"), "127.0.0.1");
  EXPECT_EQ(HostOf("[::1]:7070"), "::1");
  EXPECT_EQ(HostOf("0.0.0.0:0"), "0.0.0.0");
  EXPECT_EQ(HostOf("::1"), "::1");
  EXPECT_EQ(HostOf("host"), "host");
  EXPECT_EQ(HostOf("[::1]"), "::1");
}

TEST(TlsNamesTest, NodeCertNames) {
  EXPECT_TRUE(CheckNodeCertName("n1", "agent").ok());
  EXPECT_TRUE(CheckNodeCertName("gpu-07.rack_2", "agent").ok());
  for (const char* bad : {"", "ca", "server", "gpusched-server", "-x", ".x", "a/b", "a b", "../x"}) {
    Status s = CheckNodeCertName(bad, "--agent");
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("--agent"), std::string::npos) << s.message();
  }
  EXPECT_FALSE(CheckNodeCertName(std::string(64, 'a'), "agent").ok());
}

TEST(TlsNamesTest, ServerHosts) {
  for (const char* ok : {"10.0.0.1", "::1", "fe80::1", "sched.example.com", "*.example.com",
                         "host-1"}) {
    EXPECT_TRUE(CheckServerHost(ok, "--server-host").ok()) << ok;
  }
  for (const char* bad : {"", "a..b", "-a.com", "a_b.com", "a b", "*.", "http://x"}) {
    Status s = CheckServerHost(bad, "--server-host");
    EXPECT_FALSE(s.ok()) << bad;
    EXPECT_NE(s.message().find("--server-host"), std::string::npos);
  }
}

TEST(TlsNamesTest, CertificateMustNameTheNode) {
  EXPECT_TRUE(CertificateNamesNode({"n1"}, "n1"));
  EXPECT_TRUE(CertificateNamesNode({"x", "n1"}, "n1"));
  EXPECT_FALSE(CertificateNamesNode({"n2"}, "n1"));
  EXPECT_FALSE(CertificateNamesNode({"n1x"}, "n1"));
  EXPECT_FALSE(CertificateNamesNode({}, "n1"));
  EXPECT_FALSE(CertificateNamesNode({""}, ""));
}

TEST(TlsFilesTest, MissingFileIsNamed) {
  auto t = LoadServerTls("/nonexistent-gpusched-dir");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("/nonexistent-gpusched-dir/ca.crt"), std::string::npos);
  EXPECT_NE(t.status().message().find("certs init"), std::string::npos);
}

}  // namespace
}  // namespace gpusched::rpc
