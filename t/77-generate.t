#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# ctrain generate: text from a GPT checkpoint through the model seam's next-token logits. The
# prompt comes back first, then N bytes; the same seed gives the same text and another seed another;
# temperature 0 and top-k 1 are the most likely token whatever the seed; --prompt-file equals
# --prompt; a prompt longer than the context slides. A model without next-token logits (mlp) is
# refused by name, and so is every bad flag, each with a hint and exit 2. ctrain export refuses a
# format it does not write and a model without Hugging Face's layout.
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B="$ROOT/${CTRAIN_BUILD:-build}"
CTRAIN="$B/ctrain"
. "$ROOT/t/lib/ci.sh"
T=$(mktemp -d /tmp/ctrain-t77-XXXXXX)
trap 'rm -rf "$T"' EXIT
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); echo "not ok $n - $1"; [ -n "$2" ] && sed 's/^/# /' "$2"; }
check() { if eval "$1"; then ok "$2"; else nok "$2" "$3"; fi; }
refused() {
    name=$1 want=$2 pat=$3; shift 3
    "$@" >"$T/r.out" 2>"$T/r.err"; rc=$?
    check '[ $rc -eq $want ] && grep -q -- "$pat" "$T/r.err" && grep -q "hint" "$T/r.err" && [ ! -s "$T/r.out" ]' \
        "$name (exit $rc)" "$T/r.err"
}
echo "1..34"
for i in $(seq 1 40); do echo "It was the best of times, it was the worst of times, line $i."; done >"$T/text.txt"
"$CTRAIN" tokenize --input "$T/text.txt" --output-dir "$T/tok" >/dev/null 2>&1 || { echo "Bail out! tokenize"; exit 1; }
"$CTRAIN" fit --model gpt --model-config n_layer=1,n_head=2,n_embd=32,seq_len=16 --data "$T/tok" --batch-size 4 \
    --max-steps 20 --lr 3e-3 --default-root-dir "$T/run" --progress off >"$T/fit.out" 2>&1 ||
    { echo "Bail out! fit"; cat "$T/fit.out"; exit 1; }
CK="$T/run/last.safetensors"
gen() { "$CTRAIN" generate --ckpt-path "$CK" "$@"; }

gen --prompt "It was" --max-new-tokens 30 --seed 1 >"$T/s1" 2>"$T/s1.err"
check '[ $? -eq 0 ] && [ "$(head -c 6 "$T/s1")" = "It was" ] && [ $(wc -c <"$T/s1") -ge 36 ]' \
    "generate writes the prompt, then 30 new bytes" "$T/s1.err"
gen --prompt "It was" --max-new-tokens 30 --seed 1 >"$T/s1b" 2>&1
check 'cmp -s "$T/s1" "$T/s1b"' "the same seed gives the same text"
gen --prompt "It was" --max-new-tokens 30 --seed 2 >"$T/s2" 2>&1
check '! cmp -s "$T/s1" "$T/s2"' "another seed gives another text"
gen --prompt "It was" --max-new-tokens 30 --temperature 0 --seed 1 >"$T/g1" 2>&1
gen --prompt "It was" --max-new-tokens 30 --temperature 0 --seed 7 >"$T/g2" 2>&1
check 'cmp -s "$T/g1" "$T/g2"' "--temperature 0 takes the most likely token whatever the seed"
gen --prompt "It was" --max-new-tokens 30 --top-k 1 --seed 3 >"$T/k1" 2>&1
check 'cmp -s "$T/g1" "$T/k1"' "--top-k 1 is the same as --temperature 0"
printf 'It was' >"$T/prompt.txt"
gen --prompt-file "$T/prompt.txt" --max-new-tokens 30 --seed 1 >"$T/f1" 2>&1
check 'cmp -s "$T/s1" "$T/f1"' "--prompt-file gives what --prompt gives"
gen --prompt "It was the best of times, it was the worst of times, line" --max-new-tokens 20 --temperature 0 >"$T/long" 2>"$T/long.err"
check '[ $? -eq 0 ] && [ $(wc -c <"$T/long") -ge 76 ]' "a prompt longer than seq_len 16 keeps its last 16 tokens" "$T/long.err"
check '"$CTRAIN" generate --help | grep -q -- "--top-k" && "$CTRAIN" --help | grep -q "^  generate" && "$CTRAIN" --help | grep -q "^  export" && "$CTRAIN" fit --help | grep -q -- "--init-from"' \
    "generate --help, ctrain --help (generate, export) and fit --help (--init-from) list them"

refused "no --ckpt-path" 2 "needs --ckpt-path" "$CTRAIN" generate --prompt hi
refused "a --ckpt-path that does not exist" 2 "no-such.safetensors" "$CTRAIN" generate --ckpt-path "$T/no-such.safetensors" --prompt hi
refused "a directory as --ckpt-path" 2 "is a directory" "$CTRAIN" generate --ckpt-path "$T/run" --prompt hi
refused "no prompt" 2 "needs one of --prompt" gen
refused "--prompt and --prompt-file together" 2 "only one" gen --prompt a --prompt-file "$T/prompt.txt"
refused "an empty --prompt" 2 "empty" gen --prompt ""
refused "a missing --prompt-file" 2 "missing.txt" gen --prompt-file "$T/missing.txt"
refused "--temperature -1" 2 "temperature" gen --prompt a --temperature -1
refused "--top-k beyond the vocabulary" 2 "256" gen --prompt a --top-k 300
refused "--max-new-tokens 0" 2 "max-new-tokens" gen --prompt a --max-new-tokens 0
refused "an unknown flag, with a guess" 2 "top-k" gen --prompt a --topk 3
printf 'not a checkpoint' >"$T/junk.safetensors"
refused "a file that is not a checkpoint" 1 "junk.safetensors" "$CTRAIN" generate --ckpt-path "$T/junk.safetensors" --prompt a
mkfifo "$T/fifo.safetensors" "$T/prompt.fifo"
refused "a FIFO as --ckpt-path: refused at once, not waited on" 1 "fifo.safetensors is a FIFO" \
    timeout 20 "$CTRAIN" generate --ckpt-path "$T/fifo.safetensors" --prompt a
refused "a FIFO as --prompt-file: refused at once, not waited on" 2 "prompt.fifo is a FIFO" timeout 20 "$CTRAIN" \
    generate --ckpt-path "$CK" --prompt-file "$T/prompt.fifo"
refused "export --format onnx" 2 "onnx" "$CTRAIN" export --ckpt-path "$CK" --format onnx --output-dir "$T/x"
check '[ ! -e "$T/x" ]' "a refused export writes nothing"

# Messages name the file the bad value came from (issue 40 item 7).
"$CTRAIN" export --ckpt-path "$CK" --format hf --output-dir "$T/hf" >/dev/null 2>&1
# The model --init-from reads the file for is the one the connector plans: CTRAIN_MODEL too.
CTRAIN_MODEL=gpt "$CTRAIN" fit --data "$T/tok" --max-steps 1 --progress off --init-from "$T/hf/model.safetensors" \
    --default-root-dir "$T/envm" >"$T/envm.out" 2>&1
check '[ $? -eq 0 ] && grep -a -q "\"model\":\"gpt" "$T/envm/last.safetensors"' \
    "--init-from with the model from CTRAIN_MODEL=gpt: its config read from the file, fit runs" "$T/envm.out"
sed 's/"n_layer": *1/"n_layer": 3/' "$T/hf/config.json" >"$T/hf/c" && mv "$T/hf/c" "$T/hf/config.json"
FIT="fit --model gpt --data $T/tok --max-steps 1 --progress off"
refused "a config.json that disagrees with the tensors: named by its path" 1 "$T/hf/config.json: n_layer is 3" \
    "$CTRAIN" $FIT --init-from "$T/hf/model.safetensors" --default-root-dir "$T/hf1"
rm "$T/hf/config.json" && mkfifo "$T/hf/config.json"
refused "a FIFO as config.json: refused at once, not waited on" 1 "config.json is a FIFO" \
    timeout 20 "$CTRAIN" $FIT --init-from "$T/hf/model.safetensors" --default-root-dir "$T/hf2"
refused "a vocabulary smaller than the data names the shard" 2 "the largest 119 in train.bin" \
    "$CTRAIN" $FIT --model-config n_layer=1,n_head=2,n_embd=32,seq_len=16,vocab=100 --default-root-dir "$T/v"
refused "resuming another gpt shape: the hint gives --model and --model-config, not --hidden" 2 \
    "hint: .*--model gpt --model-config n_layer=1,n_head=2,n_embd=32,seq_len=16" \
    "$CTRAIN" $FIT --model-config n_layer=2,n_head=2,n_embd=32,seq_len=16 --ckpt-path "$CK" --default-root-dir "$T/s"
cp "$CK" "$T/big.safetensors"
python3 "$ROOT/t/st_edit.py" "$T/big.safetensors" --meta flags \
    '{"model":"gpt","model_config":"n_layer=64,n_head=2,n_embd=8192,seq_len=16"}'
refused "a checkpoint's model too large for one process: the message names the checkpoint" 2 \
    "big.safetensors: gpt 64 layers of n_embd=8192 .* too large" \
    "$CTRAIN" generate --ckpt-path "$T/big.safetensors" --prompt a

cp "$CK" "$T/nan.safetensors" && python3 "$ROOT/t/st_edit.py" "$T/nan.safetensors" --fill wpe.weight nan
refused "a checkpoint of NaN weights: refused, naming the tensor, no text" 1 "tensor wpe.weight holds a value that is not finite" \
    "$CTRAIN" generate --ckpt-path "$T/nan.safetensors" --prompt a
cp "$CK" "$T/inf.safetensors" && python3 "$ROOT/t/st_edit.py" "$T/inf.safetensors" --fill wte.weight -inf
refused "a checkpoint of -Inf weights: refused" 1 "not finite" "$CTRAIN" generate --ckpt-path "$T/inf.safetensors" --prompt a

# a model without next-token logits: the MLP
if [ -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] && [ -x "$B/t/idx_subset" ]; then
    mkdir -p "$T/fm" && "$B/t/idx_subset" /usr/share/datasets/fashion-mnist "$T/fm" 600 100 >/dev/null 2>&1
    "$CTRAIN" fit --data "$T/fm" --hidden 16 --max-steps 2 --batch-size 32 --default-root-dir "$T/mlp" --progress off \
        >"$T/mlp.out" 2>&1
    refused "generate refuses model mlp by name" 2 "model mlp" "$CTRAIN" generate --ckpt-path "$T/mlp/last.safetensors" --prompt a
    refused "export --format hf refuses model mlp by name" 2 "model mlp" \
        "$CTRAIN" export --ckpt-path "$T/mlp/last.safetensors" --format hf --output-dir "$T/y"
else
    ci_needs "dataset-fashion-mnist not installed"
    # numbered from the counter: the two checks above come after every other one
    for _ in 1 2; do n=$((n + 1)); echo "ok $n # SKIP dataset-fashion-mnist not installed (an mlp checkpoint)"; done
fi
