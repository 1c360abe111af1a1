#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The fork launcher: the call forks the workers; each runs MPI; rank 0's result buffer comes back
# to the caller, which goes on as if it had run the body itself.
. "$(dirname "$0")/lib/launch.sh"
echo "1..6"

"$B/launch_probe" fork mpi 4 >"$tmp/out" 2>"$tmp/err" &
P=$!
pids="$pids $P"
wait $P
rc=$?
[ $rc -eq 0 ] && [ "$(grep -c 'allreduce ok rank [0-3] of 4 sum 6' "$tmp/out")" -eq 4 ]
ok $? "fork launcher: MPI_Init/allreduce/MPI_Finalize in 4 workers" || diag "$tmp/out" "$tmp/err"
pid0=$(sed -n 's/^probe: result: rank 0 of 4 sum 6 pid \([0-9]*\)$/\1/p' "$tmp/out")
[ -n "$pid0" ] && [ "$pid0" != "$P" ]
ok $? "rank 0's result (from worker pid $pid0) returned to the caller (pid $P)" || diag "$tmp/out"
grep -q '^probe: ok' "$tmp/out"
ok $? "the call returned 0 in the caller"

"$B/launch_probe" fork result 2 >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 0 ] && grep -q '^probe: result: result from rank 0$' "$tmp/out"
ok $? "a body without MPI returns its result buffer" || diag "$tmp/out" "$tmp/err"

PROBE_TWICE=1 "$B/launch_probe" fork mpi 2 >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 0 ] && [ "$(grep -c 'allreduce ok rank [01] of 2 sum 1' "$tmp/out")" -eq 4 ] &&
    grep -q '^probe: first launch: rank 0 of 2' "$tmp/out" && grep -q '^probe: result: rank 0 of 2' "$tmp/out"
ok $? "two launches from one process (fit, then test) both run MPI" || diag "$tmp/out" "$tmp/err"

no_server_dirs
ok $? "no PMIx server directory left in TMPDIR"
