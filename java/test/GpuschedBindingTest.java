// The Java binding (io.gpusched, gpusched.jar) as a Spark executor or a JVM inference server
// would use it: close during use, releases that must be refused, bad options refused at create,
// backpressure, fractional costs, a chunk runtime shared by 4 task threads with a Java user
// kernel, and failed requests. Plain main (no test framework in Debian's JDK): exits non-zero
// on the first failure.
// Usage: java -cp jna.jar:gpusched.jar:. GpuschedBindingTest
import io.gpusched.Cancel;
import io.gpusched.ChunkRuntime;
import io.gpusched.Dispatcher;
import io.gpusched.GpuschedException;
import io.gpusched.GpuschedLibrary;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.CyclicBarrier;

public class GpuschedBindingTest {
  static final GpuschedLibrary LIB = GpuschedLibrary.load();
  static final Dispatcher.Service OCR = new Dispatcher.Service("ocr", 100, 50, 1);

  static void expect(boolean cond, String what) {
    if (!cond) throw new AssertionError(what);
  }

  static GpuschedException expectError(int code, String text, Runnable call) {
    try {
      call.run();
    } catch (GpuschedException e) {
      expect(e.code() == code && e.getMessage().contains(text),
             "expected code " + code + " with \"" + text + "\", got " + e.getMessage());
      return e;
    }
    throw new AssertionError("expected error " + code + " with \"" + text + "\", got success");
  }

  static GpuschedLibrary.DispatcherOptions options(int gpus) {
    GpuschedLibrary.DispatcherOptions o = new GpuschedLibrary.DispatcherOptions();
    o.gpu_count = gpus;
    return o;
  }

  static void closeRefusedWhileLeaseOutThenSucceeds() {
    Dispatcher d = new Dispatcher(LIB, options(2), OCR);
    GpuschedLibrary.Lease lease = d.acquire("ocr");
    expectError(GpuschedLibrary.E_FAILED_PRECONDITION, "1 lease(s) still out", d::close);
    expect(d.markOwner(lease.gpu) == lease.ticket, "still usable after a refused close");
    d.release(lease, false);
    d.close();
    d.close();  // idempotent
    expectError(GpuschedLibrary.E_FAILED_PRECONDITION, "Dispatcher is closed", () -> d.acquire("ocr"));
  }

  static void closeWhileThreadsLeaseNeverCrashes() throws Exception {
    for (int round = 0; round < 5; ++round) {
      Dispatcher d = new Dispatcher(LIB, options(2), OCR);
      CyclicBarrier started = new CyclicBarrier(9);
      List<Throwable> errors = new ArrayList<>();
      List<Thread> threads = new ArrayList<>();
      for (int t = 0; t < 8; ++t) {
        Thread thread = new Thread(() -> {
          try {
            started.await();
            while (true) {
              try (Dispatcher.LeaseScope l = d.lease("ocr")) {
                expect(l.gpu() >= 0 && l.gpu() < 2, "gpu in range");
              }
            }
          } catch (GpuschedException e) {
            if (e.code() != GpuschedLibrary.E_FAILED_PRECONDITION) synchronized (errors) { errors.add(e); }
          } catch (Throwable e) {
            synchronized (errors) { errors.add(e); }
          }
        });
        thread.start();
        threads.add(thread);
      }
      started.await();
      while (true) {  // refused while a thread holds a lease; each try ends the acquires
        try {
          d.close();
          break;
        } catch (GpuschedException e) {
          expect(e.code() == GpuschedLibrary.E_FAILED_PRECONDITION, "close refusal code");
        }
      }
      for (Thread thread : threads) thread.join(30_000);
      for (Thread thread : threads) expect(!thread.isAlive(), "a leasing thread hung");
      expect(errors.isEmpty(), "errors: " + errors);
    }
  }

  static void releasesAreChecked() {
    try (Dispatcher d = new Dispatcher(LIB, options(2), OCR);
         Dispatcher other = new Dispatcher(LIB, options(2), OCR)) {
      GpuschedLibrary.Lease lease = d.acquire("ocr");
      GpuschedLibrary.Lease foreign = other.acquire("ocr");
      expectError(GpuschedLibrary.E_NOT_FOUND, "ticket 0 is not outstanding",
                  () -> d.release(new GpuschedLibrary.Lease(), false));
      expectError(GpuschedLibrary.E_NOT_FOUND, "another dispatcher", () -> d.release(foreign, false));
      d.release(lease, false);
      expectError(GpuschedLibrary.E_NOT_FOUND, "not outstanding", () -> d.release(lease, false));
      expect(d.gpuMetrics(0).running == 0, "running never negative");
      expect(d.serviceMetrics("ocr").completed == 1, "one completed");
      other.release(foreign, false);
      // A run whose fn fails releases as failed and throws: the cost does not learn it.
      expectError(GpuschedLibrary.E_RUN_FAILED, "fn returned 5", () -> d.run("ocr", (gpu, user) -> 5));
      GpuschedLibrary.ServiceMetrics m = d.serviceMetrics("ocr");
      expect(m.failed == 1 && m.cost_time_ms > 0, "failed run counted, cost kept");
    }
  }

  static void badOptionsRefusedAtCreate() {
    GpuschedLibrary.DispatcherOptions o = options(1);
    o.cost_learning = 7;
    expectError(GpuschedLibrary.E_INVALID_ARGUMENT, "options.cost_learning", () -> new Dispatcher(LIB, o, OCR));
    o.cost_learning = 0;
    o.literal_release = 2;
    expectError(GpuschedLibrary.E_INVALID_ARGUMENT, "options.literal_release: must be 0 or 1, got 2",
                () -> new Dispatcher(LIB, o, OCR));
    o.literal_release = 0;
    o.max_per_gpu = -3;
    expectError(GpuschedLibrary.E_INVALID_ARGUMENT, "max_per_gpu", () -> new Dispatcher(LIB, o, OCR));
    expectError(GpuschedLibrary.E_INVALID_ARGUMENT, "wait_time",
                () -> new Dispatcher(LIB, options(1), new Dispatcher.Service("x", 10, 10, 1)));
    expectError(GpuschedLibrary.E_INVALID_ARGUMENT, "chunk_bytes", () -> ChunkRuntime.simulated(LIB, 2, 16, 3));
    try (ChunkRuntime rt = ChunkRuntime.simulated(LIB, 1, 16, 0); ChunkRuntime.Job job = rt.newJob()) {
      expectError(GpuschedLibrary.E_INVALID_ARGUMENT, "scalar must be finite",
                  () -> job.stage("s", "scale_u32", "a", "b", Double.NaN, 0));
      job.stage("s", "scale_u32", "a", "b", 2.0, 0);
      expectError(GpuschedLibrary.E_INVALID_ARGUMENT, "tasks must be >= 1, got 0", () -> job.tasks("s", 0));
      expectError(GpuschedLibrary.E_NOT_FOUND, "unknown stage", () -> job.tasks("t", 2));
    }
    tasksThroughTheBinding();
    builtinKernelNamesRun();
    int cudas = LIB.gpusched_cuda_device_count();
    String reason = LIB.gpusched_last_error();  // issue 42: why there is no CUDA device
    if (cudas <= 0 && reason.isEmpty()) throw new AssertionError("no CUDA device and no reason");
    // The reason ("unavailable: no usable CUDA driver ...") follows the count in create's error.
    String why = reason.substring(reason.indexOf(": ") + 2);
    if (cudas <= 0) expectError(cudas < 0 ? GpuschedLibrary.E_FAILED_PRECONDITION : GpuschedLibrary.E_UNAVAILABLE, why, () -> ChunkRuntime.cuda(LIB, 0, 0));
    if (cudas < 0) {
      expectError(GpuschedLibrary.E_FAILED_PRECONDITION, "built without CUDA", () -> ChunkRuntime.cuda(LIB, 0, 0));
    } else if (cudas == 0) {
      expectError(GpuschedLibrary.E_UNAVAILABLE, "CUDA device(s) visible", () -> ChunkRuntime.cuda(LIB, 0, 0));
    }
  }

  /** Issue 42, CN110955526B: every ChunkRuntime.BUILTIN_KERNELS name runs on a runtime (the
   *  vadd kernels take two inputs); a job used after close() is refused, never freed twice. */
  static void builtinKernelNamesRun() {
    ByteBuffer in = ByteBuffer.allocateDirect(4096);
    try (ChunkRuntime rt = ChunkRuntime.simulated(LIB, 2, 16, 0)) {
      for (String kernel : ChunkRuntime.BUILTIN_KERNELS) {
        try (ChunkRuntime.Job job = rt.newJob()) {
          job.buffer("a", in, false).buffer("out", null, false)
              .stage("s", kernel, kernel.startsWith("vadd") ? "a,a" : "a", "out", 1.0, 0);
          rt.run(job);
          expect(job.stat("subtasks") > 0, kernel + " ran");
        }
      }
      ChunkRuntime.Job closed = rt.newJob();
      closed.close();
      closed.close();  // idempotent
      expectError(GpuschedLibrary.E_INVALID_ARGUMENT, "job", () -> closed.stage("s", "sum_u32", "a", "b", 0, 0));
    }
  }

  /** StageSpec::tasks from Java: 3 tasks over 4 chunks, all on the GPU executor. */
  static void tasksThroughTheBinding() {
    java.nio.ByteBuffer data = java.nio.ByteBuffer.allocateDirect(4 * 8192).order(java.nio.ByteOrder.nativeOrder());
    for (int i = 0; i < 8192; ++i) data.putInt(i * 4, i);
    java.nio.ByteBuffer total = java.nio.ByteBuffer.allocateDirect(8).order(java.nio.ByteOrder.nativeOrder());
    try (ChunkRuntime rt = ChunkRuntime.simulated(LIB, 2, 16, 8192); ChunkRuntime.Job job = rt.newJob()) {
      job.buffer("data", data, false).buffer("total", total, false)
         .stage("sum", "sum_u32", "data", "total", 0, 0).tasks("sum", 3);
      rt.run(job);
      expect(total.getLong(0) == 8191L * 8192L / 2, "sum over 3 tasks: " + total.getLong(0));
      expect(job.stat("gpu_tasks") == 3, "gpu_tasks: " + job.stat("gpu_tasks"));
      expect(job.stat("cpu_tasks") == 0, "cpu_tasks: " + job.stat("cpu_tasks"));
    }
  }

  static void backpressureAndFractionalCosts() {
    GpuschedLibrary.DispatcherOptions o = options(1);
    o.max_per_gpu = 1;
    o.acquire_timeout_ms = 20;
    try (Dispatcher d = new Dispatcher(LIB, o, OCR, new Dispatcher.Service("fast", 0.25, 0, 1))) {
      expect(d.serviceMetrics("fast").cost_time_ms == 0.25, "fractional cost kept");
      GpuschedLibrary.Lease held = d.acquire("ocr");
      expectError(GpuschedLibrary.E_UNAVAILABLE, "1 of 1 GPUs at max_per_gpu 1", () -> d.acquire("fast"));
      d.release(held, false);
      d.setGpuEnabled(0, false);
      expectError(GpuschedLibrary.E_UNAVAILABLE, "1 out of service", () -> d.acquire("ocr"));
      d.setGpuEnabled(0, true);
      try (Dispatcher.LeaseScope l = d.lease("ocr")) {
        expect(l.gpu() == 0, "back in service");
      }
    }
  }

  static void deadlinesCancelAndThePolicyChoice() throws Exception {
    for (String policy : new String[] {"gpusched", "literal"}) {
      GpuschedLibrary.DispatcherOptions o = options(1);
      o.max_per_gpu = 1;
      try (Dispatcher d = new Dispatcher(LIB, policy, null, o, OCR);
           Cancel cancel = new Cancel(LIB)) {
        GpuschedLibrary.Lease held = d.acquire("ocr");
        expectError(GpuschedLibrary.E_DEADLINE_EXCEEDED, "deadline_ms 30",
                    () -> d.acquire("ocr", 30, null, 0));
        int[] code = {-1};
        CountDownLatch started = new CountDownLatch(1);
        Thread waiter = new Thread(() -> {
          started.countDown();
          try {
            d.acquire("ocr", 10_000, cancel, 0);
            code[0] = 0;
          } catch (GpuschedException e) {
            code[0] = e.code();
          }
        });
        waiter.start();
        started.await();
        Thread.sleep(30);
        long t0 = System.nanoTime();
        cancel.fire();
        waiter.join(10_000);
        expect(!waiter.isAlive(), policy + ": the cancelled acquire returned");
        expect(code[0] == GpuschedLibrary.E_CANCELLED, policy + ": code " + code[0]);
        expect(System.nanoTime() - t0 < 5_000_000_000L, policy + ": at once");
        expect(cancel.fired(), "stays fired");
        d.release(held, false);
      }
    }
    GpuschedLibrary.DispatcherOptions o = options(1);
    o.literal_release = 1;
    expectError(GpuschedLibrary.E_INVALID_ARGUMENT, "options.literal_release",
                () -> new Dispatcher(LIB, o, OCR));
    new Dispatcher(LIB, "literal", null, o, OCR).close();
    expectError(GpuschedLibrary.E_INVALID_ARGUMENT, "policy",
                () -> new Dispatcher(LIB, "fifo", null, options(1), OCR));
  }

  static void chunkRuntimeSharedByFourThreads() throws Exception {
    final int n = 64 * 1024;  // uint32 per task: 256 KiB, 32 chunks of 8 KiB
    try (ChunkRuntime rt = ChunkRuntime.simulated(LIB, 2, 64, 8192)) {
      // A Java map kernel: out = in + 1 (uint32, wrapping).
      GpuschedLibrary.KernelFn plusOne = (in0, in1, inBytes, out, outBytes, user) -> {
        for (long i = 0; i < inBytes; i += 4) out.setInt(i, in0.getInt(i) + 1);
      };
      rt.registerKernel("plus_one_u32", 0, 1, 4, 0, plusOne, null);
      long[] sums = new long[4];
      long[] expected = new long[4];
      List<Throwable> errors = new ArrayList<>();
      CountDownLatch go = new CountDownLatch(1);
      List<Thread> threads = new ArrayList<>();
      long start = System.nanoTime();
      for (int t = 0; t < 4; ++t) {
        final int task = t;
        ByteBuffer data = ByteBuffer.allocateDirect(n * 4).order(ByteOrder.nativeOrder());
        for (int i = 0; i < n; ++i) {
          int v = (int) (i * 2654435761L) + task;
          data.putInt(i * 4, v);
          expected[t] += Integer.toUnsignedLong(v + 1);
        }
        Thread thread = new Thread(() -> {
          ByteBuffer total = ByteBuffer.allocateDirect(8).order(ByteOrder.nativeOrder());
          try (ChunkRuntime.Job job = rt.newJob()) {
            job.buffer("data", data, false).buffer("total", total, false)
               .stage("inc", "plus_one_u32", "data", "inc", 0, 0)
               .stage("sum", "sum_u32", "inc", "total", 0, 0);
            go.await();
            rt.run(job);
            sums[task] = total.getLong(0);
          } catch (Throwable e) {
            synchronized (errors) { errors.add(e); }
          }
        });
        thread.start();
        threads.add(thread);
      }
      go.countDown();
      for (Thread thread : threads) thread.join(60_000);
      for (Thread thread : threads) expect(!thread.isAlive(), "a run hung (deadlock)");
      expect(errors.isEmpty(), "errors: " + errors);
      for (int t = 0; t < 4; ++t) expect(sums[t] == expected[t], "task " + t + " sum " + sums[t] + " != " + expected[t]);
      expect(System.nanoTime() - start < 30_000_000_000L, "within the bound");
    }
  }

  public static void main(String[] args) throws Exception {
    closeRefusedWhileLeaseOutThenSucceeds();
    closeWhileThreadsLeaseNeverCrashes();
    releasesAreChecked();
    badOptionsRefusedAtCreate();
    backpressureAndFractionalCosts();
    deadlinesCancelAndThePolicyChoice();
    chunkRuntimeSharedByFourThreads();
    System.out.println("GpuschedBindingTest OK");
  }
}
