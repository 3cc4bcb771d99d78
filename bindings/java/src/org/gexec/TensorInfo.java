package org.gexec;

import java.util.Arrays;

/** An input's or output's name, dtype and shape. */
public final class TensorInfo {
  public final String name;
  public final DType dtype;
  private final long[] shape;

  TensorInfo(String name, DType dtype, long[] shape) {
    this.name = name;
    this.dtype = dtype;
    this.shape = shape;
  }

  /** A copy of the shape. */
  public long[] shape() {
    return shape.clone();
  }

  /** The shape itself, for this package (never handed out: callers get copies). */
  long[] shapeRef() {
    return shape;
  }

  /** The number of elements. */
  public long elements() {
    return Native.elements(shape);
  }

  /** The size in bytes. */
  public long bytes() {
    return elements() * dtype.elementBytes();
  }

  @Override
  public String toString() {
    return name + ": " + dtype + Arrays.toString(shape);
  }
}
