// GpuMonitor (issue 40: split out of Agent::Impl) on the fake clock with a scripted GPU
// driver: the watchdog's grace and the health period are durations on the monotonic clock
// (a wall-clock step ends neither; before the split both read the wall clock), processes
// belong to tasks by the executor's word, and the peak and use it measures.

#include "agent/gpu_monitor.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "agent/runner_test_support.h"

namespace gpusched::agent {
namespace {

// A driver whose per-process readings the test sets.
class ScriptedGpus final : public GpuDiscovery {
 public:
  explicit ScriptedGpus(int n, bool simulated = false)
      : gpus_(static_cast<size_t>(n), GpuInfo{"H100", 81920}), simulated_(simulated) {}
  const std::vector<GpuInfo>& gpus() const override { return gpus_; }
  std::vector<MiB> FreeMib() override { return std::vector<MiB>(gpus_.size(), -1); }
  bool simulated() const override { return simulated_; }
  std::vector<GpuProcessMemory> ProcessMemory() override { return memory; }
  std::optional<std::vector<GpuProcessUtil>> ProcessUtilization() override { return util; }

  std::vector<GpuProcessMemory> memory;
  std::vector<GpuProcessUtil> util;

 private:
  std::vector<GpuInfo> gpus_;
  bool simulated_;
};

class GpuMonitorTest : public testing::ExecutorTest {
 protected:
  std::unique_ptr<GpuMonitor> Make(GpuDiscovery& gpus, GpuMonitor::Options o = {}) {
    return std::make_unique<GpuMonitor>(
        gpus, clock_, std::move(o), [this] { return pids_; },
        [this](const std::string& line, logging::Level) { lines_.push_back(line); });
  }
  static TaskShare Share(std::vector<int> gpus, std::vector<MiB> mib) {
    return TaskShare{std::move(gpus), std::move(mib)};
  }

  FakeClock clock_{1'000'000};
  std::map<pid_t, TaskKey> pids_;  // what the executor says runs for which task
  std::vector<std::string> lines_;
};

TEST_F(GpuMonitorTest, Issue40_TheWatchdogsGraceIsMonotonicAndItsPeakIsTheDriversWord) {
  ScriptedGpus gpus(2);
  GpuMonitor::Options o;
  o.memory_grace_ms = 30'000;
  auto monitor = Make(gpus, o);
  const TaskKey task{7, 1};
  monitor->AddTask(task, Share({0}, {500}));
  pids_[4242] = task;
  gpus.memory = {{0, 4242, 700}};  // 200 MiB over its share
  EXPECT_TRUE(monitor->WatchMemory().empty());
  clock_.StepWallMs(3'600'000);  // an hour on the wall clock alone: no time over its share
  EXPECT_TRUE(monitor->WatchMemory().empty());
  clock_.AdvanceMs(30'000);
  const std::vector<WatchdogStop> stops = monitor->WatchMemory();
  ASSERT_EQ(stops.size(), 1u);
  EXPECT_EQ(stops[0].task, task);
  EXPECT_NE(stops[0].reason.find("exceeded its GPU memory share"), std::string::npos);
  EXPECT_EQ(monitor->RemoveTask(task), 700);
  EXPECT_EQ(monitor->RemoveTask(task), 0);  // once
  EXPECT_FALSE(monitor->HasTask(task));
}

// A process the executor does not place in a task counts for none, whatever its environment
// says; one in another task's cgroup counts for that task, not the one it claims.
TEST_F(GpuMonitorTest, Issue40_AProcessIsATasksByTheExecutorsWordOnly) {
  ScriptedGpus gpus(2);
  GpuMonitor::Options o;
  o.memory_grace_ms = 0;
  auto monitor = Make(gpus, o);
  monitor->AddTask({1, 1}, Share({0}, {1000}));
  monitor->AddTask({2, 1}, Share({1}, {1000}));
  pids_[10] = {2, 1};
  gpus.memory = {{0, 10, 5000}, {0, 99, 9000}};  // pid 99: nobody's
  EXPECT_TRUE(monitor->WatchMemory().empty());  // task 2 holds nothing on its own GPU 1
  EXPECT_EQ(monitor->RemoveTask({1, 1}), 0);
  EXPECT_EQ(monitor->RemoveTask({2, 1}), 5000);  // but NVML saw its 5000 MiB on GPU 0
}

TEST_F(GpuMonitorTest, Issue40_AFaultHoldsAGpuOutForTheHealthPeriodOfMonotonicTime) {
  ScriptedGpus gpus(2);
  const std::string faults = path("faults");
  GpuMonitor::Options o;
  o.fault_file = faults;
  o.health_period_ms = 60'000;
  auto monitor = Make(gpus, o);
  EXPECT_TRUE(monitor->CheckHealth()[1].healthy);
  std::ofstream(faults) << "1 xid 79\n";
  std::vector<core::GpuHealthView> health = monitor->CheckHealth();
  EXPECT_TRUE(health[0].healthy);
  EXPECT_FALSE(health[1].healthy);
  clock_.StepWallMs(3'600'000);
  EXPECT_FALSE(monitor->CheckHealth()[1].healthy);
  clock_.AdvanceMs(60'000);
  EXPECT_TRUE(monitor->CheckHealth()[1].healthy);
  std::ofstream(faults) << "1 xid 79\n9 lost\n";  // a bad line is said once, applies nothing
  monitor->CheckHealth();
  monitor->CheckHealth();
  EXPECT_EQ(std::count_if(lines_.begin(), lines_.end(),
                          [](const std::string& l) { return l.find("faults:") != std::string::npos; }),
            1);
}

TEST_F(GpuMonitorTest, Issue40_UseIsTheBusiestProcessAndTheirMemoryOrTheSimulatedFile) {
  const TaskKey kT3{3, 1}, kT4{4, 2};
  ScriptedGpus nvml(2);
  auto monitor = Make(nvml);
  monitor->AddTask({3, 1}, Share({0, 1}, {0, 0}));
  pids_[30] = {3, 1};
  pids_[31] = {3, 1};
  nvml.util = {{0, 30, 40}, {1, 31, 85}};
  nvml.memory = {{0, 30, 1000}, {1, 31, 2000}};
  auto use = monitor->MeasureUse();
  EXPECT_EQ(use[kT3].util, 85);
  EXPECT_EQ(use[kT3].mem_mib, 3000);

  ScriptedGpus sim(1, /*simulated=*/true);
  std::filesystem::create_directories(path("logs"));
  const int dir = open(path("logs").c_str(), O_RDONLY | O_DIRECTORY);
  ASSERT_GE(dir, 0);
  GpuMonitor::Options o;
  o.log_dir_fd = dir;
  auto simulated = Make(sim, o);
  simulated->AddTask({4, 2}, Share({0}, {0}));
  EXPECT_EQ(simulated->MeasureUse()[kT4].util, 0);  // wrote nothing yet: idle
  std::ofstream(path("logs/task-4-2.log.gpuutil")) << "250 512\n";
  use = simulated->MeasureUse();
  EXPECT_EQ(use[kT4].util, 100);  // clamped
  EXPECT_EQ(use[kT4].mem_mib, 512);
  o.task_processes = false;  // the noop executor: no process, nothing measured
  auto noop = Make(sim, o);
  noop->AddTask({4, 2}, Share({0}, {0}));
  EXPECT_TRUE(noop->MeasureUse().empty());
  close(dir);
}

}  // namespace
}  // namespace gpusched::agent
