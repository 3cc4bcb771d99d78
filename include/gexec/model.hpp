#pragma once
// gexec::model: a graph bound to its kernels, planned, with its parameters loaded once.
// Immutable once built and safe to share between threads; executors made from it are
// cheap (their activations and bindings only) and read its parameters in place.
//
//   auto m = gexec::model::load("model.so");              // export_library's single file
//   auto a = m.instantiate(), b = m.instantiate();        // one per thread
//
//   auto m2 = gexec::model::load("graph.json", "lib.so", "params.bin");  // TVM's three files
//
// This header needs neither the packed C ABI nor a JSON reader. A program whose kernels
// are C++ callables includes it with <gexec/binding/registry.hpp> and
// <gexec/graph/builder.hpp> (graphs built in C++) or <gexec/graph.hpp> (graph JSON).
// Models over TVM-compiled libraries (gexec::model, model::load, create(json, lib))
// need <gexec/load.hpp>; <gexec/executor.hpp> includes everything.

#include "config.hpp"

#include <dlpack/dlpack.h>

#include <unistd.h>

#include <algorithm>
#include <concepts>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "executor/model_state.hpp"
#include "file_path.hpp"
#include "fwd.hpp"
#include "graph/validated.hpp"
#include "graph_executor.hpp"
#include "load_progress.hpp"
#include "params/dict.hpp"
#include "planners/any_planner.hpp"
#include "runtime.hpp"

GEXEC_NAMESPACE_BEGIN

struct model_options {
  /// Devices the graph runs on, one per device type it names.
  std::vector<DLDevice> devices = {cpu()};
  /// The runtime serving the model's kernels (thread pool, registered functions);
  /// null: runtime::global().
  std::shared_ptr<gexec::runtime> runtime;
  /// Storage one executor may allocate (its activations and the inputs it holds),
  /// checked before anything is allocated; 0: the machine's physical memory.
  std::uint64_t max_storage_bytes = 0;
  /// Host workspace (TVMBackendAllocWorkspace) one thread may hold at once while running
  /// this model's kernels; 0: the machine's physical memory. Workspace a kernel never
  /// frees is given back when the run (or parallel task) ends.
  std::uint64_t max_workspace_bytes = 0;
  /// run() with an input no one gave a value is an error; true runs it as zeros.
  bool zero_unset_inputs = false;
  /// The graph's inputs that are not parameters of the model (nor graph outputs) are
  /// donated to each run, as JAX's donate_argnums: an executor keeps such an input in its
  /// activation storage, where later values of the run take its bytes once its last
  /// reader ran, instead of in memory of its own (for ResNet-18 at 224x224, the 0.60 MB
  /// image of the 5.5 MB an executor holds). A run uses them up: after run(), get_input
  /// of one and a run() before it is set again are errors. An input bound with
  /// set_input_zero_copy is read in place and never used up. Planned with
  /// model_options::planner (liveness reuses the bytes; as_compiled keeps TVM's storage
  /// ids). Not with zero_unset_inputs.
  bool donate_inputs = false;
  /// The storage planner, chosen at run time (a liveness{}, or planner_named("liveness")
  /// from <gexec/execution/by_name.hpp>); none: the model's Planner template argument
  /// (as_compiled, TVM's storage ids, unless the type names another).
  any_planner planner = {};
  /// model::load(graph_file, library, params_file) hears of the bytes of the graph and
  /// parameter files read so far, of both together (see load_progress).
  load_progress progress = {};
  /// How model::load(graph_file, library, params_file) reads the parameter file.
  /// load_mode::mmap (the default): the file is mapped, and every tensor whose data sits
  /// 64-byte aligned in it (as save_options::align and `gexec-run --convert-params`
  /// write it) is used where it lies: no copy, and every model and process that maps
  /// the file shares its pages through the page cache; the others are copied once.
  /// Read load_mode::mmap for what must not happen to a mapped file. load_mode::copy:
  /// every tensor is read into memory of the model's own and the file is closed.
  load_mode params_mode = load_mode::mmap;
};

namespace detail {

/// Bytes of physical memory, or no limit where the platform does not say.
inline std::uint64_t physical_memory() noexcept {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page) : UINT64_MAX;
}

inline model_options on_devices(std::vector<DLDevice> devices) {
  model_options o;
  o.devices = std::move(devices);
  return o;
}

/// The inputs model_options::donate_inputs donates (indices into arg_nodes): neither
/// parameters nor graph outputs.
inline std::vector<std::uint32_t> donated_inputs(const compact_graph& g, const param_dict& params) {
  std::vector<bool> is_output(g.num_entries(), false);
  for (const node_entry& h : g.heads) is_output[g.entry_id(h)] = true;
  std::vector<std::uint32_t> donated;
  for (std::size_t i = 0; i < g.arg_nodes.size(); ++i)
    if (!is_output[g.entry_id(g.arg_nodes[i], 0)] && !params.contains(g.name(g.arg_nodes[i]))) donated.push_back(static_cast<std::uint32_t>(i));
  return donated;
}

/// Builds models from TVM-compiled libraries: model::load's body, defined with the
/// packed C ABI (load.hpp) so that this header needs none of it.
template <class Model>
struct library_model;

}  // namespace detail

template <class Backends, class Allocator, class Binding, class Planner>
class basic_model {
  static_assert(storage_planner<Planner>, "Planner must model gexec::storage_planner: plan(const storage_problem&) const -> storage_assignment");
  static_assert(Backends::template allocates_with<Allocator>,
                "Allocator must provide allocate(shared_ptr<Backend>, DLDevice, span<const uint64_t>) for every backend");
  static_assert(op_binding<Binding>, "Binding must provide resolve(name) -> packed_function and describe()");

 public:
  /// The executor's type depends on the device backends alone: the binding resolves into
  /// the plan, and the allocator and the planner are values of the model.
  using executor = graph_executor<Backends>;
  using state = gexec::model_state<Backends>;

  /// Validates the devices, plans storage and binds every kernel: a model that can be
  /// built runs without structural errors. `params` are copied once (or kept, when
  /// already host tensors aligned for kernels) and shared by every executor.
  basic_model(validated_graph g, Binding binding, const param_dict& params, model_options options = {}, Backends backends = {},
              Allocator allocator = {}) {
    auto s = std::make_shared<state>();
    s->graph = std::move(g);
    auto kernels = std::make_shared<const Binding>(std::move(binding));
    s->devices = std::move(options.devices);
    s->rt = options.runtime ? std::move(options.runtime) : runtime::global().shared_from_this();
    s->backends = std::make_shared<Backends>(std::move(backends));
    s->allocate = [a = std::move(allocator)](const std::shared_ptr<Backends>& bs, DLDevice d, std::span<const std::uint64_t> sizes) mutable {
      std::vector<std::shared_ptr<void>> buffers;
      if (!bs->visit(d.device_type, [&](auto& b) { buffers = a.allocate(std::shared_ptr<std::decay_t<decltype(b)>>(bs, &b), d, sizes); }))
        throw error(errc::device_mismatch, "no backend serves " + to_string(d));
      return buffers;
    };
    if constexpr (detail::passes_backend_memory<Allocator>)
      (void)s->backends->visit(kDLCPU, [&](auto& b) { s->host_storage_zeroed = detail::allocates_zeroed<std::decay_t<decltype(b)>>; });
    s->max_storage_bytes = options.max_storage_bytes ? options.max_storage_bytes : detail::physical_memory();
    s->max_workspace_bytes = options.max_workspace_bytes ? options.max_workspace_bytes : detail::physical_memory();
    s->zero_unset_inputs = options.zero_unset_inputs;
    const compact_graph& gr = s->compact();
    if (s->devices.empty()) throw error(errc::invalid_argument, "model: no device given");
    if (options.donate_inputs && options.zero_unset_inputs)
      throw error(errc::invalid_argument, "model: donate_inputs and zero_unset_inputs together (a donated input is used up by each run, "
                                          "not zeros)");
    for (const DLDevice& d : s->devices)
      if (!Backends::serves(d.device_type)) throw error(errc::device_mismatch, "model: no backend serves " + to_string(d));
    const any_planner planner = options.planner ? std::move(options.planner) : any_planner(Planner{});
    s->plan = make_plan(s->graph, *kernels, s->devices, *s->backends, planner, options.donate_inputs ? detail::donated_inputs(gr, params) : std::vector<std::uint32_t>{});
    s->binding = std::move(kernels);

    const gexec::plan& p = s->plan;
    check_storage_fits(p);
    std::vector<std::uint32_t> count(p.storage.size() + 1, 0);
    for (std::uint32_t e = 0; e < p.num_entries(); ++e)
      if (p.alias_root[e] == e && p.storage[s->storage_of(e)].kind == storage_kind::input) ++count[s->storage_of(e) + 1];
    s->device_table = &detail::device_table_for<Backends>;
    for (std::size_t i = 1; i < count.size(); ++i) count[i] += count[i - 1];
    s->input_roots_begin = count;
    s->input_roots.resize(count.back());
    for (std::uint32_t e = 0; e < p.num_entries(); ++e)
      if (p.alias_root[e] == e && p.storage[s->storage_of(e)].kind == storage_kind::input) s->input_roots[count[s->storage_of(e)]++] = e;

    for (std::size_t i = 0; i < gr.arg_nodes.size(); ++i) s->input_index.emplace(gr.name(gr.arg_nodes[i]), i);
    s->output_names.reserve(gr.heads.size());
    for (std::size_t i = 0; i < gr.heads.size(); ++i) {
      s->output_names.push_back(std::string(gr.name(gr.heads[i].node_id)) + ":" + std::to_string(i));
      s->output_index.emplace(s->output_names.back(), i);
    }
    place_params(*s, params);
    state_ = std::move(s);
  }
  basic_model(validated_graph g, Binding binding, model_options options = {}, Backends backends = {}, Allocator allocator = {})
      : basic_model(std::move(g), std::move(binding), param_dict{}, std::move(options), std::move(backends), std::move(allocator)) {}

  /// A model from a library made by TVM's export_library (graph and parameters embedded).
  /// Needs <gexec/load.hpp>.
  static basic_model load(const file_path& library, model_options options = {})
    requires std::same_as<Binding, packed_c_abi>
  {
    return detail::library_model<basic_model>::load(library, std::move(options));
  }
  /// A model from TVM's three files: the graph JSON, the kernel library and the parameter
  /// blob (read as options.params_mode says: mapped, aligned tensors used where they
  /// lie, by default). Needs <gexec/load.hpp>.
  static basic_model load(const file_path& graph_file, const file_path& library,
                          const file_path& params_file, model_options options = {})
    requires std::same_as<Binding, packed_c_abi>
  {
    return detail::library_model<basic_model>::load(graph_file, library, params_file, std::move(options));
  }

  /// The bytes of activation storage as compiled, as planned, and the liveness bound.
  [[nodiscard]] const storage_figures& storage() const noexcept { return state_->plan.figures; }
  /// The backends the model's executors use (for example to read an emulated device's counts).
  [[nodiscard]] Backends& get_backends() const noexcept { return *state_->backends; }

  /// A new executor: its own activations, the model's parameters read in place.
  [[nodiscard]] executor instantiate() const { return executor(state_); }

  /// The graph as gexec::graph (made from the compact form on first call).
  [[nodiscard]] const gexec::graph& graph() const { return state_->graph.get(); }
  /// The graph as the model keeps it.
  [[nodiscard]] const compact_graph& compact() const noexcept { return state_->compact(); }
  [[nodiscard]] const gexec::plan& plan() const noexcept { return state_->plan; }
  [[nodiscard]] const std::vector<DLDevice>& devices() const noexcept { return state_->devices; }
  [[nodiscard]] const std::shared_ptr<runtime>& get_runtime() const noexcept { return state_->rt; }
  /// Bytes of parameters the model holds (once, for all its executors).
  [[nodiscard]] std::uint64_t param_bytes() const noexcept { return state_->param_bytes; }
  /// Where the parameters live: read where they lie or copied, and why.
  [[nodiscard]] const weights_report& weights() const noexcept { return state_->weights; }
  /// The model's value of parameter `name`, or an undefined ndarray.
  [[nodiscard]] ndarray param(std::string_view name) const {
    auto it = state_->input_index.find(std::string(name));
    return it == state_->input_index.end() ? ndarray() : state_->params[it->second];
  }

 private:
  friend class factory;
  friend struct detail::library_model<basic_model>;
  /// Keeps what the model was read from alive with it (built, not yet shared: no race).
  void keep_source(std::shared_ptr<const void> source) { std::const_pointer_cast<state>(state_)->source = std::move(source); }
  /// Counts as copied the tensors of `params` the model keeps in place that do not lie
  /// where they were read from (`lies_there` false: a reader's copies), `why` (built,
  /// not yet shared: no race).
  template <class LiesThere>
  void count_reader_copies(const param_dict& params, LiesThere lies_there, const std::string& why) {
    weights_report& w = std::const_pointer_cast<state>(state_)->weights;
    for (const auto& [name, value] : params) {
      const ndarray kept = param(name);
      if (!kept.defined() || kept.data() != value.data() || lies_there(value)) continue;
      w.in_place -= 1;
      w.in_place_bytes -= value.byte_size();
      w.copied += 1;
      w.copied_bytes += value.byte_size();
      if (w.why_copied.empty()) w.why_copied = "\"" + name + "\": " + why;
    }
  }

  /// Puts each parameter that names a graph input where executors read it in place: the
  /// given tensor itself when it already is a compact, aligned tensor on that device,
  /// else a copy made through the device's backend. Names that are not inputs are
  /// ignored, as TVM ignores them.
  static void place_params(state& s, const param_dict& params) {
    const compact_graph& g = s.compact();
    s.params.resize(g.arg_nodes.size());
    for (const auto& item : params) {
      const std::string& name = item.first;
      const ndarray& value = item.second;
      auto it = s.input_index.find(name);
      if (it == s.input_index.end()) continue;
      const std::uint32_t eid = s.input_entry(it->second);
      const DLTensor want = s.plan.entry_tensor(g, eid);
      auto fail = [&](errc code, const std::string& why) { throw error(code, "model parameter \"" + name + "\": " + why); };
      if (!value.defined()) fail(errc::invalid_argument, "undefined tensor");
      if (!same_dtype(value.dtype(), want.dtype)) fail(errc::dtype_mismatch, "dtype is " + to_string(value.dtype()) + ", expected " + to_string(want.dtype));
      if (!std::equal(want.shape, want.shape + want.ndim, value.shape().begin(), value.shape().end()))
        fail(errc::shape_mismatch, "shape is " + detail::shape_to_string(value.shape()) + ", expected " +
                                       detail::shape_to_string({want.shape, static_cast<std::size_t>(want.ndim)}));
      if (!value.is_contiguous()) fail(errc::invalid_argument, "tensor is strided");
      if (s.plan.alias_group_bytes(g, eid) > value.byte_size()) fail(errc::shape_mismatch, "a __nop alias of it is larger than the tensor");
      ndarray placed;
      std::string why_copied;
      if (same_device(value.device(), want.device) && value.is_aligned()) {
        placed = value;
        // From a mapped file, a tensor outside the mapping is the reader's copy.
        if (!params.mapped_range().empty() && !params.is_mapped(value)) why_copied = "its data is not " + std::to_string(kernel_alignment) + "-byte aligned in the file (`gexec-run --convert-params` rewrites it aligned)";
      } else {
        placed = allocate_like(s, want);
        s.backends->copy(value.dltensor(), const_cast<DLTensor&>(placed.dltensor()));
        why_copied = same_device(value.device(), want.device) ? "its data is not " + std::to_string(kernel_alignment) + "-byte aligned"
                                                               : "it is on " + to_string(value.device()) + ", the graph reads it on " + to_string(want.device);
      }
      weights_report& w = s.weights;
      (why_copied.empty() ? w.in_place : w.copied) += 1;
      (why_copied.empty() ? w.in_place_bytes : w.copied_bytes) += value.byte_size();
      if (!why_copied.empty() && w.why_copied.empty()) w.why_copied = "\"" + name + "\": " + why_copied;
      s.param_bytes += placed.byte_size();
      s.params[static_cast<std::size_t>(it->second)] = std::move(placed);
    }
  }

  /// Storage an executor may come to hold (inputs are allocated on first use) must fit
  /// an address space, device by device: an error at build time, not a wrapped size.
  static void check_storage_fits(const gexec::plan& p) {
    std::vector<std::pair<DLDevice, std::uint64_t>> totals;
    for (const storage_slot& slot : p.storage) {
      if (slot.kind == storage_kind::unused) continue;
      auto it = std::find_if(totals.begin(), totals.end(), [&](const auto& t) { return same_device(t.first, slot.device); });
      if (it == totals.end()) it = totals.insert(totals.end(), {slot.device, 0});
      const std::uint64_t bytes = detail::align_up(slot.bytes == 0 ? 1 : slot.bytes, kernel_alignment);
      if (bytes < slot.bytes || bytes > static_cast<std::uint64_t>(PTRDIFF_MAX) - it->second)
        throw error(errc::out_of_memory, "model: the storage on " + to_string(slot.device) + " exceeds an address space");
      it->second += bytes;
    }
  }

  static ndarray allocate_like(state& s, const DLTensor& like) {
    const std::uint64_t bytes = *detail::checked_byte_size({like.shape, static_cast<std::size_t>(like.ndim)}, like.dtype);
    const std::uint64_t sizes[1] = {bytes};
    std::shared_ptr<void> buffer = std::move(s.allocate(s.backends, like.device, sizes)[0]);
    DLTensor t = like;
    t.data = buffer.get();
    return ndarray::view(t, std::move(buffer));
  }

  std::shared_ptr<const state> state_;
};

// `gexec::basic_model m(graph, kernels)` picks the binding from its argument.
template <op_binding Binding>
basic_model(validated_graph, Binding, model_options = {}) -> basic_model<backends<cpu_backend>, pool_allocator, Binding, as_compiled>;
template <op_binding Binding>
basic_model(validated_graph, Binding, const param_dict&, model_options = {}) -> basic_model<backends<cpu_backend>, pool_allocator, Binding, as_compiled>;

namespace detail {
/// Reads graph JSON for create(): defined in <gexec/graph.hpp> (graph/json.hpp), which
/// brings in Boost.JSON. A program that builds its graphs in C++ need not compile it;
/// create() from JSON text or a file without that header fails to compile, with
/// "incomplete type graph_reader" pointing here: include <gexec/graph.hpp>.
template <class Binding>
struct graph_reader;
}  // namespace detail

/// An executor over a binding of C++ kernels (a registry or static_registry), with a
/// model of its own; create(graph, lib) for TVM-compiled libraries is in
/// <gexec/load.hpp>. To run many executors over one set of weights, build a
/// model once and instantiate it instead.
template <op_binding Binding>
graph_executor<> create(const validated_graph& g, Binding kernels,
                                                                      std::vector<DLDevice> devices = {cpu()}) {
  return basic_model<backends<cpu_backend>, pool_allocator, Binding>(g, std::move(kernels), detail::on_devices(std::move(devices))).instantiate();
}
template <op_binding Binding>
graph_executor<> create(std::string_view graph_json, Binding kernels,
                                                                      std::vector<DLDevice> devices = {cpu()}) {
  return create(detail::graph_reader<Binding>::text(graph_json), std::move(kernels), std::move(devices));
}
template <op_binding Binding>
graph_executor<> create(graph g, Binding kernels, std::vector<DLDevice> devices = {cpu()}) {
  return create(validate(std::move(g)), std::move(kernels), std::move(devices));
}
/// The graph read from a file (load_graph_file). Only a std::filesystem::path (a path
/// type, detail::filesystem_path_like) selects this overload: a string or string literal
/// is JSON text, as above, so create(std::filesystem::path("graph.json"), kernels) reads a file and
/// create("{...}", kernels) parses text.
template <class Path, op_binding Binding>
  requires detail::filesystem_path_like<Path>
graph_executor<> create(const Path& graph_file, Binding kernels,
                                                                      std::vector<DLDevice> devices = {cpu()}) {
  return create(detail::graph_reader<Binding>::file(graph_file), std::move(kernels), std::move(devices));
}

GEXEC_NAMESPACE_END
