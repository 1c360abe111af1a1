#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The Debian packages, the way README's "SPANK plugin — for admins" installs them: `make deb`
# (dpkg-buildpackage from source, then lintian), dpkg -i, the one link that enables the plugin,
# srun --ctrain-strategy=ddp on a test cluster that knows only the packaged files, what
# `optional` and `required` do with a plugin SLURM cannot load, then dpkg --purge leaves nothing.
# Installs packages on this machine: root only. Skips without root or the packaging tools, except
# under CI=true, where it fails instead. Leaves the machine as it found it, even on failure.
. "$(dirname "$0")/lib/spank.sh"

PKGS="slurm-spank-ctrain ctrain libctrain-dev libctrain0"
SNIPPET=/usr/share/ctrain/plugstack.conf.d/ctrain.conf
LINK=/etc/slurm/plugstack.conf.d/ctrain.conf
MULTIARCH=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)
PKG_PLUGIN=/usr/lib/$MULTIARCH/slurm-wlm/ctrain.so
PKG_BIND=/usr/lib/$MULTIARCH/slurm-wlm/ctrain-bind.so
VERSION=$(awk 'NR == 1 { v = $2; gsub(/[()]/, "", v); print v; exit }' "$ROOT/debian/changelog")
# The SLURM release on this machine, as srun and slurmstepd report it ("22.05.8").
SLURM_VERSION=$(dpkg-query -W -f='${Version}' libslurm-dev 2>/dev/null | sed 's/^[0-9]*://; s/-[^-]*$//')
WORK=$(mktemp -d /tmp/ct-deb.XXXXXX)
INSTALLED=0
LINKED=0

# Why the test cannot run here, or "".
cannot_run() {
    local b p
    [ "$(id -u)" -eq 0 ] || { echo "needs root (dpkg -i, slurmd)"; return; }
    for b in dpkg-buildpackage dh lintian help2man git slurmctld srun; do
        command -v "$b" >/dev/null 2>&1 || { echo "'$b' not found (scripts/install-deps)"; return; }
    done
    git -C "$ROOT" rev-parse --is-inside-work-tree >/dev/null 2>&1 ||
        { echo "$ROOT is not a git checkout (make deb packages the files git knows)"; return; }
    for p in $PKGS; do
        if dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null | grep -qv '^not-installed$'; then
            echo "package $p is already on this machine; the test would purge it"
            return
        fi
    done
    if [ -e "$LINK" ] || [ -L "$LINK" ]; then
        echo "$LINK exists; the test would replace it"
        return
    fi
    echo ""
}

deb_cleanup() {
    cleanup    # t/lib/spank.sh: stop the cluster by pid
    if [ "$LINKED" -eq 1 ] && [ "$(readlink "$LINK")" = "$SNIPPET" ]; then
        rm -f "$LINK"
    fi
    if [ "$INSTALLED" -eq 1 ]; then
        dpkg --purge $PKGS >/dev/null 2>&1
    fi
    rm -rf "$WORK"
}
trap deb_cleanup EXIT

# dpkg-buildpackage builds from the sources with Debian's flags, whatever build the suite tests:
# check-asan's run would repeat make test's (a minute, alone).
case "${CTRAIN_BUILD:-build}" in
    build-asan)
        echo "1..0 # SKIP the packages build from the sources, once, in make test's suite (not for CTRAIN_BUILD=$CTRAIN_BUILD)"
        exit 0 ;;
esac
why=$(cannot_run)
if [ -n "$why" ]; then
    if [ "${CI:-}" = true ]; then
        echo "1..1"
        echo "not ok 1 - the package test must run under CI: $why"
        exit 1
    fi
    echo "1..0 # SKIP $why"
    exit 0
fi
T_PLAN=29
echo "1..$T_PLAN"

# --- build ----------------------------------------------------------------------------------------
# Its own output directory: `make deb` empties it, and the tree's build/ stays as it is.
(cd "$ROOT" && DEB_BUILD_OPTIONS="nocheck parallel=2" make DEB_DIR="$WORK/deb" deb) >"$WORK/deb.log" 2>&1
rc=$?
ok "$rc" "make deb: dpkg-buildpackage builds the packages and lintian reports no error or warning"
if [ "$rc" -ne 0 ]; then
    tail -n 30 "$WORK/deb.log" | sed 's/^/#   /'
    echo "Bail out! make deb failed"
    exit 1
fi
DEBS=""
for p in $PKGS; do
    DEBS="$DEBS $WORK/deb/${p}_${VERSION}_$(dpkg --print-architecture).deb"
done

# --- install (README: dpkg -i) ----------------------------------------------------------------------
INSTALLED=1
timeout 300 dpkg -i $DEBS >"$WORK/dpkg.log" 2>&1
ok $? "dpkg -i installs the four packages"
[ -s "$WORK/dpkg.log" ] && grep -i error "$WORK/dpkg.log" | head -n 5 | sed 's/^/#   /'
for p in $PKGS; do
    dpkg -L "$p" >>"$WORK/files" 2>/dev/null
done

ok "$([ -f "$PKG_PLUGIN" ] && [ -f "$PKG_BIND" ] && [ -f "$SNIPPET" ]; echo $?)" "the plugin and its planner (ctrain-bind.so) are in SLURM's plugin directory, the snippet in /usr/share/ctrain"
is "$(grep -c '^/etc' "$WORK/files")" 0 "inert: no package installs anything under /etc"
ok "$([ ! -e "$LINK" ]; echo $?)" "inert: $LINK is not there until the admin links it"
is "$(grep -v '^#' "$SNIPPET" | grep -v '^$')" "optional $PKG_PLUGIN" "the snippet's one line: optional, the packaged plugin"
mm=$(echo "$SLURM_VERSION" | cut -d. -f1,2)
next=$(printf '%s.%02d' "${mm%.*}" $((10#${mm#*.} + 1)))
is "$(dpkg-query -W -f='${Depends}' slurm-spank-ctrain | tr ',' '\n' | grep slurm-wlm-basic-plugins | sed 's/^ *//' | tr '\n' ';')" \
   "slurm-wlm-basic-plugins (>= $mm~);slurm-wlm-basic-plugins (<< $next~);" \
   "slurm-spank-ctrain depends on SLURM $mm, the release it was built for"
is "$(/usr/bin/ctrain --version)" "ctrain $VERSION (built for SLURM $SLURM_VERSION)" \
   "ctrain --version names the version and the SLURM it was built for"
is "$(objdump -p "/usr/lib/$MULTIARCH/libctrain.so.0" | awk '$1 == "SONAME" { print $2 }')" "libctrain.so.0" \
   "libctrain.so.0 has its SONAME"
is "$(pkg-config --modversion ctrain)" "$VERSION" "pkg-config ctrain: the version"

# A program built against libctrain-dev alone (headers and ctrain.pc) and run with libctrain0: the
# public API (the Trainer's config), and the example model program, which uses only installed headers.
cat >"$WORK/hl.c" <<'EOF'
#include <stdio.h>
#include <ctrain/trainer.h>

int main(void)
{
    ct_trainer_config cfg;
    ct_error err;
    int rc;

    ct_error_clear(&err);
    ct_trainer_config_default(&cfg);
    cfg.lr = -1;
    rc = ct_trainer_config_check(&cfg, &err);
    printf("%d %s\n", rc == CT_EINVAL, err.id);
    return 0;
}
EOF
# shellcheck disable=SC2046
{ cc -o "$WORK/hl" "$WORK/hl.c" $(pkg-config --cflags --libs ctrain) &&
  cc -o "$WORK/softmax_regression" "$ROOT/examples/softmax_regression.c" $(pkg-config --cflags --libs ctrain) -lm; } \
    2>"$WORK/cc.log"
ok $? "a program and examples/softmax_regression.c compile and link with pkg-config --cflags --libs ctrain"
sed 's/^/#   /' "$WORK/cc.log" | head -n 10
is "$("$WORK/hl" 2>&1)" "1 trainer-lr" "it runs against /usr/lib/$MULTIARCH/libctrain.so.0"

# --- enable on a test cluster (README: the one link) ---------------------------------------------
# The cluster's plugstack.conf is Debian's /etc/slurm/plugstack.conf (include
# /etc/slurm/plugstack.conf.d/*.conf): the link below is the only thing that enables the plugin.
CLUSTER_DIR="$WORK/cluster"
mkdir -p "$CLUSTER_DIR"
"$ROOT/scripts/slurm-cluster" start "$CLUSTER_DIR" --nodes 2 --plugstack /etc/slurm/plugstack.conf \
    >"$WORK/start.log" 2>&1
rc=$?
if [ "$rc" -ne 0 ]; then
    sed 's/^/# /' "$WORK/start.log"
    echo "Bail out! SLURM test cluster did not start (status $rc)"
    exit 1
fi
. "$CLUSTER_DIR/env"

ln -s "$SNIPPET" "$LINK"
LINKED=1
SHOW='echo "$SLURM_PROCID|$RANK $LOCAL_RANK $WORLD_SIZE $LOCAL_WORLD_SIZE $NODE_RANK|$CTRAIN_STRATEGY"'
run_srun -N2 -n4 --ctrain-strategy=ddp sh -c "$SHOW"
ok "$RC" "with the link, srun -N2 -n4 --ctrain-strategy=ddp runs"
[ "$RC" -eq 0 ] || printf '%s\n' "$ERR" | head -n 10 | sed 's/^/#   /'
is "$(printf '%s\n' "$OUT" | sort | tr '\n' ';')" \
   "0|0 0 4 2 0|ddp;1|1 1 4 2 0|ddp;2|2 0 4 2 1|ddp;3|3 1 4 2 1|ddp;" \
   "every task gets RANK LOCAL_RANK WORLD_SIZE LOCAL_WORLD_SIZE NODE_RANK and CTRAIN_STRATEGY"
run_srun -v -N1 -n1 --ctrain-strategy=ddp true
like "$ERR" "ctrain: version $VERSION, built for SLURM $SLURM_VERSION" \
     "srun -v: the plugin's load message names the version and the SLURM it was built for"

# --- a plugin SLURM cannot load --------------------------------------------------------------------
# A copy of the packaged plugin whose plugin_version says SLURM 21.08 (what a plugin built for
# another release carries), and one that differs only in the micro version.
patched_plugin() {    # patched_plugin OUT HEXVERSION: the packaged plugin with another plugin_version
    local addr sec_addr sec_off v=$2
    cp "$PKG_PLUGIN" "$1"
    cp "$PKG_BIND" "$(dirname "$1")/"    # the planner ctrain.so loads from its own directory
    addr=$(readelf -sW "$1" | awk '$8 == "plugin_version" { print $2; exit }')
    # plugin_version is a const unsigned int: in .rodata, at its address's offset in the section.
    read -r sec_addr sec_off <<EOS
$(readelf -SW "$1" | awk '{ for (i = 1; i < NF; i++) if ($i == ".rodata") { print $(i + 2), $(i + 3); exit } }')
EOS
    printf "\\x${v:4:2}\\x${v:2:2}\\x${v:0:2}\\x00" |
        dd of="$1" bs=1 seek=$((16#$addr - 16#$sec_addr + 16#$sec_off)) conv=notrunc status=none
}
patched_plugin "$WORK/old.so" 150800
patched_plugin "$WORK/micro.so" "$(printf '%02x%02x%02x' "${mm%.*}" $((10#${mm#*.})) 99)"
rm -f "$LINK"
LINKED=0

echo "optional $WORK/micro.so" >"$CLUSTER_DIR/plugstack.conf"
run_srun -N1 -n1 --ctrain-strategy=ddp sh -c 'echo $RANK $WORLD_SIZE'
is "$OUT" "0 1" "a plugin built for another micro release of SLURM $mm loads (SLURM checks major.minor)"

# slurmstepd logs the load message too: at verbose level, at info level (this cluster's
# SlurmdDebug) with the `verbose` argument.
echo "optional $PKG_PLUGIN verbose" >"$CLUSTER_DIR/plugstack.conf"
run_srun -N1 -n1 --ctrain-strategy=ddp true
like "$(cat "$CLUSTER_DIR"/log/slurmd-n1.log)" "\\[[0-9]+\\.0\\] ctrain: version $VERSION, built for SLURM $SLURM_VERSION" \
     "slurmstepd's log: the plugin's load message, with the step id"

echo "optional $WORK/old.so" >"$CLUSTER_DIR/plugstack.conf"
run_srun -N2 -n2 sh -c 'echo ok'
is "$RC $(printf '%s\n' "$OUT" | sort -u)" "0 ok" "optional, cannot load: srun without ctrain options runs"
[ "$RC" -eq 0 ] || printf '%s\n' "$ERR" | tail -n 8 | sed 's/^/#   /'
like "$ERR" "Incompatible Slurm plugin" "optional, cannot load: SLURM names the incompatible plugin"
run_srun -N1 -n1 --ctrain-strategy=ddp true
ok "$([ "$RC" -ne 0 ]; echo $?)" "optional, cannot load: srun --ctrain-strategy=ddp is refused"
like "$ERR" "unrecognized option|ctrain-strategy" "optional, cannot load: srun names the unknown option"

echo "required $WORK/old.so" >"$CLUSTER_DIR/plugstack.conf"
run_srun -N1 -n1 true
ok "$([ "$RC" -ne 0 ]; echo $?)" "required, cannot load: every srun fails, even without ctrain options"
like "$ERR" "Incompatible Slurm plugin" "required, cannot load: SLURM names the incompatible plugin"

# Back to the packaged files; removing the link disables the plugin.
cp /etc/slurm/plugstack.conf "$CLUSTER_DIR/plugstack.conf"
run_srun -N1 -n1 --ctrain-strategy=ddp true
ok "$([ "$RC" -ne 0 ]; echo $?)" "without the link, srun does not know --ctrain-strategy"

"$ROOT/scripts/slurm-cluster" stop "$CLUSTER_DIR" >/dev/null 2>&1
"$ROOT/scripts/slurm-cluster" status "$CLUSTER_DIR" >/dev/null 2>&1
ok "$([ $? -ne 0 ]; echo $?)" "the test cluster is stopped"
CLUSTER_DIR=""

# --- purge --------------------------------------------------------------------------------------------
timeout 300 dpkg --purge $PKGS >"$WORK/purge.log" 2>&1
rc=$?
ok "$rc" "dpkg --purge removes the four packages"
[ "$rc" -eq 0 ] || sed 's/^/#   /' "$WORK/purge.log" | head -n 10
INSTALLED=0
left=""
for p in $PKGS; do
    st=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null)
    [ -z "$st" ] || [ "$st" = not-installed ] || left="$left $p($st)"
    dpkg -L "$p" >/dev/null 2>&1 && left="$left $p(dpkg -L)"
done
is "$left" "" "dpkg knows none of them any more (no config-files state, no file list)"
# Every file the packages installed is gone, and the directories that were only theirs.
is "$(while read -r f; do [ -d "$f" ] || [ ! -e "$f" ] || echo "$f"; done <"$WORK/files"; \
      for d in /usr/share/ctrain /usr/include/ctrain /usr/share/doc/slurm-spank-ctrain; do [ -e "$d" ] && echo "$d"; done)" \
   "" "nothing is left: no file, no /usr/share/ctrain, no /usr/include/ctrain"
procs=""
for e in /proc/[0-9]*/exe; do
    case "$(readlink "$e" 2>/dev/null)" in /usr/bin/ctrain*) procs="$procs ${e%/exe}" ;; esac
done
is "$procs" "" "no ctrain process runs (the packages start no daemon)"

spank_done
