#pragma once
// The per-thread message a kernel leaves through TVMAPISetLastError before returning
// non-zero; the executor turns it into a gexec::error naming the node. One per-thread
// slot, running_step(), says both which step this thread runs and whether a message was
// set since: run() stores the step before each kernel (one store, the same that clears
// the flag), a message replaces it with message_set. So a kernel that fails without a
// message is not blamed with an older one, and a workspace lender knows the step.

#include "../config.hpp"

#include <string>
#include <string_view>

GEXEC_NAMESPACE_BEGIN
namespace detail {

inline std::string& last_error() {
  thread_local std::string message;
  return message;
}

/// What running_step() holds once a message was set: no step's address.
inline constexpr char message_set = 0;

/// The call step (instance_plan's call_step or ffi_step) this thread's run() started
/// last, &message_set once a kernel set a message after it, or null. A plain pointer:
/// no initialisation guard, so run() sets it before every kernel for one store.
inline const void*& running_step() noexcept {
  thread_local const void* step = nullptr;
  return step;
}

/// Whether last_error() was set since it was last cleared.
inline bool last_error_set() noexcept { return running_step() == &message_set; }

/// Never throws: without memory for the text, the previous text stays, still flagged.
inline void set_last_error(std::string_view message) noexcept {
  try {
    last_error().assign(message);
  } catch (...) {
  }
  running_step() = &message_set;
}

/// The message if one was set since the last clear, else empty; clears both.
inline std::string take_last_error() {
  std::string m;
  if (last_error_set()) m = std::move(last_error());
  last_error().clear();
  running_step() = nullptr;
  return m;
}

}  // namespace detail
GEXEC_NAMESPACE_END
