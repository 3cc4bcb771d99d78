#pragma once
// gexec's implementations of the runtime hooks a TVM-compiled library calls through
// its context slots, so that its kernels run without libtvm_runtime. The hooks take no
// context argument: they find the runtime of the run() in progress through the
// thread-local run_context, and the process default runtime's parts outside run().

#include "../config.hpp"

#include <algorithm>
#include <cstdint>
#include <exception>
#include <string>
#include <string_view>
#include <unordered_map>

#include <dlfcn.h>
#include <link.h>

#include "../device.hpp"
#include "../tvm_abi.hpp"
#include "env_registry.hpp"
#include "last_error.hpp"
#include "run_context.hpp"
#include "thread_pool.hpp"
#include "workspace.hpp"

GEXEC_NAMESPACE_BEGIN
namespace detail {

/// The process default runtime's pool: made on first use, never destroyed (its
/// workers may be serving compiled code while static destructors run).
inline thread_pool& default_pool() {
  static auto* pool = new thread_pool(default_num_threads());
  return *pool;
}

inline thread_pool& current_pool() noexcept {
  const run_context* c = current_context();
  return c && c->pool ? *c->pool : default_pool();
}

/// What a library's __tvm_module_ctx points at: one per library file for the life of
/// the process, because the library may cache it (and handles found through it) in
/// globals that outlive gexec's module object. Guarded by process_mutex().
struct module_context {
  std::string name;              ///< "kernel library /path/lib.so", for messages
  void* library = nullptr;       ///< dlopen handle of the live module, null while none is
  const void* owner = nullptr;   ///< the module object that set `library`
  std::unordered_map<std::string, func_handle*> functions;  ///< handles given out, never freed
};

inline void api_set_last_error(const char* message) noexcept { set_last_error(message ? message : ""); }

/// TVMBackendAllocWorkspace: from the backend of the running executor serving that
/// device type; outside run(), host workspace only.
inline void* backend_alloc_workspace(int device_type, int device_id, std::uint64_t nbytes, int, int) noexcept {
  const DLDevice d{static_cast<DLDeviceType>(device_type), device_id};
  try {
    const run_context* c = current_context();
    if (c && device_type == kDLCPU && nbytes > c->workspace_limit - std::min(c->workspace_limit, workspace_arena::this_thread().in_use())) {
      set_last_error("TVMBackendAllocWorkspace: " + std::to_string(nbytes) + " bytes of host workspace would exceed the limit of " +
                     std::to_string(c->workspace_limit) + " bytes a thread may hold (model_options::max_workspace_bytes)");
      return nullptr;
    }
    if (c && c->devices) {
      if (void* p = c->devices->alloc_workspace(c->backends, d, nbytes)) return p;
      set_last_error("TVMBackendAllocWorkspace: no backend of the running executor serves " + to_string(d));
      return nullptr;
    }
    if (device_type == kDLCPU) return workspace_arena::this_thread().allocate(nbytes);
    set_last_error("TVMBackendAllocWorkspace: no workspace for " + to_string(d) + " outside an executor's run()");
  } catch (const std::exception& e) {
    set_last_error(std::string("TVMBackendAllocWorkspace: ") + e.what());
  } catch (...) {
    set_last_error("TVMBackendAllocWorkspace: unknown failure");
  }
  return nullptr;
}

inline int backend_free_workspace(int device_type, int device_id, void* ptr) noexcept {
  const DLDevice d{static_cast<DLDeviceType>(device_type), device_id};
  const run_context* c = current_context();
  const int rc = c && c->devices ? c->devices->free_workspace(c->backends, d, ptr)
                 : device_type == kDLCPU ? workspace_arena::this_thread().free(ptr)
                                         : -1;
  if (rc != 0) {
    try {
      set_last_error("TVMBackendFreeWorkspace: " + to_string(d) + " workspace was not allocated by this thread");
    } catch (...) {
    }
    return -1;
  }
  return 0;
}

inline int backend_parallel_launch(FTVMParallelLambda f, void* cdata, int num_task) noexcept {
  return current_pool().launch(f, cdata, num_task);
}

inline int backend_parallel_barrier(int, TVMParallelGroupEnv* penv) noexcept { return thread_pool::barrier(penv); }

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

/// TVMBackendGetFuncFromEnv: the module's own function first, then a function
/// registered with the running runtime or the process default, as TVM looks them up.
inline int backend_get_func_from_env(void* mod_node, const char* func_name, void** out) noexcept {
  try {
    std::string_view name = func_name ? func_name : "";
    auto* ctx = static_cast<module_context*>(mod_node);
    std::lock_guard g(process_mutex());
    if (ctx) {
      if (packed_c_func fn = library_function(ctx->library, name)) {
        func_handle*& h = ctx->functions[std::string(name)];
        if (!h) {
          h = new func_handle;  // never freed: the library caches it
          h->call = &call_library_function;
        }
        h->fn.store(fn, std::memory_order_release);
        *out = h;
        return 0;
      }
    }
    if (const env_name* e = env_names::instance().find(name); e && find_env_function(e->index)) {
      *out = const_cast<func_handle*>(&e->handle);
      return 0;
    }
    set_last_error("function \"" + std::string(name) + "\" is neither in " + (ctx ? ctx->name : std::string("the module")) +
                   " nor registered with the runtime (gexec::register_global_function or runtime::register_function)");
    return -1;
  } catch (const std::exception& e) {
    set_last_error(std::string("TVMBackendGetFuncFromEnv: ") + e.what());
    return -1;
  }
}

inline int api_func_call(void* handle, TVMValue* args, int* codes, int num_args, TVMValue* ret, int* ret_code) noexcept {
  const auto* h = static_cast<const func_handle*>(handle);
  if (!h || !h->call) {
    set_last_error("TVMFuncCall: not a function handle gexec gave out");
    return -1;
  }
  int dummy_code = tc_null;
  TVMValue dummy{};
  return h->call(h, args, codes, num_args, ret ? ret : &dummy, ret_code ? ret_code : &dummy_code);
}

/// The context slots a TVM library may export and what gexec puts in each.
struct context_slot {
  const char* symbol;
  void* value;
};

inline const context_slot (&context_slots())[7] {
  static const context_slot slots[7] = {
      {"__TVMFuncCall", reinterpret_cast<void*>(&api_func_call)},
      {"__TVMAPISetLastError", reinterpret_cast<void*>(&api_set_last_error)},
      {"__TVMBackendGetFuncFromEnv", reinterpret_cast<void*>(&backend_get_func_from_env)},
      {"__TVMBackendAllocWorkspace", reinterpret_cast<void*>(&backend_alloc_workspace)},
      {"__TVMBackendFreeWorkspace", reinterpret_cast<void*>(&backend_free_workspace)},
      {"__TVMBackendParallelLaunch", reinterpret_cast<void*>(&backend_parallel_launch)},
      {"__TVMBackendParallelBarrier", reinterpret_cast<void*>(&backend_parallel_barrier)},
  };
  return slots;
}

}  // namespace detail
GEXEC_NAMESPACE_END
