#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Preemption on a real SLURM test cluster: two sbatch --requeue jobs run the same 2-rank ddp fit
# (srun --mpi=pmix, --deterministic). Job B gets SIGUSR1 mid-training (scancel --signal=USR1, as
# #SBATCH --signal=USR1@90 would send it): every rank stops after the same step, rank 0 saves
# last.safetensors, the job requeues itself through libslurm and, when SLURM starts it again
# (about 3 minutes later: SLURM gives a requeued job a begin time), resumes by --ckpt-path auto and
# completes. Its final weights equal job A's, which ran uninterrupted, bit for bit.
# The cluster is stopped by pid at exit, also on failure.
cd "$(dirname "$0")/.." || exit 1
root=$(pwd)
B="$root/${CTRAIN_BUILD:-build}"

PLAN=6
echo "1..$PLAN"
. "$root/t/lib/preempt.sh"
require_slurm

dir=$(mktemp -d /tmp/ctrain-t60.XXXXXX) || exit 1
trap '"$root/scripts/slurm-cluster" stop "$dir/c" >/dev/null 2>&1; rm -rf "$dir"' EXIT
trap 'exit 1' INT TERM HUP PIPE
start_cluster "$dir"

# 5500 training samples, 2 ranks x batch 64: 43 steps per epoch; 20 epochs take long enough to be
# signalled inside one. One BLAS thread per rank in both jobs: bit-identical by construction.
cat >"$dir/job.sh" <<EOF
#!/bin/sh
#SBATCH --ntasks=2
#SBATCH --requeue
#SBATCH --open-mode=append
export OPENBLAS_NUM_THREADS=1
echo "start: SLURM_RESTART_COUNT=\${SLURM_RESTART_COUNT:-0}"
srun --mpi=pmix "$B/ctrain" fit --strategy ddp --data "$dir/data" --progress plain --log-every-n-steps 10 \\
    --deterministic --batch-size 64 --max-epochs 20 --lr-schedule constant --default-root-dir "\$1"
echo "srun exit \$?"
EOF
chmod +x "$dir/job.sh"

a=$(sbatch --parsable -o "$dir/a.log" "$dir/job.sh" "$dir/a" 2>"$dir/sbatch.err")
b=$(sbatch --parsable -o "$dir/b.log" "$dir/job.sh" "$dir/b" 2>>"$dir/sbatch.err")
[ -n "$a" ] && [ -n "$b" ]
ok $? "sbatch --requeue: jobs $a (uninterrupted) and $b (to be preempted)" "$dir/sbatch.err"

# Signal B once it has trained a few logged steps (metrics.csv rows), i.e. inside training.
for i in $(seq 600); do
    [ "$(cat "$dir/b/metrics.csv" 2>/dev/null | grep -c '^[0-9]')" -ge 3 ] && break
    sleep 0.1
done
scancel --signal=USR1 "$b" 2>"$dir/scancel.err"
ok $? "scancel --signal=USR1 $b while it trains" "$dir/scancel.err" "$dir/b.log"

# The first run stops, saves and requeues itself: SLURM counts a restart.
for i in $(seq 300); do
    grep -q "requeueing SLURM job $b" "$dir/b.log" 2>/dev/null &&
        scontrol show job "$b" 2>/dev/null | grep -q 'Restarts=1' && break
    sleep 0.2
done
stop_line=$(grep 'stopped by SIGUSR1' "$dir/b.log" | head -n 1)
scontrol show job "$b" 2>/dev/null | grep -q 'Restarts=1' && grep -q "requeueing SLURM job $b" "$dir/b.log" &&
    [ -s "$dir/b/last.safetensors" ]
ok $? "every rank stopped, last.safetensors saved, job $b requeued itself (${stop_line#ctrain: })" "$dir/b.log"

# Both jobs complete; B only after SLURM starts it again (begin time about 3 minutes on).
for i in $(seq 2400); do
    [ -s "$dir/a/summary.json" ] && [ -s "$dir/b/summary.json" ] &&
        [ -z "$(squeue -h -j "$a,$b" -o %A 2>/dev/null)" ] && break
    sleep 0.2
done
grep -q 'start: SLURM_RESTART_COUNT=1' "$dir/b.log" && grep -q 'resumed from .*last.safetensors' "$dir/b.log" &&
    [ -s "$dir/b/summary.json" ]
ok $? "the requeued job $b resumed from last.safetensors (--ckpt-path auto) and completed" "$dir/b.log"
[ -s "$dir/a/summary.json" ] && ! grep -q 'stopped by' "$dir/a.log"
ok $? "job $a ran uninterrupted" "$dir/a.log"

"$B/t/st_compare" "$dir/a/last.safetensors" "$dir/b/last.safetensors" >"$dir/cmp.out" 2>&1
ok $? "the preempted and requeued run's final weights equal the uninterrupted run's bit for bit" "$dir/cmp.out"
