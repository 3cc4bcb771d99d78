#pragma once
// The payload of a "cuda" module in a kernel library's __tvm_dev_mblob (TVM v0.19
// src/runtime/cuda/cuda_module.cc, SaveToBinary): format ("ptx", "cubin", "fatbin"),
// the function table (name -> FunctionInfo: name, argument types, launch-parameter tags)
// and the binary. Read through the packed C loader's payload seam (binding/payloads.hpp):
// a program that includes this header (<gexec/cuda.hpp> does) reads "cuda" modules.
// Written back for tests and tools.

#include "../config.hpp"

#include <dlpack/dlpack.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "../binding/payloads.hpp"
#include "../detail/byte_io.hpp"
#include "../packed_c/module_blob.hpp"

GEXEC_NAMESPACE_BEGIN

/// One kernel of a CUDA module: argument types and the launch-parameter tags that
/// say how the trailing launch arguments map to grid, block and shared memory.
struct cuda_function_info {
  std::string name;
  std::vector<DLDataType> arg_types;
  std::vector<std::string> launch_param_tags;
};

/// A "cuda" module as TVM serializes it: format ("ptx", "cubin", "fatbin"), kernels, binary.
struct cuda_module_blob {
  std::string format;
  std::vector<cuda_function_info> functions;
  std::string binary;
};

namespace detail {

inline cuda_module_blob read_cuda_module(byte_reader& in) {
  cuda_module_blob m;
  m.format = in.read_string("format");
  auto n = in.read_count("function table", 3 * sizeof(std::uint64_t));
  for (std::uint64_t i = 0; i < n; ++i) {
    auto key = in.read_string("function name");
    cuda_function_info f;
    f.name = in.read_string("function info name");
    auto n_args = in.read_count("argument types", sizeof(DLDataType));
    for (std::uint64_t a = 0; a < n_args; ++a) f.arg_types.push_back(in.read<DLDataType>("argument type"));
    f.launch_param_tags = read_string_vector(in, "launch parameter tags");
    if (f.name != key) in.fail("function table key \"" + key + "\" holds the info of \"" + f.name + "\"");
    m.functions.push_back(std::move(f));
  }
  m.binary = in.read_string("binary");
  return m;
}

/// The payload seam's reader for "cuda", registered by every program that includes this.
inline std::shared_ptr<const void> read_cuda_payload(byte_reader& in) { return std::make_shared<const cuda_module_blob>(read_cuda_module(in)); }
inline const bool cuda_payloads_read = register_module_payload("cuda", &read_cuda_payload);

}  // namespace detail

/// The "cuda" modules of a blob, in blob order.
inline std::vector<const cuda_module_blob*> cuda_modules_of(const module_blob& blob) {
  std::vector<const cuda_module_blob*> out;
  for (const module_payload& p : blob.device_modules)
    if (p.type_key == "cuda") out.push_back(&p.as<cuda_module_blob>());
  return out;
}

/// The payload of `m` as TVM writes it, for write_module_blob.
inline module_blob_entry cuda_module_entry(const cuda_module_blob& m) {
  detail::byte_writer p;
  p.write_string(m.format);
  p.write(static_cast<std::uint64_t>(m.functions.size()));
  for (const cuda_function_info& f : m.functions) {
    p.write_string(f.name);
    p.write_string(f.name);
    p.write(static_cast<std::uint64_t>(f.arg_types.size()));
    for (DLDataType t : f.arg_types) p.write(t);
    p.write(static_cast<std::uint64_t>(f.launch_param_tags.size()));
    for (const auto& tag : f.launch_param_tags) p.write_string(tag);
  }
  p.write_string(m.binary);
  return {"cuda", std::move(p).take()};
}

/// A __tvm_dev_mblob holding `factory`, "_lib" and the CUDA modules, as TVM's export of a
/// CUDA model lays it out.
inline std::vector<std::byte> write_module_blob(const graph_factory_blob& factory, const std::vector<cuda_module_blob>& cuda) {
  std::vector<module_blob_entry> entries;
  for (const cuda_module_blob& m : cuda) entries.push_back(cuda_module_entry(m));
  return write_module_blob(factory, entries);
}

GEXEC_NAMESPACE_END
