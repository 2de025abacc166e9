// Issue 42 through the Java binding and the real library, for both policies: work that throws
// (or returns non-zero) in Dispatcher.run is a failed request (the exception rethrown, counted
// in `failed`, no cost learned); drain() refuses new leases, ends a waiting acquire once with
// E_DRAINING, waits for a lease another thread holds, and names the lease still out when its
// deadline passes; tryAcquire() never waits. Plain main: exits non-zero on the first failure.
// Usage: java -cp jna.jar:gpusched.jar:. Issue42DispatcherTest
import io.gpusched.Dispatcher;
import io.gpusched.GpuschedException;
import io.gpusched.GpuschedLibrary;
import java.io.IOException;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;

public class Issue42DispatcherTest {
  static final GpuschedLibrary LIB = GpuschedLibrary.load();
  static final String[] POLICIES = {"gpusched", "literal"};

  // The checks of GpuschedBindingTest (the same jar).
  static void expect(boolean cond, String what) {
    GpuschedBindingTest.expect(cond, what);
  }

  static GpuschedException expectError(int code, String text, Runnable call) {
    return GpuschedBindingTest.expectError(code, text, call);
  }

  /** One GPU, at most one lease on it; cost 20 ms (1000 ms with a long retry period). */
  static Dispatcher oneSlot(String policy, long tryMs) {
    GpuschedLibrary.DispatcherOptions o = new GpuschedLibrary.DispatcherOptions();
    o.gpu_count = 1;
    o.max_per_gpu = 1;
    Dispatcher.Service s = tryMs < 20 ? new Dispatcher.Service("infer", 20, 10, tryMs)
                                      : new Dispatcher.Service("infer", 1000, 600, tryMs);
    return new Dispatcher(LIB, policy, null, o, s);
  }

  static void expectFailedOnce(Dispatcher d, int failed, String what) {
    GpuschedLibrary.ServiceMetrics m = d.serviceMetrics("infer");
    expect(m.failed == failed, what + ": failed " + m.failed);
    expect(m.cost_time_ms == 20.0, what + ": the cost learned a failure: " + m.cost_time_ms);
    expect(d.gpuMetrics(0).running == 0, what + ": the lease was not released");
  }

  static void Issue42_CN113051059B_Claim6_RunThatThrowsIsAFailedRequest() {
    for (String policy : POLICIES) {
      try (Dispatcher d = oneSlot(policy, 5)) {
        IllegalStateException boom = new IllegalStateException("model crashed");
        try {
          d.run("infer", gpu -> {
            Thread.sleep(30);
            throw boom;
          });
          throw new AssertionError(policy + ": run returned");
        } catch (IllegalStateException e) {
          expect(e == boom, policy + ": the same exception, unwrapped");
        }
        expectFailedOnce(d, 1, policy + " unchecked");
        IOException io = new IOException("disk gone");
        GpuschedException wrapped = expectError(GpuschedLibrary.E_RUN_FAILED, "disk gone",
            () -> d.run("infer", gpu -> { throw io; }));
        expect(wrapped.getCause() == io, policy + ": a checked exception is the cause");
        expectFailedOnce(d, 2, policy + " checked");
        expectError(GpuschedLibrary.E_RUN_FAILED, "fn returned 5 on gpu 0",
                    () -> d.run("infer", (gpu, user) -> 5));
        expectFailedOnce(d, 3, policy + " non-zero");
        // Work that succeeds returns 0 and does train the cost: the checks above can fail.
        expect(d.run("infer", gpu -> {
          Thread.sleep(30);
          return 0;
        }) == 0, policy + ": run returns 0");
        expect(d.serviceMetrics("infer").cost_time_ms != 20.0, policy + ": a success trains");
      }
    }
  }

  static void Issue42_CN113051059B_Claim1_DrainWaitsForALeaseAnotherThreadHolds()
      throws Exception {
    for (String policy : POLICIES) {
      Dispatcher d = oneSlot(policy, 5);
      CountDownLatch held = new CountDownLatch(1), releaseNow = new CountDownLatch(1);
      List<Integer> codes = new CopyOnWriteArrayList<>();
      List<Throwable> drainErrors = new CopyOnWriteArrayList<>();
      Thread holder = new Thread(() -> {
        GpuschedLibrary.Lease lease = d.acquire("infer");
        held.countDown();
        try {
          releaseNow.await();
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
        d.release(lease, false);
      });
      holder.setDaemon(true);  // daemons: a failed check must not leave the JVM waiting on them
      holder.start();
      held.await();
      Thread waiter = new Thread(() -> {
        try {
          d.release(d.acquire("infer", 10_000, null, 0), false);
          codes.add(0);
        } catch (GpuschedException e) {
          codes.add(e.code());
        }
      });
      waiter.setDaemon(true);
      waiter.start();
      for (int i = 0; i < 10_000 && d.serviceMetrics("infer").give_ups == 0; ++i) Thread.sleep(1);
      expect(d.serviceMetrics("infer").give_ups >= 1, policy + ": the waiter waits");
      Thread drainer = new Thread(() -> {
        try {
          d.drain(10_000);
        } catch (Throwable t) {
          drainErrors.add(t);
        }
      });
      drainer.setDaemon(true);
      drainer.start();
      waiter.join(10_000);
      expect(codes.equals(List.of(GpuschedLibrary.E_DRAINING)), policy + ": waiter got " + codes);
      expectError(GpuschedLibrary.E_DRAINING, "draining", () -> d.acquire("infer"));
      expectError(GpuschedLibrary.E_DRAINING, "draining", () -> d.tryAcquire("infer"));
      expectError(GpuschedLibrary.E_DRAINING, "draining", () -> d.run("infer", gpu -> {
        throw new AssertionError("work ran while draining");
      }));
      Thread.sleep(20);
      expect(drainer.isAlive(), policy + ": the drain waits for the held lease");
      releaseNow.countDown();
      holder.join(10_000);
      drainer.join(10_000);
      expect(!drainer.isAlive() && drainErrors.isEmpty(), policy + ": drained " + drainErrors);
      expectError(GpuschedLibrary.E_DRAINING, "Dispatcher is drained", () -> d.acquire("infer"));
    }
  }

  static void Issue42_CN113051059B_Claim1_DrainDeadlinePassesWithALeaseOut() {
    for (String policy : POLICIES) {
      Dispatcher d = oneSlot(policy, 5);
      GpuschedLibrary.Lease lease = d.acquire("infer");
      expectError(GpuschedLibrary.E_DEADLINE_EXCEEDED, "ticket " + Long.toUnsignedString(lease.ticket)
                  + " (gpu 0)", () -> d.drain(50));
      expectError(GpuschedLibrary.E_DRAINING, "draining", () -> d.acquire("infer"));
      d.release(lease, false);
      d.drain(0);
      expectError(GpuschedLibrary.E_DRAINING, "drained", () -> d.acquire("infer"));
    }
  }

  static void Issue42_CN113051059B_Claim1_TryAcquireNeverWaits() {
    for (String policy : POLICIES) {
      try (Dispatcher d = oneSlot(policy, 500)) {  // an acquire would retry after 500 ms
        GpuschedLibrary.Lease first = d.tryAcquire("infer");
        expect(first != null, policy + ": granted");
        long t0 = System.nanoTime();
        expect(d.tryAcquire("infer") == null, policy + ": busy");
        expect(System.nanoTime() - t0 < 250_000_000L, policy + ": at once");
        d.release(first, false);
        GpuschedLibrary.Lease again = d.tryAcquire("infer");
        expect(again != null, policy + ": granted again");
        d.release(again, false);
        expectError(GpuschedLibrary.E_NOT_FOUND, "nope", () -> d.tryAcquire("nope"));
      }
    }
  }

  public static void main(String[] args) throws Exception {
    Issue42_CN113051059B_Claim6_RunThatThrowsIsAFailedRequest();
    Issue42_CN113051059B_Claim1_DrainWaitsForALeaseAnotherThreadHolds();
    Issue42_CN113051059B_Claim1_DrainDeadlinePassesWithALeaseOut();
    Issue42_CN113051059B_Claim1_TryAcquireNeverWaits();
    System.out.println("Issue42DispatcherTest OK");
  }
}
