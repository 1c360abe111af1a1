#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# A run's directory may be shared: ctrain fit refuses a --default-root-dir another user owns or
# that anyone may write without the sticky bit (exit 2, a hint, nothing written); in a sticky
# shared directory a symlink planted as metrics.csv is refused and its target untouched, a
# metrics.csv another user owns is refused, symlinks planted as summary.json.tmp or summary.json
# never redirect the summary; --ckpt-path auto resumes only a last.safetensors this user owns (its
# SLURM job id is easy to copy). The hang records (DIR/hang/rank-R.live, rank-R.json, issue 48 item
# 1): links planted as the live file, the record or its old temp name are replaced, never written
# through, also on the dump signal; a DIR/hang another user made, or a link planted as DIR/hang, is
# refused with a message (the fit goes on, its record in memory) and nothing is written there.
# Other users' files are made with chown to nobody: needs root.
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B="$ROOT/${CTRAIN_BUILD:-build}"
T=$(mktemp -d /tmp/ctrain-t64-XXXXXX)
P=
trap '[ -n "$P" ] && kill -9 $P 2>/dev/null; rm -rf "$T"' EXIT
trap 'exit 1' INT TERM HUP PIPE

PLAN=14
echo "1..$PLAN"
root=$ROOT
. "$ROOT/t/lib/preempt.sh"
[ "$(id -u)" -eq 0 ] || skip_all "needs root to create files owned by another user (nobody)"
id nobody >/dev/null 2>&1 || skip_all "no user nobody to own the planted files"
make_data "$T/data"
unset SLURM_JOB_ID SLURM_JOBID
export OPENBLAS_NUM_THREADS=1
S="--data $T/data --progress plain --batch-size 64 --max-epochs 1 --max-steps 5 --val-fraction 0.1"

# fit NAME DIR [FLAGS...]: run fit in DIR, output in $T/NAME.out; sets rc.
fit() {
    name=$1 dir=$2
    shift 2
    "$B/ctrain" fit $S "$@" --default-root-dir "$dir" >"$T/$name.out" 2>&1
    rc=$?
}

mkdir "$T/theirs" && chown nobody "$T/theirs"
fit theirs "$T/theirs"
[ "$rc" -eq 2 ] && grep -q 'belongs to uid 65534, not to this user' "$T/theirs.out" && grep -q 'hint:' "$T/theirs.out" &&
    [ -z "$(ls -A "$T/theirs")" ]
ok $? "a root dir owned by another user: refused (exit $rc), with a hint, nothing written" "$T/theirs.out"

mkdir "$T/open" && chmod 0777 "$T/open"
fit open "$T/open"
[ "$rc" -eq 2 ] && grep -q 'writable by every user (mode 0777) and not sticky' "$T/open.out" &&
    grep -q 'hint: chmod o-w' "$T/open.out" && [ -z "$(ls -A "$T/open")" ]
ok $? "a root dir anyone may write, not sticky: refused (exit $rc), with a hint, nothing written" "$T/open.out"

# A shared sticky directory, like /tmp: accepted, but what others planted there is not followed.
mkdir "$T/shared" && chmod 1777 "$T/shared"
echo "victim" >"$T/victim"
ln -s "$T/victim" "$T/shared/metrics.csv"
fit link "$T/shared"
[ "$rc" -ne 0 ] && grep -q 'metrics.csv is a symbolic link' "$T/link.out" && [ "$(cat "$T/victim")" = victim ]
ok $? "metrics.csv planted as a symlink: refused (exit $rc), its target untouched" "$T/link.out"
rm "$T/shared/metrics.csv"

: >"$T/shared/metrics.csv" && chown nobody "$T/shared/metrics.csv"
fit foreign "$T/shared"
[ "$rc" -ne 0 ] && grep -q 'metrics.csv belongs to uid 65534' "$T/foreign.out" && [ ! -s "$T/shared/metrics.csv" ]
ok $? "metrics.csv owned by another user: refused (exit $rc), left as it was" "$T/foreign.out"
rm "$T/shared/metrics.csv"

ln -s "$T/victim" "$T/shared/summary.json.tmp"
ln -s "$T/victim" "$T/shared/summary.json"
fit summary "$T/shared"
[ "$rc" -eq 0 ] && [ "$(cat "$T/victim")" = victim ] && [ ! -L "$T/shared/summary.json" ] &&
    grep -q '"steps":' "$T/shared/summary.json" && [ -L "$T/shared/summary.json.tmp" ]
ok $? "symlinks planted as summary.json(.tmp): never followed, summary.json written in their place" "$T/summary.out"

# --ckpt-path auto: a checkpoint of this job (SLURM_JOB_ID copied) that another user owns.
mkdir "$T/auto"
SLURM_JOB_ID=777 "$B/ctrain" fit $S --default-root-dir "$T/auto" >"$T/auto0.out" 2>&1
ok $? "a run of job 777 writes last.safetensors" "$T/auto0.out"
chown nobody "$T/auto/last.safetensors"
SLURM_JOB_ID=777 "$B/ctrain" fit $S --max-steps 10 --default-root-dir "$T/auto" >"$T/auto1.out" 2>&1
rc=$?
[ "$rc" -eq 2 ] && grep -q 'auto: .*last.safetensors belongs to uid 65534' "$T/auto1.out" && ! grep -q resumed "$T/auto1.out"
ok $? "--ckpt-path auto: job 777's last.safetensors owned by another user is not resumed (exit $rc)" "$T/auto1.out"
mv "$T/auto/last.safetensors" "$T/auto.safetensors" && chown root "$T/auto.safetensors" &&
    ln -s "$T/auto.safetensors" "$T/auto/last.safetensors"
SLURM_JOB_ID=777 "$B/ctrain" fit $S --max-steps 10 --default-root-dir "$T/auto" >"$T/auto2.out" 2>&1
rc=$?
[ "$rc" -eq 2 ] && grep -q 'last.safetensors is a symbolic link' "$T/auto2.out"
ok $? "--ckpt-path auto: a last.safetensors that is a symlink is not resumed (exit $rc)" "$T/auto2.out"
rm "$T/auto/last.safetensors" && mv "$T/auto.safetensors" "$T/auto/last.safetensors"
SLURM_JOB_ID=777 "$B/ctrain" fit $S --max-steps 10 --default-root-dir "$T/auto" >"$T/auto3.out" 2>&1
rc=$?
[ "$rc" -eq 0 ] && grep -q 'resumed from .*last.safetensors at epoch 1, step 5' "$T/auto3.out"
ok $? "--ckpt-path auto: the same file owned by this user is resumed (exit $rc)" "$T/auto3.out"

# The temp files of a killed writer go by their literal names: a root dir with glob characters
# does not reach another run's files (t/03 checks the rule itself).
mkdir "$T/run[1]*?" "$T/run1x"
: >"$T/run1x/last.safetensors.tmp.AbC123"
: >"$T/run[1]*?/last.safetensors.tmp.XyZ789"
fit glob "$T/run[1]*?"
[ "$rc" -eq 0 ] && [ -e "$T/run1x/last.safetensors.tmp.AbC123" ] && [ ! -e "$T/run[1]*?/last.safetensors.tmp.XyZ789" ]
ok $? "root dir 'run[1]*?': its own stale temp removed, run1x's kept" "$T/glob.out"

# The hang records in a shared run directory (issue 48 item 1). hang/ is this user's and sticky, as
# a shared one would be: the links another user may plant there are replaced, never followed.
mkdir -p "$T/hshared/hang" && chmod 1777 "$T/hshared" "$T/hshared/hang"
echo "victim live" >"$T/victim.live"
echo "victim json" >"$T/victim.json"
ln -s "$T/victim.live" "$T/hshared/hang/rank-0.live"
ln -s "$T/victim.json" "$T/hshared/hang/.rank-0.json.tmp"
ln -s "$T/victim.json" "$T/hshared/hang/rank-0.json"
# A fit long enough to take the dump signal (USR2) once its first rows are logged.
"$B/ctrain" fit $S --max-steps 2000 --max-epochs 100 --log-every-n-steps 5 --default-root-dir "$T/hshared" \
    >"$T/hlink.out" 2>&1 &
P=$!
for i in $(seq 300); do
    [ "$(grep -c '^[0-9]' "$T/hshared/metrics.csv" 2>/dev/null)" -ge 2 ] && break
    sleep 0.1
done
# The live file is the fit's own (the link replaced) while it runs.
[ -f "$T/hshared/hang/rank-0.live" ] && [ ! -L "$T/hshared/hang/rank-0.live" ]
live_own=$?
kill -USR2 $P
for i in $(seq 100); do
    [ -f "$T/hshared/hang/rank-0.json" ] && [ ! -L "$T/hshared/hang/rank-0.json" ] && break
    sleep 0.1
done
kill -TERM $P
wait $P
rc=$?
[ "$live_own" -eq 0 ] && [ "$(cat "$T/victim.live")" = "victim live" ] && [ "$(cat "$T/victim.json")" = "victim json" ] &&
    grep -q '"reason":[[:space:]]*"signal"' "$T/hshared/hang/rank-0.json" && [ ! -L "$T/hshared/hang/rank-0.json" ]
r=$?
[ "$r" -ne 0 ] && { ls -la "$T/hshared/hang"; echo "live_own=$live_own"; cat "$T/victim.live" "$T/victim.json"; } | sed 's/^/# /'
ok $r "links planted as hang/rank-0.live, rank-0.json and .rank-0.json.tmp: replaced, never written through (USR2 dump; exit $rc)" \
    "$T/hlink.out"

# hang/ made by another user: refused with a message; the fit goes on and writes nothing there.
mkdir -p "$T/hforeign/hang" "$T/hforeign2/hang" && chown nobody "$T/hforeign/hang" "$T/hforeign2/hang"
fit hforeign "$T/hforeign"
[ "$rc" -eq 0 ] && grep -q "rank 0 keeps its hang record in memory only (none is written): the hang records' directory $T/hforeign/hang belongs to uid 65534" "$T/hforeign.out" &&
    grep -q 'hint: remove' "$T/hforeign.out" && [ -z "$(ls -A "$T/hforeign2/hang")" ]
ok $? "hang/ owned by another user: refused with a message and a hint, nothing written in it (exit $rc)" "$T/hforeign.out"

# hang/ a link (to a directory of this user's elsewhere): refused, nothing written in its target.
mkdir -p "$T/hlinked" "$T/elsewhere"
ln -s "$T/elsewhere" "$T/hlinked/hang"
fit hlinkdir "$T/hlinked"
[ "$rc" -eq 0 ] && grep -q "directory $T/hlinked/hang is a symbolic link" "$T/hlinkdir.out" && [ -z "$(ls -A "$T/elsewhere")" ]
ok $? "hang/ planted as a symlink: refused with a message, nothing written through it (exit $rc)" "$T/hlinkdir.out"

# The dump on a fit whose hang/ is another user's: no record, the message again, the fit goes on.
"$B/ctrain" fit $S --max-steps 2000 --max-epochs 100 --log-every-n-steps 5 --default-root-dir "$T/hforeign2" \
    >"$T/hforeign2.out" 2>&1 &
P=$!
for i in $(seq 300); do
    [ "$(grep -c "^[0-9]" "$T/hforeign2/metrics.csv" 2>/dev/null)" -ge 2 ] && break
    sleep 0.1
done
kill -USR2 $P
sleep 1
kill -TERM $P
wait $P
rc=$?
P=
[ "$(grep -c "belongs to uid 65534" "$T/hforeign2.out")" -ge 2 ] && [ -z "$(ls -A "$T/hforeign2/hang")" ]
ok $? "the dump signal with hang/ another user's: refused again, nothing written (exit $rc)" "$T/hforeign2.out"
