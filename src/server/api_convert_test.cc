// Issue 40: the doors' conversion of ControlPlane's views gives the protos the control plane
// returned before (the unstored state, a gang's last nodes, the last placement).

#include "server/api_convert.h"

#include <gtest/gtest.h>

#include "rpc/convert.h"

namespace gpusched::server {
namespace {

core::Placement On(const std::string& node) {
  core::Placement p;
  p.node = node;
  p.gpus = {1};
  p.gpu_mem_mib = {4096};
  return p;
}

TaskView Finished() {
  TaskView v;
  v.task.id = TaskId(7);
  v.task.spec.name = "train";
  v.task.spec.nodes = 2;
  v.task.state = core::TaskState::kSucceeded;
  v.task.attempts = 1;
  v.task.history = {{10, core::TaskState::kPending, "submitted"},
                    {20, core::TaskState::kRunning, ""},
                    {30, core::TaskState::kSucceeded, "exit 0"}};
  v.last_placement = On("a");
  v.last_gang = {"a", "b"};
  return v;
}

TEST(ApiConvertTest, Issue40_TaskViewWithAnUnstoredStateConvertsAsBefore) {
  TaskView v = Finished();
  v.stored_state = core::TaskState::kRunning;  // the succeeded record is not durable yet
  const v1::Task p = TaskToProto(v, /*with_history=*/true);
  EXPECT_EQ(p.id(), 7u);
  EXPECT_EQ(p.state(), "running");              // what a restart now would find
  EXPECT_EQ(p.unstored_state(), "succeeded");   // the change waiting for its commit
  EXPECT_EQ(p.node(), "a");                     // the last placement
  ASSERT_EQ(p.gpus_size(), 1);
  EXPECT_EQ(p.gpus(0), 1);
  EXPECT_EQ(std::vector<std::string>(p.gang_nodes().begin(), p.gang_nodes().end()),
            (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(p.history_size(), 3);

  // Field for field what ControlPlane::TaskProto built before issue 40.
  v1::Task before;
  rpc::TaskToProto(v.task, &*v.last_placement, true, &before);
  before.set_unstored_state(before.state());
  before.set_state("running");
  for (const std::string& n : v.last_gang) before.add_gang_nodes(n);
  EXPECT_EQ(p.SerializeAsString(), before.SerializeAsString());
}

TEST(ApiConvertTest, Issue40_StoredTaskViewConvertsAsTheStoresRecord) {
  TaskView v = Finished();
  v.last_gang.clear();  // a task read from the store: no gang, no stored state
  const v1::Task p = TaskToProto(v);
  EXPECT_EQ(p.state(), "succeeded");
  EXPECT_EQ(p.unstored_state(), "");
  EXPECT_EQ(p.gang_nodes_size(), 0);
  EXPECT_EQ(p.history_size(), 0);  // ls, not show
  v1::Task before;
  rpc::TaskToProto(v.task, &*v.last_placement, false, &before);
  EXPECT_EQ(p.SerializeAsString(), before.SerializeAsString());
}

TEST(ApiConvertTest, Issue40_NodeViewNamesEachGpusModel) {
  NodeView v;
  v.node.name = "n1";
  v.node.gpus.resize(2);
  v.node.gpus[0].index = 0;
  v.node.gpus[1].index = 1;
  v.gpu_models = {"A100", "H100"};
  v.connected = true;
  const v1::Node p = NodeToProto(v);
  EXPECT_EQ(p.name(), "n1");
  EXPECT_TRUE(p.connected());
  ASSERT_EQ(p.gpus_size(), 2);
  EXPECT_EQ(p.gpus(0).model(), "A100");
  EXPECT_EQ(p.gpus(1).model(), "H100");
}

TEST(ApiConvertTest, Issue40_QuotaAndLearnedProfileViewsConvertFieldForField) {
  TeamQuotaView t;
  t.team = "ml";
  t.status.quota = core::TeamQuota{"ml", 4, 0, 2};
  t.status.has_quota = true;
  t.status.used.gpus = 3;
  t.status.used.tasks = 2;
  t.status.pending = 5;
  t.granted_priority = "high";
  const v1::ListQuotasResponse q = QuotasToProto({t});
  ASSERT_EQ(q.teams_size(), 1);
  EXPECT_EQ(q.teams(0).quota().team(), "ml");
  EXPECT_EQ(q.teams(0).quota().guaranteed_gpus(), 4);
  EXPECT_EQ(q.teams(0).quota().borrow_gpus(), 2);
  EXPECT_TRUE(q.teams(0).quota_set());
  EXPECT_EQ(q.teams(0).used_gpus(), 3);
  EXPECT_EQ(q.teams(0).running(), 2);
  EXPECT_EQ(q.teams(0).pending(), 5);
  EXPECT_EQ(q.teams(0).granted_priority(), "high");

  LearnedProfileView p;
  p.key = "resnet50";
  p.profile.model = "resnet50";
  p.learned.recent = {1000, 1200};
  p.learned.observations = 7;
  EXPECT_EQ(LearnedProfileToProto(p).estimate_mib(), 0);  // no estimate: none sent
  p.estimate_mib = 1320;
  const v1::LearnedProfile l = LearnedProfileToProto(p);
  EXPECT_EQ(l.key(), "resnet50");
  EXPECT_EQ(l.model(), "resnet50");
  EXPECT_EQ(l.recent_peaks_mib_size(), 2);
  EXPECT_EQ(l.observations(), 7);
  EXPECT_EQ(l.estimate_mib(), 1320);
}

}  // namespace
}  // namespace gpusched::server
