#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# End to end: srun --ctrain-strategy=ddp --mpi=pmix -n 2 ctrain fit trains on the test
# cluster. The plugin checked the flags in srun and exported CTRAIN_STRATEGY; ctrain fit reads it
# (no --strategy flag here) and the DDP strategy finds its peers through SLURM's PMIx server.
. "$(dirname "$0")/lib/spank.sh"
spank_needs_fit_data
spank_plan 6
spank_cluster 1 ""
spank_fit_data 3000 500
OUTDIR="$CLUSTER_DIR/run"
FIT="fit --data $DATA --progress off --max-epochs 1 --batch-size 64 --default-root-dir $OUTDIR.fit"

run_srun --ctrain-strategy=ddp --mpi=pmix -n 2 "$CTRAIN" $FIT
ok "$RC" "srun --ctrain-strategy=ddp --mpi=pmix -n 2 ctrain fit exits 0"
[ "$RC" -eq 0 ] || printf '%s\n' "$OUT" "$ERR" | tail -n 15 | sed 's/^/#   /'
summary="$OUTDIR.fit/summary.json"
like "$(cat "$summary" 2>/dev/null)" '"world_size":[[:space:]]*2' "rank 0 wrote summary.json with world size 2"
like "$(cat "$summary" 2>/dev/null)" '"strategy":[[:space:]]*"ddp"' "the strategy came from --ctrain-strategy (CTRAIN_STRATEGY)"
run_srun --ctrain-strategy=ddp --ctrain-accelerator=cpu --ctrain-precision=16-mixed --mpi=pmix -n 2 "$CTRAIN" $FIT
ok "$([ "$RC" -ne 0 ] && printf '%s' "$ERR" | grep -q 'ctrain: .*16-mixed' && echo 0 || echo 1)" \
   "a precision ctrain fit cannot run on cpu stops srun before launch"
# DDP checks the plugin's RANK and LOCAL_RANK against MPI's numbering: a task whose RANK (or
# LOCAL_RANK) is not MPI's stops with both values named (here swapped by hand between the plugin
# and the program).
run_srun --ctrain-strategy=ddp --mpi=pmix -n 2 sh -c 'RANK=$((1 - RANK)) exec "$0" "$@"' "$CTRAIN" $FIT
ok "$([ "$RC" -ne 0 ] && printf '%s' "$ERR" | grep -q 'RANK=1 .*MPI numbers this process rank 0' && echo 0 || echo 1)" \
   "a RANK that is not MPI's rank stops ddp, naming both"
[ "$RC" -ne 0 ] || printf '%s\n' "$OUT" "$ERR" | tail -n 5 | sed 's/^/#   /'
run_srun --ctrain-strategy=ddp --mpi=pmix -n 2 sh -c 'LOCAL_RANK=$((1 - LOCAL_RANK)) exec "$0" "$@"' "$CTRAIN" $FIT
ok "$([ "$RC" -ne 0 ] && printf '%s' "$ERR" | grep -q 'LOCAL_RANK=1 .*MPI places this process 0 of the ranks' && echo 0 || echo 1)" \
   "a LOCAL_RANK that is not MPI's local rank stops ddp, naming both"
[ "$RC" -ne 0 ] || printf '%s\n' "$OUT" "$ERR" | tail -n 5 | sed 's/^/#   /'
spank_done
