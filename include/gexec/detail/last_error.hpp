#pragma once
// The per-thread message a kernel leaves through TVMAPISetLastError before returning
// non-zero; the executor turns it into a gexec::error naming the node.

#include "../config.hpp"

#include <string>
#include <string_view>

GEXEC_NAMESPACE_BEGIN
namespace detail {

inline std::string& last_error() {
  thread_local std::string message;
  return message;
}

inline void set_last_error(std::string_view message) { last_error().assign(message); }

/// The message, leaving the slot empty for the next failure.
inline std::string take_last_error() {
  std::string m = std::move(last_error());
  last_error().clear();
  return m;
}

}  // namespace detail
GEXEC_NAMESPACE_END
