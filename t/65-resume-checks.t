#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Resuming must not mix two runs: a checkpoint records the seed, the data module, the data's
# identity (its files by name, size and ends, wherever they lie), the validation fraction and the
# model's config; fit --ckpt-path last (or auto, two fits of one job sharing a run directory)
# under another value exits 2 naming the setting and both values. The same data moved elsewhere
# resumes; --weights-only loads the weights and starts a new run.
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B="$ROOT/${CTRAIN_BUILD:-build}"
T=$(mktemp -d /tmp/ctrain-t65-XXXXXX)
trap 'rm -rf "$T"' EXIT
trap 'exit 1' INT TERM HUP PIPE

PLAN=21
echo "1..$PLAN"
root=$ROOT
. "$ROOT/t/lib/preempt.sh"
make_data "$T/data"
unset SLURM_JOB_ID SLURM_JOBID
export OPENBLAS_NUM_THREADS=1

# 6000 images less 1/12 for validation: 86 steps of 64 per epoch; 30 steps stop inside epoch 1.
S="--progress plain --log-every-n-steps 1000 --batch-size 64 --max-epochs 2"
first() {    # first DIR FLAGS...: a run stopped after 30 steps, its last.safetensors in DIR
    d=$1
    shift
    "$B/ctrain" fit $S --data "$T/data" --max-steps 30 "$@" --default-root-dir "$d" >"$d.first.out" 2>&1 ||
        { sed 's/^/# /' "$d.first.out"; exit 1; }
}

first "$T/seed" --seed 1
"$B/ctrain" fit $S --data "$T/data" --seed 2 --ckpt-path last --default-root-dir "$T/seed" >"$T/seed.out" 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q -- "the checkpoint's run has --seed 1, this run has 2" "$T/seed.out" &&
    grep -q -- "hint: .*--weights-only" "$T/seed.out"
ok $? "another --seed: exit 2 (got $rc), names --seed, both values and --weights-only" "$T/seed.out"
"$B/ctrain" fit $S --data "$T/data" --seed 1 --ckpt-path last --default-root-dir "$T/seed" >"$T/seed2.out" 2>&1 &&
    grep -q 'resumed from' "$T/seed2.out"
ok $? "the same --seed resumes" "$T/seed2.out"

first "$T/vf"
"$B/ctrain" fit $S --data "$T/data" --val-fraction 0.2 --ckpt-path last --default-root-dir "$T/vf" >"$T/vf.out" 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q -- "--val-fraction 0.08333" "$T/vf.out" && grep -q -- "this run has 0.2" "$T/vf.out"
ok $? "another --val-fraction: exit 2 (got $rc), both values named" "$T/vf.out"
"$B/ctrain" fit $S --data "$T/data" --val-fraction 0.083333333333333333 --ckpt-path last --default-root-dir "$T/vf" \
    >"$T/vf2.out" 2>&1
ok $? "the same --val-fraction written another way resumes" "$T/vf2.out"

# Other data: the same files, one of them a different subset of Fashion-MNIST.
mkdir -p "$T/other"
"$B/t/idx_subset" /usr/share/datasets/fashion-mnist "$T/other" 6000 900 >/dev/null || exit 1
first "$T/data1"
"$B/ctrain" fit $S --data "$T/other" --ckpt-path last --default-root-dir "$T/data1" >"$T/data1.out" 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q -- "the checkpoint's run has --data (its files) 4 files" "$T/data1.out"
ok $? "another --data: exit 2 (got $rc), names --data and both identities" "$T/data1.out"
cp -r "$T/data" "$T/moved"
"$B/ctrain" fit $S --data "$T/moved" --ckpt-path last --default-root-dir "$T/data1" >"$T/moved.out" 2>&1 &&
    grep -q 'resumed from' "$T/moved.out"
ok $? "the same data copied elsewhere resumes (identity, not path)" "$T/moved.out"

first "$T/mc" --model-config hidden=32
"$B/ctrain" fit $S --data "$T/data" --model-config hidden=48 --ckpt-path last --default-root-dir "$T/mc" \
    >"$T/mc.out" 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q "checkpoint is for model mlp 784-32-10, this run builds mlp 784-48-10" "$T/mc.out"
ok $? "another --model-config: exit 2 (got $rc), both models named" "$T/mc.out"
# The same values in other text (checkpoints recorded --model-config as given, "hidden=32," too,
# before the plan carried it parsed): compared by value, it resumes.
python3 "$ROOT/t/st_edit.py" "$T/mc/last.safetensors" --meta model_config "hidden=32," &&
    "$B/ctrain" fit $S --data "$T/data" --model-config hidden=32 --ckpt-path last --default-root-dir "$T/mc" \
        >"$T/mc2.out" 2>&1 && grep -q 'resumed from' "$T/mc2.out"
ok $? "the same --model-config recorded as other text (hidden=32,) resumes" "$T/mc2.out"

# A tampered top_k list in last.safetensors: eviction unlinks only names fit writes for top-k
# checkpoints (epoch=N-step=M.safetensors), never best.safetensors or metrics.csv (val_acc is
# monitored, the lowest score goes first).
first "$T/topk" --save-top-k 2
python3 "$ROOT/t/st_edit.py" "$T/topk/last.safetensors" --meta top_k "-1e300 best.safetensors;-1e299 metrics.csv" &&
    "$B/ctrain" fit $S --data "$T/data" --max-epochs 1 --save-top-k 2 --ckpt-path last --default-root-dir "$T/topk" \
        >"$T/topk.out" 2>&1 && [ -f "$T/topk/best.safetensors" ] && [ -f "$T/topk/metrics.csv" ] &&
    [ -f "$T/topk/epoch=0-step=86.safetensors" ]
ok $? "a tampered top_k naming best.safetensors and metrics.csv deletes neither" "$T/topk.out"

# A tampered top_k entry with a legal name that a later validation writes (issue 48 item 7): it used
# to be kept, the run then wrote that file for an entry of its own, and evicting the tampered entry
# (the worst score) deleted the real checkpoint while last.safetensors still listed it. Entries of
# steps the checkpoint has not reached are dropped on resume: every name listed exists at the end.
first "$T/topk2" --save-top-k 2
python3 "$ROOT/t/st_edit.py" "$T/topk2/last.safetensors" --meta top_k "-1e300 epoch=0-step=86.safetensors" &&
    "$B/ctrain" fit $S --data "$T/data" --save-top-k 2 --ckpt-path last --default-root-dir "$T/topk2" \
        >"$T/topk2.out" 2>&1 &&
    python3 - "$T/topk2" >"$T/topk2.list" 2>&1 <<'PY'
import json, os, struct, sys
d = sys.argv[1]
with open(os.path.join(d, "last.safetensors"), "rb") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    listed = [e.split(" ", 1)[1] for e in json.loads(f.read(n))["__metadata__"]["top_k"].split(";") if e]
print("listed:", listed)
missing = [x for x in listed if not os.path.exists(os.path.join(d, x))]
print("missing:", missing)
sys.exit(1 if missing or len(listed) != 2 else 0)
PY
ok $? "a tampered top_k entry of a later step (epoch=0-step=86) is dropped: every checkpoint listed exists" \
    "$T/topk2.out" "$T/topk2.list"

# Non-finite values (issue 40 item 6): NaN weights and an epoch of INT64_MAX are refused on resume,
# naming the file; a training loss that turns non-finite ends the run with exit 3 and leaves the
# last good checkpoint as it was.
first "$T/nan"
cp "$T/nan/last.safetensors" "$T/nan.good"
python3 "$ROOT/t/st_edit.py" "$T/nan/last.safetensors" --fill layers.0.weight nan
cp "$T/nan/last.safetensors" "$T/nan.bad"
"$B/ctrain" fit $S --data "$T/data" --ckpt-path last --default-root-dir "$T/nan" >"$T/nan.out" 2>&1
rc=$?
[ $rc -eq 1 ] && grep -q "last.safetensors: tensor layers.0.weight holds a value that is not finite" "$T/nan.out" &&
    cmp -s "$T/nan/last.safetensors" "$T/nan.bad"
ok $? "NaN weights: resume refused (exit $rc), naming the file and the tensor, the file kept" "$T/nan.out"
cp "$T/nan.good" "$T/nan/last.safetensors"
python3 "$ROOT/t/st_edit.py" "$T/nan/last.safetensors" --fill optimizer.exp_avg inf 2>/dev/null ||
    python3 "$ROOT/t/st_edit.py" "$T/nan/last.safetensors" --fill layers.1.bias inf
"$B/ctrain" fit $S --data "$T/data" --ckpt-path last --default-root-dir "$T/nan" >"$T/inf.out" 2>&1
rc=$?
[ $rc -eq 1 ] && grep -q "holds a value that is not finite" "$T/inf.out"
ok $? "Inf values: resume refused (exit $rc)" "$T/inf.out"
cp "$T/nan.good" "$T/nan/last.safetensors"
python3 "$ROOT/t/st_edit.py" "$T/nan/last.safetensors" --meta epoch 9223372036854775807
"$B/ctrain" fit $S --data "$T/data" --ckpt-path last --default-root-dir "$T/nan" >"$T/epoch.out" 2>&1
rc=$?
[ $rc -eq 1 ] && grep -q "metadata epoch is '9223372036854775807', not a count from 0 to 10^12" "$T/epoch.out"
ok $? "an epoch of INT64_MAX: resume refused (exit $rc), not wrapped to negative" "$T/epoch.out"
first "$T/div" --optimizer sgd
cp "$T/div/last.safetensors" "$T/div.good"
"$B/ctrain" fit $S --data "$T/data" --optimizer sgd --lr 1e30 --ckpt-path last --default-root-dir "$T/div" \
    >"$T/div.out" 2>&1
rc=$?
[ $rc -eq 3 ] && grep -q "the training loss is not finite (nan" "$T/div.out" &&
    cmp -s "$T/div/last.safetensors" "$T/div.good" && ! grep -q ',nan,' "$T/div/metrics.csv"
ok $? "a loss that turns NaN (--lr 1e30): exit 3 (got $rc), last.safetensors the last good one, no nan row" \
    "$T/div.out"
# The same under ctrain's launcher: an exec'd rank says so by its exit status alone (3), which the
# supervisor reads as fit's, not as a failure of another kind (exit 1).
"$B/ctrain" fit $S --data "$T/data" --optimizer sgd --lr 1e30 --strategy ddp --devices 2 --max-epochs 1 \
    --default-root-dir "$T/div2" >"$T/div2.out" 2>&1
rc=$?
[ $rc -eq 3 ] && grep -q "training loss is not finite" "$T/div2.out" && [ ! -e "$T/div2/last.safetensors" ]
ok $? "2-rank ddp under ctrain's launcher, a loss that turns NaN: exit 3 (got $rc), nothing saved" "$T/div2.out"

# --ckpt-path auto: two fits of one SLURM job sharing a run directory.
SLURM_JOB_ID=4242 "$B/ctrain" fit $S --data "$T/data" --max-steps 30 --seed 1 --ckpt-path auto \
    --default-root-dir "$T/auto" >"$T/auto1.out" 2>&1 || sed 's/^/# /' "$T/auto1.out"
SLURM_JOB_ID=4242 "$B/ctrain" fit $S --data "$T/data" --seed 7 --ckpt-path auto --default-root-dir "$T/auto" \
    >"$T/auto.out" 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q -- "--seed 1, this run has 7" "$T/auto.out"
ok $? "--ckpt-path auto, a second fit of the job with another --seed: exit 2 (got $rc)" "$T/auto.out"

# --weights-only: fine-tuning from the checkpoint, a new run.
"$B/ctrain" fit $S --data "$T/data" --seed 2 --val-fraction 0.2 --max-epochs 1 --ckpt-path "$T/seed/last.safetensors" \
    --weights-only --default-root-dir "$T/ft" >"$T/ft.out" 2>&1
rc=$?
[ $rc -eq 0 ] && grep -q "loaded the weights of $T/seed/last.safetensors; a new run starts" "$T/ft.out" &&
    ! grep -q 'resumed from' "$T/ft.out" && grep -q 'fit done: 1 epochs' "$T/ft.out"
ok $? "--weights-only with another seed and split: weights loaded, a new run of 1 epoch (exit $rc)" "$T/ft.out"
"$B/ctrain" fit $S --data "$T/data" --weights-only --default-root-dir "$T/ft2" >"$T/ft2.out" 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q -- "--weights-only needs the checkpoint" "$T/ft2.out"
ok $? "--weights-only without --ckpt-path: exit 2 (got $rc)" "$T/ft2.out"
"$B/ctrain" fit $S --data "$T/data" --weights-only --ckpt-path auto --default-root-dir "$T/ft2" >"$T/ft3.out" 2>&1
[ $? -eq 2 ]
ok $? "--weights-only with --ckpt-path auto: exit 2" "$T/ft3.out"
"$B/ctrain" fit --help 2>&1 | grep -q -- "--weights-only"
ok $? "fit --help lists --weights-only"

# Without --data the data module's default directory is the data (and identified as it).
"$B/ctrain" fit --progress plain --log-every-n-steps 1000 --batch-size 64 --max-steps 3 --default-root-dir "$T/def" \
    >"$T/def.out" 2>&1 &&
    "$B/ctrain" fit --progress plain --log-every-n-steps 1000 --batch-size 64 --max-steps 6 --ckpt-path last \
        --default-root-dir "$T/def" >"$T/def2.out" 2>&1 && grep -q 'resumed from' "$T/def2.out"
ok $? "without --data: fit and resume on the default data directory" "$T/def.out" "$T/def2.out"
