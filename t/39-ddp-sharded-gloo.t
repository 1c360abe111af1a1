#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# ddp_sharded on the gloo backend (issue 39): hand-started ranks (the manual environment:
# MASTER_ADDR/MASTER_PORT/WORLD_SIZE, no PMIx server) run ddp_sharded's reduce-scatter and
# all-gather with gloo's own collectives (ReduceScatterHalvingDoubling, allgatherv) and end with the
# checkpoint the mpi backend gives (weights and the whole optimizer state, within 1e-6), which is
# ddp's as well: the shards, what each rank owns and what a checkpoint holds, do not depend on the
# backend. Stage 1 (gloo's allreduce) and 3 ranks (uneven shards, several all-gather pieces, a world
# that is not a power of two) too; --strategy ddp_sharded alone takes gloo there (auto), as the plan
# says; a rank killed mid-run ends the other with an error naming the collective, and nothing is
# left running.
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B="$ROOT/${CTRAIN_BUILD:-build}"
CTRAIN="$B/ctrain"
. "$ROOT/t/lib/ci.sh"
. "$ROOT/t/lib/procs.sh"
T=$(mktemp -d /tmp/ctrain-t39g-XXXXXX)
PIDS=
trap 'for p in $PIDS; do kill "$p" 2>/dev/null; done; rm -rf "$T"' EXIT
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); echo "not ok $n - $1"; [ -n "$2" ] && sed 's/^/# /' "$2"; }
check() { if eval "$1"; then ok "$2"; else nok "$2" "$3"; fi; }

PLAN=10
echo "1..$PLAN"
skip_rest() { while [ $n -lt $PLAN ]; do n=$((n + 1)); echo "ok $n # SKIP $1"; done; exit 0; }
if [ ! -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
    ci_needs "dataset-fashion-mnist not installed"
    skip_rest "dataset-fashion-mnist not installed"
fi
mkdir -p "$T/data"
"$B/t/idx_subset" /usr/share/datasets/fashion-mnist "$T/data" 6000 1000 >/dev/null || exit 1
FIT="--data $T/data --progress off --deterministic --lr-schedule constant --max-epochs 1"

free_port() {
    "$B/t/tcpstore_peer" serve </dev/null | sed -n 's/^port //p'
}

# by_hand NAME WORLD STRATEGY [FIT OPTIONS...]: WORLD ranks of one node started by hand, each with
# its RANK and LOCAL_RANK; their output in $T/NAME.R, exits in $T/NAME.R.rc, both in $T/NAME.out.
by_hand() {
    name=$1 world=$2 strategy=$3
    shift 3
    port=$(free_port)
    ranks=
    r=0
    while [ $r -lt "$world" ]; do
        (MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" WORLD_SIZE=$world NODE_RANK=0 LOCAL_RANK=$r RANK=$r \
            timeout 120 "$CTRAIN" fit $FIT --devices "$world" --strategy "$strategy" "$@" \
            --default-root-dir "$T/$name" >"$T/$name.$r" 2>&1
         echo $? >"$T/$name.$r.rc") &
        PIDS="$PIDS $!"
        ranks="$ranks $!"
        r=$((r + 1))
    done
    # shellcheck disable=SC2086
    wait $ranks
    cat "$T/$name".[0-9] >"$T/$name.out"
}
json_num() { tr -d '\n\t ' <"$2" | sed -n "s/.*\"$1\":\([0-9.e+-]*\).*/\1/p"; }
exits() { cat "$T/$1".[0-9].rc | tr '\n' ' ' | sed 's/ $//'; }
same() {    # same A B: A's checkpoint equals B's within 1e-6 (message in $T/cmp.out)
    "$B/t/st_compare" --tol 1e-6 "$T/$1/last.safetensors" "$T/$2/last.safetensors" >"$T/cmp.out" 2>&1
}

# 1-3: stage 2 on 2 ranks against the mpi backend (ctrain's launcher and its PMIx server) and ddp.
by_hand gz 2 ddp_sharded:backend=gloo --batch-size 64
if grep -q "built without gloo" "$T/gz.out"; then
    ci_needs "libgloo-dev not installed at build time"
    skip_rest "this ctrain was built without gloo (libgloo-dev; scripts/install-deps installs it)"
fi
check '[ "$(exits gz)" = "0 0" ] && grep -q "\"world_size\":[[:space:]]*2" "$T/gz/summary.json"' \
    "ddp_sharded:backend=gloo, two hand-started ranks: both exit 0, world size 2 ($(exits gz))" "$T/gz.out"
timeout 120 "$CTRAIN" fit $FIT --devices 2 --batch-size 64 --strategy ddp_sharded --default-root-dir "$T/mz" \
    >"$T/mz.out" 2>&1 &&
    timeout 120 "$CTRAIN" fit $FIT --devices 2 --batch-size 64 --strategy ddp --default-root-dir "$T/md" \
        >"$T/md.out" 2>&1
# shellcheck disable=SC2034 # read by check's eval
rc=$?
same mz gz
check '[ $rc -eq 0 ] && same mz gz' \
    "its checkpoint (weights, whole optimizer state) equals ddp_sharded's on mpi within 1e-6 ($(tail -n 1 "$T/cmp.out"))" \
    "$T/cmp.out"
same md gz
check 'same md gz' "and ddp's on mpi ($(tail -n 1 "$T/cmp.out"))" "$T/cmp.out"

# 4: the exchange each step: 4 reduce-scatters (ddp's buckets), 3 during backward; the parameters'
# all-gather pieces, one each during forward; half of ddp's optimizer state per rank.
a=$(json_num grad_allreduces "$T/gz/summary.json") b=$(json_num grad_allreduces_in_backward "$T/gz/summary.json")
o=$(json_num optimizer_state_bytes_per_rank "$T/gz/summary.json")
check '[ "$a" = 172 ] && [ "$b" = 129 ] && [ "$o" = 2143272 ]' \
    "gloo stage 2: $b of $a reduce-scatters during backward (43 steps), $o bytes of optimizer state per rank" \
    "$T/gz/summary.json"

# 5: stage 1 (gloo's allreduce, each rank reads its shard).
by_hand gz1 2 ddp_sharded:backend=gloo,stage=1 --batch-size 64
same mz gz1
check '[ "$(exits gz1)" = "0 0" ] && same mz gz1' "stage 1 on gloo: mpi's checkpoint ($(tail -n 1 "$T/cmp.out"))" \
    "$T/gz1.out"

# 6: 3 ranks, 0.25 MiB buckets: shards of unequal length, several all-gather pieces, and gloo's
# halving-doubling on a world that is no power of two.
by_hand gz3 3 ddp_sharded:backend=gloo,bucket_mb=0.25 --batch-size 32
timeout 120 "$CTRAIN" fit $FIT --devices 3 --batch-size 32 --strategy ddp_sharded:bucket_mb=0.25 \
    --default-root-dir "$T/mz3" >"$T/mz3.out" 2>&1
# shellcheck disable=SC2034 # read by check's eval
rc=$?
same mz3 gz3
check '[ $rc -eq 0 ] && [ "$(exits gz3)" = "0 0 0" ] && same mz3 gz3' \
    "3 ranks, 0.25 MiB buckets, on gloo: mpi's checkpoint ($(tail -n 1 "$T/cmp.out"))" "$T/gz3.out"

# 7-8: --strategy ddp_sharded alone, no PMIx server: auto takes gloo (and the plan says so).
by_hand auto 2 ddp_sharded --batch-size 64
same mz auto
check '[ "$(exits auto)" = "0 0" ] && same mz auto' \
    "ddp_sharded by hand, backend auto: trains on gloo, mpi's checkpoint ($(exits auto))" "$T/auto.out"
MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 WORLD_SIZE=2 NODE_RANK=0 LOCAL_RANK=1 \
    "$CTRAIN" plan --strategy ddp_sharded --devices 2 >"$T/plan.out" 2>&1
check 'tr -d "\n\t " <"$T/plan.out" | grep -q "\"process_group_backend\":{\"name\":\"gloo\",\"why\":\"auto:noPMIxserver"' \
    "ctrain plan --strategy ddp_sharded by hand: process_group_backend gloo, with why" "$T/plan.out"

# 9: rank 1 killed at a random moment of a long run: rank 0 fails with gloo's error naming the
# collective (a reduce-scatter, an all-gather or an allreduce), a hint, well before the timeout.
port=$(free_port)
for r in 0 1; do
    (MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" WORLD_SIZE=2 NODE_RANK=0 LOCAL_RANK=$r RANK=$r \
        timeout 120 "$CTRAIN" fit $FIT --devices 2 --batch-size 64 --max-epochs 50 --collective-timeout 30 \
        --strategy ddp_sharded --default-root-dir "$T/kill" >"$T/kill.$r" 2>&1
     echo $? >"$T/kill.$r.rc") &
    PIDS="$PIDS $!"
done
victim=
i=0
while [ -z "$victim" ] && [ $i -lt 300 ]; do
    for p in $(pgrep -f "default-root-dir $T/kill" 2>/dev/null); do
        [ "$(cat "/proc/$p/comm" 2>/dev/null)" = ctrain ] && [ -f "$T/kill/metrics.csv" ] &&
            tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "LOCAL_RANK=1" && victim=$p
    done
    sleep 0.1
    i=$((i + 1))
done
sleep "$(awk -v s="$$" 'BEGIN { srand(s); printf "%.2f", rand() * 2 }')"
[ -n "$victim" ] && kill -KILL "$victim"
start=$(date +%s)
while [ ! -s "$T/kill.0.rc" ] && [ $(($(date +%s) - start)) -lt 60 ]; do sleep 0.2; done
took=$(($(date +%s) - start))
check '[ -n "$victim" ] && [ "$(cat "$T/kill.0.rc")" = 1 ] && [ "$took" -lt 25 ] &&
       grep -q "ddp (gloo): rank 0: an* [a-z-]* failed" "$T/kill.0" && grep -q "^ctrain: hint:" "$T/kill.0"' \
    "rank 1 killed under ddp_sharded on gloo: rank 0 fails naming gloo's collective, with a hint (${took} s: $(grep -o "an* [a-z-]* failed" "$T/kill.0"))" \
    "$T/kill.0"
wait

# shellcheck disable=SC2086
check 'all_gone $PIDS && ! pgrep -f "$T/" >/dev/null' "nothing left running"
