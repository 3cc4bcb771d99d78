#pragma once
// The functions a TVM-FFI library imports from libtvm_ffi, bound to gexec's. TVM's
// kernels call TVMFFIErrorSetRaisedFromCStrParts directly, as an undefined symbol the
// dynamic loader binds lazily, on the first call: in a process without libtvm_ffi a
// kernel's first failed argument check would end the process ("undefined symbol").
// gexec writes its own function into the library's global offset table entry for each
// such import right after loading, before any kernel runs, so the kernel's error
// reaches the executor wherever libtvm_ffi is (or is not) in the process.
//
// The relocations are read from the library's dynamic section as the loader mapped
// it; an entry is written only when it lies in writable memory of the library itself
// and is one the loader binds (a jump slot or a global-data entry). A library linked
// to bind at load (-z now) has its entries bound by then, read-only: where nothing in
// the process defines the function, dlopen() refuses it, cleanly. An import of
// another TVMFFI* or TVMBackend* function that nothing in the process defines refuses
// the library, since calling it would end the process too. Code from TVM's C target
// imports the backend functions (TVMBackendAllocWorkspace) the same way.

#include "../config.hpp"

#include <elf.h>
#include <dlfcn.h>
#include <link.h>

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "../error.hpp"
#include "../binding/loader.hpp"
#include "hooks.hpp"

GEXEC_NAMESPACE_BEGIN
namespace detail {

#if defined(__x86_64__)
inline constexpr std::uint32_t jump_slot_relocation = R_X86_64_JUMP_SLOT, global_data_relocation = R_X86_64_GLOB_DAT;
#elif defined(__aarch64__)
inline constexpr std::uint32_t jump_slot_relocation = R_AARCH64_JUMP_SLOT, global_data_relocation = R_AARCH64_GLOB_DAT;
#endif

/// What bind_ffi_imports found: whether the library imports any TVMFFI* function (a
/// library TVM >= 0.21 compiled with argument checks does).
struct ffi_import_scan {
  bool imports_tvm_ffi = false;
  bool imports_barrier = false;  ///< it imports TVMBackendParallelBarrier
  void** launch_slot = nullptr;  ///< the entry bound to TVMBackendParallelLaunch, if gexec bound it
};

/// Binds the library's imports of `provided` to gexec's functions (see above). `what`
/// names the library in errors (errc::invalid_module).
inline ffi_import_scan bind_ffi_imports(void* library, const std::string& what, std::span<const provided_symbol> provided) {
  ffi_import_scan scan;
  const link_map* object = loaded_object(library);
  if (!object || !object->l_ld) throw error(errc::invalid_module, what + ": the dynamic loader does not describe it (dlinfo failed)");
#if defined(__x86_64__) || defined(__aarch64__)
  const auto base = static_cast<std::uintptr_t>(object->l_addr);
  // The loader rewrites the addresses in a writable dynamic section to where they are
  // mapped; a read-only one keeps the file's offsets.
  auto address = [&](ElfW(Addr) a) { return a < base ? base + a : static_cast<std::uintptr_t>(a); };
  std::uintptr_t symtab = 0, strtab = 0, jmprel = 0, rela = 0;
  std::uint64_t strsz = 0, pltrelsz = 0, relasz = 0, relaent = sizeof(ElfW(Rela)), pltrel = DT_RELA;
  for (const ElfW(Dyn)* d = object->l_ld; d->d_tag != DT_NULL; ++d) {
    switch (d->d_tag) {
      case DT_SYMTAB: symtab = address(d->d_un.d_ptr); break;
      case DT_STRTAB: strtab = address(d->d_un.d_ptr); break;
      case DT_STRSZ: strsz = d->d_un.d_val; break;
      case DT_JMPREL: jmprel = address(d->d_un.d_ptr); break;
      case DT_PLTRELSZ: pltrelsz = d->d_un.d_val; break;
      case DT_PLTREL: pltrel = d->d_un.d_val; break;
      case DT_RELA: rela = address(d->d_un.d_ptr); break;
      case DT_RELASZ: relasz = d->d_un.d_val; break;
      case DT_RELAENT: relaent = d->d_un.d_val; break;
      default: break;
    }
  }
  if (!symtab || !strtab) return scan;
  if (relaent != sizeof(ElfW(Rela)) || (jmprel && pltrel != DT_RELA))
    throw error(errc::invalid_module, what + ": its relocations are not in the RELA form this machine's libraries use");
  auto inside = [&](std::uintptr_t p, std::uint64_t n) { return fit_in_segments(object, reinterpret_cast<const void*>(p), n).inside; };
  if (!inside(strtab, strsz)) throw error(errc::invalid_module, what + ": its dynamic string table lies outside its loaded segments");
  struct planned {
    void** slot;
    void* value;
  };
  std::vector<planned> writes;
  auto scan_table = [&](std::uintptr_t table, std::uint64_t bytes) {
    if (!table || bytes == 0) return;
    if (!inside(table, bytes)) throw error(errc::invalid_module, what + ": its relocation table lies outside its loaded segments");
    const auto* r = reinterpret_cast<const ElfW(Rela)*>(table);
    for (std::uint64_t i = 0; i < bytes / sizeof(ElfW(Rela)); ++i) {
      const auto sym_index = ELF64_R_SYM(r[i].r_info);
      if (sym_index == 0) continue;
      const auto* sym = reinterpret_cast<const ElfW(Sym)*>(symtab) + sym_index;
      if (!inside(reinterpret_cast<std::uintptr_t>(sym), sizeof *sym) || sym->st_name >= strsz)
        throw error(errc::invalid_module, what + ": relocation " + std::to_string(i) + " names a symbol outside its symbol table");
      if (sym->st_shndx != SHN_UNDEF) continue;
      const char* name = reinterpret_cast<const char*>(strtab) + sym->st_name;
      const std::string_view n(name, bounded_length(name, strsz - sym->st_name));
      const bool ffi = n.substr(0, 6) == "TVMFFI";
      if (!ffi && n.substr(0, 10) != "TVMBackend") continue;
      scan.imports_tvm_ffi = scan.imports_tvm_ffi || ffi;
      scan.imports_barrier = scan.imports_barrier || n == "TVMBackendParallelBarrier";
      const provided_symbol* mine = nullptr;
      for (const provided_symbol& p : provided)
        if (n == p.symbol) mine = &p;
      if (!mine) {
        if (dlsym(library, std::string(n).c_str())) continue;  // libtvm_ffi is loaded: its function serves
        throw error(errc::invalid_module,
                    what + ": it imports " + std::string(n) + ", a TVM runtime function gexec does not provide and nothing in this process defines" +
                        (n.starts_with("TVMBackendAnyList")
                             ? std::string(" (a Relax executable built with exec_mode=\"compiled\" calls it from its VM-TIR functions; gexec "
                                           "runs relax.build's default, exec_mode=\"bytecode\")")
                             : std::string()));
      }
      const auto type = static_cast<std::uint32_t>(ELF64_R_TYPE(r[i].r_info));
      const std::uintptr_t slot = base + r[i].r_offset;
      if ((type != jump_slot_relocation && type != global_data_relocation) || slot % alignof(void*) != 0)
        throw error(errc::invalid_module, what + ": its import of " + std::string(n) + " is a relocation of type " + std::to_string(type) +
                                              ", not an entry of its global offset table gexec can bind");
      const segment_fit fit = fit_in_segments(object, reinterpret_cast<const void*>(slot), sizeof(void*));
      if (!fit.inside)
        throw error(errc::invalid_module, what + ": the global offset table entry of its import " + std::string(n) +
                                              " lies outside its loaded segments");
      // Made read-only after relocation (linked with -z now): the loader bound it already,
      // to a definition elsewhere in the process, or dlopen() would have failed.
      if (!fit.writable) continue;
      writes.push_back({reinterpret_cast<void**>(slot), mine->value});
      if (n == "TVMBackendParallelLaunch") scan.launch_slot = reinterpret_cast<void**>(slot);
    }
  };
  scan_table(jmprel, pltrelsz);
  scan_table(rela, relasz);
  for (const planned& w : writes) *w.slot = w.value;
#else
  // Elsewhere the relocations are not read: a TVM-FFI library is recognised by the
  // symbols it exports, and its imports are left to the dynamic loader.
  (void)provided;
#endif
  return scan;
}

}  // namespace detail
GEXEC_NAMESPACE_END
