// Issue 39: RemoveOldTaskFiles, the agent's task_files_retention (task_files.h).

#include "agent/task_files.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace gpusched::agent {
namespace {

namespace fs = std::filesystem;

class RemoveOldTaskFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("task_files_test_" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  // A file `name` last modified at `mtime_s` (seconds since the epoch).
  void Make(const std::string& name, int64_t mtime_s) {
    std::ofstream(dir_ / name) << "x";
    const timespec times[2] = {{mtime_s, 0}, {mtime_s, 0}};
    ASSERT_EQ(utimensat(AT_FDCWD, (dir_ / name).c_str(), times, 0), 0);
  }
  bool Has(const std::string& name) const { return fs::exists(fs::symlink_status(dir_ / name)); }
  fs::path dir_;
};

TEST_F(RemoveOldTaskFilesTest, Issue39_RemovesOldTaskFilesOnlyAndKeepsThoseNamed) {
  Make("task-1-1.log", 100);
  Make("task-1-1.log.peak", 100);
  Make("task-2-1.log", 100);      // kept: still running
  Make("task-3-1.log", 10'000);   // ended recently
  Make("task-4-1.logx", 100);     // not a task file
  Make("notes.txt", 100);
  fs::create_symlink("/etc/passwd", dir_ / "task-5-1.log");  // the name goes, never the target
  const timespec old[2] = {{100, 0}, {100, 0}};
  ASSERT_EQ(utimensat(AT_FDCWD, (dir_ / "task-5-1.log").c_str(), old, AT_SYMLINK_NOFOLLOW), 0);
  auto dir = OpenDirectory(dir_.string());
  ASSERT_TRUE(dir.ok());
  EXPECT_EQ(RemoveOldTaskFiles(dir->get(), 5'000'000, {{2, 1}}), 3);
  EXPECT_FALSE(Has("task-1-1.log"));
  EXPECT_FALSE(Has("task-1-1.log.peak"));
  EXPECT_TRUE(Has("task-2-1.log"));
  EXPECT_TRUE(Has("task-3-1.log"));
  EXPECT_TRUE(Has("task-4-1.logx"));
  EXPECT_TRUE(Has("notes.txt"));
  EXPECT_FALSE(Has("task-5-1.log"));
  EXPECT_TRUE(fs::exists("/etc/passwd"));
}

}  // namespace
}  // namespace gpusched::agent
