#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# A kill -9 at any moment of a checkpoint save leaves the previous checkpoint loadable: the write
# goes to a temp file, is fsync'd and renamed over the target. Repeated at random moments, first
# against a writer that saves in a loop, then against ctrain fit saving every step.
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B="$ROOT/${CTRAIN_BUILD:-build}"
T=$(mktemp -d /tmp/ctrain-t05-XXXXXX)
PID=
trap '[ -n "$PID" ] && kill -9 $PID 2>/dev/null; rm -rf "$T"' EXIT
ROUNDS=8
echo "1..4"

# A random delay in [0, max) seconds, different every call.
rnd() { awk -v m="$1" -v s="$(od -An -N4 -tu4 /dev/urandom)" 'BEGIN { srand(s); printf "%.3f", rand() * m }'; }

# 1-2: the checkpoint IO alone (4 MB per save, a few ms each).
bad=0
for i in $(seq 1 $ROUNDS); do
    "$B/t/ckpt_writer" "$T/w.safetensors" >"$T/w.out" 2>&1 &
    PID=$!
    while ! grep -q first "$T/w.out" 2>/dev/null; do sleep 0.01; done
    sleep "$(rnd 0.3)"
    kill -9 $PID
    wait $PID 2>/dev/null
    PID=
    if ! "$B/t/ckpt_writer" --check "$T/w.safetensors" >"$T/check.out" 2>&1; then
        bad=$((bad + 1))
        sed 's/^/# /' "$T/check.out"
    fi
done
[ $bad -eq 0 ] && echo "ok 1 - $ROUNDS kills of a saving loop: the checkpoint always loads whole" ||
    echo "not ok 1 - $bad of $ROUNDS kills left a damaged checkpoint"
# The next save removes what a killed writer left behind.
"$B/t/ckpt_writer" "$T/w.safetensors" >"$T/w.out" 2>&1 &
PID=$!
while ! grep -q first "$T/w.out" 2>/dev/null; do sleep 0.01; done
kill -9 $PID; wait $PID 2>/dev/null; PID=
left=$(ls "$T" | grep -c 'w.safetensors.tmp')
[ "$left" -le 1 ] && echo "ok 2 - stale temp files are cleared by the next save ($left left by the last kill)" ||
    echo "not ok 2 - $left temp files accumulated"

# 3-4: ctrain fit checkpointing every step, killed at random moments.
if [ ! -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
    . "$(dirname "$0")/lib/ci.sh"
    ci_needs "dataset-fashion-mnist not installed"
    echo "ok 3 # SKIP dataset-fashion-mnist not installed"
    echo "ok 4 # SKIP dataset-fashion-mnist not installed"
    exit 0
fi
mkdir -p "$T/data"
"$B/t/idx_subset" /usr/share/datasets/fashion-mnist "$T/data" 6000 500 || exit 1
bad=0
for i in $(seq 1 $ROUNDS); do
    rm -rf "$T/run"
    "$B/ctrain" fit --data "$T/data" --progress off --max-epochs 50 --checkpoint-every-n-steps 1 \
        --default-root-dir "$T/run" >"$T/fit.out" 2>&1 &
    PID=$!
    while [ ! -f "$T/run/last.safetensors" ] && kill -0 $PID 2>/dev/null; do sleep 0.01; done
    sleep "$(rnd 0.5)"
    kill -9 $PID
    wait $PID 2>/dev/null
    PID=
    if ! "$B/ctrain" test --data "$T/data" --ckpt-path last --default-root-dir "$T/run" >"$T/test.out" 2>&1; then
        bad=$((bad + 1))
        sed 's/^/# /' "$T/test.out" "$T/fit.out"
    fi
done
[ $bad -eq 0 ] && echo "ok 3 - $ROUNDS kills of ctrain fit saving every step: last.safetensors always loads" ||
    echo "not ok 3 - $bad of $ROUNDS kills left last.safetensors unloadable"
# The last killed run resumes from where it was killed.
"$B/ctrain" fit --data "$T/data" --progress off --max-epochs 1 --ckpt-path last --default-root-dir "$T/run" \
    >"$T/resume.out" 2>&1
rc=$?
if grep -q "resumed from" "$T/resume.out" || [ $rc -eq 0 ]; then
    echo "ok 4 - a killed run resumes from its last checkpoint (exit $rc)"
else
    echo "not ok 4 - resuming the killed run failed"
    sed 's/^/# /' "$T/resume.out"
fi
