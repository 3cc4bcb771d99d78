#pragma once
// What the benchmarks read about the machine they run on: the cores this process may
// use, the load, and how much CPU other processes took during a measurement (figures
// taken beside a busy neighbour are not clean, and the benchmarks say so).

#include <sched.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace bench {

/// CPU ticks the whole machine and this process have used: their difference over a
/// workload is what other processes took, which disturbs the figures.
struct ticks {
  long long machine = 0, own = 0;
};

inline ticks read_ticks() {
  ticks t;
  std::ifstream stat("/proc/stat");
  std::string cpu;
  long long v[8] = {};
  stat >> cpu;
  for (long long& x : v) stat >> x;
  t.machine = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];  // all but idle and iowait
  std::ifstream self("/proc/self/stat");
  std::string field;
  std::getline(self, field, ')');  // the name may hold spaces
  for (int i = 3; i <= 15 && self >> field; ++i)
    if (i >= 14) t.own += std::stoll(field);
  return t;
}

inline std::string load_average() {
  std::string l;
  std::ifstream("/proc/loadavg") >> l;
  return l;
}

inline int usable_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return 0;
  return CPU_COUNT(&set);
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

/// A field of /proc/self/status in KiB ("VmHWM:", the peak resident set), or 0.
inline std::uint64_t status_kib(const char* key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  const std::size_t n = std::strlen(key);
  while (std::getline(in, line))
    if (line.compare(0, n, key) == 0) return std::stoull(line.substr(n + 1));
  return 0;
}

}  // namespace bench
