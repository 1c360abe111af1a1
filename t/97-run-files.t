#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# What ctrain reads back from a run directory (issue 48 items 4, 5 and 7), with records made by
# hand, no fit: `ctrain diagnose` (and ctrain supervise, which reads the records through the same
# code) refuses a FIFO, a directory or a 2 MiB file planted as hang/rank-0.json at once, naming it
# (a FIFO opened for reading blocked it forever); a FIFO planted as a live record is passed over.
# Each check runs under timeout(1), so a reader that blocks fails instead of holding the suite.
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B="$ROOT/${CTRAIN_BUILD:-build}"
T=$(mktemp -d /tmp/ctrain-t97-XXXXXX)
trap 'rm -rf "$T"' EXIT
trap 'exit 1' INT TERM HUP

echo "1..4"
n=0
ok() {    # ok CONDITION-STATUS NAME [DIAG-FILE...]
    n=$((n + 1))
    if [ "$1" -eq 0 ]; then echo "ok $n - $2"; else
        echo "not ok $n - $2"
        shift 2
        for f in "$@"; do [ -f "$f" ] && sed 's/^/#   /' "$f"; done
    fi
}
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
