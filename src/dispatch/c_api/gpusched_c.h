/* gpusched_c.h: the C ABI of gpusched's node-level library (libgpusched_c.so.1), for C programs,
 * Python (ctypes, see python/gpusched) and the JVM (JNA, see java/). It declares the real-time
 * dispatcher and simulated devices here, and the chunk scheduler through gpusched_chunks_c.h,
 * so one header and one library cover the whole ABI.
 *
 * Finding it: `cmake --install BUILD --prefix P` puts the library in P/lib, these headers in
 * P/include/gpusched and gpusched.pc in P/lib/pkgconfig, so
 *   cc app.c $(PKG_CONFIG_PATH=P/lib/pkgconfig pkg-config --cflags --libs gpusched)
 * builds a client (#include <gpusched/gpusched_c.h>).
 *
 * Conventions: functions return 0 on success and a positive gpusched status code on failure
 * (GPUSCHED_E_*: 1 invalid argument, 2 not found, ...); gpusched_last_error() then describes it
 * for the calling thread, naming the argument and its value. Times are ms, memory MiB. Every
 * argument is checked where it is given: options, enum values, negative or NaN times, sizes.
 * Nothing here throws or aborts on bad input.
 *
 * Lifetimes: every handle is thread-safe. Its destroy function refuses new calls, waits for the
 * calls in flight on other threads (a blocked acquire fails with GPUSCHED_E_FAILED_PRECONDITION
 * at its next round), and then frees it. A dispatcher, cancel, simulated-devices, chunk
 * runtime or chunk job handle passed after its destroy (or gpusched_chunks_job_free) returned,
 * a second destroy or free included, made up, or of another kind is refused with
 * GPUSCHED_E_INVALID_ARGUMENT, the message naming the argument and the handle's kind
 * ("runtime: not a live handle: the chunk runtime handle was destroyed"; "... it is a simulated
 * devices handle, not a chunk runtime handle"; "... (never created, or destroyed long ago)"
 * for a value the library never handed out), without reading any memory through it. A handle
 * is not the object's address but an opaque value (never NULL) naming a slot of the library's
 * handle table and the slot's generation; a freed slot is reused only under a new generation,
 * so a destroyed handle stays refused even after new handles of its kind were created, in its
 * slot too. Remaining limit: one slot's generation wraps after 2^36 reuses. Callers must not
 * read through handles or compare them with addresses. A job (gpusched_chunks_job) still
 * belongs to one thread at a time.
 *
 * ABI version 1 (SONAME libgpusched_c.so.1; only gpusched_* symbols are exported). Changes
 * from the unversioned library: destroy functions return int; gpusched_dispatcher_release
 * takes an outcome; cost_time_ms is a double; the options lost submit_threads and gained
 * max_per_gpu and acquire_timeout_ms; service metrics gained `failed`; new functions
 * gpusched_abi_version, gpusched_dispatcher_set_gpu_enabled, gpusched_dispatcher_shutdown,
 * gpusched_chunks_create_cuda and gpusched_cuda_device_count.
 *
 * Additions within version 1 (new functions only; no struct changed): the gpusched policy,
 * now what gpusched_dispatcher_create gives (the literal CN113051059B dispatcher is selected by
 * name with gpusched_dispatcher_create_ex); marks shared between processes
 * (gpusched_dispatcher_create_ex's shared_marks, gpusched_shared_marks_unlink); acquires with a
 * deadline, a cancel handle and an expected run time (gpusched_dispatcher_acquire_ex,
 * gpusched_cancel_*). Handles are now checked: a destroyed or made-up dispatcher or cancel
 * handle gets GPUSCHED_E_INVALID_ARGUMENT instead of undefined behaviour (unless its memory was
 * reused by a new handle of the same kind); simulated-devices and chunk-runtime handles too,
 * since issue 42 (before, a call after their destroy used freed memory). Also from issue 42:
 * the built-in kernel names as GPUSCHED_KERNEL_* (gpusched_chunks_c.h), and chunk_bytes 0 now
 * spreads each input over every GPU (before: fixed 64 MiB chunks); new functions, exported
 * with symbol version GPUSCHED_C_1.1: gpusched_chunks_job_keep_buffer and
 * gpusched_chunks_forget_buffer (the chunk cache kept across jobs), and
 * gpusched_chunks_register_status_kernel (kernels that can fail the run with a message).
 * Then, with symbol version GPUSCHED_C_1.2: gpusched_dispatcher_drain (graceful drain,
 * GPUSCHED_E_DRAINING) and gpusched_dispatcher_try_acquire (GPUSCHED_E_BUSY); and a
 * behaviour change of gpusched_dispatcher_run: a fn that fails now makes it return
 * GPUSCHED_E_RUN_FAILED (it returned 0 before; the lease was and is released as failed).
 * Then, with symbol version GPUSCHED_C_1.3: the asynchronous acquire
 * (gpusched_dispatcher_acquire_async, _event_fd, _poll_async, _cancel_async, _wait_async and
 * gpusched_async_result). A queued lease's requested_ns is now when it was queued. And the
 * metrics as Prometheus text with latency histograms: gpusched_dispatcher_metrics_text.
 * Then, with no new function: CUDA is loaded at run time, from the plugin libgpusched_cuda.so.1
 * installed beside this library, so the library needs no libcudart.so.N or libcuda to load;
 * gpusched_cuda_device_count returning 0 (or -1) now leaves the reason in gpusched_last_error().
 * Then, with symbol version GPUSCHED_C_1.4 (issue 42, item 5): requests that carry GPU memory,
 * a model and a priority (gpusched_request, gpusched_dispatcher_acquire2), and per-GPU memory,
 * seed speeds and the affinity margin at create (gpusched_placement_options,
 * gpusched_dispatcher_create_ex2).
 * Then, with symbol version GPUSCHED_C_1.5: the driver's stage plan across nodes
 * (gpusched_chunks_plan_*, gpusched_chunks_c.h; CN110955526B claim 2); and, with no new
 * function, the literal policy accepts shared_marks (gpusched_dispatcher_create_ex).
 * Then, with symbol version GPUSCHED_C_1.6 (issue 42): the asynchronous acquire with a
 * gpusched_request's placement inputs, queued by priority (gpusched_dispatcher_acquire2_async).
 */
#ifndef GPUSCHED_C_H_
#define GPUSCHED_C_H_

#include <stddef.h>
#include <stdint.h>

#include "gpusched_chunks_c.h" /* CN110955526B chunk scheduler: gpusched_chunks_* */

#ifdef __cplusplus
extern "C" {
#endif

#define GPUSCHED_C_ABI_VERSION 1

/* Status codes (gpusched's StatusCode). */
enum {
  GPUSCHED_OK = 0,
  GPUSCHED_E_INVALID_ARGUMENT = 1,
  GPUSCHED_E_NOT_FOUND = 2,
  GPUSCHED_E_ALREADY_EXISTS = 3,
  GPUSCHED_E_FAILED_PRECONDITION = 4,
  GPUSCHED_E_RESOURCE_EXHAUSTED = 5,
  GPUSCHED_E_UNAVAILABLE = 6,
  GPUSCHED_E_INTERNAL = 7,
  /* From gpusched_dispatcher_acquire_ex only: */
  GPUSCHED_E_DEADLINE_EXCEEDED = 20, /* its deadline_ms passed before a GPU was granted (and
                                        from gpusched_dispatcher_drain: leases still out) */
  GPUSCHED_E_CANCELLED = 21,         /* its cancel handle was fired */
  /* Since issue 42: */
  GPUSCHED_E_RUN_FAILED = 22, /* gpusched_dispatcher_run: fn returned non-zero; the lease was
                                 released as GPUSCHED_FAILED and *fn_result holds fn's value */
  GPUSCHED_E_DRAINING = 23,   /* the dispatcher is draining (gpusched_dispatcher_drain): no
                                 lease is granted any more */
  GPUSCHED_E_BUSY = 24        /* gpusched_dispatcher_try_acquire: no GPU can be granted now */
};

/* GPUSCHED_C_ABI_VERSION of the loaded library: compare it with the header's. */
int gpusched_abi_version(void);

/* The message of the last failed call on this thread ("" if none). Valid until the next call
 * on this thread. Shared by the dispatcher, device and chunk functions. */
const char* gpusched_last_error(void);

/* ---- Node-level dispatcher: the gpusched policy (default) or CN113051059B's ---- */

typedef struct gpusched_dispatcher gpusched_dispatcher;

typedef struct {
  const char* name;
  double cost_time_ms;  /* expected run time, > 0, fractions allowed (0.25); the initial
                           value of the learned cost (claim 6); rounded to whole ms only where
                           it meets a GPU's fin_time */
  int64_t wait_time_ms; /* must be < cost_time_ms (claim 7) */
  int64_t try_time_ms;  /* retry period, > 0 (claim 2) */
} gpusched_service_config;

/* Options; 0 everywhere selects the defaults. Flags take 0 or 1 only; any other value is
 * refused at create. The five claim flags (literal_release ... direct_no_lock) are options of
 * the literal policy only: the gpusched policy refuses them when set, naming the flag. */
typedef struct {
  int32_t gpu_count;           /* >= 1 */
  int32_t literal_release;     /* claim 5: 1 = any finishing task clears the mark */
  int32_t max_fin_time;        /* claim 4: 1 = fin_time = max(fin_time, now + cost) */
  int32_t earliest_finish_scan;/* claim 1: 1 = scan GPUs by fin_time instead of index */
  int32_t elapsed_budget;      /* claim 2: 1 = budget = wait_time - elapsed */
  int32_t direct_no_lock;      /* claim 3: 1 = mode B, run without taking the lock */
  int32_t cost_learning;       /* claim 6: 0 cumulative mean, 1 EMA, 2 offline (fixed) */
  double ema_alpha;            /* for cost_learning == 1: in (0, 1]; 0 means 0.2 */
  int32_t max_per_gpu;         /* backpressure: leases running at once on one GPU; 0 = no cap */
  int64_t acquire_timeout_ms;  /* acquire fails with GPUSCHED_E_UNAVAILABLE after this; 0 = none */
} gpusched_dispatcher_options;

/* Creates a dispatcher running the gpusched policy on the real clock, its marks in this
 * process: gpusched_dispatcher_create_ex(NULL, NULL, ...). */
int gpusched_dispatcher_create(const gpusched_dispatcher_options* options,
                               const gpusched_service_config* services, int32_t service_count,
                               gpusched_dispatcher** out);

/* Creates a dispatcher on the real clock. GPUSCHED_E_INVALID_ARGUMENT on a bad policy, option
 * or service, the message naming it and its value. It starts no threads.
 *
 * policy: NULL or "gpusched": the gpusched policy (DESIGN.md; src/dispatch/gpusched_policy.h):
 *   a request is granted at once the GPU where it is expected to finish earliest, weighed
 *   against the delay it causes the leases already there; it waits only when every GPU is at
 *   max_per_gpu or out of service, and then wakes as soon as a lease is released. Each GPU's
 *   mark is {the lease expected to finish last, that finish}. Services' wait_time_ms and
 *   try_time_ms are checked but not used.
 *   "literal" (or "patent"): the CN113051059B dispatcher as claimed (PATENTS.md section 1),
 *   with the claim flags of the options.
 * shared_marks: NULL: the marks live in this process. "/name" (either policy): the marks
 *   and co-runners (the literal policy: each GPU's signal mark {owner, fin_time} and its
 *   running leases, CN113051059B claim 1's globally unique marks) live in the POSIX shared-memory segment /name (/dev/shm/name), created when
 *   absent; every dispatcher of any process on the machine opened with the same name shares
 *   one set of marks, GPUs out of service and lease tickets. All must give the same gpu_count
 *   (at most 64). A process killed while holding the segment's lock does not block the
 *   others: the next one repairs it and reclaims the dead process's leases (its running
 *   leases also when a waiter times out, within 100 ms). The segment persists until
 *   gpusched_shared_marks_unlink. Costs and metrics stay per process, except the figures of
 *   gpusched_dispatcher_metrics_text's histograms and requests and failures counters, which
 *   every process adds to in the segment (issue 42; up to 32 service names, matched by name;
 *   gpusched_dispatcher_service_metrics stays this process's; the literal policy's metrics
 *   and GPUs out of service stay per process). A segment records the policy that created it:
 *   a dispatcher of the other policy is refused (GPUSCHED_E_INVALID_ARGUMENT).
 *   GPUSCHED_E_UNAVAILABLE when the OS refuses the segment (the message says why). */
int gpusched_dispatcher_create_ex(const char* policy, const char* shared_marks,
                                  const gpusched_dispatcher_options* options,
                                  const gpusched_service_config* services,
                                  int32_t service_count, gpusched_dispatcher** out);

/* Removes the shared-marks segment `name` (processes that have it open keep it).
 * GPUSCHED_E_NOT_FOUND when there is none. */
int gpusched_shared_marks_unlink(const char* name);
/* Refuses new calls, waits for the calls in flight (a gpusched_dispatcher_run in progress
 * finishes its fn; a waiting acquire fails), then frees `d`. Refused with
 * GPUSCHED_E_FAILED_PRECONDITION, leaving `d` usable, while leases from
 * gpusched_dispatcher_acquire are still out (release them, then destroy again) or while another
 * thread is destroying it. NULL: 0. */
int gpusched_dispatcher_destroy(gpusched_dispatcher* d);
/* stop = 1: grant no more leases (waiting and new acquires and runs fail with
 * GPUSCHED_E_FAILED_PRECONDITION; release still works); stop = 0: grant again. Lets a wrapper
 * end its threads' waits before it destroys `d`. */
int gpusched_dispatcher_shutdown(gpusched_dispatcher* d, int32_t stop);

/* A granted request. Pass it back, unchanged, to gpusched_dispatcher_release when the work is
 * done. `ticket` is unique in the process and identifies the lease to its dispatcher.
 *
 * What the per-GPU lock guarantees: `locked` = 1 means this request became the owner recorded
 * in the GPU's signal mark (claim 4), and the default owner-checked release lets only the owner
 * reset the mark (claim 5). What it does NOT guarantee: exclusive use of the GPU. A request
 * whose expected cost fits inside the owner's remaining busy time is granted the same GPU and
 * runs beside it (claim 1, the backfill reading of PATENTS.md), and after its wait budget a
 * request may be granted a busy GPU directly (claim 3; with direct_no_lock without the lock).
 * Use max_per_gpu to bound how many leases run on one GPU at once. Under the gpusched policy
 * `locked` = 1 means the lease was, at its grant, the one its GPU's mark names (expected to
 * finish last); leases share GPUs by design there too. */
typedef struct {
  int32_t gpu;
  int32_t service;
  uint64_t ticket;
  int32_t locked;
  int32_t attempts;
  int64_t requested_ns;
  int64_t granted_ns;
} gpusched_lease;

/* Blocks until a GPU is granted to a request of `service` (claims 1-4). GPUSCHED_E_NOT_FOUND
 * for an unknown service; GPUSCHED_E_UNAVAILABLE when acquire_timeout_ms passed first (every
 * GPU at max_per_gpu or out of service); GPUSCHED_E_FAILED_PRECONDITION while destroying;
 * GPUSCHED_E_DRAINING once gpusched_dispatcher_drain was called (a waiting acquire too). */
int gpusched_dispatcher_acquire(gpusched_dispatcher* d, const char* service,
                                gpusched_lease* out);

/* A cancel handle: fire it from any thread to end the gpusched_dispatcher_acquire_ex calls
 * waiting with it (they return GPUSCHED_E_CANCELLED at once). Once fired it stays fired, and an
 * acquire_ex given it fails at once, until gpusched_cancel_reset. Thread-safe. */
typedef struct gpusched_cancel gpusched_cancel;

int gpusched_cancel_create(gpusched_cancel** out);
/* Fires `c` (idempotent). */
int gpusched_cancel_fire(gpusched_cancel* c);
/* Unfires `c`, so it can serve another request. */
int gpusched_cancel_reset(gpusched_cancel* c);
/* 1 when fired, 0 when not, in *fired. */
int gpusched_cancel_fired(gpusched_cancel* c, int32_t* fired);
/* Fires `c`, waits for the acquires using it to return, then frees it. NULL: 0. */
int gpusched_cancel_destroy(gpusched_cancel* c);

/* gpusched_dispatcher_acquire with per-request options:
 * deadline_ms: give up after this many ms from now (> 0), 0: none (beyond acquire_timeout_ms);
 *   negative: GPUSCHED_E_INVALID_ARGUMENT. Returns GPUSCHED_E_DEADLINE_EXCEEDED when it passed.
 * cancel: NULL, or a cancel handle; GPUSCHED_E_CANCELLED when it was fired before a grant.
 * expected_ms: this request's expected run time on an idle GPU (finite, >= 0; 0: its
 *   service's learned cost), used by the gpusched policy to place it; ignored by the literal
 *   policy.
 * Other returns as gpusched_dispatcher_acquire (GPUSCHED_E_UNAVAILABLE: acquire_timeout_ms). The
 * literal policy waits in try_time_ms steps: its deadline is seen within one step, its cancel
 * at once. */
int gpusched_dispatcher_acquire_ex(gpusched_dispatcher* d, const char* service,
                                   int64_t deadline_ms, gpusched_cancel* cancel,
                                   double expected_ms, gpusched_lease* out);

/* How the work of a lease ended. */
enum { GPUSCHED_SUCCEEDED = 0, GPUSCHED_FAILED = 1 };

/* The work of `lease` is done (claims 5, 6): the GPU's mark is reset and, when `outcome` is
 * GPUSCHED_SUCCEEDED, the run time trains the service's cost; a GPUSCHED_FAILED request counts
 * in `failed` and trains nothing. Refused (nothing changes, counters never go negative):
 * GPUSCHED_E_NOT_FOUND for a ticket not outstanding on `d` (released already, zeroed, made up,
 * or another dispatcher's), GPUSCHED_E_INVALID_ARGUMENT for a lease whose gpu or service was
 * altered, or an outcome other than 0 or 1. Allowed while `d` is being destroyed. */
int gpusched_dispatcher_release(gpusched_dispatcher* d, const gpusched_lease* lease,
                                int32_t outcome);

/* Acquire, call fn(gpu, user) on this thread, release. fn returns 0 on success; any other value
 * is a failed request: the lease is released as GPUSCHED_FAILED (counted in `failed`, its run
 * time trains no cost) and the call returns GPUSCHED_E_RUN_FAILED, the message naming fn's
 * value and the GPU. *fn_result (may be NULL) receives fn's return in both cases. A binding
 * whose callback raises returns non-zero from fn and re-raises after the call (Python, Java).
 * Before issue 42 a failing fn made this call return 0. Errors of the acquire as
 * gpusched_dispatcher_acquire, and GPUSCHED_E_DRAINING while draining; fn is not called then. */
typedef int32_t (*gpusched_run_fn)(int32_t gpu, void* user);
int gpusched_dispatcher_run(gpusched_dispatcher* d, const char* service, gpusched_run_fn fn,
                            void* user, int32_t* fn_result);

/* Drains `d` (symbol version GPUSCHED_C_1.2): from the call on, no lease is granted (new
 * acquires, try_acquires and runs fail with GPUSCHED_E_DRAINING, and so does, once, each
 * acquire waiting at that moment); the leases already out (from acquire, or held by a run in
 * progress) may finish and be released, for up to deadline_ms (>= 0; 0: do not wait).
 * Returns 0 when every lease came back in time, GPUSCHED_E_DEADLINE_EXCEEDED otherwise, the
 * message naming the tickets and GPUs still out. An acquire still returning counts as out
 * (it may hold a grant): the literal policy's waiters see the drain at their next try_time
 * round, so a drain shorter than try_time_ms may time out on them alone. Either way `d` stays drained, for good
 * (gpusched_dispatcher_shutdown(d, 0) is refused with GPUSCHED_E_DRAINING): release what is
 * out (drain again to wait longer), then gpusched_dispatcher_destroy it; the Python and Java
 * drain close their dispatcher after a drain that returned 0. */
int gpusched_dispatcher_drain(gpusched_dispatcher* d, int64_t deadline_ms);

/* gpusched_dispatcher_acquire that never waits (symbol version GPUSCHED_C_1.2): a lease when a
 * GPU can be granted now, else GPUSCHED_E_BUSY at once (every GPU at max_per_gpu or out of
 * service; the literal policy: no GPU granted in its first round). GPUSCHED_E_DRAINING while
 * draining; other errors as gpusched_dispatcher_acquire. */
int gpusched_dispatcher_try_acquire(gpusched_dispatcher* d, const char* service,
                                    gpusched_lease* out);

/* ---- Placement inputs (symbol version GPUSCHED_C_1.4, issue 42 item 5) ----
 *
 * The gpusched policy can also place by a request's GPU memory, its model (kept on the GPUs
 * that have it loaded) and its priority, on GPUs of uneven speed. The literal policy has none of
 * these (PATENTS.md section 1): it refuses them with GPUSCHED_E_INVALID_ARGUMENT naming the
 * field. Structs carry struct_size = sizeof(the struct) of the caller's header, so they can
 * grow; this library accepts exactly the sizes below. */

/* Per-GPU inputs given at create. Zero everywhere (with struct_size set) is the default. */
typedef struct {
  uint32_t struct_size;          /* sizeof(gpusched_placement_options) */
  const int64_t* gpu_memory_mib; /* gpu_count entries, each > 0, or NULL: memory not tracked
                                    (then requests must give expected_mem_mib 0) */
  const double* gpu_speed;       /* gpu_count seed speed factors (time multipliers, > 0; 2 =
                                    twice as slow), or NULL: all 1 */
  double affinity_margin_ms;     /* >= 0: a request of a model goes to a GPU that has the model
                                    loaded while that GPU's expected finish is within this of
                                    the earliest any GPU offers */
  int32_t models_per_gpu;        /* models remembered per GPU (least recently granted forgotten
                                    first); 0: 4 */
  int32_t fixed_speed;           /* 1: keep the seed speeds, never learn them; 0: learn */
} gpusched_placement_options;

/* gpusched_dispatcher_create_ex with placement options (NULL: as create_ex). With memory given,
 * shared_marks is refused (other processes' leases would not be counted). */
int gpusched_dispatcher_create_ex2(const char* policy, const char* shared_marks,
                                   const gpusched_dispatcher_options* options,
                                   const gpusched_service_config* services,
                                   int32_t service_count,
                                   const gpusched_placement_options* placement,
                                   gpusched_dispatcher** out);

/* One request. Zero everywhere (with struct_size and service set) is a plain acquire. */
typedef struct {
  uint32_t struct_size;     /* sizeof(gpusched_request) */
  const char* service;      /* required */
  double expected_ms;       /* as gpusched_dispatcher_acquire_ex; 0: the service's cost */
  int64_t deadline_ms;      /* as gpusched_dispatcher_acquire_ex; 0: none */
  gpusched_cancel* cancel;  /* as gpusched_dispatcher_acquire_ex; NULL: none */
  int64_t expected_mem_mib; /* GPU memory it needs while it runs, >= 0; granted only a GPU
                               with that much free (its memory minus the expected memory of
                               the leases out on it); GPUSCHED_E_INVALID_ARGUMENT when larger
                               than every GPU */
  const char* model;        /* NULL or "": none; else kept on GPUs that have it loaded */
  int32_t priority;         /* waiting requests: higher first, equal ones in arrival order; a
                               waiting request holds back later ones of lower or equal
                               priority (none starves) */
} gpusched_request;

/* gpusched_dispatcher_acquire_ex with a gpusched_request. Returns as acquire_ex; release the
 * lease with gpusched_dispatcher_release. */
int gpusched_dispatcher_acquire2(gpusched_dispatcher* d, const gpusched_request* req,
                                 gpusched_lease* out);

/* ---- Asynchronous acquire (symbol version GPUSCHED_C_1.3, issue 42) ----
 *
 * An acquire that waits in a queue instead of on a thread: an event loop with thousands of
 * queued requests needs no thread per request. gpusched_dispatcher_acquire_async queues a
 * request and returns its id at once; the request completes (granted, or failed with a code)
 * later, and its result is taken with gpusched_dispatcher_poll_async. One file descriptor per
 * dispatcher (gpusched_dispatcher_event_fd) is readable while results wait to be taken: give it
 * to poll/epoll/select or an event loop (asyncio's add_reader), or block on it with
 * gpusched_dispatcher_wait_async. Do not read() it: poll_async clears it.
 *
 * When a request completes: it is tried at once when queued behind no other asynchronous
 * request; then, in queue order, whenever capacity may have freed: at each release (through
 * gpusched_dispatcher_release or a run's end), gpusched_dispatcher_set_gpu_enabled, and at each
 * poll_async (with shared marks the fd also fires every 100 ms while requests are queued, so a
 * release in another process is seen). Asynchronous requests are granted in FIFO order: never
 * one before an older one still queued (with priorities, from
 * gpusched_dispatcher_acquire2_async: highest priority first, then FIFO; see there). Blocking
 * acquires are not in that queue; they and the queue's first request take freed capacity in
 * whatever order they reach the policy (its waiting acquires of higher priority, or of equal
 * priority, go first). With the
 * literal policy a queued request is retried at those moments, not every try_time_ms, and
 * never grabs directly (claim 3): only the gpusched policy (the default) suits async use.
 *
 * How a request ends (status in its gpusched_async_result): 0 with a lease (release it as
 * any lease); GPUSCHED_E_DEADLINE_EXCEEDED when its deadline_ms passed; GPUSCHED_E_UNAVAILABLE
 * when the dispatcher's acquire_timeout_ms passed; GPUSCHED_E_CANCELLED after
 * gpusched_dispatcher_cancel_async; GPUSCHED_E_DRAINING, once, when the dispatcher is drained;
 * GPUSCHED_E_FAILED_PRECONDITION after gpusched_dispatcher_shutdown(d, 1) or during
 * gpusched_dispatcher_destroy. Timeouts are measured on the monotonic clock and need no thread:
 * the fd (a timerfd on CLOCK_MONOTONIC) fires at the earliest deadline and the poll that
 * follows ends the request. No call here starts a thread.
 *
 * Destroy: queued requests fail with GPUSCHED_E_FAILED_PRECONDITION; destroy then frees them
 * with the dispatcher, unless it is refused (a lease still out, one granted to an async
 * request and not yet polled included): then they wait to be polled. */
typedef struct {
  uint64_t request;       /* the id gpusched_dispatcher_acquire_async gave */
  int32_t status;         /* 0: granted, `lease` is valid; else a GPUSCHED_E_* code */
  int32_t reserved;
  gpusched_lease lease;   /* when status == 0 */
  char message[256];      /* when status != 0: why (NUL-terminated, truncated to fit) */
} gpusched_async_result;

/* Queues a request of `service` and returns at once; *request_out receives its id (unique in
 * the dispatcher, never 0). deadline_ms, expected_ms: as gpusched_dispatcher_acquire_ex (0: no
 * deadline beyond acquire_timeout_ms; 0: the service's cost). Errors here (nothing queued):
 * GPUSCHED_E_INVALID_ARGUMENT (NULL service or request_out, negative deadline_ms, bad
 * expected_ms), GPUSCHED_E_NOT_FOUND (unknown service). A request refused later (draining,
 * shutdown) completes with that code instead; its result is polled like any other. */
int gpusched_dispatcher_acquire_async(gpusched_dispatcher* d, const char* service,
                                      int64_t deadline_ms, double expected_ms,
                                      uint64_t* request_out);

/* gpusched_dispatcher_acquire_async with a gpusched_request (symbol version GPUSCHED_C_1.6,
 * issue 42): the placement inputs of gpusched_dispatcher_acquire2 for a queued request. `req`
 * is checked as acquire2 checks it, with the same errors naming the field and its value (NULL
 * req, struct_size, service, deadline_ms, expected_ms, expected_mem_mib larger than every GPU
 * or given without gpu_memory_mib, and with the literal policy any of expected_mem_mib, model
 * or priority), returned here with nothing queued; also GPUSCHED_E_INVALID_ARGUMENT for a
 * non-NULL req->cancel (end a queued request with gpusched_dispatcher_cancel_async). `req` and
 * its strings are copied: they may be freed when this returns. The request waits and ends as
 * one of gpusched_dispatcher_acquire_async, and each try gives the policy its memory (granted
 * only a GPU where it fits: it waits for a release otherwise), model and priority.
 *
 * Order with priorities: the queue is ordered as the gpusched policy orders its own waiting
 * requests: highest priority first, equal priorities oldest first. Only the queue's first
 * request is tried, and the next once it is granted (or ended), so a request is never granted
 * before a queued one of higher priority, or of equal priority queued before it; a later
 * request of higher priority goes ahead of the queued ones of lower priority. A request that
 * fits no GPU yet (its memory) holds back those behind it until it fits: no request passes one
 * of its own or higher priority, and none starves behind smaller ones. With every priority 0
 * (as gpusched_dispatcher_acquire_async queues them) this is the FIFO order above. */
int gpusched_dispatcher_acquire2_async(gpusched_dispatcher* d, const gpusched_request* req,
                                       uint64_t* request_out);

/* The dispatcher's completion fd (>= 0) in *fd_out: readable while results wait. It belongs to
 * the dispatcher (closed by destroy); never read or close it. */
int gpusched_dispatcher_event_fd(gpusched_dispatcher* d, int32_t* fd_out);

/* Takes up to `cap` (>= 1) results, oldest first, into out[0, *n_out); *n_out = 0 when none.
 * Each result is returned once, to one caller. Also ends the requests whose deadline passed
 * and grants queued ones where capacity freed. */
int gpusched_dispatcher_poll_async(gpusched_dispatcher* d, gpusched_async_result* out,
                                   size_t cap, size_t* n_out);

/* Ends queued request `request`: it completes with GPUSCHED_E_CANCELLED (poll its result).
 * GPUSCHED_E_NOT_FOUND when it is not queued: completed already (its result, perhaps a lease
 * to release, is or was polled) or never given by this dispatcher. */
int gpusched_dispatcher_cancel_async(gpusched_dispatcher* d, uint64_t request);

/* Blocks until results wait to be taken or timeout_ms (0 to 2^31-1) passed; *ready (may be
 * NULL) = 1 when the fd is readable, 0 on timeout. For a binding without an event loop (Java's
 * poller thread). May return ready with nothing to poll (destroy wakes it). */
int gpusched_dispatcher_wait_async(gpusched_dispatcher* d, int64_t timeout_ms, int32_t* ready);

/* The signal mark of one GPU: the literal policy's lock owner and fin_time (claim 4), or the
 * gpusched policy's lease expected to finish last and that time (owner 0: idle, fin_time now).
 * Times are ms of the clock the policy runs on. */
int gpusched_dispatcher_mark(gpusched_dispatcher* d, int32_t gpu, uint64_t* owner,
                             int64_t* fin_time_ms);

/* Takes `gpu` out of service (enabled = 0: no new grants, its running leases finish normally)
 * or puts it back (1). */
int gpusched_dispatcher_set_gpu_enabled(gpusched_dispatcher* d, int32_t gpu, int32_t enabled);

/* ---- Metrics ---- */

typedef struct {
  uint64_t completed;                 /* released, failed ones included */
  uint64_t failed;                    /* released as GPUSCHED_FAILED */
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

/* The dispatcher's metrics as Prometheus text exposition format 0.0.4 (symbol version
 * GPUSCHED_C_1.3, issue 42), NUL-terminated in buf[0, cap); *len_out = its length without the
 * NUL. Per service and GPU, histograms of latency (arrival -> release) and queue wait (arrival
 * -> grant), buckets 0.1 ms to 60 s in 1-2-5 steps, from which p50 and p99 are computed
 * (histogram_quantile); per service, counters of requests, failures, timeouts (an acquire's
 * deadline_ms or acquire_timeout_ms, asynchronous ones included) and give-ups, and the learned
 * cost; per GPU, leases running and busy time. Names start gpusched_dispatch_; times are
 * seconds; service names are escaped as label values. Every family has HELP and TYPE lines.
 * With shared marks (gpusched policy), the histograms and the requests and failures counters
 * are every process's on the segment (each process reports the same figures: scrape one); the
 * timeouts, give-ups, cost and GPU figures stay this process's.
 * When cap < *len_out + 1 (buf may be NULL with cap 0, to ask for the size):
 * GPUSCHED_E_RESOURCE_EXHAUSTED naming both sizes, *len_out set, buf untouched. The text may
 * grow between two calls: allocate a little more, or loop. */
int gpusched_dispatcher_metrics_text(gpusched_dispatcher* d, char* buf, size_t cap,
                                     size_t* len_out);

/* ---- Simulated devices (dispatch/sim_device.h) on the real clock ---- */

typedef struct gpusched_sim_devices gpusched_sim_devices;

int gpusched_sim_devices_create(int32_t count, int64_t memory_mib, int32_t streams,
                                gpusched_sim_devices** out);
/* Waits for the calls in flight, then frees `s`. NULL: 0. Every call with `s` afterwards, a
 * second destroy included: GPUSCHED_E_INVALID_ARGUMENT ("devices: not a live handle: the
 * simulated devices handle was destroyed"). */
int gpusched_sim_devices_destroy(gpusched_sim_devices* s);
/* Runs a kernel that occupies device `gpu` for `ms` (finite, >= 0) of processor-shared
 * compute, on a free stream, and waits for it. 5 (resource exhausted) when no stream is free. */
int gpusched_sim_devices_compute(gpusched_sim_devices* s, int32_t gpu, double ms);
int gpusched_sim_devices_memory(gpusched_sim_devices* s, int32_t gpu, int64_t* used_bytes,
                                int64_t* total_bytes);
/* Allocates `count` floats on `gpu`, copies `host` in, multiplies every float by `factor`
 * (finite) in a kernel, copies back to `host`, frees. A full round trip through the Device
 * interface. */
int gpusched_sim_devices_scale(gpusched_sim_devices* s, int32_t gpu, float* host, int64_t count,
                               float factor);

#ifdef __cplusplus
}
#endif

#endif /* GPUSCHED_C_H_ */
