#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# --precision bf16-true on the cpu, as Lightning means it (model.to(torch.bfloat16)): bf16
# parameters, activations, gradients, optimizer state, collectives and checkpoints; fp32 arithmetic
# (GEMMs on oneDNN with fp32 accumulation, element-wise passes in fp32 registers). The GPT's loss,
# gradients and AdamW losses against torch's bf16 model are in t/70-gpt-torch.t.
#  - ctrain fit of the GPT: summary.json says bf16-true, its val_loss is within 2e-2 of 32-true's
#    and differs from it; the checkpoint holds BF16 tensors and optimizer state only and names the
#    storage; resuming under bf16-true continues, under 32-true (resume or --weights-only) is
#    refused with a hint and nothing is written;
#  - ddp on 2 ranks x 4 sequences (bf16 allreduce summed in fp32) within 2e-2 of single_device 8;
#  - a bf16-true GPT's checkpoint validates, generates text and exports to Hugging Face's fp32
#    layout; --init-from loads fp32 weights into a bf16-true run;
#  - the MLP: fit, validate and test in bf16-true, BF16 checkpoint, ddp on 2 ranks;
#  - ddp_sharded (fp32 shards) refuses bf16-true before anything runs, with a hint;
#  - gradient accumulation and clipping on bf16 gradients follow 32-true within 2e-2.
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B="$ROOT/${CTRAIN_BUILD:-build}"
CTRAIN="$B/ctrain"
T=$(mktemp -d /tmp/ctrain-t79-XXXXXX)
trap 'rm -rf "$T"' EXIT
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); echo "not ok $n - $1"; [ -n "$2" ] && sed 's/^/# /' "$2"; }
skip() { n=$((n + 1)); echo "ok $n # SKIP $1"; }
check() { if eval "$1"; then ok "$2"; else nok "$2" "$3"; fi; }
json() { sed -n "s/.*\"$1\":[[:space:]]*\([0-9.e+-]*\).*/\1/p" "$2" | head -1; }
# header FILE: a safetensors file's JSON header
header() { dd if="$1" bs=1 skip=8 count="$(od -An -t u8 -N 8 "$1" | tr -d ' ')" 2>/dev/null; }
# within A B TOL: |A - B| <= TOL * |B|, both positive
within() { awk -v a="$1" -v b="$2" -v t="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a > 0 && b > 0 && d <= t * b) }'; }

echo "1..17"

# 1-4: the GPT in bf16: trains, follows 32-true within 2e-2 but differs, stores BF16 only.
cat /usr/share/common-licenses/* >"$T/corpus.txt" 2>/dev/null
"$CTRAIN" tokenize --input "$T/corpus.txt" --output-dir "$T/tok" >"$T/tok.out" 2>&1 || { cat "$T/tok.out"; exit 1; }
G="--model gpt --model-config n_layer=2,n_head=4,n_embd=64,seq_len=64 --data $T/tok --progress off --deterministic"
"$CTRAIN" fit $G --batch-size 8 --max-steps 30 --precision bf16-true --default-root-dir "$T/gb" >"$T/gb.out" 2>&1
check '[ $? -eq 0 ] && grep -q "\"precision\":[[:space:]]*\"bf16-true\"" "$T/gb/summary.json"' \
    "fit --model gpt --precision bf16-true exits 0; summary.json records bf16-true" "$T/gb.out"
"$CTRAIN" fit $G --batch-size 8 --max-steps 30 --precision 32-true --default-root-dir "$T/g32" >"$T/g32.out" 2>&1
a=$(json val_loss "$T/gb/summary.json"); b=$(json val_loss "$T/g32/summary.json")
check 'within "$a" "$b" 2e-2 && [ "$a" != "$b" ]' \
    "bf16-true val_loss $a within 2e-2 of 32-true's $b, and not equal" "$T/g32.out"
header "$T/gb/last.safetensors" >"$T/gb.hdr"
check 'grep -q "\"wte.weight\":{\"dtype\":\"BF16\"" "$T/gb.hdr" && grep -q "exp_avg_sq.*BF16" "$T/gb.hdr" && ! grep -q "\"F32\"" "$T/gb.hdr" && grep -q "\"param_dtype\":\"BF16\"" "$T/gb.hdr" && grep -q "\"precision\":\"bf16-true\"" "$T/gb.hdr"' \
    "the gpt's checkpoint: BF16 tensors and AdamW state only, metadata param_dtype BF16" "$T/gb.hdr"
"$CTRAIN" validate $G --batch-size 8 --precision bf16-true --ckpt-path "$T/gb/best.safetensors" \
    --default-root-dir "$T/gv" >"$T/gv.out" 2>&1
check '[ $? -eq 0 ] && grep -q "val_loss" "$T/gv.out"' "ctrain validate reads the BF16 checkpoint under bf16-true" "$T/gv.out"

# 5-7: resuming: under 32-true (resume, --weights-only) refused, nothing written; under bf16-true it continues.
cp "$T/gb/metrics.csv" "$T/metrics.before"
"$CTRAIN" fit $G --batch-size 8 --max-steps 40 --precision 32-true --default-root-dir "$T/gb" --ckpt-path last \
    >"$T/r32.out" 2>&1
check '[ $? -eq 2 ] && grep -q "stores its parameters in BF16 (--precision bf16-true), this run stores them in F32" "$T/r32.out" && grep -q "hint: resume with --precision bf16-true" "$T/r32.out" && cmp -s "$T/metrics.before" "$T/gb/metrics.csv"' \
    "resume under 32-true: exit 2, both storages named, the hint, metrics.csv untouched" "$T/r32.out"
"$CTRAIN" fit $G --batch-size 8 --max-steps 5 --precision 32-true --default-root-dir "$T/w32" \
    --ckpt-path "$T/gb/last.safetensors" --weights-only >"$T/w32.out" 2>&1
check '[ $? -ne 0 ] && grep -q "stores its parameters in BF16" "$T/w32.out" && grep -q "hint: load it with --precision bf16-true" "$T/w32.out"' \
    "--weights-only under 32-true: refused, with the hint" "$T/w32.out"
"$CTRAIN" fit $G --batch-size 8 --max-steps 40 --precision bf16-true --default-root-dir "$T/gb" --ckpt-path last \
    >"$T/rb.out" 2>&1
check '[ $? -eq 0 ] && [ "$(json steps "$T/gb/summary.json")" = 40 ]' "resume under bf16-true continues to step 40" \
    "$T/rb.out"

# 8: ddp 2x4 in bf16 (bf16 allreduce, summed in fp32) follows single_device 8.
"$CTRAIN" fit $G --strategy ddp --devices 2 --batch-size 4 --max-steps 30 --precision bf16-true \
    --default-root-dir "$T/gd" >"$T/gd.out" 2>&1
c=$(json val_loss "$T/gd/summary.json")
check 'within "$c" "$a" 2e-2 && grep -q "\"world_size\":[[:space:]]*2" "$T/gd/summary.json"' \
    "ddp 2x4 in bf16: val_loss $c within 2e-2 of single_device 8's $a" "$T/gd.out"

# 9-11: generate, export and --init-from with a bf16-true GPT.
"$CTRAIN" generate --ckpt-path "$T/gb/best.safetensors" --prompt "The " --max-new-tokens 16 --seed 1 >"$T/gen.out" 2>&1
check '[ $? -eq 0 ] && [ "$(head -c 4 "$T/gen.out")" = "The " ] && [ "$(wc -c <"$T/gen.out")" -ge 20 ]' \
    "ctrain generate reads a bf16-true checkpoint (BF16) and continues the prompt" "$T/gen.out"
"$CTRAIN" export --ckpt-path "$T/gb/best.safetensors" --format hf --output-dir "$T/hf" >"$T/exp.out" 2>&1
header "$T/hf/model.safetensors" >"$T/hf.hdr" 2>/dev/null
check '[ -s "$T/hf.hdr" ] && grep -q "\"transformer.wte.weight\":{\"dtype\":\"F32\"" "$T/hf.hdr" && ! grep -q "BF16" "$T/hf.hdr"' \
    "export --format hf of a bf16-true checkpoint writes Hugging Face's fp32 tensors" "$T/exp.out"
"$CTRAIN" fit $G --batch-size 8 --max-steps 5 --precision bf16-true --init-from "$T/hf/model.safetensors" \
    --default-root-dir "$T/gi" >"$T/gi.out" 2>&1
check '[ $? -eq 0 ] && grep -q "\"wte.weight\":{\"dtype\":\"BF16\"" "$(header "$T/gi/last.safetensors" >"$T/gi.hdr"; echo "$T/gi.hdr")"' \
    "--init-from fp32 weights into a bf16-true run trains and saves BF16" "$T/gi.out"

# 12-15: the MLP.
if [ ! -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
    . "$(dirname "$0")/lib/ci.sh"
    ci_needs "dataset-fashion-mnist not installed"
    while [ $n -lt 15 ]; do skip "dataset-fashion-mnist not installed (scripts/install-deps)"; done
else
    mkdir -p "$T/data"
    "$B/t/idx_subset" /usr/share/datasets/fashion-mnist "$T/data" 6000 1000 >/dev/null || exit 1
    M="--data $T/data --progress off --deterministic --hidden 64 --batch-size 64 --accelerator cpu"
    "$CTRAIN" fit $M --max-epochs 1 --precision bf16-true --default-root-dir "$T/mlp" >"$T/mlp.out" 2>&1
    acc=$(json test_acc "$T/mlp/summary.json")
    check 'grep -q "\"precision\":[[:space:]]*\"bf16-true\"" "$T/mlp/summary.json" && awk -v a="$acc" "BEGIN { exit !(a > 0.7) }"' \
        "mlp fit --precision bf16-true learns: test_acc $acc > 0.7" "$T/mlp.out"
    header "$T/mlp/last.safetensors" >"$T/mlp.hdr"
    check '[ "$(grep -o "\"dtype\":\"BF16\"" "$T/mlp.hdr" | wc -l)" -eq 6 ] && ! grep -q "\"F32\"" "$T/mlp.hdr"' \
        "mlp last.safetensors: 4 tensors and 2 AdamW states in BF16" "$T/mlp.hdr"
    "$CTRAIN" test $M --precision bf16-true --ckpt-path "$T/mlp/best.safetensors" --default-root-dir "$T/mt" \
        >"$T/mt.out" 2>&1
    check '[ $? -eq 0 ] && grep -q "test_acc" "$T/mt.out"' "ctrain test reads the mlp's BF16 checkpoint" "$T/mt.out"
    "$CTRAIN" fit $M --max-epochs 1 --precision bf16-true --strategy ddp --devices 2 --default-root-dir "$T/md" \
        >"$T/md.out" 2>&1
    rc=$?
    acc=$(json test_acc "$T/md/summary.json")
    check '[ $rc -eq 0 ] && awk -v a="$acc" "BEGIN { exit !(a > 0.7) }"' "mlp ddp on 2 ranks in bf16-true: test_acc $acc" \
        "$T/md.out"
fi

# 16: refused before anything runs, with a hint.
"$CTRAIN" fit $G --precision bf16-true --strategy ddp_sharded --devices 2 --default-root-dir "$T/sh" >"$T/sh.out" 2>&1
check '[ $? -eq 2 ] && grep -q "strategy ddp_sharded does not run with --precision bf16-true" "$T/sh.out" && grep -q "hint: .*use --strategy ddp" "$T/sh.out" && [ ! -e "$T/sh" ]' \
    "ddp_sharded with bf16-true: exit 2, hint --strategy ddp, nothing written" "$T/sh.out"

# 17: gradient accumulation (sums of bf16 gradients) and clipping (their norm and scaling).
for p in bf16-true 32-true; do
    "$CTRAIN" fit $G --batch-size 4 --accumulate-grad-batches 2 --gradient-clip-val 1.0 --max-steps 30 --precision $p \
        --default-root-dir "$T/acc-$p" >"$T/acc-$p.out" 2>&1
done
a=$(json val_loss "$T/acc-bf16-true/summary.json"); b=$(json val_loss "$T/acc-32-true/summary.json")
check 'within "$a" "$b" 2e-2 && [ "$a" != "$b" ]' \
    "--accumulate-grad-batches 2 --gradient-clip-val 1 in bf16-true: val_loss $a within 2e-2 of 32-true's $b" \
    "$T/acc-bf16-true.out"
