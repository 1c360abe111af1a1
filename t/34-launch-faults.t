#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Faults under the subprocess and fork launchers: a rank killed by SIGKILL or exiting 3 ends the
# job within 10 s with a message naming the rank and how it failed; the supervisor forwards
# SIGTERM and SIGUSR1; no rank, server process or server directory is left behind.
. "$(dirname "$0")/lib/launch.sh"
echo "1..24"

# start LAUNCHER MODE N ARGS...: run the probe in the background; P = its pid
start() {
    "$B/launch_probe" "$@" >"$tmp/out" 2>"$tmp/err" &
    P=$!
    pids="$pids $P"
}

# kill_one LAUNCHER SIGNAL_TO_RANK RANK
kill_one() {
    d="$tmp/pids.$1"
    mkdir -p "$d"
    start "$1" hang 4 "$d"
    if ! wait_files "$d" 4 30; then
        for i in 1 2 3 4 5; do ok 1 "$1: 4 ranks did not start (no pid files)"; done
        diag "$tmp/out" "$tmp/err"
        return
    fi
    kids=$(children "$P")  # the ranks and the PMIx server process (t/lib/procs.sh)
    pids="$pids $kids"
    dirs=$(cat "$d/ompi-dirs" 2>/dev/null)
    shm_used=$(ls "${dirs%% *}" 2>/dev/null | grep -c -e vader -e sm_segment)   # Open MPI 4.1, 5
    t0=$(now)
    kill -KILL "$(cat "$d/rank.$2.pid")"
    wait $P
    rc=$?
    took=$(elapsed "$t0")
    [ $rc -ne 0 ]
    ok $? "$1: SIGKILL of rank $2 makes the launch fail (exit $rc)"
    lt "$took" 10
    ok $? "$1: every rank gone within 10 s (${took} s)"
    grep -q "^ctrain: error: rank $2 was killed by signal SIGKILL" "$tmp/err"
    ok $? "$1: the message names rank $2 and SIGKILL" || diag "$tmp/err"
    [ "$(echo $kids | wc -w)" -eq 5 ] && all_gone $kids
    ok $? "$1: no process left behind (4 ranks and the server: $kids)"
    [ "$shm_used" -gt 0 ] && [ -n "$dirs" ] && all_removed $dirs
    ok $? "$1: Open MPI's shared-memory files ($shm_used) and session directory removed ($dirs)"
}

kill_one subprocess 2
kill_one fork 1

for l in subprocess fork; do
    start $l exit 4 2 3
    wait $P
    rc=$?
    [ $rc -ne 0 ] && grep -q '^ctrain: error: rank 2 exited with status 3' "$tmp/err"
    ok $? "$l: a rank exiting 3 is reported as 'rank 2 exited with status 3'" || diag "$tmp/err"
done

# A rank that ignores SIGTERM is killed when the grace period (5 s in the probe) is over.
d="$tmp/pids.term"
mkdir -p "$d"
PROBE_IGNORE_TERM=1 start fork hang 3 "$d"
wait_files "$d" 3 30
kids=$(children "$P")
pids="$pids $kids"
t0=$(now)
kill -KILL "$(cat "$d/rank.0.pid")"
wait $P
rc=$?
took=$(elapsed "$t0")
[ $rc -ne 0 ] && lt 4 "$took" && lt "$took" 10
ok $? "ranks ignoring SIGTERM are SIGKILLed after the grace period (${took} s)"
all_gone $kids
ok $? "no process left behind after SIGKILL escalation"

# SIGTERM to the supervisor reaches every rank; the job ends and says so.
d="$tmp/pids.fwd"
mkdir -p "$d"
start subprocess hang 3 "$d"
wait_files "$d" 3 30
kids=$(children "$P")
pids="$pids $kids"
kill -TERM $P
wait $P
rc=$?
[ $rc -ne 0 ] && grep -q 'killed by signal SIGTERM (pid [0-9]*) after ctrain forwarded SIGTERM' "$tmp/err"
ok $? "SIGTERM to the supervisor is forwarded to the ranks and reported" || diag "$tmp/err"
all_gone $kids
ok $? "no process left behind after SIGTERM"

# SIGUSR1 (SLURM's preemption warning) reaches every rank, which end cleanly.
for l in subprocess fork; do
    d="$tmp/usr1.$l"
    mkdir -p "$d"
    start $l usr1 3 "$d"
    wait_files "$d" 3 30
    kill -USR1 $P
    wait $P
    rc=$?
    [ $rc -eq 0 ] && [ "$(ls "$d" | grep -c '\.usr1$')" -eq 3 ]
    ok $? "$l: SIGUSR1 forwarded to all 3 ranks, the job ends with 0" || diag "$tmp/err"
done

# The same when the caller has another thread with every signal unblocked (a host program's
# thread, OpenBLAS's workers): the kernel may deliver a process signal there, and it must still
# reach the supervisor instead of ending the process (exit 138) with the ranks and no checkpoint.
for l in subprocess fork; do
    d="$tmp/usr1t.$l"
    mkdir -p "$d"
    PROBE_THREAD=1 start $l usr1 3 "$d"
    wait_files "$d" 3 30
    kill -USR1 $P
    wait $P
    rc=$?
    [ $rc -eq 0 ] && [ "$(ls "$d" | grep -c '\.usr1$')" -eq 3 ]
    ok $? "$l, caller with a thread that does not block signals: SIGUSR1 forwarded to all 3 ranks, exit 0 (exit $rc)" ||
        diag "$tmp/err"
done

# A process a rank started dies with the job: each rank has its own process group, and the whole
# group is signalled and, once the rank is reaped, killed.
for l in subprocess fork; do
    d="$tmp/child.$l"
    mkdir -p "$d"
    PROBE_CHILD="$d" start $l exit 3 1 3
    wait $P
    rc=$?
    sleep 0.5
    cpids=$(cat "$d"/child.*.pid 2>/dev/null | tr '\n' ' ')
    pids="$pids $cpids"
    [ $rc -ne 0 ] && [ "$(echo $cpids | wc -w)" -eq 3 ] && all_gone $cpids
    ok $? "$l: the ranks' own children ($cpids) are gone with the job (exit $rc)" || diag "$tmp/err"
done

# A caller that ignores SIGCHLD (the kernel would reap the ranks) still learns how they ended.
PROBE_IGNORE_CHLD=1 start fork exit 3 1 3
wait $P
rc=$?
[ $rc -ne 0 ] && grep -q '^ctrain: error: rank 1 exited with status 3' "$tmp/err"
ok $? "with SIGCHLD ignored by the caller the exit status is still reported" || diag "$tmp/err"

no_server_dirs
ok $? "no PMIx server directory left in TMPDIR"
