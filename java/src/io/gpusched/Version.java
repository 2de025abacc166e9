package io.gpusched;

/**
 * {@code java -cp jna.jar:gpusched.jar io.gpusched.Version}: loads libgpusched_c the way the
 * binding does and prints its ABI version and CUDA device count, to check an installation.
 * With {@code --check-async} it also runs one {@link Dispatcher#acquireAsync} and
 * {@link Dispatcher#metricsText} (issue 42) through the library it loaded.
 */
public final class Version {
  private Version() {}

  public static void main(String[] args) {
    GpuschedLibrary lib = GpuschedLibrary.load();
    int cudas = lib.gpusched_cuda_device_count();
    // Issue 42: with none, the thread's last error says what is missing (plugin, driver, GPU).
    System.out.println("gpusched C ABI " + lib.gpusched_abi_version() + ", CUDA devices " + cudas
                       + (cudas > 0 ? "" : " (" + lib.gpusched_last_error() + ")"));
    if (args.length == 1 && args[0].equals("--check-async")) checkAsync(lib);
  }

  private static void checkAsync(GpuschedLibrary lib) {
    GpuschedLibrary.DispatcherOptions o = new GpuschedLibrary.DispatcherOptions();
    o.gpu_count = 1;
    try (Dispatcher d = new Dispatcher(lib, o, new Dispatcher.Service("check", 10, 5, 1))) {
      GpuschedLibrary.Lease lease = d.acquireAsync("check").join();
      d.release(lease, false);
      if (!d.metricsText().contains("gpusched_dispatch_requests_total{service=\"check\"} 1\n")) {
        throw new IllegalStateException("metricsText does not count the request");
      }
    }
    System.out.println("acquireAsync and metricsText OK");
  }
}
