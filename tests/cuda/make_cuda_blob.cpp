// Writes a C source defining __tvm_dev_mblob with a "cuda" module holding the kernels
// of tests/cuda/kernels.cu, as TVM's export_library embeds a CUDA model's device code,
// so tests can build CUDA kernel libraries without TVM.
//
//   gexec_make_cuda_blob <format> <binary file> <out.c> [graph.json params.bin]
//
// <format> is the module's format string ("ptx", "fatbin" or "cubin") and <binary file>
// nvcc's output in that format; "spirv" writes a format gexec does not load, for the
// test of a library whose device module cannot be used. Without a graph the blob is that of a library exported
// without a factory: modules [_lib, cuda, _import_tree], "_lib" importing "cuda". With a
// graph and its parameters (save_param_dict format) it is the factory form:
// [GraphExecutorFactory, _lib, cuda, _import_tree]. The blob is parsed back before it is
// written; a blob that does not round-trip is an error.

#include <gexec/cuda/module_payload.hpp>
#include <gexec/packed_c/module_blob.hpp>

#include <cstdint>
#include <exception>
#include <fstream>
#include <iostream>
#include <iterator>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

// DLDataTypes of kernel parameters, as TVM records them in FunctionInfo.
constexpr DLDataType handle{kDLOpaqueHandle, 64, 1};
constexpr DLDataType i32{kDLInt, 32, 1};
constexpr DLDataType i64{kDLInt, 64, 1};
constexpr DLDataType u32{kDLUInt, 32, 1};
constexpr DLDataType f32{kDLFloat, 32, 1};
constexpr DLDataType f64{kDLFloat, 64, 1};

// Launch-parameter tags: a 1-D launch, and one with dynamic shared memory.
const std::vector<std::string> tags_1d{"blockIdx.x", "threadIdx.x"};
const std::vector<std::string> tags_1d_dyn{"blockIdx.x", "threadIdx.x", "tir.use_dyn_shared_memory"};

// Every kernel of kernels.cu with its parameter types and launch-parameter tags.
std::vector<gexec::cuda_function_info> kernel_table() {
  return {
      {"vadd_kernel0", {handle, handle, handle, i32}, tags_1d},
      {"scale_shift_kernel0", {handle, handle, f32, f64, i64, u32}, tags_1d},
      // Deliberately not x first: the host passes grid y, grid x, block y, block x.
      {"transpose_kernel0", {handle, handle, i32, i32}, {"blockIdx.y", "blockIdx.x", "threadIdx.y", "threadIdx.x"}},
      {"row_sum_kernel0", {handle, handle, i32}, tags_1d_dyn},
      {"big_shared_kernel0", {handle, handle, i32}, tags_1d_dyn},
      {"double_kernel0", {handle, handle, i32}, tags_1d},
      {"add_ws_kernel0", {handle, handle, handle, i32}, tags_1d},
      {"relu_kernel0", {handle, handle, i32}, tags_1d},
      {"fault_kernel0", {handle}, tags_1d},
  };
}

std::string read_file(const char* path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(std::string("cannot open ") + path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The "cuda" module payload: format, function table (key, then FunctionInfo), binary.
void write_cuda_module(gexec::detail::byte_writer& p, const gexec::cuda_module_blob& m) {
  p.write_string(m.format);
  p.write(static_cast<std::uint64_t>(m.functions.size()));
  for (const gexec::cuda_function_info& f : m.functions) {
    p.write_string(f.name);  // map key
    p.write_string(f.name);  // FunctionInfo
    p.write(static_cast<std::uint64_t>(f.arg_types.size()));
    for (DLDataType t : f.arg_types) p.write(t);
    p.write(static_cast<std::uint64_t>(f.launch_param_tags.size()));
    for (const std::string& tag : f.launch_param_tags) p.write_string(tag);
  }
  p.write_string(m.binary);
}

// A blob without a factory: [_lib, cuda, _import_tree]. The module count includes the
// "_import_tree" entry; the tree (CSR over _lib and cuda) says _lib imports cuda.
std::vector<std::byte> write_library_blob(const gexec::cuda_module_blob& cuda) {
  gexec::detail::byte_writer p;
  p.write(std::uint64_t{3});
  p.write_string("_lib");
  p.write_string("cuda");
  write_cuda_module(p, cuda);
  p.write_string("_import_tree");
  const std::uint64_t row_ptr[] = {0, 1, 1};
  p.write(static_cast<std::uint64_t>(std::size(row_ptr)));
  for (std::uint64_t r : row_ptr) p.write(r);
  p.write(std::uint64_t{1});  // child indices: {1}
  p.write(std::uint64_t{1});
  std::vector<std::byte> payload = std::move(p).take();
  gexec::detail::byte_writer out;
  out.write(static_cast<std::uint64_t>(payload.size()));
  out.append(payload.data(), payload.size());
  return std::move(out).take();
}

void expect(bool ok, const std::string& what) {
  if (!ok) throw std::runtime_error("the blob does not round-trip: " + what);
}

// Parses `blob` and checks that it holds exactly what was written.
void check_round_trip(std::span<const std::byte> blob, const gexec::cuda_module_blob& cuda,
                      const std::optional<gexec::graph_factory_blob>& factory) {
  const gexec::module_blob parsed = gexec::parse_module_blob(blob, "generated __tvm_dev_mblob");
  const std::vector<std::string> keys = factory ? std::vector<std::string>{"GraphExecutorFactory", "_lib", "cuda", "_import_tree"}
                                                : std::vector<std::string>{"_lib", "cuda", "_import_tree"};
  expect(parsed.type_keys == keys, "module type keys");
  expect(parsed.has_host_library, "_lib entry");
  const std::vector<std::uint64_t> rows = factory ? std::vector<std::uint64_t>{0, 2, 2, 2} : std::vector<std::uint64_t>{0, 1, 1};
  const std::vector<std::uint64_t> children = factory ? std::vector<std::uint64_t>{1, 2} : std::vector<std::uint64_t>{1};
  expect(parsed.import_tree_row_ptr == rows, "import tree row pointers");
  expect(parsed.import_tree_child_indices == children, "import tree child indices");

  expect(gexec::cuda_modules_of(parsed).size() == 1, "one cuda module");
  const gexec::cuda_module_blob& m = *gexec::cuda_modules_of(parsed).front();
  expect(m.format == cuda.format, "format");
  expect(m.binary == cuda.binary, "binary");
  expect(m.functions.size() == cuda.functions.size(), "function count");
  for (std::size_t i = 0; i < m.functions.size(); ++i) {
    const gexec::cuda_function_info& got = m.functions[i];
    const gexec::cuda_function_info& want = cuda.functions[i];
    expect(got.name == want.name, "function " + want.name);
    expect(got.launch_param_tags == want.launch_param_tags, "launch parameter tags of " + want.name);
    expect(got.arg_types.size() == want.arg_types.size(), "argument count of " + want.name);
    for (std::size_t a = 0; a < got.arg_types.size(); ++a) {
      const DLDataType g = got.arg_types[a];
      const DLDataType w = want.arg_types[a];
      expect(g.code == w.code && g.bits == w.bits && g.lanes == w.lanes, "argument types of " + want.name);
    }
  }

  expect(parsed.factory.has_value() == factory.has_value(), "factory presence");
  if (!factory) return;
  expect(parsed.factory->graph_json == factory->graph_json, "graph JSON");
  expect(parsed.factory->module_name == factory->module_name, "module name");
  // Names, order, shapes, dtypes and bytes, compared in their serialized form.
  expect(gexec::save_param_dict(parsed.factory->params) == gexec::save_param_dict(factory->params), "parameters");
}

void write_c_source(const char* path, std::span<const std::byte> blob) {
  std::ofstream out(path);
  if (!out) throw std::runtime_error(std::string("cannot create ") + path);
  out << "__attribute__((visibility(\"default\"))) const unsigned char __tvm_dev_mblob[" << blob.size() << "] = {";
  for (std::size_t i = 0; i < blob.size(); ++i) out << (i % 16 ? "" : "\n ") << static_cast<unsigned>(blob[i]) << ',';
  out << "\n};\n";
  if (!out.flush()) throw std::runtime_error(std::string("cannot write ") + path);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4 && argc != 6) {
    std::cerr << "usage: gexec_make_cuda_blob <ptx|fatbin|cubin> <binary file> <out.c> [graph.json params.bin]\n";
    return 2;
  }
  try {
    gexec::cuda_module_blob cuda;
    cuda.format = argv[1];
    if (cuda.format != "ptx" && cuda.format != "fatbin" && cuda.format != "cubin" && cuda.format != "spirv")
      throw std::runtime_error("unknown format \"" + cuda.format + "\" (ptx, fatbin, cubin; spirv for a bad module)");
    cuda.functions = kernel_table();
    cuda.binary = read_file(argv[2]);
    if (cuda.binary.empty()) throw std::runtime_error(std::string(argv[2]) + " is empty");
    // Stored as TVM stores it: the bytes alone. The loader terminates PTX text itself.

    std::optional<gexec::graph_factory_blob> factory;
    std::vector<std::byte> blob;
    if (argc == 6) {
      factory.emplace();
      factory->graph_json = read_file(argv[4]);
      factory->params = gexec::load_param_dict_file(argv[5]);
      factory->module_name = "default";
      blob = gexec::write_module_blob(*factory, {cuda});
    } else {
      blob = write_library_blob(cuda);
    }
    check_round_trip(blob, cuda, factory);
    write_c_source(argv[3], blob);
  } catch (const std::exception& e) {
    std::cerr << "gexec_make_cuda_blob: " << e.what() << '\n';
    return 1;
  }
  return 0;
}
