#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Training on a GPU: a short cuda run reaches the cpu run's accuracy; bf16-mixed and 16-mixed land
# within 0.5 points of cuda 32-true; the summary records device memory and 16-mixed's skipped
# steps; with two GPUs, ddp over NCCL trains to the same accuracy. SKIP without a CUDA device.
# The data: Fashion-MNIST's four IDX files in CTRAIN_FMNIST_DIR (default Debian's dataset-fashion-mnist
# folder; scripts/gpu-check points it at the GPU kit's copy).
ROOT=$(cd "$(dirname "$0")/.." && pwd)
case "${CTRAIN_BUILD:-build}" in /*) B=$CTRAIN_BUILD ;; *) B="$ROOT/${CTRAIN_BUILD:-build}" ;; esac
CTRAIN="$B/ctrain"
T=$(mktemp -d /tmp/ctrain-t52-XXXXXX)
trap 'rm -rf "$T"' EXIT
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); echo "not ok $n - $1"; [ -n "$2" ] && sed 's/^/# /' "$2"; }
check() { if eval "$1"; then ok "$2"; else nok "$2" "$3"; fi; }
skip_all() { for i in $(seq 1 10); do echo "ok $i # SKIP $1"; done; exit 0; }
acc_of() { sed -n 's/.*"test_acc":[[:space:]]*\([0-9.]*\).*/\1/p' "$1/summary.json"; }
within() { awk "BEGIN {d = $1 - $2; if (d < 0) d = -d; exit !(d <= $3)}"; }

FMNIST=${CTRAIN_FMNIST_DIR:-/usr/share/datasets/fashion-mnist}

echo "1..10"
probe=$("$B/t/cuda_check" probe) || skip_all "no CUDA device (${probe#unavailable: })"
[ -f "$FMNIST/train-images-idx3-ubyte.gz" ] ||
    skip_all "no Fashion-MNIST in $FMNIST (scripts/install-deps installs dataset-fashion-mnist; or set CTRAIN_FMNIST_DIR)"
ndev=${probe#available }
mkdir -p "$T/data"
"$B/t/idx_subset" "$FMNIST" "$T/data" 12000 2000 || exit 1
COMMON="--data $T/data --progress off --deterministic --max-epochs 2 --strategy single_device --devices 1"

"$CTRAIN" fit $COMMON --accelerator cpu --default-root-dir "$T/cpu" >"$T/cpu.out" 2>&1
"$CTRAIN" fit $COMMON --accelerator cuda --precision 32-true --default-root-dir "$T/f32" >"$T/f32.out" 2>&1
check '[ $? -eq 0 ]' "cuda 32-true fit exits 0" "$T/f32.out"
cpu=$(acc_of "$T/cpu"); f32=$(acc_of "$T/f32")
check "[ -n '$f32' ] && awk 'BEGIN {exit !($f32 >= $cpu - 0.005)}'" \
    "cuda 32-true test accuracy $f32 reaches the cpu's $cpu (within 0.5 points)" "$T/f32.out"
check 'grep -q "\"device_memory_peak_bytes\":[[:space:]]*[1-9]" "$T/f32/summary.json"' \
    "summary.json records the device memory peak" "$T/f32/summary.json"

"$CTRAIN" fit $COMMON --accelerator cuda --precision bf16-mixed --default-root-dir "$T/bf16" >"$T/bf16.out" 2>&1
check '[ $? -eq 0 ]' "cuda bf16-mixed fit exits 0" "$T/bf16.out"
bf16=$(acc_of "$T/bf16")
check "[ -n '$bf16' ] && within $bf16 $f32 0.005" "bf16-mixed accuracy $bf16 within 0.5 points of 32-true's $f32"

"$CTRAIN" fit $COMMON --accelerator cuda --precision 16-mixed --default-root-dir "$T/f16" >"$T/f16.out" 2>&1
check '[ $? -eq 0 ]' "cuda 16-mixed fit exits 0" "$T/f16.out"
f16=$(acc_of "$T/f16")
check "[ -n '$f16' ] && within $f16 $f32 0.005" "16-mixed accuracy $f16 within 0.5 points of 32-true's $f32"
check 'grep -q "\"overflow_skipped_steps\":" "$T/f16/summary.json" && grep -q "\"loss_scale\":" "$T/f16/summary.json"' \
    "summary.json records 16-mixed's skipped steps and loss scale" "$T/f16/summary.json"

if [ "$ndev" -ge 2 ]; then
    "$CTRAIN" fit --data "$T/data" --progress off --deterministic --max-epochs 2 --accelerator cuda \
        --strategy ddp --devices 2 --default-root-dir "$T/ddp" >"$T/ddp.out" 2>&1
    ddp=$(acc_of "$T/ddp")
    check "[ -n '$ddp' ] && within $ddp $f32 0.02" "ddp over NCCL on 2 GPUs trains ($ddp vs one GPU's $f32)" "$T/ddp.out"
else
    echo "ok 9 # SKIP ddp over NCCL needs 2 CUDA devices (this machine has $ndev)"
fi

# Accumulation and clipping need host gradients: on cuda they are refused (exit 2) with a hint,
# never run on the wrong memory.
"$CTRAIN" fit --data "$T/data" --progress off --max-steps 2 --accelerator cuda --accumulate-grad-batches 2 \
    --default-root-dir "$T/acc" >"$T/acc.out" 2>&1
check '[ $? -eq 2 ] && grep -q "keeps its gradients in device memory" "$T/acc.out" && grep -q "^ctrain: hint:" "$T/acc.out"' \
    "cuda: --accumulate-grad-batches refused with a hint (trainer-controls-device)" "$T/acc.out"
