#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# A GPT deep enough that its checkpoint holds more than 64 tensors (n_layer 6: 76 weights and 2
# optimizer states) saves, resumes and tests: checkpoints once held 64 tensors and such a model
# crashed at its first save.
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CTRAIN="$ROOT/${CTRAIN_BUILD:-build}/ctrain"
T=$(mktemp -d /tmp/ctrain-t74-XXXXXX)
trap 'rm -rf "$T"' EXIT
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); echo "not ok $n - $1"; [ -n "$2" ] && sed 's/^/# /' "$2"; }
check() { if eval "$1"; then ok "$2"; else nok "$2" "$3"; fi; }

echo "1..4"
cat /usr/share/common-licenses/* | head -c 60000 >"$T/corpus.txt"
"$CTRAIN" tokenize --input "$T/corpus.txt" --output-dir "$T/tok" >/dev/null 2>&1
G="--model gpt --model-config n_layer=6,n_head=2,n_embd=16,seq_len=16 --data $T/tok --batch-size 4 --progress off"
"$CTRAIN" fit $G --max-steps 3 --default-root-dir "$T/run" >"$T/fit.out" 2>&1
check '[ $? -eq 0 ] && [ -s "$T/run/last.safetensors" ]' "fit with n_layer 6 saves its checkpoint" "$T/fit.out"
check 'grep -q -a "h\.5\.mlp\.c_proj\.bias" "$T/run/last.safetensors"' \
    "the checkpoint names the last layer's tensors (h.5.mlp.c_proj.bias)"
"$CTRAIN" fit $G --max-steps 5 --ckpt-path last --default-root-dir "$T/run" >"$T/resume.out" 2>&1
check '[ $? -eq 0 ] && grep -q "\"steps\":[[:space:]]*5" "$T/run/summary.json"' "it resumes from last.safetensors to step 5" "$T/resume.out"
"$CTRAIN" test $G --default-root-dir "$T/run" >"$T/test.out" 2>&1
check '[ $? -eq 0 ] && grep -q "test_loss" "$T/test.out"' "ctrain test loads best.safetensors" "$T/test.out"
