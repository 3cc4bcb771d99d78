#pragma once
// The one exception type gexec throws, with a machine-readable code.

#include "config.hpp"

#include <stdexcept>
#include <string>
#include <string_view>

GEXEC_NAMESPACE_BEGIN

/// What went wrong, for callers that branch on the kind of failure.
enum class errc {
  invalid_json = 1,   ///< the graph text is not JSON
  invalid_graph,      ///< JSON that is not a valid TVM graph
  invalid_dtype,      ///< a dtype string or code gexec does not know
  invalid_params,     ///< a malformed parameter blob
  invalid_module,     ///< a kernel library or module blob gexec cannot use
  invalid_argument,   ///< an API argument out of range or of the wrong kind
  shape_mismatch,     ///< a tensor of the wrong shape or size
  dtype_mismatch,     ///< a tensor of the wrong dtype
  device_mismatch,    ///< a tensor on the wrong device, or a device no backend serves
  misaligned,         ///< a tensor whose data is not aligned as kernels require
  not_found,          ///< an unknown name (input, output, node, function)
  symbol_not_found,   ///< a kernel symbol missing from a library
  kernel_failed,      ///< a kernel returned non-zero
  io,                 ///< a file that cannot be opened, read or mapped
  unsupported,        ///< a valid request gexec does not implement
  out_of_memory,      ///< memory that cannot be had, or a size no address space holds
  busy,               ///< an executor entered by a second thread while one is inside it
  invalid_npy,        ///< a malformed .npy file
  no_device,          ///< no driver or no device of the type asked for (a CUDA executor without a GPU)
  device_error,       ///< a device driver call failed (the CUDA error name and text follow)
};

/// Stable lower-case name of an error code ("invalid_graph", ...).
constexpr std::string_view to_string(errc code) noexcept {
  switch (code) {
    case errc::invalid_json: return "invalid_json";
    case errc::invalid_graph: return "invalid_graph";
    case errc::invalid_dtype: return "invalid_dtype";
    case errc::invalid_params: return "invalid_params";
    case errc::invalid_module: return "invalid_module";
    case errc::invalid_argument: return "invalid_argument";
    case errc::shape_mismatch: return "shape_mismatch";
    case errc::dtype_mismatch: return "dtype_mismatch";
    case errc::device_mismatch: return "device_mismatch";
    case errc::misaligned: return "misaligned";
    case errc::not_found: return "not_found";
    case errc::symbol_not_found: return "symbol_not_found";
    case errc::kernel_failed: return "kernel_failed";
    case errc::io: return "io";
    case errc::unsupported: return "unsupported";
    case errc::out_of_memory: return "out_of_memory";
    case errc::busy: return "busy";
    case errc::invalid_npy: return "invalid_npy";
    case errc::no_device: return "no_device";
    case errc::device_error: return "device_error";
  }
  return "unknown";
}

/// Thrown for every failure gexec detects. `what()` names the file, node, field and
/// value at fault; `code()` says what kind of failure it is.
class error : public std::runtime_error {
 public:
  error(errc code, const std::string& message)
      : std::runtime_error("gexec: " + std::string(to_string(code)) + ": " + message), code_(code) {}

  [[nodiscard]] errc code() const noexcept { return code_; }
  /// what() without the "gexec: <code>: " prefix.
  [[nodiscard]] std::string_view message() const noexcept {
    return std::string_view(what()).substr(std::string_view("gexec: ").size() + to_string(code_).size() + 2);
  }

 private:
  errc code_;
};

GEXEC_NAMESPACE_END
