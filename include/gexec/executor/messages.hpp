#pragma once
// The executor's error messages that name a node or an input: a kernel that failed or
// threw, inputs a run would read before anyone set them, a tensor that does not fit.
// Out of line of the run loop, which calls them only on its cold paths.

#include "../config.hpp"

#include <dlpack/dlpack.h>

#include <algorithm>
#include <cstdint>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

#include "../detail/last_error.hpp"
#include "../detail/shape.hpp"
#include "../device.hpp"
#include "../dtype.hpp"
#include "../error.hpp"
#include "../graph/compact.hpp"
#include "../ndarray.hpp"

GEXEC_NAMESPACE_BEGIN
namespace detail {

inline std::string node_label(const compact_graph& g, std::uint32_t nid) {
  return "node \"" + std::string(g.name(nid)) + "\" (nodes[" + std::to_string(nid) + "], " + std::string(g.func_name(nid)) + ")";
}

/// A kernel returned non-zero: its node, and the message it left (TVMAPISetLastError).
[[noreturn]] inline void kernel_failed(const compact_graph& g, std::uint32_t nid) {
  std::string message = take_last_error();
  throw error(errc::kernel_failed, node_label(g, nid) + " failed: " + (message.empty() ? std::string("no message") : message));
}

/// A C++ exception came out of a kernel or a backend's copy.
[[noreturn]] inline void kernel_threw(const compact_graph& g, std::uint32_t nid, std::exception_ptr e) {
  std::string what = "unknown exception";
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    what = x.what();
  } catch (...) {
  }
  throw error(errc::kernel_failed, node_label(g, nid) + " threw: " + what);
}

/// run() with inputs no one gave a value: an error naming them (eight at most).
/// Inputs used up by the last run (`used_up`, model_options::donate_inputs) are named
/// as such, before those never set.
[[noreturn]] inline void refuse_unset_inputs(const compact_graph& g, const std::vector<bool>& input_set, const std::vector<bool>& used_up) {
  const bool donated = std::find(used_up.begin(), used_up.end(), true) != used_up.end();
  std::string names;
  int listed = 0;
  for (std::size_t i = 0; i < input_set.size(); ++i)
    if (!input_set[i] && (!donated || used_up[i]) && listed++ < 8) names += (names.empty() ? "\"" : ", \"") + std::string(g.name(g.arg_nodes[i])) + "\"";
  if (listed > 8) names += " and " + std::to_string(listed - 8) + " more";
  throw error(errc::invalid_argument, "run: input" + std::string(listed > 1 ? "s " : " ") + names + (listed > 1 ? " were" : " was") +
                                          (donated ? " used up by the last run, as inputs donated to runs are (model_options::donate_inputs): "
                                                     "set_input or set_input_zero_copy gives a value again"
                                                   : " never given a value (set_input, set_input_zero_copy, load_params, share_params or "
                                                     "the model's parameters); model_options::zero_unset_inputs runs them as zeros"));
}

/// An index out of [0, count) of inputs or outputs (`what`).
inline void check_index(const char* what, int index, int count) {
  if (index < 0 || index >= count)
    throw error(errc::invalid_argument, std::string(what) + " index " + std::to_string(index) + " out of range (" + std::to_string(count) + " " +
                                            what + "s)");
}

/// No input is called `name`: an error naming those that are not parameters.
[[noreturn]] inline int no_input_named(const compact_graph& g, std::string_view name, const std::vector<bool>& is_param) {
  std::string known;
  for (std::size_t i = 0; i < g.arg_nodes.size(); ++i)
    if (!is_param[i]) known += (known.empty() ? "" : ", ") + std::string(g.name(g.arg_nodes[i]));
  throw error(errc::not_found, "no input named \"" + std::string(name) + "\" (inputs: " + known + ")");
}

/// Checks `value` against entry `eid` for `what` of `name`: dtype, shape, and for
/// zero-copy use the device (`device`), compactness and 64-byte alignment kernels rely on.
inline void check_tensor(const compact_graph& g, const char* what, std::string_view name, std::uint32_t eid, DLDevice device,
                         const ndarray& value, bool zero_copy) {
  auto fail = [&](errc code, const std::string& why) { throw error(code, std::string(what) + " \"" + std::string(name) + "\": " + why); };
  if (!value.defined()) fail(errc::invalid_argument, "undefined tensor");
  const auto shape = g.shape(eid);
  const DLDataType dtype = g.dltype[eid];
  if (!same_dtype(value.dtype(), dtype)) fail(errc::dtype_mismatch, "dtype is " + to_string(value.dtype()) + ", expected " + to_string(dtype));
  if (!std::equal(shape.begin(), shape.end(), value.shape().begin(), value.shape().end()))
    fail(errc::shape_mismatch, "shape is " + shape_to_string(value.shape()) + ", expected " + shape_to_string(shape));
  if (!value.is_contiguous()) fail(errc::invalid_argument, "tensor is strided; gexec needs compact row-major tensors");
  if (!zero_copy) return;
  if (!same_device(value.device(), device)) fail(errc::device_mismatch, "tensor is on " + to_string(value.device()) + ", expected " + to_string(device));
  if (!value.is_aligned()) fail(errc::misaligned, "data is not 64-byte aligned");
}

}  // namespace detail
GEXEC_NAMESPACE_END
