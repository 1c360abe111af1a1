#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# CUDA is loaded only when used: a CUDA build's ctrain and libctrain.so link no CUDA library (the
# module libctrain-cuda.so.0 does); `ctrain env`, `--version`, `plan --accelerator cpu` and auto-
# detection on a node without the CUDA driver never map cuBLAS, NCCL or the CUDA runtime;
# --accelerator cuda loads the module and gives the same reason as before; a missing or broken
# module (CTRAIN_CUDA_MODULE) is a clear error with a hint, its path escaped.
ROOT=$(cd "$(dirname "$0")/.." && pwd)
case ${CTRAIN_BUILD:-build} in
    /*) B=$CTRAIN_BUILD ;;
    *) B="$ROOT/${CTRAIN_BUILD:-build}" ;;
esac
CTRAIN="$B/ctrain"
T=$(mktemp -d /tmp/ctrain-t57-XXXXXX)
trap 'rm -rf "$T"' EXIT
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); echo "not ok $n - $1"; [ -n "$2" ] && sed 's/^/# /' "$2"; }
check() { if eval "$1"; then ok "$2"; else nok "$2" "$3"; fi; }
CUDA_LIBS='libcublas|libcublasLt|libnccl|libcudart'

# A CUDA build is one whose CUDA test tool calls the CUDA runtime.
nm "$B/t/cuda_check" 2>/dev/null | grep -q ' U cudaGetDeviceCount' ||
    { echo "1..0 # SKIP $B is not a CUDA build (CUDA=0, or no nvcc)"; exit 0; }

# The libraries a command maps (ld.so's own account: LD_DEBUG=files), one name a line.
maps() { LD_DEBUG=files "$@" 2>&1 >/dev/null | sed -n 's/.*file=\([^ ]*\).*\[0\];.*/\1/p' | sort -u; }

echo "1..9"
# 1-2: the link.
readelf -d "$CTRAIN" "$B/libctrain.so" >"$T/needed" 2>&1
check '! grep -Eq "NEEDED.*($CUDA_LIBS)" "$T/needed"' \
    "ctrain and libctrain.so need no CUDA library (readelf -d)" "$T/needed"
readelf -d "$B/libctrain-cuda.so.0" >"$T/mod.needed" 2>&1
nm -D --defined-only "$B/libctrain-cuda.so.0" >>"$T/mod.needed" 2>&1
check 'grep -q "NEEDED.*libcublasLt" "$T/mod.needed" && grep -q "NEEDED.*libnccl" "$T/mod.needed" &&
       grep -q "NEEDED.*libcudart" "$T/mod.needed" && [ "$(grep -c " [A-Z] " "$T/mod.needed")" -eq 1 ] &&
       grep -q " D ct_cuda_module_v1$" "$T/mod.needed"' \
    "libctrain-cuda.so.0 links cuBLASLt, NCCL and the runtime, and exports its table only" "$T/mod.needed"

# 3-5: what runs without CUDA maps none of it.
maps "$CTRAIN" env --json >"$T/env.maps"
check '[ -s "$T/env.maps" ] && ! grep -Eq "$CUDA_LIBS|libctrain-cuda" "$T/env.maps"' \
    "ctrain env --json maps no CUDA library and not the module" "$T/env.maps"
{ maps "$CTRAIN" --version; maps "$CTRAIN" plan --accelerator cpu; } >"$T/cpu.maps"
check '! grep -Eq "$CUDA_LIBS|libctrain-cuda" "$T/cpu.maps"' \
    "ctrain --version and plan --accelerator cpu map none of it" "$T/cpu.maps"
if why=$("$B/t/cuda_check" probe); then
    for i in 5 6 7; do echo "ok $i # SKIP a CUDA device is present ($why)"; done
    n=7
else
    why=${why#unavailable: }
    echo "# cuda here: $why"
    case $why in no\ CUDA\ driver*) nodriver=1 ;; *) nodriver=0 ;; esac
    if [ $nodriver -eq 1 ]; then
        maps "$CTRAIN" plan >"$T/auto.maps"
        "$CTRAIN" plan >"$T/auto.out" 2>&1
        check '! grep -Eq "$CUDA_LIBS|libctrain-cuda" "$T/auto.maps" &&
               grep -qF "cuda is not available: no CUDA driver (libcuda.so.1 not found)" "$T/auto.out"' \
            "auto on a node without the CUDA driver: cpu with the same reason, module not loaded" "$T/auto.out"
    else
        ok "# SKIP the CUDA driver library is installed here (auto loads the module)"
    fi
    # 6-7: --accelerator cuda loads the module, which gives today's reason.
    maps "$CTRAIN" plan --accelerator cuda >"$T/cuda.maps"
    "$CTRAIN" plan --accelerator cuda >"$T/cuda.out" 2>&1
    rc=$?
    check 'grep -q "libctrain-cuda.so.0" "$T/cuda.maps" && grep -q libcublasLt "$T/cuda.maps"' \
        "--accelerator cuda loads libctrain-cuda.so.0 (and cuBLASLt)" "$T/cuda.maps"
    check '[ $rc -eq 2 ] && grep -qF "ctrain: error: --accelerator cuda: CUDA is not available on this machine ($why)" "$T/cuda.out" &&
           grep -q "^ctrain: hint: " "$T/cuda.out"' \
        "--accelerator cuda without a device: exit 2 with the module's reason ($why)" "$T/cuda.out"
fi

# 8-9: a missing module, and a file that is not one (its name has an escape in it).
CTRAIN_CUDA_MODULE=/nonexistent/libctrain-cuda.so.0 "$CTRAIN" plan --accelerator cuda >"$T/miss.out" 2>&1
rc=$?
check '[ $rc -eq 2 ] && grep -qF "cannot load ctrain'"'"'s CUDA module /nonexistent/libctrain-cuda.so.0: no such file" "$T/miss.out" &&
       grep -q "CTRAIN_CUDA_MODULE names a file that does not exist" "$T/miss.out" && grep -q "^ctrain: hint: " "$T/miss.out"' \
    "CTRAIN_CUDA_MODULE=/nonexistent/...: exit 2, the path and what to do" "$T/miss.out"
esc=$(printf '\033')
bad="$T/bad${esc}[31m.so"
echo "not a library" >"$bad"
CTRAIN_CUDA_MODULE=$bad "$CTRAIN" plan --accelerator cuda >"$T/bad.out" 2>&1
rc=$?
check '[ $rc -eq 2 ] && grep -qF "dlopen failed: " "$T/bad.out" && grep -qF "bad\\x1b[31m.so" "$T/bad.out" &&
       ! grep -q "$esc" "$T/bad.out" && grep -q "libcudart, libcublas" "$T/bad.out"' \
    "a file that is not a library: exit 2, dlerror's text escaped, a hint naming the CUDA libraries" "$T/bad.out"
