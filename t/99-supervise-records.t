#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# ctrain supervise decides from records, never from the ranks' words (issue 51 item 3), and issue
# 48's supervise items, on a 3-node test cluster whose steps are short shell programs in place of
# the fit (supervise runs whatever follows --; the fit's own records are t/95's and t/96's):
#   - a step whose rank prints the collective timeout's verdict ("did not arrive (on n2)") without
#     writing a record: n2 is not named, the next step runs on the same nodes;
#   - a step whose rank 0 writes an event record naming n2 (DIR/hang/event-missing-rank-0.json) and
#     prints nothing, while rank 1, as if cut off, blames rank 0: n2 is named from rank 0's record,
#     n1 is not, and the next step runs on n1 and the spare n3;
#     a FIFO planted among the records is skipped, not waited on;
#   - a step that fails at once, three times: the restarts wait --restart-backoff S, then 2S;
#   - a job submitted without --no-kill: the supervisor warns at its start, with the hint;
#   - 500 node names that do not compress (over 4,095 characters): srun gets all 500 in --nodelist
#     (a stand-in srun on PATH records its command line; the job is not run);
#   - bad input (--max-restarts 1000000, --mpi '', --restart-backoff -1): a message, a hint, exit 2.
# About 30 s. The cluster is stopped by pid at exit (spank.sh's trap), also on failure.
. "$(dirname "$0")/lib/spank.sh"
spank_plan 12

bad() {    # bad PATTERN ARGS...: supervise refuses ARGS with exit 2, a message matching PATTERN and a hint
    local out rc pat=$1
    shift
    out=$(SLURM_JOB_ID=7 SLURM_JOB_NODELIST='n[1-2]' "$CTRAIN" supervise "$@" -- "$CTRAIN" fit 2>&1)
    rc=$?
    [ "$rc" -eq 2 ] && printf '%s\n' "$out" | grep -q -- "$pat" && printf '%s\n' "$out" | grep -q 'hint: '
    ok $? "supervise $* refused: exit $rc, $(printf '%s' "$out" | head -n 1)"
}
bad "--max-restarts '1000000' is not a whole number from 0 to 100" --max-restarts 1000000
bad "--mpi '' is not an MPI plugin's name" --mpi ''
bad "--restart-backoff '-1' is not a number of seconds" --restart-backoff -1

spank_cluster 3 ""
D=$CLUSTER_DIR
# step.sh MODE DIR: the first step (SLURM_STEP_ID 0) fails on every rank (exit 1: srun names no
# node for an exit status); rank 0 first prints the verdict (phrase) or writes the record (record).
# Later steps succeed, except under MODE fail.
cat >"$D/step.sh" <<'EOF'
#!/bin/sh
date +%s.%N >>"$2/steps.$SLURM_PROCID"
if [ "$SLURM_STEP_ID" = 0 ] || [ "$1" = fail ]; then
    if [ "$SLURM_PROCID" = 0 ]; then
        case $1 in
        phrase)
            echo "ctrain: ddp: gradient allreduce (collective #7) did not complete within 5 s: rank 1 of 2 did not arrive (on n2)" >&2 ;;
        record)
            mkdir -p "$2/hang" && mkfifo "$2/hang/event-missing-rank-1.json"
            printf '{"event":"missing","rank":0,"world":2,"pid":%d,"host":"n1","step":7,"collective":{"seq":7,"what":"gradient allreduce"},"at_fault":[{"rank":1,"node":"n2"}],"why":"its rank(s) did not arrive in a collective (test record)","wall":%s}\n' \
                $$ "$(date +%s)" >"$2/hang/event-missing-rank-0.json" ;;
        esac
    elif [ "$1" = record ]; then    # cut off from rank 0, rank 1 found it silent: rank 0's verdict wins
        sleep 0.5
        printf '{"event":"missing","rank":1,"world":2,"pid":%d,"host":"n2","step":7,"collective":{"seq":7,"what":"gradient allreduce"},"at_fault":[{"rank":0,"node":"n1"}],"why":"rank 0 did not answer (test record)","wall":%s}\n' \
            $$ "$(date +%s)" >"$2/hang/event-missing-rank-1.json.tmp" && mv "$2/hang/event-missing-rank-1.json.tmp" "$2/hang/event-missing-rank-2.json"
    fi
    # The first rank to exit ends the step (srun's --kill-on-bad-exit): the others wait until rank 0
    # has printed or written its part (a loaded machine once started rank 0's shell late enough that
    # it was killed before it printed).
    if [ "$SLURM_PROCID" = 0 ]; then
        : >"$2/said.$SLURM_STEP_ID"
    else
        i=0
        while [ ! -e "$2/said.$SLURM_STEP_ID" ] && [ $i -lt 200 ]; do sleep 0.1; i=$((i + 1)); done
    fi
    exit 1
fi
exit 0
EOF
cat >"$D/job.sh" <<EOF
#!/bin/sh
#SBATCH --ntasks-per-node=1 --no-kill --open-mode=append
mode=\$1 dir=\$2
shift 2
"$CTRAIN" supervise "\$@" -- /bin/sh "$D/step.sh" \$mode \$dir --default-root-dir \$dir
echo "supervise exit \$?"
EOF
chmod +x "$D/step.sh" "$D/job.sh"
mkdir -p "$D/p" "$D/r" "$D/f"
wait_job() {    # wait_job ID: until SLURM no longer lists it (at most 60 s)
    local i
    for i in $(seq 600); do
        [ -z "$(squeue -h -j "$1" 2>/dev/null)" ] && return 0
        sleep 0.1
    done
    return 1
}
check() {    # check STATUS NAME LOG
    ok "$1" "$2"
    [ "$1" -eq 0 ] || sed 's/^/#   /' "$3" 2>/dev/null | tail -n 30
}

p=$(sbatch --parsable -N3 -w n1,n2,n3 -o "$D/p.log" "$D/job.sh" phrase "$D/p" --spare-nodes 1 --max-restarts 1 --restart-backoff 0)
r=$(sbatch --parsable -N3 -w n1,n2,n3 -o "$D/r.log" "$D/job.sh" record "$D/r" --spare-nodes 1 --max-restarts 1 --restart-backoff 0)
wait_job "$p"
grep -q 'did not arrive (on n2)' "$D/p.log" && ! grep -q 'supervise: node n2 failed' "$D/p.log" &&
    grep -q 'supervise: no node named: the next step runs on the same nodes' "$D/p.log" &&
    grep -q 'supervise: new step on n\[1-2\]' "$D/p.log" && grep -q '^supervise exit 0' "$D/p.log"
check $? "job $p: a rank's verdict in its output, no record: nothing named, the next step on the same nodes" "$D/p.log"
wait_job "$r"
grep -q 'supervise: node n2 failed: its rank(s) did not arrive in a collective (test record)' "$D/r.log" &&
    ! grep -q 'supervise: node n1 failed' "$D/r.log" &&
    ! grep -q 'did not arrive (on' "$D/r.log" && grep -q 'supervise: new step on n\[1,3\]' "$D/r.log" &&
    grep -q '^supervise exit 0' "$D/r.log"
check $? "job $r: a record naming n2, nothing printed: n2 named from it (not n1, which only n2's rank blamed), the next step on n1 and the spare n3" "$D/r.log"
[ -d "$D/r/hang.restart-1" ] && [ -p "$D/r/hang.restart-1/event-missing-rank-1.json" ]
ok $? "... a FIFO among the records skipped, not waited on; the failed step's records moved to DIR/hang.restart-1"

f=$(sbatch --parsable -N1 -w n1 -o "$D/f.log" "$D/job.sh" fail "$D/f" --max-restarts 2 --restart-backoff 1)
wait_job "$f"
grep -q 'supervise: waiting [0-9.]* s before restart 1 (--restart-backoff 1:' "$D/f.log" &&
    grep -q 'supervise: waiting [0-9.]* s before restart 2 (--restart-backoff 1:' "$D/f.log" &&
    grep -q 'supervise: 2 restarts done (--max-restarts 2): giving up' "$D/f.log" && grep -q '^supervise exit 1' "$D/f.log"
check $? "job $f: a step that fails at once is restarted after a pause, twice, then given up" "$D/f.log"
gaps=$(awk 'NR > 1 { printf "%.1f ", $1 - prev } { prev = $1 }' "$D/f/steps.0")
awk 'NR > 1 { g[NR - 1] = $1 - prev } { prev = $1 } END { exit !(NR == 3 && g[1] >= 1 && g[2] >= 2) }' "$D/f/steps.0"
ok $? "... its steps started at least 1 s, then 2 s apart (gaps: $gaps)"

w=$(sbatch --parsable -N1 -w n2 -o "$D/w.log" --wrap "'$CTRAIN' supervise --max-restarts 0 -- /bin/true; echo supervise exit \$?")
wait_job "$w"
head -n 2 "$D/w.log" | grep -q "supervise: warning: job $w has no #SBATCH --no-kill in its script" &&
    grep -q 'supervise: hint: sbatch --no-kill' "$D/w.log" && grep -q '^supervise exit 0' "$D/w.log"
check $? "job $w without --no-kill: warned at the start, with the hint" "$D/w.log"
! grep -q 'supervise: warning: job' "$D/p.log" "$D/r.log" "$D/f.log"
ok $? "... and the jobs with #SBATCH --no-kill were not warned"

# 500 node names with no number to compress on: over 4,095 characters of --nodelist.
mkdir -p "$D/bin"
cat >"$D/bin/srun" <<EOF
#!/bin/sh
for a; do case \$a in --nodelist=*) printf '%s\n' "\${a#--nodelist=}" >"$D/nodelist" ;; esac; done
exit 0
EOF
chmod +x "$D/bin/srun"
names=$(for a in a b c d e f g h i j k l m n o p q r s t u v w x y; do
            for b in a b c d e f g h i j k l m n o p q r s t; do printf 'node-%s%s-x,' $a $b; done
        done | sed 's/,$//')
out=$(PATH="$D/bin:$PATH" SLURM_JOB_ID=999999 SLURM_JOB_NODELIST="$names" "$CTRAIN" supervise --max-restarts 0 -- /bin/true 2>&1)
rc=$?
got=$(tr ',' '\n' <"$D/nodelist" 2>/dev/null | grep -c .)
[ "$rc" -eq 0 ] && [ "$got" -eq 500 ] && [ "$(tr ',' '\n' <"$D/nodelist" | sort | tr '\n' ',' | sed 's/,$//')" = "$(printf '%s' "$names" | tr ',' '\n' | sort | tr '\n' ',' | sed 's/,$//')" ]
ok $? "500 names (${#names} characters) in the job: srun's --nodelist holds all 500 ($got, exit $rc)"
ok "$([ -z "$(squeue -h 2>/dev/null)" ]; echo $?)" "nothing of the jobs is left"
spank_done
