#!/bin/sh
# Builds and tests gexec's Java binding: the JNI glue (native/gexec_jni.c) with the system C
# compiler against libgexec_c, the classes with javac (javac -h writes the JNI header),
# gexec.jar with jar, then runs the self-checking test program on examples/mlp.
# Usage: run_test.sh <source dir> <dir of libgexec_c.so> <kernel library> <work dir>
# Exits 77 ("SKIP: ...") where no JDK is found. JAVA_HOME picks the JDK; else javac's.
# For another target: CC (the C compiler, e.g. aarch64-linux-gnu-gcc, with <dir of
# libgexec_c.so> and the kernel library built for that target) and GEXEC_JAVA_RUN (the
# command that runs java there, e.g. "qemu-aarch64 -L /usr/aarch64-linux-gnu <jre>/bin/java") and
# GEXEC_JAVA_RUN_JAVA (that java: where it is missing the test is SKIPPED, saying so; CMake's
# binding_java_aarch64 sets them, and GEXEC_JAVA_ARCH, the os.arch the JVM must report).
# Where aarch64-linux-gnu-gcc is installed, the glue is also compiled for aarch64 (a build check).
set -eu
if [ $# -ne 4 ]; then
  echo "usage: $0 <source dir> <dir of libgexec_c.so> <kernel library> <work dir>" >&2
  exit 2
fi
src=$(cd "$1" && pwd)
libdir=$(cd "$2" && pwd)
kernels=$3
work=$4
here=$src/bindings/java

jdk=
for candidate in "${JAVA_HOME:-}" \
    "$(command -v javac >/dev/null 2>&1 && dirname "$(dirname "$(readlink -f "$(command -v javac)")")")" \
    /usr/lib/jvm/default-java /usr/lib/jvm/java-17-openjdk-amd64; do
  if [ -n "$candidate" ] && [ -x "$candidate/bin/javac" ] && [ -x "$candidate/bin/jar" ] &&
      [ -f "$candidate/include/jni.h" ]; then
    jdk=$candidate
    break
  fi
done
if [ -z "$jdk" ]; then
  echo "SKIP: no JDK found (javac, jar and include/jni.h; install default-jdk-headless or set JAVA_HOME)"
  exit 77
fi
cc=${CC:-cc}
if ! command -v "$cc" >/dev/null 2>&1; then
  echo "SKIP: no C compiler ($cc) for the JNI library"
  exit 77
fi
if [ -n "${GEXEC_JAVA_RUN_JAVA:-}" ] && [ ! -x "$GEXEC_JAVA_RUN_JAVA" ]; then
  echo "SKIP: no JVM for the target at $GEXEC_JAVA_RUN_JAVA (scripts/deps.sh unpacks Debian's openjdk-17-jre-headless:arm64 there with bindings/java/fetch_aarch64_jre.sh)"
  exit 77
fi
echo "JDK: $jdk ($("$jdk/bin/javac" -version 2>&1))"

rm -rf "$work"
mkdir -p "$work/classes" "$work/test-classes" "$work/include" "$work/lib"

# Classes, and the JNI header of org.gexec.Native.
"$jdk/bin/javac" -Xlint:all -Werror --release 11 -d "$work/classes" -h "$work/include" "$here"/src/org/gexec/*.java
"$jdk/bin/jar" --create --file "$work/gexec.jar" -C "$work/classes" .

# The JNI glue; its header must match the one just generated.
"$cc" -std=c11 -O2 -g -fPIC -shared -Wall -Wextra -Werror \
  -I"$work/include" -I"$jdk/include" -I"$jdk/include/linux" -I"$src/include" -I/usr/include/dlpack \
  -o "$work/lib/libgexec_jni.so" "$here/native/gexec_jni.c" \
  -L"$libdir" -lgexec_c -Wl,-rpath,"$libdir" -Wl,--no-undefined

# The glue compiles for aarch64 too (Android boards): a build check, not linked.
if [ "$(basename "$cc")" != aarch64-linux-gnu-gcc ] && command -v aarch64-linux-gnu-gcc >/dev/null 2>&1; then
  aarch64-linux-gnu-gcc -std=c11 -O2 -fPIC -Wall -Wextra -Werror -c \
    -I"$work/include" -I"$jdk/include" -I"$jdk/include/linux" -I"$src/include" -I/usr/include/dlpack \
    -o "$work/gexec_jni.aarch64.o" "$here/native/gexec_jni.c"
  echo "aarch64: the JNI glue compiles (aarch64-linux-gnu-gcc)"
fi

# The test, against the jar.
"$jdk/bin/javac" -Xlint:all -Werror --release 11 -cp "$work/gexec.jar" -d "$work/test-classes" \
  "$here"/test/org/gexec/test/*.java
# --enable-native-access: newer JDKs warn about System.loadLibrary without it (17 accepts it).
java="${GEXEC_JAVA_RUN:-$jdk/bin/java} --enable-native-access=ALL-UNNAMED"
status=0
$java -Xcheck:jni -Djava.library.path="$work/lib" -cp "$work/gexec.jar:$work/test-classes" \
  org.gexec.test.GexecTest "$src" "$kernels" >"$work/test.log" 2>&1 || status=$?
cat "$work/test.log"
[ "$status" -eq 0 ] || exit "$status"
# Where GEXEC_JAVA_ARCH is set (e.g. aarch64), the JVM that ran the test must say it is that.
if [ -n "${GEXEC_JAVA_ARCH:-}" ]; then
  grep -q "JVM on $GEXEC_JAVA_ARCH\$" "$work/test.log" || { echo "FAILED: the JVM did not run on $GEXEC_JAVA_ARCH"; exit 1; }
  machine=$(readelf -h "$work/lib/libgexec_jni.so" | sed -n 's/^ *Machine: *//p')
  echo "$machine" | grep -qi "$GEXEC_JAVA_ARCH" || { echo "FAILED: libgexec_jni.so is for $machine"; exit 1; }
  echo "JNI library: $machine, run by a JVM on $GEXEC_JAVA_ARCH"
fi

# The benchmark (bench/Bench.java) compiles; GEXEC_JAVA_BENCH=1 runs it.
mkdir -p "$work/bench"
"$jdk/bin/javac" -Xlint:all -Werror --release 11 -cp "$work/gexec.jar" -d "$work/bench" "$here/bench/Bench.java"
if [ "${GEXEC_JAVA_BENCH:-0}" = 1 ]; then
  $java -Djava.library.path="$work/lib" -cp "$work/gexec.jar:$work/bench" \
    Bench "$src/examples/mlp/graph.json" "$kernels" "$src/examples/mlp/params.bin"
fi

# docs/java.md's example, as written there.
mkdir -p "$work/example"
"$jdk/bin/javac" -Xlint:all -Werror --release 11 -cp "$work/gexec.jar" -d "$work/example" "$here/example/Example.java"
echo "example:"
$java -Djava.library.path="$work/lib" -cp "$work/gexec.jar:$work/example" \
  Example "$src/examples/mlp/graph.json" "$kernels" "$src/examples/mlp/params.bin"
