#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# scripts/gpu-check's judging, without a GPU: what it decides from the logs and probes of a GPU
# machine. A stand-in kit (shell scripts where the kit has ctrain, cuda_check, nccl_check and
# gpt_cuda_check, printing what they print) and stand-ins for nvidia-smi and compute-sanitizer
# first on PATH; the sanitizer prints the summaries in t/fixtures/gpu-check/ (each tool's own
# wording, as NVIDIA's Compute Sanitizer documents it: "ERROR SUMMARY: N error(s)" for memcheck,
# initcheck and synccheck, "RACECHECK SUMMARY: N hazard(s) displayed (E error(s), W warning(s))"
# for racecheck). Checked: the order and caps (--list), a clean run of the GPT's checks under the
# four tools with ctrain's own MFU from its step time and no PyTorch, each tool's findings failing
# its check, racecheck's warnings not failing, a clean summary over a failing program and no
# summary at all failing, and the probes: nvidia-smi seeing a GPU that CUDA cannot use (an old
# driver) ends 1, no GPU at all ends 0 with every check skipped. About 10 s. The stand-ins test
# the script, not a GPU (t/54-gpu-kit.t runs the real kit; a GPU machine runs the real checks).
ROOT=$(cd "$(dirname "$0")/.." && pwd)
T=$(mktemp -d /tmp/ctrain-t55-XXXXXX)
trap 'rm -rf "$T"' EXIT
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); echo "not ok $n - $1"; [ -n "${2:-}" ] && [ -f "$2" ] && sed 's/^/# /' "$2" | tail -30; }
check() { if eval "$1"; then ok "$2"; else nok "$2" "${3:-}"; fi; }
for tool in xz tar timeout; do
    command -v $tool >/dev/null || { echo "1..0 # SKIP no $tool"; exit 0; }
done
echo "1..16"

# --- the stand-in kit --------------------------------------------------------------------------
K="$T/kit/ctrain-gpukit"
mkdir -p "$K/build/t" "$K/lib" "$K/data/gpt" "$K/data/fashion-mnist" "$T/bin"
cat >"$K/MANIFEST" <<'EOF'
ctrain GPU kit
commit: stand-in
nvcc: 13.0
glibc_needed: 2.17
EOF
cat >"$K/env.sh" <<'EOF'
LD_LIBRARY_PATH="$CTRAIN_KIT/lib${CTRAIN_CUDA_LIBS:+:$CTRAIN_CUDA_LIBS}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export LD_LIBRARY_PATH
EOF
# ctrain: the connector's refusal of gpt on cuda (exit 2, the reason on "ctrain: error:").
cat >"$K/build/ctrain" <<'EOF'
#!/bin/sh
echo "ctrain: error: --model gpt --accelerator cuda: its CUDA implementation is compiled but has not passed its GPU checks yet" >&2
exit 2
EOF
# cuda_check probe: "available N" or "unavailable: WHY" (FAKE_PROBE=fail); else a passing TAP run.
cat >"$K/build/t/cuda_check" <<'EOF'
#!/bin/sh
if [ "${1:-}" = probe ]; then
    [ "${FAKE_PROBE:-ok}" = ok ] && { echo "available 1"; exit 0; }
    echo "unavailable: CUDA driver version is insufficient for CUDA runtime version"; exit 1
fi
printf '1..2\nok 1 - forward\nok 2 - backward\n'
EOF
# gpt_cuda_check: passing TAP (failing with FAKE_TARGET=fail); --bench adds the three ms-per-step lines
# (the simple attention with and without the forward in a CUDA graph, flash).
cat >"$K/build/t/gpt_cuda_check" <<'EOF'
#!/bin/sh
echo "ok 1 - small 32-true simple attention: loss"
echo "ok 2 - small bf16-mixed flash attention: loss"
if [ "${FAKE_TARGET:-ok}" = fail ]; then echo "not ok 3 - odd 32-true flash attention: gradient of wte"; echo "1..3"; exit 1; fi
case "$*" in *--bench*)
    echo "# bench: GPT-2 small shape, batch 8 x 1024, bf16-mixed, simple attention: 45.0 ms per step, loss 10.990"
    echo "# bench: GPT-2 small shape, batch 8 x 1024, bf16-mixed, simple attention (forward in a CUDA graph): 40.0 ms per step, loss 10.990"
    echo "# bench: GPT-2 small shape, batch 8 x 1024, bf16-mixed, flash attention: 612.5 ms per step, loss 10.990" ;;
esac
echo "1..2"
EOF
printf '#!/bin/sh\nprintf "1..1\\nok 1 - allreduce\\n"\n' >"$K/build/t/nccl_check"
chmod +x "$K/build/ctrain" "$K/build/t/"*
tar -C "$T/kit" -cf - ctrain-gpukit | xz -0 >"$T/kit.tar.xz"

# nvidia-smi: FAKE_SMI_GPUS GPUs (0: none listed), an H100 on driver 535 (CUDA 12.2).
cat >"$T/bin/nvidia-smi" <<'EOF'
#!/bin/sh
case "$*" in
    *query-gpu=name*) [ "${FAKE_SMI_GPUS:-1}" -gt 0 ] && echo "NVIDIA H100 80GB HBM3" ;;
    *query-gpu=driver_version*) [ "${FAKE_SMI_GPUS:-1}" -gt 0 ] && echo "535.104.05" ;;
    -L) [ "${FAKE_SMI_GPUS:-1}" -gt 0 ] && echo "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-00000000-0000-0000-0000-000000000000)" ;;
    *) [ "${FAKE_SMI_GPUS:-1}" -gt 0 ] && echo "| NVIDIA-SMI 535.104.05   Driver Version: 535.104.05   CUDA Version: 12.2 |" ;;
esac
exit 0
EOF
# compute-sanitizer --tool T --error-exitcode N PROGRAM...: runs PROGRAM, then prints the fixture
# T-$FAKE_SANITIZER.log (clean, dirty, warnings; none: no summary, as when the tool itself fails),
# exiting N when it reports errors, else with the program's status.
cat >"$T/bin/compute-sanitizer" <<EOF
#!/bin/sh
tool=\$2 code=\$4
shift 4
"\$@"
rc=\$?
f="$ROOT/t/fixtures/gpu-check/\$tool-\${FAKE_SANITIZER:-clean}.log"
[ -f "\$f" ] || f="$ROOT/t/fixtures/gpu-check/\$tool-clean.log"
[ "\${FAKE_SANITIZER:-clean}" = none ] && exit \$rc
cat "\$f"
grep -q 'ERROR SUMMARY: [1-9]\|([1-9][0-9]* error' "\$f" && exit \$code
exit \$rc
EOF
chmod +x "$T/bin/"*

# gpu-check NAME [VAR=VALUE...] [-- ARGS...]: one run into $T/NAME, its exit status in $T/NAME.rc;
# without ARGS the GPT's checks and the MLP's memcheck (--only $ALL).
ALL=gpt-compare,gpt-bench,gpt-memcheck,gpt-racecheck,gpt-synccheck,gpt-initcheck,memcheck
run() {
    name=$1
    shift
    vars=
    while [ $# -gt 0 ] && [ "$1" != -- ]; do vars="$vars $1"; shift; done
    [ $# -gt 0 ] && shift
    [ $# -eq 0 ] && set -- --only "$ALL"
    # shellcheck disable=SC2086
    env PATH="$T/bin:$PATH" PYTHON=/bin/false CTRAIN_PEAK_TFLOPS= $vars \
        "$ROOT/scripts/gpu-check" --kit "$T/kit.tar.xz" --out "$T/$name" "$@" >"$T/$name.out" 2>&1
    echo $? >"$T/$name.rc"
}
rc() { cat "$T/$1.rc"; }
result() { grep "\"name\": \"$2\"," "$T/$1/summary.json" | sed -n 's/.*"result": "\([a-z]*\)".*/\1/p'; }
figures() { grep "\"name\": \"$2\"," "$T/$1/summary.json" | sed -n 's/.*"figures": "\([^"]*\)".*/\1/p'; }
reason() { grep "\"name\": \"$2\"," "$T/$1/summary.json" | sed -n 's/.*"reason": "\([^"]*\)".*/\1/p'; }

# 1-2: the order and the caps.
"$ROOT/scripts/gpu-check" --list >"$T/list.out" 2>&1
check '[ "$(head -2 "$T/list.out" | cut -d" " -f1 | paste -sd, -)" = gpt-compare,gpt-bench ] &&
       [ "$(grep -n "^gpt-initcheck " "$T/list.out" | cut -d: -f1)" -lt "$(grep -n "^memcheck " "$T/list.out" | cut -d: -f1)" ] &&
       [ "$(grep -n "^gpt-racecheck " "$T/list.out" | cut -d: -f1)" -lt "$(grep -n "^t52 " "$T/list.out" | cut -d: -f1)" ]' \
    "--list: the GPT's comparison and benchmark first, its sanitizer runs before the MLP's checks" "$T/list.out"
check '[ "$(grep -v ^total "$T/list.out" | wc -l)" -eq 13 ] &&
       [ "$(grep -v ^total "$T/list.out" | awk "{ s += \$2 } END { print s }")" -le 340 ] && grep -q "^total .* of the 360 s budget" "$T/list.out"' \
    "--list: 13 checks whose caps add up to 340 s at most, inside the 360 s budget with the kit's unpacking" "$T/list.out"

# 3-6: a clean run of the GPT's checks, the MLP's memcheck, no PyTorch.
run clean
check '[ "$(rc clean)" -eq 0 ] && [ "$(grep -c "\"result\": \"pass\"" "$T/clean/summary.json")" -eq 6 ]' \
    "clean: exit 0, gpt-compare and the 5 sanitizer runs pass" "$T/clean.out"
check 'figures clean gpt-compare | grep -q "ctrain simple attention: 182044 tokens/s (45.0 ms/step), MFU 14.8% of 989 TFLOP/s" &&
       figures clean gpt-compare | grep -q "ctrain flash attention: 13375 tokens/s (612.5 ms/step), MFU 1.1% of 989" &&
       figures clean gpt-compare | grep -q "ctrain simple attention (forward in a CUDA graph, off by default): 204800 tokens/s (40.0 ms/step)"' \
    "ctrain's own tokens/s and MFU from its step time, per attention path, without PyTorch: $(figures clean gpt-compare | cut -c1-120)" "$T/clean/summary.json"
check '[ "$(result clean gpt-bench)" = skip ] && reason clean gpt-bench | grep -q "has no PyTorch that sees the GPU"' \
    "without PyTorch the comparison with it is skipped, saying why" "$T/clean/summary.json"
check 'figures clean gpt-racecheck | grep -q "^RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings); 2 passed" &&
       figures clean gpt-memcheck | grep -q "^ERROR SUMMARY: 0 errors; 2 passed" &&
       figures clean gpt-initcheck | grep -q "^ERROR SUMMARY: 0 errors" && figures clean gpt-synccheck | grep -q "^ERROR SUMMARY: 0 errors"' \
    "a clean racecheck passes in its own wording, as do memcheck, initcheck and synccheck in theirs" "$T/clean/summary.json"

# 7-9: findings fail, each in its tool's wording; racecheck's warnings do not.
run dirty FAKE_SANITIZER=dirty
check '[ "$(rc dirty)" -eq 1 ] && [ "$(result dirty gpt-compare)" = pass ] &&
       [ "$(for c in gpt-memcheck gpt-racecheck gpt-synccheck gpt-initcheck memcheck; do result dirty $c; done | sort -u)" = fail ]' \
    "each tool's findings fail its check and the run (exit 1); the comparison outside the sanitizer still passes" "$T/dirty/summary.json"
check 'figures dirty gpt-racecheck | grep -q "^RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)" &&
       figures dirty gpt-memcheck | grep -q "^ERROR SUMMARY: 1 error;" && figures dirty gpt-initcheck | grep -q "^ERROR SUMMARY: 3 errors;" &&
       reason dirty gpt-racecheck | grep -q "exit 86; see gpt-racecheck.log"' \
    "the findings' summaries (1 hazard, 1 error, 3 errors) in the figures, the sanitizer's exit status in the reason" "$T/dirty/summary.json"
run warnings FAKE_SANITIZER=warnings
check '[ "$(rc warnings)" -eq 0 ] && [ "$(result warnings gpt-racecheck)" = pass ] &&
       figures warnings gpt-racecheck | grep -q "2 hazards displayed (0 errors, 2 warnings)"' \
    "racecheck's warnings without errors: counted in the figures, not failed" "$T/warnings/summary.json"

# 10-11: a clean summary is not enough: the program must pass, and a summary must be there.
run target FAKE_TARGET=fail
check '[ "$(rc target)" -eq 1 ] && [ "$(result target gpt-racecheck)" = fail ] && [ "$(result target gpt-memcheck)" = fail ] &&
       [ "$(result target memcheck)" = pass ]' \
    "a clean summary over a failing gpt_cuda_check fails (the MLP's memcheck still passes)" "$T/target/summary.json"
run nosummary FAKE_SANITIZER=none -- --only gpt-racecheck
check '[ "$(rc nosummary)" -eq 1 ] && [ "$(result nosummary gpt-racecheck)" = fail ] &&
       figures nosummary gpt-racecheck | grep -q "no summary from compute-sanitizer"' \
    "no summary from the sanitizer (the tool did not run) fails, saying so" "$T/nosummary/summary.json"

# 12-14: the probes. An old driver: nvidia-smi sees the GPU, CUDA does not.
run olddriver FAKE_PROBE=fail -- --budget 360
check '[ "$(rc olddriver)" -eq 1 ] && [ "$(grep -c "\"result\": \"skip\"" "$T/olddriver/summary.json")" -eq 13 ] &&
       grep -q "\"skip_reason\": \"nvidia-smi sees 1 GPU(s) (NVIDIA H100 80GB HBM3, driver 535.104.05, CUDA 12.2) but the CUDA runtime finds no device (CUDA driver version is insufficient for CUDA runtime version): the driver supports CUDA 12.2, the kit is built with CUDA 13.0" "$T/olddriver/summary.json"' \
    "nvidia-smi sees a GPU, the probe fails (a driver older than the kit's CUDA): exit 1, the reason says so" "$T/olddriver/summary.json"
run nogpu FAKE_PROBE=fail FAKE_SMI_GPUS=0 -- --budget 360
check '[ "$(rc nogpu)" -eq 0 ] && [ "$(grep -c "\"result\": \"skip\"" "$T/nogpu/summary.json")" -eq 13 ] &&
       [ "$(grep -c "\"reason\": \"no CUDA device (CUDA driver" "$T/nogpu/summary.json")" -eq 13 ]' \
    "no GPU at all: exit 0, the 13 checks skipped with the reason" "$T/nogpu/summary.json"
run hidden FAKE_PROBE=fail CUDA_VISIBLE_DEVICES=
check '[ "$(rc hidden)" -eq 0 ] && grep -q "\"skip_reason\": \"no CUDA device (" "$T/hidden/summary.json"' \
    "GPUs hidden on purpose (CUDA_VISIBLE_DEVICES empty): a skip, not a failure" "$T/hidden/summary.json"

# 15-16: --only and its limits.
run only -- --only gpt-memcheck
check '[ "$(rc only)" -eq 0 ] && [ "$(result only gpt-memcheck)" = pass ] &&
       [ "$(grep -c "\"reason\": \"not among --only gpt-memcheck\"" "$T/only/summary.json")" -eq 12 ]' \
    "--only gpt-memcheck: it runs, the 12 others are recorded as not asked for" "$T/only/summary.json"
env PATH="$T/bin:$PATH" "$ROOT/scripts/gpu-check" --kit "$T/kit.tar.xz" --out "$T/bad" --only gpt-memchek >"$T/bad.out" 2>&1
check '[ $? -eq 2 ] && grep -q "^ctrain: gpu-check: --only: no check .gpt-memchek." "$T/bad.out"' \
    "--only with a check that does not exist: exit 2, naming it" "$T/bad.out"
