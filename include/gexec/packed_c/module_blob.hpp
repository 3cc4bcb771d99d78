#pragma once
// The module blob TVM's export_library embeds in a kernel library as __tvm_dev_mblob
// (v0.19 src/runtime/library_module.cc): u64 payload length, then u64 module count and,
// per module, a type key and its payload. gexec reads the graph executor factory
// (graph JSON, parameters, module name), the host-library marker "_lib" and the import
// tree itself; every other module goes to the reader registered for its type key
// (binding/payloads.hpp: the CUDA wing registers "cuda"), and a key no reader is
// registered for is an error naming the header that reads it.

#include "../config.hpp"

#include <dlpack/dlpack.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <sys/mman.h>
#include <unistd.h>

#include "../binding/module_containers.hpp"
#include "../binding/payloads.hpp"
#include "../detail/byte_io.hpp"
#include "../params.hpp"

GEXEC_NAMESPACE_BEGIN

/// The "GraphExecutorFactory" module: what lib["default"] creates executors from.
struct graph_factory_blob {
  std::string graph_json;
  param_dict params;
  std::string module_name;
};

struct module_blob {
  std::vector<std::string> type_keys;          ///< in blob order
  std::optional<graph_factory_blob> factory;
  std::vector<module_payload> device_modules;  ///< in blob order, as their readers made them
  bool has_host_library = false;               ///< a "_lib" entry
  std::vector<std::uint64_t> import_tree_row_ptr;
  std::vector<std::uint64_t> import_tree_child_indices;
};

namespace detail {

/// What read_graph_factory does with the parameters.
enum class factory_params {
  skip,  ///< check them, keep nothing
  copy,  ///< copy each into aligned storage of its own
  /// the blob is a loaded library's read-only data, which `library` keeps mapped: each
  /// tensor whose data sits 64-byte aligned there is a view of it, read where it lies
  /// (and shared with every process that loads the library); the others are copied, all
  /// into one block of their own (allocate_long_lived: a mapping given back to the system
  /// whole when the last tensor lets it go), and the pages they were read from are given
  /// back as they are read (release_pages), so the blob never holds bytes resident beside
  /// their copies
  in_library,
};

/// Whether a tensor whose data starts at `at` is read where it lies (factory_params::in_library).
inline bool kept_in_library(const std::byte* at) noexcept { return reinterpret_cast<std::uintptr_t>(at) % host_alignment == 0; }

/// The bytes of the parameters read_graph_factory copies from `in` on (a copy of the
/// reader, at the first tensor), each padded to host_alignment; nullopt where their
/// headers do not read (read_graph_factory then says what is wrong, where).
inline std::optional<std::uint64_t> copied_param_bytes(byte_reader in, const std::vector<std::string>& names) noexcept {
  std::uint64_t total = 0;
  try {
    for (const std::string& name : names) {
      const tensor_header h = read_tensor_header(in);
      const std::byte* at = in.data().data() + in.position();
      (void)in.bytes(h.bytes, "tensor data");
      if (is_pad_name(name) || kept_in_library(at)) continue;
      const std::uint64_t padded = align_up(h.bytes == 0 ? 1 : h.bytes, host_alignment);
      if (padded < h.bytes || padded > UINT64_MAX - total) return std::nullopt;
      total += padded;
    }
  } catch (...) {
    return std::nullopt;
  }
  return total;
}

/// Reads a GraphExecutorFactory payload. Padding tensors (see params.hpp) are dropped.
/// `progress` hears of the reader's position as parameters are read. `library` keeps the
/// blob's memory alive for factory_params::in_library.
inline graph_factory_blob read_graph_factory(byte_reader& in, factory_params mode = factory_params::copy, progress_sink* progress = nullptr,
                                             const std::shared_ptr<const void>& library = nullptr) {
  const bool keep = mode != factory_params::skip;
  const bool in_library = mode == factory_params::in_library && library;
  graph_factory_blob f;
  if (keep) f.graph_json = in.read_string("graph JSON");
  else in.bytes(in.read<std::uint64_t>("graph JSON length"), "graph JSON");
  // Unlike a parameter blob, the tensor count comes before the names here.
  auto count = in.read<std::uint64_t>("parameter count");
  auto names = read_string_vector(in, "parameter names");
  if (count != names.size())
    in.fail("parameter count " + std::to_string(count) + " differs from the " + std::to_string(names.size()) + " names");
  std::string context = "GraphExecutorFactory";
  const std::byte* released = in.data().data();  // the blob's bytes before this are released or kept
  auto release_to = [&](const std::byte* end) {
    if (!in_library) return;
    release_pages({released, static_cast<std::size_t>(end - released)});
    released = end;
  };
  // The copied parameters go into one block: the models keep them in place, as long as
  // the library's factory, and it is freed whole (see allocate_long_lived).
  std::shared_ptr<void> block;
  std::byte *next = nullptr, *block_end = nullptr;
  if (in_library) {
    if (const std::optional<std::uint64_t> total = copied_param_bytes(in, names); total && *total) {
      try {
        block = std::shared_ptr<void>(allocate_long_lived(*total), &free_long_lived);
      } catch (const error&) {
        in.fail(errc::out_of_memory, "cannot allocate " + std::to_string(*total) + " bytes for the parameters");
      }
      next = static_cast<std::byte*>(block.get());
      block_end = next + *total;
    }
  }
  constexpr std::uint64_t step = std::uint64_t{4} << 20;
  for (std::size_t i = 0; i < names.size(); ++i) {
    in.set_context(context + ": parameter " + std::to_string(i) + " (\"" + names[i] + "\")");
    if (f.params.contains(names[i])) in.fail("duplicate parameter name");
    tensor_header h = read_tensor_header(in);
    if (!keep || is_pad_name(names[i])) {
      (void)in.bytes(h.bytes, "tensor data");
      continue;
    }
    if (const std::byte* at = in.data().data() + in.position(); in_library && kept_in_library(at)) {
      const std::span<const std::byte> data = in.bytes(h.bytes, "tensor data");
      release_to(at);
      released = data.data() + data.size();
      if (progress) progress->report(in.position());
      f.params.set(names[i], ndarray::view(h.over(const_cast<std::byte*>(data.data())), library));
      continue;
    }
    const std::uint64_t padded = align_up(h.bytes == 0 ? 1 : h.bytes, host_alignment);
    ndarray tensor;
    if (block && padded <= static_cast<std::uint64_t>(block_end - next)) {
      std::memset(next + h.bytes, 0, static_cast<std::size_t>(padded - h.bytes));  // as allocate_tensor's padding
      tensor = ndarray::view(h.over(next), block);
      next += padded;
    } else {
      tensor = allocate_tensor(in, h.shape, h.dtype, h.bytes);
    }
    auto* out = static_cast<std::byte*>(tensor.data());
    for (std::uint64_t done = 0; done < h.bytes; done += step) {
      const auto n = std::min(step, h.bytes - done);
      in.read_into(out + done, n, "tensor data");
      release_to(in.data().data() + in.position());
      if (progress) progress->report(in.position());
    }
    f.params.set(names[i], std::move(tensor));
  }
  in.set_context(context);
  f.module_name = in.read_string("module name");
  return f;
}

}  // namespace detail

/// What parse_module_blob keeps: everything, or the device modules only (a graph
/// executor factory is then checked and skipped without copying its parameters).
enum class blob_parts { all, device_modules };

namespace detail {

/// parse_module_blob; with `library`, over a blob in that loaded library's read-only
/// data, whose aligned parameters are read where they lie and whose pages are given back
/// as the others are copied out of them (factory_params::in_library).
/// `progress` hears of the bytes of the payload read (in steps while parameters are
/// copied), and of all of them at the end.
inline module_blob parse_module_blob(std::span<const std::byte> symbol, const std::string& source, blob_parts parts,
                                     const std::shared_ptr<const void>& library, const load_progress* progress = nullptr) {
  const std::span<const std::byte> payload = container_payload(symbol, source);
  const std::uint64_t length = payload.size();
  detail::byte_reader in(payload, source, errc::invalid_module);
  detail::progress_sink sink(progress, length);
  module_blob blob;
  auto count = in.read_count("module count", sizeof(std::uint64_t));
  for (std::uint64_t i = 0; i < count; ++i) {
    in.set_context({});
    std::string key = in.read_string("module type key");
    in.set_context("module " + std::to_string(i) + " (" + key + ")");
    if (key == "_lib") {
      if (blob.has_host_library) in.fail("a second \"_lib\"");
      blob.has_host_library = true;
    } else if (key == "_import_tree") {
      blob.import_tree_row_ptr = detail::read_u64_vector(in, "import tree row pointers");
      blob.import_tree_child_indices = detail::read_u64_vector(in, "import tree child indices");
    } else if (key == "GraphExecutorFactory" || key == "GraphRuntimeFactory") {
      if (blob.factory) in.fail("a second graph executor factory");
      blob.factory = detail::read_graph_factory(in, parts == blob_parts::device_modules ? detail::factory_params::skip
                                                    : library                                ? detail::factory_params::in_library
                                                                                             : detail::factory_params::copy,
                                                sink ? &sink : nullptr, library);
    } else {
      blob.device_modules.push_back(read_module_payload(key, in));
    }
    blob.type_keys.push_back(std::move(key));
  }
  in.set_context({});
  if (in.remaining() != 0) in.fail(std::to_string(in.remaining()) + " unexpected bytes after the last module");
  // The import tree is CSR over the modules in blob order; module 0 is the root.
  // "_import_tree" itself is not one of the modules it describes.
  const auto n_modules = static_cast<std::size_t>(std::count_if(blob.type_keys.begin(), blob.type_keys.end(),
                                                                [](const std::string& k) { return k != "_import_tree"; }));
  if (!blob.import_tree_row_ptr.empty()) check_import_tree(in, blob.import_tree_row_ptr, blob.import_tree_child_indices, n_modules);
  sink.report(length);
  return blob;
}

}  // namespace detail

/// Parses a __tvm_dev_mblob: the u64 payload length and the payload. `source` names
/// the blob in errors (errc::invalid_module), which give the byte offset.
inline module_blob parse_module_blob(std::span<const std::byte> symbol, const std::string& source = "module blob",
                                     blob_parts parts = blob_parts::all) {
  return detail::parse_module_blob(symbol, source, parts, nullptr);
}

/// One device module to write: its type key and its payload's bytes, as its wing
/// serializes it (cuda/module_payload.hpp's cuda_module_entry for "cuda").
struct module_blob_entry {
  std::string type_key;
  std::vector<std::byte> payload;
};

/// Writes a __tvm_dev_mblob (payload length included) holding `factory`, "_lib", the
/// given device modules and the import tree TVM writes (the factory imports the rest).
/// With options.align, every parameter's data starts at a multiple of it from the
/// symbol's start, moved there by padding tensors as save_param_dict moves them: a
/// library whose __tvm_dev_mblob is itself so aligned has them read where they lie.
inline std::vector<std::byte> write_module_blob(const graph_factory_blob& factory, const std::vector<module_blob_entry>& device = {},
                                            save_options options = {}) {
  if (options.align != 0 && (options.align & (options.align - 1)) != 0)
    throw error(errc::invalid_argument, "write_module_blob: align " + std::to_string(options.align) + " is not a power of two");
  constexpr std::string_view factory_key = "GraphExecutorFactory";
  // Alignment counts from the symbol's start: its length, the module count, the key,
  // the graph JSON and the two parameter counts precede the first name.
  const std::uint64_t head = 8 + 8 + (8 + factory_key.size()) + (8 + factory.graph_json.size()) + 8 + 8;
  const std::vector<std::int64_t> pad = detail::plan_padding(factory.params, options.align, head);
  const auto padded = static_cast<std::uint64_t>(std::count_if(pad.begin(), pad.end(), [](std::int64_t n) { return n >= 0; }));
  detail::byte_writer p;
  const std::uint64_t modules = 2 + device.size();
  p.write(std::uint64_t{modules + 1});
  p.write_string(factory_key);
  p.write_string(factory.graph_json);
  p.write(static_cast<std::uint64_t>(factory.params.size() + padded));
  p.write(static_cast<std::uint64_t>(factory.params.size() + padded));
  std::size_t i = 0;
  for (const auto& [name, a] : factory.params) {
    if (pad[i++] >= 0) p.write_string(std::string(param_pad_prefix) + std::to_string(i - 1));
    p.write_string(name);
  }
  i = 0;
  for (const auto& [name, a] : factory.params) {
    if (pad[i] >= 0) detail::write_pad_record(p, pad[i]);
    ++i;
    detail::write_tensor_record(p, name, a);
  }
  p.write_string(factory.module_name);
  p.write_string("_lib");
  for (const module_blob_entry& m : device) {
    p.write_string(m.type_key);
    p.append(m.payload.data(), m.payload.size());
  }
  p.write_string("_import_tree");
  // Module 0 (the factory) imports every other module; they import nothing.
  std::vector<std::uint64_t> row_ptr(modules + 1, modules - 1), child_indices;
  row_ptr.front() = 0;
  for (std::uint64_t i = 1; i < modules; ++i) child_indices.push_back(i);
  p.write_u64_vector(row_ptr);
  p.write_u64_vector(child_indices);
  return detail::container_symbol(std::move(p).take());
}

GEXEC_NAMESPACE_END
