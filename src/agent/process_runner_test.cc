#include "agent/process_runner.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace gpusched::agent {
namespace {

class ProcessRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("gpusched_runner_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    runner_ = std::make_unique<ProcessRunner>(clock_, [this](const ProcessExit& e) {
      std::lock_guard<std::mutex> lock(mu_);
      exits_.push_back(e);
    });
  }
  void TearDown() override {
    runner_.reset();
    std::filesystem::remove_all(dir_);
  }
  LaunchSpec Spec(uint64_t id, std::vector<std::string> cmd) {
    LaunchSpec s;
    s.id = id;
    s.attempt = 1;
    s.command = std::move(cmd);
    s.log_path = (dir_ / ("t" + std::to_string(id) + ".log")).string();
    return s;
  }
  // Polls until `n` exits were reported or 30 s passed.
  std::vector<ProcessExit> WaitExits(size_t n) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < deadline) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (exits_.size() >= n) return exits_;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    std::lock_guard<std::mutex> lock(mu_);
    return exits_;
  }
  std::string Read(const std::string& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

  RealClock clock_;
  std::filesystem::path dir_;
  std::mutex mu_;
  std::vector<ProcessExit> exits_;
  std::unique_ptr<ProcessRunner> runner_;
};

TEST_F(ProcessRunnerTest, ExitCodeEnvironmentAndLog) {
  LaunchSpec s = Spec(1, {"sh", "-c", "echo gpus=$CUDA_VISIBLE_DEVICES; echo err >&2; exit 7"});
  s.env["CUDA_VISIBLE_DEVICES"] = "2,5";
  ASSERT_TRUE(runner_->Launch(s).ok());
  auto exits = WaitExits(1);
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_EQ(exits[0].id, 1u);
  EXPECT_EQ(exits[0].exit_code, 7);
  EXPECT_EQ(Read(s.log_path), "gpus=2,5\nerr\n");
  EXPECT_TRUE(runner_->Running().empty());
}

TEST_F(ProcessRunnerTest, OwnProcessGroup) {
  LaunchSpec s = Spec(2, {"sh", "-c", "ps -o pgid= -p $$ | tr -d ' '; echo $$"});
  ASSERT_TRUE(runner_->Launch(s).ok());
  ASSERT_EQ(WaitExits(1).size(), 1u);
  std::istringstream lines(Read(s.log_path));
  std::string pgid, pid;
  lines >> pgid >> pid;
  EXPECT_EQ(pgid, pid);  // the task leads its own group, so kill(-pgid) reaches its children
}

TEST_F(ProcessRunnerTest, UnknownCommandIsNotFound) {
  Status s = runner_->Launch(Spec(3, {"gpusched-no-such-program"}));
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_NE(s.message().find("gpusched-no-such-program"), std::string::npos);
}

TEST_F(ProcessRunnerTest, KillEscalatesToSigkillAfterGrace) {
  // The task ignores SIGTERM; only SIGKILL after the grace period ends it.
  LaunchSpec s = Spec(4, {"sh", "-c", "trap '' TERM; echo ready; while :; do sleep 0.05; done"});
  ASSERT_TRUE(runner_->Launch(s).ok());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (Read(s.log_path).empty() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  runner_->Kill(4, 1, 200, "cancelled by user");
  auto exits = WaitExits(1);
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_EQ(exits[0].exit_code, 128 + 9);
  EXPECT_EQ(exits[0].reason, "killed: cancelled by user");
}

}  // namespace
}  // namespace gpusched::agent
