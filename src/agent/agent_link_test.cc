// The agent against a fake server (an in-process AgentLink service the test scripts): the
// reconciliation it sends on (re)connect, and how it treats repeated assignments, kills of
// tasks it does not run, and acknowledgements.

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <vector>

#include "agent/agent.h"
#include "agent/runner_test_support.h"
#include "agent/testing/fake_link_server.h"
#include "gpusched/v1/gpusched.grpc.pb.h"

namespace gpusched::agent {
namespace {

namespace v1 = ::gpusched::v1;
using namespace testing;  // the executor tests' support

auto IsRegister() {
  return [](const v1::AgentMessage& m) { return m.has_register_(); };
}
auto IsStatus(uint64_t id, v1::TaskStatus::Kind kind) {
  return [id, kind](const v1::AgentMessage& m) {
    return m.has_status() && m.status().id() == id && m.status().kind() == kind;
  };
}

class AgentLinkTest : public testing::ExecutorTest {
 protected:
  void SetUp() override {
    ExecutorTest::SetUp();
    server_ = Serve(fake_, address_);
    ASSERT_TRUE(server_);
  }
  void TearDown() override {
    agent_.reset();
    server_->Shutdown();
    ExecutorTest::TearDown();
  }
  AgentConfig Config(ExecutorKind executor = ExecutorKind::kProcess) const {
    AgentConfig c;
    c.server = address_;
    c.name = "n1";
    c.gpus = "2x16GiB";
    c.simulate = true;
    c.data_dir = path("data");
    c.quiet = true;
    c.executor = executor;
    c.shim_path = GPUSCHED_SHIM;
    c.wrap_executor = wrap_;
    return c;
  }
  // Starts an agent, waits for its Register and answers it.
  v1::RegisterNode StartAgent(ExecutorKind executor = ExecutorKind::kProcess) {
    fake_.Forget();
    auto a = Agent::Start(Config(executor));
    EXPECT_TRUE(a.ok()) << a.status().ToString();
    if (!a.ok()) return {};
    agent_ = std::move(a).value();
    auto reg = fake_.WaitFor(IsRegister());
    EXPECT_TRUE(reg);
    v1::ServerMessage r;
    r.mutable_registered()->set_node_heartbeat_ms(50);
    r.mutable_registered()->set_task_heartbeat_ms(50);
    r.mutable_registered()->set_kill_grace_ms(200);
    EXPECT_TRUE(fake_.Send(r));
    return reg ? reg->register_() : v1::RegisterNode{};
  }
  void Assign(uint64_t id, const std::vector<std::string>& command,
              std::optional<int64_t> duration_ms = std::nullopt) {
    v1::ServerMessage m;
    v1::Assign* a = m.mutable_assign();
    a->set_id(id);
    a->set_attempt(1);
    a->add_gpus(0);
    a->add_gpu_mem_mib(1024);
    for (const std::string& c : command) a->add_command(c);
    if (duration_ms) a->set_duration_ms(*duration_ms);
    ASSERT_TRUE(fake_.Send(m));
  }
  std::vector<std::string> GatedCommand(const std::string& gate, const std::string& then) {
    return {"sh", "-c",
            "echo ready; while [ ! -e " + path(gate) + " ]; do sleep 0.02; done; " + then};
  }
  std::string LogOf(uint64_t id) const {
    return path("data/logs/task-" + std::to_string(id) + "-1.log");
  }
  std::string JournalOf(uint64_t id, const char* suffix) const {
    return path("data/journal/" + std::to_string(id) + ".1" + suffix);
  }

  FakeServer fake_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
  std::unique_ptr<Agent> agent_;
  std::function<std::unique_ptr<TaskExecutor>(std::unique_ptr<TaskExecutor>)> wrap_;
};

// A launch that waits for the test (a slow spawn, a slow account lookup): every call to
// Launch blocks until Open; the rest goes to the agent's own executor.
class BlockingLaunch final : public TaskExecutor {
 public:
  struct Gate {
    std::mutex mu;
    std::condition_variable cv;
    bool entered = false;
    bool open = false;
    void Open() {
      std::lock_guard<std::mutex> lock(mu);
      open = true;
      cv.notify_all();
    }
    bool Entered() {
      std::lock_guard<std::mutex> lock(mu);
      return entered;
    }
  };
  BlockingLaunch(std::unique_ptr<TaskExecutor> inner, std::shared_ptr<Gate> gate)
      : inner_(std::move(inner)), gate_(std::move(gate)) {}
  Status Launch(const LaunchSpec& spec) override {
    {
      std::unique_lock<std::mutex> lock(gate_->mu);
      gate_->entered = true;
      gate_->cv.wait(lock, [&] { return gate_->open; });
    }
    return inner_->Launch(spec);
  }
  void Kill(uint64_t id, int64_t attempt, DurationMs grace_ms,
            const std::string& reason) override {
    inner_->Kill(id, attempt, grace_ms, reason);
  }
  std::vector<TaskKey> Running() const override { return inner_->Running(); }
  void Acknowledge(uint64_t id, int64_t attempt) override { inner_->Acknowledge(id, attempt); }
  void Stop(ShutdownMode mode) override { inner_->Stop(mode); }

 private:
  std::unique_ptr<TaskExecutor> inner_;
  std::shared_ptr<Gate> gate_;
};

TEST_F(AgentLinkTest, RestartedAgentRegistersItsRunningTasksAndUnacknowledgedExits) {
  StartAgent();
  Assign(1, GatedCommand("gate", "exit 3"));
  Assign(2, {"sh", "-c", "exit 5"});
  ASSERT_TRUE(fake_.WaitFor(IsStatus(1, v1::TaskStatus::STARTED)));
  ASSERT_TRUE(fake_.WaitFor(IsStatus(2, v1::TaskStatus::FINISHED)));
  ASSERT_TRUE(PollUntil([&] { return ReadFile(LogOf(1)).find("ready") != std::string::npos; }));
  agent_->Shutdown(ShutdownMode::kLeaveTasks);  // no ack came for task 2
  agent_.reset();

  const v1::RegisterNode reg = StartAgent();
  ASSERT_EQ(reg.running_size(), 1);
  EXPECT_EQ(reg.running(0).id(), 1u);
  EXPECT_EQ(reg.running(0).attempt(), 1);
  ASSERT_EQ(reg.finished_size(), 1);
  EXPECT_EQ(reg.finished(0).id(), 2u);
  EXPECT_EQ(reg.finished(0).kind(), v1::TaskStatus::FINISHED);
  EXPECT_EQ(reg.finished(0).exit_code(), 5);
  // Not resent one by one after registering: Register carried it.
  ASSERT_TRUE(fake_.WaitFor([](const v1::AgentMessage& m) {
    return m.has_task_heartbeats() && m.task_heartbeats().tasks_size() == 1;
  }));  // the adopted task gets task heartbeats
  EXPECT_EQ(fake_.Count(IsStatus(2, v1::TaskStatus::FINISHED)), 0u);

  v1::ServerMessage ack;
  ack.mutable_ack()->set_id(2);
  ack.mutable_ack()->set_attempt(1);
  ASSERT_TRUE(fake_.Send(ack));
  EXPECT_TRUE(PollUntil([&] { return !Exists(JournalOf(2, ".exit")); }));

  OpenGate("gate");
  auto fin = fake_.WaitFor(IsStatus(1, v1::TaskStatus::FINISHED));
  ASSERT_TRUE(fin);
  EXPECT_EQ(fin->status().exit_code(), 3);
}

TEST_F(AgentLinkTest, RepeatedAssignOfARunningTaskIsIgnored) {
  StartAgent();
  Assign(1, GatedCommand("gate", "echo ran >> " + path("runs")));
  ASSERT_TRUE(fake_.WaitFor(IsStatus(1, v1::TaskStatus::STARTED)));
  Assign(1, GatedCommand("gate", "echo ran >> " + path("runs")));
  OpenGate("gate");
  ASSERT_TRUE(fake_.WaitFor(IsStatus(1, v1::TaskStatus::FINISHED)));
  EXPECT_EQ(fake_.Count(IsStatus(1, v1::TaskStatus::STARTED)), 1u);
  EXPECT_EQ(ReadFile(path("runs")), "ran\n");
}

TEST_F(AgentLinkTest, AssignOfAnUnacknowledgedExitResendsItInsteadOfRunningAgain) {
  StartAgent();
  Assign(1, {"sh", "-c", "echo ran >> " + path("runs") + "; exit 4"});
  ASSERT_TRUE(fake_.WaitFor(IsStatus(1, v1::TaskStatus::FINISHED)));
  Assign(1, {"sh", "-c", "echo ran >> " + path("runs") + "; exit 4"});
  ASSERT_TRUE(PollUntil([&] { return fake_.Count(IsStatus(1, v1::TaskStatus::FINISHED)) == 2; }));
  EXPECT_EQ(fake_.Count(IsStatus(1, v1::TaskStatus::STARTED)), 1u);
  EXPECT_EQ(ReadFile(path("runs")), "ran\n");
}

TEST_F(AgentLinkTest, KillOfATaskTheAgentDoesNotRunIsIgnored) {
  StartAgent();
  v1::ServerMessage kill;
  kill.mutable_kill()->set_id(42);
  kill.mutable_kill()->set_attempt(1);
  kill.mutable_kill()->set_reason("unknown to the server");
  ASSERT_TRUE(fake_.Send(kill));
  Assign(1, {"true"});
  ASSERT_TRUE(fake_.WaitFor(IsStatus(1, v1::TaskStatus::FINISHED)));
  EXPECT_EQ(fake_.Count([](const v1::AgentMessage& m) {
              return m.has_status() && m.status().id() == 42;
            }),
            0u);
}

TEST_F(AgentLinkTest, ShutdownKillingTasksEndsThem) {
  StartAgent();
  Assign(1, {"sh", "-c", "echo $$; echo ready; exec sleep 600"});
  ASSERT_TRUE(PollUntil([&] { return ReadFile(LogOf(1)).find("ready") != std::string::npos; }));
  const pid_t task = std::stoi(ReadFile(LogOf(1)));
  agent_->Shutdown(ShutdownMode::kKillTasks);
  EXPECT_NE(kill(task, 0), 0);
  // ... and their exit is there for the next agent.
  EXPECT_NE(ReadFile(JournalOf(1, ".exit")).find("exit_code=137"), std::string::npos);
}

TEST_F(AgentLinkTest, NoopExecutorReportsStartedThenFinishedAfterTheDuration) {
  StartAgent(ExecutorKind::kNoop);
  Assign(1, {"never-executed"}, 200);
  ASSERT_TRUE(fake_.WaitFor(IsStatus(1, v1::TaskStatus::STARTED)));
  auto fin = fake_.WaitFor(IsStatus(1, v1::TaskStatus::FINISHED));
  ASSERT_TRUE(fin);
  EXPECT_EQ(fin->status().exit_code(), 0);
  EXPECT_EQ(ReadFile(LogOf(1)), "");  // nothing ran

  Assign(2, {"never-executed"}, 600'000);
  ASSERT_TRUE(fake_.WaitFor(IsStatus(2, v1::TaskStatus::STARTED)));
  ASSERT_TRUE(fake_.WaitFor([](const v1::AgentMessage& m) {
    return m.has_heartbeat() && m.heartbeat().running_size() == 1 &&
           m.heartbeat().running(0).id() == 2;
  }));  // heartbeats list it while it "runs"
  v1::ServerMessage kill;
  kill.mutable_kill()->set_id(2);
  kill.mutable_kill()->set_attempt(1);
  kill.mutable_kill()->set_reason("cancelled by user");
  ASSERT_TRUE(fake_.Send(kill));
  auto killed = fake_.WaitFor(IsStatus(2, v1::TaskStatus::FINISHED));
  ASSERT_TRUE(killed);
  EXPECT_EQ(killed->status().exit_code(), 137);
  EXPECT_EQ(killed->status().reason(), "killed: cancelled by user");
  EXPECT_FALSE(Exists(path("data/journal")));  // nothing journaled
}

// Issue 36: a peak the task wrote itself (its peak file, simulated GPUs) is reported as
// task-written, so the server's memory table does not learn it; a task that says nothing
// reports no peak and no source.
TEST_F(AgentLinkTest, Issue36_APeakTheTaskWroteIsReportedAsTaskWritten) {
  StartAgent();
  Assign(1, {"sh", "-c", "echo 16000 > \"$GPUSCHED_PEAK_MIB_FILE\""});
  auto fin = fake_.WaitFor(IsStatus(1, v1::TaskStatus::FINISHED));
  ASSERT_TRUE(fin);
  EXPECT_EQ(fin->status().exit_code(), 0);
  EXPECT_EQ(fin->status().peak_gpu_mem_mib(), 16000);
  EXPECT_EQ(fin->status().peak_source(), v1::TaskStatus::PEAK_TASK_WRITTEN);
  Assign(2, {"true"});
  fin = fake_.WaitFor(IsStatus(2, v1::TaskStatus::FINISHED));
  ASSERT_TRUE(fin);
  EXPECT_EQ(fin->status().peak_gpu_mem_mib(), 0);
  EXPECT_EQ(fin->status().peak_source(), v1::TaskStatus::PEAK_UNKNOWN);
}

TEST_F(AgentLinkTest, SecondAgentOnTheSameDataDirFailsClearly) {
  StartAgent();
  auto second = Agent::Start(Config());
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find("in use by another agent"), std::string::npos);
}

TEST_F(AgentLinkTest, StreamEndedByTheServerIsReopenedWithRegisterFirstCarryingTheUnackedExit) {
  StartAgent();
  Assign(1, {"sh", "-c", "exit 6"});
  ASSERT_TRUE(fake_.WaitFor(IsStatus(1, v1::TaskStatus::FINISHED)));
  fake_.Forget();
  fake_.Drop();  // no ack came

  auto reg = fake_.WaitFor(IsRegister());
  ASSERT_TRUE(reg);
  EXPECT_EQ(fake_.connects(), 2);
  const std::vector<v1::AgentMessage> firsts = fake_.FirstOfEachStream();
  ASSERT_EQ(firsts.size(), 2u);
  EXPECT_TRUE(firsts[1].has_register_());  // the new stream's first message
  ASSERT_EQ(reg->register_().finished_size(), 1);
  EXPECT_EQ(reg->register_().finished(0).id(), 1u);
  EXPECT_EQ(reg->register_().finished(0).exit_code(), 6);
}

// Messages sent while a write is in flight wait in the agent's outbox: every one of them
// leaves, in the order sent (a task's STARTED before its FINISHED).
TEST_F(AgentLinkTest, MessagesQueuedBehindAWriteLeaveInOrder) {
  StartAgent(ExecutorKind::kNoop);
  constexpr int kTasks = 300;
  for (int id = 1; id <= kTasks; ++id) Assign(id, {"never-executed"}, 0);
  ASSERT_TRUE(PollUntil([&] {
    return fake_.Count([](const v1::AgentMessage& m) {
             return m.has_status() && m.status().kind() == v1::TaskStatus::FINISHED;
           }) == kTasks;
  }));
  std::map<uint64_t, std::vector<v1::TaskStatus::Kind>> seen;
  const std::vector<v1::AgentMessage> received = fake_.Received();
  const std::vector<v1::AgentMessage> firsts = fake_.FirstOfEachStream();
  ASSERT_EQ(firsts.size(), 1u);
  ASSERT_TRUE(firsts[0].has_register_());
  for (const v1::AgentMessage& m : received) {
    if (m.has_status()) seen[m.status().id()].push_back(m.status().kind());
  }
  ASSERT_EQ(seen.size(), static_cast<size_t>(kTasks));
  for (const auto& [id, kinds] : seen) {
    EXPECT_EQ(kinds, (std::vector{v1::TaskStatus::STARTED, v1::TaskStatus::FINISHED}))
        << "task " << id;
  }
}

// A standby answers "not leader; leader is ADDR": the agent follows it there.
TEST_F(AgentLinkTest, StandbyNamingTheLeaderSendsTheAgentThere) {
  FakeServer standby;
  standby.Refuse("not leader; leader is " + address_ + " (test)");
  grpc::ServerBuilder b;
  int port = 0;
  b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  b.RegisterService(&standby);
  std::unique_ptr<grpc::Server> server = b.BuildAndStart();
  ASSERT_TRUE(server && port > 0);

  AgentConfig c = Config();
  c.server = "127.0.0.1:" + std::to_string(port);  // the standby only
  auto a = Agent::Start(c);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  agent_ = std::move(a).value();
  EXPECT_TRUE(fake_.WaitFor(IsRegister()));
  EXPECT_EQ(standby.connects(), 1);
  agent_.reset();
  server->Shutdown();
}

// Issue 40: the link thread ran launches (and the account lookups before them), holding the
// lock every send takes: a launch that took longer than node_timeout stopped the node's
// heartbeats and the server declared the node lost. Now heartbeats go on while a launch
// blocks, and a kill sent meanwhile applies after the launch, in order.
TEST_F(AgentLinkTest, Issue40_HeartbeatsGoOnWhileALaunchBlocks) {
  auto gate = std::make_shared<BlockingLaunch::Gate>();
  struct OpenAtEnd {  // a failed expectation must not leave the agent's launch blocked
    std::shared_ptr<BlockingLaunch::Gate> gate;
    ~OpenAtEnd() { gate->Open(); }
  } open_at_end{gate};
  wrap_ = [gate](std::unique_ptr<TaskExecutor> inner) -> std::unique_ptr<TaskExecutor> {
    return std::make_unique<BlockingLaunch>(std::move(inner), gate);
  };
  StartAgent(ExecutorKind::kNoop);  // node heartbeats every 50 ms
  Assign(1, {"never-executed"}, 600'000);
  EXPECT_TRUE(PollUntil([&] { return gate->Entered(); }));
  fake_.Forget();
  const auto heartbeat = [](const v1::AgentMessage& m) { return m.has_heartbeat(); };
  EXPECT_TRUE(PollUntil([&] { return fake_.Count(heartbeat) >= 5; }, std::chrono::seconds(3)))
      << fake_.Count(heartbeat) << " heartbeats while the launch blocked";
  v1::ServerMessage kill;
  kill.mutable_kill()->set_id(1);
  kill.mutable_kill()->set_attempt(1);
  kill.mutable_kill()->set_reason("cancelled by user");
  EXPECT_TRUE(fake_.Send(kill));
  gate->Open();
  EXPECT_TRUE(fake_.WaitFor(IsStatus(1, v1::TaskStatus::STARTED)));
  auto killed = fake_.WaitFor(IsStatus(1, v1::TaskStatus::FINISHED));
  ASSERT_TRUE(killed);
  EXPECT_EQ(killed->status().reason(), "killed: cancelled by user");
}

TEST(AgentConfigTest, ExecutorKindParses) {
  EXPECT_EQ(*ParseExecutorKind("process"), ExecutorKind::kProcess);
  EXPECT_EQ(*ParseExecutorKind("noop"), ExecutorKind::kNoop);
  auto bad = ParseExecutorKind("docker");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--executor"), std::string::npos);
}

}  // namespace
}  // namespace gpusched::agent
