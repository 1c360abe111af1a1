#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# `ctrain plan` resolves for every registered strategy that runs on cpu (and refuses the cuda-only
# ones on cpu with exit 2 and a message naming cpu); `--list` and `--errors` print the registries
# and the catalogue; a misconfiguration exits 2 with nothing on stdout.
CTRAIN="$(dirname "$0")/../${CTRAIN_BUILD:-build}/ctrain"
tmp=$(mktemp -d /tmp/ctrain-t11.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
n=0
ok() {    # ok STATUS NAME: on failure the command's stdout and stderr become TAP comments
    n=$((n + 1))
    if [ "$1" -eq 0 ]; then
        echo "ok $n - $2"
    else
        echo "not ok $n - $2"
        cat "$tmp/out" "$tmp/err" 2>/dev/null | sed 's/^/#   /'
    fi
}

"$CTRAIN" plan --list >"$tmp/list" 2>&1
ok $? "plan --list"
# Strategy rows: two-space indent, a name, then [accelerators].
sed -n '/^strategies:/,/^[a-z]/p' "$tmp/list" | awk '/^  [a-z_]+ +\[/ {print $1, $2}' >"$tmp/strategies"
[ "$(wc -l <"$tmp/strategies")" -ge 5 ]
ok $? "the strategy registry lists $(wc -l <"$tmp/strategies") strategies"

while read -r name accel; do
    if echo "$accel" | grep -q cpu; then
        devices=2
        [ "$name" = single_device ] && devices=1
        env -u CTRAIN_STRATEGY -u CTRAIN_ACCELERATOR -u CTRAIN_PRECISION \
            "$CTRAIN" plan --accelerator cpu --strategy "$name" --devices $devices >"$tmp/out" 2>"$tmp/err"
        rc=$?
        [ $rc -eq 0 ] && grep -q "\"strategy\":[[:space:]]*\"$name\"" "$tmp/out" &&
            grep -q "\"world_size\":[[:space:]]*$devices" "$tmp/out"
        ok $? "plan --strategy $name --accelerator cpu --devices $devices resolves (exit $rc)"
    else
        "$CTRAIN" plan --accelerator cpu --strategy "$name" >"$tmp/out" 2>"$tmp/err"
        rc=$?
        [ $rc -eq 2 ] && [ ! -s "$tmp/out" ] && grep -q "cpu" "$tmp/err" && grep -q "^ctrain: hint:" "$tmp/err"
        ok $? "plan --strategy $name (runs on $accel) refused on cpu with a hint (exit $rc)"
    fi
done <"$tmp/strategies"

"$CTRAIN" plan --errors >"$tmp/errors" 2>&1
[ "$(wc -l <"$tmp/errors")" -ge 40 ]
ok $? "plan --errors prints the catalogue ($(wc -l <"$tmp/errors") entries)"

"$CTRAIN" plan --accelerator ddp >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 2 ] && [ ! -s "$tmp/out" ] && grep -q "use --strategy ddp" "$tmp/err"
ok $? "--accelerator ddp: exit 2, says to use --strategy ddp (exit $rc)"

"$CTRAIN" plan --devices >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 2 ] && grep -q "needs a value" "$tmp/err"
ok $? "a flag without its value: exit 2 (flag-missing-value; exit $rc)"

# Models and data modules: listed with where they run and their --model-config keys; the plan
# names the model; a bad model or config is refused before anything starts.
sed -n '/^models:/,/^[a-z]/p' "$tmp/list" >"$tmp/out"
grep -q "^  mlp .*\[cpu, cuda\]" "$tmp/out" && grep -q "hidden=" "$tmp/out" &&
    sed -n '/^data modules:/,$p' "$tmp/list" | grep -q "^  fashion-mnist"
ok $? "plan --list shows the models (mlp on cpu, cuda; its hidden= key) and the data modules"
env -u CTRAIN_MODEL -u CTRAIN_DATAMODULE "$CTRAIN" plan --model-config hidden=64 >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 0 ] && grep -q '"model":[[:space:]]*"mlp"' "$tmp/out" && grep -q '"model_config":[[:space:]]*"hidden=64"' "$tmp/out" &&
    grep -q '"datamodule":[[:space:]]*"fashion-mnist"' "$tmp/out"
ok $? "plan --model-config hidden=64: the JSON names model, config and data module (exit $rc)"
"$CTRAIN" plan --model-config hidden=0 >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 2 ] && [ ! -s "$tmp/out" ] && grep -q "hidden=0" "$tmp/err" && grep -q "^ctrain: hint:" "$tmp/err"
ok $? "--model-config hidden=0: exit 2 naming it, with a hint (exit $rc)"
"$CTRAIN" plan --model mlpp >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 2 ] && grep -q "did you mean 'mlp'" "$tmp/err"
ok $? "--model mlpp: exit 2, did you mean mlp (exit $rc)"

# A bf16 precision on the cpu: a notice at plan time (stderr and the plan's "notices") exactly when
# this CPU has no bf16 instructions, read from the CPU (the kernel's cpuid flags in /proc/cpuinfo:
# avx512_bf16, amx_bf16; aarch64's bf16), never from a variable; fit prints the plan's notices too.
case " $(grep -m1 -E '^(flags|Features)' /proc/cpuinfo | cut -d: -f2) " in
    *" avx512_bf16 "* | *" amx_bf16 "* | *" bf16 "*) has_bf16=1 ;;
    *) has_bf16=0 ;;
esac
notice="notice: precision bf16-true on this CPU: it has no .* instructions, so bf16 storage is kept and the products compute in fp32"
env -u CTRAIN_PRECISION -u CTRAIN_ACCELERATOR "$CTRAIN" plan --precision bf16-true --accelerator cpu >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ "$has_bf16" = 0 ]; then
    [ $rc -eq 0 ] && grep -q "^ctrain: $notice" "$tmp/err" && tr -d '\n' <"$tmp/out" | grep -q '"notices":.*on this CPU: it has no'
    ok $? "plan --precision bf16-true on a CPU without bf16 instructions: the notice, in the plan too (exit $rc)"
else
    [ $rc -eq 0 ] && ! grep -q "on this CPU" "$tmp/err"
    ok $? "plan --precision bf16-true on a CPU with bf16 instructions: no notice (exit $rc)"
fi
env -u CTRAIN_PRECISION -u CTRAIN_ACCELERATOR "$CTRAIN" plan --precision 32-true >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 0 ] && ! grep -q "notice" "$tmp/err"
ok $? "plan --precision 32-true: no notice (exit $rc)"
env -u CTRAIN_PRECISION -u CTRAIN_ACCELERATOR "$CTRAIN" fit --precision bf16-true --data "$tmp/none" >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ "$has_bf16" = 0 ]; then
    [ $rc -ne 0 ] && grep -q "^ctrain: $notice" "$tmp/err"
else
    [ $rc -ne 0 ] && ! grep -q "on this CPU" "$tmp/err"
fi
ok $? "fit --precision bf16-true says the same before it starts (has bf16: $has_bf16; exit $rc on missing data)"

echo "1..$n"
