#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# ctrain fit --model gpt --strategy ddp under srun --mpi=pmix on the SLURM test cluster: 2 tasks
# on one node train a small GPT on byte tokens, rank 0 alone writes the outputs, and the weights
# equal the same run under ctrain's own launcher bit for bit. Needs root, SLURM and munge (else SKIP).
. "$(dirname "$0")/lib/launch.sh"
. "$(dirname "$0")/lib/ddp.sh"
N=3

start_srun_cluster $N 1
# Some 60 KB of the licence texts every Debian system has.
cat /usr/share/common-licenses/* | head -c 60000 >"$tmp/corpus.txt"
"$CTRAIN" tokenize --input "$tmp/corpus.txt" --output-dir "$tmp/tok" >/dev/null 2>&1
FIT="--model gpt --model-config n_layer=2,n_head=2,n_embd=32,seq_len=32 --data $tmp/tok --batch-size 4
     --max-steps 12 --progress off --deterministic --strategy ddp --devices 2"

timeout 120 srun -N1 -n2 --mpi=pmix "$CTRAIN" fit $FIT --default-root-dir "$tmp/a" >"$tmp/a.out" 2>&1
rc=$?
[ $rc -eq 0 ] && [ "$(json world_size "$tmp/a/summary.json")" = 2 ] && [ "$(json steps "$tmp/a/summary.json")" = 12 ] &&
    grep -q '"val_bpb"' "$tmp/a/summary.json"
ok $? "srun -N1 -n2 --mpi=pmix ctrain fit --model gpt --strategy ddp: exit 0, world_size 2, 12 steps, val_bpb" ||
    diag "$tmp/a.out"
[ "$(grep -c '^step,' "$tmp/a/metrics.csv")" -eq 1 ] && [ -f "$tmp/a/best.safetensors" ] &&
    [ "$(grep -c 'ctrain: fit done' "$tmp/a.out")" -eq 1 ]
ok $? "rank 0 alone wrote metrics.csv, checkpoints and the report" || diag "$tmp/a.out"
env -u SLURM_CONF timeout 120 "$CTRAIN" fit $FIT --default-root-dir "$tmp/b" >"$tmp/b.out" 2>&1 &&
    "$B/st_compare" "$tmp/a/last.safetensors" "$tmp/b/last.safetensors" >"$tmp/cmp.out" 2>&1
ok $? "the srun run equals the same run under ctrain's own launcher bit for bit" || diag "$tmp/b.out" "$tmp/cmp.out"
