package io.gpusched;

import com.sun.jna.Native;
import com.sun.jna.Pointer;
import com.sun.jna.ptr.PointerByReference;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;

/**
 * The CN110955526B chunk scheduler (gpusched_chunks_*), safe to share between an executor's
 * task threads: runs queue, each having every GPU of the runtime. close() waits for the runs
 * in flight and queued. Host data goes in as direct ByteBuffers (off-heap and contiguous, as
 * Spark's off-heap memory), which must stay reachable until run() returns.
 */
public final class ChunkRuntime extends Handle {
  /** The built-in kernels every runtime has, the GPUSCHED_KERNEL_* names of gpusched_chunks_c.h
   *  (what each computes is documented there): the `kernel` of {@link Job#stage}. */
  public static final String KERNEL_VADD_U32 = "vadd_u32";
  public static final String KERNEL_SCALE_U32 = "scale_u32";
  public static final String KERNEL_VADD_F32 = "vadd_f32";
  public static final String KERNEL_SCALE_F32 = "scale_f32";
  public static final String KERNEL_SUM_U32 = "sum_u32";
  public static final String KERNEL_HISTOGRAM_U32 = "histogram_u32";
  /** Every built-in kernel's name. */
  public static final List<String> BUILTIN_KERNELS = List.of(KERNEL_VADD_U32, KERNEL_SCALE_U32,
      KERNEL_VADD_F32, KERNEL_SCALE_F32, KERNEL_SUM_U32, KERNEL_HISTOGRAM_U32);

  /** A job: buffers and stages; free it with close(). One thread at a time. */
  public final class Job implements AutoCloseable {
    private Pointer job = lib.gpusched_chunks_job_new();
    private final List<ByteBuffer> pinned = new ArrayList<>();  // kept reachable for run()

    public Job buffer(String name, ByteBuffer data, boolean cache) {
      if (data != null && !data.isDirect()) {
        throw new IllegalArgumentException("buffer " + name + ": must be a direct ByteBuffer");
      }
      if (data != null) pinned.add(data);
      GpuschedException.check(lib, lib.gpusched_chunks_job_add_buffer(
          job, name, data == null ? null : Native.getDirectBufferPointer(data),
          data == null ? 0 : data.capacity(), cache ? 1 : 0));
      return this;
    }

    public Job stage(String name, String kernel, String inputs, String output, double scalar,
                     long bins) {
      GpuschedException.check(lib, lib.gpusched_chunks_job_add_stage(job, name, kernel, inputs,
                                                                     output, scalar, bins));
      return this;
    }

    /** Splits `stage` into `tasks` Spark tasks, each on the executor CN110955526B claim 2 picks. */
    public Job tasks(String stage, int tasks) {
      GpuschedException.check(lib, lib.gpusched_chunks_job_set_tasks(job, stage, tasks));
      return this;
    }

    public long stat(String name) {
      return lib.gpusched_chunks_stat(job, name);
    }

    @Override
    public void close() {
      if (job != null) lib.gpusched_chunks_job_free(job);
      job = null;
    }
  }

  private final List<Object> callbacks = new ArrayList<>();  // registered: must not be collected

  private ChunkRuntime(GpuschedLibrary lib, Pointer handle) {
    super(lib, handle);
  }

  /** `gpus` simulated GPUs of `gpuMemoryMib` MiB; chunkBytes 0: each input spread over every GPU
   *  (chunks of ceil(input / gpus), 1 MiB to 64 MiB, smaller on small GPUs; see
   *  gpusched_chunks_c.h). */
  public static ChunkRuntime simulated(GpuschedLibrary lib, int gpus, long gpuMemoryMib,
                                       long chunkBytes) {
    PointerByReference out = new PointerByReference();
    GpuschedException.check(lib, lib.gpusched_chunks_create_sim(gpus, gpuMemoryMib, chunkBytes, out));
    return new ChunkRuntime(lib, out.getValue());
  }

  /** CUDA devices 0..gpus-1 (0: all); E_FAILED_PRECONDITION in a library built without CUDA. */
  public static ChunkRuntime cuda(GpuschedLibrary lib, int gpus, long chunkBytes) {
    PointerByReference out = new PointerByReference();
    GpuschedException.check(lib, lib.gpusched_chunks_create_cuda(gpus, chunkBytes, out));
    return new ChunkRuntime(lib, out.getValue());
  }

  @Override
  protected int destroy(Pointer h) {
    return lib.gpusched_chunks_destroy(h);
  }

  public Job newJob() {
    return new Job();
  }

  /** A user map (kind 0) or reduce (kind 1) kernel; see gpusched_chunks_register_kernel. */
  public void registerKernel(String name, int kind, int inputs, long elementBytes,
                             long resultBytes, GpuschedLibrary.KernelFn run,
                             GpuschedLibrary.CombineFn combine) {
    Pointer h = enter(false);
    try {
      GpuschedException.check(lib, lib.gpusched_chunks_register_kernel(
          h, name, kind, inputs, elementBytes, resultBytes, run, combine, null));
      synchronized (callbacks) {
        callbacks.add(run);
        if (combine != null) callbacks.add(combine);
      }
    } finally {
      exit();
    }
  }

  /** Runs `job` to completion (after the runs queued before it). */
  public void run(Job job) {
    call(false, h -> lib.gpusched_chunks_run(h, job.job));
  }
}
