#pragma once
// tvm.contrib.sort.argsort, the runtime function TVM's argsort kernels look up through
// the environment, for the conformance test and benchmark to register with
// gexec::register_global_function.

#include <gexec/packed_function.hpp>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

namespace gexec_test {

/// tvm.contrib.sort.argsort(data, out, axis, is_ascend) for float32 data and int32
/// indices, as TVM's C++ runtime computes it: along `axis` (negative counts from the
/// end), ordered by value with equal values keeping their original order.
inline void argsort_f32_i32(gexec::packed_args args) {
  if (args.size() != 4) throw std::invalid_argument("argsort: expected 4 arguments, got " + std::to_string(args.size()));
  const DLTensor& in = args.tensor(0);
  DLTensor& out = args.tensor(1);
  std::int64_t axis = args.int_value(2);
  const bool ascend = args.int_value(3) != 0;
  if (!gexec::same_dtype(in.dtype, gexec::dtypes::float32) || !gexec::same_dtype(out.dtype, gexec::dtypes::int32))
    throw std::invalid_argument("argsort: supports float32 data and int32 indices, not " + gexec::to_string(in.dtype) +
                                " and " + gexec::to_string(out.dtype));
  if (in.ndim != out.ndim || !std::equal(in.shape, in.shape + in.ndim, out.shape))
    throw std::invalid_argument("argsort: data and indices differ in shape");
  if (in.strides || out.strides) throw std::invalid_argument("argsort: strided tensors are not supported");
  if (axis < 0) axis += in.ndim;
  if (axis < 0 || axis >= in.ndim)
    throw std::invalid_argument("argsort: axis " + std::to_string(args.int_value(2)) + " out of range for " +
                                std::to_string(in.ndim) + " dimensions");
  std::int64_t before = 1, after = 1;
  for (int i = 0; i < in.ndim; ++i) {
    if (i < axis) before *= in.shape[i];
    if (i > axis) after *= in.shape[i];
  }
  const std::int64_t n = in.shape[axis];
  const auto* x = reinterpret_cast<const float*>(static_cast<const char*>(in.data) + in.byte_offset);
  auto* y = reinterpret_cast<std::int32_t*>(static_cast<char*>(out.data) + out.byte_offset);
  std::vector<std::int64_t> order(static_cast<std::size_t>(n));
  for (std::int64_t b = 0; b < before; ++b) {
    for (std::int64_t a = 0; a < after; ++a) {
      const std::int64_t base = b * n * after + a;
      auto at = [&](std::int64_t k) { return x[base + k * after]; };
      std::iota(order.begin(), order.end(), std::int64_t{0});
      if (ascend)
        std::stable_sort(order.begin(), order.end(), [&](std::int64_t l, std::int64_t r) { return at(l) < at(r); });
      else
        std::stable_sort(order.begin(), order.end(), [&](std::int64_t l, std::int64_t r) { return at(l) > at(r); });
      for (std::int64_t k = 0; k < n; ++k) y[base + k * after] = static_cast<std::int32_t>(order[static_cast<std::size_t>(k)]);
    }
  }
}

}  // namespace gexec_test
