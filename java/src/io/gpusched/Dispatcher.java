package io.gpusched;

import com.sun.jna.Memory;
import com.sun.jna.Pointer;
import com.sun.jna.ptr.LongByReference;
import com.sun.jna.ptr.PointerByReference;
import java.util.concurrent.CompletableFuture;

/**
 * A node-level dispatcher (gpusched_dispatcher_*), shared by threads: the gpusched policy by
 * default, or the literal CN113051059B dispatcher when constructed with policy "literal"; its
 * marks in this process, or shared by every process that names the same segment. close()
 * (or try-with-resources) waits for calls in flight on other threads, ends their waiting
 * acquires, and is refused with {@link GpuschedLibrary#E_FAILED_PRECONDITION} while leases from
 * {@link #acquire} are out. The per-GPU lock is not exclusive: see {@link GpuschedLibrary}.
 */
public final class Dispatcher extends Handle {
  /** One service: times in ms (cost may be fractional); wait < cost (claim 7), try > 0. */
  public record Service(String name, double costMs, long waitMs, long tryMs) {}

  /**
   * Per-GPU placement inputs at create (issue 42 item 5, gpusched policy only): memory in MiB
   * and seed speed factors (2 = twice as slow), one per GPU or null; the affinity margin in ms;
   * models remembered per GPU (0: 4); fixedSpeed: never learn the speeds.
   */
  public record Placement(long[] gpuMemoryMib, double[] gpuSpeed, double affinityMarginMs,
                          int modelsPerGpu, boolean fixedSpeed) {}

  /**
   * One request for {@link #acquire(Request)} and {@link #acquireAsync(Request)} (issue 42
   * item 5): a builder over gpusched_request. The literal policy refuses memory, model and
   * priority, naming the field.
   */
  public static final class Request {
    private final String service;
    private double expectedMs;
    private long deadlineMs;
    private Cancel cancel;
    private long expectedMemMib;
    private String model;
    private int priority;

    public Request(String service) {
      this.service = service;
    }

    public Request expectedMs(double ms) { this.expectedMs = ms; return this; }
    public Request deadlineMs(long ms) { this.deadlineMs = ms; return this; }
    public Request cancel(Cancel c) { this.cancel = c; return this; }
    /** GPU memory the request needs while it runs; granted only a GPU where it fits. */
    public Request expectedMemMib(long mib) { this.expectedMemMib = mib; return this; }
    /** Kept on the GPUs that have this model loaded, within the affinity margin. */
    public Request model(String m) { this.model = m; return this; }
    /** Higher waiting requests are granted first; equal ones in arrival order. */
    public Request priority(int p) { this.priority = p; return this; }
  }

  /** A lease as a scope: released on close, as failed when {@link #fail()} was called. */
  public final class LeaseScope implements AutoCloseable {
    private final GpuschedLibrary.Lease lease;
    private boolean failed;

    private LeaseScope(GpuschedLibrary.Lease lease) {
      this.lease = lease;
    }

    public int gpu() {
      return lease.gpu;
    }

    public void fail() {
      failed = true;
    }

    @Override
    public void close() {
      release(lease, failed);
    }
  }

  /** Work on a granted GPU; may throw (checked exceptions too). Returns 0 on success. */
  @FunctionalInterface
  public interface GpuWork {
    int run(int gpu) throws Exception;
  }

  private final String[] serviceNames;
  private final AsyncRequests async = new AsyncRequests(this, lib);

  /** The gpusched policy, its marks in this process. */
  public Dispatcher(GpuschedLibrary lib, GpuschedLibrary.DispatcherOptions options,
                    Service... services) {
    this(lib, "gpusched", null, options, services);
  }

  /**
   * policy: "gpusched" or "literal" (CN113051059B, with the claim options); sharedMarks: null
   * (marks in this process) or "/name", a shared-memory segment every process opening that name
   * shares (either policy; a segment serves the policy that created it).
   */
  public Dispatcher(GpuschedLibrary lib, String policy, String sharedMarks,
                    GpuschedLibrary.DispatcherOptions options, Service... services) {
    this(lib, policy, sharedMarks, options, null, services);
  }

  /** As above, with the placement inputs of issue 42 (null: none). */
  public Dispatcher(GpuschedLibrary lib, String policy, String sharedMarks,
                    GpuschedLibrary.DispatcherOptions options, Placement placement,
                    Service... services) {
    super(lib, create(lib, policy, sharedMarks, options, placement, services));
    serviceNames = new String[services.length];
    for (int i = 0; i < services.length; ++i) serviceNames[i] = services[i].name();
  }

  private static GpuschedLibrary.PlacementOptions toC(Placement p, int gpus) {
    if (p == null) return null;
    GpuschedLibrary.PlacementOptions c = new GpuschedLibrary.PlacementOptions();
    c.struct_size = c.size();
    if (p.gpuMemoryMib() != null) {
      c.gpu_memory_mib = new Memory(8L * Math.max(gpus, p.gpuMemoryMib().length));
      c.gpu_memory_mib.write(0, p.gpuMemoryMib(), 0, p.gpuMemoryMib().length);
    }
    if (p.gpuSpeed() != null) {
      c.gpu_speed = new Memory(8L * Math.max(gpus, p.gpuSpeed().length));
      c.gpu_speed.write(0, p.gpuSpeed(), 0, p.gpuSpeed().length);
    }
    c.affinity_margin_ms = p.affinityMarginMs();
    c.models_per_gpu = p.modelsPerGpu();
    c.fixed_speed = p.fixedSpeed() ? 1 : 0;
    return c;
  }

  private static Pointer create(GpuschedLibrary lib, String policy, String sharedMarks,
                                GpuschedLibrary.DispatcherOptions options, Placement placement,
                                Service[] services) {
    GpuschedLibrary.ServiceConfig first = new GpuschedLibrary.ServiceConfig();
    GpuschedLibrary.ServiceConfig[] array =
        services.length > 0 ? (GpuschedLibrary.ServiceConfig[]) first.toArray(services.length) : null;
    for (int i = 0; i < services.length; ++i) {
      array[i].name = services[i].name();
      array[i].cost_time_ms = services[i].costMs();
      array[i].wait_time_ms = services[i].waitMs();
      array[i].try_time_ms = services[i].tryMs();
      array[i].write();
    }
    PointerByReference out = new PointerByReference();
    GpuschedLibrary.PlacementOptions p = toC(placement, options.gpu_count);
    GpuschedException.check(lib, lib.gpusched_dispatcher_create_ex2(
        policy, sharedMarks, options, array != null ? array[0] : null, services.length, p, out));
    return out.getValue();
  }

  @Override
  protected void beforeWait(Pointer h) {
    lib.gpusched_dispatcher_shutdown(h, 1);
    async.takeResults();  // the queued requests the shutdown ended (or a drain did)
  }

  /**
   * As {@link Handle#close()}; the futures of {@link #acquireAsync} still waiting then complete
   * exceptionally (E_FAILED_PRECONDITION, or E_DRAINING after {@link #drain}).
   */
  @Override
  public void close() {
    super.close();
    if (isClosed()) async.failAll(closedCode(), closedWhy());
  }

  /** {@link #acquireAsync(String, long, double)} with no deadline and the service's cost. */
  public CompletableFuture<GpuschedLibrary.Lease> acquireAsync(String service) {
    return acquireAsync(service, 0, 0);
  }

  /**
   * Queues a request in the library and returns at once; the future completes with the lease
   * (release it as any lease) or exceptionally with a {@link GpuschedException}: code
   * E_DEADLINE_EXCEEDED (deadlineMs passed), E_UNAVAILABLE (acquire_timeout_ms), E_DRAINING,
   * E_FAILED_PRECONDITION (closed). No thread waits per request: one daemon poller thread per
   * dispatcher completes every future, in FIFO order of the requests as leases are released.
   * future.cancel(...) cancels the request (a lease granted meanwhile is released). Futures
   * complete on the poller thread: chain long work with an executor (thenAcceptAsync).
   * Arguments are checked at once (a GpuschedException is thrown here).
   */
  public CompletableFuture<GpuschedLibrary.Lease> acquireAsync(String service, long deadlineMs,
                                                               double expectedMs) {
    return async.submit(
        (h, id) -> lib.gpusched_dispatcher_acquire_async(h, service, deadlineMs, expectedMs, id));
  }

  /**
   * {@link #acquireAsync(String, long, double)} with `request`'s placement inputs
   * (gpusched_dispatcher_acquire2_async, symbol version GPUSCHED_C_1.6): its memory, model and
   * priority reach the policy at each try. Argument errors throw here, as {@link
   * #acquire(Request)} throws them (E_INVALID_ARGUMENT naming the field: memory larger than
   * every GPU, the literal policy's inputs, a Request with a {@link Cancel}: cancel the future
   * instead). Queued futures complete highest priority first, then in arrival order; a request
   * whose memory fits no GPU yet waits for a release and holds back those of its own or lower
   * priority behind it.
   */
  public CompletableFuture<GpuschedLibrary.Lease> acquireAsync(Request request) {
    if (request.cancel != null) {
      throw new GpuschedException(GpuschedLibrary.E_INVALID_ARGUMENT,
                                  "request.cancel: not for acquireAsync; cancel the future");
    }
    GpuschedLibrary.Request r = toC(request);
    return async.submit((h, id) -> lib.gpusched_dispatcher_acquire2_async(h, r, id));
  }

  @Override
  protected void afterRefused(Pointer h) {
    lib.gpusched_dispatcher_shutdown(h, 0);
  }

  @Override
  protected int destroy(Pointer h) {
    return lib.gpusched_dispatcher_destroy(h);
  }

  /**
   * Blocks until a GPU is granted to `request` (gpusched_dispatcher_acquire2): its memory,
   * model and priority as well as acquire's options. Errors as {@link #acquire(String, long,
   * Cancel, double)}; E_INVALID_ARGUMENT for memory larger than every GPU.
   */
  public GpuschedLibrary.Lease acquire(Request request) {
    GpuschedLibrary.Lease lease = new GpuschedLibrary.Lease();
    GpuschedLibrary.Request r = toC(request);
    callWithCancel(request.cancel, (h, c) -> {
      r.cancel = c;
      return lib.gpusched_dispatcher_acquire2(h, r, lease);
    });
    return lease;
  }

  /** gpusched_request of `request`, its cancel left null (the caller enters it). */
  private static GpuschedLibrary.Request toC(Request request) {
    GpuschedLibrary.Request r = new GpuschedLibrary.Request();
    r.struct_size = r.size();
    r.service = request.service;
    r.expected_ms = request.expectedMs;
    r.deadline_ms = request.deadlineMs;
    r.expected_mem_mib = request.expectedMemMib;
    r.model = request.model;
    r.priority = request.priority;
    return r;
  }

  private interface CancelCall {
    int call(Pointer h, Pointer cancel);
  }

  /** Calls fn with the handle and `cancel` entered (null: none) for as long as it runs. */
  private void callWithCancel(Cancel cancel, CancelCall fn) {
    Pointer c = cancel != null ? cancel.enter(false) : null;
    try {
      call(false, h -> fn.call(h, c));
    } finally {
      if (cancel != null) cancel.exit();
    }
  }

  /** Blocks until a GPU is granted; hand the lease back to {@link #release}. */
  public GpuschedLibrary.Lease acquire(String service) {
    GpuschedLibrary.Lease lease = new GpuschedLibrary.Lease();
    call(false, h -> lib.gpusched_dispatcher_acquire(h, service, lease));
    return lease;
  }

  /**
   * Blocks until a GPU is granted, at most deadlineMs ms (0: no deadline; then
   * {@link GpuschedLibrary#E_DEADLINE_EXCEEDED}), or until `cancel` (may be null) is fired
   * ({@link GpuschedLibrary#E_CANCELLED}). expectedMs > 0: this request's expected run time,
   * used by the gpusched policy to place it.
   */
  public GpuschedLibrary.Lease acquire(String service, long deadlineMs, Cancel cancel,
                                       double expectedMs) {
    GpuschedLibrary.Lease lease = new GpuschedLibrary.Lease();
    callWithCancel(cancel, (h, c) -> lib.gpusched_dispatcher_acquire_ex(h, service, deadlineMs,
                                                                       c, expectedMs, lease));
    return lease;
  }

  /** Releases `lease`; a failed request's run time does not train the cost. */
  public void release(GpuschedLibrary.Lease lease, boolean failed) {
    int outcome = failed ? GpuschedLibrary.FAILED : GpuschedLibrary.SUCCEEDED;
    call(true, h -> lib.gpusched_dispatcher_release(h, lease, outcome));  // ends what close waits for
  }

  public LeaseScope lease(String service) {
    return new LeaseScope(acquire(service));
  }

  /** {@link #run(String, GpuWork)} with a raw callback: fn.invoke(gpu, null). */
  public int run(String service, GpuschedLibrary.RunFn fn) {
    return run(service, gpu -> fn.invoke(gpu, null));
  }

  /**
   * Acquire, work.run(gpu) on this thread, release; returns work's result (0). A failure is a
   * failed request (issue 42): the lease is released as failed (serviceMetrics' {@code failed};
   * its run time trains no cost), then an exception work threw is rethrown as it is (a checked
   * one wrapped in a {@link GpuschedException} with code {@link GpuschedLibrary#E_RUN_FAILED}
   * and it as the cause), and a non-zero result throws E_RUN_FAILED naming it.
   */
  public int run(String service, GpuWork work) {
    Throwable[] thrown = new Throwable[1];
    GpuschedLibrary.RunFn callback = (gpu, user) -> {
      try {
        return work.run(gpu);
      } catch (Throwable t) {  // JNA would lose it and return 0: keep it, fail the lease
        thrown[0] = t;
        return 1;
      }
    };
    Memory result = new Memory(4);
    try {
      call(false, h -> lib.gpusched_dispatcher_run(h, service, callback, null, result));
    } catch (GpuschedException e) {
      if (thrown[0] == null) throw e;
      throw rethrown(thrown[0]);
    }
    return result.getInt(0);
  }

  private static RuntimeException rethrown(Throwable t) {
    if (t instanceof RuntimeException r) return r;
    if (t instanceof Error e) throw e;
    return new GpuschedException(GpuschedLibrary.E_RUN_FAILED, "run: the work threw " + t, t);
  }

  /** Never waits: a lease, or null when no GPU can be granted now. */
  public GpuschedLibrary.Lease tryAcquire(String service) {
    GpuschedLibrary.Lease lease = new GpuschedLibrary.Lease();
    try {
      call(false, h -> lib.gpusched_dispatcher_try_acquire(h, service, lease));
    } catch (GpuschedException e) {
      if (e.code() == GpuschedLibrary.E_BUSY) return null;
      throw e;
    }
    return lease;
  }

  /**
   * Stops granting leases at once (acquires, waiting ones included, throw
   * {@link GpuschedLibrary#E_DRAINING}), waits up to deadlineMs (>= 0) for the leases out to be
   * released, then closes the dispatcher. Leases still out at the deadline:
   * {@link GpuschedLibrary#E_DEADLINE_EXCEEDED} naming them, the dispatcher left drained but
   * open (release them, then close or drain again).
   */
  public void drain(long deadlineMs) {
    call(false, h -> lib.gpusched_dispatcher_drain(h, deadlineMs));
    closedBecause(GpuschedLibrary.E_DRAINING, " is drained");
    close();
  }

  public void setGpuEnabled(int gpu, boolean enabled) {
    call(false, h -> lib.gpusched_dispatcher_set_gpu_enabled(h, gpu, enabled ? 1 : 0));
  }

  /** The owner ticket of `gpu`'s signal mark (0: none). */
  public long markOwner(int gpu) {
    LongByReference owner = new LongByReference();
    call(false, h -> lib.gpusched_dispatcher_mark(h, gpu, owner, null));
    return owner.getValue();
  }

  public GpuschedLibrary.ServiceMetrics serviceMetrics(String service) {
    GpuschedLibrary.ServiceMetrics m = new GpuschedLibrary.ServiceMetrics();
    call(false, h -> lib.gpusched_dispatcher_service_metrics(h, service, m));
    return m;
  }

  /**
   * The metrics as Prometheus text exposition format 0.0.4: per service and GPU, latency and
   * queue-wait histograms (p50/p99 with histogram_quantile), counters of requests, failures
   * and timeouts (see gpusched_dispatcher_metrics_text in gpusched_c.h).
   */
  public String metricsText() {
    LongByReference length = new LongByReference();
    long size = 1 << 16;
    while (true) {
      Memory buf = new Memory(size);
      int code = callRaw(false, h -> lib.gpusched_dispatcher_metrics_text(h, buf, buf.size(), length));
      if (code != GpuschedLibrary.E_RESOURCE_EXHAUSTED) {
        GpuschedException.check(lib, code);
        return buf.getString(0, "UTF-8");
      }
      size = length.getValue() + 1 + 4096;  // it may grow before the next call
    }
  }

  public GpuschedLibrary.GpuMetrics gpuMetrics(int gpu) {
    GpuschedLibrary.GpuMetrics m = new GpuschedLibrary.GpuMetrics();
    call(false, h -> lib.gpusched_dispatcher_gpu_metrics(h, gpu, m));
    return m;
  }
}
