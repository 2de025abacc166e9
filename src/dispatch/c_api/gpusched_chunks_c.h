/* gpusched_chunks_c.h: the C ABI of the CN110955526B chunk scheduler and stage runner, for C,
 * Python (ctypes) and the JVM (JNA), as a Spark executor would call it.
 *
 * Flow: create a runtime (its GPUs), build a job (named host buffers, stages over them), run
 * it, read its outputs and counters, free the job, destroy the runtime. Host buffers are the
 * caller's memory (for example a direct ByteBuffer's address) and must stay valid while
 * gpusched_chunks_run runs; gpusched never frees them.
 *
 * Every function returning int returns 0 on success or a gpusched StatusCode (1 invalid
 * argument, 2 not found, ...); gpusched_chunks_last_error() then describes the error of the
 * calling thread's last failed call. A runtime may be used from one thread at a time.
 * Included by gpusched_c.h; both are plain C (the c_abi test compiles them as C11). */
#ifndef GPUSCHED_CHUNKS_C_H_
#define GPUSCHED_CHUNKS_C_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gpusched_chunks_runtime gpusched_chunks_runtime;
typedef struct gpusched_chunks_job gpusched_chunks_job;

/* Creates `num_gpus` simulated GPUs of `gpu_memory_mib` MiB and 4 streams each, with the
 * PATENTS.md defaults except `chunk_bytes` (0 keeps the default 64 MiB). */
int gpusched_chunks_create_sim(int num_gpus, int64_t gpu_memory_mib, int64_t chunk_bytes,
                               gpusched_chunks_runtime** out);
void gpusched_chunks_destroy(gpusched_chunks_runtime* runtime);

/* A user kernel. map (kind 0): `out_bytes` == `in_bytes`; reduce (kind 1): writes a partial of
 * `result_bytes`, and `combine` folds a partial into the accumulator. `in1` is NULL for
 * one-input kernels. */
typedef void (*gpusched_chunks_kernel_fn)(const void* in0, const void* in1, int64_t in_bytes,
                                          void* out, int64_t out_bytes, void* user);
typedef void (*gpusched_chunks_combine_fn)(void* acc, const void* partial, int64_t bytes,
                                           void* user);
int gpusched_chunks_register_kernel(gpusched_chunks_runtime* runtime, const char* name, int kind,
                                    int inputs, int64_t element_bytes, int64_t result_bytes,
                                    gpusched_chunks_kernel_fn run,
                                    gpusched_chunks_combine_fn combine, void* user);

gpusched_chunks_job* gpusched_chunks_job_new(void);
void gpusched_chunks_job_free(gpusched_chunks_job* job);
/* An input buffer (data != NULL), or a stage output's destination (data != NULL, exact size),
 * or an output the runner allocates (data == NULL, bytes 0). cache != 0 persists its chunks
 * in GPU memory. */
int gpusched_chunks_job_add_buffer(gpusched_chunks_job* job, const char* name, void* data,
                                   int64_t bytes, int cache);
/* `inputs`: buffer names separated by commas ("a" or "a,b"). `scalar` is the scale kernels'
 * factor, `bins` the histogram's bin count (0 keeps 256). */
int gpusched_chunks_job_add_stage(gpusched_chunks_job* job, const char* name, const char* kernel,
                                  const char* inputs, const char* output, double scalar,
                                  int64_t bins);
int gpusched_chunks_job_add_dependency(gpusched_chunks_job* job, const char* stage,
                                       const char* after);

/* Runs the job to completion (a DAG of stages, a barrier between them). */
int gpusched_chunks_run(gpusched_chunks_runtime* runtime, gpusched_chunks_job* job);
/* After a successful run: an output's address and size (NULL / -1 when unknown), and a counter
 * of the run: "subtasks", "bytes_h2d", "bytes_d2h", "cached", "cache_hits", "moves", "waits",
 * "cpu_runs" (-1 when unknown). */
const void* gpusched_chunks_output_data(const gpusched_chunks_job* job, const char* name);
int64_t gpusched_chunks_output_bytes(const gpusched_chunks_job* job, const char* name);
int64_t gpusched_chunks_stat(const gpusched_chunks_job* job, const char* name);

const char* gpusched_chunks_last_error(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* GPUSCHED_CHUNKS_C_H_ */
