// Parameter loading against the limits of the machine: 256 MiB of parameters in 64
// float32 tensors named p0..p63 (names of odd length, so that in TVM's layout every
// tensor's data sits at a misaligned file offset), and the same tensors written with
// save_options::align (all data 64-byte aligned). Each figure is printed beside its
// baseline, measured in the same run, with the ratio (baseline time / gexec time: 1.00
// is the limit, higher is faster than the baseline):
//
//  - load_param_dict_file (copy) against one read() of the whole file into a sized buffer;
//  - a new model (and a new executor with load_params_file) against a memcpy of the same
//    bytes into fresh pages; loading into an executor that already holds parameters
//    against a memcpy into pages already touched;
//  - load_mode::mmap of the misaligned and of the aligned blob (tensors copied counted:
//    those that are not views of the mapped file) against a memcpy into fresh pages;
//  - with CONFORMANCE_DIR (its resnet/ holds model.so, graph.json, lib.so, params.bin):
//    peak resident memory (VmHWM) of load_factory + create and of the split files, each
//    in a fresh process, and the first run() against the second.
//
//   gexec_bench_load_params [CONFORMANCE_DIR]
//
// The page cache is warm (each file is read once before it is timed). Times are the
// median of 7 runs. Allocations of 1 MiB and more come from fresh mappings (mallopt),
// so "fresh pages" stay fresh across runs. MiB = 2^20 bytes, MB = 10^6 bytes.

#include <gexec/executor.hpp>
#include <gexec/load.hpp>

#include <malloc.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "../machine.hpp"

namespace fs = std::filesystem;

namespace {

constexpr int n_tensors = 64;
constexpr std::int64_t tensor_elements = std::int64_t{1} << 20;  // 4 MiB of float32
constexpr std::uint64_t tensor_bytes = static_cast<std::uint64_t>(tensor_elements) * 4;
constexpr std::uint64_t total_bytes = tensor_bytes * n_tensors;
constexpr int runs = 7;

template <class F>
double median_ms(F&& f, int n = runs) {
  std::vector<double> t;
  for (int i = 0; i < n; ++i) {
    const auto start = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  return bench::median(t);
}

void row(const char* what, double ms, const char* baseline, double base_ms) {
  std::printf("  %-46s %8.2f ms   %-34s %8.2f ms   ratio %.2f\n", what, ms, baseline, base_ms, base_ms / ms);
}

gexec::param_dict make_params() {
  gexec::param_dict p;
  for (int i = 0; i < n_tensors; ++i) {
    auto a = gexec::ndarray::empty({tensor_elements}, gexec::dtypes::float32);
    auto* v = static_cast<float*>(a.data());
    for (std::int64_t j = 0; j < tensor_elements; ++j) v[j] = static_cast<float>(i * 7 + j % 1000);
    p.set("p" + std::to_string(i), std::move(a));
  }
  return p;
}

// A graph whose 64 inputs are the parameters, each read by a kernel that takes its
// first element: building and instantiating it costs next to nothing beside the load.
gexec::validated_graph params_graph() {
  gexec::graph_builder b;
  for (int i = 0; i < n_tensors; ++i) {
    auto p = b.input("p" + std::to_string(i), {tensor_elements});
    b.output(b.op("first" + std::to_string(i), "bench_first", {p}, {{{1}}}));
  }
  return b.build();
}

gexec::registry kernels() {
  gexec::registry r;
  r.add("bench_first", [](gexec::packed_args a) {
    static_cast<float*>(a.tensor(1).data)[0] = static_cast<const float*>(a.tensor(0).data)[0];
  });
  return r;
}

void write_file(const fs::path& path, std::span<const std::byte> bytes) {
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

// One read() of the whole file into a buffer of its size (fresh pages).
void read_whole(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) std::abort();
  const auto size = static_cast<std::size_t>(fs::file_size(path));
  std::unique_ptr<std::byte[]> buffer(new std::byte[size]);
  std::size_t done = 0;
  while (done < size) {
    const ssize_t got = ::read(fd, buffer.get() + done, size - done);
    if (got <= 0) std::abort();
    done += static_cast<std::size_t>(got);
  }
  ::close(fd);
}

// ---- peak memory of a single-file model against the split files (fresh processes) ----

// In a child: builds an executor `how`, runs it twice, prints "peak_kib first_ms second_ms".
int child(const std::string& how, const fs::path& dir) {
  const auto start = std::chrono::steady_clock::now();
  std::optional<gexec::graph_executor<>> ex;
  std::optional<gexec::factory> f;
  if (how == "factory") {
    f.emplace(gexec::load_factory(dir / "model.so"));
    ex.emplace(f->create());
  } else if (how == "split_model") {
    ex.emplace(gexec::model::load(dir / "graph.json", dir / "lib.so", dir / "params.bin").instantiate());
  } else {
    ex.emplace(gexec::create(fs::path(dir / "graph.json"), gexec::load_module(dir / "lib.so")));
    ex->load_params_file(dir / "params.bin");
  }
  const double build_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  for (const gexec::tensor_info& t : ex->get_input_info()) ex->set_input(t.name, gexec::ndarray::empty(t.shape, t.dtype));
  const double first = median_ms([&] { ex->run(); }, 1);
  const double second = median_ms([&] { ex->run(); }, 1);
  std::printf("%llu %.3f %.3f %.3f\n", static_cast<unsigned long long>(bench::status_kib("VmHWM:")), build_ms, first, second);
  return 0;
}

struct child_result {
  double peak_mb = 0, build_ms = 0, first_ms = 0, second_ms = 0;
};

child_result spawn(const std::string& how, const fs::path& dir) {
  const std::string command = "/proc/" + std::to_string(::getpid()) + "/exe --child " + how + " '" + dir.string() + "'";
  child_result r;
  if (FILE* p = ::popen(command.c_str(), "r")) {
    unsigned long long kib = 0;
    if (std::fscanf(p, "%llu %lf %lf %lf", &kib, &r.build_ms, &r.first_ms, &r.second_ms) != 4) std::printf("  (%s failed)\n", how.c_str());
    ::pclose(p);
    r.peak_mb = static_cast<double>(kib) * 1024 / 1e6;
  }
  return r;
}

void factory_figures(const fs::path& dir) {
  if (!fs::exists(dir / "model.so") || !fs::exists(dir / "params.bin")) {
    std::printf("\nsingle-file library: no model.so and params.bin in %s; skipped (give the conformance directory)\n", dir.string().c_str());
    return;
  }
  const double weights = static_cast<double>(fs::file_size(dir / "params.bin")) / 1e6;
  std::printf("\nsingle-file library against split files, conformance resnet (%.1f MB of parameters), fresh processes:\n", weights);
  std::printf("  %-46s %10s %10s %12s %12s\n", "", "peak MB", "build ms", "1st run ms", "2nd run ms");
  child_result results[3];
  const char* hows[3] = {"factory", "split_model", "split_executor"};
  const char* labels[3] = {"load_factory(model.so) + create()", "model::load(graph, lib, params) + instantiate", "create(graph, lib) + load_params_file"};
  for (int i = 0; i < 3; ++i) {
    results[i] = spawn(hows[i], dir);
    std::printf("  %-46s %10.1f %10.2f %12.3f %12.3f\n", labels[i], results[i].peak_mb, results[i].build_ms, results[i].first_ms,
                results[i].second_ms);
  }
  std::printf("  peak, single file / split model::load: %.2f (%+.1f MB)\n", results[0].peak_mb / results[1].peak_mb,
              results[0].peak_mb - results[1].peak_mb);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc == 4 && std::string(argv[1]) == "--child") return child(argv[2], argv[3]);
    // Large blocks come from fresh mappings and go back when freed, every time.
    mallopt(M_MMAP_THRESHOLD, 1 << 20);
    std::printf("parameter loading, %d tensors x %llu MiB = %llu MiB; %d usable cores, load %s; median of %d runs\n", n_tensors,
                static_cast<unsigned long long>(tensor_bytes >> 20), static_cast<unsigned long long>(total_bytes >> 20), bench::usable_cores(),
                bench::load_average().c_str(), runs);
    const fs::path dir = fs::temp_directory_path() / ("gexec_bench_load_params_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    struct remover {
      fs::path p;
      ~remover() {
        std::error_code ec;
        fs::remove_all(p, ec);
      }
    } remove_dir{dir};

    const gexec::param_dict source = make_params();
    const fs::path misaligned = dir / "params.bin";
    write_file(misaligned, gexec::save_param_dict(source));
    read_whole(misaligned);  // into the page cache
    const fs::path aligned = dir / "params_aligned.bin";
    gexec::save_param_dict_file(source, aligned, {.align = 64});
    read_whole(aligned);

    const gexec::validated_graph g = params_graph();
    const gexec::registry k = kernels();

    // Baselines.
    const double read_ms = median_ms([&] { read_whole(misaligned); });
    auto fresh_copy = [&] {
      std::vector<std::unique_ptr<std::byte[]>> dst;
      for (const auto& [name, a] : source) {
        dst.emplace_back(new std::byte[tensor_bytes]);
        std::memcpy(dst.back().get(), a.data(), tensor_bytes);
      }
      return dst;
    };
    const double fresh_ms = median_ms([&] { (void)fresh_copy(); });
    auto touched = fresh_copy();
    const double touched_ms = median_ms([&] {
      std::size_t i = 0;
      for (const auto& [name, a] : source) std::memcpy(touched[i++].get(), a.data(), tensor_bytes);
    });

    std::printf("\ncopy loads (file %s, page cache warm):\n", misaligned.filename().c_str());
    const double copy_ms = median_ms([&] { (void)gexec::load_param_dict_file(misaligned); });
    row("load_param_dict_file (copy)", copy_ms, "read() of the file", read_ms);
    const double model_ms = median_ms([&] { gexec::basic_model m(g, k, gexec::load_param_dict_file(misaligned)); });
    row("new model (load_param_dict_file + model)", model_ms, "memcpy into fresh pages", fresh_ms);
    const double new_ex_ms = median_ms([&] {
      auto ex = gexec::create(g, k);
      ex.load_params_file(misaligned);
    });
    row("new executor: create + load_params_file", new_ex_ms, "memcpy into fresh pages", fresh_ms);
    auto used = gexec::create(g, k);
    used.load_params_file(misaligned);
    const double used_ms = median_ms([&] { used.load_params_file(misaligned); });
    row("used executor: load_params_file again", used_ms, "memcpy into touched pages", touched_ms);

    std::printf("\nmapped loads (load_mode::mmap; copies: tensors not views of the file):\n");
    auto mapped = [&](const fs::path& file, std::size_t& copies) {
      return median_ms([&] {
        const gexec::param_dict d = gexec::load_param_dict_file(file, gexec::load_mode::mmap);
        copies = 0;
        for (const auto& [name, a] : d) copies += d.is_mapped(a) ? 0 : 1;
      });
    };
    std::size_t misaligned_copies = 0, aligned_copies = 0;
    const double mmap_ms = mapped(misaligned, misaligned_copies);
    const double mmap_aligned_ms = mapped(aligned, aligned_copies);
    char label[96];
    std::snprintf(label, sizeof label, "mmap, misaligned blob (%zu of %d copied)", misaligned_copies, n_tensors);
    row(label, mmap_ms, "memcpy into fresh pages", fresh_ms);
    std::snprintf(label, sizeof label, "mmap, aligned blob (%zu of %d copied)", aligned_copies, n_tensors);
    row(label, mmap_aligned_ms, "memcpy into fresh pages", fresh_ms);
    std::printf("  aligned blob: %llu bytes, %llu more than TVM's layout\n", static_cast<unsigned long long>(fs::file_size(aligned)),
                static_cast<unsigned long long>(fs::file_size(aligned) - fs::file_size(misaligned)));

    factory_figures(argc > 1 ? fs::path(argv[1]) / "resnet" : fs::path("conformance/resnet"));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gexec_bench_load_params: %s\n", e.what());
    return 1;
  }
}
