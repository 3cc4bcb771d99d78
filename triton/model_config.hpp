#pragma once
// How a gexec model is served: its Triton model configuration (config.pbtxt, as the JSON
// the server hands the backend) read, completed from the model and checked against it.
//
//   - Tensors: inputs keep the graph's names; outputs are named output0, output1, ... by
//     their index, unless an explicit configuration names them (see name_outputs). Data
//     types map one to one (float32 <-> TYPE_FP32, ...).
//   - Batching: with max_batch_size 0 (what auto-completion keeps) requests give the
//     model's shapes exactly and each runs as compiled. A model whose inputs and outputs
//     all share a leading dimension B, whose rows are independent, may be served with
//     max_batch_size M > 0: its dims leave that dimension out, a request carries 1..M
//     rows (Triton's dynamic batcher may gather several requests into one call), and the
//     backend runs the model B rows at a time, padding the last run with zero rows and
//     slicing the outputs. Only the configuration can say that rows are independent (a
//     sort along the first axis is not), so batching is never turned on by itself.
//   - Parameters: num_threads, planner, execution_policy, weights_as_inputs, cuda_graph,
//     cuda_devices (see settings).
//
// Nothing here calls the server: it works on Boost.JSON values, so it is tested alone.

#include <gexec/dtype.hpp>
#include <gexec/error.hpp>
#include <gexec/execution/by_name.hpp>

#include <boost/json.hpp>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "triton_api.hpp"

namespace gexec_triton {

namespace json = boost::json;

/// One input or output of the model as the executor describes it.
struct model_tensor {
  std::string name;
  int index = 0;  ///< the executor's input index (graph argument) or output index
  DLDataType dtype{};
  std::vector<std::int64_t> shape;
};

/// One tensor as served.
struct served_tensor {
  std::string name;  ///< Triton's name: the input's own; for outputs "output<index>" or the configuration's
  int index = 0;
  DLDataType dtype{};
  TRITONSERVER_DataType type = TRITONSERVER_TYPE_INVALID;
  std::vector<std::int64_t> shape;  ///< the model's full shape
  std::uint64_t row_bytes = 0;      ///< bytes of one row (of the whole tensor when not batched)

  /// The dims a request gives: the shape without the batch dimension when batched. Triton
  /// has no scalars in models without batching: a scalar is served as [1].
  [[nodiscard]] std::vector<std::int64_t> dims(bool batched) const {
    if (batched) return {shape.begin() + 1, shape.end()};
    return shape.empty() ? std::vector<std::int64_t>{1} : shape;
  }
};

struct serving_layout {
  std::int64_t max_batch_size = 0;  ///< 0: not batched, shapes as compiled
  std::int64_t rows_per_run = 1;    ///< the model's batch dimension when batched, else 1
  std::vector<served_tensor> inputs, outputs;  ///< in the model's order

  [[nodiscard]] bool batched() const noexcept { return max_batch_size > 0; }
};

/// Configuration parameters: parameters { key: "num_threads" value: { string_value: "2" } }.
struct settings {
  int num_threads = 0;                        ///< threads of the model's own pool; 0: the process-wide runtime
  std::string planner = "as_compiled";        ///< as_compiled (TVM's storage plan) or liveness (smaller)
  std::string execution_policy = "sequential";  ///< sequential or parallel (independent branches at once)
  /// A graph.json + lib.so folder without a parameter file is served with its weights as
  /// inputs that every request sends. Only on request: a missing file is otherwise an error.
  bool weights_as_inputs = false;
  /// Runs replayed as one CUDA Graph each (gexec::cuda_graph), captured per instance on its
  /// stream; a graph with host parts runs eagerly and the log says why.
  bool cuda_graph = false;
  /// The CUDA devices KIND_MODEL instances are placed on, in turn ("0,1"); empty: every
  /// device the driver has.
  std::vector<int> cuda_devices;
  /// A Relax VM executable's function to serve (default: main, or its only one).
  std::string function;
};

[[noreturn]] inline void config_error(const std::string& what) { throw gexec::error(gexec::errc::invalid_argument, what); }

// ---- data types ------------------------------------------------------------------------

inline TRITONSERVER_DataType triton_type(DLDataType t) noexcept {
  if (t.lanes != 1) return TRITONSERVER_TYPE_INVALID;
  switch (t.code) {
    case kDLUInt:
      switch (t.bits) {
        case 1: return TRITONSERVER_TYPE_BOOL;
        case 8: return TRITONSERVER_TYPE_UINT8;
        case 16: return TRITONSERVER_TYPE_UINT16;
        case 32: return TRITONSERVER_TYPE_UINT32;
        case 64: return TRITONSERVER_TYPE_UINT64;
        default: return TRITONSERVER_TYPE_INVALID;
      }
    case kDLInt:
      switch (t.bits) {
        case 8: return TRITONSERVER_TYPE_INT8;
        case 16: return TRITONSERVER_TYPE_INT16;
        case 32: return TRITONSERVER_TYPE_INT32;
        case 64: return TRITONSERVER_TYPE_INT64;
        default: return TRITONSERVER_TYPE_INVALID;
      }
    case kDLFloat:
      switch (t.bits) {
        case 16: return TRITONSERVER_TYPE_FP16;
        case 32: return TRITONSERVER_TYPE_FP32;
        case 64: return TRITONSERVER_TYPE_FP64;
        default: return TRITONSERVER_TYPE_INVALID;
      }
    case kDLBfloat: return t.bits == 16 ? TRITONSERVER_TYPE_BF16 : TRITONSERVER_TYPE_INVALID;
    default: return TRITONSERVER_TYPE_INVALID;
  }
}

/// The model configuration's name of a type ("TYPE_FP32").
inline std::string_view config_type_name(TRITONSERVER_DataType t) noexcept {
  switch (t) {
    case TRITONSERVER_TYPE_BOOL: return "TYPE_BOOL";
    case TRITONSERVER_TYPE_UINT8: return "TYPE_UINT8";
    case TRITONSERVER_TYPE_UINT16: return "TYPE_UINT16";
    case TRITONSERVER_TYPE_UINT32: return "TYPE_UINT32";
    case TRITONSERVER_TYPE_UINT64: return "TYPE_UINT64";
    case TRITONSERVER_TYPE_INT8: return "TYPE_INT8";
    case TRITONSERVER_TYPE_INT16: return "TYPE_INT16";
    case TRITONSERVER_TYPE_INT32: return "TYPE_INT32";
    case TRITONSERVER_TYPE_INT64: return "TYPE_INT64";
    case TRITONSERVER_TYPE_FP16: return "TYPE_FP16";
    case TRITONSERVER_TYPE_FP32: return "TYPE_FP32";
    case TRITONSERVER_TYPE_FP64: return "TYPE_FP64";
    case TRITONSERVER_TYPE_BYTES: return "TYPE_STRING";
    case TRITONSERVER_TYPE_BF16: return "TYPE_BF16";
    default: return "TYPE_INVALID";
  }
}

// ---- reading JSON ----------------------------------------------------------------------

/// An integer the server wrote as a number or, for 64-bit fields, as a string.
inline std::optional<std::int64_t> as_int(const json::value& v) noexcept {
  if (v.is_int64()) return v.as_int64();
  if (v.is_uint64() && v.as_uint64() <= static_cast<std::uint64_t>(INT64_MAX)) return static_cast<std::int64_t>(v.as_uint64());
  if (v.is_string()) {
    const json::string& s = v.as_string();
    std::int64_t x = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), x);
    if (ec == std::errc{} && end == s.data() + s.size() && !s.empty()) return x;
  }
  return std::nullopt;
}

inline std::string shape_text(const std::vector<std::int64_t>& s) {
  std::string t = "[";
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (i) t += ',';
    t += std::to_string(s[i]);
  }
  return t + "]";
}

inline const json::array* array_field(const json::object& o, json::string_view key) {
  const json::value* v = o.if_contains(key);
  if (!v || v->is_null()) return nullptr;
  if (!v->is_array()) config_error(std::string(key) + " must be a list");
  return &v->as_array();
}

inline std::vector<std::int64_t> read_dims_of(const json::object& o, json::string_view key, const std::string& what) {
  std::vector<std::int64_t> dims;
  if (const json::array* a = array_field(o, key))
    for (const json::value& d : *a) {
      const auto x = as_int(d);
      if (!x) config_error(what + ": " + std::string(key) + " must be integers");
      dims.push_back(*x);
    }
  return dims;
}
inline std::vector<std::int64_t> read_dims(const json::object& io, const std::string& what) { return read_dims_of(io, "dims", what); }

/// The configuration's parameters, checked: an unknown key or a bad value is an error.
inline settings read_settings(const json::object& config) {
  settings s;
  const json::value* p = config.if_contains("parameters");
  if (!p || p->is_null()) return s;
  if (!p->is_object()) config_error("parameters must be a map");
  for (const auto& [key, value] : p->as_object()) {
    const json::value* sv = value.is_object() ? value.as_object().if_contains("string_value") : nullptr;
    if (!sv || !sv->is_string()) config_error("parameter \"" + std::string(key) + "\" has no string_value");
    const std::string v = json::value_to<std::string>(*sv);
    if (key == "num_threads") {
      const auto n = as_int(json::value(v));
      if (!n || *n < 0 || *n > 4096) config_error("parameter num_threads \"" + v + "\": expected a whole number 0..4096 (0: all cores)");
      s.num_threads = static_cast<int>(*n);
    } else if (key == "planner") {
      if (!gexec::is_planner_name(v)) config_error("parameter planner \"" + v + "\": expected as_compiled or liveness");
      s.planner = v;
    } else if (key == "execution_policy") {
      if (!gexec::is_policy_name(v)) config_error("parameter execution_policy \"" + v + "\": expected sequential or parallel");
      s.execution_policy = v;
    } else if (key == "weights_as_inputs") {
      if (v != "true" && v != "false") config_error("parameter weights_as_inputs \"" + v + "\": expected true or false");
      s.weights_as_inputs = v == "true";
    } else if (key == "cuda_graph") {
      if (v != "true" && v != "false") config_error("parameter cuda_graph \"" + v + "\": expected true or false");
      s.cuda_graph = v == "true";
    } else if (key == "cuda_devices") {
      s.cuda_devices.clear();
      for (std::size_t start = 0;;) {  // every item a device id: no empty ones, no spaces
        const std::size_t comma = v.find(',', start);
        const std::string_view item = std::string_view(v).substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        int id = -1;
        const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), id);
        if (item.empty() || ec != std::errc() || end != item.data() + item.size() || id < 0 || id > 1023)
          config_error("parameter cuda_devices \"" + v + "\": expected CUDA device ids separated by commas, such as \"0,1\"");
        s.cuda_devices.push_back(id);
        if (comma == std::string::npos) break;
        start = comma + 1;
      }
    } else if (key == "function") {
      if (v.empty()) config_error("parameter function: expected the name of a function of the Relax executable");
      s.function = v;
    } else {
      config_error("unknown parameter \"" + std::string(key) +
                   "\" (gexec reads num_threads, planner, execution_policy, weights_as_inputs, cuda_graph, cuda_devices and function)");
    }
  }
  return s;
}

// ---- completing and checking -----------------------------------------------------------

/// The leading dimension every input and output shares, if there is one (B >= 1).
inline std::optional<std::int64_t> common_batch(const std::vector<model_tensor>& inputs, const std::vector<model_tensor>& outputs) {
  std::optional<std::int64_t> b;
  for (const auto* list : {&inputs, &outputs})
    for (const model_tensor& t : *list) {
      if (t.shape.empty() || t.shape[0] < 1 || (b && *b != t.shape[0])) return std::nullopt;
      b = t.shape[0];
    }
  return b;
}

inline std::string describe_shapes(const std::vector<model_tensor>& inputs, const std::vector<model_tensor>& outputs) {
  std::string s;
  for (const model_tensor& t : inputs) s += (s.empty() ? "" : ", ") + t.name + " " + shape_text(t.shape);
  for (const model_tensor& t : outputs) s += ", output" + std::to_string(t.index) + " " + shape_text(t.shape);
  return s;
}

inline served_tensor serve(const model_tensor& t, std::string name, bool batched) {
  served_tensor s{std::move(name), t.index, t.dtype, triton_type(t.dtype), t.shape, gexec::element_bytes(t.dtype)};
  if (s.type == TRITONSERVER_TYPE_INVALID) config_error(s.name + ": data type " + gexec::to_string(t.dtype) + " has no Triton equivalent");
  for (std::size_t i = batched ? 1 : 0; i < t.shape.size(); ++i) s.row_bytes *= static_cast<std::uint64_t>(std::max<std::int64_t>(t.shape[i], 0));
  if (std::find(t.shape.begin(), t.shape.end(), -1) != t.shape.end()) s.row_bytes = 0;  // known per request
  return s;
}

inline json::object config_entry(const served_tensor& t, bool batched) {
  json::array dims;
  for (std::int64_t d : t.dims(batched)) dims.emplace_back(d);
  return json::object{{"name", t.name}, {"data_type", config_type_name(t.type)}, {"dims", std::move(dims)}};
}

inline std::int64_t elements(const std::vector<std::int64_t>& dims) {
  std::int64_t n = 1;
  for (std::int64_t d : dims) n *= d;
  return n;
}

/// The output index a name of the form output<k> stands for, if it has that form.
inline std::optional<std::size_t> output_index_name(std::string_view name) {
  constexpr std::string_view prefix = "output";
  if (name.size() <= prefix.size() || name.substr(0, prefix.size()) != prefix) return std::nullopt;
  std::size_t k = 0;
  const char* first = name.data() + prefix.size();
  const auto [end, ec] = std::from_chars(first, name.data() + name.size(), k);
  if (ec != std::errc{} || end != name.data() + name.size() || (*first == '0' && end - first > 1)) return std::nullopt;
  return k;
}

/// Names the served outputs after an explicit configuration's output list. Each entry
/// names one of the model's outputs by
///   1. output<k>: the model's k-th output (an error when it has no k-th);
///   2. the graph's name of it, "node:k" as gexec names outputs (node, head index);
///   3. the bare node name, where exactly one output comes from that node.
/// Any other name is refused, listing the names the model has (a name matching nothing
/// would otherwise serve some output under it). Two entries naming one output are an
/// error. Outputs the list leaves out keep output<k>.
inline void name_outputs(const json::array& given, const std::vector<model_tensor>& model_outputs, std::vector<served_tensor>& served) {
  std::vector<std::string> named_by(served.size());
  auto known = [&] {
    std::string s;
    for (std::size_t k = 0; k < model_outputs.size(); ++k) s += (s.empty() ? "" : ", ") + ("output" + std::to_string(k)) + " (" + model_outputs[k].name + ")";
    return s;
  };
  for (std::size_t position = 0; position < given.size(); ++position) {
    const json::value& v = given[position];
    if (!v.is_object()) config_error("output entries must be maps");
    const json::value* n = v.as_object().if_contains("name");
    const std::string name = n && n->is_string() ? json::value_to<std::string>(*n) : "";
    const std::string what = "config output \"" + name + "\"";
    std::optional<std::size_t> k;
    if (const auto index = output_index_name(name)) {
      if (*index >= served.size()) config_error(what + ": the model has no output of that name (outputs: " + known() + ")");
      k = index;
    }
    for (std::size_t j = 0; !k && j < model_outputs.size(); ++j)
      if (model_outputs[j].name == name) k = j;
    if (!k) {
      std::vector<std::size_t> from_node;
      for (std::size_t j = 0; j < model_outputs.size(); ++j) {
        const std::string& head = model_outputs[j].name;
        const std::size_t colon = head.rfind(':');
        if (colon != std::string::npos && std::string_view(head).substr(0, colon) == name) from_node.push_back(j);
      }
      if (from_node.size() > 1) {
        std::string names;
        for (std::size_t j : from_node) names += (names.empty() ? "" : ", ") + model_outputs[j].name;
        config_error(what + ": " + std::to_string(from_node.size()) + " outputs come from that node (" + names + "); name one of them");
      }
      if (from_node.size() == 1) k = from_node[0];
    }
    if (!k) config_error(what + ": the model has no output of that name (outputs: " + known() + ")");
    if (!named_by[*k].empty())
      config_error("config outputs \"" + named_by[*k] + "\" and \"" + name + "\" both name the model's output " + std::to_string(*k) + " (" +
                   model_outputs[*k].name + ")");
    named_by[*k] = name;
    served[*k].name = name;
  }
}

/// Checks the configuration's list of inputs or outputs against the served tensors.
inline void check_entries(const json::array& given, const std::vector<served_tensor>& served, bool batched, const char* kind,
                          bool all_required) {
  std::vector<bool> seen(served.size(), false);
  for (const json::value& v : given) {
    if (!v.is_object()) config_error(std::string(kind) + " entries must be maps");
    const json::object& io = v.as_object();
    const json::value* n = io.if_contains("name");
    const std::string name = n && n->is_string() ? json::value_to<std::string>(*n) : "";
    const std::string config_what = "config " + std::string(kind) + " \"" + name + "\"";
    std::size_t k = 0;
    while (k < served.size() && served[k].name != name) ++k;
    if (k == served.size()) {
      std::string known;
      for (const served_tensor& t : served) known += (known.empty() ? "" : ", ") + t.name;
      config_error(config_what + ": the model has no " + kind + " of that name (" + kind + "s: " + known + ")");
    }
    seen[k] = true;
    const served_tensor& t = served[k];
    const std::string as_model = std::string(kind) == "output" ? "output" + std::to_string(t.index) : name;
    const std::string what = name == as_model ? config_what : config_what + " (the model's " + as_model + ")";
    const json::value* type = io.if_contains("data_type");
    const std::string type_name = type && type->is_string() ? json::value_to<std::string>(*type) : "";
    if (type_name != config_type_name(t.type))
      config_error(what + ": data_type " + type_name + ", the model's is " + std::string(config_type_name(t.type)));
    const std::vector<std::int64_t> dims = read_dims(io, what), want = t.dims(batched);
    const std::string why = batched ? " (its shape " + shape_text(t.shape) + " without the batch dimension, as max_batch_size > 0)" : "";
    if (const json::value* r = io.if_contains("reshape"); r && r->is_object()) {
      // Requests give `dims`; the model sees the reshape, which must be its own dims.
      const std::vector<std::int64_t> shape = read_dims_of(r->as_object(), "shape", what + " reshape");
      if (shape != want) config_error(what + ": reshape shape " + shape_text(shape) + ", the model's dims are " + shape_text(want) + why);
      if (elements(dims) != elements(shape))
        config_error(what + ": dims " + shape_text(dims) + " and reshape shape " + shape_text(shape) + " hold different numbers of elements");
    } else if (dims != want) {
      config_error(what + ": dims " + shape_text(dims) + ", the model's are " + shape_text(want) + why);
    }
  }
  if (all_required)
    for (std::size_t k = 0; k < served.size(); ++k)
      if (!seen[k]) config_error(std::string("the config lists inputs but not \"") + served[k].name + "\", which the model needs");
}

struct completed_config {
  serving_layout layout;
  bool changed = false;  ///< true: `config` was completed and should be given to the server
  json::object config;
};

/// Completes (when `auto_complete`) and checks `config` against the model's tensors.
inline completed_config complete_config(json::object config, const std::vector<model_tensor>& inputs, const std::vector<model_tensor>& outputs,
                                        bool auto_complete) {
  completed_config r;
  const json::array* given_in = array_field(config, "input");
  const json::array* given_out = array_field(config, "output");
  const bool has_in = given_in && !given_in->empty(), has_out = given_out && !given_out->empty();
  std::int64_t m = 0;
  if (const json::value* v = config.if_contains("max_batch_size")) {
    const auto x = as_int(*v);
    if (!x || *x < 0) config_error("max_batch_size must be a whole number >= 0");
    m = *x;
  }
  const auto b = common_batch(inputs, outputs);
  bool symbolic = false;  // a Relax function interpreted with dimensions known only at run time
  for (const auto* list : {&inputs, &outputs})
    for (const model_tensor& t : *list) symbolic = symbolic || std::find(t.shape.begin(), t.shape.end(), -1) != t.shape.end();
  if (m > 0 && symbolic)
    config_error("max_batch_size " + std::to_string(m) + ": the model has dimensions known only at run time (" + describe_shapes(inputs, outputs) +
                 "); serve it with max_batch_size 0, where each request gives its own size for every dim -1");
  if ((!has_in || !has_out) && !auto_complete)
    config_error("the config lists no " + std::string(has_in ? "outputs" : "inputs") +
                 " and auto-completion is disabled (--disable-auto-complete-config): list them, or let the backend complete them");
  if (m > 0 && !b)
    config_error("max_batch_size " + std::to_string(m) + ": the model cannot be batched, its inputs and outputs share no leading dimension (" +
                 describe_shapes(inputs, outputs) + "); use max_batch_size 0");
  serving_layout& L = r.layout;
  L.max_batch_size = m;
  L.rows_per_run = m > 0 ? *b : 1;
  for (const model_tensor& t : inputs) L.inputs.push_back(serve(t, t.name, m > 0));
  for (const model_tensor& t : outputs) L.outputs.push_back(serve(t, "output" + std::to_string(t.index), m > 0));

  if (has_out) name_outputs(*given_out, outputs, L.outputs);
  if (has_in) check_entries(*given_in, L.inputs, m > 0, "input", true);
  if (has_out) check_entries(*given_out, L.outputs, m > 0, "output", false);
  if (!has_in || !has_out) {
    config["max_batch_size"] = m;
    if (!has_in) {
      json::array a;
      for (const served_tensor& t : L.inputs) a.push_back(config_entry(t, m > 0));
      config["input"] = std::move(a);
    }
    if (!has_out) {
      json::array a;
      for (const served_tensor& t : L.outputs) a.push_back(config_entry(t, m > 0));
      config["output"] = std::move(a);
    }
    r.changed = true;
  }
  r.config = std::move(config);
  return r;
}

}  // namespace gexec_triton
