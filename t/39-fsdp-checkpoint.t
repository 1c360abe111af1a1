#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# fsdp's sharded checkpoints (state_dict_type=sharded), 4 ranks under ctrain's launcher: the
# checkpoint is a directory (last.safetensors/: one index and a file per rank, no whole file); it
# resumes at 2 ranks (fsdp, 2 x 4: the same global batch), under ddp and ddp_sharded (4 x 2) and
# single_device (1 x 8), each continuing within 1e-5 of the unbroken ddp run; a flipped byte in a rank's file and a missing rank file are
# refused with a hint, the checkpoint untouched; a save SIGKILLed at a random moment (each file's
# write held CTRAIN_TEST_CKPT_WRITE_DELAY seconds, a few tries) leaves last.safetensors loadable (its
# temporary directory, PATH.tmp.XXXXXX, is removed by the next save); ctrain export of the directory
# writes the same Hugging Face files as of the whole file of the same run; another model's
# sharded checkpoint and a directory without an index are refused with a hint.
T="$(dirname "$0")"
. "$T/lib/launch.sh"
. "$T/lib/ddp.sh"
. "$T/lib/fsdp.sh"
N=13

[ -x "$CTRAIN" ] || skip_all $N "ctrain not built"
echo "1..$N"
fsdp_data # t/39-fsdp.t's corpus and GPT: an epoch of 15 whole steps of 4 x 2 sequences of 32
V="$M --model-config n_layer=4,n_head=4,n_embd=64,seq_len=32" # validate's flags for the GPT
S=fsdp:state_dict_type=sharded

sums() { (cd "$1" && md5sum ./*); }

# 1: the directory's layout.
fit ddp ddp 4 2 --max-epochs 2 && fit half "$S" 4 2 --max-epochs 1
rc=$?
L="$tmp/half/last.safetensors"
[ $rc -eq 0 ] && [ -d "$L" ] && [ -f "$L/index.safetensors" ] && [ "$(ls "$L" | grep -c '^rank-0000[0-3]\.safetensors$')" -eq 4 ] &&
    [ "$(ls "$L" | wc -l)" -eq 5 ] && [ -d "$tmp/half/best.safetensors" ] && [ -z "$(ls -a "$tmp/half" | grep '\.tmp\.')" ]
ok $? "a 4-rank sharded save: last.safetensors/ holds index.safetensors and rank-0000[0-3].safetensors" ||
    { diag "$tmp/half.out"; ls -laR "$tmp/half" | sed 's/^/# /'; }
for d in r2 rddp rzs rsd flip miss; do cp -r "$tmp/half" "$tmp/$d"; done

# 2-3: resumed at 2 ranks (fsdp 2 x 4) and under ddp (4 x 2), the same global batch.
fit r2 "$S" 2 4 --max-epochs 2 --ckpt-path last && got=$(follows ddp r2 16 30)
ok $? "resumed at 2 ranks, fsdp sharded, follows the unbroken ddp run within 1e-5: $got" ||
    diag "$tmp/r2.out" "$tmp/r2/metrics.csv"
fit rddp ddp 4 2 --max-epochs 2 --ckpt-path last && got=$(follows ddp rddp 16 30) && [ -f "$tmp/rddp/last.safetensors" ]
ok $? "resumed under ddp, follows the unbroken run within 1e-5 (and its save replaced the directory by a file): $got" ||
    diag "$tmp/rddp.out" "$tmp/rddp/metrics.csv"

# 4-5: under ddp_sharded (4 x 2) and single_device (1 x 8), the same global batch.
fit rzs ddp_sharded 4 2 --max-epochs 2 --ckpt-path last && got=$(follows ddp rzs 16 30)
ok $? "resumed under ddp_sharded, follows the unbroken run within 1e-5: $got" || diag "$tmp/rzs.out" "$tmp/rzs/metrics.csv"
fit rsd single_device 1 8 --max-epochs 2 --ckpt-path last && got=$(follows ddp rsd 16 30)
ok $? "resumed under single_device, follows the unbroken run within 1e-5: $got" || diag "$tmp/rsd.out" "$tmp/rsd/metrics.csv"

# 6-7: a flipped byte in rank 2's shards, a missing rank 1 file: refused with a hint, the
# checkpoint untouched, nothing trained.
f="$tmp/flip/last.safetensors/rank-00002.safetensors"
size=$(stat -c %s "$f")
byte=$(od -An -tu1 -j $((size - 100)) -N1 "$f" | tr -d ' ')
printf "\\$(printf %03o $(((byte + 1) % 256)))" | dd of="$f" bs=1 seek=$((size - 100)) conv=notrunc 2>/dev/null
sums "$tmp/flip/last.safetensors" >"$tmp/flip.before"
rows=$(wc -l <"$tmp/flip/metrics.csv")
fit flip "$S" 4 2 --max-epochs 2 --ckpt-path last
rc=$?
[ $rc -ne 0 ] && grep -q "^ctrain: .*rank-00002.safetensors: checksum .*the index says" "$tmp/flip.out" &&
    grep -q "^ctrain: hint: " "$tmp/flip.out" && sums "$tmp/flip/last.safetensors" | cmp -s - "$tmp/flip.before" &&
    [ "$(wc -l <"$tmp/flip/metrics.csv")" -eq "$rows" ]
ok $? "a flipped byte in a rank's shard file is refused with a hint, the checkpoint untouched" || diag "$tmp/flip.out"
rm "$tmp/miss/last.safetensors/rank-00001.safetensors"
"$CTRAIN" validate $V --ckpt-path "$tmp/miss/last.safetensors" --default-root-dir "$tmp/miss" >"$tmp/miss.out" 2>&1
rc=$?
[ $rc -ne 0 ] && grep -q "^ctrain: .*rank-00001.safetensors: missing" "$tmp/miss.out" &&
    grep -q "^ctrain: hint: .*incomplete" "$tmp/miss.out"
ok $? "a missing rank file is refused with a hint" || diag "$tmp/miss.out"

# 8-10: SIGKILL at a random moment of a save (each file's write held 0.4 s once its header is out:
# the ranks' files, then the index): last.safetensors still loads (the older checkpoint, or the
# new one when the kill came after its rename).
for try in 1 2 3; do
    K="$tmp/kill$try"
    cp -r "$tmp/half" "$K"
    CTRAIN_TEST_CKPT_WRITE_DELAY=0.4 timeout 120 "$CTRAIN" fit $G --strategy "$S" --devices 4 --batch-size 2 \
        --max-epochs 2 --ckpt-path last --default-root-dir "$K" >"$K.out" 2>&1 &
    P=$!
    pids="$pids $P"
    i=0
    while [ -z "$(ls "$K" | grep '^last\.safetensors\.tmp\.')" ] && [ $i -lt 600 ]; do i=$((i + 1)); sleep 0.05; done
    sleep "$(awk -v s="$$$try" 'BEGIN { srand(s); printf "%.2f", rand() * 0.8 }')"
    for p in $(procs_with "$K"); do kill -KILL "$p" 2>/dev/null; done
    wait $P 2>/dev/null
    "$CTRAIN" validate $V --ckpt-path "$K/last.safetensors" --default-root-dir "$K.v" >"$K.v.out" 2>&1
    rc=$?
    [ $i -lt 600 ] && [ $rc -eq 0 ] && grep -q "val_loss" "$K.v.out"
    ok $? "try $try: a save killed midway leaves last.safetensors loadable" || { diag "$K.out" "$K.v.out"; ls -la "$K" | sed 's/^/# /'; }
done

# 11: ctrain export of the sharded directory: the same files as of the whole file fsdp's
# state_dict_type=full wrote in the same run (bit for bit: the same training).
fit full fsdp:state_dict_type=full 4 2 --max-epochs 1 && [ -f "$tmp/full/last.safetensors" ] &&
    "$CTRAIN" export --ckpt-path "$tmp/full/last.safetensors" --format hf --output-dir "$tmp/hf.full" >"$tmp/ex1.out" 2>&1 &&
    "$CTRAIN" export --ckpt-path "$tmp/half/last.safetensors" --format hf --output-dir "$tmp/hf.sharded" >"$tmp/ex2.out" 2>&1 &&
    [ -f "$tmp/hf.sharded/model.safetensors" ] && diff -r "$tmp/hf.full" "$tmp/hf.sharded" >"$tmp/ex.diff" 2>&1
ok $? "ctrain export of the sharded directory writes what export of the whole file writes" ||
    diag "$tmp/full.out" "$tmp/ex1.out" "$tmp/ex2.out" "$tmp/ex.diff"

# 12-13: identity: another model's sharded checkpoint; a directory without an index (a run's).
"$CTRAIN" fit $M --model-config n_layer=2,n_head=4,n_embd=64,seq_len=32 --strategy "$S" --devices 4 --batch-size 2 \
    --max-epochs 2 --ckpt-path "$tmp/half/last.safetensors" --default-root-dir "$tmp/other" >"$tmp/other.out" 2>&1
rc=$?
[ $rc -ne 0 ] && grep -q "^ctrain: .*model" "$tmp/other.out" && grep -q "^ctrain: hint: " "$tmp/other.out" &&
    [ ! -e "$tmp/other/last.safetensors" ]
ok $? "another model's sharded checkpoint is refused with a hint, nothing saved" || diag "$tmp/other.out"
"$CTRAIN" validate $V --ckpt-path "$tmp/half" --default-root-dir "$tmp/noidx" >"$tmp/noidx.out" 2>&1
rc=$?
[ $rc -ne 0 ] && grep -q "^ctrain: .*is a directory without index.safetensors" "$tmp/noidx.out" &&
    grep -q "^ctrain: hint: " "$tmp/noidx.out"
ok $? "a directory without an index is refused with a hint" || diag "$tmp/noidx.out"
