// BuildLaunchSpec (issue 40: split out of Agent::Impl, a pure function): what an assignment
// becomes for the executor, and what of it the task's own environment cannot change (issue
// 35's trust boundary).

#include "agent/launch_spec.h"

#include <gtest/gtest.h>

namespace gpusched::agent {
namespace {

namespace v1 = ::gpusched::v1;

NodeLaunchFacts Node() {
  NodeLaunchFacts n;
  n.node_name = "gpu-7";
  n.log_dir = "/data/logs";
  n.node_gpus = 4;
  n.preload = "/opt/gpusched/libgpusched_preload.so";
  n.agent_ld_preload = "/agent/own.so";
  n.topology.gpus = 4;
  n.topology.numa = {0, 0, 1, 1};
  n.numa_cpus = {{0, "0-7"}, {1, "8-15"}};
  n.log_max_bytes = 1 << 20;
  return n;
}

v1::Assign TwoGpuTask() {
  v1::Assign a;
  a.set_id(42);
  a.set_attempt(3);
  a.add_command("python3");
  a.add_command("train.py");
  a.add_gpus(1);
  a.add_gpus(2);
  a.add_gpu_mem_mib(4096);
  a.add_gpu_mem_mib(8192);
  a.set_workdir("/home/ada/run");
  a.set_cgroup_mem_mib(2048);
  return a;
}

TEST(LaunchSpecTest, Issue40_TheAgentSetsTheGpusSharesAndIdsAfterTheTasksOwnVariables) {
  v1::Assign a = TwoGpuTask();
  (*a.mutable_env())["CUDA_VISIBLE_DEVICES"] = "0,1,2,3";  // the task's wish: the agent's wins
  (*a.mutable_env())["MY_FLAG"] = "1";
  const LaunchSpec s = BuildLaunchSpec(a, std::nullopt, Node());
  EXPECT_EQ(s.id, 42u);
  EXPECT_EQ(s.attempt, 3);
  EXPECT_EQ(s.command, (std::vector<std::string>{"python3", "train.py"}));
  EXPECT_EQ(s.log_path, "/data/logs/task-42-3.log");
  EXPECT_EQ(s.env.at("MY_FLAG"), "1");
  EXPECT_EQ(s.agent_env.at("CUDA_VISIBLE_DEVICES"), "1,2");
  EXPECT_EQ(s.agent_env.at("GPUSCHED_GPU_MEM_MIB"), "4096,8192");
  EXPECT_EQ(s.agent_env.at("GPUSCHED_TASK_ID"), "42");
  EXPECT_EQ(s.agent_env.at("GPUSCHED_ATTEMPT"), "3");
  EXPECT_EQ(s.agent_env.at("GPUSCHED_RESTART_COUNT"), "2");
  EXPECT_EQ(s.agent_env.at("GPUSCHED_NODE"), "gpu-7");
  EXPECT_EQ(s.limits.gpus, (std::vector<int>{1, 2}));
  EXPECT_EQ(s.limits.node_gpus, 4);
  EXPECT_EQ(s.limits.mem_mib, 2048);
  EXPECT_EQ(s.workdir, "/home/ada/run");
  EXPECT_EQ(s.log_max_bytes, 1 << 20);
  EXPECT_EQ(s.cpus, "0-7,8-15");  // GPU 1 on NUMA 0, GPU 2 on NUMA 1
}

// Issue 35: reserved names from the task are dropped, except those the server sets itself;
// the account's names come from the account.
TEST(LaunchSpecTest, Issue40_Issue35_TheTasksReservedNamesAreDroppedAndItsAccountNamesItself) {
  v1::Assign a = TwoGpuTask();
  (*a.mutable_env())["GPUSCHED_TASK_ID"] = "1";
  (*a.mutable_env())["GPUSCHED_GPU_MEM_MIB"] = "81920";
  (*a.mutable_env())["GPUSCHED_ARRAY_INDEX"] = "5";    // set by the server
  (*a.mutable_env())["GPUSCHED_TASKS_PER_NODE"] = "999";  // clamped
  (*a.mutable_env())["USER"] = "root";
  (*a.mutable_env())["HOME"] = "/root";
  TaskUser ada;
  ada.name = "ada";
  ada.home = "/home/ada";
  const LaunchSpec s = BuildLaunchSpec(a, ada, Node());
  for (const auto& [k, v] : s.env) EXPECT_NE(k.rfind("GPUSCHED_", 0), 0u) << k;
  EXPECT_EQ(s.agent_env.at("GPUSCHED_TASK_ID"), "42");
  EXPECT_EQ(s.agent_env.at("GPUSCHED_GPU_MEM_MIB"), "4096,8192");
  EXPECT_EQ(s.agent_env.at("GPUSCHED_ARRAY_INDEX"), "5");
  EXPECT_EQ(s.tasks_per_node, 64);
  EXPECT_EQ(s.agent_env.at("USER"), "ada");
  EXPECT_EQ(s.agent_env.at("LOGNAME"), "ada");
  EXPECT_EQ(s.agent_env.at("HOME"), "/home/ada");
  ASSERT_TRUE(s.user.has_value());
  EXPECT_EQ(s.user->name, "ada");
}

TEST(LaunchSpecTest, Issue40_ThePreloadGoesFirstAndTheShareIsAFileNotTheTasksWord) {
  v1::Assign a = TwoGpuTask();
  (*a.mutable_env())["LD_PRELOAD"] = "/home/ada/hook.so";
  LaunchSpec s = BuildLaunchSpec(a, std::nullopt, Node());
  EXPECT_EQ(s.ld_preload, "/opt/gpusched/libgpusched_preload.so /home/ada/hook.so");
  EXPECT_EQ(s.env.count("LD_PRELOAD"), 0u);
  EXPECT_EQ(s.gpu_share_mib, "4096,8192");
  EXPECT_EQ(s.task_files.at("GPUSCHED_PRELOAD_STATE"), ".gpumem");

  a.mutable_env()->erase("LD_PRELOAD");  // none of its own: the agent's would be inherited
  s = BuildLaunchSpec(a, std::nullopt, Node());
  EXPECT_EQ(s.ld_preload, "/opt/gpusched/libgpusched_preload.so /agent/own.so");

  v1::Assign cpu_only;  // no GPU: no library, no share
  cpu_only.set_id(1);
  cpu_only.set_attempt(1);
  s = BuildLaunchSpec(cpu_only, std::nullopt, Node());
  EXPECT_EQ(s.ld_preload, "");
  EXPECT_EQ(s.gpu_share_mib, "");
  EXPECT_EQ(s.agent_env.at("CUDA_VISIBLE_DEVICES"), "");
}

TEST(LaunchSpecTest, Issue40_SimulatedGpusHeartbeatsAndUnknownNumaNodes) {
  v1::Assign a = TwoGpuTask();
  a.set_heartbeat_timeout_ms(30'000);
  NodeLaunchFacts node = Node();
  node.simulated_gpus = true;
  node.numa_cpus.erase(1);  // NUMA 1's CPUs unknown: nothing is pinned
  const LaunchSpec s = BuildLaunchSpec(a, std::nullopt, node);
  EXPECT_EQ(s.task_files.at("GPUSCHED_PEAK_MIB_FILE"), ".peak");
  EXPECT_EQ(s.task_files.at("GPUSCHED_SIM_GPU_UTIL_FILE"), ".gpuutil");
  EXPECT_EQ(s.task_files.at("GPUSCHED_HEARTBEAT_FILE"), ".heartbeat");
  EXPECT_EQ(s.agent_env.at("GPUSCHED_HEARTBEAT_TIMEOUT_MS"), "30000");
  EXPECT_EQ(s.cpus, "");
  node.topology = {};  // unknown topology
  EXPECT_EQ(BuildLaunchSpec(TwoGpuTask(), std::nullopt, node).cpus, "");
}

}  // namespace
}  // namespace gpusched::agent
