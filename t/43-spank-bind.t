#!/bin/sh
# Binding applied by the plugin inside slurmstepd: on this machine's own topology and with
# topology=FILE, always what `ctrain bind` plans for the step's allowed CPUs, never outside them.
. "$(dirname "$0")/lib/spank.sh"
spank_plan 14
spank_cluster 1 ""
DGX="$ROOT/t/fixtures/topologies/nvidia-dgx2.xml"
SHOW='echo "$SLURM_LOCALID|$(grep Cpus_allowed_list /proc/self/status | cut -f2)|${OMP_NUM_THREADS-unset}|${CUDA_VISIBLE_DEVICES-unset}"'

# The CPUs a plain task may use: the step's allowed set.
run_srun -n1 sh -c 'grep Cpus_allowed_list /proc/self/status | cut -f2'
ALLOWED=$OUT

# planned TOPOLOGY-ARGS...: "local|cpulist|threads" per task, from ctrain bind (the planner).
planned() {
    "$CTRAIN" bind --cpus "$ALLOWED" "$@" | awk '
        /^task/ { split($2, a, ":"); t = a[1]; cpus = $4; th = $NF }
        /why:/ { print t "|" cpus "|" th }'
}
# as_list "0,1,2,5" -> "0-2,5" (the kernel's Cpus_allowed_list form)
as_list() {
    echo "$1" | tr ',' '\n' | awk 'NR==1{s=p=$1;next} $1==p+1{p=$1;next} {printf "%s%s,", s, (s==p?"":"-" p); s=p=$1} END{printf "%s%s\n", s, (s==p?"":"-" p)}'
}
expect() {
    planned "$@" | while IFS='|' read -r t cpus th; do echo "$t|$(as_list "$cpus")|$th"; done
}

run_srun -n2 --ctrain-strategy=ddp --ctrain-bind=verbose sh -c "$SHOW"
ok "$RC" "srun -n2 --ctrain-bind=verbose runs"
is "$(printf '%s\n' "$OUT" | cut -d'|' -f1-3 | sort)" "$(expect --tasks 2 | sort)" \
   "each task's CPU affinity and OMP_NUM_THREADS are the planner's for this machine"
is "$(printf '%s\n' "$ERR" | grep -c '^ctrain: bind: rank [01] ')" 2 "--ctrain-bind=verbose prints each task's binding"
like "$ERR" "ctrain: bind: rank 0 .*cpus .*: " "the verbose line gives the reason"
is "$(printf '%s\n' "$OUT" | cut -d'|' -f4 | sort -u)" "unset" "no GPU managed by SLURM here: CUDA_VISIBLE_DEVICES untouched"

OMP_NUM_THREADS=7 run_srun -n2 --ctrain-strategy=ddp sh -c "$SHOW"
is "$(printf '%s\n' "$OUT" | cut -d'|' -f3 | sort -u)" "7" "a user's OMP_NUM_THREADS is kept"

run_srun -n2 --ctrain-strategy=ddp --ctrain-bind=none sh -c "$SHOW"
is "$(printf '%s\n' "$OUT" | cut -d'|' -f2,3 | sort -u)" "$ALLOWED|unset" "--ctrain-bind=none: affinity and threads untouched"

spank_plugstack required "bind=none"
run_srun -n2 --ctrain-strategy=ddp sh -c "$SHOW"
is "$(printf '%s\n' "$OUT" | cut -d'|' -f2 | sort -u)" "$ALLOWED" "site bind=none: no binding by default"
run_srun -n2 --ctrain-strategy=ddp --ctrain-bind=closest sh -c "$SHOW"
is "$(printf '%s\n' "$OUT" | cut -d'|' -f1-3 | sort)" "$(expect --tasks 2 | sort)" "--ctrain-bind=closest overrides the site's bind=none"

# topology=FILE: the DGX-2 file; SLURM_STEP_GPUS stands for the GPUs SLURM gave the step.
spank_plugstack required "topology=$DGX"
SLURM_STEP_GPUS=3,5 run_srun -n2 --ctrain-strategy=ddp sh -c "$SHOW"
ok "$RC" "topology=FILE: the step runs"
uuid3=$(grep -A6 '"nvml3"' "$DGX" | sed -n 's/.*NVIDIAUUID" value="\([^"]*\)".*/\1/p')
uuid5=$(grep -A6 '"nvml5"' "$DGX" | sed -n 's/.*NVIDIAUUID" value="\([^"]*\)".*/\1/p')
is "$(printf '%s\n' "$OUT" | cut -d'|' -f1,4 | sort | tr '\n' ' ')" "0|$uuid3 1|$uuid5 " \
   "topology=FILE: each task gets one of the step's GPUs (3 and 5), by UUID"
is "$(printf '%s\n' "$OUT" | cut -d'|' -f1-3 | sort)" "$(expect --topology "$DGX" --tasks 2 --gpus 3,5 | sort)" \
   "topology=FILE: CPUs are the planner's for the file, inside the allowed CPUs"
run_srun -n2 --ctrain-strategy=ddp sh -c "$SHOW"
is "$(printf '%s\n' "$OUT" | cut -d'|' -f4 | sort -u)" "unset" "no GPU given by SLURM: no GPU handed out"

# An unreadable topology on the node: each task fails with the plugin's message, nothing runs.
spank_plugstack required "topology=/etc/hostname"
rm -f "$CLUSTER_DIR/ran"
run_srun -n1 --ctrain-strategy=ddp touch "$CLUSTER_DIR/ran"
if [ "$RC" -ne 0 ] && [ ! -e "$CLUSTER_DIR/ran" ] && printf '%s' "$ERR" | grep -q "ctrain: .*hostname.*hwloc XML"; then
    ok 0 "a topology file that is not hwloc XML fails the step with the plugin's message"
else
    ok 1 "a topology file that is not hwloc XML fails the step with the plugin's message"
    printf '%s\n' "rc=$RC" "$ERR" | head -n 8 | sed 's/^/#   /'
fi

spank_done
