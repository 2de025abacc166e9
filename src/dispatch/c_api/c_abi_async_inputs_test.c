/* Issue 42 through the C ABI (GPUSCHED_C_1.6): gpusched_dispatcher_acquire2_async, the
 * asynchronous acquire with a gpusched_request's placement inputs. 10,000 queued requests of
 * mixed priorities, memory and models are served by 4 polling threads in the policy's order
 * (highest priority first, then arrival); memory larger than every GPU fails at once, naming the
 * field, with nothing queued; memory that does not fit yet waits for a release and holds back
 * the requests of its own or lower priority behind it; the model is carried to the policy; the
 * literal policy refuses the inputs as acquire2 does. C11 + POSIX threads; no timing asserted. */
#define _POSIX_C_SOURCE 200809L
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "c_abi_expect.h"
#include "c_abi_request.h"
#include "c_abi_time.h"
#include "gpusched_c.h"

enum { kRequests = 10000, kWorkers = 4, kGpus = 4 };

/* `gpus` GPUs with `memory` MiB each (NULL: untracked), at most max_per_gpu leases each (0: no
 * cap), affinity margin 50 ms for the gpusched policy. */
static gpusched_dispatcher* Create(const char* policy, int32_t gpus, const int64_t* memory,
                                   int32_t max_per_gpu) {
  gpusched_dispatcher_options o;
  gpusched_placement_options p;
  gpusched_service_config service = {"infer", 20, 10, 5};
  gpusched_dispatcher* d = NULL;
  memset(&o, 0, sizeof o);
  memset(&p, 0, sizeof p);
  o.gpu_count = gpus;
  o.max_per_gpu = max_per_gpu;
  p.struct_size = sizeof p;
  p.gpu_memory_mib = memory;
  p.affinity_margin_ms = policy == NULL ? 50 : 0;
  if (gpusched_dispatcher_create_ex2(policy, NULL, &o, &service, 1, &p, &d) != 0) return NULL;
  return d;
}

/* Waits up to `ms` on d's fd, then takes at most `cap` results; their count. -1 on an error. */
static int Poll(gpusched_dispatcher* d, int ms, gpusched_async_result* r, size_t cap) {
  int32_t fd = -1;
  size_t n = 0;
  if (gpusched_dispatcher_event_fd(d, &fd) != 0) return -1;
  struct pollfd p = {fd, POLLIN, 0};
  if (poll(&p, 1, ms) < 0) return -1;
  if (gpusched_dispatcher_poll_async(d, r, cap, &n) != 0) return -1;
  return (int)n;
}

struct Served {
  gpusched_dispatcher* d;
  atomic_int done, errors;
  int32_t priority[kRequests + 1];             /* by request id, as queued */
  _Atomic uint64_t lease_ticket[kRequests + 1]; /* the lease each request got (grant order) */
};

static void* Worker(void* arg) {
  struct Served* s = arg;
  gpusched_async_result r[16];
  while (atomic_load(&s->done) < kRequests && atomic_load(&s->errors) == 0) {
    const int n = Poll(s->d, 100, r, 16);
    if (n < 0) atomic_fetch_add(&s->errors, 1);
    for (int i = 0; i < n; ++i) {
      const uint64_t id = r[i].request;
      if (id == 0 || id > kRequests || r[i].status != 0 ||
          atomic_exchange(&s->lease_ticket[id], r[i].lease.ticket) != 0) {
        fprintf(stderr, "request %llu: status %d (%s), or completed twice\n",
                (unsigned long long)id, r[i].status, r[i].message);
        atomic_fetch_add(&s->errors, 1);
        continue;
      }
      if (gpusched_dispatcher_release(s->d, &r[i].lease, GPUSCHED_SUCCEEDED) != 0) {
        atomic_fetch_add(&s->errors, 1);
      }
      atomic_fetch_add(&s->done, 1);
    }
  }
  return NULL;
}

/* Whether request a (by id) must be granted before request b: the documented queue order. */
static int Before(const struct Served* s, uint64_t a, uint64_t b) {
  return s->priority[a] != s->priority[b] ? s->priority[a] > s->priority[b] : a < b;
}

/* Queues kRequests requests of priorities -2..2 (mixed), 1024 MiB, four models, behind the
 * kGpus leases `held` keeps, so all queue before any is granted. */
static int QueueMixed(struct Served* s, gpusched_lease* held) {
  static const char* const models[4] = {"resnet", "bert", "whisper", "llama"};
  static const int64_t memory[kGpus] = {16384, 16384, 16384, 16384};
  gpusched_request plain = Request(0, NULL, 0);
  uint64_t id = 0;
  s->d = Create(NULL, kGpus, memory, 1);
  EXPECT(s->d != NULL);
  for (int g = 0; g < kGpus; ++g) EXPECT(gpusched_dispatcher_acquire2(s->d, &plain, &held[g]) == 0);
  for (int i = 1; i <= kRequests; ++i) {
    gpusched_request r = Request(1024, models[i % 4], (int32_t)((i * 2654435761u) % 5) - 2);
    r.expected_ms = 1 + i % 7;
    EXPECT(gpusched_dispatcher_acquire2_async(s->d, &r, &id) == 0);
    EXPECT(id == (uint64_t)i);
    s->priority[i] = r.priority;
  }
  return 0;
}

static const struct Served* sorting; /* ByTicket's: qsort takes no context */

static int ByTicket(const void* a, const void* b) {
  const uint64_t ta = atomic_load(&sorting->lease_ticket[*(const uint64_t*)a]);
  const uint64_t tb = atomic_load(&sorting->lease_ticket[*(const uint64_t*)b]);
  return ta < tb ? -1 : ta > tb;
}

static int Issue42_AsyncInputsTenThousandQueuedRequestsGrantedByPriorityOnFourThreads(void) {
  static struct Served s; /* 120 KiB: not on the stack */
  static uint64_t granted[kRequests]; /* ids in grant order */
  pthread_t workers[kWorkers];
  gpusched_lease held[kGpus];
  const double t0 = NowMs();
  if (QueueMixed(&s, held) != 0) return 1;
  for (int i = 0; i < kWorkers; ++i) EXPECT(pthread_create(&workers[i], NULL, Worker, &s) == 0);
  for (int g = 0; g < kGpus; ++g) {
    EXPECT(gpusched_dispatcher_release(s.d, &held[g], GPUSCHED_SUCCEEDED) == 0);
  }
  for (int i = 0; i < kWorkers; ++i) pthread_join(workers[i], NULL);
  EXPECT(atomic_load(&s.errors) == 0);
  EXPECT(atomic_load(&s.done) == kRequests);
  for (int i = 1; i <= kRequests; ++i) {
    EXPECT(atomic_load(&s.lease_ticket[i]) != 0); /* none lost */
    granted[i - 1] = (uint64_t)i;
  }
  sorting = &s; /* lease tickets count up in grant order */
  qsort(granted, kRequests, sizeof granted[0], ByTicket);
  for (int k = 0; k + 1 < kRequests; ++k) { /* each grant before the next in queue order */
    if (!Before(&s, granted[k], granted[k + 1])) {
      fprintf(stderr, "granted request %llu (priority %d) before %llu (priority %d)\n",
              (unsigned long long)granted[k], s.priority[granted[k]],
              (unsigned long long)granted[k + 1], s.priority[granted[k + 1]]);
      EXPECT(Before(&s, granted[k], granted[k + 1]));
    }
  }
  EXPECT(s.priority[granted[0]] == 2 && s.priority[granted[kRequests - 1]] == -2);
  EXPECT(gpusched_dispatcher_destroy(s.d) == 0);
  printf("  %d async requests with inputs on %d threads: each once, by priority then arrival, "
         "%.0f ms\n", kRequests, kWorkers, NowMs() - t0);
  return 0;
}

static const int64_t kTwoGpuMemory[2] = {4096, 16384};

static int Issue42_AsyncInputsMemoryLargerThanEveryGpuFailsAtOnceNamingTheField(void) {
  gpusched_dispatcher* d = Create(NULL, 2, kTwoGpuMemory, 0);
  gpusched_dispatcher* literal = Create("literal", 2, NULL, 0);
  gpusched_request huge = Request(20000, NULL, 0), ok = Request(0, NULL, 0);
  gpusched_async_result r;
  gpusched_cancel* cancel = NULL;
  uint64_t id = 0;
  EXPECT(d != NULL && literal != NULL);
  EXPECT_ERROR(gpusched_dispatcher_acquire2_async(d, &huge, &id), GPUSCHED_E_INVALID_ARGUMENT,
               "expected_mem_mib: 20000 MiB fits no GPU (the largest has 16384 MiB)");
  EXPECT(Poll(d, 0, &r, 1) == 0); /* nothing was queued, so nothing completes */
  huge.struct_size = 8;
  EXPECT_ERROR(gpusched_dispatcher_acquire2_async(d, &huge, &id), GPUSCHED_E_INVALID_ARGUMENT,
               "req.struct_size: must be sizeof(gpusched_request)");
  EXPECT_ERROR(gpusched_dispatcher_acquire2_async(d, NULL, &id), GPUSCHED_E_INVALID_ARGUMENT,
               "req");
  EXPECT_ERROR(gpusched_dispatcher_acquire2_async(d, &ok, NULL), GPUSCHED_E_INVALID_ARGUMENT,
               "request_out");
  ok.expected_mem_mib = -1;
  EXPECT_ERROR(gpusched_dispatcher_acquire2_async(d, &ok, &id), GPUSCHED_E_INVALID_ARGUMENT,
               "expected_mem_mib: must be >= 0, got -1");
  ok.expected_mem_mib = 0;
  ok.service = "nope";
  EXPECT(gpusched_dispatcher_acquire2_async(d, &ok, &id) == GPUSCHED_E_NOT_FOUND);
  ok.service = "infer";
  EXPECT(gpusched_cancel_create(&cancel) == 0);
  ok.cancel = cancel;
  EXPECT_ERROR(gpusched_dispatcher_acquire2_async(d, &ok, &id), GPUSCHED_E_INVALID_ARGUMENT,
               "req.cancel: must be NULL");
  ok.cancel = NULL;
  ok.priority = 3; /* the literal policy refuses each input as acquire2 does */
  EXPECT_ERROR(gpusched_dispatcher_acquire2_async(literal, &ok, &id), GPUSCHED_E_INVALID_ARGUMENT,
               "request.priority: not supported by the");
  ok.priority = 0;
  ok.model = "resnet";
  EXPECT_ERROR(gpusched_dispatcher_acquire2_async(literal, &ok, &id), GPUSCHED_E_INVALID_ARGUMENT,
               "request.model");
  EXPECT(Poll(literal, 0, &r, 1) == 0);
  EXPECT(gpusched_cancel_destroy(cancel) == 0);
  EXPECT(gpusched_dispatcher_destroy(literal) == 0);
  EXPECT(gpusched_dispatcher_destroy(d) == 0);
  printf("  never-fits memory, struct_size, cancel and the literal policy's inputs refused\n");
  return 0;
}

/* GPU0 4096 MiB, GPU1 16384 MiB; a blocking lease of 10000 MiB on GPU1. A queued request of
 * 10000 MiB waits for its release; one of 1000 MiB queued after it at the same priority waits
 * behind it (it would fit GPU0); one of 1000 MiB at a higher priority goes at once. */
static int Issue42_AsyncInputsMemoryFitWaitsForARelease(void) {
  gpusched_dispatcher* d = Create(NULL, 2, kTwoGpuMemory, 0);
  gpusched_request big = Request(10000, NULL, 0), small = Request(1000, NULL, 0);
  gpusched_request urgent = Request(1000, NULL, 1);
  gpusched_async_result r[4];
  gpusched_lease held;
  uint64_t big_id = 0, small_id = 0, urgent_id = 0;
  EXPECT(d != NULL);
  EXPECT(gpusched_dispatcher_acquire2(d, &big, &held) == 0 && held.gpu == 1);
  EXPECT(gpusched_dispatcher_acquire2_async(d, &big, &big_id) == 0);
  EXPECT(gpusched_dispatcher_acquire2_async(d, &small, &small_id) == 0);
  EXPECT(Poll(d, 20, r, 4) == 0); /* 4096 and 6384 MiB free: the big one waits, the small too */
  EXPECT(gpusched_dispatcher_acquire2_async(d, &urgent, &urgent_id) == 0);
  EXPECT(Poll(d, 1000, r, 4) == 1); /* the higher priority passes them, on GPU0 */
  EXPECT(r[0].request == urgent_id && r[0].status == 0 && r[0].lease.gpu == 0);
  EXPECT(gpusched_dispatcher_release(d, &r[0].lease, GPUSCHED_SUCCEEDED) == 0);
  EXPECT(Poll(d, 20, r, 4) == 0); /* the release of GPU0 frees nothing the big one needs */
  EXPECT(gpusched_dispatcher_release(d, &held, GPUSCHED_SUCCEEDED) == 0);
  EXPECT(Poll(d, 1000, r, 4) == 2); /* now the big one, then the small one behind it */
  EXPECT(r[0].request == big_id && r[0].status == 0 && r[0].lease.gpu == 1);
  EXPECT(r[1].request == small_id && r[1].status == 0);
  EXPECT(r[0].lease.ticket < r[1].lease.ticket);
  EXPECT(gpusched_dispatcher_release(d, &r[0].lease, GPUSCHED_SUCCEEDED) == 0);
  EXPECT(gpusched_dispatcher_release(d, &r[1].lease, GPUSCHED_SUCCEEDED) == 0);
  EXPECT(gpusched_dispatcher_destroy(d) == 0);
  printf("  memory: the queued request waits for a release, holds back equal priority\n");
  return 0;
}

/* The model reaches the policy: a second resnet request goes to GPU0, which has resnet loaded
 * and finishes within the 50 ms margin, though GPU1 is idle. */
static int Issue42_AsyncInputsModelAffinity(void) {
  gpusched_dispatcher* d = Create(NULL, 2, NULL, 0);
  gpusched_request m = Request(0, "resnet", 0);
  gpusched_async_result r[2];
  uint64_t id = 0;
  EXPECT(d != NULL);
  EXPECT(gpusched_dispatcher_acquire2_async(d, &m, &id) == 0);
  EXPECT(gpusched_dispatcher_acquire2_async(d, &m, &id) == 0);
  EXPECT(Poll(d, 1000, r, 2) == 2);
  EXPECT(r[0].status == 0 && r[1].status == 0);
  EXPECT(r[0].lease.gpu == 0 && r[1].lease.gpu == 0);
  EXPECT(gpusched_dispatcher_release(d, &r[0].lease, GPUSCHED_SUCCEEDED) == 0);
  EXPECT(gpusched_dispatcher_release(d, &r[1].lease, GPUSCHED_SUCCEEDED) == 0);
  EXPECT(gpusched_dispatcher_destroy(d) == 0);
  printf("  affinity: resnet kept on GPU0\n");
  return 0;
}

int main(void) {
  int failed = 0;
  failed |= Issue42_AsyncInputsMemoryLargerThanEveryGpuFailsAtOnceNamingTheField();
  failed |= Issue42_AsyncInputsMemoryFitWaitsForARelease();
  failed |= Issue42_AsyncInputsModelAffinity();
  failed |= Issue42_AsyncInputsTenThousandQueuedRequestsGrantedByPriorityOnFourThreads();
  printf(failed ? "FAILED\n" : "OK\n");
  return failed;
}
