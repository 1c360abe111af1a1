#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# ctrain fit --strategy ddp_sharded under srun --mpi=pmix on the SLURM test cluster: 2 tasks on
# one node equal the same run under ctrain's own launcher (weights and whole optimizer state), 4
# tasks over two emulated nodes (uneven shards) train, and a one-task step is refused with a hint.
# Needs root, SLURM and munge (else SKIP).
. "$(dirname "$0")/lib/launch.sh"
. "$(dirname "$0")/lib/ddp.sh"
N=4

make_data || skip_all $N "dataset-fashion-mnist not installed"
start_srun_cluster $N 2
FIT="$FIT_FLAGS --data $tmp/data --deterministic --strategy ddp_sharded --devices 2"

# 1-2: two tasks on one node; the same run under ctrain's own launcher gives the same checkpoint.
timeout 120 srun -N1 -n2 --mpi=pmix "$CTRAIN" fit $FIT --max-epochs 1 --default-root-dir "$tmp/a" \
    >"$tmp/a.out" 2>&1
rc=$?
[ $rc -eq 0 ] && [ "$(json world_size "$tmp/a/summary.json")" = 2 ] && [ "$(json steps "$tmp/a/summary.json")" = 43 ] &&
    grep -q '"strategy":[[:space:]]*"ddp_sharded"' "$tmp/a/summary.json"
ok $? "srun -N1 -n2 --mpi=pmix ctrain fit --strategy ddp_sharded: exit 0, world_size 2, 43 steps" || diag "$tmp/a.out"
env -u SLURM_CONF timeout 120 "$CTRAIN" fit $FIT --max-epochs 1 --default-root-dir "$tmp/b" >"$tmp/b.out" 2>&1 &&
    "$B/st_compare" "$tmp/a/last.safetensors" "$tmp/b/last.safetensors" >"$tmp/cmp.out" 2>&1
ok $? "the srun run's checkpoint equals the same run under ctrain's subprocess launcher bit for bit" ||
    diag "$tmp/b.out" "$tmp/cmp.out"

# 3: four tasks over two emulated nodes, two per node; each holds a quarter of the state.
timeout 180 srun -N2 -n4 --mpi=pmix "$CTRAIN" fit $FIT --num-nodes 2 --max-epochs 1 --default-root-dir "$tmp/c" \
    >"$tmp/c.out" 2>&1
rc=$?
a=$(json optimizer_state_bytes_per_rank "$tmp/a/summary.json") c=$(json optimizer_state_bytes_per_rank "$tmp/c/summary.json")
[ $rc -eq 0 ] && [ "$(json world_size "$tmp/c/summary.json")" = 4 ] && [ "$(json steps "$tmp/c/summary.json")" = 22 ] &&
    [ -n "$c" ] && [ "$((c * 2))" -le "$a" ] && [ "$((c * 2 + 8))" -ge "$a" ]
ok $? "srun -N2 -n4 --mpi=pmix: exit 0, world_size 4, 22 steps, optimizer state per rank $c (2 ranks: $a)" ||
    diag "$tmp/c.out"

# 4: one task has nothing to partition: refused before training, with a hint.
timeout 60 srun -N1 -n1 --mpi=pmix "$CTRAIN" fit $FIT_FLAGS --data "$tmp/data" --strategy ddp_sharded --max-epochs 1 \
    --default-root-dir "$tmp/d" >"$tmp/d.out" 2>&1
rc=$?
[ $rc -ne 0 ] && grep -q 'ddp_sharded' "$tmp/d.out" && grep -q 'hint:' "$tmp/d.out" && [ ! -f "$tmp/d/last.safetensors" ]
ok $? "srun -n1 --strategy ddp_sharded: refused with a hint, nothing trained (exit $rc)" || diag "$tmp/d.out"
