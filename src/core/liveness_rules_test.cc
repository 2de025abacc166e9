// LivenessRules (issue 40): the verdicts of CN109992422A claims 5-8 and of time limits, from
// plain nodes and tasks, with no Scheduler around them.

#include "core/liveness_rules.h"

#include <gtest/gtest.h>

namespace gpusched::core {
namespace {

constexpr TimeMs kNow = 1'000'000;

NodeState Node(const std::string& name, TimeMs heard_ms) {
  NodeState n;
  n.name = name;
  n.last_heartbeat_ms = heard_ms;
  return n;
}

Task OnNode(uint64_t id, size_t node_index, const std::string& node, TimeMs heard_ms) {
  Task t;
  t.id = TaskId(id);
  t.placement = Placement{};
  t.placement->node_index = node_index;
  t.placement->node = node;
  t.last_heartbeat_ms = heard_ms;
  return t;
}

std::vector<TaskId> Ids(const std::vector<TaskVerdict>& v) {
  std::vector<TaskId> ids;
  for (const TaskVerdict& x : v) ids.push_back(x.id);
  return ids;
}

class LivenessRulesTest : public ::testing::Test {
 protected:
  LivenessRulesTest() {
    config_.node_timeout_ms = 10'000;
    config_.node_lost_after_ms = 300'000;
    config_.task_timeout_ms = 30'000;
  }
  SchedulerConfig config_;
  LivenessRules rules_{config_};
};

TEST_F(LivenessRulesTest, Issue40_NodeSilentPastNodeTimeoutIsUnavailableButNotLost) {
  std::vector<NodeState> nodes = {Node("a", kNow - 10'001), Node("b", kNow), Node("c", kNow),
                                  Node("d", kNow - 10'000)};  // d: exactly T_srv, still fine
  NodeVerdicts v = rules_.CheckNodes(kNow, nodes);
  EXPECT_EQ(v.unavailable, std::vector<size_t>{0});
  EXPECT_TRUE(v.lost.empty());
  EXPECT_EQ(rules_.eviction_hold(), "");
  // Already unavailable: no second verdict. A lost node is out of every rule.
  nodes[0].available = false;
  nodes[1].lost = true;
  nodes[1].last_heartbeat_ms = 0;
  v = rules_.CheckNodes(kNow, nodes);
  EXPECT_TRUE(v.unavailable.empty());
  EXPECT_TRUE(v.lost.empty());
  // The timeouts are read at each check (live config).
  config_.node_timeout_ms = 5'000;
  v = rules_.CheckNodes(kNow + 1, nodes);
  EXPECT_EQ(v.unavailable, std::vector<size_t>{3});
}

TEST_F(LivenessRulesTest, Issue40_NodeSilentPastNodeLostAfterIsLostWithItsReason) {
  std::vector<NodeState> nodes = {Node("a", kNow), Node("b", kNow - 301'000), Node("c", kNow),
                                  Node("d", kNow - 300'000)};
  nodes[1].available = false;  // unreachable since node_timeout: lost now all the same
  const NodeVerdicts v = rules_.CheckNodes(kNow, nodes);
  EXPECT_EQ(v.unavailable, std::vector<size_t>{3});  // d: unavailable, not yet lost
  ASSERT_EQ(v.lost.size(), 1u);
  EXPECT_EQ(v.lost[0].index, 1u);
  EXPECT_EQ(v.lost[0].reason, "node b lost: no heartbeat for 5m1s (node_lost_after 5m)");
  EXPECT_EQ(rules_.eviction_hold(), "");
}

TEST_F(LivenessRulesTest, Issue40_MoreThanHalfSilentWithinOneNodeTimeoutHoldsEvictions) {
  const TimeMs old = kNow - 400'000;
  std::vector<NodeState> nodes = {Node("a", old), Node("b", old + 5'000),
                                  Node("c", old + 10'000), Node("d", kNow)};
  NodeVerdicts v = rules_.CheckNodes(kNow, nodes);
  EXPECT_EQ(v.unavailable, (std::vector<size_t>{0, 1, 2}));
  EXPECT_TRUE(v.lost.empty());  // all three past node_lost_after, but held
  EXPECT_EQ(rules_.eviction_hold(),
            "3 of 4 nodes fell silent within one node_timeout (10s): their tasks are kept "
            "until fewer are silent");
  // Spread over more than one node_timeout: two at most fell silent together, not more
  // than half of four; the hold ends and the three are lost.
  nodes[2].last_heartbeat_ms = old + 10'001;
  nodes[0].last_heartbeat_ms = old - 20'000;
  v = rules_.CheckNodes(kNow, nodes);
  EXPECT_EQ(rules_.eviction_hold(), "");
  ASSERT_EQ(v.lost.size(), 3u);
  EXPECT_EQ(v.lost[0].index, 0u);
  EXPECT_EQ(v.lost[2].index, 2u);
  // Lost nodes leave the count: of the three left, two silent together is more than half.
  nodes[0].lost = true;
  nodes[2].last_heartbeat_ms = old + 5'000;
  v = rules_.CheckNodes(kNow, nodes);
  EXPECT_EQ(rules_.eviction_hold().substr(0, 7), "2 of 3 ");
  EXPECT_TRUE(v.lost.empty());
}

TEST_F(LivenessRulesTest, Issue40_SilentAndHungTasksAreReclaimedWithTheirReason) {
  const std::vector<NodeState> nodes = {Node("a", kNow), Node("b", kNow)};
  std::vector<NodeState> b_down = nodes;
  b_down[1].available = false;
  Task silent = OnNode(1, 0, "a", kNow - 31'000);
  Task stopped = OnNode(2, 0, "a", kNow - 31'000);
  stopped.executor_status = ExecutorStatus::kStopped;
  Task stale = OnNode(3, 1, "b", kNow - 60'000);
  stale.executor_status = ExecutorStatus::kHeartbeatStale;
  stale.executor_detail = "heartbeat file 55s old";
  Task fresh = OnNode(4, 0, "a", kNow - 30'000);
  const std::vector<const Task*> active = {&silent, &stopped, &stale, &fresh};
  rules_.HeardFrom(kNow - 60'000);
  // On an unavailable node the node rule decides: task 3 is left alone.
  std::vector<TaskVerdict> v = rules_.CheckTasks(kNow, active, b_down);
  EXPECT_EQ(Ids(v), (std::vector<TaskId>{TaskId(1), TaskId(2)}));
  rules_.HeardFrom(kNow - 60'000);
  v = rules_.CheckTasks(kNow, active, nodes);
  ASSERT_EQ(v.size(), 3u);
  EXPECT_EQ(v[0].reason, "task heartbeat lost for 31s on a");
  EXPECT_EQ(v[1].reason, "task hung on a: stopped (not seen running for 31s)");
  EXPECT_EQ(v[2].reason, "task hung on b: heartbeat file 55s old (not seen running for 1m)");
}

TEST_F(LivenessRulesTest, Issue40_HeartbeatFloorSkipsTheScanButNeverMissesATask) {
  const std::vector<NodeState> nodes = {Node("a", kNow)};
  Task early = OnNode(1, 0, "a", 1'000);
  Task late = OnNode(2, 0, "a", 5'000);
  EXPECT_FALSE(rules_.TaskScanDue(kNow));  // no task heard from yet: nothing to scan
  rules_.HeardFrom(early.last_heartbeat_ms);
  rules_.HeardFrom(late.last_heartbeat_ms);
  EXPECT_FALSE(rules_.TaskScanDue(31'000));  // exactly T_task since the floor
  EXPECT_TRUE(rules_.TaskScanDue(31'001));
  std::vector<const Task*> active = {&early, &late};
  EXPECT_EQ(Ids(rules_.CheckTasks(31'001, active, nodes)), std::vector<TaskId>{TaskId(1)});
  // The scan set the floor to the oldest active heartbeat (task 1's, still active here).
  EXPECT_TRUE(rules_.TaskScanDue(31'002));
  active = {&late};
  EXPECT_TRUE(rules_.CheckTasks(32'000, active, nodes).empty());
  // Floor now task 2's heartbeat: no scan until it can be silent, and none is skipped then.
  EXPECT_FALSE(rules_.TaskScanDue(35'000));
  EXPECT_TRUE(rules_.CheckTasks(35'000, active, nodes).empty());
  EXPECT_EQ(Ids(rules_.CheckTasks(35'001, active, nodes)), std::vector<TaskId>{TaskId(2)});
  // A task adopted with an older heartbeat lowers the floor: its silence is seen at once.
  late.last_heartbeat_ms = 40'000;
  rules_.CheckTasks(50'000, active, nodes);
  EXPECT_FALSE(rules_.TaskScanDue(60'000));
  Task adopted = OnNode(3, 0, "a", 20'000);
  rules_.HeardFrom(adopted.last_heartbeat_ms);
  active = {&late, &adopted};
  EXPECT_EQ(Ids(rules_.CheckTasks(60'000, active, nodes)), std::vector<TaskId>{TaskId(3)});
}

// Issue 43: the loop ticks on every batch of agent messages; CheckNodes scans only once some
// node not lost can be silent past node_timeout, and no silent node is missed for it.
TEST_F(LivenessRulesTest, Issue43_CN109992422A_Claim6_NodeFloorSkipsTheScanButNeverMissesANode) {
  std::vector<NodeState> nodes = {Node("a", kNow), Node("b", kNow - 4'000)};
  EXPECT_TRUE(rules_.CheckNodes(kNow, nodes).unavailable.empty());  // the first check scans
  // The floor is b's heartbeat: nothing can be silent until T_srv after it.
  EXPECT_FALSE(rules_.NodeScanDue(kNow + 6'000));
  EXPECT_TRUE(rules_.NodeScanDue(kNow + 6'001));
  // Proof that the check skips: a silence made behind its back (no node moves back in time
  // in a scheduler) is not seen before the floor says a scan is due ...
  nodes[0].last_heartbeat_ms = kNow - 20'000;
  EXPECT_TRUE(rules_.CheckNodes(kNow + 1'000, nodes).unavailable.empty());
  // ... and a node registered with an older time lowers the floor: seen at once.
  rules_.NodeHeardFrom(kNow - 20'000);
  EXPECT_EQ(rules_.CheckNodes(kNow + 1'000, nodes).unavailable, std::vector<size_t>{0});
  // b falls silent exactly when T_srv has passed since its heartbeat, not a tick later.
  nodes[0].available = false;
  nodes[0].lost = true;  // out of every rule, and of the floor
  EXPECT_TRUE(rules_.CheckNodes(kNow + 6'000, nodes).unavailable.empty());
  EXPECT_EQ(rules_.CheckNodes(kNow + 6'001, nodes).unavailable, std::vector<size_t>{1});
}

TEST_F(LivenessRulesTest, Issue40_TasksPastTheirTimeLimitWithTheReason) {
  Task a = OnNode(1, 0, "a", 0);
  a.assigned_ms = 1'000;
  a.spec.time_limit_ms = 60'000;
  Task b = OnNode(2, 0, "b", 0);
  b.assigned_ms = 2'000;
  b.spec.time_limit_ms = 90 * 60'000;
  const std::vector<const Task*> limited = {&a, &b};
  EXPECT_TRUE(LivenessRules::CheckTimeLimits(61'000, limited).empty());
  const std::vector<TaskVerdict> v = LivenessRules::CheckTimeLimits(61'001, limited);
  EXPECT_EQ(Ids(v), std::vector<TaskId>{TaskId(1)});
  EXPECT_EQ(v[0].reason, "time limit 1m reached on a");
  EXPECT_EQ(LivenessRules::CheckTimeLimits(5'402'001, limited)[1].reason,
            "time limit 1h30m reached on b");
}

TEST_F(LivenessRulesTest, Issue40_ForgivenSilenceIsShiftedByThePauseButNeverPastNow) {
  EXPECT_EQ(LivenessRules::Forgiven(100'000, 50'000, 30'000), 80'000);
  EXPECT_EQ(LivenessRules::Forgiven(100'000, 90'000, 30'000), 100'000);
  EXPECT_EQ(LivenessRules::Forgiven(100'000, 50'000, -5), 50'000);
}

}  // namespace
}  // namespace gpusched::core
