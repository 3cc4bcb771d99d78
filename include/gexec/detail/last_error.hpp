#pragma once
// The per-thread message a kernel leaves through TVMAPISetLastError before returning
// non-zero; the executor turns it into a gexec::error naming the node. A flag says
// whether a message was set since the executor last cleared it, so a kernel that fails
// without a message is not blamed with an older one.

#include "../config.hpp"

#include <string>
#include <string_view>

GEXEC_NAMESPACE_BEGIN
namespace detail {

inline std::string& last_error() {
  thread_local std::string message;
  return message;
}

/// Whether last_error() was set since it was last cleared. A plain bool: no
/// initialisation guard, so run() can clear it before every kernel for one store.
inline bool& last_error_set() noexcept {
  thread_local bool set = false;
  return set;
}

/// Never throws: without memory for the text, the previous text stays, still flagged.
inline void set_last_error(std::string_view message) noexcept {
  try {
    last_error().assign(message);
  } catch (...) {
  }
  last_error_set() = true;
}

/// The message if one was set since the last clear, else empty; clears both.
inline std::string take_last_error() {
  std::string m;
  if (last_error_set()) m = std::move(last_error());
  last_error().clear();
  last_error_set() = false;
  return m;
}

}  // namespace detail
GEXEC_NAMESPACE_END
