#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# GPUs whose driver minors do not follow the PCI bus (scripts/slurm-cluster --gpus 2 --gpu-minors 1,0):
# the GPU at PCI 0000:01:00.0 is /dev/nvidia1, the one at 0000:02:00.0 is /dev/nvidia0, as the
# node's /proc/driver/nvidia/gpus/*/information says. gres.conf lists nvidia[0-1], so SLURM's GPU 0
# (SLURM_STEP_GPUS, a gres index) is /dev/nvidia0: the second GPU in PCI order, while SLURM's own
# CUDA_VISIBLE_DEVICES=0 counts the first. The plugin binds the GPU of the device file SLURM
# allocated, names it by its PCI position, and says why it differs from SLURM's numbers.
# The GPUs are device files: nothing here runs on a GPU.
. "$(dirname "$0")/lib/spank.sh"
spank_plan 12
spank_cluster 1 "" --gpus 2 --gpu-minors 1,0
TOPO="$CLUSTER_DIR/gpu/node/topology.xml"
spank_plugstack "$SHIPPED" "topology=$TOPO"
SHOW='echo "$SLURM_PROCID|${SLURM_STEP_GPUS-unset}|${CUDA_VISIBLE_DEVICES-unset}|${CUDA_DEVICE_ORDER-unset}"'

# The node's driver table, as the plugin reads it (in the node's mount namespace).
info=$("$ROOT/scripts/slurm-cluster" exec "$CLUSTER_DIR" n1 sh -c 'grep -H "Device Minor" /proc/driver/nvidia/gpus/*/information')
like "$info" "gpus/0000:02:00.0/information:Device Minor:[[:space:]]+0" "node n1: the driver puts minor 0 at PCI 0000:02:00.0"

# SLURM's answer alone: its numbers, and CUDA_VISIBLE_DEVICES counting them as PCI positions.
run_srun -n2 --gpus-per-task=1 sh -c "$SHOW"
ok "$RC" "srun --gpus-per-task=1 runs"
is "$(printf '%s\n' "$OUT" | cut -d'|' -f2,3 | sort | tr '\n' ' ')" "0|0 1|1 " "SLURM: task GPU 0 gets CUDA_VISIBLE_DEVICES=0"

# With the plugin: each task gets the GPU of its device file (gres index 0 = nvidia0 = PCI 02 = position 1).
run_srun -n2 --gpus-per-task=1 --ctrain-strategy=ddp --ctrain-bind=verbose sh -c "$SHOW"
ok "$RC" "srun --gpus-per-task=1 --ctrain-strategy=ddp runs"
is "$(printf '%s\n' "$OUT" | cut -d'|' -f2,3,4 | sort | tr '\n' ' ')" "0|1|PCI_BUS_ID 1|0|PCI_BUS_ID " \
   "each task's CUDA_VISIBLE_DEVICES names the GPU whose minor SLURM gave it (PCI order)"
like "$ERR" "SLURM's GPU 0 is nvidia0, at PCI 0000:02:00.0 \\(the driver's table\\): GPU 1 in PCI order, where SLURM's CUDA_VISIBLE_DEVICES counts GPU 0" \
   "the plugin says why its numbers differ from SLURM's, naming the GPU's PCI id"
like "$ERR" "SLURM bound this task to GPU 0 \\(1 in PCI order\\)" "the task's binding is SLURM's, by the GPU's PCI position"

# No SLURM binding per task: the plan spreads the step's two GPUs, both SLURM's.
run_srun -n2 --gres=gpu:2 --ctrain-strategy=ddp sh -c "$SHOW"
is "$(printf '%s\n' "$OUT" | cut -d'|' -f2,3 | sort | tr '\n' ' ')" "0,1|0 0,1|1 " "--gres=gpu:2 -n2: one GPU per task"

# A step of one GPU: SLURM gives gres index 0, /dev/nvidia0: the GPU at PCI 02, position 1, only that one.
run_srun -n1 --gres=gpu:1 --ctrain-strategy=ddp --ctrain-bind=verbose sh -c "$SHOW"
ok "$RC" "srun --gres=gpu:1 runs"
is "$(printf '%s' "$OUT" | cut -d'|' -f2,3)" "0|1" "a 1-GPU step: CUDA_VISIBLE_DEVICES names the GPU of nvidia0 (PCI 0000:02:00.0), never the other"
like "$ERR" "ctrain binds the GPUs of the device files SLURM allocated" "the step's message names the reason"

# A topology without that PCI device: an error naming SLURM's GPU and the bus, nothing launched.
sed 's/0000:02:00.0/0000:09:00.0/' "$CLUSTER_DIR/gpu/n1/topology.xml" >"$CLUSTER_DIR/other.xml"
spank_plugstack "$SHIPPED" "topology=$CLUSTER_DIR/other.xml"
run_srun -n1 --gres=gpu:1 --ctrain-strategy=ddp sh -c "$SHOW"
like "$ERR" "SLURM's GPU 0 is nvidia0 at PCI 0000:02:00.0, which the topology has no GPU at" \
   "a GPU the topology lacks: the step fails and says which"
spank_done
