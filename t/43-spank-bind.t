#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Binding applied by the plugin inside slurmstepd: on this machine's own topology and with
# topology=FILE, always what `ctrain bind` plans for the step's allowed CPUs, never outside them.
. "$(dirname "$0")/lib/spank.sh"
spank_plan 46
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

# hwloc's discovery runs in a thread of each slurmstepd from init_post_opt to user_init
# (spank/remote.c), off the launch path; it is joined before any task starts.
run_srun -n2 --ctrain-strategy=ddp sh -c 'cat /proc/$PPID/comm /proc/$PPID/task/*/comm | LC_ALL=C sort -u | tr "\n" " "'
like "$OUT" "slurmstepd" "the task's parent is its slurmstepd"
! printf '%s\n' "$OUT" | grep -q ctrain-topology
ok $? "no ctrain-topology thread left in slurmstepd when the tasks run ($OUT)"

# hwloc (and libudev) is ctrain-bind.so's, loaded from ctrain.so's directory only into the
# slurmstepd of a step that binds (spank/bind.h): never into srun, nor a step that does not bind.
# (Debian's slurmstepd links libhwloc itself: there the planner is what a step without binding spares.)
MAPS='grep -o "ctrain[-a-z]*\.so" /proc/$PPID/maps | LC_ALL=C sort -u | tr "\n" " "'
run_srun -n1 --ctrain-strategy=ddp sh -c "$MAPS"
is "$OUT" "ctrain.so " "a step that binds on the node summary: no ctrain-bind.so (nor hwloc) in its slurmstepd"
spank_plugstack "$SHIPPED" "summary=none"
run_srun -n1 --ctrain-strategy=ddp sh -c "$MAPS"
is "$OUT" "ctrain-bind.so ctrain.so " "summary=none: a step that binds loads ctrain-bind.so and discovers"
spank_plugstack "$SHIPPED" ""
run_srun -n1 --ctrain-strategy=ddp --ctrain-bind=none sh -c "$MAPS"
is "$OUT" "ctrain.so " "--ctrain-bind=none: no ctrain-bind.so in the step's slurmstepd"
run_srun -n1 sh -c "$MAPS"
is "$OUT" "ctrain.so " "a step without --ctrain options: no ctrain-bind.so in its slurmstepd"
# srun_maps ARGS: what srun ARGS sleep 3 maps of ctrain's and hwloc's, once its step runs. SLURM's own
# libraries may bring hwloc into srun (a release whose srun links it): the baseline is srun without
# the plugin, which ctrain.so must not change.
srun_maps() {
    local p i
    srun -n1 "$@" sleep 3 >/dev/null 2>&1 &
    p=$!
    for i in $(seq 100); do squeue -h -s -o %i 2>/dev/null | grep -q '\.0$' && break; sleep 0.1; done
    grep -o 'ctrain[-a-z]*\.so\|libhwloc\|libudev' "/proc/$p/maps" 2>/dev/null | LC_ALL=C sort -u | tr '\n' ' '
    wait "$p" 2>/dev/null
}
: >"$CLUSTER_DIR/plugstack.conf"
BASE=$(srun_maps)
spank_plugstack "$SHIPPED" ""
is "$(srun_maps --ctrain-strategy=ddp)" "ctrain.so $BASE" "srun loads ctrain.so and no hwloc or libudev with it"
needed() { objdump -p "$1" | awk '$1 == "NEEDED" { print $2 }' | LC_ALL=C sort | tr '\n' ' '; }
exported() { nm -D --defined-only "$1" | awk '{ print $3 }' | LC_ALL=C sort | tr '\n' ' '; }
is "$(needed "$PLUGIN" | grep -o 'lib\(hwloc\|udev\|xml2\)[^ ]*')" "" "ctrain.so links no hwloc, libudev or libxml2 ($(needed "$PLUGIN"))"
is "$(exported "$PLUGIN" | sed 's/slurm_spank_[a-z_]* //g')" "plugin_name plugin_type plugin_version spank_plugin_version " \
   "ctrain.so exports only the SPANK symbols (spank/ctrain.map)"
is "$(exported "$B/ctrain-bind.so")" "ct_spank_bind_table " "ctrain-bind.so exports only its table"

OMP_NUM_THREADS=7 run_srun -n2 --ctrain-strategy=ddp sh -c "$SHOW"
is "$(printf '%s\n' "$OUT" | cut -d'|' -f3 | sort -u)" "7" "a user's OMP_NUM_THREADS is kept"

run_srun -n2 --ctrain-strategy=ddp --ctrain-bind=none sh -c "$SHOW"
is "$(printf '%s\n' "$OUT" | cut -d'|' -f2,3 | sort -u)" "$ALLOWED|unset" "--ctrain-bind=none: affinity and threads untouched"

spank_plugstack "$SHIPPED" "bind=none"
run_srun -n2 --ctrain-strategy=ddp sh -c "$SHOW"
is "$(printf '%s\n' "$OUT" | cut -d'|' -f2 | sort -u)" "$ALLOWED" "site bind=none: no binding by default"
run_srun -n2 --ctrain-strategy=ddp --ctrain-bind=closest sh -c "$SHOW"
is "$(printf '%s\n' "$OUT" | cut -d'|' -f1-3 | sort)" "$(expect --tasks 2 | sort)" "--ctrain-bind=closest overrides the site's bind=none"

# The node summary: slurmd wrote it at its start (its /run/ctrain is the cluster's run/ctrain-n1),
# root's, 0644. A step plans from it, and binds as hwloc's discovery does; removed, corrupted,
# another node's, or without one of the step's CPUs, the step says why once in slurmd's log,
# discovers, and binds the same.
SUMMARY="$CLUSTER_DIR/run/ctrain-n1/node-n1.summary"
SLURMD_LOG="$CLUSTER_DIR/log/slurmd-n1.log"
is "$(stat -c '%U %a' "$SUMMARY" 2>&1)" "root 644" "slurmd wrote the node summary at its start, root's, mode 0644"
cp -p "$SUMMARY" "$CLUSTER_DIR/summary.good"
spank_plugstack "$SHIPPED" "verbose"
# bound CASE: each task's "local|cpus|threads" of a 2-task step, and slurmd's log lines of that step.
bound() {
    local before
    before=$(wc -l <"$SLURMD_LOG")
    run_srun -n2 --ctrain-strategy=ddp sh -c "$SHOW"
    BOUND=$(printf '%s\n' "$OUT" | cut -d'|' -f1-3 | sort)
    STEPLOG=$(tail -n +"$((before + 1))" "$SLURMD_LOG")
}
bound
is "$BOUND" "$(expect --tasks 2 | sort)" "planned on the node summary: the planner's binding for this machine"
like "$STEPLOG" "binding planned \(topology from the node summary\)" "slurmd's log: the step planned from the node summary"
# edit FILE PERL: the summary's bytes ($d) changed by PERL, its FNV-1a checksum (offset 16 of
# engine/bind/node_summary.h's head, counted as zero) made to match: what this node's slurmd would
# have written had it seen what PERL makes it say. Offsets: host at 96 (64 bytes); the head is 1240
# bytes on x86-64 and arm64, and the allowed PUs' set (set 0) follows it.
edit() {
    perl -e 'open(my $f, "+<", $ARGV[0]) or die; binmode $f; local $/; our $d = <$f>; eval $ARGV[1]; die $@ if $@;
        substr($d, 16, 8) = "\0" x 8;
        { use integer; my $h = unpack("q", pack("Q", 0xcbf29ce484222325));
          for my $c (unpack("C*", $d)) { $h ^= $c; $h *= 0x100000001b3; }
          substr($d, 16, 8) = pack("q", $h); }
        seek($f, 0, 0); print $f $d; close $f or die' "$1" "$2"
}
# flip FILE: one byte past the head (the CPU sets, devices and OS indexes), at a random place
# among the last 32, changed.
flip() {
    perl -e 'open(my $f, "+<", $ARGV[0]) or die; binmode $f; my $at = (-s $ARGV[0]) - 1 - int(rand(32));
        seek($f, $at, 0); read($f, my $c, 1); seek($f, $at, 0); print $f chr(ord($c) ^ 0x5a); close $f or die' "$1"
}
for how in removed corrupt foreign narrower; do
    case $how in
    removed) rm -f "$SUMMARY"; why="reading the node summary /run/ctrain/node-n1.summary failed" ;;
    corrupt) cp -p "$CLUSTER_DIR/summary.good" "$SUMMARY"; flip "$SUMMARY"; why="checksum does not match" ;;
    foreign) cp -p "$CLUSTER_DIR/summary.good" "$SUMMARY"
             edit "$SUMMARY" 'substr($d, 96, 64) = pack("a64", "n9")'; why="another node wrote it" ;;
    narrower) cp -p "$CLUSTER_DIR/summary.good" "$SUMMARY"   # slurmd's CPUs at its start lacked one
             edit "$SUMMARY" 'my $w = unpack("Q", substr($d, 1240, 8)); substr($d, 1240, 8) = pack("Q", $w & ($w - 1))'
             why="does not cover this step's CPUs" ;;
    esac
    bound
    is "$BOUND" "$(expect --tasks 2 | sort)" "summary $how: the step discovers and binds the same"
    is "$(printf '%s\n' "$STEPLOG" | grep -c "node 0: .*$why.*hwloc's discovery instead")" 1 \
       "summary $how: slurmd's log says why, once"
done
cp -p "$CLUSTER_DIR/summary.good" "$SUMMARY"
spank_plugstack "$SHIPPED" ""

# topology=FILE: the DGX-2 file; SLURM_STEP_GPUS stands for the GPUs SLURM gave the step.
spank_plugstack "$SHIPPED" "topology=$DGX"
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

# A batch script's SLURM_JOB_GPUS reaches a step without GPUs (srun --gres=none): no GPU for it.
SLURM_JOB_GPUS=0,1 run_srun -n2 --ctrain-strategy=ddp sh -c "$SHOW"
is "$(printf '%s\n' "$OUT" | cut -d'|' -f4 | sort -u)" "unset" "a stale SLURM_JOB_GPUS without SLURM_STEP_GPUS: no GPU handed out"

# ctrain bind --json and the plugin agree on CPUs, GPUs, the NIC (UCX_NET_DEVICES: the node's own
# interface instead when the topology's is not on this machine, see t/42-spank-net.t) and the
# node-wide NCCL_IB_HCA, on published machines: HPE's EX235a (MI250X GCDs, Slingshot) and a dual
# socket with InfiniBand and Ethernet (its Tesla GPUs are found by PCI class).
NET='echo "$SLURM_LOCALID|$(grep Cpus_allowed_list /proc/self/status | cut -f2)|${CUDA_VISIBLE_DEVICES-unset}|${UCX_NET_DEVICES-unset}|${NCCL_IB_HCA-unset}"'
from_json() {   # from_json TOPOLOGY GPUS TASKS: "local|cpus|cuda|ucx|nccl" per task, as the plugin would set
    "$CTRAIN" bind --json --cpus "$ALLOWED" --topology "$1" --gpus "$2" --tasks "$3" | perl -MJSON::PP -e '
        my $p = decode_json(join("", <STDIN>));
        for my $t (@{ $p->{tasks} }) {
            my @c = @{ $t->{cpus} }; my @r; my ($s, $e);
            for my $c (@c, -2) { if (defined $e && $c == $e + 1) { $e = $c; next }
                push @r, (defined $s ? ($s == $e ? $s : "$s-$e") : ()); $s = $e = $c }
            # An interface the topology names but the node lacks (a test-cluster node has eth0
            # only): the node address'"'"'s, eth0.
            my $ucx = $t->{ucx_net_devices} // "unset";
            $ucx = "eth0" if $ucx !~ /:/ && $ucx ne "unset";
            print join("|", $t->{local_rank}, join(",", @r), $t->{cuda_visible_devices},
                       $ucx, $p->{nccl_ib_hca} // "unset"), "\n" }'
}
for case in "llnl-tioga.xml 0,1" "24em64t-2n6c2t-pci.xml 1,2"; do
    set -- $case
    spank_plugstack "$SHIPPED" "topology=$ROOT/t/fixtures/topologies/$1"
    SLURM_STEP_GPUS=$2 run_srun -n2 --ctrain-strategy=ddp sh -c "$NET"
    is "$(printf '%s\n' "$OUT" | sort)" "$(from_json "$ROOT/t/fixtures/topologies/$1" "$2" 2 | sort)" \
       "topology=$1, GPUs $2: the plugin sets what ctrain bind --json plans"
done
like "$(printf '%s\n' "$OUT" | cut -d'|' -f5 | sort -u)" "^=mlx4_0$" "one NCCL_IB_HCA list for every task of the node"
like "$(printf '%s\n' "$OUT" | cut -d'|' -f4 | sort -u)" "^mlx4_0:1$" "UCX_NET_DEVICES: the task's HCA and port"
# SLURM's gres/gpu numbers a step's GPUs from 0 (CUDA_VISIBLE_DEVICES=0,1 beside SLURM_STEP_GPUS=1,2)
# exactly when ConstrainDevices=yes hides the others: the plan's GPUs are then numbered the same way.
SLURM_STEP_GPUS=1,2 CUDA_VISIBLE_DEVICES=0,1 run_srun -n2 --ctrain-strategy=ddp sh -c "$NET"
is "$(printf '%s\n' "$OUT" | cut -d'|' -f1,3 | sort | tr '\n' ' ')" "0|0 1|1 " \
   "GPUs 1 and 2 numbered 0 and 1 when SLURM numbers the step's GPUs from 0"
SLURM_STEP_GPUS=1,2 CUDA_VISIBLE_DEVICES=1,2 run_srun -n2 --ctrain-strategy=ddp sh -c "$NET"
is "$(printf '%s\n' "$OUT" | cut -d'|' -f1,3 | sort | tr '\n' ' ')" "0|1 1|2 " \
   "GPUs 1 and 2 keep their node-wide indexes when SLURM uses those"
UCX_NET_DEVICES=eth0 NCCL_IB_HCA=mlx5 SLURM_STEP_GPUS=1,2 run_srun -n2 --ctrain-strategy=ddp sh -c "$NET"
is "$(printf '%s\n' "$OUT" | cut -d'|' -f4,5 | sort -u)" "eth0|mlx5" "a user's UCX_NET_DEVICES and NCCL_IB_HCA are kept"

# An unreadable topology on the node: each task fails with the plugin's message, nothing runs.
spank_plugstack "$SHIPPED" "topology=/etc/hostname"
rm -f "$CLUSTER_DIR/ran"
run_srun -n1 --ctrain-strategy=ddp touch "$CLUSTER_DIR/ran"
if [ "$RC" -ne 0 ] && [ ! -e "$CLUSTER_DIR/ran" ] && printf '%s' "$ERR" | grep -q "ctrain: .*hostname.*hwloc XML"; then
    ok 0 "a topology file that is not hwloc XML fails the step with the plugin's message"
else
    ok 1 "a topology file that is not hwloc XML fails the step with the plugin's message"
    printf '%s\n' "rc=$RC" "$ERR" | head -n 8 | sed 's/^/#   /'
fi

# ctrain.so installed without its planner: a step on the summary binds; without the summary a step
# that binds fails with the path and a hint, nothing runs; a step that does not bind runs (it never
# loads the planner).
mkdir -p "$CLUSTER_DIR/alone"
cp "$PLUGIN" "$CLUSTER_DIR/alone/ctrain.so"
echo "$SHIPPED $CLUSTER_DIR/alone/ctrain.so" >"$CLUSTER_DIR/plugstack.conf"
run_srun -n2 --ctrain-strategy=ddp sh -c "$SHOW"
is "$(printf '%s\n' "$OUT" | cut -d'|' -f1-3 | sort)" "$(expect --tasks 2 | sort)" \
   "no ctrain-bind.so beside ctrain.so: a step binds on the node summary all the same"
echo "$SHIPPED $CLUSTER_DIR/alone/ctrain.so summary=none" >"$CLUSTER_DIR/plugstack.conf"
rm -f "$CLUSTER_DIR/ran"
run_srun -n1 --ctrain-strategy=ddp touch "$CLUSTER_DIR/ran"
if [ "$RC" -ne 0 ] && [ ! -e "$CLUSTER_DIR/ran" ] &&
   printf '%s' "$ERR" | grep -q "ctrain: error: loading the binding planner $CLUSTER_DIR/alone/ctrain-bind.so failed" &&
   printf '%s' "$ERR" | grep -q "ctrain: hint: install ctrain-bind.so beside ctrain.so"; then
    ok 0 "no ctrain-bind.so beside ctrain.so: a step that binds fails naming it, with a hint"
else
    ok 1 "no ctrain-bind.so beside ctrain.so: a step that binds fails naming it, with a hint"
    printf '%s\n' "rc=$RC" "$ERR" | head -n 8 | sed 's/^/#   /'
fi
run_srun -n1 --ctrain-strategy=ddp --ctrain-bind=none sh -c 'echo $RANK'
is "$RC $OUT" "0 0" "no ctrain-bind.so: a step with --ctrain-bind=none runs"

spank_done
