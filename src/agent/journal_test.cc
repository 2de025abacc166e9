// The journal's format, and what the agent does when the journal cannot be written: a clear
// error that names the folder, never a crash or a silently lost exit.

#include "agent/journal.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <fstream>

#include "agent/journal_record.h"
#include "agent/runner_test_support.h"

namespace gpusched::agent {
namespace {

using namespace testing;  // the executor tests' support

TEST(JournalRecordTest, RunRecordRoundTrips) {
  journal::RunRecord r;
  r.shim.pid = 1234;
  r.shim.start_ticks = 987654321;
  std::snprintf(r.shim.boot_id, sizeof r.shim.boot_id, "%s", "9f91ef29-96c9-4fbb");
  r.task_pgid = 1235;
  r.task_start_ticks = 987654322;
  r.started_ms = 1'700'000'000'000;
  char text[512];
  const size_t len = journal::FormatRun(r, text, sizeof text);
  ASSERT_GT(len, 0u);
  journal::RunRecord back;
  ASSERT_TRUE(journal::ParseRun(text, &back));
  EXPECT_TRUE(journal::SameProcess(back.shim, r.shim));
  EXPECT_EQ(back.task_pgid, 1235);
  EXPECT_EQ(back.task_start_ticks, 987654322);
  EXPECT_EQ(back.started_ms, 1'700'000'000'000);
}

TEST(JournalRecordTest, ExitRecordRoundTripsWithNewlinesInTheReasonFlattened) {
  journal::ExitRecord r;
  r.exit_code = -1;
  std::snprintf(r.reason, sizeof r.reason, "%s", "line one\nexit_code=0");
  char text[512];
  ASSERT_GT(journal::FormatExit(r, text, sizeof text), 0u);
  journal::ExitRecord back;
  ASSERT_TRUE(journal::ParseExit(text, &back));
  EXPECT_EQ(back.exit_code, -1);  // the reason could not forge a second exit_code line
  EXPECT_STREQ(back.reason, "line one exit_code=0");
}

TEST(JournalRecordTest, IncompleteRecordsDoNotParse) {
  journal::RunRecord run;
  journal::ExitRecord exit;
  EXPECT_FALSE(journal::ParseRun("", &run));
  EXPECT_FALSE(journal::ParseRun("shim_pid=12\nboot_id=x\n", &run));  // no start ticks
  EXPECT_FALSE(journal::ParseRun(
      "shim_pid=-3\nshim_start_ticks=1\nboot_id=x\ntask_pgid=4\ntask_start_ticks=2\n", &run));
  EXPECT_FALSE(journal::ParseExit("reason=x\n", &exit));
  EXPECT_FALSE(journal::ParseExit("exit_code=12abc\n", &exit));
  EXPECT_FALSE(journal::ParseExit("exit_code=12\n", &exit));  // torn: no exit_end
  EXPECT_TRUE(journal::ParseExit("exit_code=12\nfuture_key=1\nexit_end=1\n", &exit));
  EXPECT_EQ(exit.exit_code, 12);
}

TEST(JournalRecordTest, RecordNamesParseOnlyWhenExact) {
  unsigned long long id = 0;
  long long attempt = 0;
  EXPECT_TRUE(journal::ParseRecordName("42.3.exit", ".exit", &id, &attempt));
  EXPECT_EQ(id, 42u);
  EXPECT_EQ(attempt, 3);
  for (const char* bad : {"42.3.exit.tmp", "42.exit", ".3.exit", "x42.3.exit", "42.3x.exit",
                          "42.-3.exit", "lock", "42.3.run"}) {
    EXPECT_FALSE(journal::ParseRecordName(bad, ".exit", &id, &attempt)) << bad;
  }
}

TEST(JournalRecordTest, ProcessIdNamesThisProcessAndNotAZombie) {
  journal::ProcessId me;
  ASSERT_TRUE(journal::ReadProcessId(getpid(), &me));
  EXPECT_GT(me.start_ticks, 0);
  EXPECT_NE(me.boot_id[0], '\0');
  const pid_t child = fork();
  if (child == 0) _exit(0);
  journal::ProcessId id;
  // Until it is reaped the child is a zombie, which is not alive.
  EXPECT_TRUE(testing::PollUntil([&] { return !journal::ReadProcessId(child, &id); }));
  waitpid(child, nullptr, 0);
}

class JournalTest : public testing::ExecutorTest {};

TEST_F(JournalTest, DirThatCannotBeCreatedIsAClearError) {
  std::ofstream(path("a-file")) << "x";
  auto j = Journal::Open(path("a-file/journal"));
  ASSERT_FALSE(j.ok());
  EXPECT_EQ(j.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(j.status().message().find("journal: cannot create " + path("a-file/journal")),
            std::string::npos)
      << j.status().message();
  ExitRecorder rec;
  ProcessRunnerOptions o = Options();
  o.journal_dir = path("a-file/journal");
  EXPECT_FALSE(ProcessRunner::Open(clock_, o, rec.Callback()).ok());
}

TEST_F(JournalTest, ReadOnlyDirIsAClearError) {
  if (geteuid() == 0) GTEST_SKIP() << "root writes into read-only folders";
  std::filesystem::create_directories(journal_dir());
  std::filesystem::permissions(journal_dir(), std::filesystem::perms::owner_read |
                                                   std::filesystem::perms::owner_exec);
  auto j = Journal::Open(journal_dir());
  std::filesystem::permissions(journal_dir(), std::filesystem::perms::owner_all);
  ASSERT_FALSE(j.ok());
  EXPECT_NE(j.status().message().find("is not writable"), std::string::npos);
}

TEST_F(JournalTest, WriteExitIntoAVanishedDirIsAnErrorNotACrash) {
  auto j = Journal::Open(journal_dir());
  ASSERT_TRUE(j.ok());
  std::filesystem::remove_all(journal_dir());
  Status s = (*j)->WriteExit(TaskExit{1, 1, 0, ""}, 0);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("journal: cannot write " + journal_dir() + "/1.1.exit"),
            std::string::npos)
      << s.message();
  EXPECT_EQ((*j)->ReadExit({1, 1}).status().code(), StatusCode::kNotFound);
  EXPECT_FALSE((*j)->List().ok());
}

TEST_F(JournalTest, LaunchIntoAVanishedJournalFailsClearlyAndRunsNothing) {
  ExitRecorder rec;
  auto runner = OpenRunner(rec);
  std::filesystem::remove_all(journal_dir());
  const std::string marker = path("ran");
  ASSERT_TRUE(runner->Launch(Spec(1, {"sh", "-c", "touch " + marker})).ok());
  auto e = rec.WaitFor(1, 1);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->exit_code, 127);
  EXPECT_NE(e->reason.find("launch failed: journal: cannot write " + journal_dir() + "/1.1.run"),
            std::string::npos)
      << e->reason;
  EXPECT_FALSE(Exists(marker));
}

TEST_F(JournalTest, ExitThatCannotBeJournaledIsStillReportedWithItsCode) {
  ExitRecorder rec;
  auto runner = OpenRunner(rec);
  LaunchSpec s = Gated(1, "gate", "exit 6");
  ASSERT_TRUE(LaunchReady(*runner, s));
  std::filesystem::remove_all(journal_dir());
  OpenGate("gate");
  auto e = rec.WaitFor(1, 1);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->exit_code, 6);
  EXPECT_NE(e->reason.find("the exit could not be journaled"), std::string::npos) << e->reason;
}

}  // namespace
}  // namespace gpusched::agent
