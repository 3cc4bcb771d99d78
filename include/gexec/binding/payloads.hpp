#pragma once
// Module payloads by type key, as TVM's runtime.module.loadbinary_<type_key>: the
// container readers (__tvm_dev_mblob in packed_c/module_blob.hpp, __tvm_ffi__library_bin
// in tvm_ffi/library_bin.hpp) know only their own framing, and hand each device module's
// (type key, bytes) to the reader a wing registered for that key. The CUDA wing
// registers "cuda" (<gexec/cuda.hpp>); a key no wing registered is refused, naming the
// header that would read it where gexec has one.
//
//   // in a wing's header, once per program:
//   inline const bool my_payloads = gexec::register_module_payload("vulkan", &read_vulkan_module);
//
// A reader consumes its payload from the byte_reader (TVM's __tvm_dev_mblob does not
// say where a payload ends: the reader of its key does) and returns what it made of it;
// the wing that launches the kernels reads it back with module_payload::as<T>().

#include "../config.hpp"

#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "../detail/byte_io.hpp"
#include "../detail/json_path.hpp"
#include "../error.hpp"

GEXEC_NAMESPACE_BEGIN

/// One device module of a kernel library: its type key and what its reader made of it.
struct module_payload {
  std::string type_key;
  std::shared_ptr<const void> value;

  /// The reader's result, as the wing that registered `type_key` knows its type.
  template <class T>
  [[nodiscard]] const T& as() const noexcept {
    return *static_cast<const T*>(value.get());
  }
};

/// Reads one payload of its type key from `in` (as far as it goes); throws the reader's
/// error (errc::invalid_module, with the offset) for a malformed one.
using module_payload_reader = std::shared_ptr<const void> (*)(detail::byte_reader& in);

namespace detail {

struct payload_reader_entry {
  std::string type_key;
  module_payload_reader read;
};

struct payload_readers {
  std::mutex mu;
  std::vector<payload_reader_entry> entries;
};
inline payload_readers& module_payload_readers() {
  static payload_readers table;
  return table;
}

/// Where gexec reads a type key it knows, for the message when a program lacks it.
inline std::string payload_wing_hint(std::string_view type_key) {
  if (type_key == "cuda") return "<gexec/cuda.hpp> (CMake target gexec::cuda) reads it: include it in the program";
  if (type_key == "relax.VMExecutable")
    return "a Relax VM executable (TVM >= 0.20): <gexec/relax.hpp> runs it (gexec::relax::load_executable), not gexec::model";
  return "no gexec header reads it (gexec reads graph executor factories, host modules and the device modules of the wings "
         "a program includes: cuda)";
}

/// Type keys of modules that hold a program rather than kernels: a library carrying one
/// loads as a kernel library, and the program is read by its own loader.
inline bool is_program_module(std::string_view type_key) noexcept { return type_key == "relax.VMExecutable"; }

}  // namespace detail

/// Registers `read` for payloads of `type_key` (the first registration of a key wins);
/// true when this one was taken.
inline bool register_module_payload(std::string_view type_key, module_payload_reader read) {
  auto& t = detail::module_payload_readers();
  std::lock_guard g(t.mu);
  for (const auto& e : t.entries)
    if (e.type_key == type_key) return false;
  t.entries.push_back({std::string(type_key), read});
  return true;
}

/// The reader registered for `type_key`, or null.
inline module_payload_reader find_module_payload_reader(std::string_view type_key) {
  auto& t = detail::module_payload_readers();
  std::lock_guard g(t.mu);
  for (const auto& e : t.entries)
    if (e.type_key == type_key) return e.read;
  return nullptr;
}

/// Reads the payload of `type_key` from `in` with its registered reader; an unknown key
/// fails `in` (errc::invalid_module, the offset named) saying which header reads it.
inline module_payload read_module_payload(std::string type_key, detail::byte_reader& in) {
  const module_payload_reader read = find_module_payload_reader(type_key);
  if (!read) in.fail("module type \"" + detail::printable(type_key) + "\": " + detail::payload_wing_hint(type_key));
  std::shared_ptr<const void> value = read(in);
  return {std::move(type_key), std::move(value)};
}

GEXEC_NAMESPACE_END
