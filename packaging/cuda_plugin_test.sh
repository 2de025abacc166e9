#!/bin/bash
# Issue 42 (CUDA loaded at run time): the package's tree ships the CUDA plugin beside
# libgpusched_c.so.1, the plugin needs no CUDA library (it carries the static runtime and
# dlopens the driver), and the staged library loads it: gpusched_cuda_device_count's reason is
# then about the driver or the GPU, never "plugin ... not loaded".
#   cuda_plugin_test.sh PACKAGE_ROOT
set -euo pipefail
root=$1
lib=$root/usr/lib
fail() { echo "FAIL: $*" >&2; exit 1; }

[ -f "$lib/libgpusched_cuda.so.1" ] || fail "$lib/libgpusched_cuda.so.1 is not in the package's tree"
needed=$(readelf -d "$lib/libgpusched_cuda.so.1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
if grep -E '^lib(cuda|cudart)' <<<"$needed"; then
  fail "the plugin needs a CUDA library: $(tr '\n' ' ' <<<"$needed")"
fi
if readelf -d "$lib/libgpusched_c.so.1" | grep -E 'NEEDED.*lib(cuda|cudart)'; then
  fail "libgpusched_c.so.1 needs a CUDA library"
fi

python3 - "$lib/libgpusched_c.so.1" <<'PY'
import ctypes, sys
c = ctypes.CDLL(sys.argv[1])
c.gpusched_last_error.restype = ctypes.c_char_p
n = c.gpusched_cuda_device_count()
why = (c.gpusched_last_error() or b"").decode()
print("gpusched_cuda_device_count from the package's tree: %d (%s)" % (n, why or "GPUs found"))
if n <= 0 and ("not loaded" in why or not why):
    sys.exit("FAIL: the staged library did not load its plugin: " + why)
PY
echo "PASS: the package ships libgpusched_cuda.so.1 and its library loads it"
