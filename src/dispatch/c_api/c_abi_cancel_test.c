/* Deadlines, cancellation and handle checks of the C ABI, for both policies: a blocked
 * acquire that another thread cancels, one whose deadline passes, one that a release wakes,
 * a cancel handle destroyed under a waiting acquire, and bad arguments and handles refused
 * with error codes. C11 + POSIX threads. Waits are on flags another thread sets; the only
 * timing asserted is loose (a cancel or release ends a wait well before a 10 s deadline). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "c_abi_expect.h"
#include "c_abi_time.h"
#include "gpusched_c.h"

/* One GPU, at most one lease on it: a second acquire blocks while the first is out. */
static gpusched_dispatcher* OneSlot(const char* policy) {
  gpusched_dispatcher_options o;
  gpusched_service_config service = {"infer", 20, 10, 5};
  gpusched_dispatcher* d = NULL;
  memset(&o, 0, sizeof o);
  o.gpu_count = 1;
  o.max_per_gpu = 1;
  if (gpusched_dispatcher_create_ex(policy, NULL, &o, &service, 1, &d) != 0) return NULL;
  return d;
}

struct Waiter {
  gpusched_dispatcher* d;
  gpusched_cancel* cancel;
  int64_t deadline_ms;
  atomic_int started, rc;
  double elapsed_ms;
  gpusched_lease lease;
};

static void* Wait(void* arg) {
  struct Waiter* w = arg;
  atomic_store(&w->started, 1);
  const double t0 = NowMs();
  atomic_store(&w->rc, gpusched_dispatcher_acquire_ex(w->d, "infer", w->deadline_ms, w->cancel,
                                                      0, &w->lease));
  w->elapsed_ms = NowMs() - t0;
  return NULL;
}

static void StartWaiter(struct Waiter* w, pthread_t* t) {
  atomic_store(&w->started, 0);
  atomic_store(&w->rc, -1);
  pthread_create(t, NULL, Wait, w);
  while (!atomic_load(&w->started)) SleepMs(1);
  SleepMs(30); /* let it block; the result does not depend on whether it has */
}

static int CancelEndsABlockedAcquire(const char* policy) {
  gpusched_dispatcher* d = OneSlot(policy);
  gpusched_lease held;
  gpusched_cancel* c = NULL;
  struct Waiter w;
  pthread_t t;
  EXPECT(d != NULL);
  EXPECT(gpusched_dispatcher_acquire(d, "infer", &held) == 0);
  EXPECT(gpusched_cancel_create(&c) == 0);
  memset(&w, 0, sizeof w);
  w.d = d;
  w.cancel = c;
  w.deadline_ms = 10000;
  StartWaiter(&w, &t);
  EXPECT(atomic_load(&w.rc) == -1); /* still blocked */
  EXPECT(gpusched_cancel_fire(c) == 0);
  pthread_join(t, NULL);
  EXPECT(atomic_load(&w.rc) == GPUSCHED_E_CANCELLED);
  EXPECT(strstr(gpusched_last_error(), "") != NULL);
  EXPECT(w.elapsed_ms < 5000);
  {
    int32_t fired = 0;
    EXPECT(gpusched_cancel_fired(c, &fired) == 0 && fired == 1);
  }
  /* A fired handle fails the next acquire at once, even with a GPU free; reset clears it. */
  EXPECT(gpusched_dispatcher_release(d, &held, GPUSCHED_SUCCEEDED) == 0);
  EXPECT(gpusched_dispatcher_acquire_ex(d, "infer", 0, c, 0, &held) == GPUSCHED_E_CANCELLED);
  EXPECT(gpusched_cancel_reset(c) == 0);
  EXPECT(gpusched_dispatcher_acquire_ex(d, "infer", 0, c, 0, &held) == 0);
  EXPECT(gpusched_dispatcher_release(d, &held, GPUSCHED_SUCCEEDED) == 0);
  EXPECT(gpusched_cancel_destroy(c) == 0);
  EXPECT(gpusched_dispatcher_destroy(d) == 0);
  return 0;
}

static int DeadlineEndsABlockedAcquire(const char* policy) {
  gpusched_dispatcher* d = OneSlot(policy);
  gpusched_lease held, lease;
  double t0, elapsed;
  int rc;
  EXPECT(d != NULL);
  EXPECT(gpusched_dispatcher_acquire(d, "infer", &held) == 0);
  t0 = NowMs();
  rc = gpusched_dispatcher_acquire_ex(d, "infer", 100, NULL, 0, &lease);
  elapsed = NowMs() - t0;
  EXPECT(rc == GPUSCHED_E_DEADLINE_EXCEEDED);
  EXPECT(strstr(gpusched_last_error(), "deadline_ms 100") != NULL);
  EXPECT(elapsed >= 99 && elapsed < 5000);
  /* A deadline that is not reached does not matter. */
  EXPECT(gpusched_dispatcher_release(d, &held, GPUSCHED_SUCCEEDED) == 0);
  EXPECT(gpusched_dispatcher_acquire_ex(d, "infer", 10000, NULL, 5, &lease) == 0);
  EXPECT(gpusched_dispatcher_release(d, &lease, GPUSCHED_SUCCEEDED) == 0);
  EXPECT(gpusched_dispatcher_destroy(d) == 0);
  return 0;
}

/* gpusched: a release wakes the waiter at once (the literal policy would wait for try_time). */
static int ReleaseWakesABlockedAcquire(void) {
  gpusched_dispatcher* d = OneSlot(NULL);
  gpusched_lease held;
  struct Waiter w;
  pthread_t t;
  double t0;
  EXPECT(d != NULL);
  EXPECT(gpusched_dispatcher_acquire(d, "infer", &held) == 0);
  memset(&w, 0, sizeof w);
  w.d = d;
  w.deadline_ms = 10000;
  StartWaiter(&w, &t);
  t0 = NowMs();
  EXPECT(gpusched_dispatcher_release(d, &held, GPUSCHED_SUCCEEDED) == 0);
  pthread_join(t, NULL);
  EXPECT(atomic_load(&w.rc) == 0);
  EXPECT(NowMs() - t0 < 500); /* not the 1 s re-check period */
  EXPECT(gpusched_dispatcher_release(d, &w.lease, GPUSCHED_SUCCEEDED) == 0);
  EXPECT(gpusched_dispatcher_destroy(d) == 0);
  return 0;
}

/* Destroying a cancel handle fires it: the acquire waiting with it ends, then it is freed. */
static int DestroyingACancelEndsItsAcquire(void) {
  gpusched_dispatcher* d = OneSlot(NULL);
  gpusched_lease held;
  gpusched_cancel* c = NULL;
  struct Waiter w;
  pthread_t t;
  EXPECT(d != NULL);
  EXPECT(gpusched_dispatcher_acquire(d, "infer", &held) == 0);
  EXPECT(gpusched_cancel_create(&c) == 0);
  memset(&w, 0, sizeof w);
  w.d = d;
  w.cancel = c;
  StartWaiter(&w, &t);
  EXPECT(gpusched_cancel_destroy(c) == 0);
  pthread_join(t, NULL);
  EXPECT(atomic_load(&w.rc) == GPUSCHED_E_CANCELLED);
  /* The freed handle is refused now, not used. */
  EXPECT(gpusched_cancel_fire(c) == GPUSCHED_E_INVALID_ARGUMENT);
  EXPECT(gpusched_dispatcher_acquire_ex(d, "infer", 0, c, 0, &w.lease) ==
         GPUSCHED_E_INVALID_ARGUMENT);
  EXPECT(gpusched_dispatcher_release(d, &held, GPUSCHED_SUCCEEDED) == 0);
  EXPECT(gpusched_dispatcher_destroy(d) == 0);
  return 0;
}

static int BadArgumentsAndHandlesAreRefused(void) {
  gpusched_dispatcher* d = OneSlot(NULL);
  gpusched_dispatcher* gone = OneSlot(NULL);
  gpusched_cancel* c = NULL;
  gpusched_lease lease;
  gpusched_dispatcher_options o;
  gpusched_service_config service = {"infer", 20, 10, 5};
  gpusched_dispatcher* made_up = (gpusched_dispatcher*)&o; /* not a handle */
  gpusched_dispatcher* x = NULL;
  uint64_t owner;
  int64_t fin;
  EXPECT(d != NULL && gone != NULL);
  EXPECT(gpusched_dispatcher_destroy(gone) == 0);
  EXPECT(gpusched_cancel_create(&c) == 0);
  EXPECT(gpusched_dispatcher_acquire_ex(NULL, "infer", 0, NULL, 0, &lease) ==
         GPUSCHED_E_INVALID_ARGUMENT);
  EXPECT(gpusched_dispatcher_acquire_ex(d, NULL, 0, NULL, 0, &lease) == GPUSCHED_E_INVALID_ARGUMENT);
  EXPECT(gpusched_dispatcher_acquire_ex(d, "infer", 0, NULL, 0, NULL) == GPUSCHED_E_INVALID_ARGUMENT);
  EXPECT(gpusched_dispatcher_acquire_ex(d, "infer", -1, NULL, 0, &lease) ==
         GPUSCHED_E_INVALID_ARGUMENT);
  EXPECT(strstr(gpusched_last_error(), "deadline_ms") != NULL);
  EXPECT(gpusched_dispatcher_acquire_ex(d, "infer", 0, NULL, NAN, &lease) ==
         GPUSCHED_E_INVALID_ARGUMENT);
  EXPECT(gpusched_dispatcher_acquire_ex(d, "infer", 0, NULL, -3, &lease) ==
         GPUSCHED_E_INVALID_ARGUMENT);
  EXPECT(gpusched_dispatcher_acquire_ex(d, "nope", 0, NULL, 0, &lease) == GPUSCHED_E_NOT_FOUND);
  /* Destroyed, made-up and wrong-kind handles: errors, not crashes. */
  EXPECT(gpusched_dispatcher_acquire(gone, "infer", &lease) == GPUSCHED_E_INVALID_ARGUMENT);
  EXPECT(strstr(gpusched_last_error(), "not a live handle") != NULL);
  EXPECT(gpusched_dispatcher_mark(made_up, 0, &owner, &fin) == GPUSCHED_E_INVALID_ARGUMENT);
  EXPECT(gpusched_dispatcher_shutdown(made_up, 1) == GPUSCHED_E_INVALID_ARGUMENT);
  EXPECT(gpusched_dispatcher_destroy(made_up) == GPUSCHED_E_INVALID_ARGUMENT);
  EXPECT(gpusched_dispatcher_mark((gpusched_dispatcher*)c, 0, &owner, &fin) ==
         GPUSCHED_E_INVALID_ARGUMENT);
  EXPECT(gpusched_dispatcher_acquire_ex(d, "infer", 0, (gpusched_cancel*)d, 0, &lease) ==
         GPUSCHED_E_INVALID_ARGUMENT);
  EXPECT(gpusched_cancel_fire(NULL) == GPUSCHED_E_INVALID_ARGUMENT);
  EXPECT(gpusched_cancel_fire((gpusched_cancel*)&o) == GPUSCHED_E_INVALID_ARGUMENT);
  EXPECT(gpusched_cancel_fired(c, NULL) == GPUSCHED_E_INVALID_ARGUMENT);
  EXPECT(gpusched_cancel_create(NULL) == GPUSCHED_E_INVALID_ARGUMENT);
  EXPECT(gpusched_cancel_destroy(NULL) == 0);
  /* Policy and shared-marks names. */
  memset(&o, 0, sizeof o);
  o.gpu_count = 1;
  EXPECT(gpusched_dispatcher_create_ex("fifo", NULL, &o, &service, 1, &x) ==
         GPUSCHED_E_INVALID_ARGUMENT);
  EXPECT(strstr(gpusched_last_error(), "policy") != NULL);
  EXPECT(gpusched_dispatcher_create_ex(NULL, "no-slash", &o, &service, 1, &x) ==
         GPUSCHED_E_INVALID_ARGUMENT);
  { /* issue 42: the literal policy takes shared marks too (CN113051059B claim 1) */
    char segment[64];
    snprintf(segment, sizeof segment, "/gpusched-cancel-test-%d", (int)getpid());
    EXPECT(gpusched_dispatcher_create_ex("literal", segment, &o, &service, 1, &x) == 0);
    EXPECT(gpusched_dispatcher_destroy(x) == 0);
    EXPECT(gpusched_shared_marks_unlink(segment) == 0);
  }
  o.literal_release = 1; /* a claim flag: the literal policy's only */
  EXPECT(gpusched_dispatcher_create(&o, &service, 1, &x) == GPUSCHED_E_INVALID_ARGUMENT);
  EXPECT(strstr(gpusched_last_error(), "options.literal_release") != NULL);
  EXPECT(gpusched_dispatcher_create_ex("literal", NULL, &o, &service, 1, &x) == 0);
  EXPECT(gpusched_dispatcher_destroy(x) == 0);
  EXPECT(gpusched_shared_marks_unlink(NULL) == GPUSCHED_E_INVALID_ARGUMENT);
  EXPECT(gpusched_shared_marks_unlink("/gpusched-no-such-segment") == GPUSCHED_E_NOT_FOUND);
  EXPECT(gpusched_cancel_destroy(c) == 0);
  EXPECT(gpusched_dispatcher_destroy(d) == 0);
  return 0;
}

/* The default policy is gpusched: with two idle GPUs the second request goes to the other GPU,
 * and the mark names the lease expected to finish last. */
static int DefaultIsGpusched(void) {
  gpusched_dispatcher_options o;
  gpusched_service_config service = {"infer", 20, 10, 5};
  gpusched_dispatcher* d = NULL;
  gpusched_lease a, b;
  uint64_t owner = 0;
  int64_t fin = 0;
  memset(&o, 0, sizeof o);
  o.gpu_count = 2;
  EXPECT(gpusched_dispatcher_create(&o, &service, 1, &d) == 0);
  EXPECT(gpusched_dispatcher_acquire_ex(d, "infer", 0, NULL, 50, &a) == 0);
  EXPECT(gpusched_dispatcher_acquire(d, "infer", &b) == 0);
  EXPECT(a.gpu == 0 && b.gpu == 1); /* the literal policy would co-run b beside a (claim 1) */
  EXPECT(gpusched_dispatcher_mark(d, 0, &owner, &fin) == 0);
  EXPECT(owner == a.ticket);
  EXPECT(gpusched_dispatcher_release(d, &a, GPUSCHED_SUCCEEDED) == 0);
  EXPECT(gpusched_dispatcher_release(d, &b, GPUSCHED_SUCCEEDED) == 0);
  EXPECT(gpusched_dispatcher_mark(d, 0, &owner, &fin) == 0);
  EXPECT(owner == 0);
  EXPECT(gpusched_dispatcher_destroy(d) == 0);
  return 0;
}

int main(void) {
  int failed = 0;
  failed |= DefaultIsGpusched();
  failed |= CancelEndsABlockedAcquire(NULL);
  failed |= CancelEndsABlockedAcquire("literal");
  failed |= DeadlineEndsABlockedAcquire(NULL);
  failed |= DeadlineEndsABlockedAcquire("literal");
  failed |= ReleaseWakesABlockedAcquire();
  failed |= DestroyingACancelEndsItsAcquire();
  failed |= BadArgumentsAndHandlesAreRefused();
  if (failed) return 1;
  printf("c_abi_cancel_test: ok\n");
  return 0;
}
