/* Issue 42, item 5, through the C ABI (GPUSCHED_C_1.4): gpusched_dispatcher_create_ex2 with
 * per-GPU memory and seed speeds, gpusched_dispatcher_acquire2 with a request's GPU memory, model
 * and priority. The literal policy refuses each input, naming it. C11 + POSIX threads; the
 * priority test starts its waiters one at a time, each once the give-up counter says it waits. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "c_abi_expect.h"
#include "c_abi_request.h"
#include "c_abi_time.h"
#include "gpusched_c.h"

/* Two GPUs of 4096 and 16384 MiB; GPU1 seeded twice as slow; max_per_gpu as given. */
static gpusched_dispatcher* TwoGpus(const char* policy, int32_t max_per_gpu, int with_memory) {
  static const int64_t memory[2] = {4096, 16384};
  static const double speed[2] = {1, 2};
  gpusched_dispatcher_options o;
  gpusched_placement_options p;
  gpusched_service_config service = {"infer", 20, 10, 5};
  gpusched_dispatcher* d = NULL;
  memset(&o, 0, sizeof o);
  memset(&p, 0, sizeof p);
  o.gpu_count = 2;
  o.max_per_gpu = max_per_gpu;
  p.struct_size = sizeof p;
  p.gpu_memory_mib = with_memory ? memory : NULL;
  p.gpu_speed = with_memory ? speed : NULL;
  p.affinity_margin_ms = policy == NULL ? 50 : 0; /* the literal policy has no affinity */
  if (gpusched_dispatcher_create_ex2(policy, NULL, &o, &service, 1, &p, &d) != 0) return NULL;
  return d;
}

static int Issue42_ExpectedMemoryFitsOrWaits(void) {
  gpusched_dispatcher* d = TwoGpus(NULL, 0, 1);
  gpusched_request big = Request(10000, NULL, 0), huge = Request(20000, NULL, 0);
  gpusched_lease a, b;
  EXPECT(d != NULL);
  EXPECT(gpusched_dispatcher_acquire2(d, &big, &a) == 0);
  EXPECT(a.gpu == 1); /* fits only GPU1 */
  big.deadline_ms = 30; /* 4096 and 6384 MiB free: it waits, then its deadline passes */
  EXPECT_ERROR(gpusched_dispatcher_acquire2(d, &big, &b), GPUSCHED_E_DEADLINE_EXCEEDED,
               "deadline_ms");
  EXPECT_ERROR(gpusched_dispatcher_acquire2(d, &huge, &b), GPUSCHED_E_INVALID_ARGUMENT,
               "expected_mem_mib: 20000 MiB fits no GPU");
  EXPECT(gpusched_dispatcher_release(d, &a, GPUSCHED_SUCCEEDED) == 0);
  EXPECT(gpusched_dispatcher_acquire2(d, &big, &b) == 0 && b.gpu == 1);
  EXPECT(gpusched_dispatcher_release(d, &b, GPUSCHED_SUCCEEDED) == 0);
  huge.struct_size = 8;
  EXPECT_ERROR(gpusched_dispatcher_acquire2(d, &huge, &b), GPUSCHED_E_INVALID_ARGUMENT,
               "req.struct_size");
  EXPECT(gpusched_dispatcher_destroy(d) == 0);
  printf("  memory: fits GPU1, waits, never-fits refused\n");
  return 0;
}

static int Issue42_ModelAffinityWithinMargin(void) {
  gpusched_dispatcher* d = TwoGpus(NULL, 0, 0);
  gpusched_request m = Request(0, "resnet", 0);
  gpusched_lease a, b;
  EXPECT(d != NULL);
  EXPECT(gpusched_dispatcher_acquire2(d, &m, &a) == 0 && a.gpu == 0);
  /* GPU1 is idle, but GPU0 has resnet and finishes it within the 50 ms margin. */
  EXPECT(gpusched_dispatcher_acquire2(d, &m, &b) == 0 && b.gpu == 0);
  EXPECT(gpusched_dispatcher_release(d, &a, GPUSCHED_SUCCEEDED) == 0);
  EXPECT(gpusched_dispatcher_release(d, &b, GPUSCHED_SUCCEEDED) == 0);
  EXPECT(gpusched_dispatcher_destroy(d) == 0);
  printf("  affinity: resnet kept on GPU0\n");
  return 0;
}

typedef struct {
  gpusched_dispatcher* d;
  int32_t priority;
  atomic_int* order;
  int position;
} Waiter;

static void* WaitThenRelease(void* arg) {
  Waiter* w = (Waiter*)arg;
  gpusched_request r = Request(0, NULL, w->priority);
  gpusched_lease l;
  if (gpusched_dispatcher_acquire2(w->d, &r, &l) != 0) return NULL;
  w->position = atomic_fetch_add(w->order, 1);
  SleepMs(5);
  gpusched_dispatcher_release(w->d, &l, GPUSCHED_SUCCEEDED);
  return NULL;
}

/* Whether `n` requests of "infer" have had to wait (the give-up counter), within 10 s. */
static int WaitForGiveUps(gpusched_dispatcher* d, uint64_t n) {
  for (int i = 0; i < 1000; ++i) {
    gpusched_service_metrics m;
    if (gpusched_dispatcher_service_metrics(d, "infer", &m) == 0 && m.give_ups >= n) return 1;
    SleepMs(10);
  }
  return 0;
}

static int Issue42_PriorityOrder(void) {
  gpusched_dispatcher* d = TwoGpus(NULL, 1, 0);
  gpusched_lease a, b;
  gpusched_request plain = Request(0, NULL, 0);
  atomic_int order = 0;
  Waiter w[3] = {{d, 0, &order, -1}, {d, 7, &order, -1}, {d, 3, &order, -1}};
  pthread_t t[3];
  EXPECT(d != NULL);
  EXPECT(gpusched_dispatcher_acquire2(d, &plain, &a) == 0);
  EXPECT(gpusched_dispatcher_acquire2(d, &plain, &b) == 0);
  for (int i = 0; i < 3; ++i) {
    EXPECT(pthread_create(&t[i], NULL, WaitThenRelease, &w[i]) == 0);
    EXPECT(WaitForGiveUps(d, (uint64_t)i + 1)); /* it waits before the next arrives */
  }
  EXPECT(gpusched_dispatcher_release(d, &a, GPUSCHED_SUCCEEDED) == 0);
  for (int i = 0; i < 3; ++i) pthread_join(t[i], NULL);
  EXPECT(w[1].position == 0 && w[2].position == 1 && w[0].position == 2);
  EXPECT(gpusched_dispatcher_release(d, &b, GPUSCHED_SUCCEEDED) == 0);
  EXPECT(gpusched_dispatcher_destroy(d) == 0);
  printf("  priority: 7, 3, 0\n");
  return 0;
}

static int Issue42_LiteralPolicyRefusesPlacementInputs(void) {
  gpusched_dispatcher* d = TwoGpus("literal", 0, 0);
  gpusched_request r = Request(0, NULL, 2);
  gpusched_lease l;
  EXPECT(d != NULL);
  EXPECT_ERROR(gpusched_dispatcher_acquire2(d, &r, &l), GPUSCHED_E_INVALID_ARGUMENT,
               "request.priority");
  r = Request(0, "resnet", 0);
  EXPECT_ERROR(gpusched_dispatcher_acquire2(d, &r, &l), GPUSCHED_E_INVALID_ARGUMENT,
               "request.model");
  r = Request(0, NULL, 0);
  EXPECT(gpusched_dispatcher_acquire2(d, &r, &l) == 0); /* nothing it lacks: granted */
  EXPECT(gpusched_dispatcher_release(d, &l, GPUSCHED_SUCCEEDED) == 0);
  EXPECT(gpusched_dispatcher_destroy(d) == 0);
  EXPECT(TwoGpus("literal", 0, 1) == NULL);
  EXPECT(strstr(gpusched_last_error(), "placement.gpu_memory_mib") != NULL);
  printf("  literal: priority, model and gpu_memory_mib refused by name\n");
  return 0;
}

int main(void) {
  int failed = 0;
  failed |= Issue42_ExpectedMemoryFitsOrWaits();
  failed |= Issue42_ModelAffinityWithinMargin();
  failed |= Issue42_PriorityOrder();
  failed |= Issue42_LiteralPolicyRefusesPlacementInputs();
  if (failed) return 1;
  printf("c_abi_placement_test: ok\n");
  return 0;
}
