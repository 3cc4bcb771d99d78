package org.gexec;

import java.lang.ref.Cleaner;

/** A gexec runtime: its own thread pool. Models loaded through it keep it alive, so it
 *  may be closed once its models are loaded. Thread-safe. */
public final class Runtime implements AutoCloseable {
  private static final class State implements Runnable {
    volatile long handle;

    State(long handle) {
      this.handle = handle;
    }

    @Override
    public void run() {
      long h = handle;
      handle = 0;
      if (h != 0) Native.runtimeRelease(h);
    }
  }

  private final State state;
  private final Cleaner.Cleanable cleanable;

  /** A runtime with numThreads threads (0: one per core). */
  public Runtime(int numThreads) {
    state = new State(Native.runtimeCreate(numThreads));
    cleanable = Native.CLEANER.register(this, state);
  }

  /** gexec's version, "major.minor.patch". */
  public static String version() {
    return Native.versionString();
  }

  /** The C API version the glue was compiled against (and got from the library). */
  public static int apiVersion() {
    return Native.apiVersion();
  }

  long handle() {
    long h = state.handle;
    if (h == 0) throw new IllegalStateException("gexec Runtime is closed");
    return h;
  }

  public boolean isClosed() {
    return state.handle == 0;
  }

  /** Releases the runtime (idempotent). */
  @Override
  public void close() {
    cleanable.clean();
  }
}
