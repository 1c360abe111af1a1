#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# scripts/slurm-cluster itself: start two nodes, each a host of its own (hostname, eth0 on the
# cluster's network, /etc/hosts naming the others), srun --mpi=pmix across them (hostname and an
# Open MPI allreduce, t/tools/mpi_hello.c), exec and link (down/up, delay and loss left on for
# stop to remove), slow (a CPU cap through the node's cgroup: the same work takes several times
# longer on the capped node, the kernel throttled it; left on for stop to remove), stop, and check that every daemon,
# namespace and link it made is gone and that stop is idempotent. The cluster is stopped by pid at exit, also on failure.
cd "$(dirname "$0")/.." || exit 1
root=$(pwd)

if [ "$(id -u)" -ne 0 ]; then
    echo "1..0 # SKIP needs root to start slurmd (run make test as root)"
    exit 0
fi
for b in slurmctld slurmd srun munged; do
    if ! command -v "$b" >/dev/null 2>&1 && [ ! -x "/usr/sbin/$b" ]; then
        . "$root/t/lib/ci.sh"
        ci_needs "$b not installed"
        echo "1..0 # SKIP $b not installed (scripts/install-deps installs slurm-wlm and munge)"
        exit 0
    fi
done
[ -x "${CTRAIN_BUILD:-build}/t/mpi_hello" ] || { echo "Bail out! ${CTRAIN_BUILD:-build}/t/mpi_hello is not built (run make)"; exit 1; }

dir=$(mktemp -d /tmp/ctrain-slurm.XXXXXX) || exit 1
trap '"$root/scripts/slurm-cluster" stop "$dir"; rm -rf "$dir"' EXIT
trap 'exit 1' INT TERM HUP PIPE

n=0
ok() {    # ok CONDITION-STATUS NAME [DIAG-FILE]
    n=$((n + 1))
    if [ "$1" -eq 0 ]; then
        echo "ok $n - $2"
    else
        echo "not ok $n - $2"
        [ -n "${3:-}" ] && [ -f "$3" ] && sed 's/^/#   /' "$3"
    fi
}

echo "1..18"
scripts/slurm-cluster start "$dir" --nodes 2 >"$dir.start" 2>&1
st=$?
if [ "$st" -eq 3 ]; then
    echo "# $(cat "$dir.start")"
    rm -f "$dir.start"
    echo "Bail out! scripts/slurm-cluster cannot run here"
    exit 1
fi
ok "$st" "start --nodes 2" "$dir.start"
rm -f "$dir.start"
. "$dir/env"

scripts/slurm-cluster status "$dir" >"$dir/status.out" 2>&1
ok $? "status: slurmctld and both slurmd run" "$dir/status.out"

# srun's own notes ("job N queued and waiting for resources", while the last job's nodes complete) go
# to stderr, apart from what the tasks print.
timeout 60 srun -N2 -n4 --mpi=pmix sh -c 'echo "$(hostname) $SLURM_PROCID"' >"$dir/host.out" 2>"$dir/host.err"
[ "$(sort "$dir/host.out" | tr '\n' ' ')" = "n1 0 n1 1 n2 2 n2 3 " ]
ok $? "srun -N2 -n4 --mpi=pmix: ranks 0,1 on host n1 and 2,3 on host n2" "$dir/host.out"

# Each node's own address on eth0, the one slurm.conf gives it, and the others by name.
net=$(sed -n 's/^network: \([0-9.]*\)\.0\/24.*/\1/p' "$dir/status.out")
timeout 60 srun -N2 -n2 sh -c 'echo "$(hostname) $(ip -4 -o addr show dev eth0 | awk "{print \$4}") $(getent hosts n1 n2 | tr -s " \t" " " | tr "\n" " ")"' \
    >"$dir/addr.out" 2>"$dir/addr.err"
[ -n "$net" ] && [ "$(sort "$dir/addr.out")" = "$(printf 'n1 %s.1/24 %s.1 n1 %s.2 n2 \nn2 %s.2/24 %s.1 n1 %s.2 n2 ' "$net" "$net" "$net" "$net" "$net" "$net")" ] &&
    [ "$(scontrol show node n2 | grep -o 'NodeAddr=[^ ]*')" = "NodeAddr=$net.2" ]
ok $? "nodes: eth0 $net.1 and $net.2 (NodeAddr), each resolves both names" "$dir/addr.out"

(cd t && "$root/scripts/slurm-cluster" exec "$dir" n2 sh -c 'echo "$(hostname) $(pwd)"') >"$dir/exec.out" 2>&1
[ "$(cat "$dir/exec.out")" = "n2 $root/t" ]
ok $? "exec DIR n2 CMD: runs on n2, in the caller's directory" "$dir/exec.out"

# A cut cable: n1 cannot reach n2 until the link is back up.
probe() { "$root/scripts/slurm-cluster" exec "$dir" n1 timeout 2 bash -c "exec 3<>/dev/tcp/$net.2/6818" 2>/dev/null; }
probe && "$root/scripts/slurm-cluster" link "$dir" n2 down && ! probe &&
    "$root/scripts/slurm-cluster" link "$dir" n2 up && probe
ok $? "link n2 down cuts n1 from n2's slurmd, link n2 up restores it"

timeout 120 srun -N2 -n4 --mpi=pmix "${CTRAIN_BUILD:-build}/t/mpi_hello" >"$dir/mpi.out" 2>&1
st=$?
[ "$st" -eq 0 ] && [ "$(grep -c ' of 4 on .* sum 6$' "$dir/mpi.out")" -eq 4 ]
ok $? "Open MPI across the emulated nodes: 4 ranks, allreduce right (exit $st)" "$dir/mpi.out"

# Right after MPI_Init, ctrain's fence (ct_pmix_after_mpi_init) holds every rank until the last one
# arrives, here 2 s late: a fence without data would let rank 0 go at once under srun, and Open MPI
# 5's first message would then reach a rank still inside MPI_Init.
MPI_HELLO_LATE=2 timeout 120 srun -N2 -n2 --mpi=pmix "${CTRAIN_BUILD:-build}/t/mpi_hello" >"$dir/late.out" 2>&1
st=$?
woke=$(sed -n 's/^rank 1 woke at //p' "$dir/late.out")
first=$(sed -n 's/^rank [0-9]* passed at //p' "$dir/late.out" | sort -n | head -n 1)
[ "$st" -eq 0 ] && [ -n "$woke" ] && [ "$(grep -c ' passed at ' "$dir/late.out")" -eq 2 ] && [ "$first" -ge "$woke" ]
ok $? "after MPI_Init no rank passes ctrain's fence before the last one comes, 2 s late (first passed $((${first:-0} - ${woke:-0})) ms after it woke)" "$dir/late.out"

# A slow, lossy link (netem, or iptables and the nfq_delay holder in n2's namespace), left on for
# stop to remove: its holder is one of the pids that must be gone after stop.
rtt() { "$root/scripts/slurm-cluster" exec "$dir" n1 bash -c \
    't0=$(date +%s%N); exec 3<>/dev/tcp/'"$net"'.2/6818 && echo $((($(date +%s%N) - t0) / 1000000))' 2>/dev/null; }
"$root/scripts/slurm-cluster" link "$dir" n2 delay 100 >"$dir/link.out" 2>&1 &&
    "$root/scripts/slurm-cluster" link "$dir" n2 loss 1 >>"$dir/link.out" 2>&1
st=$?
if [ $st -eq 3 ]; then
    echo "ok $((n + 1)) # SKIP $(tail -n 1 "$dir/link.out")"
    n=$((n + 1))
else
    ms=$(rtt)
    [ $st -eq 0 ] && grep -Eq "^n2's link: delay 100 ms each way, loss 1% each way \((netem|iptables)\)$" "$dir/link.out" &&
        [ "${ms:-0}" -ge 200 ]
    ok $? "link n2 delay 100, loss 1: the mechanism named, n1 -> n2 TCP round trip $ms ms (>= 200)" "$dir/link.out"
fi
"$root/scripts/slurm-cluster" link "$dir" n2 delay 1.5 >"$dir/bad.out" 2>&1
st=$?
"$root/scripts/slurm-cluster" link "$dir" n2 loss 200 >>"$dir/bad.out" 2>&1
st2=$?
[ $st -eq 2 ] && [ $st2 -eq 2 ] && grep -q 'whole milliseconds' "$dir/bad.out" && grep -q 'a percentage is 0-100' "$dir/bad.out"
ok $? "link delay 1.5 and loss 200: usage errors (exit 2) naming the rule" "$dir/bad.out"

# slow: n2's processes capped at 10% of one CPU. The same fixed work (a shell loop, one process) on
# n1 and on n2: uncapped, it gets a core, or half of one on this machine shared with others; capped,
# a tenth, so n2 takes five times as long or more. The test asks for twice, and the kernel's own
# count of the periods it throttled n2's cgroup in.
work() {    # work NODE: milliseconds the fixed loop takes as a step on NODE
    timeout 120 srun -w "$1" -N1 -n1 sh -c 't0=$(date +%s%N); i=0; while [ $i -lt 200000 ]; do i=$((i + 1)); done
        echo $((($(date +%s%N) - t0) / 1000000))'
}
"$root/scripts/slurm-cluster" slow "$dir" n2 10 >"$dir/slow.out" 2>&1
st=$?
if [ $st -eq 3 ]; then
    echo "ok $((n + 1)) # SKIP $(tail -n 1 "$dir/slow.out")"
    echo "ok $((n + 2)) # SKIP $(tail -n 1 "$dir/slow.out")"
    n=$((n + 2))
else
    cg=$(cat "$dir/run/cgroup-n2" 2>/dev/null)
    fast=$(work n1)
    slow=$(work n2)
    throttled=$(awk '$1 == "nr_throttled" { print $2 }' "$cg/cpu.stat" 2>/dev/null)
    { echo "n1 $fast ms, n2 $slow ms, throttled $throttled"; cat "$cg/cgroup.procs"; } >>"$dir/slow.out" 2>&1
    [ $st -eq 0 ] && grep -Eq "^n2's CPU: capped at 10% of one CPU \(cgroup v[12] /.*/ctrain-${dir##*/}-n2\)$" "$dir/slow.out" &&
        grep -qxF "$(cat "$dir/run/slurmd-n2.pid")" "$cg/cgroup.procs" &&
        [ "${slow:-0}" -ge $((2 * ${fast:-999999})) ] && [ "${throttled:-0}" -gt 0 ]
    ok $? "slow n2 10: n2's slurmd in its cgroup, the same loop takes $slow ms there, $fast ms on n1 (>= 2x), throttled $throttled periods" "$dir/slow.out"
    "$root/scripts/slurm-cluster" slow "$dir" n2 clear >"$dir/clear.out" 2>&1 &&
        if [ -e "$cg/cpu.max" ]; then [ "$(cut -d' ' -f1 "$cg/cpu.max")" = max ]; else [ "$(cat "$cg/cpu.cfs_quota_us")" = -1 ]; fi &&
        "$root/scripts/slurm-cluster" slow "$dir" n2 10 >>"$dir/clear.out" 2>&1    # left on for stop
    ok $? "slow n2 clear lifts the cap (cpu.max max, or cfs_quota_us -1); capped again for stop to remove" "$dir/clear.out"
fi
"$root/scripts/slurm-cluster" slow "$dir" n2 1.5 >"$dir/bad.out" 2>&1
st=$?
"$root/scripts/slurm-cluster" slow "$dir" n7 10 >>"$dir/bad.out" 2>&1
st2=$?
[ $st -eq 2 ] && [ $st2 -eq 127 ] && grep -q 'percentage of one CPU' "$dir/bad.out" && grep -q "no node 'n7'\|node n7 of" "$dir/bad.out"
ok $? "slow n2 1.5: usage error (exit 2); slow on n7, no such node: exit 127" "$dir/bad.out"

pids=$(cat "$dir"/run/*.pid "$dir"/run/*.ns 2>/dev/null)
idx=$(cat "$dir/run/net")
cg=$(cat "$dir/run/cgroup-n2" 2>/dev/null)
"$root/scripts/slurm-cluster" stop "$dir" >"$dir/stop.out" 2>&1
ok $? "stop" "$dir/stop.out"

# A zombie has exited: stop does not wait for init to reap what it stopped (all_gone).
. "$root/t/lib/procs.sh"
left=""
for p in $pids; do
    all_gone "$p" || left="$left $p"
done
[ -n "$pids" ] && [ -z "$left" ]
ok $? "no daemon or namespace holder left running (pids: $(echo $pids))${left:+; still running:$left}"
! ip link show "ctrsw$idx" >/dev/null 2>&1 && [ -z "$(ip -4 -o addr show to "$net.0/24")" ]
ok $? "the host link ctrsw$idx and its address are gone"
[ -z "$cg" ] || [ ! -d "$cg" ]
ok $? "n2's cgroup ${cg:-(none made)} is gone"

"$root/scripts/slurm-cluster" stop "$dir" >"$dir/stop2.out" 2>&1 &&
    ! "$root/scripts/slurm-cluster" status "$dir" >/dev/null 2>&1
ok $? "stop again is a no-op, status reports it down" "$dir/stop2.out"
