#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# TensorBoard event files beside metrics.csv, read back with TensorBoard's own reader (t/tb_read.py,
# the tensorboard package from PyPI in build/pyvenv: scripts/pypi-peers): every record passes
# its TFRecord CRC32C checks; the scalars are metrics.csv's (training loss, learning rate, gradient
# norm, throughput, every validation metric — the GPT's val_bpb too) at the same steps; the
# hyper-parameters reach the hparams plugin; only rank 0 writes; a resumed run appends without a
# step twice, also after a stopped run logged past its checkpoint or was killed inside a record;
# --no-tensorboard writes none.
. "$(dirname "$0")/lib/launch.sh"
. "$(dirname "$0")/lib/ddp.sh"
N=13
PY="${CTRAIN_PEERS_VENV:-$T/../build/pyvenv}/bin/python"   # the PyPI peers (Debian 13: the root's venv)
if ! "$PY" -c 'import tensorboard' >/dev/null 2>&1; then
    ci_needs "the tensorboard Python package (build/pyvenv)"
    skip_all $N "TensorBoard's reader not installed (scripts/pypi-peers puts it in build/pyvenv)"
fi
make_data || skip_all $N "dataset-fashion-mnist not installed"
echo "1..$N"
F="--data $tmp/data --progress off --deterministic"
fit() { d=$1; shift; timeout 180 "$CTRAIN" fit "$@" --default-root-dir "$tmp/$d" >"$tmp/$d.out" 2>&1; }
events() { ls "$tmp/$1"/events.out.tfevents.* 2>/dev/null; }
read_tb() { "$PY" "$T/tb_read.py" "$tmp/$1" 2>"$tmp/$1.tb.err"; }
# csv_as_tb DIR: metrics.csv as "tag step value" lines, as tb_read.py prints them
csv_as_tb() {
    awk -F, 'NR == 1 { for (i = 3; i <= NF; i++) name[i] = $i; next }
        { for (i = 3; i <= NF; i++) if ($i != "" && !(name[i] == "lr" && $3 == "")) print name[i], $1, $i }' "$tmp/$1/metrics.csv" | sort
}
# same_values A B: the same tag/step lines, values within 1e-5 relative (metrics.csv prints 6 digits)
# or 0.1 absolute (samples_per_sec, one decimal)
same_values() {
    sort "$1" >"$1.s"; sort "$2" >"$2.s"
    paste -d' ' "$1.s" "$2.s" | awk '{ n++; if ($1 != $4 || $2 != $5) { bad = 1; print "# row " n ": " $0 }
            d = $3 - $6; if (d < 0) d = -d; r = $3 != 0 ? d / ($3 < 0 ? -$3 : $3) : d
            if (r > 1e-5 && d > 0.1) { bad = 1; print "# differs: " $0 } }
        END { exit !(!bad && n > 0) }' && [ "$(wc -l <"$1")" -eq "$(wc -l <"$2")" ]
}

# 1-4: a run's scalars and hyper-parameters.
fit a $F --max-epochs 2 --log-every-n-steps 10 --gradient-clip-val 1.0 --warmup-steps 5
ev=$(events a)
[ "$(echo "$ev" | wc -l)" = 1 ] && [ -n "$ev" ] && recs=$("$PY" "$T/tb_read.py" --records "$ev") && [ "$recs" -gt 30 ]
ok $? "one event file beside metrics.csv; TensorBoard's reader checks all $recs records' CRC32C" || diag "$tmp/a.out"
read_tb a >"$tmp/a.tb" && grep -v '^hparams\|^epoch ' "$tmp/a.tb" >"$tmp/a.scalars" && csv_as_tb a >"$tmp/a.csv"
same_values "$tmp/a.csv" "$tmp/a.scalars"
ok $? "TensorBoard's scalars are metrics.csv's, tag for column, step for step ($(wc -l <"$tmp/a.csv") values)" ||
    diag "$tmp/a.tb.err"
for tag in train_loss lr grad_norm samples_per_sec val_loss val_acc epoch; do
    grep -q "^$tag " "$tmp/a.tb" || { echo "# no $tag"; false; } || break
done
ok $? "tags: training loss, learning rate, gradient norm, throughput, every validation metric, epoch"
grep -q '^hparams lr 0.001$' "$tmp/a.tb" && grep -q '^hparams optimizer adamw$' "$tmp/a.tb" &&
    grep -q '^hparams gradient_clip_val 1.0$' "$tmp/a.tb" && grep -q '^hparams strategy single_device$' "$tmp/a.tb" &&
    grep -q '^hparams world_size 1.0$' "$tmp/a.tb"
ok $? "the hyper-parameters in the hparams plugin's session start" || diag "$tmp/a.tb"

# 5: ddp on 2 ranks: rank 0 alone writes, the same steps as metrics.csv.
fit d $F --strategy ddp --devices 2 --batch-size 64 --max-epochs 1 --log-every-n-steps 10 &&
    [ "$(events d | wc -l)" = 1 ] && read_tb d >"$tmp/d.tb" && grep -v '^hparams\|^epoch ' "$tmp/d.tb" >"$tmp/d.scalars" &&
    csv_as_tb d >"$tmp/d.csv" && same_values "$tmp/d.csv" "$tmp/d.scalars" && grep -q '^hparams world_size 2.0$' "$tmp/d.tb"
ok $? "ddp on 2 ranks: one event file (rank 0's), world_size 2" || diag "$tmp/d.out"

# 6-7: resuming appends, and a step logged past the checkpoint is not there twice (in the file's
# records: TensorBoard's accumulator would hide a repeated step by dropping the older one).
R="$F --lr-schedule constant --log-every-n-steps 10"
fit r $R --max-steps 20 && cp "$tmp/r/last.safetensors" "$tmp/at20.safetensors" &&
    fit r $R --max-steps 40 --ckpt-path last && read_tb r >"$tmp/r1.tb" &&
    cp "$tmp/at20.safetensors" "$tmp/r/last.safetensors" && fit r $R --max-steps 40 --ckpt-path last && read_tb r >"$tmp/r2.tb"
steps=$(grep '^train_loss ' "$tmp/r2.tb" | cut -d' ' -f2 | tr '\n' ' ')
[ "$(events r | wc -l)" = 1 ] && [ "$steps" = "10 20 30 40 " ] && [ "$(grep -v "^samples_per_sec" "$tmp/r1.tb")" = "$(grep -v "^samples_per_sec" "$tmp/r2.tb")" ] &&
    "$PY" "$T/tb_read.py" --raw "$(events r)" >"$tmp/raw" && [ "$(grep -c '^train_loss ' "$tmp/raw")" = 4 ] &&
    [ "$(sort "$tmp/raw" | uniq -d | wc -l)" = 0 ]
ok $? "resumed from step 20 after the run had logged to 40: one file, train_loss at $steps, no tag/step twice, the same values as the first resume" ||
    diag "$tmp/r.out" "$tmp/r2.tb"
ev=$(events r)
printf 'torn' >>"$ev" && fit r $R --max-steps 50 --ckpt-path last && "$PY" "$T/tb_read.py" --records "$ev" >"$tmp/recs" &&
    [ "$(read_tb r | grep -c '^train_loss ')" = 5 ]
ok $? "a record torn by a kill is dropped on resume: every record reads back ($(cat "$tmp/recs")), steps 10..50" ||
    diag "$tmp/recs" "$tmp/r.out"

# 8-10: resuming keeps what it can. metrics.csv is cut to the checkpoint's step like the event file
# (the run of 6-7 logged to 40, then resumed from 20: each training step once). A record with a bad
# CRC early in the file costs that record only, and says so; an event file that cannot be read
# back is refused as it is, not truncated to nothing.
train_steps=$(awk -F, 'NR > 1 && $3 != "" { print $1 }' "$tmp/r/metrics.csv" | tr '\n' ' ')
[ "$train_steps" = "10 20 30 40 50 " ]
ok $? "metrics.csv after two resumes: each training step once ($train_steps)" || diag "$tmp/r/metrics.csv"
"$PY" - "$ev" <<'PYEOF'
import struct, sys
from tensorboard.compat.proto import event_pb2
path = sys.argv[1]
b = bytearray(open(path, "rb").read())
pos = 0
while pos < len(b):
    n = struct.unpack("<Q", bytes(b[pos:pos + 8]))[0]
    e = event_pb2.Event.FromString(bytes(b[pos + 12:pos + 12 + n]))
    if e.step == 10 and e.summary.value and e.summary.value[0].tag == "train_loss":
        b[pos + 12 + n - 1] ^= 0xFF  # its data no longer matches its CRC
        break
    pos += 16 + n
open(path, "wb").write(bytes(b))
PYEOF
fit r $R --max-steps 60 --ckpt-path last && "$PY" "$T/tb_read.py" --records "$ev" >"$tmp/recs2" &&
    steps=$(read_tb r | grep '^train_loss ' | cut -d' ' -f2 | tr '\n' ' ') && [ "$steps" = "20 30 40 50 60 " ] &&
    grep -q "warning: .*events.out.tfevents.*: dropped 1 damaged record; kept its intact records up to step 50" "$tmp/r.out"
ok $? "a bad CRC at step 10: that record dropped and said, the others kept (train_loss at $steps)" ||
    diag "$tmp/r.out" "$tmp/recs2"
# (Root reads a file of mode 0200: as root, the run goes on as nobody in a copy of the directory.)
cp -r "$tmp/r" "$tmp/nb" && ev=$(events nb) && size=$(wc -c <"$ev") && chmod 200 "$ev"
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
    chown -R 65534:65534 "$tmp/nb" && chmod 755 "$tmp"
    (cd / && timeout 180 setpriv --reuid=65534 --regid=65534 --clear-groups "$CTRAIN" fit $R --max-steps 70 \
        --ckpt-path last --default-root-dir "$tmp/nb") >"$tmp/nb.out" 2>&1
else
    fit nb $R --max-steps 70 --ckpt-path last
fi
rc=$?
[ $rc -ne 0 ] && grep -q "$ev: cannot read it back" "$tmp/nb.out" && [ "$(wc -c <"$ev")" = "$size" ]
ok $? "an event file that cannot be read back: refused (exit $rc), naming it, left as it is" || diag "$tmp/nb.out"

# 11: the GPT's own validation metric (bits per byte).
cat /usr/share/common-licenses/* >"$tmp/corpus.txt" 2>/dev/null
"$CTRAIN" tokenize --input "$tmp/corpus.txt" --output-dir "$tmp/tok" >"$tmp/tok.out" 2>&1 &&
    fit g --model gpt --model-config n_layer=1,n_head=2,n_embd=32,seq_len=32 --data "$tmp/tok" --progress off \
        --batch-size 8 --max-steps 20 --log-every-n-steps 10 --limit-val-batches 2 &&
    read_tb g >"$tmp/g.tb" && grep -q '^val_bpb 20 ' "$tmp/g.tb" && grep -q '^val_loss 20 ' "$tmp/g.tb" &&
    grep -q '^hparams model gpt$' "$tmp/g.tb"
ok $? "the GPT's val_bpb and val_loss reach TensorBoard" || diag "$tmp/g.out" "$tmp/g.tb.err"

# 12: a fit from scratch in the same directory replaces the event file, as it does metrics.csv.
old=$(events a)
fit a $F --max-steps 10 --log-every-n-steps 10
[ "$(events a | wc -l)" = 1 ] && [ "$(events a)" != "$old" ] && [ "$(read_tb a | grep -c '^train_loss ')" = 1 ]
ok $? "a new fit in the directory: one event file, the new run's steps only" || diag "$tmp/a.out"

# 13: --no-tensorboard.
fit off $F --max-steps 5 --no-tensorboard
[ $? -eq 0 ] && [ -z "$(events off)" ] && [ -s "$tmp/off/metrics.csv" ]
ok $? "--no-tensorboard: metrics.csv only"
