# SPDX-License-Identifier: BSD-3-Clause
# Shared by the t/4x-spank-*.t tests: a SLURM test cluster with build/ctrain.so in its
# plugstack.conf, TAP helpers, and cleanup by pid on exit (scripts/slurm-cluster stop).
#
#   . "$(dirname "$0")/lib/spank.sh"
#   spank_plan 12                      # 1..12, or "1..0 # SKIP reason" when a cluster cannot run here
#   spank_cluster 2 "bind=closest"     # start 2 nodes, plugin line "$SHIPPED ctrain.so bind=closest"
#   spank_cluster 2 "" --gpus 2        # more scripts/slurm-cluster start options (GPUs SLURM manages)
#   spank_plugstack "$SHIPPED" "verbose" # rewrite the plugstack line (srun and slurmstepd read it per step)
#
# SHIPPED is the control flag of the line the package installs (scripts/plugstack.conf.d/ctrain.conf,
# `optional`): the tests run the plugin as sites run it, and name `required` where it differs.
#   ok "$cond" "name"; is "$got" "$want" "name"

ROOT=$(cd "$(dirname "$0")/.." && pwd)
B="$ROOT/${CTRAIN_BUILD:-build}"
PLUGIN="$B/ctrain.so"
. "$ROOT/t/lib/ci.sh"
CTRAIN="$B/ctrain"
SHIPPED=$(awk '$1 == "optional" || $1 == "required" { print $1; exit }' "$ROOT/scripts/plugstack.conf.d/ctrain.conf")
T_PLAN=0
CLUSTER_DIR=""
T_N=0
T_FAILED=0

cleanup() {
    if [ -n "$CLUSTER_DIR" ]; then
        "$ROOT/scripts/slurm-cluster" stop "$CLUSTER_DIR" >/dev/null 2>&1
        rm -rf "$CLUSTER_DIR"
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ok() {    # ok STATUS NAME: STATUS 0 passes
    T_N=$((T_N + 1))
    if [ "$1" -eq 0 ]; then
        echo "ok $T_N - $2"
    else
        echo "not ok $T_N - $2"
        T_FAILED=1
    fi
}

is() {    # is GOT WANT NAME
    if [ "$1" = "$2" ]; then
        ok 0 "$3"
    else
        ok 1 "$3"
        printf '#   got:  %s\n#   want: %s\n' "$1" "$2" | head -n 20
    fi
}

like() {  # like TEXT PATTERN NAME (grep -E)
    if printf '%s\n' "$1" | grep -Eq -- "$2"; then
        ok 0 "$3"
    else
        ok 1 "$3"
        printf '%s\n' "$1" | head -n 15 | sed 's/^/#   /'
        echo "#   wanted: /$2/"
    fi
}

skip_rest() {  # skip_rest TOTAL REASON
    while [ "$T_N" -lt "$1" ]; do
        T_N=$((T_N + 1))
        echo "ok $T_N # SKIP $2"
    done
}

# Why a cluster cannot run here, or "" when it can.
spank_cannot_run() {
    [ "$(id -u)" -eq 0 ] || { echo "needs root to run slurmd"; return; }
    command -v slurmctld >/dev/null 2>&1 || { ci_needs "slurm-wlm not installed"; echo "slurm-wlm not installed"; return; }
    [ -f "$PLUGIN" ] || { echo "$PLUGIN not built (make)"; return; }
    echo ""
}

# spank_needs_fit_data: before spank_plan, SKIP the file (a failure under CI for the package) unless
# `ctrain fit`, the tools it names and dataset-fashion-mnist are here. spank_fit_data TRAIN TEST: after
# spank_cluster, a subset of that many images in DATA ($CLUSTER_DIR/data), which every node reads.
FMNIST=/usr/share/datasets/fashion-mnist
spank_needs_fit_data() {
    local tool
    if [ ! -x "$CTRAIN" ] || ! "$CTRAIN" fit --help >/dev/null 2>&1; then
        echo "1..0 # SKIP 'ctrain fit' is not built ($CTRAIN fit --help fails)"
        exit 0
    fi
    for tool in idx_subset "$@"; do
        [ -x "$B/t/$tool" ] || { echo "1..0 # SKIP $B/t/$tool not built (make tests)"; exit 0; }
    done
    if [ ! -f "$FMNIST/train-images-idx3-ubyte.gz" ]; then
        ci_needs "dataset-fashion-mnist not installed"
        echo "1..0 # SKIP dataset-fashion-mnist not installed"
        exit 0
    fi
}
spank_fit_data() {
    DATA="$CLUSTER_DIR/data"
    mkdir -p "$DATA" && "$B/t/idx_subset" "$FMNIST" "$DATA" "$1" "$2" >/dev/null || exit 1
}

spank_plan() {
    local why
    why=$(spank_cannot_run)
    if [ -n "$why" ]; then
        echo "1..0 # SKIP $why"
        exit 0
    fi
    T_PLAN=$1
    echo "1..$1"
}

# spank_plugstack required|optional "ARGS": the plugstack.conf line of the running cluster.
# (slurmstepd reads it; so does srun unless spank_login_plugstack gave srun its own.)
spank_plugstack() {
    echo "$1 $PLUGIN $2" >"$CLUSTER_DIR/plugstack.conf"
}

# spank_login_plugstack required|optional "ARGS": a login node's plugstack.conf that differs from the
# nodes': srun, sbatch and salloc read it (SLURM_CONF names a copy of slurm.conf pointing at it);
# slurmstepd keeps reading plugstack.conf. spank_login_plugstack with no arguments ends the difference.
spank_login_plugstack() {
    if [ $# -eq 0 ]; then
        export SLURM_CONF="$CLUSTER_DIR/slurm.conf"
        return
    fi
    echo "$1 $PLUGIN $2" >"$CLUSTER_DIR/login.plugstack.conf"
    sed "s|^PlugStackConfig=.*|PlugStackConfig=$CLUSTER_DIR/login.plugstack.conf|" "$CLUSTER_DIR/slurm.conf" \
        >"$CLUSTER_DIR/login.slurm.conf"
    export SLURM_CONF="$CLUSTER_DIR/login.slurm.conf"
}

# spank_cluster NODES "ARGS" [START-OPTIONS...]: start the cluster (bails out of the test when it
# cannot start).
spank_cluster() {
    local nodes=$1 args=$2 ps rc
    shift 2
    CLUSTER_DIR=$(mktemp -d /tmp/ct-spank.XXXXXX)
    ps="$CLUSTER_DIR.plugstack"
    echo "$SHIPPED $PLUGIN $args" >"$ps"
    "$ROOT/scripts/slurm-cluster" start "$CLUSTER_DIR" --nodes "$nodes" --plugstack "$ps" "$@" \
        >"$CLUSTER_DIR.start.log" 2>&1
    rc=$?
    rm -f "$ps"
    if [ "$rc" -eq 3 ]; then    # cannot run here (not root, SLURM or munge missing)
        skip_rest "$T_PLAN" "no SLURM test cluster here: $(tail -n 1 "$CLUSTER_DIR.start.log")"
        rm -f "$CLUSTER_DIR.start.log"
        exit 0
    fi
    if [ "$rc" -ne 0 ]; then
        sed 's/^/# /' "$CLUSTER_DIR.start.log"
        rm -f "$CLUSTER_DIR.start.log"
        echo "Bail out! SLURM test cluster did not start (status $rc)"
        exit 1
    fi
    rm -f "$CLUSTER_DIR.start.log"
    . "$CLUSTER_DIR/env"
}

# run_srun ARGS...: srun with a time limit; sets OUT (stdout), ERR (stderr), RC.
run_srun() {
    local o="$CLUSTER_DIR/out.$$" e="$CLUSTER_DIR/err.$$"
    timeout 60 srun "$@" >"$o" 2>"$e"
    RC=$?
    OUT=$(cat "$o")
    ERR=$(cat "$e")
    rm -f "$o" "$e"
}

spank_done() {
    exit "$T_FAILED"
}
