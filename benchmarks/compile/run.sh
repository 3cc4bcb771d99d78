#!/usr/bin/env bash
# What including gexec costs a program, in preprocessed lines and compile time:
#  - registry.cpp: C++ kernels, including the narrow headers it uses (model.hpp,
#    binding/registry.hpp, graph/builder.hpp), the form such a program should take;
#  - the same program including <gexec/executor.hpp>, the umbrella (the baseline);
#  - tvm_library.cpp: a TVM-compiled library through the umbrella (load_module, create,
#    run), which needs everything.
# Each is compiled (-c, no link) REPEAT times; the median wall and CPU seconds are
# printed, with the ratio to the baseline measured in the same run. A second table
# sets compiled mode (gexec::compiled, which defines GEXEC_COMPILED) beside
# header-only: tvm_library.cpp, and the umbrella header alone, in both modes.
# Last, the umbrella header alone against its goals (at most 100,000 preprocessed lines
# in compiled mode, 150,000 header-only), and the intrinsics headers the umbrella and
# the JSON parsers <gexec/model.hpp> reach, each with what brought it in.
#
#   benchmarks/compile/run.sh                      # g++ -O2, 3 runs each
#   CXX=clang++ CXXFLAGS="-O2 -g" REPEAT=5 benchmarks/compile/run.sh
#   JOBS=2 benchmarks/compile/run.sh               # the four programs measured 2 at a time
#
# Compile times follow the load of the machine: compare figures of one run only. With
# JOBS=N the programs are compiled N at a time (each compile is one process: on N free
# cores each keeps its own, and the figures are those of a machine running N compiles).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
include=$(cd "$here/../../include" && pwd)
cxx=${CXX:-g++}
read -r -a flags <<<"${CXXFLAGS:--O2}"
repeat=${REPEAT:-3}
jobs_at_once=${JOBS:-1}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# lines SOURCE [FLAGS...]: lines of the preprocessed translation unit.
lines() {
  local src=$1
  shift
  "$cxx" -std=c++20 "${flags[@]}" "$@" -I"$include" -E "$src" | wc -l
}

# seconds SOURCE [FLAGS...]: "WALL CPU", the medians of REPEAT compiles.
seconds() {
  local src=$1
  shift
  local walls=() cpus=() TIMEFORMAT='%R %U %S' t
  for ((i = 0; i < repeat; ++i)); do
    t=$({ time "$cxx" -std=c++20 "${flags[@]}" "$@" -I"$include" -c "$src" -o "$work/out.$BASHPID.o" >/dev/null; } 2>&1)
    read -r wall user sys <<<"$t"
    walls+=("$wall")
    cpus+=("$(awk -v u="$user" -v s="$sys" 'BEGIN { printf "%.2f", u + s }')")
  done
  printf '%s %s\n' "$(printf '%s\n' "${walls[@]}" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')" \
    "$(printf '%s\n' "${cpus[@]}" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')"
}

# measure KEY SOURCE [FLAGS...]: "LINES WALL CPU" into $work/KEY, as a job of its own, at
# most JOBS at once.
measure() {
  local key=$1
  shift
  while [ "$(jobs -rp | wc -l)" -ge "$jobs_at_once" ]; do wait -n; done
  { echo "$(lines "$@") $(seconds "$@")" >"$work/$key"; } &
}
# The longest first, so that the jobs end together.
measure tvm "$here/tvm_library.cpp"
measure base "$here/registry.cpp" -DGEXEC_COMPILE_UMBRELLA
measure narrow "$here/registry.cpp"
measure tvm_compiled "$here/tvm_library.cpp" -DGEXEC_COMPILED
wait
for key in tvm base narrow tvm_compiled; do [ -s "$work/$key" ] || { echo "compile benchmark: measuring $key failed" >&2; exit 1; }; done

echo "compiler: $("$cxx" --version | head -n 1); flags: ${flags[*]}; median of $repeat compiles each, $jobs_at_once at a time"
printf '%-40s %10s %9s %9s %8s %8s\n' program lines wall_s cpu_s lines/b wall/b

read -r base_lines base_wall base_cpu <"$work/base"

row() {
  local name=$1 n=$2 wall=$3 cpu=$4
  printf '%-40s %10d %9.2f %9.2f %8.2f %8.2f\n' "$name" "$n" "$wall" "$cpu" \
    "$(awk -v a="$n" -v b="$base_lines" 'BEGIN { print a / b }')" "$(awk -v a="$wall" -v b="$base_wall" 'BEGIN { print a / b }')"
}

row "registry.cpp via executor.hpp (baseline)" "$base_lines" "$base_wall" "$base_cpu"
read -r n wall cpu <"$work/narrow"
row "registry.cpp, narrow headers" "$n" "$wall" "$cpu"
read -r n wall cpu <"$work/tvm"
row "tvm_library.cpp via executor.hpp" "$n" "$wall" "$cpu"

# Compiled mode against header-only, measured in this run: the ratios are to the
# header-only row above each compiled-mode row.
echo '#include <gexec/executor.hpp>' >"$work/umbrella.cpp"
read -r umbrella_lines <<<"$(lines "$work/umbrella.cpp")"
read -r umbrella_compiled_lines <<<"$(lines "$work/umbrella.cpp" -DGEXEC_COMPILED)"
read -r tvm_compiled_lines tvm_compiled_wall tvm_compiled_cpu <"$work/tvm_compiled"
mode_row() {
  local name=$1 n=$2 wall=$3 cpu=$4 ref_lines=$5 ref_wall=$6
  if [ "$wall" = - ]; then
    printf '%-40s %10d %9s %9s %8.2f %8s\n' "$name" "$n" - - "$(awk -v a="$n" -v b="$ref_lines" 'BEGIN { print a / b }')" -
  else
    printf '%-40s %10d %9.2f %9.2f %8.2f %8.2f\n' "$name" "$n" "$wall" "$cpu" "$(awk -v a="$n" -v b="$ref_lines" 'BEGIN { print a / b }')" \
      "$(awk -v a="$wall" -v b="$ref_wall" 'BEGIN { print a / b }')"
  fi
}
echo
printf '%-40s %10s %9s %9s %8s %8s\n' "compiled mode (-DGEXEC_COMPILED)" lines wall_s cpu_s lines/h wall/h
mode_row "tvm_library.cpp, header-only" "$n" "$wall" "$cpu" "$n" "$wall"
mode_row "tvm_library.cpp, compiled mode" "$tvm_compiled_lines" "$tvm_compiled_wall" "$tvm_compiled_cpu" "$n" "$wall"
mode_row "<gexec/executor.hpp>, header-only" "$umbrella_lines" - - "$umbrella_lines" -
mode_row "<gexec/executor.hpp>, compiled mode" "$umbrella_compiled_lines" - - "$umbrella_lines" -

# The goals for the umbrella header alone (preprocessed lines of a file holding only
# `#include <gexec/executor.hpp>`), and what no header should pull in for what it needs:
# an intrinsics header (<x86intrin.h> and the like, tens of thousands of lines) in the
# umbrella, or a JSON parser (Boost.JSON, or gexec's own for .safetensors headers) in
# <gexec/model.hpp>, which reads no format.
echo
goal() {
  local name=$1 n=$2 most=$3
  printf '%-40s %10d  goal <= %d: %s\n' "$name" "$n" "$most" "$([ "$n" -le "$most" ] && echo met || echo 'NOT met')"
}
goal "<gexec/executor.hpp>, header-only" "$umbrella_lines" 150000
goal "<gexec/executor.hpp>, compiled mode" "$umbrella_compiled_lines" 100000
# included SOURCE PATTERN [FLAGS...]: the headers the preprocessor opens for SOURCE that
# match PATTERN, each with the first header outside the compiler's and the standard
# library's own folders on its include path (what brought it in).
included() {
  local src=$1 pattern=$2
  shift 2
  "$cxx" -std=c++20 "${flags[@]}" "$@" -I"$include" -H -E -o /dev/null "$src" 2>&1 |
    awk -v pat="$pattern" '/^\.+ / {
      d = length($1); path[d] = $2
      if ($2 ~ pat) {
        via = ""
        for (i = d - 1; i >= 1; --i) if (path[i] !~ /\/(gcc|c\+\+)\//) { via = path[i]; break }
        sub(/.*\/include\//, "", via); h = $2; sub(/.*\//, "", h)
        print h (via == "" ? "" : " (through " via ")")
      }
    }' | sort -u | paste -sd ' ' -
}
echo '#include <gexec/model.hpp>' >"$work/model.cpp"
for mode in "" -DGEXEC_COMPILED; do
  label=${mode:+compiled mode}
  label=${label:-header-only}
  hits=$(included "$work/umbrella.cpp" 'intrin\.h$' $mode)
  printf '%-40s %s\n' "intrinsics, umbrella, $label:" "${hits:-none}"
  hits=$(included "$work/model.cpp" 'boost/json|detail/json_(value|cursor)\.hpp$' $mode)
  printf '%-40s %s\n' "JSON parsers, model.hpp, $label:" "${hits:-none}"
done
