/* gpusched_c.h: the C ABI of gpusched's node-level library (libgpusched_c.so), for C programs,
 * Python (ctypes, see python/gpusched) and the JVM (JNA). It declares the real-time dispatcher
 * and simulated devices here, and the chunk scheduler through gpusched_chunks_c.h, so one
 * header and one library cover the whole ABI.
 *
 * Conventions: functions return 0 on success and a positive gpusched status code on failure
 * (1 invalid argument, 2 not found, ... as StatusCode); gpusched_last_error() then describes
 * it for the calling thread. Times are ms, memory MiB. Every handle is thread-safe unless noted.
 * Nothing here throws or aborts on bad input.
 */
#ifndef GPUSCHED_C_H_
#define GPUSCHED_C_H_

#include <stddef.h>
#include <stdint.h>

#include "gpusched_chunks_c.h" /* CN110955526B chunk scheduler: gpusched_chunks_* */

#ifdef __cplusplus
extern "C" {
#endif

/* The message of the last failed call on this thread ("" if none). Valid until the next call. */
const char* gpusched_last_error(void);

/* ---- CN113051059B real-time dispatcher ---- */

typedef struct gpusched_dispatcher gpusched_dispatcher;

typedef struct {
  const char* name;
  int64_t cost_time_ms; /* expected run time; initial value of the learned cost (claim 6) */
  int64_t wait_time_ms; /* must be < cost_time_ms (claim 7) */
  int64_t try_time_ms;  /* retry period, > 0 (claim 2) */
} gpusched_service_config;

/* Options; 0 everywhere selects the defaults of PATENTS.md section 1. */
typedef struct {
  int32_t gpu_count;
  int32_t literal_release;     /* claim 5: 1 = any finishing task clears the mark */
  int32_t max_fin_time;        /* claim 4: 1 = fin_time = max(fin_time, now + cost) */
  int32_t earliest_finish_scan;/* claim 1: 1 = scan GPUs by fin_time instead of index */
  int32_t elapsed_budget;      /* claim 2: 1 = budget = wait_time - elapsed */
  int32_t direct_no_lock;      /* claim 3: 1 = mode B, run without taking the lock */
  int32_t cost_learning;       /* claim 6: 0 cumulative mean, 1 EMA, 2 offline (fixed) */
  double ema_alpha;            /* for cost_learning == 1; 0 means 0.2 */
  int32_t submit_threads;      /* threads for gpusched_dispatcher_submit; 0 = 16 */
} gpusched_dispatcher_options;

/* Creates a dispatcher on the real clock. Fails with 1 (invalid argument) on a bad config. */
int gpusched_dispatcher_create(const gpusched_dispatcher_options* options,
                               const gpusched_service_config* services, int32_t service_count,
                               gpusched_dispatcher** out);
void gpusched_dispatcher_destroy(gpusched_dispatcher* d);

/* A granted request. Pass it back to gpusched_dispatcher_release when the work is done. */
typedef struct {
  int32_t gpu;
  int32_t service;
  uint64_t ticket;
  int32_t locked;
  int32_t attempts;
  int64_t requested_ns;
  int64_t granted_ns;
} gpusched_lease;

/* Blocks until a GPU is granted to a request of `service` (claims 1-4). */
int gpusched_dispatcher_acquire(gpusched_dispatcher* d, const char* service,
                                gpusched_lease* out);
/* The work of `lease` is done (claims 5, 6). */
int gpusched_dispatcher_release(gpusched_dispatcher* d, const gpusched_lease* lease);

/* Acquire, call fn(gpu, user) on this thread, release. *fn_result receives fn's return. */
typedef int32_t (*gpusched_run_fn)(int32_t gpu, void* user);
int gpusched_dispatcher_run(gpusched_dispatcher* d, const char* service, gpusched_run_fn fn,
                            void* user, int32_t* fn_result);

/* The signal mark of one GPU. */
int gpusched_dispatcher_mark(gpusched_dispatcher* d, int32_t gpu, uint64_t* owner,
                             int64_t* fin_time_ms);

/* ---- Metrics ---- */

typedef struct {
  uint64_t completed;
  uint64_t give_ups;
  uint64_t direct_grabs;
  double queue_ms_mean, queue_ms_max; /* arrival -> GPU granted */
  double run_ms_mean, run_ms_max;     /* granted -> released */
  double cost_time_ms;                /* the current learned cost */
} gpusched_service_metrics;

typedef struct {
  int32_t running;
  uint64_t started;
  double busy_ms;
  double occupancy;     /* busy_ms / time since creation */
  double mean_running;  /* time-averaged leases running */
} gpusched_gpu_metrics;

int gpusched_dispatcher_service_metrics(gpusched_dispatcher* d, const char* service,
                                        gpusched_service_metrics* out);
int gpusched_dispatcher_gpu_metrics(gpusched_dispatcher* d, int32_t gpu,
                                    gpusched_gpu_metrics* out);

/* ---- Simulated devices (dispatch/sim_device.h) on the real clock ---- */

typedef struct gpusched_sim_devices gpusched_sim_devices;

int gpusched_sim_devices_create(int32_t count, int64_t memory_mib, int32_t streams,
                                gpusched_sim_devices** out);
void gpusched_sim_devices_destroy(gpusched_sim_devices* s);
/* Runs a kernel that occupies device `gpu` for `ms` of processor-shared compute, on a free
 * stream, and waits for it. 5 (resource exhausted) when no stream is free. */
int gpusched_sim_devices_compute(gpusched_sim_devices* s, int32_t gpu, double ms);
int gpusched_sim_devices_memory(gpusched_sim_devices* s, int32_t gpu, int64_t* used_bytes,
                                int64_t* total_bytes);
/* Allocates `bytes` on `gpu`, copies `host` in, multiplies every float by `factor` in a
 * kernel, copies back to `host`, frees. A full round trip through the Device interface. */
int gpusched_sim_devices_scale(gpusched_sim_devices* s, int32_t gpu, float* host, int64_t count,
                               float factor);

#ifdef __cplusplus
}
#endif

#endif /* GPUSCHED_C_H_ */
