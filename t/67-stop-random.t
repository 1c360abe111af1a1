#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Stop signals at random moments and in storms. A signal handler that runs on a thread inside one
# of oneDNN's JIT GEMM kernels writes its frame over the heap (the kernels point rsp into a heap
# workspace: oneDNN #4845), so ctrain reads the stop signals on a thread of its own and blocks
# them everywhere else (engine/trainer/stop.c). Here:
#  1-4. a storm of 2000 SIGUSR1 (or SIGTERM) during training, single device and 2-rank ddp under
#       ctrain's launcher: exit 75 every time, no heap abort, and --ckpt-path last continues to
#       the uninterrupted run's weights bit for bit (before the fix: SIGABRT/SIGSEGV in 6 of 6);
#  5-8. scripts/bench/stop-stress with a few stops per launcher (subprocess, fork, mpirun, srun on
#       a 2-node test cluster) at random moments from start-up to tear-down, the MLP and the GPT,
#       fp32 and bf16-mixed (one pair per launcher), USR1/TERM/INT/a custom requeue signal: each
#       ends 75 and resumes bit for bit (or had finished and exits 0 with the same weights),
#       nothing left running. CTRAIN_T67_STOPS sets the stops per launcher (default 3; 2 under check-asan).
# The long run (200 stops per launcher) is scripts/bench/stop-stress's default; its figures are
# in scripts/bench/README.md.
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B="$ROOT/${CTRAIN_BUILD:-build}"
T=$(mktemp -d /tmp/ctrain-t67-XXXXXX)
P=
trap '[ -n "$P" ] && kill -9 $P 2>/dev/null; pkill -9 -f "^$B/ctrain fit .*$T/" 2>/dev/null; rm -rf "$T"' EXIT
trap 'exit 1' INT TERM HUP PIPE

PLAN=8
echo "1..$PLAN"
root=$ROOT
. "$ROOT/t/lib/preempt.sh"
make_data "$T/data"
unset SLURM_JOB_ID SLURM_JOBID
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
# Under check-asan 2 (the same paths, each launcher still stopped at random moments; ASan's build
# makes each fit several times slower, and the other suites run the 3).
case "${CTRAIN_BUILD:-build}" in *asan*) STRESS_COUNT=${CTRAIN_T67_STOPS:-2} ;; *) STRESS_COUNT=${CTRAIN_T67_STOPS:-3} ;; esac

S="--data $T/data --progress off --deterministic --batch-size 32 --max-epochs 2 --lr-schedule constant"

# storm NAME SIGNAL FLAGS...: fit; once it logs training rows, SIGNAL 2000 times as fast as the
# shell can send it, at the process ctrain was started as; sets rc.
storm() {
    name=$1 sig=$2
    shift 2
    "$B/ctrain" fit "$@" --log-every-n-steps 5 --default-root-dir "$T/$name" >"$T/$name.out" 2>&1 &
    P=$!
    for i in $(seq 600); do
        rows=$(grep -c '^[0-9]' "$T/$name/metrics.csv" 2>/dev/null)
        [ "${rows:-0}" -ge 2 ] && break
        sleep 0.02
    done
    i=0
    while [ $i -lt 2000 ] && kill -"$sig" $P 2>/dev/null; do i=$((i + 1)); done
    wait $P
    rc=$?
    P=
}

# resumed NAME FLAGS...: --ckpt-path last to the end, then the weights against the reference's.
resumed() {
    name=$1
    shift
    "$B/ctrain" fit "$@" --ckpt-path last --default-root-dir "$T/$name" >"$T/$name.resume.out" 2>&1 &&
        "$B/t/st_compare" "$T/ref-$name/last.safetensors" "$T/$name/last.safetensors" >"$T/$name.cmp" 2>&1
}

"$B/ctrain" fit $S --log-every-n-steps 5 --default-root-dir "$T/ref-single" >"$T/ref-single.out" 2>&1 ||
    { sed 's/^/# /' "$T/ref-single.out"; exit 1; }
storm single USR1 $S
[ "$rc" -eq 75 ] && ! grep -q 'corrupted\|double free\|free()\|Process received signal' "$T/single.out"
ok $? "2000 SIGUSR1 during single-device training: exit 75 with the checkpoint, no heap abort (rc $rc)" "$T/single.out"
resumed single $S
ok $? "--ckpt-path last continues it to the uninterrupted run's weights, bit for bit" "$T/single.cmp" "$T/single.resume.out"

D="$S --strategy ddp --devices 2"
"$B/ctrain" fit $D --log-every-n-steps 5 --default-root-dir "$T/ref-ddp" >"$T/ref-ddp.out" 2>&1 ||
    { sed 's/^/# /' "$T/ref-ddp.out"; exit 1; }
storm ddp TERM $D
[ "$rc" -eq 75 ] && ! grep -q 'corrupted\|double free\|free()\|Process received signal\|killed by signal' "$T/ddp.out"
ok $? "2000 SIGTERM at ctrain's launcher during 2-rank ddp: exit 75, no rank aborted (rc $rc)" "$T/ddp.out"
resumed ddp $D
ok $? "2-rank ddp: --ckpt-path last continues to the uninterrupted run's weights, bit for bit" "$T/ddp.cmp" "$T/ddp.resume.out"

# The random moments, through the benchmark script (its own data, runs and checks).
# Each launcher one model and precision (an uninterrupted reference run each), the four pairs over
# the four launchers; the signal drawn per stop.
stress() {    # stress LAUNCHER MODEL PRECISION: the script's summary line and failures as the diagnosis
    "$ROOT/scripts/bench/stop-stress" --launchers "$1" --models "$2" --precisions "$3" --count "$STRESS_COUNT" \
        --seed "${CTRAIN_T67_SEED:-$$}" >"$T/stress-$1.out" 2>&1
}
stress subprocess mlp 32-true
ok $? "$STRESS_COUNT stops at random moments under the subprocess launcher (MLP, 32-true): 75 and bit-for-bit resumes (or finished), nothing left" "$T/stress-subprocess.out"
stress fork gpt bf16-mixed
ok $? "$STRESS_COUNT stops at random moments under the fork launcher (GPT, bf16-mixed)" "$T/stress-fork.out"
if command -v mpirun >/dev/null; then
    stress mpirun mlp bf16-mixed
    ok $? "$STRESS_COUNT stops at random moments under mpirun (MLP, bf16-mixed)" "$T/stress-mpirun.out"
else
    ci_needs "mpirun (openmpi-bin) not installed"
    n=$((n + 1)); echo "ok $n # SKIP mpirun not installed"
fi
if [ "$(id -u)" -eq 0 ] && command -v slurmd >/dev/null 2>&1 || [ -x /usr/sbin/slurmd ]; then
    stress srun gpt 32-true
    st=$?
    if [ "$st" -eq 2 ] && grep -q 'cluster did not start' "$T/stress-srun.out" && grep -q 'cannot run here' "$T/stress-srun.out"; then
        n=$((n + 1)); echo "ok $n # SKIP the test cluster cannot run here: $(tail -n 2 "$T/stress-srun.out" | head -1)"
    else
        ok $st "$STRESS_COUNT stops at random moments under srun --mpi=pmix on 2 test-cluster nodes (GPT, 32-true; scancel --signal)" "$T/stress-srun.out"
    fi
else
    ci_needs "slurmd (slurm-wlm) not installed, or not root"
    n=$((n + 1)); echo "ok $n # SKIP srun needs root and slurm-wlm (the test cluster)"
fi
