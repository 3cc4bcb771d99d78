#pragma once
// gexec-run: outputs checked against expected ones (--expected), every node against TVM's
// dump (--compare-dump), and reference bundles (--make-bundle, --verify).
#include "bundle.hpp"
#include "sha256.hpp"
#include "io.hpp"

namespace gexec_run {

/// Checks every --expected before anything runs: a name or index the model has no output
/// of, or a file that cannot be read, is an error now, not after a long run.
inline void check_expected_specs(const options& o, const loaded& l) {
  const auto infos = l.ex().get_output_info();
  for (const std::string& spec : o.expected) {
    const auto [name, value] = split_spec(spec, "--expected");
    if (value.empty() || value.front() != '@') fail("--expected " + spec + ": expected NAME=@FILE.npy");
    (void)find_named(infos, name, "--expected", "output");
    std::error_code ec;
    if (!fs::is_regular_file(value.substr(1), ec)) fail("--expected " + spec + ": " + value.substr(1) + " is not a readable file");
  }
}

/// Compares `got` with `want` element by element within --atol/--rtol (as compare_dump
/// does: integers as integers, floats with their ULPs); prints the verdict on one line;
/// true when they match.
inline bool compare_arrays(const std::string& label, const gexec::ndarray& got, const gexec::ndarray& want, const options& o) {
  if (!gexec::same_dtype(want.dtype(), got.dtype()) || !std::equal(want.shape().begin(), want.shape().end(), got.shape().begin(), got.shape().end())) {
    std::cout << "MISMATCH " << label << ": got " << gexec::to_string(got.dtype()) << gexec::detail::shape_to_string(got.shape()) << ", expected "
              << gexec::to_string(want.dtype()) << gexec::detail::shape_to_string(want.shape()) << '\n';
    return false;
  }
  gexec::node_comparison c;
  gexec::detail::compare_tensors(got, want, {.atol = o.atol, .rtol = o.rtol}, c);
  const std::string ulps = (c.is_float ? ", max ulps " + std::to_string(c.max_ulps) : "") +
                           (c.nan_mismatched ? "; " + std::to_string(c.nan_mismatched) + " of them NaN on one side only" : "");
  if (c.mismatched == 0) {
    std::cout << "MATCH " << label << " (max abs diff " << c.max_abs << ulps << ")\n";
    return true;
  }
  std::cout << "MISMATCH " << label << ": " << c.mismatched << " of " << c.count << " elements differ beyond atol " << o.atol << " rtol " << o.rtol
            << "; first at element " << c.first_mismatch << ": got " << gexec_run::format_element(got, c.first_mismatch) << ", expected "
            << gexec_run::format_element(want, c.first_mismatch) << " (max abs diff " << c.max_abs << ulps << ")\n";
  return false;
}

/// Compares output `index` with the .npy file; prints the verdict; true when it matches.
inline bool check_expected(const std::string& spec, loaded& l, const options& o) {
  const auto infos = l.ex().get_output_info();
  const auto [name, value] = split_spec(spec, "--expected");
  const int index = find_named(infos, name, "--expected", "output");
  const gexec::tensor_info& info = infos[static_cast<std::size_t>(index)];
  const gexec::ndarray want = read_npy_as(value.substr(1), info.dtype);
  return compare_arrays("output " + std::to_string(index) + " (" + info.name + ")", l.output(index), want, o);
}

// ---- every node against TVM's dump ---------------------------------------------------

/// --compare-dump: every node's outputs against TVM's dump, as a table in graph order, then
/// the first node beyond the tolerance in detail; false when there is one.
template <class Executor>
bool compare_with_dump(const options& o, Executor& ex, const gexec::param_dict& dump, const fs::path& file) {
  gexec::dump_comparison c = gexec::compare_dump(ex, dump, {.atol = o.atol, .rtol = o.rtol});
  c.file = file;
  std::cout << "every node's outputs against " << file.string() << " (atol " << o.atol << ", rtol " << o.rtol << "):\n" << c.table();
  std::size_t within = 0;
  for (const auto& n : c.nodes) within += n.within() ? 1 : 0;
  std::cout << within << " of " << c.nodes.size() << " node outputs within the tolerance";
  if (c.missing) std::cout << ", " << c.missing << " not in the dump";
  std::cout << '\n';
  if (const gexec::node_comparison* first = c.first_divergence()) {
    std::cout << "FIRST DIVERGENCE at " << c.describe(*first);
    return false;
  }
  const std::size_t compared = c.nodes.size() - c.missing;
  if (!c.complete() && !o.allow_missing) {
    std::cout << "INCOMPLETE: the dump holds " << compared << " of the graph's " << c.nodes.size()
              << " node outputs; the others were not compared (--allow-missing accepts that)\n";
    return false;
  }
  std::cout << "MATCH: " << compared << " of " << c.nodes.size() << " node outputs compared, all agree "
            << (o.atol == 0 && o.rtol == 0 ? "bit for bit (atol 0, rtol 0)" : "within atol " + std::to_string(o.atol) + ", rtol " + std::to_string(o.rtol))
            << '\n';
  return true;
}

// ---- reference bundles ---------------------------------------------------------------
//
// A bundle is a folder: the model (model.so, or graph.json + lib.so + params.bin or
// params.safetensors), inputs.npz, expected.npz (one array per output, by the graph's
// output names) and bundle.txt, "key value" lines:
//
//   gexec-bundle 1
//   model model.so                (or: graph graph.json / lib lib.so / params params.bin)
//   inputs inputs.npz
//   expected expected.npz
//   atol 1e-05
//   rtol 0

/// --make-bundle OUT: the model's files, the inputs of this run, and as expected outputs
/// this run's (or --bundle-expected's, TVM's outputs as .npz), with the tolerances.
inline void make_bundle(const options& o, loaded& l) {
  const fs::path out = o.make_bundle;
  make_dir(out.string(), "--make-bundle");
  std::string manifest = "gexec-bundle 1\n";
  std::vector<std::string> files = {"inputs.npz", "expected.npz"};  // every file the bundle holds, for its checksums
  auto copy = [&](const std::string& from, const std::string& key, std::string name) {
    if (key == "params") {  // TVM's blob is params.bin; other formats keep their extension, as the sniff table knows them
      const auto format = gexec::param_format_table::sniff(gexec::param_input::file(from));
      if (format.format != gexec::tvm_blob_source::format) name = "params" + std::string(format.extension);
    }
    std::error_code ec;
    fs::copy_file(from, out / name, fs::copy_options::overwrite_existing, ec);
    if (ec) throw gexec::error(gexec::errc::io, "--make-bundle: cannot copy " + from + " to " + (out / name).string() + " (" + ec.message() + ")");
    manifest += key + " " + name + "\n";
    files.push_back(name);
  };
  if (!o.model.empty()) {
    copy(o.model, "model", "model.so");
  } else {
    copy(o.graph, "graph", "graph.json");
    copy(o.lib, "lib", "lib.so");
    if (!o.params.empty()) copy(o.params, "params", "params.bin");
  }
  std::vector<std::pair<std::string, gexec::ndarray>> inputs;
  for (const auto& info : l.ex().get_input_info()) {
    const gexec::ndarray v = l.ex().get_input(l.ex().get_input_index(info.name));
    if (v.device().device_type != kDLCPU) fail("--make-bundle: input " + info.name + " lives on a device; make bundles from runs on the host");
    gexec::ndarray host = gexec::ndarray::empty(info.shape, info.dtype);
    host.copy_from(v);
    inputs.emplace_back(info.name, host);
  }
  write_text((out / "inputs.npz").string(), gexec::save_npz(inputs), "--make-bundle");
  const auto infos = l.ex().get_output_info();
  std::vector<std::pair<std::string, gexec::ndarray>> expected;
  if (!o.bundle_expected.empty()) {  // TVM's outputs: every output of this model once, with its dtype and shape
    const std::string where = "--bundle-expected " + o.bundle_expected + ":";
    std::vector<std::optional<gexec::ndarray>> given(infos.size());
    for (auto& [name, value] : gexec::load_npz_file(o.bundle_expected)) {
      const auto i = static_cast<std::size_t>(find_named(infos, name, where, "output"));
      if (!gexec::same_dtype(value.dtype(), infos[i].dtype) ||
          !std::equal(value.shape().begin(), value.shape().end(), infos[i].shape.begin(), infos[i].shape.end()))
        fail(where + " " + name + " is " + gexec::to_string(value.dtype()) + gexec::detail::shape_to_string(value.shape()) + ", output " +
             infos[i].name + " is " + gexec::to_string(infos[i].dtype) + gexec::detail::shape_to_string(infos[i].shape));
      if (given[i]) fail(where + " output " + std::to_string(i) + " (" + infos[i].name + ") is held twice");
      given[i] = value;
    }
    for (std::size_t i = 0; i < infos.size(); ++i) {
      if (!given[i]) fail(where + " holds no output " + std::to_string(i) + " (" + infos[i].name + "): a bundle holds every output");
      expected.emplace_back(output_name(infos, i), *given[i]);
    }
  } else {
    for (int i = 0; i < l.ex().get_num_outputs(); ++i) expected.emplace_back(output_name(infos, static_cast<std::size_t>(i)), l.output(i));
  }
  write_text((out / "expected.npz").string(), gexec::save_npz(expected), "--make-bundle");
  char tol[96];
  std::snprintf(tol, sizeof tol, "atol %.10g\nrtol %.10g\n", o.atol, o.rtol);
  manifest += "inputs inputs.npz\nexpected expected.npz\n";
  for (const auto& [name, value] : expected) manifest += "output " + name + "\n";
  manifest += tol;
  for (const std::string& file : files) manifest += "sha256 " + file + " " + sha256_file(out / file) + "\n";
  write_text((out / "bundle.txt").string(), manifest, "--make-bundle");
  std::cout << "wrote a bundle to " << out.string() << ": the model, " << inputs.size() << " inputs, " << expected.size() << " expected outputs ("
            << (o.bundle_expected.empty() ? "this run's" : "from " + o.bundle_expected) << "), atol " << o.atol << " rtol " << o.rtol << '\n';
}

/// --verify BUNDLE: the options that run it (model, inputs; the bundle's tolerances unless
/// --atol/--rtol are given). Every file it names must be a regular file inside it, and
/// every file it gives a checksum of must have it (o.bundle_intact is false, and what
/// differs printed, otherwise: nothing is run).
inline options read_bundle(options o) {
  const fs::path dir = o.verify;
  const fs::path manifest = dir / "bundle.txt";
  std::error_code ec;
  if (!fs::is_regular_file(manifest, ec))
    throw gexec::error(gexec::errc::io, "--verify " + o.verify + ": no bundle.txt in it (a folder gexec-run --make-bundle wrote)");
  std::ifstream f(manifest, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (!f && !f.eof()) throw gexec::error(gexec::errc::io, "--verify " + manifest.string() + ": cannot read it");
  const gexec_run::bundle_manifest m = gexec_run::parse_bundle_manifest(text, manifest.string());
  auto in_bundle = [&](const std::string& name) -> std::string {
    if (name.empty()) return {};
    const fs::path p = dir / name;
    if (fs::is_symlink(p, ec)) fail("--verify " + o.verify + ": " + name + " is a symbolic link; a bundle holds its files itself");
    if (!fs::is_regular_file(p, ec)) fail("--verify " + o.verify + ": " + name + ", which bundle.txt names, is not a file in it");
    return p.string();
  };
  o.model = in_bundle(m.model);
  o.graph = in_bundle(m.graph);
  o.lib = in_bundle(m.lib);
  o.params = in_bundle(m.params);
  if (!m.inputs.empty()) o.inputs.push_back("@" + in_bundle(m.inputs));
  o.bundle_expected = in_bundle(m.expected);
  o.bundle_outputs = m.outputs;
  if (m.sha256.empty()) std::cout << "the bundle " << o.verify << " records no checksums of its files (made before they were recorded)\n";
  for (const auto& [name, digest] : m.sha256) {
    const std::string got = sha256_file(in_bundle(name));
    if (got == digest) continue;
    std::cout << "MISMATCH file " << name << ": its SHA-256 is " << got << ", bundle.txt records " << digest << '\n';
    o.bundle_intact = false;
  }
  if (!o.tolerance_given) {
    o.atol = m.atol.value_or(o.atol);
    o.rtol = m.rtol.value_or(o.rtol);
  }
  return o;
}

/// Compares the bundle's expected.npz with the outputs: it must hold every output of the
/// model, each once (by name or index), and the ones bundle.txt lists, no fewer.
inline bool verify_outputs(const options& o, loaded& l) {
  const auto infos = l.ex().get_output_info();
  const std::string where = "--verify: " + o.bundle_expected + ":";
  if (!o.bundle_outputs.empty()) {
    std::vector<std::string> names;
    for (std::size_t i = 0; i < infos.size(); ++i) names.push_back(output_name(infos, i));
    if (o.bundle_outputs != names) {
      std::string listed, have;
      for (const auto& n : o.bundle_outputs) listed += (listed.empty() ? "" : ", ") + n;
      for (const auto& n : names) have += (have.empty() ? "" : ", ") + n;
      std::cout << "FAILED: the bundle " << o.verify << " lists the outputs " << listed << "; the model's are " << have << '\n';
      return false;
    }
  }
  std::vector<int> seen(infos.size(), 0);
  bool all = true;
  for (auto& [name, want] : gexec::load_npz_file(o.bundle_expected)) {
    const int i = find_named(infos, name, where, "output");
    if (seen[static_cast<std::size_t>(i)]++) fail(where + " output " + std::to_string(i) + " (" + infos[static_cast<std::size_t>(i)].name + ") is held twice");
    all = compare_arrays("output " + std::to_string(i) + " (" + infos[static_cast<std::size_t>(i)].name + ")", l.output(i), want, o) && all;
  }
  std::size_t held = 0;
  for (std::size_t i = 0; i < infos.size(); ++i) {
    if (seen[i]) {
      ++held;
      continue;
    }
    std::cout << "MISSING output " << i << " (" << infos[i].name << "): expected.npz does not hold it\n";
    all = false;
  }
  std::cout << (all ? "VERIFIED: " : "FAILED: ") << "the bundle " << o.verify << ", " << held << " of " << infos.size()
            << " outputs against expected.npz (atol " << o.atol << ", rtol " << o.rtol << ")\n";
  return all;
}

}  // namespace gexec_run
