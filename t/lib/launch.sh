# SPDX-License-Identifier: BSD-3-Clause
# Shared by t/3x-*.t (sourced): TAP helpers, a private temp dir, cleanup of what a test started.
# Every process a test starts is recorded in $pids and killed by pid, with its descendants, on exit,
# even on failure.

T=$(cd "$(dirname "$0")" && pwd)
B="$T/../${CTRAIN_BUILD:-build}/t"
n=0
pids=""
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ctrain-test.XXXXXX")
# The launchers create their PMIx server directory under TMPDIR: the tests check it is removed.
mkdir -p "$tmp/tmp"
export TMPDIR="$tmp/tmp"

cleanup() {  # each recorded process with its descendants (an mpirun's ranks), found before any dies
    c_all=""
    for p in $pids; do c_all="$c_all $(descendants "$p") $p"; done
    for p in $c_all; do kill -KILL "$p" 2>/dev/null; done
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

ok() {  # ok STATUS DESCRIPTION: fails as the check did, so `ok $? "..." || diag FILE` shows FILE
    n=$((n + 1))
    if [ "$1" -eq 0 ]; then echo "ok $n - $2"; return 0; fi
    echo "not ok $n - $2"
    return 1
}

diag() {  # diag FILE...: show files as TAP comments
    for f in "$@"; do [ -f "$f" ] && sed 's/^/# /' "$f"; done
}

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
lt() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a < b) }'; }

# wait_files DIR COUNT SECONDS: until DIR holds COUNT files named *.pid
wait_files() {
    i=0
    while [ "$(ls "$1" 2>/dev/null | grep -c '\.pid$')" -lt "$2" ]; do
        i=$((i + 1))
        [ $i -gt $(($3 * 10)) ] && return 1
        sleep 0.1
    done
    return 0
}

. "$T/lib/procs.sh"    # all_gone

# all_removed PATH...: none of them exists any more
all_removed() {
    for x in "$@"; do [ -e "$x" ] && return 1; done
    return 0
}

# no_server_dirs: the launchers removed their PMIx server directories
no_server_dirs() {
    [ -z "$(ls "$TMPDIR" | grep '^ctrain-pmix\.')" ]
}
