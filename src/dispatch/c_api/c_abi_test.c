/* Compiled as C11 with -Wpedantic -Werror, so gpusched_c.h (and gpusched_chunks_c.h, which it
 * includes) stay valid C for C callers, ctypes and JNA. It also calls one dispatcher and one
 * chunk-scheduler entry point through libgpusched_c.so and checks their results, so a symbol
 * missing from the library fails the link and a broken entry point fails the test. */
#include "gpusched_c.h"

#include <stdio.h>
#include <string.h>

#define EXPECT(cond)                                                       \
  do {                                                                     \
    if (!(cond)) {                                                         \
      fprintf(stderr, "%s:%d: failed: %s\n", __FILE__, __LINE__, #cond);   \
      return 1;                                                            \
    }                                                                      \
  } while (0)

static int DispatcherGrantsTheIdleGpu(void) {
  gpusched_dispatcher_options options;
  gpusched_service_config service = {"infer", 100, 50, 10};
  gpusched_dispatcher* d = NULL;
  gpusched_lease lease;
  uint64_t owner = 0;
  int64_t fin_ms = 0;
  memset(&options, 0, sizeof options);
  options.gpu_count = 2;
  /* The literal CN113051059B policy, selected by name (gpusched_dispatcher_create gives the
   * gpusched policy; c_abi_cancel_test.c covers it). */
  EXPECT(gpusched_dispatcher_create_ex("literal", NULL, &options, &service, 1, &d) == 0);
  /* Both GPUs are idle: the index scan (claim 1) grants GPU 0 and locks it (claim 4). */
  EXPECT(gpusched_dispatcher_acquire(d, "infer", &lease) == 0);
  EXPECT(lease.gpu == 0 && lease.locked == 1);
  EXPECT(gpusched_dispatcher_mark(d, 0, &owner, &fin_ms) == 0);
  EXPECT(owner == lease.ticket);
  EXPECT(gpusched_dispatcher_release(d, &lease, GPUSCHED_SUCCEEDED) == 0);
  EXPECT(gpusched_dispatcher_mark(d, 0, &owner, &fin_ms) == 0);
  EXPECT(owner == 0); /* claim 5: the owner's release frees the mark */
  /* Errors come back as codes with a message, not aborts. */
  EXPECT(gpusched_dispatcher_acquire(d, "no-such-service", &lease) == 2);
  EXPECT(strlen(gpusched_last_error()) > 0);
  EXPECT(gpusched_dispatcher_destroy(d) == 0);
  return 0;
}

static int ChunksSumMatchesLoop(void) {
  enum { kCount = 3000 };
  static uint32_t data[kCount];
  uint64_t total = 0, expected = 0;
  gpusched_chunks_runtime* rt = NULL;
  gpusched_chunks_job* job = NULL;
  int i;
  for (i = 0; i < kCount; ++i) {
    data[i] = (uint32_t)i * 2654435761u;
    expected += data[i];
  }
  /* 2 GPUs, 4 KiB chunks: 12000 bytes make 3 chunk subtasks. */
  EXPECT(gpusched_chunks_create_sim(2, 16, 4096, &rt) == 0);
  job = gpusched_chunks_job_new();
  EXPECT(job != NULL);
  EXPECT(gpusched_chunks_job_add_buffer(job, "data", data, sizeof data, 0) == 0);
  EXPECT(gpusched_chunks_job_add_buffer(job, "total", &total, sizeof total, 0) == 0);
  EXPECT(gpusched_chunks_job_add_stage(job, "sum", "sum_u32", "data", "total", 0.0, 0) == 0);
  EXPECT(gpusched_chunks_run(rt, job) == 0);
  EXPECT(total == expected);
  EXPECT(gpusched_chunks_stat(job, "subtasks") == 3);
  EXPECT(gpusched_chunks_stat(job, "gpu_tasks") == 1);
  /* StageSpec::tasks through the ABI: 2 tasks over the 3 chunks, both on the GPU executor. */
  EXPECT(gpusched_chunks_job_set_tasks(job, "sum", 2) == 0);
  EXPECT(gpusched_chunks_run(rt, job) == 0);
  EXPECT(total == expected);
  EXPECT(gpusched_chunks_stat(job, "gpu_tasks") == 2);
  EXPECT(gpusched_chunks_stat(job, "cpu_tasks") == 0);
  EXPECT(gpusched_chunks_stat(job, "pin_failures") == 0);
  EXPECT(gpusched_chunks_job_set_tasks(job, "sum", 0) == 1);
  EXPECT(strstr(gpusched_last_error(), "tasks must be >= 1, got 0") != NULL);
  EXPECT(gpusched_chunks_job_set_tasks(job, "nope", 2) == 2);
  gpusched_chunks_job_free(job);
  EXPECT(gpusched_chunks_destroy(rt) == 0);
  return 0;
}

/* gpusched_cuda_device_count and gpusched_chunks_create_cuda answer in every build: -1 and
 * FAILED_PRECONDITION without CUDA; with CUDA but no GPU 0 and UNAVAILABLE; with a GPU, a
 * runtime whose CUDA kernels give the same sum as the loop. */
static int CudaRuntimeAnswersInEveryBuild(void) {
  enum { kCount = 3000 };
  static uint32_t data[kCount];
  uint64_t total = 0, expected = 0;
  gpusched_chunks_runtime* rt = NULL;
  gpusched_chunks_job* job = NULL;
  const int count = gpusched_cuda_device_count();
  int i;
  EXPECT(count >= -1);
  if (count <= 0) {
    EXPECT(gpusched_chunks_create_cuda(0, 0, &rt) == (count < 0 ? 4 : 6));
    EXPECT(rt == NULL);
    printf("c_abi_test: CUDA device count %d, no CUDA run\n", count);
    return 0;
  }
  for (i = 0; i < kCount; ++i) {
    data[i] = (uint32_t)i * 2654435761u;
    expected += data[i];
  }
  EXPECT(gpusched_chunks_create_cuda(0, 4096, &rt) == 0);
  job = gpusched_chunks_job_new();
  EXPECT(gpusched_chunks_job_add_buffer(job, "data", data, sizeof data, 0) == 0);
  EXPECT(gpusched_chunks_job_add_buffer(job, "total", &total, sizeof total, 0) == 0);
  EXPECT(gpusched_chunks_job_add_stage(job, "sum", "sum_u32", "data", "total", 0.0, 0) == 0);
  EXPECT(gpusched_chunks_run(rt, job) == 0);
  EXPECT(total == expected);
  EXPECT(gpusched_chunks_stat(job, "bytes_h2d") == (int64_t)sizeof data);
  gpusched_chunks_job_free(job);
  EXPECT(gpusched_chunks_destroy(rt) == 0);
  return 0;
}

int main(void) {
  EXPECT(gpusched_abi_version() == GPUSCHED_C_ABI_VERSION);
  if (DispatcherGrantsTheIdleGpu() != 0 || ChunksSumMatchesLoop() != 0 ||
      CudaRuntimeAnswersInEveryBuild() != 0) {
    return 1;
  }
  printf("c_abi_test OK\n");
  return 0;
}
