# SPDX-License-Identifier: BSD-3-Clause
# Shared by the preemption and fault tests (t/60, t/62, t/63): TAP helpers, the checks that decide
# whether a SLURM test can run here, and the test cluster with a small Fashion-MNIST subset.
# The caller sets root (repository), B (build dir) and PLAN (its number of tests) before sourcing.

. "$root/t/lib/ci.sh"
. "$root/t/lib/tap.sh"

skip_all() {    # skip_all REASON: every planned test skipped, exit 0
    i=1
    while [ "$i" -le "$PLAN" ]; do
        echo "ok $i # SKIP $1"
        i=$((i + 1))
    done
    exit 0
}

make_data() {    # make_data DIR: 6000 training and 1000 test images of the real data in DIR
    [ -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] ||
        ci_needs "dataset-fashion-mnist not installed"
    [ -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] ||
        skip_all "dataset-fashion-mnist not installed"
    mkdir -p "$1"
    "$B/t/idx_subset" /usr/share/datasets/fashion-mnist "$1" 6000 1000 >/dev/null || exit 1
}

require_slurm() {    # skip unless a test cluster can run here
    [ "$(id -u)" -eq 0 ] || skip_all "needs root to start slurmd (run make test as root)"
    for b in slurmctld slurmd srun sbatch scancel munged; do
        command -v "$b" >/dev/null 2>&1 || [ -x "/usr/sbin/$b" ] || ci_needs "$b not installed"
        command -v "$b" >/dev/null 2>&1 || [ -x "/usr/sbin/$b" ] ||
            skip_all "$b not installed (scripts/install-deps installs slurm-wlm and munge)"
    done
    [ -x "$B/ctrain" ] || { echo "Bail out! $B/ctrain is not built (run make)"; exit 1; }
}

start_cluster() {    # start_cluster DIR: data in DIR/data, a one-node cluster in DIR/c, its env sourced
    make_data "$1/data"
    "$root/scripts/slurm-cluster" start "$1/c" >"$1/start.out" 2>&1
    st=$?
    [ "$st" -eq 3 ] && skip_all "scripts/slurm-cluster cannot run here: $(tail -n 1 "$1/start.out")"
    if [ "$st" -ne 0 ]; then
        sed 's/^/# /' "$1/start.out"
        echo "Bail out! the test cluster did not start"
        exit 1
    fi
    . "$1/c/env"
}
