// CN110955526B claim 2 across nodes through the Java binding and the real library: the free-CPU
// limit keeps an executor with the most GPU memory out, the server's nodes JSON is read, and a
// bad field is named. Plain main: exits non-zero on the first failure.
// Usage: java -cp jna.jar:gpusched.jar:. StagePlanTest
import io.gpusched.GpuschedLibrary;
import io.gpusched.StagePlan;
import io.gpusched.StagePlan.Placement;
import java.util.List;

public class StagePlanTest {
  static final GpuschedLibrary LIB = GpuschedLibrary.load();
  static final long MIB = 1L << 20;

  static List<Placement> plan(int minFreeCpu) {
    try (StagePlan p = new StagePlan(LIB)) {
      p.addExecutor("big-gpu", "n1", new long[] {80 * MIB}, 1);
      p.addExecutor("small-gpu", "n2", new long[] {20 * MIB}, 4);
      return p.setMinFreeCpu(minFreeCpu).assign(2, 16 * MIB, 1);
    }
  }

  public static void main(String[] args) {
    GpuschedBindingTest.expect(plan(0).equals(List.of(new Placement("big-gpu", 0),
                                                      new Placement("small-gpu", 0))),
                               "no limit: " + plan(0));
    GpuschedBindingTest.expect(plan(2).equals(List.of(new Placement("small-gpu", 0),
                                                      new Placement("small-gpu", -1))),
                               "min_free_cpu 2: " + plan(2));
    try (StagePlan p = new StagePlan(LIB)) {
      p.addNodesJson("{\"nodes\": [{\"name\": \"n1\", \"free_cpus\": 1, \"gpus\": "
                     + "[{\"index\": 0, \"free_mib\": 10}]}]}");
      List<Placement> placed = p.assign(2, 8 * MIB, 1);
      GpuschedBindingTest.expect(placed.equals(List.of(new Placement("n1", 0),
                                                       new Placement(null, -1))),
                                 "nodes json: " + placed);
    }
    try (StagePlan p = new StagePlan(LIB)) {
      GpuschedBindingTest.expectError(GpuschedLibrary.E_INVALID_ARGUMENT,
                                      "nodes[0].gpus: must be an array",
                                      () -> p.addNodesJson(
                                          "{\"nodes\": [{\"name\": \"n\", \"gpus\": 1}]}"));
    }
    System.out.println("StagePlanTest: ok");
  }
}
