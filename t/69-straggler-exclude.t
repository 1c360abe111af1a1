#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# --on-straggler exclude over four hosts of scripts/slurm-cluster (one rank a node, three nodes a
# step), the second node of the step CPU-capped at 5% (scripts/slurm-cluster slow) at a random
# moment of the fit:
#   - a batch job (sbatch --requeue): the fit names the node, saves last.safetensors and requeues
#     the job with the node in its ExcNodeList and why in its Comment; the job starts again on the
#     three other nodes, resumes from the checkpoint and completes;
#   - a batch job whose body is ctrain supervise --spare-nodes 1: nothing is requeued; the
#     supervisor names the node from the fit's straggler line, starts its next step on the other
#     three nodes (the spare among them), which resumes and completes;
#   - srun alone (no batch job): exit 76, the checkpoint written, and it says why nothing was
#     requeued;
# and nothing is left running. The capped node is found from the job's own node list: SLURM
# chooses the nodes.
. "$(dirname "$0")/lib/launch.sh"
. "$(dirname "$0")/lib/ddp.sh"
N=10

make_data || skip_all $N "dataset-fashion-mnist not installed"
start_srun_cluster $N 4
SC="$root_dir/scripts/slurm-cluster"
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
# The steps of t/69-straggler.t: heavy enough that a capped CPU shows in the step.
FIT="fit --progress plain --hidden 1024 --batch-size 128 --data $tmp/data --strategy ddp --devices 1 --num-nodes 3"
# --straggler-factor 4, not the default 2: the capped node runs about 20x slower, and the suite's
# neighbours (4 test files at once on a 2-core machine) made an uncapped node 2.3x the median for
# three windows once (Debian 13 suite, 2026-11-28: the requeued job then excluded n1 too and could
# not start). The default factor's own false-positive rate is t/69-straggler.t's and the bench's.
FIT="$FIT --log-every-n-steps 5 --collective-timeout 120 --checkpoint-every-n-steps 20 --on-straggler exclude"
FIT="$FIT --straggler-factor 4"
STEPS=260
FIT="$FIT --max-epochs 1000"

rows() { grep -c '^[0-9]' "$1/metrics.csv" 2>/dev/null; }
# cap_second JOB DIR LOG: once the fit in DIR logged 4 rows, after a random part of a second, cap
# the second node of JOB's allocation; prints that node ("" when the cap could not be set).
cap_second() {
    for i in $(seq 1200); do
        [ "$(rows "$2")" -ge 4 ] 2>/dev/null && break
        sleep 0.1
    done
    node=$(scontrol show hostnames "$(squeue -h -j "$1" -o %N)" | sed -n 2p)
    sleep "$(awk 'BEGIN { srand(); printf "%.2f", rand() }')"
    "$SC" slow "$cluster" "$node" 5 >>"$3" 2>&1 && echo "$node"
}
uncap() { "$SC" slow "$cluster" "$1" clear >/dev/null 2>&1; }
# wait_job JOB: until it leaves the queue, moving a requeued job's begin time to now (at most 300 s)
wait_job() {
    for i in $(seq 1200); do
        case "$(squeue -h -j "$1" -o '%T %r' 2>/dev/null)" in
            "") return 0 ;;
            "PENDING BeginTime"*) scontrol update JobId="$1" StartTime=now 2>/dev/null ;;
        esac
        sleep 0.25
    done
    return 1
}
jobfield() { scontrol show job "$1" 2>/dev/null | tr ' ' '\n' | sed -n "s/^$2=//p" | head -n 1; }

# 1-4: a batch job that may be requeued.
cat >"$tmp/job.sh" <<EOF
#!/bin/sh
#SBATCH --ntasks-per-node=1 --requeue --open-mode=append
echo "start \${SLURM_RESTART_COUNT:-0} on \$SLURM_JOB_NODELIST"
srun --mpi=pmix "$CTRAIN" $FIT --max-steps $STEPS --default-root-dir "$tmp/a"
echo "fit exit \$?"
EOF
j=$(sbatch --parsable -N3 -o "$tmp/a.out" "$tmp/job.sh" 2>"$tmp/sbatch.err")
capped=$(cap_second "$j" "$tmp/a" "$tmp/slow.out")
# The requeue ends the first run's processes on the capped node too; clear the cap once it is in.
for i in $(seq 1200); do
    [ "$(jobfield "$j" Restarts)" = 1 ] 2>/dev/null && break
    [ -z "$(squeue -h -j "$j" 2>/dev/null)" ] && break
    sleep 0.1
done
[ -n "$capped" ] && uncap "$capped"
wait_job "$j"
scontrol show job "$j" >"$tmp/a.job" 2>&1
if [ -z "$capped" ]; then
    for i in 1 2 3 4; do echo "ok $i # SKIP the CPU cap: $(tail -n 1 "$tmp/slow.out")"; done
    n=4
else
    # The line that says the job is requeued may be lost: SLURM ends srun, which carries it, at once.
    ok "$(grep -q "^ctrain: warning: straggler: node $capped (rank 1) .*; stopping (--on-straggler exclude)" "$tmp/a.out" &&
        grep -q "JOB $j ON .* DUE TO JOB REQUEUE" "$tmp/a.out"; echo $?)" \
        "sbatch --requeue: $capped capped, the fit names it and job $j is requeued" ||
        diag "$tmp/a.out" "$tmp/slow.out"
    ok "$([ "$(jobfield "$j" ExcNodeList)" = "$capped" ] &&
        grep -q "Comment=ctrain straggler excluded $capped: busy .* ms a step, .*x the median node's" "$tmp/a.job"; echo $?)" \
        "the job's ExcNodeList is $capped and its Comment says why" || diag "$tmp/a.job"
    second=$(sed -n 's/^start 1 on //p' "$tmp/a.out")
    ok "$([ -n "$second" ] && ! scontrol show hostnames "$second" | grep -qx "$capped" &&
        [ "$(scontrol show hostnames "$second" | wc -l)" = 3 ]; echo $?)" \
        "the requeued job ran on three other nodes (${second:-not started})" || diag "$tmp/a.out"
    ok "$(grep -q '^fit exit 0$' "$tmp/a.out" && [ "$(json steps "$tmp/a/summary.json")" = $STEPS ] &&
        grep -q 'resumed from' "$tmp/a.out"; echo $?)" \
        "and resumed from the checkpoint to its $STEPS steps (exit 0, summary.json steps $(json steps "$tmp/a/summary.json"))" ||
        diag "$tmp/a.out"
fi

# 5-7: the body of the job is ctrain supervise with a spare: no requeue, a new step without the node.
cat >"$tmp/sup.sh" <<EOF
#!/bin/sh
#SBATCH --ntasks-per-node=1 --no-kill --requeue --open-mode=append
echo "start \${SLURM_RESTART_COUNT:-0} on \$SLURM_JOB_NODELIST"
"$CTRAIN" supervise --spare-nodes 1 --restart-backoff 0 -- "$CTRAIN" $FIT --max-steps $STEPS --default-root-dir "$tmp/b"
echo "supervise exit \$?"
EOF
j=$(sbatch --parsable -N4 -o "$tmp/b.out" "$tmp/sup.sh" 2>"$tmp/sbatch.err")
# The step runs on the first three of the job's nodes: its second is the job's second.
capped=$(cap_second "$j" "$tmp/b" "$tmp/slow.out")
for i in $(seq 1200); do
    grep -q 'ctrain: supervise: new step on' "$tmp/b.out" 2>/dev/null && break
    [ -z "$(squeue -h -j "$j" 2>/dev/null)" ] && break
    sleep 0.1
done
[ -n "$capped" ] && uncap "$capped"
wait_job "$j"
scontrol show job "$j" >"$tmp/b.job" 2>&1
if [ -z "$capped" ]; then
    for i in 5 6 7; do echo "ok $i # SKIP the CPU cap: $(tail -n 1 "$tmp/slow.out")"; done
    n=7
else
    ok "$(grep -q "ctrain: supervise: node $capped failed: the fit's straggler detection named it slow" "$tmp/b.out" &&
        grep -q "ctrain supervise starts the next step without $capped" "$tmp/b.out"; echo $?)" \
        "under ctrain supervise: $capped named by the fit, and the supervisor takes it as failed" || diag "$tmp/b.out"
    new=$(sed -n 's/^ctrain: supervise: new step on \([^ ]*\) .*/\1/p' "$tmp/b.out" | head -n 1)
    ok "$([ -n "$new" ] && ! scontrol show hostnames "$new" | grep -qx "$capped"; echo $?)" \
        "its new step runs without $capped (${new:-none}), the spare in" || diag "$tmp/b.out"
    ok "$(grep -q '^supervise exit 0$' "$tmp/b.out" && [ "$(jobfield "$j" Restarts)" = 0 ] &&
        [ "$(jobfield "$j" ExcNodeList)" = "(null)" ] && [ "$(json steps "$tmp/b/summary.json")" = $STEPS ]; echo $?)" \
        "the fit completes its $STEPS steps; the job was not requeued (Restarts $(jobfield "$j" Restarts)), nothing excluded" ||
        diag "$tmp/b.out" "$tmp/b.job"
fi

# 8-9: srun alone: nothing to requeue.
timeout 300 srun -N3 -n3 --mpi=pmix "$CTRAIN" $FIT --default-root-dir "$tmp/c" >"$tmp/c.out" 2>&1 &
P=$!
pids="$pids $P"
for i in $(seq 1200); do
    [ "$(rows "$tmp/c")" -ge 4 ] 2>/dev/null && break
    sleep 0.1
done
capped=$(scontrol show hostnames "$(squeue -h -o %N -t R | head -n 1)" | sed -n 2p)
sleep "$(awk 'BEGIN { srand(); printf "%.2f", rand() }')"
"$SC" slow "$cluster" "$capped" 5 >>"$tmp/slow.out" 2>&1
st=$?
wait "$P"
rc=$?
uncap "$capped"
if [ $st -ne 0 ]; then
    for i in 8 9; do echo "ok $i # SKIP the CPU cap: $(tail -n 1 "$tmp/slow.out")"; done
    n=9
else
    ok "$([ $rc -eq 76 ] && [ -s "$tmp/c/last.safetensors" ] &&
        grep -q "node $capped is a straggler; checkpoint .*/last.safetensors written" "$tmp/c.out"; echo $?)" \
        "srun alone: $capped named, last.safetensors written, exit $rc (76)" || diag "$tmp/c.out"
    ok "$(grep -q "hint: not a batch job\|job [0-9]* not requeued: it is not a batch job" "$tmp/c.out"; echo $?)" \
        "and it says the job was not requeued: not a batch job" || diag "$tmp/c.out"
fi

sleep 1
left=$(procs_with "$tmp/" | tr '\n' ' ')
ok "$([ -z "$left" ]; echo $?)" "nothing of any run is left running${left:+: $left}"
