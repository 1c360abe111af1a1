#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# ctrain tokenize: text files to byte-level token shards. The split (the last X of the bytes to
# val.bin), several inputs joined in order, the shard header; and every bad input refused with a
# message naming it, exit 2, and the output directory left as it was.
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CTRAIN="$ROOT/${CTRAIN_BUILD:-build}/ctrain"
T=$(mktemp -d /tmp/ctrain-t73-XXXXXX)
trap 'chmod -R u+w "$T"; rm -rf "$T"' EXIT
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); echo "not ok $n - $1"; [ -n "$2" ] && sed 's/^/# /' "$2"; }
check() { if eval "$1"; then ok "$2"; else nok "$2" "$3"; fi; }
# int32 number i (0-based) of a file's header
hdr() { od -An -t d4 -j $((4 * $2)) -N 4 "$1" | tr -d ' '; }
# the tokens of a shard as the bytes they stand for
body() { tail -c +1025 "$1" | od -An -v -t u2 | tr -s ' ' '\n' | sed '/^$/d' | awk '{ printf "%c", $1 }'; }

echo "1..19"
printf 'Call me Ishmael. Some years ago - never mind how long precisely - having little money\n' >"$T/a.txt"
printf 'It was the best of times, it was the worst of times.\n' >"$T/b.txt"
"$CTRAIN" tokenize --input "$T/a.txt" --input "$T/b.txt" --output-dir "$T/out" --val-fraction 0.25 >"$T/ok.out" 2>&1
check '[ $? -eq 0 ]' "two inputs tokenize" "$T/ok.out"
total=$(cat "$T/a.txt" "$T/b.txt" | wc -c)
nval=$(awk -v n="$total" 'BEGIN { printf "%d", n * 0.25 + 0.5 }')
check '[ "$(hdr "$T/out/train.bin" 0)" = 20240520 ] && [ "$(hdr "$T/out/train.bin" 1)" = 1 ] && [ "$(hdr "$T/out/val.bin" 0)" = 20240520 ]' \
    "both shards carry llm.c's header (magic 20240520, version 1)"
check '[ "$(hdr "$T/out/train.bin" 2)" = $((total - nval)) ] && [ "$(hdr "$T/out/val.bin" 2)" = "$nval" ]' \
    "train.bin holds $((total - nval)) tokens and val.bin the last $nval of $total bytes" "$T/ok.out"
check '[ $(wc -c <"$T/out/train.bin") = $((1024 + 2 * (total - nval))) ]' "train.bin is the header and 2 bytes a token"
cat "$T/a.txt" "$T/b.txt" >"$T/all.txt"
check '{ body "$T/out/train.bin"; body "$T/out/val.bin"; } | cmp -s - "$T/all.txt"' \
    "the tokens are the bytes of the inputs, in order, train then val"
"$CTRAIN" tokenize --input "$T/a.txt" --output-dir "$T/def" >/dev/null 2>&1
na=$(wc -c <"$T/a.txt")
check '[ "$(hdr "$T/def/val.bin" 2)" = "$(awk -v n="$na" "BEGIN { printf \"%d\", n * 0.1 + 0.5 }")" ]' \
    "--val-fraction defaults to 0.1"
check '"$CTRAIN" tokenize --help | grep -q -- "--val-fraction"' "tokenize --help lists its flags"

# bad input: exit 2, a message naming it, the earlier shards untouched
cp -p "$T/out/train.bin" "$T/train.keep"
: >"$T/empty.txt"
printf 'ab' >"$T/tiny.txt"
mkdir "$T/ro"; chmod a-w "$T/ro"
bad() { # DESCRIPTION PATTERN ARGS...
    desc=$1 pat=$2; shift 2
    "$CTRAIN" tokenize "$@" >"$T/bad.out" 2>&1
    rc=$?
    check '[ $rc -eq 2 ] && grep -q "^ctrain: error: .*$pat" "$T/bad.out" && grep -q "^ctrain: hint: " "$T/bad.out" && cmp -s "$T/out/train.bin" "$T/train.keep" && [ -z "$(ls "$T/out" | grep tmp)" ]' \
        "$desc: exit 2, an error naming it, nothing written" "$T/bad.out"
}
bad "a missing input" "nope.txt" --input "$T/a.txt" --input "$T/nope.txt" --output-dir "$T/out"
bad "an empty input" "empty.txt is empty" --input "$T/empty.txt" --output-dir "$T/out"
bad "a token shard as input" "is a token shard already" --input "$T/out/val.bin" --output-dir "$T/out"
bad "a directory as input" "is a directory" --input "$T" --output-dir "$T/out"
bad "--val-fraction 1" "val-fraction '1'" --input "$T/a.txt" --output-dir "$T/out" --val-fraction 1
bad "--val-fraction abc" "val-fraction 'abc'" --input "$T/a.txt" --output-dir "$T/out" --val-fraction abc
bad "text too short to split" "2 bytes of text" --input "$T/tiny.txt" --output-dir "$T/out"
bad "no --output-dir" "needs --output-dir" --input "$T/a.txt"
# an output directory that cannot be written: root writes anywhere, so only as another user
if [ "$(id -u)" != 0 ]; then
    "$CTRAIN" tokenize --input "$T/a.txt" --output-dir "$T/ro" >"$T/ro.out" 2>&1
    check '[ $? -ne 0 ] && grep -q "^ctrain: error: .*ro" "$T/ro.out" && [ -z "$(ls "$T/ro")" ]' \
        "an unwritable --output-dir: an error, nothing left in it" "$T/ro.out"
else
    printf 'x' >"$T/file"
    bad "an --output-dir that is a file" "not a directory" --input "$T/a.txt" --output-dir "$T/file"
fi

# The second rename fails (val.bin is a directory here): train.bin goes back to what it was, so DIR
# never holds a new train.bin beside an old val.bin.
mkdir -p "$T/half"
"$CTRAIN" tokenize --input "$T/a.txt" --output-dir "$T/half" >/dev/null 2>&1
cp -p "$T/half/train.bin" "$T/half.keep"
rm "$T/half/val.bin"
mkdir -p "$T/half/val.bin/x"
"$CTRAIN" tokenize --input "$T/b.txt" --output-dir "$T/half" >"$T/half.out" 2>&1
check '[ $? -ne 0 ] && grep -q "^ctrain: error: .*val.bin" "$T/half.out" && cmp -s "$T/half/train.bin" "$T/half.keep" &&
       [ -z "$(ls -A "$T/half" | grep -v -x -e train.bin -e val.bin)" ]' \
    "val.bin's rename fails: train.bin is the previous one again, no temp or backup left" "$T/half.out"

# The README's command on a fresh clone: --output-dir data/fortunes where there is no data/ yet.
# The missing parents are made (as --default-root-dir's are); a parent that is a file is refused.
mkdir "$T/clone"
(cd "$T/clone" && "$CTRAIN" tokenize --input "$T/a.txt" --output-dir data/fortunes) >"$T/fresh.out" 2>&1
check '[ $? -eq 0 ] && [ -f "$T/clone/data/fortunes/train.bin" ] && [ -f "$T/clone/data/fortunes/val.bin" ]' \
    "--output-dir data/fortunes with no data/: made with its parent, both shards written" "$T/fresh.out"
printf 'x' >"$T/plain"
"$CTRAIN" tokenize --input "$T/a.txt" --output-dir "$T/plain/sub/dir" >"$T/parent.out" 2>&1
rc=$?
check '[ $rc -eq 2 ] && grep -q "^ctrain: error: .*cannot create $T/plain/sub" "$T/parent.out" && grep -q "^ctrain: hint: " "$T/parent.out"' \
    "a parent that is a file: exit 2, the directory that could not be made named" "$T/parent.out"
