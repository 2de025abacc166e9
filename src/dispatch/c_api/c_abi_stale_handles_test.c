/* Chunk-runtime, chunk-job and simulated-device handles after their destroy (issue 42 item 7,
 * the CN110955526B chunk runtime's C ABI): every entry point refuses them with
 * GPUSCHED_E_INVALID_ARGUMENT naming the argument and the handle's kind ("runtime: not a live
 * handle: the chunk runtime handle was destroyed", "job: ... the chunk job handle was
 * destroyed", "devices: ... the simulated devices handle was destroyed") and never touches the
 * freed memory (run it under valgrind or ASan: a use after free fails it). So do made-up
 * pointers, handles of another kind and a second destroy or free, and a destroyed handle
 * whose slot a new handle of its kind has taken since (the new one works). C11. */
#include <stdio.h>
#include <string.h>

#include "c_abi_expect.h"
#include "gpusched_c.h"

#define EXPECT_REFUSED(call, handle) \
  EXPECT_ERROR(call, GPUSCHED_E_INVALID_ARGUMENT, handle ": not a live handle")
/* Refused, and the error says the handle of `kind` was destroyed. */
#define EXPECT_DESTROYED(call, handle, kind) \
  EXPECT_ERROR(call, GPUSCHED_E_INVALID_ARGUMENT, \
               handle ": not a live handle: the " kind " handle was destroyed")

static void Copy(const void* in0, const void* in1, int64_t in_bytes, void* out, int64_t out_bytes,
                 void* user) {
  (void)in1, (void)out_bytes, (void)user;
  memcpy(out, in0, (size_t)in_bytes);
}

static int CheckedCopy(const void* in0, const void* in1, int64_t in_bytes, void* out,
                       int64_t out_bytes, void* user, char* message, int64_t message_bytes) {
  (void)message, (void)message_bytes;
  Copy(in0, in1, in_bytes, out, out_bytes, user);
  return 0;
}

/* A job that would run if the runtime were alive. */
static gpusched_chunks_job* CopyJob(uint32_t* in, uint32_t* out, int64_t bytes) {
  gpusched_chunks_job* job = gpusched_chunks_job_new();
  if (job == NULL || gpusched_chunks_job_add_buffer(job, "in", in, bytes, 0) != 0 ||
      gpusched_chunks_job_add_buffer(job, "out", out, bytes, 0) != 0 ||
      gpusched_chunks_job_add_stage(job, "s", "vadd_u32", "in,in", "out", 0, 0) != 0) {
    gpusched_chunks_job_free(job);
    return NULL;
  }
  return job;
}

static int Issue42_CN110955526B_DestroyedChunkRuntimeIsRefused(void) {
  static uint32_t in[256], out[256];
  gpusched_chunks_runtime* rt = NULL;
  gpusched_chunks_job* job = CopyJob(in, out, sizeof in);
  EXPECT(job != NULL);
  EXPECT(gpusched_chunks_create_sim(2, 16, 0, &rt) == 0);
  EXPECT(gpusched_chunks_run(rt, job) == 0); /* alive: it runs */
  EXPECT(gpusched_chunks_destroy(rt) == 0);
  EXPECT_DESTROYED(gpusched_chunks_run(rt, job), "runtime", "chunk runtime");
  EXPECT_DESTROYED(gpusched_chunks_register_kernel(rt, "copy", 0, 1, 4, 0, Copy, NULL, NULL), "runtime",
                   "chunk runtime");
  EXPECT_DESTROYED(gpusched_chunks_forget_buffer(rt, in), "runtime", "chunk runtime");
  EXPECT_DESTROYED(gpusched_chunks_register_status_kernel(rt, "checked", 0, 1, 4, 0, CheckedCopy, NULL, NULL),
                   "runtime", "chunk runtime");
  EXPECT_DESTROYED(gpusched_chunks_destroy(rt), "runtime", "chunk runtime"); /* a second destroy */
  gpusched_chunks_job_free(job);
  return 0;
}

/* A job after gpusched_chunks_job_free: every function taking a job refuses it; the getters
 * return NULL / -1 with the reason as the last error; a second free frees nothing. */
static int Issue42_CN110955526B_FreedChunkJobIsRefused(void) {
  static uint32_t in[256], out[256];
  gpusched_chunks_runtime* rt = NULL;
  gpusched_chunks_job* job = CopyJob(in, out, sizeof in);
  EXPECT(job != NULL);
  EXPECT(gpusched_chunks_create_sim(1, 16, 0, &rt) == 0);
  EXPECT(gpusched_chunks_run(rt, job) == 0); /* alive: it runs and has counters */
  EXPECT(gpusched_chunks_stat(job, "subtasks") > 0);
  gpusched_chunks_job_free(job);
  EXPECT_DESTROYED(gpusched_chunks_run(rt, job), "job", "chunk job");
  EXPECT_DESTROYED(gpusched_chunks_job_add_buffer(job, "b", in, sizeof in, 1), "job", "chunk job");
  EXPECT_DESTROYED(gpusched_chunks_job_keep_buffer(job, "in", 1), "job", "chunk job");
  EXPECT_DESTROYED(gpusched_chunks_job_add_stage(job, "t", "vadd_u32", "in,in", "o", 0, 0), "job", "chunk job");
  EXPECT_DESTROYED(gpusched_chunks_job_add_dependency(job, "s", "s"), "job", "chunk job");
  EXPECT_DESTROYED(gpusched_chunks_job_set_tasks(job, "s", 2), "job", "chunk job");
  EXPECT(gpusched_chunks_output_data(job, "out") == NULL);
  EXPECT(strstr(gpusched_last_error(), "the chunk job handle was destroyed") != NULL);
  EXPECT(gpusched_chunks_output_bytes(job, "out") == -1);
  EXPECT(gpusched_chunks_stat(job, "subtasks") == -1);
  gpusched_chunks_job_free(job); /* a second free: refused, nothing freed twice */
  EXPECT(strstr(gpusched_last_error(), "job: not a live handle: the chunk job handle was destroyed") != NULL);
  /* A runtime is not a job, nor a job a runtime. */
  EXPECT_REFUSED(gpusched_chunks_run(rt, (gpusched_chunks_job*)rt), "job");
  EXPECT(strstr(gpusched_last_error(), "it is a chunk runtime handle, not a chunk job handle") != NULL);
  EXPECT(gpusched_chunks_destroy(rt) == 0);
  return 0;
}

static int Issue42_DestroyedSimDevicesAreRefused(void) {
  float host[4] = {1, 2, 3, 4};
  int64_t used = -1, total = -1;
  gpusched_sim_devices* s = NULL;
  EXPECT(gpusched_sim_devices_create(2, 16, 2, &s) == 0);
  EXPECT(gpusched_sim_devices_memory(s, 0, &used, &total) == 0); /* alive: it answers */
  EXPECT(gpusched_sim_devices_destroy(s) == 0);
  EXPECT_DESTROYED(gpusched_sim_devices_compute(s, 0, 1.0), "devices", "simulated devices");
  EXPECT_DESTROYED(gpusched_sim_devices_memory(s, 0, &used, &total), "devices", "simulated devices");
  EXPECT_DESTROYED(gpusched_sim_devices_scale(s, 0, host, 4, 2.0f), "devices", "simulated devices");
  EXPECT_DESTROYED(gpusched_sim_devices_destroy(s), "devices", "simulated devices"); /* a second destroy */
  EXPECT(host[0] == 1 && host[3] == 4);                     /* nothing ran */
  return 0;
}

/* Pointers that never were handles of the kind asked: refused without being read. */
static int Issue42_CN110955526B_MadeUpAndWrongKindHandlesAreRefused(void) {
  static uint32_t in[256], out[256];
  double not_a_handle[8] = {0};
  gpusched_chunks_runtime* rt = NULL;
  gpusched_sim_devices* s = NULL;
  gpusched_chunks_job* job = CopyJob(in, out, sizeof in);
  int64_t used = 0;
  EXPECT(job != NULL);
  EXPECT(gpusched_chunks_create_sim(1, 16, 0, &rt) == 0);
  EXPECT(gpusched_sim_devices_create(1, 16, 1, &s) == 0);
  EXPECT_REFUSED(gpusched_chunks_run((gpusched_chunks_runtime*)not_a_handle, job), "runtime");
  EXPECT_REFUSED(gpusched_chunks_run((gpusched_chunks_runtime*)s, job), "runtime");
  EXPECT(strstr(gpusched_last_error(), "it is a simulated devices handle, not a chunk runtime handle") != NULL);
  EXPECT_REFUSED(gpusched_chunks_job_add_buffer((gpusched_chunks_job*)not_a_handle, "b", NULL, 0, 0), "job");
  EXPECT(strstr(gpusched_last_error(), "never created") != NULL);
  EXPECT_REFUSED(gpusched_chunks_destroy((gpusched_chunks_runtime*)s), "runtime");
  EXPECT_REFUSED(gpusched_sim_devices_memory((gpusched_sim_devices*)rt, 0, &used, NULL), "devices");
  EXPECT_REFUSED(gpusched_sim_devices_destroy((gpusched_sim_devices*)not_a_handle), "devices");
  EXPECT(gpusched_chunks_run(NULL, job) == GPUSCHED_E_INVALID_ARGUMENT);
  EXPECT(strstr(gpusched_last_error(), "runtime: must not be null") != NULL);
  EXPECT(gpusched_sim_devices_compute(NULL, 0, 1.0) == GPUSCHED_E_INVALID_ARGUMENT);
  EXPECT(strstr(gpusched_last_error(), "devices: must not be null") != NULL);
  /* Both still alive and usable after all that. */
  EXPECT(gpusched_chunks_run(rt, job) == 0);
  EXPECT(gpusched_sim_devices_memory(s, 0, &used, NULL) == 0);
  EXPECT(gpusched_chunks_destroy(rt) == 0);
  EXPECT(gpusched_sim_devices_destroy(s) == 0);
  gpusched_chunks_job_free(job);
  return 0;
}

/* Issue 42 item 7: a handle is a slot and a generation, not an address. A destroyed handle,
 * followed by new handles of the same kind (the first of them in the freed slot: the registry
 * reuses it first), is still refused as destroyed, and the new handles work. Where handles were
 * addresses, the new object at the old address answered to the stale handle. */
#define kReuses 4

static gpusched_dispatcher* OneGpu(void) {
  gpusched_dispatcher_options o;
  gpusched_service_config service = {"infer", 20, 10, 5};
  gpusched_dispatcher* d = NULL;
  memset(&o, 0, sizeof o);
  o.gpu_count = 1;
  if (gpusched_dispatcher_create(&o, &service, 1, &d) != 0) return NULL;
  return d;
}

static int Issue42_StaleDispatcherHandleIsRefusedAfterItsSlotIsReused(void) {
  gpusched_dispatcher* fresh[kReuses] = {NULL};
  uint64_t owner = 0;
  int64_t fin = 0;
  int i, j;
  gpusched_dispatcher* stale = OneGpu();
  EXPECT(stale != NULL);
  EXPECT(gpusched_dispatcher_destroy(stale) == 0);
  for (i = 0; i < kReuses; ++i) {
    fresh[i] = OneGpu();
    EXPECT(fresh[i] != NULL && fresh[i] != stale);
    EXPECT_DESTROYED(gpusched_dispatcher_mark(stale, 0, &owner, &fin), "dispatcher", "dispatcher");
    EXPECT_DESTROYED(gpusched_dispatcher_destroy(stale), "dispatcher", "dispatcher");
    for (j = 0; j <= i; ++j) EXPECT(gpusched_dispatcher_mark(fresh[j], 0, &owner, &fin) == 0);
  }
  for (i = 0; i < kReuses; ++i) EXPECT(gpusched_dispatcher_destroy(fresh[i]) == 0);
  return 0;
}

static int Issue42_CN110955526B_StaleChunkHandlesAreRefusedAfterTheirSlotIsReused(void) {
  static uint32_t in[256], out[256];
  gpusched_chunks_runtime* fresh[kReuses] = {NULL};
  gpusched_chunks_runtime* stale = NULL;
  gpusched_chunks_job* job = CopyJob(in, out, sizeof in);
  gpusched_chunks_job* stale_job = CopyJob(in, out, sizeof in);
  gpusched_chunks_job* fresh_job = NULL;
  int i;
  EXPECT(job != NULL && stale_job != NULL);
  EXPECT(gpusched_chunks_create_sim(1, 16, 0, &stale) == 0);
  EXPECT(gpusched_chunks_destroy(stale) == 0);
  gpusched_chunks_job_free(stale_job);
  fresh_job = CopyJob(in, out, sizeof in); /* in the freed job's slot */
  EXPECT(fresh_job != NULL && fresh_job != stale_job);
  for (i = 0; i < kReuses; ++i) {
    EXPECT(gpusched_chunks_create_sim(1, 16, 0, &fresh[i]) == 0);
    EXPECT(fresh[i] != stale);
    EXPECT_DESTROYED(gpusched_chunks_run(stale, job), "runtime", "chunk runtime");
    EXPECT_DESTROYED(gpusched_chunks_destroy(stale), "runtime", "chunk runtime");
    EXPECT_DESTROYED(gpusched_chunks_run(fresh[i], stale_job), "job", "chunk job");
    EXPECT(gpusched_chunks_run(fresh[i], job) == 0);
    EXPECT(gpusched_chunks_run(fresh[i], fresh_job) == 0);
  }
  gpusched_chunks_job_free(stale_job); /* refused: the fresh job is not freed through it */
  EXPECT(strstr(gpusched_last_error(), "the chunk job handle was destroyed") != NULL);
  EXPECT(gpusched_chunks_stat(fresh_job, "subtasks") > 0);
  for (i = 0; i < kReuses; ++i) EXPECT(gpusched_chunks_destroy(fresh[i]) == 0);
  gpusched_chunks_job_free(fresh_job);
  gpusched_chunks_job_free(job);
  return 0;
}

int main(void) {
  if (Issue42_CN110955526B_DestroyedChunkRuntimeIsRefused() ||
      Issue42_CN110955526B_FreedChunkJobIsRefused() || Issue42_DestroyedSimDevicesAreRefused() ||
      Issue42_CN110955526B_MadeUpAndWrongKindHandlesAreRefused() ||
      Issue42_StaleDispatcherHandleIsRefusedAfterItsSlotIsReused() ||
      Issue42_CN110955526B_StaleChunkHandlesAreRefusedAfterTheirSlotIsReused()) {
    return 1;
  }
  printf("c_abi_stale_handles_test OK\n");
  return 0;
}
