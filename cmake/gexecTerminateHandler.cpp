// The terminate handler gexec_small_terminate_handler() (cmake/gexecModel.cmake) puts in
// place of libstdc++'s verbose one: the same lines for an uncaught exception (its type,
// its what()), the type's name as the compiler mangles it, then abort(). libstdc++'s
// handler demangles the name, and its demangler is some 47 KB of a static aarch64
// program; the linker defines libstdc++'s handler as this function (--defsym), so that
// archive member, and the demangler it calls, are never linked in.

#include <cxxabi.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <typeinfo>

// Kept (used) even where link-time optimisation sees no caller but the linker's --defsym.
extern "C" [[noreturn, gnu::used]] void gexec_terminate_handler() noexcept {
  static std::atomic_flag entered;  // clear (C++20)
  if (entered.test_and_set()) {  // terminate() again from here, or from another thread
    std::fputs("terminate called recursively\n", stderr);
    std::abort();
  }
  const std::type_info* const type = abi::__cxa_current_exception_type();
  if (type == nullptr) {
    std::fputs("terminate called without an active exception\n", stderr);
    std::abort();
  }
  std::fprintf(stderr, "terminate called after throwing an instance of '%s' (the name as mangled)\n", type->name());
  try {
    std::rethrow_exception(std::current_exception());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "  what():  %s\n", e.what());
  } catch (...) {
  }
  std::abort();
}
