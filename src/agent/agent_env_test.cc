// RealAgentEnv (issue 40): the agent's own use of the node's filesystem, on folders of the
// test's own.

#include "agent/agent_env.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "base/testing/test_dir.h"

namespace gpusched::agent {
namespace {

namespace fs = std::filesystem;

void Write(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

// nodeN/cpulist for each node whose list can be read; other names, and nodes without a
// list, are left out; no folder at all is no NUMA information.
TEST(AgentEnvTest, Issue40_NumaCpusFromEachNodesCpuList) {
  gpusched::testing::TestDir dir("gpusched_agent_env");
  Write(dir / "node0/cpulist", "0-7,16-23\n");
  Write(dir / "node1/cpulist", "8-15\n");
  Write(dir / "node2/cpulist", "");
  Write(dir / "node3/meminfo", "x\n");
  Write(dir / "nodex/cpulist", "0\n");
  Write(dir / "node", "");
  Write(dir / "possible", "0-1\n");
  RealAgentEnv env((dir / "").string());
  EXPECT_EQ(env.NumaCpus(), (std::map<int, std::string>{{0, "0-7,16-23"}, {1, "8-15"}}));
  EXPECT_TRUE(RealAgentEnv((dir / "missing").string()).NumaCpus().empty());
}

// The data dir is made absolute and normal, gets its logs/ folder (opened), and must be
// private to this user.
TEST(AgentEnvTest, Issue40_OpenDataDirIsPrivateWithItsLogsFolder) {
  gpusched::testing::TestDir dir("gpusched_agent_env");
  fs::create_directories(dir / "a");
  RealAgentEnv env;
  StatusOr<DataDir> opened = env.OpenDataDir((dir / "a/../data").string());
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  EXPECT_EQ(opened->path, (dir / "data").string());
  EXPECT_EQ(opened->log_dir, (dir / "data/logs").string());
  EXPECT_TRUE(fs::is_directory(dir / "data/logs"));
  EXPECT_GE(opened->log_dir_fd.get(), 0);

  fs::create_directories(dir / "open");
  ASSERT_EQ(chmod((dir / "open").c_str(), 0777), 0);
  StatusOr<DataDir> shared = env.OpenDataDir((dir / "open").string());
  ASSERT_FALSE(shared.ok());
  EXPECT_NE(shared.status().message().find("data-dir"), std::string::npos);
  EXPECT_FALSE(fs::exists(dir / "open/logs"));
}

// The cluster files of a data dir: none recorded, one recorded, the task files moved aside.
TEST(AgentEnvTest, Issue40_ClusterFilesOfTheDataDir) {
  gpusched::testing::TestDir dir("gpusched_agent_env");
  RealAgentEnv env;
  StatusOr<DataDir> opened = env.OpenDataDir((dir / "data").string());
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  const std::string id(32, 'c');
  StatusOr<std::string> none = env.ReadClusterId(opened->path);
  ASSERT_TRUE(none.ok()) << none.status().message();
  EXPECT_EQ(*none, "");
  ASSERT_TRUE(env.RecordClusterId(opened->path, id).ok());
  StatusOr<std::string> recorded = env.ReadClusterId(opened->path);
  ASSERT_TRUE(recorded.ok()) << recorded.status().message();
  EXPECT_EQ(*recorded, id);
  Write(dir / "data/logs/task-1-1.log", "old\n");
  fs::create_directories(dir / "data/journal");  // the process runner's
  StatusOr<int> moved = env.ArchiveTaskFiles(opened->path, id);
  ASSERT_TRUE(moved.ok()) << moved.status().message();
  EXPECT_EQ(*moved, 1);
  EXPECT_TRUE(fs::exists(dir / ("data/clusters/" + id + "/logs/task-1-1.log")));
  EXPECT_FALSE(fs::exists(dir / "data/logs/task-1-1.log"));
}

}  // namespace
}  // namespace gpusched::agent
