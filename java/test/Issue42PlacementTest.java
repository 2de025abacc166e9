// Issue 42, item 5, through the Java binding and the real library: Dispatcher.Request (GPU
// memory, model, priority) and Dispatcher.Placement (per-GPU memory, seed speeds, affinity
// margin). The literal policy refuses them, naming the field. Plain main: exits non-zero on the
// first failure. Usage: java -cp jna.jar:gpusched.jar:. Issue42PlacementTest
import io.gpusched.Dispatcher;
import io.gpusched.GpuschedLibrary;

public class Issue42PlacementTest {
  static final GpuschedLibrary LIB = GpuschedLibrary.load();
  static final Dispatcher.Service INFER = new Dispatcher.Service("infer", 20, 10, 5);

  static void expect(boolean cond, String what) {
    GpuschedBindingTest.expect(cond, what);
  }

  static Dispatcher twoGpus(String policy, Dispatcher.Placement placement) {
    GpuschedLibrary.DispatcherOptions o = new GpuschedLibrary.DispatcherOptions();
    o.gpu_count = 2;
    return new Dispatcher(LIB, policy, null, o, placement, INFER);
  }

  static void Issue42_ExpectedMemoryFitsOrWaits() {
    Dispatcher.Placement p = new Dispatcher.Placement(new long[] {4096, 16384}, null, 0, 0, false);
    try (Dispatcher d = twoGpus("gpusched", p)) {
      GpuschedLibrary.Lease a = d.acquire(new Dispatcher.Request("infer").expectedMemMib(10000));
      expect(a.gpu == 1, "10000 MiB fits only GPU1, got " + a.gpu);
      GpuschedBindingTest.expectError(GpuschedLibrary.E_DEADLINE_EXCEEDED, "deadline_ms",
          () -> d.acquire(new Dispatcher.Request("infer").expectedMemMib(10000).deadlineMs(20)));
      GpuschedBindingTest.expectError(GpuschedLibrary.E_INVALID_ARGUMENT, "fits no GPU",
          () -> d.acquire(new Dispatcher.Request("infer").expectedMemMib(20000)));
      d.release(a, false);
    }
  }

  static void Issue42_ModelAffinityAndPriority() {
    Dispatcher.Placement p = new Dispatcher.Placement(null, null, 50, 0, false);
    try (Dispatcher d = twoGpus("gpusched", p)) {
      GpuschedLibrary.Lease a = d.acquire(new Dispatcher.Request("infer").model("resnet"));
      GpuschedLibrary.Lease b =
          d.acquire(new Dispatcher.Request("infer").model("resnet").priority(3));
      expect(a.gpu == 0 && b.gpu == 0, "resnet kept on GPU0: " + a.gpu + ", " + b.gpu);
      d.release(a, false);
      d.release(b, false);
    }
  }

  static void Issue42_LiteralPolicyRefusesPlacementInputs() {
    try (Dispatcher d = twoGpus("literal", null)) {
      GpuschedBindingTest.expectError(GpuschedLibrary.E_INVALID_ARGUMENT, "request.priority",
          () -> d.acquire(new Dispatcher.Request("infer").priority(1)));
    }
    Dispatcher.Placement p = new Dispatcher.Placement(new long[] {1, 1}, null, 0, 0, false);
    GpuschedBindingTest.expectError(GpuschedLibrary.E_INVALID_ARGUMENT, "placement.gpu_memory_mib",
        () -> twoGpus("literal", p).close());
  }

  public static void main(String[] args) {
    Issue42_ExpectedMemoryFitsOrWaits();
    Issue42_ModelAffinityAndPriority();
    Issue42_LiteralPolicyRefusesPlacementInputs();
    System.out.println("Issue42PlacementTest OK");
  }
}
