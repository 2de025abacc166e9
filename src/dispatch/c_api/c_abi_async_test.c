/* Issue 42 part 2 through the C ABI: the asynchronous acquire. 10,000 requests queued with
 * gpusched_dispatcher_acquire_async are served by 4 worker threads that poll the dispatcher's
 * fd, take results with gpusched_dispatcher_poll_async and release the leases (CN113051059B
 * claims 1 and 5: a released GPU goes to the oldest queued request). Every request completes
 * exactly once, in FIFO order, and the process keeps 5 threads (no thread per request). Then
 * deadline, acquire_timeout, cancel, drain, shutdown and destroy with queued requests, and
 * every bad argument. C11 + POSIX threads. The only timing asserted is loose. */
#define _POSIX_C_SOURCE 200809L
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "c_abi_expect.h"
#include "c_abi_time.h"
#include "gpusched_c.h"

enum { kRequests = 10000, kWorkers = 4, kGpus = 4 };

/* `gpus` GPUs of at most one lease each, the gpusched policy; acquire_timeout_ms as given. */
static gpusched_dispatcher* Slots(int32_t gpus, int64_t acquire_timeout_ms) {
  gpusched_dispatcher_options o;
  gpusched_service_config service = {"infer", 20, 10, 5};
  gpusched_dispatcher* d = NULL;
  memset(&o, 0, sizeof o);
  o.gpu_count = gpus;
  o.max_per_gpu = 1;
  o.acquire_timeout_ms = acquire_timeout_ms;
  if (gpusched_dispatcher_create(&o, &service, 1, &d) != 0) return NULL;
  return d;
}

static int Threads(void) { /* this process's thread count, from /proc/self/status */
  char line[256];
  int n = -1;
  FILE* f = fopen("/proc/self/status", "r");
  if (f == NULL) return -1;
  while (fgets(line, sizeof line, f) != NULL) {
    if (strncmp(line, "Threads:", 8) == 0) n = atoi(line + 8);
  }
  fclose(f);
  return n;
}

struct Served {
  gpusched_dispatcher* d;
  int fd;
  atomic_int done, errors, max_threads;
  atomic_int seen[kRequests + 1];            /* by request id: times completed */
  _Atomic uint64_t lease_ticket[kRequests + 1]; /* the lease each request got */
};

static void* Worker(void* arg) {
  struct Served* s = arg;
  gpusched_async_result r[16];
  while (atomic_load(&s->done) < kRequests && atomic_load(&s->errors) == 0) {
    struct pollfd p = {s->fd, POLLIN, 0};
    size_t n = 0;
    if (poll(&p, 1, 100) <= 0) continue;
    if (gpusched_dispatcher_poll_async(s->d, r, 16, &n) != 0) atomic_fetch_add(&s->errors, 1);
    for (size_t i = 0; i < n; ++i) {
      const uint64_t id = r[i].request;
      if (id == 0 || id > kRequests || r[i].status != 0) {
        fprintf(stderr, "request %llu: status %d (%s)\n", (unsigned long long)id, r[i].status,
                r[i].message);
        atomic_fetch_add(&s->errors, 1);
        continue;
      }
      atomic_fetch_add(&s->seen[id], 1);
      atomic_store(&s->lease_ticket[id], r[i].lease.ticket);
      const int threads = Threads();
      if (threads > atomic_load(&s->max_threads)) atomic_store(&s->max_threads, threads);
      if (gpusched_dispatcher_release(s->d, &r[i].lease, GPUSCHED_SUCCEEDED) != 0) {
        atomic_fetch_add(&s->errors, 1);
      }
      atomic_fetch_add(&s->done, 1);
    }
  }
  return NULL;
}

static int Issue42_CN113051059B_Claims1And5_TenThousandQueuedRequestsOnFourThreads(void) {
  static struct Served s; /* 160 KiB: not on the stack */
  pthread_t workers[kWorkers];
  uint64_t id = 0;
  int32_t fd = -1;
  gpusched_service_metrics m;
  s.d = Slots(kGpus, 0);
  EXPECT(s.d != NULL);
  EXPECT(gpusched_dispatcher_event_fd(s.d, &fd) == 0 && fd >= 0);
  s.fd = fd;
  /* The threads before: 1, or more where a sanitizer runs its own (TSan's background thread). */
  const int threads_before = Threads();
  const double t0 = NowMs();
  for (int i = 1; i <= kRequests; ++i) {
    EXPECT(gpusched_dispatcher_acquire_async(s.d, "infer", 0, 0, &id) == 0);
    EXPECT(id == (uint64_t)i); /* ids count up from 1 */
  }
  const int threads_queued = Threads();
  EXPECT(threads_queued == threads_before); /* 10,000 queued requests, no thread started */
  for (int i = 0; i < kWorkers; ++i) EXPECT(pthread_create(&workers[i], NULL, Worker, &s) == 0);
  for (int i = 0; i < kWorkers; ++i) pthread_join(workers[i], NULL);
  EXPECT(atomic_load(&s.errors) == 0);
  EXPECT(atomic_load(&s.done) == kRequests);
  for (int i = 1; i <= kRequests; ++i) {
    EXPECT(atomic_load(&s.seen[i]) == 1); /* none lost, none twice */
    /* FIFO: lease tickets count up in grant order, so request i was granted after i - 1. */
    if (i > 1) EXPECT(atomic_load(&s.lease_ticket[i]) > atomic_load(&s.lease_ticket[i - 1]));
  }
  EXPECT(atomic_load(&s.max_threads) <= threads_before + kWorkers);
  EXPECT(gpusched_dispatcher_service_metrics(s.d, "infer", &m) == 0);
  EXPECT(m.completed == kRequests && m.queue_ms_max > 0); /* queue time counts from queueing */
  EXPECT(gpusched_dispatcher_destroy(s.d) == 0);
  printf("  %d async requests on %d threads: each once, FIFO, %.0f ms, at most %d threads, "
         "queue wait max %.1f ms\n", kRequests, kWorkers, NowMs() - t0,
         atomic_load(&s.max_threads), m.queue_ms_max);
  return 0;
}

/* Polls `d` until a result comes (at most 2 s); 0 when one did. */
static int PollOne(gpusched_dispatcher* d, gpusched_async_result* r) {
  int32_t fd = -1;
  size_t n = 0;
  if (gpusched_dispatcher_event_fd(d, &fd) != 0) return 1;
  for (int i = 0; i < 200 && n == 0; ++i) {
    struct pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, 10) < 0) return 1;
    if (gpusched_dispatcher_poll_async(d, r, 1, &n) != 0) return 1;
  }
  return n == 1 ? 0 : 1;
}

static int Issue42_AsyncDeadlineAndTimeoutEndOnTheFdWithNoThread(void) {
  gpusched_dispatcher* d = Slots(1, 150);
  gpusched_async_result r;
  gpusched_lease held;
  uint64_t a = 0, b = 0;
  int32_t fd = -1, ready = 0;
  EXPECT(d != NULL);
  const int threads_before = Threads();
  EXPECT(gpusched_dispatcher_event_fd(d, &fd) == 0);
  EXPECT(gpusched_dispatcher_try_acquire(d, "infer", &held) == 0); /* the one slot */
  double t0 = NowMs();
  EXPECT(gpusched_dispatcher_acquire_async(d, "infer", 40, 0, &a) == 0);
  EXPECT(gpusched_dispatcher_acquire_async(d, "infer", 0, 0, &b) == 0);
  EXPECT(gpusched_dispatcher_wait_async(d, 2000, &ready) == 0 && ready == 1); /* the fd fires */
  EXPECT(PollOne(d, &r) == 0);
  EXPECT(r.request == a && r.status == GPUSCHED_E_DEADLINE_EXCEEDED);
  EXPECT(strstr(r.message, "deadline_ms") != NULL);
  EXPECT(NowMs() - t0 >= 39 && NowMs() - t0 < 149); /* before the 150 ms timeout */
  EXPECT(PollOne(d, &r) == 0); /* b: the dispatcher's acquire_timeout_ms 150 */
  EXPECT(r.request == b && r.status == GPUSCHED_E_UNAVAILABLE);
  EXPECT(strstr(r.message, "acquire_timeout_ms") != NULL);
  EXPECT(NowMs() - t0 >= 149);
  EXPECT(Threads() == threads_before);
  EXPECT(gpusched_dispatcher_wait_async(d, 20, &ready) == 0 && ready == 0); /* nothing left */
  EXPECT(gpusched_dispatcher_release(d, &held, GPUSCHED_SUCCEEDED) == 0);
  EXPECT(gpusched_dispatcher_destroy(d) == 0);
  printf("  deadline_ms and acquire_timeout_ms end queued requests on time, no thread\n");
  return 0;
}

static int Issue42_AsyncCancelEndsTheRequestAndLetsTheNextOneIn(void) {
  gpusched_dispatcher* d = Slots(1, 0);
  gpusched_async_result r;
  gpusched_lease held;
  uint64_t a = 0, b = 0;
  EXPECT(d != NULL);
  EXPECT(gpusched_dispatcher_try_acquire(d, "infer", &held) == 0);
  EXPECT(gpusched_dispatcher_acquire_async(d, "infer", 0, 0, &a) == 0);
  EXPECT(gpusched_dispatcher_acquire_async(d, "infer", 0, 0, &b) == 0);
  EXPECT(gpusched_dispatcher_cancel_async(d, a) == 0);
  EXPECT(PollOne(d, &r) == 0);
  EXPECT(r.request == a && r.status == GPUSCHED_E_CANCELLED);
  EXPECT_ERROR(gpusched_dispatcher_cancel_async(d, a), GPUSCHED_E_NOT_FOUND, "request: 1 is not queued");
  EXPECT(gpusched_dispatcher_release(d, &held, GPUSCHED_SUCCEEDED) == 0);
  EXPECT(PollOne(d, &r) == 0); /* the release granted b */
  EXPECT(r.request == b && r.status == 0 && r.lease.gpu == 0);
  EXPECT_ERROR(gpusched_dispatcher_cancel_async(d, b), GPUSCHED_E_NOT_FOUND, "completed already");
  EXPECT(gpusched_dispatcher_release(d, &r.lease, GPUSCHED_SUCCEEDED) == 0);
  EXPECT(gpusched_dispatcher_destroy(d) == 0);
  printf("  cancel: CANCELLED once, then NOT_FOUND; the next request gets the GPU\n");
  return 0;
}

static int Issue42_AsyncDrainGivesEachQueuedRequestDrainingOnce(void) {
  gpusched_dispatcher* d = Slots(1, 0);
  gpusched_async_result r[8];
  gpusched_lease held;
  uint64_t id = 0;
  size_t n = 0;
  EXPECT(d != NULL);
  EXPECT(gpusched_dispatcher_try_acquire(d, "infer", &held) == 0);
  for (int i = 0; i < 3; ++i) EXPECT(gpusched_dispatcher_acquire_async(d, "infer", 0, 0, &id) == 0);
  EXPECT(gpusched_dispatcher_drain(d, 0) == GPUSCHED_E_DEADLINE_EXCEEDED); /* `held` is out */
  EXPECT(gpusched_dispatcher_poll_async(d, r, 8, &n) == 0);
  EXPECT(n == 3);
  for (size_t i = 0; i < n; ++i) {
    EXPECT(r[i].request == i + 1 && r[i].status == GPUSCHED_E_DRAINING);
    EXPECT(strstr(r[i].message, "draining") != NULL);
  }
  EXPECT(gpusched_dispatcher_release(d, &held, GPUSCHED_SUCCEEDED) == 0);
  EXPECT(gpusched_dispatcher_poll_async(d, r, 8, &n) == 0 && n == 0); /* once only */
  EXPECT(gpusched_dispatcher_acquire_async(d, "infer", 0, 0, &id) == 0); /* after: DRAINING */
  EXPECT(gpusched_dispatcher_poll_async(d, r, 8, &n) == 0);
  EXPECT(n == 1 && r[0].status == GPUSCHED_E_DRAINING);
  EXPECT(gpusched_dispatcher_drain(d, 0) == 0);
  EXPECT(gpusched_dispatcher_destroy(d) == 0);
  printf("  drain: each queued request DRAINING once, and so is a new one\n");
  return 0;
}

static int Issue42_AsyncShutdownAndDestroyEndQueuedRequests(void) {
  gpusched_dispatcher* d = Slots(1, 0);
  gpusched_async_result r[4];
  gpusched_lease held;
  uint64_t id = 0;
  size_t n = 0;
  EXPECT(d != NULL);
  EXPECT(gpusched_dispatcher_try_acquire(d, "infer", &held) == 0);
  EXPECT(gpusched_dispatcher_acquire_async(d, "infer", 0, 0, &id) == 0);
  EXPECT(gpusched_dispatcher_shutdown(d, 1) == 0);
  EXPECT(gpusched_dispatcher_poll_async(d, r, 4, &n) == 0);
  EXPECT(n == 1 && r[0].status == GPUSCHED_E_FAILED_PRECONDITION);
  EXPECT(gpusched_dispatcher_shutdown(d, 0) == 0);
  /* Destroy with a granted result not yet polled: refused (its lease is out). */
  EXPECT(gpusched_dispatcher_release(d, &held, GPUSCHED_SUCCEEDED) == 0);
  EXPECT(gpusched_dispatcher_acquire_async(d, "infer", 0, 0, &id) == 0); /* granted at once */
  EXPECT(gpusched_dispatcher_acquire_async(d, "infer", 0, 0, &id) == 0); /* queued */
  EXPECT_ERROR(gpusched_dispatcher_destroy(d), GPUSCHED_E_FAILED_PRECONDITION, "lease(s) still out");
  EXPECT(gpusched_dispatcher_poll_async(d, r, 4, &n) == 0);
  EXPECT(n == 1 && r[0].status == 0);
  EXPECT(gpusched_dispatcher_release(d, &r[0].lease, GPUSCHED_SUCCEEDED) == 0);
  EXPECT(PollOne(d, r) == 0 && r[0].status == 0); /* the queued one got the GPU */
  EXPECT(gpusched_dispatcher_release(d, &r[0].lease, GPUSCHED_SUCCEEDED) == 0);
  /* Destroy with 100 requests queued (the GPU out of service, so none is granted): they end
   * with it, and nothing is left to release. */
  EXPECT(gpusched_dispatcher_set_gpu_enabled(d, 0, 0) == 0);
  for (int i = 0; i < 100; ++i) EXPECT(gpusched_dispatcher_acquire_async(d, "infer", 0, 0, &id) == 0);
  EXPECT(gpusched_dispatcher_poll_async(d, r, 4, &n) == 0 && n == 0);
  EXPECT(gpusched_dispatcher_destroy(d) == 0); /* 100 still queued */
  EXPECT_ERROR(gpusched_dispatcher_poll_async(d, r, 1, &n), GPUSCHED_E_INVALID_ARGUMENT,
               "dispatcher: not a live handle");
  printf("  shutdown fails queued requests; destroy refused while a granted result is "
         "unpolled, and ends queued ones\n");
  return 0;
}

static void* WaitsLong(void* arg) {
  int32_t ready = 0;
  (void)gpusched_dispatcher_wait_async((gpusched_dispatcher*)arg, 10000, &ready);
  return NULL;
}

static int Issue42_AsyncDestroyWakesAWaiter(void) {
  gpusched_dispatcher* d = Slots(1, 0);
  pthread_t waiter;
  EXPECT(d != NULL);
  EXPECT(pthread_create(&waiter, NULL, WaitsLong, d) == 0);
  SleepMs(50);
  const double t0 = NowMs();
  EXPECT(gpusched_dispatcher_destroy(d) == 0);
  EXPECT(NowMs() - t0 < 5000); /* not the waiter's 10 s */
  pthread_join(waiter, NULL);
  printf("  destroy wakes a thread in gpusched_dispatcher_wait_async (%.0f ms)\n", NowMs() - t0);
  return 0;
}

static int Issue42_AsyncBadArgumentsNameTheArgument(void) {
  gpusched_dispatcher* d = Slots(1, 0);
  gpusched_async_result r;
  uint64_t id = 0;
  int32_t fd = 0;
  size_t n = 0;
  EXPECT(d != NULL);
  EXPECT_ERROR(gpusched_dispatcher_acquire_async(NULL, "infer", 0, 0, &id), GPUSCHED_E_INVALID_ARGUMENT, "dispatcher");
  EXPECT_ERROR(gpusched_dispatcher_acquire_async(d, NULL, 0, 0, &id), GPUSCHED_E_INVALID_ARGUMENT, "service");
  EXPECT_ERROR(gpusched_dispatcher_acquire_async(d, "infer", 0, 0, NULL), GPUSCHED_E_INVALID_ARGUMENT, "request_out");
  EXPECT_ERROR(gpusched_dispatcher_acquire_async(d, "infer", -1, 0, &id), GPUSCHED_E_INVALID_ARGUMENT, "deadline_ms: must be >= 0 (0: none), got -1");
  EXPECT_ERROR(gpusched_dispatcher_acquire_async(d, "infer", 0, -2, &id), GPUSCHED_E_INVALID_ARGUMENT, "expected_ms");
  EXPECT_ERROR(gpusched_dispatcher_acquire_async(d, "nope", 0, 0, &id), GPUSCHED_E_NOT_FOUND, "nope");
  EXPECT_ERROR(gpusched_dispatcher_event_fd(d, NULL), GPUSCHED_E_INVALID_ARGUMENT, "fd_out");
  EXPECT_ERROR(gpusched_dispatcher_event_fd(NULL, &fd), GPUSCHED_E_INVALID_ARGUMENT, "dispatcher");
  EXPECT_ERROR(gpusched_dispatcher_poll_async(d, NULL, 1, &n), GPUSCHED_E_INVALID_ARGUMENT, "out");
  EXPECT_ERROR(gpusched_dispatcher_poll_async(d, &r, 1, NULL), GPUSCHED_E_INVALID_ARGUMENT, "n_out");
  EXPECT_ERROR(gpusched_dispatcher_poll_async(d, &r, 0, &n), GPUSCHED_E_INVALID_ARGUMENT, "cap: must be >= 1");
  EXPECT_ERROR(gpusched_dispatcher_cancel_async(d, 12345), GPUSCHED_E_NOT_FOUND, "request: 12345 is not queued");
  EXPECT_ERROR(gpusched_dispatcher_cancel_async(d, 0), GPUSCHED_E_NOT_FOUND, "request: 0");
  EXPECT_ERROR(gpusched_dispatcher_wait_async(d, -1, NULL), GPUSCHED_E_INVALID_ARGUMENT, "timeout_ms: must be in [0, 2147483647], got -1");
  EXPECT_ERROR(gpusched_dispatcher_wait_async(d, 1LL << 40, NULL), GPUSCHED_E_INVALID_ARGUMENT, "timeout_ms");
  EXPECT(gpusched_dispatcher_poll_async(d, &r, 1, &n) == 0 && n == 0); /* nothing was queued */
  EXPECT(gpusched_dispatcher_destroy(d) == 0);
  EXPECT_ERROR(gpusched_dispatcher_acquire_async(d, "infer", 0, 0, &id), GPUSCHED_E_INVALID_ARGUMENT, "not a live handle");
  printf("  bad arguments: each named\n");
  return 0;
}

int main(void) {
  int failed = 0;
  failed |= Issue42_AsyncBadArgumentsNameTheArgument();
  failed |= Issue42_AsyncDeadlineAndTimeoutEndOnTheFdWithNoThread();
  failed |= Issue42_AsyncCancelEndsTheRequestAndLetsTheNextOneIn();
  failed |= Issue42_AsyncDrainGivesEachQueuedRequestDrainingOnce();
  failed |= Issue42_AsyncShutdownAndDestroyEndQueuedRequests();
  failed |= Issue42_AsyncDestroyWakesAWaiter();
  failed |= Issue42_CN113051059B_Claims1And5_TenThousandQueuedRequestsOnFourThreads();
  if (failed) return 1;
  printf("c_abi_async_test: ok\n");
  return 0;
}
