package org.gexec;

import java.lang.ref.Cleaner;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;

/** The JNI glue (libgexec_jni), a thin layer over gexec's C function table. Handles are
 *  C pointers held as longs; 0 never reaches C (the Java objects check first). Every
 *  failing C call throws GexecException. */
final class Native {
  private Native() {}

  static final Cleaner CLEANER = Cleaner.create();

  static {
    String path = System.getProperty("gexec.jni.library");
    if (path != null && !path.isEmpty()) System.load(path);
    else System.loadLibrary("gexec_jni");
  }

  /** A NUL-terminated UTF-8 copy of s, or null for null. */
  static byte[] cstr(String s) {
    if (s == null) return null;
    byte[] utf8 = s.getBytes(StandardCharsets.UTF_8);
    byte[] out = new byte[utf8.length + 1];
    System.arraycopy(utf8, 0, out, 0, utf8.length);
    return out;
  }

  static long elements(long[] shape) {
    long n = 1;
    for (long d : shape) {
      if (d < 0) throw new IllegalArgumentException("negative dimension " + d);
      n = Math.multiplyExact(n, d);
    }
    return n;
  }

  static native String versionString();
  static native int apiVersion();

  static native long runtimeCreate(int numThreads);
  static native void runtimeRelease(long runtime);

  static native long modelLoadFiles(long runtime, byte[] graph, byte[] library, byte[] params);
  static native long modelLoadLibrary(long runtime, byte[] library);
  static native long modelLoadMemory(long runtime, byte[] graphJson, byte[] params, byte[] library);
  static native void modelRelease(long model);
  static native long modelParamBytes(long model);

  static native long executorCreate(long model);
  static native void executorRelease(long executor);
  static native int ioCount(long executor, boolean output);
  static native String ioName(long executor, boolean output, int index);
  static native int ioIndex(long executor, boolean output, byte[] name);
  /** code | bits << 8 | lanes << 16 */
  static native int ioDType(long executor, boolean output, int index);
  static native long[] ioShape(long executor, boolean output, int index);

  /** array: a primitive array of elements of dtype (packed), shape's product long. */
  static native void setInputArray(long executor, int index, Object array, int dtype, long[] shape);
  /** buffer: direct; the tensor starts at offset bytes. */
  static native void setInputBuffer(long executor, int index, ByteBuffer buffer, long offset, int dtype, long[] shape,
                                    boolean zeroCopy);
  static native void run(long executor);
  static native void copyOutputArray(long executor, int index, Object array, long bytes);
  static native void copyOutputBuffer(long executor, int index, ByteBuffer buffer, long offset, long bytes);
  /** A direct buffer over the output's memory, owned by the executor. */
  static native ByteBuffer outputView(long executor, int index);
  static native void loadParams(long executor, byte[] bytes);
  static native void loadParamsFile(long executor, byte[] path);
}
