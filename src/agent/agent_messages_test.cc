// The messages the agent composes (agent_messages.h): registration, node heartbeat, task
// heartbeats, built from plain facts.

#include "agent/agent_messages.h"

#include <gtest/gtest.h>

namespace gpusched::agent {
namespace {

namespace v1 = ::gpusched::v1;

NodeFacts TwoGpuNode() {
  NodeFacts f;
  f.spec.name = "n1";
  f.spec.address = "10.0.0.5:7000";
  f.spec.capacity = {64'000, 512 * 1024};
  f.spec.gpus = {{"A100", 81'920}, {"H100", 81'559}};
  f.spec.labels = {{"zone", "a"}};
  f.spec.taints = {core::Taint{"dedicated", "infer", core::TaintEffect::kNoSchedule}};
  f.spec.topology.gpus = 2;
  f.spec.topology.links = {0, 3, 3, 0};
  f.spec.topology.numa = {0, 1};
  f.instance = "inst-7";
  f.simulated = true;
  return f;
}

TEST(AgentMessagesTest, Issue40_ARegistrationCarriesTheNodesFactsItsTasksAndItsCluster) {
  const v1::AgentMessage m = RegistrationMessage(TwoGpuNode(), {{4, 1}, {9, 2}}, "c-1");
  ASSERT_TRUE(m.has_register_());
  const v1::RegisterNode& r = m.register_();
  EXPECT_EQ(r.name(), "n1");
  EXPECT_EQ(r.agent_instance(), "inst-7");
  EXPECT_EQ(r.address(), "10.0.0.5:7000");
  EXPECT_EQ(r.cpu_milli(), 64'000);
  EXPECT_EQ(r.mem_mib(), 512 * 1024);
  ASSERT_EQ(r.gpus_size(), 2);
  EXPECT_EQ(r.gpus(1).index(), 1);  // by index, in order
  EXPECT_EQ(r.gpus(1).model(), "H100");
  EXPECT_EQ(r.gpus(1).total_mib(), 81'559);
  EXPECT_EQ(r.labels().at("zone"), "a");
  ASSERT_EQ(r.taints_size(), 1);
  EXPECT_EQ(r.taints(0).key(), "dedicated");
  EXPECT_EQ(r.gpu_links_size(), 4);
  EXPECT_EQ(r.gpu_links(1), 3u);
  ASSERT_EQ(r.gpu_numa_size(), 2);
  EXPECT_EQ(r.gpu_numa(1), 1);
  ASSERT_EQ(r.running_size(), 2);
  EXPECT_EQ(r.running(1).id(), 9u);
  EXPECT_EQ(r.running(1).attempt(), 2);
  EXPECT_EQ(r.cluster_id(), "c-1");
  EXPECT_TRUE(r.simulated());
  EXPECT_EQ(r.finished_size(), 0);  // the unacknowledged exits are UnackedExits'
}

TEST(AgentMessagesTest, Issue40_HostCapacityIsAtLeastOneCpuAndSomeMemory) {
  const core::Resources r = HostCapacity();
  EXPECT_GE(r.cpu_milli, 1000);
  EXPECT_EQ(r.cpu_milli % 1000, 0);
  EXPECT_GT(r.mem_mib, 0);
}

TEST(AgentMessagesTest, Issue40_ANodeHeartbeatCarriesFreeMemoryAndHealthInGpuOrder) {
  const v1::AgentMessage m =
      NodeHeartbeatMessage({1000, -1}, {{true, ""}, {false, "Xid 79"}}, {{3, 1}});
  ASSERT_TRUE(m.has_heartbeat());
  const v1::NodeHeartbeat& hb = m.heartbeat();
  ASSERT_EQ(hb.gpu_free_mib_size(), 2);
  EXPECT_EQ(hb.gpu_free_mib(0), 1000);
  EXPECT_EQ(hb.gpu_free_mib(1), -1);  // unknown stays unknown
  ASSERT_EQ(hb.gpu_health_size(), 2);
  EXPECT_FALSE(hb.gpu_health(0).unhealthy());
  EXPECT_TRUE(hb.gpu_health(1).unhealthy());
  EXPECT_EQ(hb.gpu_health(1).last_error(), "Xid 79");
  ASSERT_EQ(hb.running_size(), 1);
  EXPECT_EQ(hb.running(0).id(), 3u);
}

TEST(AgentMessagesTest, Issue40_TaskHeartbeatsCarryMeasuredUseAndTheExecutorsVerdict) {
  const std::map<TaskKey, GpuMonitor::Use> use = {{{1, 1}, {85, 4096}}};
  const std::map<TaskKey, TaskObservation> seen = {
      {{2, 1}, {TaskHealth::kStopped, "stopped by SIGSTOP"}}};
  const v1::AgentMessage m = TaskHeartbeatsMessage({{1, 1}, {2, 1}}, use, seen, true);
  ASSERT_TRUE(m.has_task_heartbeats());
  const auto& t = m.task_heartbeats().tasks();
  ASSERT_EQ(t.size(), 2);
  EXPECT_EQ(t[0].gpu_util(), 85);
  EXPECT_EQ(t[0].gpu_mem_used_mib(), 4096);
  EXPECT_EQ(t[0].executor_status(), v1::TaskRef::RUNNING);  // not seen hung: running
  EXPECT_EQ(t[0].executor_detail(), "");
  EXPECT_EQ(t[1].gpu_mem_used_mib(), 0);  // not measured: none said
  EXPECT_EQ(t[1].executor_status(), v1::TaskRef::STOPPED);
  EXPECT_EQ(t[1].executor_detail(), "stopped by SIGSTOP");
}

TEST(AgentMessagesTest, Issue40_WithoutProcessesTaskHeartbeatsSayNoExecutorStatus) {
  const std::map<TaskKey, TaskObservation> seen = {
      {{2, 1}, {TaskHealth::kHeartbeatStale, "heartbeat file 40s old"}}};
  const v1::AgentMessage m = TaskHeartbeatsMessage({{2, 1}}, {}, seen, false);
  ASSERT_EQ(m.task_heartbeats().tasks_size(), 1);
  EXPECT_EQ(m.task_heartbeats().tasks(0).executor_status(), v1::TaskRef::UNREPORTED);
  EXPECT_EQ(m.task_heartbeats().tasks(0).executor_detail(), "");
}

}  // namespace
}  // namespace gpusched::agent
