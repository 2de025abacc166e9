package io.gpusched;

import com.sun.jna.Pointer;
import com.sun.jna.ptr.IntByReference;
import com.sun.jna.ptr.PointerByReference;
import java.util.ArrayList;
import java.util.List;

/**
 * CN110955526B claim 2 across nodes (issue 42): the driver's plan of a stage's partitions over
 * executors (Spark slaves on several nodes) by available GPU memory and free CPUs, through
 * gpusched_chunks_plan_* (gpusched_chunks_c.h, which states the rule). Add executors (or the
 * gpusched server's GET /api/v1/nodes body), set the free-CPU limit, then {@link #assign}.
 * Not thread-safe; {@link #close()} frees the plan.
 */
public final class StagePlan implements AutoCloseable {
  /** Where one partition goes: executor null when none could take it, gpu -1 on its CPUs. */
  public record Placement(String executor, int gpu) {}

  private final GpuschedLibrary lib;
  private Pointer plan;

  public StagePlan(GpuschedLibrary lib) {
    this.lib = lib;
    PointerByReference out = new PointerByReference();
    GpuschedException.check(lib, lib.gpusched_chunks_plan_new(out));
    plan = out.getValue();
  }

  /** freeCpus < 0: unknown (no CPU limit applies to it). */
  public StagePlan addExecutor(String name, String node, long[] gpuFreeBytes, int freeCpus) {
    GpuschedException.check(lib, lib.gpusched_chunks_plan_add_executor(
        plan, name, node, gpuFreeBytes, gpuFreeBytes.length, freeCpus));
    return this;
  }

  public StagePlan addNodesJson(String json) {
    GpuschedException.check(lib, lib.gpusched_chunks_plan_add_nodes_json(plan, json));
    return this;
  }

  /** The free-CPU limit: an executor with fewer free CPUs is not used. */
  public StagePlan setMinFreeCpu(int minFreeCpu) {
    GpuschedException.check(lib, lib.gpusched_chunks_plan_set_min_free_cpu(plan, minFreeCpu));
    return this;
  }

  public List<Placement> assign(int partitions, long subtaskBytes, int cpusPerPartition) {
    GpuschedException.check(lib,
        lib.gpusched_chunks_plan_assign(plan, partitions, subtaskBytes, cpusPerPartition));
    List<Placement> placed = new ArrayList<>();
    for (int p = 0; p < partitions; ++p) {
      PointerByReference name = new PointerByReference();
      IntByReference gpu = new IntByReference();
      GpuschedException.check(lib, lib.gpusched_chunks_plan_partition(plan, p, name, gpu));
      String executor = name.getValue().getString(0, "UTF-8");
      placed.add(new Placement(executor.isEmpty() ? null : executor, gpu.getValue()));
    }
    return placed;
  }

  @Override
  public void close() {
    if (plan != null) {
      lib.gpusched_chunks_plan_free(plan);
      plan = null;
    }
  }
}
