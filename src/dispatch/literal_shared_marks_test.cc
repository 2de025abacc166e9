// The literal policy (RealtimeDispatcher, CN113051059B) on shared marks, across real processes
// (fork): a lease one process holds sets the GPU's signal mark that another process's request
// scans (claim 1: it goes to another GPU; claim 2: with no other GPU it gives up and retries
// until the holder releases), a holder SIGKILLed with a lease and the segment's lock blocks
// nobody, and a segment of one policy refuses a dispatcher of the other.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <string>

#include "dispatch/gpusched_policy.h"
#include "dispatch/realtime_dispatcher.h"
#include "dispatch/shared_marks.h"

namespace gpusched::dispatch {
namespace {

std::string LiteralSegmentName(const char* test) {
  return "/gpusched-literal-" + std::string(test) + "-" + std::to_string(getpid());
}

// Service 0, "long": 2 s expected, so a request that arrives after a grab does not fit in the
// holder's remaining window (claim 1 gives up on that GPU). wait_time < cost_time (claim 7).
DispatcherConfig Literal(int gpus) {
  DispatcherConfig c;
  c.gpu_count = gpus;
  c.services = {{.name = "long", .cost_time = 2000, .wait_time = 1000, .try_time = 20}};
  return c;
}

std::unique_ptr<RealtimeDispatcher> OpenLiteral(const std::string& name, int gpus, Clock& clock) {
  auto store = SharedMarkStore::Open(name, gpus, clock, MarkPolicy::kLiteral);
  if (!store.ok()) return nullptr;
  auto d = RealtimeDispatcher::Create(Literal(gpus), clock, nullptr, std::move(*store));
  return d.ok() ? std::move(*d) : nullptr;
}

// A child that holds a lease of "long" (GPU 0 of an idle segment), writes its ticket to
// `to_parent` and, after a byte on `from_parent`, releases and exits. With `lock`, it also
// keeps the segment's lock and never releases (to be killed).
pid_t Holder(const std::string& name, int gpus, int to_parent, int from_parent, bool lock) {
  const pid_t pid = fork();
  if (pid != 0) return pid;
  RealClock clock;
  auto store = SharedMarkStore::Open(name, gpus, clock, MarkPolicy::kLiteral);
  std::unique_ptr<RealtimeDispatcher> d = OpenLiteral(name, gpus, clock);
  if (!store.ok() || d == nullptr) _exit(1);
  StatusOr<Lease> lease = d->Acquire(0);
  if (!lease.ok() || lease->gpu != 0) _exit(2);
  if (lock && !(*store)->Lock().ok()) _exit(3);
  if (write(to_parent, &lease->ticket, sizeof(lease->ticket)) != sizeof(lease->ticket)) _exit(4);
  char byte;
  if (read(from_parent, &byte, 1) != 1 || lock) _exit(5);
  _exit(d->Release(*lease, Outcome::kSucceeded).ok() ? 0 : 6);
}

struct Pipes {
  int up[2];    // child -> parent
  int down[2];  // parent -> child
  Pipes() {
    EXPECT_EQ(pipe(up), 0);
    EXPECT_EQ(pipe(down), 0);
  }
  uint64_t ReadTicket() {
    uint64_t ticket = 0;
    EXPECT_EQ(read(up[0], &ticket, sizeof(ticket)), static_cast<ssize_t>(sizeof(ticket)));
    return ticket;
  }
  void Tell() { EXPECT_EQ(write(down[1], "x", 1), 1); }
};

void ExpectExited(pid_t child, int code) {
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), code);
}

TEST(CN113051059B, Claim1_SharedMarks_OtherProcessHoldsGpu0SoRequestGoesToGpu1) {
  const std::string name = LiteralSegmentName("claim1");
  Pipes p;
  const pid_t a = Holder(name, 2, p.up[1], p.down[0], false);
  const uint64_t a_ticket = p.ReadTicket();
  usleep(5000);  // GPU 0's remaining window is now under the 2 s cost
  RealClock clock;
  std::unique_ptr<RealtimeDispatcher> b = OpenLiteral(name, 2, clock);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->mark(0).owner, a_ticket);  // process A's mark, seen from process B
  EXPECT_GT(b->mark(0).fin_time, clock.NowNs() / 1'000'000);
  std::optional<Lease> lease = b->TryAcquire(0, 1000);
  ASSERT_TRUE(lease.has_value());
  EXPECT_EQ(lease->gpu, 1);
  EXPECT_NE(lease->ticket, a_ticket);
  EXPECT_EQ(b->mark(1).owner, lease->ticket);
  EXPECT_EQ(b->mark(0).owner, a_ticket);  // B's grab left A's mark alone
  EXPECT_TRUE(b->Release(*lease, Outcome::kSucceeded).ok());
  p.Tell();
  ExpectExited(a, 0);
  EXPECT_EQ(b->mark(0).owner, 0u);  // A's release (claim 5) reset the mark B sees
  EXPECT_TRUE(SharedMarkStore::Unlink(name).ok());
}

TEST(CN113051059B, Claim2_SharedMarks_RequestWaitsForTheOtherProcessesRelease) {
  const std::string name = LiteralSegmentName("claim2");
  Pipes p;
  const pid_t a = Holder(name, 1, p.up[1], p.down[0], false);
  const uint64_t a_ticket = p.ReadTicket();
  usleep(5000);
  RealClock clock;
  std::unique_ptr<RealtimeDispatcher> b = OpenLiteral(name, 1, clock);
  ASSERT_NE(b, nullptr);
  EXPECT_FALSE(b->TryAcquire(0, 1000).has_value());  // claim 1: gives up on the only GPU
  p.Tell();  // A releases soon; B's claim-2 rounds see the reset mark and grab
  StatusOr<Lease> lease = b->Acquire(0);
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  EXPECT_EQ(lease->gpu, 0);
  EXPECT_NE(lease->ticket, a_ticket);
  EXPECT_EQ(b->mark(0).owner, lease->ticket);
  ExpectExited(a, 0);
  EXPECT_TRUE(b->Release(*lease, Outcome::kSucceeded).ok());
  EXPECT_TRUE(SharedMarkStore::Unlink(name).ok());
}

TEST(CN113051059B, Claim1_SharedMarks_HolderKilledWithTheLockBlocksNobody) {
  const std::string name = LiteralSegmentName("killed");
  Pipes p;
  const pid_t a = Holder(name, 1, p.up[1], p.down[0], true);
  const uint64_t a_ticket = p.ReadTicket();
  ASSERT_EQ(kill(a, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(waitpid(a, &status, 0), a);
  RealClock clock;
  std::unique_ptr<RealtimeDispatcher> b = OpenLiteral(name, 1, clock);  // repairs the lock
  ASSERT_NE(b, nullptr);
  // The dead lease is reclaimed and its mark reset when B's round finds no GPU.
  std::optional<Lease> lease = b->TryAcquire(0, 1000);
  ASSERT_TRUE(lease.has_value());
  EXPECT_EQ(lease->gpu, 0);
  EXPECT_NE(lease->ticket, a_ticket);
  EXPECT_TRUE(b->Release(*lease, Outcome::kSucceeded).ok());
  EXPECT_TRUE(SharedMarkStore::Unlink(name).ok());
}

TEST(CN113051059B, Claim1_SharedMarks_OneSegmentServesOnePolicy) {
  const std::string name = LiteralSegmentName("mixed");
  RealClock clock;
  auto literal = SharedMarkStore::Open(name, 1, clock, MarkPolicy::kLiteral);
  ASSERT_TRUE(literal.ok());
  auto gpusched = SharedMarkStore::Open(name, 1, clock, MarkPolicy::kGpusched);
  ASSERT_FALSE(gpusched.ok());
  EXPECT_EQ(gpusched.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(gpusched.status().message().find("literal policy's marks"), std::string::npos)
      << gpusched.status().ToString();
  EXPECT_TRUE(SharedMarkStore::Unlink(name).ok());
}

}  // namespace
}  // namespace gpusched::dispatch
