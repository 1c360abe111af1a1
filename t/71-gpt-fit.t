#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# ctrain fit --model gpt on byte tokens through the model and data seams: ctrain tokenize writes
# the shards, a small GPT learns (val loss and bits per byte below the start), metrics.csv and
# summary.json carry val_bpb/test_bpb, resuming from last.safetensors continues, ddp on 2 ranks
# with batch 4 follows single_device with batch 8, and bad configurations are refused with a hint.
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B="$ROOT/${CTRAIN_BUILD:-build}"
CTRAIN="$B/ctrain"
T=$(mktemp -d /tmp/ctrain-t71-XXXXXX)
trap 'rm -rf "$T"' EXIT
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); echo "not ok $n - $1"; [ -n "$2" ] && sed 's/^/# /' "$2"; }
check() { if eval "$1"; then ok "$2"; else nok "$2" "$3"; fi; }
json() { sed -n "s/.*\"$1\":[[:space:]]*\([0-9.e+-]*\).*/\1/p" "$2" | head -1; }

echo "1..9"
# Text every Debian system has (the licences), some 300 KB: real language, seconds to train on.
cat /usr/share/common-licenses/* >"$T/corpus.txt" 2>/dev/null
"$CTRAIN" tokenize --input "$T/corpus.txt" --output-dir "$T/tok" >"$T/tok.out" 2>&1
check '[ $? -eq 0 ] && [ -s "$T/tok/train.bin" ] && [ -s "$T/tok/val.bin" ]' "ctrain tokenize writes train.bin and val.bin" "$T/tok.out"
G="--model gpt --model-config n_layer=2,n_head=4,n_embd=64,seq_len=64 --data $T/tok --progress off --deterministic"

# 2-4: it learns, and reports bits per byte.
"$CTRAIN" fit $G --batch-size 8 --max-steps 60 --log-every-n-steps 20 --default-root-dir "$T/one" >"$T/one.out" 2>&1
check '[ $? -eq 0 ]' "fit --model gpt exits 0" "$T/one.out"
first=$(awk -F, 'NR==2 {print $3}' "$T/one/metrics.csv")
val=$(json val_loss "$T/one/summary.json"); bpb=$(json val_bpb "$T/one/summary.json")
check 'awk -v f="$first" -v v="$val" -v b="$bpb" "BEGIN { exit !(v < 5.0 && v < f && b > 0 && (b - v / log(2)) ^ 2 < 1e-8) }"' \
    "it learns: val_loss $val below 5.0 and the first logged loss $first; val_bpb $bpb = val_loss / ln 2" "$T/one.out"
check 'head -1 "$T/one/metrics.csv" | grep -qx "step,epoch,train_loss,val_loss,val_acc,lr,samples_per_sec,grad_norm,val_bpb" && grep -q "\"test_bpb\"" "$T/one/summary.json" && grep -q "wte.weight" "$T/one/best.safetensors"' \
    "metrics.csv has val_bpb, summary.json test_bpb, the checkpoint GPT-2's tensor names" "$T/one/metrics.csv"

# 5: resuming from last continues (the counters and the best val_loss come back).
"$CTRAIN" fit $G --batch-size 8 --max-steps 80 --ckpt-path last --default-root-dir "$T/one" >"$T/resume.out" 2>&1
check '[ $? -eq 0 ] && [ "$(json steps "$T/one/summary.json")" = 80 ] && grep -q "^80,1," "$T/one/metrics.csv" && [ "$(grep -c "^20,1," "$T/one/metrics.csv")" = 1 ]' \
    "resume from last.safetensors to step 80: metrics.csv appended, not restarted" "$T/resume.out"

# 6: ddp, 2 ranks x 4 sequences, follows single_device with 8 (the same windows each step).
"$CTRAIN" fit $G --batch-size 8 --max-steps 40 --default-root-dir "$T/s8" >"$T/s8.out" 2>&1
"$CTRAIN" fit $G --strategy ddp --devices 2 --batch-size 4 --max-steps 40 --default-root-dir "$T/d4" >"$T/d4.out" 2>&1
a=$(json val_loss "$T/s8/summary.json"); b=$(json val_loss "$T/d4/summary.json")
check 'awk -v a="$a" -v b="$b" "BEGIN { d = a - b; if (d < 0) d = -d; exit !(a > 0 && d / a < 1e-4) }"' \
    "ddp 2x4 val_loss $b equals single_device 8's $a (relative 1e-4)" "$T/d4.out"

# 7-9: refused before anything starts, with a hint.
# The connector refuses it (ctrain plan too), so no rank is launched: no "[rank 1]" line.
"$CTRAIN" fit --model gpt --model-config n_embd=66,n_head=4 --data "$T/tok" --max-steps 1 --progress off \
    --strategy ddp --devices 2 >"$T/e1.out" 2>&1
rc=$?
"$CTRAIN" plan --model gpt --model-config n_embd=66,n_head=4 >>"$T/e1.out" 2>&1
prc=$?
check '[ $rc -eq 2 ] && [ $prc -eq 2 ] && [ "$(grep -c "n_embd=66" "$T/e1.out")" = 2 ] && grep -q "hint:" "$T/e1.out" && ! grep -q "rank 1" "$T/e1.out"' \
    "n_embd not a multiple of n_head: fit (2 ranks, none launched) and plan exit 2, with a hint" "$T/e1.out"
head -c 500 "$T/corpus.txt" >"$T/small.txt"
"$CTRAIN" tokenize --input "$T/small.txt" --output-dir "$T/small" >/dev/null 2>&1
"$CTRAIN" fit --model gpt --model-config seq_len=128 --data "$T/small" --max-steps 1 --progress off >"$T/e2.out" 2>&1
check '[ $? -eq 2 ] && grep -q "seq_len=128" "$T/e2.out" && grep -q "hint:" "$T/e2.out"' \
    "seq_len beyond the data: exit 2 naming seq_len, with a hint" "$T/e2.out"
"$CTRAIN" fit --model gpt --accelerator cuda --data "$T/tok" --max-steps 1 >"$T/e3.out" 2>&1
check '[ $? -eq 2 ] && grep -q "cuda" "$T/e3.out" && grep -q "hint:" "$T/e3.out"' \
    "--model gpt --accelerator cuda: refused (no CUDA here, or gpt not on cuda), with a hint" "$T/e3.out"
