#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# ctrain fit --strategy ddp under Open MPI's mpirun (the external launcher: mpirun started the
# ranks, ctrain launches nothing): a 2-rank run equal to the same run under ctrain's own launcher,
# and SIGKILL of one rank during training: mpirun ends the job within 10 s, exits non-zero and
# names the rank; nothing is left running.
. "$(dirname "$0")/lib/launch.sh"
. "$(dirname "$0")/lib/ddp.sh"
N=7

make_data || skip_all $N "dataset-fashion-mnist not installed"
command -v mpirun >/dev/null || ci_needs "mpirun (openmpi-bin) not installed"
command -v mpirun >/dev/null || skip_all $N "mpirun (openmpi-bin) not installed"
echo "1..$N"
FIT="$FIT_FLAGS --data $tmp/data --deterministic --strategy ddp --devices 2"
MPIRUN="mpirun -np 2 --allow-run-as-root --oversubscribe"

# 1-2: a run, and the same under ctrain's subprocess launcher.
timeout 120 $MPIRUN "$CTRAIN" fit $FIT --max-epochs 1 --default-root-dir "$tmp/a" >"$tmp/a.out" 2>&1
rc=$?
[ $rc -eq 0 ] && [ "$(json world_size "$tmp/a/summary.json")" = 2 ] && [ "$(json steps "$tmp/a/summary.json")" = 43 ] &&
    [ "$(grep -c '^step,' "$tmp/a/metrics.csv")" -eq 1 ] && [ "$(grep -c 'ctrain: fit done' "$tmp/a.out")" -eq 1 ]
ok $? "mpirun -np 2 ctrain fit --strategy ddp --devices 2: exit 0, world_size 2, 43 steps, rank 0 alone reports" ||
    diag "$tmp/a.out"
timeout 120 "$CTRAIN" fit $FIT --max-epochs 1 --default-root-dir "$tmp/b" >"$tmp/b.out" 2>&1 &&
    "$B/st_compare" "$tmp/a/last.safetensors" "$tmp/b/last.safetensors" >"$tmp/cmp.out" 2>&1
ok $? "the mpirun run equals the same run under ctrain's subprocess launcher bit for bit" || diag "$tmp/b.out" "$tmp/cmp.out"

# 3-7: SIGKILL of rank 1 while training.
$MPIRUN "$CTRAIN" fit $FIT --max-epochs 1000 --log-every-n-steps 5 --default-root-dir "$tmp/f" \
    >"$tmp/f.out" 2>"$tmp/f.err" &
P=$!
pids="$pids $P"
r0="" r1=""
if wait_training "$tmp/f" 60; then
    r0=$(rank_pid "$tmp/f" OMPI_COMM_WORLD_RANK 0)
    r1=$(rank_pid "$tmp/f" OMPI_COMM_WORLD_RANK 1)
    pids="$pids $r0 $r1"
fi
if [ -n "$r0" ] && [ -n "$r1" ]; then
    ok 0 "found rank 1 (pid $r1) training, rank 0 pid $r0"
    kill_and_time "$r1" $P $r0 $r1 $P
else
    ok 1 "found rank 1 training" || diag "$tmp/f.out" "$tmp/f.err"
    rc=0 took=99 gone=1
fi
[ $rc -ne 0 ]
ok $? "mpirun exits non-zero when rank 1 is killed (exit $rc)"
lt "$took" 10
ok $? "mpirun and both ranks gone within 10 s (${took} s)" || diag "$tmp/f.err"
# Open MPI 4.1's mpirun says it on one line; Open MPI 5's prterun wraps it ("... exited on\nsignal 9").
tr '\n' ' ' <"$tmp/f.err" | grep -q 'process rank 1 .*exited on  *signal 9'
ok $? "the message names the rank: mpirun's 'process rank 1 ... exited on signal 9'" || diag "$tmp/f.err"
[ $gone -eq 0 ] && [ -z "$(procs_with "$tmp/f")" ]
ok $? "no process left behind (mpirun $P, ranks $r0 $r1)"
