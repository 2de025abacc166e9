/* The C ABI as an embedding process uses it, with threads: destroy while other threads are
 * inside the library, releases that must be refused, bad arguments refused where they are
 * given, backpressure, and a chunk runtime shared by 4 threads. C11 + POSIX threads; run under
 * ASan and TSan too (ctest label `concurrency`). Every wait is on a condition another thread
 * sets, never on a sleep, so outcomes do not depend on timing. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "c_abi_expect.h"
#include "gpusched_c.h"


static gpusched_dispatcher* NewDispatcher(int32_t gpus, int32_t max_per_gpu, int64_t timeout_ms) {
  gpusched_dispatcher_options o;
  gpusched_service_config service = {"infer", 100, 50, 1};
  gpusched_dispatcher* d = NULL;
  memset(&o, 0, sizeof o);
  o.gpu_count = gpus;
  o.max_per_gpu = max_per_gpu;
  o.acquire_timeout_ms = timeout_ms;
  if (gpusched_dispatcher_create(&o, &service, 1, &d) != 0) return NULL;
  return d;
}

static void Pause(void) {
  struct timespec ts = {0, 100000}; /* 0.1 ms: only to yield while polling a flag */
  nanosleep(&ts, NULL);
}

/* ---- destroy while another thread is inside run, and while one waits in acquire ---- */

struct RunScene {
  gpusched_dispatcher* d;
  atomic_int in_fn, fn_done, waiter_done, waiter_rc;
};

static int32_t HoldUntilWaiterGaveUp(int32_t gpu, void* user) {
  struct RunScene* s = user;
  (void)gpu;
  atomic_store(&s->in_fn, 1);
  while (!atomic_load(&s->waiter_done)) Pause(); /* released by the waiter's failed acquire */
  atomic_store(&s->fn_done, 1);
  return 0;
}

static void* Runner(void* arg) {
  struct RunScene* s = arg;
  int32_t result = -1;
  if (gpusched_dispatcher_run(s->d, "infer", HoldUntilWaiterGaveUp, s, &result) != 0 ||
      result != 0) {
    atomic_store(&s->fn_done, -1);
  }
  return NULL;
}

static void* Waiter(void* arg) {
  struct RunScene* s = arg;
  gpusched_lease lease;
  /* The only GPU is held and capped at 1: this blocks until destroy shuts the dispatcher down
   * (or is refused at the gate when destroy came first). Either way: FAILED_PRECONDITION. */
  atomic_store(&s->waiter_rc, gpusched_dispatcher_acquire(s->d, "infer", &lease));
  atomic_store(&s->waiter_done, 1);
  return NULL;
}

static int DestroyWaitsForRunAndEndsWaitingAcquire(void) {
  struct RunScene s;
  pthread_t runner, waiter;
  memset(&s, 0, sizeof s);
  s.d = NewDispatcher(1, 1, 0);
  EXPECT(s.d != NULL);
  EXPECT(pthread_create(&runner, NULL, Runner, &s) == 0);
  while (!atomic_load(&s.in_fn)) Pause();
  EXPECT(pthread_create(&waiter, NULL, Waiter, &s) == 0);
  EXPECT(gpusched_dispatcher_destroy(s.d) == 0); /* returns only after run's fn finished */
  EXPECT(atomic_load(&s.fn_done) == 1);
  EXPECT(atomic_load(&s.waiter_rc) == GPUSCHED_E_FAILED_PRECONDITION);
  pthread_join(runner, NULL);
  pthread_join(waiter, NULL);
  return 0;
}

static int DestroyRefusedWhileALeaseIsOut(void) {
  gpusched_dispatcher* d = NewDispatcher(2, 0, 0);
  gpusched_lease lease;
  EXPECT(d != NULL);
  EXPECT(gpusched_dispatcher_acquire(d, "infer", &lease) == 0);
  EXPECT_ERROR(gpusched_dispatcher_destroy(d), GPUSCHED_E_FAILED_PRECONDITION, "1 lease(s) still out");
  /* The dispatcher stays usable. */
  EXPECT(gpusched_dispatcher_mark(d, 0, NULL, NULL) == 0);
  EXPECT(gpusched_dispatcher_release(d, &lease, GPUSCHED_SUCCEEDED) == 0);
  EXPECT(gpusched_dispatcher_destroy(d) == 0);
  EXPECT(gpusched_dispatcher_destroy(NULL) == 0);
  return 0;
}

/* ---- releases that must be refused; failed requests ---- */

static int ReleasesAreChecked(void) {
  gpusched_dispatcher* d = NewDispatcher(2, 0, 0);
  gpusched_dispatcher* other = NewDispatcher(2, 0, 0);
  gpusched_lease lease, foreign, zeroed, made_up, altered;
  gpusched_service_metrics m;
  gpusched_gpu_metrics g;
  EXPECT(d != NULL && other != NULL);
  EXPECT(gpusched_dispatcher_acquire(d, "infer", &lease) == 0);
  EXPECT(gpusched_dispatcher_acquire(other, "infer", &foreign) == 0);
  memset(&zeroed, 0, sizeof zeroed);
  made_up = lease;
  made_up.ticket = 12345;
  altered = lease;
  altered.gpu = 1;
  EXPECT_ERROR(gpusched_dispatcher_release(d, &zeroed, 0), GPUSCHED_E_NOT_FOUND, "ticket 0 is not outstanding");
  EXPECT_ERROR(gpusched_dispatcher_release(d, &made_up, 0), GPUSCHED_E_NOT_FOUND, "ticket 12345");
  EXPECT_ERROR(gpusched_dispatcher_release(d, &foreign, 0), GPUSCHED_E_NOT_FOUND, "another dispatcher");
  EXPECT_ERROR(gpusched_dispatcher_release(d, &altered, 0), GPUSCHED_E_INVALID_ARGUMENT, "granted gpu 0");
  EXPECT_ERROR(gpusched_dispatcher_release(d, &lease, 2), GPUSCHED_E_INVALID_ARGUMENT, "outcome: must be 0");
  EXPECT(gpusched_dispatcher_release(d, &lease, GPUSCHED_SUCCEEDED) == 0);
  EXPECT_ERROR(gpusched_dispatcher_release(d, &lease, 0), GPUSCHED_E_NOT_FOUND, "not outstanding");
  EXPECT(gpusched_dispatcher_gpu_metrics(d, 0, &g) == 0);
  EXPECT(g.running == 0);
  EXPECT(gpusched_dispatcher_service_metrics(d, "infer", &m) == 0);
  EXPECT(m.completed == 1);
  /* A failed request frees the GPU but does not train the cost. */
  EXPECT(gpusched_dispatcher_acquire(d, "infer", &lease) == 0);
  EXPECT(gpusched_dispatcher_release(d, &lease, GPUSCHED_FAILED) == 0);
  EXPECT(gpusched_dispatcher_service_metrics(d, "infer", &m) == 0);
  EXPECT(m.completed == 2 && m.failed == 1);
  EXPECT(gpusched_dispatcher_release(other, &foreign, 0) == 0);
  EXPECT(gpusched_dispatcher_destroy(d) == 0);
  EXPECT(gpusched_dispatcher_destroy(other) == 0);
  return 0;
}

static int32_t Fails(int32_t gpu, void* user) {
  (void)gpu;
  (void)user;
  return 3;
}

struct Intruder {
  gpusched_dispatcher* d;
  int release_rc;
};

static int32_t ReleaseOwnLeaseFromInside(int32_t gpu, void* user) {
  struct Intruder* in = user;
  gpusched_lease stolen;
  memset(&stolen, 0, sizeof stolen);
  stolen.gpu = gpu;
  if (gpusched_dispatcher_mark(in->d, gpu, &stolen.ticket, NULL) != 0) return 1;
  in->release_rc = gpusched_dispatcher_release(in->d, &stolen, GPUSCHED_SUCCEEDED);
  return 0;
}

static int ReleaseOfARunsLeaseIsRefused(void) {
  struct Intruder in = {NULL, -1};
  gpusched_gpu_metrics g;
  int32_t result = -1;
  in.d = NewDispatcher(1, 0, 0);
  EXPECT(in.d != NULL);
  EXPECT(gpusched_dispatcher_run(in.d, "infer", ReleaseOwnLeaseFromInside, &in, &result) == 0);
  EXPECT(result == 0);
  EXPECT(in.release_rc == GPUSCHED_E_NOT_FOUND); /* the mark's owner is run's, not the caller's */
  EXPECT(gpusched_dispatcher_gpu_metrics(in.d, 0, &g) == 0);
  EXPECT(g.running == 0 && g.started == 1);
  EXPECT(gpusched_dispatcher_destroy(in.d) == 0);
  return 0;
}

static int FractionalCostsAreAccepted(void) {
  gpusched_dispatcher_options o;
  gpusched_service_config fast = {"fast", 0.25, 0, 1};
  gpusched_service_config bad = {"bad", NAN, 0, 1};
  gpusched_dispatcher* d = NULL;
  gpusched_service_metrics m;
  memset(&o, 0, sizeof o);
  o.gpu_count = 1;
  EXPECT_ERROR(gpusched_dispatcher_create(&o, &bad, 1, &d), GPUSCHED_E_INVALID_ARGUMENT, "services[bad].cost_time");
  EXPECT(gpusched_dispatcher_create(&o, &fast, 1, &d) == 0);
  EXPECT(gpusched_dispatcher_service_metrics(d, "fast", &m) == 0);
  EXPECT(m.cost_time_ms == 0.25);
  EXPECT(gpusched_dispatcher_destroy(d) == 0);
  return 0;
}

static int RunReportsFailureOfFn(void) {
  gpusched_dispatcher* d = NewDispatcher(1, 0, 0);
  gpusched_service_metrics m;
  int32_t result = 0;
  EXPECT(d != NULL);
  EXPECT(gpusched_dispatcher_run(d, "infer", Fails, NULL, &result) == GPUSCHED_E_RUN_FAILED);
  EXPECT(result == 3);
  EXPECT(gpusched_dispatcher_service_metrics(d, "infer", &m) == 0);
  EXPECT(m.failed == 1 && m.cost_time_ms == 100.0);
  EXPECT(gpusched_dispatcher_destroy(d) == 0);
  return 0;
}

/* ---- bad options and arguments refused where they are given ---- */

static int CreateRefuses(gpusched_dispatcher_options o, const char* text) {
  gpusched_service_config service = {"infer", 100, 50, 1};
  gpusched_dispatcher* d = NULL;
  EXPECT_ERROR(gpusched_dispatcher_create(&o, &service, 1, &d), GPUSCHED_E_INVALID_ARGUMENT, text);
  EXPECT(d == NULL);
  return 0;
}

static int BadArgumentsAreRefused(void) {
  gpusched_dispatcher_options o;
  gpusched_sim_devices* dev = NULL;
  gpusched_chunks_runtime* rt = NULL;
  gpusched_chunks_job* job = NULL;
  memset(&o, 0, sizeof o);
  o.gpu_count = 1;
  o.cost_learning = 7;
  EXPECT(CreateRefuses(o, "options.cost_learning: must be 0 (cumulative mean), 1 (EMA) or 2 (offline), got 7") == 0);
  o.cost_learning = 0;
  o.literal_release = 2;
  EXPECT(CreateRefuses(o, "options.literal_release: must be 0 or 1, got 2") == 0);
  o.literal_release = 0;
  o.ema_alpha = NAN;
  EXPECT(CreateRefuses(o, "options.ema_alpha") == 0);
  o.ema_alpha = 0;
  o.max_per_gpu = -3;
  EXPECT(CreateRefuses(o, "max_per_gpu: must be >= 0 (0: no cap), got -3") == 0);
  o.max_per_gpu = 0;
  o.acquire_timeout_ms = -1;
  EXPECT(CreateRefuses(o, "acquire_timeout: must be >= 0 ms") == 0);

  EXPECT(gpusched_sim_devices_create(1, 16, 2, &dev) == 0);
  EXPECT_ERROR(gpusched_sim_devices_compute(dev, 0, -5), GPUSCHED_E_INVALID_ARGUMENT, "ms: must be finite and >= 0");
  EXPECT_ERROR(gpusched_sim_devices_compute(dev, 0, NAN), GPUSCHED_E_INVALID_ARGUMENT, "ms: must be finite");
  EXPECT_ERROR(gpusched_sim_devices_compute(dev, 1, 1), GPUSCHED_E_INVALID_ARGUMENT, "gpu: 1 out of range");
  EXPECT(gpusched_sim_devices_destroy(dev) == 0);

  EXPECT_ERROR(gpusched_chunks_create_sim(2, 16, 3, &rt), GPUSCHED_E_INVALID_ARGUMENT, "chunk_bytes: must be 0 (default) or a positive multiple of 8, got 3");
  EXPECT(rt == NULL);
  EXPECT(gpusched_chunks_create_sim(2, 16, 4096, &rt) == 0);
  EXPECT_ERROR(gpusched_chunks_register_kernel(rt, "k", 1, 1, 4, 8, (gpusched_chunks_kernel_fn)NULL, NULL, NULL),
               GPUSCHED_E_INVALID_ARGUMENT, "run: must not be null");
  job = gpusched_chunks_job_new();
  EXPECT_ERROR(gpusched_chunks_job_add_buffer(job, "data", &o, -5, 0), GPUSCHED_E_INVALID_ARGUMENT, "bytes must be >= 0, got -5");
  EXPECT_ERROR(gpusched_chunks_job_add_buffer(job, "data", &o, 8, 2), GPUSCHED_E_INVALID_ARGUMENT, "cache must be 0 or 1, got 2");
  EXPECT_ERROR(gpusched_chunks_job_add_stage(job, "s", "scale_u32", "data", "out", NAN, 0), GPUSCHED_E_INVALID_ARGUMENT, "scalar must be finite");
  EXPECT_ERROR(gpusched_chunks_job_add_stage(job, "s", "sum_u32", ",", "out", 1, 0), GPUSCHED_E_INVALID_ARGUMENT, "inputs must name 1 or 2 buffers");
  gpusched_chunks_job_free(job);
  EXPECT(gpusched_chunks_destroy(rt) == 0);
  return 0;
}

/* ---- backpressure: the per-GPU cap, the acquire deadline, GPUs out of service ---- */

static int CapDeadlineAndOutOfService(void) {
  gpusched_dispatcher* d = NewDispatcher(2, 1, 20);
  gpusched_lease a, b, c;
  EXPECT(d != NULL);
  EXPECT(gpusched_dispatcher_acquire(d, "infer", &a) == 0);
  EXPECT(gpusched_dispatcher_acquire(d, "infer", &b) == 0);
  EXPECT(a.gpu != b.gpu); /* the cap of 1 spreads them although claim 1 would co-run */
  EXPECT_ERROR(gpusched_dispatcher_acquire(d, "infer", &c), GPUSCHED_E_UNAVAILABLE, "2 of 2 GPUs at max_per_gpu 1");
  EXPECT(gpusched_dispatcher_release(d, &a, 0) == 0);
  EXPECT(gpusched_dispatcher_set_gpu_enabled(d, a.gpu, 0) == 0);
  EXPECT_ERROR(gpusched_dispatcher_acquire(d, "infer", &c), GPUSCHED_E_UNAVAILABLE, "1 out of service");
  EXPECT(gpusched_dispatcher_set_gpu_enabled(d, a.gpu, 1) == 0);
  EXPECT(gpusched_dispatcher_acquire(d, "infer", &c) == 0);
  EXPECT(c.gpu == a.gpu);
  EXPECT_ERROR(gpusched_dispatcher_set_gpu_enabled(d, 5, 0), GPUSCHED_E_INVALID_ARGUMENT, "gpu: 5 out of range");
  EXPECT(gpusched_dispatcher_release(d, &b, 0) == 0);
  EXPECT(gpusched_dispatcher_release(d, &c, 0) == 0);
  EXPECT(gpusched_dispatcher_destroy(d) == 0);
  return 0;
}

/* ---- a chunk runtime shared by an executor's 4 task threads ---- */

enum { kThreads = 4, kCount = 6000 };

struct ChunkTask {
  gpusched_chunks_runtime* rt;
  uint32_t data[kCount];
  uint64_t total, expected;
  int rc;
};

static void* RunSumJob(void* arg) {
  struct ChunkTask* t = arg;
  gpusched_chunks_job* job = gpusched_chunks_job_new();
  t->rc = gpusched_chunks_job_add_buffer(job, "data", t->data, sizeof t->data, 1);
  if (t->rc == 0) t->rc = gpusched_chunks_job_add_buffer(job, "total", &t->total, sizeof t->total, 0);
  if (t->rc == 0) t->rc = gpusched_chunks_job_add_stage(job, "x2", "scale_u32", "data", "doubled", 2.0, 0);
  if (t->rc == 0) t->rc = gpusched_chunks_job_add_stage(job, "sum", "sum_u32", "doubled", "total", 0, 0);
  if (t->rc == 0) t->rc = gpusched_chunks_run(t->rt, job);
  gpusched_chunks_job_free(job);
  return NULL;
}

static double Seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int SharedChunkRuntimeFinishesFourThreads(void) {
  static struct ChunkTask tasks[kThreads];
  pthread_t threads[kThreads];
  gpusched_chunks_runtime* rt = NULL;
  const double start = Seconds();
  int i, j;
  EXPECT(gpusched_chunks_create_sim(2, 16, 4096, &rt) == 0);
  for (i = 0; i < kThreads; ++i) {
    tasks[i].rt = rt;
    tasks[i].total = 0;
    tasks[i].expected = 0;
    for (j = 0; j < kCount; ++j) {
      tasks[i].data[j] = (uint32_t)(j * 2654435761u + (uint32_t)i);
      tasks[i].expected += (uint32_t)(tasks[i].data[j] * 2u);
    }
    EXPECT(pthread_create(&threads[i], NULL, RunSumJob, &tasks[i]) == 0);
  }
  for (i = 0; i < kThreads; ++i) pthread_join(threads[i], NULL);
  for (i = 0; i < kThreads; ++i) {
    EXPECT(tasks[i].rc == 0);
    EXPECT(tasks[i].total == tasks[i].expected);
  }
  EXPECT(gpusched_chunks_destroy(rt) == 0);
  EXPECT(Seconds() - start < 30.0); /* the bound: each job is milliseconds of work */
  return 0;
}

/* ---- destroy of a chunk runtime while a run is inside a kernel ---- */

struct HoldScene {
  gpusched_chunks_runtime* rt;
  atomic_int in_kernel, go, run_rc, destroy_rc, destroyed;
  uint32_t data[1024], out[1024];
};

static void HoldingCopy(const void* in0, const void* in1, int64_t in_bytes, void* out,
                        int64_t out_bytes, void* user) {
  struct HoldScene* s = user;
  (void)in1;
  (void)out_bytes;
  atomic_store(&s->in_kernel, 1);
  while (!atomic_load(&s->go)) Pause();
  memcpy(out, in0, (size_t)in_bytes);
}

static void* RunHoldJob(void* arg) {
  struct HoldScene* s = arg;
  gpusched_chunks_job* job = gpusched_chunks_job_new();
  int rc = gpusched_chunks_job_add_buffer(job, "in", s->data, sizeof s->data, 0);
  if (rc == 0) rc = gpusched_chunks_job_add_buffer(job, "out", s->out, sizeof s->out, 0);
  if (rc == 0) rc = gpusched_chunks_job_add_stage(job, "copy", "hold", "in", "out", 0, 0);
  if (rc == 0) rc = gpusched_chunks_run(s->rt, job);
  gpusched_chunks_job_free(job);
  atomic_store(&s->run_rc, rc);
  return NULL;
}

static void* Destroy(void* arg) {
  struct HoldScene* s = arg;
  atomic_store(&s->destroy_rc, gpusched_chunks_destroy(s->rt));
  atomic_store(&s->destroyed, 1);
  return NULL;
}

static void Noop(const void* in0, const void* in1, int64_t in_bytes, void* out, int64_t out_bytes,
                 void* user) {
  (void)in0, (void)in1, (void)in_bytes, (void)out, (void)out_bytes, (void)user;
}

static int ChunkDestroyWaitsForTheRunInFlight(void) {
  static struct HoldScene s;
  pthread_t runner, destroyer;
  int i, rc;
  memset(&s, 0, sizeof s);
  for (i = 0; i < 1024; ++i) s.data[i] = (uint32_t)i * 7u;
  /* One chunk, so the kernel runs once. */
  EXPECT(gpusched_chunks_create_sim(1, 16, 8192, &s.rt) == 0);
  EXPECT(gpusched_chunks_register_kernel(s.rt, "hold", 0, 1, 4, 0, HoldingCopy, NULL, &s) == 0);
  EXPECT(pthread_create(&runner, NULL, RunHoldJob, &s) == 0);
  while (!atomic_load(&s.in_kernel)) Pause();
  EXPECT(pthread_create(&destroyer, NULL, Destroy, &s) == 0);
  /* The runtime is alive while the kernel holds: probe until destroy has closed the gate. */
  do {
    rc = gpusched_chunks_register_kernel(s.rt, "probe", 0, 1, 4, 0, Noop, NULL, NULL);
  } while (rc != GPUSCHED_E_FAILED_PRECONDITION);
  EXPECT(strstr(gpusched_last_error(), "being destroyed") != NULL);
  EXPECT(atomic_load(&s.destroyed) == 0); /* waiting for the run */
  atomic_store(&s.go, 1);
  pthread_join(runner, NULL);
  pthread_join(destroyer, NULL);
  EXPECT(atomic_load(&s.run_rc) == 0);
  EXPECT(atomic_load(&s.destroy_rc) == 0);
  EXPECT(memcmp(s.data, s.out, sizeof s.data) == 0);
  return 0;
}

static int CudaIsExplicit(void) {
  gpusched_chunks_runtime* rt = NULL;
  const int count = gpusched_cuda_device_count();
  if (count < 0) {
    EXPECT_ERROR(gpusched_chunks_create_cuda(0, 0, &rt), GPUSCHED_E_FAILED_PRECONDITION, "built without CUDA");
  } else if (count == 0) {
    EXPECT_ERROR(gpusched_chunks_create_cuda(0, 0, &rt), GPUSCHED_E_UNAVAILABLE, "0 CUDA device(s) visible");
  } else {
    EXPECT(gpusched_chunks_create_cuda(1, 0, &rt) == 0);
    EXPECT(gpusched_chunks_destroy(rt) == 0);
  }
  return 0;
}

int main(void) {
  if (DestroyWaitsForRunAndEndsWaitingAcquire() || DestroyRefusedWhileALeaseIsOut() ||
      ReleasesAreChecked() || RunReportsFailureOfFn() || FractionalCostsAreAccepted() ||
      ReleaseOfARunsLeaseIsRefused() || BadArgumentsAreRefused() ||
      CapDeadlineAndOutOfService() || SharedChunkRuntimeFinishesFourThreads() ||
      ChunkDestroyWaitsForTheRunInFlight() || CudaIsExplicit()) {
    return 1;
  }
  printf("c_abi_safety_test OK\n");
  return 0;
}
