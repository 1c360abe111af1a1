#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# ctrain supervise on a 4-node test cluster: batch jobs (sbatch --no-kill --requeue) whose body is
# `ctrain supervise -- ctrain fit` (2-rank ddp over srun --mpi=pmix, --deterministic, a checkpoint
# every 10 steps):
#   - job A, 2 nodes, runs uninterrupted: the reference weights;
#   - job B, 3 nodes (2 + 1 spare): node n2 crashes (every process in its namespace SIGKILLed:
#     slurmd, slurmstepd, its rank) at a random moment mid-fit; the supervisor names n2, starts a
#     new step on n1 and the spare n3, resumes from last.safetensors and completes: A's weights
#     bit for bit, the job not requeued;
#   - job C, 3 nodes (2 + 1 spare): n3's link cut at a random moment; the same;
#   - job D, 2 nodes, no spare: n4 crashes; the supervisor falls back to SLURM's requeue, says so
#     and the job is requeued;
#   - job E: SIGTERM to the supervisor, job F: scancel, while they train: the step ends,
#     last.safetensors saved;
# and after each, nothing of a job runs on any node. Bad input: a message, exit 2, nothing run.
# The cluster is stopped by pid at exit (spank.sh's trap), also on failure.
. "$(dirname "$0")/lib/spank.sh"
spank_needs_fit_data st_compare
spank_plan 13

run_sup() {    # run_sup ARGS...: ctrain supervise outside a job; sets OUT (both streams), RC
    OUT=$(env -u SLURM_JOB_ID -u SLURM_JOB_NODELIST "$CTRAIN" supervise "$@" 2>&1)
    RC=$?
}
run_sup -- "$CTRAIN" fit --max-epochs 1
[ "$RC" -eq 2 ] && printf '%s\n' "$OUT" | grep -q 'not in a SLURM job' && printf '%s\n' "$OUT" | grep -q 'hint: run it as the body of a batch job'
ok $? "outside a job: exit 2, named, with a hint ($(printf '%s' "$OUT" | head -n 1))"
OUT=$(SLURM_JOB_ID=7 SLURM_JOB_NODELIST='n[1-2]' "$CTRAIN" supervise --spare-nodes 2 -- "$CTRAIN" fit 2>&1)
RC=$?
[ "$RC" -eq 2 ] && printf '%s\n' "$OUT" | grep -q -- '--spare-nodes 2 leaves no node for the step (the job has 2)'
ok $? "--spare-nodes as many as the job's nodes: exit 2, nothing launched"

spank_cluster 4 ""
spank_fit_data 5500 1000
D=$CLUSTER_DIR
export OPENBLAS_NUM_THREADS=1
FIT="--strategy ddp --data $DATA --progress plain --log-every-n-steps 5 --deterministic --batch-size 64
     --max-epochs 5 --lr-schedule constant --checkpoint-every-n-steps 10 --collective-timeout 10"
cat >"$D/job.sh" <<EOF
#!/bin/sh
#SBATCH --ntasks-per-node=1 --no-kill --requeue --open-mode=append
echo "start: SLURM_RESTART_COUNT=\${SLURM_RESTART_COUNT:-0}"
"$CTRAIN" supervise --spare-nodes \$1 --restart-backoff 0 -- "$CTRAIN" fit $(echo $FIT) --default-root-dir "\$2"
echo "supervise exit \$?"
EOF
chmod +x "$D/job.sh"

rows() { cat "$1/metrics.csv" 2>/dev/null | grep -c '^[0-9]'; }
check() {    # check STATUS NAME LOG: ok, and on failure the job's log without its progress lines
    ok "$1" "$2"
    [ "$1" -eq 0 ] || grep -v 'ctrain: epoch' "$3" 2>/dev/null | tail -n 40 | sed 's/^/#   /'
}
wait_rows() {    # wait_rows DIR N: until the fit in DIR logged N rows (at most 300 s: job b waits for a's nodes)
    local i
    for i in $(seq 3000); do
        [ "$(rows "$1")" -ge "$2" ] && return 0
        sleep 0.1
    done
    echo "# wait_rows $1 $2: not reached in 300 s ($(rows "$1") rows)"
    return 1
}
wait_done() {    # wait_done LOG [PATTERN]: until the job's supervisor said its exit (at most 120 s)
    local i
    for i in $(seq 1200); do
        grep -q "${2:-^supervise exit}" "$1" 2>/dev/null && return 0
        sleep 0.1
    done
    return 1
}
# crash NODE: every process of the node (slurmd, slurmstepd, the ranks) SIGKILLed, as a node that
# loses power; the node's namespace holder stays, so that the cluster's stop still finds it.
# All of them at once, found by one find: a loop forking a readlink per process took seconds on a
# loaded machine, while a fast fit ran to its end (its rank, the highest pid, was killed last).
crash() {
    local holder ns pids
    holder=$(cat "$D/run/$1.ns")
    ns=$(readlink "/proc/$holder/ns/net")
    pids=$(find /proc -mindepth 3 -maxdepth 3 -path '/proc/[0-9]*/ns/net' -lname "$(echo "$ns" | tr '[]' '??')" \
               2>/dev/null | cut -d/ -f3 | grep -vx "$holder")
    # shellcheck disable=SC2086
    [ -n "$pids" ] && kill -9 $pids 2>/dev/null
}
# left DIR: the fit processes of run DIR still alive anywhere on the machine (every node).
left() {
    local p
    for p in $(pgrep -x ctrain); do
        grep -qa -- "$1" "/proc/$p/cmdline" 2>/dev/null && echo "$p"
    done
}
wait_left() {    # wait_left DIR: until no process of run DIR is left (at most 60 s)
    local i
    for i in $(seq 600); do
        [ -z "$(left "$1")" ] && return 0
        sleep 0.1
    done
    return 1
}
# 5500 samples / (2 x 64): 43 steps an epoch, 215 in all, a metrics row every 5 steps (43 rows).
# A fault at a random row of the first 12: on a quiet machine the fit logs about 11 rows a second,
# and from row 30 on (as before) it sometimes ended before the crash landed (CI: "supervise exit 0"),
# as at row 17 once with two suites running at once (2026-12-07: the crash's find over /proc slow).
random_row() { shuf -i 3-12 -n 1; }

a=$(sbatch --parsable -N2 -w n3,n4 -o "$D/a.log" "$D/job.sh" 0 "$D/a")
b=$(sbatch --parsable -N3 -w n1,n2,n3 -o "$D/b.log" "$D/job.sh" 1 "$D/b")
r=$(random_row)
wait_rows "$D/b" "$r"
crash n2
wait_done "$D/b.log"
wait_done "$D/a.log"
grep -q '^supervise exit 0' "$D/a.log" && ! grep -q 'supervise: restart' "$D/a.log"
check $? "job $a (2 nodes) ran uninterrupted" "$D/a.log"
grep -q 'supervise: node n2 failed' "$D/b.log" && grep -q 'supervise: new step on n\[1,3\]' "$D/b.log" &&
    grep -q 'resumed from .*last.safetensors' "$D/b.log" && grep -q '^supervise exit 0' "$D/b.log" &&
    grep -q 'SLURM_RESTART_COUNT=0' "$D/b.log" && ! grep -q 'SLURM_RESTART_COUNT=1' "$D/b.log"
check $? "job $b: n2 crashed at row $r; n2 named, a new step on n1 + the spare n3 resumed and completed, not requeued" "$D/b.log"
"$B/t/st_compare" "$D/a/last.safetensors" "$D/b/last.safetensors" >"$D/cmp-b.out" 2>&1
ok $? "... its final weights equal the uninterrupted run's bit for bit ($(cat "$D/cmp-b.out"))"
wait_left "$D/b"
ok $? "... and nothing of it runs on any node"

c=$(sbatch --parsable -N3 -w n1,n3,n4 -o "$D/c.log" "$D/job.sh" 1 "$D/c")
r=$(random_row)
wait_rows "$D/c" "$r"
"$ROOT/scripts/slurm-cluster" link "$D" n3 down >/dev/null 2>&1
wait_done "$D/c.log"
grep -q 'supervise: node n3 failed' "$D/c.log" && grep -q 'supervise: new step on n\[1,4\]' "$D/c.log" &&
    grep -q 'resumed from .*last.safetensors' "$D/c.log" && grep -q '^supervise exit 0' "$D/c.log"
check $? "job $c: n3's link cut at row $r; n3 named, a new step on n1 + the spare n4 resumed and completed" "$D/c.log"
"$B/t/st_compare" "$D/a/last.safetensors" "$D/c/last.safetensors" >"$D/cmp-c.out" 2>&1
ok $? "... its final weights equal the uninterrupted run's bit for bit ($(cat "$D/cmp-c.out"))"
# n3's rank ends by its own collective timeout; the link back up, slurmctld ends what is left there.
"$ROOT/scripts/slurm-cluster" link "$D" n3 up >/dev/null 2>&1
wait_left "$D/c"
ok $? "... and nothing of it runs on any node, n3 included"

# No spare: n4 crashes, two nodes are needed and only n1 is left healthy: SLURM's requeue.
d=$(sbatch --parsable -N2 -w n1,n4 -o "$D/d.log" "$D/job.sh" 0 "$D/d")
wait_rows "$D/d" "$(random_row)"
crash n4
wait_done "$D/d.log" "requeueing SLURM job\\|not requeued\\|^supervise exit"
grep -q "falling back to SLURM's requeue of job $d" "$D/d.log" && grep -q "requeueing SLURM job $d" "$D/d.log" &&
    scontrol show job "$d" 2>/dev/null | grep -q 'Restarts=1'
check $? "job $d, no spare, n4 crashed: the supervisor falls back to SLURM's requeue, says so, the job is requeued" "$D/d.log"
scancel "$d" 2>/dev/null
wait_left "$D/d"
ok $? "... and nothing of it runs on any node"

# Jobs E and F on n1 (2 ranks there), at once: E's supervisor alone gets SIGTERM (as from a batch
# shell's own trap or timeout(1)): it ends the step, whose fit saves, and exits 128+15. F is
# scancelled (SIGTERM to the supervisor and the step, SIGKILL KillWait later).
e=$(sbatch --parsable -N1 -w n1 --ntasks-per-node=2 -o "$D/e.log" "$D/job.sh" 0 "$D/e")
f=$(sbatch --parsable -N1 -w n1 --ntasks-per-node=2 -o "$D/f.log" "$D/job.sh" 0 "$D/f")
wait_rows "$D/e" "$(shuf -i 2-10 -n 1)"
kill -TERM $(pgrep -f "ctrain supervise .*$D/e\$") 2>/dev/null
wait_rows "$D/f" "$(shuf -i 2-10 -n 1)"
scancel "$f"
wait_done "$D/e.log"
for i in $(seq 300); do
    [ -z "$(squeue -h -j "$e,$f" -o %A 2>/dev/null)" ] && break
    sleep 0.1
done
# The fit's "stopped by SIGTERM" (relayed by the supervisor) comes before the supervisor's exit.
wait_left "$D/e" && grep -E '^supervise exit|stopped by SIGTERM' "$D/e.log" | head -n 1 | grep -q 'stopped by SIGTERM' &&
    grep -q '^supervise exit 143' "$D/e.log" &&
    [ -s "$D/e/last.safetensors" ]
check $? "job $e, SIGTERM to the supervisor mid-fit: the step ended (the fit saved last.safetensors), exit 143, nothing left" "$D/e.log"
wait_left "$D/f" && [ -s "$D/f/last.safetensors" ] && [ -z "$(pgrep -f "ctrain supervise .*$D/f\$")" ] &&
    [ -z "$(squeue -h -j "$f" -o %A 2>/dev/null)" ]
check $? "job $f scancelled mid-fit: the step and the supervisor ended, last.safetensors saved, nothing left" "$D/f.log"
spank_done
