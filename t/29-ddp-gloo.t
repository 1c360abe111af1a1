#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# ddp without a PMIx server (issue 39): two `ctrain fit --strategy ddp` processes started by hand
# with MASTER_ADDR/MASTER_PORT/WORLD_SIZE (the manual environment) or with torchrun's variables
# (torchelastic) meet in the TCPStore rank 0 hosts and sum their gradients with gloo
# (ddp:backend=gloo, or auto: no PMIx server on cpu). Both end with the weights the mpi backend
# (ctrain's own launcher and PMIx server) gives on the same data, within 1e-6. The errors: a port
# in use, a rank 0 that never comes, a backend that is not one, nccl on cpu; none hangs, and
# nothing is left running. A rank killed ends the other at once; one stopped (SIGSTOP) is named,
# with its host, after the collective timeout (rank 1 by rank 0; rank 0, whose store goes silent
# with it, by rank 1). The store (issue 48): runs of other job ids or --run-ids do not mix, ranks
# of one run with other flags refuse, rank 0's store answers only at MASTER_ADDR's addresses (all
# with --store-bind all; this host's others too for a loopback name on 2 nodes, with a notice), and
# with --store-secret-file only clients that prove the secret. A rank killed while the ranks join
# (gloo's connectFullMesh) ends the others within the collective timeout, not five times it.
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B="$ROOT/${CTRAIN_BUILD:-build}"
CTRAIN="$B/ctrain"
. "$ROOT/t/lib/ci.sh"
. "$ROOT/t/lib/procs.sh"
T=$(mktemp -d /tmp/ctrain-t29-XXXXXX)
PIDS=
trap 'for p in $PIDS; do kill "$p" 2>/dev/null; done; rm -rf "$T"' EXIT
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); echo "not ok $n - $1"; [ -n "$2" ] && sed 's/^/# /' "$2"; }
check() { if eval "$1"; then ok "$2"; else nok "$2" "$3"; fi; }

PLAN=31
echo "1..$PLAN"
skip_rest() { while [ $n -lt $PLAN ]; do n=$((n + 1)); echo "ok $n # SKIP $1"; done; exit 0; }
if [ ! -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
    ci_needs "dataset-fashion-mnist not installed"
    skip_rest "dataset-fashion-mnist not installed"
fi
mkdir -p "$T/data"
"$B/t/idx_subset" /usr/share/datasets/fashion-mnist "$T/data" 6000 1000 >/dev/null || exit 1
FIT="--data $T/data --progress off --deterministic --devices 2 --batch-size 64 --lr-schedule constant --max-epochs 1"

# A port nothing listens on now: one the kernel hands the store tool, given back.
free_port() {
    "$B/t/tcpstore_peer" serve </dev/null | sed -n 's/^port //p'
}

# two_ranks NAME STRATEGY VAR=VALUE...: ranks 0 and 1 of one node, by hand, each with its own
# RANK and LOCAL_RANK (and GROUP_RANK 0); their output in $T/NAME.0 and $T/NAME.1, exits in .rc
two_ranks() {
    name=$1 strategy=$2
    shift 2
    port=${held_port:-$(free_port)}
    ranks=
    for r in 0 1; do
        (env "$@" MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" WORLD_SIZE=2 LOCAL_RANK=$r RANK=$r \
            timeout 120 "$CTRAIN" fit $FIT --strategy "$strategy" --default-root-dir "$T/$name" >"$T/$name.$r" 2>&1
         echo $? >"$T/$name.$r.rc") &
        PIDS="$PIDS $!"
        ranks="$ranks $!"
    done
    # shellcheck disable=SC2086
    wait $ranks   # its own two: a store held for them runs on
    cat "$T/$name.0" "$T/$name.1" >"$T/$name.out"
}

two_ranks gloo ddp:backend=gloo NODE_RANK=0
if grep -q "built without gloo" "$T/gloo.out"; then
    ci_needs "libgloo-dev not installed at build time"
    skip_rest "this ctrain was built without gloo (libgloo-dev; scripts/install-deps installs it)"
fi
check '[ "$(cat "$T/gloo.0.rc") $(cat "$T/gloo.1.rc")" = "0 0" ] && grep -q "\"world_size\":[[:space:]]*2" "$T/gloo/summary.json"' \
    "two hand-started ranks (manual environment), ddp:backend=gloo: both exit 0, world size 2" "$T/gloo.out"

timeout 120 "$CTRAIN" fit $FIT --strategy ddp --default-root-dir "$T/mpi" >"$T/mpi.out" 2>&1
check '[ $? -eq 0 ]' "the same fit with the mpi backend (ctrain's launcher and PMIx server)" "$T/mpi.out"
"$B/t/st_compare" --tol 1e-6 "$T/mpi/last.safetensors" "$T/gloo/last.safetensors" >"$T/cmp.out" 2>&1
check '[ $? -eq 0 ]' "gloo's weights equal mpi's within 1e-6 ($(tail -n 1 "$T/cmp.out"))" "$T/cmp.out"

# overlap=0: gloo's blocking path, no worker thread; each bucket summed by the same allreduce in the
# same order, so the same bits as the default's (where the worker sums them during backward).
two_ranks sync ddp:backend=gloo,overlap=0 NODE_RANK=0 CTRAIN_RUN_ID=t29sync
"$B/t/st_compare" "$T/gloo/last.safetensors" "$T/sync/last.safetensors" >"$T/cmp0.out" 2>&1
check '[ $? -eq 0 ] && [ "$(cat "$T/sync.0.rc") $(cat "$T/sync.1.rc")" = "0 0" ]' \
    "ddp:backend=gloo,overlap=0 (blocking) ends with the threaded path's weights, bit for bit" "$T/cmp0.out"

# The store's secret (issue 48 item 3): 32 random bytes, mode 0640 (refused below) until chmod 600.
(umask 027 && head -c 32 /dev/urandom >"$T/secret.key")
crypto=1
if "$B/t/tcpstore_peer" probe 127.0.0.1 1 0.1 "$T/secret.key" | grep -q "built without libcrypto"; then
    ci_needs "libssl-dev not installed at build time"
    crypto=0
fi
cp "$T/secret.key" "$T/te.key" && chmod 600 "$T/te.key"
# The issue's case: torchrun's variables, --strategy ddp (auto: no PMIx server, cpu: gloo); with the
# store's secret (CTRAIN_STORE_SECRET_FILE) where this ctrain has libcrypto.
[ "$crypto" = 1 ] && te_key="$T/te.key" || te_key=
two_ranks te ddp CTRAIN_STORE_SECRET_FILE="$te_key" TORCHELASTIC_RUN_ID=t29 TORCHELASTIC_RESTART_COUNT=0 TORCHELASTIC_MAX_RESTARTS=0 GROUP_RANK=0 \
    LOCAL_WORLD_SIZE=2 ROLE_RANK=0 ROLE_WORLD_SIZE=2
check '[ "$(cat "$T/te.0.rc") $(cat "$T/te.1.rc")" = "0 0" ]' \
    "torchrun's variables, --strategy ddp: auto takes gloo, both exit 0 (${te_key:+the store's secret from CTRAIN_STORE_SECRET_FILE})" "$T/te.out"
"$B/t/st_compare" --tol 1e-6 "$T/mpi/last.safetensors" "$T/te/last.safetensors" >"$T/cmp2.out" 2>&1
check '[ $? -eq 0 ]' "and the weights equal mpi's within 1e-6" "$T/cmp2.out"

# Two runs at one MASTER_ADDR:MASTER_PORT (issue 48 item 2): rank 0 of run t29a, rank 1 of run t29b.
# The store's keys are the run's own (ctrain/<job id>: TORCHELASTIC_RUN_ID here; SLURM's job, PMIx's
# namespace, LSF's job elsewhere), so rank 1 never joins the other run: both end with the
# --collective-timeout instead of training together (before: both trained and exited 0).
port=$(free_port)
ranks=
for r in 0 1; do
    (env TORCHELASTIC_RUN_ID="t29$(echo ab | cut -c$((r + 1)))" TORCHELASTIC_RESTART_COUNT=0 TORCHELASTIC_MAX_RESTARTS=0 \
        GROUP_RANK=0 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" WORLD_SIZE=2 LOCAL_RANK=$r RANK=$r \
        timeout 120 "$CTRAIN" fit $FIT --strategy ddp --collective-timeout 5 --default-root-dir "$T/mix" >"$T/mix.$r" 2>&1
     echo $? >"$T/mix.$r.rc") &
    PIDS="$PIDS $!"
    ranks="$ranks $!"
done
# shellcheck disable=SC2086
wait $ranks
cat "$T/mix.0" "$T/mix.1" >"$T/mix.out"
check '[ "$(cat "$T/mix.0.rc")" -ne 0 ] && [ "$(cat "$T/mix.1.rc")" -ne 0 ] && [ "$(cat "$T/mix.0.rc")" -ne 124 ] && [ "$(cat "$T/mix.1.rc")" -ne 124 ] && [ ! -f "$T/mix/summary.json" ]' \
    "rank 1 of another run at the same MASTER_ADDR:PORT does not join: both fail within the timeout, nothing trained" "$T/mix.out"

# The run's fingerprint (issue 48 item 2): ranks of one run given other flags (rank 1: --lr 0.5
# --seed 7, as a second job's rank that met this store) or another model (--model-config hidden=32:
# other shapes, which ended in gloo's uncaught exception, rc 134) refuse before the first step,
# rank 1 naming what differs and rank 0's value, both exit 2.
# differ NAME RANK1-FLAGS...: the two ranks, rank 1 with the extra flags; output in $T/NAME.R.
differ() {
    name=$1
    shift
    port=$(free_port)
    ranks=
    for r in 0 1; do
        extra=
        [ "$r" -eq 1 ] && extra="$*"
        # shellcheck disable=SC2086
        (env TORCHELASTIC_RUN_ID=t29 TORCHELASTIC_RESTART_COUNT=0 TORCHELASTIC_MAX_RESTARTS=0 GROUP_RANK=0 \
            LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" WORLD_SIZE=2 LOCAL_RANK=$r RANK=$r \
            timeout 120 "$CTRAIN" fit $FIT --strategy ddp --collective-timeout 20 $extra --default-root-dir "$T/$name" \
            >"$T/$name.$r" 2>&1
         echo $? >"$T/$name.$r.rc") &
        PIDS="$PIDS $!"
        ranks="$ranks $!"
    done
    # shellcheck disable=SC2086
    wait $ranks
    cat "$T/$name.0" "$T/$name.1" >"$T/$name.out"
}
differ flags --lr 0.5 --seed 7
check '[ "$(cat "$T/flags.0.rc") $(cat "$T/flags.1.rc")" = "2 2" ] && grep -q "rank 1 runs another run than rank 0: lr 0.5 (rank 0: 0.001)" "$T/flags.1" && grep -q "1 rank (the first: rank 1) runs another run than rank 0" "$T/flags.0" && ! grep -q "epoch 1" "$T/flags.out"' \
    "rank 1 with --lr 0.5 --seed 7: both refuse before training, rank 1 naming lr and rank 0's (exit 2 2)" "$T/flags.out"
differ shapes --model-config hidden=32
check '[ "$(cat "$T/shapes.0.rc") $(cat "$T/shapes.1.rc")" = "2 2" ] && grep -q "rank 1 runs another run than rank 0: .*hidden=32\|rank 1 runs another run than rank 0: the model" "$T/shapes.1"' \
    "rank 1 with another model config (other shapes): both refuse, no gloo exception (exit 2 2)" "$T/shapes.out"

# --run-id (issue 48 item 2): two hand-started runs at one MASTER_ADDR:MASTER_PORT that no job names
# (the manual environment): rank 0 of run a, rank 1 of run b. Their keys are under their run ids, so
# rank 1 waits for keys of its own run and both end at the timeout (before: --run-id unknown; without
# it both trained together). The two ranks of one run (CTRAIN_RUN_ID=t29sync, above) train.
port=$(free_port)
ranks=
for r in 0 1; do
    (env MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" WORLD_SIZE=2 NODE_RANK=0 LOCAL_RANK=$r RANK=$r \
        timeout 120 "$CTRAIN" fit $FIT --strategy ddp:backend=gloo --collective-timeout 3 \
        --run-id "t29run$(echo ab | cut -c$((r + 1)))" --default-root-dir "$T/runid" >"$T/runid.$r" 2>&1
     echo $? >"$T/runid.$r.rc") &
    PIDS="$PIDS $!"
    ranks="$ranks $!"
done
# shellcheck disable=SC2086
wait $ranks
cat "$T/runid.0" "$T/runid.1" >"$T/runid.out"
check '[ "$(cat "$T/runid.0.rc")" = 1 ] && [ "$(cat "$T/runid.1.rc")" = 1 ] && grep -q "rank 0: waited 3 s for .1. in the TCP store" "$T/runid.0" && [ ! -f "$T/runid/summary.json" ]' \
    "--run-id a and b at one MASTER_ADDR:PORT: rank 1 does not join rank 0's run: rank 0 waits for rank 1 until the timeout, both exit 1" "$T/runid.out"
MASTER_ADDR=127.0.0.1 MASTER_PORT=1 WORLD_SIZE=2 NODE_RANK=0 LOCAL_RANK=1 RANK=1 \
    timeout 60 "$CTRAIN" fit $FIT --strategy ddp:backend=gloo --collective-timeout 3 --run-id a/b --default-root-dir "$T/badrun" >"$T/badrun.out" 2>&1
rc=$?
CTRAIN_RUN_ID="x y" MASTER_ADDR=127.0.0.1 MASTER_PORT=1 WORLD_SIZE=2 NODE_RANK=0 LOCAL_RANK=1 RANK=1 \
    timeout 60 "$CTRAIN" fit $FIT --strategy ddp:backend=gloo --collective-timeout 3 --default-root-dir "$T/badrun" >>"$T/badrun.out" 2>&1
rc2=$?
check '[ $rc -eq 2 ] && [ $rc2 -eq 2 ] && grep -q "^ctrain: error.*--run-id (or CTRAIN_RUN_ID) .a/b. is not a run id" "$T/badrun.out" && grep -q "run-id (or CTRAIN_RUN_ID) .x y. is not a run id" "$T/badrun.out" && grep -q "^ctrain: hint:.*letters, digits" "$T/badrun.out"' \
    "--run-id a/b and CTRAIN_RUN_ID='x y': refused naming them, with a hint (exit $rc $rc2)" "$T/badrun.out"

# Where rank 0's store listens (issue 48 item 2): MASTER_ADDR's addresses, not every interface (a
# client on another network read the rendezvous keys and planted a peer address). lone NAME
# ADDR VAR=VALUE... [-- FLAGS]: rank 0 alone (rank 1 never comes) in the background, hosting its store
# while it waits, until its store answers at ADDR (tcpstore_peer probe: connect and PING);
# lone_end NAME kills it. probe ADDR: 0 when the store answers there within 1 s.
lone() {
    name=$1 reach=$2
    shift 2
    port=$(free_port)
    vars= flags=
    while [ $# -gt 0 ]; do
        [ "$1" = -- ] && { shift; flags="$*"; break; }
        vars="$vars $1"
        shift
    done
    # shellcheck disable=SC2086
    (env $vars MASTER_PORT="$port" NODE_RANK=0 LOCAL_RANK=0 RANK=0 timeout 60 "$CTRAIN" fit --data "$T/data" \
        --progress off --strategy ddp:backend=gloo --collective-timeout 30 $flags --default-root-dir "$T/$name" \
        >"$T/$name.0" 2>&1) &
    PIDS="$PIDS $!"
    i=0
    until probe "$reach" "$LONE_SECRET" || [ $i -ge 80 ]; do i=$((i + 1)); done
}
probe() { "$B/t/tcpstore_peer" probe "$1" "$port" 0.5 ${2:+"$2"} >>"$T/$name.probe" 2>&1; }
lone_end() {
    for p in $(pgrep -f "default-root-dir $T/$1\$" 2>/dev/null); do
        [ "$(cat "/proc/$p/comm" 2>/dev/null)" = ctrain ] && kill -KILL "$p"
    done
    cat "$T/$1.probe" >>"$T/$1.0"
}
# An address of this host other than loopback, when it has one.
other=$(hostname -I 2>/dev/null | tr ' ' '\n' | grep -v '^$' | grep -v ':' | head -n 1)
lone bindlo 127.0.0.1 MASTER_ADDR=127.0.0.1 WORLD_SIZE=2 -- --devices 2
probe 127.0.0.1; r1=$?
probe 127.0.0.2; r2=$?
r3=1
[ -n "$other" ] && { probe "$other"; r3=$?; }
lone_end bindlo
check '[ $r1 -eq 0 ] && [ $r2 -ne 0 ] && [ $r3 -ne 0 ]' \
    "MASTER_ADDR=127.0.0.1: rank 0's store answers at 127.0.0.1, not at 127.0.0.2 nor ${other:-(no other address)} ($r1 $r2 $r3)" \
    "$T/bindlo.0"
lone bindall 127.0.0.1 MASTER_ADDR=127.0.0.1 WORLD_SIZE=2 CTRAIN_STORE_BIND=all -- --devices 2
probe 127.0.0.2; r2=$?
lone_end bindall
check '[ $r2 -eq 0 ]' "CTRAIN_STORE_BIND=all: every interface, 127.0.0.2 too ($r2)" "$T/bindall.0"
# Debian's own-name case: MASTER_ADDR names this host but resolves to loopback here (localhost
# plays it), and the run spans 2 nodes: the other nodes reach this host by its other addresses, so
# the store listens on those too and says so; 127.0.0.2 is still not served. (Debian 13's
# localhost is ::1 first, then 127.0.0.1: the notice lists both.)
lone bindname 127.0.0.1 MASTER_ADDR=localhost WORLD_SIZE=2 LOCAL_WORLD_SIZE=1 -- --devices 1 --num-nodes 2
probe 127.0.0.2; r2=$?
r3=0
[ -n "$other" ] && { probe "$other"; r3=$?; }
lone_end bindname
check '[ $r2 -ne 0 ] && [ $r3 -eq 0 ] && grep -q "^ctrain: rank 0: MASTER_ADDR .localhost. is [^(]*127.0.0.1[^(]* (loopback) on this host, which the other nodes cannot reach: the TCP store listens on [^;]*127.0.0.1.*${other}.*choose with --store-bind" "$T/bindname.0"' \
    "MASTER_ADDR resolving to loopback on a 2-node run: the store listens on this host's other addresses too (${other:-none}), with a notice; not 127.0.0.2 ($r2 $r3)" \
    "$T/bindname.0"

# The store's secret (issue 48 item 3): --store-secret-file (or CTRAIN_STORE_SECRET_FILE), a file
# only its user can read. Refused when group or others can read it, or it is short; a rank with
# another secret is told the store does not hold its own; a client without it (the store tool's
# probe, as PyTorch's client) is dropped and rank 0 says so, naming its address. The two ranks of
# the torchrun-variables run above (test 5) authenticated with CTRAIN_STORE_SECRET_FILE.
if [ "$crypto" = 1 ]; then
    head -c 8 /dev/urandom >"$T/short.key" && chmod 600 "$T/short.key"
    for f in "$T/secret.key" "$T/short.key"; do
        MASTER_ADDR=127.0.0.1 MASTER_PORT=1 WORLD_SIZE=2 NODE_RANK=0 LOCAL_RANK=1 RANK=1 \
            timeout 60 "$CTRAIN" fit $FIT --strategy ddp:backend=gloo --collective-timeout 3 --store-secret-file "$f" \
            --default-root-dir "$T/badkey" >>"$T/badkey.out" 2>&1
        echo $? >>"$T/badkey.rc"
    done
    check '[ "$(cat "$T/badkey.rc" | tr "\n" " ")" = "2 2 " ] && grep -q "^ctrain: error: --store-secret-file $T/secret.key can be read or written by group or others (mode 0640)" "$T/badkey.out" && grep -q "^ctrain: hint: chmod 600 $T/secret.key" "$T/badkey.out" && grep -q "short.key holds 8 bytes, fewer than 16" "$T/badkey.out"' \
        "--store-secret-file readable by group (0640), or of 8 bytes: refused with a hint, nothing started (exit 2 2)" \
        "$T/badkey.out"
    chmod 600 "$T/secret.key"
    head -c 32 /dev/urandom >"$T/other.key" && chmod 600 "$T/other.key"
    port=$(free_port)
    ranks=
    for r in 0 1; do
        key="$T/secret.key"
        [ "$r" -eq 1 ] && key="$T/other.key"
        (env MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" WORLD_SIZE=2 NODE_RANK=0 LOCAL_RANK=$r RANK=$r \
            timeout 120 "$CTRAIN" fit $FIT --strategy ddp:backend=gloo --collective-timeout 3 --store-secret-file "$key" \
            --default-root-dir "$T/keys" >"$T/keys.$r" 2>&1
         echo $? >"$T/keys.$r.rc") &
        PIDS="$PIDS $!"
        ranks="$ranks $!"
    done
    # shellcheck disable=SC2086
    wait $ranks
    cat "$T/keys.0" "$T/keys.1" >"$T/keys.out"
    check '[ "$(cat "$T/keys.1.rc")" = 2 ] && [ "$(cat "$T/keys.0.rc")" = 1 ] && grep -q "rank 1: the TCP store at 127.0.0.1:$port does not hold this rank.s secret" "$T/keys.1" && grep -q "^ctrain: hint: give every rank, rank 0 too, the same --store-secret-file" "$T/keys.1" && [ ! -f "$T/keys/summary.json" ]' \
        "rank 1 with another secret: refused at the store, with a hint; rank 0 waits out its timeout (exit 1 2)" "$T/keys.out"
    LONE_SECRET="$T/secret.key" lone authlog 127.0.0.1 MASTER_ADDR=127.0.0.1 WORLD_SIZE=2 -- --devices 2 \
        --store-secret-file "$T/secret.key"
    probe 127.0.0.1 "$T/secret.key"; r1=$?
    probe 127.0.0.1; r2=$?
    sleep 0.5
    lone_end authlog
    check '[ $r1 -eq 0 ] && [ $r2 -ne 0 ] && grep -q "^ctrain: rank 0: TCP store: dropped a client from 127.0.0.1:[0-9]*: it sent a query before authenticating" "$T/authlog.0"' \
        "a client without the secret: dropped, rank 0 naming its address and why; one with it is served ($r1 $r2)" "$T/authlog.0"
else
    for i in 1 2 3; do n=$((n + 1)); echo "ok $n # SKIP this ctrain was built without libcrypto (libssl-dev)"; done
fi

# hold_store NAME: a TCPStore (the store tool) on a free port, $held, until release_store; it lives
# while its stdin, a fifo this shell keeps open on fd 9, does.
hold_store() {
    mkfifo "$T/$1.fifo"
    exec 9<>"$T/$1.fifo"
    "$B/t/tcpstore_peer" serve <"$T/$1.fifo" >"$T/$1.held" 2>&1 9>&- &
    holder=$!
    PIDS="$PIDS $holder"
    i=0
    while [ ! -s "$T/$1.held" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
    held=$(sed -n 's/^port //p' "$T/$1.held")
}
release_store() {
    exec 9>&-
    kill "$holder" 2>/dev/null
    wait "$holder" 2>/dev/null
}

# Under torchrun (TORCHELASTIC_USE_AGENT_STORE=True) the agent hosts the store and rank 0 does not:
# here the store tool plays the agent.
hold_store agent
held_port=$held two_ranks agent ddp TORCHELASTIC_RUN_ID=t29 TORCHELASTIC_RESTART_COUNT=0 \
    TORCHELASTIC_USE_AGENT_STORE=True GROUP_RANK=0 LOCAL_WORLD_SIZE=2
release_store
check '[ "$(cat "$T/agent.0.rc") $(cat "$T/agent.1.rc")" = "0 0" ] && "$B/t/st_compare" --tol 1e-6 "$T/mpi/last.safetensors" "$T/agent/last.safetensors" >/dev/null' \
    "torchrun's agent store (TORCHELASTIC_USE_AGENT_STORE=True): both ranks join it, mpi's weights" "$T/agent.out"

# torchrun itself, its agent, rendezvous and store (t/tools/torchrun.py: torchrun's main with
# TCPStore defaulting to use_libuv=False, which Debian 13's PyTorch lacks). Debian 12's torchrun
# (PyTorch 1.13) fails under its Python 3.11 before it starts a worker: make test-debian13 runs this.
tv=$(/usr/bin/python3 -c 'import torch.distributed.run, torch; print(torch.__version__)' 2>/dev/null)
case "$tv" in
    2.*)
        OPENBLAS_NUM_THREADS=1 timeout 120 /usr/bin/python3 "$ROOT/t/tools/torchrun.py" --nnodes 1 --nproc-per-node 2 \
            --master-port "$(free_port)" --no-python "$CTRAIN" fit $FIT --strategy ddp --default-root-dir "$T/torchrun" \
            >"$T/torchrun.out" 2>&1
        check '[ $? -eq 0 ] && grep -q "\"world_size\":[[:space:]]*2" "$T/torchrun/summary.json" &&
               "$B/t/st_compare" --tol 1e-6 "$T/mpi/last.safetensors" "$T/torchrun/last.safetensors" >/dev/null' \
            "torchrun --nproc-per-node 2 --no-python ctrain fit --strategy ddp (PyTorch $tv): world size 2, mpi's weights" \
            "$T/torchrun.out"
        ;;
    *)
        n=$((n + 1))
        echo "ok $n # SKIP torchrun of PyTorch ${tv:-(none)} does not run here (Debian 12's 1.13 fails under Python 3.11); make test-debian13 runs it"
        ;;
esac

# A port in use: rank 0 cannot host the store; it says which port and why, at once.
hold_store busy
MASTER_ADDR=127.0.0.1 MASTER_PORT="$held" WORLD_SIZE=2 NODE_RANK=0 LOCAL_RANK=0 RANK=0 \
    timeout 60 "$CTRAIN" fit $FIT --strategy ddp:backend=gloo --default-root-dir "$T/busy" >"$T/busy.out" 2>&1
rc=$?
release_store
check '[ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q "rank 0: cannot host the TCP store on port $held" "$T/busy.out" && grep -q "^ctrain: hint:.*MASTER_PORT" "$T/busy.out"' \
    "a MASTER_PORT in use: rank 0 fails at once naming the port, with a hint (exit $rc)" "$T/busy.out"

# Rank 1 alone: nobody hosts the store; the timeout ends it naming the address and the rank.
port=$(free_port)
start=$(date +%s)
MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" WORLD_SIZE=2 NODE_RANK=0 LOCAL_RANK=1 RANK=1 \
    timeout 60 "$CTRAIN" fit $FIT --strategy ddp:backend=gloo --collective-timeout 3 --default-root-dir "$T/alone" \
    >"$T/alone.out" 2>&1
rc=$?
took=$(($(date +%s) - start))
check '[ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $took -lt 30 ] && grep -q "rank 1: cannot reach the TCP store at 127.0.0.1:$port" "$T/alone.out"' \
    "rank 1 without rank 0: fails after --collective-timeout 3 naming the address and the rank (${took} s, exit $rc)" "$T/alone.out"

MASTER_ADDR=127.0.0.1 MASTER_PORT=1 WORLD_SIZE=2 NODE_RANK=0 LOCAL_RANK=0 RANK=0 \
    timeout 60 "$CTRAIN" fit $FIT --strategy ddp:backend=tcp --default-root-dir "$T/bad" >"$T/bad.out" 2>&1
rc=$?
check '[ $rc -eq 2 ] && grep -q "backend .tcp. is not one of auto, mpi, gloo, nccl" "$T/bad.out" && grep -q "^ctrain: hint:" "$T/bad.out"' \
    "ddp:backend=tcp: an error naming it, a hint, exit 2" "$T/bad.out"
MASTER_ADDR=127.0.0.1 MASTER_PORT=1 WORLD_SIZE=2 NODE_RANK=0 LOCAL_RANK=0 RANK=0 \
    timeout 60 "$CTRAIN" fit $FIT --strategy ddp:backend=nccl --default-root-dir "$T/nccl" >"$T/nccl.out" 2>&1
rc=$?
check '[ $rc -eq 2 ] && grep -q "^ctrain: error: --strategy ddp:backend=nccl runs on cuda tensors, and the accelerator is cpu" "$T/nccl.out" &&
    grep -q "^ctrain: hint: on cpu use backend=gloo or mpi" "$T/nccl.out" && [ ! -e "$T/nccl" ]' \
    "ddp:backend=nccl on cpu: refused by the plan with a hint, exit 2, nothing run" "$T/nccl.out"

# A rank that dies, or stops answering, under gloo: rank 0 fails (at once, or after
# --collective-timeout) instead of waiting. start_pair NAME: two ranks of a long run in the
# background; rank1_pid: the ctrain process of rank 1 (its LOCAL_RANK), once it trains.
start_pair() {
    port=$(free_port)
    for r in 0 1; do
        (env MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" WORLD_SIZE=2 NODE_RANK=0 LOCAL_RANK=$r RANK=$r \
            timeout 120 "$CTRAIN" fit $FIT --max-epochs 50 --collective-timeout 5 --strategy ddp \
            --default-root-dir "$T/$1" >"$T/$1.$r" 2>&1
         echo $? >"$T/$1.$r.rc") &
        PIDS="$PIDS $!"
    done
}
rank1_pid() { rank_pid "$1" 1; }
rank_pid() {    # rank_pid NAME R
    i=0
    while [ $i -lt 200 ]; do
        for p in $(pgrep -f "default-root-dir $T/$1" 2>/dev/null); do
            [ "$(cat "/proc/$p/comm" 2>/dev/null)" = ctrain ] &&
                tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "LOCAL_RANK=$2" &&
                [ -f "$T/$1/metrics.csv" ] && { echo "$p"; return 0; }
        done
        sleep 0.1
        i=$((i + 1))
    done
    return 1
}
# rank0_ends NAME [R]: seconds until rank 0 (or R) exited (at most 60)
rank0_ends() {
    start=$(date +%s)
    while [ ! -s "$T/$1.${2:-0}.rc" ] && [ $(($(date +%s) - start)) -lt 60 ]; do sleep 0.2; done
    echo $(($(date +%s) - start))
}

start_pair killed
victim=$(rank1_pid killed)
# The gloo context's collectives run on a thread of its own while backward goes on.
threads=$(cat /proc/"$victim"/task/*/comm 2>/dev/null | grep -c '^ctrain-gloo$')
check '[ -n "$victim" ] && [ "$threads" = 1 ]' "a training rank has one gloo worker thread (ctrain-gloo: $threads)"
[ -n "$victim" ] && kill -KILL "$victim"
took=$(rank0_ends killed)
check '[ -n "$victim" ] && [ "$(cat "$T/killed.0.rc")" = 1 ] && grep -q "ddp (gloo): rank 0: an allreduce failed" "$T/killed.0" && grep -q "^ctrain: hint:" "$T/killed.0"' \
    "rank 1 killed under gloo: rank 0 fails naming the allreduce, with a hint (${took} s)" "$T/killed.0"

start_pair stopped
victim=$(rank1_pid stopped)
[ -n "$victim" ] && kill -STOP "$victim"
took=$(rank0_ends stopped)
[ -n "$victim" ] && kill -KILL "$victim" && kill -CONT "$victim"
# The ranks that time out call the roll in the store; rank 0 names the one that never answers, and
# its host, as the MPI path does.
check '[ -n "$victim" ] && [ "$(cat "$T/stopped.0.rc")" = 1 ] && [ "$took" -ge 3 ] && [ "$took" -lt 30 ] &&
       grep -q "did not complete within 5 s: rank 1 of 2 did not arrive (on $(hostname))" "$T/stopped.0"' \
    "rank 1 stopped (SIGSTOP) under gloo: rank 0 fails after --collective-timeout 5 naming rank 1 and its host (${took} s)" \
    "$T/stopped.0"

# Rank 0 stopped: the store (in rank 0's process) stops answering too; rank 1 names rank 0.
start_pair stopped0
victim=$(rank_pid stopped0 0)
[ -n "$victim" ] && kill -STOP "$victim"
took=$(rank0_ends stopped0 1)
[ -n "$victim" ] && kill -KILL "$victim" && kill -CONT "$victim"
check '[ -n "$victim" ] && [ "$(cat "$T/stopped0.1.rc")" = 1 ] && [ "$took" -lt 40 ] &&
       grep -q "rank 0 (on 127.0.0.1) did not arrive, and its store at 127.0.0.1:[0-9]* does not answer" "$T/stopped0.1"' \
    "rank 0 stopped under gloo: rank 1 fails naming rank 0, its host and its silent store (${took} s)" "$T/stopped0.1"
wait

# A rank that dies or hangs while the ranks join (gloo's connectFullMesh) ends the other within the
# collective timeout: gloo's pairs wait five times their timeout for a first connection, which held
# the waiting rank for 5 x --collective-timeout (25 min at the default) when its peer stopped after
# publishing its address. Both ranks run with stop_at_connect.so: whichever of the two makes the
# pair's connection stops (SIGSTOP) just before it, after the store has both addresses; the other
# waits for it and must end, exit 1 with ctrain's message, within 3 x the 4 s timeout (before: 20 s
# and more). Twice (which rank connects depends on the ports the kernel gives).
join_stop() {
    port=$(free_port)
    for r in 0 1; do
        env LD_PRELOAD="$B/t/stop_at_connect.so" ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" \
            MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" WORLD_SIZE=2 NODE_RANK=0 LOCAL_RANK=$r RANK=$r \
            "$CTRAIN" fit $FIT --collective-timeout 4 --strategy ddp:backend=gloo \
            --default-root-dir "$T/$1" >"$T/$1.$r" 2>&1 &
        eval "jp$r=\$!"
        PIDS="$PIDS $!"
    done
    # from the moment one of them stops (state T) until the other has ended
    t0= took= waiter= w=0
    while [ -z "$waiter" ] && [ $w -lt 2400 ]; do
        for r in 0 1; do
            eval "p=\$jp$r"
            [ -z "$t0" ] && [ "$(sed 's/^.*) \(.\).*/\1/' "/proc/$p/stat" 2>/dev/null)" = T ] && t0=$(date +%s%N)
            kill -0 "$p" 2>/dev/null || { waiter=$r; break; }
        done
        [ -n "$waiter" ] || { sleep 0.05; w=$((w + 1)); }
    done
    took=$(( ($(date +%s%N) - ${t0:-0}) / 1000000 ))
    for r in 0 1; do
        eval "p=\$jp$r"
        kill -KILL "$p" 2>/dev/null
        kill -CONT "$p" 2>/dev/null
        wait "$p"
        rc=$?
        [ "$r" = "$waiter" ] && wrc=$rc
    done
    [ -n "$t0" ] && [ -n "$waiter" ] && [ "$wrc" = 1 ] && [ $took -lt 12000 ] && grep -q "^ctrain: error:" "$T/$1.$waiter"
}
for i in 1 2; do
    join_stop "join$i"
    check '[ $? -eq 0 ]' \
        "a rank stopped as it connects to its gloo peer: rank ${waiter:-?} ends ${took} ms after (under 12 s: 3 x --collective-timeout 4), exit 1, ctrain's message" \
        "$T/join$i.${waiter:-0}"
done

# The plan says which backend and why (process_group_backend).
MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 WORLD_SIZE=2 NODE_RANK=0 LOCAL_RANK=1 \
    "$CTRAIN" plan --strategy ddp --devices 2 >"$T/plan-gloo.out" 2>&1
"$CTRAIN" plan --strategy ddp --devices 2 >"$T/plan-mpi.out" 2>&1
check 'tr -d "\n\t " <"$T/plan-gloo.out" | grep -q "\"process_group_backend\":{\"name\":\"gloo\",\"why\":\"auto:noPMIxserver" &&
       tr -d "\n\t " <"$T/plan-mpi.out" | grep -q "\"process_group_backend\":{\"name\":\"mpi\",\"why\":\"auto:ctrain.slauncherhostsaPMIxserver"' \
    "ctrain plan: gloo for hand-started ranks, mpi under ctrain's launcher, each with why" "$T/plan-gloo.out"

# shellcheck disable=SC2086
check 'all_gone $PIDS && ! pgrep -f "$T/" >/dev/null' "nothing left running"
