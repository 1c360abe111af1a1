#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Faults and stops under srun --mpi=pmix on the test cluster (2-rank ddp fit):
#   - a SIGSTOPped rank: the other fails within --collective-timeout naming it, and the step ends
#     (MPI_Abort: SLURM's PMIx plugin cancels the step, the stopped task included);
#   - a SIGKILLed rank: the other never hangs, srun returns;
#   - SIGUSR1 to a job submitted with --no-requeue: every rank stops, last.safetensors is saved,
#     the requeue is refused by SLURM and the message says so (the job then ends, exit 1);
#   - SIGTERM (what scancel and the time limit send): last.safetensors saved inside epoch 1.
# The cluster is stopped by pid at exit, also on failure.
cd "$(dirname "$0")/.." || exit 1
root=$(pwd)
B="$root/${CTRAIN_BUILD:-build}"

PLAN=6
echo "1..$PLAN"
. "$root/t/lib/preempt.sh"
require_slurm

dir=$(mktemp -d /tmp/ctrain-t62.XXXXXX) || exit 1
P=
trap '[ -n "$P" ] && kill -9 $P 2>/dev/null; "$root/scripts/slurm-cluster" stop "$dir/c" >/dev/null 2>&1; rm -rf "$dir"' EXIT
trap 'exit 1' INT TERM HUP PIPE
start_cluster "$dir"
export OPENBLAS_NUM_THREADS=1

# The training task of rank RANK whose command line names DIR (tasks live in slurmd's namespace).
task_pid() {
    for p in $(pgrep -x ctrain); do
        grep -q "$2" "/proc/$p/cmdline" 2>/dev/null || continue
        { tr '\0' '\n' <"/proc/$p/environ"; } 2>/dev/null | grep -qx "SLURM_PROCID=$1" && echo "$p" && return 0
    done
    return 1
}
wait_training() {    # until metrics.csv has ROWS training rows
    for i in $(seq 600); do
        [ "$(cat "$1/metrics.csv" 2>/dev/null | grep -c '^[0-9]')" -ge "$2" ] && return 0
        sleep 0.1
    done
    return 1
}
FIT="--data $dir/data --progress plain --batch-size 64 --max-epochs 200 --log-every-n-steps 10 --strategy ddp"

# srun_fault NAME SIGNAL [FLAGS...]: srun a 2-rank fit, send SIGNAL to rank 1 while it trains, wait
# (at most 90 s) for srun to return; sets rc, secs and left (its tasks still alive).
srun_fault() {
    name=$1 sig=$2
    shift 2
    timeout 300 srun -n2 --mpi=pmix "$B/ctrain" fit $FIT "$@" --default-root-dir "$dir/$name" >"$dir/$name.out" 2>&1 &
    P=$!
    wait_training "$dir/$name" 2
    victim=$(task_pid 1 "$dir/$name")
    t0=$(date +%s)
    [ -n "$victim" ] && kill -"$sig" "$victim"
    for i in $(seq 900); do
        kill -0 $P 2>/dev/null || break
        sleep 0.1
    done
    wait $P
    rc=$?
    P=
    secs=$(($(date +%s) - t0))
    left=$(task_pid 0 "$dir/$name"; task_pid 1 "$dir/$name")
}

srun_fault stop STOP --collective-timeout 3
grep -q 'did not complete within 3 s: rank 1 of 2 did not arrive' "$dir/stop.out" && [ "$rc" -ne 0 ] &&
    [ -z "$left" ] && [ "$secs" -le 60 ]
ok $? "srun, rank 1 SIGSTOPped: rank 0 names it, the step ends (srun exit $rc, ${secs}s)" "$dir/stop.out"

srun_fault kill KILL
[ "$rc" -ne 0 ] && [ -z "$left" ] && [ "$secs" -le 60 ]
ok $? "srun, rank 1 SIGKILLed mid-training: rank 0 does not hang (srun exit $rc, ${secs}s)" "$dir/kill.out"

cat >"$dir/job.sh" <<EOF
#!/bin/sh
#SBATCH --ntasks=2
srun --mpi=pmix "$B/ctrain" fit $FIT --default-root-dir "\$1"
echo "srun exit \$?"
EOF
j=$(sbatch --parsable --no-requeue -o "$dir/noreq.log" "$dir/job.sh" "$dir/noreq" 2>"$dir/sbatch.err")
wait_training "$dir/noreq" 2
scancel --signal=USR1 "$j" 2>>"$dir/sbatch.err"
for i in $(seq 600); do
    grep -q '^srun exit' "$dir/noreq.log" 2>/dev/null && break
    sleep 0.1
done
grep -q "requeueing SLURM job $j" "$dir/noreq.log" && grep -q 'the job was not requeued: slurm_requeue' "$dir/noreq.log"
ok $? "sbatch --no-requeue, SIGUSR1: checkpoint saved, requeue refused by SLURM and said so" "$dir/noreq.log" "$dir/sbatch.err"
grep -q '^srun exit 1' "$dir/noreq.log" && "$B/ctrain" test --data "$dir/data" --ckpt-path last \
    --default-root-dir "$dir/noreq" >"$dir/noreq-test.out" 2>&1
ok $? "... the job ends (srun exit 1) and its last.safetensors loads" "$dir/noreq.log" "$dir/noreq-test.out"

# SIGTERM, as scancel and the time limit send it (SIGKILL follows KillWait=5 s later): 172 steps per
# epoch at batch 16, so the signal lands inside epoch 1, before any epoch-end checkpoint.
sed -i 's/--batch-size 64/--batch-size 16/' "$dir/job.sh"
j=$(sbatch --parsable -o "$dir/term.log" "$dir/job.sh" "$dir/term" 2>"$dir/sbatch.err")
wait_training "$dir/term" 1
scancel "$j" 2>>"$dir/sbatch.err"
for i in $(seq 300); do
    [ -z "$(squeue -h -j "$j" -o %A 2>/dev/null)" ] && break
    sleep 0.1
done
[ -z "$(squeue -h -j "$j" -o %A 2>/dev/null)" ] && [ -s "$dir/term/last.safetensors" ] &&
    ! grep -q 'val_loss' "$dir/term.log"
ok $? "scancel (SIGTERM) inside epoch 1: last.safetensors saved before SLURM's SIGKILL" "$dir/term.log" "$dir/sbatch.err"
"$B/ctrain" test --data "$dir/data" --ckpt-path last --default-root-dir "$dir/term" >"$dir/term-test.out" 2>&1
ok $? "... and it loads" "$dir/term-test.out"
