# SPDX-License-Identifier: BSD-3-Clause
# Shared by the fsdp tests t/39-fsdp*.t (sourced after lib/launch.sh and lib/ddp.sh): a fit of the
# test's GPT ($G) into $tmp, and whether one run's losses follow another's.

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
