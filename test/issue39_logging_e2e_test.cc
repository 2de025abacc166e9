// Issue 39, "One logger": the daemons' lines through one logger (--log-format json gives one
// parseable object per line) and task output bounded by the agent's log_max_size, then
// removed after task_files_retention. Real binaries: `gpusched server`, `gpusched agent`,
// gpusched-shim and a task that writes fast.

#include <sys/stat.h>

#include <filesystem>
#include <regex>
#include <sstream>

#include "cluster_fixture.h"

namespace gpusched::testing {
namespace {

class Issue39LogJsonTest : public ClusterTest {
 protected:
  void SetUp() override {
    server_flags_ = {"--log-format", "json", "--log-level", "debug"};
    agent_flags_ = {"--log-format", "json"};
    ClusterTest::SetUp();
  }
};

// Every line the server wrote is one JSON object with time (RFC 3339 UTC, ms), level,
// component and msg; a line about a node names it.
void ExpectJsonLines(const std::string& log, const std::string& node) {
  const std::regex time(R"(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z)");
  std::istringstream in(log);
  std::string line;
  int lines = 0;
  bool named = false;
  while (std::getline(in, line)) {
    ++lines;
    const Json j = Json::parse(line, nullptr, /*allow_exceptions=*/false);
    ASSERT_TRUE(j.is_object()) << "not a JSON object: " << line;
    ASSERT_TRUE(j.contains("time") && j.contains("level") && j.contains("component") &&
                j.contains("msg"))
        << line;
    EXPECT_TRUE(std::regex_match(j["time"].get<std::string>(), time)) << line;
    if (j.value("node", "") == node) named = true;
  }
  EXPECT_GT(lines, 0);
  EXPECT_TRUE(named) << "no line names node " << node << ":\n" << log;
}

TEST_F(Issue39LogJsonTest, Issue39_ServerAndAgentWriteOneJsonObjectPerLine) {
  StartAgent("n1", "1x80GiB");
  ExpectJsonLines(ReadFile(path("server.log")), "n1");
  ExpectJsonLines(ReadFile(path("n1.log")), "n1");
  EXPECT_NE(ReadFile(path("server.log")).find("\"component\":\"server\""), std::string::npos);
}

TEST(Issue39LogFlags, Issue39_BadLogFlagsAndKeysAreRefusedNamingThem) {
  const std::string nowhere =
      (std::filesystem::temp_directory_path() / ("issue39_" + std::to_string(getpid()))).string();
  CliResult r = Cli({"server", "--log-level", "loud", "--listen", "127.0.0.1:1", "--data-dir",
                     nowhere + "/server"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("--log-level: \"loud\""), std::string::npos) << r.err;
  r = Cli({"agent", "--server", "127.0.0.1:1", "--log-format", "xml", "--data-dir",
           nowhere + "/agent"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("--log-format: \"xml\""), std::string::npos) << r.err;
  const std::string yaml =
      (std::filesystem::temp_directory_path() / ("issue39_agent_" + std::to_string(getpid()) +
                                                 ".yaml")).string();
  WriteFile(yaml, "log_max_size: lots\n");
  r = Cli({"agent", "--server", "127.0.0.1:1", "--config", yaml, "--data-dir",
           nowhere + "/agent"});
  std::filesystem::remove_all(nowhere);
  std::filesystem::remove(yaml);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("log_max_size"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("lots"), std::string::npos) << r.err;
}

class Issue39OutputTest : public ClusterTest {
 protected:
  // An agent whose config file holds `yaml`.
  void StartConfiguredAgent(const std::string& yaml) {
    WriteFile(path("agent.yaml"), yaml);
    StartAgent("n1", "2x80GiB", {"--config", path("agent.yaml")});
  }
  std::string TaskLog(uint64_t id) const {
    return path("n1/logs/task-" + std::to_string(id) + "-1.log");
  }
};

// 50 MiB written as fast as `head` can, by the task and by a process it forked, against a
// 1 MiB cap: the log keeps the first MiB and one note; the task runs to its end (exit 0)
// and says so after the cap (dropped).
TEST_F(Issue39OutputTest, Issue39_TaskOutputStopsAtLogMaxSizeWithOneNote) {
  StartConfiguredAgent("log_max_size: 1MiB\n");
  const uint64_t id = Submit({"--", "sh", "-c",
                              "head -c 20M /dev/zero & head -c 30M /dev/zero; wait; "
                              "echo still-running-after-the-cap; exit 0"});
  ASSERT_TRUE(WaitState(id, "succeeded")) << Task(id).dump();
  const std::string note = "\ngpusched: output truncated after 1048576 bytes\n";
  const std::string log = ReadFile(TaskLog(id));
  EXPECT_EQ(log.size(), (1u << 20) + note.size());
  EXPECT_EQ(log.substr(1u << 20), note);
  EXPECT_EQ(log.find("still-running"), std::string::npos);
  ASSERT_TRUE(PollUntil(
      [&] { return ReadFile(path("n1.log")).find("output over log_max_size") != std::string::npos; },
      kDeadline))
      << ReadFile(path("n1.log"));
  EXPECT_NE(ReadFile(path("n1.log")).find("[task " + std::to_string(id) + "]"),
            std::string::npos);
}

// A finished task's log is removed task_files_retention after its end; a running task's is
// kept however old its last line.
TEST_F(Issue39OutputTest, Issue39_TaskFilesAreRemovedAfterTheirRetention) {
  StartConfiguredAgent("task_files_retention: 2s\n");
  const uint64_t running = Submit({"--", "sh", "-c", Gated("run", "echo later")});
  const uint64_t done = Submit({"--", "sh", "-c", "echo hello"});
  ASSERT_TRUE(WaitState(done, "succeeded")) << Task(done).dump();
  EXPECT_TRUE(std::filesystem::exists(TaskLog(running)));
  ASSERT_TRUE(PollUntil([&] { return !std::filesystem::exists(TaskLog(done)); }, kDeadline));
  EXPECT_TRUE(std::filesystem::exists(TaskLog(running)));
  OpenGate("run");
  ASSERT_TRUE(WaitState(running, "succeeded"));
}

}  // namespace
}  // namespace gpusched::testing
