#pragma once
// A look at a kernel library's headers before dlopen() maps it. The dynamic loader
// trusts them: it maps each loadable segment as the program headers describe it and
// reads the dynamic section, the program header table and the TLS image from that
// mapping. A file whose headers say otherwise than the file is kills the process
// (SIGBUS, SIGSEGV, a stack overflow) instead of failing the load:
//
//  - a file cut short (a copy that stopped, a full disk) leaves mapped pages past its
//    end, and touching them raises SIGBUS: a header table or a segment that ends past
//    the end of the file is errc::io;
//  - the loader copies the program header table onto the stack, and keeps a record per
//    entry there too: a table of 65,535 entries overflows a thread's stack. A table
//    over 4 KiB is refused, the bound the Linux kernel puts on the table of a program
//    it executes on 4 KiB-page machines (73 64-bit or 128 32-bit entries; linkers
//    write about ten);
//  - loadable segments that share a page, or that are not in ascending address order,
//    are mapped over one another: code or zeroed data is lost, and the loader's own
//    arithmetic on the first and last segment goes wrong;
//  - a dynamic section (or another part the loader or an unwinder reads in memory)
//    outside the loadable segments is read from memory nothing maps.
// These are errc::invalid_module. Both ELF classes are checked (a 32-bit build loads
// 32-bit libraries); a file of the other byte order, or not ELF at all, goes to
// dlopen(), which refuses it with a message of its own; one built for another machine or
// word size is errc::invalid_module naming both (dlopen would say "No such file"). The check reads the headers
// only. It is a guard against damaged and mis-made files, not a validator of hostile
// ones: a library runs its own code when it is loaded.

#include "../config.hpp"

#include <elf.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "../error.hpp"

GEXEC_NAMESPACE_BEGIN
namespace detail {

/// The largest program header table gexec hands to the dynamic loader, in bytes.
inline constexpr std::uint64_t max_program_header_table = 4096;

template <class Ehdr, class Phdr>
struct elf_layout {
  using header = Ehdr;
  using program_header = Phdr;
};
using elf32_layout = elf_layout<Elf32_Ehdr, Elf32_Phdr>;
using elf64_layout = elf_layout<Elf64_Ehdr, Elf64_Phdr>;

inline const char* segment_type_name(std::uint32_t type) {
  switch (type) {
    case PT_LOAD: return "PT_LOAD";
    case PT_DYNAMIC: return "PT_DYNAMIC";
    case PT_PHDR: return "PT_PHDR";
    case PT_TLS: return "PT_TLS";
    case PT_GNU_EH_FRAME: return "PT_GNU_EH_FRAME";
    case PT_GNU_RELRO: return "PT_GNU_RELRO";
    case PT_GNU_PROPERTY: return "PT_GNU_PROPERTY";
    default: return "segment";
  }
}

/// Throws when `fd` (of `size` bytes) is an ELF file of layout `Elf` whose headers the
/// dynamic loader cannot survive (see above); `page` is the page size it maps with.
template <class Elf>
void check_elf_headers(int fd, std::uint64_t size, std::uint64_t page, const std::string& what) {
  using Phdr = typename Elf::program_header;
  typename Elf::header eh{};
  if (size < sizeof eh || ::pread(fd, &eh, sizeof eh, 0) != static_cast<ssize_t>(sizeof eh)) return;
  // dlopen() refuses what it does not map (an object file, a core dump) before it reads
  // the program headers; and a file without them, saying so.
  if ((eh.e_type != ET_DYN && eh.e_type != ET_EXEC) || eh.e_phnum == 0) return;
  const std::string prefix = "cannot load kernel library " + what + ": ";
  auto refuse = [&](const std::string& why) { throw error(errc::invalid_module, prefix + why); };
  auto truncated = [&](const std::string& part, std::uint64_t end) {
    throw error(errc::io, prefix + "the file is truncated: its " + part + " ends at byte " + std::to_string(end) + ", the file has " +
                              std::to_string(size) + " bytes");
  };
  auto end_of = [](std::uint64_t offset, std::uint64_t bytes) { return bytes > UINT64_MAX - offset ? UINT64_MAX : offset + bytes; };
  auto hex = [](std::uint64_t v) {
    char s[24];
    std::snprintf(s, sizeof s, "0x%llx", static_cast<unsigned long long>(v));
    return std::string(s);
  };

  if (eh.e_phentsize != sizeof(Phdr))
    refuse("its program headers are " + std::to_string(eh.e_phentsize) + " bytes each, not the " + std::to_string(sizeof(Phdr)) +
           " of its ELF class");
  const std::uint64_t table = std::uint64_t{eh.e_phnum} * sizeof(Phdr);
  if (table > max_program_header_table)
    refuse("its program header table has " + std::to_string(eh.e_phnum) + " entries (" + std::to_string(table) +
           " bytes); gexec loads at most " + std::to_string(max_program_header_table / sizeof(Phdr)) + " (" +
           std::to_string(max_program_header_table) + " bytes), as the dynamic loader copies the table onto the stack");
  const std::uint64_t ph_end = end_of(eh.e_phoff, table);
  if (ph_end > size) truncated("program header table", ph_end);
  std::vector<Phdr> table_bytes(eh.e_phnum);
  if (::pread(fd, table_bytes.data(), static_cast<std::size_t>(table), static_cast<off_t>(eh.e_phoff)) != static_cast<ssize_t>(table))
    return;
  struct segment {
    std::uint32_t type;
    std::uint64_t offset, vaddr, filesz, memsz;
  };
  std::vector<segment> ph;
  ph.reserve(table_bytes.size());
  for (const Phdr& p : table_bytes) ph.push_back({p.p_type, p.p_offset, p.p_vaddr, p.p_filesz, p.p_memsz});

  // The top of the address space the class describes, kept a page short of 2^64 so
  // that rounding up to a page does not wrap.
  const std::uint64_t top = sizeof(Phdr{}.p_vaddr) == 4 ? std::uint64_t{1} << 32 : UINT64_MAX - page;
  auto header = [&](std::size_t i) { return "program header " + std::to_string(i) + " (" + segment_type_name(ph[i].type) + ")"; };
  auto down = [&](std::uint64_t a) { return a / page * page; };
  auto up = [&](std::uint64_t a) { return (a + page - 1) / page * page; };
  std::vector<std::size_t> loads;
  for (std::size_t i = 0; i < ph.size(); ++i) {
    const segment& p = ph[i];
    if (p.type != PT_LOAD && p.type != PT_DYNAMIC) continue;
    const std::uint64_t end = end_of(p.offset, p.filesz);
    if (end > size) truncated(std::string(p.type == PT_LOAD ? "loadable segment " : "dynamic segment ") + std::to_string(i), end);
    if (p.type != PT_LOAD) continue;
    if (p.filesz > p.memsz)
      refuse(header(i) + " takes " + std::to_string(p.filesz) + " bytes of the file into " + std::to_string(p.memsz) +
             " bytes of memory");
    if (end_of(p.vaddr, p.memsz) > top) refuse(header(i) + " at address " + hex(p.vaddr) + " ends past the end of the address space");
    // The loader maps whole pages, each segment over the one before it, and takes the
    // first and last segment for the bounds of the whole.
    if (!loads.empty()) {
      const segment& q = ph[loads.back()];
      if (p.vaddr < q.vaddr)
        refuse(header(i) + " at address " + hex(p.vaddr) + " comes after program header " + std::to_string(loads.back()) + " at " +
               hex(q.vaddr) + ": the loader needs loadable segments in ascending address order");
      if (down(p.vaddr) < up(q.vaddr + q.memsz))
        refuse(header(i) + " at address " + hex(p.vaddr) + " overlaps program header " + std::to_string(loads.back()) + " at " +
               hex(q.vaddr) + " (" + std::to_string(q.memsz) + " bytes) in the pages the loader maps");
    }
    loads.push_back(i);
  }
  if (loads.empty()) return;  // dlopen: "object file has no loadable segments"

  // Parts read in memory once the segments are mapped: the dynamic section, the
  // program header table (dl_iterate_phdr), the TLS image, the property notes, the
  // unwinder's index; they must lie in what a loadable segment maps from the file.
  // The RELRO pages are made read-only after relocation: they must be a segment's.
  for (std::size_t i = 0; i < ph.size(); ++i) {
    const segment& p = ph[i];
    std::uint64_t bytes = p.memsz;
    switch (p.type) {
      case PT_DYNAMIC: bytes = p.filesz; break;  // an empty one (a debug-info file) is skipped by the loader
      case PT_TLS: bytes = p.filesz; break;      // the image; the zeroed rest is not in the segments
      case PT_PHDR:
      case PT_GNU_PROPERTY:
      case PT_GNU_EH_FRAME: break;
      case PT_GNU_RELRO: {
        const std::uint64_t lo = down(p.vaddr), hi = down(end_of(p.vaddr, p.memsz));
        if (lo >= hi) continue;
        bool inside = false;
        for (std::size_t l : loads) inside = inside || (down(ph[l].vaddr) <= lo && hi <= up(ph[l].vaddr + ph[l].memsz));
        if (!inside)
          refuse(header(i) + " at address " + hex(p.vaddr) + " (" + std::to_string(p.memsz) +
                 " bytes) covers pages of no single loadable segment, which the loader would make read-only");
        continue;
      }
      default: continue;
    }
    if (bytes == 0) continue;
    const std::uint64_t end = end_of(p.vaddr, bytes);
    bool inside = false;
    for (std::size_t l : loads) inside = inside || (ph[l].vaddr <= p.vaddr && end <= ph[l].vaddr + ph[l].filesz);
    if (!inside)
      refuse(header(i) + " at address " + hex(p.vaddr) + " (" + std::to_string(bytes) +
             " bytes) lies outside what the loadable segments map from the file, where the loader would read it");
  }
}

/// A name for an ELF machine (e_machine), as a user would say it.
inline std::string elf_machine_name(unsigned machine) {
  switch (machine) {
    case EM_X86_64: return "x86-64";
    case EM_386: return "x86 (32-bit)";
    case EM_AARCH64: return "aarch64";
    case EM_ARM: return "32-bit ARM";
    case EM_RISCV: return "RISC-V";
    case EM_PPC64: return "ppc64";
    case EM_S390: return "s390x";
    case EM_LOONGARCH: return "loongarch";
    default: return "ELF machine " + std::to_string(machine);
  }
}

/// This process's ELF machine and class, from the compiler's target (0: not known here).
inline constexpr unsigned native_elf_machine =
#if defined(__x86_64__)
    EM_X86_64;
#elif defined(__i386__)
    EM_386;
#elif defined(__aarch64__)
    EM_AARCH64;
#elif defined(__arm__)
    EM_ARM;
#elif defined(__riscv)
    EM_RISCV;
#elif defined(__powerpc64__)
    EM_PPC64;
#elif defined(__s390x__)
    EM_S390;
#else
    0;
#endif
inline constexpr unsigned char native_elf_class = sizeof(void*) == 8 ? ELFCLASS64 : ELFCLASS32;

/// A library built for another machine or word size, named as such: dlopen() would say
/// "No such file or directory" (glibc's ENOENT for a library it skips as incompatible).
inline void check_elf_machine(const unsigned char* ident, int fd, const std::string& what) {
  std::uint16_t machine = 0;
  if (::pread(fd, &machine, sizeof machine, 18) != static_cast<ssize_t>(sizeof machine)) return;  // e_machine, in this byte order
  const auto bits = [](unsigned char c) { return c == ELFCLASS64 ? "64-bit" : "32-bit"; };
  if (native_elf_machine != 0 && machine != native_elf_machine)
    throw error(errc::invalid_module, what + ": built for " + elf_machine_name(machine) + ", this process is " +
                                          elf_machine_name(native_elf_machine) + " (build the library for this machine, or run it on its own)");
  if (ident[EI_CLASS] != native_elf_class)
    throw error(errc::invalid_module, what + ": a " + bits(ident[EI_CLASS]) + " library, this process is " + bits(native_elf_class));
}

/// check_elf_headers for the ELF class of the file: nothing for a file that is not ELF
/// of this machine's byte order. With `this_machine`, a library for another machine or
/// word size is refused first (the headers of such files are checked in tests alone).
inline void check_elf_extent(int fd, std::uint64_t size, const std::string& what, bool this_machine = true) {
  unsigned char ident[EI_NIDENT] = {};
  if (size < sizeof ident || ::pread(fd, ident, sizeof ident, 0) != static_cast<ssize_t>(sizeof ident)) return;  // dlopen: "file too short"
  if (std::memcmp(ident, ELFMAG, SELFMAG) != 0) return;
  constexpr unsigned char native = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ ? ELFDATA2LSB : ELFDATA2MSB;
  if (ident[EI_DATA] != native) return;
  if (this_machine) check_elf_machine(ident, fd, what);
  const long page_size = ::sysconf(_SC_PAGESIZE);
  const std::uint64_t page = page_size > 0 ? static_cast<std::uint64_t>(page_size) : 4096;
  if (ident[EI_CLASS] == ELFCLASS64) check_elf_headers<elf64_layout>(fd, size, page, what);
  else if (ident[EI_CLASS] == ELFCLASS32) check_elf_headers<elf32_layout>(fd, size, page, what);
}

/// check_elf_extent on the file at `path` (nothing when it cannot be opened: dlopen says why).
inline void check_elf_file(const char* path, const std::string& what, bool this_machine = true) {
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  struct closer {
    int fd;
    ~closer() { ::close(fd); }
  } c{fd};
  const off_t size = ::lseek(fd, 0, SEEK_END);
  if (size > 0) check_elf_extent(fd, static_cast<std::uint64_t>(size), what, this_machine);
}

}  // namespace detail
GEXEC_NAMESPACE_END
