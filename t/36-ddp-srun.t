#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# ctrain fit --strategy ddp under srun --mpi=pmix on the SLURM test cluster: 2 tasks on one
# node, 4 tasks over two emulated nodes (--num-nodes 2), the same result as ctrain's own launcher,
# and SIGKILL of one rank during training: the step ends within 15 s, srun exits non-zero naming
# the task, nothing is left running. Needs root, SLURM and munge (else SKIP).
. "$(dirname "$0")/lib/launch.sh"
. "$(dirname "$0")/lib/ddp.sh"
N=10

make_data || skip_all $N "dataset-fashion-mnist not installed"
start_srun_cluster $N 2
FIT="$FIT_FLAGS --data $tmp/data --deterministic --strategy ddp --devices 2"

# 1-3: two tasks on one node; the same run under ctrain's own launcher gives the same weights.
timeout 120 srun -N1 -n2 --mpi=pmix "$CTRAIN" fit $FIT --max-epochs 1 --default-root-dir "$tmp/a" \
    >"$tmp/a.out" 2>&1
rc=$?
[ $rc -eq 0 ] && [ "$(json world_size "$tmp/a/summary.json")" = 2 ] && [ "$(json steps "$tmp/a/summary.json")" = 43 ]
ok $? "srun -N1 -n2 --mpi=pmix ctrain fit --strategy ddp --devices 2: exit 0, summary world_size 2, 43 steps" ||
    diag "$tmp/a.out"
[ "$(grep -c '^step,' "$tmp/a/metrics.csv")" -eq 1 ] && [ -f "$tmp/a/best.safetensors" ] &&
    [ "$(grep -c 'ctrain: fit done' "$tmp/a.out")" -eq 1 ]
ok $? "rank 0 alone wrote metrics.csv, checkpoints and the report" || diag "$tmp/a.out"
env -u SLURM_CONF timeout 120 "$CTRAIN" fit $FIT --max-epochs 1 --default-root-dir "$tmp/b" >"$tmp/b.out" 2>&1 &&
    "$B/st_compare" "$tmp/a/last.safetensors" "$tmp/b/last.safetensors" >"$tmp/cmp.out" 2>&1
ok $? "the srun run equals the same run under ctrain's subprocess launcher bit for bit" || diag "$tmp/b.out" "$tmp/cmp.out"

# 4: four tasks over two emulated nodes, two per node.
timeout 120 srun -N2 -n4 --mpi=pmix "$CTRAIN" fit $FIT --num-nodes 2 --max-epochs 1 --default-root-dir "$tmp/c" \
    >"$tmp/c.out" 2>&1
rc=$?
[ $rc -eq 0 ] && [ "$(json world_size "$tmp/c/summary.json")" = 4 ] && [ "$(json steps "$tmp/c/summary.json")" = 22 ]
ok $? "srun -N2 -n4 --mpi=pmix ctrain fit --devices 2 --num-nodes 2: exit 0, world_size 4, 22 steps" ||
    diag "$tmp/c.out"

# 5: a layout that contradicts the step is refused before any rank trains.
timeout 60 srun -N1 -n2 --mpi=pmix "$CTRAIN" fit $FIT --devices 3 --max-epochs 1 --default-root-dir "$tmp/d" \
    >"$tmp/d.out" 2>&1
rc=$?
[ $rc -ne 0 ] && grep -q '^ctrain: error: .*3' "$tmp/d.out" && [ ! -f "$tmp/d/last.safetensors" ]
ok $? "srun -n2 with --devices 3: refused with a message, nothing trained (exit $rc)" || diag "$tmp/d.out"

# 6-10: SIGKILL of rank 1 while training (single node: Open MPI's shared memory between the ranks).
env -u OMPI_MCA_btl -u OMPI_MCA_btl_tcp_if_include srun -N1 -n2 --mpi=pmix "$CTRAIN" fit $FIT --max-epochs 1000 \
    --log-every-n-steps 5 --default-root-dir "$tmp/f" >"$tmp/f.out" 2>"$tmp/f.err" &
P=$!
pids="$pids $P"
if wait_training "$tmp/f" 60; then
    r0=$(rank_pid "$tmp/f" SLURM_PROCID 0)
    r1=$(rank_pid "$tmp/f" SLURM_PROCID 1)
    pids="$pids $r0 $r1"
    kill_and_time "$r1" $P $r0 $r1 $P
else
    rc=0 took=99 gone=1 r0=- r1=-
fi
[ -n "$r0" ] && [ -n "$r1" ] && [ "$r1" != - ]
ok $? "found rank 1 (pid $r1) training, rank 0 pid $r0" || diag "$tmp/f.out" "$tmp/f.err"
[ $rc -ne 0 ]
ok $? "srun exits non-zero when rank 1 is killed (exit $rc)"
# SLURM's PMIx plugin reports the lost rank and cancels the step; rank 0, blocked in an allreduce
# with the dead rank, gets SIGTERM and then SIGKILL after the cluster's KillWait (5 s): about 8-11 s
# (11.0 s with SLURM 24.11 between network namespaces), never the collective timeout.
lt "$took" 15
ok $? "srun and both ranks gone within 15 s (${took} s)" || diag "$tmp/f.err"
grep -q 'task 1: Killed' "$tmp/f.err"
ok $? "the message names the rank: srun's 'task 1: Killed'" || diag "$tmp/f.err"
[ $gone -eq 0 ] && [ -z "$(procs_with "$tmp/f")" ]
ok $? "no process left behind (srun $P, ranks $r0 $r1)"
