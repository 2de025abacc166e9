// Issue 35, tasks in their own cgroup, through the real binaries: a root agent runs each task
// (the shim and all it forks, even what leaves its process group) in a cgroup of its own,
// enforces --mem (a task over it ends failed, out of memory) and keeps a task to its own
// GPUs' device nodes (simulated GPUs map to the same char 195:N numbers). Needs root and
// cgroups this process may create (skipped otherwise).

#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <fstream>
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

}  // namespace
}  // namespace gpusched::testing
