// A task's exit report (exit_report.h): the evidence read from the task's files, and who the
// report says measured the peak (issue 36).

#include "agent/exit_report.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "preload/share_ledger.h"

namespace gpusched::agent {
namespace {

namespace v1 = ::gpusched::v1;
namespace fs = std::filesystem;

class ExitReportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("exit-report-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    fd_ = open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ASSERT_GE(fd_, 0);
  }
  void TearDown() override {
    close(fd_);
    fs::remove_all(dir_);
  }
  void Write(const std::string& name, const std::string& bytes) {
    std::ofstream(dir_ / name, std::ios::binary) << bytes;
  }
  void WriteLedger(const std::string& name, uint64_t refused, uint64_t peak_bytes) {
    preload::LedgerLayout ledger{};
    ledger.refused = refused;
    ledger.peak_bytes[1] = peak_bytes;
    Write(name, std::string(reinterpret_cast<const char*>(&ledger), sizeof ledger));
  }
  fs::path dir_;
  int fd_ = -1;
};

TEST_F(ExitReportTest, Issue40_NoFilesSayNothing) {
  const ExitEvidence e = ReadExitEvidence(fd_, "1.1.log");
  EXPECT_EQ(e.peak_file_mib, 0);
  EXPECT_EQ(e.ledger_peak_mib, 0);
  EXPECT_FALSE(e.task_says_exceeded);
}

TEST_F(ExitReportTest, Issue40_ThePeakFileTheLedgerAndAnOomLineAreRead) {
  Write("1.1.log.peak", "2048\n");
  WriteLedger("1.1.log.gpumem", 0, (3ull << 30) + 1);  // 3 GiB and a byte: rounded up
  Write("1.1.log", "step 1\nRuntimeError: CUDA out of memory. Tried to allocate\n");
  const ExitEvidence e = ReadExitEvidence(fd_, "1.1.log");
  EXPECT_EQ(e.peak_file_mib, 2048);
  EXPECT_EQ(e.ledger_peak_mib, 3 * 1024 + 1);
  EXPECT_TRUE(e.task_says_exceeded);
}

TEST_F(ExitReportTest, Issue40_ARefusingLedgerSaysExceededAndAShortOneNothing) {
  WriteLedger("2.1.log.gpumem", 3, 0);
  EXPECT_TRUE(ReadExitEvidence(fd_, "2.1.log").task_says_exceeded);
  Write("3.1.log.gpumem", "short");  // not a ledger: ignored
  Write("3.1.log.peak", "-5");       // not a peak: ignored
  const ExitEvidence e = ReadExitEvidence(fd_, "3.1.log");
  EXPECT_FALSE(e.task_says_exceeded);
  EXPECT_EQ(e.peak_file_mib, 0);
}

TEST(ExitReportDecisionTest, Issue36_TheAgentsMeasurementWinsOverTheTasksWord) {
  const TaskExit e{7, 2, 0, ""};
  ExitEvidence task;
  task.peak_file_mib = 100;  // the task's word: it could write anything
  const v1::TaskStatus st = ExitReport(e, 5'000, 6'000, task);
  EXPECT_EQ(st.kind(), v1::TaskStatus::FINISHED);
  EXPECT_EQ(st.id(), 7u);
  EXPECT_EQ(st.attempt(), 2);
  EXPECT_EQ(st.finished_ms(), 5'000);  // no time of its own: dated now
  EXPECT_EQ(st.peak_gpu_mem_mib(), 6'000);
  EXPECT_EQ(st.peak_source(), v1::TaskStatus::PEAK_AGENT_MEASURED);
  EXPECT_FALSE(st.gpu_mem_exceeded());
}

TEST(ExitReportDecisionTest, Issue36_WithoutAMeasurementThePeakIsTaskWritten) {
  ExitEvidence task;
  task.ledger_peak_mib = 900;
  const v1::TaskStatus st = ExitReport(TaskExit{7, 1, 0, ""}, 1, 0, task);
  EXPECT_EQ(st.peak_gpu_mem_mib(), 900);
  EXPECT_EQ(st.peak_source(), v1::TaskStatus::PEAK_TASK_WRITTEN);
  task.peak_file_mib = 400;  // the peak file comes first
  EXPECT_EQ(ExitReport(TaskExit{7, 1, 0, ""}, 1, 0, task).peak_gpu_mem_mib(), 400);
  EXPECT_EQ(ExitReport(TaskExit{7, 1, 0, ""}, 1, 0, ExitEvidence{}).peak_source(),
            v1::TaskStatus::PEAK_UNKNOWN);
}

TEST(ExitReportDecisionTest, Issue36_AFailureTheTaskSaysWasMemoryStaysTaskWritten) {
  ExitEvidence task;
  task.task_says_exceeded = true;
  const v1::TaskStatus st = ExitReport(TaskExit{7, 1, 1, ""}, 1, 6'000, task);
  EXPECT_TRUE(st.gpu_mem_exceeded());
  // The server would learn the share from it: the task's evidence, whatever NVML saw.
  EXPECT_EQ(st.peak_source(), v1::TaskStatus::PEAK_TASK_WRITTEN);
  EXPECT_NE(st.peak_gpu_mem_mib(), 6'000);
  // A success is no memory failure, whatever its output says.
  EXPECT_FALSE(ExitReport(TaskExit{7, 1, 0, ""}, 1, 0, task).gpu_mem_exceeded());
}

TEST(ExitReportDecisionTest, Issue36_TheWatchdogsStopIsAMeasuredMemoryFailure) {
  const TaskExit e{7, 1, 137, "exceeded its GPU memory share: 700 MiB of 500 MiB on GPU 0"};
  const v1::TaskStatus st = ExitReport(e, 1, 700, ExitEvidence{});
  EXPECT_TRUE(st.gpu_mem_exceeded());
  EXPECT_EQ(st.peak_gpu_mem_mib(), 700);
  EXPECT_EQ(st.peak_source(), v1::TaskStatus::PEAK_AGENT_MEASURED);
}

TEST(ExitReportDecisionTest, Issue40_PermanentOutOfMemoryAndItsOwnTimeAreKept) {
  TaskExit e{7, 1, 127, "launch failed: command: x: not found on PATH"};
  e.permanent = true;
  e.finished_ms = 42;
  v1::TaskStatus st = ExitReport(e, 1'000, 0, ExitEvidence{});
  EXPECT_TRUE(st.permanent());
  EXPECT_EQ(st.finished_ms(), 42);
  EXPECT_EQ(st.reason(), e.reason);
  EXPECT_FALSE(st.out_of_memory());
  st = ExitReport(TaskExit{7, 1, 137, "out of memory (cgroup memory.max 1GiB)"}, 1, 0, {});
  EXPECT_TRUE(st.out_of_memory());
}

}  // namespace
}  // namespace gpusched::agent
