#!/usr/bin/env bash
# One packaging test: bash run_test.sh NAME [ARGS...]; tests/packaging/CMakeLists.txt
# registers each and sets the environment below. Each test starts from an empty
# folder, shows a step's output only when the step fails, and ends by running a
# program built against gexec, whose output the test checks.
#
#   CMAKE               the cmake that configured gexec
#   GEXEC_SOURCE_DIR    gexec's source tree
#   GEXEC_BINARY_DIR    the build tree the tests belong to
#   GEXEC_WORK          this folder's build folder; each test works in GEXEC_WORK/NAME
#   GEXEC_PREFIX        where package_install installs the headers for the others
#   GEXEC_CONAN_VENV    the virtual environment that holds Conan
#   GEXEC_BOOST_VENV    the virtual environment that holds PyPI's boost-headers (oldest_boost)
# CC, CXX, CMAKE_GENERATOR and CMAKE_<LANG>_COMPILER_LAUNCHER carry the build tree's
# choices into the consumers' builds (CMake reads them from the environment).
set -euo pipefail
name=$1
shift
work=$GEXEC_WORK/$name
src=$GEXEC_SOURCE_DIR
prefix=$GEXEC_PREFIX
launcher=()  # the compiler launcher, for the tests that call the compiler themselves
[ -z "${CMAKE_CXX_COMPILER_LAUNCHER:-}" ] || launcher=("$CMAKE_CXX_COMPILER_LAUNCHER")
rm -rf "$work"
mkdir -p "$work"

# step COMMAND...: runs it quietly; on failure prints its output and stops the test.
step() {
  local log=$work/step.log
  if ! "$@" >"$log" 2>&1; then
    cat "$log"
    echo "FAILED: $*"
    exit 1
  fi
}
# skip WHY: the test cannot run here; CTest reports it as skipped (SKIP_RETURN_CODE 77).
skip() {
  echo "SKIP: $*"
  exit 77
}
need_file() {
  [ -e "$1" ] || { echo "FAILED: $1 is missing"; exit 1; }
}
# consumer BUILD_DIR CMAKE_ARGS...: builds tests/packaging/consumer and runs it.
consumer() {
  local build=$1
  shift
  step "$CMAKE" -S "$src/tests/packaging/consumer" -B "$build" "$@"
  step "$CMAKE" --build "$build"
  "$build/consumer"
}

# The headers' install, configured where none of the tools the other parts use can be
# found (CLI11, doctest, Google Benchmark hidden from find_package): a plain configure
# succeeds and leaves those parts out; one with the parts off installs without a build.
install_headers() {
  local hide=(-DCMAKE_DISABLE_FIND_PACKAGE_CLI11=ON -DCMAKE_DISABLE_FIND_PACKAGE_doctest=ON
              -DCMAKE_DISABLE_FIND_PACKAGE_benchmark=ON)
  step "$CMAKE" -S "$src" -B "$work/plain" "${hide[@]}"
  grep -q "tests/ left out: it needs doctest" "$work/step.log" || { cat "$work/step.log"; echo "FAILED: tests/ not left out"; exit 1; }
  step "$CMAKE" -S "$src" -B "$work/build" -DGEXEC_BUILD_TESTS=OFF -DGEXEC_BUILD_EXAMPLES=OFF -DGEXEC_BUILD_BENCHMARKS=OFF -DGEXEC_BUILD_C_API=OFF \
    -DGEXEC_BUILD_COMPILED=OFF "${hide[@]}"
  rm -rf "$prefix"
  step "$CMAKE" --install "$work/build" --prefix "$prefix"
  need_file "$prefix/include/gexec/executor.hpp"
  need_file "$prefix/lib/cmake/gexec/gexecConfig.cmake"
  need_file "$prefix/lib/cmake/gexec/gexecConfigVersion.cmake"
  need_file "$prefix/lib/pkgconfig/gexec.pc"
  need_file "$prefix/share/doc/gexec/LICENSE"
  [ ! -e "$prefix/bin" ] || { echo "FAILED: the headers' install put programs in $prefix/bin"; exit 1; }
  echo "install ok: $(find "$prefix/include/gexec" -name '*.hpp' | wc -l) headers, CMake package, gexec.pc, LICENSE"
}

# Installing the build tree the tests belong to brings the sample kernels (component
# examples) and, where tools/ is built, gexec-run, which then runs the bundled MLP on
# the installed kernels; C programs run on the installed C API (ARGS: whether gexec-run is
# built, whether gexec_c is).
install_tree() {
  local has_tools=$1 has_c_api=$2 installed=$work/prefix
  step "$CMAKE" --install "$GEXEC_BINARY_DIR" --prefix "$installed"
  need_file "$installed/include/gexec/executor.hpp"
  need_file "$installed/lib/gexec/libgexec_test_kernels.so"
  local tools="gexec-run not built"
  if [ "$has_tools" = 1 ]; then
    need_file "$installed/bin/gexec-run"
    local out
    out=$("$installed/bin/gexec-run" -g "$src/examples/mlp/graph.json" -l "$installed/lib/gexec/libgexec_test_kernels.so" \
          -p "$src/examples/mlp/params.bin" -i x=0.5,-1,2,0.25)
    echo "$out"
    # numpy's output for the same weights.
    grep -q "0.400786 0.336452 0.262762" <<<"$out" || { echo "FAILED: gexec-run gave the wrong output"; exit 1; }
    tools="bin/gexec-run runs the MLP"
  fi
  # gexec::compiled, where this build tree has it, consumed from the install.
  local compiled="gexec::compiled not built"
  if grep -q "gexec::compiled" "$installed/lib/cmake/gexec/gexecTargets.cmake"; then
    local consumed
    consumed=$(consumer "$work/consumer" -DGEXEC_CONSUME=find_package "-DCMAKE_PREFIX_PATH=$installed" -DGEXEC_CONSUMER_COMPILED=ON)
    echo "$consumed"
    grep -q "consumer ok: y = 2 3.5" <<<"$consumed" || { echo "FAILED: the consumer of gexec::compiled"; exit 1; }
    compiled="a consumer of gexec::compiled runs"
  fi
  # gexec::c and gexec::c_static, where this build tree has the C API, consumed from the
  # install by a C program (tests/packaging/c_consumer) that runs the bundled MLP.
  local c_api="the C API not built"
  if [ "$has_c_api" = 1 ]; then
    grep -q "add_library(gexec::c SHARED IMPORTED)" "$installed/lib/cmake/gexec/gexecTargets.cmake" ||
      { echo "FAILED: the installed package does not export gexec::c"; exit 1; }
    need_file "$installed/include/gexec/c_api.h"
    step "$CMAKE" -S "$src/tests/packaging/c_consumer" -B "$work/c_consumer" "-DCMAKE_PREFIX_PATH=$installed"
    step "$CMAKE" --build "$work/c_consumer"
    local program out
    for program in consumer_c consumer_c_static; do
      out=$("$work/c_consumer/$program" "$src/examples/mlp/graph.json" "$installed/lib/gexec/libgexec_test_kernels.so" \
            "$src/examples/mlp/params.bin")
      echo "$program: $out"
      # numpy's output for the same weights, as for gexec-run above.
      grep -q "c consumer ok: y = 0.400786 0.336452 0.262762" <<<"$out" || { echo "FAILED: $program gave the wrong output"; exit 1; }
    done
    # The shared one runs the installed libgexec_c.so, not the build tree's. (ldd's output is
    # read whole first: grep -q stops at its match, and under pipefail the SIGPIPE it then
    # gives ldd would fail the pipeline.)
    local needs
    needs=$(ldd "$work/c_consumer/consumer_c")
    grep -q "libgexec_c.so => $installed/" <<<"$needs" ||
      { echo "$needs"; echo "FAILED: consumer_c does not load $installed's libgexec_c.so"; exit 1; }
    needs=$(ldd "$work/c_consumer/consumer_c_static")
    if grep -q libgexec_c <<<"$needs"; then
      echo "FAILED: consumer_c_static loads libgexec_c"; exit 1
    fi
    c_api="C programs on gexec::c and gexec::c_static run"
  fi
  echo "install tree ok: lib/gexec/libgexec_test_kernels.so, $tools, $compiled, $c_api"
}

# find_package(gexec) of the installed headers.
find_package() {
  consumer "$work/build" -DGEXEC_CONSUME=find_package "-DCMAKE_PREFIX_PATH=$prefix"
}

# add_subdirectory of the source tree, the consumer finding nothing itself. DLPack's
# CMake package is hidden too, so gexec's stand-in target over dlpack.h is what serves.
add_subdirectory() {
  consumer "$work/build" -DGEXEC_CONSUME=add_subdirectory "-DGEXEC_SOURCE=$src" -DCMAKE_DISABLE_FIND_PACKAGE_dlpack=ON
  grep -q "^GEXEC_DLPACK_INCLUDE_DIR:PATH=/" "$work/build/CMakeCache.txt" || { echo "FAILED: DLPack's stand-in not used"; exit 1; }
}

# FetchContent of a source archive by file:// URL (no network), as of a release
# tarball: the top-level files the library needs and nothing else.
fetchcontent() {
  (cd "$src" && step "$CMAKE" -E tar czf "$work/gexec-src.tar.gz" CMakeLists.txt LICENSE cmake include)
  consumer "$work/build" -DGEXEC_CONSUME=fetchcontent "-DGEXEC_ARCHIVE=file://$work/gexec-src.tar.gz"
}

# A plain compiler invocation with the flags pkg-config gives for the installed gexec.pc
# (compiled and linked in two steps, so that a compiler launcher can cache the first).
pkg_config() {
  command -v pkg-config >/dev/null || skip "pkg-config is not installed"
  export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
  local cflags libs
  cflags=$(pkg-config --cflags gexec)
  libs=$(pkg-config --libs gexec)
  echo "pkg-config gexec: --cflags $cflags --libs $libs"
  # shellcheck disable=SC2086 # the flags are words
  step "${launcher[@]}" "$CXX" -std=c++20 $cflags -c "$src/tests/packaging/plain_build/main.cpp" -o "$work/main.o"
  # shellcheck disable=SC2086
  step "$CXX" "$work/main.o" $libs -o "$work/plain_build"
  "$work/plain_build"
}

# A plain compiler invocation over the source tree, no CMake, no pkg-config: the headers
# configure what they need (ARGS: the compiler).
plain_gxx() {
  step "${launcher[@]}" "$1" -std=c++20 "-I$src/include" -c "$src/tests/packaging/plain_build/main.cpp" -o "$work/main.o"
  step "$1" "$work/main.o" -o "$work/plain_build" -lboost_json -ldl -pthread
  "$work/plain_build"
}

# conan create of the recipe, offline (no requirement comes from a Conan remote), with
# Conan from PyPI in a virtual environment kept in the build tree and a Conan home made
# afresh in this test's folder. test_package is copied here so nothing lands in the
# source tree.
conan() {
  local venv=$GEXEC_CONAN_VENV version=2.34.0
  if ! grep -q "$version" <<<"$("$venv/bin/conan" --version 2>/dev/null)"; then
    rm -rf "$venv"
    python3 -m venv "$venv" >"$work/venv.log" 2>&1 || { cat "$work/venv.log"; skip "python3 -m venv failed"; }
    "$venv/bin/pip" install --quiet --timeout 30 --retries 1 "conan==$version" >"$work/pip.log" 2>&1 ||
      { tail -n 5 "$work/pip.log"; rm -rf "$venv"; skip "Conan $version could not be installed from PyPI"; }
  fi
  export CONAN_HOME=$work/home
  unset CC CXX
  step "$venv/bin/conan" profile detect
  cp -r "$src/test_package" "$work/test_package"
  "$venv/bin/conan" create "$src" --no-remote --build=missing -s compiler.cppstd=20 -tf "$work/test_package" \
    >"$work/create.log" 2>&1 || { cat "$work/create.log"; echo "FAILED: conan create"; exit 1; }
  grep "test_package ok" "$work/create.log"
}

# gexec's code that uses Boost.JSON, parsed against the oldest Boost gexec supports (ARGS:
# that version, MAJOR.MINOR): PyPI's boost-headers of that version, in a virtual
# environment kept in the build tree, its folder found as docs/python.md finds it. One
# translation unit: the umbrella header, every header of include/gexec and triton/ that
# names Boost.JSON, and Boost.JSON's sources as the header-only builds compile them.
oldest_boost() {
  local version=$1 venv=$GEXEC_BOOST_VENV
  local installed='import boost_headers; print(boost_headers.__version__)'
  if [[ "$("$venv/bin/python" -c "$installed" 2>/dev/null)" != "$version".* ]]; then
    rm -rf "$venv"
    python3 -m venv "$venv" >"$work/venv.log" 2>&1 || { cat "$work/venv.log"; skip "python3 -m venv failed"; }
    "$venv/bin/pip" install --quiet --timeout 30 --retries 1 "boost-headers==$version.*" >"$work/pip.log" 2>&1 ||
      { tail -n 5 "$work/pip.log"; rm -rf "$venv"; skip "boost-headers $version could not be installed from PyPI"; }
  fi
  local boost headers=() tu=$work/boost_json_users.cpp
  boost=$("$venv/bin/python" -c 'import boost_headers; print(boost_headers.get_include())')
  mapfile -t headers < <(cd "$src" && grep -rlE 'boost/json|boost::json|json::' include/gexec triton --include='*.hpp' | sort)
  {
    echo "#include <gexec/executor.hpp>"
    for h in "${headers[@]}"; do
      case $h in
        include/*) echo "#include <${h#include/}>" ;;
        *) echo "#include \"$src/$h\"" ;;
      esac
    done
    echo "#include <boost/json/src.hpp>"
    echo "#include <boost/version.hpp>"
    echo "static_assert(BOOST_VERSION / 100 == $((${version%.*} * 1000 + 10#${version#*.})), \"not Boost $version's headers\");"
  } >"$tu"
  echo "Boost $version's headers ($boost) for ${headers[*]}"
  # Boost's folder as CMake passes an imported target's: -isystem, searched before /usr/include.
  step "$CXX" -std=c++20 -fsyntax-only -Wall -Wextra -Werror -DBOOST_JSON_NO_LIB "-I$src/include" -isystem "$boost" "$tu"
  echo "oldest Boost ok: $version"
}

case $name in
  install_headers | install_tree | find_package | add_subdirectory | fetchcontent | pkg_config | plain_gxx | conan | oldest_boost)
    "$name" "$@" ;;
  *)
    echo "unknown packaging test: $name"
    exit 2 ;;
esac
