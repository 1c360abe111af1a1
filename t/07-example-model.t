#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# examples/softmax_regression: a user's program that defines its own model through the public
# model header (<ctrain/model.h>), registers it and trains it with ctrain's Trainer. Built by
# `make examples` against libctrain.so; trained here with --strategy ddp --devices 2 on a real
# subset of Fashion-MNIST: it learns, DDP follows single_device with the doubled batch, its
# checkpoint carries its own tensor names, and its --model-config is checked like a built-in's. With
# bias=0 its bias is an unused parameter (no gradient, not announced): ddp refuses that naming
# ddp_find_unused_parameters_true, which trains it and follows single_device. Its own callback
# (<ctrain/callback.h>, added with ct_trainer_add_callback) runs in the fit: a line per validation
# whose step and val_loss are metrics.csv's and whose batch count is the steps between them, and one
# at the end of fit.
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B="$ROOT/${CTRAIN_BUILD:-build}"
EX="$B/examples/softmax_regression"
T=$(mktemp -d /tmp/ctrain-t07-XXXXXX)
trap 'rm -rf "$T"' EXIT
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); echo "not ok $n - $1"; [ -n "$2" ] && sed 's/^/# /' "$2"; }
check() { if eval "$1"; then ok "$2"; else nok "$2" "$3"; fi; }
json() { sed -n "s/.*\"$1\":[[:space:]]*\([0-9.e+-]*\).*/\1/p" "$2" | head -1; }

echo "1..11"
if [ ! -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
    for i in $(seq 1 11); do echo "ok $i # SKIP dataset-fashion-mnist not installed (scripts/install-deps)"; done
    exit 0
fi
if [ ! -x "$EX" ]; then
    echo "not ok 1 - $EX built by make examples"
    exit 1
fi
mkdir -p "$T/data"
"$B/t/idx_subset" /usr/share/datasets/fashion-mnist "$T/data" 6000 1000 || exit 1

# 1-4: two ranks under DDP learn.
"$EX" --strategy ddp --devices 2 --max-epochs 2 --batch-size 64 --data "$T/data" --default-root-dir "$T/ddp" \
    >"$T/ddp.out" 2>&1
check '[ $? -eq 0 ]' "softmax_regression --strategy ddp --devices 2 exits 0" "$T/ddp.out"
check '[ "$(json world_size "$T/ddp/summary.json")" = 2 ] && grep -q "\"model_name\":[[:space:]]*\"softmax_regression\"" "$T/ddp/summary.json"' \
    "summary.json: world size 2, model softmax_regression" "$T/ddp/summary.json"
acc=$(json test_acc "$T/ddp/summary.json")
# 11 (on the ddp run of 1-4): the program's callback ran at every validation and at the end.
cb_ok() {
    awk -F, 'NR == FNR { if ($1 ~ /^[0-9]+$/ && $4 != "") val[$1] = $4; if ($1 ~ /^[0-9]+$/) last = $1; next }
        /^softmax_regression: callback: epoch / {
            n++; step = $0; sub(/.* step /, "", step); sub(/ .*/, "", step)
            loss = $0; sub(/.* val_loss /, "", loss); sub(/ .*/, "", loss)
            b = $0; sub(/.* after /, "", b); sub(/ .*/, "", b)
            d = loss - val[step]; if (d < 0) d = -d
            if (!(step in val) || d > 1e-6 || b != step - prev) bad = 1
            prev = step
        }
        /^softmax_regression: callback: fit ended at step / { ended = $0; sub(/.* step /, "", ended) }
        END { exit !(n == 2 && !bad && ended == last && last > 0) }' "$T/ddp/metrics.csv" "$T/ddp.out"
}
check 'awk -v a="$acc" "BEGIN { exit !(a >= 0.70) }"' "it learns: test_acc $acc >= 0.70 (chance is 0.10)" "$T/ddp.out"
check 'head -c 2000 "$T/ddp/best.safetensors" | grep -q "linear.weight" && head -c 2000 "$T/ddp/best.safetensors" | grep -q "softmax_regression 784-10"' \
    "its checkpoint holds its own tensors (linear.weight) and names the model" "$T/ddp.out"

# 5: DDP with 2 x 64 follows single_device with 128 (the same global batches).
"$EX" --strategy single_device --max-epochs 2 --batch-size 128 --data "$T/data" --default-root-dir "$T/one" \
    >"$T/one.out" 2>&1
a=$(json val_loss "$T/ddp/summary.json"); b=$(json val_loss "$T/one/summary.json")
check 'awk -v a="$a" -v b="$b" "BEGIN { d = a - b; if (d < 0) d = -d; exit !(b > 0 && d / b < 1e-3) }"' \
    "ddp 2x64 val_loss $a equals single_device 128's $b (relative 1e-3)" "$T/one.out"

# 6-7: its --model-config is checked by the connector, like a built-in model's.
"$EX" --model-config bias=2 --data "$T/data" --default-root-dir "$T/bad" >"$T/bad.out" 2>&1
check '[ $? -eq 2 ] && grep -q "bias=2" "$T/bad.out" && grep -q "hint:" "$T/bad.out"' \
    "--model-config bias=2: exit 2 naming it, with a hint" "$T/bad.out"
"$EX" --model-config depth=3 --data "$T/data" --default-root-dir "$T/bad" >"$T/bad2.out" 2>&1
check '[ $? -eq 2 ] && grep -q "no key .depth." "$T/bad2.out" && grep -q "takes bias" "$T/bad2.out"' \
    "--model-config depth=3: exit 2, the keys it takes in the hint" "$T/bad2.out"

# 8: ddp_sharded (stage 2) trains a model that does not announce its parameters, and follows ddp.
"$EX" --strategy ddp_sharded --devices 2 --max-epochs 2 --batch-size 64 --data "$T/data" --default-root-dir "$T/zero" \
    >"$T/zero.out" 2>&1
a=$(json val_loss "$T/ddp/summary.json"); b=$(json val_loss "$T/zero/summary.json")
check 'awk -v a="$a" -v b="$b" "BEGIN { d = a - b; if (d < 0) d = -d; exit !(a > 0 && d / a < 1e-5) }"' \
    "ddp_sharded val_loss $b equals ddp's $a (relative 1e-5)" "$T/zero.out"

# 9-10: an unused parameter (bias=0: backward announces only the weight).
"$EX" --model-config bias=0 --strategy ddp --devices 2 --max-epochs 1 --batch-size 64 --data "$T/data" \
    --default-root-dir "$T/unused" >"$T/unused.out" 2>&1
rc=$?
check '[ $rc -ne 0 ] && grep -q "gave no gradient to parameters \[7840, 7850)" "$T/unused.out" && grep -q "hint: .*ddp_find_unused_parameters_true" "$T/unused.out"' \
    "ddp refuses a model that leaves a parameter without a gradient, naming the range and ddp_find_unused_parameters_true" "$T/unused.out"
"$EX" --model-config bias=0 --strategy ddp_find_unused_parameters_true --devices 2 --max-epochs 2 --batch-size 64 \
    --data "$T/data" --default-root-dir "$T/found" >"$T/found.out" 2>&1
"$EX" --model-config bias=0 --strategy single_device --max-epochs 2 --batch-size 128 --data "$T/data" \
    --default-root-dir "$T/one0" >"$T/one0.out" 2>&1
a=$(json val_loss "$T/found/summary.json"); b=$(json val_loss "$T/one0/summary.json")
check 'awk -v a="$a" -v b="$b" "BEGIN { d = a - b; if (d < 0) d = -d; exit !(b > 0 && d / b < 1e-3) }"' \
    "ddp_find_unused_parameters_true trains it: val_loss $a equals single_device's $b (relative 1e-3)" "$T/found.out"

# 11: the program's own callback, on the ddp run of 1-4.
check 'cb_ok' "its callback ran: a line per validation (step, val_loss as metrics.csv's, the batches between) and one at the end of fit" "$T/ddp.out"
