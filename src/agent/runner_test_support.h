#pragma once
// What the executor tests share: a scratch folder per test, a recorder of reported exits,
// gate files (a task waits until the test creates one) and polling with deadlines, so no
// test sleeps a fixed time racing the code.

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "agent/process_runner.h"
#include "agent/task_executor.h"
#include "base/clock.h"

namespace gpusched::agent::testing {

inline constexpr std::chrono::seconds kDeadline{30};

// Polls `fn` every few milliseconds until it holds or `timeout` passes.
inline bool PollUntil(const std::function<bool()>& fn,
                      std::chrono::milliseconds timeout = kDeadline) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (fn()) return true;
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // poll period
  }
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline bool Exists(const std::string& path) { return std::filesystem::exists(path); }

// Every exit an executor reported, in order. Thread-safe.
class ExitRecorder {
 public:
  TaskExecutor::ExitCallback Callback() {
    return [this](const TaskExit& e) {
      std::lock_guard<std::mutex> lock(mu_);
      exits_.push_back(e);
    };
  }
  std::vector<TaskExit> exits() const {
    std::lock_guard<std::mutex> lock(mu_);
    return exits_;
  }
  size_t CountOf(uint64_t id, int64_t attempt) const {
    std::lock_guard<std::mutex> lock(mu_);
    size_t n = 0;
    for (const TaskExit& e : exits_) n += e.id == id && e.attempt == attempt;
    return n;
  }
  // Waits until (id, attempt) was reported; returns its first exit, or nothing.
  std::optional<TaskExit> WaitFor(uint64_t id, int64_t attempt) const {
    std::optional<TaskExit> found;
    PollUntil([&] {
      std::lock_guard<std::mutex> lock(mu_);
      for (const TaskExit& e : exits_) {
        if (e.id == id && e.attempt == attempt) {
          found = e;
          return true;
        }
      }
      return false;
    });
    return found;
  }

 private:
  mutable std::mutex mu_;
  std::vector<TaskExit> exits_;
};

// A scratch folder named after the test, with a journal and a log folder in it.
class ExecutorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("gpusched_agent_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_ / "logs");
  }
  void TearDown() override {
    // Shims started by runners that left them running are this process's children; they
    // were killed by the tests or end with their gates, and are reaped here.
    while (waitpid(-1, nullptr, WNOHANG) > 0) {
    }
    std::filesystem::remove_all(dir_);
  }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::string journal_dir() const { return path("journal"); }
  std::string RecordPath(uint64_t id, int64_t attempt, const char* suffix) const {
    return journal_dir() + "/" + std::to_string(id) + "." + std::to_string(attempt) + suffix;
  }

  ProcessRunnerOptions Options() const {
    ProcessRunnerOptions o;
    o.journal_dir = journal_dir();
    o.shim_path = GPUSCHED_SHIM;
    return o;
  }
  // Opens a ProcessRunner on this test's journal, reporting into `recorder`.
  std::unique_ptr<ProcessRunner> OpenRunner(ExitRecorder& recorder) {
    auto r = ProcessRunner::Open(clock_, Options(), recorder.Callback());
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? std::move(r).value() : nullptr;
  }

  LaunchSpec Spec(uint64_t id, std::vector<std::string> cmd, int64_t attempt = 1) const {
    LaunchSpec s;
    s.id = id;
    s.attempt = attempt;
    s.command = std::move(cmd);
    s.log_path = path("logs/t" + std::to_string(id) + "." + std::to_string(attempt) + ".log");
    return s;
  }
  // A shell task that prints "ready", waits for the gate file `gate`, then runs `then`.
  LaunchSpec Gated(uint64_t id, const std::string& gate, const std::string& then,
                   int64_t attempt = 1) const {
    return Spec(id,
                {"sh", "-c",
                 "echo ready; while [ ! -e " + path(gate) + " ]; do sleep 0.02; done; " + then},
                attempt);
  }
  void OpenGate(const std::string& gate) const { std::ofstream(path(gate)) << "open\n"; }
  bool WaitReady(const LaunchSpec& s) const {
    return PollUntil([&] { return ReadFile(s.log_path).find("ready") != std::string::npos; });
  }
  // Launches `s` (a task that prints "ready") and waits until it has printed it.
  bool LaunchReady(TaskExecutor& executor, const LaunchSpec& s) const {
    return executor.Launch(s).ok() && WaitReady(s);
  }

  RealClock clock_;
  std::filesystem::path dir_;
};

}  // namespace gpusched::agent::testing
