#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# make SLURM_PREFIX=DIR: ctrain built against a site's own SLURM installed under a prefix (the way
# SLURM's configure --prefix=/opt/slurm lays it out: include/slurm/*.h, lib/libslurm.so,
# lib/slurm/ for plugins). The prefix here is made of this machine's SLURM headers and libslurm;
# the test checks that the plugin is compiled with the prefix's headers, that libslurm is linked
# from the prefix with an rpath, that install puts the plugin in the prefix's plugin directory,
# and that a prefix without SLURM's headers is refused with a message naming it.
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/t/lib/ci.sh"
n=0
ok() { n=$((n + 1)); if [ "$1" -eq 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fi; }
echo "1..6"

lib=$(for d in /usr/lib/*/libslurm.so /usr/lib/libslurm.so; do [ -e "$d" ] && echo "$d" && break; done)
if [ ! -f /usr/include/slurm/spank.h ] || [ -z "$lib" ]; then
    ci_needs "libslurm-dev not installed"
    for i in 1 2 3 4 5 6; do echo "ok $i # SKIP libslurm-dev not installed"; done
    exit 0
fi
T=$(mktemp -d /tmp/ctrain-t81-XXXXXX)
trap 'rm -rf "$T"' EXIT; [ -n "${KEEP:-}" ] && trap - EXIT
P="$T/opt/slurm"
mkdir -p "$P/include" "$P/lib/slurm"
cp -r /usr/include/slurm "$P/include/slurm"
# The prefix's SLURM is told apart by its version: micro release 0xfe, which the plugin's
# plugin_version (SLURM_VERSION_NUMBER, what slurmd checks) must carry.
sed -i 's/^\(#define SLURM_VERSION_NUMBER 0x[0-9a-fA-F]\{4\}\)[0-9a-fA-F]\{2\}$/\1fe/' "$P/include/slurm/slurm_version.h"
want=$(sed -n 's/^#define SLURM_VERSION_NUMBER 0x\([0-9a-fA-F]*\)$/\1/p' "$P/include/slurm/slurm_version.h")
ln -s "$(readlink -f "$lib")" "$P/lib/libslurm.so"
B="$T/build"

cd "$ROOT" || exit 1
make -j2 V=1 BUILD="$B" SLURM_PREFIX="$P" spank "$B/obj/engine/trainer/requeue.o" >"$T/make.out" 2>&1
ok $? "make SLURM_PREFIX=$P spank builds the plugin"
# plugin_version's 4 bytes in the .so, as a hex number.
sym=$(readelf -Ws "$B/ctrain.so" 2>/dev/null | awk '$8 == "plugin_version" { print $2; exit }')
got=$(objdump -s --start-address=0x$sym --stop-address=$(printf '0x%x' $((0x$sym + 4))) "$B/ctrain.so" 2>/dev/null |
      awk '/^ [0-9a-f]+ [0-9a-f]+ / { b = $2; print substr(b, 7, 2) substr(b, 5, 2) substr(b, 3, 2) substr(b, 1, 2); exit }' |
      sed 's/^0*//')
[ -n "$sym" ] && [ "$got" = "$want" ]
ok $? "the plugin is built with the prefix's headers: plugin_version 0x$got (the prefix's SLURM_VERSION_NUMBER 0x$want)"
grep -- "-c engine/trainer/requeue.c" "$T/make.out" | grep -q -- "-isystem $P/include"
ok $? "libctrain's requeue is compiled with the prefix's headers (-isystem $P/include)"
# The CLI's link line (make -n: what make would run) takes libslurm from the prefix, with an rpath.
make -n BUILD="$B" SLURM_PREFIX="$P" "$B/ctrain" 2>/dev/null | grep -- "-o $B/ctrain" >"$T/link.out"
grep -q -- "-L$P/lib -Wl,-rpath,$P/lib -lslurm" "$T/link.out"
ok $? "ctrain links -L$P/lib -Wl,-rpath,$P/lib -lslurm"
make -n BUILD="$B" SLURM_PREFIX="$P" DESTDIR="$T/dest" install 2>/dev/null | grep -q "ctrain.so $T/dest$P/lib/slurm/ctrain.so"
ok $? "make install puts the plugin in the prefix's plugin directory ($P/lib/slurm)"
make BUILD="$B" SLURM_PREFIX="$T/nowhere" spank >"$T/bad.out" 2>&1
[ $? -ne 0 ] && grep -q "SLURM_PREFIX=$T/nowhere: no $T/nowhere/include/slurm/spank.h" "$T/bad.out"
ok $? "a prefix without SLURM's headers is refused, naming it"
