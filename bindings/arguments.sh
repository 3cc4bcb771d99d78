# The arguments every bindings/<language>/run_test.sh takes, read once (sourced):
#   <gexec source dir> <dir of libgexec_c.so> <libgexec_test_kernels.so> [<build dir>]
# sets src, libdir, kernels and build, and exits 77 with "SKIP: <reason>" where
# GEXEC_BINDING_SKIP gives one (CMake sets it in sanitizer builds).
if [ $# -lt 3 ]; then
  echo "usage: $0 <gexec source dir> <dir of libgexec_c.so> <libgexec_test_kernels.so> [<build dir>]" >&2
  exit 2
fi
if [ -n "${GEXEC_BINDING_SKIP:-}" ]; then
  echo "SKIP: $GEXEC_BINDING_SKIP"
  exit 77
fi
src=$(cd "$1" && pwd)
libdir=$(cd "$2" && pwd)
kernels=$3
build=${4:-}
