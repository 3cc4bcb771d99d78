#pragma once
// gexec-run: inputs from the command line and files, outputs printed and written.
#include "load.hpp"
#include "values.hpp"

namespace gexec_run {

// ---- inputs, outputs, checks -------------------------------------------------------------

/// "name=..." split at the first '='; the name may also be an index.
inline std::pair<std::string, std::string> split_spec(const std::string& spec, const std::string& flag) {
  const auto eq = spec.find('=');
  if (eq == std::string::npos || eq == 0) fail(flag + " " + spec + ": expected NAME=VALUES, NAME=@FILE.npy, NAME=@FILE.bin or @FILE.npz");
  return {spec.substr(0, eq), spec.substr(eq + 1)};
}

/// The input or output `name` names: its full name ("softmax:0"), its plain name as TVM's
/// users write it ("softmax", when one output has it), or its index.
inline int find_named(const std::vector<gexec::tensor_info>& infos, const std::string& name, const std::string& flag, const std::string& kind) {
  for (std::size_t i = 0; i < infos.size(); ++i)
    if (infos[i].name == name) return static_cast<int>(i);
  int plain = -1, plain_count = 0;
  for (std::size_t i = 0; i < infos.size(); ++i) {
    const auto colon = infos[i].name.rfind(':');
    if (colon != std::string::npos && infos[i].name.compare(0, colon, name) == 0 && colon == name.size()) {
      plain = static_cast<int>(i);
      ++plain_count;
    }
  }
  if (plain_count == 1) return plain;
  int index = -1;
  const auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), index);
  if (ec == std::errc{} && end == name.data() + name.size() && index >= 0 && static_cast<std::size_t>(index) < infos.size()) return index;
  std::string known;
  for (const auto& i : infos) known += (known.empty() ? "" : ", ") + i.name;
  fail(flag + " " + name + ": the model has no " + kind + " of that name or index (" + kind + "s: " + known + ")");
}

/// A .npy file read as `dtype`. A bfloat16 or float8 tensor may also come as the uint16 or
/// uint8 bit patterns TVM 0.19's NDArray.numpy() gives its Python users: read bit for bit.
inline gexec::ndarray read_npy_as(const std::string& path, DLDataType dtype) {
  const bool float8 = dtype.code == gexec::tvm_float8_e4m3_code || dtype.code == gexec::tvm_float8_e5m2_code;
  if (dtype.code != kDLBfloat && !float8) return gexec::load_npy_file(path, dtype);
  try {
    return gexec::load_npy_file(path, dtype);
  } catch (const gexec::error& e) {
    if (e.code() != gexec::errc::dtype_mismatch) throw;
    gexec::ndarray bits = gexec::load_npy_file(path);
    if (!gexec::same_dtype(bits.dtype(), DLDataType{kDLUInt, dtype.bits, dtype.lanes})) throw;
    DLTensor t = bits.dltensor();
    t.dtype = dtype;
    return gexec::ndarray::view(t, bits.storage_owner());
  }
}

/// A raw little-endian file holding exactly the tensor's bytes in the model's dtype and shape.
inline gexec::ndarray read_raw(const std::string& path, const gexec::tensor_info& info, const std::string& what) {
  gexec::ndarray a = gexec::ndarray::empty(info.shape, info.dtype);
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  if (ec) throw gexec::error(gexec::errc::io, what + ": cannot read " + path + " (" + ec.message() + ")");
  if (size != a.byte_size())
    throw gexec::error(gexec::errc::shape_mismatch, what + ": " + path + " holds " + std::to_string(size) + " bytes; the model's " +
                                                        gexec::to_string(info.dtype) + gexec::detail::shape_to_string(info.shape) +
                                                        " takes " + std::to_string(a.byte_size()));
  std::ifstream f(path, std::ios::binary);
  if (!f.read(static_cast<char*>(a.data()), static_cast<std::streamsize>(size)))
    throw gexec::error(gexec::errc::io, what + ": cannot read " + path);
  return a;
}

inline gexec::ndarray read_tensor(const std::string& value, const gexec::tensor_info& info, const std::string& what) {
  if (value.size() > 5 && value.front() == '@' && value.ends_with(".bin")) return read_raw(value.substr(1), info, what);
  if (!value.empty() && value.front() == '@') {
    gexec::ndarray a = read_npy_as(value.substr(1), info.dtype);
    if (!gexec::same_dtype(a.dtype(), info.dtype))
      throw gexec::error(gexec::errc::dtype_mismatch, what + ": " + value.substr(1) + " holds " + gexec::to_string(a.dtype()) + ", the model wants " +
                                                          gexec::to_string(info.dtype));
    if (!std::equal(a.shape().begin(), a.shape().end(), info.shape.begin(), info.shape.end()))
      throw gexec::error(gexec::errc::shape_mismatch, what + ": " + value.substr(1) + " has shape " + gexec::detail::shape_to_string(a.shape()) +
                                                          ", the model wants " + gexec::detail::shape_to_string(info.shape));
    return a;
  }
  return gexec_run::parse_values(value, info.shape, info.dtype, what);
}

/// Sets the inputs given with --input; those not given come from `dump` (TVM's dump of the
/// run compared with) where it holds them, else are zeros with --zero-missing, else an error.
inline void set_inputs(const options& o, loaded& l, const gexec::param_dict* dump = nullptr) {
  const auto infos = l.ex().get_input_info();  // the inputs that are not parameters
  std::vector<bool> given(infos.size(), false);
  for (const std::string& spec : o.inputs) {
    if (spec.starts_with("@") && spec.ends_with(".npz")) {  // every array of the archive, by input name
      for (auto& [name, value] : gexec::load_npz_file(spec.substr(1))) {
        const auto i = static_cast<std::size_t>(find_named(infos, name, "--input " + spec + ":", "input"));
        if (given[i]) fail("--input " + spec + ": input " + infos[i].name + " is given twice; give each input once");
        const std::string what = "--input " + spec + ": " + name;
        if (!gexec::same_dtype(value.dtype(), infos[i].dtype))
          throw gexec::error(gexec::errc::dtype_mismatch, what + " holds " + gexec::to_string(value.dtype()) + ", the model wants " +
                                                              gexec::to_string(infos[i].dtype));
        if (!std::equal(value.shape().begin(), value.shape().end(), infos[i].shape.begin(), infos[i].shape.end()))
          throw gexec::error(gexec::errc::shape_mismatch, what + " has shape " + gexec::detail::shape_to_string(value.shape()) +
                                                              ", the model wants " + gexec::detail::shape_to_string(infos[i].shape));
        l.ex().set_input(infos[i].name, value);
        given[i] = true;
      }
      continue;
    }
    const auto [name, value] = split_spec(spec, "--input");
    const auto i = static_cast<std::size_t>(find_named(infos, name, "--input", "input"));
    if (given[i]) fail("--input " + name + ": input " + infos[i].name + " is given twice; give each input once");
    l.ex().set_input(infos[i].name, read_tensor(value, infos[i], "--input " + name));
    given[i] = true;
  }
  if (dump != nullptr) {
    std::vector<std::string> skip;
    for (std::size_t i = 0; i < infos.size(); ++i)
      if (given[i]) skip.push_back(infos[i].name);
    for (const std::string& name : gexec::set_inputs_from_dump(l.ex(), *dump, skip)) {
      given[static_cast<std::size_t>(find_named(infos, name, "--compare-dump", "input"))] = true;
      std::cout << "input " << name << ": from the dump\n";
    }
  }
  // Without --params a split model's weights look like inputs: never zero-filled.
  const bool weights_unknown = !o.graph.empty() && o.params.empty();
  std::string missing;
  for (std::size_t i = 0; i < infos.size(); ++i)
    if (!given[i]) {
      if (o.zero_missing && !weights_unknown) {
        auto zeros = gexec::ndarray::empty(infos[i].shape, infos[i].dtype);
        if (zeros.byte_size()) std::memset(zeros.data(), 0, static_cast<std::size_t>(zeros.byte_size()));
        l.ex().set_input(infos[i].name, zeros);
      } else {
        missing += (missing.empty() ? "" : ", ") + infos[i].name + " (" + gexec::to_string(infos[i].dtype) +
                   gexec::detail::shape_to_string(infos[i].shape) + ")";
      }
    }
  if (missing.empty()) return;
  if (weights_unknown)
    fail("no value given for input " + missing + ": without --params these may be the model's weights; give them with --params FILE " +
         "(TVM's params blob, .safetensors or .npz), and the inputs with --input NAME=... (--zero-missing never fills weights)");
  fail("no value given for input " + missing + "; give each with --input NAME=..., or pass --zero-missing");
}

inline void print_tensor(const std::string& name, const gexec::ndarray& a, int limit) {
  std::cout << name << ": " << gexec::to_string(a.dtype()) << gexec::detail::shape_to_string(a.shape()) << " =";
  const std::uint64_t count = a.numel() * a.dtype().lanes;
  const std::uint64_t shown = limit < 0 ? count : std::min<std::uint64_t>(count, static_cast<std::uint64_t>(limit));
  for (std::uint64_t i = 0; i < shown; ++i) std::cout << ' ' << gexec_run::format_element(a, i);
  std::cout << (count > shown ? " ...\n" : "\n");
}

/// A file name from a tensor name: letters, digits, '.', '-' and '_' kept, others '_'.
inline std::string file_stem(const std::string& name) {
  std::string s;
  for (char c : name) s += (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_') ? c : '_';
  return s.empty() || s[0] == '.' ? "_" + s : s;
}

// ---- per-node dumps: --dump-dir writes them, --compare-dump reads them back ---------
//
// gexec's dump of one run is a folder of .npy files, one a node output (inputs and
// parameters included): DIR/<node id>_<node name>_<output index>.npy, the id zero-padded
// to the width of the last node's so that names sort in graph order. --compare-dump reads
// it, or TVM's debug executor's output_tensors.params, keyed by gexec::dump_key.

/// The file name (without .npy) of output `index` of node `nid` of `g` in a dump.
inline std::string node_dump_stem(const gexec::graph& g, std::uint32_t nid, std::uint32_t index) {
  const std::size_t width = std::to_string(g.nodes.empty() ? 0 : g.nodes.size() - 1).size();
  std::string id = std::to_string(nid);
  id.insert(0, width - std::min(width, id.size()), '0');
  return id + "_" + file_stem(g.nodes[nid].name) + "_" + std::to_string(index);
}

/// A dtype mapping (a Relax executable's bool and float8 codes to gexec's and back); null: none.
using dtype_map = DLDataType (*)(DLDataType) noexcept;

/// `a` with its dtype mapped by `map`: a view of the same bytes where the dtype changes.
inline gexec::ndarray retyped(const gexec::ndarray& a, dtype_map map) {
  if (map == nullptr || !a.defined() || gexec::same_dtype(map(a.dtype()), a.dtype())) return a;
  DLTensor t = a.dltensor();
  t.dtype = map(t.dtype);
  return gexec::ndarray::view(t, a.storage_owner());
}

/// Writes every node output of one run of `g` (gexec::debug_get_outputs) under `dir`, each
/// dtype mapped by `map`; returns how many files it wrote.
inline std::size_t write_node_dump(const std::string& dir, const gexec::graph& g, const std::vector<gexec::node_output>& outputs,
                                   dtype_map map = nullptr) {
  std::size_t files = 0;
  for (const gexec::node_output& out : outputs) {
    gexec::save_npy_file(fs::path(dir) / (node_dump_stem(g, out.node_id, out.index) + ".npy"), retyped(out.value, map));
    ++files;
  }
  return files;
}

/// The reference dump --compare-dump names, keyed as gexec::compare_dump looks its tensors
/// up: TVM's debug executor's (a file, or a folder holding output_tensors.params or one
/// _tvmdbg_device_* folder: gexec::find_dump_file), or else a folder gexec-run --dump-dir
/// wrote for the same graph, each tensor's dtype mapped by `map`. `file` is set to what
/// was read.
inline gexec::param_dict read_reference_dump(const std::string& dir, const gexec::graph& g, fs::path& file, dtype_map map = nullptr) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) throw gexec::error(gexec::errc::io, "--compare-dump " + dir + ": no such file or directory");
  bool tvm = !fs::is_directory(dir, ec) || fs::is_regular_file(fs::path(dir) / "output_tensors.params", ec);
  if (!tvm)
    for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) tvm = tvm || e.path().filename().string().starts_with("_tvmdbg_device_");
  if (tvm) {
    file = gexec::find_dump_file(dir);
    return gexec::load_param_dict_file(file);
  }
  file = dir;
  gexec::param_dict dump;
  for (std::uint32_t nid = 0; nid < g.nodes.size(); ++nid)
    for (std::uint32_t k = 0; k < g.nodes[nid].num_outputs; ++k) {
      const fs::path p = fs::path(dir) / (node_dump_stem(g, nid, k) + ".npy");
      if (fs::is_regular_file(p, ec)) dump.set(gexec::dump_key(g.nodes[nid].name, nid, k), retyped(gexec::load_npy_file(p), map));
    }
  if (dump.size() == 0)
    throw gexec::error(gexec::errc::io, "--compare-dump " + dir + ": holds neither TVM's output_tensors.params (or a _tvmdbg_device_* folder) nor " +
                                            "a file gexec-run --dump-dir writes for this graph (such as " +
                                            (g.nodes.empty() ? std::string("0_<node>_0") : node_dump_stem(g, 0, 0)) + ".npy): a dump of another model?");
  return dump;
}

inline void make_dir(const std::string& dir, const std::string& flag) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir)) throw gexec::error(gexec::errc::io, flag + " " + dir + ": cannot create the directory (" + ec.message() + ")");
}

/// Output i's name in an .npz: the graph's name for it without a ":0" its node's only
/// output needs not ("softmax"), unless another output would then have the same name.
inline std::string output_name(const std::vector<gexec::tensor_info>& infos, std::size_t i) {
  const std::string& full = infos[i].name;
  if (!full.ends_with(":0")) return full;
  const std::string plain = full.substr(0, full.size() - 2);
  for (std::size_t k = 0; k < infos.size(); ++k)
    if (k != i && (infos[k].name == plain || infos[k].name.starts_with(plain + ":"))) return full;
  return plain;
}

inline void write_text(const std::string& path, const std::string& text, const std::string& flag) {
  std::ofstream f(path, std::ios::binary);
  f << text;
  f.close();
  if (!f) throw gexec::error(gexec::errc::io, flag + " " + path + ": cannot write the file");
}

}  // namespace gexec_run
