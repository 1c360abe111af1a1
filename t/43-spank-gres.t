#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# GPUs that SLURM manages (GRES): 2 nodes x 2 GPUs from scripts/slurm-cluster --gpus 2 (device
# files and gres.conf, each node's topology at the node-local DIR/gpu/node/topology.xml given to
# the plugin as topology=). The plugin uses exactly what SLURM allocated to the step and each task
# (SLURM_STEP_GPUS, global indexes, as SLURM set them), never another GPU; where SLURM binds too
# (--gpus-per-task, --gpu-bind) the answers agree, or the plugin says why they differ.
# The GPUs are device files: nothing here runs on a GPU.
. "$(dirname "$0")/lib/spank.sh"
spank_plan 17
spank_cluster 2 "" --gpus 2
TOPO="$CLUSTER_DIR/gpu/node/topology.xml"
spank_plugstack "$SHIPPED" "topology=$TOPO"
SHOW='echo "$SLURM_PROCID|$SLURM_NODEID|${SLURM_STEP_GPUS-unset}|${CUDA_VISIBLE_DEVICES-unset}"'

# SLURM's own answer (no ctrain option: the plugin leaves the step alone).
run_srun -N1 -n2 --gpus-per-task=1 sh -c "$SHOW"
ok "$RC" "srun --gpus-per-task=1 runs on the GRES cluster"
slurm=$(printf '%s\n' "$OUT" | sort)
is "$(printf '%s\n' "$slurm" | cut -d'|' -f3 | sort | tr '\n' ' ')" "0 1 " "SLURM binds one GPU per task (SLURM_STEP_GPUS 0 and 1)"

run_srun -N1 -n2 --gpus-per-task=1 --ctrain-strategy=ddp --ctrain-bind=verbose sh -c "$SHOW"
ok "$RC" "srun --gpus-per-task=1 --ctrain-strategy=ddp runs"
is "$(printf '%s\n' "$OUT" | sort)" "$slurm" "--gpus-per-task=1: each task's CUDA_VISIBLE_DEVICES is the GPU SLURM bound it to"
is "$(printf '%s\n' "$ERR" | grep -c 'SLURM.*kept')" 0 "the plan and SLURM agree: nothing to explain"

# --gres=gpu:2 without binding: the plan gives each of 2 tasks one of the step's GPUs.
run_srun -N1 -n2 --gres=gpu:2 --ctrain-strategy=ddp sh -c "$SHOW"
is "$(printf '%s\n' "$OUT" | cut -d'|' -f3,4 | sort | tr '\n' ' ')" "0,1|0 0,1|1 " \
   "--gres=gpu:2 -n2: one GPU of the step's two per task"

# --gpus-per-node=2 --gpu-bind=closest over 2 nodes: SLURM gives every task both GPUs of its
# node (one socket here); the plugin gives each task one of those, and says it narrowed SLURM's.
run_srun -N2 -n4 --gpus-per-node=2 --gpu-bind=closest --ctrain-strategy=ddp --ctrain-bind=verbose sh -c "$SHOW"
ok "$RC" "--gpus-per-node=2 --gpu-bind=closest runs"
is "$(printf '%s\n' "$OUT" | cut -d'|' -f2,3,4 | sort | tr '\n' ' ')" "0|0,1|0 0|0,1|1 1|0,1|0 1|0,1|1 " \
   "--gpu-bind=closest: on each node the two tasks get different GPUs, both SLURM's"
is "$(printf '%s\n' "$ERR" | grep -c 'SLURM gave this task GPUs 0,1; ctrain narrows that to [01] ')" 4 \
   "the plugin says where it narrows SLURM's binding, and why"

# SLURM binds a task elsewhere than the plan would (map_gpu): SLURM's binding stands, and why.
run_srun -N1 -n2 --gpus-per-task=1 --gpu-bind=map_gpu:1,0 --ctrain-strategy=ddp --ctrain-bind=verbose sh -c "$SHOW"
is "$(printf '%s\n' "$OUT" | cut -d'|' -f1,3,4 | sort | tr '\n' ' ')" "0|1|1 1|0|0 " \
   "--gpu-bind=map_gpu:1,0: each task keeps the GPU SLURM bound it to"
like "$ERR" "ctrain: bind: rank 0: SLURM bound this task to GPU 1 of the step's 0,1, ctrain's plan chose 0: SLURM's binding is kept" \
   "the plugin says why its plan and SLURM's binding differ"

# A step given part of the job's GPUs: the job has both GPUs of n1, the step one; the other job
# holds the second GPU while the first runs: each step gets only its own.
cat >"$CLUSTER_DIR/part.sh" <<EOF
#!/bin/sh
echo "job \$SLURM_JOB_GPUS"
srun -n1 --gres=gpu:1 --ctrain-strategy=ddp sh -c '$SHOW'
EOF
timeout 120 sbatch --wait -w n1 -N1 --gres=gpu:2 -o "$CLUSTER_DIR/part.out" "$CLUSTER_DIR/part.sh" >/dev/null 2>&1
ok $? "sbatch --gres=gpu:2 with a step of --gres=gpu:1 completes"
step=$(grep -v '^job' "$CLUSTER_DIR/part.out")
is "$(grep '^job' "$CLUSTER_DIR/part.out")" "job 0,1" "the job holds both GPUs of n1"
is "$(printf '%s' "$step" | cut -d'|' -f3,4)" "0|0" "the step of one GPU gets that GPU only (SLURM_STEP_GPUS 0, CUDA_VISIBLE_DEVICES 0)"
(timeout 60 srun -w n1 -n1 --gres=gpu:1 sleep 4 >/dev/null 2>&1 &)
sleep 1.5
run_srun -w n1 -n1 --gres=gpu:1 --ctrain-strategy=ddp sh -c "$SHOW"
is "$(printf '%s' "$OUT" | cut -d'|' -f3,4)" "1|1" \
   "while another job holds GPU 0, a 1-GPU step gets GPU 1: never a GPU SLURM did not allocate to it"

# DDP with GRES: ctrain fit (on CPU: the GPUs are device files) with SLURM's GPUs in the tasks.
if [ -x "$CTRAIN" ] && [ -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] && [ -x "$B/t/idx_subset" ]; then
    DATA="$CLUSTER_DIR/data"
    mkdir -p "$DATA"
    "$B/t/idx_subset" /usr/share/datasets/fashion-mnist "$DATA" 600 100 >/dev/null
    run_srun -N2 -n2 --gpus-per-task=1 --ctrain-strategy=ddp --ctrain-accelerator=cpu --mpi=pmix "$CTRAIN" fit \
        --data "$DATA" --progress off --max-epochs 1 --batch-size 64 --default-root-dir "$CLUSTER_DIR/fit"
    ok "$RC" "srun -N2 --gpus-per-task=1 --ctrain-strategy=ddp ctrain fit trains (accelerator cpu)"
    [ "$RC" -eq 0 ] || printf '%s\n' "$ERR" | tail -n 10 | sed 's/^/#   /'
    like "$(cat "$CLUSTER_DIR/fit/summary.json" 2>/dev/null)" '"world_size":[[:space:]]*2' "DDP over the 2 GRES nodes: world size 2"
else
    skip_rest 17 "ctrain fit, dataset-fashion-mnist or idx_subset missing"
fi
spank_done
