// run(gexec::parallel_branches{}) against run() (sequential, the baseline), one
// executor on a runtime of 2 threads, the two measured in the same run, interleaved.
//
//   gexec_bench_branches
//
// Workloads (graph_builder):
//   - two independent branches of 4 compute-bound single-threaded nodes each (a C++
//     kernel of a registry: a float multiply-add chain per element, calibrated here to
//     about 3 ms a node), joined by an add: the target is a speed-up >= 1.7x on 2 free cores;
//   - one chain of the same 8 nodes (nothing independent): parallel_branches must be
//     within noise of sequential (<= 1.05x its time);
//   - a wide graph of 8 independent small nodes (about 50 us each), all outputs;
//   - two branches of 2 test_parallel_heavy nodes each (sample library: kernels that
//     launch parallel work of their own), joined by test_add: neither a deadlock nor
//     slower than sequential with 2 threads (<= 1.10x);
//   - a chain of 2 kernels with parallel loops over three blocks, two branches of 4 of
//     them, an add and 2 more (the barrier-free build of the sample library, as TVM
//     builds them): parallel_branches, whose kernels take the workers no branch holds,
//     against sequential and against branches whose kernels run alone (the policy as it
//     was, kept here as the baseline): >= 1.15x faster than the better of the two.
// Prints the median time per run() of each policy (15 samples each), the ratio and the
// speed-up, whether every run's outputs were identical to the first sequential run's
// (exit 1 if not), and how busy other processes kept the machine meanwhile.

#include <gexec/executor.hpp>

#include "../machine.hpp"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

using clock_type = std::chrono::steady_clock;
using cpu = gexec::backends<gexec::cpu_backend>;

constexpr int samples = 15;
constexpr double node_target_s = 3e-3;    // one heavy node on one thread
constexpr double small_target_s = 50e-6;  // one small node
constexpr std::int64_t heavy_elems = 4096;
constexpr std::int64_t library_elems = 32 * 1024;  // test_parallel_heavy: about 11 ms a node on one thread

// out[i] = f^rounds(x[i]) with f(v) = 0.999 v + 0.5: each round depends on the one before,
// and float arithmetic is not reassociated, so nothing folds it away. Not inlined: the
// calibration times the very code the kernels run (inlined with a constant count, it vectorizes).
[[gnu::noinline]] void heavy_loop(const float* x, float* out, std::int64_t n, int rounds) {
  for (std::int64_t i = 0; i < n; ++i) {
    float v = x[i];
    for (int r = 0; r < rounds; ++r) v = v * 0.999f + 0.5f;
    out[i] = v;
  }
}

double seconds_since(clock_type::time_point t0) { return std::chrono::duration<double>(clock_type::now() - t0).count(); }

// Seconds of one heavy_loop over heavy_elems floats, the best of 5.
double loop_seconds(int rounds) {
  std::vector<float> x(heavy_elems, 0.25f), out(heavy_elems);
  double best = 1e9;
  for (int i = 0; i < 5; ++i) {
    const auto t0 = clock_type::now();
    heavy_loop(x.data(), out.data(), heavy_elems, rounds);
    best = std::min(best, seconds_since(t0));
  }
  return best;
}

// Rounds for about `target_s` over heavy_elems floats on this thread: the first power of
// two that takes as long, scaled down (time is not linear in rounds at few of them: the
// core overlaps the short chains of neighbouring elements).
int calibrate(double target_s) {
  int rounds = 1;
  double t = loop_seconds(rounds);
  while (t < target_s && rounds < (1 << 24)) t = loop_seconds(rounds *= 2);
  return std::max(1, static_cast<int>(rounds * target_s / t));
}

gexec::registry cpp_kernels(int heavy_rounds, int small_rounds) {
  gexec::registry k;
  auto unary = [](int rounds) {
    return [rounds](gexec::packed_args a) {
      const DLTensor& x = a.tensor(0);
      DLTensor& out = a.tensor(1);
      std::int64_t n = 1;
      for (int d = 0; d < x.ndim; ++d) n *= x.shape[d];
      heavy_loop(static_cast<const float*>(x.data), static_cast<float*>(out.data), n, rounds);
    };
  };
  k.add("heavy", unary(heavy_rounds));
  k.add("small", unary(small_rounds));
  k.add("add", [](gexec::packed_args a) {
    const DLTensor& x = a.tensor(0);
    const DLTensor& y = a.tensor(1);
    DLTensor& out = a.tensor(2);
    std::int64_t n = 1;
    for (int d = 0; d < x.ndim; ++d) n *= x.shape[d];
    const auto* p = static_cast<const float*>(x.data);
    const auto* q = static_cast<const float*>(y.data);
    auto* o = static_cast<float*>(out.data);
    for (std::int64_t i = 0; i < n; ++i) o[i] = p[i] + q[i];
  });
  return k;
}

// x -> `depth` nodes of `kernel` -> ... in each of `branches` branches, joined by `add`
// (branches == 2), else the last node is the output. Every entry has a storage id of its
// own: no storage-reuse edge orders the branches.
gexec::validated_graph branches_graph(int branches, int depth, const char* kernel, const char* add, std::int64_t n) {
  gexec::graph_builder b;
  const gexec::node_entry x = b.input("x", {n});
  std::vector<gexec::node_entry> ends;
  for (int br = 0; br < branches; ++br) {
    gexec::node_entry prev = x;
    for (int i = 0; i < depth; ++i) prev = b.op("b" + std::to_string(br) + "_" + std::to_string(i), kernel, {prev}, {{{n}}});
    ends.push_back(prev);
  }
  if (ends.size() == 2) b.output(b.op("join", add, {ends[0], ends[1]}, {{{n}}}));
  else b.output(ends[0]);
  return b.build();
}

// `width` independent nodes of `kernel` on x, each an output.
gexec::validated_graph wide_graph(int width, const char* kernel, std::int64_t n) {
  gexec::graph_builder b;
  const gexec::node_entry x = b.input("x", {n});
  for (int i = 0; i < width; ++i) b.output(b.op("w" + std::to_string(i), kernel, {x}, {{{n}}}));
  return b.build();
}

struct result {
  double seq_s = 0, par_s = 0, others = 0;
  bool identical = true;
};

template <class Executor>
std::vector<std::vector<unsigned char>> output_bytes(Executor& ex) {
  std::vector<std::vector<unsigned char>> out;
  for (int i = 0; i < ex.get_num_outputs(); ++i) {
    const gexec::ndarray o = ex.get_output(i);
    const auto* p = static_cast<const unsigned char*>(o.data());
    out.emplace_back(p, p + o.byte_size());
  }
  return out;
}

// `samples` samples of each policy, alternating which goes first; each sample `number`
// runs (enough for about 5 ms), its outputs compared with the first sequential run's.
template <class Executor>
result measure(Executor& ex) {
  const gexec::parallel_branches parallel;
  ex.run();
  const auto want = output_bytes(ex);
  ex.run(parallel);
  result r;
  r.identical = output_bytes(ex) == want;
  auto t0 = clock_type::now();
  ex.run();
  ex.run(parallel);
  const double pair = seconds_since(t0);
  const int number = std::max(1, static_cast<int>(1e-2 / pair));
  auto sample = [&](bool par) {
    const auto s0 = clock_type::now();
    for (int i = 0; i < number; ++i) par ? ex.run(parallel) : ex.run();
    const double t = seconds_since(s0) / number;
    r.identical = r.identical && output_bytes(ex) == want;
    return t;
  };
  std::vector<double> seq, par;
  const bench::ticks k0 = bench::read_ticks();
  const auto w0 = clock_type::now();
  for (int s = 0; s < samples; ++s) {
    if (s % 2) {
      par.push_back(sample(true));
      seq.push_back(sample(false));
    } else {
      seq.push_back(sample(false));
      par.push_back(sample(true));
    }
  }
  const bench::ticks k1 = bench::read_ticks();
  const double wall_ticks = seconds_since(w0) * static_cast<double>(sysconf(_SC_CLK_TCK));
  r.others = static_cast<double>((k1.machine - k0.machine) - (k1.own - k0.own)) / wall_ticks;
  r.seq_s = bench::median(seq);
  r.par_s = bench::median(par);
  return r;
}

// parallel_branches as it was before kernels' parallel loops shared the workers (the
// baseline of the mixed workload): one runner per thread, all started at once as the
// tasks of one launch, each taking ready steps; a kernel's own parallel loop runs alone
// inside a runner, also in the chains before and after the branches.
struct branches_kernels_alone {
  template <gexec::basic_step_program P>
  void execute(P& steps) const {
    const std::uint32_t n = steps.size();
    const gexec::step_graph& deps = steps.dependencies();
    const int tasks = std::min<int>(steps.max_concurrency(), static_cast<int>(std::min<std::uint32_t>(deps.width, n)));
    if (tasks <= 1) {
      steps.run(0, n);
      return;
    }
    auto pending = steps.counters();
    auto queue = steps.slots();
    std::uint32_t head = 0, tail = 0, done = 0;
    for (std::uint32_t k = 0; k < n; ++k) {
      pending[k].store(deps.num_preds[k], std::memory_order_relaxed);
      if (deps.num_preds[k] == 0) queue[tail++] = k;
    }
    std::mutex mu;
    std::condition_variable cv;
    steps.parallel_for(tasks, [&](int, int) {
      auto context = steps.thread_context();
      std::uint32_t next = UINT32_MAX;
      for (;;) {
        std::uint32_t k = next;
        next = UINT32_MAX;
        if (k == UINT32_MAX) {
          std::unique_lock lock(mu);
          cv.wait(lock, [&] { return head < tail || done == n; });
          if (head == tail && done == n) return;
          k = queue[head++];
        }
        steps.run_step(k);  // the benchmark's kernels do not fail
        std::unique_lock lock(mu, std::defer_lock);
        for (std::uint32_t i = deps.succ_begin[k]; i < deps.succ_begin[k + 1]; ++i) {
          const std::uint32_t s = deps.succ[i];
          if (pending[s].fetch_sub(1, std::memory_order_acq_rel) != 1) continue;
          if (next == UINT32_MAX) {
            next = s;
            continue;
          }
          if (!lock.owns_lock()) lock.lock();
          queue[tail++] = s;
        }
        if (!lock.owns_lock()) lock.lock();
        ++done;
        lock.unlock();
        cv.notify_all();
      }
    });
  }
};

// x -> `chain` nodes -> `depth` nodes in each of 2 branches -> add -> `chain` nodes: the
// shape of a network with a block of two paths (an inception or residual block).
gexec::validated_graph stem_branches_tail(int chain, int depth, const char* kernel, const char* add, std::int64_t n) {
  gexec::graph_builder b;
  gexec::node_entry prev = b.input("x", {n});
  for (int i = 0; i < chain; ++i) prev = b.op("stem" + std::to_string(i), kernel, {prev}, {{{n}}});
  gexec::node_entry ends[2];
  for (int br = 0; br < 2; ++br) {
    gexec::node_entry p = prev;
    for (int i = 0; i < depth; ++i) p = b.op("b" + std::to_string(br) + "_" + std::to_string(i), kernel, {p}, {{{n}}});
    ends[br] = p;
  }
  prev = b.op("join", add, {ends[0], ends[1]}, {{{n}}});
  for (int i = 0; i < chain; ++i) prev = b.op("tail" + std::to_string(i), kernel, {prev}, {{{n}}});
  b.output(prev);
  return b.build();
}

// Median seconds per run() of sequential, branches_kernels_alone and parallel_branches,
// `samples` samples each in turn; whether all outputs equal the first sequential run's.
struct three_way {
  double seq_s = 0, alone_s = 0, shared_s = 0, others = 0;
  bool identical = true;
};
template <class Executor>
three_way measure_three(Executor& ex) {
  ex.run();
  const auto want = output_bytes(ex);
  three_way r;
  auto sample = [&](int which) {
    const auto s0 = clock_type::now();
    for (int i = 0; i < 3; ++i) {
      if (which == 0) ex.run();
      else if (which == 1) ex.run(branches_kernels_alone{});
      else ex.run(gexec::parallel_branches{});
    }
    const double t = seconds_since(s0) / 3;
    r.identical = r.identical && output_bytes(ex) == want;
    return t;
  };
  for (int which = 0; which < 3; ++which) sample(which);  // warm: the kernels' sites learn
  std::vector<double> t[3];
  const bench::ticks k0 = bench::read_ticks();
  const auto w0 = clock_type::now();
  for (int s = 0; s < samples; ++s)
    for (int i = 0; i < 3; ++i) {
      const int which = (s + i) % 3;
      t[which].push_back(sample(which));
    }
  const bench::ticks k1 = bench::read_ticks();
  const double wall_ticks = seconds_since(w0) * static_cast<double>(sysconf(_SC_CLK_TCK));
  r.others = static_cast<double>((k1.machine - k0.machine) - (k1.own - k0.own)) / wall_ticks;
  r.seq_s = bench::median(t[0]);
  r.alone_s = bench::median(t[1]);
  r.shared_s = bench::median(t[2]);
  return r;
}

// Ends the process if the benchmark has not finished by then: a deadlock fails it
// instead of hanging the test script.
class watchdog {
 public:
  explicit watchdog(std::chrono::seconds limit)
      : thread_([this, limit] {
          std::unique_lock lock(mu_);
          if (!cv_.wait_for(lock, limit, [this] { return done_; })) {
            std::printf("\nFAILED: not finished after %lld s (a deadlock?)\n", static_cast<long long>(limit.count()));
            std::fflush(stdout);
            std::_Exit(1);
          }
        }) {}
  ~watchdog() {
    {
      std::lock_guard lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

}  // namespace

int main() {
  const int cores = bench::usable_cores();
  const char* env = std::getenv("GEXEC_NUM_THREADS");
  std::printf("run(parallel_branches) vs run() (sequential, baseline), one runtime of 2 threads; cores this process may use: %d; "
              "GEXEC_NUM_THREADS=%s; load average: %s\n",
              cores, env ? env : "(unset)", bench::load_average().c_str());
  watchdog guard(std::chrono::seconds(120));
  int failures = 0, differ = 0;
  try {
    const int heavy_rounds = calibrate(node_target_s), small_rounds = calibrate(small_target_s);
    std::printf("heavy node: %lld floats x %d rounds, %.2f ms on one thread; small node: %d rounds, %.1f us\n",
                static_cast<long long>(heavy_elems), heavy_rounds, loop_seconds(heavy_rounds) * 1e3, small_rounds,
                loop_seconds(small_rounds) * 1e6);
    auto rt = gexec::runtime::create({.num_threads = 2});
    const gexec::model_options opts{.runtime = rt};
    const gexec::registry kernels = cpp_kernels(heavy_rounds, small_rounds);
    const gexec::module lib = gexec::load_module(GEXEC_TEST_KERNELS);

    auto x_of = [](std::int64_t n) {
      auto x = gexec::ndarray::empty({n}, gexec::dtypes::float32);
      float* v = x.values<float>().data();
      for (std::int64_t i = 0; i < n; ++i) v[i] = 0.001f * static_cast<float>(i % 1000);
      return x;
    };

    enum class target { speedup, same, none };
    struct workload {
      std::string name;
      target kind;
      double limit;  // speedup: the least speed-up; same: the most par/seq
      std::function<result()> run;
    };
    auto on = [&](gexec::validated_graph g, auto binding, std::int64_t n) {
      return [g = std::move(g), binding = std::move(binding), n, &opts, &x_of] {
        gexec::basic_model m(g, binding, opts);
        auto ex = m.instantiate();
        ex.set_input("x", x_of(n));
        return measure(ex);
      };
    };
    const std::vector<workload> work = {
        {"2 branches x 4 heavy nodes, + add", target::speedup, 1.7, on(branches_graph(2, 4, "heavy", "add", heavy_elems), kernels, heavy_elems)},
        {"1 chain of 8 heavy nodes", target::same, 1.05, on(branches_graph(1, 8, "heavy", "add", heavy_elems), kernels, heavy_elems)},
        {"wide: 8 independent small nodes", target::none, 0, on(wide_graph(8, "small", heavy_elems), kernels, heavy_elems)},
        {"2 branches x 2 test_parallel_heavy, + add", target::same, 1.10,
         on(branches_graph(2, 2, "test_parallel_heavy", "test_add", library_elems), gexec::packed_c_abi(lib), library_elems)},
    };

    std::printf("\nmedian time per run(), ms, %d samples each; others: cores other processes kept busy meanwhile\n", samples);
    std::printf("%-42s %11s %11s %9s %9s %10s %7s  %s\n", "workload", "sequential", "parallel", "par/seq", "speed-up", "outputs", "others",
                "target");
    for (const workload& w : work) {
      try {
        const result r = w.run();
        const double ratio = r.par_s / r.seq_s, speedup = r.seq_s / r.par_s;
        char t[96] = "";
        if (w.kind == target::speedup) {
          if (cores < 2) std::snprintf(t, sizeof t, "n/a: fewer than 2 cores (>= %.1fx on 2 free cores)", w.limit);
          else std::snprintf(t, sizeof t, "%s (>= %.1fx on 2 free cores)", speedup >= w.limit ? "met" : "MISSED", w.limit);
        } else if (w.kind == target::same) {
          std::snprintf(t, sizeof t, "%s (par/seq <= %.2f)", ratio <= w.limit ? "met" : "MISSED", w.limit);
        } else {
          std::snprintf(t, sizeof t, "(none: shows the overhead)");
        }
        std::string target = t;
        if (r.others > 0.2) target += std::string(target.empty() ? "" : "; ") + "disturbed, re-run";
        if (!r.identical) {
          ++failures;
          ++differ;
        }
        std::printf("%-42s %11.3f %11.3f %9.3f %8.2fx %10s %7.2f  %s\n", w.name.c_str(), r.seq_s * 1e3, r.par_s * 1e3, ratio, speedup,
                    r.identical ? "identical" : "DIFFER", r.others, target.c_str());
      } catch (const std::exception& e) {
        ++failures;
        std::printf("%-42s failed: %s\n", w.name.c_str(), e.what());
      }
      std::fflush(stdout);
    }
    // Kernels built as TVM builds parallel loops (no barrier: independent tasks), their
    // loop over three blocks, so a kernel gains 1.5x from 2 threads, not 2x: neither
    // parallel kernels alone (sequential) nor parallel branches alone use both cores all
    // the time; sharing the workers does.
    {
      const gexec::module independent = gexec::load_module(GEXEC_TEST_KERNELS_INDEPENDENT);
      gexec::basic_model m(stem_branches_tail(2, 4, "test_parallel_thirds", "test_add", library_elems), gexec::packed_c_abi(independent), opts);
      auto ex = m.instantiate();
      ex.set_input("x", x_of(library_elems));
      const three_way r = measure_three(ex);
      const double best_before = std::min(r.seq_s, r.alone_s), gain = best_before / r.shared_s;
      if (!r.identical) {
        ++failures;
        ++differ;
      }
      std::printf("\nkernels with parallel loops in branches: 2 test_parallel_thirds -> 2 branches x 4 -> add -> 2, %lld floats "
                  "(median ms per run(), %d samples each)\n",
                  static_cast<long long>(library_elems), samples);
      std::printf("  sequential (kernels in parallel)        %9.3f\n", r.seq_s * 1e3);
      std::printf("  branches, kernels alone (as before)     %9.3f\n", r.alone_s * 1e3);
      std::printf("  parallel_branches (workers shared)      %9.3f  %.2fx the better of the two; outputs %s; others %.2f  %s\n",
                  r.shared_s * 1e3, gain, r.identical ? "identical" : "DIFFER", r.others,
                  cores < 2 ? "n/a: fewer than 2 cores (>= 1.15x on 2 free cores)"
                            : (std::string(gain >= 1.15 ? "met" : "MISSED") + " (>= 1.15x on 2 free cores)" +
                               (r.others > 0.2 ? "; disturbed, re-run" : ""))
                                  .c_str());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gexec_bench_branches: %s\n", e.what());
    return 1;
  }
  std::printf("\ntargets: 2 independent branches on 2 free cores: speed-up >= 1.7x; one chain: par/seq <= 1.05 (no independent steps, "
              "the sequential loop); kernels launching parallel work: par/seq <= 1.10 and no deadlock\n");
  std::printf("outputs identical (every run, both policies, to the first sequential run): %s\n", differ ? "no" : "yes");
  return failures ? 1 : 0;
}
