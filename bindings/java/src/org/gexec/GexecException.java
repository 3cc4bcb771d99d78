package org.gexec;

/** A failure reported by gexec: its code (a {@code gexec_errc}, the values of C++'s
 *  {@code gexec::errc}) and its message, which names what failed. */
public class GexecException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  public static final int INVALID_JSON = 1;
  public static final int INVALID_GRAPH = 2;
  public static final int INVALID_DTYPE = 3;
  public static final int INVALID_PARAMS = 4;
  public static final int INVALID_MODULE = 5;
  public static final int INVALID_ARGUMENT = 6;
  public static final int SHAPE_MISMATCH = 7;
  public static final int DTYPE_MISMATCH = 8;
  public static final int DEVICE_MISMATCH = 9;
  public static final int MISALIGNED = 10;
  public static final int NOT_FOUND = 11;
  public static final int SYMBOL_NOT_FOUND = 12;
  public static final int KERNEL_FAILED = 13;
  public static final int IO = 14;
  public static final int UNSUPPORTED = 15;
  public static final int OUT_OF_MEMORY = 16;
  public static final int BUSY = 17;
  public static final int INVALID_NPY = 18;
  public static final int NO_DEVICE = 19;
  public static final int DEVICE_ERROR = 20;
  /** A failure that is not gexec's own. */
  public static final int UNKNOWN = 1000;

  private static final String[] NAMES = {null, "invalid_json", "invalid_graph", "invalid_dtype", "invalid_params",
      "invalid_module", "invalid_argument", "shape_mismatch", "dtype_mismatch", "device_mismatch", "misaligned",
      "not_found", "symbol_not_found", "kernel_failed", "io", "unsupported", "out_of_memory", "busy", "invalid_npy",
      "no_device", "device_error"};

  /** The name of a code as gexec spells it ("dtype_mismatch"), or "unknown". */
  public static String codeName(int code) {
    return code > 0 && code < NAMES.length ? NAMES[code] : "unknown";
  }

  /** A failure found by the binding itself, worded as gexec's own ("gexec: name: what"). */
  static GexecException of(int code, String what) {
    return new GexecException(code, "gexec: " + codeName(code) + ": " + what);
  }

  private final int code;

  public GexecException(int code, String message) {
    super(message);
    this.code = code;
  }

  /** The {@code gexec_errc} value. */
  public int code() {
    return code;
  }

  @Override
  public String toString() {
    return "GexecException(" + code + "): " + getMessage();
  }
}
