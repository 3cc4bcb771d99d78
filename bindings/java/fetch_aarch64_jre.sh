#!/bin/sh
# Puts Debian 12's aarch64 Java runtime (openjdk-17-jre-headless:arm64, and zlib1g:arm64,
# the one library it needs that the cross compiler's /usr/aarch64-linux-gnu lacks) in
# <dir>, unpacked with dpkg -x: the machine's dpkg state is not touched (no
# dpkg --add-architecture, nothing installed). apt reads the arm64 package lists into
# <dir>/apt, a state of its own. What the arm stage's binding_java_aarch64 runs under
# qemu-aarch64:
#   qemu-aarch64 -L /usr/aarch64-linux-gnu -E LD_LIBRARY_PATH=<dir>/root/lib/aarch64-linux-gnu \
#     <dir>/root/usr/lib/jvm/java-17-openjdk-arm64/bin/java ...
# Usage: fetch_aarch64_jre.sh <dir>. Does nothing where <dir> already holds it.
set -eu
if [ $# -ne 1 ]; then
  echo "usage: $0 <dir>" >&2
  exit 2
fi
dir=$1
java=$dir/root/usr/lib/jvm/java-17-openjdk-arm64/bin/java
if [ -x "$java" ] && [ -f "$dir/complete" ]; then
  exit 0
fi
rm -rf "$dir"
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)  # apt takes its Dir:: paths as absolute
mkdir -p "$dir/apt/state/lists/partial" "$dir/apt/cache/archives/partial" "$dir/debs" "$dir/root"
: >"$dir/apt/state/status"
apt_options="-o APT::Architecture=arm64 -o APT::Architectures::=arm64 -o Dir::State=$dir/apt/state
  -o Dir::State::status=$dir/apt/state/status -o Dir::Cache=$dir/apt/cache -o Debug::NoLocking=1
  -o APT::Sandbox::User=root"
# shellcheck disable=SC2086 # the options are words
apt-get $apt_options update -qq
# shellcheck disable=SC2086
(cd "$dir/debs" && apt-get $apt_options download -qq openjdk-17-jre-headless zlib1g)
for deb in "$dir"/debs/*.deb; do
  dpkg -x "$deb" "$dir/root"
done
# The packages' links into /etc and /usr (jvm.cfg, the security policy files) name the
# machine's paths: point them into the unpacked tree.
root=$dir/root
find "$root" -type l -lname '/*' | while read -r link; do
  ln -sfn "$root$(readlink "$link")" "$link"
done
rm -rf "$dir/apt" "$dir/debs"
[ -x "$java" ] || { echo "$0: $java is missing after unpacking" >&2; exit 1; }
echo "openjdk-17-jre-headless:arm64 in $dir" >"$dir/complete"
echo "aarch64 JRE: $java"
