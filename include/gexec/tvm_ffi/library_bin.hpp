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

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "../detail/byte_io.hpp"
#include "../error.hpp"
#include "../packed_c/module_blob.hpp"

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
  detail::byte_reader outer(symbol, source, errc::invalid_module);
  const auto length = outer.read<std::uint64_t>("payload length");
  if (length > outer.remaining())
    outer.fail("payload length " + std::to_string(length) + " exceeds the " + std::to_string(outer.remaining()) + " bytes that follow");
  detail::byte_reader in(outer.bytes(length, "payload"), source, errc::invalid_module);
  library_bin bin;
  bin.import_tree_row_ptr = detail::read_u64_vector(in, "import tree row pointers");
  bin.import_tree_child_indices = detail::read_u64_vector(in, "import tree child indices");
  const auto& rows = bin.import_tree_row_ptr;
  if (rows.empty()) in.fail("the import tree has no row pointers, so no modules");
  const std::size_t n = rows.size() - 1;
  if (rows.front() != 0 || rows.back() != bin.import_tree_child_indices.size() || !std::is_sorted(rows.begin(), rows.end()))
    in.fail("import tree row pointers do not describe " + std::to_string(n) + " modules over " +
            std::to_string(bin.import_tree_child_indices.size()) + " child indices");
  for (std::uint64_t child : bin.import_tree_child_indices)
    if (child >= n) in.fail("import tree child " + std::to_string(child) + " is not one of the " + std::to_string(n) + " modules");
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
  p.write(static_cast<std::uint64_t>(bin.import_tree_row_ptr.size()));
  for (std::uint64_t r : bin.import_tree_row_ptr) p.write(r);
  p.write(static_cast<std::uint64_t>(bin.import_tree_child_indices.size()));
  for (std::uint64_t c : bin.import_tree_child_indices) p.write(c);
  for (const library_bin_module& m : bin.modules) {
    p.write_string(m.kind);
    if (m.kind == "_lib") continue;
    p.write(static_cast<std::uint64_t>(m.bytes.size()));
    p.append(m.bytes.data(), m.bytes.size());
  }
  std::vector<std::byte> payload = std::move(p).take();
  detail::byte_writer out;
  out.write(static_cast<std::uint64_t>(payload.size()));
  out.append(payload.data(), payload.size());
  return std::move(out).take();
}

GEXEC_NAMESPACE_END
