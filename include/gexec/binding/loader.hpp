#pragma once
// What the dynamic loader says about a kernel library: which loaded object an address
// belongs to, the symbol starting there, and the segments it lies in. gexec asks before
// it trusts a name a library exports: a kernel must be a function the library itself
// defines, a context slot or a blob a data object of its own.

#include "../config.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <dlfcn.h>
#include <link.h>

#include "../tvm_abi.hpp"
#include "../tvm_ffi_abi.hpp"

GEXEC_NAMESPACE_BEGIN
namespace detail {

/// The loaded object a dlopen handle names, or null.
inline const link_map* loaded_object(void* library) noexcept {
  link_map* object = nullptr;
  return library && dlinfo(library, RTLD_DI_LINKMAP, &object) == 0 ? object : nullptr;
}

/// What the dynamic loader knows of an address: the loaded object holding it and the
/// symbol-table entry of the exported symbol starting exactly there.
struct address_origin {
  const link_map* object = nullptr;  ///< null: no loaded object holds the address
  const char* object_name = "";
  const ElfW(Sym)* symbol = nullptr;  ///< null: no exported symbol starts there
};

inline address_origin origin_of(const void* address) noexcept {
  address_origin o;
  Dl_info info{};
  void* extra = nullptr;
  if (!address || dladdr1(address, &info, &extra, RTLD_DL_LINKMAP) == 0) return o;
  o.object = static_cast<const link_map*>(extra);
  o.object_name = info.dli_fname && *info.dli_fname ? info.dli_fname : "the main program";
  extra = nullptr;
  if (dladdr1(address, &info, &extra, RTLD_DL_SYMENT) != 0 && info.dli_saddr == address)
    o.symbol = static_cast<const ElfW(Sym)*>(extra);
  return o;
}

/// Where [address, address + size) lies in `object`'s loadable segments: inside one
/// of them (so that many bytes can be read there), and writable once the object is
/// relocated (a writable segment, outside the part made read-only after relocation).
struct segment_fit {
  bool inside = false;
  bool writable = false;
};

inline segment_fit fit_in_segments(const link_map* object, const void* address, std::size_t size) noexcept {
  struct query {
    const link_map* object;
    std::uintptr_t begin, end;
    segment_fit fit;
  } q{object, reinterpret_cast<std::uintptr_t>(address), reinterpret_cast<std::uintptr_t>(address) + size, {}};
  if (!object || q.end < q.begin) return {};
  dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* data) -> int {
        auto& q = *static_cast<query*>(data);
        if (info->dlpi_addr != q.object->l_addr ||
            std::string_view(info->dlpi_name ? info->dlpi_name : "") != std::string_view(q.object->l_name ? q.object->l_name : ""))
          return 0;
        for (ElfW(Half) i = 0; i < info->dlpi_phnum; ++i) {
          const ElfW(Phdr)& ph = info->dlpi_phdr[i];
          const std::uintptr_t lo = info->dlpi_addr + ph.p_vaddr, hi = lo + ph.p_memsz;
          if (ph.p_type == PT_LOAD && (ph.p_flags & PF_R) && lo <= q.begin && q.end <= hi) {
            q.fit.inside = true;
            q.fit.writable = (ph.p_flags & PF_W) != 0;
          }
        }
        for (ElfW(Half) i = 0; i < info->dlpi_phnum; ++i) {
          const ElfW(Phdr)& ph = info->dlpi_phdr[i];
          const std::uintptr_t lo = info->dlpi_addr + ph.p_vaddr, hi = lo + ph.p_memsz;
          if (ph.p_type == PT_GNU_RELRO && q.begin < hi && lo < q.end) q.fit.writable = false;
        }
        return 1;
      },
      &q);
  return q.fit;
}

/// Empty if `address` (what a name resolved to through `library`'s handle) is the start
/// of a function `library` itself defines; else why it is not one.
inline std::string foreign_function(const link_map* library, const void* address) {
  const address_origin o = origin_of(address);
  if (o.object != library) return std::string("it comes from ") + o.object_name;
  if (!o.symbol) return "no symbol of the library starts at its address";
  const unsigned type = ELF64_ST_TYPE(o.symbol->st_info);
  if (type == STT_FUNC || type == STT_GNU_IFUNC) return {};
  if (type == STT_OBJECT) return "it is data (an object of " + std::to_string(o.symbol->st_size) + " bytes)";
  return "its symbol has ELF type " + std::to_string(type) + ", not a function's";
}

/// The length of the string at p, at most n. The bytes are another library's, checked to lie in
/// its loaded segments; a library built with AddressSanitizer counts the redzone after
/// a global into its symbol size, so the scan is exempt from AddressSanitizer's checks.
#if defined(__clang__) || defined(__GNUC__)
__attribute__((no_sanitize("address")))
#endif
inline std::size_t bounded_length(const char* p, std::size_t n) noexcept {
  std::size_t i = 0;
  while (i < n && p[i] != '\0') ++i;
  return i;
}

/// The NUL-terminated string the data symbol `symbol` of `library` holds, or null (and
/// `why` says why) when it is not a string the library itself defines.
inline const char* library_string(void* library, const link_map* object, const char* symbol, std::string* why) {
  const auto* p = static_cast<const char*>(dlsym(library, symbol));
  if (!p) return nullptr;
  const address_origin o = origin_of(p);
  const std::string where = std::string(symbol) + " of kernel library " + (object->l_name ? object->l_name : "");
  const char* refused = nullptr;
  if (o.object != object) refused = "is not defined in the library itself";
  else if (!o.symbol || ELF64_ST_TYPE(o.symbol->st_info) != STT_OBJECT) refused = "is not a data object";
  else if (!fit_in_segments(object, p, o.symbol->st_size).inside) refused = "has a size that runs past the library's loaded segments";
  else if (bounded_length(p, o.symbol->st_size) == o.symbol->st_size) refused = "is not a NUL-terminated string";
  if (!refused) return p;
  if (why) *why = where + " " + refused;
  return nullptr;
}

/// The library's own function `name` (symbol, or "__tvm_main__"'s target), or null.
/// Only functions the library itself defines count: a name the loader finds in a
/// library it depends on (libc's abort, libm's cos), or one naming data (a context
/// slot, __tvm_dev_mblob), is refused, and `why` (when given) says so. Null with `why`
/// untouched: no symbol of that name. The caller holds process_mutex().
inline packed_c_func library_function(void* library, std::string_view name, std::string* why = nullptr) noexcept {
  try {
    const link_map* object = loaded_object(library);
    if (!object) return nullptr;
    std::string symbol(name);
    if (symbol == "__tvm_main__") {
      const char* target = library_string(library, object, "__tvm_main__", why);
      if (!target) return nullptr;
      symbol = target;
    }
    if (symbol.empty()) return nullptr;
    void* address = dlsym(library, symbol.c_str());
    if (!address) return nullptr;
    const std::string refused = foreign_function(object, address);
    if (refused.empty()) return reinterpret_cast<packed_c_func>(address);
    if (why) {
      const std::string what = "is not a function defined in kernel library " + std::string(object->l_name ? object->l_name : "") + ": " + refused;
      *why = name == symbol ? "\"" + symbol + "\" " + what : "__tvm_main__ names \"" + symbol + "\", which " + what;
    }
    return nullptr;
  } catch (...) {
    return nullptr;  // out of memory while explaining: no function
  }
}

/// The TVM-FFI kernel `name` of `library`: its own function __tvm_ffi_<name>
/// ("__tvm_main__" names __tvm_ffi_main), or null. Refused like library_function's
/// symbols, with `why` saying why. The caller holds process_mutex().
inline void* library_ffi_function(void* library, std::string_view name, std::string* why = nullptr) noexcept {
  try {
    const link_map* object = loaded_object(library);
    if (!object || name.empty()) return nullptr;
    const std::string symbol = tvm_ffi_symbol_prefix + std::string(name == "__tvm_main__" ? std::string_view("main") : name);
    void* address = dlsym(library, symbol.c_str());
    if (!address) return nullptr;
    const std::string refused = foreign_function(object, address);
    if (refused.empty()) return address;
    if (why)
      *why = "\"" + symbol + "\" (the TVM-FFI kernel \"" + std::string(name) + "\") is not a function defined in kernel library " +
             std::string(object->l_name ? object->l_name : "") + ": " + refused;
    return nullptr;
  } catch (...) {
    return nullptr;
  }
}

}  // namespace detail
GEXEC_NAMESPACE_END
