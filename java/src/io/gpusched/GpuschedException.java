package io.gpusched;

/** A failed call of the C ABI: its status code and gpusched_last_error()'s message. */
public class GpuschedException extends RuntimeException {
  private static final long serialVersionUID = 1L;
  private final int code;

  public GpuschedException(int code, String message) {
    super("gpusched error " + code + ": " + message);
    this.code = code;
  }

  /** A failure with its cause: a checked exception a run function threw (issue 42). */
  public GpuschedException(int code, String message, Throwable cause) {
    super("gpusched error " + code + ": " + message, cause);
    this.code = code;
  }

  public int code() {
    return code;
  }

  static void check(GpuschedLibrary lib, int code) {
    if (code != 0) throw new GpuschedException(code, lib.gpusched_last_error());
  }
}
