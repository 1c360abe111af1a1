#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The collectives layer (engine/collectives) on each host library, through its own table: all-gather
# (equal and unequal parts), reduce-scatter, gather to rank 0, allreduce, broadcast and barrier, in
# fp32 and fp64, on 2 and 3 ranks, each rank comparing with the exact values (t/tools/coll_check.c).
# mpi under mpirun; gloo with ranks started by hand at MASTER_ADDR:MASTER_PORT. nccl's all-gather
# and reduce-scatter are compiled, never run here (no GPU).
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B="$ROOT/${CTRAIN_BUILD:-build}"
. "$ROOT/t/lib/ci.sh"
T=$(mktemp -d /tmp/ctrain-t56-XXXXXX)
PIDS=
trap 'for p in $PIDS; do kill "$p" 2>/dev/null; done; rm -rf "$T"' EXIT
. "$ROOT/t/lib/tap.sh"

echo "1..4"
# Each rank prints 13 "ok" lines (gather: rank 0 only reports it) and exits 0.
want() { echo $(( $1 * 13 - ($1 - 1) * 2 )); }

for world in 2 3; do
    if ! command -v mpirun >/dev/null; then
        ci_needs "mpirun (openmpi-bin) not installed"
        n=$((n + 1)); echo "ok $n # SKIP mpirun (openmpi-bin) not installed"
        continue
    fi
    (cd "$T" && timeout 120 mpirun -np $world --allow-run-as-root --oversubscribe "$B/t/coll_check" mpi $world \
        >"$T/mpi$world.out" 2>&1)
    rc=$?
    oks=$(grep -c ' ok$' "$T/mpi$world.out")
    echo "# exit $rc" >>"$T/mpi$world.out"
    [ $rc -eq 0 ] && [ "$oks" -eq "$(want $world)" ]
    ok $? "mpi, $world ranks: all-gather, reduce-scatter, gather, allreduce, broadcast, barrier exact" \
        "$T/mpi$world.out"
done

for world in 2 3; do
    port=$("$B/t/tcpstore_peer" serve </dev/null | sed -n 's/^port //p')
    PIDS=
    for r in $(seq 0 $((world - 1))); do
        RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$port timeout 120 "$B/t/coll_check" gloo $world \
            >"$T/gloo$world.$r" 2>&1 &
        PIDS="$PIDS $!"
    done
    rc=0
    for p in $PIDS; do wait "$p" || rc=$?; done
    PIDS=
    cat "$T"/gloo$world.* >"$T/gloo$world.out"
    oks=$(grep -c ' ok$' "$T/gloo$world.out")
    echo "# exit $rc" >>"$T/gloo$world.out"
    [ $rc -eq 0 ] && [ "$oks" -eq "$(want $world)" ]
    ok $? "gloo, $world ranks: all-gather, reduce-scatter, gather, allreduce, broadcast, barrier exact" \
        "$T/gloo$world.out"
done
