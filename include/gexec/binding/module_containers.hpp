#pragma once
// What TVM's two containers of a library's modules share: __tvm_dev_mblob (the packed
// C ABI, packed_c/module_blob.hpp) and __tvm_ffi__library_bin (the TVM-FFI ABI,
// tvm_ffi/library_bin.hpp) are each a u64 payload length followed by the payload, and
// each carries an import tree: CSR over the modules, module 0 the root. Each reader
// keeps its own framing of the modules; the length and the tree are read, checked and
// written here once.

#include "../config.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "../detail/byte_io.hpp"
#include "../error.hpp"

GEXEC_NAMESPACE_BEGIN
namespace detail {

/// The payload of a container symbol (its u64 length, then that many bytes).
/// errc::invalid_module, naming `source` and the byte offset, if the length runs past
/// the symbol.
inline std::span<const std::byte> container_payload(std::span<const std::byte> symbol, const std::string& source) {
  byte_reader outer(symbol, source, errc::invalid_module);
  const auto length = outer.read<std::uint64_t>("payload length");
  if (length > outer.remaining())
    outer.fail("payload length " + std::to_string(length) + " exceeds the " + std::to_string(outer.remaining()) + " bytes that follow");
  return outer.bytes(length, "payload");
}

/// A container symbol holding `payload`: its u64 length, then its bytes.
inline std::vector<std::byte> container_symbol(std::span<const std::byte> payload) {
  byte_writer out;
  out.reserve(sizeof(std::uint64_t) + payload.size());
  out.write(static_cast<std::uint64_t>(payload.size()));
  out.append(payload.data(), payload.size());
  return std::move(out).take();
}

/// Checks that an import tree (its row pointers and child indices) describes `modules`
/// modules: one row each, over every child index, each child one of them. Fails
/// through `in`, so that the message names the container and the offset.
inline void check_import_tree(const byte_reader& in, const std::vector<std::uint64_t>& row_ptr, const std::vector<std::uint64_t>& child_indices,
                              std::size_t modules) {
  if (row_ptr.size() != modules + 1 || row_ptr.front() != 0 || row_ptr.back() != child_indices.size() ||
      !std::is_sorted(row_ptr.begin(), row_ptr.end()))
    in.fail("import tree row pointers do not describe " + std::to_string(modules) + " modules over " + std::to_string(child_indices.size()) +
            " child indices");
  for (std::uint64_t child : child_indices)
    if (child >= modules) in.fail("import tree child " + std::to_string(child) + " is not one of the " + std::to_string(modules) + " modules");
}

}  // namespace detail
GEXEC_NAMESPACE_END
