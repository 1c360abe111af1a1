#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Faults inside a 2-rank ddp fit: a rank stopped with SIGSTOP makes every other rank fail within
# --collective-timeout with a message naming it, and the whole job ends; a rank killed with
# SIGKILL mid-training never leaves the other waiting. Under ctrain's own launcher (--devices 2)
# and under mpirun; t/62 does the same under srun on the test cluster.
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B="$ROOT/${CTRAIN_BUILD:-build}"
T=$(mktemp -d /tmp/ctrain-t61-XXXXXX)
P=
trap '[ -n "$P" ] && kill -9 $P 2>/dev/null; for p in $(rank_pids); do kill -9 $p 2>/dev/null; done; rm -rf "$T"' EXIT
trap 'exit 1' INT TERM HUP PIPE

echo "1..7"
. "$(dirname "$0")/lib/ci.sh"
if [ ! -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
    ci_needs "dataset-fashion-mnist not installed"
    for i in 1 2 3 4 5 6 7; do echo "ok $i # SKIP dataset-fashion-mnist not installed"; done
    exit 0
fi
mkdir -p "$T/data"
"$B/t/idx_subset" /usr/share/datasets/fashion-mnist "$T/data" 6000 1000 >/dev/null || exit 1
n=0
ok() {    # ok CONDITION-STATUS NAME [DIAG-FILE]
    n=$((n + 1))
    if [ "$1" -eq 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; [ -n "${3:-}" ] && sed 's/^/#   /' "$3"; fi
}

# The ranks of this test's runs: ctrain processes whose environment names the run's root dir
# marker (CTRAIN_T61=<tag>), and their rank number.
rank_pids() {
    for d in /proc/[0-9]*; do
        [ "$(cat "$d/comm" 2>/dev/null)" = ctrain ] || continue
        { tr '\0' '\n' <"$d/environ"; } 2>/dev/null | grep -qx "CTRAIN_T61=$T" && echo "${d#/proc/}"
    done
}
rank_pid() {    # rank_pid RANK: pid of the training process of that rank
    for p in $(rank_pids); do
        env=$({ tr '\0' '\n' <"/proc/$p/environ"; } 2>/dev/null)
        echo "$env" | grep -qx "CTRAIN_LAUNCHER_RANK=$1\|OMPI_COMM_WORLD_RANK=$1" || continue
        [ "$(cat "/proc/$p/comm" 2>/dev/null)" = ctrain ] && echo "$p" && return 0
    done
    return 1
}
# Wait until the run has trained some steps (metrics.csv has rows).
wait_training() {
    for i in $(seq 300); do
        [ "$(cat "$1/metrics.csv" 2>/dev/null | grep -c '^[0-9]')" -ge 2 ] && return 0
        sleep 0.1
    done
    return 1
}
FIT="--data $T/data --progress off --batch-size 64 --max-epochs 200 --log-every-n-steps 10 --strategy ddp"

# fault_run NAME SIGNAL RANK LAUNCH...: start the run, send SIGNAL to RANK while it trains, wait
# for every process of the run to end (at most 60 s); sets $rc, $secs and $left.
fault_run() {
    name=$1 sig=$2 rank=$3
    shift 3
    CTRAIN_T61=$T "$@" --default-root-dir "$T/$name" >"$T/$name.out" 2>&1 &
    P=$!
    wait_training "$T/$name"
    victim=$(rank_pid "$rank")
    t0=$(date +%s)
    [ -n "$victim" ] && kill -"$sig" "$victim"
    for i in $(seq 600); do
        kill -0 $P 2>/dev/null || break
        sleep 0.1
    done
    kill -0 $P 2>/dev/null && { kill -9 $P; echo "# $name: still running after 60 s" >>"$T/$name.out"; }
    wait $P
    rc=$?
    P=
    secs=$(($(date +%s) - t0))
    sleep 0.5
    left=$(rank_pids)
}

fault_run stop1 STOP 1 "$B/ctrain" fit $FIT --devices 2 --collective-timeout 3
grep -q 'did not complete within 3 s: rank 1 of 2 did not arrive' "$T/stop1.out" && [ "$rc" -ne 0 ] && [ -z "$left" ]
ok $? "ctrain launcher, rank 1 SIGSTOPped: rank 0 names rank 1, every process ends (exit $rc, ${secs}s)" "$T/stop1.out"

fault_run stop0 STOP 0 "$B/ctrain" fit $FIT --devices 2 --collective-timeout 3
grep -q "rank 0 (on $(hostname)) did not arrive" "$T/stop0.out" && [ "$rc" -ne 0 ] && [ -z "$left" ]
ok $? "ctrain launcher, rank 0 SIGSTOPped: rank 1 names rank 0, every process ends (exit $rc, ${secs}s)" "$T/stop0.out"

fault_run kill1 KILL 1 "$B/ctrain" fit $FIT --devices 2
grep -q 'rank 1 was killed by signal SIGKILL' "$T/kill1.out" && [ "$rc" -ne 0 ] && [ -z "$left" ] && [ "$secs" -le 20 ]
ok $? "ctrain launcher, rank 1 SIGKILLed mid-training: the other ends within the launcher grace period (exit $rc, ${secs}s)" "$T/kill1.out"

if ! command -v mpirun >/dev/null 2>&1; then
    ci_needs "mpirun (openmpi-bin) not installed"
    for i in 4 5 6 7; do echo "ok $i # SKIP mpirun not installed"; done
    exit 0
fi
MPIRUN="mpirun --allow-run-as-root --oversubscribe -np 2 -x CTRAIN_T61 -x OPENBLAS_NUM_THREADS=1"

fault_run mstop1 STOP 1 $MPIRUN "$B/ctrain" fit $FIT --collective-timeout 3
grep -q 'rank 1 of 2 did not arrive' "$T/mstop1.out" && [ "$rc" -ne 0 ] && [ -z "$left" ]
ok $? "mpirun, rank 1 SIGSTOPped: named, every process ends (exit $rc, ${secs}s)" "$T/mstop1.out"

fault_run mkill1 KILL 1 $MPIRUN "$B/ctrain" fit $FIT
[ "$rc" -ne 0 ] && [ -z "$left" ] && [ "$secs" -le 30 ]
ok $? "mpirun, rank 1 SIGKILLed mid-training: the other does not hang (exit $rc, ${secs}s)" "$T/mkill1.out"

# Without a fault the timeout costs nothing visible: a short run completes with a 1 s timeout.
CTRAIN_T61=$T "$B/ctrain" fit --data "$T/data" --progress off --batch-size 64 --max-epochs 1 --strategy ddp \
    --devices 2 --collective-timeout 1 --default-root-dir "$T/ok" >"$T/ok.out" 2>&1
ok $? "a healthy 2-rank run completes with --collective-timeout 1" "$T/ok.out"

"$B/ctrain" fit --collective-timeout -1 >"$T/bad.out" 2>&1
[ $? -eq 2 ] && grep -q -- '--collective-timeout' "$T/bad.out"
ok $? "--collective-timeout -1 is refused (exit 2, names the flag)" "$T/bad.out"
