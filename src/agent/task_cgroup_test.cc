// Tasks in cgroups of their own (issue 35): the layout read from /proc, the v2 and v1 paths
// behind the seam (FakeCgroupOps), the v2 device program against the real unified hierarchy
// (where it is mounted and this process may use it), and ProcessRunner with the real
// cgroups of this machine: the shim joins before exec, the task's processes are found by
// cgroup, an adopted task's cgroup goes when it ends.

#include "agent/task_cgroup.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>

#include "agent/runner_test_support.h"
#include "agent/testing/fake_cgroup_ops.h"

namespace gpusched::agent {
namespace {

using testing::FakeCgroupOps;

constexpr char kHybridMountinfo[] =
    "25 30 0:23 / /sys/fs/cgroup rw - tmpfs tmpfs rw,mode=755\n"
    "26 25 0:24 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
    "27 25 0:25 / /sys/fs/cgroup/memory rw,relatime shared:9 - cgroup cgroup rw,memory\n"
    "28 25 0:26 / /sys/fs/cgroup/devices rw,relatime - cgroup cgroup rw,devices\n"
    "29 25 0:27 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";
constexpr char kHybridSelf[] =
    "5:devices:/\n4:memory:/jobs/a1\n1:cpu:/\n0::/\n";

TEST(CgroupLayoutTest, Issue35_HybridHostUsesTheV1Controllers) {
  auto state = std::make_shared<FakeCgroupOps::State>();
  state->files["/sys/fs/cgroup/unified/cgroup.controllers"] = "\n";  // none on v2
  FakeCgroupOps ops(state);
  const CgroupLayout l = DetectCgroupLayout(kHybridMountinfo, kHybridSelf, ops);
  EXPECT_EQ(l.version, CgroupVersion::kV1);
  EXPECT_EQ(l.memory_dir, "/sys/fs/cgroup/memory/jobs/a1");
  EXPECT_EQ(l.cpu_dir, "/sys/fs/cgroup/cpu");
  EXPECT_EQ(l.devices_dir, "/sys/fs/cgroup/devices");
}

TEST(CgroupLayoutTest, Issue35_PureV2HostUsesV2) {
  auto state = std::make_shared<FakeCgroupOps::State>();
  state->files["/sys/fs/cgroup/system.slice/gpusched.service/cgroup.controllers"] =
      "cpuset cpu io memory pids\n";
  FakeCgroupOps ops(state);
  const CgroupLayout l = DetectCgroupLayout(
      "30 1 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n",
      "0::/system.slice/gpusched.service\n", ops);
  EXPECT_EQ(l.version, CgroupVersion::kV2);
  EXPECT_EQ(l.v2_dir, "/sys/fs/cgroup/system.slice/gpusched.service");
  EXPECT_EQ(DetectCgroupLayout("", "", ops).version, CgroupVersion::kNone);
}

// The v2 path behind the seam: controllers enabled down the agent's subtree, limits written,
// the device program attached with the task's GPUs, the out-of-memory reason, removal.
class CgroupV2Test : public ::testing::Test {
 protected:
  void SetUp() override {
    state_ = std::make_shared<FakeCgroupOps::State>();
    state_->files[kOwn + std::string("/cgroup.controllers")] = "cpu io memory pids\n";
    layout_.version = CgroupVersion::kV2;
    layout_.v2_dir = kOwn;
  }
  std::unique_ptr<TaskCgroups> Make() {
    auto c = std::make_unique<TaskCgroups>(layout_, "n1", std::make_unique<FakeCgroupOps>(state_));
    c->Init();
    return c;
  }
  static constexpr const char* kOwn = "/cg/agent.service";
  static constexpr const char* kTask = "/cg/agent.service/gpusched/n1/task-7-2";
  std::shared_ptr<FakeCgroupOps::State> state_;
  CgroupLayout layout_;
};

TEST_F(CgroupV2Test, Issue35_V2TaskCgroupCarriesMemoryCpuAndDeviceRule) {
  auto cg = Make();
  EXPECT_TRUE(cg->enforced().memory && cg->enforced().cpu && cg->enforced().devices)
      << cg->Describe();
  EXPECT_EQ(state_->files["/cg/agent.service/cgroup.subtree_control"], "+memory +cpu");
  EXPECT_EQ(state_->files["/cg/agent.service/gpusched/cgroup.subtree_control"], "+memory +cpu");
  EXPECT_EQ(state_->files["/cg/agent.service/gpusched/n1/cgroup.subtree_control"],
            "+memory +cpu");
  state_->files[std::string(kTask) + "/memory.swap.max"] = "max";
  TaskLimits limits;
  limits.mem_mib = 256;
  limits.cpu_milli = 1500;
  limits.gpus = {1, 3};
  limits.node_gpus = 4;
  auto fds = cg->Create({7, 2}, limits);
  ASSERT_TRUE(fds.ok()) << fds.status().ToString();
  ASSERT_EQ(fds->size(), 1u);
  for (int fd : *fds) close(fd);
  EXPECT_EQ(state_->opened, std::vector<std::string>{std::string(kTask) + "/cgroup.procs"});
  EXPECT_EQ(state_->files[std::string(kTask) + "/memory.max"], std::to_string(256 << 20));
  EXPECT_EQ(state_->files[std::string(kTask) + "/memory.swap.max"], "0");
  EXPECT_EQ(state_->files[std::string(kTask) + "/cpu.max"], "150000 100000");
  EXPECT_EQ(state_->device_filters[kTask], (std::vector<int>{1, 3}));

  EXPECT_EQ(cg->OutOfMemoryReason({7, 2}), "");
  state_->files[std::string(kTask) + "/memory.events"] =
      "low 0\nhigh 0\nmax 12\noom 1\noom_kill 1\noom_group_kill 0\n";
  EXPECT_EQ(cg->OutOfMemoryReason({7, 2}), "out of memory (limit 256MiB)");
  state_->files[std::string(kTask) + "/memory.max"] = std::to_string(1LL << 30);
  EXPECT_EQ(cg->OutOfMemoryReason({7, 2}), "out of memory (limit 1GiB)");

  state_->files[std::string(kTask) + "/cgroup.procs"] = "41\n42\n";
  EXPECT_EQ(cg->Pids({7, 2}), (std::vector<pid_t>{41, 42}));
  cg->Remove({7, 2});
  EXPECT_EQ(state_->killed, (std::vector<pid_t>{41, 42}));
  EXPECT_EQ(state_->dirs.count(kTask), 0u);
}

TEST_F(CgroupV2Test, Issue35_V2AgentLeavesItsOwnCgroupForALeaf) {
  // Processes in the agent's cgroup: enabling controllers below it fails until it moves.
  state_->fail_writes["/cg/agent.service/cgroup.subtree_control"] = 1;
  auto cg = Make();
  EXPECT_TRUE(cg->enforced().memory) << cg->Describe();
  EXPECT_EQ(state_->files["/cg/agent.service/agent/cgroup.procs"], std::to_string(getpid()));
}

TEST_F(CgroupV2Test, Issue35_V2WithoutControllersOrBpfSaysWhatIsNotEnforced) {
  state_->files[kOwn + std::string("/cgroup.controllers")] = "\n";
  state_->fail_device_filter = true;
  auto cg = Make();
  EXPECT_FALSE(cg->enabled());
  const std::string said = cg->Describe();
  EXPECT_NE(said.find("memory (--mem), CPU (--cpu), GPU device nodes are not enforced"),
            std::string::npos)
      << said;
  EXPECT_NE(said.find("Operation not permitted"), std::string::npos) << said;
  auto fds = cg->Create({7, 2}, TaskLimits{});
  ASSERT_TRUE(fds.ok());
  EXPECT_TRUE(fds->empty());  // nothing to join
}

TEST(CgroupV1Test, Issue35_V1DeniesTheNodesOtherGpus) {
  auto state = std::make_shared<FakeCgroupOps::State>();
  CgroupLayout layout;
  layout.version = CgroupVersion::kV1;
  layout.memory_dir = "/m";
  layout.cpu_dir = "/c";
  layout.devices_dir = "/d";
  TaskCgroups cg(layout, "n1", std::make_unique<FakeCgroupOps>(state));
  cg.Init();
  TaskLimits limits;
  limits.mem_mib = 1024;
  limits.cpu_milli = 500;
  limits.gpus = {1};
  limits.node_gpus = 3;
  auto fds = cg.Create({5, 0}, limits);
  ASSERT_TRUE(fds.ok()) << fds.status().ToString();
  EXPECT_EQ(fds->size(), 3u);
  for (int fd : *fds) close(fd);
  EXPECT_EQ(state->files["/m/gpusched/n1/task-5-0/memory.limit_in_bytes"],
            std::to_string(1LL << 30));
  EXPECT_EQ(state->files["/c/gpusched/n1/task-5-0/cpu.cfs_quota_us"], "50000");
  std::vector<std::string> denied;
  for (const auto& [path, text] : state->writes) {
    if (path == "/d/gpusched/n1/task-5-0/devices.deny") denied.push_back(text);
  }
  EXPECT_EQ(denied, (std::vector<std::string>{"c 195:0 rwm", "c 195:2 rwm"}));
  state->files["/m/gpusched/n1/task-5-0/memory.oom_control"] =
      "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n";
  EXPECT_EQ(cg.OutOfMemoryReason({5, 0}), "out of memory (limit 1GiB)");
}

// ---- the real cgroups of this machine (root only) ----

// Which errno opening `path` read-write fails with in a child that first joins `fds`.
int OpenErrnoInCgroup(const std::vector<int>& fds, const std::string& path) {
  const pid_t pid = fork();
  if (pid == 0) {
    for (int fd : fds) {
      if (write(fd, "0", 1) != 1) _exit(200);
    }
    const int fd = open(path.c_str(), O_RDWR);
    _exit(fd >= 0 ? 0 : errno);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

class RealCgroupTest : public testing::ExecutorTest {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (creates cgroups)";
    testing::ExecutorTest::SetUp();
    name_ = "test" + std::to_string(getpid());
  }
  // nv0 and nv1: char 195:0 and 195:1 (no driver here: opening one that is allowed is ENXIO).
  void MakeGpuNodes() {
    for (int m : {0, 1}) {
      const std::string node = path("nv" + std::to_string(m));
      ASSERT_EQ(mknod(node.c_str(), S_IFCHR | 0666, makedev(195, m)), 0) << strerror(errno);
    }
  }
  std::string name_;
};

TEST_F(RealCgroupTest, Issue35_V2DeviceProgramDeniesAnotherGpuOnTheRealHierarchy) {
  auto ops = MakeRealCgroupOps();
  CgroupLayout layout = DetectCgroupLayout(*ops);
  if (layout.v2_dir.empty()) {
    // A v1 host may mount the unified hierarchy at the usual place without saying so here.
    if (!std::filesystem::exists("/sys/fs/cgroup/unified/cgroup.procs")) {
      GTEST_SKIP() << "no cgroup v2 hierarchy mounted";
    }
    layout.v2_dir = "/sys/fs/cgroup/unified";
  }
  layout.version = CgroupVersion::kV2;
  TaskCgroups cg(layout, name_, MakeRealCgroupOps());
  cg.Init();
  if (!cg.enforced().devices) GTEST_SKIP() << "cannot attach device programs: " << cg.Describe();
  MakeGpuNodes();
  TaskLimits limits;
  limits.gpus = {0};
  limits.node_gpus = 2;
  auto fds = cg.Create({1, 0}, limits);
  ASSERT_TRUE(fds.ok()) << fds.status().ToString();
  EXPECT_EQ(OpenErrnoInCgroup(*fds, path("nv1")), EPERM);
  EXPECT_EQ(OpenErrnoInCgroup(*fds, path("nv0")), ENXIO);
  EXPECT_EQ(OpenErrnoInCgroup(*fds, "/dev/null"), 0);
  for (int fd : *fds) close(fd);
  cg.Remove({1, 0});
  for (const std::string& dir : cg.DirsOf({1, 0})) EXPECT_FALSE(std::filesystem::exists(dir));
  std::filesystem::remove(layout.v2_dir + "/gpusched/" + name_);
}

class RealRunnerCgroupTest : public RealCgroupTest {
 protected:
  void SetUp() override {
    RealCgroupTest::SetUp();
    if (IsSkipped()) return;
    auto ops = MakeRealCgroupOps();
    cgroups_ = std::make_shared<TaskCgroups>(DetectCgroupLayout(*ops), name_, std::move(ops));
    cgroups_->Init();
    if (!cgroups_->enabled()) GTEST_SKIP() << cgroups_->Describe();
  }
  void TearDown() override {
    if (cgroups_) {
      for (const std::string& dir : cgroups_->DirsOf({1, 1})) {
        std::filesystem::remove(std::filesystem::path(dir).parent_path());
      }
    }
    RealCgroupTest::TearDown();
  }
  std::unique_ptr<ProcessRunner> Open(testing::ExitRecorder& rec) {
    ProcessRunnerOptions o = Options();
    o.cgroups = cgroups_;
    auto r = ProcessRunner::Open(clock_, o, rec.Callback());
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? std::move(r).value() : nullptr;
  }
  std::shared_ptr<TaskCgroups> cgroups_;
};

// A child that leaves the task's process group (setsid) and one that claims another task's
// id in its environment are still found as the task's by cgroup, and the escaped one dies
// with the task's cgroup.
TEST_F(RealRunnerCgroupTest, Issue35_TaskProcessesFoundByCgroupNotByEnvironment) {
  testing::ExitRecorder rec;
  auto runner = Open(rec);
  ASSERT_TRUE(runner);
  LaunchSpec s = Spec(1, {"sh", "-c",
               "setsid sleep 300 & echo $! > " + path("escaped") +
                   "; GPUSCHED_TASK_ID=99 sleep 300 & echo ready; while [ ! -e " +
                   path("end") + " ]; do sleep 0.02; done"});
  ASSERT_TRUE(LaunchReady(*runner, s));
  ASSERT_TRUE(testing::PollUntil([&] { return !testing::ReadFile(path("escaped")).empty(); }));
  const pid_t escaped = std::stoi(testing::ReadFile(path("escaped")));
  const std::map<pid_t, TaskKey> owners = runner->TaskPids();
  ASSERT_TRUE(owners.count(escaped)) << "the setsid child is not found as the task's";
  EXPECT_EQ(owners.at(escaped), (TaskKey{1, 1}));
  EXPECT_GE(owners.size(), 4u);  // shim, sh, both sleeps
  for (const auto& [pid, key] : owners) EXPECT_EQ(key, (TaskKey{1, 1})) << pid;
  OpenGate("end");
  ASSERT_TRUE(rec.WaitFor(1, 1));
  EXPECT_TRUE(testing::PollUntil([&] { return kill(escaped, 0) != 0; }))
      << "the escaped child outlived its task's cgroup";
  for (const std::string& dir : cgroups_->DirsOf({1, 1})) {
    EXPECT_FALSE(std::filesystem::exists(dir)) << dir;
  }
}

TEST_F(RealRunnerCgroupTest, Issue35_AdoptedTaskCgroupIsRemovedWhenItEnds) {
  {
    testing::ExitRecorder rec;
    auto runner = Open(rec);
    ASSERT_TRUE(runner);
    ASSERT_TRUE(LaunchReady(*runner, Gated(1, "end", "exit 3")));
    runner->Stop(ShutdownMode::kLeaveTasks);
  }
  for (const std::string& dir : cgroups_->DirsOf({1, 1})) {
    EXPECT_TRUE(std::filesystem::exists(dir)) << dir;
  }
  testing::ExitRecorder rec;
  auto runner = Open(rec);  // adopts it
  ASSERT_TRUE(runner);
  EXPECT_EQ(runner->TaskPids().size() >= 2, true);
  OpenGate("end");
  auto e = rec.WaitFor(1, 1);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->exit_code, 3);
  for (const std::string& dir : cgroups_->DirsOf({1, 1})) {
    EXPECT_FALSE(std::filesystem::exists(dir)) << dir;
  }
}

TEST_F(RealRunnerCgroupTest, Issue35_TaskOverItsMemoryLimitEndsOutOfMemory) {
  if (!cgroups_->enforced().memory) GTEST_SKIP() << cgroups_->Describe();
  testing::ExitRecorder rec;
  auto runner = Open(rec);
  ASSERT_TRUE(runner);
  LaunchSpec s = Spec(1, {"python3", "-c", "b = b'x' * (512 << 20)"});
  s.limits.mem_mib = 256;
  ASSERT_TRUE(runner->Launch(s).ok());
  auto e = rec.WaitFor(1, 1);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->exit_code, 137) << e->reason;
  EXPECT_EQ(e->reason, "out of memory (limit 256MiB)");
}

}  // namespace
}  // namespace gpusched::agent
