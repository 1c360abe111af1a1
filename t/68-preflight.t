#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# ctrain preflight across three hosts of scripts/slurm-cluster (one rank each), under each launch:
#   - a clean run under srun --mpi=pmix (MPI) exits 0, names nobody, writes DIR/preflight.json;
#   - n3's link delayed 50 ms each way (link delay): n3 and only n3 named for latency, exit 3;
#   - n2's CPU capped at 5% of a CPU (slow): n2 and only n2 named for compute, exit 3; the same cap
#     stops ctrain fit --preflight before its first step (exit 3, no checkpoint);
#   - the same checks over gloo: srun --mpi=none with MASTER_ADDR/PORT, and one process per host
#     started by hand as torchrun's agents would (RANK, WORLD_SIZE), exit 0; mpirun on one machine;
#   - a PyTorch env:// job (python3-torch) run as the step after a ctrain preflight step;
#   - bad thresholds refused before anything is launched (exit 2, the flag named);
# and nothing of any run is left running. Each fault is put on at a random moment before the step
# starts (0 to 1 s), and taken off after.
. "$(dirname "$0")/lib/launch.sh"
. "$(dirname "$0")/lib/ddp.sh"
N=16

start_srun_cluster $N 3
SC="$root_dir/scripts/slurm-cluster"
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
PF="preflight --strategy ddp --devices 1 --num-nodes 3 --collective-timeout 60"
# named FILE: the nodes preflight.json names, "node:check" sorted, one line
named() { python3 -c 'import json, sys
print(" ".join(sorted(o["node"] + ":" + o["check"] for o in json.load(open(sys.argv[1]))["outliers"])))' "$1" 2>/dev/null; }
jget() { python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2" 2>/dev/null; }
pause() { sleep "$(awk 'BEGIN { srand(); printf "%.2f", rand() }')"; }

# 1-2: clean.
t0=$(now)
timeout 120 srun -N3 -n3 --mpi=pmix "$CTRAIN" $PF --default-root-dir "$tmp/clean" >"$tmp/clean.out" 2>&1
rc=$?
ok "$([ $rc -eq 0 ] && grep -q 'every node passed' "$tmp/clean.out"; echo $?)" \
    "srun --mpi=pmix -N3 ctrain preflight, nothing wrong: exit $rc, every node passed ($(elapsed "$t0") s)" || diag "$tmp/clean.out"
[ "$(jget "$tmp/clean/preflight.json" ok)" = True ] && [ "$(jget "$tmp/clean/preflight.json" num_nodes)" = 3 ] &&
    [ -z "$(named "$tmp/clean/preflight.json")" ] && [ "$(grep -c '^n[123] ' "$tmp/clean.out")" = 3 ]
ok $? "the table has a row per node; preflight.json: ok, 3 nodes, no outliers" || diag "$tmp/clean/preflight.json"

# 3-5: a 50 ms delay on n3's link.
pause
"$SC" link "$cluster" n3 delay 50 >"$tmp/link.out" 2>&1
st=$?
if [ $st -eq 3 ]; then
    for i in 3 4 5; do echo "ok $i # SKIP $(tail -n 1 "$tmp/link.out")"; done
    n=5
else
    t0=$(now)
    timeout 120 srun -N3 -n3 --mpi=pmix "$CTRAIN" $PF --default-root-dir "$tmp/delay" >"$tmp/delay.out" 2>&1
    rc=$?
    took=$(elapsed "$t0")
    "$SC" link "$cluster" n3 clear >>"$tmp/link.out" 2>&1
    ok "$([ $st -eq 0 ] && [ $rc -eq 3 ]; echo $?)" "n3's link delayed 50 ms: ctrain preflight exits 3 (exit $rc, $took s)" ||
        diag "$tmp/link.out" "$tmp/delay.out"
    is_n3=$(named "$tmp/delay/preflight.json")
    ok "$([ "$is_n3" = "n3:latency" ]; echo $?)" "preflight.json names n3 for latency, and no other node ($is_n3)" ||
        diag "$tmp/delay/preflight.json"
    grep -q '^ctrain: preflight: outlier: node n3 rank 2: latency [0-9.]* ms, median [0-9.]*, threshold [0-9.]*$' "$tmp/delay.out"
    ok $? "the report names node, rank, measured, median and threshold" || diag "$tmp/delay.out"
fi

# 6-8: n2's CPU capped at 5% of one CPU (at 10% a loaded machine, 4 suites at once, measured n2 at 43% of n1: not the 3x the default threshold asks).
pause
"$SC" slow "$cluster" n2 5 >"$tmp/slow.out" 2>&1
st=$?
if [ $st -eq 3 ]; then
    for i in 6 7 8; do echo "ok $i # SKIP $(tail -n 1 "$tmp/slow.out")"; done
    n=8
else
    timeout 120 srun -N3 -n3 --mpi=pmix "$CTRAIN" $PF --default-root-dir "$tmp/cap" >"$tmp/cap.out" 2>&1
    rc=$?
    ok "$([ $st -eq 0 ] && [ $rc -eq 3 ]; echo $?)" "n2 capped at 5% of a CPU: ctrain preflight exits 3 (exit $rc)" ||
        diag "$tmp/slow.out" "$tmp/cap.out"
    is_n2=$(named "$tmp/cap/preflight.json")
    ok "$([ "$is_n2" = "n2:compute" ]; echo $?)" "preflight.json names n2 for compute, and no other node ($is_n2)" ||
        diag "$tmp/cap.out"
    if make_data; then
        timeout 120 srun -N3 -n3 --mpi=pmix "$CTRAIN" fit $FIT_FLAGS --data "$tmp/data" --strategy ddp --devices 1 \
            --num-nodes 3 --max-epochs 1 --preflight --default-root-dir "$tmp/fitcap" >"$tmp/fitcap.out" 2>&1
        rc=$?
        [ $rc -eq 3 ] && grep -q 'fit: preflight named 1 node' "$tmp/fitcap.out" && grep -q 'node n2 rank 1: compute' "$tmp/fitcap.out" &&
            [ ! -e "$tmp/fitcap/last.safetensors" ] && [ -s "$tmp/fitcap/preflight.json" ]
        ok $? "ctrain fit --preflight on the same nodes: exit $rc before the first step (no last.safetensors), naming n2" ||
            diag "$tmp/fitcap.out"
    else
        n=$((n + 1))
        echo "ok $n # SKIP dataset-fashion-mnist not installed"
    fi
    "$SC" slow "$cluster" n2 clear >>"$tmp/slow.out" 2>&1
fi

# 9-11: gloo, without a PMIx server: srun --mpi=none, and by hand (torchrun's variables); and under
# mpirun. They test the paths, not the verdicts: a GEMM rate must fall below the median / 20 to be
# named (check-asan, 4 files on 2 cores, once measured a rank at 17.5 GFLOP/s against a median of
# 58.6: below the default's median / 3).
LOOSE="--preflight-compute-factor 20"
timeout 120 srun -N3 -n3 --mpi=none env MASTER_ADDR=n1 MASTER_PORT=29531 "$CTRAIN" preflight --strategy ddp:backend=gloo \
    --devices 1 --num-nodes 3 $LOOSE --default-root-dir "$tmp/gloo" >"$tmp/gloo.out" 2>&1
rc=$?
ok "$([ $rc -eq 0 ] && [ "$(jget "$tmp/gloo/preflight.json" num_nodes)" = 3 ]; echo $?)" \
    "srun --mpi=none ctrain preflight --strategy ddp:backend=gloo: 3 nodes, exit $rc" || diag "$tmp/gloo.out"
hp=""
for r in 0 1 2; do
    "$SC" exec "$cluster" "n$((r + 1))" env -i PATH=/usr/bin:/bin OMP_NUM_THREADS=1 MASTER_ADDR=n1 MASTER_PORT=29532 \
        WORLD_SIZE=3 RANK=$r LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 GROUP_RANK=$r timeout 120 "$CTRAIN" preflight \
        --strategy ddp --num-nodes 3 $LOOSE --default-root-dir "$tmp/hand" >"$tmp/hand.$r" 2>&1 &
    hp="$hp $!"
done
pids="$pids$hp"
rcs=""
for p in $hp; do wait "$p"; rcs="$rcs$?"; done
ok "$([ "$rcs" = 000 ] && [ "$(jget "$tmp/hand/preflight.json" num_nodes)" = 3 ] &&
    grep -q 'allreduce of 4194304 bytes over 3 ranks' "$tmp/hand.0"; echo $?)" \
    "one process per host by hand (RANK, WORLD_SIZE, MASTER_ADDR: gloo): 3 nodes, exits $rcs" || diag "$tmp/hand.0" "$tmp/hand.1"
if command -v mpirun >/dev/null 2>&1; then
    limited 120 env -u SLURM_CONF mpirun -np 2 --allow-run-as-root --oversubscribe "$CTRAIN" preflight --strategy ddp \
        --devices 2 $LOOSE --default-root-dir "$tmp/mpirun" >"$tmp/mpirun.out" 2>&1
    rc=$?
    ok "$([ $rc -eq 0 ] && [ "$(jget "$tmp/mpirun/preflight.json" world_size)" = 2 ]; echo $?)" \
        "mpirun -np 2 ctrain preflight (one machine): world size 2, exit $rc" || diag "$tmp/mpirun.out" "$tmp/overran.txt"
else
    n=$((n + 1))
    echo "ok $n # SKIP mpirun (openmpi-bin) not installed"
fi

# 12-13: a PyTorch env:// job, its nodes checked first by a ctrain preflight step of the same job.
if /usr/bin/python3 -c 'import torch.distributed' >/dev/null 2>&1; then
    cat >"$tmp/job.sh" <<EOF
#!/bin/sh
srun --mpi=none env MASTER_ADDR=n1 MASTER_PORT=29533 "$CTRAIN" preflight --strategy ddp:backend=gloo --devices 1 \\
    --num-nodes 2 --default-root-dir "$tmp/torchjob" || exit \$?
srun --mpi=none sh -c 'MASTER_ADDR=n1 MASTER_PORT=29534 RANK=\$SLURM_PROCID WORLD_SIZE=\$SLURM_NTASKS LOCAL_RANK=0 USE_LIBUV=0 exec /usr/bin/python3 "$T/fixtures/ddp_plain.py"'
EOF
    timeout 180 salloc -N2 -n2 sh "$tmp/job.sh" >"$tmp/torch.out" 2>&1
    rc=$?
    ok "$([ $rc -eq 0 ] && [ "$(jget "$tmp/torchjob/preflight.json" ok)" = True ]; echo $?)" \
        "a job's ctrain preflight step passes (exit $rc) ..." || diag "$tmp/torch.out"
    ok "$([ "$(grep -c 'same True' "$tmp/torch.out")" = 2 ]; echo $?)" "... and its PyTorch env:// step runs after it" ||
        diag "$tmp/torch.out"
else
    ci_needs "python3-torch not installed"
    for i in 1 2; do n=$((n + 1)); echo "ok $n # SKIP python3-torch is not installed (the PyTorch step after preflight)"; done
fi

# 14-15: bad thresholds: refused before anything is launched.
"$CTRAIN" preflight --preflight-compute-factor 0.5 --default-root-dir "$tmp/bad" >"$tmp/bad.out" 2>&1
rc=$?
ok "$([ $rc -eq 2 ] && grep -q -- '--preflight-compute-factor 0.5: a factor away from the median is at least 1' "$tmp/bad.out" &&
    grep -q 'hint:' "$tmp/bad.out" && [ ! -e "$tmp/bad" ]; echo $?)" "--preflight-compute-factor 0.5: exit $rc, named with a hint, nothing written" ||
    diag "$tmp/bad.out"
"$CTRAIN" preflight --preflight-checks compute,gpus >"$tmp/bad2.out" 2>&1
rc=$?
ok "$([ $rc -eq 2 ] && grep -q "'gpus' is not a check" "$tmp/bad2.out"; echo $?)" "--preflight-checks compute,gpus: exit $rc naming 'gpus'" ||
    diag "$tmp/bad2.out"

# 16: nothing left.
sleep 1
left=$(procs_with "$tmp/" | tr '\n' ' ')
ok "$([ -z "$left" ]; echo $?)" "nothing of any run is left running${left:+: $left}"
