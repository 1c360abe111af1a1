#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# ddp under ctrain's own launchers, no mpirun: the subprocess launcher (ctrain fit --strategy ddp
# --devices 2) and the fork launcher (ddp_fork) from a C program that calls the library
# (t/tools/fit_fork.c): fit returns rank 0's result in the calling process. SIGKILL of rank 1
# during training under each: every rank gone within 10 s, non-zero exit, the message names the
# rank and the signal, no process left behind. (t/06 covers the subprocess launcher's results.) And
# ddp_fork from a program that trained on two OpenMP threads first: libgomp cannot start a team in
# a child forked after one ran, so the workers compute on one thread, with a note, and do not hang.
. "$(dirname "$0")/lib/launch.sh"
. "$(dirname "$0")/lib/ddp.sh"
N=17

make_data || skip_all $N "dataset-fashion-mnist not installed"
echo "1..$N"

# fork_rank PARENT R: among the caller's forked children (the ranks and the PMIx server process),
# rank 0 is the one that holds metrics.csv open and rank 1 the other one running Open MPI (its
# BTL components are mapped once MPI_Init ran: Open MPI 4.1's mca_btl_*.so, Open MPI 5's shared-memory
# segment, its BTLs being built into the library; the server process maps only PMIx's). The forked
# ranks share the caller's command line and environment, so neither tells them apart.
fork_rank() {
    for p in $(children "$1"); do
        grep -Eq 'mca_btl_|sm_segment' "/proc/$p/maps" 2>/dev/null || continue
        if ls -l "/proc/$p/fd" 2>/dev/null | grep -q 'metrics\.csv'; then
            [ "$2" = 0 ] && echo "$p"
        else
            [ "$2" = 1 ] && echo "$p"
        fi
    done
}

# 1-2: ddp_fork from the library; fit returns rank 0's result here.
timeout 120 "$B/fit_fork" "$tmp/data" "$tmp/a" 2 1 >"$tmp/a.out" 2>&1
rc=$?
[ $rc -eq 0 ] && grep -q "^fit_fork: result filled 1 world_size 2 steps 43 test_acc 0\.[0-9]* best $tmp/a/best.safetensors summary $tmp/a/summary.json\$" "$tmp/a.out"
ok $? "ddp_fork via ct_trainer_fit: exit 0, rank 0's result (world_size 2, 43 steps, best checkpoint) in the caller" ||
    diag "$tmp/a.out"
acc=$(sed -n 's/.* test_acc \([0-9.]*\) .*/\1/p' "$tmp/a.out")
[ -n "$acc" ] && [ "$(json world_size "$tmp/a/summary.json")" = 2 ] &&
    awk -v a="$acc" -v b="$(json test_acc "$tmp/a/summary.json")" 'BEGIN { exit !(a - b < 0.00005 && b - a < 0.00005) }'
ok $? "the caller's test_acc ($acc) is the one rank 0 wrote to summary.json" || diag "$tmp/a/summary.json"

# 3: a program that trained first (single_device, OMP_NUM_THREADS=2), then forks its ddp workers.
OMP_NUM_THREADS=2 timeout 120 "$B/fit_fork" "$tmp/data" "$tmp/b" 2 1 first >"$tmp/b.out" 2>&1
rc=$?
[ $rc -eq 0 ] && grep -q "^fit_fork: result filled 1 world_size 2 steps 43 " "$tmp/b.out" &&
    grep -q "^ctrain: note: the program trained on OpenMP threads before ddp_fork forked" "$tmp/b.out"
ok $? "ddp_fork after training on 2 OpenMP threads: no hang, the workers on 1 thread with a note (rc $rc)" ||
    diag "$tmp/b.out"

# fault LABEL FINDER EXPECTED_MESSAGE COMMAND...: start COMMAND, SIGKILL rank 1 once training runs
fault() {
    label=$1 finder=$2 want=$3
    shift 3
    dir="$tmp/f.$label"
    "$@" >"$tmp/$label.out" 2>"$tmp/$label.err" &
    P=$!
    pids="$pids $P"
    r0="" r1=""
    if wait_training "$dir" 60; then
        r0=$($finder 0)
        r1=$($finder 1)
        kids=$(children $P)
        pids="$pids $kids"
    fi
    if [ -n "$r0" ] && [ -n "$r1" ]; then
        ok 0 "$label: found rank 1 (pid $r1) training, rank 0 pid $r0"
        kill_and_time "$r1" $P $P $kids
    else
        ok 1 "$label: found rank 1 training" || diag "$tmp/$label.out" "$tmp/$label.err"
        rc=0 took=99 gone=1
    fi
    [ $rc -ne 0 ]
    ok $? "$label: exit non-zero when rank 1 is killed (exit $rc)"
    lt "$took" 10
    ok $? "$label: every rank gone within 10 s (${took} s)"
    grep -q "$want" "$tmp/$label.err"
    ok $? "$label: the message names rank 1 and SIGKILL" || diag "$tmp/$label.err"
    [ $gone -eq 0 ] && [ -z "$(procs_with "$dir")" ]
    ok $? "$label: no process left behind (caller $P, its children $(echo $kids))"
}

sub_rank() { rank_pid "$tmp/f.subprocess" PMIX_RANK "$1"; }
fork_rank_of_p() { fork_rank "$P" "$1"; }

fault subprocess sub_rank '^ctrain: error: rank 1 was killed by signal SIGKILL' \
    "$CTRAIN" fit $FIT_FLAGS --data "$tmp/data" --strategy ddp --devices 2 --max-epochs 200 --log-every-n-steps 5 \
    --default-root-dir "$tmp/f.subprocess"
# 200 epochs: far longer than the test needs (rank 0 writes a training row every 50 steps).
fault ddp_fork fork_rank_of_p 'rank 1 was killed by signal SIGKILL' \
    "$B/fit_fork" "$tmp/data" "$tmp/f.ddp_fork" 2 200

# 14-17: ddp_fork's PMIx server process (the caller's oldest child: it is forked before the ranks)
# killed as soon as the ranks appear (they are then in MPI_Init, which cannot finish without it),
# and at a random moment of the next second and a half (before, during or after MPI_Init): each
# time a non-zero exit whose message names the server and the signal, not only a rank's exit
# status; SIGPIPE to it changes nothing; no rank or server left behind.
oldest_child() {
    for p in $(pgrep -P "$1"); do
        st=$({ sed 's/^.*) //' "/proc/$p/stat" | cut -d' ' -f20; } 2>/dev/null)
        [ -n "$st" ] && echo "$st $p"
    done | sort -n | head -1 | cut -d' ' -f2
}
# kill_server LABEL DELAY [SIGNAL [EPOCHS]]: run fit_fork for EPOCHS (50: far longer than the test
# needs, the ranks are stopped when their server goes), signal (SIGKILL) its server DELAY seconds
# after the ranks appear; rc, S (the server's pid) and kids are left for the caller
kill_server() {
    "$B/fit_fork" "$tmp/data" "$tmp/$1" 2 "${4:-50}" >"$tmp/$1.out" 2>&1 &
    P=$!
    pids="$pids $P"
    S="" tries=0
    while [ $tries -lt 600 ] && kill -0 $P 2>/dev/null; do
        [ "$(pgrep -P $P | wc -w)" -ge 3 ] && { S=$(oldest_child $P); break; }
        sleep 0.05
        tries=$((tries + 1))
    done
    kids="$kids $(pgrep -P $P)"
    sleep "$2"
    [ -n "$S" ] && kill -"${3:-KILL}" "$S" 2>/dev/null
    tries=0
    while kill -0 $P 2>/dev/null && [ $tries -lt 1200 ]; do sleep 0.1; tries=$((tries + 1)); done
    kill -9 $P 2>/dev/null
    wait $P
    rc=$?
}
# killed LABEL WHEN: after kill_server LABEL: a failure that names the server and SIGKILL
killed() {
    [ -n "$S" ] && [ $rc -ne 0 ] && grep -q "PMIx server process (pid $S)" "$tmp/$1.out" &&
        grep -q "SIGKILL\|wait status 0x9" "$tmp/$1.out"
    ok $? "ddp_fork: the PMIx server killed $2: exit $rc, the message names the server (pid $S) and SIGKILL" ||
        diag "$tmp/$1.out"
}
kids=""
kill_server s0 0
killed s0 "as the ranks start"
delay=$(( $(od -An -N2 -tu2 /dev/urandom) % 1500 ))
kill_server s1 "$(printf '%d.%03d' $((delay / 1000)) $((delay % 1000)))"
killed s1 "${delay} ms after the ranks start"
# 16: SIGPIPE (what libpmix's write to a rank that died raises) leaves the server serving
kill_server s2 0 PIPE 1
[ -n "$S" ] && [ $rc -eq 0 ] && grep -q "^fit_fork: result filled 1 world_size 2 steps " "$tmp/s2.out"
ok $? "ddp_fork: SIGPIPE to the PMIx server (pid $S) as the ranks start: the run finishes (exit $rc)" ||
    diag "$tmp/s2.out"
sleep 0.5
left=""
for k in $kids; do kill -0 "$k" 2>/dev/null && left="$left $k"; done
[ -z "$left" ]
ok $? "ddp_fork: no rank or server left behind after the server was killed (left:$left)"
