package org.gexec;

import java.lang.ref.Cleaner;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/** One executor of a model: its own activations, the model's parameters shared. Use it
 *  from one thread at a time (make one executor per thread from one shared model).
 *
 *  <p>Inputs and outputs cross as Java arrays (copied; the array's element type is the
 *  dtype, {@code byte[]} is raw bytes in native order of any dtype) or as direct
 *  {@link ByteBuffer}s (from their position; copied, or read in place by
 *  {@link #setInputZeroCopy}). After {@link #close} every method throws
 *  {@link IllegalStateException}. */
public final class Executor implements AutoCloseable {
  private static final class State implements Runnable {
    volatile long handle;
    /** Buffers that inputs read in place (zero copy): kept alive until set again or the
     *  executor is released. */
    final ByteBuffer[] pinned;

    State(long handle, int numInputs) {
      this.handle = handle;
      this.pinned = new ByteBuffer[numInputs];
    }

    @Override
    public void run() {
      long h = handle;
      handle = 0;
      if (h != 0) Native.executorRelease(h);
      java.util.Arrays.fill(pinned, null);
    }
  }

  private final State state;
  private final Cleaner.Cleanable cleanable;
  private final TensorInfo[] inputs;
  private final TensorInfo[] outputs;

  Executor(long handle) {
    TensorInfo[] in, out;
    try {
      in = infos(handle, false);
      out = infos(handle, true);
    } catch (RuntimeException e) {
      Native.executorRelease(handle);
      throw e;
    }
    inputs = in;
    outputs = out;
    state = new State(handle, in.length);
    cleanable = Native.CLEANER.register(this, state);
  }

  private static TensorInfo[] infos(long h, boolean output) {
    TensorInfo[] r = new TensorInfo[Native.ioCount(h, output)];
    for (int i = 0; i < r.length; ++i)
      r[i] = new TensorInfo(Native.ioName(h, output, i), DType.unpack(Native.ioDType(h, output, i)),
                            Native.ioShape(h, output, i));
    return r;
  }

  private long handle() {
    long h = state.handle;
    if (h == 0) throw new IllegalStateException("gexec Executor is closed");
    return h;
  }

  public boolean isClosed() {
    return state.handle == 0;
  }

  /** Inputs count parameters too, as in TVM. */
  public int numInputs() {
    handle();
    return inputs.length;
  }

  public int numOutputs() {
    handle();
    return outputs.length;
  }

  public TensorInfo inputInfo(int index) {
    handle();
    checkIndex(index, inputs, "input");
    return inputs[index];
  }

  public TensorInfo outputInfo(int index) {
    handle();
    checkIndex(index, outputs, "output");
    return outputs[index];
  }

  /** The index of an input, or -1 when there is none. */
  public int inputIndex(String name) {
    return Native.ioIndex(handle(), false, Native.cstr(name));
  }

  /** The index of an output ("node:index"), or -1 when there is none. */
  public int outputIndex(String name) {
    return Native.ioIndex(handle(), true, Native.cstr(name));
  }

  private static void checkIndex(int index, TensorInfo[] infos, String what) {
    if (index < 0 || index >= infos.length)
      throw GexecException.of(GexecException.INVALID_ARGUMENT,
                               what + " index " + index + " out of range (" + infos.length + " " + what + "s)");
  }

  // ---- inputs from arrays (copied) ----

  public void setInput(int index, float[] data) { setArray(index, data, data.length, DType.FLOAT32, null); }
  public void setInput(int index, double[] data) { setArray(index, data, data.length, DType.FLOAT64, null); }
  public void setInput(int index, int[] data) { setArray(index, data, data.length, DType.INT32, null); }
  public void setInput(int index, long[] data) { setArray(index, data, data.length, DType.INT64, null); }
  public void setInput(int index, short[] data) { setArray(index, data, data.length, DType.INT16, null); }
  /** Raw bytes (native order) of the input's own dtype and shape. */
  public void setInput(int index, byte[] data) { setArray(index, data, data.length, null, null); }

  public void setInput(int index, float[] data, long[] shape) { setArray(index, data, data.length, DType.FLOAT32, shape); }
  public void setInput(int index, double[] data, long[] shape) { setArray(index, data, data.length, DType.FLOAT64, shape); }
  public void setInput(int index, int[] data, long[] shape) { setArray(index, data, data.length, DType.INT32, shape); }
  public void setInput(int index, long[] data, long[] shape) { setArray(index, data, data.length, DType.INT64, shape); }
  public void setInput(int index, short[] data, long[] shape) { setArray(index, data, data.length, DType.INT16, shape); }
  /** Raw bytes (native order) of a tensor of dtype and shape. */
  public void setInput(int index, byte[] data, DType dtype, long[] shape) {
    if (dtype == null) throw new NullPointerException("dtype");
    setArray(index, data, data.length, dtype, shape);
  }

  /** dtype null: raw bytes of the input's dtype. shape null: the input's shape (an array
   *  of another size is sent as 1-D, for gexec to refuse with SHAPE_MISMATCH). */
  private void setArray(int index, Object array, int length, DType dtype, long[] shape) {
    long h = handle();
    boolean raw = array instanceof byte[];
    TensorInfo info = index >= 0 && index < inputs.length ? inputs[index] : null;
    if (dtype == null) dtype = info != null ? info.dtype : DType.UINT8;
    long elements;
    if (raw) {
      if (length % dtype.elementBytes() != 0)
        throw new IllegalArgumentException(length + " bytes are not a whole number of " + dtype + " elements");
      elements = length / dtype.elementBytes();
    } else {
      elements = length;
    }
    if (shape == null) {
      shape = info != null && info.elements() == elements ? info.shapeRef() : new long[] {elements};
    } else if (Native.elements(shape) != elements) {
      throw new IllegalArgumentException("the array holds " + elements + " elements, shape " +
                                         java.util.Arrays.toString(shape) + " " + Native.elements(shape));
    }
    Native.setInputArray(h, index, array, dtype.packed(), shape);
    unpin(index);
  }

  // ---- inputs from direct buffers ----

  /** Copies the input's own dtype and shape from buffer (direct, from its position). */
  public void setInput(int index, ByteBuffer buffer) {
    setBuffer(index, buffer, null, null, false);
  }

  public void setInput(int index, ByteBuffer buffer, DType dtype, long[] shape) {
    setBuffer(index, buffer, dtype, shape, false);
  }

  /** Makes the input read buffer's memory in place (direct, from its position, 64-byte
   *  aligned: see {@link #allocateInput}). The executor keeps the buffer alive until the
   *  input is set again or the executor is closed; change its contents only between runs. */
  public void setInputZeroCopy(int index, ByteBuffer buffer) {
    setBuffer(index, buffer, null, null, true);
  }

  public void setInputZeroCopy(int index, ByteBuffer buffer, DType dtype, long[] shape) {
    setBuffer(index, buffer, dtype, shape, true);
  }

  private void setBuffer(int index, ByteBuffer buffer, DType dtype, long[] shape, boolean zeroCopy) {
    long h = handle();
    if (!buffer.isDirect()) throw new IllegalArgumentException("the buffer is not direct");
    if (buffer.isReadOnly() && zeroCopy) throw new IllegalArgumentException("the buffer is read-only");
    if (dtype == null || shape == null) {
      checkIndex(index, inputs, "input");
      if (dtype == null) dtype = inputs[index].dtype;
      if (shape == null) shape = inputs[index].shapeRef();
    }
    long bytes = Native.elements(shape) * dtype.elementBytes();
    if (buffer.remaining() < bytes)
      throw GexecException.of(GexecException.INVALID_ARGUMENT, "set_input " + index + ": the buffer has " +
                               buffer.remaining() + " bytes remaining, the tensor needs " + bytes);
    Native.setInputBuffer(h, index, buffer, buffer.position(), dtype.packed(), shape, zeroCopy);
    if (zeroCopy) state.pinned[index] = buffer;
    else unpin(index);
  }

  private void unpin(int index) {
    if (index >= 0 && index < state.pinned.length) state.pinned[index] = null;
  }

  /** A direct buffer in native byte order, 64-byte aligned, of input index's size: for
   *  {@link #setInputZeroCopy}. */
  public ByteBuffer allocateInput(int index) {
    return allocateAligned(inputInfo(index).bytes());
  }

  /** A direct buffer of bytes bytes in native byte order whose address is 64-byte aligned. */
  public static ByteBuffer allocateAligned(long bytes) {
    if (bytes < 0 || bytes > Integer.MAX_VALUE - 64) throw new IllegalArgumentException("size " + bytes);
    // alignedSlice rounds the end down to a multiple of 64 too: room for a whole last unit.
    ByteBuffer b = ByteBuffer.allocateDirect((int) ((bytes + 63) / 64 * 64) + 64).alignedSlice(64);
    b.limit((int) bytes);
    return b.slice().order(ByteOrder.nativeOrder());
  }

  // ---- run ----

  public void run() {
    Native.run(handle());
  }

  // ---- outputs ----

  private void copyArray(int index, Object array, long length, DType dtype) {
    long h = handle();
    checkIndex(index, outputs, "output");
    TensorInfo info = outputs[index];
    if (dtype != null && !dtype.equals(info.dtype))
      throw GexecException.of(GexecException.DTYPE_MISMATCH, "copy_output \"" + info.name + "\": dtype is " +
                               info.dtype + ", the array's " + dtype);
    long bytes = length * (dtype != null ? dtype.elementBytes() : 1);
    Native.copyOutputArray(h, index, array, bytes);
  }

  /** Copies output index into data (at least the output's size, else GexecException). */
  public void copyOutput(int index, float[] data) { copyArray(index, data, data.length, DType.FLOAT32); }
  public void copyOutput(int index, double[] data) { copyArray(index, data, data.length, DType.FLOAT64); }
  public void copyOutput(int index, int[] data) { copyArray(index, data, data.length, DType.INT32); }
  public void copyOutput(int index, long[] data) { copyArray(index, data, data.length, DType.INT64); }
  public void copyOutput(int index, short[] data) { copyArray(index, data, data.length, DType.INT16); }
  /** Raw bytes (native order), any dtype. */
  public void copyOutput(int index, byte[] data) { copyArray(index, data, data.length, null); }

  /** Output index as a new float[] (it must be float32). */
  public float[] outputAsFloats(int index) {
    TensorInfo info = outputInfo(index);
    float[] r = new float[Math.toIntExact(info.elements())];
    copyOutput(index, r);
    return r;
  }

  /** Copies output index into buffer (direct, from its position; position unchanged). */
  public void copyOutput(int index, ByteBuffer buffer) {
    long h = handle();
    if (!buffer.isDirect()) throw new IllegalArgumentException("the buffer is not direct");
    if (buffer.isReadOnly()) throw new IllegalArgumentException("the buffer is read-only");
    Native.copyOutputBuffer(h, index, buffer, buffer.position(), buffer.remaining());
  }

  /** A read-only view of output index's memory, in native byte order, without a copy. It
   *  is valid only until the next {@link #run}, the next outputView of that index, or
   *  {@link #close}: reading it later reads freed or changed memory. */
  public ByteBuffer outputView(int index) {
    return Native.outputView(handle(), index).order(ByteOrder.nativeOrder()).asReadOnlyBuffer()
        .order(ByteOrder.nativeOrder());
  }

  // ---- parameters ----

  /** Parameters into this executor's own memory: a blob of tvm.runtime.save_param_dict. */
  public void loadParams(byte[] bytes) {
    Native.loadParams(handle(), bytes);
  }

  /** Parameters from a file (blob, .safetensors, .npz). */
  public void loadParamsFile(String path) {
    Native.loadParamsFile(handle(), Native.cstr(path));
  }

  /** Releases the executor (idempotent) and the buffers it kept for zero-copy inputs. */
  @Override
  public void close() {
    cleanable.clean();
  }
}
