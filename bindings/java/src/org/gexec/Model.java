package org.gexec;

import java.lang.ref.Cleaner;

/** A loaded model: graph, kernels and parameters. Executors made from it keep it alive.
 *  Thread-safe: many executors may be created from one model on many threads. */
public final class Model implements AutoCloseable {
  private static final class State implements Runnable {
    volatile long handle;

    State(long handle) {
      this.handle = handle;
    }

    @Override
    public void run() {
      long h = handle;
      handle = 0;
      if (h != 0) Native.modelRelease(h);
    }
  }

  private final State state;
  private final Cleaner.Cleanable cleanable;

  private Model(long handle) {
    state = new State(handle);
    cleanable = Native.CLEANER.register(this, state);
  }

  private static long runtimeHandle(Runtime runtime) {
    return runtime == null ? 0 : runtime.handle();
  }

  /** TVM's three files: graph JSON, kernel library, parameter blob (params may be null).
   *  runtime may be null: the process default. */
  public static Model loadFiles(Runtime runtime, String graphPath, String libraryPath, String paramsPath) {
    if (graphPath == null || libraryPath == null) throw new NullPointerException("graphPath and libraryPath are required");
    return new Model(Native.modelLoadFiles(runtimeHandle(runtime), Native.cstr(graphPath), Native.cstr(libraryPath),
                                           Native.cstr(paramsPath)));
  }

  /** A single-file library made by TVM's export_library (graph and parameters embedded). */
  public static Model loadLibrary(Runtime runtime, String libraryPath) {
    if (libraryPath == null) throw new NullPointerException("libraryPath");
    return new Model(Native.modelLoadLibrary(runtimeHandle(runtime), Native.cstr(libraryPath)));
  }

  /** From memory: the graph JSON's bytes, the parameter blob (may be null) and the kernel
   *  library's path. The bytes are copied or parsed before it returns. */
  public static Model loadMemory(Runtime runtime, byte[] graphJson, byte[] params, String libraryPath) {
    if (graphJson == null || libraryPath == null) throw new NullPointerException("graphJson and libraryPath are required");
    return new Model(Native.modelLoadMemory(runtimeHandle(runtime), graphJson, params, Native.cstr(libraryPath)));
  }

  long handle() {
    long h = state.handle;
    if (h == 0) throw new IllegalStateException("gexec Model is closed");
    return h;
  }

  /** Bytes of parameters the model holds, once for all its executors. */
  public long paramBytes() {
    return Native.modelParamBytes(handle());
  }

  /** A new executor: its own activations, this model's parameters shared. */
  public Executor newExecutor() {
    return new Executor(Native.executorCreate(handle()));
  }

  public boolean isClosed() {
    return state.handle == 0;
  }

  /** Releases the model (idempotent); its executors stay usable. */
  @Override
  public void close() {
    cleanable.clean();
  }
}
