#pragma once
// A look at a kernel library before dlopen() maps it. The dynamic loader maps each
// loadable segment as the program headers describe it and reads the dynamic section
// from that mapping: a file cut short (a copy that stopped, a full disk) leaves pages
// past its end, and touching them kills the process with SIGBUS instead of failing the
// load. gexec reads the headers first and refuses a 64-bit ELF file whose header
// tables or segments end past the end of the file. Other files (not ELF, another
// class) go to dlopen(), which refuses them with a message of its own.

#include "../config.hpp"

#include <elf.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "../error.hpp"

GEXEC_NAMESPACE_BEGIN
namespace detail {

/// Throws errc::io naming `what` when `fd` (of `size` bytes) is a 64-bit ELF file whose
/// program headers or segments lie beyond its end.
inline void check_elf_extent(int fd, std::uint64_t size, const std::string& what) {
  Elf64_Ehdr eh{};
  if (size < sizeof eh || ::pread(fd, &eh, sizeof eh, 0) != static_cast<ssize_t>(sizeof eh)) return;  // dlopen: "file too short"
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64) return;
  auto truncated = [&](const std::string& part, std::uint64_t end) {
    throw error(errc::io, "cannot load kernel library " + what + ": the file is truncated: its " + part + " ends at byte " + std::to_string(end) +
                              ", the file has " + std::to_string(size) + " bytes");
  };
  auto end_of = [](std::uint64_t offset, std::uint64_t bytes) { return bytes > UINT64_MAX - offset ? UINT64_MAX : offset + bytes; };
  if (eh.e_phentsize != sizeof(Elf64_Phdr)) return;  // not a layout the loader maps either
  const std::uint64_t ph_end = end_of(eh.e_phoff, std::uint64_t{eh.e_phnum} * sizeof(Elf64_Phdr));
  if (ph_end > size) truncated("program header table", ph_end);
  std::vector<Elf64_Phdr> ph(eh.e_phnum);
  const auto ph_bytes = static_cast<ssize_t>(ph.size() * sizeof(Elf64_Phdr));
  if (::pread(fd, ph.data(), static_cast<std::size_t>(ph_bytes), static_cast<off_t>(eh.e_phoff)) != ph_bytes) return;
  for (std::size_t i = 0; i < ph.size(); ++i) {
    if (ph[i].p_type != PT_LOAD && ph[i].p_type != PT_DYNAMIC) continue;
    const std::uint64_t end = end_of(ph[i].p_offset, ph[i].p_filesz);
    if (end > size) truncated(std::string(ph[i].p_type == PT_LOAD ? "loadable segment " : "dynamic segment ") + std::to_string(i), end);
  }
}

/// check_elf_extent on the file at `path` (nothing when it cannot be opened: dlopen says why).
inline void check_elf_file(const char* path, const std::string& what) {
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  struct closer {
    int fd;
    ~closer() { ::close(fd); }
  } c{fd};
  const off_t size = ::lseek(fd, 0, SEEK_END);
  if (size > 0) check_elf_extent(fd, static_cast<std::uint64_t>(size), what);
}

}  // namespace detail
GEXEC_NAMESPACE_END
