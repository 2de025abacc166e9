#include "rpc/grpc_log.h"

#include <arpa/inet.h>
#include <grpc/grpc.h>
#include <grpc/support/log.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <string>

#include "gpusched/v1/gpusched.grpc.pb.h"

namespace gpusched::rpc {
namespace {

// What gRPC 1.51 logs when the port of a server is taken (one line; attributes as it writes
// them, times and fd included).
constexpr const char* kPortInUse =
    "UNKNOWN:No address added out of total 1 resolved for '127.0.0.1:26070' "
    "{file:\"./src/core/ext/transport/chttp2/server/chttp2_server.cc\", file_line:960, "
    "created_time:\"2026-12-04T03:16:42.766780427+00:00\", children:[UNKNOWN:Unable to "
    "configure socket {file:\"./src/core/lib/iomgr/tcp_server_utils_posix_common.cc\", "
    "file_line:219, created_time:\"2026-12-04T03:16:42.76675782+00:00\", fd:9, "
    "children:[UNKNOWN:Address already in use "
    "{file:\"./src/core/lib/iomgr/tcp_server_utils_posix_common.cc\", file_line:193, "
    "created_time:\"2026-12-04T03:16:42.766741624+00:00\", errno:98, os_error:\"Address "
    "already in use\", syscall:\"bind\"}]}]}";

// As a gpusched binary runs: gRPC initialised (its log verbosity read, ERROR by default), the
// sink installed.
class GrpcLogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc_init();
    InstallGrpcLogSink();
  }
  void TearDown() override { grpc_shutdown(); }
};

TEST_F(GrpcLogTest, AStatusTreeBecomesItsTextsOutermostFirst) {
  EXPECT_EQ(SummarizeGrpcMessage(kPortInUse),
            "No address added out of total 1 resolved for '127.0.0.1:26070': Unable to "
            "configure socket: Address already in use");
}

TEST_F(GrpcLogTest, SiblingsAreKeptInOrderAndRepeatedTextsOnce) {
  EXPECT_EQ(SummarizeGrpcMessage("UNAVAILABLE:connect failed {file_line:1, children:["
                                 "UNKNOWN:first {errno:1}, UNKNOWN:second {errno:2}, "
                                 "UNKNOWN:first {errno:3}]}"),
            "connect failed: first: second");
}

TEST_F(GrpcLogTest, QuotedValuesMayHoldBracesCommasAndEscapedQuotes) {
  EXPECT_EQ(SummarizeGrpcMessage(
                "UNKNOWN:outer {target:\"a, b} ]\\\" {c:d}\", children:[UNKNOWN:inner {x:1}]}"),
            "outer: inner");
}

TEST_F(GrpcLogTest, APlainMessageIsItsFirstLineTrimmed) {
  EXPECT_EQ(SummarizeGrpcMessage("  Handshake failed with fatal error SSL_ERROR_SSL  \nmore"),
            "Handshake failed with fatal error SSL_ERROR_SSL");
  // Only a status code name is taken for a prefix: the rest of a message stays as it is.
  EXPECT_EQ(SummarizeGrpcMessage("WARNING: something"), "WARNING: something");
  EXPECT_EQ(SummarizeGrpcMessage(""), "");
}

TEST_F(GrpcLogTest, AMalformedTreeFallsBackToItsFirstLine) {
  const std::string unclosed = "UNKNOWN:outer {file_line:1, children:[UNKNOWN:inner {x:1}";
  EXPECT_EQ(SummarizeGrpcMessage(unclosed), unclosed);
  const std::string bad_quote = "UNKNOWN:outer {file:\"never closed}";
  EXPECT_EQ(SummarizeGrpcMessage(bad_quote), bad_quote);
}

TEST_F(GrpcLogTest, NestingPast16LevelsAndLongTextsAreBounded) {
  std::string deep = "UNKNOWN:0";
  std::string tail;
  for (int i = 1; i <= 20; ++i) {
    deep += " {children:[UNKNOWN:" + std::to_string(i);
    tail += "]}";
  }
  deep += tail;
  ASSERT_LT(deep.size(), 512u);
  EXPECT_EQ(SummarizeGrpcMessage(deep), deep);  // not read as a tree: the line as it is
  const std::string huge(5000, 'x');
  EXPECT_EQ(SummarizeGrpcMessage(huge).size(), 512u);
  // A cut never splits a UTF-8 sequence.
  std::string accents;
  for (int i = 0; i < 400; ++i) accents += "\xc3\xa9";  // é
  const std::string cut = SummarizeGrpcMessage(accents);
  EXPECT_LE(cut.size(), 512u);
  EXPECT_EQ((cut.size() - 3) % 2, 0u) << cut.size();
}

// A socket bound and listening on a loopback port chosen by the kernel, without SO_REUSEPORT.
class TakenPort {
 public:
  TakenPort() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(::listen(fd_, 1), 0);
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
  }
  ~TakenPort() { ::close(fd_); }
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

// A server with one service (every method unimplemented): gRPC refuses to build one without.
std::unique_ptr<grpc::Server> ServeOn(const std::string& address, int* port) {
  static v1::Scheduler::Service service;
  grpc::ServerBuilder builder;
  builder.RegisterService(&service);
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), port);
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  return builder.BuildAndStart();
}

TEST_F(GrpcLogTest, ABindFailureIsCapturedWithItsCauseAndNothingReachesStderr) {
  TakenPort taken;
  testing::internal::CaptureStderr();
  std::vector<std::string> lines;
  std::string reason;
  {
    GrpcLogCapture capture;
    int port = -1;
    auto server = ServeOn("127.0.0.1:" + std::to_string(taken.port()), &port);
    EXPECT_EQ(server, nullptr);
    lines = capture.lines();
    reason = ListenFailureReason(capture);
  }
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
  ASSERT_FALSE(lines.empty());
  EXPECT_NE(lines.back().find("Address already in use"), std::string::npos) << lines.back();
  EXPECT_EQ(lines.back().find("{file:"), std::string::npos) << lines.back();
  EXPECT_EQ(reason, "address already in use");
}

TEST_F(GrpcLogTest, AnAddressNotOnThisMachineIsNamedAsSuch) {
  GrpcLogCapture capture;
  int port = -1;
  // TEST-NET-1 (RFC 5737): on no interface here; binding it sends nothing.
  auto server = ServeOn("192.0.2.1:0", &port);
  EXPECT_EQ(server, nullptr);
  EXPECT_EQ(ListenFailureReason(capture), "cannot assign requested address");
}

TEST_F(GrpcLogTest, WithoutACaptureALineIsWrittenInOurFormat) {
  // Another port each run: a line the sink wrote in the last minute would be counted instead.
  static int run = 0;
  const std::string port = std::to_string(26070 + ++run);
  std::string message = kPortInUse;
  message.replace(message.find("26070"), 5, port);
  testing::internal::CaptureStderr();
  gpr_log(GPR_ERROR, "%s", message.c_str());
  const std::string err = testing::internal::GetCapturedStderr();
  // The daemons' logger's line (base/log.h): time, level, component, then the summary.
  EXPECT_NE(err.find(" ERROR grpc gRPC: No address added out of total 1 resolved for "
                     "'127.0.0.1:" + port + "': Unable to configure socket: Address "
                     "already in use (error at grpc_log_test.cc:"),
            std::string::npos)
      << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
}

TEST_F(GrpcLogTest, CapturesNestAndReplayWritesWhatWasKept) {
  testing::internal::CaptureStderr();
  {
    GrpcLogCapture outer;
    {
      GrpcLogCapture inner;
      gpr_log(GPR_ERROR, "inner one");
      EXPECT_EQ(inner.lines(), std::vector<std::string>{"inner one"});
    }
    gpr_log(GPR_ERROR, "outer one");
    EXPECT_EQ(outer.lines(), std::vector<std::string>{"outer one"});
    outer.Replay();
    EXPECT_TRUE(outer.lines().empty());
  }
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(err.find("inner one"), std::string::npos) << err;
  EXPECT_NE(err.find(" ERROR grpc gRPC: outer one (error at grpc_log_test.cc:"), std::string::npos)
      << err;
}

TEST_F(GrpcLogTest, TheSameLineTwiceInAMinuteIsWrittenOnce) {
  // The sink's repeat counting is the process's: lines of their own each time this runs.
  static int run = 0;
  const int first = 2 * ++run, second = first + 1;
  testing::internal::CaptureStderr();
  for (int test : {first, first, second}) {  // one place in the code, as gRPC's handshake
    gpr_log(GPR_ERROR, "Handshake failed with fatal error SSL_ERROR_SSL (test %d)", test);
  }
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 2) << err;
  EXPECT_NE(err.find("(test " + std::to_string(second) + ")"), std::string::npos) << err;
}

TEST_F(GrpcLogTest, NothingCapturedGivesTheUsualReason) {
  GrpcLogCapture capture;
  EXPECT_EQ(ListenFailureReason(capture), "address already in use");
}

}  // namespace
}  // namespace gpusched::rpc
