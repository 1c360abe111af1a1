# SPDX-License-Identifier: BSD-3-Clause
# Shared by tests that check what they started has ended (sourced; defines functions only).

# all_gone PID...: none of them exists any more
all_gone() {    # a zombie is gone: dead, waiting for a parent (init here) that reaps it
    for p in "$@"; do
        kill -0 "$p" 2>/dev/null && [ "$(sed 's/^.*) \([A-Za-z]\) .*$/\1/' "/proc/$p/stat" 2>/dev/null)" != Z ] &&
            return 1
    done
    return 0
}

# children PID: the pids whose parent is PID, on one line
children() { echo $(ps -o pid= --ppid "$1"); }

# descendants PID: PID's children, their children, ... (one per line)
descendants() {
    ps -e -o pid=,ppid= | awk -v root="$1" '
        { parent[$1] = $2; order[NR] = $1 }
        END { keep[root] = 1
              do { more = 0
                   for (i = 1; i <= NR; i++) { p = order[i]
                       if (!(p in keep) && (parent[p] in keep)) { keep[p] = 1; more = 1; print p } } } while (more) }'
}

# snapshot PID...: what each process is doing (state, kernel wait channel), and where gdb is
# installed every thread's stack; for a test's diag when a command overruns its time
snapshot() {
    for p in "$@"; do
        ps -o pid=,ppid=,stat=,wchan:24=,etime=,args= -p "$p" 2>/dev/null | cut -c1-240
        if command -v gdb >/dev/null; then
            timeout 30 gdb -q -batch -p "$p" -ex 'thread apply all bt 24' 2>/dev/null | grep '^#\|^Thread'
        fi
    done
}

# limited SECONDS CMD...: CMD, and if it is still running after SECONDS, what its processes were
# doing goes to $tmp/overran.txt, then SIGTERM, and SIGKILL to everything left 10 s later (timeout(1)
# sends only the TERM: an mpirun that cannot act on it would hang the test). Returns CMD's status;
# 124 once it overran. CMD joins $pids (t/lib/launch.sh's cleanup kills them when the test ends early).
limited() {
    l_secs=$1
    shift
    "$@" &
    l_pid=$!
    pids="${pids:-} $l_pid"
    l_end=$(($(date +%s) + l_secs))
    while ! all_gone "$l_pid"; do
        if [ "$(date +%s)" -ge "$l_end" ]; then
            l_all="$l_pid $(descendants "$l_pid")"
            { echo "overran ${l_secs} s: $*"; snapshot $l_all; } >>"$tmp/overran.txt" 2>&1
            kill -TERM "$l_pid" 2>/dev/null
            sleep 10
            for p in $l_all; do kill -KILL "$p" 2>/dev/null; done
            wait "$l_pid"
            return 124
        fi
        sleep 0.2
    done
    wait "$l_pid"
}
