#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The Trainer under a multi-rank strategy, unchanged: ctrain fit --strategy ddp --devices 2 (the
# subprocess launcher, ctrain's own PMIx server, MPI between the ranks). Rank 0 alone writes the
# outputs with the true world size; --deterministic runs are identical run to run; resuming inside
# an epoch under ddp equals the uninterrupted ddp run bit for bit; ddp with one rank equals
# single_device bit for bit.
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B="$ROOT/${CTRAIN_BUILD:-build}"
CTRAIN="$B/ctrain"
T=$(mktemp -d /tmp/ctrain-t06-XXXXXX)
trap 'rm -rf "$T"' EXIT
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); echo "not ok $n - $1"; [ -n "$2" ] && sed 's/^/# /' "$2"; }
check() { if eval "$1"; then ok "$2"; else nok "$2" "$3"; fi; }

echo "1..6"
if [ ! -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
    . "$(dirname "$0")/lib/ci.sh"
    ci_needs "dataset-fashion-mnist not installed"
    for i in 1 2 3 4 5 6; do echo "ok $i # SKIP dataset-fashion-mnist not installed"; done
    exit 0
fi
mkdir -p "$T/data"
"$B/t/idx_subset" /usr/share/datasets/fashion-mnist "$T/data" 6000 1000 || exit 1
# 5500 training samples, batch 64 per rank, 2 ranks: 43 steps per epoch.
DDP="--data $T/data --progress off --deterministic --strategy ddp --devices 2 --batch-size 64 --lr-schedule constant"

timeout 120 "$CTRAIN" fit $DDP --max-epochs 2 --log-every-n-steps 10 --default-root-dir "$T/a" >"$T/a.out" 2>&1
check '[ $? -eq 0 ] && grep -q "\"world_size\":[[:space:]]*2" "$T/a/summary.json" && grep -q "\"steps\":[[:space:]]*86" "$T/a/summary.json"' \
    "2-rank ddp fit: exit 0, summary with world_size 2 and 86 steps" "$T/a.out"
check '[ $(grep -c "^step," "$T/a/metrics.csv") -eq 1 ] && [ $(grep -c "^10," "$T/a/metrics.csv") -eq 1 ] && [ $(wc -l <"$T/a/metrics.csv") -eq 11 ]' \
    "metrics.csv written once (rank 0): 8 training rows and 2 validation rows" "$T/a/metrics.csv"
acc=$(sed -n 's/.*"test_acc":[[:space:]]*\([0-9.]*\).*/\1/p' "$T/a/summary.json")
check "awk 'BEGIN {exit !($acc > 0.7)}'" "2-rank ddp learns (test_acc $acc)" "$T/a/summary.json"

timeout 120 "$CTRAIN" fit $DDP --max-epochs 2 --default-root-dir "$T/b" >"$T/b.out" 2>&1
"$B/t/st_compare" "$T/a/last.safetensors" "$T/b/last.safetensors" >"$T/cmp1.out" 2>&1
check '[ $? -eq 0 ]' "--deterministic ddp runs are bit-identical run to run" "$T/cmp1.out"

timeout 120 "$CTRAIN" fit $DDP --max-epochs 2 --max-steps 50 --default-root-dir "$T/r" >"$T/r1.out" 2>&1 &&
timeout 120 "$CTRAIN" fit $DDP --max-epochs 2 --ckpt-path last --default-root-dir "$T/r" >"$T/r2.out" 2>&1
"$B/t/st_compare" "$T/a/last.safetensors" "$T/r/last.safetensors" >"$T/cmp2.out" 2>&1
check '[ $? -eq 0 ]' "ddp stopped at step 50 (inside epoch 2) and resumed equals the uninterrupted ddp run" "$T/cmp2.out" 

S="--data $T/data --progress off --deterministic --batch-size 64 --max-steps 30 --lr-schedule constant"
OPENBLAS_NUM_THREADS=1 "$CTRAIN" fit $S --strategy single_device --default-root-dir "$T/s" >"$T/s.out" 2>&1
OPENBLAS_NUM_THREADS=1 timeout 120 "$CTRAIN" fit $S --strategy ddp --devices 1 --default-root-dir "$T/d1" >"$T/d1.out" 2>&1
"$B/t/st_compare" "$T/s/last.safetensors" "$T/d1/last.safetensors" >"$T/cmp3.out" 2>&1
check '[ $? -eq 0 ]' "ddp with one rank equals single_device bit for bit" "$T/cmp3.out"
