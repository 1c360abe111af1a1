#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# GPT-2 weights in and out, checked against Hugging Face transformers' GPT2LMHeadModel on small
# random configurations (transformers for tests only, from build/pyvenv: scripts/pypi-peers):
#   HF -> ctrain: the weights `ctrain fit --init-from` loads give the logits HF gives (within 1e-4),
#     from GPT2LMHeadModel's file (transformer.* names) and GPT2Model's (no prefix), and through a
#     whole fit (one step at lr 1e-9: its checkpoint);
#   ctrain -> HF: `ctrain export --format hf` of that checkpoint loads with from_pretrained (no
#     missing or unexpected tensors) and gives ctrain's logits (within 1e-4);
#   GPT-2's vocabulary (50257): llm.c-style uint16 shards train as they are, no bits per byte, and
#     `ctrain generate --temperature 0 --prompt-tokens` continues as HF's greedy generate does;
#   bad input: each refused with a message naming it and exit 2 (1 for a damaged file).
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B="$ROOT/${CTRAIN_BUILD:-build}"
CTRAIN="$B/ctrain"
PY="${CTRAIN_PEERS_VENV:-$ROOT/build/pyvenv}/bin/python"   # the PyPI peers (Debian 13: the root's venv)
. "$ROOT/t/lib/ci.sh"
if ! "$PY" -c 'import transformers, safetensors, torch' >/dev/null 2>&1; then
    ci_needs "transformers (build/pyvenv) not installed"
    echo "1..0 # SKIP transformers not installed in build/pyvenv (scripts/pypi-peers installs it)"
    exit 0
fi
T=$(mktemp -d /tmp/ctrain-t76-XXXXXX)
trap 'rm -rf "$T"' EXIT
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); echo "not ok $n - $1"; [ -n "$2" ] && sed 's/^/# /' "$2"; }
check() { if eval "$1"; then ok "$2"; else nok "$2" "$3"; fi; }
# refused NAME EXIT PATTERN CMD...: exit status EXIT and PATTERN in stderr
refused() {
    name=$1 want=$2 pat=$3; shift 3
    "$@" >"$T/r.out" 2>"$T/r.err"; rc=$?
    check '[ $rc -eq $want ] && grep -q -- "$pat" "$T/r.err" && grep -q "hint" "$T/r.err"' "$name (exit $rc)" "$T/r.err"
}
echo "1..24"
TOK=1,5,299,7,42,0,100,3,250,17,9,64
"$PY" "$ROOT/t/gpt_hf.py" make "$T/a" 2 4 32 24 300 1 >"$T/make.out" 2>&1 || { echo "Bail out! gpt_hf.py make"; cat "$T/make.out"; exit 1; }
"$PY" "$ROOT/t/gpt_hf.py" logits "$T/a" $TOK "$T/a.hf" 2>"$T/py.err" || { echo "Bail out! gpt_hf.py logits"; cat "$T/py.err"; exit 1; }

# HF -> ctrain
"$B/t/gpt_logits" hf "$T/a/model.safetensors" $TOK >"$T/a.ct" 2>"$T/a.err"
"$PY" "$ROOT/t/gpt_hf.py" compare "$T/a.hf" "$T/a.ct" 1e-4 >"$T/cmp1" 2>&1
check '[ $? -eq 0 ]' "HF -> ctrain (GPT2LMHeadModel file): logits within 1e-4 ($(cat "$T/cmp1" | head -1))" "$T/cmp1"
check 'grep -q "n_layer=2,n_head=4,n_embd=32,seq_len=24,vocab=300" "$T/a.err"' \
    "the config read from the tensors and config.json: n_layer=2,n_head=4,n_embd=32,seq_len=24,vocab=300" "$T/a.err"
"$B/t/gpt_logits" hf "$T/a/base/model.safetensors" $TOK >"$T/b.ct" 2>"$T/b.err"
"$PY" "$ROOT/t/gpt_hf.py" compare "$T/a.hf" "$T/b.ct" 1e-4 >"$T/cmp2" 2>&1
check '[ $? -eq 0 ]' "HF -> ctrain (GPT2Model file, no transformer. prefix): logits within 1e-4" "$T/cmp2"

mkdir -p "$T/tok"
"$PY" "$ROOT/t/gpt_hf.py" shard "$T/tok/train.bin" 2000 300 1
"$PY" "$ROOT/t/gpt_hf.py" shard "$T/tok/val.bin" 500 300 2
"$CTRAIN" fit --model gpt --init-from "$T/a/model.safetensors" --data "$T/tok" --max-steps 1 --lr 1e-9 \
    --weight-decay 0 --batch-size 2 --default-root-dir "$T/run" --progress off >"$T/fit.out" 2>&1
check '[ $? -eq 0 ] && [ -f "$T/run/last.safetensors" ]' "ctrain fit --model gpt --init-from model.safetensors trains" "$T/fit.out"
"$CTRAIN" fit --model gpt --init-from "$T/a/model.safetensors" --data "$T/tok" --max-steps 1 --lr 1e-9 \
    --weight-decay 0 --batch-size 2 --strategy ddp --devices 2 --default-root-dir "$T/ddp" --progress off >"$T/ddp.out" 2>&1 &&
    "$B/t/gpt_logits" ckpt "$T/ddp/last.safetensors" $TOK >"$T/ddp.ct" 2>"$T/ddp.err" &&
    "$PY" "$ROOT/t/gpt_hf.py" compare "$T/a.hf" "$T/ddp.ct" 1e-4 >>"$T/ddp.out" 2>&1
check '[ $? -eq 0 ]' "--init-from under --strategy ddp --devices 2: the checkpoint's logits within 1e-4 of HF's" "$T/ddp.out"
"$B/t/gpt_logits" ckpt "$T/run/last.safetensors" $TOK >"$T/run.ct" 2>"$T/run.err"
"$PY" "$ROOT/t/gpt_hf.py" compare "$T/a.hf" "$T/run.ct" 1e-4 >"$T/cmp3" 2>&1
check '[ $? -eq 0 ]' "HF -> ctrain through fit --init-from: the checkpoint's logits within 1e-4 of HF's" "$T/cmp3"

# ctrain -> HF
"$CTRAIN" export --ckpt-path "$T/run/last.safetensors" --format hf --output-dir "$T/exp" >"$T/exp.out" 2>&1
check '[ $? -eq 0 ] && [ -f "$T/exp/model.safetensors" ] && [ -f "$T/exp/config.json" ]' \
    "ctrain export --format hf writes model.safetensors and config.json" "$T/exp.out"
check 'grep -q "transformer.h.1.mlp.c_fc.weight" "$T/exp/model.safetensors" && ! grep -q "lm_head" "$T/exp/model.safetensors"' \
    "in GPT2LMHeadModel's names, the tied lm_head left out"
"$PY" "$ROOT/t/gpt_hf.py" logits "$T/exp" $TOK "$T/exp.hf" >"$T/exp.err" 2>&1
check '[ $? -eq 0 ]' "GPT2LMHeadModel.from_pretrained loads it: no missing or unexpected tensors" "$T/exp.err"
"$PY" "$ROOT/t/gpt_hf.py" compare "$T/exp.hf" "$T/run.ct" 1e-4 >"$T/cmp4" 2>&1
check '[ $? -eq 0 ]' "ctrain -> HF: HF's logits of the export within 1e-4 of ctrain's ($(head -1 "$T/cmp4"))" "$T/cmp4"

# GPT-2's vocabulary: uint16 shards with tokens up to 50256, generate by token ids against HF's greedy
"$PY" "$ROOT/t/gpt_hf.py" make "$T/g" 1 2 16 16 50257 3 >/dev/null 2>&1
mkdir -p "$T/tok2"
"$PY" "$ROOT/t/gpt_hf.py" shard "$T/tok2/train.bin" 400 50257 3
"$PY" "$ROOT/t/gpt_hf.py" shard "$T/tok2/val.bin" 100 50257 4
"$CTRAIN" fit --model gpt --init-from "$T/g/model.safetensors" --data "$T/tok2" --max-steps 1 --lr 1e-9 \
    --weight-decay 0 --batch-size 2 --default-root-dir "$T/run2" --progress off >"$T/fit2.out" 2>&1
check '[ $? -eq 0 ] && grep -q "vocab=50257" "$T/fit2.out" "$T/run2/summary.json" && ! grep -q val_bpb "$T/run2/summary.json"' \
    "vocab 50257: GPT-2 token shards train as they are (no bits per byte: a token is not a byte)" "$T/fit2.out"
"$CTRAIN" generate --ckpt-path "$T/run2/last.safetensors" --prompt-tokens 464,3290,50256 --max-new-tokens 8 \
    --temperature 0 >"$T/gen.out" 2>&1
"$PY" "$ROOT/t/gpt_hf.py" greedy "$T/g" 464,3290,50256 8 >"$T/gen.hf" 2>&1
check '[ "$(cat "$T/gen.out")" = "464,3290,50256,$(cat "$T/gen.hf")" ]' \
    "generate --temperature 0 --prompt-tokens continues as HF's greedy generate ($(cat "$T/gen.hf"))" "$T/gen.out"
refused "generate: text prompt for a non-byte vocabulary" 2 "not bytes" \
    "$CTRAIN" generate --ckpt-path "$T/run2/last.safetensors" --prompt hello

# bad input
refused "--init-from a missing file" 2 "nothing.safetensors" "$CTRAIN" fit --model gpt --init-from "$T/nothing.safetensors" --data "$T/tok"
refused "--init-from with validate (it evaluates --ckpt-path)" 2 "init-from" "$CTRAIN" validate --model gpt --init-from "$T/a/model.safetensors" --data "$T/tok"
mkdir -p "$T/badjson" && cp "$T/a/model.safetensors" "$T/badjson/" && echo '{"n_head": 4, "n_layer": 3}' >"$T/badjson/config.json"
refused "a config.json that disagrees with the tensors" 1 "n_layer is 3" "$CTRAIN" fit --model gpt --init-from "$T/badjson/model.safetensors" --data "$T/tok"
refused "--init-from with --model mlp (the default)" 2 "model mlp" "$CTRAIN" fit --init-from "$T/a/model.safetensors"
refused "--model-config n_layer=3 against a 2-layer checkpoint" 2 "n_layer=3" \
    "$CTRAIN" fit --model gpt --model-config n_layer=3 --init-from "$T/a/model.safetensors" --data "$T/tok"
refused "--model-config seq_len beyond n_positions" 2 "seq_len=48" \
    "$CTRAIN" fit --model gpt --model-config seq_len=48 --init-from "$T/a/model.safetensors" --data "$T/tok"
"$PY" "$ROOT/t/gpt_hf.py" tamper "$T/a" "$T/bare" none
refused "no config.json and no n_head" 2 "n_head" "$CTRAIN" fit --model gpt --init-from "$T/bare/model.safetensors" --data "$T/tok"
"$CTRAIN" fit --model gpt --model-config n_head=4,seq_len=16 --init-from "$T/bare/model.safetensors" --data "$T/tok" \
    --max-steps 1 --batch-size 2 --default-root-dir "$T/run3" --progress off >"$T/fit3.out" 2>&1
check '[ $? -eq 0 ] && grep -q "seq_len=16" "$T/run3/summary.json"' \
    "without config.json, --model-config n_head=4 completes it; seq_len=16 takes the first 16 positions" "$T/fit3.out"
"$PY" "$ROOT/t/gpt_hf.py" tamper "$T/a" "$T/untied" untied
refused "an lm_head.weight that is not wte (untied head)" 1 "lm_head.weight differs" \
    "$CTRAIN" fit --model gpt --model-config n_head=4 --init-from "$T/untied/model.safetensors" --data "$T/tok" \
    --max-steps 1 --default-root-dir "$T/run4"
"$PY" "$ROOT/t/gpt_hf.py" tamper "$T/a" "$T/unknown" unknown
refused "a tensor GPT-2 does not have" 1 "attn.extra.weight" \
    "$CTRAIN" fit --model gpt --model-config n_head=4 --init-from "$T/unknown/model.safetensors" --data "$T/tok" \
    --max-steps 1 --default-root-dir "$T/run5"
"$PY" "$ROOT/t/gpt_hf.py" tamper "$T/a" "$T/f16" f16
refused "float16 tensors" 1 "float32" \
    "$CTRAIN" fit --model gpt --model-config n_head=4 --init-from "$T/f16/model.safetensors" --data "$T/tok" \
    --max-steps 1 --default-root-dir "$T/run6"
