#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# ctrain fit --strategy ddp across two hosts of scripts/slurm-cluster (each node its own network
# namespace, eth0 on the cluster's bridge), and faults on that network:
#   - the gradients cross eth0: each node's eth0 counters (its own namespace's /proc/net/dev) grow
#     by at least the bytes an allreduce of the model sends per step, and the weights equal the
#     same run under ctrain's own launcher on one machine;
#   - 200 ms delay and 5% loss on n2's link (tc netem, or iptables and the nfq_delay holder where
#     the kernel has no netem): the round trip n1 -> n2 is >= 400 ms, packets are dropped, and the
#     weights are the same as without;
#   - n2's link cut in the middle of an sbatch job's fit: both ranks end within --collective-timeout
#     (plus the verdict wait and the abort), each naming the other's host, nothing is left running
#     on either node; once the link is back, the job requeued resumes from last.safetensors and
#     ends with the uninterrupted run's weights bit for bit (SLURM gives a requeued job a begin time
#     about 3 minutes on: the test sets it to now with scontrol, as an admin would);
#   - slurmd killed on n2 mid-step: the step ends on every node, nothing is left running.
. "$(dirname "$0")/lib/launch.sh"
. "$(dirname "$0")/lib/ddp.sh"
N=14

make_data || skip_all $N "dataset-fashion-mnist not installed"
start_srun_cluster $N 2
SC="$root_dir/scripts/slurm-cluster"
FIT="$FIT_FLAGS --data $tmp/data --deterministic --strategy ddp --devices 1 --num-nodes 2"
export OPENBLAS_NUM_THREADS=1

# eth_bytes NODE: "RX TX" bytes of eth0 in NODE's network namespace
eth_bytes() { "$SC" exec "$cluster" "$1" awk '$1 == "eth0:" { print $2, $10 }' /proc/net/dev; }
# left MARK: the processes (any node) whose command line names MARK
left() { procs_with "$1" | tr '\n' ' '; }

# 1-3: two epochs over n1 and n2, one rank each.
set -- $(eth_bytes n1) $(eth_bytes n2)
rx1=$1 tx1=$2 rx2=$3 tx2=$4
timeout 180 srun -N2 -n2 --mpi=pmix "$CTRAIN" fit $FIT --max-epochs 2 --default-root-dir "$tmp/a" >"$tmp/a.out" 2>&1
rc=$?
set -- $(eth_bytes n1) $(eth_bytes n2)
steps=$(json steps "$tmp/a/summary.json")
[ $rc -eq 0 ] && [ "$(json world_size "$tmp/a/summary.json")" = 2 ] && [ "$steps" = 86 ] &&
    [ "$(srun -N2 -n2 hostname | sort | tr '\n' ' ')" = "n1 n2 " ]
ok $? "srun -N2 -n2 ctrain fit --strategy ddp --num-nodes 2 on hosts n1 and n2: exit 0, world_size 2, 86 steps" ||
    diag "$tmp/a.out"
# A two-rank allreduce of P bytes sends at least P/2 each way per step (reduce-scatter + all-gather
# send P). The --hidden 64 MLP: 784 x 64 + 64 + 64 x 10 + 10 = 50890 fp32 parameters.
p=$((50890 * 4))
want=$((steps * p / 2))
d_tx1=$(($2 - tx1)) d_rx1=$(($1 - rx1)) d_tx2=$(($4 - tx2)) d_rx2=$(($3 - rx2))
[ "$d_tx1" -ge "$want" ] && [ "$d_tx2" -ge "$want" ] && [ "$d_rx1" -ge "$want" ] && [ "$d_rx2" -ge "$want" ]
ok $? "the gradients crossed eth0: n1 sent $d_tx1 received $d_rx1, n2 sent $d_tx2 received $d_rx2 bytes (>= $want: $steps steps x $p / 2)"
env -u SLURM_CONF timeout 180 "$CTRAIN" fit $FIT_FLAGS --data "$tmp/data" --deterministic --strategy ddp --devices 2 \
    --max-epochs 2 --default-root-dir "$tmp/b" >"$tmp/b.out" 2>&1 &&
    "$B/st_compare" "$tmp/a/last.safetensors" "$tmp/b/last.safetensors" >"$tmp/cmp.out" 2>&1
ok $? "the two-host run equals ctrain's own launcher on one machine bit for bit" || diag "$tmp/b.out" "$tmp/cmp.out"

# 4-6: a slow, lossy link to n2 (both directions), by tc netem or, on kernels without it, by
# iptables in n2's namespace (statistic DROP, NFQUEUE to the nfq_delay holder).
"$SC" link "$cluster" n2 delay 200 >"$tmp/link.out" 2>&1 && "$SC" link "$cluster" n2 loss 5 >>"$tmp/link.out" 2>&1
st=$?
if [ $st -eq 3 ]; then
    for i in 4 5 6; do
        echo "ok $i # SKIP $(tail -n 1 "$tmp/link.out")"
    done
    n=$((n + 3))
else
    via=$(cat "$cluster/run/link-via" 2>/dev/null)
    # The delay is real: a TCP connect from n1 to n2's slurmd takes one round trip (SYN, SYN-ACK),
    # 2 x 200 ms; the quickest of 5 (a lost SYN costs a 1 s resend).
    port=$(sed -n 's/^SlurmdPort=//p' "$cluster/slurm.conf")
    rtt=$("$SC" exec "$cluster" n1 perl -MIO::Socket::INET -MTime::HiRes=time -e '
        my $best;
        for (1 .. 5) {
            my $t0 = time;
            my $s = IO::Socket::INET->new(PeerAddr => $ARGV[0], Proto => "tcp", Timeout => 10) or next;
            my $t = time - $t0;
            close $s;
            $best = $t if !defined $best || $t < $best;
        }
        printf "%.0f\n", defined $best ? 1000 * $best : -1' "n2:${port:-6818}")
    [ $st -eq 0 ] && [ -n "$via" ] && [ "${rtt:--1}" -ge 400 ] && [ "$rtt" -lt 1000 ]
    ok $? "n2's link delayed 200 ms and 5% lossy each way ($via): n1 -> n2 TCP round trip $rtt ms (>= 400)" ||
        diag "$tmp/link.out"
    # 4 steps of a --hidden 8 MLP (6370 parameters: an allreduce of 25 KB, about 13 KB each way)
    # through 400 ms round trips with 5% loss each way: TCP gets about 25 KB/s there, so a step takes
    # seconds (the --hidden 64 model's 200 KB took about 70 s for 4: make test's time budget). The
    # reference is ctrain's own launcher (equal to the two-host run, test 3).
    # SLURM's pmix plugin wires the step up over the same lossy link, and a lost packet there can
    # make its direct connection between the nodes' slurmstepds fail before any rank runs
    # ("mpi/pmix...: Cannot establish the connection"; seen once under the ASan suite): that
    # launch is tried again, at most twice, and the message says so. Anything else fails the test.
    t0=$(now) tries=0
    while :; do
        tries=$((tries + 1))
        rm -rf "$tmp/slow"
        timeout 600 srun -N2 -n2 --mpi=pmix "$CTRAIN" fit $FIT --hidden 8 --max-steps 4 --default-root-dir "$tmp/slow" \
            >"$tmp/slow.out" 2>&1
        rc=$?
        [ $rc -eq 0 ] && break
        [ $tries -lt 3 ] && grep -q 'mpi/pmix.*Cannot establish' "$tmp/slow.out" || break
        cat "$tmp/slow.out" >>"$tmp/slow-tries.out"
    done
    [ $rc -eq 0 ] &&
        env -u SLURM_CONF timeout 180 "$CTRAIN" fit $FIT_FLAGS --data "$tmp/data" --deterministic --strategy ddp \
            --devices 2 --hidden 8 --max-steps 4 --default-root-dir "$tmp/slowref" >"$tmp/slowref.out" 2>&1 &&
        "$B/st_compare" "$tmp/slowref/last.safetensors" "$tmp/slow/last.safetensors" >"$tmp/cmp2.out" 2>&1
    st=$?
    again=; [ $tries -gt 1 ] && again=", launched $tries times: SLURM's PMIx wire-up lost its connection"
    ok $st "200 ms delay and 5% loss on n2's link: the same weights as without ($(elapsed "$t0") s$again)"
    [ $st -eq 0 ] || diag "$tmp/link.out" "$tmp/slow-tries.out" "$tmp/slow.out" "$tmp/slowref.out" "$tmp/cmp2.out"
    # The loss is real: packets dropped on n2's link (and, by iptables, delayed through the holder).
    if [ "$via" = iptables ]; then
        "$SC" exec "$cluster" n2 iptables -w -t mangle -L CTRAIN_LINK -v -n -x >"$tmp/rules.out" 2>&1
        dropped=$(awk '$3 == "DROP" { print $1 }' "$tmp/rules.out")
        held=$(awk '$3 == "NFQUEUE" { print $1 }' "$tmp/rules.out")
    else
        "$SC" exec "$cluster" n2 tc -s qdisc show dev eth0 >"$tmp/rules.out" 2>&1
        dropped=$(sed -n 's/.*dropped \([0-9]*\).*/\1/p' "$tmp/rules.out" | head -n 1)
        held=$(sed -n 's/^ *Sent [0-9]* bytes \([0-9]*\) pkt.*/\1/p' "$tmp/rules.out" | head -n 1)
    fi
    holder=$(cat "$cluster/run/delay-n2.pid" 2>/dev/null)
    "$SC" link "$cluster" n2 clear >>"$tmp/link.out" 2>&1
    # After clear: no holder (iptables' ran as pid $holder), no rule left on n2.
    { [ "$via" = netem ] || { [ -n "$holder" ] && all_gone "$holder"; }; } &&
        ! "$SC" exec "$cluster" n2 iptables -w -t mangle -S 2>/dev/null | grep -q CTRAIN_LINK &&
        [ "${dropped:-0}" -gt 0 ] && [ "${held:-0}" -gt 0 ]
    ok $? "the loss was real: $dropped packets dropped, $held delayed on n2's eth0; clear left nothing running" ||
        diag "$tmp/rules.out" "$tmp/link.out"
fi
"$SC" link "$cluster" n2 clear >/dev/null 2>&1

# 7-11: n2's cable pulled while an sbatch job trains (30 epochs: long enough to cut inside training
# on a quiet machine too), in its second epoch (epoch 1's last.safetensors is written). Each task's stderr goes to a file its own node writes (-e): rank 1's words cannot
# cross the cut to srun.
# --progress plain: rank 0 says where it resumed from (on stdout, into the job's log).
JOBFIT=$(echo "$FIT" | sed 's/--progress off/--progress plain/')
cat >"$tmp/job.sh" <<EOF
#!/bin/sh
#SBATCH -N2 --ntasks=2 --requeue --open-mode=append
export OPENBLAS_NUM_THREADS=1
echo "start: SLURM_RESTART_COUNT=\${SLURM_RESTART_COUNT:-0}"
srun --mpi=pmix -e "$tmp/cut-\${SLURM_RESTART_COUNT:-0}-%t.err" "$CTRAIN" fit $JOBFIT --max-epochs 30 \\
    --log-every-n-steps 5 --collective-timeout 10 --default-root-dir "$tmp/cut"
echo "srun exit \$?"
EOF
j=$(sbatch --parsable -o "$tmp/cut.log" "$tmp/job.sh" 2>"$tmp/sbatch.err")
for i in $(seq 1200); do
    [ -s "$tmp/cut/last.safetensors" ] && [ "$(grep -c '^[0-9]' "$tmp/cut/metrics.csv" 2>/dev/null)" -ge 10 ] && break
    sleep 0.1
done
"$SC" link "$cluster" n2 down
t0=$(now)
r0=$(rank_pid "$tmp/cut" SLURM_PROCID 0)
r1=$(rank_pid "$tmp/cut" SLURM_PROCID 1)
wait_gone 60 $r0 $r1
gone=$?
took=$(elapsed "$t0")
# The timeout (10 s), the other side's wait for rank 0's verdict (10 s more) and the abort (<= 5 s).
[ -n "$j" ] && [ -n "$r0" ] && [ -n "$r1" ] && [ $gone -eq 0 ] && lt "$took" 30
ok $? "link cut in job $j: both ranks (pids $r0 $r1) exit within 30 s ($took s, --collective-timeout 10)"
grep -q 'did not complete within 10 s: rank 1 of 2 did not arrive (on n2)' "$tmp/cut-0-0.err" &&
    grep -q 'did not complete within 10 s: rank 0 (on n1) did not arrive' "$tmp/cut-0-1.err"
st=$?
ok $st "each side names the host it lost (rank 0: n2, rank 1: n1)"
[ $st -eq 0 ] || diag "$tmp/cut.log" "$tmp/cut-0-0.err" "$tmp/cut-0-1.err"
for i in $(seq 600); do
    grep -q '^srun exit' "$tmp/cut.log" 2>/dev/null && break
    sleep 0.1
done
grep -q '^srun exit [1-9]' "$tmp/cut.log" && [ -z "$(left "$tmp/cut")" ]
ok $? "the job's srun fails and nothing of the step is left on any node"

# The cable back: n2 answers slurmctld again, the job is requeued and resumes.
"$SC" link "$cluster" n2 up
for i in $(seq 300); do
    [ -z "$(squeue -h -j "$j" -t R,CG -o %A 2>/dev/null)" ] && [ "$(sinfo -h -n n2 -o %t 2>/dev/null)" = idle ] && break
    sleep 0.2
done
# A requeued job waits for its nodes' epilogs (n2's once it is reachable) and then gets a begin
# time about 3 minutes on; once it pends for that, the test moves the begin time to now.
scontrol requeue "$j" 2>"$tmp/requeue.err"
for i in $(seq 1200); do
    [ -s "$tmp/cut/summary.json" ] && [ -z "$(squeue -h -j "$j" -o %A 2>/dev/null)" ] && break
    case "$(squeue -h -j "$j" -o '%T %r' 2>/dev/null)" in
        # Not within the second of the requeue: slurmd revoked the killed run's credential then,
        # and a credential made in that same second is refused too ("Job credential revoked":
        # the job fails instead of starting).
        "PENDING BeginTime"*) sleep 2; scontrol update JobId="$j" StartTime=now 2>>"$tmp/requeue.err" ;;
    esac
    sleep 0.25
done
scontrol show job "$j" >"$tmp/job.txt" 2>&1
sinfo -N >>"$tmp/job.txt" 2>&1
grep -E "requeue|JobId=$j" "$cluster/log/slurmctld.log" | tail -n 30 >>"$tmp/job.txt"
grep -q 'start: SLURM_RESTART_COUNT=1' "$tmp/cut.log" && grep -q 'resumed from .*last.safetensors' "$tmp/cut.log" &&
    grep -q '^srun exit 0' "$tmp/cut.log"
st=$?
ok $st "link up, job $j requeued: it resumes from last.safetensors and completes"
# The job's log without its progress lines, then what each task of the restarted run said: CI
# shows only the start of a failure's comments.
if [ $st -ne 0 ]; then
    grep -v '^ctrain: epoch ' "$tmp/cut.log" >"$tmp/cut-short.log"
    for f in "$tmp"/cut-1-*.err; do [ -f "$f" ] && tail -n 15 "$f" >"$f.tail"; done
    diag "$tmp/cut-short.log" "$tmp"/cut-1-*.err.tail "$tmp/requeue.err" "$tmp/job.txt"
fi
# The uninterrupted run: ctrain's own launcher, which equals the two-host run (test 3).
env -u SLURM_CONF timeout 600 "$CTRAIN" fit $FIT_FLAGS --data "$tmp/data" --deterministic --strategy ddp --devices 2 \
    --max-epochs 30 --default-root-dir "$tmp/ref" >"$tmp/ref.out" 2>&1 &&
    "$B/st_compare" "$tmp/ref/last.safetensors" "$tmp/cut/last.safetensors" >"$tmp/cmp3.out" 2>&1
st=$?
ok $st "... with the uninterrupted run's weights bit for bit"
[ $st -eq 0 ] || diag "$tmp/ref.out" "$tmp/cmp3.out"

# 12-14: slurmd on n2 killed while a step trains there.
for i in $(seq 150); do
    [ "$(sinfo -h -n n2 -o %t 2>/dev/null)" = idle ] && break
    sleep 0.2
done
timeout 300 srun -N2 -n2 --mpi=pmix "$CTRAIN" fit $FIT --max-epochs 1000 --log-every-n-steps 5 \
    --collective-timeout 10 --default-root-dir "$tmp/sd" >"$tmp/sd.out" 2>&1 &
P=$!
pids="$pids $P"
wait_training "$tmp/sd" 60
r0=$(rank_pid "$tmp/sd" SLURM_PROCID 0)
r1=$(rank_pid "$tmp/sd" SLURM_PROCID 1)
kill -KILL "$(cat "$cluster/run/slurmd-n2.pid")"
t0=$(now)
[ -n "$r0" ] && [ -n "$r1" ]
ok $? "found both ranks training (pids $r0 $r1), slurmd of n2 killed"
wait_gone 120 $P
rc=$?
took=$(elapsed "$t0")
[ $rc -eq 0 ]
ok $? "srun returns ($took s after slurmd died)" || diag "$tmp/sd.out"
wait_gone 30 $r0 $r1
[ $? -eq 0 ] && [ -z "$(left "$tmp/sd")" ]
ok $? "the step ended on both nodes: nothing left running" || { diag "$tmp/sd.out"; ps -o pid,args -p "$(left "$tmp/sd")" | sed 's/^/#   /'; }
