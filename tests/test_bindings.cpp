// The zero-copy bindings alone (executor/bindings.hpp), on a model's plan and an
// instance_plan made here, with no executor: what each alias group is bound to, the
// refusal of an input and an output sharing memory, rebinding an output, outputs that
// are copied instead, and giving a group back to the executor's own memory.

#include "test_support.hpp"

#include <gexec/executor.hpp>
#include <gexec/executor/bindings.hpp>

#include <doctest/doctest.h>

#include <string>
#include <vector>

using namespace test;

namespace {

constexpr std::int64_t n = 8;  // floats: every tensor below is 32 bytes

gexec::registry kernels() {
  gexec::registry r;
  r.add("add1", [](gexec::packed_args) {});
  r.add("add", [](gexec::packed_args) {});
  return r;
}

/// Entries: x 0, w 1, y 2, z 3, r 4 (a __nop of z, so in z's alias group).
/// Outputs: 0 z, 1 r, 2 x.
gexec::validated_graph small_graph() {
  gexec::graph_builder b;
  auto x = b.input("x", {n});
  auto w = b.input("w", {n});
  auto y = b.op("y", "add1", {x}, {{{n}}});
  auto z = b.op("z", "add", {y, w}, {{{n}}});
  auto r = b.nop("r", z, {2, 4});
  b.output(z);
  b.output(r);
  b.output(x);
  return b.build();
}

std::vector<float> filled(float v) { return std::vector<float>(n, v); }

using bound_to = gexec::zero_copy_bindings::bound_to;
constexpr std::uint32_t x = 0, w = 1, z = 3, r = 4;

/// The model's plan, and the executor's parts the bindings work on.
struct fixture {
  gexec::basic_model<gexec::backends<gexec::cpu_backend>, gexec::pool_allocator, gexec::registry, gexec::as_compiled> model{small_graph(), kernels()};
  const gexec::plan& plan = model.plan();
  gexec::instance_plan tensors{plan, model.compact()};
  gexec::zero_copy_bindings bindings{plan, model.compact(), tensors};
  alignas(64) float own[2][n] = {};  // stands in for the executor's own memory
  std::vector<std::uint32_t> own_asked;  // the entries own() was asked for
  auto own_memory() {
    return [this](std::uint32_t eid) -> void* {
      own_asked.push_back(eid);
      return own[plan.alias_root[eid] == z ? 0 : 1];
    };
  }
  void* data(std::uint32_t eid) const { return tensors.entries[eid].data; }
};

}  // namespace

TEST_CASE("the graph's alias groups are as the tests below assume") {
  fixture f;
  REQUIRE(f.plan.num_entries() == 5);
  CHECK(f.plan.alias_root[r] == z);
  CHECK(f.plan.alias_root[x] == x);
  CHECK(f.plan.alias_group_bytes(f.model.compact(), r) == 32);
}

TEST_CASE("fresh bindings: every group the executor's own, nothing copied") {
  fixture f;
  for (std::uint32_t e = 0; e < 5; ++e) {
    CHECK(f.bindings.of(e) == bound_to::internal);
    CHECK(f.bindings.owner(e) == nullptr);
    CHECK(f.bindings.bound_output(e) == -1);
    CHECK_FALSE(f.bindings.holds_input(e));
  }
  CHECK(f.bindings.output_copies().empty());
  CHECK(f.bindings.copied_output(0) == nullptr);
}

TEST_CASE("bind points the whole alias group at the tensor and keeps its owner") {
  fixture f;
  auto out = tensor({n}, filled(0));
  const auto version = f.tensors.version;
  f.bindings.bind(r, out.data(), out.storage_owner(), bound_to::output);  // through the alias: its root is bound
  CHECK(f.bindings.of(z) == bound_to::output);
  CHECK(f.data(z) == out.data());
  CHECK(f.data(r) == out.data());
  CHECK(f.bindings.owner(z) == out.storage_owner());
  CHECK(f.tensors.version == version + 1);
  f.bindings.give_back(r, f.own[0]);
  CHECK(f.bindings.of(z) == bound_to::internal);
  CHECK(f.bindings.owner(z) == nullptr);
  CHECK(f.data(z) == f.own[0]);
  CHECK(f.data(r) == f.own[0]);
  CHECK(f.tensors.version == version + 2);
}

TEST_CASE("an input and an output may not share memory, either way round") {
  fixture f;
  f.bindings.mark_input(x);
  f.bindings.mark_input(w);
  auto in = tensor({n}, filled(1)), out = tensor({n}, filled(0)), other = tensor({n}, filled(2));
  f.bindings.bind(x, in.data(), in.storage_owner(), bound_to::input);

  auto e = error_of([&] { f.bindings.refuse_overlap("set_output_zero_copy \"z:0\"", in, bound_to::input); });
  CHECK(e.code() == gexec::errc::invalid_argument);
  CHECK(std::string(e.what()).find("set_output_zero_copy \"z:0\": the tensor overlaps the one bound zero-copy to an input (entry 0); "
                                   "an input and an output may not share memory") != std::string::npos);
  f.bindings.refuse_overlap("set_output_zero_copy \"z:0\"", out, bound_to::input);  // no overlap: no error

  f.bindings.bind_output(0, z, out, f.own_memory());
  CHECK(f.bindings.of(z) == bound_to::output);
  CHECK(f.bindings.bound_output(z) == 0);
  e = error_of([&] { f.bindings.refuse_overlap("set_input_zero_copy \"w\"", out, bound_to::output); });
  CHECK(e.code() == gexec::errc::invalid_argument);
  CHECK(std::string(e.what()).find("set_input_zero_copy \"w\": the tensor overlaps the one bound zero-copy to an output (entry 3); "
                                   "an input and an output may not share memory") != std::string::npos);
  // A view of the last four floats of `out` overlaps too.
  DLTensor tail = out.dltensor();
  std::int64_t four = 4;
  tail.shape = &four;
  tail.data = static_cast<float*>(out.data()) + 4;
  CHECK(contains(error_of([&] { f.bindings.refuse_overlap("w", gexec::ndarray::view(tail, out.storage_owner()), bound_to::output); }),
                 "(entry 3)"));
  f.bindings.refuse_overlap("set_input_zero_copy \"w\"", other, bound_to::output);
  // An output's tensor that run() copies into counts as bound to it: x is output 2.
  f.bindings.bind_output(2, x, other, f.own_memory());
  e = error_of([&] { f.bindings.refuse_overlap("set_input_zero_copy \"w\"", other, bound_to::output); });
  CHECK(std::string(e.what()) == "gexec: invalid_argument: set_input_zero_copy \"w\": the tensor overlaps the one bound zero-copy to output 2; "
                                 "an input and an output may not share memory");
  CHECK(f.own_asked.empty());
}

TEST_CASE("outputs on an input, on a bound group or larger than the tensor are copied, not bound") {
  fixture f;
  f.bindings.mark_input(x);
  auto out0 = tensor({n}, filled(0)), out1 = tensor({2, 4}, filled(0)), out2 = tensor({n}, filled(0));
  f.bindings.bind_output(2, x, out2, f.own_memory());  // x holds an input
  f.bindings.bind_output(0, z, out0, f.own_memory());
  f.bindings.bind_output(1, r, out1, f.own_memory());  // r's group is bound to output 0 already
  CHECK(f.bindings.of(x) == bound_to::internal);
  CHECK(f.data(z) == out0.data());
  REQUIRE(f.bindings.output_copies().size() == 2);
  CHECK(f.bindings.output_copies()[0].index == 2);
  CHECK(f.bindings.output_copies()[0].eid == x);
  CHECK(f.bindings.output_copies()[1].index == 1);
  CHECK(f.bindings.output_copies()[1].eid == r);
  CHECK(f.bindings.copied_output(1)->data() == out1.data());
  CHECK(f.bindings.copied_output(0) == nullptr);
  // A tensor smaller than the alias group (here a 2-float view) is copied into.
  fixture g;
  DLTensor small = out0.dltensor();
  std::int64_t two = 2;
  small.shape = &two;
  g.bindings.bind_output(0, z, gexec::ndarray::view(small, out0.storage_owner()), g.own_memory());
  CHECK(g.bindings.of(z) == bound_to::internal);
  CHECK(g.bindings.output_copies().size() == 1);
}

TEST_CASE("binding an output again gives its group back first, once") {
  fixture f;
  auto a = tensor({n}, filled(0)), b = tensor({n}, filled(0)), c = tensor({2, 4}, filled(0));
  f.bindings.bind_output(0, z, a, f.own_memory());
  CHECK(f.own_asked.empty());
  f.bindings.bind_output(0, z, b, f.own_memory());  // rebinding output 0: z's group goes back, then to b
  CHECK(f.own_asked == std::vector<std::uint32_t>{z});
  CHECK(f.data(z) == b.data());
  CHECK(f.data(r) == b.data());
  CHECK(f.bindings.owner(z) == b.storage_owner());
  CHECK(f.bindings.bound_output(z) == 0);
  // Output 1 shares z's group: copied while output 0 holds it, and setting it does not
  // give output 0's binding back.
  f.bindings.bind_output(1, r, c, f.own_memory());
  CHECK(f.own_asked.size() == 1);
  CHECK(f.bindings.copied_output(1) != nullptr);
  // Giving the group back makes output 1 bindable; setting it again drops its copy.
  f.bindings.give_back(z, f.own[0]);
  CHECK(f.bindings.bound_output(z) == -1);
  CHECK(f.data(r) == f.own[0]);
  f.bindings.bind_output(1, r, c, f.own_memory());
  CHECK(f.bindings.output_copies().empty());
  CHECK(f.bindings.bound_output(z) == 1);
  CHECK(f.data(z) == c.data());
  // Binding the group as something else forgets which output it was bound to.
  f.bindings.bind(z, a.data(), a.storage_owner(), bound_to::shared);
  CHECK(f.bindings.bound_output(z) == -1);
  CHECK(f.bindings.of(z) == bound_to::shared);
}
