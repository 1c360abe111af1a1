# SPDX-License-Identifier: BSD-3-Clause
# TAP's ok with diagnostics from files, for the tests that count their checks in $n (t/lib/preempt.sh,
# t/97, t/98).
n=0
ok() {    # ok CONDITION-STATUS NAME [DIAG-FILE...]
    n=$((n + 1))
    if [ "$1" -eq 0 ]; then
        echo "ok $n - $2"
    else
        echo "not ok $n - $2"
        shift 2
        for f in "$@"; do [ -f "$f" ] && sed 's/^/#   /' "$f"; done
    fi
    return 0
}
