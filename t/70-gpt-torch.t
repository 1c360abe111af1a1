#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# ctrain's GPT against the same model in PyTorch (llm.c's test_gpt2 idea): t/tools/gpt_check writes
# its initial weights (safetensors), one batch, its loss and every gradient, and the losses of 20
# AdamW steps; t/gpt_torch.py loads the weights into scripts/bench/torch_gpt.py's GPT and compares:
# loss and every gradient within 1e-4 relative error, the 20 losses within 1e-3; bf16-mixed's loss
# within 1e-2. Three configurations: 2 layers of 64 channels (4 heads), 3 layers of 48 (2 heads, a
# vocabulary that is not 256, a batch of 3), and 1 layer with seq_len 80 (attention's GEMMs run in
# blocks of 32 query rows: two full blocks and a partial one). A fourth repeats the first with oneDNN
# held to AVX2 (DNNL_MAX_CPU_ISA, ONEDNN_MAX_CPU_ISA from oneDNN 3): a CPU without bf16 instructions,
# where oneDNN has no bf16 matmul and ctrain runs bf16-mixed's products widened to fp32 (oneDNN's fp32 matmul).
# Then 64-true (gpt_check --f64: fp64 parameters, activations, gradients and AdamW) on the first
# three configurations against torch float64: the loss, every gradient and the 20 AdamW losses
# within 1e-10 relative error.
# Then bf16-true (gpt_check --bf16-true: bf16 parameters, activations, gradients and AdamW state) on
# the first three configurations and the AVX2 one against torch's model.to(torch.bfloat16): the loss
# and the 20 AdamW losses within 2e-2 relative error; every gradient within 2e-2 of the exact one
# (float64 from the same bf16 weights), not of PyTorch's bf16 gradient, which on a CPU without
# AVX512-BF16 is itself ~5e-2 from it (t/gpt_torch.py).
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B="$ROOT/${CTRAIN_BUILD:-build}"
if ! /usr/bin/python3 -c 'import torch, numpy' >/dev/null 2>&1; then
    echo "1..0 # SKIP python3-torch not installed (scripts/install-deps --bench installs it)"
    exit 0
fi
T=$(mktemp -d /tmp/ctrain-t70-XXXXXX)
trap 'rm -rf "$T"' EXIT
rc=0

# one configuration: NAME N_LAYER N_HEAD N_EMBD SEQ_LEN VOCAB BATCH [ISA]
run() {
    if [ -n "${8:-}" ]; then export DNNL_MAX_CPU_ISA="$8" ONEDNN_MAX_CPU_ISA="$8"; fi
    mkdir -p "$T/$1/f32" "$T/$1/bf16"
    cfg="n_layer=$2,n_head=$3,n_embd=$4,seq_len=$5,vocab=$6"
    for p in f32 bf16; do
        flag=; [ $p = bf16 ] && flag=--bf16
        if ! "$B/t/gpt_check" "$T/$1/$p" --config "$cfg" --batch "$7" --steps 20 --lr 1e-3 $flag \
            >"$T/$1/$p/check.out" 2>&1; then
            echo "1..1"; echo "not ok 1 - gpt_check $cfg $flag"; sed 's/^/# /' "$T/$1/$p/check.out"; exit 1
        fi
    done
    echo "# $1: $cfg, batch $7"
    /usr/bin/python3 "$ROOT/t/gpt_torch.py" "$T/$1/f32" "$2" "$3" "$4" "$5" "$6" 1e-3 "$T/$1/bf16" >"$T/$1/tap" 2>&1 ||
        { sed 's/^/# /' "$T/$1/tap"; rc=1; }
    unset DNNL_MAX_CPU_ISA ONEDNN_MAX_CPU_ISA
}
run small 2 4 64 32 256 4
run odd 3 2 48 17 300 3
run long 1 2 32 80 256 2
run avx2 2 4 64 32 256 4 AVX2

# one 64-true configuration: NAME N_LAYER N_HEAD N_EMBD SEQ_LEN VOCAB BATCH
run64() {
    mkdir -p "$T/$1"
    cfg="n_layer=$2,n_head=$3,n_embd=$4,seq_len=$5,vocab=$6"
    if ! "$B/t/gpt_check" "$T/$1" --config "$cfg" --batch "$7" --steps 20 --lr 1e-3 --f64 >"$T/$1/check.out" 2>&1; then
        echo "1..1"; echo "not ok 1 - gpt_check $cfg --f64"; sed 's/^/# /' "$T/$1/check.out"; exit 1
    fi
    echo "# $1: 64-true, $cfg, batch $7"
    /usr/bin/python3 "$ROOT/t/gpt_torch.py" --tol 1e-10 "$T/$1" "$2" "$3" "$4" "$5" "$6" 1e-3 >"$T/$1/tap" 2>&1 ||
        { sed 's/^/# /' "$T/$1/tap"; rc=1; }
}
run64 small64 2 4 64 32 256 4
run64 odd64 3 2 48 17 300 3
run64 long64 1 2 32 80 256 2

# one bf16-true configuration: NAME N_LAYER N_HEAD N_EMBD SEQ_LEN VOCAB BATCH [ISA]
runbt() {
    mkdir -p "$T/$1"
    cfg="n_layer=$2,n_head=$3,n_embd=$4,seq_len=$5,vocab=$6"
    # only ctrain is held to the ISA: PyTorch's own bf16 matmul (oneDNN) has none below AVX-512
    if ! env ${8:+DNNL_MAX_CPU_ISA=$8 ONEDNN_MAX_CPU_ISA=$8} "$B/t/gpt_check" "$T/$1" --config "$cfg" --batch "$7" \
        --steps 20 --lr 1e-3 --bf16-true >"$T/$1/check.out" 2>&1; then
        echo "1..1"; echo "not ok 1 - gpt_check $cfg --bf16-true"; sed 's/^/# /' "$T/$1/check.out"; exit 1
    fi
    echo "# $1: bf16-true, $cfg, batch $7${8:+, oneDNN held to $8}"
    /usr/bin/python3 "$ROOT/t/gpt_torch.py" --bf16-true "$T/$1" "$2" "$3" "$4" "$5" "$6" 1e-3 >"$T/$1/tap" 2>&1 ||
        { sed 's/^/# /' "$T/$1/tap"; rc=1; }
}
runbt smallbt 2 4 64 32 256 4
runbt oddbt 3 2 48 17 300 3
runbt longbt 1 2 32 80 256 2
runbt avx2bt 2 4 64 32 256 4 AVX2
# one plan for all: renumber each configuration's tests after the previous ones'
total=0
CONFIGS="small odd long avx2 small64 odd64 long64 smallbt oddbt longbt avx2bt"
for c in $CONFIGS; do total=$((total + $(grep -c '^\(not \)\?ok' "$T/$c/tap"))); done
echo "1..$total"
off=0
for c in $CONFIGS; do
    grep -v '^1\.\.' "$T/$c/tap" |
        awk -v off="$off" '/^(not )?ok [0-9]+/ { for (i = 1; i <= NF; i++) if ($i ~ /^[0-9]+$/) { $i += off; break } } { print }'
    off=$((off + $(grep -c '^\(not \)\?ok' "$T/$c/tap")))
done
exit $rc
