#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# make dist: the release tarball ctrain-VERSION.tar.gz that the RPM (t/83) and EasyBuild (t/84)
# packages build from. Two runs give the same bytes; its entries are the files git tracks, under
# ctrain-VERSION/, sorted, owned by 0/0, dated at the last commit (SOURCE_DATE_EPOCH), with modes
# 0644/0755 from git's executable bit; gzip keeps no name or time. The version comes from the file
# VERSION, which the tarball carries, and `make check-version` refuses a packaging file that spells
# another. (That the tarball builds and installs without git is what t/83 and t/84 do: rpmbuild and
# EasyBuild unpack it outside any checkout and run make and make install DESTDIR= from it.)
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/t/lib/ci.sh"
n=0
failed=0
ok() { n=$((n + 1)); if [ "$1" -eq 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; failed=1; fi; }
is() { if [ "$1" = "$2" ]; then ok 0 "$3"; else ok 1 "$3"; printf '#   got:  %s\n#   want: %s\n' "$1" "$2" | head -n 20; fi; }

if ! git -C "$ROOT" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    echo "1..0 # SKIP $ROOT is not a git checkout (make dist packs the files git tracks)"
    exit 0
fi
echo "1..13"
W=$(mktemp -d /tmp/ctrain-t82-XXXXXX)
trap 'rm -rf "$W"' EXIT
cd "$ROOT" || exit 1
VERSION=$(sed -n 1p VERSION)
TOP="ctrain-$VERSION"

make -s DIST_DIR="$W/a" dist >"$W/a.log" 2>&1
ok $? "make dist writes $TOP.tar.gz"
sed 's/^/#   /' "$W/a.log" | tail -n 5
A="$W/a/$TOP.tar.gz"
sleep 1    # a second run one second later: nothing in the bytes may come from the clock
make -s DIST_DIR="$W/b" dist >"$W/b.log" 2>&1
cmp -s "$A" "$W/b/$TOP.tar.gz"
ok $? "a second make dist gives the same bytes ($(sha256sum <"$A" | cut -c1-16)...)"

# gzip: no file name (FLG bit 3) and no time (MTIME 0): bytes 3 to 7 of the header.
is "$(od -An -tx1 -j3 -N5 "$A" | tr -d ' \n')" "0000000000" "gzip -n: the header has no name and no time"

tar --numeric-owner --full-time -tvzf "$A" >"$W/list" 2>"$W/tar.err"
ok $? "tar reads it"
tar -tzf "$A" >"$W/names"
want=$(git -c core.quotepath=off ls-files | LC_ALL=C sort | sed "s|^|$TOP/|")
is "$(grep -v '/$' "$W/names" | LC_ALL=C sort)" "$want" "its files are exactly the files git tracks, under $TOP/"
LC_ALL=C sort -c "$W/names" 2>/dev/null
ok $? "entries in byte order (directories before what they hold)"
is "$(awk '$2 != "0/0"' "$W/list" | head -n 3)" "" "every entry is owned by 0/0, by number"
epoch=$(git log -1 --format=%ct)
stamp=$(TZ=UTC date -d "@$epoch" '+%Y-%m-%d %H:%M:%S')
is "$(TZ=UTC tar --numeric-owner --full-time -tvzf "$A" | awk -v s="$stamp" '($4 " " $5) != s' | head -n 3)" "" \
   "every entry is dated at the last commit ($stamp UTC)"
# Modes: directories 0755; files 0755 where git records 100755, else 0644.
bad=$(git -c core.quotepath=off ls-files -s | awk -v top="$TOP/" -v list="$W/list" '
      { m[top $4] = ($1 == "100755") ? "-rwxr-xr-x" : "-rw-r--r--" }
      END { while ((getline l < list) > 0) { split(l, f, " "); name = f[6];
              want = (name ~ /\/$/) ? "drwxr-xr-x" : m[name]; if (f[1] != want) print f[1], name } }')
is "$bad" "" "modes: 0755 directories, 0644 files, 0755 where git records the executable bit"
is "$(tar -xOzf "$A" "$TOP/VERSION")" "$VERSION" "the tarball carries VERSION ($VERSION)"

# The packaging files that spell the version agree with VERSION; another version is refused.
make -s check-version >"$W/cv.log" 2>&1
ok $? "make check-version: debian/changelog, rpm/ctrain.spec and easybuild/*.eb agree with VERSION"
sed 's/^/#   /' "$W/cv.log" | head -n 5
out=$(make -s VERSION=9.9.9 DIST_DIR="$W/c" dist 2>&1)
rc=$?
[ "$rc" -ne 0 ] && [ ! -e "$W/c/ctrain-9.9.9.tar.gz" ] &&
    printf '%s\n' "$out" | grep -q "^ctrain: debian/changelog's first entry is $VERSION, VERSION says 9.9.9"
ok $? "make dist with another VERSION than the packaging files' is refused, naming the file"
[ $? -eq 0 ] || printf '%s\n' "$out" | sed 's/^/#   /' | head -n 5

# From the tarball (no git): make dist says why it cannot run.
mkdir -p "$W/x" && tar -C "$W/x" -xzf "$A"
out=$(cd "$W/x/$TOP" && make -s dist 2>&1)
rc=$?
[ "$rc" -ne 0 ] && printf '%s\n' "$out" | grep -q "^ctrain: make dist: needs a git checkout"
ok $? "make dist in an unpacked tarball (no git) fails, saying it needs a git checkout"
exit "$failed"
