// A Spark-executor-style client of the chunk scheduler through JNA: it fills a direct
// ByteBuffer (off-heap, contiguous, like Spark's off-heap memory), hands its address to the
// C ABI, runs a two-stage job (scale by 3, then sum) on simulated GPUs and checks the result
// against a plain Java loop. Usage: java -cp jna.jar:. ChunksJnaTest [library-name]
import com.sun.jna.Library;
import com.sun.jna.Native;
import com.sun.jna.Pointer;
import com.sun.jna.ptr.PointerByReference;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;

public class ChunksJnaTest {
  public interface Chunks extends Library {
    int gpusched_chunks_create_sim(int numGpus, long gpuMemoryMib, long chunkBytes, PointerByReference out);
    int gpusched_chunks_destroy(Pointer runtime);
    Pointer gpusched_chunks_job_new();
    void gpusched_chunks_job_free(Pointer job);
    int gpusched_chunks_job_add_buffer(Pointer job, String name, Pointer data, long bytes, int cache);
    int gpusched_chunks_job_add_stage(Pointer job, String name, String kernel, String inputs,
                                      String output, double scalar, long bins);
    int gpusched_chunks_run(Pointer runtime, Pointer job);
    long gpusched_chunks_stat(Pointer job, String name);
    String gpusched_chunks_last_error();
  }

  static void check(Chunks lib, int rc, String what) {
    if (rc != 0) throw new IllegalStateException(what + ": " + lib.gpusched_chunks_last_error());
  }

  public static void main(String[] args) {
    String libName = args.length > 0 ? args[0] : "gpusched_c";
    Chunks lib = Native.load(libName, Chunks.class);
    final int n = 4 * 1024 * 1024;  // 16 MiB of uint32, 16 chunks of 1 MiB over 4 GPUs
    ByteBuffer data = ByteBuffer.allocateDirect(n * 4).order(ByteOrder.nativeOrder());
    long expected = 0;
    for (int i = 0; i < n; ++i) {
      int v = i * 2654435761L > 0 ? (int) (i * 2654435761L) : i;
      data.putInt(i * 4, v);
      expected += Integer.toUnsignedLong(v * 3);  // Java int arithmetic wraps like uint32
    }
    ByteBuffer total = ByteBuffer.allocateDirect(8).order(ByteOrder.nativeOrder());

    PointerByReference rt = new PointerByReference();
    check(lib, lib.gpusched_chunks_create_sim(4, 256, 1 << 20, rt), "create");
    Pointer runtime = rt.getValue();
    Pointer job = lib.gpusched_chunks_job_new();
    check(lib, lib.gpusched_chunks_job_add_buffer(job, "data", Native.getDirectBufferPointer(data), n * 4L, 1), "data");
    check(lib, lib.gpusched_chunks_job_add_buffer(job, "total", Native.getDirectBufferPointer(total), 8, 0), "total");
    check(lib, lib.gpusched_chunks_job_add_stage(job, "scale", "scale_u32", "data", "scaled", 3.0, 0), "scale");
    check(lib, lib.gpusched_chunks_job_add_stage(job, "sum", "sum_u32", "scaled", "total", 0.0, 0), "sum");
    check(lib, lib.gpusched_chunks_run(runtime, job), "run");
    long got = total.getLong(0);
    long subtasks = lib.gpusched_chunks_stat(job, "subtasks");
    lib.gpusched_chunks_job_free(job);

    // A bad job reports a clear error through the ABI.
    Pointer bad = lib.gpusched_chunks_job_new();
    lib.gpusched_chunks_job_add_buffer(bad, "data", Native.getDirectBufferPointer(data), n * 4L, 0);
    lib.gpusched_chunks_job_add_stage(bad, "x", "no_such_kernel", "data", "out", 1.0, 0);
    int rc = lib.gpusched_chunks_run(runtime, bad);
    String err = lib.gpusched_chunks_last_error();
    lib.gpusched_chunks_job_free(bad);
    lib.gpusched_chunks_destroy(runtime);

    if (got != expected) throw new AssertionError("sum: expected " + expected + ", got " + got);
    if (subtasks != 16 + 16 + 16) throw new AssertionError("subtasks: expected 48, got " + subtasks);
    if (rc == 0 || !err.contains("unknown kernel \"no_such_kernel\"")) {
      throw new AssertionError("bad kernel: rc " + rc + ", error " + err);
    }
    System.out.println("ChunksJnaTest OK: sum " + got + " over " + subtasks + " subtasks");
  }
}
