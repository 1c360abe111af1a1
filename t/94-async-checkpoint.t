#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# --async-checkpoint (issue 38 part 3), 2-rank ddp under ctrain's launcher: the checkpoints are
# byte-identical to synchronous ones; training goes on while a write is pending; a SIGKILL during a
# write leaves the previous complete last.safetensors; a stop signal with a write pending still ends
# 75 with a last.safetensors that resumes to the uninterrupted run's weights bit for bit.
# CTRAIN_TEST_CKPT_WRITE_DELAY=S (for tests only) holds each write S seconds after its header.
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B="$ROOT/${CTRAIN_BUILD:-build}"
T=$(mktemp -d /tmp/ctrain-t94-XXXXXX)
# The launcher's PMIx server makes its directory under TMPDIR: SIGKILLed here, it cannot remove it.
export TMPDIR="$T"
P=
trap '[ -n "$P" ] && kill -9 $P 2>/dev/null; for p in $(rank_pids); do kill -9 $p 2>/dev/null; done; rm -rf "$T"' EXIT
trap 'exit 1' INT TERM HUP PIPE

echo "1..5"
. "$(dirname "$0")/lib/ci.sh"
if [ ! -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
    ci_needs "dataset-fashion-mnist not installed"
    for i in 1 2 3 4 5; do echo "ok $i # SKIP dataset-fashion-mnist not installed"; done
    exit 0
fi
mkdir -p "$T/data"
"$B/t/idx_subset" /usr/share/datasets/fashion-mnist "$T/data" 6000 1000 >/dev/null || exit 1
export OPENBLAS_NUM_THREADS=1
n=0
ok() {    # ok CONDITION-STATUS NAME [DIAG-FILE...]
    n=$((n + 1))
    if [ "$1" -eq 0 ]; then echo "ok $n - $2"; else
        echo "not ok $n - $2"
        shift 2
        for f in "$@"; do [ -f "$f" ] && sed 's/^/#   /' "$f"; done
    fi
}
rank_pids() {
    for d in /proc/[0-9]*; do
        [ "$(cat "$d/comm" 2>/dev/null)" = ctrain ] || continue
        { tr '\0' '\n' <"$d/environ"; } 2>/dev/null | grep -qx "CTRAIN_T94=$T" && echo "${d#/proc/}"
    done
}
rows() { cat "$1/metrics.csv" 2>/dev/null | grep -c '^[0-9]'; }
pending() { ls "$1" 2>/dev/null | grep -q '^last\.safetensors\.tmp\.'; }
wait_pending() {    # wait_pending DIR: until a write of last.safetensors is under way (30 s at most)
    for i in $(seq 300); do
        pending "$1" && return 0
        sleep 0.1
    done
    return 1
}

FIT="--data $T/data --progress off --batch-size 32 --log-every-n-steps 10 --strategy ddp --devices 2 --deterministic --lr-schedule constant --checkpoint-every-n-steps 10"

# 1: byte-identical checkpoints.
CTRAIN_T94=$T "$B/ctrain" fit $FIT --max-epochs 2 --default-root-dir "$T/sync" >"$T/sync.out" 2>&1 &&
    CTRAIN_T94=$T "$B/ctrain" fit $FIT --max-epochs 2 --async-checkpoint --default-root-dir "$T/async" \
        >"$T/async.out" 2>&1 &&
    cmp "$T/sync/last.safetensors" "$T/async/last.safetensors" && cmp "$T/sync/best.safetensors" "$T/async/best.safetensors"
ok $? "--async-checkpoint: last and best byte-identical to the synchronous run's" "$T/sync.out" "$T/async.out"

# 2-3: a slow write: training goes on meanwhile; SIGKILL mid-write leaves the previous file.
# (a write every 100 steps: the next save, which waits for the pending one, is 10 metrics rows on)
CTRAIN_T94=$T CTRAIN_TEST_CKPT_WRITE_DELAY=6 "$B/ctrain" fit $FIT --max-epochs 3 --async-checkpoint \
    --checkpoint-every-n-steps 100 --default-root-dir "$T/kill" >"$T/kill.out" 2>&1 &
P=$!
wait_pending "$T/kill"                          # the first write
for i in $(seq 200); do [ -f "$T/kill/last.safetensors" ] && break; sleep 0.1; done
wait_pending "$T/kill"                          # the second, over a complete first
before=$(md5sum <"$T/kill/last.safetensors")
r0=$(rows "$T/kill")
sleep 1.5
r1=$(rows "$T/kill")
pending "$T/kill"
still=$?
for p in $(rank_pids); do kill -9 "$p"; done
kill -9 $P 2>/dev/null
wait $P
P=
after=$(md5sum <"$T/kill/last.safetensors")
[ "$still" -eq 0 ] && [ "$r1" -gt "$r0" ]
ok $? "training goes on while the write is pending (metrics rows $r0 -> $r1 in 1.5 s)" "$T/kill.out"
# The killed write's temporary is left behind: proof that the kill came mid-write (each write is
# held 6 s, so a loaded machine's slow shell cannot let it finish before the kill).
if ! pending "$T/kill"; then
    echo "the write had finished before the kill: no last.safetensors.tmp.* left" >"$T/kill-cmp.out"; false
elif [ "$before" != "$after" ]; then
    echo "last.safetensors changed (md5 ${before%% *} -> ${after%% *}) though the kill cut a write" >"$T/kill-cmp.out"; false
else
    "$B/t/st_compare" "$T/kill/last.safetensors" "$T/kill/last.safetensors" >"$T/kill-cmp.out" 2>&1
fi
ok $? "SIGKILL during a write leaves the previous complete last.safetensors" "$T/kill-cmp.out"

# 4-5: a stop signal with a write pending: exit 75, then the resume ends at the reference weights.
CTRAIN_T94=$T CTRAIN_TEST_CKPT_WRITE_DELAY=2 "$B/ctrain" fit $FIT --max-epochs 2 --async-checkpoint \
    --default-root-dir "$T/stop" >"$T/stop.out" 2>&1 &
P=$!
wait_pending "$T/stop"
for i in $(seq 100); do [ -f "$T/stop/last.safetensors" ] && break; sleep 0.1; done
wait_pending "$T/stop"
kill -TERM $P
wait $P
rc=$?
P=
[ "$rc" -eq 75 ] && ! pending "$T/stop" && grep -q 'stopped by SIGTERM' "$T/stop.out"
ok $? "SIGTERM with a write pending: exit 75, no write left unfinished (exit $rc)" "$T/stop.out"
CTRAIN_T94=$T "$B/ctrain" fit $FIT --max-epochs 2 --async-checkpoint --ckpt-path last --default-root-dir "$T/stop" \
    >"$T/resume.out" 2>&1 &&
    "$B/t/st_compare" "$T/sync/last.safetensors" "$T/stop/last.safetensors" >"$T/stop-cmp.out" 2>&1
ok $? "--ckpt-path last resumes it to the uninterrupted run's weights (st_compare)" "$T/resume.out" "$T/stop-cmp.out"
