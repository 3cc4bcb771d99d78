package org.gexec;

/** A DLPack data type: type code, bits and lanes. */
public final class DType {
  public static final int CODE_INT = 0, CODE_UINT = 1, CODE_FLOAT = 2, CODE_BFLOAT = 4, CODE_BOOL = 6;

  public static final DType INT8 = new DType(CODE_INT, 8, 1);
  public static final DType INT16 = new DType(CODE_INT, 16, 1);
  public static final DType INT32 = new DType(CODE_INT, 32, 1);
  public static final DType INT64 = new DType(CODE_INT, 64, 1);
  public static final DType UINT8 = new DType(CODE_UINT, 8, 1);
  public static final DType FLOAT16 = new DType(CODE_FLOAT, 16, 1);
  public static final DType FLOAT32 = new DType(CODE_FLOAT, 32, 1);
  public static final DType FLOAT64 = new DType(CODE_FLOAT, 64, 1);
  public static final DType BOOL = new DType(CODE_BOOL, 8, 1);

  public final int code;
  public final int bits;
  public final int lanes;

  public DType(int code, int bits, int lanes) {
    if (code < 0 || code > 255 || bits < 1 || bits > 255 || lanes < 1 || lanes > 65535)
      throw new IllegalArgumentException("not a DLPack dtype: code " + code + ", bits " + bits + ", lanes " + lanes);
    this.code = code;
    this.bits = bits;
    this.lanes = lanes;
  }

  /** Bytes of one element (lanes included). */
  public int elementBytes() {
    return (bits * lanes + 7) / 8;
  }

  int packed() {
    return code | (bits << 8) | (lanes << 16);
  }

  static DType unpack(int packed) {
    return new DType(packed & 0xff, (packed >>> 8) & 0xff, packed >>> 16);
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof DType && ((DType) o).code == code && ((DType) o).bits == bits && ((DType) o).lanes == lanes;
  }

  @Override
  public int hashCode() {
    return packed();
  }

  @Override
  public String toString() {
    String name;
    switch (code) {
      case CODE_INT: name = "int"; break;
      case CODE_UINT: name = "uint"; break;
      case CODE_FLOAT: name = "float"; break;
      case CODE_BFLOAT: name = "bfloat"; break;
      case CODE_BOOL: return lanes == 1 ? "bool" : "boolx" + lanes;
      default: name = "code" + code + "_"; break;
    }
    return name + bits + (lanes == 1 ? "" : "x" + lanes);
  }
}
