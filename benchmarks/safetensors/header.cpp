// Reading a .safetensors header of many tensors (a real LLM checkpoint has thousands):
// load_param_dict over files of 10^3, 10^4 and 10^5 tensors of one float32 each, against
// Boost.JSON's parse of the same header text alone (the least a reader that checks the
// JSON can do), measured in the same run. A linear reader keeps its time per tensor flat
// as the count grows 10x, and its ratio to the bare parse steady.
//
//   gexec_bench_safetensors [MAX_TENSORS]    (default 100000)

#include <gexec/params.hpp>

#include <boost/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace {

template <class F>
double median_ms(F&& f, int runs) {
  std::vector<double> t;
  for (int i = 0; i < runs; ++i) {
    const auto start = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const long max_tensors = argc > 1 ? std::atol(argv[1]) : 100000;
  std::printf("gexec_bench_safetensors: load_param_dict of a .safetensors file against boost::json::parse of its header\n");
  double first_per_tensor = 0;
  for (const int n : {1000, 10000, 100000}) {
    if (n > max_tensors) break;
    std::vector<std::pair<std::string, gexec::ndarray>> tensors;
    tensors.reserve(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) {
      // names as checkpoints spell them: long, sharing prefixes
      tensors.emplace_back("model.layers." + std::to_string(i / 16) + ".self_attn.proj_" + std::to_string(i % 16) + ".weight",
                           gexec::ndarray::empty({1}, gexec::dtypes::float32));
      *static_cast<float*>(tensors.back().second.data()) = static_cast<float>(i);
    }
    const std::vector<std::byte> file = gexec::save_safetensors(tensors);
    std::uint64_t header_bytes = 0;
    std::memcpy(&header_bytes, file.data(), 8);
    const boost::json::string_view header(reinterpret_cast<const char*>(file.data()) + 8, static_cast<std::size_t>(header_bytes));
    const int runs = n >= 100000 ? 3 : 7;
    std::size_t loaded = 0;
    const double gexec_ms = median_ms([&] { loaded = gexec::load_param_dict(std::span<const std::byte>(file)).size(); }, runs);
    std::size_t keys = 0;
    const double json_ms = median_ms([&] { keys = boost::json::parse(header).as_object().size(); }, runs);
    if (loaded != static_cast<std::size_t>(n) || keys != static_cast<std::size_t>(n)) {
      std::fprintf(stderr, "gexec_bench_safetensors: read %zu tensors and %zu keys of %d\n", loaded, keys, n);
      return 1;
    }
    const double per_tensor_us = gexec_ms * 1e3 / n;
    if (first_per_tensor == 0) first_per_tensor = per_tensor_us;
    std::printf("  %6d tensors (%8.2f MB header): load_param_dict %9.2f ms (%6.3f us/tensor, %.2fx the 10^3 file's)   "
                "boost::json::parse %8.2f ms   ratio %.2f\n",
                n, static_cast<double>(header_bytes) / 1e6, gexec_ms, per_tensor_us, per_tensor_us / first_per_tensor, json_ms,
                json_ms / gexec_ms);
  }
  return 0;
}
