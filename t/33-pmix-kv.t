#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# PMIx client: layout and put/commit/fence/get under ctrain's own server (subprocess and fork
# launchers) and under Open MPI's mpirun; the client initialised before MPI_Init shares the
# connection with Open MPI. A missing server and a fence timeout are clear errors.
. "$(dirname "$0")/lib/launch.sh"
echo "1..12"

"$B/launch_probe" subprocess kv 4 >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 0 ] && [ "$(grep -c 'kv ok rank [0-3] of 4' "$tmp/out")" -eq 4 ]
ok $? "subprocess: 4 ranks put/commit/fence/get each other's values" || diag "$tmp/out" "$tmp/err"
[ "$(grep -c 'layout rank \([0-3]\) size 4 local \1/4 node 0/1 equal 1' "$tmp/out")" -eq 4 ]
ok $? "layout: rank, size, local rank/size, node rank/count from our server" || diag "$tmp/out"

"$B/launch_probe" fork kv 3 >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 0 ] && [ "$(grep -c 'kv ok rank [0-2] of 3' "$tmp/out")" -eq 3 ] &&
    grep -q '^probe: result: kv ok size 3' "$tmp/out"
ok $? "fork: 3 workers exchange values, rank 0's result returns" || diag "$tmp/out" "$tmp/err"

if command -v mpirun >/dev/null 2>&1; then
    root=""
    [ "$(id -u)" -eq 0 ] && root="--allow-run-as-root"
    limited 60 mpirun $root --oversubscribe -np 2 "$B/launch_probe" external kv 2 \
        >"$tmp/out" 2>"$tmp/err"
    rc=$?
    [ $rc -eq 0 ] && [ "$(grep -c 'kv ok rank [01] of 2' "$tmp/out")" -eq 2 ] &&
        [ "$(grep -c 'layout rank \([01]\) size 2 local \1/2 node 0/1' "$tmp/out")" -eq 2 ]
    ok $? "mpirun -np 2: layout and exchange through Open MPI's PMIx server" ||
        { echo "# mpirun's exit status $rc (124: still running after 60 s)"; diag "$tmp/out" "$tmp/err" "$tmp/overran.txt"; }
else
    n=$((n + 1)); echo "not ok $n - mpirun not found (scripts/install-deps installs openmpi-bin)"
fi

"$B/launch_probe" subprocess env 3 >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 0 ] && [ "$(grep -c 'env pmix world 3 rank \([0-2]\) local \1/3 node 0/1 equal 1 main [^:]*:0 job ctrain\.[0-9.]* ext 1' "$tmp/out")" -eq 3 ] &&
    [ "$(grep -c 'allreduce ok' "$tmp/out")" -eq 3 ]
ok $? "pmix cluster environment: layout from our server, then MPI_Init on the same connection" ||
    diag "$tmp/out" "$tmp/err"

if command -v mpirun >/dev/null 2>&1; then
    limited 60 mpirun $root --oversubscribe -np 2 "$B/launch_probe" external env 2 \
        >"$tmp/out" 2>"$tmp/err"
    rc=$?
    [ $rc -eq 0 ] && [ "$(grep -c 'env pmix world 2 rank \([01]\) local \1/2 node 0/1' "$tmp/out")" -eq 2 ] &&
        [ "$(grep -c 'allreduce ok' "$tmp/out")" -eq 2 ]
    ok $? "pmix cluster environment under mpirun -np 2" || diag "$tmp/out" "$tmp/err" "$tmp/overran.txt"
    # One rank reads its layout while the other is already in MPI_Init's fences. Under Open MPI 5
    # the layout reader is a second connection of the rank; PMIx servers up to 5.0.9 count its
    # close as the rank leaving those fences (before the fix: every run failed, with
    # PMIX_ERR_INVALID_ARG, PMIX_ERR_PARTIAL_SUCCESS or "unable to reach each other").
    for late in 1 0; do
        PROBE_LATE=$late:0.7 limited 60 mpirun $root -x PROBE_LATE --oversubscribe -np 2 \
            "$B/launch_probe" external env 2 >"$tmp/out" 2>"$tmp/err"
        rc=$?
        [ $rc -eq 0 ] && [ "$(grep -c 'allreduce ok' "$tmp/out")" -eq 2 ]
        ok $? "pmix environment under mpirun -np 2, rank $late's layout read 0.7 s late" ||
            diag "$tmp/out" "$tmp/err" "$tmp/overran.txt"
    done
else
    for late in 1 0; do
        n=$((n + 1)); echo "not ok $n - mpirun not found (scripts/install-deps installs openmpi-bin)"
    done
fi

env -u PMIX_RANK -u PMIX_NAMESPACE "$B/launch_probe" external kv 1 >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 2 ] && grep -q '^ctrain: error: no PMIx server' "$tmp/err" && grep -q '^ctrain: hint:' "$tmp/err"
ok $? "no PMIx server: clear error with a hint, exit 2" || diag "$tmp/err"

t0=$(now)
"$B/launch_probe" fork kvtimeout 3 >"$tmp/out" 2>"$tmp/err"
rc=$?
took=$(elapsed "$t0")
[ $rc -ne 0 ] && grep -q 'rank [12] of 3 failed: PMIx fence of rank [12] over the 3 ranks .* timed out after 2 s' "$tmp/err"
ok $? "a fence rank 0 never joins times out: the failing rank and the timeout are named" ||
    diag "$tmp/err"
lt "$took" 10
ok $? "the timed-out job ended in ${took} s (< 10 s)"

no_server_dirs
ok $? "no PMIx server directory left in TMPDIR"
