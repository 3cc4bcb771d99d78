#pragma once
// The single-file form of a TVM-FFI library: the modules export_library packs beside
// the host code, as __tvm_ffi__library_bin (tvm-ffi src/ffi/extra/library_module.cc):
//
//   u64 payload length, then the payload:
//   import tree      u64 vector of row pointers, u64 vector of child indices (CSR over
//                    the modules, module 0 the root)
//   per module       its kind (u64-length string); then, but for "_lib" (the host
//                    library itself), its serialized bytes (u64-length string)
//
// Unlike TVM's earlier __tvm_dev_mblob, the import tree comes first and gives the
// module count. Read with the same bounds checks as that blob: every count and length
// is checked against the bytes that remain before anything is allocated for it.

#include "../config.hpp"

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "../binding/module_containers.hpp"
#include "../detail/byte_io.hpp"
#include "../error.hpp"

GEXEC_NAMESPACE_BEGIN

/// One module of a library binary: its kind and, unless it is "_lib", its bytes (a
/// view into the binary).
struct library_bin_module {
  std::string kind;
  std::span<const std::byte> bytes;
};

struct library_bin {
  std::vector<std::uint64_t> import_tree_row_ptr;
  std::vector<std::uint64_t> import_tree_child_indices;
  std::vector<library_bin_module> modules;  ///< in import-tree order
};

/// Parses a __tvm_ffi__library_bin (payload length included); `source` names it in
/// errors (errc::invalid_module, with the byte offset).
inline library_bin parse_library_bin(std::span<const std::byte> symbol, const std::string& source = "__tvm_ffi__library_bin") {
  detail::byte_reader in(detail::container_payload(symbol, source), source, errc::invalid_module);
  library_bin bin;
  bin.import_tree_row_ptr = detail::read_u64_vector(in, "import tree row pointers");
  bin.import_tree_child_indices = detail::read_u64_vector(in, "import tree child indices");
  if (bin.import_tree_row_ptr.empty()) in.fail("the import tree has no row pointers, so no modules");
  const std::size_t n = bin.import_tree_row_ptr.size() - 1;
  detail::check_import_tree(in, bin.import_tree_row_ptr, bin.import_tree_child_indices, n);
  bool host = false;
  for (std::size_t i = 0; i < n; ++i) {
    in.set_context("module " + std::to_string(i));
    library_bin_module m;
    m.kind = in.read_string("module kind");
    in.set_context("module " + std::to_string(i) + " (" + m.kind + ")");
    if (m.kind == "_lib") {
      if (host) in.fail("a second \"_lib\"");
      host = true;
    } else {
      m.bytes = in.bytes(in.read<std::uint64_t>("module length"), "module bytes");
    }
    bin.modules.push_back(std::move(m));
  }
  in.set_context({});
  if (in.remaining() != 0) in.fail(std::to_string(in.remaining()) + " unexpected bytes after the last module");
  return bin;
}

/// Writes a __tvm_ffi__library_bin (payload length included) holding `bin`'s modules
/// and import tree, as export_library lays it out.
inline std::vector<std::byte> write_library_bin(const library_bin& bin) {
  detail::byte_writer p;
  p.write_u64_vector(bin.import_tree_row_ptr);
  p.write_u64_vector(bin.import_tree_child_indices);
  for (const library_bin_module& m : bin.modules) {
    p.write_string(m.kind);
    if (m.kind == "_lib") continue;
    p.write(static_cast<std::uint64_t>(m.bytes.size()));
    p.append(m.bytes.data(), m.bytes.size());
  }
  return detail::container_symbol(std::move(p).take());
}

GEXEC_NAMESPACE_END
