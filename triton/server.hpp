#pragma once
// Calling the server: what every part of the backend uses to log, to turn a failed
// server call into an exception, and to turn an exception back into a Triton error at
// an entry point (no exception may unwind into the server).

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>

#include "triton_api.hpp"

namespace gexec_triton {

/// Logs `message` as from `file`:`line` (the caller's __FILE__ and __LINE__), when the
/// server logs `level`.
inline void log(TRITONSERVER_LogLevel level, const char* file, int line, const std::string& message) {
  if (TRITONSERVER_LogIsEnabled(level)) {
    if (TRITONSERVER_Error* e = TRITONSERVER_LogMessage(level, file, line, message.c_str())) TRITONSERVER_ErrorDelete(e);
  }
}

/// A failed server call, its message taken and the error object freed.
struct server_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

inline void check(TRITONSERVER_Error* e, const char* call) {
  if (!e) return;
  std::string message = std::string(call) + ": " + TRITONSERVER_ErrorMessage(e);
  TRITONSERVER_ErrorDelete(e);
  throw server_error(message);
}

/// Runs `f`, turning any exception into a Triton error of `code` prefixed with `where`.
template <class F>
TRITONSERVER_Error* guarded(TRITONSERVER_Error_Code code, const std::string& where, F&& f) noexcept {
  try {
    f();
    return nullptr;
  } catch (const std::exception& e) {
    return TRITONSERVER_ErrorNew(code, (where + e.what()).c_str());
  } catch (...) {
    return TRITONSERVER_ErrorNew(code, (where + "unknown error").c_str());
  }
}

/// The time stamps Triton's statistics take.
inline std::uint64_t now_ns() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}

inline std::string megabytes(std::uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f MB", static_cast<double>(bytes) / 1e6);
  return buf;
}

/// How logs and metrics name a device: -1 is the host, else a CUDA device id.
inline std::string device_label(int device) { return device < 0 ? "cpu" : "cuda:" + std::to_string(device); }

}  // namespace gexec_triton
