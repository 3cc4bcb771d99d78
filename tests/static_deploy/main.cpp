// A TVM-compiled model linked into one static program: graph and parameters embedded,
// kernels linked in as a system library (gexec_add_model), TVM's inputs and outputs for
// the model embedded too (gexec_embed_file). It reads no file: it runs the model on the
// inputs and compares every output with TVM's, within the model's stated tolerance.
//
//   static_model      exit status 0 when every output matches

#include <gexec/executor.hpp>
#include <gexec/packed_c/system_lib.hpp>

#include <gexec_models/inputs.hpp>
#include <gexec_models/model.hpp>
#include <gexec_models/outputs.hpp>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#ifndef GEXEC_STATIC_EXACT
#error "GEXEC_STATIC_EXACT, GEXEC_STATIC_RTOL and GEXEC_STATIC_ATOL give the model's tolerance"
#endif

namespace {

/// Element i as a double, for float32/float64 and the integer dtypes.
double element(const gexec::ndarray& a, std::uint64_t i) {
  const DLDataType t = a.dtype();
  const auto* p = static_cast<const char*>(a.data()) + i * gexec::element_bytes(t);
  auto load = [p]<class T>(T) {
    T v;
    std::memcpy(&v, p, sizeof v);
    return static_cast<double>(v);
  };
  if (t.code == kDLFloat && t.bits == 32) return load(float{});
  if (t.code == kDLFloat && t.bits == 64) return load(double{});
  if (t.code == kDLInt && t.bits == 32) return load(std::int32_t{});
  if (t.code == kDLInt && t.bits == 64) return load(std::int64_t{});
  throw gexec::error(gexec::errc::invalid_argument, "static_model compares no " + gexec::to_string(t) + " outputs");
}

}  // namespace

int main() {
  try {
    gexec::system_lib kernels;
    std::printf("%s\n", kernels.describe().c_str());
    auto ex = gexec::create(gexec_models::model::graph_json(), kernels, {gexec::cpu()});
    ex.load_params(gexec_models::model::params());
    const gexec::param_dict inputs = gexec::load_param_dict(gexec_models::inputs::bytes());
    const gexec::param_dict outputs = gexec::load_param_dict(gexec_models::outputs::bytes());
    for (const auto& [name, value] : inputs) ex.set_input(name, value);
    ex.run();

    int bad = 0;
    for (int i = 0; i < ex.get_num_outputs(); ++i) {
      const gexec::ndarray* want = outputs.find(std::to_string(i));
      const gexec::ndarray& got = ex.get_output(i);
      if (!want || !gexec::same_dtype(got.dtype(), want->dtype()) || got.numel() != want->numel()) {
        std::printf("output %d: not TVM's dtype or size\n", i);
        ++bad;
        continue;
      }
      const bool identical = std::memcmp(got.data(), want->data(), want->byte_size()) == 0;
      double worst = 0;
      std::uint64_t differ = 0;
      for (std::uint64_t k = 0; k < want->numel(); ++k) {
        const double a = element(got, k), b = element(*want, k), diff = std::fabs(a - b);
        worst = std::fmax(worst, diff);
        if (diff > GEXEC_STATIC_ATOL + GEXEC_STATIC_RTOL * std::fabs(b)) ++differ;
      }
      const bool ok = GEXEC_STATIC_EXACT ? identical : differ == 0;
      std::printf("output %d: %s, max |diff| = %.3g, %s\n", i, ok ? "matches TVM" : "DIFFERS from TVM", worst,
                  identical ? "bit-identical" : "not bit-identical");
      bad += !ok;
    }
    return bad == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "static_model: %s\n", e.what());
    return 1;
  }
}
