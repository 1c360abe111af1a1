#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# ctrain on aarch64 (make test-arm64): the arm64 build (scripts/arm64 make, build-arm64/) run under
# qemu-aarch64 with the arm64 Debian 12 root's libraries (scripts/arm64 run), on a model of a Grace
# node's CPU (QEMU's `max` held to 128-bit SVE vectors, as Neoverse V2 has: scripts/arm64).
#   - the programs and libraries are aarch64 ELF files (ctrain, libctrain.so, ctrain.so, ctrain-bind.so)
#   - every unit test (build-arm64/t/test_*) passes, two at a time
#   - ctrain tokenize writes the same token shards as the x86-64 build
#   - a 20-step fit of the MLP and of the GPT (32-true, one thread) follow the x86-64 build's native
#     fit: every step's train_loss and the val_loss and test_loss within TOL (below)
#   - the SPANK plugin in Debian's arm64 SLURM (srun, sbatch; 22.05): on a `required` plugstack line
#     it loads, --help lists its options with their text, and its option callback refuses a bad
#     --ctrain-strategy with its hint before anything is allocated. slurmd is not run: a step's
#     slurmstepd is exec'd by slurmd, which under qemu-user needs binfmt_misc (not on CI machines).
# The x86-64 references run natively from build/ (make builds it first).
# One job of the queue below, run by xargs as "$0 --job NAME": a unit test (its TAP in T/NAME.tap)
# or fit-MODEL (the x86-64 fit, then the arm64 one); exit status in T/NAME.rc (and T/x86-MODEL.rc,
# T/arm-MODEL.rc), seconds in T/NAME.s.
if [ "${1:-}" = --job ]; then
    t0=$(date +%s)
    case $2 in
        fit-*)
            m=${2#fit-}
            eval "args=\$FIT_$m"
            # shellcheck disable=SC2086,SC2154
            "$B/ctrain" $args $COMMON --default-root-dir "$T/x86-$m" >"$T/x86-$m.out" 2>&1
            echo $? >"$T/x86-$m.rc"
            # shellcheck disable=SC2086
            timeout -k 10 600 "$ARM64" run "$A/ctrain" $args $COMMON --default-root-dir "$T/arm-$m" >"$T/arm-$m.out" 2>&1
            echo $? >"$T/arm-$m.rc"
            ;;
        *)
            CT_TOPOLOGIES="$ROOT/t/fixtures/topologies" timeout -k 10 600 "$ARM64" run "$A/t/$2" >"$T/$2.tap" 2>&1
            echo $? >"$T/$2.rc"
            ;;
    esac
    echo $(($(date +%s) - t0)) >"$T/$2.s"
    exit 0
fi
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
B="$ROOT/${CTRAIN_BUILD:-build}"
A="$ROOT/build-arm64"
ARM64="$ROOT/scripts/arm64"
FMNIST=/usr/share/datasets/fashion-mnist
JOBS=${TEST_JOBS_ARM64:-2}
. "$ROOT/t/lib/ci.sh"
T=$(mktemp -d /tmp/ctrain-arm64-XXXXXX)
trap 'rm -rf "$T"' EXIT
n=0
ok() {    # ok STATUS NAME [FILE]: on failure the end of FILE becomes TAP comments
    n=$((n + 1))
    if [ "$1" -eq 0 ]; then
        echo "ok $n - $2"
    else
        echo "not ok $n - $2"
        [ -n "${3:-}" ] && tail -n 15 "$3" | sed 's/^/#   /'
    fi
}

# Relative tolerance of the arm64 fit against the x86-64 one, 32-true both: the same fp32 arithmetic
# through other kernels (oneDNN's and OpenBLAS's aarch64 code against x86-64's AVX-512/AVX2, glibc's
# scalar expf against libmvec's vector one, other FMA contraction), so only the rounding differs and
# it grows a little over 20 AdamW steps. Measured: train_loss at most 2.0e-7 apart (the GPT; the MLP's
# agreed in every printed digit), val_loss and test_loss 4.2e-8 (MLP) and 1.3e-8 (GPT). 1e-5 is 50
# times the largest, and a wrong result is far outside it: a seed off by one moves the first step's
# loss by 5.2e-3 (MLP) and 1.1e-2 (GPT), val_loss by 6.0e-2 and 3.0e-3. train_loss is compared as
# metrics.csv prints it (6 decimals: below 1e-6 relative at these losses), val_loss and test_loss at
# summary.json's precision.
TOL=1e-5

if [ "$(uname -m)" != x86_64 ]; then
    echo "1..0 # SKIP not an x86-64 machine ($(uname -m)): the arm64 build is checked from x86-64 (make test natively)"
    exit 0
fi
for f in "$B/ctrain" "$B/t/idx_subset"; do
    [ -x "$f" ] || { echo "1..0 # SKIP $f not built (make)"; exit 0; }
done
why=""
command -v qemu-aarch64 >/dev/null 2>&1 || why="qemu-aarch64 (qemu-user) not installed"
[ -n "$why" ] || [ -x "$A/ctrain" ] || why="$A/ctrain not built (scripts/arm64 setup; scripts/arm64 make)"
[ -n "$why" ] || timeout -k 10 120 "$ARM64" run "$A/ctrain" --version >"$T/version" 2>&1 || why=$(tail -n 1 "$T/version")
[ -f "$FMNIST/train-images-idx3-ubyte.gz" ] || why="dataset-fashion-mnist not installed"
if [ -n "$why" ]; then
    ci_needs "$why"
    echo "1..0 # SKIP $why"
    exit 0
fi
# Every emulated program under a time limit: a hang ends as a failure, not as a CI run that never ends.
run64() { timeout -k 10 300 "$ARM64" run "$@"; }

# --- the build ----------------------------------------------------------------------------------
for f in ctrain libctrain.so ctrain.so ctrain-bind.so; do
    LC_ALL=C readelf -h "$A/$f" >"$T/elf" 2>&1
    grep -Eq 'Machine:[[:space:]]+AArch64' "$T/elf"
    ok $? "build-arm64/$f is an aarch64 ELF file" "$T/elf"
done
grep -q "^ctrain " "$T/version"
ok $? "build-arm64/ctrain --version runs under qemu-aarch64: $(head -n 1 "$T/version")" "$T/version"

# --- the data --------------------------------------------------------------------------------------
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
unset CTRAIN_PRECISION CTRAIN_ACCELERATOR CTRAIN_STRATEGY CTRAIN_MODEL CTRAIN_DATAMODULE ONEDNN_MAX_CPU_ISA DNNL_MAX_CPU_ISA
# The licences every Debian system has, and every byte value after them (char is unsigned on
# aarch64, signed on x86-64: a byte above 127 is where the two would part).
cat /usr/share/common-licenses/* >"$T/corpus.txt" 2>/dev/null
LC_ALL=C awk 'BEGIN { for (i = 1; i < 256; i++) printf "%c", i }' >>"$T/corpus.txt"
"$B/ctrain" tokenize --input "$T/corpus.txt" --output-dir "$T/tok" >"$T/tok.out" 2>&1 || { cat "$T/tok.out"; exit 1; }
# The GPT trains on 20 KB of it: the fit tests the best checkpoint on the whole test split.
head -c 20000 "$T/corpus.txt" >"$T/small.txt"
"$B/ctrain" tokenize --input "$T/small.txt" --output-dir "$T/gtok" >"$T/gtok.out" 2>&1 || { cat "$T/gtok.out"; exit 1; }
mkdir -p "$T/mnist" && "$B/t/idx_subset" "$FMNIST" "$T/mnist" 1024 256 >/dev/null || exit 1
FIT_mlp="fit --data $T/mnist --hidden 128,64 --batch-size 32"
FIT_gpt="fit --model gpt --model-config n_layer=2,n_head=2,n_embd=32,seq_len=32 --data $T/gtok --batch-size 4"
COMMON="--max-steps 20 --log-every-n-steps 1 --limit-val-batches 2 --progress off --deterministic --no-tensorboard --precision 32-true"

# --- the unit tests and the fits, JOBS at a time (all compute: 2 cores hold 2), the longest first ---
t0=$(date +%s)
for u in "$A"/t/test_*; do
    case $u in *.d) continue ;; esac
    [ -x "$u" ] && basename "$u"
done >"$T/units"
{ printf '%s\n' test_bind fit-gpt test_gpt test_data; grep -vx 'test_bind\|test_gpt\|test_data' "$T/units"; echo fit-mlp; } >"$T/jobs"
export A B T ROOT ARM64 FIT_mlp FIT_gpt COMMON
xargs -P "$JOBS" -n 1 "$ROOT/t/arm64/arm64.t" --job <"$T/jobs"

ok "$([ -s "$T/units" ]; echo $?)" "unit tests built for arm64: $(wc -l <"$T/units")"
while read -r u; do
    ok "$(cat "$T/$u.rc" 2>/dev/null || echo 1)" \
        "arm64 $u passes ($(grep -c '^ok' "$T/$u.tap") tests, $(grep '^not ok' "$T/$u.tap" | grep -vc '# SKIP') failed, $(grep -c '^not ok.*# SKIP' "$T/$u.tap") skipped)" "$T/$u.tap"
done <"$T/units"
echo "# unit tests and fits: $(($(date +%s) - t0)) s, $JOBS at a time"

run64 "$A/ctrain" tokenize --input "$T/corpus.txt" --output-dir "$T/tok64" >"$T/tok64.out" 2>&1 &&
    cmp "$T/tok/train.bin" "$T/tok64/train.bin" >>"$T/tok64.out" 2>&1 && cmp "$T/tok/val.bin" "$T/tok64/val.bin" >>"$T/tok64.out" 2>&1
ok $? "arm64 ctrain tokenize writes the x86-64 build's train.bin and val.bin byte for byte (every byte value)" "$T/tok64.out"

losses() { tr -d '\n\t ' <"$1/summary.json" | grep -o '"\(val\|test\)_loss":[-0-9.e+]*' | cut -d: -f2 | tr '\n' ' '; }
steps() { awk -F, 'NR > 1 && $3 != "" { printf "%s ", $3 }' "$1/metrics.csv"; }
# within A B: the same count of numbers, each of B within TOL (relative) of A's; prints the largest.
within() {
    awk -v a="$1" -v b="$2" -v tol="$TOL" 'BEGIN {
        na = split(a, x, " "); nb = split(b, y, " "); worst = 0
        if (na == 0 || na != nb) { print "count " na " against " nb; exit 1 }
        for (i = 1; i <= na; i++) { r = (y[i] - x[i]) / x[i]; if (r < 0) r = -r; if (r > worst) worst = r }
        printf "%.1e", worst; exit !(worst <= tol)
    }'
}
for m in mlp gpt; do
    if [ "$(cat "$T/x86-$m.rc" 2>/dev/null)" != 0 ]; then
        cat "$T/x86-$m.out"
        echo "Bail out! the x86-64 $m fit, the reference, failed"
        exit 1
    fi
    rc=$(cat "$T/arm-$m.rc" 2>/dev/null || echo 1)
    a=$(steps "$T/x86-$m") b=$([ "$rc" -eq 0 ] && steps "$T/arm-$m")
    worst=$(within "$a" "$b")
    ok "$([ "$rc" -eq 0 ] && [ "$(echo "$b" | wc -w)" = 20 ] && within "$a" "$b" >/dev/null; echo $?)" \
        "arm64 $m fit: 20 steps' train_loss within $TOL of x86-64's (largest $worst; $(cat "$T/fit-$m.s") s)" "$T/arm-$m.out"
    a=$(losses "$T/x86-$m") b=$([ "$rc" -eq 0 ] && losses "$T/arm-$m")
    worst=$(within "$a" "$b")
    ok "$([ "$rc" -eq 0 ] && within "$a" "$b" >/dev/null; echo $?)" \
        "arm64 $m fit: val_loss and test_loss ${b}within $TOL of x86-64's ${a}(largest $worst)" "$T/arm-$m.out"
done

# --- the SPANK plugin in arm64 SLURM ------------------------------------------------------------
SR="${CTRAIN_ARM64_ROOT:-$ROOT/build/arm64-root}"
printf 'required %s\n' "$A/ctrain.so" >"$T/plugstack.conf"
# Enough for srun and sbatch to read their configuration; no controller runs.
cat >"$T/slurm.conf" <<EOF
ClusterName=ctrainarm64
SlurmctldHost=localhost
AuthType=auth/munge
PlugStackConfig=$T/plugstack.conf
NodeName=n1 CPUs=1 State=UNKNOWN
PartitionName=debug Nodes=n1 Default=YES
EOF
export SLURM_CONF="$T/slurm.conf"
run64 "$SR/usr/bin/srun" --help >"$T/srun-help" 2>&1
rc=$?
for o in "ctrain-strategy=NAME" "ctrain-accelerator=NAME" "ctrain-precision=P" "ctrain-bind=closest|none|verbose"; do
    grep -qF -- "--$o" "$T/srun-help" || rc=1
done
grep -q "bind each task to the GPU, cores and NIC" "$T/srun-help" || rc=1
ok $rc "arm64 srun loads build-arm64/ctrain.so (required) and --help lists its four options with their text" "$T/srun-help"
run64 "$SR/usr/bin/sbatch" --help >"$T/sbatch-help" 2>&1 && grep -qF -- "--ctrain-strategy=NAME" "$T/sbatch-help"
ok $? "arm64 sbatch --help lists --ctrain-strategy" "$T/sbatch-help"
run64 "$SR/usr/bin/srun" --ctrain-strategy=dpp true >"$T/srun-bad" 2>&1
rc=$?
[ $rc -ne 0 ] && grep -q "ctrain: --ctrain-strategy 'dpp' is not a known strategy" "$T/srun-bad" &&
    grep -q "did you mean 'ddp'" "$T/srun-bad" && ! grep -q "controller" "$T/srun-bad"
ok $? "arm64 srun --ctrain-strategy=dpp: the plugin refuses it with its hint before any allocation (exit $rc)" "$T/srun-bad"
echo "1..$n"
