#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Where there is no CUDA device (or no CUDA in the build): --accelerator cuda is refused with the
# reason before anything runs, auto picks cpu and says why; libctrain-core stays CUDA-free and only
# the module libctrain-cuda.so.0 links the CUDA libraries (t/57); t/tools/nccl_check skips all its
# tests with the reason.
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B="$ROOT/${CTRAIN_BUILD:-build}"
CTRAIN="$B/ctrain"
T=$(mktemp -d /tmp/ctrain-t53-XXXXXX)
trap 'rm -rf "$T"' EXIT
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); echo "not ok $n - $1"; [ -n "$2" ] && sed 's/^/# /' "$2"; }
check() { if eval "$1"; then ok "$2"; else nok "$2" "$3"; fi; }

echo "1..8"
# 1-2: the build's separation holds with or without a GPU.
check '! nm -A "$B/libctrain-core.a" 2>/dev/null | grep -Eiq " [UTDB] _*(cuda|cublas|nccl)"' \
    "libctrain-core.a neither defines nor needs a CUDA, cuBLAS or NCCL symbol"
if [ -e "$B/libctrain-cuda.so.0" ]; then
    check '! ldd "$CTRAIN" | grep -Eq "libcudart|libcublas|libnccl" &&
           ldd "$B/libctrain-cuda.so.0" | grep -q libcudart && ldd "$B/libctrain-cuda.so.0" | grep -q libcublas' \
        "a CUDA build: ctrain links no CUDA library, its module libctrain-cuda.so.0 the runtime and cuBLAS"
else
    check '! ldd "$CTRAIN" | grep -Eq "libcudart|libcublas|libnccl"' "a build without CUDA links no CUDA library"
fi

if why=$("$B/t/cuda_check" probe); then
    for i in 3 4 5 6 7 8; do echo "ok $i # SKIP a CUDA device is present ($why)"; done
    exit 0
fi
why=${why#unavailable: }
echo "# cuda here: $why"

# 3-4: explicit cuda is an error naming the reason; nothing runs, nothing is written.
"$CTRAIN" plan --accelerator cuda >"$T/plan.out" 2>&1
rc=$?
check '[ $rc -eq 2 ] && grep -q "^ctrain: error: --accelerator cuda: CUDA is not available on this machine" "$T/plan.out" &&
       grep -qF "$why" "$T/plan.out" && grep -q "^ctrain: hint: " "$T/plan.out"' \
    "plan --accelerator cuda: exit 2, 'not available' with the reason ($why) and a hint" "$T/plan.out"
"$CTRAIN" fit --accelerator cuda --max-epochs 1 --default-root-dir "$T/run" >"$T/fit.out" 2>&1
rc=$?
check '[ $rc -eq 2 ] && grep -q "CUDA is not available" "$T/fit.out" && [ ! -e "$T/run" ]' \
    "fit --accelerator cuda: exit 2 and nothing written" "$T/fit.out"
CTRAIN_ACCELERATOR=gpu "$CTRAIN" plan >"$T/env.out" 2>&1
check '[ $? -eq 2 ] && grep -q "CTRAIN_ACCELERATOR" "$T/env.out"' \
    "CTRAIN_ACCELERATOR=gpu (alias of cuda): the same refusal, naming the variable" "$T/env.out"

# 6-7: auto falls to cpu, and the plan says why.
"$CTRAIN" plan --accelerator auto >"$T/auto.out" 2>&1
check 'grep -q "\"accelerator\":[[:space:]]*\"cpu\"" "$T/auto.out"' "--accelerator auto resolves to cpu" "$T/auto.out"
check 'grep -qF "cuda is not available: $(printf %s "$why" | cut -c1-20)" "$T/auto.out"' \
    "the plan gives auto's reason" "$T/auto.out"

# 8: t/tools/nccl_check says why nothing of NCCL runs (a TAP skip-all plan), exit 0; a bad argument is 2.
"$B/t/nccl_check" >"$T/nccl.out" 2>&1
rc=$?
"$B/t/nccl_check" --ranks 0 >/dev/null 2>&1
rc2=$?
check '[ $rc -eq 0 ] && [ $rc2 -eq 2 ] && grep -qF "1..0 # SKIP no CUDA device ($why)" "$T/nccl.out"' \
    "nccl_check without a device: 1..0 # SKIP with the reason, exit 0 (bad arguments: 2)" "$T/nccl.out"
