// The baseline: a static C++ program that prints one line, built like the runner. What
// the C and C++ libraries alone cost in size, resident memory and start-up.

#include <sys/resource.h>

#include <cstdio>

int main() {
  std::printf("first output: 0\n");
  std::fflush(stdout);
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  std::printf("params_bytes 0 weights_in_place 0 weights_copied 0 storage_bytes 0 max_rss_kib %ld load_ms 0 run_ms 0\n", usage.ru_maxrss);
  return 0;
}
