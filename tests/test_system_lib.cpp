// gexec::system_lib (<gexec/packed_c/system_lib.hpp>): kernels that register themselves
// as TVM's system-library objects do, from a static constructor through
// TVMBackendRegisterSystemLibSymbol, bound to a graph by func_name; the C functions
// such kernels call (workspace, environment functions, TVMFuncCall, the last error)
// served by gexec. The kernels here are written against the C ABI as TVM emits them.

#include <doctest/doctest.h>

#include <gexec/executor.hpp>
#include <gexec/function_registry.hpp>
#include <gexec/packed_c/system_lib.hpp>
#include <gexec/params.hpp>
#include <gexec/static_model.hpp>

#include <algorithm>
#include <memory>
#include <new>
#include <span>
#include <cstdint>
#include <string>
#include <vector>

#include "test_support.hpp"

namespace {

void* module_ctx = nullptr;  ///< what a system-library object's __tvm_module_ctx slot is

bool two_tensors(const TVMValue* args, const int* codes, int n) {
  return n == 2 && codes[0] == gexec::tc_dltensor && codes[1] == gexec::tc_dltensor && args[0].v_handle && args[1].v_handle;
}

/// y = 2x, through a workspace buffer, as TVM's kernels use TVMBackendAllocWorkspace.
extern "C" int system_lib_test_double(TVMValue* args, int* codes, int n, TVMValue*, int*, void*) {
  if (!two_tensors(args, codes, n)) {
    TVMAPISetLastError("system_lib_test_double: expected two tensors");
    return -1;
  }
  const auto* x = static_cast<const DLTensor*>(args[0].v_handle);
  auto* y = static_cast<DLTensor*>(args[1].v_handle);
  const std::int64_t count = x->shape[0];
  auto* tmp = static_cast<float*>(TVMBackendAllocWorkspace(kDLCPU, 0, static_cast<std::uint64_t>(count) * 4, kDLFloat, 32));
  if (!tmp) return -1;
  for (std::int64_t i = 0; i < count; ++i) tmp[i] = 2 * static_cast<const float*>(x->data)[i];
  std::copy_n(tmp, count, static_cast<float*>(y->data));
  return TVMBackendFreeWorkspace(kDLCPU, 0, tmp);
}

/// Calls the environment function "test.system_lib.negate" on its arguments, as TVM's
/// extern calls do: looked up with the module context, called through TVMFuncCall.
extern "C" int system_lib_test_call_env(TVMValue* args, int* codes, int n, TVMValue*, int*, void*) {
  void* f = nullptr;
  if (TVMBackendGetFuncFromEnv(module_ctx, "test.system_lib.negate", &f) != 0) return -1;
  TVMValue ret{};
  int ret_code = gexec::tc_null;
  return TVMFuncCall(f, args, codes, n, &ret, &ret_code);
}

/// y = x + w, w a weight.
extern "C" int system_lib_test_add(TVMValue* args, int* codes, int n, TVMValue*, int*, void*) {
  if (n != 3 || codes[0] != gexec::tc_dltensor || codes[1] != gexec::tc_dltensor || codes[2] != gexec::tc_dltensor) {
    TVMAPISetLastError("system_lib_test_add: expected three tensors");
    return -1;
  }
  const auto* x = static_cast<const DLTensor*>(args[0].v_handle);
  const auto* w = static_cast<const DLTensor*>(args[1].v_handle);
  auto* y = static_cast<DLTensor*>(args[2].v_handle);
  for (std::int64_t i = 0; i < x->shape[0]; ++i)
    static_cast<float*>(y->data)[i] = static_cast<const float*>(x->data)[i] + static_cast<const float*>(w->data)[i];
  return 0;
}

/// What a system-library object's constructor does before main().
struct registration {
  registration() {
    TVMBackendRegisterSystemLibSymbol("__tvm_module_ctx", &module_ctx);
    TVMBackendRegisterSystemLibSymbol("system_lib_test_double", reinterpret_cast<void*>(&system_lib_test_double));
    TVMBackendRegisterSystemLibSymbol("system_lib_test_call_env", reinterpret_cast<void*>(&system_lib_test_call_env));
    TVMBackendRegisterSystemLibSymbol("system_lib_test_add", reinterpret_cast<void*>(&system_lib_test_add));
  }
} registered;

gexec::graph one_op(const std::string& func_name) {
  gexec::graph_builder g;
  g.output(g.op("op", func_name, {g.input("x", {4})}, {{{4}}}));
  return g.build();
}

std::vector<float> run(gexec::graph_executor<>& ex, std::vector<float> x) {
  ex.set_input("x", gexec::ndarray::from_values<float>({4}, std::span<const float>(x)));
  ex.run();
  const gexec::ndarray& y = ex.get_output(0);
  const auto* p = static_cast<const float*>(y.data());
  return {p, p + 4};
}

}  // namespace

TEST_CASE("system_lib binds func_names to the kernels registered before main()") {
  gexec::system_lib kernels;
  const std::vector<std::string> names = kernels.function_names();
  CHECK(std::ranges::find(names, "system_lib_test_double") != names.end());
  CHECK(std::ranges::find(names, "system_lib_test_call_env") != names.end());
  CHECK(std::ranges::find(names, "__tvm_module_ctx") == names.end());  // a context slot, not a kernel
  CHECK(module_ctx != nullptr);                                         // gexec filled the slot
  CHECK(kernels.describe().find("3 registered by 1 system-library object") != std::string::npos);

  auto ex = gexec::create(one_op("system_lib_test_double"), kernels, {gexec::cpu()});
  CHECK(run(ex, {1, -2, 0.5f, 3}) == std::vector<float>{2, -4, 1, 6});
}

TEST_CASE("a func_name no kernel registered is refused when the executor is created, naming it") {
  try {
    auto ex = gexec::create(one_op("system_lib_test_absent"), gexec::system_lib{}, {gexec::cpu()});
    FAIL("created an executor over a kernel that is not linked in");
  } catch (const gexec::error& e) {
    CHECK(test::contains(e, "system_lib_test_absent"));
    CHECK(test::contains(e, "linked into the program"));
  }
}

TEST_CASE("a linked-in kernel finds environment functions through TVMBackendGetFuncFromEnv") {
  auto ex = gexec::create(one_op("system_lib_test_call_env"), gexec::system_lib{}, {gexec::cpu()});
  // Not registered yet: the kernel fails, with the name in the executor's error.
  try {
    run(ex, {1, 2, 3, 4});
    FAIL("ran a kernel whose environment function is not registered");
  } catch (const gexec::error& e) {
    CHECK(e.code() == gexec::errc::kernel_failed);
    CHECK(test::contains(e, "test.system_lib.negate"));
  }
  gexec::register_global_function("test.system_lib.negate", [](gexec::packed_args a) {
    const DLTensor& x = a.tensor(0);
    DLTensor& y = a.tensor(1);
    for (std::int64_t i = 0; i < x.shape[0]; ++i) static_cast<float*>(y.data)[i] = -static_cast<const float*>(x.data)[i];
  });
  CHECK(run(ex, {1, 2, -3, 0}) == std::vector<float>{-1, -2, 3, -0.0f});
}

TEST_CASE("create() from JSON over system_lib reads with the scanner alone: the graph as TVM writes it, else an error naming the byte") {
  const std::string json = gexec::to_json(one_op("system_lib_test_double"));
  auto ex = gexec::create(std::string_view(json), gexec::system_lib{}, {gexec::cpu()});
  CHECK(run(ex, {1, -2, 0.5f, 3}) == std::vector<float>{2, -4, 1, 6});
  const gexec::error cut = test::error_of([&] { (void)gexec::create(std::string_view(json).substr(0, json.size() / 2), gexec::system_lib{}); });
  CHECK(cut.code() == gexec::errc::invalid_json);
  CHECK(test::contains(cut, "byte "));
  // A float where the scanner reads integers: parse_graph's document reader would say what
  // is wrong with its JSON path; this reader names the byte and the text there.
  std::string odd = json;
  odd.replace(odd.find("\"arg_nodes\":[0]"), 15, "\"arg_nodes\":[0.0]");
  const gexec::error given_up = test::error_of([&] { (void)gexec::create(std::string_view(odd), gexec::system_lib{}); });
  CHECK(given_up.code() == gexec::errc::invalid_graph);
  CHECK(test::contains(given_up, "byte " + std::to_string(odd.find("0.0]") + 1)));  // where the scanner stopped
  CHECK(test::contains(given_up, "near \".0]"));
}

namespace {
/// `bytes` copied into 64-byte aligned memory that lives as long as the program, as
/// gexec_add_model embeds a blob in .rodata (.balign 64).
std::span<const std::byte> program_bytes(const std::vector<std::byte>& bytes) {
  auto* p = static_cast<std::byte*>(::operator new(bytes.size(), std::align_val_t{64}));
  std::copy(bytes.begin(), bytes.end(), p);
  static std::vector<std::unique_ptr<std::byte, void (*)(std::byte*)>> kept;  // freed at exit
  kept.emplace_back(p, [](std::byte* b) { ::operator delete(b, std::align_val_t{64}); });
  return {p, bytes.size()};
}
}  // namespace

TEST_CASE("static_model reads a static program's weights where the program holds them, when aligned there") {
  gexec::graph_builder b;
  b.output(b.op("add", "system_lib_test_add", {b.input("x", {4}), b.input("w", {4})}, {{{4}}}));
  const std::string json = gexec::to_json(b.build());
  gexec::param_dict params;
  params.set("w", gexec::ndarray::from_values<float>({4}, std::vector<float>{10, 20, 30, 40}));

  const std::span<const std::byte> aligned = program_bytes(gexec::save_param_dict(params, gexec::save_options{64}));
  const auto m = gexec::static_model(json, aligned);
  CHECK(m.weights().in_place == 1);
  CHECK(m.weights().copied == 0);
  const auto* w = static_cast<const std::byte*>(m.param("w").data());
  CHECK((w >= aligned.data() && w < aligned.data() + aligned.size()));  // the program's bytes themselves
  auto ex1 = m.instantiate(), ex2 = m.instantiate();
  CHECK(ex1.get_input("w").data() == m.param("w").data());
  CHECK(ex2.get_input("w").data() == m.param("w").data());
  CHECK(run(ex1, {1, 2, 3, 4}) == std::vector<float>{11, 22, 33, 44});
  CHECK(run(ex2, {-1, -2, -3, -4}) == std::vector<float>{9, 18, 27, 36});

  // As TVM writes it (no padding), the weight is misaligned there: copied once, and said.
  const std::span<const std::byte> tvm = program_bytes(gexec::save_param_dict(params));
  const auto c = gexec::static_model(json, tvm);
  CHECK(c.weights().copied == 1);
  CHECK(c.weights().in_place == 0);
  CHECK(c.weights().why_copied.find("\"w\"") != std::string::npos);
  w = static_cast<const std::byte*>(c.param("w").data());
  CHECK_FALSE((w >= tvm.data() && w < tvm.data() + tvm.size()));
  CHECK(c.param("w").is_aligned());
  auto ex3 = c.instantiate();
  CHECK(run(ex3, {1, 2, 3, 4}) == std::vector<float>{11, 22, 33, 44});

  // Malformed bytes are an error naming what is wrong, nothing kept.
  const std::span<const std::byte> cut = aligned.first(aligned.size() - 3);
  CHECK(test::error_of([&] { (void)gexec::static_model(json, cut); }).code() == gexec::errc::invalid_params);
}
