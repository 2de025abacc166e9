// ServerLink alone (issue 40: the agent's stream to the server, split out of Agent::Impl)
// against the scripted FakeServer: the registration opens every stream, sends keep their
// order, SendWith is ordered against the registration, an unreachable server is said once a
// minute on the injected clock's monotonic time, and Stop ends Run in every state.

#include "agent/server_link.h"

#include <gtest/gtest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "agent/testing/fake_link_server.h"
#include "base/clock.h"

namespace gpusched::agent {
namespace {

using testing::FakeServer;
using testing::PollUntil;
using testing::Serve;

// A link to `servers` whose registrations are numbered (RegisterNode.name "reg-N") and whose
// log lines are kept, running on a thread of its own until the fixture ends.
class ServerLinkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = Serve(fake_, address_);
    ASSERT_TRUE(server_);
  }
  void TearDown() override {
    if (link_) link_->Stop();
    if (thread_.joinable()) thread_.join();
    server_->Shutdown();
    if (closed_fd_ >= 0) close(closed_fd_);
  }
  void StartLink(std::vector<std::string> servers) {
    ServerLink::Hooks hooks;
    hooks.make_register = [this] {
      v1::AgentMessage m;
      m.mutable_register_()->set_name("reg-" + std::to_string(++registrations_));
      return m;
    };
    hooks.on_message = [this](const v1::ServerMessage&) { ++received_; };
    hooks.log = [this](const std::string& line, logging::Level) {
      std::lock_guard<std::mutex> lock(mu_);
      lines_.push_back(line);
    };
    link_ = std::make_unique<ServerLink>(ServerLink::Options{std::move(servers), {}, ""},
                                         std::move(hooks), clock_);
    thread_ = std::thread([this] { link_->Run(); });
  }
  size_t LinesWith(const std::string& text) {
    std::lock_guard<std::mutex> lock(mu_);
    return static_cast<size_t>(std::count_if(lines_.begin(), lines_.end(), [&](const auto& l) {
      return l.find(text) != std::string::npos;
    }));
  }
  // An address nothing listens on: a port this test holds bound without listening, so a
  // connection is refused at once and no other process can take the port meanwhile.
  std::string Unreachable() {
    closed_fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (closed_fd_ < 0 || bind(closed_fd_, reinterpret_cast<sockaddr*>(&a), len) != 0 ||
        getsockname(closed_fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      ADD_FAILURE() << "no local port";
    }
    return "127.0.0.1:" + std::to_string(ntohs(a.sin_port));
  }
  static v1::AgentMessage Numbered(uint64_t id) {
    v1::AgentMessage m;
    m.mutable_status()->set_id(id);
    return m;
  }

  FakeServer fake_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
  FakeClock clock_{1'000'000};
  std::atomic<int> registrations_{0}, received_{0};
  std::mutex mu_;
  std::vector<std::string> lines_;
  std::unique_ptr<ServerLink> link_;
  std::thread thread_;
  int closed_fd_ = -1;
};

TEST_F(ServerLinkTest, Issue40_TheRegistrationOpensEveryStreamAndSendsLeaveInOrder) {
  StartLink({address_});
  ASSERT_TRUE(PollUntil([&] { return fake_.connected(); }));
  constexpr uint64_t kSends = 500;
  for (uint64_t id = 1; id <= kSends; ++id) link_->Send(Numbered(id));
  ASSERT_TRUE(PollUntil([&] { return fake_.Received().size() == kSends + 1; }));
  const std::vector<v1::AgentMessage> got = fake_.Received();
  EXPECT_EQ(got[0].register_().name(), "reg-1");
  for (uint64_t id = 1; id <= kSends; ++id) ASSERT_EQ(got[id].status().id(), id) << id;

  fake_.Drop();  // the server ends the stream: the link opens another, registration first
  ASSERT_TRUE(PollUntil([&] { return fake_.FirstOfEachStream().size() == 2; }));
  EXPECT_EQ(fake_.FirstOfEachStream()[1].register_().name(), "reg-2");
  EXPECT_EQ(LinesWith("link to " + address_ + " lost"), 1u);
  v1::ServerMessage hello;
  hello.mutable_registered();
  ASSERT_TRUE(PollUntil([&] { return fake_.Send(hello); }));
  ASSERT_TRUE(PollUntil([&] { return received_.load() == 1; }));
  EXPECT_EQ(LinesWith("connected to " + address_), 1u);
}

// SendWith decides under the send lock: what it queues while a registration is being built
// is never lost between the two (it either rode in the registration or follows it).
TEST_F(ServerLinkTest, Issue40_SendWithRunsUnderTheSendLockAndNothingIsSentWhileDown) {
  link_ = nullptr;
  std::atomic<bool> in_make{false}, overlap{false};
  ServerLink::Hooks hooks;
  hooks.make_register = [&] {
    in_make = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // a slow registration
    in_make = false;
    v1::AgentMessage m;
    m.mutable_register_()->set_name("reg");
    return m;
  };
  hooks.on_message = [](const v1::ServerMessage&) {};
  hooks.log = [](const std::string&, logging::Level) {};
  ServerLink link(ServerLink::Options{{address_}, {}, ""}, std::move(hooks), clock_);
  link.Send(Numbered(99));  // before Run: no stream, dropped
  std::thread runner([&] { link.Run(); });
  ASSERT_TRUE(PollUntil([&] { return in_make.load(); }));
  link.SendWith([&]() -> std::optional<v1::AgentMessage> {
    if (in_make) overlap = true;  // would mean the registration's lock was not held
    return Numbered(7);
  });
  ASSERT_TRUE(PollUntil([&] { return fake_.Received().size() == 2; }));
  link.Stop();
  runner.join();
  EXPECT_FALSE(overlap);
  const std::vector<v1::AgentMessage> got = fake_.Received();
  EXPECT_EQ(got[0].register_().name(), "reg");
  EXPECT_EQ(got[1].status().id(), 7u);  // 99 was never sent
}

// Retries every second, says so once a minute: the minute is the clock's monotonic time, so
// a wall-clock step changes nothing and the fake clock's minute brings the line back.
TEST_F(ServerLinkTest, Issue40_AnUnreachableServerIsSaidOnceAMinuteOnTheMonotonicClock) {
  const std::string nowhere = Unreachable();
  StartLink({nowhere});  // each attempt builds a registration first
  ASSERT_TRUE(PollUntil([&] { return registrations_.load() >= 3; }));
  EXPECT_EQ(LinesWith("cannot reach " + nowhere), 1u);
  clock_.StepWallMs(3'600'000);  // an hour on the wall clock alone
  const int seen = registrations_.load();
  ASSERT_TRUE(PollUntil([&] { return registrations_.load() >= seen + 2; }));
  EXPECT_EQ(LinesWith("cannot reach " + nowhere), 1u);
  clock_.AdvanceMs(60'000);
  ASSERT_TRUE(PollUntil([&] { return LinesWith("cannot reach " + nowhere) == 2; }));
}

TEST_F(ServerLinkTest, Issue40_StopEndsRunWhileConnectedAndWhileBackingOff) {
  StartLink({address_});
  ASSERT_TRUE(PollUntil([&] { return fake_.connected(); }));
  link_->Stop();
  thread_.join();  // connected: the stream is cancelled
  EXPECT_TRUE(PollUntil([&] { return !fake_.connected(); }));

  StartLink({Unreachable()});
  ASSERT_TRUE(PollUntil([&] { return registrations_.load() >= 3; }));
  link_->Stop();
  thread_.join();  // backing off: the wait ends at once
  link_.reset();
}

}  // namespace
}  // namespace gpusched::agent
