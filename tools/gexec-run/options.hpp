#pragma once
// gexec-run's options, as the command line sets them, and its one error for bad arguments.
#include <gexec/all_backends.hpp>
#include <gexec/debug.hpp>
#include <gexec/npy.hpp>
#include <gexec/npz.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace gexec_run {

namespace fs = std::filesystem;

struct options {
  std::string model, graph, lib, params;
  std::string function;  ///< a Relax executable's function to call (default: main, or its only one)
  std::vector<std::string> inputs, expected;
  bool zero_missing = false;
  std::string output_dir, output_file, dump_dir, trace, dot, compare_dump;
  std::vector<std::string> convert_params;
  std::size_t align_params = 64;
  std::string write_library;                ///< --write-library OUT.so
  std::vector<std::string> kernel_objects;  ///< its kernels: export_library's .tar, or .o files
  std::string make_bundle, bundle_expected, verify;
  bool bundle_intact = true;                ///< --verify: every file the bundle holds has its recorded checksum
  std::vector<std::string> bundle_outputs;  ///< --verify: the output names the bundle lists (its "output" lines)
  bool allow_missing = false;               ///< --compare-dump: a dump that lacks node outputs may still match
  bool tolerance_given = false;  ///< --atol or --rtol on the command line (else a bundle's own)
  bool info = false, bench = false, profile = false;
  int repeat = 5, number = 1, min_repeat_ms = 0, cooldown_ms = 0, repeats_to_cooldown = 1;
  int threads = 0;
  std::string device = "cpu";
  std::string policy = "sequential";
  bool cuda_graph = false;
  std::string planner = "as_compiled";
  double atol = 0, rtol = 0;  ///< exact unless asked: the same kernels give the same bits
  int print_limit = 16;
  std::string npy_names = "bits";  ///< --npy-names: how outputs of bfloat16 and float8 are written
  std::string progress = "auto";
};

[[noreturn]] inline void fail(const std::string& message) { throw gexec::error(gexec::errc::invalid_argument, message); }

}  // namespace gexec_run
