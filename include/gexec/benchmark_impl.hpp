#pragma once
// The definitions of benchmark.hpp that are not templates. Included by benchmark.hpp in
// header-only mode and by src/gexec.cpp in compiled mode.

#include "benchmark.hpp"

#include <algorithm>
#include <vector>

GEXEC_NAMESPACE_BEGIN
namespace detail {

GEXEC_DECL void summarize(benchmark_result& r) {
  if (r.results.empty()) return;
  std::vector<double> sorted = r.results;
  std::sort(sorted.begin(), sorted.end());
  const auto n = static_cast<double>(sorted.size());
  r.min = sorted.front();
  r.max = sorted.back();
  // The exact mean lies in [min, max]; summing can round it just outside.
  double sum = 0;
  for (double x : sorted) sum += x;
  r.mean = std::clamp(sum / n, r.min, r.max);
  r.median = sorted.size() % 2 ? sorted[sorted.size() / 2] : (sorted[sorted.size() / 2 - 1] + sorted[sorted.size() / 2]) / 2;
  double var = 0;
  for (double x : sorted) var += (x - r.mean) * (x - r.mean);
  // The compiler's square root (what std::sqrt calls): <cmath> costs about 8,600
  // preprocessed lines, <math.h> declaring every function for every floating type.
  r.std = __builtin_sqrt(var / n);
}

}  // namespace detail
GEXEC_NAMESPACE_END
