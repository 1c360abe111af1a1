#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# --ctrain-preflight: each node's own checks before the step's tasks start, on 3 nodes x 2 GPUs that
# SLURM manages (scripts/slurm-cluster --gpus 2: device files, gres.conf, a topology per node).
# report prints every node's line and runs the step; fail names the bad node in one line and ends
# the step before its programs run; exclude requeues a batch job without the bad node, which then
# runs on the others. A bad node here: a GPU's device file gone (as after a driver fault), a fabric
# the topology shows with no port ACTIVE, a run directory that takes no file, too little memory.
# What checks a GPU held by another process: t/unit/test_nodecheck.c (these device files have no
# driver: nothing can open them).
. "$(dirname "$0")/lib/spank.sh"
spank_needs_fit_data
spank_plan 24
spank_cluster 3 "" --gpus 2
TOPO="$CLUSTER_DIR/gpu/node/topology.xml"
spank_plugstack "$SHIPPED" "topology=$TOPO"
MARK="$CLUSTER_DIR/ran"
mkdir -p "$MARK"
# Each task's program: a moment's wait (the step's other nodes' checks and kill arrive meanwhile),
# then a mark of where it ran.
PROG="sleep 2; touch $MARK/\$(hostname)"
ran() { ls "$MARK" | sort | tr '\n' ' '; }

# Refused at srun: the input named, a hint, nothing launched.
run_srun -N3 --ctrain-preflight=sometimes sh -c "$PROG"
ok "$([ "$RC" -ne 0 ] && echo 0 || echo 1)" "an unknown mode is refused"
like "$ERR" "ctrain: --ctrain-preflight='sometimes': not a preflight mode" "the message names the input"
like "$ERR" "hint: use --ctrain-preflight=report\|fail\|exclude" "and gives the modes"
is "$(ran)" "" "nothing ran"

# report on healthy nodes: one line per node, the step runs.
run_srun -N3 --gres=gpu:2 --ctrain-preflight=report sh -c "$PROG"
ok "$RC" "report on 3 healthy nodes: the step runs"
is "$(printf '%s\n' "$ERR" | grep -c '^ctrain: preflight: node n[123]: ok: 2 GPUs present and free, eth0 up, [0-9]* MiB free$')" 3 \
   "report: each node's line says what passed"
is "$(ran)" "n1 n2 n3 " "every node's program ran"
rm -f "$MARK"/*
run_srun -N1 --ctrain-preflight=report true
like "$ERR" "^ctrain: preflight: node n1: ok: no GPU in this step, eth0 up" "a step without GPUs: said so"

# A GPU's device file gone on n2.
mv "$CLUSTER_DIR/gpu/n2/nvidia1" "$CLUSTER_DIR/gpu/n2.nvidia1.away"
run_srun -N3 --gres=gpu:2 --ctrain-preflight=fail sh -c "$PROG"
ok "$([ "$RC" -ne 0 ] && echo 0 || echo 1)" "fail, n2's GPU 1 gone: the step fails"
is "$(printf '%s\n' "$ERR" | grep -c '^ctrain: preflight: ')" 1 "one line for the one bad node"
like "$ERR" "^ctrain: preflight: node n2: GPU 1 \\($CLUSTER_DIR/gpu/n2/nvidia1\\): no such device file; the step ends before its programs start$" \
   "the line names the node, the GPU, its device file and why"
sleep 2.5
# The bad node's step cancel ends the other nodes' tasks (on SLURM 24.11 only once slurmctld
# resolves srun's host name: scripts/slurm-cluster gives it the cluster's hosts file).
is "$(ran)" "" "no node's program ran to its mark: the step was ended"
run_srun -N3 --gres=gpu:2 --ctrain-preflight=report sh -c "$PROG"
ok "$RC" "report with the same bad node: the step runs"
like "$ERR" "^ctrain: preflight: node n2: GPU 1 .*: no such device file$" "and n2's line says what is wrong"
rm -f "$MARK"/*

# exclude outside a batch job: as fail, and it says why there is no requeue.
run_srun -N3 --gres=gpu:2 --ctrain-preflight=exclude sh -c "$PROG"
like "$ERR" "ctrain: preflight: job [0-9]* not requeued: it is not a batch job" "exclude in srun alone: no requeue, said why"

# exclude in a batch job that may be requeued: n2 excluded, the job runs again on n1 and n3.
j=$(sbatch --parsable -N2 --requeue --gres=gpu:2 -o "$CLUSTER_DIR/job-%j.out" \
    --wrap "srun --gres=gpu:2 --ctrain-preflight=exclude sh -c 'echo ran on \$(hostname)'" 2>"$CLUSTER_DIR/sbatch.err")
for i in $(seq 600); do
    case "$(squeue -h -j "$j" -o '%T %r' 2>/dev/null)" in
        "") break ;;
        "PENDING BeginTime"*) sleep 2; scontrol update JobId="$j" StartTime=now 2>/dev/null ;;
    esac
    sleep 0.25
done
scontrol show job "$j" >"$CLUSTER_DIR/job.txt" 2>&1
like "$(cat "$CLUSTER_DIR/job.txt")" "ExcNodeList=n2" "exclude: n2 is in the job's excluded nodes"
like "$(cat "$CLUSTER_DIR/job.txt")" "Comment=ctrain preflight excluded n2: GPU 1" "and the job's comment says why"
is "$(grep -h '^ran on' "$CLUSTER_DIR"/job-"$j".out 2>/dev/null | sort | tr '\n' ' ')" "ran on n1 ran on n3 " \
   "the requeued job ran on n1 and n3"

# exclude (from #SBATCH, as the steps inherit it) in a job whose body is ctrain supervise: no
# requeue; the supervisor reads n2's line and starts its next step on n1 and the spare n3.
spank_fit_data 1100 200
cat >"$CLUSTER_DIR/sup.sh" <<EOF
#!/bin/sh
#SBATCH --ntasks-per-node=1 --no-kill --requeue --gres=gpu:2 --ctrain-preflight=exclude
"$CTRAIN" supervise --spare-nodes 1 --restart-backoff 0 -- "$CTRAIN" fit --accelerator cpu --strategy ddp --data "$DATA" --hidden 32 \
    --max-steps 6 --progress off --default-root-dir "$CLUSTER_DIR/sup"
echo "supervise exit \$?"
EOF
j=$(sbatch --parsable -N3 -o "$CLUSTER_DIR/sup.out" "$CLUSTER_DIR/sup.sh" 2>"$CLUSTER_DIR/sbatch.err")
for i in $(seq 1200); do
    [ -z "$(squeue -h -j "$j" 2>/dev/null)" ] && break
    sleep 0.25
done
SUP=$(cat "$CLUSTER_DIR/sup.out" "$CLUSTER_DIR/sbatch.err" 2>/dev/null)
like "$SUP" "ctrain: preflight: a step of ctrain supervise: no requeue, the supervisor starts its next step without node n2" \
   "exclude under ctrain supervise: n2's task says the supervisor, not a requeue, keeps n2 out"
like "$SUP" "ctrain: supervise: node n2 failed: GPU 1 .*: no such device file" "the supervisor names n2 from its preflight line"
like "$SUP" "ctrain: supervise: new step on n\[1,3\]" "and starts its next step on n1 and n3"
like "$SUP" "supervise exit 0" "which completes (the job not requeued: $(scontrol show job "$j" | grep -o 'Restarts=[0-9]*'))"
mv "$CLUSTER_DIR/gpu/n2.nvidia1.away" "$CLUSTER_DIR/gpu/n2/nvidia1"

# A fabric the topology shows (mlx5_0) with no port ACTIVE here; a run directory that takes no
# file; more memory asked than is free.
spank_plugstack "$SHIPPED" "topology=$ROOT/t/fixtures/topologies/32em64t-2n8c2t-pci-wholeio.xml"
run_srun -N1 --ctrain-preflight=fail true
like "$ERR" "^ctrain: preflight: node n1: fabric mlx5_0: no port ACTIVE \\(no such device in sysfs\\)" \
   "a fabric without an ACTIVE port is named"
spank_plugstack "$SHIPPED" "topology=$TOPO"
run_srun -N1 --ctrain-preflight=fail,dir=/proc/ctrain-no-such-dir,mem=100000000 true
like "$ERR" "node n1: run directory /proc/ctrain-no-such-dir: cannot create a file .*; memory: [0-9]* MiB available, the step needs 100000000 MiB" \
   "a run directory that takes no file and too little memory, in one line"
spank_done
