#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Straggler detection in ctrain fit over three hosts of scripts/slurm-cluster (one rank each):
#   - a clean fit with --on-straggler warn names nobody (summary.json's stragglers empty) and has a
#     stragglers column in metrics.csv;
#   - n2's CPU capped at 5% of a CPU (scripts/slurm-cluster slow) at a random moment of a fit with
#     --on-straggler stop: n2 is named within 50 steps of the cap (the log's warning, the stragglers
#     column of metrics.csv, its busy time in TensorBoard), no node before the cap, and the fit saves
#     last.safetensors and exits 76;
#   - a bad --on-straggler is refused before anything is launched;
# and nothing is left running.
. "$(dirname "$0")/lib/launch.sh"
. "$(dirname "$0")/lib/ddp.sh"
N=9

make_data || skip_all $N "dataset-fashion-mnist not installed"
start_srun_cluster $N 3
SC="$root_dir/scripts/slurm-cluster"
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
# Steps heavy enough (a 784-1024-10 MLP, 128 a rank) that a capped CPU shows in the step, not
# only in the fixed costs of a tiny one.
FIT="fit --progress off --hidden 1024 --batch-size 128 --data $tmp/data --strategy ddp --devices 1 --num-nodes 3"
FIT="$FIT --log-every-n-steps 5 --collective-timeout 120"
jget() { python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2" 2>/dev/null; }

# 1-2: clean, warn.
timeout 300 srun -N3 -n3 --mpi=pmix "$CTRAIN" $FIT --max-steps 40 --on-straggler warn \
    --default-root-dir "$tmp/clean" >"$tmp/clean.out" 2>&1
rc=$?
ok "$([ $rc -eq 0 ] && [ "$(jget "$tmp/clean/summary.json" stragglers)" = "[]" ] &&
    ! grep -q 'straggler: node' "$tmp/clean.out"; echo $?)" \
    "a clean 3-node fit with --on-straggler warn: exit $rc, no node named (summary.json stragglers [])" || diag "$tmp/clean.out"
head -n 1 "$tmp/clean/metrics.csv" | grep -q ',stragglers$'
ok $? "metrics.csv has a stragglers column" || diag "$tmp/clean/metrics.csv"

# 3-7: n2 capped in the middle of a fit.
timeout 300 srun -N3 -n3 --mpi=pmix "$CTRAIN" $FIT --max-epochs 1000 --on-straggler stop \
    --default-root-dir "$tmp/cap" >"$tmp/cap.out" 2>&1 &
P=$!
pids="$pids $P"
for i in $(seq 600); do
    rows=$(grep -c '^[0-9]' "$tmp/cap/metrics.csv" 2>/dev/null)
    [ "${rows:-0}" -ge 4 ] && break
    sleep 0.1
done
sleep "$(awk 'BEGIN { srand(); printf "%.2f", rand() }')"
before=$(grep '^[0-9]' "$tmp/cap/metrics.csv" | tail -n 1 | cut -d, -f1)
"$SC" slow "$cluster" n2 5 >"$tmp/slow.out" 2>&1
st=$?
# The cap is in force once slow returns (it moves the node's processes one by one meanwhile): the
# step then, from the last row written (rows come every 5 steps).
at=$(grep '^[0-9]' "$tmp/cap/metrics.csv" | tail -n 1 | cut -d, -f1)
wait "$P"
rc=$?
"$SC" slow "$cluster" n2 clear >>"$tmp/slow.out" 2>&1
if [ $st -eq 3 ]; then
    for i in 3 4 5 6 7; do echo "ok $i # SKIP $(tail -n 1 "$tmp/slow.out")"; done
    n=7
else
    named=$(sed -n 's/^ctrain: warning: straggler: node \(n[0-9]*\) (rank [0-9]*) .* to step \([0-9]*\); stopping.*/\1 \2/p' "$tmp/cap.out")
    node=${named% *} step=${named#* }
    ok "$([ $rc -eq 76 ] && [ "$node" = n2 ]; echo $?)" "n2 capped from step ${at:-?} (slow started after step ${before:-?}): the fit names ${node:-nobody} and exits $rc (76)" ||
        diag "$tmp/slow.out" "$tmp/cap.out"
    ok "$([ -n "$step" ] && [ -n "$before" ] && [ $((step - before)) -le 50 ]; echo $?)" \
        "named at step ${step:-?}, within 50 steps of the cap's start ($((${step:-0} - ${before:-0})))"
    first=$(awk -F, 'NR > 1 && $NF != "" { print $1; exit }' "$tmp/cap/metrics.csv")
    ok "$([ -n "$first" ] && [ "$first" -gt "$before" ] &&
        [ -z "$(awk -F, 'NR > 1 && $NF != "" && $NF != "n2"' "$tmp/cap/metrics.csv")" ]; echo $?)" \
        "metrics.csv: n2 alone in the stragglers column, first at step ${first:-none} (after the cap, none before)" ||
        diag "$tmp/cap/metrics.csv"
    [ -s "$tmp/cap/last.safetensors" ] && grep -q 'node n2 is a straggler; checkpoint .*/last.safetensors written' "$tmp/cap.out"
    ok $? "last.safetensors written, the message names n2 and the checkpoint" || diag "$tmp/cap.out"
    grep -a -q 'straggler/busy_ms/n2' "$tmp"/cap/events.out.tfevents.*
    ok $? "TensorBoard: each node's busy time per step (straggler/busy_ms/n2)"
fi

# 8: bad input.
"$CTRAIN" fit --on-straggler maybe --default-root-dir "$tmp/bad" >"$tmp/bad.out" 2>&1
rc=$?
ok "$([ $rc -eq 2 ] && grep -q "on-straggler 'maybe' is not off, warn, stop or exclude" "$tmp/bad.out" && [ ! -e "$tmp/bad" ]; echo $?)" \
    "--on-straggler maybe: exit $rc, named, nothing written" || diag "$tmp/bad.out"

sleep 1
left=$(procs_with "$tmp/" | tr '\n' ' ')
ok "$([ -z "$left" ]; echo $?)" "nothing of any run is left running${left:+: $left}"
