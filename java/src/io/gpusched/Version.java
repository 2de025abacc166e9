package io.gpusched;

/**
 * {@code java -cp jna.jar:gpusched.jar io.gpusched.Version}: loads libgpusched_c the way the
 * binding does and prints its ABI version and CUDA device count, to check an installation.
 */
public final class Version {
  private Version() {}

  public static void main(String[] args) {
    GpuschedLibrary lib = GpuschedLibrary.load();
    System.out.println("gpusched C ABI " + lib.gpusched_abi_version() + ", CUDA devices "
                       + lib.gpusched_cuda_device_count() + " (-1: built without CUDA)");
  }
}
