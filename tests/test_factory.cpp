#include <gexec/cuda.hpp>
#include <gexec/load.hpp>
#include <gexec/graph.hpp>

#include <doctest/doctest.h>

#include "byte_builder.hpp"
#include "test_support.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace {

const std::string kGraph = [] {
  gexec::graph_builder b;
  auto x = b.input("x", {2});
  auto w = b.input("w", {2});
  b.output(b.op("add", "test_add", {x, w}, {{{2}}}));
  return gexec::to_json(b.build());
}();

// A factory payload as TVM's GraphExecutorFactory::SaveToBinary writes it: graph JSON,
// tensor count, then the names (as a vector), the tensors, the module name.
bytes factory_payload(const std::string& module_name = "default") {
  bytes p;
  p.str(kGraph).u64(1).u64(1).str("w");
  const float w[] = {10, 20};
  p.u64(tensor_magic_bytes).u64(0).i32(kDLCPU).i32(0).i32(1).u8(kDLFloat).u8(32).u16(1).i64(2).i64(8).raw(w, 8);
  p.str(module_name);
  return p;
}

// [GraphExecutorFactory, _lib, _import_tree] as export_library writes a CPU model.
bytes tvm_blob() {
  bytes payload;
  payload.u64(3).str("GraphExecutorFactory");
  auto f = factory_payload();
  payload.raw(f.b.data(), f.b.size());
  payload.str("_lib").str("_import_tree").u64(3).u64(0).u64(1).u64(1).u64(1).u64(1);
  bytes blob;
  blob.u64(payload.b.size()).raw(payload.b.data(), payload.b.size());
  return blob;
}

}  // namespace

TEST_CASE("a blob laid out as export_library writes it parses") {
  auto blob = gexec::parse_module_blob(tvm_blob().b);
  CHECK(blob.type_keys == std::vector<std::string>{"GraphExecutorFactory", "_lib", "_import_tree"});
  CHECK(blob.has_host_library);
  REQUIRE(blob.factory);
  CHECK(blob.factory->graph_json == kGraph);
  CHECK(blob.factory->module_name == "default");
  auto w = blob.factory->params.at("w").values<float>();
  CHECK(std::vector<float>(w.begin(), w.end()) == std::vector<float>{10, 20});
  CHECK(blob.import_tree_row_ptr == std::vector<std::uint64_t>{0, 1, 1});
  CHECK(blob.import_tree_child_indices == std::vector<std::uint64_t>{1});
}

TEST_CASE("write_module_blob round-trips the factory and CUDA modules") {
  gexec::graph_factory_blob f;
  f.graph_json = kGraph;
  f.params.set("w", gexec::ndarray::from_values<float>({2}, {10, 20}));
  f.module_name = "default";
  gexec::cuda_module_blob cuda;
  cuda.format = "ptx";
  cuda.functions.push_back({"k0", {gexec::dtypes::float32, gexec::dtypes::int32}, {"blockIdx.x", "threadIdx.x"}});
  cuda.functions.push_back({"k1", {}, {"blockIdx.x", "tir.use_dyn_shared_memory"}});
  cuda.binary = std::string("\x00\x01ptx", 5);
  auto parsed = gexec::parse_module_blob(gexec::write_module_blob(f, {cuda}));
  CHECK(parsed.type_keys == std::vector<std::string>{"GraphExecutorFactory", "_lib", "cuda", "_import_tree"});
  REQUIRE(parsed.factory);
  CHECK(parsed.factory->graph_json == kGraph);
  CHECK(parsed.factory->params.at("w").values<float>()[1] == 20.0f);
  REQUIRE(gexec::cuda_modules_of(parsed).size() == 1);
  CHECK(parsed.device_modules.size() == 1);
  const auto& c = *gexec::cuda_modules_of(parsed)[0];
  CHECK(c.format == "ptx");
  CHECK(c.binary == cuda.binary);
  REQUIRE(c.functions.size() == 2);
  CHECK(c.functions[0].name == "k0");
  CHECK(gexec::same_dtype(c.functions[0].arg_types[1], gexec::dtypes::int32));
  CHECK(c.functions[1].launch_param_tags == std::vector<std::string>{"blockIdx.x", "tir.use_dyn_shared_memory"});
  CHECK(parsed.import_tree_row_ptr == std::vector<std::uint64_t>{0, 2, 2, 2});
  // Without CUDA modules, the writer produces TVM's bytes.
  CHECK(gexec::write_module_blob(f) == tvm_blob().b);
}

using test::contains;
using test::error_of;

namespace {
// A payload of a made-up device type: a u64 count and that many bytes.
struct test_payload {
  std::string bytes;
};
std::shared_ptr<const void> read_test_payload(gexec::detail::byte_reader& in) {
  auto p = std::make_shared<test_payload>();
  p->bytes = in.read_string("test payload");
  return p;
}
gexec::module_blob_entry test_entry(const std::string& bytes) {
  gexec::detail::byte_writer w;
  w.write_string(bytes);
  return {"test.device", std::move(w).take()};
}
}  // namespace

TEST_CASE("device modules go to the reader registered for their type key; an unknown key names the header that reads it") {
  gexec::graph_factory_blob f;
  f.graph_json = kGraph;
  f.module_name = "default";
  // Before any reader is registered for it, the key is refused where it stands.
  auto e = error_of([&] { (void)gexec::parse_module_blob(gexec::write_module_blob(f, {test_entry("abc")})); });
  CHECK(e.code() == gexec::errc::invalid_module);
  CHECK(contains(e, "module 2 (test.device)"));
  CHECK(contains(e, "module type \"test.device\": no gexec header reads it"));
  gexec::module_blob_entry relax{"relax.VMExecutable", {}};
  CHECK(contains(error_of([&] { (void)gexec::parse_module_blob(gexec::write_module_blob(f, {relax})); }), "a Relax VM executable"));
  // Registered once (a second registration of the key is ignored), read in blob order,
  // beside the CUDA wing's modules.
  CHECK(gexec::register_module_payload("test.device", &read_test_payload));
  CHECK_FALSE(gexec::register_module_payload("test.device", &read_test_payload));
  gexec::cuda_module_blob cuda;
  cuda.format = "ptx";
  auto entries = std::vector<gexec::module_blob_entry>{test_entry("first"), gexec::cuda_module_entry(cuda), test_entry("second")};
  const auto parsed = gexec::parse_module_blob(gexec::write_module_blob(f, entries));
  CHECK(parsed.type_keys == std::vector<std::string>{"GraphExecutorFactory", "_lib", "test.device", "cuda", "test.device", "_import_tree"});
  REQUIRE(parsed.device_modules.size() == 3);
  CHECK(parsed.device_modules[0].as<test_payload>().bytes == "first");
  CHECK(parsed.device_modules[2].as<test_payload>().bytes == "second");
  CHECK(gexec::cuda_modules_of(parsed).size() == 1);
  CHECK(gexec::cuda_modules_of(parsed)[0]->format == "ptx");
}

TEST_CASE("a blob cut at any byte is rejected") {
  auto blob = tvm_blob().b;
  for (std::size_t n = 0; n < blob.size(); ++n) {
    CAPTURE(n);
    try {
      (void)gexec::parse_module_blob(std::span<const std::byte>(blob.data(), n));
      FAIL("accepted a truncated blob");
    } catch (const gexec::error& e) {
      CHECK(e.code() == gexec::errc::invalid_module);
    }
  }
}

namespace {

bytes with_payload(const std::function<void(bytes&)>& body) {
  bytes payload;
  body(payload);
  bytes blob;
  return blob.u64(payload.b.size()).raw(payload.b.data(), payload.b.size()), blob;
}

}  // namespace

TEST_CASE("malformed module blobs are errors naming the module and the field") {
  struct row {
    const char* what;
    std::function<bytes()> make;
    gexec::errc code;
    const char* message;
  };
  const row rows[] = {
      {"payload longer than the symbol", [] { bytes b; return b.u64(1000).u64(0), b; }, gexec::errc::invalid_module, "payload length 1000 exceeds the 8 bytes"},
      {"a BYOC module", [] { return with_payload([](bytes& p) { p.u64(2).str("tensorrt").str("{}"); }); }, gexec::errc::invalid_module, "module 0 (tensorrt): module type \"tensorrt\": no gexec header reads it"},
      {"module count beyond the payload", [] { return with_payload([](bytes& p) { p.u64(1000); }); }, gexec::errc::invalid_module, "module count count 1000 exceeds"},
      {"count and names disagree", [] { return with_payload([](bytes& p) { p.u64(1).str("GraphExecutorFactory").str("{}").u64(2).u64(1).str("w"); }); }, gexec::errc::invalid_module, "parameter count 2 differs from the 1 names"},
      {"two factories", [] {
         return with_payload([](bytes& p) {
           auto f = factory_payload();
           p.u64(2).str("GraphExecutorFactory").raw(f.b.data(), f.b.size()).str("GraphRuntimeFactory").raw(f.b.data(), f.b.size());
         });
       }, gexec::errc::invalid_module, "module 1 (GraphRuntimeFactory): a second graph executor factory"},
      {"two host libraries", [] { return with_payload([](bytes& p) { p.u64(2).str("_lib").str("_lib"); }); }, gexec::errc::invalid_module, "module 1 (_lib): a second \"_lib\""},
      {"import tree for the wrong module count", [] { return with_payload([](bytes& p) { p.u64(2).str("_lib").str("_import_tree").u64(3).u64(0).u64(0).u64(0).u64(0); }); }, gexec::errc::invalid_module, "import tree row pointers do not describe 1 modules"},
      {"import tree child out of range", [] { return with_payload([](bytes& p) { p.u64(2).str("_lib").str("_import_tree").u64(2).u64(0).u64(1).u64(1).u64(5); }); }, gexec::errc::invalid_module, "import tree child 5 is not one of the 1 modules"},
      {"trailing bytes", [] { return with_payload([](bytes& p) { p.u64(1).str("_lib").u8(0); }); }, gexec::errc::invalid_module, "1 unexpected bytes after the last module"},
      {"cuda table key and info disagree", [] { return with_payload([](bytes& p) { p.u64(1).str("cuda").str("ptx").u64(1).str("a").str("b").u64(0).u64(0).str(""); }); }, gexec::errc::invalid_module, "module 0 (cuda): function table key \"a\" holds the info of \"b\""},
      {"a broken parameter inside the factory", [] {
         return with_payload([](bytes& p) { p.u64(1).str("GraphExecutorFactory").str("{}").u64(1).u64(1).str("w").u64(0xBAD); });
       }, gexec::errc::invalid_module, "GraphExecutorFactory: parameter 0 (\"w\"): bad tensor magic"},
  };
  for (const row& r : rows) {
    const std::string what = r.what;
    CAPTURE(what);
    try {
      (void)gexec::parse_module_blob(r.make().b, "blob");
      FAIL("accepted a malformed blob");
    } catch (const gexec::error& e) {
      CHECK(e.code() == r.code);
      const std::string message = e.what();
      CHECK_MESSAGE(message.find(r.message) != std::string::npos, message);
    }
  }
}

TEST_CASE("load_factory runs a single-file library like lib[\"default\"](dev)") {
  gexec::factory f = gexec::load_factory(GEXEC_TEST_FACTORY);
  CHECK(f.module_name() == "default");
  CHECK(f.params().size() == 2);
  CHECK(f.device_modules().empty());
  CHECK(f.graph().nodes.size() == 7);
  auto ex = f.create();
  ex.set_input("x", gexec::ndarray::from_values<float>({1, 4}, {0.5f, -1, 2, 0.25f}));
  ex.run();
  // The bundled MLP's answer for this input, computed with numpy from the same weights.
  auto out = ex.get_output(0).values<float>();
  CHECK(out[0] == doctest::Approx(0.4007862).epsilon(1e-6));
  CHECK(out[1] == doctest::Approx(0.33645204).epsilon(1e-6));
  CHECK(out[2] == doctest::Approx(0.26276177).epsilon(1e-6));
  CHECK(ex.get_input_info().size() == 1);  // the embedded parameters are loaded
  // Each create() is an executor of its own.
  auto other = f.create();
  other.set_input("x", gexec::ndarray::from_values<float>({1, 4}, {0, 0, 0, 0}));
  other.run();
  CHECK(ex.get_output(0).values<float>()[0] == doctest::Approx(0.4007862).epsilon(1e-6));
}

TEST_CASE("a single-file library's parameters are copied into one block: 64-byte aligned, back to back, padding zeroed") {
  // One block, freed whole when the last model lets it go (detail::allocate_long_lived):
  // never the heap's per-thread arenas, which keep what is freed at their top.
  gexec::factory f = gexec::load_factory(GEXEC_TEST_FACTORY);
  std::vector<const gexec::ndarray*> params;
  for (const auto& item : f.params()) params.push_back(&item.second);
  REQUIRE(params.size() == 2);
  std::sort(params.begin(), params.end(), [](auto* a, auto* b) { return a->data() < b->data(); });
  for (std::size_t i = 0; i < params.size(); ++i) {
    const auto* p = static_cast<const std::byte*>(params[i]->data());
    const std::uint64_t bytes = params[i]->byte_size();
    const std::uint64_t padded = gexec::detail::align_up(bytes, gexec::detail::host_alignment);
    CHECK(reinterpret_cast<std::uintptr_t>(p) % gexec::detail::host_alignment == 0);
    for (std::uint64_t b = bytes; b < padded; ++b) CHECK(p[b] == std::byte{0});
    if (i + 1 < params.size()) CHECK(static_cast<const std::byte*>(params[i + 1]->data()) == p + padded);
  }
}

TEST_CASE("load_factory on a library without an embedded graph says so") {
  try {
    (void)gexec::load_factory(GEXEC_TEST_KERNELS);
    FAIL("no error");
  } catch (const gexec::error& e) {
    CHECK(e.code() == gexec::errc::invalid_module);
    CHECK(std::string(e.what()).find("has no __tvm_dev_mblob") != std::string::npos);
  }
}
