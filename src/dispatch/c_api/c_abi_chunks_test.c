/* The CN110955526B chunk scheduler through the C ABI (C11): the built-in kernel names of
 * gpusched_chunks_c.h, each run and checked against the values it must compute; the default
 * chunk size spreading one input over every GPU; the cache map kept across jobs; kernels that
 * fail their job with a message. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "c_abi_expect.h"
#include "gpusched_c.h"

enum { kN = 1024 }; /* elements per input: several 1 KiB chunks */

/* Adds one stage `kernel` over `inputs` into the runner-allocated output "out" and runs the
 * job; 0 when it ran (gpusched_chunks_output_data(job, "out") then has the result). */
static int RunStage(gpusched_chunks_runtime* rt, gpusched_chunks_job* job, const char* kernel,
                    const char* inputs, double scalar, int64_t bins) {
  EXPECT(gpusched_chunks_job_add_buffer(job, "out", NULL, 0, 0) == 0);
  EXPECT(gpusched_chunks_job_add_stage(job, "s", kernel, inputs, "out", scalar, bins) == 0);
  EXPECT(gpusched_chunks_run(rt, job) == 0);
  return 0;
}

static gpusched_chunks_job* JobOver(void* a, void* b) {
  gpusched_chunks_job* job = gpusched_chunks_job_new();
  if (job == NULL || gpusched_chunks_job_add_buffer(job, "a", a, kN * 4, 0) != 0 ||
      gpusched_chunks_job_add_buffer(job, "b", b, kN * 4, 0) != 0) {
    gpusched_chunks_job_free(job);
    return NULL;
  }
  return job;
}

static int MapKernelsByName(gpusched_chunks_runtime* rt) {
  static uint32_t ua[kN], ub[kN];
  static float fa[kN], fb[kN];
  const uint32_t* u;
  const float* f;
  gpusched_chunks_job* job;
  int i;
  for (i = 0; i < kN; ++i) {
    ua[i] = 0xFFFFFFF0u + (uint32_t)i, ub[i] = (uint32_t)i * 3u;
    fa[i] = (float)i * 0.5f, fb[i] = 1.25f;
  }
  EXPECT((job = JobOver(ua, ub)) != NULL);
  EXPECT(RunStage(rt, job, GPUSCHED_KERNEL_VADD_U32, "a,b", 0, 0) == 0);
  u = gpusched_chunks_output_data(job, "out");
  for (i = 0; i < kN; ++i) EXPECT(u[i] == ua[i] + ub[i]); /* modulo 2^32 */
  gpusched_chunks_job_free(job);
  EXPECT((job = JobOver(ua, ub)) != NULL);
  EXPECT(RunStage(rt, job, GPUSCHED_KERNEL_SCALE_U32, "b", 3.9, 0) == 0); /* truncated: 3 */
  u = gpusched_chunks_output_data(job, "out");
  for (i = 0; i < kN; ++i) EXPECT(u[i] == ub[i] * 3u);
  gpusched_chunks_job_free(job);
  EXPECT((job = JobOver(fa, fb)) != NULL);
  EXPECT(RunStage(rt, job, GPUSCHED_KERNEL_VADD_F32, "a,b", 0, 0) == 0);
  f = gpusched_chunks_output_data(job, "out");
  for (i = 0; i < kN; ++i) EXPECT(f[i] == fa[i] + fb[i]);
  gpusched_chunks_job_free(job);
  EXPECT((job = JobOver(fa, fb)) != NULL);
  EXPECT(RunStage(rt, job, GPUSCHED_KERNEL_SCALE_F32, "a", -2.0, 0) == 0);
  f = gpusched_chunks_output_data(job, "out");
  for (i = 0; i < kN; ++i) EXPECT(f[i] == fa[i] * -2.0f);
  gpusched_chunks_job_free(job);
  return 0;
}

static int ReduceKernelsByName(gpusched_chunks_runtime* rt) {
  static uint32_t ua[kN], ub[kN];
  uint64_t sum = 0, count = 0;
  const uint64_t* r;
  gpusched_chunks_job* job;
  int i;
  for (i = 0; i < kN; ++i) {
    ua[i] = (uint32_t)i * 4194304u; /* i * 2^22: bin i / 256 of 4 bins */
    sum += ua[i];
  }
  EXPECT((job = JobOver(ua, ub)) != NULL);
  EXPECT(RunStage(rt, job, GPUSCHED_KERNEL_SUM_U32, "a", 0, 0) == 0);
  EXPECT(gpusched_chunks_output_bytes(job, "out") == 8);
  r = gpusched_chunks_output_data(job, "out");
  EXPECT(r[0] == sum);
  gpusched_chunks_job_free(job);
  EXPECT((job = JobOver(ua, ub)) != NULL);
  EXPECT(RunStage(rt, job, GPUSCHED_KERNEL_HISTOGRAM_U32, "a", 0, 4) == 0);
  EXPECT(gpusched_chunks_output_bytes(job, "out") == 4 * 8);
  r = gpusched_chunks_output_data(job, "out");
  for (i = 0; i < 4; ++i) {
    EXPECT(r[i] == kN / 4);
    count += r[i];
  }
  EXPECT(count == kN);
  gpusched_chunks_job_free(job);
  return 0;
}

static void Noop(const void* in0, const void* in1, int64_t in_bytes, void* out, int64_t out_bytes,
                 void* user) {
  (void)in0, (void)in1, (void)in_bytes, (void)out, (void)out_bytes, (void)user;
}

/* Every GPUSCHED_KERNEL_* names a kernel the runtime already has: taking the name for a user
 * kernel is refused. */
static int BuiltinNamesAreTaken(gpusched_chunks_runtime* rt) {
  const char* names[] = {GPUSCHED_KERNEL_VADD_U32, GPUSCHED_KERNEL_SCALE_U32,
                         GPUSCHED_KERNEL_VADD_F32, GPUSCHED_KERNEL_SCALE_F32,
                         GPUSCHED_KERNEL_SUM_U32,  GPUSCHED_KERNEL_HISTOGRAM_U32};
  size_t i;
  for (i = 0; i < sizeof names / sizeof names[0]; ++i) {
    EXPECT_ERROR(gpusched_chunks_register_kernel(rt, names[i], 0, 1, 4, 0, Noop, NULL, NULL),
                 GPUSCHED_E_ALREADY_EXISTS, "already registered");
  }
  return 0;
}

static int CN110955526B_BuiltinKernelNamesAreAccepted(void) {
  gpusched_chunks_runtime* rt = NULL;
  EXPECT(gpusched_chunks_create_sim(2, 16, 1024, &rt) == 0);
  if (MapKernelsByName(rt) || ReduceKernelsByName(rt) || BuiltinNamesAreTaken(rt)) return 1;
  EXPECT(gpusched_chunks_destroy(rt) == 0);
  return 0;
}

/* Subtasks of one scale_u32 stage over `bytes` on 4 GPUs of `gpu_mib` with `chunk_bytes`; -1
 * on failure. `*cpu_runs` (when not NULL) gets the chunks run on the CPU executor. */
static int64_t SubtasksOn4Gpus(int64_t gpu_mib, int64_t chunk_bytes, uint32_t* data, int64_t bytes,
                               int64_t* cpu_runs) {
  gpusched_chunks_runtime* rt = NULL;
  gpusched_chunks_job* job = gpusched_chunks_job_new();
  int64_t subtasks = -1;
  if (job != NULL && gpusched_chunks_create_sim(4, gpu_mib, chunk_bytes, &rt) == 0 &&
      gpusched_chunks_job_add_buffer(job, "a", data, bytes, 0) == 0 &&
      gpusched_chunks_job_add_buffer(job, "out", NULL, 0, 0) == 0 &&
      gpusched_chunks_job_add_stage(job, "s", GPUSCHED_KERNEL_SCALE_U32, "a", "out", 2, 0) == 0 &&
      gpusched_chunks_run(rt, job) == 0) {
    const uint32_t* out = gpusched_chunks_output_data(job, "out");
    subtasks = gpusched_chunks_stat(job, "subtasks");
    if (cpu_runs != NULL) *cpu_runs = gpusched_chunks_stat(job, "cpu_runs");
    if (out[0] != data[0] * 2u || out[bytes / 4 - 1] != data[bytes / 4 - 1] * 2u) subtasks = -1;
  }
  gpusched_chunks_job_free(job);
  gpusched_chunks_destroy(rt);
  return subtasks;
}

/* Issue 42: chunk_bytes 0 cuts a 64 MiB input into one 16 MiB chunk per GPU (4 subtasks); an
 * explicit 64 MiB chunk keeps it whole (1 subtask), as before. On GPUs of 16 MiB a 16 MiB chunk
 * and its output fit no GPU: the default caps chunks at 16 MiB / (4 streams x 2 chunks) = 2 MiB
 * (32 subtasks, all on the GPUs), where an explicit 16 MiB chunk runs on the CPU executor. */
static int Issue42_CN110955526B_Step7_DefaultChunkSpreadsAnInputOverEveryGpu(void) {
  const int64_t bytes = 64 << 20;
  uint32_t* data = malloc((size_t)bytes);
  int64_t i, cpu_runs = -1;
  EXPECT(data != NULL);
  for (i = 0; i < bytes / 4; ++i) data[i] = (uint32_t)i;
  EXPECT(SubtasksOn4Gpus(256, 0, data, bytes, NULL) == 4);
  EXPECT(SubtasksOn4Gpus(256, bytes, data, bytes, NULL) == 1);
  EXPECT(SubtasksOn4Gpus(256, 8 << 20, data, bytes, NULL) == 8);
  EXPECT(SubtasksOn4Gpus(16, 0, data, bytes, &cpu_runs) == 32);
  EXPECT(cpu_runs == 0);
  EXPECT(SubtasksOn4Gpus(16, 16 << 20, data, bytes, &cpu_runs) == 4);
  EXPECT(cpu_runs == 4);
  free(data);
  return 0;
}

/* One job: sum_u32 of `data` (cached; kept at `version` when version >= 0). 0 when it ran and
 * the sum is `want`; *cached, *h2d and *hits get the job's counters. */
static int SumJob(gpusched_chunks_runtime* rt, uint32_t* data, int64_t bytes, int64_t version,
                  uint64_t want, int64_t* cached, int64_t* h2d, int64_t* hits) {
  uint64_t total = 0;
  gpusched_chunks_job* job = gpusched_chunks_job_new();
  EXPECT(job != NULL);
  EXPECT(gpusched_chunks_job_add_buffer(job, "a", data, bytes, 1) == 0);
  EXPECT(gpusched_chunks_job_add_buffer(job, "total", &total, 8, 0) == 0);
  if (version >= 0) EXPECT(gpusched_chunks_job_keep_buffer(job, "a", (uint64_t)version) == 0);
  EXPECT(gpusched_chunks_job_add_stage(job, "sum", GPUSCHED_KERNEL_SUM_U32, "a", "total", 0, 0) == 0);
  EXPECT(gpusched_chunks_run(rt, job) == 0);
  EXPECT(total == want);
  *cached = gpusched_chunks_stat(job, "cached");
  *h2d = gpusched_chunks_stat(job, "bytes_h2d");
  *hits = gpusched_chunks_stat(job, "cache_hits");
  gpusched_chunks_job_free(job);
  return 0;
}

static uint64_t Fill(uint32_t* data, int64_t n, uint32_t seed) {
  uint64_t sum = 0;
  int64_t i;
  for (i = 0; i < n; ++i) sum += data[i] = (uint32_t)i * 2654435761u + seed;
  return sum;
}

/* A kept buffer's chunks stay in the cache map across jobs of one runtime: the second job over
 * the same memory and version copies nothing and runs every chunk where it is cached; a new
 * version (the contents changed) and a forgotten buffer are copied again. A cached buffer that
 * is not kept is copied by every job, as before. */
static int CN110955526B_Step9_CacheMapKeptAcrossJobs(void) {
  enum { kBytes = 4 << 20, kChunks = 2 }; /* 2 GPUs: two 2 MiB chunks */
  static uint32_t data[kBytes / 4];
  gpusched_chunks_runtime* rt = NULL;
  gpusched_chunks_job* job = gpusched_chunks_job_new();
  int64_t cached, h2d, hits;
  uint64_t sum = Fill(data, kBytes / 4, 1);
  EXPECT(gpusched_chunks_create_sim(2, 64, 0, &rt) == 0);
  /* Not kept: every job copies. */
  EXPECT(SumJob(rt, data, kBytes, -1, sum, &cached, &h2d, &hits) == 0);
  EXPECT(cached == kChunks && h2d == kBytes);
  EXPECT(SumJob(rt, data, kBytes, -1, sum, &cached, &h2d, &hits) == 0);
  EXPECT(cached == kChunks && h2d == kBytes);
  /* Kept: the first job copies, the second hits the cache. */
  EXPECT(SumJob(rt, data, kBytes, 1, sum, &cached, &h2d, &hits) == 0);
  EXPECT(cached == kChunks && h2d == kBytes && hits == kChunks);
  EXPECT(SumJob(rt, data, kBytes, 1, sum, &cached, &h2d, &hits) == 0);
  EXPECT(cached == 0 && h2d == 0 && hits == kChunks);
  /* The caller changed the contents and says so: copied again, the new sum. */
  sum = Fill(data, kBytes / 4, 7);
  EXPECT(SumJob(rt, data, kBytes, 2, sum, &cached, &h2d, &hits) == 0);
  EXPECT(cached == kChunks && h2d == kBytes);
  EXPECT(SumJob(rt, data, kBytes, 2, sum, &cached, &h2d, &hits) == 0);
  EXPECT(cached == 0 && h2d == 0);
  /* Forgotten: copied again. */
  EXPECT(gpusched_chunks_forget_buffer(rt, data) == 0);
  EXPECT_ERROR(gpusched_chunks_forget_buffer(rt, data), GPUSCHED_E_NOT_FOUND, "no kept buffer");
  EXPECT(SumJob(rt, data, kBytes, 2, sum, &cached, &h2d, &hits) == 0);
  EXPECT(cached == kChunks && h2d == kBytes);
  /* Only cached inputs with data can be kept. */
  EXPECT(job != NULL);
  EXPECT(gpusched_chunks_job_add_buffer(job, "plain", data, kBytes, 0) == 0);
  EXPECT(gpusched_chunks_job_add_buffer(job, "out", NULL, 0, 1) == 0);
  EXPECT_ERROR(gpusched_chunks_job_keep_buffer(job, "plain", 1), GPUSCHED_E_INVALID_ARGUMENT, "cache 0");
  EXPECT_ERROR(gpusched_chunks_job_keep_buffer(job, "out", 1), GPUSCHED_E_INVALID_ARGUMENT, "data is NULL");
  EXPECT_ERROR(gpusched_chunks_job_keep_buffer(job, "nope", 1), GPUSCHED_E_NOT_FOUND, "unknown buffer");
  gpusched_chunks_job_free(job);
  EXPECT(gpusched_chunks_destroy(rt) == 0); /* frees the kept copies */
  return 0;
}

/* Copies its chunk, but fails a chunk that starts with `*(uint32_t*)user`; with a message
 * unless that value is 0. */
static int CopyUnlessMarked(const void* in0, const void* in1, int64_t in_bytes, void* out,
                            int64_t out_bytes, void* user, char* message, int64_t message_bytes) {
  const uint32_t marked = *(const uint32_t*)user;
  (void)in1, (void)out_bytes;
  if (*(const uint32_t*)in0 != marked) {
    memcpy(out, in0, (size_t)in_bytes);
    return 0;
  }
  if (marked != 0) snprintf(message, (size_t)message_bytes, "chunk starting with %u is bad", marked);
  return 3;
}

static int RunCopy(gpusched_chunks_runtime* rt, const char* kernel, uint32_t* in, uint32_t* out) {
  gpusched_chunks_job* job = gpusched_chunks_job_new();
  int rc = GPUSCHED_E_INTERNAL;
  if (job != NULL && gpusched_chunks_job_add_buffer(job, "in", in, kN * 4, 0) == 0 &&
      gpusched_chunks_job_add_buffer(job, "out", out, kN * 4, 0) == 0 &&
      gpusched_chunks_job_add_stage(job, "copy", kernel, "in", "out", 0, 0) == 0) {
    rc = gpusched_chunks_run(rt, job);
  }
  gpusched_chunks_job_free(job);
  return rc;
}

/* A status kernel's failure fails its job with the kernel's message; its success and the old
 * void kernels run as before. */
static int CN110955526B_FailedKernelFailsItsJob(void) {
  static uint32_t in[kN], out[kN];
  uint32_t marked = 0xFFFFFFFFu; /* no chunk starts with it */
  gpusched_chunks_runtime* rt = NULL;
  int i;
  for (i = 0; i < kN; ++i) in[i] = (uint32_t)i;
  EXPECT(gpusched_chunks_create_sim(2, 16, 1024, &rt) == 0); /* 4 chunks of 256 elements */
  EXPECT(gpusched_chunks_register_status_kernel(rt, "checked", 0, 1, 4, 0, CopyUnlessMarked, NULL,
                                                &marked) == 0);
  EXPECT(RunCopy(rt, "checked", in, out) == 0);
  EXPECT(memcmp(in, out, sizeof in) == 0);
  marked = 512; /* chunk 2 fails */
  EXPECT_ERROR(RunCopy(rt, "checked", in, out), GPUSCHED_E_FAILED_PRECONDITION,
               "stage copy: kernel checked: chunk starting with 512 is bad");
  marked = 0; /* chunk 0 fails, without a message */
  EXPECT_ERROR(RunCopy(rt, "checked", in, out), GPUSCHED_E_FAILED_PRECONDITION,
               "stage copy: kernel checked: failed with status 3");
  EXPECT_ERROR(gpusched_chunks_register_status_kernel(rt, "x", 0, 1, 4, 0, NULL, NULL, NULL),
               GPUSCHED_E_INVALID_ARGUMENT, "run: must not be null");
  EXPECT_ERROR(gpusched_chunks_register_status_kernel(rt, "checked", 0, 1, 4, 0, CopyUnlessMarked,
                                                      NULL, &marked),
               GPUSCHED_E_ALREADY_EXISTS, "already registered");
  memset(out, 0, sizeof out); /* the runtime still runs jobs after a failed one */
  marked = 0xFFFFFFFFu;
  EXPECT(RunCopy(rt, "checked", in, out) == 0);
  EXPECT(memcmp(in, out, sizeof in) == 0);
  EXPECT(gpusched_chunks_destroy(rt) == 0);
  return 0;
}

int main(void) {
  if (CN110955526B_BuiltinKernelNamesAreAccepted() ||
      Issue42_CN110955526B_Step7_DefaultChunkSpreadsAnInputOverEveryGpu() ||
      CN110955526B_Step9_CacheMapKeptAcrossJobs() || CN110955526B_FailedKernelFailsItsJob()) {
    return 1;
  }
  printf("c_abi_chunks_test OK\n");
  return 0;
}
