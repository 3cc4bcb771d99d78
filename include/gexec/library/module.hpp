#pragma once
// gexec::module: a kernel library TVM compiled, opened with Boost.DLL. Loading fills
// the library's context slots with gexec's runtime hooks, so its kernels run
// without libtvm_runtime; get_function() resolves packed functions by name.
//
// A module answers from a source of symbols: the library the dynamic loader opened
// (module_impl.hpp), or the symbols that objects linked into the program registered
// (system_module.hpp). Its users (bindings, models, Relax executables) cannot tell them
// apart, and a program that never loads a library calls no dynamic-loader function.
//
// dlopen gives one copy of a library's globals to a whole process, so a library file
// is one module per process: loading it again while a module holds it returns that
// module. The table of loaded libraries is therefore process-wide by nature; the
// runtime keeps the modules it loaded alive (runtime::load_module).
//
// A library may be of either ABI TVM compiles to, packed C (packed_c/) or TVM-FFI
// (tvm_ffi/): the module tells them apart when it loads, which is why it lives above
// both, in library/ with the binding over it (binding.hpp).
//
// This header declares; module_impl.hpp defines, and alone includes Boost.DLL and the
// dynamic loader's headers.

#include "../config.hpp"

#include <cstddef>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "../file_path.hpp"
#include "../load_progress.hpp"
#include "../packed_function.hpp"
#include "../runtime.hpp"

GEXEC_NAMESPACE_BEGIN

class module;

namespace detail {

struct embedded_factory;

/// What a module answers from (the members of module below say what each answers). A
/// loaded library (module_state in module_impl.hpp: its Boost.DLL handle, context and
/// resolved functions) is one; system_module.hpp defines the other. Made with
/// std::make_shared of the derived type, which the shared_ptr destroys as such.
///
/// The answers are a table of function pointers, not virtual functions: the compiler
/// speculatively devirtualizes a virtual call into the override it sees (the loaded
/// library's), and that would bring the dynamic loader into every program that calls a
/// module's members, a static program over system_module() included. A source's table is
/// named only by its constructor.
struct module_source {
  struct answers {
    packed_function (*function)(const module_source& self, std::string_view name, std::string* why);
    bool (*has_symbol)(const module_source& self, std::string_view name);
    std::span<const std::byte> (*data_symbol)(const module_source& self, std::string_view name);
  };

  explicit module_source(const answers& a) noexcept : answer(&a) {}
  module_source(const module_source&) = delete;
  module_source& operator=(const module_source&) = delete;

  const answers* answer;
  file_path path;        ///< a loaded library's canonical path; another source's name, in <>
  bool tvm_ffi = false;  ///< compiled by TVM >= 0.21: kernels are __tvm_ffi_<name>, called as TVM-FFI safe calls
  std::mutex embedded_mu;
  std::weak_ptr<const embedded_factory> embedded;  ///< parsed __tvm_dev_mblob, shared by its users

 protected:
  ~module_source() = default;
};

/// The library's embedded factory, parsed once per loaded library (load_impl.hpp).
GEXEC_DECL std::shared_ptr<const embedded_factory> read_embedded_factory(const module& lib, const load_progress* progress = nullptr);

}  // namespace detail

class module {
 public:
  module() = default;
  /// A module over another source of symbols than a loaded library (system_module()).
  explicit module(std::shared_ptr<detail::module_source> source) noexcept : state_(std::move(source)) {}

  /// The packed function `name` exports ("__tvm_main__" names the library's entry
  /// function); empty if there is none. Only functions the library itself defines
  /// count: not data, nor what the loader finds in the libraries it depends on (libc's
  /// abort). `why`, when given, is set to the reason a symbol `name` was refused (and
  /// left alone when there is no such symbol).
  [[nodiscard]] packed_function get_function(std::string_view name, std::string* why = nullptr) const;
  [[nodiscard]] bool has_symbol(std::string_view name) const;
  /// Whether TVM >= 0.21 compiled the library (the TVM-FFI ABI): get_function(name)
  /// then resolves its kernel __tvm_ffi_<name>, called through TVM-FFI's convention.
  [[nodiscard]] bool tvm_ffi() const noexcept;
  /// The bytes of the data symbol `name`, bounded by its size in the library's symbol
  /// table; empty if the library does not export it. Throws errc::invalid_module if
  /// `name` is not a data object of the library itself, or if its size runs past the
  /// loaded segment it lies in (a symbol table that lies about it).
  [[nodiscard]] std::span<const std::byte> data_symbol(std::string_view name) const;
  [[nodiscard]] const file_path& path() const;
  [[nodiscard]] explicit operator bool() const noexcept { return state_ != nullptr; }
  friend bool operator==(const module& a, const module& b) noexcept { return a.state_ == b.state_; }

 private:
  friend module load_module(const file_path& path);
  friend class runtime;
  friend std::shared_ptr<const detail::embedded_factory> detail::read_embedded_factory(const module& lib, const load_progress* progress);
  std::shared_ptr<detail::module_source> state_;
};

/// Opens a TVM-compiled kernel library (deploy_lib.so). Throws errc::io if the file
/// cannot be loaded, errc::invalid_module if its headers would crash the dynamic loader
/// (elf_check.hpp) or its context slots cannot be claimed.
///
/// The library is loaded from its own path, not from a private snapshot, so a file
/// rewritten in place (cp over it) while it is being loaded, or while it is loaded, can
/// still kill the process with SIGBUS, as with any shared library and with parameter
/// files mapped by load_mode::mmap. Replace a library by writing the new file beside it
/// and renaming it over the old one (mv, rename(2)): a load then sees the old file or the
/// new, each whole, and a process holding the old one keeps it. A snapshot (a memfd
/// copy loaded through /proc/self/fd) was measured and declined: copying a 50 MB
/// single-file library cost about 17.5 ms per load (page cache warm), its 50 MB stay
/// resident as unswappable shared memory for as long as the library is loaded, where
/// the file's own pages can be dropped once the parameters are read, the loader then
/// resolves $ORIGIN in the library's run path to /proc/self/fd (dependencies installed
/// beside it are no longer found), and profilers and debuggers see a memfd, not the file.
GEXEC_DECL module load_module(const file_path& path);

GEXEC_NAMESPACE_END

#if GEXEC_HEADER_ONLY()
#include "module_impl.hpp"
#endif
