#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The launchers' PMIx server and munged. libpmix authenticates a client with munge whenever
# munged answers at server_init; a munged restarted while the ranks connect (another job's
# cluster stopping it, an admin restarting it) then failed their MPI_Init with 'Unreachable'.
# The server's clients are its own children, so it uses the kernel's peer credentials instead.
# A private munged runs in a private mount namespace (a tmpfs over /run), so the machine's own
# munged, and the test clusters that use it, never see this test; it runs from a copy of the binary,
# so that `service munge start` (start-stop-daemon --exec /usr/sbin/munged) beside it does not take
# it for the machine's munged and start none (seen: a test cluster starting while this ran failed).
if [ -z "$CT_MUNGE_NS" ]; then
    if [ "$(id -u)" -ne 0 ] || ! command -v unshare >/dev/null 2>&1 || ! command -v munged >/dev/null 2>&1; then
        echo "1..0 # SKIP needs root, unshare and munged (scripts/install-deps)"
        exit 0
    fi
    CT_MUNGE_NS=1 exec unshare -m --propagation private sh "$0" "$@"
fi
. "$(dirname "$0")/lib/launch.sh"

launches=${CT_MUNGE_LAUNCHES:-6}
munged_pid=""
# every private munged, by its binary's path (the restart loop may be starting one as it is stopped)
kill_munged() { pkill -KILL -f "^$tmp/ctrain-munged " 2>/dev/null; }
cleanup_munge() {
    [ -n "$loop" ] && kill -KILL "$loop" 2>/dev/null
    kill_munged
    cleanup
}
trap cleanup_munge EXIT

# start_munged: a foreground munged on /run/munge's socket with this test's key; its pid in
# $tmp/munged.cur once it answers
start_munged() {
    "$tmp/ctrain-munged" -F --force --key-file="$tmp/munge.key" --log-file="$tmp/munged.log" \
        --seed-file="$tmp/munged.seed" --pid-file=/run/munge/munged.pid </dev/null >/dev/null 2>&1 &
    echo $! >"$tmp/munged.cur"
}
rnd() { od -An -N2 -tu2 /dev/urandom | tr -d ' '; }
munge_answers() { munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1; }

cp "$(command -v munged)" "$tmp/ctrain-munged" && mount -t tmpfs -o mode=0755 ctrain-munge /run &&
    mkdir -m 0755 /run/munge &&
    head -c 1024 /dev/urandom >"$tmp/munge.key" && chmod 0600 "$tmp/munge.key" || {
    echo "1..0 # SKIP cannot copy munged or mount a private /run here"
    exit 0
}
start_munged
munged_pid=$(cat "$tmp/munged.cur")
i=0
until munge_answers; do
    i=$((i + 1))
    [ $i -gt 50 ] && { echo "1..0 # SKIP a private munged did not start: $(tail -n 1 "$tmp/munged.log" 2>/dev/null)"; exit 0; }
    sleep 0.1
done
echo "1..4"

# With munged answering, the ranks are told to authenticate with their peer credentials.
"$B/launch_probe" subprocess exec 2 /usr/bin/env >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 0 ] && [ "$(grep -c '^PMIX_SECURITY_MODE=native$' "$tmp/out")" -eq 1 ] &&
    ! grep -q '^\(\[rank 1\] \)\{0,1\}PMIX_SECURITY_MODE=.*munge' "$tmp/out"
ok $? "the ranks' PMIx security mode is native while munged answers (exit $rc)" ||
    { grep 'PMIX_SECURITY_MODE' "$tmp/out" | sed 's/^/# /'; diag "$tmp/err"; }

# munged stopped and started again at random moments while ranks start, connect and fence.
(
    while :; do
        kill -TERM "$(cat "$tmp/munged.cur")" 2>/dev/null
        wait 2>/dev/null
        sleep "0.0$(($(rnd) % 10))"
        start_munged
        sleep "0.$(printf %02d $(($(rnd) % 30)))"
    done
) &
loop=$!
kill -KILL "$munged_pid" 2>/dev/null
munged_pid=""
for l in subprocess fork; do
    bad=0
    i=0
    while [ $i -lt "$launches" ]; do
        i=$((i + 1))
        if ! "$B/launch_probe" $l mpi 4 >"$tmp/out" 2>"$tmp/err" ||
            [ "$(grep -c 'allreduce ok rank [0-3] of 4 sum 6' "$tmp/out")" -ne 4 ]; then
            bad=$((bad + 1))
            cp "$tmp/err" "$tmp/err.bad"
        fi
    done
    [ $bad -eq 0 ]
    ok $? "$l: $launches launches of 4 MPI ranks while munged restarts: $bad failed" || diag "$tmp/err.bad"
done
kill -KILL "$loop" 2>/dev/null
loop=""
kill_munged

no_server_dirs
ok $? "no PMIx server directory left in TMPDIR"
