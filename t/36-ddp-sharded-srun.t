#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# ctrain fit --strategy ddp_sharded under srun --mpi=pmix on the SLURM test cluster: 2 tasks on
# one node equal the same run under ctrain's own launcher (weights and whole optimizer state), 4
# tasks over two emulated nodes (uneven shards) train, and a one-task step is refused with a hint.
# fsdp's hybrid_shard on the same cluster, 2 nodes x 2 tasks: a small GPT follows ddp's losses and
# gradient norms within 1e-5 for 10 steps and sends fewer bytes across the host link (each node's
# eth0, its transmitted bytes, in the node's network namespace) than full_shard; 2 + 1 tasks are
# refused with a hint; hybrid_shard's checkpoint over two nodes (a whole file: each node holds every
# part) loads and holds ddp's weights; sharding_strategy=auto chooses hybrid_shard on 2 nodes x 2
# (hybrid_shard's bits) and full_shard on 2 + 1 tasks; hybrid_shard with gradient accumulation
# follows ddp's. Needs root, SLURM and munge (else SKIP).
. "$(dirname "$0")/lib/launch.sh"
. "$(dirname "$0")/lib/ddp.sh"
N=11

make_data || skip_all $N "dataset-fashion-mnist not installed"
start_srun_cluster $N 2
FIT="$FIT_FLAGS --data $tmp/data --deterministic --strategy ddp_sharded --devices 2"

# 1-2: two tasks on one node; the same run under ctrain's own launcher gives the same checkpoint.
timeout 120 srun -N1 -n2 --mpi=pmix "$CTRAIN" fit $FIT --max-epochs 1 --default-root-dir "$tmp/a" \
    >"$tmp/a.out" 2>&1
rc=$?
[ $rc -eq 0 ] && [ "$(json world_size "$tmp/a/summary.json")" = 2 ] && [ "$(json steps "$tmp/a/summary.json")" = 43 ] &&
    grep -q '"strategy":[[:space:]]*"ddp_sharded"' "$tmp/a/summary.json"
ok $? "srun -N1 -n2 --mpi=pmix ctrain fit --strategy ddp_sharded: exit 0, world_size 2, 43 steps" || diag "$tmp/a.out"
env -u SLURM_CONF timeout 120 "$CTRAIN" fit $FIT --max-epochs 1 --default-root-dir "$tmp/b" >"$tmp/b.out" 2>&1 &&
    "$B/st_compare" "$tmp/a/last.safetensors" "$tmp/b/last.safetensors" >"$tmp/cmp.out" 2>&1
ok $? "the srun run's checkpoint equals the same run under ctrain's subprocess launcher bit for bit" ||
    diag "$tmp/b.out" "$tmp/cmp.out"

# 3: four tasks over two emulated nodes, two per node; each holds a quarter of the state.
timeout 180 srun -N2 -n4 --mpi=pmix "$CTRAIN" fit $FIT --num-nodes 2 --max-epochs 1 --default-root-dir "$tmp/c" \
    >"$tmp/c.out" 2>&1
rc=$?
a=$(json optimizer_state_bytes_per_rank "$tmp/a/summary.json") c=$(json optimizer_state_bytes_per_rank "$tmp/c/summary.json")
[ $rc -eq 0 ] && [ "$(json world_size "$tmp/c/summary.json")" = 4 ] && [ "$(json steps "$tmp/c/summary.json")" = 22 ] &&
    [ -n "$c" ] && [ "$((c * 2))" -le "$a" ] && [ "$((c * 2 + 8))" -ge "$a" ]
ok $? "srun -N2 -n4 --mpi=pmix: exit 0, world_size 4, 22 steps, optimizer state per rank $c (2 ranks: $a)" ||
    diag "$tmp/c.out"

# 4: one task has nothing to partition: refused before training, with a hint.
timeout 60 srun -N1 -n1 --mpi=pmix "$CTRAIN" fit $FIT_FLAGS --data "$tmp/data" --strategy ddp_sharded --max-epochs 1 \
    --default-root-dir "$tmp/d" >"$tmp/d.out" 2>&1
rc=$?
[ $rc -ne 0 ] && grep -q 'ddp_sharded' "$tmp/d.out" && grep -q 'hint:' "$tmp/d.out" && [ ! -f "$tmp/d/last.safetensors" ]
ok $? "srun -n1 --strategy ddp_sharded: refused with a hint, nothing trained (exit $rc)" || diag "$tmp/d.out"

# 5-7: fsdp over the two nodes, a GPT of 4 blocks, 10 steps: ddp, full_shard, hybrid_shard.
head -c 6000 /usr/share/common-licenses/GPL-3 >"$tmp/corpus.txt"
"$CTRAIN" tokenize --input "$tmp/corpus.txt" --output-dir "$tmp/tok" >"$tmp/tok.out" 2>&1 || diag "$tmp/tok.out"
G="--model gpt --datamodule tokens --data $tmp/tok --progress off --log-every-n-steps 1 --limit-val-batches 1"
G="$G --model-config n_layer=4,n_head=4,n_embd=64,seq_len=32 --lr-schedule constant --batch-size 2 --max-steps 10"
# sent: the bytes both nodes' eth0 have transmitted (each crossing of the link counted once)
sent() {
    for n in n1 n2; do
        (cd "$root_dir" && scripts/slurm-cluster exec "$cluster" $n cat /proc/net/dev) | awk '$1 == "eth0:" { print $10 }'
    done | awk '{ s += $1 } END { printf "%.0f\n", s }'
}
# gpt NAME STRATEGY: srun -N2 -n4 into $tmp/NAME; the bytes sent across the link into $tmp/NAME.sent
gpt() {
    g_name=$1 g_strategy=$2
    shift 2
    b0=$(sent)
    timeout 120 srun -N2 -n4 --mpi=pmix "$CTRAIN" fit $G --strategy "$g_strategy" --num-nodes 2 --devices 2 \
        --default-root-dir "$tmp/$g_name" "$@" >"$tmp/$g_name.out" 2>&1
    rc=$?
    echo $(($(sent) - b0)) >"$tmp/$g_name.sent"
    return $rc
}
# losses_norms NAME: step, train_loss and grad_norm of the 10 steps
losses_norms() { awk -F, '$1 ~ /^[0-9]+$/ && $3 != "" { print $1, $3, $8 }' "$tmp/$1/metrics.csv"; }
# within A B: B's losses and gradient norms (files $tmp/A.l, $tmp/B.l) within 1e-5 of A's, 10 steps
within() {
    paste -d' ' "$tmp/$1.l" "$tmp/$2.l" | awk '
        function rel(a, b) { d = (a - b) / a; return d < 0 ? -d : d }
        { if (rel($2, $5) > max) max = rel($2, $5); if (rel($3, $6) > max) max = rel($3, $6) }
        END { printf "largest relative difference %.2e", max; exit !(NR == 10 && max <= 1e-5) }'
}
gpt gd ddp && gpt gf fsdp && gpt gh fsdp:sharding_strategy=hybrid_shard &&
    losses_norms gd >"$tmp/gd.l" && losses_norms gh >"$tmp/gh.l" && [ "$(wc -l <"$tmp/gh.l")" -eq 10 ] &&
    got=$(within gd gh)
ok $? "srun -N2 -n4 fsdp hybrid_shard follows ddp's losses and gradient norms within 1e-5 for 10 steps: $got" ||
    diag "$tmp/gd.out" "$tmp/gf.out" "$tmp/gh.out" "$tmp/gd.l" "$tmp/gh.l"
f=$(cat "$tmp/gf.sent") h=$(cat "$tmp/gh.sent")
[ "$(json steps "$tmp/gf/summary.json")" = 10 ] && [ "$(json steps "$tmp/gh/summary.json")" = 10 ] &&
    [ "$h" -gt 0 ] && [ "$h" -lt "$f" ]
ok $? "hybrid_shard sent $h bytes across the host link, fewer than full_shard's $f (ddp: $(cat "$tmp/gd.sent"))" ||
    diag "$tmp/gh.out"
timeout 60 srun -N2 -n3 --mpi=pmix "$CTRAIN" fit $G --strategy fsdp:sharding_strategy=hybrid_shard --num-nodes 2 \
    --default-root-dir "$tmp/gu" >"$tmp/gu.out" 2>&1
rc=$?
[ $rc -ne 0 ] && grep -q '^ctrain: .*hybrid_shard needs the same number of ranks on every node' "$tmp/gu.out" &&
    grep -q '^ctrain: hint: .*--ntasks-per-node' "$tmp/gu.out" && [ ! -f "$tmp/gu/last.safetensors" ]
ok $? "srun -N2 -n3 (2 + 1 tasks) with hybrid_shard: refused with a hint, nothing trained (exit $rc)" ||
    diag "$tmp/gu.out"

# 8: hybrid_shard on two nodes saves the whole file (every node holds every part, so rank files would
# cover the array twice); it loads (validate, one process) and evaluates as ddp's does.
val() { "$CTRAIN" validate $G --ckpt-path "$tmp/$1/last.safetensors" --default-root-dir "$tmp/v$1" 2>&1 |
    sed -n 's/^ctrain: val_loss \([0-9.]*\).*/\1/p'; }
vd=$(val gd) vh=$(val gh)
[ -f "$tmp/gh/last.safetensors" ] && [ -n "$vh" ] && [ "$vh" = "$vd" ]
ok $? "hybrid_shard's checkpoint on two nodes is one file that validates as ddp's (val_loss $vh, ddp's $vd)" ||
    diag "$tmp/gh.out"

# 9-10: sharding_strategy=auto: on 2 nodes x 2 tasks (the small GPT fits a node) hybrid_shard, with
# hybrid_shard's losses and gradient norms bit for bit and its bytes on the link; on 2 + 1 tasks
# full_shard (hybrid_shard's nodes must be even), which trains.
choice() { sed -n 's/.*"strategy_choice":[[:space:]]*"\(.*\)".*/\1/p' "$tmp/$1/summary.json"; }
gpt ga fsdp:sharding_strategy=auto && losses_norms ga >"$tmp/ga.l" && cmp -s "$tmp/gh.l" "$tmp/ga.l" &&
    choice ga | grep -q '^sharding_strategy=auto: hybrid_shard (2 nodes of 2 ranks; ' &&
    [ "$(cat "$tmp/ga.sent")" -lt "$f" ]
ok $? "srun -N2 -n4 sharding_strategy=auto: $(choice ga); hybrid_shard's bits, $(cat "$tmp/ga.sent") bytes on the link" ||
    diag "$tmp/ga.out" "$tmp/gh.l" "$tmp/ga.l"
timeout 60 srun -N2 -n3 --mpi=pmix "$CTRAIN" fit $G --strategy fsdp:sharding_strategy=auto --num-nodes 2 \
    --default-root-dir "$tmp/gv" >"$tmp/gv.out" 2>&1
rc=$?
[ $rc -eq 0 ] && [ "$(json steps "$tmp/gv/summary.json")" = 10 ] &&
    choice gv | grep -q '^sharding_strategy=auto: full_shard (2 nodes with unequal numbers of ranks'
ok $? "srun -N2 -n3 sharding_strategy=auto: $(choice gv 2>/dev/null), 10 steps (exit $rc)" || diag "$tmp/gv.out"

# 11: hybrid_shard with gradient accumulation (2 micro-batches): each micro-batch's gradients are
# reduce-scattered within the node, exchanged across the nodes and added to the rank's parts; it
# follows ddp's accumulation of the same within 1e-5 for 10 steps.
gpt gda ddp --accumulate-grad-batches 2 && gpt gha fsdp:sharding_strategy=hybrid_shard --accumulate-grad-batches 2 &&
    losses_norms gda >"$tmp/gda.l" && losses_norms gha >"$tmp/gha.l" && got=$(within gda gha)
ok $? "srun -N2 -n4 hybrid_shard with --accumulate-grad-batches 2 follows ddp's accumulation within 1e-5: $got" ||
    diag "$tmp/gda.out" "$tmp/gha.out" "$tmp/gda.l" "$tmp/gha.l"
