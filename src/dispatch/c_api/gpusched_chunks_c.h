/* gpusched_chunks_c.h: the C ABI of the CN110955526B chunk scheduler and stage runner, for C,
 * Python (ctypes) and the JVM (JNA), as a Spark executor would call it.
 *
 * Flow: create a runtime (its GPUs), build a job (named host buffers, stages over them), run
 * it, read its outputs and counters, free the job, destroy the runtime. Host buffers are the
 * caller's memory (for example a direct ByteBuffer's address) and must stay valid while
 * gpusched_chunks_run runs; gpusched never frees them.
 *
 * Every function returning int returns 0 on success or a gpusched StatusCode (1 invalid
 * argument, 2 not found, ...); gpusched_chunks_last_error() (the same as gpusched_last_error())
 * then describes the error of the calling thread's last failed call, naming the argument and
 * its value. Arguments are checked where they are given (sizes, alignment, NaN factors).
 *
 * Sharing: a runtime may be shared by any number of threads (an executor's task threads).
 * Runs on one runtime queue: each gpusched_chunks_run waits for the one before it and then has
 * every GPU and stream of the runtime, so no job ever believes it owns GPUs another job is
 * using, and nothing can deadlock. A job handle belongs to one thread at a time.
 * Included by gpusched_c.h; both are plain C (the c_abi test compiles them as C11). */
#ifndef GPUSCHED_CHUNKS_C_H_
#define GPUSCHED_CHUNKS_C_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The built-in kernels every runtime has: the `kernel` of gpusched_chunks_job_add_stage.
 * Elements are little-endian host values; map kernels write one output element per input
 * element, reduce kernels one result for the whole input. */
/* map, 2 inputs of uint32: out[i] = in0[i] + in1[i] modulo 2^32. */
#define GPUSCHED_KERNEL_VADD_U32 "vadd_u32"
/* map, 1 input of uint32: out[i] = in0[i] * (uint32)scalar modulo 2^32 (scalar truncated). */
#define GPUSCHED_KERNEL_SCALE_U32 "scale_u32"
/* map, 2 inputs of float: out[i] = in0[i] + in1[i] (one IEEE single addition). */
#define GPUSCHED_KERNEL_VADD_F32 "vadd_f32"
/* map, 1 input of float: out[i] = in0[i] * (float)scalar. */
#define GPUSCHED_KERNEL_SCALE_F32 "scale_f32"
/* reduce, 1 input of uint32: one uint64, the sum of every element (no overflow below 2^32
 * elements). */
#define GPUSCHED_KERNEL_SUM_U32 "sum_u32"
/* reduce, 1 input of uint32: `bins` uint64 counts (bins 0: 256, at most 2^24), equal-width bins
 * over the whole uint32 range: element v counts in bin v * bins / 2^32. */
#define GPUSCHED_KERNEL_HISTOGRAM_U32 "histogram_u32"

typedef struct gpusched_chunks_runtime gpusched_chunks_runtime;
typedef struct gpusched_chunks_job gpusched_chunks_job;

/* Creates `num_gpus` (>= 1) simulated GPUs of `gpu_memory_mib` (>= 1) MiB and 4 streams each,
 * with the PATENTS.md defaults except the chunk size. `chunk_bytes` 0 (the default) spreads
 * each input over every GPU: a stage's chunks are max(1 MiB, ceil(input bytes / GPUs)) rounded
 * up to the kernel's element size, and at most 64 MiB and at most the smallest GPU's memory /
 * (4 streams x (the stage's inputs + 1)), so that every stream can hold a chunk subtask. A
 * 64 MiB input on 4 GPUs of 256 MiB is 4 chunks of 16 MiB, one per GPU; on 4 GPUs of 16 MiB,
 * 32 chunks of 2 MiB; large inputs keep 64 MiB chunks. Otherwise `chunk_bytes` (> 0, a
 * multiple of 8, so no element of any built-in kernel is split) is every chunk's size. */
int gpusched_chunks_create_sim(int num_gpus, int64_t gpu_memory_mib, int64_t chunk_bytes,
                               gpusched_chunks_runtime** out);
/* The same over real GPUs (chunk_bytes as above): CUDA devices 0 .. num_gpus - 1 (num_gpus 0:
 * every visible one).
 * GPUSCHED_E_FAILED_PRECONDITION (4) in a library built without CUDA, GPUSCHED_E_UNAVAILABLE
 * (6) when no such device is visible or it cannot be opened; with none visible the message
 * ends with gpusched_cuda_device_count's reason. The built-in kernels run as CUDA
 * kernels (H2D copy, kernel, D2H copy on a stream); a user kernel has no CUDA implementation,
 * so a run of one on CUDA devices reports the kernel's name. Host buffers of 1 MiB or more are
 * pinned (cudaHostRegister) for the run; one that cannot be pinned is streamed from pageable
 * memory and the reason is printed on stderr. */
int gpusched_chunks_create_cuda(int num_gpus, int64_t chunk_bytes, gpusched_chunks_runtime** out);
/* CUDA devices visible to this library: 0 without a usable CUDA, -1 when built without CUDA;
 * then gpusched_last_error() (this thread's) says why, naming what was missing. CUDA is loaded
 * at run time (issue 42): libgpusched_c links no CUDA library; at the first call of this or
 * gpusched_chunks_create_cuda it loads its CUDA plugin, libgpusched_cuda.so.1, from its own
 * directory, once per process. Reasons: "CUDA plugin DIR/libgpusched_cuda.so.1 not loaded:
 * <dlerror>" (not installed), a plugin from another build, or "no usable CUDA driver or GPU:
 * cudaGetDeviceCount: cudaErrorInsufficientDriver: ..." (no libcuda.so.1, a driver too old for
 * the plugin's CUDA runtime, no GPU). A count > 0 clears the last error. */
int gpusched_cuda_device_count(void);
/* Refuses new calls, waits for the runs in flight and queued, frees the runtime. NULL: 0.
 * Every call with `runtime` afterwards, a second destroy included, is refused with
 * GPUSCHED_E_INVALID_ARGUMENT ("runtime: not a live handle: the chunk runtime handle was
 * destroyed") without touching freed memory. */
int gpusched_chunks_destroy(gpusched_chunks_runtime* runtime);

/* A user kernel. map (kind 0): `out_bytes` == `in_bytes`; reduce (kind 1): writes a partial of
 * `result_bytes` (> 0), and `combine` (required) folds a partial into the accumulator. `in1` is
 * NULL for one-input kernels. `inputs` is 1 or 2; `element_bytes` > 0 and divides the runtime's
 * chunk size (with chunk_bytes 0: 64 MiB). The callbacks run on the runtime's worker threads,
 * several at once. */
typedef void (*gpusched_chunks_kernel_fn)(const void* in0, const void* in1, int64_t in_bytes,
                                          void* out, int64_t out_bytes, void* user);
typedef void (*gpusched_chunks_combine_fn)(void* acc, const void* partial, int64_t bytes,
                                           void* user);
int gpusched_chunks_register_kernel(gpusched_chunks_runtime* runtime, const char* name, int kind,
                                    int inputs, int64_t element_bytes, int64_t result_bytes,
                                    gpusched_chunks_kernel_fn run,
                                    gpusched_chunks_combine_fn combine, void* user);

/* A user kernel that can fail: returns 0 on success; any other value fails its chunk and so
 * the run, which returns GPUSCHED_E_FAILED_PRECONDITION with the message "stage S: kernel K:
 * <message>", where <message> is what the kernel wrote into `message` (NUL-terminated, at most
 * `message_bytes` = GPUSCHED_CHUNKS_KERNEL_MESSAGE_BYTES bytes with the NUL; empty: "failed
 * with status N"). Chunks already running finish; the outputs of a failed run are not valid. */
#define GPUSCHED_CHUNKS_KERNEL_MESSAGE_BYTES 256
typedef int (*gpusched_chunks_status_kernel_fn)(const void* in0, const void* in1, int64_t in_bytes,
                                                void* out, int64_t out_bytes, void* user,
                                                char* message, int64_t message_bytes);
/* gpusched_chunks_register_kernel with a kernel that returns a status (symbol version
 * GPUSCHED_C_1.1); the other arguments and their checks are the same. */
int gpusched_chunks_register_status_kernel(gpusched_chunks_runtime* runtime, const char* name,
                                           int kind, int inputs, int64_t element_bytes,
                                           int64_t result_bytes,
                                           gpusched_chunks_status_kernel_fn run,
                                           gpusched_chunks_combine_fn combine, void* user);

/* A new job (NULL when out of memory). A job belongs to one thread at a time. */
gpusched_chunks_job* gpusched_chunks_job_new(void);
/* Frees `job`. NULL: nothing. Every call with `job` afterwards is refused without touching
 * freed memory: functions returning int return GPUSCHED_E_INVALID_ARGUMENT ("job: not a live
 * handle: the chunk job handle was destroyed"), the getters below NULL or -1 with that message
 * as the last error, and a second free frees nothing (the message is the last error). */
void gpusched_chunks_job_free(gpusched_chunks_job* job);
/* An input buffer (data != NULL), or a stage output's destination (data != NULL, exact size),
 * or an output the runner allocates (data == NULL, bytes 0). bytes >= 0; cache 0 or 1 (1
 * persists its chunks in GPU memory). */
int gpusched_chunks_job_add_buffer(gpusched_chunks_job* job, const char* name, void* data,
                                   int64_t bytes, int cache);
/* Keeps the GPU copies of input buffer `name` (added with data and cache 1) after the run, in
 * the runtime, so a later job of the runtime whose buffer has the same data address, bytes and
 * `version` uses them (counted in "cache_hits", no "bytes_h2d" for it) instead of copying the
 * buffer again (CN110955526B's cache map, across jobs). gpusched cannot see host memory change:
 * change `version` whenever the contents change; a buffer at the same address with another
 * size or version frees the old copies. Kept copies hold GPU memory until
 * gpusched_chunks_forget_buffer or gpusched_chunks_destroy; memory they hold is not free for
 * other jobs' chunks. GPUSCHED_E_NOT_FOUND for an unknown buffer, GPUSCHED_E_INVALID_ARGUMENT
 * for one without data or cache (and, at run, for one a stage writes). */
int gpusched_chunks_job_keep_buffer(gpusched_chunks_job* job, const char* name, uint64_t version);
/* Frees the kept GPU copies (gpusched_chunks_job_keep_buffer) of every buffer at `data`, for
 * example before the caller frees or reuses that memory; waits for the run in progress.
 * GPUSCHED_E_NOT_FOUND when none is kept there. */
int gpusched_chunks_forget_buffer(gpusched_chunks_runtime* runtime, const void* data);

/* `inputs`: buffer names separated by commas ("a" or "a,b"). `scalar` is the scale kernels'
 * factor (finite), `bins` the histogram's bin count (>= 0; 0 keeps 256). */
int gpusched_chunks_job_add_stage(gpusched_chunks_job* job, const char* name, const char* kernel,
                                  const char* inputs, const char* output, double scalar,
                                  int64_t bins);
int gpusched_chunks_job_add_dependency(gpusched_chunks_job* job, const char* stage,
                                       const char* after);
/* Splits `stage` into `tasks` (>= 1, default 1) Spark tasks: contiguous runs of its chunks, at
 * most one per chunk. Each task goes to the GPU executor, or to the CPU executor when no GPU
 * has the free memory one of its chunk subtasks needs (CN110955526B claim 2). */
int gpusched_chunks_job_set_tasks(gpusched_chunks_job* job, const char* stage, int tasks);

/* Runs the job to completion (a DAG of stages, a barrier between them). */
int gpusched_chunks_run(gpusched_chunks_runtime* runtime, gpusched_chunks_job* job);
/* After a successful run: an output's address and size (NULL / -1 when unknown), and a counter
 * of the run: "subtasks", "bytes_h2d", "bytes_d2h", "cached", "cache_hits", "moves", "waits",
 * "cpu_runs", "gpu_tasks", "cpu_tasks", "task_waves", "pinned_bytes", "pin_failures" (-1 when
 * unknown). */
const void* gpusched_chunks_output_data(const gpusched_chunks_job* job, const char* name);
int64_t gpusched_chunks_output_bytes(const gpusched_chunks_job* job, const char* name);
int64_t gpusched_chunks_stat(const gpusched_chunks_job* job, const char* name);

const char* gpusched_chunks_last_error(void);

/* CN110955526B claim 2 across nodes (issue 42; since GPUSCHED_C_1.5): the driver's plan of a
 * stage's partitions over executors (Spark slaves) on several nodes, by their available GPU
 * memory and free CPUs. Each partition, in order, goes to the best executor at that moment:
 * one with at least max(min_free_cpu, cpus_per_partition) free CPUs (unknown counts, < 0,
 * pass), preferring a GPU with the partition's subtask memory free (the one with the most; a
 * GPU executor beats a CPU executor), then the most free CPUs, ties by executor name; the
 * partition's CPUs and GPU memory are then charged to it. A partition no executor can take
 * is left unassigned. Deterministic. Not thread-safe: one thread per plan.
 * _add_executor: `name` unique and non-empty, `node` may be NULL, gpu_free_bytes[gpu_count]
 * (NULL when 0), free_cpus < 0 when unknown. _add_nodes_json: every available node of the
 * gpusched server's `GET /api/v1/nodes` body as one executor (its name, its healthy GPUs'
 * free_mib; "free_cpus" when the body has it, else unknown); GPUSCHED_E_INVALID_ARGUMENT
 * naming the field ("nodes[0].gpus[1].free_mib: must be an integer") on bad input.
 * _set_min_free_cpu: the free-CPU limit (>= 0, default 0). _assign: plans `partitions`
 * partitions (replacing an earlier plan). _partition: partition `index`'s executor (valid
 * until the next _assign or _free; "" when unassigned) and GPU (-1: the CPU executor or
 * unassigned); either pointer may be NULL. */
typedef struct gpusched_chunks_plan gpusched_chunks_plan;
int gpusched_chunks_plan_new(gpusched_chunks_plan** out);
int gpusched_chunks_plan_add_executor(gpusched_chunks_plan* plan, const char* name,
                                      const char* node, const int64_t* gpu_free_bytes,
                                      int32_t gpu_count, int32_t free_cpus);
int gpusched_chunks_plan_add_nodes_json(gpusched_chunks_plan* plan, const char* json);
int gpusched_chunks_plan_set_min_free_cpu(gpusched_chunks_plan* plan, int32_t min_free_cpu);
int gpusched_chunks_plan_assign(gpusched_chunks_plan* plan, int32_t partitions,
                                int64_t subtask_bytes, int32_t cpus_per_partition);
int gpusched_chunks_plan_partition(const gpusched_chunks_plan* plan, int32_t index,
                                   const char** executor, int32_t* gpu);
int gpusched_chunks_plan_free(gpusched_chunks_plan* plan);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* GPUSCHED_CHUNKS_C_H_ */
