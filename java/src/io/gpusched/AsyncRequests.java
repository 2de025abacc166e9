package io.gpusched;

import com.sun.jna.Native;
import com.sun.jna.Pointer;
import com.sun.jna.ptr.IntByReference;
import com.sun.jna.ptr.LongByReference;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.CompletableFuture;

/**
 * The asynchronous acquires of one {@link Dispatcher}: one daemon poller thread (started with
 * the first request) blocks in gpusched_dispatcher_wait_async, takes the results with
 * gpusched_dispatcher_poll_async and completes the futures, so thousands of queued requests
 * need no thread each. Futures complete on the poller thread: run long work elsewhere
 * (thenAcceptAsync). Thread-safe.
 */
final class AsyncRequests {
  private static final int BATCH = 64;
  private static final long WAIT_SLICE_MS = 100;  // how soon the poller sees a close

  private final Dispatcher dispatcher;
  private final GpuschedLibrary lib;
  // Under `this`: a request's future is registered before the poller can take its result.
  private final Map<Long, CompletableFuture<GpuschedLibrary.Lease>> futures = new HashMap<>();
  private final GpuschedLibrary.AsyncResult[] batch;
  private Thread poller;

  AsyncRequests(Dispatcher dispatcher, GpuschedLibrary lib) {
    this.dispatcher = dispatcher;
    this.lib = lib;
    batch = (GpuschedLibrary.AsyncResult[]) new GpuschedLibrary.AsyncResult().toArray(BATCH);
  }

  /** A future whose cancel(...) cancels the queued request. */
  private final class Request extends CompletableFuture<GpuschedLibrary.Lease> {
    long id;

    @Override
    public boolean cancel(boolean mayInterruptIfRunning) {
      boolean cancelled = super.cancel(mayInterruptIfRunning);
      if (cancelled) {
        try {  // NOT_FOUND: completed meanwhile; the poller releases a lease it got
          dispatcher.callRaw(true, h -> lib.gpusched_dispatcher_cancel_async(h, id));
        } catch (GpuschedException e) {
          // closed: close() failed or fails the futures
        }
      }
      return cancelled;
    }
  }

  /** Queues one request with the library: an acquire_async entry point. */
  interface Queue {
    int call(Pointer dispatcher, LongByReference requestOut);
  }

  CompletableFuture<GpuschedLibrary.Lease> submit(Queue queue) {
    LongByReference id = new LongByReference();
    Request f = new Request();
    synchronized (this) {
      dispatcher.call(false, h -> queue.call(h, id));
      f.id = id.getValue();
      futures.put(f.id, f);
      if (poller == null) {
        poller = new Thread(this::pollLoop, "gpusched-async-poller");
        poller.setDaemon(true);
        poller.start();
      }
    }
    return f;
  }

  private void pollLoop() {
    IntByReference ready = new IntByReference();
    while (true) {
      try {
        dispatcher.call(false, h -> lib.gpusched_dispatcher_wait_async(h, WAIT_SLICE_MS, ready));
      } catch (GpuschedException e) {
        if (dispatcher.isClosed()) return;  // closed for good; close() failed the futures
        sleepBriefly();  // closing: close() takes the results itself
        continue;
      }
      if (ready.getValue() == 1) takeResults();
    }
  }

  private static void sleepBriefly() {
    try {
      Thread.sleep(10);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  /** Takes every result waiting in the library and completes its future. */
  synchronized void takeResults() {
    LongByReference n = new LongByReference();
    do {
      try {
        dispatcher.call(true, h -> lib.gpusched_dispatcher_poll_async(h, batch[0], BATCH, n));
      } catch (GpuschedException e) {
        return;  // closed
      }
      for (int i = 0; i < n.getValue(); ++i) {
        batch[i].read();
        complete(batch[i]);
      }
    } while (n.getValue() == BATCH);
  }

  private void complete(GpuschedLibrary.AsyncResult r) {
    CompletableFuture<GpuschedLibrary.Lease> f = futures.remove(r.request);
    if (r.status != 0) {
      if (f != null) f.completeExceptionally(new GpuschedException(r.status, Native.toString(r.message)));
      return;
    }
    GpuschedLibrary.Lease lease = copy(r.lease);
    if (f == null || !f.complete(lease)) dispatcher.release(lease, false);  // cancelled: give back
  }

  private static GpuschedLibrary.Lease copy(GpuschedLibrary.Lease from) {
    GpuschedLibrary.Lease l = new GpuschedLibrary.Lease();
    l.gpu = from.gpu;
    l.service = from.service;
    l.ticket = from.ticket;
    l.locked = from.locked;
    l.attempts = from.attempts;
    l.requested_ns = from.requested_ns;
    l.granted_ns = from.granted_ns;
    l.write();
    return l;
  }

  /** After the dispatcher was freed: the futures still waiting fail with `code`. */
  synchronized void failAll(int code, String why) {
    for (CompletableFuture<GpuschedLibrary.Lease> f : futures.values()) {
      f.completeExceptionally(new GpuschedException(code, "Dispatcher" + why));
    }
    futures.clear();
  }
}
