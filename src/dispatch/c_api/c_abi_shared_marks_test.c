/* Shared marks through the C ABI, with real processes (fork): two processes dispatching on one
 * shared-memory segment see one set of marks (one GPU, max_per_gpu 1: never two leases on it
 * at once, every ticket unique, a release in one process wakes a waiter in the other), and a
 * process killed with SIGKILL while it holds a lease does not wedge the other. The literal
 * policy on shared marks (CN113051059B claim 1): a GPU another process holds sends a request
 * to the other GPU, and a segment of one policy refuses the other. POSIX C11. */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "c_abi_expect.h"
#include "c_abi_time.h"
#include "gpusched_c.h"

enum { kRounds = 300 };

/* What the two processes write where the test can check it: an anonymous shared mapping. */
struct Shared {
  atomic_int on_gpu;     /* leases on the GPU right now, by the test's own count */
  atomic_int overlaps;   /* times a grant found another lease on the GPU */
  atomic_int ready;      /* processes that opened the segment */
  atomic_int holding;    /* the victim holds its lease */
  uint64_t tickets[2][kRounds];
};

static char name[64];

static void SleepUs(long us) {
  struct timespec ts = {us / 1000000, (us % 1000000) * 1000L};
  nanosleep(&ts, NULL);
}

static gpusched_dispatcher* Open(void) {
  gpusched_dispatcher_options o;
  gpusched_service_config service = {"infer", 1, 0, 1};
  gpusched_dispatcher* d = NULL;
  memset(&o, 0, sizeof o);
  o.gpu_count = 1;
  o.max_per_gpu = 1;
  if (gpusched_dispatcher_create_ex(NULL, name, &o, &service, 1, &d) != 0) {
    fprintf(stderr, "create_ex: %s\n", gpusched_last_error());
    return NULL;
  }
  return d;
}

/* One process's part: kRounds leases, each held ~100 µs, checking nobody else is on the GPU. */
static int Contend(struct Shared* s, int who) {
  gpusched_dispatcher* d = Open();
  int i;
  EXPECT(d != NULL);
  atomic_fetch_add(&s->ready, 1);
  while (atomic_load(&s->ready) < 2) SleepUs(100);
  for (i = 0; i < kRounds; ++i) {
    gpusched_lease lease;
    EXPECT(gpusched_dispatcher_acquire_ex(d, "infer", 10000, NULL, 0, &lease) == 0);
    if (atomic_fetch_add(&s->on_gpu, 1) != 0) atomic_fetch_add(&s->overlaps, 1);
    s->tickets[who][i] = lease.ticket;
    SleepUs(100);
    atomic_fetch_sub(&s->on_gpu, 1);
    EXPECT(gpusched_dispatcher_release(d, &lease, GPUSCHED_SUCCEEDED) == 0);
  }
  EXPECT(gpusched_dispatcher_destroy(d) == 0);
  return 0;
}

static int MarksAreOneSetAcrossProcesses(struct Shared* s) {
  pid_t child;
  int status = 0, a, b, i, j;
  double t0 = NowMs();
  child = fork();
  if (child == 0) _exit(Contend(s, 1));
  EXPECT(Contend(s, 0) == 0);
  EXPECT(waitpid(child, &status, 0) == child);
  EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT(atomic_load(&s->overlaps) == 0);
  for (a = 0; a < 2; ++a) {
    for (i = 0; i < kRounds; ++i) {
      for (b = 0; b < 2; ++b) {
        for (j = 0; j < kRounds; ++j) {
          if (a == b && i == j) continue;
          EXPECT(s->tickets[a][i] != s->tickets[b][j]);
        }
      }
    }
  }
  /* 600 leases of ~0.1 ms, each waiter woken by the other's release: far below what the
   * 100 ms re-check of a shared wait would take (~30 s). */
  EXPECT(NowMs() - t0 < 10000);
  printf("marks shared by 2 processes: %d leases in %.0f ms, no overlap, tickets unique\n",
         2 * kRounds, NowMs() - t0);
  return 0;
}

/* The victim takes the only slot and is killed; the survivor, blocked, gets the GPU once the
 * dead process's lease is reclaimed (within the 100 ms re-check of a shared wait). */
static int KilledHolderDoesNotWedgeTheOther(struct Shared* s) {
  pid_t victim;
  int status = 0;
  gpusched_dispatcher* d;
  gpusched_lease lease;
  uint64_t owner = 0;
  int64_t fin = 0;
  double t0;
  atomic_store(&s->holding, 0);
  victim = fork();
  if (victim == 0) {
    gpusched_dispatcher* vd = Open();
    gpusched_lease held;
    if (vd == NULL || gpusched_dispatcher_acquire(vd, "infer", &held) != 0) _exit(1);
    atomic_store(&s->holding, 1);
    for (;;) pause();
  }
  while (atomic_load(&s->holding) == 0) SleepUs(100);
  d = Open();
  EXPECT(d != NULL);
  EXPECT(gpusched_dispatcher_mark(d, 0, &owner, &fin) == 0);
  EXPECT(owner != 0); /* the victim's lease, seen from this process */
  EXPECT(gpusched_dispatcher_acquire_ex(d, "infer", 50, NULL, 0, &lease) ==
         GPUSCHED_E_DEADLINE_EXCEEDED);
  EXPECT(kill(victim, SIGKILL) == 0);
  EXPECT(waitpid(victim, &status, 0) == victim);
  t0 = NowMs();
  EXPECT(gpusched_dispatcher_acquire_ex(d, "infer", 5000, NULL, 0, &lease) == 0);
  printf("a SIGKILLed holder's lease reclaimed after %.0f ms\n", NowMs() - t0);
  EXPECT(gpusched_dispatcher_release(d, &lease, GPUSCHED_SUCCEEDED) == 0);
  EXPECT(gpusched_dispatcher_destroy(d) == 0);
  return 0;
}

static gpusched_dispatcher* OpenLiteral(const char* segment) {
  gpusched_dispatcher_options o;
  /* 2 s expected: a request after a grab does not fit in the holder's remaining window. */
  gpusched_service_config service = {"long", 2000, 1000, 20};
  gpusched_dispatcher* d = NULL;
  memset(&o, 0, sizeof o);
  o.gpu_count = 2;
  if (gpusched_dispatcher_create_ex("literal", segment, &o, &service, 1, &d) != 0) {
    fprintf(stderr, "create_ex(literal): %s\n", gpusched_last_error());
    return NULL;
  }
  return d;
}

/* Process A holds GPU 0's mark; process B sees it and is placed on GPU 1 (claim 1). */
static int LiteralMarksAreSharedAcrossProcesses(struct Shared* s) {
  char segment[80];
  pid_t child;
  int status = 0;
  gpusched_dispatcher *d, *other = NULL;
  gpusched_lease lease;
  uint64_t owner = 0;
  int64_t fin = 0;
  gpusched_service_config service = {"long", 2000, 1000, 20};
  gpusched_dispatcher_options o;
  snprintf(segment, sizeof segment, "%s-literal", name);
  atomic_store(&s->holding, 0);
  child = fork();
  if (child == 0) {
    gpusched_dispatcher* cd = OpenLiteral(segment);
    gpusched_lease held;
    if (cd == NULL || gpusched_dispatcher_acquire(cd, "long", &held) != 0) _exit(1);
    if (held.gpu != 0) _exit(3);
    s->tickets[1][0] = held.ticket;
    atomic_store(&s->holding, 1);
    while (atomic_load(&s->holding) != 2) SleepUs(100);
    _exit(gpusched_dispatcher_release(cd, &held, GPUSCHED_SUCCEEDED) == 0 ? 0 : 2);
  }
  while (atomic_load(&s->holding) == 0) SleepUs(100);
  SleepUs(5000);
  d = OpenLiteral(segment);
  EXPECT(d != NULL);
  EXPECT(gpusched_dispatcher_mark(d, 0, &owner, &fin) == 0);
  EXPECT(owner == s->tickets[1][0]); /* A's mark, seen from B */
  EXPECT(gpusched_dispatcher_acquire(d, "long", &lease) == 0);
  EXPECT(lease.gpu == 1);
  EXPECT(lease.ticket != owner);
  memset(&o, 0, sizeof o);
  o.gpu_count = 2;
  EXPECT(gpusched_dispatcher_create_ex(NULL, segment, &o, &service, 1, &other) ==
         GPUSCHED_E_INVALID_ARGUMENT);
  EXPECT(strstr(gpusched_last_error(), "literal policy's marks") != NULL);
  atomic_store(&s->holding, 2);
  EXPECT(waitpid(child, &status, 0) == child);
  EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT(gpusched_dispatcher_release(d, &lease, GPUSCHED_SUCCEEDED) == 0);
  EXPECT(gpusched_dispatcher_destroy(d) == 0);
  EXPECT(gpusched_shared_marks_unlink(segment) == 0);
  printf("literal policy: marks shared by 2 processes; a gpusched dispatcher refused\n");
  return 0;
}

int main(void) {
  struct Shared* s = mmap(NULL, sizeof(struct Shared), PROT_READ | PROT_WRITE,
                          MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  int failed = 0;
  if (s == MAP_FAILED) return 1;
  memset(s, 0, sizeof *s);
  snprintf(name, sizeof name, "/gpusched-c-abi-test-%d", (int)getpid());
  failed |= MarksAreOneSetAcrossProcesses(s);
  failed |= KilledHolderDoesNotWedgeTheOther(s);
  failed |= LiteralMarksAreSharedAcrossProcesses(s);
  if (gpusched_shared_marks_unlink(name) != 0) failed = 1;
  if (failed) return 1;
  printf("c_abi_shared_marks_test: ok\n");
  return 0;
}
