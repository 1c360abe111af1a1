#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Hang forensics (issue 38 part 1) in 3-rank ddp fits under ctrain's own launcher: the dump signal
# (USR2) makes every rank write DIR/hang/rank-R.json and training goes on to the same final weights
# as a run without it; a rank SIGSTOPped mid-training makes every rank end within
# --collective-timeout + 10 s, rank 0 prints the diagnosis, and `ctrain diagnose DIR` names the
# stopped rank with its phase (from its live record, hang/rank-R.live: it writes nothing itself) and
# the collective the others found it missing in (exit 3); a rank held in its data phase is named in that
# phase. The data hold is CTRAIN_TEST_DATA_STALL (a delay for tests only: FIFOs are refused as
# inputs, so a test cannot block a real read). Bad input to diagnose exits 2 naming it; a dump
# signal that is the requeue signal is refused.
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B="$ROOT/${CTRAIN_BUILD:-build}"
T=$(mktemp -d /tmp/ctrain-t93-XXXXXX)
# The launcher's PMIx server makes its directory under TMPDIR: SIGKILLed here, it cannot remove it.
export TMPDIR="$T"
P=
trap '[ -n "$P" ] && kill -9 $P 2>/dev/null; for p in $(rank_pids); do kill -9 $p 2>/dev/null; done; rm -rf "$T"' EXIT
trap 'exit 1' INT TERM HUP PIPE

echo "1..10"
. "$(dirname "$0")/lib/ci.sh"
if [ ! -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
    ci_needs "dataset-fashion-mnist not installed"
    for i in 1 2 3 4 5 6 7 8 9 10; do echo "ok $i # SKIP dataset-fashion-mnist not installed"; done
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
# The ranks of this test's runs (their environment names CTRAIN_T93=$T).
rank_pids() {
    for d in /proc/[0-9]*; do
        [ "$(cat "$d/comm" 2>/dev/null)" = ctrain ] || continue
        { tr '\0' '\n' <"$d/environ"; } 2>/dev/null | grep -qx "CTRAIN_T93=$T" && echo "${d#/proc/}"
    done
}
rank_pid() {    # rank_pid RANK
    for p in $(rank_pids); do
        { tr '\0' '\n' <"/proc/$p/environ"; } 2>/dev/null | grep -qx "CTRAIN_LAUNCHER_RANK=$1" && echo "$p" && return 0
    done
    return 1
}
rows() { cat "$1/metrics.csv" 2>/dev/null | grep -c '^[0-9]'; }
wait_rows() {    # wait_rows DIR N: until metrics.csv has N rows (30 s at most)
    for i in $(seq 300); do
        [ "$(rows "$1")" -ge "$2" ] && return 0
        sleep 0.1
    done
    return 1
}
records() { ls "$1/hang" 2>/dev/null | grep -c '^rank-[0-9]*\.json$'; }

FIT="--data $T/data --progress off --batch-size 32 --log-every-n-steps 10 --strategy ddp --devices 3 --deterministic --lr-schedule constant"

# 1-2: the dump signal on a healthy run: records, and the same weights as without it.
CTRAIN_T93=$T "$B/ctrain" fit $FIT --max-epochs 6 --default-root-dir "$T/ref" >"$T/ref.out" 2>&1 ||
    { sed 's/^/# /' "$T/ref.out"; exit 1; }
CTRAIN_T93=$T "$B/ctrain" fit $FIT --max-epochs 6 --default-root-dir "$T/usr2" >"$T/usr2.out" 2>&1 &
P=$!
wait_rows "$T/usr2" 2
kill -USR2 $P
sent=$?
wait $P
rc=$?
P=
[ "$sent" -eq 0 ] && [ "$rc" -eq 0 ] && [ "$(records "$T/usr2")" -eq 3 ] &&
    grep -q '"reason":[[:space:]]*"signal"' "$T/usr2/hang/rank-2.json"
ok $? "kill -USR2 on a 3-rank fit: every rank writes hang/rank-R.json, the fit goes on and ends 0 (exit $rc)" "$T/usr2.out"
"$B/t/st_compare" "$T/ref/last.safetensors" "$T/usr2/last.safetensors" >"$T/cmp.out" 2>&1
ok $? "the run that got the dump signal ends with the same weights as the one without (st_compare)" "$T/cmp.out"

# 3-5: rank 1 SIGSTOPped: every rank ends within the timeout + 10 s; rank 0 and diagnose name it.
CTRAIN_T93=$T "$B/ctrain" fit $FIT --max-epochs 200 --collective-timeout 5 --default-root-dir "$T/stop" \
    >"$T/stop.out" 2>&1 &
P=$!
wait_rows "$T/stop" 2
victim=$(rank_pid 1)
t0=$(date +%s.%N)
[ -n "$victim" ] && kill -STOP "$victim"
for i in $(seq 300); do
    [ -z "$(rank_pids)" ] && break
    sleep 0.1
done
secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
kill -0 $P 2>/dev/null && sleep 1
kill -9 $P 2>/dev/null
wait $P
rc=$?
P=
left=$(rank_pids)
[ -n "$victim" ] && [ "$rc" -ne 0 ] && [ -z "$left" ] && awk -v s="$secs" 'BEGIN { exit !(s <= 15) }'
ok $? "rank 1 SIGSTOPped, --collective-timeout 5: every rank ends within 15 s (${secs} s, exit $rc)" "$T/stop.out"
# The stopped rank writes nothing: its phase comes from its live record (hang/rank-1.live).
stopped_named() {    # stopped_named RANK HOST FILE
    grep -q "ctrain: rank $1 (host $2, pid $victim) is behind: step [0-9]*, phase [a-z]* .*this reading of its live record" "$3" &&
        grep -q "ctrain:   it wrote no record (stopped, dead or could not write): this is its live record (rank-$1.live)" "$3"
}
stopped_named 1 "$(hostname)" "$T/stop.out"
ok $? "rank 0 prints the diagnosis after the timeout, naming rank 1, its host, pid, step and phase" "$T/stop.out"
"$B/ctrain" diagnose "$T/stop" >"$T/diag-stop.out" 2>&1
rc=$?
[ "$rc" -eq 3 ] && stopped_named 1 "$(hostname)" "$T/diag-stop.out" &&
    grep -q "found it missing in collective #[0-9]* (.*) at step [0-9]*, phase [a-z]*: it had not reached" "$T/diag-stop.out"
ok $? "ctrain diagnose names rank 1, its host, its phase (live record) and the collective the others wait for it in (exit $rc)" "$T/diag-stop.out"

# 6: rank 2 held in its data phase at step 30; the dump signal while it is held.
CTRAIN_T93=$T CTRAIN_TEST_DATA_STALL=2:30 "$B/ctrain" fit $FIT --max-epochs 200 --collective-timeout 120 \
    --default-root-dir "$T/data2" >"$T/data2.out" 2>&1 &
P=$!
wait_rows "$T/data2" 3
sleep 2
kill -USR2 $P
for i in $(seq 100); do
    [ "$(records "$T/data2")" -eq 3 ] && break
    sleep 0.1
done
"$B/ctrain" diagnose "$T/data2" >"$T/diag-data.out" 2>&1
rc=$?
for p in $(rank_pids); do kill -9 "$p" 2>/dev/null; done
kill -9 $P 2>/dev/null
wait $P
P=
[ "$rc" -eq 3 ] && grep -q "rank 2 (host .*) is behind: step 30, phase data" "$T/diag-data.out" &&
    ! grep -q "rank [01] .*is behind" "$T/diag-data.out"
ok $? "a rank held in its data phase: diagnose names it, in the data phase at step 30 (exit $rc)" "$T/diag-data.out"

# 7-8: bad input.
"$B/ctrain" diagnose "$T/none" >"$T/bad1.out" 2>&1
rc=$?
mkdir -p "$T/bad/hang"
echo '{ "rank": 0, ' >"$T/bad/hang/rank-0.json"
"$B/ctrain" diagnose "$T/bad" >"$T/bad2.out" 2>&1
rc2=$?
[ "$rc" -eq 2 ] && grep -q "$T/none is not a directory" "$T/bad1.out" &&
    [ "$rc2" -eq 2 ] && grep -q "$T/bad/hang/rank-0.json is not a hang record" "$T/bad2.out"
ok $? "diagnose: a missing DIR and an unparsable record exit 2, naming them ($rc, $rc2)" "$T/bad1.out" "$T/bad2.out"
"$B/ctrain" diagnose --help >"$T/help.out" 2>&1 && grep -q "usage: ctrain diagnose DIR" "$T/help.out"
ok $? "ctrain diagnose --help" "$T/help.out"

# 9: the dump signal cannot be the requeue signal.
"$B/ctrain" fit --requeue-signal USR2 --dump-signal USR2 --default-root-dir "$T/conf" >"$T/conf.out" 2>&1
rc=$?
[ "$rc" -eq 2 ] && grep -q -- "--dump-signal SIGUSR2 is also a stop signal" "$T/conf.out" &&
    grep -q "hint: give the two different signals" "$T/conf.out"
ok $? "--dump-signal equal to --requeue-signal is refused with a hint (exit $rc)" "$T/conf.out"

# 10: a later run in test 6's DIR, its rank 2 SIGSTOPped. The rank-2.json there is the earlier run's
# (held in the data phase at step 30); diagnose leaves it out (another pid than rank 2's live record)
# and names the stopped rank 2 from its live record: the earlier record's pid appears nowhere. (Not
# "phase data" absent: the later rank 2 may itself be stopped in its data phase.)
rm -f "$T/data2/metrics.csv"
old=$(sed -n 's/.*"pid":[[:space:]]*\([0-9]*\).*/\1/p' "$T/data2/hang/rank-2.json" | head -1)
CTRAIN_T93=$T "$B/ctrain" fit $FIT --max-epochs 200 --collective-timeout 3 --default-root-dir "$T/data2" \
    >"$T/again.out" 2>&1 &
P=$!
wait_rows "$T/data2" 2
victim=$(rank_pid 2)
[ -n "$victim" ] && kill -STOP "$victim"
for i in $(seq 300); do
    [ -z "$(rank_pids)" ] && break
    sleep 0.1
done
kill -9 $P 2>/dev/null
wait $P
P=
"$B/ctrain" diagnose "$T/data2" >"$T/diag-again.out" 2>"$T/diag-again.err"
rc=$?
[ -n "$victim" ] && [ "$rc" -eq 3 ] && stopped_named 2 "$(hostname)" "$T/diag-again.out" &&
    [ -n "$old" ] && [ "$old" != "$victim" ] && ! grep -q "pid $old)" "$T/diag-again.out" &&
    grep -q "ctrain: diagnose: 1 record in $T/data2/hang from an earlier run left out" "$T/diag-again.err"
ok $? "a later run in the same DIR: the earlier run's record of rank 2 is left out, its live record read (exit $rc)" \
    "$T/diag-again.out" "$T/diag-again.err"
