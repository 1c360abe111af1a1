#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Every rank of a run reads the checkpoint it resumes (or tests) itself; they must read the same
# bytes. Two ranks started by mpirun with different files under --ckpt-path (what a run directory
# local to each node gives) stop before training with a message on every rank, exit 2; a rank that
# cannot read it at all is named by rank 0 at once instead of leaving it waiting in a collective.
# The digest the loader computes is checked in t/unit/test_checkpoint.c.
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B="$ROOT/${CTRAIN_BUILD:-build}"
T=$(mktemp -d /tmp/ctrain-t66-XXXXXX)
trap 'rm -rf "$T"' EXIT
trap 'exit 1' INT TERM HUP PIPE

PLAN=3
echo "1..$PLAN"
root=$ROOT
. "$ROOT/t/lib/preempt.sh"
if ! command -v mpirun >/dev/null 2>&1; then
    ci_needs "mpirun (openmpi-bin) not installed"
    skip_all "mpirun not installed"
fi
make_data "$T/data"
unset SLURM_JOB_ID SLURM_JOBID
export OPENBLAS_NUM_THREADS=1

# Two checkpoints of the same run settings at the same epoch boundary, different weights (--lr).
F="--data $T/data --progress plain --log-every-n-steps 1000 --batch-size 64"
for lr in 0.001 0.003; do
    "$B/ctrain" fit $F --max-epochs 1 --lr $lr --default-root-dir "$T/lr$lr" >"$T/lr$lr.out" 2>&1 ||
        { sed 's/^/# /' "$T/lr$lr.out"; exit 1; }
done
MPI="mpirun --allow-run-as-root --oversubscribe"
R="--strategy ddp --max-epochs 2 --collective-timeout 120"
# Each rank its own --ckpt-path through one command: mpirun's MPMD form (-np 1 A : -np 1 B) makes
# Open MPI 5.0.7's prterun crash (segfault, Debian 13) before it starts anything.
cat >"$T/per-rank" <<'EOF'
#!/bin/sh
r=${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:-0}}
if [ "$r" = 0 ]; then c=$1; else c=$2; fi
shift 2
exec "$@" --ckpt-path "$c"
EOF
chmod +x "$T/per-rank"

timeout 100 $MPI -np 2 "$T/per-rank" "$T/lr0.001/last.safetensors" "$T/lr0.003/last.safetensors" \
    "$B/ctrain" fit $F $R --default-root-dir "$T/r1" >"$T/r1.out" 2>&1
rc=$?
# the two ranks' messages may share a line (their stderr interleaves): count matches, not lines
[ $rc -ne 0 ] && [ $rc -ne 124 ] && [ "$(grep -o 'read other bytes than rank 0' "$T/r1.out" | wc -l)" -eq 2 ] &&
    ! grep -q 'fit done' "$T/r1.out"
ok $? "ranks that read different checkpoints stop before training, both saying why (exit $rc)" "$T/r1.out"

timeout 100 $MPI -np 2 "$T/per-rank" "$T/lr0.001/last.safetensors" "$T/none/last.safetensors" \
    "$B/ctrain" fit $F $R --default-root-dir "$T/r2" >"$T/r2.out" 2>&1
rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q '1 of 2 ranks could not load it' "$T/r2.out"
ok $? "a rank that cannot read it: rank 0 says 1 of 2 ranks could not load it (exit $rc)" "$T/r2.out"

timeout 100 $MPI -np 2 "$B/ctrain" fit $F $R --ckpt-path "$T/lr0.001/last.safetensors" --default-root-dir "$T/r3" \
    >"$T/r3.out" 2>&1 && grep -q 'resumed from' "$T/r3.out"
ok $? "the same checkpoint on both ranks resumes" "$T/r3.out"
