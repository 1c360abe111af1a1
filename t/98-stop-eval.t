#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# A stop signal during validation or the test after fit is acted on before the next batch, as in
# training (issue 48 item 6): SLURM sends SIGKILL KillWait (30 s) after SIGTERM, and a long
# validation went on for minutes, losing the work since the last checkpoint. A GPT fit of two steps
# then validates a large split (~1.2 M tokens, 8 sequences a batch; the test after fit reads it
# again); the signal comes at a random moment after the second step, several times (single device
# with SIGTERM, 2-rank ddp under ctrain's launcher with SIGUSR1, which every rank must agree on
# before the same batch): each run ends 75 within a few batches of the signal, naming it, with
# last.safetensors written; --ckpt-path last then resumes at step 2. CTRAIN_T98_ROUNDS sets the
# single-device rounds (default 4). Before the fix the runs went on validating (and then testing)
# past the limit, and were killed. The whole file takes ~20 s.
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B="$ROOT/${CTRAIN_BUILD:-build}"
T=$(mktemp -d /tmp/ctrain-t98-XXXXXX)
# The launcher's PMIx server makes its directory under TMPDIR: SIGKILLed here, it cannot remove it.
export TMPDIR="$T"
P=
trap '[ -n "$P" ] && kill -9 $P 2>/dev/null; rm -rf "$T"' EXIT
trap 'exit 1' INT TERM HUP PIPE

ROUNDS=${CTRAIN_T98_ROUNDS:-4}
echo "1..$((ROUNDS + 3))"
. "$ROOT/t/lib/tap.sh"
[ -x "$B/ctrain" ] || { echo "Bail out! $B/ctrain is not built (run make)"; exit 1; }
unset SLURM_JOB_ID SLURM_JOBID
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1

for i in 1 2 3 4; do cat /usr/share/common-licenses/*; done >"$T/corpus.txt" 2>/dev/null
"$B/ctrain" tokenize --input "$T/corpus.txt" --output-dir "$T/tok" --val-fraction 0.95 >"$T/tok.out" 2>&1 ||
    { sed 's/^/# /' "$T/tok.out"; echo "Bail out! tokenize failed"; exit 1; }
G="--model gpt --model-config n_layer=2,n_head=4,n_embd=64,seq_len=64 --data $T/tok --progress plain --deterministic
   --batch-size 8 --max-steps 2 --log-every-n-steps 1"
# Within a few batches: a batch of 8 sequences takes well under a second (a few under ASan), the
# checkpoint of this small model a moment.
LIMIT=10
seed=$(( $(date +%s) ^ $$ ))
echo "# random delays: seed $seed"

# stopped NAME SIGNAL DELAY FLAGS...: fit; DELAY s after $ready says so (by default: its second step
# is logged, validation begins), SIGNAL at the process ctrain was started as; sets rc and secs
# (signal to exit).
stopped() {
    name=$1 sig=$2 delay=$3
    shift 3
    "$B/ctrain" fit $G "$@" --default-root-dir "$T/$name" >"$T/$name.out" 2>&1 &
    P=$!
    for i in $(seq 1200); do
        $ready "$name" && break
        sleep 0.05
    done
    sleep "$delay"
    t0=$(date +%s.%N)
    kill -"$sig" $P
    # Never a wait for the whole validation (minutes): past the limit, the run is killed (a failure).
    for i in $(seq $(( (LIMIT + 5) * 20 ))); do
        kill -0 $P 2>/dev/null || break
        sleep 0.05
    done
    kill -0 $P 2>/dev/null && { for c in $(pgrep -P $P); do kill -9 $c; done; kill -9 $P; }
    wait $P
    rc=$?
    P=
    secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
}
delay() {    # a random delay in [0, 3) s, from the seed and the round
    awk -v s="$seed" -v r="$1" 'BEGIN { srand(s); for (i = 0; i < r; i++) x = rand(); printf "%.2f", x * 3 }'
}
# Ready for the signal: step 2 logged (validation begins), or the resumed run said so.
trained() { rows=$(grep -c '^2,' "$T/$1/metrics.csv" 2>/dev/null); [ "${rows:-0}" -ge 1 ]; }
resumed() { grep -q "resumed from" "$T/$1.out" 2>/dev/null; }
ready=trained
within() { awk -v s="$secs" -v l="$LIMIT" 'BEGIN { exit !(s <= l) }'; }

r=0
while [ "$r" -lt "$ROUNDS" ]; do
    r=$((r + 1))
    d=$(delay "$r")
    stopped "one$r" TERM "$d"
    [ "$rc" -eq 75 ] && within && grep -q "stopped by SIGTERM at epoch 1, step 2; checkpoint .*/one$r/last.safetensors written" "$T/one$r.out" &&
        [ -s "$T/one$r/last.safetensors" ] && ! grep -q "fit done\|val_loss" "$T/one$r.out"
    ok $? "single device, SIGTERM ${d} s into validation: exit $rc within ${secs} s (at most $LIMIT), last.safetensors written" "$T/one$r.out"
done

d=$(delay 100)
stopped ddp USR1 "$d" --strategy ddp --devices 2
[ "$rc" -eq 75 ] && within && grep -q "stopped by SIGUSR1 at epoch 1, step 2" "$T/ddp.out" && [ -s "$T/ddp/last.safetensors" ] &&
    ! grep -q "fit done\|val_loss" "$T/ddp.out"
ok $? "2-rank ddp, SIGUSR1 ${d} s into validation: every rank stops before the same batch, exit $rc within ${secs} s" "$T/ddp.out"

d=$(delay 200)
stopped ddp2 USR1 "$d" --strategy ddp --devices 2
[ "$rc" -eq 75 ] && within && grep -q "stopped by SIGUSR1 at epoch 1, step 2" "$T/ddp2.out" && ! grep -q "val_loss" "$T/ddp2.out"
ok $? "2-rank ddp again, SIGUSR1 ${d} s into validation: exit $rc within ${secs} s" "$T/ddp2.out"

# The stopped run resumes at step 2 (it validates again, then tests): stopped once more during that,
# it still says step 2, and what it saved is the same weights.
d=$(delay 300)
cp "$T/one1/last.safetensors" "$T/one1.safetensors"
ready=resumed
stopped one1 TERM "$d" --ckpt-path last
grep -q "resumed from .*last.safetensors at epoch 1, step 2" "$T/one1.out" && [ "$rc" -eq 75 ] && within &&
    "$B/t/st_compare" "$T/one1.safetensors" "$T/one1/last.safetensors" >"$T/cmp.out" 2>&1
ok $? "--ckpt-path last resumes at step 2; stopped again during its validation, the same weights saved (exit $rc, ${secs} s)" \
    "$T/one1.out" "$T/cmp.out"
