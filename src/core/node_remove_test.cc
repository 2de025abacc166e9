// Issue 39, `gpusched node rm`: Scheduler::RemoveNode forgets a node; the nodes registered
// after it move down one index and keep every reservation and task they hold.

#include <gtest/gtest.h>

#include "core/testing/scheduler_fixture.h"

namespace gpusched::core {
namespace {

using testing::kGiB;
using testing::MakeNode;
using testing::SharedTask;

class NodeRemoveTest : public testing::StayQueuedSchedulerTest {};

TEST_F(NodeRemoveTest, Issue39_RemoveRefusesANodeWithTasksUnlessForcedThenRequeuesWithoutFailure) {
  AddNode(MakeNode("a", 1, 16 * kGiB));
  const TaskId id = Submit(SharedTask(8 * kGiB));
  sched_->Tick();
  StartAssigned();
  ASSERT_EQ(T(id).state, TaskState::kRunning);
  auto refused = sched_->RemoveNode("a", /*force=*/false);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find(id.ToString()), std::string::npos)
      << refused.status().message();
  EXPECT_TRUE(sched_->cluster().Find("a").has_value());

  auto removed = sched_->RemoveNode("a", /*force=*/true);
  ASSERT_TRUE(removed.ok()) << removed.status().ToString();
  EXPECT_EQ(*removed, std::vector<TaskId>{id});
  EXPECT_FALSE(sched_->cluster().Find("a").has_value());
  EXPECT_EQ(T(id).state, TaskState::kPending);
  EXPECT_EQ(T(id).fail_cnt, 0);  // not an execution failure
  bool killed = false;
  for (const Action& a : sched_->TakeActions()) {
    killed |= a.kind == Action::Kind::kKill && a.task == id && a.node == "a";
  }
  EXPECT_TRUE(killed);
  AddNode(MakeNode("b", 1, 16 * kGiB));
  sched_->Tick();
  ASSERT_TRUE(T(id).placement.has_value());
  EXPECT_EQ(T(id).placement->node, "b");
  ExpectInvariants();
}

TEST_F(NodeRemoveTest, Issue39_LaterNodesKeepTheirTasksWhenAnEarlierNodeIsRemoved) {
  AddNode(MakeNode("a", 1, 16 * kGiB));
  AddNode(MakeNode("b", 1, 16 * kGiB));
  AddNode(MakeNode("c", 1, 16 * kGiB));
  ASSERT_TRUE(sched_->Cordon("a", true).ok());
  const TaskId on_b = Submit(SharedTask(16 * kGiB));
  const TaskId on_c = Submit(SharedTask(16 * kGiB));
  sched_->Tick();
  StartAssigned();
  ASSERT_TRUE(T(on_b).placement && T(on_c).placement);
  ASSERT_TRUE(sched_->RemoveNode("a", false).ok());
  EXPECT_EQ(sched_->cluster().size(), 2u);
  EXPECT_EQ(*sched_->cluster().Find("b"), 0u);
  EXPECT_EQ(sched_->cluster().node(T(on_b).placement->node_index).name, T(on_b).placement->node);
  EXPECT_EQ(sched_->cluster().node(T(on_c).placement->node_index).name, T(on_c).placement->node);
  ExpectInvariants();
  // Their ends release what they hold on the right nodes.
  ASSERT_TRUE(sched_->TaskFinished(on_b, 1, 0, 0, "").ok());
  ASSERT_TRUE(sched_->TaskFinished(on_c, 1, 0, 0, "").ok());
  for (const NodeState& n : sched_->cluster().nodes()) EXPECT_EQ(n.gpus[0].allocated_mib, 0);
  ExpectInvariants();
  // A node registered again under a removed name is a new one.
  AddNode(MakeNode("a", 2, 16 * kGiB));
  EXPECT_EQ(sched_->cluster().node(*sched_->cluster().Find("a")).gpus.size(), 2u);
  EXPECT_FALSE(sched_->cluster().node(*sched_->cluster().Find("a")).cordoned);
  ExpectInvariants();
}

TEST_F(NodeRemoveTest, Issue39_UnknownNodeIsNotFoundAndTheRestartWaitForgetsARemovedNode) {
  auto unknown = sched_->RemoveNode("nosuch", false);
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), StatusCode::kNotFound);
  EXPECT_NE(unknown.status().message().find("nosuch"), std::string::npos);

  AddNode(MakeNode("a", 1, 16 * kGiB));
  AddNode(MakeNode("gone", 1, 16 * kGiB));
  ASSERT_TRUE(sched_->SetNodeReachable("a", false).ok());
  ASSERT_TRUE(sched_->SetNodeReachable("gone", false).ok());
  sched_->AwaitNodes({"a", "gone"}, clock_.NowMs() + 60'000);
  const TaskId id = Submit(SharedTask(8 * kGiB));
  ASSERT_TRUE(sched_->SetNodeReachable("a", true).ok());
  sched_->Tick();
  EXPECT_FALSE(T(id).placement.has_value());  // still waiting for "gone"
  ASSERT_TRUE(sched_->RemoveNode("gone", false).ok());
  sched_->Tick();
  ASSERT_TRUE(T(id).placement.has_value());  // the wait no longer holds for it
  EXPECT_EQ(T(id).placement->node, "a");
  ExpectInvariants();
}

}  // namespace
}  // namespace gpusched::core
