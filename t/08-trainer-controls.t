#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Lightning's trainer controls on a Fashion-MNIST subset (5500 training, 500 validation images):
#  - gradient accumulation: 2 micro-batches of 64 are one batch of 128 (weights after 10 SGD steps
#    within 1e-5 relative, fp32), on 1 rank and on 2 ranks (ddp 2 x 32 x 2 and ddp_sharded), and ddp
#    exchanges gradients once per optimizer step (no_sync: as many allreduces as without it);
#  - clipping by norm uses the norm over all ranks' gradients: ddp_sharded (each rank holds a shard
#    of the reduced gradient) clips and logs exactly as single_device; by value clamps;
#  - llm.c's schedule: linear warm-up, cosine down to --min-lr;
#  - --val-check-interval, --limit-val-batches, --monitor/--mode/--save-top-k, early stopping;
#  - resuming with another --accumulate-grad-batches realigns the windows as Lightning does (a
#    window ends when the epoch's batch count is a multiple of N), resuming after an early stop
#    trains to the next validation and stops again (Lightning restores EarlyStopping's wait_count);
#    an interrupted accumulating run resumes bit for bit;
#  - every bad value or combination is refused with exit 2, a message and a hint, and every
#    trainer-* id of the catalogue (`ctrain plan --errors`) has its case here.
#
# Why 1e-5 is the right tolerance: the two runs differ only in float32 summation order (the GEMM sums
# 64 per-sample gradients twice and the sum of the two is added, instead of 128 at once), ~1e-7
# relative per step; SGD carries it linearly. A real difference (other samples per step, an
# unaveraged window) is over 1e-2 at once: the control below shows batch 64 without accumulation.
. "$(dirname "$0")/lib/launch.sh"
. "$(dirname "$0")/lib/ddp.sh"
N=27
make_data || skip_all $N "dataset-fashion-mnist not installed"
echo "1..$N"
CMP="$B/st_compare"
F="--data $tmp/data --progress off --deterministic"
SGD="$F --optimizer sgd --lr 0.05 --lr-schedule constant --max-steps 10 --log-every-n-steps 1"
fit() { d=$1; shift; timeout 180 "$CTRAIN" fit "$@" --default-root-dir "$tmp/$d" >"$tmp/$d.out" 2>&1; }
# col DIR NAME: the values of metrics.csv column NAME, one per line (empty rows left out)
col() { awk -F, -v c="$2" 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == c) k = i; next } $k != "" { print $1 " " $k }' "$1/metrics.csv"; }
# same_col A B NAME TOL: the column agrees row by row within TOL relative
same_col() {
    col "$1" "$3" >"$tmp/ca"; col "$2" "$3" >"$tmp/cb"
    paste -d' ' "$tmp/ca" "$tmp/cb" | awk -v tol="$4" '{ n++; if ($1 != $3) bad = 1; d = ($2 - $4) / $2; if (d < 0) d = -d; if (d > m) m = d }
        END { printf "%d rows, largest relative difference %.2e", n, m; exit !(!bad && n > 0 && m <= tol) }'
}
meta() { head -c 8192 "$1" | tr ',' '\n' | sed -n "s/.*\"$2\":\"\([^\"]*\)\".*/\1/p" | head -1; }

# 1-5: accumulation on one rank.
fit s128 $SGD --batch-size 128 && fit a64x2 $SGD --batch-size 64 --accumulate-grad-batches 2 &&
    fit s64 $SGD --batch-size 64
ok $? "single_device: batch 128, batch 64 x accumulate 2 and batch 64 ran" || diag "$tmp/s128.out" "$tmp/a64x2.out"
got=$("$CMP" --tol 1e-5 "$tmp/s128/last.safetensors" "$tmp/a64x2/last.safetensors" layers.)
ok $? "2 micro-batches of 64 = one batch of 128 after 10 steps: $got"
got=$(same_col "$tmp/s128" "$tmp/a64x2" train_loss 1e-5) && got2=$(same_col "$tmp/s128" "$tmp/a64x2" grad_norm 1e-5)
ok $? "the same loss ($got) and gradient norm ($got2) every step"
got=$("$CMP" --tol 1e-2 "$tmp/s128/last.safetensors" "$tmp/s64/last.safetensors" layers. | tail -1)
[ "${got#largest}" != "$got" ]
ok $? "control: batch 64 without accumulation is far off ($got)"
[ "$(meta "$tmp/a64x2/last.safetensors" global_step)" = 10 ] && [ "$(meta "$tmp/a64x2/last.safetensors" step_in_epoch)" = 20 ]
ok $? "10 optimizer steps of 2 batches each: global_step 10, 20 batches into the epoch"

# 6-9: accumulation and clipping on two ranks.
fit d2x32 $SGD --strategy ddp --devices 2 --batch-size 32 --accumulate-grad-batches 2 &&
    fit d2x64 $SGD --strategy ddp --devices 2 --batch-size 64 &&
    fit z2x32 $SGD --strategy ddp_sharded --devices 2 --batch-size 32 --accumulate-grad-batches 2
ok $? "ddp 2 x 32 x 2, ddp 2 x 64 and ddp_sharded 2 x 32 x 2 ran" || diag "$tmp/d2x32.out" "$tmp/z2x32.out"
got=$("$CMP" --tol 1e-5 "$tmp/s128/last.safetensors" "$tmp/d2x32/last.safetensors" layers.) &&
    got2=$("$CMP" --tol 1e-5 "$tmp/s128/last.safetensors" "$tmp/z2x32/last.safetensors" layers.)
ok $? "2 ranks x 2 micro-batches of 32 = one batch of 128: ddp $got; ddp_sharded $got2"
a=$(json grad_allreduces "$tmp/d2x32/summary.json"); b=$(json grad_allreduces "$tmp/d2x64/summary.json")
[ -n "$a" ] && [ "$a" = "$b" ] && [ "$(json grad_allreduces_in_backward "$tmp/d2x32/summary.json")" -gt 0 ]
ok $? "no_sync: one gradient exchange per optimizer step ($a allreduces, as $b without accumulation), still overlapping backward"
CLIP="$SGD --gradient-clip-val 0.8"
fit c1 $CLIP --batch-size 128 && fit cz $CLIP --strategy ddp_sharded --devices 2 --batch-size 64 &&
    got=$("$CMP" --tol 1e-5 "$tmp/c1/last.safetensors" "$tmp/cz/last.safetensors" layers.) &&
    got2=$(same_col "$tmp/c1" "$tmp/cz" grad_norm 1e-5) &&
    ! "$CMP" --tol 1e-3 "$tmp/c1/last.safetensors" "$tmp/s128/last.safetensors" layers. >/dev/null
ok $? "norm clipping over all ranks' gradients: ddp_sharded (sharded reduced gradients) = single_device ($got; grad_norm $got2), and it changed the weights" ||
    diag "$tmp/cz.out"

# 10-11: clipping by value; the norm is what metrics.csv says.
fit v1 $SGD --batch-size 128 --gradient-clip-val 1e-3 --gradient-clip-algorithm value &&
    fit vz $SGD --strategy ddp_sharded --devices 2 --batch-size 64 --gradient-clip-val 1e-3 --gradient-clip-algorithm value &&
    "$CMP" --tol 1e-5 "$tmp/v1/last.safetensors" "$tmp/vz/last.safetensors" layers. >/dev/null &&
    ! "$CMP" --tol 1e-3 "$tmp/v1/last.safetensors" "$tmp/s128/last.safetensors" layers. >/dev/null
ok $? "value clipping: the same on 1 and 2 (sharded) ranks, and not a no-op" || diag "$tmp/vz.out"
first=$(col "$tmp/s128" grad_norm | head -1 | cut -d' ' -f2)
awk -v g="$first" 'BEGIN { exit !(g > 0.8 && g < 100) }'
ok $? "metrics.csv has the gradient norm of each logged step (first: $first; the clip at 0.8 bites)"

# 12: llm.c's schedule, read back from the lr column.
fit lr $F --max-steps 20 --log-every-n-steps 1 --warmup-steps 10 --lr 1e-3 --min-lr 1e-4
col "$tmp/lr" lr | uniq | awk '{ s = $1 - 1; if (s < 10) want = 1e-3 * (s + 1) / 10
        else want = 1e-4 + 0.9e-3 * 0.5 * (1 + cos(3.14159265358979 * (s - 10) / 10))
        d = ($2 - want) / want; if (d < 0) d = -d; if (d > 1e-5) bad = 1; n++ } END { exit !(n == 20 && !bad) }'
ok $? "warm-up from 1e-4 to 1e-3 over 10 steps, then cosine to --min-lr 1e-4" || diag "$tmp/lr/metrics.csv"

# 13-14: --val-check-interval and --limit-val-batches.
fit vci $F --max-epochs 1 --val-check-interval 10 --log-every-n-steps 50 &&
    fit vcs $F --max-epochs 1 --val-check-interval 10 --max-steps 15
[ "$(col "$tmp/vci" val_loss | cut -d' ' -f1 | tr '\n' ' ')" = "10 20 30 40 " ] &&
    [ "$(meta "$tmp/vci/last.safetensors" epoch)" = 1 ] && [ "$(meta "$tmp/vcs/last.safetensors" global_step)" = 15 ]
ok $? "--val-check-interval 10: validation at steps 10, 20, 30, 40 of a 43-step epoch, none at its end; last.safetensors at the epoch's end and at --max-steps 15" ||
    diag "$tmp/vci/metrics.csv"
V="$F --max-steps 5 --val-fraction 0.5"
fit lall $V && fit l1 $V --limit-val-batches 1 && fit lfrac $V --limit-val-batches 0.34 && fit l0 $V --limit-val-batches 0
va=$(col "$tmp/lall" val_loss); v1=$(col "$tmp/l1" val_loss); vf=$(col "$tmp/lfrac" val_loss)
[ -n "$va" ] && [ "$va" != "$v1" ] && [ "$v1" = "$vf" ] && [ -z "$(col "$tmp/l0" val_loss)" ] && [ -f "$tmp/l0/best.safetensors" ]
ok $? "--limit-val-batches: 1 batch of 3 (= 0.34 of them) differs from all; 0 validates nothing ($va / $v1 / $vf)"

# 15-17: --monitor, --mode, --save-top-k.
fit top $F --max-epochs 4 --monitor val_loss --save-top-k 2
kept=$(cd "$tmp/top" && ls epoch=*-step=*.safetensors 2>/dev/null | tr '\n' ' ')
want=$(col "$tmp/top" val_loss | sort -k2 -g | head -2 | awk '{ printf "epoch=%d-step=%d.safetensors\n", $1 / 43 - 1, $1 }' | sort | tr '\n' ' ')
[ -n "$kept" ] && [ "$kept" = "$want" ]
ok $? "--save-top-k 2 --monitor val_loss keeps the two lowest: $kept" || diag "$tmp/top/metrics.csv"
fit all $F --max-epochs 3 --save-top-k -1 && fit none $F --max-epochs 1 --save-top-k 0
[ "$(ls "$tmp/all"/epoch=*.safetensors | wc -l)" = 3 ] && [ ! -e "$tmp/none/best.safetensors" ] && grep -q 'fit done' "$tmp/none.out"
ok $? "--save-top-k -1 keeps every validation's checkpoint, 0 writes no best.safetensors"
fit acc $F --max-epochs 2 --monitor val_loss --mode max
[ "$(meta "$tmp/acc/best.safetensors" global_step)" = 43 ] && grep -q '"monitor":"val_loss max"' "$tmp/acc/last.safetensors"
ok $? "--mode max on val_loss: the first (highest) validation stays the best"

# 18-19: early stopping, and resuming after it.
ES="$F --progress plain --max-epochs 10 --monitor val_loss --mode max --early-stopping-patience 2"
fit es $ES
[ "$(json epochs "$tmp/es/summary.json")" = 3 ] && grep -q '"early_stopped":[[:space:]]*true' "$tmp/es/summary.json" && grep -q 'early stopping: val_loss did not improve in 2 validations' "$tmp/es.out"
ok $? "early stopping after 2 validations without improvement: 3 epochs of 10, early_stopped in summary.json" || diag "$tmp/es.out"
fit es --ckpt-path last $ES
[ "$(json epochs "$tmp/es/summary.json")" = 4 ] && grep -q 'did not improve in 3 validations' "$tmp/es.out"
ok $? "resumed after the early stop: trains to the next validation and stops again, as Lightning" || diag "$tmp/es.out"

# 20-21: resuming an accumulating run.
ACC="$F --batch-size 32 --lr-schedule constant --accumulate-grad-batches 4"
fit r1 $ACC --max-steps 6 && fit r1 $ACC --max-steps 15 --ckpt-path last && fit r2 $ACC --max-steps 15 &&
    "$CMP" "$tmp/r1/last.safetensors" "$tmp/r2/last.safetensors" >"$tmp/cmp.out"
ok $? "an accumulating run stopped and resumed equals the unbroken one bit for bit ($(cat "$tmp/cmp.out"))" || diag "$tmp/r1.out"
fit w $F --batch-size 32 --lr-schedule constant --accumulate-grad-batches 2 --max-steps 3 &&
    fit w $F --batch-size 32 --lr-schedule constant --accumulate-grad-batches 4 --max-steps 5 --ckpt-path last
[ "$(meta "$tmp/w/last.safetensors" step_in_epoch)" = 12 ]
ok $? "resumed at batch 6 with 4 per step: the window ends at batch 8, then 8..11 (Lightning's alignment), not 6..13" || diag "$tmp/w.out"

# 22: a stop signal that lands inside a window is acted on at the window's end: the checkpoint holds
# no half-summed gradient, and resuming it equals the unbroken run bit for bit.
SIG="$F --batch-size 16 --accumulate-grad-batches 8 --lr-schedule constant --max-epochs 2 --log-every-n-steps 2"
fit sref $SIG
"$CTRAIN" fit $SIG --default-root-dir "$tmp/sig" >"$tmp/sig.out" 2>&1 &
P=$!
pids="$pids $P"
for i in $(seq 600); do
    [ "$(cat "$tmp/sig/metrics.csv" 2>/dev/null | grep -c '^[0-9]')" -ge 2 ] && break
    sleep 0.05
done
kill -TERM $P
wait $P
rc=$?
at=$(meta "$tmp/sig/last.safetensors" step_in_epoch)
[ "$rc" -eq 75 ] && [ -n "$at" ] && [ $((at % 8)) -eq 0 ] && fit sig $SIG --ckpt-path last &&
    "$CMP" "$tmp/sref/last.safetensors" "$tmp/sig/last.safetensors" >"$tmp/cmps.out"
ok $? "SIGTERM inside a window: stopped after it (batch $at of the epoch, exit $rc), resumed = unbroken bit for bit" ||
    diag "$tmp/sig.out" "$tmp/cmps.out"

# 23: the GPT through the model seam (loss terms are tokens): 2 ranks x 2 micro-batches of 2 windows.
cat /usr/share/common-licenses/* >"$tmp/corpus.txt" 2>/dev/null
G="--model gpt --model-config n_layer=2,n_head=4,n_embd=64,seq_len=64 --progress off --deterministic --optimizer sgd
   --lr 0.05 --lr-schedule constant --max-steps 6 --limit-val-batches 1"
"$CTRAIN" tokenize --input "$tmp/corpus.txt" --output-dir "$tmp/tok" >"$tmp/tok.out" 2>&1 &&
    fit g8 $G --data "$tmp/tok" --batch-size 8 && fit gd $G --data "$tmp/tok" --batch-size 2 --accumulate-grad-batches 2 \
        --strategy ddp --devices 2 && got=$("$CMP" --tol 1e-5 "$tmp/g8/last.safetensors" "$tmp/gd/last.safetensors")
ok $? "gpt: ddp 2 x 2 micro-batches of 2 windows = single_device batch 8 after 6 steps ($got)" || diag "$tmp/gd.out"

# 24-27: bad values and combinations.
bad() {  # bad WORDS FLAGS...: exit 2, the words in the message, a hint, nothing trained
    words=$1; shift
    "$CTRAIN" fit $F --max-steps 1 --default-root-dir "$tmp/bad" "$@" >"$tmp/bad.out" 2>&1
    rc=$?
    [ $rc -eq 2 ] && grep -q "$words" "$tmp/bad.out" && grep -q '^ctrain: hint: ' "$tmp/bad.out" && [ ! -e "$tmp/bad/last.safetensors" ] ||
        { echo "# $* -> exit $rc"; diag "$tmp/bad.out"; return 1; }
}
r=0
bad 'accumulate-grad-batches' --accumulate-grad-batches 0 || r=1
bad 'gradient-clip-algorithm' --gradient-clip-algorithm l2 || r=1
bad 'without --gradient-clip-val' --gradient-clip-algorithm value || r=1
bad 'val-check-interval' --val-check-interval 0 || r=1
bad 'limit-val-batches' --limit-val-batches 1.5 || r=1
ok $r "accumulation, clipping, validation interval and limit: bad values refused with a hint"
r=0
bad 'longer than --max-steps' --warmup-steps 5 || r=1
bad 'below --lr' --min-lr 0.1 --lr 0.01 || r=1
bad 'constant schedule' --min-lr 1e-5 --lr-schedule constant || r=1
bad 'mode' --mode best || r=1
ok $r "schedule and mode: bad values and combinations refused with a hint"
r=0
bad 'no such metric' --monitor val_bpb || r=1
bad 'save-top-k' --save-top-k 13 || r=1
bad 'leaves no validation' --early-stopping-patience 2 --val-fraction 0 || r=1
bad 'early-stopping-patience' --early-stopping-patience -1 || r=1
ok $r "monitor, top-k and early stopping: bad values and combinations refused with a hint"
"$CTRAIN" plan --errors 2>/dev/null | awk '{ print $1 }' | grep '^trainer-' | sort -u >"$tmp/ids"
missing=""
for id in $(cat "$tmp/ids"); do grep -q "# covers: .*$id" "$0" || missing="$missing $id"; done
[ -s "$tmp/ids" ] && [ -z "$missing" ]
ok $? "every trainer-* catalogue id has a case here (missing:${missing:- none})"
# covers: trainer-accumulate trainer-gradient-clip trainer-gradient-clip-algorithm-alone trainer-val-check-interval
# covers: trainer-limit-val-batches trainer-warmup-steps trainer-min-lr trainer-min-lr-constant trainer-mode
# covers: trainer-monitor trainer-save-top-k trainer-early-stopping-no-val trainer-early-stopping-patience
# covers: trainer-controls-device (its case is in t/52-cuda-fit.t, which needs a GPU)
