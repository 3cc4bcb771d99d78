// Untrusted plans and API misuse at the executor: every case is a clear gexec::error
// naming what and where, nothing reads memory no one wrote, and the executor still
// works afterwards.

#include "test_support.hpp"

#include <gexec/binding/backend_hooks.hpp>
#include <gexec/executor.hpp>

#include <cstring>
#include <stdexcept>
#include <vector>

using namespace test;

namespace {

constexpr std::int64_t n = 8;

float* data_of(const DLTensor& t) { return static_cast<float*>(t.data); }

gexec::registry kernels() {
  gexec::registry r;
  r.add("add1", [](gexec::packed_args a) {
    for (std::int64_t i = 0; i < n; ++i) data_of(a.tensor(1))[i] = data_of(a.tensor(0))[i] + 1;
  });
  r.add("add", [](gexec::packed_args a) {
    for (std::int64_t i = 0; i < n; ++i) data_of(a.tensor(2))[i] = data_of(a.tensor(0))[i] + data_of(a.tensor(1))[i];
  });
  return r;
}

/// x -> add1 -> y, and y + w -> z (w a parameter).
gexec::validated_graph small_graph() {
  gexec::graph_builder b;
  auto x = b.input("x", {n});
  auto w = b.input("w", {n});
  auto y = b.op("y", "add1", {x}, {{{n}}});
  b.output(b.op("z", "add", {y, w}, {{{n}}}));
  return b.build();
}

std::vector<float> filled(float v) { return std::vector<float>(n, v); }

}  // namespace

TEST_CASE("run() with an input no one set is an error naming it, unless zeros are asked for") {
  gexec::basic_model m(small_graph(), kernels());
  auto ex = m.instantiate();
  auto e = error_of([&] { ex.run(); });
  CHECK(e.code() == gexec::errc::invalid_argument);
  CHECK(contains(e, "run: inputs \"x\", \"w\" were never given a value"));
  // load_params in which no name matches sets nothing.
  gexec::param_dict stranger;
  stranger.set("nobody", tensor({n}, filled(1)));
  ex.load_params(stranger);
  CHECK(contains(error_of([&] { ex.run(); }), "run: inputs \"x\", \"w\" were never given a value"));
  gexec::param_dict params;
  params.set("w", tensor({n}, filled(10)));
  ex.load_params(params);
  CHECK(contains(error_of([&] { ex.run(); }), "run: input \"x\" was never given a value"));
  ex.set_input("x", tensor({n}, filled(1)));
  ex.run();
  CHECK(values_of(ex.get_output(0)) == filled(12));

  // Opting out: unset inputs are zeros, and so is every byte of storage before a run.
  gexec::model_options zeros;
  zeros.zero_unset_inputs = true;
  gexec::basic_model z(small_graph(), kernels(), zeros);
  auto zx = z.instantiate();
  CHECK(values_of(zx.get_output(0)) == filled(0));  // activation storage starts zeroed
  zx.run();
  CHECK(values_of(zx.get_output(0)) == filled(1));
}

TEST_CASE("an input node missing from arg_nodes is an error at creation") {
  gexec::graph g = *small_graph();
  g.arg_nodes.erase(g.arg_nodes.begin() + 1);  // "w" stays a null node nothing writes
  auto e = error_of([&] { (void)gexec::basic_model(gexec::validate(g), kernels()); });
  CHECK(e.code() == gexec::errc::invalid_graph);
  CHECK(contains(e, "node \"w\" (nodes[1]): is an input (op \"null\") missing from arg_nodes"));
}

TEST_CASE("a kernel writing over its own graph input is an error at creation") {
  gexec::graph_builder b;
  auto x = b.input("x", {n});
  b.output(b.op("y", "add1", {x}, {{{n}, gexec::dtypes::float32, 0, 0}}));  // y on x's storage id
  auto e = error_of([&] { (void)gexec::basic_model(b.build(), kernels()); });
  CHECK(e.code() == gexec::errc::invalid_graph);
  CHECK(contains(e, "entry 0 (storage id 0) is a graph input in activation storage"));
}

namespace {
/// A packed C function that lets a C++ exception out, as a careless C++ kernel does.
int throwing_kernel(TVMValue*, int*, int, TVMValue*, int*, void*) { throw std::runtime_error("out of patience"); }
}  // namespace

TEST_CASE("a kernel that throws through the C ABI is a kernel_failed error naming the node") {
  gexec::registry r = kernels();
  r.add("throws", gexec::packed_function{&throwing_kernel, nullptr});
  gexec::graph_builder b;
  auto x = b.input("x", {n});
  auto y = b.op("y", "add1", {x}, {{{n}}});
  b.output(b.op("t", "throws", {y}, {{{n}}}));
  b.output(y);
  gexec::basic_model m(b.build(), r);
  auto ex = m.instantiate();
  ex.set_input("x", tensor({n}, filled(1)));
  auto e = error_of([&] { ex.run(); });
  CHECK(e.code() == gexec::errc::kernel_failed);
  CHECK(contains(e, "node \"t\" (nodes[2], throws) threw: out of patience"));
  // The executor is not left busy, and runs again.
  CHECK(error_of([&] { ex.run(); }).code() == gexec::errc::kernel_failed);
  CHECK(values_of(ex.get_output(1)) == filled(2));
}

TEST_CASE("a moved-from executor refuses every call") {
  gexec::basic_model m(small_graph(), kernels());
  auto ex = m.instantiate();
  auto other = std::move(ex);
  auto e = error_of([&] { ex.run(); });  // NOLINT(bugprone-use-after-move): the point of the test
  CHECK(e.code() == gexec::errc::invalid_argument);
  CHECK(contains(e, "the executor was moved from"));
  CHECK(contains(error_of([&] { ex.set_input("x", tensor({n}, filled(1))); }), "moved from"));
  other.set_input("x", tensor({n}, filled(1)));
  other.set_input("w", tensor({n}, filled(1)));
  other.run();
  CHECK(values_of(other.get_output(0)) == filled(3));
}

TEST_CASE("one buffer as a zero-copy input and a zero-copy output is refused") {
  gexec::basic_model m(small_graph(), kernels());
  auto ex = m.instantiate();
  auto shared = tensor({n}, filled(1));
  ex.set_input_zero_copy("x", shared);
  auto e = error_of([&] { ex.set_output_zero_copy(0, shared); });
  CHECK(e.code() == gexec::errc::invalid_argument);
  CHECK(contains(e, "set_output_zero_copy \"z:0\": the tensor overlaps the one bound zero-copy to an input"));
  // The other way round too, and a view into the same buffer counts.
  auto out = tensor({n}, filled(0));
  ex.set_output_zero_copy(0, out);
  e = error_of([&] { ex.set_input_zero_copy("w", out); });
  CHECK(contains(e, "set_input_zero_copy \"w\": the tensor overlaps the one bound zero-copy to an output"));
  ex.set_input("w", tensor({n}, filled(5)));
  ex.run();
  CHECK(values_of(out) == filled(7));
  CHECK(values_of(shared) == filled(1));
}

TEST_CASE("workspace a kernel never frees is given back after each run, and capped") {
  gexec::registry r = kernels();
  r.add("leaky", [](gexec::packed_args a) {
    void* p = gexec::detail::backend_alloc_workspace(kDLCPU, 0, 1 << 20, kDLFloat, 32);
    if (!p) throw std::runtime_error(gexec::detail::take_last_error());
    std::memcpy(a.tensor(1).data, a.tensor(0).data, n * sizeof(float));
  });
  gexec::graph_builder b;
  b.output(b.op("l", "leaky", {b.input("x", {n})}, {{{n}}}));
  const gexec::validated_graph g = b.build();
  {
    gexec::basic_model m(g, r);
    auto ex = m.instantiate();
    ex.set_input("x", tensor({n}, filled(4)));
    for (int i = 0; i < 50; ++i) {
      ex.run();
      REQUIRE(gexec::detail::workspace_arena::this_thread().in_use() == 0);
    }
    CHECK(values_of(ex.get_output(0)) == filled(4));
  }
  gexec::model_options small;
  small.max_workspace_bytes = 1 << 19;
  gexec::basic_model capped(g, r, small);
  auto ex = capped.instantiate();
  ex.set_input("x", tensor({n}, filled(4)));
  auto e = error_of([&] { ex.run(); });
  CHECK(e.code() == gexec::errc::kernel_failed);
  CHECK(contains(e, "1048576 bytes of host workspace would exceed the limit of 524288 bytes"));
}

TEST_CASE("storage over the executor's limit is refused before anything is allocated") {
  gexec::graph_builder b;
  auto x = b.input("x", {n});
  b.output(b.op("big", "add1", {x}, {{{std::int64_t{1} << 38}}}));  // 1 TiB of float32
  const gexec::validated_graph g = b.build();
  for (bool pooled : {true, false}) {
    CAPTURE(pooled);
    auto e = pooled ? error_of([&] { (void)gexec::basic_model(g, kernels()).instantiate(); })
                    : error_of([&] {
                        (void)gexec::basic_model<gexec::backends<gexec::cpu_backend>, gexec::buffer_allocator, gexec::registry>(g, kernels())
                            .instantiate();
                      });
    CHECK(e.code() == gexec::errc::out_of_memory);
    CHECK(contains(e, "bytes would exceed the limit of"));
  }
  gexec::model_options tight;
  tight.max_storage_bytes = 100;
  auto e = error_of([&] { (void)gexec::basic_model(small_graph(), kernels(), tight).instantiate(); });
  CHECK(contains(e, "executor storage: 128 bytes would exceed the limit of 100 bytes (model_options::max_storage_bytes)"));
}

TEST_CASE("executors sharing parameters read the owner's bytes, later load_params included") {
  gexec::basic_model m(small_graph(), kernels());
  auto owner = m.instantiate(), sharer = m.instantiate();
  gexec::param_dict params;
  params.set("w", tensor({n}, filled(1)));
  owner.load_params(params);
  sharer.share_params(owner, gexec::save_param_dict(params));
  sharer.set_input("x", tensor({n}, filled(0)));
  sharer.run();
  CHECK(values_of(sharer.get_output(0)) == filled(2));
  params.set("w", tensor({n}, filled(100)));
  owner.load_params(params);  // documented: the sharer reads the same bytes
  sharer.run();
  CHECK(values_of(sharer.get_output(0)) == filled(101));
}
