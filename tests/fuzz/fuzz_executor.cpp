// libFuzzer target: executors over graphs that parse. Every func_name is bound to a
// kernel that accepts any arguments, checks that each is a well-formed host tensor
// and writes all of its bytes (so that the sanitizer sees any argument that overruns
// its storage). Creating the executor plans storage and binds kernels;
// gexec::error is the only acceptable failure there. Once created, the executor
// must run and serve its API for tensors that match the graph without any error.
// Graphs of any size are planned over a host backend that records its allocations
// (and refuses those past 64 MiB), and every tensor of the plan must lie inside
// memory that backend handed out; only graphs whose entries need at most 64 MiB in
// all are run.

#include <gexec/allocators/pool_allocator.hpp>
#include <gexec/graph.hpp>
#include <gexec/graph_executor.hpp>
#include <gexec/model.hpp>
#include <gexec/params.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace {

constexpr std::uint64_t max_storage_bytes = std::uint64_t{64} << 20;

[[noreturn]] void property_failed(const char* what, const std::string& detail = {}) {
  std::fprintf(stderr, "fuzz_executor: %s\n%s\n", what, detail.c_str());
  std::abort();
}

/// What a kernel may rely on in each argument, then a write of every byte (memset:
/// checked by the sanitizer as one range, and not removable as a no-op would be).
void touch_arguments(gexec::packed_args args) {
  for (int i = 0; i < args.size(); ++i) {
    if (args.type_codes[i] != gexec::tc_dltensor) property_failed("kernel argument is not a DLTensor");
    const auto* t = static_cast<const DLTensor*>(args.values[i].v_handle);
    if (t == nullptr || t->data == nullptr) property_failed("kernel argument has no data");
    if (t->device.device_type != kDLCPU) property_failed("kernel argument is not on the host");
    if (t->ndim < 0 || (t->ndim > 0 && t->shape == nullptr)) property_failed("kernel argument has a malformed shape");
    if (t->strides != nullptr || t->byte_offset != 0) property_failed("kernel argument is strided or offset");
    if (!gexec::is_supported(t->dtype)) property_failed("kernel argument has an unsupported dtype");
    if (reinterpret_cast<std::uintptr_t>(t->data) % gexec::kernel_alignment != 0)
      property_failed("kernel argument is not aligned to kernel_alignment");
    auto bytes = gexec::detail::checked_byte_size({t->shape, static_cast<std::size_t>(t->ndim)}, t->dtype);
    if (!bytes) property_failed("kernel argument's size overflows");
    if (*bytes) std::memset(t->data, 0x5a, static_cast<std::size_t>(*bytes));
  }
}

/// Total storage the entries could need, stopping early past the cap.
bool storage_within_cap(const gexec::graph& g) {
  std::uint64_t total = 0;
  for (std::size_t e = 0; e < g.num_entries(); ++e) {
    auto bytes = gexec::detail::checked_byte_size(g.attrs.shape[e], g.attrs.dltype[e]);
    if (!bytes || *bytes > max_storage_bytes) return false;
    total += gexec::detail::align_up(*bytes == 0 ? 1 : *bytes, gexec::kernel_alignment);
    if (total > max_storage_bytes) return false;
  }
  return true;
}

/// The host backend, recording what it allocates and refusing (with gexec::error, as
/// a backend that is out of memory fails) anything past the cap.
struct recording_cpu_backend : gexec::cpu_backend {
  static inline std::map<std::uintptr_t, std::uint64_t> live;  // start -> requested bytes

  void* allocate(DLDevice device, std::uint64_t bytes) {
    if (bytes > max_storage_bytes)
      throw gexec::error(gexec::errc::unsupported, "recording backend: refusing " + std::to_string(bytes) + " bytes");
    void* p = gexec::cpu_backend::allocate(device, bytes);
    live[reinterpret_cast<std::uintptr_t>(p)] = bytes;
    return p;
  }
  void free(DLDevice device, void* p) noexcept {
    live.erase(reinterpret_cast<std::uintptr_t>(p));
    gexec::cpu_backend::free(device, p);
  }
};
static_assert(gexec::device_backend<recording_cpu_backend>);

/// Whether [t.data, t.data + its size) lies inside one live allocation.
bool inside_allocation(const DLTensor& t) {
  auto bytes = gexec::detail::checked_byte_size({t.shape, static_cast<std::size_t>(t.ndim)}, t.dtype);
  if (!bytes) return false;
  const auto at = reinterpret_cast<std::uintptr_t>(t.data);
  auto it = recording_cpu_backend::live.upper_bound(at);
  if (it == recording_cpu_backend::live.begin()) return false;
  --it;
  const std::uint64_t offset = at - it->first;
  return offset <= it->second && *bytes <= it->second - offset;
}

/// Plans `g` over the recording backend; every tensor an executor hands to kernels
/// must lie inside memory that the backend allocated (input storage, taken on first
/// use, once a run has made it, for graphs small enough to run).
/// Fuzzed graphs run with inputs no one set as zeros: the point is what runs, not
/// which inputs a caller would give.
gexec::model_options zero_inputs() {
  gexec::model_options o;
  o.zero_unset_inputs = true;
  return o;
}

template <class Allocator>
void plan_in_bounds(const gexec::validated_graph& g, const gexec::registry& kernels, bool run) {
  using model = gexec::basic_model<gexec::backends<recording_cpu_backend>, Allocator, gexec::registry>;
  try {
    auto ex = model(g, kernels, zero_inputs()).instantiate();
    if (run) ex.run();
    const gexec::instance_plan& p = ex.get_instance_plan();
    for (std::size_t e = 0; e < p.entries.size(); ++e)
      if ((run || p.entries[e].data != nullptr) && !inside_allocation(p.entries[e]))
        property_failed("a planned entry lies outside the memory allocated for it", "entry " + std::to_string(e));
    for (std::size_t i = 0; i < p.values.size(); ++i)
      if (const auto& arg = *static_cast<const DLTensor*>(p.values[i].v_handle); (run || arg.data != nullptr) && !inside_allocation(arg))
        property_failed("a planned kernel argument lies outside the memory allocated for it", "argument " + std::to_string(i));
  } catch (const gexec::error&) {
  }
  if (!recording_cpu_backend::live.empty()) property_failed("an executor's storage outlives it");
}

gexec::ndarray zeros_like_entry(const gexec::graph& g, std::uint32_t eid) {
  return gexec::ndarray::empty(g.attrs.shape[eid], g.attrs.dltype[eid]);
}

/// Everything the API offers, with tensors that match the graph.
template <class Executor>
void exercise(Executor& ex, Executor& twin, const gexec::graph& g) {
  ex.run();
  (void)ex.get_input_info();
  (void)ex.get_output_info();

  // Inputs by copy, then all of them as parameters, then those a parameter blob can
  // hold (one lane) shared with the twin.
  gexec::param_dict params, savable;
  for (int i = 0; i < ex.get_num_inputs(); ++i) {
    const std::uint32_t nid = g.arg_nodes[static_cast<std::size_t>(i)];
    gexec::ndarray value = zeros_like_entry(g, g.entry_id(nid, 0));
    ex.set_input(i, value);
    (void)ex.get_input(i);
    if (value.dtype().lanes == 1) savable.set(g.nodes[nid].name, value);
    params.set(g.nodes[nid].name, std::move(value));
  }
  ex.run();
  ex.load_params(params);
  std::vector<std::byte> blob = gexec::save_param_dict(savable);
  twin.share_params(ex, std::span<const std::byte>(blob));
  twin.run();

  // Outputs: views, copies, and zero-copy binding.
  for (int o = 0; o < ex.get_num_outputs(); ++o) {
    const std::uint32_t eid = g.entry_id(g.heads[static_cast<std::size_t>(o)]);
    (void)ex.get_output(o);
    ex.copy_output_to(o, zeros_like_entry(g, eid));
    ex.set_output_zero_copy(o, zeros_like_entry(g, eid));
  }

  // Zero-copy inputs, on top of the bound outputs.
  for (int i = 0; i < ex.get_num_inputs(); ++i)
    ex.set_input_zero_copy(i, zeros_like_entry(g, g.entry_id(g.arg_nodes[static_cast<std::size_t>(i)], 0)));
  ex.run();
  for (int o = 0; o < ex.get_num_outputs(); ++o) (void)ex.get_output(o);

  // Partial runs up to the first and the last entry.
  if (g.num_entries() > 0) {
    (void)ex.debug_get_output(0);
    (void)ex.debug_get_output(static_cast<std::uint32_t>(g.num_entries() - 1));
  }

  // Back to copied inputs, after the zero-copy ones are gone.
  for (int i = 0; i < ex.get_num_inputs(); ++i)
    ex.set_input(i, zeros_like_entry(g, g.entry_id(g.arg_nodes[static_cast<std::size_t>(i)], 0)));
  Executor moved = std::move(ex);
  moved.run();
}

template <class Allocator>
void run_with(const gexec::validated_graph& g, const gexec::registry& kernels) {
  using model = gexec::basic_model<gexec::backends<gexec::cpu_backend>, Allocator, gexec::registry>;
  std::vector<typename model::executor> made;
  try {
    made.push_back(model(g, kernels, zero_inputs()).instantiate());
  } catch (const gexec::error&) {
    return;  // a graph the planner rejects
  }
  // Creation is deterministic: a second model over the same graph must be made.
  try {
    made.push_back(model(g, kernels, zero_inputs()).instantiate());
  } catch (const gexec::error& e) {
    property_failed("a second executor over a graph that was planned once fails", e.what());
  }
  try {
    exercise(made[0], made[1], g);
  } catch (const gexec::error& e) {
    property_failed("an executor that was created fails with matching tensors", e.what());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  gexec::validated_graph vg;
  try {
    vg = gexec::parse_graph(std::string_view(reinterpret_cast<const char*>(data), size));
  } catch (const gexec::error&) {
    return 0;
  }
  const gexec::graph& g = vg;
  gexec::registry kernels;
  for (const gexec::node& n : g.nodes)
    if (n.is_op() && n.func_name != "__nop" && n.func_name != "__copy") kernels.add(n.func_name, touch_arguments);

  const bool small = storage_within_cap(g);
  plan_in_bounds<gexec::pool_allocator>(vg, kernels, small);
  plan_in_bounds<gexec::buffer_allocator>(vg, kernels, small);
  if (!small) return 0;

  // As gexec::create makes it (one pool per device, with zeros for unset inputs), then one allocation per storage
  // id, where the sanitizer sees an argument overrunning its own buffer.
  try {
    auto ex = gexec::basic_model(vg, kernels, zero_inputs()).instantiate();
    ex.run();
  } catch (const gexec::error&) {
  }
  run_with<gexec::pool_allocator>(vg, kernels);
  run_with<gexec::buffer_allocator>(vg, kernels);
  return 0;
}
