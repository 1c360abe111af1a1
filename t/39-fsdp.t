#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# fsdp (ZeRO 3) on cpu, 4 ranks under ctrain's launcher: full_shard over mpi (the launcher's PMIx
# server) and over gloo (MASTER_ADDR/MASTER_PORT, backend=gloo) follows ddp's training losses within
# 1e-5 for 2 epochs (30 steps, the issue's figure) of a small GPT (fp32), shard_grad_op and no_shard for 10 steps,
# hybrid_shard and sharding_strategy=auto on this one node give full_shard's losses bit for bit; on the issue's GPT (n_layer=8,
# n_embd=512, where AdamW's state dominates) fsdp follows ddp and the measured peaks of
# resident parameters + gradients + optimizer state per rank (summary.json's memory, rank 0's) are
# at most 0.3x ddp's; a full checkpoint of fsdp resumes
# under ddp and at 2 ranks with the same global batch and continues within 1e-5 of the unbroken
# run, and ddp's under fsdp; bad options are refused by the plan with a hint, nothing launched;
# with gradient accumulation fsdp follows ddp's accumulation and its peak stays at most 0.3x ddp's;
# units joined by min_num_params (PyTorch's size_based_auto_wrap_policy) give the same bits.
#
# Why 1e-5 holds: every rank computes the same forward and backward as under ddp; the unit's
# gradients are summed over the same 4 ranks (in rank order, where ddp's library sums in its own),
# and AdamW is element-wise on each rank's parts: the losses differ by the sums' rounding only.
T="$(dirname "$0")"
. "$T/lib/launch.sh"
. "$T/lib/ddp.sh"
. "$T/lib/fsdp.sh"
N=19

[ -x "$CTRAIN" ] || skip_all $N "ctrain not built"
echo "1..$N"
fsdp_data
free_port() { "$B/tcpstore_peer" serve </dev/null | sed -n 's/^port //p'; }


# 1-3: full_shard over mpi and over gloo against ddp, 4 ranks x 2 sequences, 2 epochs.
fit ddp ddp 4 2 --max-epochs 2 && fit fs fsdp 4 2 --max-epochs 2
ok $? "ddp and fsdp (full_shard, mpi) ran 2 epochs on 4 ranks" || diag "$tmp/ddp.out" "$tmp/fs.out"
got=$(follows ddp fs 1 30)
ok $? "fsdp full_shard over mpi follows ddp within 1e-5: $got" || diag "$tmp/ddp/metrics.csv" "$tmp/fs/metrics.csv"
MASTER_ADDR=127.0.0.1 MASTER_PORT=$(free_port) fit fg fsdp:backend=gloo 4 2 --max-epochs 2
got=$(follows ddp fg 1 30)
ok $? "fsdp full_shard over gloo follows ddp within 1e-5: $got" || diag "$tmp/fg.out" "$tmp/fg/metrics.csv"

# 4-5: shard_grad_op and no_shard, 10 steps.
fit sgo fsdp:sharding_strategy=shard_grad_op 4 2 --max-steps 10 && got=$(follows ddp sgo 1 10)
ok $? "fsdp shard_grad_op follows ddp within 1e-5: $got" || diag "$tmp/sgo.out" "$tmp/sgo/metrics.csv"
fit ns fsdp:sharding_strategy=no_shard 4 2 --max-steps 10 && got=$(follows ddp ns 1 10)
ok $? "fsdp no_shard follows ddp within 1e-5: $got" || diag "$tmp/ns.out" "$tmp/ns/metrics.csv"

# 6-7: the issue's GPT, whose optimizer state dominates (n_layer=8, n_embd=512: 25M parameters,
# 406 MB of parameters, gradients and AdamW state per ddp rank), 4 ranks x 1 sequence of 16, 3 steps
# (the peaks are there from the second; its 30 steps follow ddp with no difference, but take a
# minute here: scripts/bench/README.md; tests 1-3 follow ddp for 30 steps): fsdp's losses within
# 1e-5 of ddp's, and its measured peak of resident parameters + gradients + optimizer state per
# rank (summary.json, rank 0's) at most 0.3x ddp's: its quarter of each, plus the units in flight (a
# block is three units of a third each: about four of them, the gathered one and the next, a unit's
# whole gradient and the peers' parts of it).
W="$M --model-config n_layer=8,n_head=8,n_embd=512,seq_len=16 --lr-schedule constant --devices 4 --batch-size 1"
W="$W --max-steps 3 --val-check-interval 3"
big() { timeout 180 "$CTRAIN" fit $W --strategy "$1" --default-root-dir "$tmp/$2" >"$tmp/$2.out" 2>&1; }
big ddp md && big fsdp mf
rc=$?
got=$(follows md mf 1 3)
ok $? "fsdp on GPT n_layer=8,n_embd=512 follows ddp within 1e-5 (exit $rc): $got" || diag "$tmp/md.out" "$tmp/mf.out"
mem() { echo $(($(json param_bytes_peak "$1") + $(json grad_bytes_peak "$1") + $(json optim_bytes_peak "$1"))); }
d=$(mem "$tmp/md/summary.json") f=$(mem "$tmp/mf/summary.json")
[ $rc -eq 0 ] && [ "$d" -gt 0 ] && [ "$((f * 10))" -le "$((d * 3))" ]
ok $? "measured parameter + gradient + optimizer peak per rank: fsdp $f bytes <= 0.3 x ddp's $d" ||
    diag "$tmp/md/summary.json" "$tmp/mf/summary.json"

# 8-10: fsdp's full checkpoint (state_dict_type=full; the default, sharded: t/39-fsdp-checkpoint.t) at the
# end of epoch 1, resumed under ddp (4 x 2) and at 2 ranks (fsdp
# 2 x 4: the same global batch), each continuing within 1e-5 of the unbroken ddp run.
fit half fsdp:state_dict_type=full 4 2 --max-epochs 1 && cp -r "$tmp/half" "$tmp/half2" &&
    fit half ddp 4 2 --max-epochs 2 --ckpt-path last && got=$(follows ddp half 16 30)
ok $? "fsdp's checkpoint after epoch 1 resumed under ddp follows the unbroken run: $got" ||
    diag "$tmp/half.out" "$tmp/half/metrics.csv"
fit half2 fsdp 2 4 --max-epochs 2 --ckpt-path last && got=$(follows ddp half2 16 30)
ok $? "... and under fsdp at 2 ranks x 4 (the same global batch): $got" || diag "$tmp/half2.out" "$tmp/half2/metrics.csv"
fit back ddp 4 2 --max-epochs 1 && fit back fsdp 4 2 --max-epochs 2 --ckpt-path last && got=$(follows ddp back 16 30)
ok $? "and back: ddp's checkpoint after epoch 1 resumed under fsdp follows the unbroken run: $got" ||
    diag "$tmp/back.out" "$tmp/back/metrics.csv"

# 11: with --activation-checkpointing (a block recomputed in backward, from the parameters fsdp
# gathered again for it) the same training losses and gradient norms, bit for bit, as without (the
# first 10 steps of test 1's run: the schedule is constant).
steps10() { awk -F, '$1 ~ /^[0-9]+$/ && $1 <= 10 && $3 != "" { print $1, $3, $8 }' "$tmp/$1/metrics.csv"; }
fit ac fsdp 4 2 --max-steps 10 --activation-checkpointing && steps10 fs >"$tmp/fs.10" && steps10 ac >"$tmp/ac.10" &&
    [ "$(wc -l <"$tmp/ac.10")" -eq 10 ] && cmp -s "$tmp/fs.10" "$tmp/ac.10"
ok $? "fsdp with --activation-checkpointing: the same losses and gradient norms, bit for bit" ||
    diag "$tmp/ac.out" "$tmp/fs.10" "$tmp/ac.10"

# 12: hybrid_shard on one host (one node): full_shard's losses and gradient norms, bit for bit (the
# node's ranks are the world). Its 2-node runs: t/36-ddp-sharded-srun.t.
fit hs fsdp:sharding_strategy=hybrid_shard 4 2 --max-steps 10 && steps10 hs >"$tmp/hs.10" &&
    [ "$(wc -l <"$tmp/hs.10")" -eq 10 ] && cmp -s "$tmp/fs.10" "$tmp/hs.10"
ok $? "fsdp hybrid_shard on one node: full_shard's losses and gradient norms, bit for bit" ||
    diag "$tmp/hs.out" "$tmp/fs.10" "$tmp/hs.10"

# 13: sharding_strategy=auto on one node is full_shard (summary.json says so): its bits. On two nodes:
# t/36-ddp-sharded-srun.t.
fit au fsdp:sharding_strategy=auto 4 2 --max-steps 10 && steps10 au >"$tmp/au.10" &&
    [ "$(wc -l <"$tmp/au.10")" -eq 10 ] && cmp -s "$tmp/fs.10" "$tmp/au.10" &&
    grep -q '"strategy_choice":[[:space:]]*"sharding_strategy=auto: full_shard (one node)"' "$tmp/au/summary.json"
ok $? "fsdp sharding_strategy=auto on one node: full_shard, its losses and gradient norms bit for bit" ||
    diag "$tmp/au.out" "$tmp/au.10"

# 14-15: refused by the plan, nothing launched.
"$CTRAIN" fit $G --strategy fsdp:sharding_strategy=zero3 --devices 4 --default-root-dir "$tmp/bad1" \
    >"$tmp/bad1.out" 2>&1
rc=$?
[ $rc -ne 0 ] && grep -q "^ctrain: .*sharding_strategy=zero3" "$tmp/bad1.out" &&
    grep -q "^ctrain: hint: .*full_shard|shard_grad_op|no_shard|hybrid_shard" "$tmp/bad1.out" && [ ! -e "$tmp/bad1" ]
ok $? "an unknown sharding_strategy is refused with a hint, nothing run" || diag "$tmp/bad1.out"
"$CTRAIN" fit $G --strategy fsdp --devices 1 --default-root-dir "$tmp/bad2" >"$tmp/bad2.out" 2>&1 &&
    echo "exit 0" >>"$tmp/bad2.out"
"$CTRAIN" fit $G --strategy fsdp --accelerator cuda --devices 2 --default-root-dir "$tmp/bad3" >"$tmp/bad3.out" 2>&1 &&
    echo "exit 0" >>"$tmp/bad3.out"
grep -q "^ctrain: .*fsdp shards the parameters over ranks" "$tmp/bad2.out" &&
    grep -q "^ctrain: hint: " "$tmp/bad2.out" &&
    grep -q "^ctrain: .*fsdp does not run on --accelerator cuda" "$tmp/bad3.out" &&
    grep -q "^ctrain: hint: .*fsdp runs on: cpu" "$tmp/bad3.out" &&
    ! grep -q "exit 0" "$tmp/bad2.out" "$tmp/bad3.out" && [ ! -e "$tmp/bad2" ] && [ ! -e "$tmp/bad3" ]
ok $? "fsdp on one process and fsdp on cuda are refused with a hint, nothing run" || diag "$tmp/bad2.out" "$tmp/bad3.out"

# 16-17: gradient accumulation. fsdp exchanges each micro-batch's gradients unit by unit and adds
# them to its shards (the loop's whole copy, as large as ddp's gradients, is not made), releasing
# the units as without accumulation: 2 micro-batches of 1 follow ddp's accumulation of the same
# within 1e-5 (the sums differ in order: micro-batches then ranks), and on the issue's GPT the peak
# stays at most 0.3x ddp's (before, the units stayed gathered through the window).
fit dacc ddp 4 1 --max-steps 10 --accumulate-grad-batches 2 &&
    fit facc fsdp 4 1 --max-steps 10 --accumulate-grad-batches 2 && got=$(follows dacc facc 1 10)
ok $? "fsdp with --accumulate-grad-batches 2 follows ddp's accumulation within 1e-5: $got" ||
    diag "$tmp/facc.out" "$tmp/dacc/metrics.csv" "$tmp/facc/metrics.csv"
timeout 180 "$CTRAIN" fit $W --strategy fsdp --accumulate-grad-batches 2 --default-root-dir "$tmp/ma" >"$tmp/ma.out" 2>&1
rc=$?
a=$(mem "$tmp/ma/summary.json")
[ $rc -eq 0 ] && [ "$d" -gt 0 ] && [ "$((a * 10))" -le "$((d * 3))" ]
ok $? "with --accumulate-grad-batches 2 the measured peak per rank: fsdp $a bytes <= 0.3 x ddp's $d (exit $rc)" ||
    diag "$tmp/ma.out" "$tmp/ma/summary.json"

# 18-19: min_num_params joins the model's announced ranges into larger units (a unit then holds
# several ranges, announced one by one in forward and in backward): the same losses and gradient
# norms bit for bit (the sums are per element, in rank order, whatever the unit), fewer all-gathers
# and a higher parameter peak. 30000 joins them in pairs (this small GPT's ranges hold about 16k
# parameters: a block's attention, MLP input and output); above the model's size, one unit.
gathers() { json param_gathers "$tmp/$1/summary.json"; }
fit j2 fsdp:min_num_params=30000 4 2 --max-steps 10 && steps10 j2 >"$tmp/j2.10" &&
    [ "$(wc -l <"$tmp/j2.10")" -eq 10 ] && cmp -s "$tmp/fs.10" "$tmp/j2.10" && [ "$(gathers j2)" -lt "$(gathers hs)" ]
ok $? "fsdp:min_num_params=30000: full_shard's losses and gradient norms bit for bit, $(gathers j2) all-gathers against $(gathers hs)" ||
    diag "$tmp/j2.out" "$tmp/fs.10" "$tmp/j2.10"
fit j1 fsdp:min_num_params=100000000 4 2 --max-steps 10 && steps10 j1 >"$tmp/j1.10" &&
    [ "$(wc -l <"$tmp/j1.10")" -eq 10 ] && cmp -s "$tmp/fs.10" "$tmp/j1.10" && [ "$(gathers j1)" -lt "$(gathers j2)" ] &&
    [ "$(json param_bytes_peak "$tmp/j1/summary.json")" -gt "$(json param_bytes_peak "$tmp/j2/summary.json")" ] &&
    [ "$(json param_bytes_peak "$tmp/j2/summary.json")" -gt "$(json param_bytes_peak "$tmp/hs/summary.json")" ]
ok $? "fsdp:min_num_params above the model's size: one unit, the same bits, $(gathers j1) all-gathers, parameter peaks one unit > pairs > ranges" ||
    diag "$tmp/j1.out" "$tmp/j1.10" "$tmp/j1/summary.json" "$tmp/j2/summary.json" "$tmp/hs/summary.json"
