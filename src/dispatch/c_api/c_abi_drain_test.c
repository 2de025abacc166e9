/* Issue 42 through the C ABI, for both policies: a run whose fn fails is a failed request (it
 * returns GPUSCHED_E_RUN_FAILED, counts in `failed`, trains no cost); gpusched_dispatcher_drain
 * refuses new leases at once, ends the acquires waiting with GPUSCHED_E_DRAINING, waits for the
 * leases out (from acquire and from a run in progress), and names them when its deadline
 * passes; gpusched_dispatcher_try_acquire never waits. C11 + POSIX threads. Waits are on flags
 * another thread sets; the only timing asserted is loose (a try returns long before a 500 ms
 * retry period, a drain's 50 ms deadline is not cut short). */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "c_abi_expect.h"
#include "c_abi_time.h"
#include "gpusched_c.h"

/* One GPU, at most one lease on it; the service's retry period is try_ms. */
static gpusched_dispatcher* OneSlot(const char* policy, int64_t try_ms) {
  gpusched_dispatcher_options o;
  gpusched_service_config service = {"infer", 20, 10, try_ms};
  gpusched_dispatcher* d = NULL;
  memset(&o, 0, sizeof o);
  o.gpu_count = 1;
  o.max_per_gpu = 1;
  if (try_ms >= 20) { /* claim 7: wait < cost */
    service.cost_time_ms = 1000;
    service.wait_time_ms = 600;
  }
  if (gpusched_dispatcher_create_ex(policy, NULL, &o, &service, 1, &d) != 0) return NULL;
  return d;
}

static const char* Name(const char* policy) { return policy != NULL ? policy : "gpusched"; }

/* ---- a failing run function ---- */

static int32_t SleepsThenReturns(int32_t gpu, void* user) {
  (void)gpu;
  SleepMs(30);
  return *(const int32_t*)user;
}

static int Issue42_CN113051059B_Claim6_FailedRunIsCountedAndTrainsNothing(const char* policy) {
  gpusched_dispatcher* d = OneSlot(policy, 5);
  gpusched_service_metrics m;
  gpusched_gpu_metrics g;
  gpusched_lease lease;
  int32_t fails = 3, succeeds = 0, result = 0;
  EXPECT(d != NULL);
  EXPECT_ERROR(gpusched_dispatcher_run(d, "infer", SleepsThenReturns, &fails, &result),
               GPUSCHED_E_RUN_FAILED, "fn returned 3 on gpu 0");
  EXPECT(strstr(gpusched_last_error(), "released as GPUSCHED_FAILED") != NULL);
  EXPECT(result == 3);
  EXPECT(gpusched_dispatcher_service_metrics(d, "infer", &m) == 0);
  EXPECT(m.completed == 1 && m.failed == 1);
  EXPECT(m.cost_time_ms == 20.0); /* 30 ms of failed work trained nothing */
  EXPECT(gpusched_dispatcher_gpu_metrics(d, 0, &g) == 0);
  EXPECT(g.running == 0);
  EXPECT(gpusched_dispatcher_try_acquire(d, "infer", &lease) == 0); /* the GPU came back */
  EXPECT(gpusched_dispatcher_release(d, &lease, GPUSCHED_SUCCEEDED) == 0);
  /* The same run succeeding does train the cost: the check above can tell them apart. */
  EXPECT(gpusched_dispatcher_run(d, "infer", SleepsThenReturns, &succeeds, &result) == 0);
  EXPECT(result == 0);
  EXPECT(gpusched_dispatcher_service_metrics(d, "infer", &m) == 0);
  EXPECT(m.failed == 1 && m.cost_time_ms != 20.0);
  EXPECT(gpusched_dispatcher_destroy(d) == 0);
  printf("  failed run counted, cost kept (%s)\n", Name(policy));
  return 0;
}

/* ---- drain ---- */

struct Holder { /* holds a lease from its own thread until `release_now` */
  gpusched_dispatcher* d;
  atomic_int held, release_now, release_rc;
};

static void* Hold(void* arg) {
  struct Holder* h = arg;
  gpusched_lease lease;
  if (gpusched_dispatcher_acquire(h->d, "infer", &lease) != 0) {
    atomic_store(&h->held, -1);
    return NULL;
  }
  atomic_store(&h->held, 1);
  while (!atomic_load(&h->release_now)) SleepMs(1);
  atomic_store(&h->release_rc, gpusched_dispatcher_release(h->d, &lease, GPUSCHED_SUCCEEDED));
  return NULL;
}

struct Waiter { /* one acquire that waits; counts how often it returned */
  gpusched_dispatcher* d;
  atomic_int returns, rc;
};

static void* Wait(void* arg) {
  struct Waiter* w = arg;
  gpusched_lease lease;
  const int rc = gpusched_dispatcher_acquire_ex(w->d, "infer", 10000, NULL, 0, &lease);
  atomic_store(&w->rc, rc);
  atomic_fetch_add(&w->returns, 1);
  return NULL;
}

struct Drainer {
  gpusched_dispatcher* d;
  int64_t deadline_ms;
  atomic_int done, rc;
};

static void* Drain(void* arg) {
  struct Drainer* r = arg;
  atomic_store(&r->rc, gpusched_dispatcher_drain(r->d, r->deadline_ms));
  atomic_store(&r->done, 1);
  return NULL;
}

static atomic_int run_fn_calls;

static int32_t CountsCalls(int32_t gpu, void* user) {
  (void)gpu;
  (void)user;
  atomic_fetch_add(&run_fn_calls, 1);
  return 0;
}

/* Waits (up to 10 s) until `service` has given up at least once: an acquire is waiting. */
static int WaitForAWaiter(gpusched_dispatcher* d) {
  gpusched_service_metrics m;
  for (int i = 0; i < 10000; ++i) {
    if (gpusched_dispatcher_service_metrics(d, "infer", &m) != 0) return 0;
    if (m.give_ups >= 1) return 1;
    SleepMs(1);
  }
  return 0;
}

/* While the drain waits: new acquires, tries and runs are refused with the drain code, and the
 * drain cannot be undone. */
static int NewRequestsAreRefused(gpusched_dispatcher* d) {
  gpusched_lease lease;
  int32_t result = 0;
  EXPECT_ERROR(gpusched_dispatcher_acquire(d, "infer", &lease), GPUSCHED_E_DRAINING, "draining");
  EXPECT_ERROR(gpusched_dispatcher_acquire_ex(d, "infer", 5, NULL, 0, &lease), GPUSCHED_E_DRAINING,
               "draining");
  EXPECT_ERROR(gpusched_dispatcher_try_acquire(d, "infer", &lease), GPUSCHED_E_DRAINING,
               "draining");
  atomic_store(&run_fn_calls, 0);
  EXPECT_ERROR(gpusched_dispatcher_run(d, "infer", CountsCalls, NULL, &result),
               GPUSCHED_E_DRAINING, "draining");
  EXPECT(atomic_load(&run_fn_calls) == 0);
  EXPECT_ERROR(gpusched_dispatcher_shutdown(d, 0), GPUSCHED_E_DRAINING, "draining");
  return 0;
}

static int Issue42_CN113051059B_Claim1_DrainLetsTheLeaseOutFinish(const char* policy) {
  struct Holder h = {OneSlot(policy, 5), 0, 0, -1};
  struct Waiter w = {h.d, 0, -1};
  struct Drainer r = {h.d, 10000, 0, -1};
  pthread_t holder, waiter, drainer;
  EXPECT(h.d != NULL);
  EXPECT(pthread_create(&holder, NULL, Hold, &h) == 0);
  while (atomic_load(&h.held) == 0) SleepMs(1);
  EXPECT(atomic_load(&h.held) == 1);
  EXPECT(pthread_create(&waiter, NULL, Wait, &w) == 0);
  EXPECT(WaitForAWaiter(h.d));
  EXPECT(pthread_create(&drainer, NULL, Drain, &r) == 0);
  EXPECT(pthread_join(waiter, NULL) == 0); /* the drain ended its wait */
  EXPECT(atomic_load(&w.rc) == GPUSCHED_E_DRAINING && atomic_load(&w.returns) == 1);
  EXPECT(NewRequestsAreRefused(h.d) == 0);
  SleepMs(20);
  EXPECT(atomic_load(&r.done) == 0); /* still waiting for the held lease */
  atomic_store(&h.release_now, 1);
  EXPECT(pthread_join(holder, NULL) == 0);
  EXPECT(atomic_load(&h.release_rc) == 0);
  EXPECT(pthread_join(drainer, NULL) == 0);
  EXPECT(atomic_load(&r.rc) == GPUSCHED_OK);
  EXPECT(gpusched_dispatcher_destroy(h.d) == 0);
  printf("  drain: waiter failed once, new requests refused, drained (%s)\n", Name(policy));
  return 0;
}

static int Issue42_CN113051059B_Claim1_DrainTimesOutNamingTheLeaseOut(const char* policy) {
  gpusched_dispatcher* d = OneSlot(policy, 5);
  gpusched_lease lease;
  char ticket[64];
  double t0;
  EXPECT(d != NULL);
  EXPECT(gpusched_dispatcher_acquire(d, "infer", &lease) == 0);
  snprintf(ticket, sizeof ticket, "ticket %llu (gpu 0)", (unsigned long long)lease.ticket);
  t0 = NowMs();
  EXPECT_ERROR(gpusched_dispatcher_drain(d, 50), GPUSCHED_E_DEADLINE_EXCEEDED, ticket);
  EXPECT(NowMs() - t0 >= 45);
  EXPECT(strstr(gpusched_last_error(), "deadline_ms 50") != NULL);
  EXPECT_ERROR(gpusched_dispatcher_destroy(d), GPUSCHED_E_FAILED_PRECONDITION, "still out");
  EXPECT(NewRequestsAreRefused(d) == 0); /* still drained after the timeout */
  EXPECT(gpusched_dispatcher_release(d, &lease, GPUSCHED_SUCCEEDED) == 0);
  EXPECT(gpusched_dispatcher_drain(d, 0) == GPUSCHED_OK);
  EXPECT_ERROR(gpusched_dispatcher_drain(d, -1), GPUSCHED_E_INVALID_ARGUMENT, "deadline_ms");
  EXPECT(gpusched_dispatcher_destroy(d) == 0);
  EXPECT_ERROR(gpusched_dispatcher_drain(d, 0), GPUSCHED_E_INVALID_ARGUMENT, "not a live handle");
  printf("  drain timed out naming the lease (%s)\n", Name(policy));
  return 0;
}

struct Runner { /* a run whose fn holds its lease until `finish` */
  gpusched_dispatcher* d;
  atomic_int in_fn, finish, rc;
};

static int32_t HoldsUntilFinish(int32_t gpu, void* user) {
  struct Runner* r = user;
  (void)gpu;
  atomic_store(&r->in_fn, 1);
  while (!atomic_load(&r->finish)) SleepMs(1);
  return 0;
}

static void* Run(void* arg) {
  struct Runner* r = arg;
  int32_t result = 0;
  atomic_store(&r->rc, gpusched_dispatcher_run(r->d, "infer", HoldsUntilFinish, r, &result));
  return NULL;
}

static int Issue42_CN113051059B_Claim1_DrainWaitsForARunInProgress(const char* policy) {
  struct Runner r = {OneSlot(policy, 5), 0, 0, -1};
  pthread_t runner;
  EXPECT(r.d != NULL);
  EXPECT(pthread_create(&runner, NULL, Run, &r) == 0);
  while (!atomic_load(&r.in_fn)) SleepMs(1);
  EXPECT_ERROR(gpusched_dispatcher_drain(r.d, 20), GPUSCHED_E_DEADLINE_EXCEEDED, "in a run");
  atomic_store(&r.finish, 1);
  EXPECT(gpusched_dispatcher_drain(r.d, 10000) == GPUSCHED_OK);
  EXPECT(pthread_join(runner, NULL) == 0);
  EXPECT(atomic_load(&r.rc) == 0); /* the run that was in progress finished normally */
  EXPECT(gpusched_dispatcher_destroy(r.d) == 0);
  printf("  drain waited for a run in progress (%s)\n", Name(policy));
  return 0;
}

/* ---- try_acquire ---- */

static int Issue42_CN113051059B_Claim1_TryAcquireNeverWaits(const char* policy) {
  gpusched_dispatcher* d = OneSlot(policy, 500); /* an acquire would retry after 500 ms */
  gpusched_lease a, b;
  double t0;
  EXPECT(d != NULL);
  EXPECT(gpusched_dispatcher_try_acquire(d, "infer", &a) == 0);
  EXPECT(a.gpu == 0 && a.ticket != 0);
  t0 = NowMs();
  EXPECT_ERROR(gpusched_dispatcher_try_acquire(d, "infer", &b), GPUSCHED_E_BUSY, "try_acquire");
  EXPECT(NowMs() - t0 < 250);
  EXPECT(gpusched_dispatcher_release(d, &a, GPUSCHED_SUCCEEDED) == 0);
  EXPECT(gpusched_dispatcher_try_acquire(d, "infer", &b) == 0); /* free again: granted */
  EXPECT(gpusched_dispatcher_release(d, &b, GPUSCHED_SUCCEEDED) == 0);
  EXPECT_ERROR(gpusched_dispatcher_try_acquire(d, "nope", &b), GPUSCHED_E_NOT_FOUND, "nope");
  EXPECT_ERROR(gpusched_dispatcher_try_acquire(d, NULL, &b), GPUSCHED_E_INVALID_ARGUMENT, "service");
  EXPECT_ERROR(gpusched_dispatcher_try_acquire(d, "infer", NULL), GPUSCHED_E_INVALID_ARGUMENT, "out");
  EXPECT(gpusched_dispatcher_destroy(d) == 0);
  printf("  try_acquire: granted, busy at once, granted (%s)\n", Name(policy));
  return 0;
}

int main(void) {
  const char* policies[] = {NULL, "literal"};
  int failed = 0;
  for (int i = 0; i < 2; ++i) {
    failed |= Issue42_CN113051059B_Claim6_FailedRunIsCountedAndTrainsNothing(policies[i]);
    failed |= Issue42_CN113051059B_Claim1_DrainLetsTheLeaseOutFinish(policies[i]);
    failed |= Issue42_CN113051059B_Claim1_DrainTimesOutNamingTheLeaseOut(policies[i]);
    failed |= Issue42_CN113051059B_Claim1_DrainWaitsForARunInProgress(policies[i]);
    failed |= Issue42_CN113051059B_Claim1_TryAcquireNeverWaits(policies[i]);
  }
  if (failed) return 1;
  printf("c_abi_drain_test: ok\n");
  return 0;
}
