// Two figures, each against a baseline measured in the same run, interleaved:
//  1. a chain of N small CUDA kernels: eager launches (run(), the baseline) against CUDA
//     Graph replay (run(gexec::cuda_graph{}));
//  2. four independent kernels that each keep only 16 blocks busy (fused_row_sum over
//     16 x 262144 floats): one stream (run(), the baseline) against
//     run(gexec::parallel_streams{}), which puts them on four streams.
//
//   gexec_bench_cuda [N=64] [runs per sample=100]
//
// The kernels are TVM-style host code (tests/cuda/host_library.c: fused_relu over 256
// floats, one launch each) with the PTX nvcc made from tests/cuda/kernels.cu. Prints the
// median time per kernel of each policy over 15 samples (a sample: `runs` run() calls,
// then one synchronize), the ratio, the host time to enqueue one run, and whether the
// outputs of both policies are identical. Needs a GPU: without one it prints SKIPPED;
// over the emulated driver (GEXEC_CUDA_DRIVER) the figures measure the emulator, and it
// says so.

#include <gexec/cuda.hpp>

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

using clock_type = std::chrono::steady_clock;
constexpr int samples = 15;
constexpr std::int64_t width = 256;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <class Run>
double seconds_per_sample(gexec::cuda_executor& ex, int runs, Run&& run) {
  const auto t0 = clock_type::now();
  for (int r = 0; r < runs; ++r) run(ex);
  ex.synchronize();
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 64;
  const int runs = argc > 2 ? std::atoi(argv[2]) : 100;
  if (n < 1 || runs < 1) {
    std::fprintf(stderr, "usage: gexec_bench_cuda [kernels >= 1] [runs per sample >= 1]\n");
    return 2;
  }
  std::shared_ptr<gexec::cuda_driver> driver;
  try {
    driver = gexec::cuda_driver::process_default();
  } catch (const gexec::error& e) {
    std::printf("SKIPPED: %s\n", e.what());
    return 0;
  }
  const char* emulated = std::getenv("GEXEC_CUDA_DRIVER");
  char name[256] = "?";
  gexec::cuda_api::CUdevice device = 0;
  driver->cuDeviceGet(&device, 0);
  driver->cuDeviceGetName(name, sizeof name, device);
  if (emulated && *emulated) {  // the emulator runs host implementations of the kernels
    void* kernels = dlopen(GEXEC_CUDA_EMULATED_KERNELS, RTLD_NOW | RTLD_LOCAL);
    auto register_all = kernels ? reinterpret_cast<void (*)()>(dlsym(kernels, "gexec_test_register_emulated_kernels")) : nullptr;
    if (!register_all) {
      std::fprintf(stderr, "cannot load the emulated kernels: %s\n", dlerror());
      return 1;
    }
    register_all();
  }
  std::printf("device: %s (driver %s, version %d)%s\n", name, driver->path().c_str(), driver->version(),
              emulated && *emulated ? "\nNOTE: the host-emulated driver: these figures measure the emulator, not a GPU" : "");

  gexec::graph_builder g;
  gexec::node_entry e = g.input("x", {width}, gexec::dtypes::float32, kDLCUDA);
  for (int k = 0; k < n; ++k) e = g.op("relu" + std::to_string(k), "fused_relu", {e}, {{{width}, gexec::dtypes::float32, kDLCUDA}});
  g.output(e);
  gexec::model_options options;
  options.devices = {gexec::cuda()};
  gexec::cuda_model m(g.build(), gexec::packed_c_abi(gexec::load_module(GEXEC_CUDA_HOST_PTX)), {}, options);
  auto eager = m.instantiate(), replay = m.instantiate();
  gexec::ndarray x = gexec::ndarray::empty({width}, gexec::dtypes::float32);
  for (std::int64_t i = 0; i < width; ++i) static_cast<float*>(x.data())[i] = static_cast<float>(i) - 100.0f;
  eager.set_input("x", x);
  replay.set_input("x", x);
  const gexec::cuda_graph graph;
  auto run_eager = [](gexec::cuda_executor& ex) { ex.run(); };
  auto run_graph = [&](gexec::cuda_executor& ex) { ex.run(graph); };
  for (int w = 0; w < 3; ++w) {  // warm: module loads, the first (eager) graph run, the capture
    seconds_per_sample(eager, runs, run_eager);
    seconds_per_sample(replay, runs, run_graph);
  }
  std::vector<double> t_eager, t_graph, enqueue_eager, enqueue_graph;
  for (int s = 0; s < samples; ++s) {
    t_eager.push_back(seconds_per_sample(eager, runs, run_eager) / (static_cast<double>(runs) * n));
    t_graph.push_back(seconds_per_sample(replay, runs, run_graph) / (static_cast<double>(runs) * n));
    auto t0 = clock_type::now();
    eager.run();
    enqueue_eager.push_back(std::chrono::duration<double>(clock_type::now() - t0).count());
    eager.synchronize();
    t0 = clock_type::now();
    replay.run(graph);
    enqueue_graph.push_back(std::chrono::duration<double>(clock_type::now() - t0).count());
    replay.synchronize();
  }
  gexec::ndarray a = gexec::ndarray::empty({width}, gexec::dtypes::float32), b = gexec::ndarray::empty({width}, gexec::dtypes::float32);
  eager.copy_output_to(0, a);
  replay.copy_output_to(0, b);
  const bool same = std::memcmp(a.data(), b.data(), static_cast<std::size_t>(width) * 4) == 0;
  const auto stats = gexec::cuda_graph::stats(replay);
  const double te = median(t_eager), tr = median(t_graph);
  std::printf("chain of %d kernels (fused_relu, %lld floats), %d runs per sample, %d samples\n", n, static_cast<long long>(width), runs, samples);
  std::printf("eager launches (baseline): %8.2f us per kernel\n", te * 1e6);
  std::printf("CUDA Graph replay:         %8.2f us per kernel   ratio %.2fx lower (goal >= 3x)\n", tr * 1e6, te / tr);
  std::printf("host time to enqueue one run: eager %.1f us, graph %.1f us\n", median(enqueue_eager) * 1e6, median(enqueue_graph) * 1e6);
  std::printf("graph: %ld capture(s), %ld instantiation(s), %ld launches; outputs identical: %s\n", stats.captures, stats.instantiations,
              stats.launches, same ? "yes" : "NO");

  // 2. Independent branches on several streams.
  constexpr int branches = 4;
  constexpr std::int64_t rows = 16, cols = 262144;
  gexec::graph_builder wide;
  for (int k = 0; k < branches; ++k) {
    auto in = wide.input("x" + std::to_string(k), {rows, cols}, gexec::dtypes::float32, kDLCUDA);
    wide.output(wide.op("sum" + std::to_string(k), "fused_row_sum", {in}, {{{rows}, gexec::dtypes::float32, kDLCUDA}}));
  }
  gexec::cuda_model wm(wide.build(), gexec::packed_c_abi(gexec::load_module(GEXEC_CUDA_HOST_PTX)), {}, options);
  auto one_stream = wm.instantiate(), streams = wm.instantiate();
  gexec::ndarray big = gexec::ndarray::empty({rows, cols}, gexec::dtypes::float32);
  for (std::int64_t i = 0; i < rows * cols; ++i) static_cast<float*>(big.data())[i] = static_cast<float>(i % 7) * 0.25f;
  for (int k = 0; k < branches; ++k) {
    one_stream.set_input("x" + std::to_string(k), big);
    streams.set_input("x" + std::to_string(k), big);
  }
  const gexec::parallel_streams spread;
  auto run_streams = [&](gexec::cuda_executor& ex) { ex.run(spread); };
  const int wide_runs = std::max(1, runs / 10);
  for (int w = 0; w < 2; ++w) {
    seconds_per_sample(one_stream, wide_runs, run_eager);
    seconds_per_sample(streams, wide_runs, run_streams);
  }
  std::vector<double> t_one, t_many;
  for (int s = 0; s < samples; ++s) {
    t_one.push_back(seconds_per_sample(one_stream, wide_runs, run_eager) / wide_runs);
    t_many.push_back(seconds_per_sample(streams, wide_runs, run_streams) / wide_runs);
  }
  bool wide_same = true;
  for (int k = 0; k < branches; ++k) {
    gexec::ndarray p = gexec::ndarray::empty({rows}, gexec::dtypes::float32), q = gexec::ndarray::empty({rows}, gexec::dtypes::float32);
    one_stream.copy_output_to(k, p);
    streams.copy_output_to(k, q);
    wide_same = wide_same && std::memcmp(p.data(), q.data(), static_cast<std::size_t>(rows) * 4) == 0;
  }
  const double to = median(t_one), tm = median(t_many);
  std::printf("%d independent fused_row_sum (%lld x %lld floats, %lld blocks each), %d runs per sample\n", branches,
              static_cast<long long>(rows), static_cast<long long>(cols), static_cast<long long>(rows), wide_runs);
  std::printf("one stream (baseline):     %8.1f us per run\n", to * 1e6);
  std::printf("parallel_streams:          %8.1f us per run   speed-up %.2fx; outputs identical: %s\n", tm * 1e6, to / tm,
              wide_same ? "yes" : "NO");
  return same && wide_same ? 0 : 1;
}
