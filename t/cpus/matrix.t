#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The CPU matrix (make test-cpus): ctrain on every x86-64 level a site's nodes have, each level's
# own kernels exercised — ctrain's clones (target_clones: avx512f, avx2, default), OpenBLAS's and
# oneDNN's, which all choose by cpuid:
#   v2    x86-64-v2, SSE4.2 only (QEMU's Nehalem model)
#   v3    x86-64-v3, AVX2 and FMA (Haswell; a Zen 3)
#   v4    x86-64-v4, AVX-512 F/BW/CD/DQ/VL (Skylake-SP; a Zen 4 without its bf16)
#   bf16  AVX512-BF16 or AMX-BF16 (Cooper Lake, Sapphire Rapids, Zen 4): oneDNN's bf16 kernels
# The machine's own level runs natively. A level below it runs under qemu-user's model of that CPU
# (`qemu-x86_64 -cpu Nehalem|Haswell`: QEMU hides from every cpuid check what the model lacks, which
# no library's environment variable can do for all of them); QEMU 7.2 emulates no AVX-512, so v4
# below a bf16 machine runs natively with oneDNN held to avx512_core (ONEDNN_MAX_CPU_ISA: its bf16
# kernels off; ctrain's clones and OpenBLAS are the same at v4 and bf16). A level above the machine
# is a SKIP saying so. The level is read from the CPU (/proc/cpuinfo's flags, the kernel's cpuid),
# never from a variable.
# At each level: the compute unit tests (test_nn, test_gpt, test_checkpoint, test_connector), the
# libraries' own report of the ISA they chose (OpenBLAS's core, oneDNN's isa), and a 10-step fit
# of each model (mlp, gpt) in each precision it computes on cpu, whose val_loss and test_loss agree
# with the machine's native 32-true run within the precision's tolerance (below); a bf16 fit
# says at plan time that the products compute in fp32 exactly where the level has no bf16
# instructions. Every run is single-threaded: oneDNN's GEMM rounds differently on 1 and 2 threads
# (t/36), and one thread keeps the emulated parts short.
# Cost (a 2-core Zen 3 shared with other work, load 8 to 9; QEMU 7.2): the native level (v3) 9-14 s,
# the emulated v2 75-131 s, the whole file 86-149 s wall and 43-49 s of CPU (single-threaded: about
# that on a quiet machine); a machine with AVX-512 emulates v2 and v3. test_data is left out
# (integer work, 28 s emulated; zlib's dispatch runs in every fit's IDX loading).
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
B="$ROOT/${CTRAIN_BUILD:-build}"
CTRAIN="$B/ctrain"
FMNIST=/usr/share/datasets/fashion-mnist
. "$ROOT/t/lib/ci.sh"
T=$(mktemp -d /tmp/ctrain-cpus-XXXXXX)
trap 'rm -rf "$T"' EXIT
n=0
ok() {    # ok STATUS NAME [FILE]: on failure FILE becomes TAP comments
    n=$((n + 1))
    if [ "$1" -eq 0 ]; then
        echo "ok $n - $2"
    else
        echo "not ok $n - $2"
        [ -n "${3:-}" ] && tail -n 12 "$3" | sed 's/^/#   /'
    fi
}
skip() { n=$((n + 1)); echo "ok $n # SKIP $1"; }

if [ "$(uname -m)" != x86_64 ]; then
    echo "1..0 # SKIP not an x86-64 machine ($(uname -m)): the x86-64 levels do not apply"
    exit 0
fi
for f in "$CTRAIN" "$B/t/test_nn" "$B/t/idx_subset"; do
    [ -x "$f" ] || { echo "1..0 # SKIP $f not built (make)"; exit 0; }
done
if [ ! -f "$FMNIST/train-images-idx3-ubyte.gz" ]; then
    ci_needs "dataset-fashion-mnist not installed"
    echo "1..0 # SKIP dataset-fashion-mnist not installed"
    exit 0
fi
QEMU=$(command -v qemu-x86_64 || true)
[ -n "$QEMU" ] || ci_needs "qemu-x86_64 (qemu-user) not installed"

# --- the machine's level, from its CPU ------------------------------------------------------------
FLAGS=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
has() { for f; do case "$FLAGS" in *" $f "*) ;; *) return 1 ;; esac; done; }
level_has() {    # level_has LEVEL: this CPU has every instruction of LEVEL
    case $1 in
        v2) has sse4_2 ssse3 popcnt cx16 ;;
        v3) level_has v2 && has avx2 fma bmi1 bmi2 movbe f16c ;;
        v4) level_has v3 && has avx512f avx512bw avx512cd avx512dq avx512vl ;;
        bf16) level_has v4 && { has avx512_bf16 || has amx_bf16; } ;;
    esac
}
TOP=none
for l in v2 v3 v4 bf16; do level_has $l && TOP=$l; done
echo "# this CPU: $(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); its level: $TOP"

# --- the data, and the native 32-true run each level is held to -----------------------------------
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
unset CTRAIN_PRECISION CTRAIN_ACCELERATOR CTRAIN_STRATEGY CTRAIN_MODEL CTRAIN_DATAMODULE ONEDNN_MAX_CPU_ISA DNNL_MAX_CPU_ISA
mkdir -p "$T/mnist" && "$B/t/idx_subset" "$FMNIST" "$T/mnist" 512 128 >/dev/null || exit 1
head -c 12000 /usr/share/common-licenses/GPL-3 >"$T/text.txt"
"$CTRAIN" tokenize --input "$T/text.txt" --output-dir "$T/tok" >/dev/null || exit 1
FIT_mlp="fit --data $T/mnist --hidden 32 --batch-size 32"
FIT_gpt="fit --model gpt --model-config n_layer=2,n_head=2,n_embd=32,seq_len=32 --data $T/tok --batch-size 4"
COMMON="--max-steps 10 --limit-val-batches 2 --progress off --deterministic"
PRECISIONS_mlp="32-true 64-true bf16-mixed bf16-true"
PRECISIONS_gpt="32-true 64-true bf16-mixed bf16-true"
# Relative tolerance on val_loss and test_loss against the native 32-true run, and why:
#   32-true    1e-5  the same fp32 math with other kernels (SSE against AVX2's FMA, other blocking):
#                    only the rounding differs (measured 1.1e-8, Nehalem against a Zen 3); a wrong
#                    kernel moves a 10-step loss by far more
#   64-true    1e-5  fp64 throughout: the difference is the fp32 run's own rounding (8.6e-7 measured)
#   bf16-mixed 2e-3  GEMM inputs rounded to bf16's 8-bit mantissa (2^-9 each), fp32 everywhere else
#                    (1.8e-4 measured)
#   bf16-true  2e-2  weights, activations and the update stored in bf16 too (2.5e-3 measured)
tol() { case $1 in 32-true | 64-true) echo 1e-5 ;; bf16-mixed) echo 2e-3 ;; bf16-true) echo 2e-2 ;; esac; }
losses() { tr -d '\n\t ' <"$1/summary.json" | grep -o '"\(val\|test\)_loss":[-0-9.e+]*' | cut -d: -f2 | tr '\n' ' '; }

for m in mlp gpt; do
    eval "args=\$FIT_$m"
    "$CTRAIN" $args $COMMON --precision 32-true --default-root-dir "$T/base-$m" >"$T/base-$m.out" 2>&1
    ok $? "native 32-true $m fit: the baseline ($(losses "$T/base-$m"))" "$T/base-$m.out"
done

# --- one level ------------------------------------------------------------------------------------
run_level() {    # run_level LEVEL HOW: HOW is native, capped (oneDNN held to avx512_core) or a QEMU model
    level=$1 how=$2 t0=$(date +%s)
    case $how in
        native) pre="" ;;
        capped) pre="env ONEDNN_MAX_CPU_ISA=AVX512_CORE DNNL_MAX_CPU_ISA=AVX512_CORE" ;;
        *) pre="$QEMU -cpu $how" ;;
    esac
    say="$level ($how)"
    # QEMU warns on stderr for each feature of its model that TCG lacks (pcid, x2apic, ...).
    quiet() { grep -v "^qemu-x86_64: warning: TCG doesn't support" "$1" >"$1.q"; mv "$1.q" "$1"; }

    for u in test_nn test_gpt test_checkpoint test_connector; do
        $pre "$B/t/$u" >"$T/$level-$u.tap" 2>&1
        rc=$?
        quiet "$T/$level-$u.tap"
        ok $rc "$say: $u passes ($(grep -c '^ok' "$T/$level-$u.tap") tests)" "$T/$level-$u.tap"
    done

    # What the libraries chose: OpenBLAS's core and oneDNN's ISA name the level.
    # (OpenBLAS 0.3.21 may run a Zen 4 on its Zen kernels: its AVX-512 is oneDNN's here.)
    case $level in
        v2) core='Nehalem' isa='SSE4\.1' ;;
        v3) core='Haswell|Zen' isa='AVX2' ;;
        v4) core='SkylakeX|Cooperlake|SapphireRapids|Zen' isa='AVX-512' ;;
        bf16) core='SkylakeX|Cooperlake|SapphireRapids|Zen' isa='bfloat16|AMX' ;;
    esac
    OPENBLAS_VERBOSE=2 ONEDNN_VERBOSE=1 DNNL_VERBOSE=1 $pre "$B/t/test_nn" >"$T/$level-isa" 2>&1
    got="$(grep -o '^Core: .*' "$T/$level-isa" | head -n 1); $(grep -o 'isa:[^,]*' "$T/$level-isa" | head -n 1)"
    printf '%s\n' "$got" | grep -Eq "Core: ($core)" && printf '%s\n' "$got" | grep -Eq "isa:.*($isa)"
    ok $? "$say: OpenBLAS and oneDNN chose this level's kernels ($got)" "$T/$level-isa"

    for m in mlp gpt; do
        eval "args=\$FIT_$m precisions=\$PRECISIONS_$m"
        base=$(losses "$T/base-$m")
        for p in $precisions; do
            d="$T/$level-$m-$p"
            $pre "$CTRAIN" $args $COMMON --precision "$p" --default-root-dir "$d" >"$d.out" 2>&1
            rc=$?
            quiet "$d.out"
            got=$(losses "$d" 2>/dev/null)
            awk -v a="$base" -v b="$got" -v tol="$(tol "$p")" 'BEGIN {
                na = split(a, x, " "); nb = split(b, y, " ");
                if (na != 2 || nb != 2) exit 1;
                for (i = 1; i <= 2; i++) { r = (y[i] - x[i]) / x[i]; if (r < 0) r = -r; if (r > tol) exit 1 }
            }'
            cmp_rc=$?
            ok "$([ $rc -eq 0 ] && [ $cmp_rc -eq 0 ]; echo $?)" \
               "$say: $m $p fit: val/test loss $got within $(tol "$p") of native 32-true's (exit $rc)" "$d.out"
            case $p in
                bf16-*)
                    [ "$how" = capped ] && continue   # the CPU has bf16; only oneDNN is held back
                    if [ "$level" = bf16 ]; then
                        ! grep -q "on this CPU: it has no" "$d.out"
                        ok $? "$say: $m $p: no fp32 notice where the CPU multiplies bf16" "$d.out"
                    else
                        grep -q "^ctrain: notice: precision $p on this CPU: it has no .* instructions, so bf16 storage is kept and the products compute in fp32" "$d.out"
                        ok $? "$say: $m $p: the plan-time notice that the products compute in fp32" "$d.out"
                    fi
                    ;;
            esac
        done
    done
    echo "# $say: $(($(date +%s) - t0)) s"
}

rank() { case $1 in none) echo 0 ;; v2) echo 1 ;; v3) echo 2 ;; v4) echo 3 ;; bf16) echo 4 ;; esac; }
for l in v2 v3 v4 bf16; do
    if [ "$l" = "$TOP" ]; then
        run_level $l native
    elif [ "$(rank $l)" -gt "$(rank "$TOP")" ]; then
        skip "level $l: this CPU ($TOP) does not have it (a machine that does runs it natively)"
    elif [ $l = v4 ]; then
        run_level v4 capped
    elif [ -z "$QEMU" ]; then
        skip "level $l: emulated with qemu-x86_64, not installed (scripts/install-deps --ci)"
    else
        case $l in v2) run_level v2 Nehalem ;; v3) run_level v3 Haswell ;; esac
    fi
done
echo "1..$n"
