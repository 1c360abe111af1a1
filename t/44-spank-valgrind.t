#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The plugin's code under valgrind inside slurmstepd (on the node summary of a topology= file, and
# discovering the node in its thread): slurmd n1 starts every slurmstepd under
# valgrind (a wrapper bound over slurmstepd in slurmd's mount namespace), so each step's slurmstepd,
# and each task until it execs the user's program, run the plugin under memcheck. Errors or definite leaks whose stack goes through
# ctrain fail the test. SLURM's own findings (outside ctrain) are not ours to judge and are ignored.
. "$(dirname "$0")/lib/spank.sh"
command -v valgrind >/dev/null 2>&1 || ci_needs "valgrind not installed"
command -v valgrind >/dev/null 2>&1 || { echo "1..0 # SKIP valgrind not installed (scripts/install-deps)"; exit 0; }
spank_plan 7
spank_cluster 1 "topology=$ROOT/t/fixtures/topologies/nvidia-dgx2.xml"
VG="$CLUSTER_DIR/vg"
mkdir -p "$VG"

# Restart slurmd n1 on node n1 as scripts/slurm-cluster starts it, with a wrapper bound over slurmstepd there: every slurmstepd slurmd starts runs
# under valgrind, and so does each task it forks until it execs the user's program. slurmd itself is
# not run under valgrind: SLURM 24.11's slurmd runs its helpers through its own binary
# (/proc/self/exe), which under valgrind is valgrind's tool, and stops ("fatal: main: Unable to
# reliably execute ...").
pidfile="$CLUSTER_DIR/run/slurmd-n1.pid"
old=$(cat "$pidfile")
kill "$old"
for i in $(seq 100); do kill -0 "$old" 2>/dev/null || break; sleep 0.1; done
rm -f "$pidfile"
STEPD=$(command -v slurmstepd || echo /usr/sbin/slurmstepd)
{
    echo '#!/bin/sh'
    echo "exec valgrind --leak-check=full --show-leak-kinds=definite --errors-for-leak-kinds=definite --num-callers=30 \\"
    echo "    --log-file=\"$VG/vg.%p.log\" \"$VG/slurmstepd.real\" \"\$@\""
} >"$VG/slurmstepd"
chmod 755 "$VG/slurmstepd"
: >"$VG/slurmstepd.real"
# On host n1 (its network, hostname and mounts, the PMIx dir among them), in a mount namespace of its own.
"$ROOT/scripts/slurm-cluster" exec "$CLUSTER_DIR" n1 unshare -m --propagation private sh -c \
    'mount --bind "$2" "$1/slurmstepd.real" && mount --bind "$1/slurmstepd" "$2" && exec slurmd -N n1' \
    sh "$VG" "$STEPD" >"$CLUSTER_DIR/log/slurmd-n1.valgrind.log" 2>&1
up=1
for i in $(seq 600); do
    if [ "$(sinfo -h -N -n n1 -o %t 2>/dev/null)" = "idle" ] && [ -s "$pidfile" ]; then up=0; break; fi
    sleep 0.2
done
ok "$up" "slurmd n1 restarted, its slurmstepd under valgrind"

SHOW='echo "$RANK $LOCAL_RANK $WORLD_SIZE $MASTER_PORT $CTRAIN_STRATEGY ${CUDA_VISIBLE_DEVICES-none} $(grep Cpus_allowed_list /proc/self/status | cut -f2)"'
SLURM_STEP_GPUS=2,3 run_srun -n2 --ctrain-strategy=ddp --ctrain-precision=32-true --ctrain-bind=verbose sh -c "$SHOW"
ok "$RC" "a ctrain step runs with slurmstepd under valgrind"
is "$(printf '%s\n' "$OUT" | awk '{print $1, $2, $3, $5}' | sort | tr '\n' ';')" "0 0 2 ddp;1 1 2 ddp;" \
   "the plugin ran: every task has its layout"
run_srun -n1 true
ok "$RC" "a plain step runs with slurmstepd under valgrind"
# The steps above planned on the node summary slurmd n1 wrote from the topology= file at its start
# (ctrain.so's reader and planner under valgrind). No topology= file: that summary is refused (made
# from a file), and hwloc discovers the node in the plugin's thread from init_post_opt to user_init.
spank_plugstack "$SHIPPED" ""
run_srun -n2 --ctrain-strategy=ddp --ctrain-bind=verbose true
ok "$RC" "a ctrain step on the discovered topology (the plugin's discovery thread) runs under valgrind"

# Let the stepds finish and write their leak reports: stop the cluster now (by pid).
"$ROOT/scripts/slurm-cluster" stop "$CLUSTER_DIR" >/dev/null 2>&1
stepd_logs=$(grep -l "Command: .*slurmstepd" "$VG"/vg.*.log 2>/dev/null)
ok "$([ -n "$stepd_logs" ] && echo 0 || echo 1)" "valgrind followed slurmstepd ($(echo $stepd_logs | wc -w) logs)"

# Error blocks (from a "==PID== <kind>" line to the next blank "==PID==" line) that name ctrain.
ours=$(awk '
    /^==[0-9]+== [A-Z]/ && !inblk { blk = $0 "\n"; inblk = 1; next }
    inblk && /^==[0-9]+== *$/ { if (blk ~ /(ctrain\.so|[ (]ct_[a-z_]+ |spank\/|engine\/bind)/ && blk !~ /(HEAP|LEAK) SUMMARY/) print blk; inblk = 0; next }
    inblk { blk = blk $0 "\n" }' $(ls "$VG"/vg.*.log))
if [ -z "$ours" ]; then
    ok 0 "no valgrind error or definite leak in ctrain's code"
else
    ok 1 "no valgrind error or definite leak in ctrain's code"
    printf '%s\n' "$ours" | head -n 40 | sed 's/^/#   /'
fi
spank_done
