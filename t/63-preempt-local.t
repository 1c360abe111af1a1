#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Stopping on a signal without SLURM: SIGUSR1 (the default requeue signal) or SIGTERM makes ctrain
# fit stop after the current step on every rank, save last.safetensors and exit 75 with a message
# saying nothing was requeued; --ckpt-path last then continues bit for bit (single_device and
# 2-rank ddp under ctrain's launcher); a signal during start-up is kept; a FIFO as input is refused.
# The flags: --requeue-signal, --ckpt-path auto, and auto refusing a checkpoint another job wrote.
# Under ctrain's launcher (2-rank ddp) the supervisor forwards the chosen --requeue-signal (USR2
# here), and a SIGINT sent to the whole process group (kill -INT -- -PGID, as timeout and
# scancel --full do) is one stop request, not two: both stop with last.safetensors, resumable bit
# for bit. --deterministic refuses to continue a checkpoint under another BLAS thread count (which
# changes OpenBLAS's rounding) and records what it ran with in summary.json.
# t/60 and t/62 cover SLURM.
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B="$ROOT/${CTRAIN_BUILD:-build}"
T=$(mktemp -d /tmp/ctrain-t63-XXXXXX)
P=
trap '[ -n "$P" ] && perl -e "kill 9, \$ARGV[0], -\$ARGV[0]" $P 2>/dev/null; rm -rf "$T"' EXIT
trap 'exit 1' INT TERM HUP PIPE

PLAN=23
echo "1..$PLAN"
root=$ROOT
. "$ROOT/t/lib/preempt.sh"
make_data "$T/data"
unset SLURM_JOB_ID SLURM_JOBID
export OPENBLAS_NUM_THREADS=1

# signalled NAME SIGNAL FLAGS...: run fit, send SIGNAL once it has logged training rows; sets rc.
signalled() {
    name=$1 sig=$2
    shift 2
    "$B/ctrain" fit "$@" --default-root-dir "$T/$name" >"$T/$name.out" 2>&1 &
    P=$!
    for i in $(seq 600); do
        [ "$(cat "$T/$name/metrics.csv" 2>/dev/null | grep -c '^[0-9]')" -ge 2 ] && break
        sleep 0.05
    done
    kill -"$sig" $P
    wait $P
    rc=$?
    P=
}

# stop_steps NAME SIG: "COUNT epoch E, step S" for each place a rank of NAME's run said it stopped by
# SIG. A rank whose own copy of the forwarded signal came after the ranks agreed to stop says
# "(on another rank)": the supervisor forwards to the ranks one after another.
stop_steps() {
    sed -n "s/.*stopped by SIG$2\( (on another rank)\)\{0,1\} at \(epoch [0-9]*, step [0-9]*\);.*/\2/p" "$T/$1.out" |
        sort | uniq -c
}

# 5500 samples, batch 32: 172 steps per epoch; the signal lands inside epoch 1 or 2.
S="--data $T/data --progress plain --log-every-n-steps 20 --deterministic --batch-size 32 --max-epochs 6 --lr-schedule constant"
"$B/ctrain" fit $S --default-root-dir "$T/ref" >"$T/ref.out" 2>&1 || { sed 's/^/# /' "$T/ref.out"; exit 1; }

signalled usr1 USR1 $S
[ "$rc" -eq 75 ] && grep -q 'stopped by SIGUSR1 at epoch .*last.safetensors written' "$T/usr1.out" &&
    grep -q 'not in a SLURM job, so nothing was requeued' "$T/usr1.out"
ok $? "SIGUSR1: exit 75, last.safetensors written, says nothing was requeued" "$T/usr1.out"
"$B/ctrain" fit $S --ckpt-path last --default-root-dir "$T/usr1" >"$T/usr1-resume.out" 2>&1 &&
    "$B/t/st_compare" "$T/ref/last.safetensors" "$T/usr1/last.safetensors" >"$T/cmp1.out" 2>&1
ok $? "--ckpt-path last continues it to the same weights as the uninterrupted run, bit for bit" "$T/cmp1.out" "$T/usr1-resume.out"

signalled term TERM $S
[ "$rc" -eq 75 ] && grep -q 'stopped by SIGTERM' "$T/term.out" && [ -s "$T/term/last.safetensors" ]
ok $? "SIGTERM: exit 75, last.safetensors written" "$T/term.out"

D="--data $T/data --progress plain --log-every-n-steps 10 --deterministic --batch-size 64 --max-epochs 8 --lr-schedule constant --strategy ddp --devices 2"
"$B/ctrain" fit $D --default-root-dir "$T/dref" >"$T/dref.out" 2>&1 || { sed 's/^/# /' "$T/dref.out"; exit 1; }
signalled ddp USR1 $D
where=$(stop_steps ddp USR1)
[ "$rc" -eq 75 ] && [ "$(echo "$where" | wc -l)" -eq 1 ] && [ "$(echo "$where" | awk '{print $1}')" -ge 2 ]
ok $? "2-rank ddp (ctrain's launcher forwards SIGUSR1): both ranks stop at the same step, exit 75" "$T/ddp.out"
"$B/ctrain" fit $D --ckpt-path last --default-root-dir "$T/ddp" >"$T/ddp-resume.out" 2>&1 &&
    "$B/t/st_compare" "$T/dref/last.safetensors" "$T/ddp/last.safetensors" >"$T/cmp2.out" 2>&1
ok $? "... and resuming it equals the uninterrupted ddp run bit for bit" "$T/cmp2.out" "$T/ddp-resume.out"

# The same without OPENBLAS_NUM_THREADS=1: OpenBLAS's worker threads (and a host program's) leave
# the signals unblocked, and the supervisor must still get SIGUSR1 from any of its threads.
(
    unset OPENBLAS_NUM_THREADS
    signalled ddpblas USR1 $D
    exit "$rc"
)
rc=$?
where=$(stop_steps ddpblas USR1)
[ "$rc" -eq 75 ] && [ "$(echo "$where" | awk '{print $1}')" -ge 2 ]
ok $? "2-rank ddp with OpenBLAS's own thread count: SIGUSR1 reaches the supervisor, both ranks stop, exit 75 (exit $rc)" \
    "$T/ddpblas.out"

# SIGUSR1 to rank 1 alone (as `scancel --signal` to one task would): rank 1 stops on its own signal,
# rank 0 at the same step on rank 1's, and says so.
"$B/ctrain" fit $D --default-root-dir "$T/one" >"$T/one.out" 2>&1 &
P=$!
r1=
for i in $(seq 600); do
    for c in $(pgrep -P $P); do
        tr '\0' '\n' <"/proc/$c/environ" 2>/dev/null | grep -qx 'CTRAIN_LAUNCHER_RANK=1' && r1=$c
    done
    [ -n "$r1" ] && [ "$(cat "$T/one/metrics.csv" 2>/dev/null | grep -c '^[0-9]')" -ge 2 ] && break
    sleep 0.05
done
[ -n "$r1" ] && kill -USR1 "$r1"
wait $P
rc=$?
P=
own=$(sed -n 's/^\[rank 1\] ctrain: stopped by SIGUSR1 at \(epoch [0-9]*, step [0-9]*\);.*/\1/p' "$T/one.out")
other=$(sed -n 's/^ctrain: stopped by SIGUSR1 (on another rank) at \(epoch [0-9]*, step [0-9]*\);.*/\1/p' "$T/one.out")
[ -n "$r1" ] && [ "$rc" -eq 75 ] && [ -n "$own" ] && [ "$own" = "$other" ] && [ -s "$T/one/last.safetensors" ]
ok $? "2-rank ddp, SIGUSR1 to rank 1 only: both stop at the same step, rank 0 says it was on another rank (exit $rc)" \
    "$T/one.out"

# stopped NAME SIGNAL: exit 75, both ranks stopped by SIGNAL at the same step, last.safetensors there.
stopped() {
    where=$(stop_steps "$1" "$2")
    [ "$rc" -eq 75 ] && [ "$(echo "$where" | wc -l)" -eq 1 ] && [ "$(echo "$where" | awk '{print $1}')" -ge 2 ] &&
        [ -s "$T/$1/last.safetensors" ]
}

signalled ddpusr2 USR2 $D --requeue-signal USR2
stopped ddpusr2 USR2
ok $? "2-rank ddp, --requeue-signal USR2 sent to ctrain's launcher: forwarded, both ranks stop, exit 75 (exit $rc)" "$T/ddpusr2.out"
"$B/ctrain" fit $D --requeue-signal USR2 --ckpt-path last --default-root-dir "$T/ddpusr2" >"$T/ddpusr2-resume.out" 2>&1 &&
    "$B/t/st_compare" "$T/dref/last.safetensors" "$T/ddpusr2/last.safetensors" >"$T/cmp4.out" 2>&1
ok $? "... and resuming it equals the uninterrupted ddp run bit for bit" "$T/cmp4.out" "$T/ddpusr2-resume.out"

# grouped NAME HOW FLAGS...: run fit under ctrain's launcher in a process group of its own and, once
# both ranks catch SIGINT (they do from before the rendezvous and the data load, which take a few
# hundred ms), send SIGINT as `timeout` does (HOW=timeout: to ctrain, then 50 ms later to its whole
# group) or as kill -INT -- -PGID does (HOW=group). Each rank gets it from the group and forwarded
# by the supervisor: one request, so they stop at the first step. Sets rc.
grouped() {
    name=$1 how=$2
    shift 2
    perl -e 'setpgrp(0, 0); exec @ARGV or die' "$B/ctrain" fit "$@" --default-root-dir "$T/$name" >"$T/$name.out" 2>&1 &
    P=$!
    perl -e '
        my ($sup, $how) = @ARGV;
        for (1 .. 3000) {
            my $caught = 0;
            for my $s (glob "/proc/[0-9]*/stat") {
                open(my $f, "<", $s) or next;
                my @x = split / /, scalar <$f>;
                next unless $x[3] == $sup;
                open(my $g, "<", "/proc/$x[0]/status") or next;
                for (<$g>) { $caught++ if /^SigCgt:\s*([0-9a-f]+)/ && (hex($1) & 2) }
            }
            if ($caught == 2) {
                if ($how eq "timeout") { kill("INT", $sup) or die; select(undef, undef, undef, 0.05) }
                kill("INT", -$sup) or die;
                exit 0;
            }
            select(undef, undef, undef, 0.01);
        }
        die "the ranks never caught SIGINT\n"' $P "$how" >"$T/$name.kill" 2>&1
    wait $P
    rc=$?
    P=
}

grouped ddpgroup timeout $D
grep -q 'stopping at epoch 1 step 0;' "$T/ddpgroup.out" && stopped ddpgroup INT
ok $? "2-rank ddp, SIGINT to ctrain then to its whole process group (as timeout sends it): one stop request, exit 75 with last.safetensors (exit $rc)" "$T/ddpgroup.out" "$T/ddpgroup.kill"
"$B/ctrain" fit $D --ckpt-path last --default-root-dir "$T/ddpgroup" >"$T/ddpgroup-resume.out" 2>&1 &&
    "$B/t/st_compare" "$T/dref/last.safetensors" "$T/ddpgroup/last.safetensors" >"$T/cmp5.out" 2>&1
ok $? "... and resuming it equals the uninterrupted ddp run bit for bit" "$T/cmp5.out" "$T/ddpgroup-resume.out"
grouped ddpkill group $D
grep -q 'stopping at epoch 1 step 0;' "$T/ddpkill.out" && stopped ddpkill INT
ok $? "2-rank ddp, SIGINT to the whole process group (kill -INT -- -PGID): one stop request, exit 75 (exit $rc)" "$T/ddpkill.out" "$T/ddpkill.kill"

signalled usr2 USR2 $S --requeue-signal SIGUSR2
[ "$rc" -eq 75 ] && grep -q 'stopped by SIGUSR2' "$T/usr2.out"
ok $? "--requeue-signal SIGUSR2 stops on SIGUSR2" "$T/usr2.out"

# A signal during start-up: sent as soon as fit catches SIGUSR1 (its SigCgt mask in /proc: the
# handlers go in before the data, the model and the rendezvous), the run must keep it and stop at
# a step boundary with last.safetensors, not die of SIGUSR1's default action. (The data cannot be
# held back with a FIFO any more: ctrain refuses inputs that are not regular files, below.)
caught() {    # caught PID: SIGUSR1 (signal 10, bit 9 of SigCgt) has a handler in PID
    m=$(sed -n 's/^SigCgt:[[:space:]]*//p' "/proc/$1/status" 2>/dev/null)
    [ -n "$m" ] && [ $((0x$m >> 9 & 1)) -eq 1 ]
}
"$B/ctrain" fit $S --default-root-dir "$T/early" >"$T/early.out" 2>&1 &
P=$!
i=0
while ! caught $P && kill -0 $P 2>/dev/null && [ $i -lt 3000 ]; do sleep 0.01; i=$((i + 1)); done
kill -USR1 $P 2>"$T/writer.out"
wrc=$?
wait $P
rc=$?
P=
[ "$wrc" -eq 0 ] && [ "$rc" -eq 75 ] && grep -q 'stopped by SIGUSR1 at epoch [0-9]*, step [0-9]*;' "$T/early.out" &&
    [ -s "$T/early/last.safetensors" ]
ok $? "SIGUSR1 as soon as fit catches it (start-up): kept, exit 75 at a step boundary with last.safetensors (ctrain exit $rc)" \
    "$T/early.out" "$T/writer.out"
"$B/ctrain" fit $S --ckpt-path last --default-root-dir "$T/early" >"$T/early-resume.out" 2>&1 &&
    "$B/t/st_compare" "$T/ref/last.safetensors" "$T/early/last.safetensors" >"$T/cmp3.out" 2>&1
ok $? "... and --ckpt-path last from there equals the uninterrupted run bit for bit" "$T/cmp3.out" "$T/early-resume.out"

# A FIFO as the training images: refused at once, naming the file (it used to block in the open,
# deaf to SIGTERM, until a writer came).
mkdir "$T/fifo"
for f in "$T"/data/*; do ln -s "$f" "$T/fifo/"; done
rm "$T/fifo/train-images-idx3-ubyte.gz"
mkfifo "$T/fifo/train-images-idx3-ubyte.gz"
E=$(echo "$S" | sed "s|--data $T/data|--data $T/fifo|")
timeout 60 "$B/ctrain" fit $E --default-root-dir "$T/fifo-run" >"$T/fifo.out" 2>&1
rc=$?
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && grep -q "fifo/train-images-idx3-ubyte.gz is a FIFO, not a regular file" "$T/fifo.out" &&
    [ ! -e "$T/fifo-run/last.safetensors" ]
ok $? "a FIFO as the training images: refused at once, naming it (exit $rc)" "$T/fifo.out"

"$B/ctrain" fit --requeue-signal KILL >"$T/bad.out" 2>&1
[ $? -eq 2 ] && grep -q -- "--requeue-signal 'KILL'" "$T/bad.out"
ok $? "--requeue-signal KILL is refused (exit 2, names the flag)" "$T/bad.out"

"$B/ctrain" fit $S --max-epochs 1 --ckpt-path auto --default-root-dir "$T/fresh" >"$T/fresh.out" 2>&1 &&
    ! grep -q 'resumed' "$T/fresh.out"
ok $? "--ckpt-path auto with no checkpoint starts fresh" "$T/fresh.out"

# Inside a SLURM job (the default is auto there) a checkpoint another run wrote is not taken over.
SLURM_JOB_ID=777 "$B/ctrain" fit $S --default-root-dir "$T/ref" >"$T/other.out" 2>&1
[ $? -eq 2 ] && grep -q 'written by a run outside SLURM, not by this job 777' "$T/other.out"
ok $? "under SLURM, auto refuses a last.safetensors another job wrote (exit 2, hint)" "$T/other.out"

# --deterministic: a checkpoint written with 1 BLAS thread is not continued with 2 (exit 2, names it).
"$B/ctrain" fit $S --max-steps 20 --default-root-dir "$T/det" >"$T/det.out" 2>&1 &&
    grep -q '"deterministic":[[:space:]]*true' "$T/det/summary.json" && grep -q '"blas_threads":[[:space:]]*1,' "$T/det/summary.json"
ok $? "--deterministic: summary.json records deterministic and blas_threads 1" "$T/det.out" "$T/det/summary.json"
OPENBLAS_NUM_THREADS=2 "$B/ctrain" fit $S --max-steps 40 --ckpt-path last --default-root-dir "$T/det" >"$T/det2.out" 2>&1
rc=$?
[ "$rc" -eq 2 ] && grep -q 'deterministic: .*written with BLAS threads 1, this run has 2' "$T/det2.out" &&
    grep -q 'hint: set OPENBLAS_NUM_THREADS' "$T/det2.out"
ok $? "... resuming it with OPENBLAS_NUM_THREADS=2 is refused (exit $rc) with a hint" "$T/det2.out"
# OMP_NUM_THREADS alone: OpenBLAS keeps 1 thread, oneDNN's GEMMs run on 2 and round differently (the
# plugin's binding sets OMP_NUM_THREADS for srun's tasks): refused too, by the OpenMP team it records.
grep -q '"gemm_threads":[[:space:]]*1,' "$T/det/summary.json" &&
    OMP_NUM_THREADS=2 "$B/ctrain" fit $S --max-steps 40 --ckpt-path last --default-root-dir "$T/det" >"$T/det4.out" 2>&1
rc=$?
[ "$rc" -eq 2 ] && grep -q 'deterministic: .*written with OpenMP (GEMM) threads 1, this run has 2' "$T/det4.out" &&
    grep -q 'hint: set OMP_NUM_THREADS' "$T/det4.out"
ok $? "... and with OMP_NUM_THREADS=2 (gemm_threads 1 recorded; exit $rc) with a hint" "$T/det4.out" "$T/det/summary.json"
N=$(echo "$S" | sed 's/--deterministic //')
OPENBLAS_NUM_THREADS=2 "$B/ctrain" fit $N --max-steps 40 --ckpt-path last --default-root-dir "$T/det" >"$T/det3.out" 2>&1 &&
    grep -q 'resumed from' "$T/det3.out"
ok $? "... without --deterministic the same resume runs" "$T/det3.out"
