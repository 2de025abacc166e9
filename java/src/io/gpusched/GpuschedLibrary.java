package io.gpusched;

import com.sun.jna.Callback;
import com.sun.jna.Library;
import com.sun.jna.Native;
import com.sun.jna.Pointer;
import com.sun.jna.Structure;
import com.sun.jna.ptr.IntByReference;
import com.sun.jna.ptr.LongByReference;
import com.sun.jna.ptr.PointerByReference;
import java.io.File;
import java.nio.file.Paths;

/**
 * The whole C ABI of libgpusched_c.so.1 (gpusched_c.h and gpusched_chunks_c.h) as a JNA
 * interface, with its structures and callbacks, so no user re-declares it. {@link Dispatcher}
 * and {@link ChunkRuntime} wrap it with guarded, AutoCloseable handles; use this interface
 * directly only for what they do not cover. Every int-returning function returns 0 or a status
 * code ({@link #E_INVALID_ARGUMENT}, ...); {@link #gpusched_last_error()} then names the
 * argument and its value.
 *
 * <p>Finding the library ({@link #load()}): the system property {@code gpusched.library} (a
 * path), else $GPUSCHED_C_LIB, else {@code ../../lib/libgpusched_c.so.1} relative to this jar
 * (where {@code cmake --install} puts both), else "gpusched_c" on {@code -Djna.library.path}.
 * Debian's JNA also needs {@code -Djna.boot.library.path=/usr/lib/<multiarch>/jni}.
 *
 * <p>The per-GPU lock is an ownership token, not mutual exclusion: several leases can run on
 * one GPU at once (see gpusched_c.h); set {@code max_per_gpu} to bound them.
 */
public interface GpuschedLibrary extends Library {
  int ABI_VERSION = 1;
  int OK = 0;
  int E_INVALID_ARGUMENT = 1;
  int E_NOT_FOUND = 2;
  int E_ALREADY_EXISTS = 3;
  int E_FAILED_PRECONDITION = 4;
  int E_RESOURCE_EXHAUSTED = 5;
  int E_UNAVAILABLE = 6;
  int E_INTERNAL = 7;
  /** From gpusched_dispatcher_acquire_ex: its deadline passed, or its cancel handle fired. */
  int E_DEADLINE_EXCEEDED = 20;
  int E_CANCELLED = 21;
  /** Issue 42: gpusched_dispatcher_run's fn failed (the lease was released as failed). */
  int E_RUN_FAILED = 22;
  /** Issue 42: the dispatcher is draining (gpusched_dispatcher_drain); nothing is granted. */
  int E_DRAINING = 23;
  /** Issue 42: gpusched_dispatcher_try_acquire found no GPU it could grant now. */
  int E_BUSY = 24;
  int SUCCEEDED = 0;
  int FAILED = 1;

  /** Loads the library once per call (see the class comment for where it looks). */
  static GpuschedLibrary load() {
    String path = System.getProperty("gpusched.library");
    if (path == null) path = System.getenv("GPUSCHED_C_LIB");
    if (path == null) {
      try {
        File jar = Paths.get(GpuschedLibrary.class.getProtectionDomain().getCodeSource()
                                 .getLocation().toURI()).toFile();
        File installed = new File(jar.getParentFile(), "../../lib/libgpusched_c.so." + ABI_VERSION);
        if (jar.isFile() && installed.isFile()) path = installed.getCanonicalPath();
      } catch (Exception e) {
        // no code source (e.g. a custom class loader): fall back to the name
      }
    }
    GpuschedLibrary lib = Native.load(path != null ? path : "gpusched_c", GpuschedLibrary.class);
    if (lib.gpusched_abi_version() != ABI_VERSION) {
      throw new UnsatisfiedLinkError("libgpusched_c has ABI version " + lib.gpusched_abi_version()
                                     + ", this binding needs " + ABI_VERSION);
    }
    return lib;
  }

  int gpusched_abi_version();
  String gpusched_last_error();

  // ---- CN113051059B real-time dispatcher ----

  @Structure.FieldOrder({"name", "cost_time_ms", "wait_time_ms", "try_time_ms"})
  class ServiceConfig extends Structure {
    public String name;
    public double cost_time_ms;
    public long wait_time_ms;
    public long try_time_ms;
  }

  @Structure.FieldOrder({"gpu_count", "literal_release", "max_fin_time", "earliest_finish_scan",
                         "elapsed_budget", "direct_no_lock", "cost_learning", "ema_alpha",
                         "max_per_gpu", "acquire_timeout_ms"})
  class DispatcherOptions extends Structure {
    public int gpu_count;
    public int literal_release;
    public int max_fin_time;
    public int earliest_finish_scan;
    public int elapsed_budget;
    public int direct_no_lock;
    public int cost_learning;
    public double ema_alpha;
    public int max_per_gpu;
    public long acquire_timeout_ms;
  }

  @Structure.FieldOrder({"gpu", "service", "ticket", "locked", "attempts", "requested_ns",
                         "granted_ns"})
  class Lease extends Structure {
    public int gpu;
    public int service;
    public long ticket;
    public int locked;
    public int attempts;
    public long requested_ns;
    public long granted_ns;
  }

  @Structure.FieldOrder({"completed", "failed", "give_ups", "direct_grabs", "queue_ms_mean",
                         "queue_ms_max", "run_ms_mean", "run_ms_max", "cost_time_ms"})
  class ServiceMetrics extends Structure {
    public long completed;
    public long failed;
    public long give_ups;
    public long direct_grabs;
    public double queue_ms_mean;
    public double queue_ms_max;
    public double run_ms_mean;
    public double run_ms_max;
    public double cost_time_ms;
  }

  @Structure.FieldOrder({"running", "started", "busy_ms", "occupancy", "mean_running"})
  class GpuMetrics extends Structure {
    public int running;
    public long started;
    public double busy_ms;
    public double occupancy;
    public double mean_running;
  }

  /**
   * gpusched_run_fn: returns 0 on success; anything else releases the lease as failed and makes
   * gpusched_dispatcher_run return {@link #E_RUN_FAILED}. Called through the raw interface, an
   * exception it throws is lost by JNA (the call sees 0): use {@link Dispatcher#run}, which
   * catches it, fails the lease and rethrows it.
   */
  interface RunFn extends Callback {
    int invoke(int gpu, Pointer user);
  }

  int gpusched_dispatcher_create(DispatcherOptions options, ServiceConfig services,
                                 int serviceCount, PointerByReference out);
  /** policy: null or "gpusched" (default), "literal"; sharedMarks: null or "/name". */
  int gpusched_dispatcher_create_ex(String policy, String sharedMarks, DispatcherOptions options,
                                    ServiceConfig services, int serviceCount,
                                    PointerByReference out);
  int gpusched_shared_marks_unlink(String name);

  /** gpusched_placement_options (issue 42 item 5, GPUSCHED_C_1.4); see gpusched_c.h. */
  @Structure.FieldOrder({"struct_size", "gpu_memory_mib", "gpu_speed", "affinity_margin_ms",
                         "models_per_gpu", "fixed_speed"})
  class PlacementOptions extends Structure {
    public int struct_size;
    public Pointer gpu_memory_mib;
    public Pointer gpu_speed;
    public double affinity_margin_ms;
    public int models_per_gpu;
    public int fixed_speed;
  }

  /** gpusched_request (issue 42 item 5, GPUSCHED_C_1.4); see gpusched_c.h. */
  @Structure.FieldOrder({"struct_size", "service", "expected_ms", "deadline_ms", "cancel",
                         "expected_mem_mib", "model", "priority"})
  class Request extends Structure {
    public int struct_size;
    public String service;
    public double expected_ms;
    public long deadline_ms;
    public Pointer cancel;
    public long expected_mem_mib;
    public String model;
    public int priority;
  }

  int gpusched_dispatcher_create_ex2(String policy, String sharedMarks, DispatcherOptions options,
                                     ServiceConfig services, int serviceCount,
                                     PlacementOptions placement, PointerByReference out);
  int gpusched_dispatcher_acquire2(Pointer d, Request request, Lease out);
  int gpusched_dispatcher_acquire_ex(Pointer d, String service, long deadlineMs, Pointer cancel,
                                     double expectedMs, Lease out);
  int gpusched_cancel_create(PointerByReference out);
  int gpusched_cancel_fire(Pointer c);
  int gpusched_cancel_reset(Pointer c);
  int gpusched_cancel_fired(Pointer c, IntByReference fired);
  int gpusched_cancel_destroy(Pointer c);
  int gpusched_dispatcher_destroy(Pointer d);
  int gpusched_dispatcher_shutdown(Pointer d, int stop);
  int gpusched_dispatcher_acquire(Pointer d, String service, Lease out);
  /** Never waits: 0 and a lease, or {@link #E_BUSY} at once (symbol version GPUSCHED_C_1.2). */
  int gpusched_dispatcher_try_acquire(Pointer d, String service, Lease out);
  /** Stops granting, waits up to deadlineMs for the leases out (GPUSCHED_C_1.2). */
  int gpusched_dispatcher_drain(Pointer d, long deadlineMs);
  int gpusched_dispatcher_release(Pointer d, Lease lease, int outcome);
  int gpusched_dispatcher_run(Pointer d, String service, RunFn fn, Pointer user,
                              Pointer fnResult);
  int gpusched_dispatcher_mark(Pointer d, int gpu, LongByReference owner,
                               LongByReference finTimeMs);
  int gpusched_dispatcher_set_gpu_enabled(Pointer d, int gpu, int enabled);
  /** gpusched_async_result: one completed asynchronous request (GPUSCHED_C_1.3). */
  @Structure.FieldOrder({"request", "status", "reserved", "lease", "message"})
  class AsyncResult extends Structure {
    public long request;
    public int status;
    public int reserved;
    public Lease lease;
    public byte[] message = new byte[256];
  }

  // Asynchronous acquire (symbol version GPUSCHED_C_1.3): see gpusched_c.h. size_t is a Java
  // long here (LP64 Linux only, as the rest of this binding).
  int gpusched_dispatcher_acquire_async(Pointer d, String service, long deadlineMs,
                                        double expectedMs, LongByReference requestOut);
  /** acquire_async with a gpusched_request (symbol version GPUSCHED_C_1.6). */
  int gpusched_dispatcher_acquire2_async(Pointer d, Request request, LongByReference requestOut);
  int gpusched_dispatcher_event_fd(Pointer d, IntByReference fdOut);
  int gpusched_dispatcher_poll_async(Pointer d, AsyncResult out, long cap, LongByReference nOut);
  int gpusched_dispatcher_cancel_async(Pointer d, long request);
  int gpusched_dispatcher_wait_async(Pointer d, long timeoutMs, IntByReference ready);
  /** Prometheus text into buf[0, cap); E_RESOURCE_EXHAUSTED and the length when too small. */
  int gpusched_dispatcher_metrics_text(Pointer d, Pointer buf, long cap, LongByReference lenOut);
  int gpusched_dispatcher_service_metrics(Pointer d, String service, ServiceMetrics out);
  int gpusched_dispatcher_gpu_metrics(Pointer d, int gpu, GpuMetrics out);

  // ---- simulated devices ----

  int gpusched_sim_devices_create(int count, long memoryMib, int streams, PointerByReference out);
  int gpusched_sim_devices_destroy(Pointer s);
  int gpusched_sim_devices_compute(Pointer s, int gpu, double ms);
  int gpusched_sim_devices_memory(Pointer s, int gpu, LongByReference used, LongByReference total);
  int gpusched_sim_devices_scale(Pointer s, int gpu, Pointer host, long count, float factor);

  // ---- CN110955526B chunk scheduler ----

  /** gpusched_chunks_kernel_fn; {@code in1} is null for one-input kernels. */
  interface KernelFn extends Callback {
    void invoke(Pointer in0, Pointer in1, long inBytes, Pointer out, long outBytes, Pointer user);
  }

  /** gpusched_chunks_combine_fn: folds a reduce partial into the accumulator. */
  interface CombineFn extends Callback {
    void invoke(Pointer acc, Pointer partial, long bytes, Pointer user);
  }

  int gpusched_chunks_create_sim(int numGpus, long gpuMemoryMib, long chunkBytes,
                                 PointerByReference out);
  int gpusched_chunks_create_cuda(int numGpus, long chunkBytes, PointerByReference out);
  int gpusched_cuda_device_count();
  int gpusched_chunks_destroy(Pointer runtime);
  int gpusched_chunks_register_kernel(Pointer runtime, String name, int kind, int inputs,
                                      long elementBytes, long resultBytes, KernelFn run,
                                      CombineFn combine, Pointer user);
  Pointer gpusched_chunks_job_new();
  void gpusched_chunks_job_free(Pointer job);
  int gpusched_chunks_job_add_buffer(Pointer job, String name, Pointer data, long bytes, int cache);
  int gpusched_chunks_job_add_stage(Pointer job, String name, String kernel, String inputs,
                                    String output, double scalar, long bins);
  int gpusched_chunks_job_add_dependency(Pointer job, String stage, String after);
  int gpusched_chunks_job_set_tasks(Pointer job, String stage, int tasks);
  int gpusched_chunks_run(Pointer runtime, Pointer job);
  Pointer gpusched_chunks_output_data(Pointer job, String name);
  long gpusched_chunks_output_bytes(Pointer job, String name);
  long gpusched_chunks_stat(Pointer job, String name);
  String gpusched_chunks_last_error();

  // CN110955526B claim 2 across nodes (GPUSCHED_C_1.5): the driver's stage plan (StagePlan).
  int gpusched_chunks_plan_new(PointerByReference out);
  int gpusched_chunks_plan_add_executor(Pointer plan, String name, String node,
                                        long[] gpuFreeBytes, int gpuCount, int freeCpus);
  int gpusched_chunks_plan_add_nodes_json(Pointer plan, String json);
  int gpusched_chunks_plan_set_min_free_cpu(Pointer plan, int minFreeCpu);
  int gpusched_chunks_plan_assign(Pointer plan, int partitions, long subtaskBytes,
                                  int cpusPerPartition);
  int gpusched_chunks_plan_partition(Pointer plan, int index, PointerByReference executor,
                                     IntByReference gpu);
  int gpusched_chunks_plan_free(Pointer plan);
}
