# SPDX-License-Identifier: BSD-3-Clause
# Shared by the fsdp tests t/39-fsdp*.t (sourced after lib/launch.sh and lib/ddp.sh): a fit of the
# test's GPT ($G) into $tmp, and whether one run's losses follow another's; their corpus.

# fsdp_data: the tests' corpus tokenized into $tmp/tok, M its flags and G the small GPT on it. 3852
# training tokens: an epoch of 15 whole steps of 4 x 2 sequences of 32 (and small val and test splits,
# quick to evaluate). Its size matters to the resumes at 2 ranks: an epoch ending in a partial batch,
# which 2 ranks split otherwise than 4, makes the resumed run differ (7e-2 with 4600 bytes).
fsdp_data() {
    head -c 4280 /usr/share/common-licenses/GPL-3 >"$tmp/corpus.txt"
    "$CTRAIN" tokenize --input "$tmp/corpus.txt" --output-dir "$tmp/tok" >"$tmp/tok.out" 2>&1 || diag "$tmp/tok.out"
    M="--model gpt --datamodule tokens --data $tmp/tok --progress off --log-every-n-steps 1 --limit-val-batches 1"
    G="$M --model-config n_layer=4,n_head=4,n_embd=64,seq_len=32 --lr-schedule constant"
}

# fit NAME STRATEGY DEVICES BATCH [FLAGS...]: a run in $tmp/NAME, its output in $tmp/NAME.out
fit() {
    name=$1 strategy=$2 devices=$3 batch=$4
    shift 4
    timeout 120 "$CTRAIN" fit $G --strategy "$strategy" --devices "$devices" --batch-size "$batch" \
        --default-root-dir "$tmp/$name" "$@" >"$tmp/$name.out" 2>&1
}
# follows A B FIRST LAST: B's train_loss within 1e-5 (relative) of A's at steps FIRST..LAST, each
# step present in both; prints the largest difference
follows() {
    awk -F, -v first="$3" -v last="$4" '
        FNR == 1 { for (i = 1; i <= NF; i++) if ($i == "train_loss") col = i; next }
        $col == "" || $1 < first || $1 > last { next }
        FILENAME == ARGV[1] { a[$1] = $col; next }
        ($1 in a) { d = (a[$1] - $col) / a[$1]; d = d < 0 ? -d : d; if (d > max) max = d; n++ }
        END { printf "%d steps, largest relative difference %.2e", n, max; exit !(n == last - first + 1 && max <= 1e-5) }
    ' "$tmp/$1/metrics.csv" "$tmp/$2/metrics.csv"
}
