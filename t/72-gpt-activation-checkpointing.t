#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# --activation-checkpointing (issue 52 item 4): the GPT keeps each block's input in forward and
# recomputes the block in backward. A short fit with and without it gives the same loss bits,
# gradient norms and parameters in every cpu precision of the GPT and on 2 ddp ranks; the measured
# peak activation bytes (summary.json memory.activation_bytes_peak: the resident pages of the
# activation buffers) drop at least 2x on 6 layers; a model that cannot recompute (mlp) is refused
# at plan time with a hint, nothing launched; a checkpoint written with it resumes without it.
# Tiny shapes (n_embd 32, seq_len 32, 4 steps of 4 sequences), one thread a process but for one pair
# on the default team (OpenMP's barriers on two threads wait out other processes' time slices: the file
# took 21 s on 2 cores at load 6.5 with two threads everywhere, 4 s with one).
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B="$ROOT/${CTRAIN_BUILD:-build}"
CTRAIN="$B/ctrain"
T=$(mktemp -d /tmp/ctrain-t72ac-XXXXXX)
trap 'rm -rf "$T"' EXIT
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); echo "not ok $n - $1"; [ -n "$2" ] && sed 's/^/# /' "$2"; }
check() { if eval "$1"; then ok "$2"; else nok "$2" "$3"; fi; }
json() { sed -n "s/.*\"$1\":[[:space:]]*\([0-9.e+-]*\).*/\1/p" "$2" | head -1; }
# What must be equal bit for bit: step, epoch, train_loss (its printed digits) and grad_norm.
losses() { cut -d, -f1-3,8 "$1/metrics.csv"; }
same_run() {
    [ -s "$1/summary.json" ] && [ -s "$2/summary.json" ] && losses "$1" >"$T/l1" && losses "$2" >"$T/l2" &&
        [ "$(wc -l <"$T/l1")" -ge 5 ] && cmp -s "$T/l1" "$T/l2" &&
        [ "$(json val_loss "$1/summary.json")" = "$(json val_loss "$2/summary.json")" ] &&
        [ "$(json test_loss "$1/summary.json")" = "$(json test_loss "$2/summary.json")" ]
}

ONE="env OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1"
echo "1..11"
head -c 60000 /usr/share/common-licenses/GPL-3 >"$T/corpus.txt"
"$CTRAIN" tokenize --input "$T/corpus.txt" --output-dir "$T/tok" >"$T/tok.out" 2>&1
check '[ $? -eq 0 ] && [ -s "$T/tok/train.bin" ]' "ctrain tokenize writes the shards" "$T/tok.out"
G="--model gpt --model-config n_layer=6,n_head=4,n_embd=32,seq_len=32 --data $T/tok --progress off --deterministic"
G="$G --batch-size 4 --max-steps 4 --log-every-n-steps 1 --lr-schedule constant"

# 2-5: the same bits with and without it, in each cpu precision (parameters: last.safetensors).
for p in 32-true bf16-true bf16-mixed 64-true; do
    $ONE "$CTRAIN" fit $G --precision $p --default-root-dir "$T/off-$p" >"$T/off-$p.out" 2>&1
    $ONE "$CTRAIN" fit $G --precision $p --activation-checkpointing --default-root-dir "$T/on-$p" >"$T/on-$p.out" 2>&1
    cat "$T/off-$p.out" "$T/on-$p.out" >"$T/both-$p.out"
    check 'same_run "$T/off-$p" "$T/on-$p" && cmp -s "$T/off-$p/last.safetensors" "$T/on-$p/last.safetensors"' \
        "$p: the same losses, gradient norms, val/test loss and parameters with --activation-checkpointing" \
        "$T/both-$p.out"
done

# 6: the default team (backward's two products of a layer on a thread each, with two threads).
"$CTRAIN" fit $G --default-root-dir "$T/team-off" >"$T/team-off.out" 2>&1
"$CTRAIN" fit $G --activation-checkpointing --default-root-dir "$T/team-on" >"$T/team-on.out" 2>&1
cat "$T/team-off.out" "$T/team-on.out" >"$T/team.out"
check 'same_run "$T/team-off" "$T/team-on" && cmp -s "$T/team-off/last.safetensors" "$T/team-on/last.safetensors"' \
    "32-true on the default OpenMP team: the same bits with it" "$T/team.out"

# 7: 2 ddp ranks, with and without it.
"$CTRAIN" fit $G --strategy ddp --devices 2 --default-root-dir "$T/ddp-off" >"$T/ddp-off.out" 2>&1
"$CTRAIN" fit $G --strategy ddp --devices 2 --activation-checkpointing --default-root-dir "$T/ddp-on" >"$T/ddp-on.out" 2>&1
cat "$T/ddp-off.out" "$T/ddp-on.out" >"$T/ddp.out"
check 'same_run "$T/ddp-off" "$T/ddp-on"' "ddp on 2 ranks: the same losses and gradient norms with it" "$T/ddp.out"

# 8: the measured peak activation bytes drop at least 2x (6 blocks' activations become one block's
# and 6 block inputs), in summary.json and the end-of-fit line.
off=$(json activation_bytes_peak "$T/off-32-true/summary.json")
on=$(json activation_bytes_peak "$T/on-32-true/summary.json")
check 'awk -v a="$off" -v b="$on" "BEGIN { exit !(b > 0 && a >= 2 * b) }" && grep -q "\"activation_checkpointing\":[[:space:]]*true" "$T/on-32-true/summary.json" && grep -q "^ctrain: memory peak (rank 0, resident):.* activation_bytes_peak [0-9.]* MiB" "$T/on-32-true.out"' \
    "peak activation bytes measured: $off without, $on with (>= 2x less), in summary.json and the fit's last line" \
    "$T/both-32-true.out"

# 9: a model that cannot recompute is refused by the connector: fit (2 ranks, none launched, no run
# directory written) and plan exit 2, naming the flag and the model, with a hint.
"$CTRAIN" fit --model mlp --activation-checkpointing --strategy ddp --devices 2 --max-steps 1 --progress off \
    --default-root-dir "$T/mlp" >"$T/mlp.out" 2>&1
rc=$?
"$CTRAIN" plan --model mlp --activation-checkpointing >>"$T/mlp.out" 2>&1
prc=$?
check '[ $rc -eq 2 ] && [ $prc -eq 2 ] && [ "$(grep -c "^ctrain: .*--activation-checkpointing.*model mlp" "$T/mlp.out")" = 2 ] && grep -q "hint:" "$T/mlp.out" && ! grep -q "rank 1" "$T/mlp.out" && [ ! -e "$T/mlp/metrics.csv" ]' \
    "mlp --activation-checkpointing: fit and plan exit 2 with a hint, nothing launched" "$T/mlp.out"

# 10: a checkpoint written with it resumes without it (no format change): steps 3-4 are those of
# the run without it from the start (a constant learning rate: a cosine one follows --max-steps).
$ONE "$CTRAIN" fit $G --max-steps 2 --activation-checkpointing --default-root-dir "$T/res" >"$T/res1.out" 2>&1
$ONE "$CTRAIN" fit $G --ckpt-path last --default-root-dir "$T/res" >"$T/res2.out" 2>&1
rc=$?
cat "$T/res1.out" "$T/res2.out" >"$T/res.out"
check '[ $rc -eq 0 ] && grep "^[34],1,[0-9]" "$T/res/metrics.csv" | cut -d, -f1-3,8 >"$T/r1" && grep "^[34],1,[0-9]" "$T/off-32-true/metrics.csv" | cut -d, -f1-3,8 >"$T/r2" && [ "$(wc -l <"$T/r1")" = 2 ] && cmp -s "$T/r1" "$T/r2"' \
    "a checkpoint saved with --activation-checkpointing resumes without it, continuing the same losses" "$T/res.out"

# 11: ctrain plan --list says which models recompute, where.
"$CTRAIN" plan --list >"$T/list.out" 2>&1
check 'grep -q "^  gpt .*{activation checkpointing cpu}" "$T/list.out" && ! grep -q "^  mlp .*activation checkpointing" "$T/list.out"' \
    "plan --list: gpt recomputes its activations on cpu, mlp nowhere" "$T/list.out"
