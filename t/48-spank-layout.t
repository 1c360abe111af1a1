#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Where rank 0 is and which port it listens on, as the plugin decides inside slurmstepd over 2
# emulated nodes: heterogeneous steps (srun A : B), an arbitrary distribution, srun --resv-ports'
# ports, a user's MASTER_PORT, a derived port already in use on rank 0's node, and a missing
# topology= file (only ctrain steps read it).
. "$(dirname "$0")/lib/spank.sh"
spank_plan 21
spank_cluster 2 "verbose"
SHOW='echo "$SLURM_PROCID $SLURM_NODEID $SLURM_JOB_ID|$RANK $WORLD_SIZE $NODE_RANK|$MASTER_ADDR|$MASTER_PORT"'

# include/ctrain/envs.h's port rule.
port_for() { echo $((15000 + ((($1 * 2654435761 + $2 * 2246822519) & 0xffffffff) >> 18))); }
# rank0_node JOB: the node the plugin logged as rank 0's for step JOB.0 ("verbose" logs at info).
rank0_node() {
    cat "$CLUSTER_DIR"/log/slurmd-n*.log 2>/dev/null | sed -n "s/.*ctrain: step $1\.0 node .* rank 0 on \([^ ]*\) at .*/\1/p" | sort -u | tr '\n' ' '
}

# A heterogeneous step: component 0 (1 task) on n2, component 1 (2 tasks) on n1.
run_srun --ctrain-strategy=ddp -N1 -n1 -w n2 sh -c "$SHOW" : -N1 -n2 -w n1 sh -c "$SHOW"
ok "$RC" "a heterogeneous step runs"
[ "$RC" -eq 0 ] || printf '%s\n' "$ERR" | head -n 10 | sed 's/^/#   /'
is "$(printf '%s\n' "$OUT" | cut -d'|' -f2 | sort | tr '\n' ' ')" "0 3 0 1 3 1 2 3 1 " \
   "heterogeneous: RANK 0, 1, 2 once each, WORLD_SIZE 3 everywhere, NODE_RANK with the component's offset"
is "$(printf '%s\n' "$OUT" | awk -F'|' '{ split($1, s, " "); split($2, r, " "); if (s[1] != r[1]) print "rank " r[1] " is SLURM_PROCID " s[1] }')" "" \
   "heterogeneous: every RANK is the task's SLURM_PROCID"
is "$(printf '%s\n' "$OUT" | cut -d'|' -f3,4 | sort -u | wc -l)" 1 "heterogeneous: one MASTER_ADDR and MASTER_PORT for both components"
job=$(printf '%s\n' "$OUT" | head -n 1 | cut -d'|' -f1 | awk '{print $3}')
is "$(printf '%s\n' "$OUT" | cut -d'|' -f4 | sort -u)" "$(port_for "$job" 0)" "heterogeneous: the port of the leader's job id"
is "$(rank0_node "$job")" "n2 " "heterogeneous: rank 0's node is component 0's (n2), on both nodes"

# -m arbitrary with n2 first: task 0 runs on n2, the second node of the step's list. (No -N: SLURM
# 24.11 refuses --nodes with --distribution=arbitrary; the host list says it.)
run_srun --ctrain-strategy=ddp -n3 -m arbitrary -w n2,n1,n1 sh -c "$SHOW"
job=$(printf '%s\n' "$OUT" | head -n 1 | cut -d'|' -f1 | awk '{print $3}')
is "$(printf '%s\n' "$OUT" | grep '^0 ' | awk '{print $2}')" 1 "-m arbitrary: SLURM put task 0 on node 1 (n2)"
is "$(rank0_node "$job")" "n2 " "-m arbitrary: the plugin names n2 as rank 0's node, on both nodes"
run_srun --ctrain-strategy=ddp -N2 -n2 sh -c "$SHOW"
job=$(printf '%s\n' "$OUT" | head -n 1 | cut -d'|' -f1 | awk '{print $3}')
is "$(rank0_node "$job")" "n1 " "block distribution: rank 0's node is the first (n1)"

# srun --resv-ports gives the step SLURM_STEP_RESV_PORTS (this cluster reserves none: set here).
SLURM_STEP_RESV_PORTS=41234-41236 run_srun --ctrain-strategy=ddp -N2 -n2 sh -c "$SHOW"
is "$(printf '%s\n' "$OUT" | cut -d'|' -f4 | sort -u)" "41234" "SLURM_STEP_RESV_PORTS: MASTER_PORT is its first port"
MASTER_ADDR=head MASTER_PORT=23456 run_srun --ctrain-strategy=ddp -N2 -n2 sh -c "$SHOW"
is "$(printf '%s\n' "$OUT" | cut -d'|' -f3,4 | sort -u)" "head|23456" "a user's MASTER_ADDR and MASTER_PORT are kept"

# The port the next step derives, already taken on rank 0's node (n1): rank 0 fails.
next=$((job + 3))
busy=$(port_for "$next" 0)
"$ROOT/scripts/slurm-cluster" exec "$CLUSTER_DIR" n1 python3 -c "import socket,sys,time; s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(('0.0.0.0', $busy)); s.listen(1); print('up', flush=True); time.sleep(120)" >"$CLUSTER_DIR/listener.out" 2>&1 &
lpid=$!
for i in 1 2 3 4 5 6 7 8 9 10; do grep -q up "$CLUSTER_DIR/listener.out" 2>/dev/null && break; sleep 0.2; done
run_srun --ctrain-strategy=ddp -N1 -n1 sh -c "$SHOW"
kill "$lpid" 2>/dev/null
wait "$lpid" 2>/dev/null
if [ "$RC" -ne 0 ] && printf '%s' "$ERR" | grep -q "ctrain: error: MASTER_PORT $busy derived for this step is in use on rank 0's node"; then
    ok 0 "a derived port in use on rank 0's node fails the step, naming the port, with a hint"
else
    ok 1 "a derived port in use on rank 0's node fails the step, naming the port, with a hint"
    printf '%s\n' "rc=$RC next job $next port $busy" "$OUT" "$ERR" | head -n 8 | sed 's/^/#   /'
fi
like "$ERR" "ctrain: hint: .*--resv-ports" "the hint names srun --resv-ports"

# Each node's slurmd wrote its own node summary at its start (its /run/ctrain), and each node's
# binding was planned on it ("verbose" logs at info).
run_srun -N2 -n2 --ctrain-strategy=ddp sh -c 'echo $SLURM_JOB_ID'
job=$(printf '%s\n' "$OUT" | head -n 1)
is "$(cat "$CLUSTER_DIR"/log/slurmd-n*.log | grep -c "ctrain: step $job\.0 node [01]: .*binding planned (topology from the node summary)")" 2 \
   "each node's binding planned on the node summary its slurmd wrote"
# summary=none: hwloc's discovery in a thread of each slurmstepd from init_post_opt to user_init
# (spank/remote_bind.c), each node's binding planned on it.
spank_plugstack "$SHIPPED" "verbose summary=none"
run_srun -N2 -n2 --ctrain-strategy=ddp sh -c 'echo $SLURM_JOB_ID'
job=$(printf '%s\n' "$OUT" | head -n 1)
is "$(cat "$CLUSTER_DIR"/log/slurmd-n*.log | grep -c "ctrain: step $job\.0 node [01]: .*binding planned (topology discovered ahead)")" 2 \
   "summary=none: each node's binding planned on the topology its discovery thread found while slurmstepd set the step up"
spank_plugstack "$SHIPPED" "verbose"

# Root trusts no job variable for the ids and names it asks slurmctld about (issue 40 item 1):
# forge_env.so stands in for a modified srun, rewriting the job's environment before ctrain.so
# reads it in slurmstepd. Another job's step (job $other, on n2) is there to be read; the forged
# SLURM_JOB_ID names it, SLURM_HET_SIZE/SLURM_PACK_SIZE and SLURM_STEP_NUM_TASKS claim a
# heterogeneous step, the node lists name n2 or names slurmctld does not know. The plugin still
# asks about its own step only: rank 0 on n1, the port of its own job id.
timeout 60 srun -N1 -n1 -w n2 --job-name=other sleep 20 >/dev/null 2>&1 &
spid=$!
other=""
for i in $(seq 1 50); do
    other=$(squeue -h -n other -t R -o %i 2>/dev/null | head -n 1)
    [ -n "$other" ] && break
    sleep 0.2
done
printf '%s\n%s\n' "optional $B/t/forge_env.so" "$SHIPPED $PLUGIN verbose" >"$CLUSTER_DIR/plugstack.conf"
CT_TEST_FORGE="SLURM_JOB_ID=$other SLURM_HET_SIZE=2 SLURM_PACK_SIZE=2 SLURM_STEP_NUM_TASKS=2 SLURM_STEP_NODELIST=n2 \
SLURM_JOB_NODELIST_HET_GROUP_0=n2 SLURM_NODELIST=n2 SLURM_JOB_NODELIST=n2" \
    run_srun --ctrain-strategy=ddp -N1 -n1 -w n1 --job-name=forged true
mine=$(grep -h "ctrain: step [0-9]*\.0 node 0: " "$CLUSTER_DIR"/log/slurmd-n1.log | tail -n 1 | sed 's/.*ctrain: step \([0-9]*\)\..*/\1/')
like "$(grep -h "ctrain: step $mine\.0 node 0: " "$CLUSTER_DIR"/log/slurmd-n1.log)" \
     "rank 0 on n1 at [^ ]*:$(port_for "$mine" 0)" \
     "forged SLURM_JOB_ID=$other, SLURM_HET_SIZE, SLURM_STEP_NUM_TASKS, node lists: root read its own step $mine (rank 0 on n1, its port)"
# (Its job started after job $other's: a step logged before it, or none, is not the forged one.)
ok "$([ -n "$other" ] && [ "${mine:-0}" -gt "$other" ] && ! grep -q "ctrain: step $other\.0 node" "$CLUSTER_DIR"/log/slurmd-n*.log; echo $?)" \
   "... a step after job $other's, and never job $other's step"
CT_TEST_FORGE="SLURM_STEP_NODELIST=nosuch1 SLURM_NODELIST=nosuch1 SLURM_JOB_NODELIST=nosuch1" \
    run_srun --ctrain-strategy=ddp -N1 -n1 -w n1 true
# (The task itself then refuses its own inconsistent variables: n1 is not in its node list.)
mine=$(grep -h "ctrain: step [0-9]*\.0 node 0: " "$CLUSTER_DIR"/log/slurmd-n1.log | tail -n 1 | sed 's/.*ctrain: step \([0-9]*\)\..*/\1/')
if [ "$mine" -gt "$((other + 1))" ] && [ "$(rank0_node "$mine")" = "n1 " ] && ! printf '%s' "$ERR" | grep -q nosuch1; then
    ok 0 "forged node lists naming a node slurmctld does not know: never asked about, rank 0 is n1 from SLURM's layout"
else
    ok 1 "forged node lists naming a node slurmctld does not know: never asked about, rank 0 is n1 from SLURM's layout"
    printf '%s\n' "step $mine, after job $other" "$ERR" | head -n 8 | sed 's/^/#   /'
fi
kill "$spid" 2>/dev/null
wait "$spid" 2>/dev/null

# A heterogeneous step whose component 0 (n2) is over before component 1's slurmstepd (n1, held
# 3 s by forge_env.so) asks where task 0 ran: slurmctld knows the step no more, its job's record
# still says.
CT_TEST_HOLD="n1 3" run_srun --ctrain-strategy=ddp -N1 -n1 -w n2 true : -N1 -n2 -w n1 sh -c "$SHOW"
is "$RC $(printf '%s\n' "$OUT" | cut -d'|' -f2,3 | sort | tr '\n' ' ')" "0 1 3 1|n2 2 3 1|n2 " \
   "heterogeneous, component 0 over before component 1 starts: ranks 1 and 2 still get rank 0's node (n2)"
[ "$RC" -eq 0 ] || printf '%s\n' "$ERR" | grep ctrain | head -n 4 | sed 's/^/#   /'
spank_plugstack "$SHIPPED" "verbose"

# topology= naming a missing file: steps without ctrain run; ctrain steps fail naming it.
spank_plugstack "$SHIPPED" "topology=/nonexistent/topology.xml"
run_srun -N2 -n2 true
ok "$RC" "topology= missing: a step without --ctrain-* runs"
run_srun -N1 -n1 --ctrain-strategy=ddp true
if [ "$RC" -ne 0 ] && printf '%s' "$ERR" | grep -q "ctrain: error: topology file '/nonexistent/topology.xml'"; then
    ok 0 "topology= missing: a ctrain step fails with the file named"
else
    ok 1 "topology= missing: a ctrain step fails with the file named"
    printf '%s\n' "rc=$RC" "$ERR" | head -n 6 | sed 's/^/#   /'
fi

spank_done
