package io.gpusched;

import com.sun.jna.Pointer;
import com.sun.jna.ptr.IntByReference;
import com.sun.jna.ptr.PointerByReference;

/**
 * A cancel handle (gpusched_cancel_*): {@link #fire()} from any thread ends the
 * {@link Dispatcher#acquire(String, long, Cancel, double)} calls waiting with it, which throw
 * with {@link GpuschedLibrary#E_CANCELLED}. It stays fired until {@link #reset()}. close()
 * fires it first, so the acquires using it return and close does not wait on them.
 */
public final class Cancel extends Handle {
  public Cancel(GpuschedLibrary lib) {
    super(lib, create(lib));
  }

  private static Pointer create(GpuschedLibrary lib) {
    PointerByReference out = new PointerByReference();
    GpuschedException.check(lib, lib.gpusched_cancel_create(out));
    return out.getValue();
  }

  public void fire() {
    call(false, lib::gpusched_cancel_fire);
  }

  public void reset() {
    call(false, lib::gpusched_cancel_reset);
  }

  public boolean fired() {
    IntByReference out = new IntByReference();
    call(false, h -> lib.gpusched_cancel_fired(h, out));
    return out.getValue() == 1;
  }

  @Override
  protected void beforeWait(Pointer h) {
    lib.gpusched_cancel_fire(h);
  }

  @Override
  protected int destroy(Pointer h) {
    return lib.gpusched_cancel_destroy(h);
  }
}
