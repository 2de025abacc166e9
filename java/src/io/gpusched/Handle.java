package io.gpusched;

import com.sun.jna.Pointer;
import java.util.function.ToIntFunction;

/**
 * A C handle shared by threads. Every call holds a pass ({@link #enter}/{@link #exit});
 * {@link #close()} refuses new calls, waits for the passes out, then destroys the handle once,
 * so a call after close throws instead of touching freed memory.
 */
abstract class Handle implements AutoCloseable {
  protected final GpuschedLibrary lib;
  private Pointer handle;
  private int inFlight;
  private boolean closing;
  private int closedCode = GpuschedLibrary.E_FAILED_PRECONDITION;  // what a call after close throws
  private String closedWhy = " is closed";

  Handle(GpuschedLibrary lib, Pointer handle) {
    this.lib = lib;
    this.handle = handle;
  }

  /** The handle for one call; pair with exit() in a finally block. */
  protected final synchronized Pointer enter(boolean allowedWhileClosing) {
    if (handle == null || (closing && !allowedWhileClosing)) {
      throw new GpuschedException(closedCode, getClass().getSimpleName() + closedWhy);
    }
    inFlight++;
    return handle;
  }

  protected final synchronized void exit() {
    if (--inFlight == 0) notifyAll();
  }

  /** Calls `call` with the handle under a pass and throws on a non-zero status. */
  protected final void call(boolean allowedWhileClosing, ToIntFunction<Pointer> call) {
    Pointer h = enter(allowedWhileClosing);
    try {
      GpuschedException.check(lib, call.applyAsInt(h));
    } finally {
      exit();
    }
  }

  /** Calls `call` with the handle under a pass; returns its status without throwing. */
  protected final int callRaw(boolean allowedWhileClosing, ToIntFunction<Pointer> call) {
    Pointer h = enter(allowedWhileClosing);
    try {
      return call.applyAsInt(h);
    } finally {
      exit();
    }
  }

  /** True once the handle was destroyed. */
  protected final synchronized boolean isClosed() {
    return handle == null;
  }

  /** What a call after close throws: its code and why (" is closed"). */
  protected final synchronized int closedCode() {
    return closedCode;
  }

  protected final synchronized String closedWhy() {
    return closedWhy;
  }

  /** Calls after close throw `code` ("Dispatcher is drained": E_DRAINING) instead. */
  protected final synchronized void closedBecause(int code, String why) {
    closedCode = code;
    closedWhy = why;
  }

  /** Ends the waits of calls in flight before close waits for them (the dispatcher). */
  protected void beforeWait(Pointer h) {}

  /** Undoes beforeWait when the C library refused to destroy. */
  protected void afterRefused(Pointer h) {}

  protected abstract int destroy(Pointer h);

  /** Destroys the handle after the calls in flight return; idempotent. */
  @Override
  public void close() {
    Pointer h;
    synchronized (this) {
      if (handle == null || closing) return;
      closing = true;
      h = handle;
    }
    beforeWait(h);
    int code;
    String message = "";
    synchronized (this) {  // held through destroy, so no call can slip in
      boolean interrupted = false;
      while (inFlight > 0) {
        try {
          wait();
        } catch (InterruptedException e) {
          interrupted = true;
        }
      }
      if (interrupted) Thread.currentThread().interrupt();
      code = destroy(h);
      if (code == 0) {
        handle = null;
      } else {
        message = lib.gpusched_last_error();
        closing = false;
      }
    }
    if (code != 0) {
      afterRefused(h);
      throw new GpuschedException(code, message);
    }
  }
}
