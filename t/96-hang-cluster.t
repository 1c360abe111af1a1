#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Hang forensics (issue 38) on the SLURM test cluster, under srun --mpi=pmix: a 3-rank ddp fit on two
# nodes (ranks 0 and 1 on n1, rank 2 on n2), n2's host name changed to n2-host.cluster.example so that
# SLURM's node name and the host name differ, as at many sites:
#   - scancel --signal=USR2 JOB at a random moment of a healthy fit: every rank writes
#     hang/rank-R.json naming its node as SLURM does (n1, n1, n2), the fit goes on and ends with the
#     weights of a run without the signal (st_compare);
#   - rank 2 SIGSTOPped at a random moment: every rank ends within --collective-timeout + 10 s, rank 0
#     prints the diagnosis and `ctrain diagnose DIR` names rank 2, its node n2, its pid, step and
#     phase (it writes no record: its live record, hang/rank-2.live, says where it stopped) and the
#     others' records where and in which collective of which step they found it missing;
#   - rank 2 held in its data phase (CTRAIN_TEST_DATA_STALL, as t/93): diagnose names it, on n2, in
#     the data phase;
#   - ctrain supervise (2 nodes + a spare): rank 0 SIGSTOPped at a random moment; the ranks'
#     timeout message cannot name rank 0's node (rank 0 is the one that collects the roll call), so
#     the hang records name n1, and the new step on the spare completes; the failed step's records
#     are kept in DIR/hang.restart-1, where diagnose names rank 0 on n1 from its live record;
# and nothing is left running. The cluster is stopped by pid at exit, also on failure.
. "$(dirname "$0")/lib/launch.sh"
. "$(dirname "$0")/lib/ddp.sh"
N=13

[ -x "$B/st_compare" ] || skip_all $N "$B/st_compare not built (make tests)"
make_data || skip_all $N "dataset-fashion-mnist not installed"
start_srun_cluster $N 3
SC="$root_dir/scripts/slurm-cluster"
export OPENBLAS_NUM_THREADS=1
# n2's host name differs from its SLURM name, and resolves, as a site's DNS would have it (appended:
# the nodes' /etc/hosts is this file, bound by inode).
"$SC" exec "$cluster" n2 hostname n2-host.cluster.example
echo "$(awk '$2 == "n2" { print $1 }' "$cluster/hosts")	n2-host.cluster.example" >>"$cluster/hosts"
FIT="fit --data $tmp/data --progress off --batch-size 32 --log-every-n-steps 10 --strategy ddp --deterministic
     --lr-schedule constant"
FIT=$(echo $FIT)
SRUN="srun -N2 -n3 -w n1,n2 --mpi=pmix"

rows() { cat "$1/metrics.csv" 2>/dev/null | grep -c '^[0-9]'; }
wait_rows() {    # wait_rows DIR N: until metrics.csv has N training rows (60 s at most)
    for i in $(seq 600); do
        [ "$(rows "$1")" -ge "$2" ] && return 0
        sleep 0.1
    done
    return 1
}
records() { ls "$1/hang" 2>/dev/null | grep -c '^rank-[0-9]*\.json$'; }
jget() { python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2" 2>/dev/null; }
rand_sleep() { sleep "$(awk -v m="$1" 'BEGIN { srand(); printf "%.2f", rand() * m }')"; }
# The `ctrain fit` task of rank RANK (SLURM_PROCID) of run DIR, on whichever node (not a supervisor,
# whose command line names DIR too).
task_pid() {    # task_pid RANK DIR
    for p in $(pgrep -x ctrain); do
        [ "$({ tr '\0' '\n' <"/proc/$p/cmdline"; } 2>/dev/null | sed -n 2p)" = fit ] || continue
        grep -qa -- "$2" "/proc/$p/cmdline" 2>/dev/null || continue
        { tr '\0' '\n' <"/proc/$p/environ"; } 2>/dev/null | grep -qx "SLURM_PROCID=$1" && echo "$p" && return 0
    done
    return 1
}
tasks_of() { for r in 0 1 2; do task_pid "$r" "$1"; done; }
job_of() { squeue -h -n "$1" -o %A 2>/dev/null | head -n 1; }

# 1-3: the dump signal on a healthy fit, through scancel.
timeout 300 $SRUN "$CTRAIN" $FIT --max-epochs 6 --default-root-dir "$tmp/ref" >"$tmp/ref.out" 2>&1 ||
    { diag "$tmp/ref.out"; exit 1; }
timeout 300 $SRUN -J "t96-usr2-$$" "$CTRAIN" $FIT --max-epochs 6 --default-root-dir "$tmp/usr2" >"$tmp/usr2.out" 2>&1 &
P=$!
pids="$pids $P"
wait_rows "$tmp/usr2" 2
rand_sleep 1
job=$(job_of "t96-usr2-$$")
at=$(rows "$tmp/usr2")
[ -n "$job" ] && scancel --signal=USR2 "$job"
sent=$?
wait $P
rc=$?
[ -n "$job" ] && [ "$sent" -eq 0 ] && [ "$rc" -eq 0 ] && [ "$(records "$tmp/usr2")" -eq 3 ] &&
    grep -q '"reason":[[:space:]]*"signal"' "$tmp/usr2/hang/rank-2.json"
ok $? "scancel --signal=USR2 $job at row $at of a 3-rank 2-node fit: every rank writes hang/rank-R.json, the fit ends 0 (exit $rc)" ||
    diag "$tmp/usr2.out"
hosts="$(jget "$tmp/usr2/hang/rank-0.json" host) $(jget "$tmp/usr2/hang/rank-1.json" host) $(jget "$tmp/usr2/hang/rank-2.json" host)"
ok "$([ "$hosts" = "n1 n1 n2" ]; echo $?)" "the records name the nodes as SLURM does, not n2's host name ($hosts)"
"$B/st_compare" "$tmp/ref/last.safetensors" "$tmp/usr2/last.safetensors" >"$tmp/cmp.out" 2>&1
ok $? "the fit that got the dump signal ends with the weights of the one without (st_compare: $(cat "$tmp/cmp.out"))"

# 4-6: rank 2 (on n2) SIGSTOPped at a random moment.
timeout 300 $SRUN "$CTRAIN" $FIT --max-epochs 200 --collective-timeout 5 --default-root-dir "$tmp/stop" \
    >"$tmp/stop.out" 2>&1 &
P=$!
pids="$pids $P"
wait_rows "$tmp/stop" 2
rand_sleep 2
victim=$(task_pid 2 "$tmp/stop")
at=$(rows "$tmp/stop")
t0=$(now)
[ -n "$victim" ] && kill -STOP "$victim"
for i in $(seq 300); do
    [ -z "$(tasks_of "$tmp/stop")" ] && ! kill -0 $P 2>/dev/null && break
    sleep 0.1
done
secs=$(elapsed "$t0")
left=$(tasks_of "$tmp/stop")
kill -9 $P 2>/dev/null
wait $P
rc=$?
[ -n "$victim" ] && [ "$rc" -ne 0 ] && [ -z "$left" ] && lt "$secs" 15.01
ok $? "rank 2 on n2 SIGSTOPped at row $at, --collective-timeout 5: every rank ends within 15 s (${secs} s, srun exit $rc)" ||
    diag "$tmp/stop.out"
# The stopped rank writes nothing: its phase comes from its live record (hang/rank-2.live).
stopped_named() {    # stopped_named RANK HOST FILE
    grep -q "ctrain: rank $1 (host $2, pid $victim) is behind: step [0-9]*, phase [a-z]* .*this reading of its live record" "$3" &&
        grep -q "ctrain:   it wrote no record (stopped, dead or could not write): this is its live record (rank-$1.live)" "$3"
}
stopped_named 2 n2 "$tmp/stop.out"
ok $? "rank 0 prints the diagnosis after the timeout, naming rank 2 on n2, its pid, step and phase" || diag "$tmp/stop.out"
"$CTRAIN" diagnose "$tmp/stop" >"$tmp/diag-stop.out" 2>&1
rc=$?
[ "$rc" -eq 3 ] && stopped_named 2 n2 "$tmp/diag-stop.out" &&
    grep -q "found it missing in collective #[0-9]* (.*) at step [0-9]*, phase [a-z]*: it had not reached" \
        "$tmp/diag-stop.out"
ok $? "ctrain diagnose names rank 2, its node n2 and the collective and step it had not reached (exit $rc)" ||
    diag "$tmp/diag-stop.out"

# 7-8: rank 2 held in its data phase at step 30; the dump signal through scancel while it is held.
CTRAIN_TEST_DATA_STALL=2:30 timeout 300 $SRUN -J "t96-data-$$" "$CTRAIN" $FIT --max-epochs 200 \
    --collective-timeout 120 --default-root-dir "$tmp/data2" >"$tmp/data2.out" 2>&1 &
P=$!
pids="$pids $P"
wait_rows "$tmp/data2" 3
sleep 2
job=$(job_of "t96-data-$$")
[ -n "$job" ] && scancel --signal=USR2 "$job"
for i in $(seq 100); do
    [ "$(records "$tmp/data2")" -eq 3 ] && break
    sleep 0.1
done
"$CTRAIN" diagnose "$tmp/data2" >"$tmp/diag-data.out" 2>&1
rc=$?
[ -n "$job" ] && scancel "$job"
for i in $(seq 300); do
    kill -0 $P 2>/dev/null || break
    sleep 0.1
done
kill -9 $P 2>/dev/null
wait $P
[ "$rc" -eq 3 ] && grep -q "rank 2 (host n2, pid [0-9]*) is behind: step 30, phase data" "$tmp/diag-data.out" &&
    ! grep -q "rank [01] .*is behind" "$tmp/diag-data.out"
ok $? "a rank held in its data phase: diagnose names rank 2 on n2, in the data phase at step 30 (exit $rc)" ||
    diag "$tmp/diag-data.out"
wait_gone 30 $(tasks_of "$tmp/data2")
ok $? "... and scancel ends its tasks"

# 9-12: ctrain supervise, rank 0 SIGSTOPped: only the hang records name its node.
cat >"$tmp/job.sh" <<EOF
#!/bin/sh
#SBATCH --ntasks-per-node=1 --no-kill --requeue --open-mode=append
"$CTRAIN" supervise --spare-nodes 1 --restart-backoff 0 -- "$CTRAIN" fit --data $tmp/data --progress off --batch-size 64 \
    --log-every-n-steps 5 --strategy ddp --deterministic --lr-schedule constant --max-epochs 5 \
    --checkpoint-every-n-steps 10 --collective-timeout 5 --default-root-dir "$tmp/sup"
echo "supervise exit \$?"
EOF
chmod +x "$tmp/job.sh"
sjob=$(sbatch --parsable -N3 -w n1,n2,n3 -o "$tmp/sup.log" "$tmp/job.sh")
wait_rows "$tmp/sup" "$(shuf -i 2-10 -n 1)"
rand_sleep 0.3
victim=$(task_pid 0 "$tmp/sup")
at=$(rows "$tmp/sup")
[ -n "$victim" ] && kill -STOP "$victim"
for i in $(seq 1800); do
    grep -q '^supervise exit' "$tmp/sup.log" 2>/dev/null && break
    sleep 0.1
done
grep -q 'supervise: node n1 failed: its rank is behind in the hang records' "$tmp/sup.log" &&
    ! grep -q 'supervise: node n[23] failed' "$tmp/sup.log"
ok $? "supervise, rank 0 on n1 SIGSTOPped at row $at: the hang records name n1, and nothing else names a node" ||
    diag "$tmp/sup.log"
grep -q 'supervise: new step on n\[2-3\]' "$tmp/sup.log" && grep -q '^supervise exit 0' "$tmp/sup.log" &&
    [ -s "$tmp/sup/summary.json" ]
st=$?
what="... the new step on n2 and the spare n3 resumes and completes (job $sjob)"
# Known on SLURM 24.11 with Open MPI 5 and PMIx 5 (the Debian 13 root), in 1 run of 2 to 1 of 3
# under load, cause not found: the new step starts and both its ranks wait in MPI_Init's fence for
# good (seen under gdb: ompi_mpi_init's wait loop). Ruled out: the failed step's slurmstepds (a new
# step 6 s after their cleanup hung alike), n2's host name unresolvable or apart from its SLURM
# name (it hung with either fixed). There it is a TODO, and the job is cancelled so that nothing
# is left (tests 12-13 stay strict); on SLURM 22.05 and 23.02 the test is strict.
case "$(srun --version 2>/dev/null)" in *" 22."* | *" 23.02"*) known=0 ;; *) known=1 ;; esac
if [ $st -ne 0 ] && [ $known -eq 1 ] && grep -q 'supervise: new step on' "$tmp/sup.log" &&
    ! grep -q '^supervise exit' "$tmp/sup.log"; then
    n=$((n + 1))
    echo "not ok $n - $what # TODO $(srun --version): the new step's ranks wait in MPI_Init's fence (Open MPI 5, PMIx 5)"
    diag "$tmp/sup.log"
    scancel "$sjob"
    wait_gone 30 $(tasks_of "$tmp/sup")
else
    ok $st "$what" || diag "$tmp/sup.log"
fi
# The failed step's records moved aside before the new step: diagnose reads them there, rank 0's from
# its live record; the new step, which ended well, left none in DIR/hang.
"$CTRAIN" diagnose "$tmp/sup/hang.restart-1" >"$tmp/diag-sup.out" 2>&1
rc=$?
[ "$rc" -eq 3 ] && grep -q "supervise: the failed step's hang records are in $tmp/sup/hang.restart-1" "$tmp/sup.log" &&
    stopped_named 0 n1 "$tmp/diag-sup.out" && [ -z "$(ls "$tmp/sup/hang" 2>/dev/null)" ]
ok $? "... the failed step's records kept in DIR/hang.restart-1: diagnose names rank 0 on n1 with its phase (exit $rc), DIR/hang empty" ||
    diag "$tmp/diag-sup.out" "$tmp/sup.log"
for i in $(seq 300); do
    [ -z "$(squeue -h -j "$sjob" -o %A 2>/dev/null)" ] && break
    sleep 0.1
done
ok "$([ -z "$(tasks_of "$tmp/sup")" ] && [ -z "$(squeue -h -j "$sjob" -o %A 2>/dev/null)" ]; echo $?)" \
    "... and nothing of the job is left"

# 13: nothing of any run left.
sleep 1
left=$(procs_with "$tmp/" | while read -r p; do [ "$(cat "/proc/$p/comm" 2>/dev/null)" = ctrain ] && echo "$p"; done | tr '\n' ' ')
ok "$([ -z "$left" ]; echo $?)" "nothing of any run is left running${left:+: $left}"
