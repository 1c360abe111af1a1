#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Heterogeneous steps on a real SLURM (3 emulated nodes): srun A : B (a heterogeneous job) with the
# components in reverse node order, srun A : B inside one allocation (no SLURM_HET_SIZE there), and
# srun --het-group=0,1 in a heterogeneous allocation. SLURM numbers the nodes (SLURM_NODEID) component
# after component but sorts SLURM_STEP_NODELIST and SLURM_STEP_TASKS_PER_NODE by name, and
# SLURM_LOCALID counts within a component: every task's `ctrain env --json` must still give its
# node's task count and a local rank unique on the node, and so must the SPANK plugin's
# LOCAL_RANK / LOCAL_WORLD_SIZE (and, in the step of one allocation, a global RANK and rank 0's
# node). The cluster is stopped by pid at exit (t/lib/spank.sh).
. "$(dirname "$0")/lib/spank.sh"
spank_plan 11
spank_cluster 3 ""

# Each task writes "RANK host local_rank local_world_size node_rank num_nodes" from ctrain env.
OUTDIR="$CLUSTER_DIR/het"
ENVCMD="$CTRAIN env --json >$OUTDIR/\$SLURM_PROCID.json 2>&1"
layout() {    # layout: one line per task, by rank
    for f in $(ls "$OUTDIR"/*.json 2>/dev/null | sort -V); do
        perl -MJSON::PP -e '
            local $/; open(my $fh, "<", $ARGV[0]) or die; my $t = <$fh>;
            my $j = eval { decode_json($t) };
            if (!$j || !defined $j->{global_rank}) { $t =~ s/\n/ /g; print "error: $t\n"; exit }
            print join(" ", map { $j->{$_} } qw(global_rank local_rank local_world_size node_rank num_nodes)), "\n";
        ' "$f"
    done | tr '\n' '|'
}
fresh() { rm -rf "$OUTDIR"; mkdir -p "$OUTDIR"; }

# 1. Component 0 (1 task) on n2, component 1 (2 tasks) on n1: SLURM_NODEID 0 is n2.
fresh
run_srun -N1 -n1 -w n2 sh -c "$ENVCMD" : -N1 -n2 -w n1 sh -c "$ENVCMD"
ok "$RC" "srun A : B with the components in reverse node order runs"
[ "$RC" -eq 0 ] || printf '%s\n' "$ERR" | head -n 5 | sed 's/^/#   /'
is "$(layout)" "0 0 1 0 2|1 0 2 1 2|2 1 2 1 2|" \
   "reverse order: n2 runs 1 task, n1 2 (local ranks 0, 1); node ranks in component order"

# 2. The same shape inside one allocation (srun sets no SLURM_HET_SIZE): n3 | n1 (2 tasks), n2.
fresh
timeout 90 salloc -N3 -n6 sh -c "srun -N1 -n1 -w n3 sh -c '$ENVCMD' : -N2 -n3 -w n[1-2] sh -c '$ENVCMD'" \
    >"$CLUSTER_DIR/salloc.out" 2>&1
ok $? "srun A : B in one allocation runs"
is "$(layout)" "0 0 1 0 3|1 0 2 1 3|2 1 2 1 3|3 0 1 2 3|" \
   "one allocation: n3 runs 1 task, n1 2, n2 1; local ranks unique per node"

# 3. A heterogeneous allocation, srun --het-group=0,1: component 0 on n3, component 1 on n[1-2].
fresh
timeout 90 salloc -N1 -n1 -w n3 : -N2 -n3 sh -c "srun --het-group=0,1 sh -c '$ENVCMD'" \
    >"$CLUSTER_DIR/salloc.out" 2>&1
ok $? "srun --het-group=0,1 in a heterogeneous allocation runs"
is "$(layout)" "0 0 1 0 3|1 0 2 1 3|2 1 2 1 3|3 0 1 2 3|" \
   "--het-group=0,1: the same layout as the one-allocation step"

# 4. The SPANK plugin's variables in the same steps.
SHOW='echo "$RANK $LOCAL_RANK $LOCAL_WORLD_SIZE $NODE_RANK $WORLD_SIZE"'
run_srun --ctrain-strategy=ddp -N1 -n1 -w n2 sh -c "$SHOW" : -N1 -n2 -w n1 sh -c "$SHOW"
is "$(printf '%s\n' "$OUT" | sort -n | tr '\n' '|')" "0 0 1 0 3|1 0 2 1 3|2 1 2 1 3|" \
   "plugin, reverse order: RANK, LOCAL_RANK, LOCAL_WORLD_SIZE, NODE_RANK, WORLD_SIZE per task"
[ "$RC" -eq 0 ] || printf '%s\n' "$ERR" | head -n 5 | sed 's/^/#   /'
# srun's own check of the flags, in a step on part of the allocation (srun -N1 in salloc -N3).
timeout 60 salloc -N3 -n6 srun --ctrain-strategy=ddp -N1 -n2 sh -c "$SHOW" >"$CLUSTER_DIR/salloc.out" 2>&1
is "$(grep -E '^[0-9]+ ' "$CLUSTER_DIR/salloc.out" | sort -n | tr '\n' '|')" "0 0 2 0 2|1 1 2 0 2|" \
   "plugin: a step on one node of a 3-node allocation runs"
spank_plugstack "$SHIPPED" "verbose"
# (Component 0 stays until the others have asked slurmctld for its layout: a step of one
# allocation whose component 0 is over is known no more, and nothing else says where its task 0
# was — test 11.)
timeout 90 salloc -N3 -n6 sh -c \
    "srun --ctrain-strategy=ddp -N1 -n1 -w n3 sh -c '$SHOW; sleep 5' : -N2 -n3 -w n[1-2] sh -c '$SHOW'" \
    >"$CLUSTER_DIR/salloc.out" 2>"$CLUSTER_DIR/salloc.err"
is "$(grep -E '^[0-9]+ ' "$CLUSTER_DIR/salloc.out" | sort -n | tr '\n' '|')" \
   "0 0 1 0 4|1 0 2 1 4|2 1 2 1 4|3 0 1 2 4|" "plugin, one allocation: RANK global, WORLD_SIZE the whole step"
[ -s "$CLUSTER_DIR/salloc.out" ] || sed 's/^/#   /' "$CLUSTER_DIR/salloc.err" | head -n 6
job=$(sed -n 's/.*Granted job allocation \([0-9]*\).*/\1/p' "$CLUSTER_DIR/salloc.err")
rank0=$(cat "$CLUSTER_DIR"/log/slurmd-n*.log |
    sed -n "s/.*ctrain: step $job\.0 node .* rank 0 on \([^ ]*\) at .*/\1/p")
is "$(printf '%s\n' "$rank0" | sort -u)" "n3" \
   "plugin, one allocation: rank 0's node is component 0's (n3), on every node"

# 11. The same step with component 0 over before n1's slurmstepd (held 3 s by forge_env.so) asks:
# SLURM 22.05 still gives the step's layout (rank 0 on n3), 24.11 knows component 0 no more. Either
# n3 or a message naming task 0 — never another component's node.
printf '%s\n%s\n' "optional $B/t/forge_env.so" "$SHIPPED $PLUGIN verbose" >"$CLUSTER_DIR/plugstack.conf"
CT_TEST_HOLD="n1 3" timeout 90 salloc -N3 -n6 sh -c \
    "srun --ctrain-strategy=ddp -N1 -n1 -w n3 true : -N2 -n3 -w n[1-2] sh -c 'echo \$MASTER_ADDR'" \
    >"$CLUSTER_DIR/held.out" 2>"$CLUSTER_DIR/held.err"
addrs=$(grep -v '^salloc' "$CLUSTER_DIR/held.out" | sort -u | tr '\n' ' ')
if [ "$addrs" = "n3 " ] || { [ -z "$addrs" ] && grep -q "slurmctld did not give the node of task 0" "$CLUSTER_DIR/held.err"; }; then
    ok 0 "one allocation, component 0 over before component 1 asks: rank 0 is n3 or a message, never another node"
else
    ok 1 "one allocation, component 0 over before component 1 asks: rank 0 is n3 or a message, never another node"
    printf '%s\n' "MASTER_ADDR: $addrs" | sed 's/^/#   /'
    grep ctrain "$CLUSTER_DIR/held.err" | head -n 4 | sed 's/^/#   /'
fi
spank_plugstack "$SHIPPED" "verbose"
spank_done
