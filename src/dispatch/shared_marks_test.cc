// SharedMarkStore with real processes: a process SIGKILLed while it holds the segment's lock
// (and a lease) does not wedge the next one, which repairs the table and reclaims the lease;
// bad names and a gpu count that differs from the segment's are refused.
#include "dispatch/shared_marks.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "dispatch/gpusched_policy.h"

namespace gpusched::dispatch {
namespace {

std::string SegmentName(const char* test) {
  return "/gpusched-" + std::string(test) + "-" + std::to_string(getpid());
}

GpuschedConfig OneSlot() {
  GpuschedConfig c;
  c.gpu_count = 1;
  c.max_per_gpu = 1;
  c.services = {{.name = "infer", .cost_time = 10}};
  return c;
}

TEST(SharedMarksTest, AProcessKilledHoldingTheLockDoesNotWedgeTheOthers) {
  const std::string name = SegmentName("killed");
  RealClock clock;
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // Takes the only slot, then the segment's lock, and waits to be killed with both.
    auto store = SharedMarkStore::Open(name, 1, clock);
    if (!store.ok()) _exit(1);
    SharedMarkStore* raw = store->get();
    auto policy = GpuschedPolicy::Create(OneSlot(), clock, std::move(store).value());
    if (!policy.ok() || !(*policy)->Acquire(0).ok() || !raw->Lock().ok()) _exit(1);
    const char locked = 'L';
    if (write(pipe_fds[1], &locked, 1) != 1) _exit(1);
    for (;;) pause();
  }
  char got = 0;
  ASSERT_EQ(read(pipe_fds[0], &got, 1), 1);
  ASSERT_EQ(got, 'L');
  ASSERT_EQ(kill(child, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status));

  auto store = SharedMarkStore::Open(name, 1, clock);  // locks once: repairs the table
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  SharedMarkStore* raw = store->get();
  EXPECT_EQ(raw->repairs(), 1);
  auto policy = GpuschedPolicy::Create(OneSlot(), clock, std::move(store).value());
  ASSERT_TRUE(policy.ok()) << policy.status().ToString();
  // The dead child's lease was reclaimed with the repair: the only slot is free at once.
  EXPECT_EQ((*policy)->load(0).co_runners, 0);
  StatusOr<Lease> lease =
      (*policy)->Acquire(0, AcquireOptions{.deadline_ns = clock.NowNs() + 1'000'000'000});
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  EXPECT_NE(lease->ticket, 0u);
  EXPECT_TRUE((*policy)->Release(*lease, Outcome::kSucceeded).ok());
  EXPECT_TRUE(SharedMarkStore::Unlink(name).ok());
  close(pipe_fds[0]);
  close(pipe_fds[1]);
}

TEST(SharedMarksTest, RefusesBadNamesAndAnotherGpuCount) {
  RealClock clock;
  EXPECT_EQ(SharedMarkStore::Open("no-slash", 1, clock).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(SharedMarkStore::Open("/a/b", 1, clock).status().code(),
            StatusCode::kInvalidArgument);
  const std::string name = SegmentName("count");
  auto first = SharedMarkStore::Open(name, 2, clock);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  StatusOr<std::unique_ptr<SharedMarkStore>> second = SharedMarkStore::Open(name, 3, clock);
  EXPECT_EQ(second.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(second.status().message().find("differs"), std::string::npos);
  EXPECT_TRUE(SharedMarkStore::Unlink(name).ok());
  EXPECT_EQ(SharedMarkStore::Unlink(name).code(), StatusCode::kNotFound);
}

// Two policies in one process on one segment: one set of marks (a lease of one is a co-runner
// of the other's request) and distinct tickets.
TEST(SharedMarksTest, TwoPoliciesOnOneSegmentShareTheMarks) {
  const std::string name = SegmentName("two");
  RealClock clock;
  GpuschedConfig c = OneSlot();
  c.gpu_count = 2;
  c.max_per_gpu = 0;
  auto a = GpuschedPolicy::Create(c, clock, std::move(SharedMarkStore::Open(name, 2, clock)).value());
  auto b = GpuschedPolicy::Create(c, clock, std::move(SharedMarkStore::Open(name, 2, clock)).value());
  ASSERT_TRUE(a.ok() && b.ok());
  const Lease la = *(*a)->Acquire(0);
  const Lease lb = *(*b)->Acquire(0);
  EXPECT_NE(la.gpu, lb.gpu);  // b saw a's lease
  EXPECT_NE(la.ticket, lb.ticket);
  EXPECT_EQ((*b)->mark(la.gpu).owner, la.ticket);
  EXPECT_EQ((*b)->Release(la, Outcome::kSucceeded).code(), StatusCode::kNotFound);  // a's
  EXPECT_TRUE((*a)->Release(la, Outcome::kSucceeded).ok());
  EXPECT_TRUE((*b)->Release(lb, Outcome::kSucceeded).ok());
  EXPECT_TRUE(SharedMarkStore::Unlink(name).ok());
}

}  // namespace
}  // namespace gpusched::dispatch
