#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# ctrain fit / validate / test end to end on a real subset of Fashion-MNIST: a short run learns,
# writes its outputs; resuming after an interruption (mid-epoch) equals an uninterrupted run bit for
# bit; validate/test load checkpoints; damaged, foreign and missing inputs give clear errors.
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B="$ROOT/${CTRAIN_BUILD:-build}"
CTRAIN="$B/ctrain"
T=$(mktemp -d /tmp/ctrain-t04-XXXXXX)
trap 'rm -rf "$T"' EXIT
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); echo "not ok $n - $1"; [ -n "$2" ] && sed 's/^/# /' "$2"; }
check() { if eval "$1"; then ok "$2"; else nok "$2" "$3"; fi; }

echo "1..27"
. "$(dirname "$0")/lib/ci.sh"
if [ ! -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
    ci_needs "dataset-fashion-mnist not installed"
    for i in $(seq 1 27); do echo "ok $i # SKIP dataset-fashion-mnist not installed (scripts/install-deps)"; done
    exit 0
fi
# 6000 training images (5500 train / 500 val) and 1000 test images: real data, seconds per run.
mkdir -p "$T/data"
"$B/t/idx_subset" /usr/share/datasets/fashion-mnist "$T/data" 6000 1000 || exit 1
COMMON="--data $T/data --progress off --deterministic"

# 1-5: a short run learns and writes its outputs.
"$CTRAIN" fit $COMMON --max-epochs 1 --log-every-n-steps 10 --default-root-dir "$T/a" >"$T/a.out" 2>&1
check '[ $? -eq 0 ]' "fit of one epoch exits 0" "$T/a.out"
check 'head -1 "$T/a/metrics.csv" | grep -qx "step,epoch,train_loss,val_loss,val_acc,lr,samples_per_sec,grad_norm"' \
    "metrics.csv has the documented header" "$T/a/metrics.csv"
first=$(awk -F, 'NR==2 {print $3}' "$T/a/metrics.csv")
last=$(awk -F, '$3 != "" {l=$3} END {print l}' "$T/a/metrics.csv")
check "awk 'BEGIN {exit !($last < 0.75 * $first)}'" "training loss falls ($first -> $last)" "$T/a/metrics.csv"
acc=$(sed -n 's/.*"test_acc":[[:space:]]*\([0-9.]*\).*/\1/p' "$T/a/summary.json")
check "awk 'BEGIN {exit !($acc > 0.65)}'" "test accuracy $acc far above chance (0.1) after 43 steps" "$T/a/summary.json"
check 'for k in epochs steps world_size train_samples_per_sec val_acc test_acc; do grep -q "\"$k\":" "$T/a/summary.json" || exit 1; done' \
    "summary.json has epochs, steps, world_size, train_samples_per_sec, val_acc, test_acc" "$T/a/summary.json"

# 6-8: checkpoints exist and evaluate to what fit reported.
check '[ -s "$T/a/last.safetensors" ] && [ -s "$T/a/best.safetensors" ]' "last and best checkpoints written"
"$CTRAIN" test --data "$T/data" --default-root-dir "$T/a" >"$T/test.out" 2>&1
check "grep -q \"test_acc $(printf %.4f "$acc")\" \"$T/test.out\"" "ctrain test on best reproduces fit's test_acc" "$T/test.out"
"$CTRAIN" validate --data "$T/data" --default-root-dir "$T/a" --ckpt-path last >"$T/val.out" 2>&1
check 'grep -q "val_acc 0\.[0-9]* .*500 samples" "$T/val.out"' "ctrain validate --ckpt-path last evaluates 500 samples" "$T/val.out"

# 9-11: stopped at step 60 (inside epoch 2 of 43 steps), resumed to 3 epochs == uninterrupted
# (constant lr: with the cosine schedule the curve spans each invocation's --max-steps).
"$CTRAIN" fit $COMMON --lr-schedule constant --max-epochs 3 --default-root-dir "$T/full" >"$T/full.out" 2>&1
"$CTRAIN" fit $COMMON --lr-schedule constant --max-epochs 3 --max-steps 60 --default-root-dir "$T/res" >"$T/res1.out" 2>&1
check 'grep -q "\"steps\":[[:space:]]*60" "$T/res/summary.json"' "the interrupted run stopped at step 60" "$T/res1.out"
"$CTRAIN" fit $COMMON --lr-schedule constant --max-epochs 3 --ckpt-path last --default-root-dir "$T/res" >"$T/res2.out" 2>&1
check '[ $? -eq 0 ] && grep -q "\"steps\":[[:space:]]*129" "$T/res/summary.json"' "resumed from last to the end (129 steps)" "$T/res2.out"
"$B/t/st_compare" "$T/full/last.safetensors" "$T/res/last.safetensors" >"$T/cmp.out" 2>&1
check '[ $? -eq 0 ]' "resumed weights and optimizer state equal the uninterrupted run's bit for bit" "$T/cmp.out"

# 12: killed (kill -9) at a random early step while checkpointing every 3 steps, resumed with the
# same flags (the cosine schedule): equal to the uninterrupted run bit for bit.
"$CTRAIN" fit $COMMON --max-epochs 3 --default-root-dir "$T/cfull" >"$T/cfull.out" 2>&1
"$CTRAIN" fit $COMMON --max-epochs 3 --checkpoint-every-n-steps 3 --default-root-dir "$T/kill" >"$T/kill.out" 2>&1 &
pid=$!
while [ ! -f "$T/kill/last.safetensors" ] && kill -0 $pid 2>/dev/null; do sleep 0.005; done
kill -9 $pid 2>/dev/null
wait $pid 2>/dev/null
at=$(grep -a -o '"global_step":"[0-9]*"' "$T/kill/last.safetensors" | tr -dc 0-9)
"$CTRAIN" fit $COMMON --max-epochs 3 --checkpoint-every-n-steps 3 --ckpt-path last --default-root-dir "$T/kill" >"$T/kill2.out" 2>&1
"$B/t/st_compare" "$T/cfull/last.safetensors" "$T/kill/last.safetensors" >"$T/cmp2.out" 2>&1
check '[ $? -eq 0 ] && [ "$at" -lt 129 ]' "killed at step $at, resumed: bit for bit equal to the uninterrupted run" "$T/cmp2.out"

# 13-16: damaged and foreign checkpoints.
"$CTRAIN" test --data "$T/data" --hidden 64 --ckpt-path "$T/a/last.safetensors" >"$T/e1.out" 2>&1
check '[ $? -eq 1 ] && grep -q "checkpoint is for model mlp 784-512-256-10, this run builds mlp 784-64-10" "$T/e1.out" && grep -q "hint: use the --hidden" "$T/e1.out"' \
    "a checkpoint of another model shape: clear error with a hint" "$T/e1.out"
cp "$T/a/last.safetensors" "$T/cut.safetensors"
truncate -s 3000000 "$T/cut.safetensors"
"$CTRAIN" test --data "$T/data" --ckpt-path "$T/cut.safetensors" >"$T/e2.out" 2>&1
check '[ $? -eq 1 ] && grep -q "cut.safetensors: tensor .*truncated" "$T/e2.out"' \
    "a truncated checkpoint: error naming the file and a tensor" "$T/e2.out"
cp "$T/a/last.safetensors" "$T/bad.safetensors"
printf 'XXXXXXXX' | dd of="$T/bad.safetensors" bs=1 seek=8 conv=notrunc 2>/dev/null
"$CTRAIN" test --data "$T/data" --ckpt-path "$T/bad.safetensors" >"$T/e3.out" 2>&1
check '[ $? -eq 1 ] && grep -q "bad.safetensors: the header is not a JSON object" "$T/e3.out"' \
    "a corrupt header: clear error" "$T/e3.out"
"$CTRAIN" fit $COMMON --optimizer sgd --ckpt-path "$T/a/last.safetensors" --default-root-dir "$T/x" >"$T/e4.out" 2>&1
check '[ $? -eq 1 ] && grep -q "checkpoint has adamw optimizer state, this run uses sgd" "$T/e4.out"' \
    "resuming with another optimizer: clear error" "$T/e4.out"

# 17-18: missing checkpoint, missing data.
"$CTRAIN" fit $COMMON --ckpt-path last --default-root-dir "$T/empty" >"$T/e5.out" 2>&1
check '[ $? -eq 1 ] && grep -q "empty/last.safetensors: No such file" "$T/e5.out"' "--ckpt-path last without a checkpoint: error" "$T/e5.out"
"$CTRAIN" fit --data "$T/nowhere" --default-root-dir "$T/y" >"$T/e6.out" 2>&1
check '[ $? -eq 1 ] && grep -q "nowhere/train-images-idx3-ubyte.gz: No such file" "$T/e6.out" && grep -q "hint:.*dataset-fashion-mnist" "$T/e6.out"' \
    "missing data: error naming the file, with a hint" "$T/e6.out"

# 19-21: flags.
"$CTRAIN" fit --max-epoch 2 >"$T/f1.out" 2>&1
check '[ $? -eq 2 ] && grep -q "unknown flag .--max-epoch." "$T/f1.out" && grep -q "did you mean --max-epochs" "$T/f1.out"' \
    "unknown flag: exit 2, did you mean" "$T/f1.out"
"$CTRAIN" fit --hidden 512,x >"$T/f2.out" 2>&1
check '[ $? -eq 2 ] && grep -q -- "--hidden .512,x. is not" "$T/f2.out"' "malformed --hidden: exit 2 naming it" "$T/f2.out"
"$CTRAIN" fit --batch-size >"$T/f3.out" 2>&1
check '[ $? -eq 2 ] && grep -q -- "--batch-size needs a value" "$T/f3.out"' "flag without its value: exit 2" "$T/f3.out"

# 22-23: --help documents every flag; progress modes.
"$CTRAIN" fit --help >"$T/help.out" 2>&1
"$CTRAIN" --help >>"$T/help.out" 2>&1
check '[ $(grep -c -- "--max-epochs N" "$T/help.out") -eq 2 ] && for f in max-epochs max-steps batch-size lr optimizer hidden seed deterministic default-root-dir ckpt-path log-every-n-steps progress data val-fraction accelerator strategy devices num-nodes precision cluster-env; do grep -q -- "--$f" "$T/help.out" || exit 1; done' \
    "ctrain --help and fit --help document every flag" "$T/help.out"
"$CTRAIN" fit --data "$T/data" --max-steps 20 --log-every-n-steps 10 --progress plain --default-root-dir "$T/p" >"$T/plain.out" 2>&1
check '[ $(grep -c "^ctrain: epoch 1/5 step [12]0/43 .*loss .*samples/s ETA" "$T/plain.out") -eq 2 ]' \
    "--progress plain: a line every --log-every-n-steps" "$T/plain.out"

# 24: a live bar on a TTY (script(1) gives the run a pseudo-terminal).
if command -v script >/dev/null 2>&1; then
    script -qec "$CTRAIN fit --data $T/data --max-steps 30 --default-root-dir $T/bar" /dev/null >"$T/bar.out" 2>&1
    check 'grep -q "Epoch 1/5 \[#*\.*\] [0-9]*/43 loss [0-9.]* [0-9]* samples/s ETA" "$T/bar.out" && tr "\r" "\n" <"$T/bar.out" | grep -q "^Epoch 1/5 \[#*\.*\] 30/43"' \
        "--progress auto on a TTY: a live bar redrawn in place" "$T/bar.out"
else
    ci_needs "script(1) (bsdutils) not installed"
    echo "ok 24 # SKIP script(1) not installed"
fi

# 25-27: --hidden W,W is the CLI's alias of the model config key hidden=W-W, folded in before the
# connector parses --model-config once: refused before anything starts where it cannot apply, and
# a run given either spelling is the same run, checkpoint byte for byte.
"$CTRAIN" fit $COMMON --model gpt --hidden 64 --default-root-dir "$T/hg" >"$T/h1.out" 2>&1
check '[ $? -eq 2 ] && [ ! -e "$T/hg" ] && grep -q -- "--hidden sets --model-config hidden=, a key model gpt does not take" "$T/h1.out" && grep -q "hint: use --model-config for gpt" "$T/h1.out"' \
    "--hidden with a model without the key: exit 2 naming both, with a hint, nothing started" "$T/h1.out"
"$CTRAIN" fit $COMMON --hidden 64 --model-config hidden=32 --default-root-dir "$T/hh" >"$T/h2.out" 2>&1
check '[ $? -eq 2 ] && [ ! -e "$T/hh" ] && grep -q -- "--hidden and --model-config hidden=... both set the layers" "$T/h2.out" && grep -q "hint: give one of them" "$T/h2.out"' \
    "--hidden and --model-config hidden= together: exit 2, nothing started" "$T/h2.out"
"$CTRAIN" fit $COMMON --max-steps 2 --hidden 32 --default-root-dir "$T/ha" >"$T/h3.out" 2>&1 &&
    "$CTRAIN" fit $COMMON --max-steps 2 --model-config hidden=32 --default-root-dir "$T/hb" >>"$T/h3.out" 2>&1 &&
    grep -a -o '"flags":"[^}]*}' "$T/ha/last.safetensors" >>"$T/h3.out" && grep -a -o '"flags":"[^}]*}' "$T/hb/last.safetensors" >>"$T/h3.out"
check 'cmp "$T/ha/last.safetensors" "$T/hb/last.safetensors" >>"$T/h3.out" 2>&1' \
    "--hidden 32 and --model-config hidden=32: the same run, checkpoints equal byte for byte" "$T/h3.out"
