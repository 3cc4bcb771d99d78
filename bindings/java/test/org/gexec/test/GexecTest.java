package org.gexec.test;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.Arrays;
import org.gexec.DType;
import org.gexec.Executor;
import org.gexec.GexecException;
import org.gexec.Model;
import org.gexec.Runtime;
import org.gexec.TensorInfo;

/** The Java binding on examples/mlp: loaded from files and from memory, run with arrays
 *  and with direct buffers (copied and zero copy), outputs compared with the values of
 *  tests/c_api/test_c_api.c; then the errors. Exits 1 on any failed check.
 *  Arguments: the source directory, the kernel library. */
public final class GexecTest {
  private static int failures = 0;
  private static final float[] X = {0.5f, -1.0f, 2.0f, 0.25f};
  private static final float[] EXPECTED = {0.400786f, 0.336452f, 0.262762f};

  private static void check(boolean ok, String what) {
    if (!ok) {
      System.err.println("CHECK failed: " + what);
      ++failures;
    }
  }

  private static void checkOutput(float[] y, String what) {
    boolean ok = y.length == 3;
    for (int i = 0; ok && i < 3; ++i) ok = Math.abs(y[i] - EXPECTED[i]) < 2e-6f;
    check(ok, what + ": " + Arrays.toString(y));
    System.out.println("  output (" + what + "): " + Arrays.toString(y));
  }

  interface Body {
    void run() throws Exception;
  }

  /** body must throw GexecException with code and a message containing needle. */
  private static void expectGexec(int code, String needle, String what, Body body) {
    try {
      body.run();
      System.err.println(what + ": succeeded, expected GexecException " + code);
      ++failures;
    } catch (GexecException e) {
      if (e.code() != code || !e.getMessage().contains(needle)) {
        System.err.println(what + ": got " + e + ", expected code " + code + " and \"" + needle + "\"");
        ++failures;
      } else {
        System.out.println("  ok: " + what + " -> " + e.code() + " " + e.getMessage());
      }
    } catch (Exception e) {
      System.err.println(what + ": got " + e + ", expected GexecException " + code);
      ++failures;
    }
  }

  private static void expectThrows(Class<? extends Exception> type, String what, Body body) {
    try {
      body.run();
      System.err.println(what + ": succeeded, expected " + type.getSimpleName());
      ++failures;
    } catch (Exception e) {
      if (!type.isInstance(e)) {
        System.err.println(what + ": got " + e + ", expected " + type.getSimpleName());
        ++failures;
      } else {
        System.out.println("  ok: " + what + " -> " + e);
      }
    }
  }

  /** A float32 tensor of a TVM parameter blob. */
  private static final class BlobTensor {
    final long[] shape;
    final float[] data;
    BlobTensor(long[] shape, float[] data) {
      this.shape = shape;
      this.data = data;
    }
  }

  /** The float32 tensors of a TVM parameter blob by name, as save_param_dict writes them. */
  private static java.util.Map<String, BlobTensor> readBlob(java.nio.file.Path path) throws java.io.IOException {
    ByteBuffer b = ByteBuffer.wrap(Files.readAllBytes(path)).order(ByteOrder.LITTLE_ENDIAN);
    if (b.getLong() != 0xF7E58D4F05049CB7L) throw new IllegalStateException(path + ": not a TVM parameter blob");
    b.getLong();  // reserved
    String[] names = new String[(int) b.getLong()];
    for (int i = 0; i < names.length; ++i) {
      byte[] name = new byte[(int) b.getLong()];
      b.get(name);
      names[i] = new String(name, java.nio.charset.StandardCharsets.UTF_8);
    }
    if (b.getLong() != names.length) throw new IllegalStateException(path + ": names and tensors differ in number");
    java.util.Map<String, BlobTensor> out = new java.util.LinkedHashMap<>();
    for (String name : names) {
      if (b.getLong() != 0xDD5E40F096B4A13FL) throw new IllegalStateException(path + ": tensor \"" + name + "\": bad magic");
      b.getLong();  // reserved
      b.getLong();  // device
      int ndim = b.getInt();
      int code = b.get(), bits = b.get() & 0xff;
      b.getShort();  // lanes
      long[] shape = new long[ndim];
      for (int i = 0; i < ndim; ++i) shape[i] = b.getLong();
      int bytes = (int) b.getLong();
      if (code != 2 || bits != 32) throw new IllegalStateException(path + ": tensor \"" + name + "\" is not float32");
      float[] data = new float[bytes / 4];
      b.asFloatBuffer().get(data);
      b.position(b.position() + bytes);
      out.put(name, new BlobTensor(shape, data));
    }
    return out;
  }

  /** The tolerance a model's info.json states (sets built for another machine than the one
   *  TVM ran them on: "tolerance": {"exact": false, "rtol": r, "atol": a}) as {rtol, atol};
   *  null where it states none or exact, and the outputs must be TVM's bit for bit. */
  private static double[] statedTolerance(java.nio.file.Path info) throws java.io.IOException {
    if (!Files.exists(info)) return null;
    String text = new String(Files.readAllBytes(info), java.nio.charset.StandardCharsets.UTF_8);
    java.util.regex.Matcher m = java.util.regex.Pattern.compile("\"tolerance\"\\s*:\\s*\\{([^}]*)\\}").matcher(text);
    if (!m.find() || !m.group(1).matches("(?s).*\"exact\"\\s*:\\s*false.*")) return null;
    double[] out = new double[2];
    String[] keys = {"rtol", "atol"};
    for (int k = 0; k < 2; ++k) {
      java.util.regex.Matcher v = java.util.regex.Pattern.compile("\"" + keys[k] + "\"\\s*:\\s*([-+0-9.eE]+)").matcher(m.group(1));
      if (!v.find()) throw new IllegalStateException(info + ": \"tolerance\" without \"" + keys[k] + "\"");
      out[k] = Double.parseDouble(v.group(1));
    }
    return out;
  }

  /** TVM-compiled conformance models (GEXEC_CONFORMANCE_DIR: model.so, TVM's inputs.bin
   *  and outputs.bin per model), outputs compared with TVM's bit for bit, or within the
   *  tolerance info.json states for a set built for another machine (aarch64's). */
  private static void conformance() throws java.io.IOException {
    String dir = System.getenv("GEXEC_CONFORMANCE_DIR");
    if (dir == null || dir.isEmpty()) {
      System.out.println("conformance models: SKIPPED (GEXEC_CONFORMANCE_DIR is not set; the test command sets it)");
      return;
    }
    int compared = 0;
    for (String model : new String[] {"mlp", "resnet", "mobilenet"}) {
      java.nio.file.Path d = Paths.get(dir, model);
      if (!Files.exists(d.resolve("outputs.bin"))) {
        System.out.println(model + ": no TVM-compiled files in " + d + ", left out");
        continue;
      }
      try (Model m = Model.loadLibrary(null, d.resolve("model.so").toString()); Executor ex = m.newExecutor()) {
        for (java.util.Map.Entry<String, BlobTensor> in : readBlob(d.resolve("inputs.bin")).entrySet())
          ex.setInput(ex.inputIndex(in.getKey()), in.getValue().data, in.getValue().shape);
        ex.run();
        java.util.Map<String, BlobTensor> expected = readBlob(d.resolve("outputs.bin"));
        double[] tol = statedTolerance(d.resolve("info.json"));
        for (java.util.Map.Entry<String, BlobTensor> out : expected.entrySet()) {
          int i = Integer.parseInt(out.getKey());
          float[] got = ex.outputAsFloats(i), want = out.getValue().data;
          boolean same = got.length == want.length;
          for (int k = 0; same && k < got.length; ++k)
            same = tol == null ? Float.floatToRawIntBits(got[k]) == Float.floatToRawIntBits(want[k])
                               : Math.abs((double) got[k] - want[k]) <= tol[1] + tol[0] * Math.abs((double) want[k]);
          check(same, model + " output " + i + (tol == null ? " bit for bit as TVM's" : " within TVM's stated tolerance"));
        }
        System.out.println(model + ": " + expected.size() + " output(s) compared with TVM's, "
                           + (tol == null ? "bit for bit" : "within " + tol[1] + " + " + tol[0] + " * |TVM's|"));
        ++compared;
      }
    }
    System.out.println(compared + " TVM-compiled model(s) compared");
  }

  public static void main(String[] args) throws Exception {
    if (args.length != 2) {
      System.err.println("usage: GexecTest <source dir> <kernel library>");
      System.exit(2);
    }
    String graph = Paths.get(args[0], "examples", "mlp", "graph.json").toString();
    String params = Paths.get(args[0], "examples", "mlp", "params.bin").toString();
    String kernels = args[1];
    System.out.println("gexec " + Runtime.version() + ", C API version " + Runtime.apiVersion() + ", JVM on "
                       + System.getProperty("os.arch"));

    // ---- from files, with a runtime of its own ----
    Model model;
    try (Runtime rt = new Runtime(2)) {
      model = Model.loadFiles(rt, graph, kernels, params);
    } // the model keeps the runtime alive
    check(model.paramBytes() == (8 * 4 + 3 * 8) * 4, "paramBytes " + model.paramBytes());

    try (Executor ex = model.newExecutor()) {
      check(ex.numInputs() == 3 && ex.numOutputs() == 1, "numInputs/numOutputs");
      TensorInfo w1 = ex.inputInfo(1);
      check(w1.name.equals("w1") && w1.dtype.equals(DType.FLOAT32) && Arrays.equals(w1.shape(), new long[] {8, 4}),
            "inputInfo(1) " + w1);
      TensorInfo y = ex.outputInfo(0);
      check(y.dtype.equals(DType.FLOAT32) && Arrays.equals(y.shape(), new long[] {1, 3}), "outputInfo(0) " + y);
      check(ex.outputIndex(y.name) == 0, "outputIndex");
      check(ex.inputIndex("x") == 0 && ex.inputIndex("nope") == -1, "inputIndex");
      System.out.println("  inputs: " + ex.inputInfo(0) + ", " + w1 + ", " + ex.inputInfo(2) + "; output: " + y);

      // arrays, the input's own shape
      ex.setInput(0, X);
      ex.run();
      checkOutput(ex.outputAsFloats(0), "float[] in, float[] out");
      // arrays, an explicit shape
      ex.setInput(ex.inputIndex("x"), X, new long[] {1, 4});
      ex.run();
      float[] out = new float[3];
      ex.copyOutput(0, out);
      checkOutput(out, "float[] with shape");
      // raw bytes
      ByteBuffer raw = ByteBuffer.allocate(16).order(ByteOrder.nativeOrder());
      for (float v : X) raw.putFloat(v);
      ex.setInput(0, raw.array());
      ex.run();
      byte[] rawOut = new byte[12];
      ex.copyOutput(0, rawOut);
      float[] fromRaw = new float[3];
      ByteBuffer.wrap(rawOut).order(ByteOrder.nativeOrder()).asFloatBuffer().get(fromRaw);
      checkOutput(fromRaw, "byte[] in, byte[] out");

      // direct buffers, copied in, copied out and viewed
      ByteBuffer in = ByteBuffer.allocateDirect(4 * 4).order(ByteOrder.nativeOrder());
      in.asFloatBuffer().put(X);
      ex.setInput(0, in);
      ex.run();
      ByteBuffer outBuf = ByteBuffer.allocateDirect(3 * 4).order(ByteOrder.nativeOrder());
      ex.copyOutput(0, outBuf);
      float[] fromBuf = new float[3];
      outBuf.asFloatBuffer().get(fromBuf);
      checkOutput(fromBuf, "direct buffer in, direct buffer out");
      ByteBuffer view = ex.outputView(0);
      check(view.isDirect() && view.isReadOnly() && view.capacity() == 12, "outputView " + view);
      float[] fromView = new float[3];
      view.asFloatBuffer().get(fromView);
      checkOutput(fromView, "output view");

      // zero copy: the input reads the buffer in place, so a new value there shows in the next run
      ByteBuffer zc = ex.allocateInput(0);
      zc.asFloatBuffer().put(new float[] {0, 0, 0, 0});
      ex.setInputZeroCopy(0, zc);
      ex.run();
      float[] zeros = ex.outputAsFloats(0);
      zc.asFloatBuffer().put(X);
      ex.run();
      checkOutput(ex.outputAsFloats(0), "zero copy");
      check(!Arrays.equals(zeros, ex.outputAsFloats(0)), "zero copy reads the buffer in place");
      // aligned buffers of every size have exactly that capacity
      boolean sizesOk = true;
      for (int n = 0; n <= 300; ++n) {
        ByteBuffer b = Executor.allocateAligned(n);
        sizesOk &= b.capacity() == n && b.position() == 0 && b.order() == ByteOrder.nativeOrder() && b.isDirect();
      }
      check(sizesOk, "allocateAligned sizes");
      // explicit dtype and shape
      ex.setInputZeroCopy(0, zc, DType.FLOAT32, new long[] {1, 4});
      ex.run();
      checkOutput(ex.outputAsFloats(0), "zero copy, explicit dtype and shape");
    }

    // ---- one model, an executor per thread on 4 threads ----
    {
      Thread[] threads = new Thread[4];
      int[] bad = new int[threads.length];
      for (int t = 0; t < threads.length; ++t) {
        final int me = t;
        threads[t] = new Thread(() -> {
          for (int k = 0; k < 5; ++k) {
            try (Executor ex = model.newExecutor()) {
              for (int i = 0; i < 50; ++i) {
                ex.setInput(0, X);
                ex.run();
                float[] y = ex.outputAsFloats(0);
                for (int j = 0; j < 3; ++j)
                  if (Math.abs(y[j] - EXPECTED[j]) >= 2e-6f) ++bad[me];
              }
            } catch (RuntimeException e) {
              System.err.println("thread " + me + ": " + e);
              ++bad[me];
            }
          }
        });
        threads[t].start();
      }
      int total = 0;
      for (int t = 0; t < threads.length; ++t) {
        threads[t].join();
        total += bad[t];
      }
      check(total == 0, "4 threads, an executor each: " + total + " bad outputs");
      System.out.println("  4 threads x 5 executors x 50 runs: " + (total == 0 ? "all outputs right" : total + " wrong"));
    }

    // ---- from memory, parameters loaded into the executor afterwards ----
    byte[] graphBytes = Files.readAllBytes(Paths.get(graph));
    byte[] paramBytes = Files.readAllBytes(Paths.get(params));
    Model bare = Model.loadMemory(null, graphBytes, null, kernels);
    try (Executor ex = bare.newExecutor()) {
      bare.close(); // the executor keeps the model alive
      ex.loadParams(paramBytes);
      ex.loadParamsFile(params);
      ex.setInput(0, X);
      ex.run();
      checkOutput(ex.outputAsFloats(0), "from memory, loadParams");
    }
    try (Model m = Model.loadMemory(null, graphBytes, paramBytes, kernels); Executor ex = m.newExecutor()) {
      ex.setInput(0, X);
      ex.run();
      checkOutput(ex.outputAsFloats(0), "from memory with params");
    }

    // ---- errors ----
    System.out.println("errors:");
    expectGexec(GexecException.IO, "/nonexistent/libkernels.so", "missing kernel library",
                () -> Model.loadFiles(null, graph, "/nonexistent/libkernels.so", params));
    expectGexec(GexecException.IO, "/nonexistent/graph.json", "missing graph",
                () -> Model.loadFiles(null, "/nonexistent/graph.json", kernels, params));
    expectGexec(GexecException.INVALID_JSON, "", "malformed JSON",
                () -> Model.loadMemory(null, "{\"nodes\": [".getBytes("UTF-8"), null, kernels));
    expectGexec(GexecException.INVALID_PARAMS, "", "garbage parameters",
                () -> Model.loadMemory(null, graphBytes, "garbage".getBytes("UTF-8"), kernels));
    expectGexec(GexecException.INVALID_ARGUMENT, "negative", "Runtime(-1)", () -> new Runtime(-1).close());

    Executor ex = model.newExecutor();
    expectGexec(GexecException.DTYPE_MISMATCH, "\"x\"", "int[] into a float32 input", () -> ex.setInput(0, new int[] {1, 2, 3, 4}));
    expectGexec(GexecException.DTYPE_MISMATCH, "\"x\"", "long[] into a float32 input",
                () -> ex.setInput(0, new long[] {1, 2, 3, 4}, new long[] {1, 4}));
    expectGexec(GexecException.SHAPE_MISMATCH, "\"x\"", "5 floats into a [1, 4] input",
                () -> ex.setInput(0, new float[5]));
    expectGexec(GexecException.SHAPE_MISMATCH, "\"x\"", "shape [4, 1]", () -> ex.setInput(0, X, new long[] {4, 1}));
    expectThrows(IllegalArgumentException.class, "array length and shape disagree",
                 () -> ex.setInput(0, X, new long[] {1, 5}));
    expectGexec(GexecException.INVALID_ARGUMENT, "input", "input index 7", () -> ex.setInput(7, X));
    expectGexec(GexecException.DTYPE_MISMATCH, "float32", "float32 output into int[]", () -> ex.copyOutput(0, new int[3]));
    expectGexec(GexecException.INVALID_ARGUMENT, "too small", "output into float[2]", () -> ex.copyOutput(0, new float[2]));
    expectGexec(GexecException.INVALID_ARGUMENT, "output index 1", "outputInfo(1)", () -> ex.outputInfo(1));
    expectGexec(GexecException.INVALID_ARGUMENT, "needs 16", "a direct buffer too small",
                () -> ex.setInput(0, ByteBuffer.allocateDirect(8)));
    expectThrows(IllegalArgumentException.class, "a heap buffer", () -> ex.setInput(0, ByteBuffer.allocate(16)));
    ByteBuffer misaligned = Executor.allocateAligned(32);
    misaligned.position(4);
    expectGexec(GexecException.MISALIGNED, "", "a misaligned zero-copy buffer", () -> ex.setInputZeroCopy(0, misaligned));
    expectGexec(GexecException.INVALID_ARGUMENT, "\"x\"", "run with x unset", ex::run);

    ex.close();
    ex.close(); // idempotent
    check(ex.isClosed(), "isClosed");
    expectThrows(IllegalStateException.class, "run on a closed executor", ex::run);
    expectThrows(IllegalStateException.class, "setInput on a closed executor", () -> ex.setInput(0, X));
    expectThrows(IllegalStateException.class, "copyOutput on a closed executor", () -> ex.copyOutput(0, new float[3]));
    expectThrows(IllegalStateException.class, "outputView on a closed executor", () -> ex.outputView(0));
    expectThrows(IllegalStateException.class, "numInputs on a closed executor", ex::numInputs);
    model.close();
    expectThrows(IllegalStateException.class, "newExecutor on a closed model", model::newExecutor);
    Runtime closed = new Runtime(1);
    closed.close();
    expectThrows(IllegalStateException.class, "loading through a closed runtime",
                 () -> Model.loadFiles(closed, graph, kernels, params));

    conformance();

    if (failures != 0) {
      System.err.println(failures + " check(s) failed");
      System.exit(1);
    }
    System.out.println("all checks passed");
  }
}
