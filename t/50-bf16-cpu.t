#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# bf16-mixed on the cpu: a short real Fashion-MNIST run lands within 0.5 points of 32-true's test
# accuracy (same seed, same data), records its precision, and really computes differently (the
# losses are not bit-identical); 16-mixed on cpu is refused before anything runs.
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B="$ROOT/${CTRAIN_BUILD:-build}"
CTRAIN="$B/ctrain"
T=$(mktemp -d /tmp/ctrain-t50-XXXXXX)
trap 'rm -rf "$T"' EXIT
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); echo "not ok $n - $1"; [ -n "$2" ] && sed 's/^/# /' "$2"; }
check() { if eval "$1"; then ok "$2"; else nok "$2" "$3"; fi; }

echo "1..6"
if [ ! -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
    . "$(dirname "$0")/lib/ci.sh"
    ci_needs "dataset-fashion-mnist not installed"
    for i in $(seq 1 6); do echo "ok $i # SKIP dataset-fashion-mnist not installed (scripts/install-deps)"; done
    exit 0
fi
# 12000 training images and the 2000 first test images: 0.5 points of 2000 is 10 images.
mkdir -p "$T/data"
"$B/t/idx_subset" /usr/share/datasets/fashion-mnist "$T/data" 12000 2000 || exit 1
COMMON="--data $T/data --progress off --deterministic --max-epochs 2 --accelerator cpu"

"$CTRAIN" fit $COMMON --precision 32-true --default-root-dir "$T/f32" >"$T/f32.out" 2>&1
check '[ $? -eq 0 ]' "32-true fit exits 0" "$T/f32.out"
"$CTRAIN" fit $COMMON --precision bf16-mixed --default-root-dir "$T/bf16" >"$T/bf16.out" 2>&1
check '[ $? -eq 0 ]' "bf16-mixed fit exits 0 on cpu" "$T/bf16.out"
check 'grep -q "\"precision\":[[:space:]]*\"bf16-mixed\"" "$T/bf16/summary.json"' \
    "summary.json records precision bf16-mixed" "$T/bf16/summary.json"
a32=$(sed -n 's/.*"test_acc":[[:space:]]*\([0-9.]*\).*/\1/p' "$T/f32/summary.json")
a16=$(sed -n 's/.*"test_acc":[[:space:]]*\([0-9.]*\).*/\1/p' "$T/bf16/summary.json")
check "awk 'BEGIN {d = $a16 - $a32; if (d < 0) d = -d; exit !(d <= 0.005 && $a32 > 0.75)}'" \
    "bf16-mixed test accuracy $a16 within 0.5 points of 32-true's $a32"
check '! cmp -s "$T/f32/metrics.csv" "$T/bf16/metrics.csv"' "bf16-mixed computes differently (metrics differ)"

"$CTRAIN" fit $COMMON --precision 16-mixed --default-root-dir "$T/f16" >"$T/f16.out" 2>&1
rc=$?
check '[ $rc -eq 2 ] && grep -q "^ctrain: error: .*16-mixed" "$T/f16.out" && [ ! -e "$T/f16" ]' \
    "16-mixed on cpu: exit 2, an error naming it, nothing written" "$T/f16.out"
