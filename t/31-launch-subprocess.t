#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The subprocess launcher: the probe becomes supervisor and PMIx server and fork+execs itself as
# 4 ranks; Open MPI's MPI_Init works in them with no mpirun.
. "$(dirname "$0")/lib/launch.sh"
echo "1..9"

"$B/launch_probe" subprocess mpi 4 >"$tmp/out" 2>"$tmp/err"
rc=$?
ok $rc "subprocess launcher: 4 ranks of MPI allreduce exit 0"
[ "$(grep -c 'allreduce ok rank [0-3] of 4 sum 6' "$tmp/out")" -eq 4 ]
ok $? "every rank's allreduce is right" || diag "$tmp/out" "$tmp/err"
grep -q '^allreduce ok rank 0 of 4' "$tmp/out" &&
    [ "$(grep -c '^\[rank [1-3]\] allreduce ok rank [1-3] of 4' "$tmp/out")" -eq 3 ]
ok $? "rank 0's output as is, the others' prefixed [rank N]"

"$B/launch_probe" subprocess exec 4 "$B/mpi_allreduce" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 0 ] && [ "$(grep -c 'allreduce ok rank [0-3] of 4 sum 6' "$tmp/out")" -eq 4 ]
ok $? "4 copies of t/tools/mpi_allreduce run under the launcher (MPI without mpirun)" ||
    diag "$tmp/out" "$tmp/err"

PROBE_QUIET=1 "$B/launch_probe" subprocess mpi 3 >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 0 ] && grep -q '^allreduce ok rank 0 of 3' "$tmp/out" && ! grep -q '^\[rank' "$tmp/out"
ok $? "quiet_others drops the other ranks' output" || diag "$tmp/out" "$tmp/err"

"$B/launch_probe" subprocess mpi 0 >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 2 ] && grep -q 'cannot launch 0 processes' "$tmp/err"
ok $? "nprocs 0 is refused with a message, exit 2" || diag "$tmp/err"

# A command line over 1 MiB (12 arguments of 100 KiB) reaches every rank whole.
big=$(head -c 102400 /dev/zero | tr '\0' x)
set --
for i in 1 2 3 4 5 6 7 8 9 10 11 12; do set -- "$@" "$big"; done
"$B/launch_probe" subprocess args 2 "$@" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 0 ] && grep -qx 'probe: args 12 bytes 1228800' "$tmp/out"
ok $? "a 1.2 MiB command line is read whole: rank 0 gets all 12 arguments (exit $rc)" || diag "$tmp/out" "$tmp/err"
set --
"$B/launch_probe" subprocess args 2 a "" b >"$tmp/out" 2>"$tmp/err"
[ $? -eq 0 ] && grep -qx 'probe: args 3 bytes 2' "$tmp/out"
ok $? "an empty argument stays an argument" || diag "$tmp/out" "$tmp/err"

no_server_dirs
ok $? "no PMIx server directory left in TMPDIR"
