// Issue 35, tasks in their own cgroup, through the real binaries: a root agent runs each task
// (the shim and all it forks, even what leaves its process group) in a cgroup of its own,
// enforces --mem (a task over it ends failed, out of memory) and keeps a task to its own
// GPUs' device nodes (simulated GPUs map to the same char 195:N numbers). Needs root and
// cgroups this process may create (skipped otherwise).

#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

#include "cluster_fixture.h"

namespace gpusched::testing {
namespace {

class TaskCgroupTest : public ClusterTest {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (the agent creates cgroups)";
    if (!std::filesystem::exists("/sys/fs/cgroup/memory/cgroup.procs") &&
        !std::filesystem::exists("/sys/fs/cgroup/cgroup.subtree_control")) {
      GTEST_SKIP() << "no cgroup memory controller mounted at /sys/fs/cgroup";
    }
    ClusterTest::SetUp();
  }
  // The lines of /proc/PID/cgroup naming the task's cgroup (one per hierarchy it is in).
  static int CgroupLinesOf(pid_t pid, uint64_t task, std::string* all) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/cgroup");
    const std::string want = "/task-" + std::to_string(task) + "-";
    int n = 0;
    for (std::string line; std::getline(in, line);) {
      *all += line + "\n";
      n += line.find("/gpusched/a-") != std::string::npos && line.find(want) != std::string::npos;
    }
    return n;
  }
  pid_t PidIn(const std::string& name) {
    pid_t pid = 0;
    PollUntil(
        [&] {
          std::istringstream in(ReadFile(path(name)));
          return static_cast<bool>(in >> pid);
        },
        kDeadline);
    return pid;
  }
};

TEST_F(TaskCgroupTest, Issue35_AllOfATasksProcessesSitInItsCgroup) {
  StartAgent("a", "1x16GiB");
  const uint64_t id = Submit(
      {"--retries", "0", "--", "sh", "-c",
       "setsid sleep 300 & echo $! > '" + path("escaped") + "'; sleep 300 & echo $! > '" +
           path("child") + "'; echo $$ > '" + path("leader") + "'; " + Gated("end", "true")});
  ASSERT_TRUE(WaitState(id, "running")) << Task(id).dump();
  const pid_t leader = PidIn("leader"), child = PidIn("child"), escaped = PidIn("escaped");
  ASSERT_GT(leader, 0);
  ASSERT_GT(child, 0);
  ASSERT_GT(escaped, 0);
  for (pid_t pid : {leader, child, escaped}) {
    std::string all;
    // v1 here: memory, cpu and devices; v2: the one unified line.
    EXPECT_GE(CgroupLinesOf(pid, id, &all), 1) << "pid " << pid << " is not in the task's "
                                               << "cgroup:\n" << all;
  }
  OpenGate("end");
  ASSERT_TRUE(WaitState(id, "succeeded")) << Task(id).dump();
  // What left the task's process group went with the task's cgroup.
  EXPECT_TRUE(PollUntil([&] { return kill(escaped, 0) != 0; }, kDeadline))
      << "the setsid child " << escaped << " outlived its task";
  EXPECT_TRUE(PollUntil([&] { return kill(child, 0) != 0; }, kDeadline));
}

TEST_F(TaskCgroupTest, Issue35_TaskOverItsMemoryLimitFailsOutOfMemory) {
  StartAgent("a", "1x16GiB");
  // Fills 512 MiB (bytes are written, not just reserved) under a 256 MiB limit.
  const uint64_t id = Submit({"--mem", "256MiB", "--retries", "0", "--", "python3", "-c",
                              "b = b'x' * (512 << 20)"});
  ASSERT_TRUE(WaitState(id, "failed")) << Task(id).dump();
  const Json t = Task(id);
  EXPECT_NE(t.value("reason", "").find("out of memory (limit 256MiB)"), std::string::npos)
      << t.dump();
  EXPECT_EQ(t["failure"], "out_of_memory") << t.dump();  // issue 41: the agent says so
}

TEST_F(TaskCgroupTest, Issue35_TaskCannotOpenAnotherGpusDeviceNode) {
  StartAgent("a", "2x16GiB");
  for (int m : {0, 1}) {
    const std::string node = path("nv" + std::to_string(m));
    ASSERT_EQ(mknod(node.c_str(), S_IFCHR | 0666, makedev(195, m)), 0) << strerror(errno);
  }
  const std::string probe =
      "import errno, os, sys\n"
      "for m in (0, 1):\n"
      "    try:\n"
      "        os.close(os.open('%s/nv%d' % (sys.argv[1], m), os.O_RDWR))\n"
      "        print('nv%d OK' % m)\n"
      "    except OSError as e:\n"
      "        print('nv%d %s' % (m, errno.errorcode[e.errno]))\n";
  const uint64_t id =
      Submit({"--gpus", "1", "--retries", "0", "--", "python3", "-c", probe, dir_.string()});
  ASSERT_TRUE(WaitState(id, "succeeded")) << Task(id).dump();
  const int own = Task(id)["gpus"][0].get<int>();
  const std::string log = Run({"logs", std::to_string(id)}).out;
  // Its own GPU's node reaches the (absent) driver; the other GPU's is refused by the rule.
  EXPECT_NE(log.find("nv" + std::to_string(own) + " ENXIO"), std::string::npos) << log;
  EXPECT_NE(log.find("nv" + std::to_string(1 - own) + " EPERM"), std::string::npos) << log;
}

// The watchdog maps GPU processes (NVML's, here the test's fake libnvidia-ml reading a file)
// to tasks by cgroup: a task whose process claims another task's GPUSCHED_TASK_ID while it
// holds too much GPU memory is stopped itself, and the task it named runs on. (Before, the
// id in /proc/PID/environ decided: the named task was killed, the offender kept running.)
TEST_F(TaskCgroupTest, Issue35_WatchdogStopsTheOffenderNotTheTaskItsEnvironmentNames) {
  // The build's fake NVML: src/agent/fakelib beside src/cli/gpusched.
  const std::filesystem::path fakelib =
      std::filesystem::path(GPUSCHED_BIN).parent_path().parent_path() / "agent" / "fakelib";
  if (!std::filesystem::exists(fakelib / "libnvidia-ml.so.1")) {
    GTEST_SKIP() << "no fake libnvidia-ml.so.1 at " << fakelib << " (tests not built)";
  }
  const std::map<std::string, std::string> env = {
      {"LD_LIBRARY_PATH", fakelib.string()},
      {"FAKE_NVML_GPUS", "FAKE:16384"},
      {"FAKE_NVML_PROCS_FILE", path("procs")}};
  for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
  agents_["a"] = std::make_unique<Proc>(
      std::vector<std::string>{"agent", "--server", server(), "--name", "a", "--data-dir",
                               path("a"), "--gpu-memory-grace", "1s"},
      path("a.log"));
  for (const auto& [k, v] : env) unsetenv(k.c_str());
  ASSERT_TRUE(PollUntil(
      [&] { return Run({"nodes", "--json"}).out.find("\"connected\":true") != std::string::npos; },
      kDeadline))
      << ReadFile(path("a.log"));
  const uint64_t victim =
      Submit({"--gpu-mem", "1GiB", "--retries", "0", "--", "sh", "-c", Gated("end", "true")});
  ASSERT_TRUE(WaitState(victim, "running")) << Task(victim).dump();
  // Same attempt number as the victim's (both first attempts): only the id is copied.
  const uint64_t offender = Submit(
      {"--gpu-mem", "1GiB", "--retries", "0", "--", "sh", "-c",
       "echo $$ > '" + path("offender") + "'; exec env GPUSCHED_TASK_ID=" +
           std::to_string(victim) + " sh -c \"" + Gated("never", "true") + "\""});
  ASSERT_TRUE(WaitState(offender, "running")) << Task(offender).dump();
  const pid_t pid = PidIn("offender");
  ASSERT_GT(pid, 0);
  WriteFile(path("procs"), std::to_string(pid) + ":0:5000");  // 5000 MiB of a 1 GiB share
  ASSERT_TRUE(WaitState(offender, "failed")) << Task(offender).dump() << ReadFile(path("a.log"));
  EXPECT_NE(Task(offender).value("reason", "").find("exceeded its GPU memory share"),
            std::string::npos)
      << Task(offender).dump();
  EXPECT_EQ(Task(victim).value("state", ""), "running") << Task(victim).dump();
  OpenGate("end");
  EXPECT_TRUE(WaitState(victim, "succeeded")) << Task(victim).dump();
}

}  // namespace
}  // namespace gpusched::testing
