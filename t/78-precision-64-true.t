#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# --precision 64-true on the cpu, as Lightning means it (model.double()): fp64 parameters,
# activations, gradients, optimizer state and collectives.
#  - the MLP against torch float64 (t/tools/mlp_check, t/mlp_torch.py): the loss, every gradient
#    and 20 AdamW / SGD losses within 1e-10 (the GPT's are in t/70-gpt-torch.t); 32-true's files
#    fail that tolerance, so the check can fail;
#  - ctrain fit of the MLP and the GPT: summary.json says 64-true, the checkpoint's tensors and
#    optimizer state are F64 and its metadata names the storage; resuming under 64-true continues,
#    under 32-true (resume or --weights-only) is refused with a hint and nothing is written;
#  - ddp on 2 ranks x 4 sequences follows single_device with 8 (relative 1e-12: fp64 allreduce);
#  - a 64-true GPT's checkpoint generates text and exports to Hugging Face's fp32 layout, and
#    --init-from loads fp32 weights into a 64-true run;
#  - refused before anything runs, with a hint: ddp_sharded (fp32 shards), a user model that
#    stores fp32 only (examples/softmax_regression) and 16-true (GPU); bf16-true plans on cpu (its
#    run is t/79-precision-bf16-true.t) and is refused on cuda.
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B="$ROOT/${CTRAIN_BUILD:-build}"
CTRAIN="$B/ctrain"
T=$(mktemp -d /tmp/ctrain-t78-XXXXXX)
trap 'rm -rf "$T"' EXIT
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); echo "not ok $n - $1"; [ -n "$2" ] && sed 's/^/# /' "$2"; }
skip() { n=$((n + 1)); echo "ok $n # SKIP $1"; }
check() { if eval "$1"; then ok "$2"; else nok "$2" "$3"; fi; }
json() { sed -n "s/.*\"$1\":[[:space:]]*\([0-9.e+-]*\).*/\1/p" "$2" | head -1; }
# header FILE: a safetensors file's JSON header
header() { dd if="$1" bs=1 skip=8 count="$(od -An -t u8 -N 8 "$1" | tr -d ' ')" 2>/dev/null; }

echo "1..20"

# 1-3: the MLP against torch float64.
if /usr/bin/python3 -c 'import torch, numpy' >/dev/null 2>&1; then
    for o in adamw sgd; do
        mkdir -p "$T/m$o"
        "$B/t/mlp_check" "$T/m$o" --f64 --optimizer $o --lr 1e-2 >"$T/m$o/check.out" 2>&1 &&
            /usr/bin/python3 "$ROOT/t/mlp_torch.py" "$T/m$o" 20-16-8-5 $o 1e-2 1e-10 >"$T/m$o/tap" 2>&1
        check '[ $? -eq 0 ] && ! grep -q "^not ok" "$T/m$o/tap" && [ "$(grep -c "^ok" "$T/m$o/tap")" -eq 28 ]' \
            "64-true mlp: loss, 6 gradients and 20 $o losses within 1e-10 of torch float64 ($(grep worst "$T/m$o/tap" | sed 's/# //'))" \
            "$T/m$o/tap"
    done
    mkdir -p "$T/m32"
    "$B/t/mlp_check" "$T/m32" >"$T/m32/check.out" 2>&1
    /usr/bin/python3 "$ROOT/t/mlp_torch.py" "$T/m32" 20-16-8-5 adamw 1e-3 1e-10 >"$T/m32/tap" 2>&1
    check 'grep -q "^not ok" "$T/m32/tap"' "32-true's mlp is not within 1e-10 of float64 (the check can fail)" "$T/m32/tap"
else
    for i in 1 2 3; do skip "python3-torch not installed (scripts/install-deps --bench installs it)"; done
fi

if [ ! -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
    . "$(dirname "$0")/lib/ci.sh"
    ci_needs "dataset-fashion-mnist not installed"
    while [ $n -lt 20 ]; do skip "dataset-fashion-mnist not installed (scripts/install-deps)"; done
    exit 0
fi
mkdir -p "$T/data"
"$B/t/idx_subset" /usr/share/datasets/fashion-mnist "$T/data" 6000 1000 >/dev/null || exit 1
M="--data $T/data --progress off --deterministic --hidden 64 --batch-size 64 --accelerator cpu"

# 4-6: the MLP trains in fp64 and its checkpoint stores F64.
"$CTRAIN" fit $M --max-epochs 1 --precision 64-true --default-root-dir "$T/mlp" >"$T/mlp.out" 2>&1
check '[ $? -eq 0 ] && grep -q "\"precision\":[[:space:]]*\"64-true\"" "$T/mlp/summary.json"' \
    "fit --precision 64-true exits 0; summary.json records 64-true" "$T/mlp.out"
acc=$(json test_acc "$T/mlp/summary.json")
check 'awk -v a="$acc" "BEGIN { exit !(a > 0.7) }"' "it learns: test_acc $acc > 0.7" "$T/mlp.out"
header "$T/mlp/last.safetensors" >"$T/mlp.hdr"
check '[ "$(grep -o "\"dtype\":\"F64\"" "$T/mlp.hdr" | wc -l)" -eq 6 ] && ! grep -q "\"F32\"" "$T/mlp.hdr" && grep -q "\"param_dtype\":\"F64\"" "$T/mlp.hdr" && grep -q "\"precision\":\"64-true\"" "$T/mlp.hdr"' \
    "last.safetensors: 4 tensors and 2 AdamW states in F64, metadata param_dtype F64" "$T/mlp.hdr"

# 7-9: resuming: under 64-true it continues; under 32-true it is refused, nothing written.
cp "$T/mlp/metrics.csv" "$T/metrics.before"
"$CTRAIN" fit $M --max-epochs 2 --precision 32-true --default-root-dir "$T/mlp" --ckpt-path last >"$T/r32.out" 2>&1
check '[ $? -eq 2 ] && grep -q "stores its parameters in F64 (--precision 64-true), this run stores them in F32" "$T/r32.out" && grep -q "hint: resume with --precision 64-true" "$T/r32.out" && cmp -s "$T/metrics.before" "$T/mlp/metrics.csv"' \
    "resume under 32-true: exit 2, both storages named, the hint, metrics.csv untouched" "$T/r32.out"
"$CTRAIN" fit $M --max-epochs 1 --precision 32-true --default-root-dir "$T/w32" --ckpt-path "$T/mlp/last.safetensors" \
    --weights-only >"$T/w32.out" 2>&1
check '[ $? -ne 0 ] && grep -q "stores its parameters in F64" "$T/w32.out" && grep -q "hint: load it with --precision 64-true" "$T/w32.out"' \
    "--weights-only under 32-true: refused, with the hint" "$T/w32.out"
"$CTRAIN" fit $M --max-epochs 2 --precision 64-true --default-root-dir "$T/mlp" --ckpt-path last >"$T/r64.out" 2>&1
check '[ $? -eq 0 ] && [ "$(json epochs "$T/mlp/summary.json")" = 2 ]' "resume under 64-true continues to epoch 2" "$T/r64.out"

# 10-13: the GPT in fp64: trains, differs from 32-true, stores F64; ddp 2x4 follows single 8.
cat /usr/share/common-licenses/* >"$T/corpus.txt" 2>/dev/null
"$CTRAIN" tokenize --input "$T/corpus.txt" --output-dir "$T/tok" >"$T/tok.out" 2>&1 || { cat "$T/tok.out"; exit 1; }
G="--model gpt --model-config n_layer=2,n_head=4,n_embd=64,seq_len=64 --data $T/tok --progress off --deterministic"
"$CTRAIN" fit $G --batch-size 8 --max-steps 30 --precision 64-true --default-root-dir "$T/g64" >"$T/g64.out" 2>&1
check '[ $? -eq 0 ] && grep -q "\"precision\":[[:space:]]*\"64-true\"" "$T/g64/summary.json"' \
    "fit --model gpt --precision 64-true exits 0" "$T/g64.out"
"$CTRAIN" fit $G --batch-size 8 --max-steps 30 --precision 32-true --default-root-dir "$T/g32" >"$T/g32.out" 2>&1
a=$(json val_loss "$T/g64/summary.json"); b=$(json val_loss "$T/g32/summary.json")
check 'awk -v a="$a" -v b="$b" "BEGIN { d = a - b; if (d < 0) d = -d; exit !(a > 0 && d > 0 && d / a < 1e-4) }"' \
    "64-true val_loss $a differs from 32-true's $b, by less than 1e-4 relative" "$T/g32.out"
header "$T/g64/last.safetensors" >"$T/g64.hdr"
check 'grep -q "\"wte.weight\":{\"dtype\":\"F64\"" "$T/g64.hdr" && ! grep -q "\"F32\"" "$T/g64.hdr"' \
    "the gpt's checkpoint holds F64 tensors only" "$T/g64.hdr"
"$CTRAIN" fit $G --strategy ddp --devices 2 --batch-size 4 --max-steps 30 --precision 64-true \
    --default-root-dir "$T/gd" >"$T/gd.out" 2>&1
c=$(json val_loss "$T/gd/summary.json")
check 'awk -v a="$a" -v c="$c" "BEGIN { d = a - c; if (d < 0) d = -d; exit !(c > 0 && d / a < 1e-12) }"' \
    "ddp 2x4 in fp64: val_loss $c equals single_device 8's $a (relative 1e-12)" "$T/gd.out"

# 14-16: generate, export and --init-from with a 64-true GPT.
"$CTRAIN" generate --ckpt-path "$T/g64/best.safetensors" --prompt "The " --max-new-tokens 16 --seed 1 >"$T/gen.out" 2>&1
check '[ $? -eq 0 ] && [ "$(head -c 4 "$T/gen.out")" = "The " ] && [ "$(wc -c <"$T/gen.out")" -ge 20 ]' \
    "ctrain generate reads a 64-true checkpoint (F64) and continues the prompt" "$T/gen.out"
"$CTRAIN" export --ckpt-path "$T/g64/best.safetensors" --format hf --output-dir "$T/hf" >"$T/exp.out" 2>&1
header "$T/hf/model.safetensors" >"$T/hf.hdr" 2>/dev/null
check '[ -s "$T/hf.hdr" ] && grep -q "\"transformer.wte.weight\":{\"dtype\":\"F32\"" "$T/hf.hdr" && ! grep -q "F64" "$T/hf.hdr"' \
    "export --format hf of a 64-true checkpoint writes Hugging Face's fp32 tensors" "$T/exp.out"
"$CTRAIN" fit $G --batch-size 8 --max-steps 5 --precision 64-true --init-from "$T/hf/model.safetensors" \
    --default-root-dir "$T/gi" >"$T/gi.out" 2>&1
check '[ $? -eq 0 ] && grep -q "\"wte.weight\":{\"dtype\":\"F64\"" "$(header "$T/gi/last.safetensors" >"$T/gi.hdr"; echo "$T/gi.hdr")"' \
    "--init-from fp32 weights into a 64-true run trains and saves F64" "$T/gi.out"

# 17-20: refused before anything runs, with a hint.
"$CTRAIN" fit $M --precision 64-true --strategy ddp_sharded --devices 2 --default-root-dir "$T/sh" >"$T/sh.out" 2>&1
check '[ $? -eq 2 ] && grep -q "strategy ddp_sharded does not run with --precision 64-true" "$T/sh.out" && grep -q "hint: .*use --strategy ddp" "$T/sh.out" && [ ! -e "$T/sh" ]' \
    "ddp_sharded with 64-true: exit 2, hint --strategy ddp, nothing written" "$T/sh.out"
if [ -x "$B/examples/softmax_regression" ]; then
    "$B/examples/softmax_regression" --precision 64-true --data "$T/data" --default-root-dir "$T/ex" >"$T/ex.out" 2>&1
    check '[ $? -eq 2 ] && grep -q "softmax_regression does not compute in --precision 64-true" "$T/ex.out" && grep -q "hint: softmax_regression computes in: 32-true" "$T/ex.out"' \
        "a user model that stores fp32 only: 64-true refused with a hint" "$T/ex.out"
else
    skip "examples not built (make examples)"
fi
"$CTRAIN" plan --accelerator cpu --precision bf16-true >"$T/bt.out" 2>&1
check '[ $? -eq 0 ] && grep -q "bf16-true" "$T/bt.out"' "bf16-true plans on cpu" "$T/bt.out"
"$CTRAIN" plan --accelerator cpu --precision 16-true >"$T/ht.out" 2>&1
check '[ $? -eq 2 ] && grep -q "16-true.*GPU path" "$T/ht.out"' "16-true: refused until the GPU path has run" "$T/ht.out"
