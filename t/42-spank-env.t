#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Every task's environment over 2 emulated nodes x 2 tasks, one rendezvous per step, sbatch
# options, the site default strategy, and a step without ctrain options left untouched.
. "$(dirname "$0")/lib/spank.sh"
spank_plan 16
spank_cluster 2 ""

SHOW='echo "$SLURM_PROCID $SLURM_LOCALID $SLURM_NODEID $SLURM_JOB_ID $SLURM_STEP_ID|$RANK $LOCAL_RANK $WORLD_SIZE $LOCAL_WORLD_SIZE $NODE_RANK $GROUP_RANK|$MASTER_ADDR|$MASTER_PORT|$CTRAIN_STRATEGY $CTRAIN_ACCELERATOR $CTRAIN_PRECISION"'
run_srun -N2 -n4 --ctrain-strategy=ddp --ctrain-accelerator=cpu --ctrain-precision=32-true sh -c "$SHOW"
ok "$RC" "srun -N2 -n4 --ctrain-strategy=ddp runs"
[ "$RC" -eq 0 ] || printf '%s\n' "$ERR" | head -n 10 | sed 's/^/#   /'
is "$(printf '%s\n' "$OUT" | grep -c '|')" 4 "four tasks reported"

# Rank 0's node is n1: its name where the other nodes resolve it (each node's /etc/hosts names
# every node), else the NodeAddr the plugin asks SLURM for.
if "$ROOT/scripts/slurm-cluster" exec "$CLUSTER_DIR" n2 getent hosts n1 >/dev/null 2>&1; then
    want_addr=n1
else
    want_addr=$(scontrol show node n1 | sed -n 's/.*NodeAddr=\([^ ]*\).*/\1/p')
fi
for r in 0 1 2 3; do
    line=$(printf '%s\n' "$OUT" | grep "^$r ")
    set -- $(printf '%s' "$line" | cut -d'|' -f1)
    procid=$1 localid=$2 nodeid=$3 jobid=$4 stepid=$5
    is "$(printf '%s' "$line" | cut -d'|' -f2,5)" \
       "$procid $localid 4 2 $nodeid $nodeid|ddp cpu 32-true" \
       "rank $r: RANK LOCAL_RANK WORLD_SIZE LOCAL_WORLD_SIZE NODE_RANK GROUP_RANK and CTRAIN_*"
done
is "$(printf '%s\n' "$OUT" | cut -d'|' -f1 | awk '{print $3}' | sort | uniq -c | awk '{print $1}' | tr '\n' ' ')" \
   "2 2 " "two tasks on each of the two nodes"
is "$(printf '%s\n' "$OUT" | cut -d'|' -f3 | sort -u)" "$want_addr" "one MASTER_ADDR for the step: rank 0's node ($want_addr)"
# include/ctrain/envs.h's port rule.
port_for() { echo $(($3 + ((($1 * 2654435761 + $2 * 2246822519) & 0xffffffff) >> 18))); }
want_port=$(port_for "$jobid" "$stepid" 15000)
is "$(printf '%s\n' "$OUT" | cut -d'|' -f4 | sort -u)" "$want_port" \
   "one MASTER_PORT for the step: 15000 + hash(job id, step id) mod 16384"

# port_base moves the ports.
spank_plugstack "$SHIPPED" "port_base=20000"
run_srun -N2 -n4 --ctrain-strategy=ddp sh -c "$SHOW"
set -- $(printf '%s\n' "$OUT" | head -n 1 | cut -d'|' -f1)
is "$(printf '%s\n' "$OUT" | cut -d'|' -f4 | sort -u)" "$(port_for "$4" "$5" 20000)" "port_base=20000 is used"

# A step without ctrain options: the same variable names as with no plugin at all, same affinity.
NAMES='env | cut -d= -f1 | grep -v -E "^(SLURM_JOB_ID|SLURM_JOBID|SLURM_STEP_ID|SLURM_STEPID|SLURM_TASK_PID|SLURM_LAUNCH_NODE_IPADDR|SLURM_SRUN_COMM_PORT|SLURM_STEP_LAUNCHER_PORT|PWD|OLDPWD|_)$" | sort | tr "\n" " "; grep Cpus_allowed_list /proc/self/status'
# One output file per task (%t): the two tasks' long lines must not interleave.
spank_plugstack "$SHIPPED" ""
run_srun -N2 -n2 --output="$CLUSTER_DIR/with.%t" sh -c "$NAMES"
rc_with=$RC
echo "" >"$CLUSTER_DIR/plugstack.conf"
run_srun -N2 -n2 --output="$CLUSTER_DIR/without.%t" sh -c "$NAMES"
ok $((RC + rc_with)) "plain steps run with and without the plugin"
is "$(cat "$CLUSTER_DIR"/with.* | sort -u)" "$(cat "$CLUSTER_DIR"/without.* | sort -u)" \
   "a step without ctrain options is untouched (same variables, same CPU affinity)"

# The site default makes every step ctrain's.
spank_plugstack "$SHIPPED" "default_strategy=ddp"
run_srun -N2 -n2 sh -c 'echo "$RANK $WORLD_SIZE $CTRAIN_STRATEGY"'
is "$(printf '%s\n' "$OUT" | sort | tr '\n' ';')" "0 2 ddp;1 2 ddp;" "default_strategy=ddp: a step without options gets the layout"

# sbatch: #SBATCH --ctrain-* reaches the steps; the batch script itself is not touched.
spank_plugstack "$SHIPPED" ""
cat >"$CLUSTER_DIR/job.sh" <<'EOS'
#!/bin/sh
#SBATCH -N2 -n4
#SBATCH --ctrain-strategy=ddp
#SBATCH --ctrain-precision=32-true
echo "batch ${RANK-unset} ${CTRAIN_STRATEGY-unset}"
srun sh -c 'echo "step $RANK $WORLD_SIZE $LOCAL_RANK $CTRAIN_STRATEGY $CTRAIN_PRECISION"' | sort
EOS
timeout 120 sbatch --wait -o "$CLUSTER_DIR/job.out" "$CLUSTER_DIR/job.sh" >/dev/null 2>"$CLUSTER_DIR/job.err"
ok $? "sbatch with #SBATCH --ctrain-strategy=ddp completes"
is "$(grep '^batch' "$CLUSTER_DIR/job.out")" "batch unset unset" "the batch script itself gets no ctrain variables"
is "$(grep '^step' "$CLUSTER_DIR/job.out" | tr '\n' ';')" \
   "step 0 4 0 ddp 32-true;step 1 4 1 ddp 32-true;step 2 4 0 ddp 32-true;step 3 4 1 ddp 32-true;" \
   "srun inside the batch script gets #SBATCH's ctrain options and the layout"

spank_done
