// ClusterMembership (issue 39; issue 40: split out of Agent::Impl): the change of cluster
// driven with a fake agent (executor, cluster files, pause, logger) and a fake clock.

#include "agent/cluster_membership.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>

namespace gpusched::agent {
namespace {

const std::string kOld(32, 'a');
const std::string kNew(32, 'b');

std::string Key(const TaskKey& k) {
  return std::to_string(k.first) + "/" + std::to_string(k.second);
}

// The agent as the membership sees it. Every call is kept in `events`, in order. A task
// exits only when the test says so (`on_pause`: what happens while the membership waits).
class FakeAgent final : public ClusterMembership::Host {
 public:
  explicit FakeAgent(FakeClock& clock) : clock_(clock) {}

  std::vector<TaskKey> Running() override { return running; }
  void Kill(const TaskKey& task, DurationMs grace_ms, const std::string&) override {
    events.push_back("kill " + Key(task) + " grace " + std::to_string(grace_ms));
  }
  void Acknowledge(const TaskKey& task) override { events.push_back("ack " + Key(task)); }
  Status Record(const std::string& id) override {
    events.push_back("record " + id);
    if (!record_status.ok()) return record_status;
    file_id = id;
    return Status::Ok();
  }
  StatusOr<int> ArchiveTaskFiles(const std::string& old_id) override {
    events.push_back("archive " + old_id);
    if (!archive_status.ok()) return archive_status;
    return 4;
  }
  bool Pause(DurationMs ms) override {
    ++pauses;
    clock_.AdvanceMs(ms);
    if (on_pause) on_pause();
    return stopping;
  }
  bool Stopping() override { return stopping; }
  void Log(const std::string& line, logging::Level level, std::optional<uint64_t>) override {
    lines.push_back(line);
    if (level >= logging::Level::kWarn) warnings.push_back(line);
  }
  bool Logged(const std::string& part) const {
    return std::any_of(lines.begin(), lines.end(),
                       [&](const std::string& l) { return l.find(part) != std::string::npos; });
  }

  std::vector<TaskKey> running;  // sorted, as the executor's
  std::string file_id;           // what DATA_DIR/cluster_id holds
  Status record_status = Status::Ok();
  Status archive_status = Status::Ok();
  bool stopping = false;
  std::function<void()> on_pause;
  int pauses = 0;
  std::vector<std::string> events, lines, warnings;

 private:
  FakeClock& clock_;
};

struct Fixture {
  explicit Fixture(std::string recorded) {
    agent.file_id = recorded;
    membership = std::make_unique<ClusterMembership>(agent, clock, std::move(recorded),
                                                     "/data/clusters");
  }
  FakeClock clock{1'000};
  FakeAgent agent{clock};
  std::unique_ptr<ClusterMembership> membership;
};

// A new cluster id makes what runs here the old cluster's: left out of heartbeats, its start
// and exits never reported. Joining stops those tasks, waits for them, moves the files aside,
// acknowledges the old exits and only then records the new id.
TEST(ClusterMembershipTest, Issue40_NewClusterIdMarksRunningTasksOld) {
  Fixture f(kOld);
  f.agent.running = {{1, 1}, {2, 3}};
  ASSERT_EQ(f.membership->Note(kNew), ClusterMembership::Change::kLeave);
  f.membership->MarkOld({{1, 1}, {2, 3}, {7, 1}}, {{5, 2}});  // 7/1: being launched
  EXPECT_TRUE(f.membership->IsOld({1, 1}));
  EXPECT_TRUE(f.membership->IsOld({7, 1}));
  EXPECT_FALSE(f.membership->IsOld({1, 2}));
  std::vector<TaskKey> heartbeat = {{1, 1}, {2, 3}, {8, 1}};
  f.membership->RemoveOld(&heartbeat);
  EXPECT_EQ(heartbeat, (std::vector<TaskKey>{{8, 1}}));
  EXPECT_EQ(f.membership->id(), kOld);  // still: nothing moved yet

  f.agent.on_pause = [&] {  // both end in their grace: their exits come to the membership
    f.agent.running.clear();
    EXPECT_TRUE(f.membership->DropOldExit({1, 1, 143, "stopped"}));
    EXPECT_TRUE(f.membership->DropOldExit({2, 3, 0, ""}));
  };
  f.membership->Join(kNew, 2'000);
  EXPECT_EQ(f.agent.events,
            (std::vector<std::string>{"kill 1/1 grace 2000", "kill 2/3 grace 2000", "ack 1/1",
                                      "ack 2/3", "archive " + kOld, "ack 5/2",
                                      "record " + kNew}));
  EXPECT_EQ(f.membership->id(), kNew);
  EXPECT_EQ(f.agent.file_id, kNew);
  EXPECT_TRUE(f.agent.Logged("moved 4 task files of cluster " + kOld + " to /data/clusters/" +
                             kOld));
  EXPECT_FALSE(f.membership->IsOld({1, 1}));
  EXPECT_EQ(f.membership->Note(kNew), ClusterMembership::Change::kNone);
}

// The old cluster's exits are acknowledged here, once, and not reported; a launch of the old
// cluster's that failed is forgotten once; any other task's exit is the agent's to report.
TEST(ClusterMembershipTest, Issue40_OldExitsAcknowledgedNotReported) {
  Fixture f(kOld);
  ASSERT_EQ(f.membership->Note(kNew), ClusterMembership::Change::kLeave);
  f.membership->MarkOld({{3, 1}, {4, 1}}, {});
  EXPECT_TRUE(f.membership->DropOldExit({3, 1, 1, ""}));
  EXPECT_EQ(f.agent.events, (std::vector<std::string>{"ack 3/1"}));
  EXPECT_TRUE(f.agent.Logged("task 3 attempt 1 of the previous cluster ended (exit 1); "
                             "not reported"));
  EXPECT_FALSE(f.membership->DropOldExit({3, 1, 1, ""}));  // once
  EXPECT_FALSE(f.membership->DropOldExit({9, 1, 0, ""}));  // the new cluster's
  EXPECT_TRUE(f.membership->ForgetOld({4, 1}));            // its failed launch: dropped
  EXPECT_FALSE(f.membership->ForgetOld({4, 1}));
  EXPECT_EQ(f.agent.events, (std::vector<std::string>{"ack 3/1"}));
}

// An agent stopped while the old cluster's tasks still run moves and records nothing: the
// old id stays, so the next agent on this data dir does the change again.
TEST(ClusterMembershipTest, Issue40_AgentStopKeepsOldId) {
  Fixture f(kOld);
  f.agent.running = {{1, 1}};
  ASSERT_EQ(f.membership->Note(kNew), ClusterMembership::Change::kLeave);
  f.agent.on_pause = [&] { f.agent.stopping = f.agent.pauses >= 3; };
  f.membership->Join(kNew, 1'000);
  EXPECT_EQ(f.agent.events, (std::vector<std::string>{"kill 1/1 grace 1000"}));
  EXPECT_EQ(f.membership->id(), kOld);
  EXPECT_EQ(f.agent.file_id, kOld);
  Fixture next(f.agent.file_id);  // the next start
  EXPECT_EQ(next.membership->Note(kNew), ClusterMembership::Change::kLeave);
}

// A record that fails keeps the old id on disk (the next agent moves the files aside once
// more); this agent goes on as the new cluster's.
TEST(ClusterMembershipTest, Issue40_FailedRecordKeepsOldIdOnDisk) {
  Fixture f(kOld);
  f.agent.record_status = Unavailable("disk full");
  ASSERT_EQ(f.membership->Note(kNew), ClusterMembership::Change::kLeave);
  f.membership->Join(kNew, 1'000);
  EXPECT_EQ(f.agent.events, (std::vector<std::string>{"archive " + kOld, "record " + kNew}));
  EXPECT_EQ(f.agent.file_id, kOld);
  EXPECT_EQ(f.membership->id(), kNew);
  EXPECT_TRUE(f.agent.Logged("cannot record the cluster id: disk full"));
  Fixture next(f.agent.file_id);
  EXPECT_EQ(next.membership->Note(kNew), ClusterMembership::Change::kLeave);
}

// Tasks that outlive their stop (the kill grace and 5 s more, on the clock) do not hold the
// change up: the files move, and the exits are acknowledged when they come. A move that fails
// is logged and the new id recorded all the same (the new cluster's tasks must run).
TEST(ClusterMembershipTest, Issue40_StuckTasksAndFailedMoveDoNotHoldTheChange) {
  Fixture f(kOld);
  f.agent.running = {{6, 1}};
  f.agent.archive_status = PermissionDenied("logs/x");
  ASSERT_EQ(f.membership->Note(kNew), ClusterMembership::Change::kLeave);
  const TimeMs start = f.clock.MonoMs();
  f.membership->Join(kNew, 1'000);
  EXPECT_GE(f.clock.MonoMs() - start, 6'000);
  EXPECT_LT(f.clock.MonoMs() - start, 6'100);
  EXPECT_TRUE(f.agent.Logged("still run after their stop"));
  EXPECT_TRUE(f.agent.Logged("cannot move the task files of cluster " + kOld + " aside"));
  EXPECT_EQ(f.agent.file_id, kNew);
  EXPECT_TRUE(f.membership->DropOldExit({6, 1, 137, ""}));
  EXPECT_EQ(f.agent.events.back(), "ack 6/1");
}

// The recorded id changes nothing; nor do an empty id (an older server) or one that is not
// an id (logged). A first id is joined without stopping or moving anything.
TEST(ClusterMembershipTest, Issue40_SameIdChangesNothing) {
  Fixture f(kOld);
  f.agent.running = {{1, 1}};
  EXPECT_EQ(f.membership->Note(kOld), ClusterMembership::Change::kNone);
  EXPECT_EQ(f.membership->Note(""), ClusterMembership::Change::kNone);
  EXPECT_EQ(f.membership->Note("../x"), ClusterMembership::Change::kNone);
  EXPECT_EQ(f.agent.warnings.size(), 1u);
  EXPECT_FALSE(f.membership->IsOld({1, 1}));
  f.membership->Join(kOld, 1'000);  // a change queued twice: the second is a no-op
  EXPECT_EQ(f.agent.events, (std::vector<std::string>{"record " + kOld}));
  EXPECT_FALSE(f.agent.Logged("belong to cluster"));

  Fixture first("");
  first.agent.running = {{1, 1}};
  ASSERT_EQ(first.membership->Note(kNew), ClusterMembership::Change::kJoin);
  EXPECT_EQ(first.membership->Note(kNew), ClusterMembership::Change::kJoin);  // pending
  first.membership->Join(kNew, 1'000);
  EXPECT_EQ(first.agent.events, (std::vector<std::string>{"record " + kNew}));
  EXPECT_EQ(first.membership->id(), kNew);
  EXPECT_TRUE(first.agent.Logged("the task files of this node belong to cluster " + kNew));
  EXPECT_EQ(first.membership->Note(kNew), ClusterMembership::Change::kNone);
}

}  // namespace
}  // namespace gpusched::agent
