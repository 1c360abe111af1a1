# SPDX-License-Identifier: BSD-3-Clause
# Shared by the ddp tests t/36-*.t and up (sourced after lib/launch.sh): a small Fashion-MNIST
# subset, the fit flags that keep each run short, and finding one rank's pid to kill it.

CTRAIN="$T/../${CTRAIN_BUILD:-build}/ctrain"
. "$T/lib/ci.sh"
FMNIST=/usr/share/datasets/fashion-mnist

# skip_all N REASON: the plan and N skips
skip_all() {
    echo "1..$1"
    i=0
    while [ $i -lt "$1" ]; do i=$((i + 1)); echo "ok $i # SKIP $2"; done
    exit 0
}

# make_data: $tmp/data with 6000 training images (5500 after 1/12 is held out) and 1000 test images
make_data() {
    [ -f "$FMNIST/train-images-idx3-ubyte.gz" ] || { ci_needs "dataset-fashion-mnist not installed"; return 1; }
    mkdir -p "$tmp/data" && "$B/idx_subset" "$FMNIST" "$tmp/data" 6000 1000 >/dev/null
}

# start_srun_cluster N NODES: a SLURM test cluster of NODES nodes in $cluster, stopped by pid on
# exit; prints the plan of N tests (all skipped where no cluster can run, all failed where it did
# not start) and sources its env so srun talks to it.
start_srun_cluster() {
    root_dir=$(cd "$T/.." && pwd)
    cluster=$(mktemp -d /tmp/ctrain-slurm.XXXXXX)
    trap 'cd "$root_dir" && scripts/slurm-cluster stop "$cluster" >/dev/null 2>&1; rm -rf "$cluster"; cleanup' EXIT
    (cd "$root_dir" && scripts/slurm-cluster start "$cluster" --nodes "$2") >"$tmp/cluster" 2>&1
    st=$?
    [ $st -eq 3 ] && skip_all "$1" "no SLURM test cluster here: $(tail -n 1 "$tmp/cluster")"
    echo "1..$1"
    if [ $st -ne 0 ]; then
        for i in $(seq "$1"); do echo "not ok $i - the SLURM test cluster did not start"; done
        diag "$tmp/cluster"
        exit 1
    fi
    . "$cluster/env"
}

# Short runs: one small hidden layer, batch 64 per rank, no progress output.
FIT_FLAGS="--progress off --hidden 64 --batch-size 64"

# json KEY FILE: a number from summary.json
json() { sed -n "s/.*\"$1\":[[:space:]]*\([0-9.e+-]*\).*/\1/p" "$2" | head -1; }

# procs_with MARK: pids of the processes whose command line contains MARK (a test's unique
# --default-root-dir), one a line
procs_with() {
    for c in /proc/[0-9]*/cmdline; do
        if { tr '\0' ' ' <"$c"; } 2>/dev/null | grep -qF -- "$1"; then p=${c#/proc/}; echo "${p%/cmdline}"; fi
    done
}

# rank_pid MARK VAR VALUE: the pid among procs_with MARK whose environment has VAR=VALUE
# (SLURM_PROCID under srun, OMPI_COMM_WORLD_RANK under mpirun, PMIX_RANK under ctrain's launcher)
rank_pid() {
    for p in $(procs_with "$1"); do
        if { tr '\0' '\n' <"/proc/$p/environ"; } 2>/dev/null | grep -qx "$2=$3"; then echo "$p"; return 0; fi
    done
    return 1
}

# wait_training DIR SECONDS: until rank 0 has logged a training row in DIR/metrics.csv
wait_training() {
    i=0
    while [ "$(cat "$1/metrics.csv" 2>/dev/null | grep -c '^[0-9]')" -lt 1 ]; do
        i=$((i + 1))
        [ $i -gt $(($2 * 10)) ] && return 1
        sleep 0.1
    done
    return 0
}

# wait_gone SECONDS PID...: until none of the pids exists; fails after SECONDS
wait_gone() {
    s=$1
    shift
    i=0
    while ! all_gone "$@"; do
        i=$((i + 1))
        [ $i -gt $((s * 10)) ] && return 1
        sleep 0.1
    done
    return 0
}

# kill_and_time VICTIM LAUNCHER PID...: SIGKILL the rank VICTIM, wait for the LAUNCHER process (srun,
# mpirun, ctrain) and for every PID to be gone. Sets rc (the launcher's exit status), took (seconds
# from the kill to the launcher's exit) and gone (0 when every PID went within 5 s).
kill_and_time() {
    victim=$1
    launcher=$2
    shift 2
    t0=$(now)
    kill -KILL "$victim"
    wait "$launcher"
    rc=$?
    took=$(elapsed "$t0")
    wait_gone 5 "$@"
    gone=$?
}

# curve_diff A B (t/39-*; set TOL and TOL_EARLY): compare metrics.csv rows step by step; prints
# the largest relative difference of the first two training losses, of all training losses and of the validation losses, and of
# val_acc (absolute); fails when the steps logged differ or a difference is over its tolerance.
curve_diff() {
    paste -d, "$1/metrics.csv" "$2/metrics.csv" | awk -F, -v tol="$TOL" -v early="$TOL_EARLY" '
        function rel(a, b) { d = a - b; if (d < 0) d = -d; return d / (a < 0 ? -a : a) }
        NR == 1 { o = NF / 2; next }    # the columns of B start at o + 1
        $1 != $(o + 1) || ($3 == "") != ($(o + 3) == "") { bad = 1; next }
        $3 != "" { rows++; r = rel($3, $(o + 3)); if (r > mt) mt = r; if (rows <= 2 && r > me) me = r }
        $4 != "" { vrows++; r = rel($4, $(o + 4)); if (r > mv) mv = r; a = $5 - $(o + 5); if (a < 0) a = -a; if (a > ma) ma = a }
        END {
            printf "rows %d+%d, first rows %.1e, train loss %.1e, val loss %.1e, val_acc %.4f\n", rows, vrows, me, mt, mv, ma
            exit !(!bad && rows >= 17 && vrows == 2 && me <= early && mt <= tol && mv <= tol && ma <= 0.01)
        }'
}
