#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# What ctrain reads back from a run directory (issue 48 items 4, 5 and 7), with records made by
# hand, no fit: `ctrain diagnose` (and ctrain supervise, which reads the records through the same
# code) refuses a FIFO, a directory or a 2 MiB file planted as hang/rank-0.json at once, naming it
# (a FIFO opened for reading blocked it forever); a FIFO planted as a live record is passed over.
# Control characters in a record's host and collective names, and in a path an error names, reach
# the terminal escaped (\xNN): a record cannot retitle the terminal, erase a line or print a fake one.
# The low items (item 7): a number out of range in a record (step 1e300 read as INT64_MIN) and a
# record whose rank differs from its file name's are refused; ctrain supervise refuses
# --max-restarts 1000000 and --mpi '' before anything starts; --preflight-checks ,, (no check: every
# node "passed") is refused.
# Each check runs under timeout(1), so a reader that blocks fails instead of holding the suite.
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B="$ROOT/${CTRAIN_BUILD:-build}"
T=$(mktemp -d /tmp/ctrain-t97-XXXXXX)
trap 'rm -rf "$T"' EXIT
trap 'exit 1' INT TERM HUP PIPE

echo "1..11"
. "$ROOT/t/lib/tap.sh"
[ -x "$B/ctrain" ] || { echo "Bail out! $B/ctrain is not built (run make)"; exit 1; }

# record RANK WORLD HOST STEP PHASE WHAT: a hang record as a rank writes it (engine/health/fit/hang.c).
record() {
    printf '{"rank":%s,"world":%s,"host":"%s","pid":100,"reason":"signal","step":%s,"phase":"%s","bucket":-1,' \
        "$1" "$2" "$3" "$4" "$5"
    printf '"collective":{"seq":5,"what":"%s","waiting":false,"waited_s":0,"timed_out":false,"missing":[],' "$6"
    printf '"missing_hosts":[]},"entered_wall":1000,"entered_mono":1,"now_wall":1001,"now_mono":2}\n'
}
# diag NAME DIR: ctrain diagnose DIR (10 s at most), output in $T/NAME.out; sets rc.
diag() {
    timeout -k 2 10 "$B/ctrain" diagnose "$2" >"$T/$1.out" 2>&1
    rc=$?
}

# 1: a FIFO as rank-0.json (nobody writes it).
mkdir -p "$T/fifo/hang"
mkfifo "$T/fifo/hang/rank-0.json"
diag fifo "$T/fifo"
[ "$rc" -eq 2 ] && grep -q "hang record $T/fifo/hang/rank-0.json is a FIFO, not a regular file" "$T/fifo.out"
ok $? "diagnose: a FIFO as hang/rank-0.json is refused at once, named (exit $rc; 124: it blocked)" "$T/fifo.out"

# 2: a directory as rank-0.json.
mkdir -p "$T/dir/hang/rank-0.json"
diag dir "$T/dir"
[ "$rc" -eq 2 ] && grep -q "hang record $T/dir/hang/rank-0.json is a directory, not a regular file" "$T/dir.out"
ok $? "diagnose: a directory as hang/rank-0.json is named as one (exit $rc)" "$T/dir.out"

# 3: a 2 MiB record (its content a record, padded with spaces JSON allows).
mkdir -p "$T/big/hang"
{ record 0 1 n1 3 forward ar; head -c 2097152 /dev/zero | tr '\0' ' '; } >"$T/big/hang/rank-0.json"
diag big "$T/big"
[ "$rc" -eq 2 ] && grep -q "hang record $T/big/hang/rank-0.json is [0-9]* bytes, more than the 1048576 bytes" "$T/big.out"
ok $? "diagnose: a 2 MiB hang/rank-0.json is refused naming its size and the cap (exit $rc)" "$T/big.out"

# 4: a FIFO as rank-1.live beside rank 0's record: passed over, not waited on.
mkdir -p "$T/live/hang"
record 0 2 n1 3 forward ar >"$T/live/hang/rank-0.json"
mkfifo "$T/live/hang/rank-1.live"
diag live "$T/live"
[ "$rc" -eq 3 ] && grep -q "rank 1 is behind: no record" "$T/live.out"
ok $? "diagnose: a FIFO as hang/rank-1.live is passed over, rank 1 named as without a record (exit $rc)" "$T/live.out"

# 5: escape sequences in a record: the host retitles the terminal, the collective's name erases the
# line and prints a fake verdict, the missing rank's host clears the screen.
mkdir -p "$T/esc/hang"
printf '%s\n' '{"rank":0,"world":2,"host":"n1\u001b]0;pwned\u0007","pid":100,"reason":"collective-timeout","step":3,' \
    '"phase":"allreduce","bucket":-1,"collective":{"seq":5,"what":"ar\r\u001b[2Kctrain: all 2 ranks are fine\u009b2J",' \
    '"waiting":true,"waited_s":9,"timed_out":true,"missing":[1],"missing_hosts":["n2\u001b[2J"]},' \
    '"entered_wall":1000,"entered_mono":1,"now_wall":1009,"now_mono":10}' >"$T/esc/hang/rank-0.json"
diag esc "$T/esc"
[ "$rc" -eq 3 ] && ! LC_ALL=C grep -q "$(printf '[\033\007\r]')" "$T/esc.out" &&
    ! LC_ALL=C grep -q "$(printf '\302\233')" "$T/esc.out" &&
    grep -qF 'rank 1 (host n2\x1b[2J) is behind' "$T/esc.out" &&
    grep -qF 'rank 0 (n1\x1b]0;pwned\x07) found it missing in collective #5 (ar\x0d\x1b[2Kctrain: all 2 ranks are fine\u009b2J)' "$T/esc.out"
ok $? "diagnose: control characters of a record (ESC, BEL, CR, C1 CSI) are printed escaped (exit $rc)" "$T/esc.out"

# 6: a path with an escape sequence, named by an error: escaped too.
diag escdir "$T/none$(printf '\033')[2J"
[ "$rc" -eq 2 ] && ! LC_ALL=C grep -q "$(printf '\033')" "$T/escdir.out" && grep -qF "$T/none\\x1b[2J is not a directory" "$T/escdir.out"
ok $? "an error naming a path with an escape sequence prints it escaped (exit $rc)" "$T/escdir.out"

# 7: a step out of range (1e300 is no int64_t).
mkdir -p "$T/range/hang"
record 0 1 n1 1e300 forward ar >"$T/range/hang/rank-0.json"
diag range "$T/range"
[ "$rc" -eq 2 ] && grep -q "$T/range/hang/rank-0.json is not a hang record" "$T/range.out" && ! grep -q -- "-9223372036854775808" "$T/range.out"
ok $? "diagnose: step 1e300 in a record is refused as not a record (exit $rc)" "$T/range.out"

# 8: rank-0.json saying it is rank 1's.
mkdir -p "$T/who/hang"
record 1 2 n1 3 forward ar >"$T/who/hang/rank-0.json"
diag who "$T/who"
[ "$rc" -eq 2 ] && grep -q "rank-0.json says it is rank 1's record, but rank 0 writes that file" "$T/who.out"
ok $? "diagnose: a record whose rank is not its file name's is refused (exit $rc)" "$T/who.out"

# 9-10: supervise's bounds, checked before it looks for a job.
"$B/ctrain" supervise --max-restarts 1000000 -- ctrain fit >"$T/sv1.out" 2>&1
rc=$?
[ "$rc" -eq 2 ] && grep -q "max-restarts '1000000' is not a whole number from 0 to 100" "$T/sv1.out"
ok $? "supervise --max-restarts 1000000 is refused (exit $rc)" "$T/sv1.out"
"$B/ctrain" supervise --mpi '' -- ctrain fit >"$T/sv2.out" 2>&1
rc=$?
"$B/ctrain" supervise --mpi 'pmix --x' -- ctrain fit >"$T/sv3.out" 2>&1
rc3=$?
[ "$rc" -eq 2 ] && grep -q "mpi '' is not an MPI plugin's name" "$T/sv2.out" && [ "$rc3" -eq 2 ]
ok $? "supervise --mpi '' and --mpi 'pmix --x' are refused (exit $rc, $rc3)" "$T/sv2.out" "$T/sv3.out"

# 11: --preflight-checks with no check in it.
"$B/ctrain" preflight --preflight-checks ,, >"$T/pf.out" 2>&1
rc=$?
"$B/ctrain" preflight --preflight-checks compute, >"$T/pf2.out" 2>&1
rc2=$?
[ "$rc" -eq 2 ] && grep -q "preflight-checks ,,: '' is not a check" "$T/pf.out" && [ "$rc2" -eq 2 ]
ok $? "--preflight-checks ,, and compute, (an empty name) are refused (exit $rc, $rc2)" "$T/pf.out" "$T/pf2.out"
