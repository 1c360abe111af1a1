#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The RPM packages (rpm/ctrain.spec), as README's "Installing at a site" builds them: `make rpm`
# (rpmbuild -ta on make dist's tarball, unpacked outside any git checkout, then rpmlint with
# rpm/rpmlint.toml), every file's place, mode and owner (rpm -qlvp), the dependencies (generated
# from the ELF files, the SLURM release pinned by hand), the snippet a %config(noreplace) file that
# enables nothing and no install scriptlet; then the packages installed into a scratch root
# (rpm --root, its own database, --nodeps: this Debian machine has no RPM database of the
# libraries) and the plugin from that root run by srun on a test cluster whose plugstack.conf names
# only the root's plugin (--ctrain-strategy=ddp takes effect); then rpm -e leaves nothing.
# What this does not test: a RHEL-family userland (its BuildRequires, its SLURM RPMs): README.md,
# "Installing at a site".
# Root only (slurmd). Runs in `make test` on Debian 12: the packages build from the tarball, which a
# sanitizer build (check-asan) or the Debian 13 suite does not change, so those suites skip it.
. "$(dirname "$0")/lib/spank.sh"

VERSION=$(sed -n 1p "$ROOT/VERSION")
ARCH=$(rpm --eval '%{_arch}' 2>/dev/null)
ISA=$(rpm --eval '%{_isa}' 2>/dev/null)    # (x86-64)
LIBDIR=$(rpm --eval '%{_libdir}' 2>/dev/null)
PKGS="ctrain libctrain libctrain-devel slurm-spank-ctrain"
SLURM_VERSION=$(dpkg-query -W -f='${Version}' libslurm-dev 2>/dev/null | sed 's/^[0-9]*://; s/-[^-]*$//')
WORK=$(mktemp -d /tmp/ct-rpm.XXXXXX)

rpm_cleanup() {
    cleanup    # t/lib/spank.sh: stop the cluster by pid
    rm -rf "$WORK"
}
trap rpm_cleanup EXIT

cannot_run() {
    local b
    case "${CTRAIN_BUILD:-build}" in
        build) ;;
        *) echo "the RPMs build from the release tarball, once, in make test's suite (not for CTRAIN_BUILD=$CTRAIN_BUILD)"; return ;;
    esac
    [ "$(id -u)" -eq 0 ] || { echo "needs root (slurmd)"; return; }
    for b in rpmbuild rpmlint rpm git gcc help2man slurmctld srun; do
        command -v "$b" >/dev/null 2>&1 || { echo "missing: '$b' not found (scripts/install-deps)"; return; }
    done
    git -C "$ROOT" rev-parse --is-inside-work-tree >/dev/null 2>&1 ||
        { echo "$ROOT is not a git checkout (make dist packs the files git tracks)"; return; }
    echo ""
}
# Why the test cannot run here, or "": a missing package ("missing: ...") fails under CI=true.
why=$(cannot_run)
case "$why" in missing:*) ci_needs "${why#missing: }" ;; esac
if [ -n "$why" ]; then
    echo "1..0 # SKIP ${why#missing: }"
    exit 0
fi
T_PLAN=29
echo "1..$T_PLAN"

# --- build ------------------------------------------------------------------------------------------
(cd "$ROOT" && make DIST_DIR="$WORK/dist" RPM_DIR="$WORK/rpm" rpm) >"$WORK/rpm.log" 2>&1
rc=$?
ok "$rc" "make rpm: rpmbuild -ta builds from the tarball and rpmlint reports nothing unexplained"
if [ "$rc" -ne 0 ]; then
    grep -E '^error|: [EW]: |Error|error:' "$WORK/rpm.log" | head -n 30 | sed 's/^/#   /'
    echo "Bail out! make rpm failed"
    exit 1
fi
# rpmlint's summary line (not the log's last: under make test, a make within make adds "Leaving directory")
like "$(sed -n '/rpmlint session/,$p' "$WORK/rpm.log" | grep -E '[0-9]+ errors?, [0-9]+ warnings?' | tail -n 1)" \
    " 0 errors, 0 warnings" "rpmlint: 0 errors, 0 warnings"
grep -E ': [EW]: ' "$WORK/rpm.log" | head -n 10 | sed 's/^/#   /'
# rpmbuild unpacked the tarball in its BUILD directory under $WORK, which no git checkout holds:
# make and make install DESTDIR= ran from the tarball alone.
grep -q "^+ cd $WORK/rpm/BUILD\$" "$WORK/rpm.log" && grep -q "ctrain-$VERSION.tar.gz" "$WORK/rpm.log" &&
    ! git -C "$WORK" rev-parse --git-dir >/dev/null 2>&1
ok $? "built and installed from the tarball, unpacked outside any git checkout"
R="$WORK/rpm/RPMS/$ARCH"
files=""
for p in $PKGS; do files="$files $R/$p-$VERSION-1.$ARCH.rpm"; done
ls $files "$WORK/rpm/SRPMS/ctrain-$VERSION-1.src.rpm" >/dev/null 2>&1
ok $? "four packages ($PKGS) and the source package"

# --- each file's place, mode and owner ---------------------------------------------------------------
# rpm -qlvp: MODE LINKS OWNER GROUP SIZE DATE PATH; the build-id links (/usr/lib/.build-id) are
# rpmbuild's, not the spec's.
listing() {
    rpm -qlvp "$R/$1-$VERSION-1.$ARCH.rpm" 2>/dev/null | grep -v ' /usr/lib/\.build-id' |
        awk '$(NF-1) != "->" { print $1, $3, $4, $NF } $(NF-1) == "->" { print $1, $3, $4, $(NF-2), "->", $NF }'
}
d="drwxr-xr-x root root"
f="-rw-r--r-- root root"
x="-rwxr-xr-x root root"
is "$(listing ctrain)" "$x /usr/bin/ctrain
$d /usr/share/doc/ctrain-$VERSION
$f /usr/share/doc/ctrain-$VERSION/README.md
$d /usr/share/licenses/ctrain-$VERSION
$f /usr/share/licenses/ctrain-$VERSION/LICENSE
$f /usr/share/man/man1/ctrain.1.gz" "ctrain: the command, its man page (gzip), README and the licence"
is "$(listing libctrain)" "$f $LIBDIR/libctrain.so.0
$d /usr/share/licenses/libctrain-$VERSION
$f /usr/share/licenses/libctrain-$VERSION/LICENSE" "libctrain: libctrain.so.0 in $LIBDIR and the licence"
hdr=$(sed -n 's/^PUBLIC_HEADERS *:= *//; T; :a; /\\$/ { N; s/\\\n */ /; ba }; p' "$ROOT/Makefile" | tr ' ' '\n' | grep . | sort |
      sed "s|^|$f /usr/include/ctrain/|; s|$|.h|")
is "$(listing libctrain-devel)" "$d /usr/include/ctrain
$hdr
lrwxrwxrwx root root $LIBDIR/libctrain.so -> libctrain.so.0
$f $LIBDIR/pkgconfig/ctrain.pc" "libctrain-devel: the public headers (PUBLIC_HEADERS), libctrain.so, ctrain.pc; no static library"
is "$(listing slurm-spank-ctrain)" "$d /etc/ctrain
$d /etc/ctrain/plugstack.conf.d
$f /etc/ctrain/plugstack.conf.d/ctrain.conf
$f $LIBDIR/slurm/ctrain-bind.so
$f $LIBDIR/slurm/ctrain.so
$d /usr/share/licenses/slurm-spank-ctrain-$VERSION
$f /usr/share/licenses/slurm-spank-ctrain-$VERSION/LICENSE
$f /usr/share/man/man8/ctrain-spank.8.gz" "slurm-spank-ctrain: the plugin and its planner in $LIBDIR/slurm, the snippet in /etc/ctrain, the man page"

# --- what the packages declare ----------------------------------------------------------------------------
q() { rpm -qp "$@" 2>/dev/null; }
is "$(q --qf '[%{FILEFLAGS:fflags}|%{FILENAMES}\n]' "$R/slurm-spank-ctrain-$VERSION-1.$ARCH.rpm" | grep '^[a-z]*c[a-z]*|' | tr '|' ' ')" \
   "cn /etc/ctrain/plugstack.conf.d/ctrain.conf" "the snippet is the only config file, %config(noreplace)"
scripts=""
for p in $files; do scripts="$scripts$(q --scripts "$p")"; done
is "$scripts" "" "no package has an install or removal scriptlet: nothing is enabled on install"
mm=$(echo "$SLURM_VERSION" | cut -d. -f1,2)
next=$(printf '%s.%02d' "${mm%.*}" $((10#${mm#*.} + 1)))
is "$(q --requires "$R/slurm-spank-ctrain-$VERSION-1.$ARCH.rpm" | grep '^slurm' | tr '\n' ';')" \
   "slurm$ISA >= $mm;slurm$ISA < $next;" "slurm-spank-ctrain requires SLURM $mm, the release it was built for"
req=$(q --requires "$R/slurm-spank-ctrain-$VERSION-1.$ARCH.rpm" | sed -n 's/^\(lib[a-z_-]*\)\.so.*/\1/p' | sort -u | tr '\n' ' ')
is "$req" "libc libcjson libhwloc " "the plugin's generated Requires: the C library, cJSON and hwloc (ctrain-bind.so), nothing of MPI, BLAS or PMIx"
req=$(q --requires "$R/ctrain-$VERSION-1.$ARCH.rpm")
like "$req" "libslurm\\.so\\.[0-9]+\\(\\)\\(64bit\\)" "ctrain's generated Requires name libslurm"
like "$req" "libpmix\\.so\\.2\\(\\)\\(64bit\\)" "... and libpmix"
is "$(q --requires "$R/libctrain-devel-$VERSION-1.$ARCH.rpm" | grep '^libctrain')" "libctrain$ISA = $VERSION-1" \
   "libctrain-devel requires libctrain of its own version-release"
like "$(q --changelog "$R/ctrain-$VERSION-1.$ARCH.rpm" | head -n 1)" "- $VERSION-1\$" "%changelog's first entry is $VERSION-1"

# --- install into a scratch root -------------------------------------------------------------------------
ROOTFS="$WORK/root"
# --force-debian: Debian's rpm would otherwise print that Alien, not rpm, should install packages.
mkdir -p "$ROOTFS"
rpmdb --root "$ROOTFS" --dbpath /var/lib/rpm --initdb && rpm --force-debian --root "$ROOTFS" --dbpath /var/lib/rpm -i --nodeps $files \
    >"$WORK/install.log" 2>&1
ok $? "rpm --root: the four packages install into a scratch root"
sed 's/^/#   /' "$WORK/install.log" | head -n 5
rpm --force-debian --root "$ROOTFS" --dbpath /var/lib/rpm -V --nodeps $PKGS >"$WORK/verify.log" 2>&1
ok $? "rpm -V: every installed file as packaged (files only: --nodeps)"
sed 's/^/#   /' "$WORK/verify.log" | head -n 10
ok "$([ ! -e "$ROOTFS/etc/slurm" ]; echo $?)" "inert: nothing under /etc/slurm"
is "$(grep -v '^#' "$ROOTFS/etc/ctrain/plugstack.conf.d/ctrain.conf" | grep -v '^$')" "optional $LIBDIR/slurm/ctrain.so" \
   "the snippet's one line: optional, the packaged plugin"
is "$("$ROOTFS/usr/bin/ctrain" --version 2>&1)" "ctrain $VERSION (built for SLURM $SLURM_VERSION)" "the root's ctrain --version"

# libctrain-devel and libctrain from the root: a program built with the root's ctrain.pc (pkg-config's
# sysroot puts the root before its paths) and run against the root's libctrain.so.0.
cat >"$WORK/hl.c" <<'EOC'
#include <stdio.h>
#include <ctrain/trainer.h>

int main(void)
{
    ct_trainer_config cfg;
    ct_error err;

    ct_error_clear(&err);
    ct_trainer_config_default(&cfg);
    cfg.lr = -1;
    printf("%d %s\n", ct_trainer_config_check(&cfg, &err) == CT_EINVAL, err.id);
    return 0;
}
EOC
export PKG_CONFIG_SYSROOT_DIR="$ROOTFS" PKG_CONFIG_LIBDIR="$ROOTFS$LIBDIR/pkgconfig"
is "$(pkg-config --modversion ctrain) $(sed -n 's/^libdir=//p' "$ROOTFS$LIBDIR/pkgconfig/ctrain.pc")" "$VERSION $LIBDIR" \
   "the root's ctrain.pc: version $VERSION, libdir $LIBDIR"
# shellcheck disable=SC2046
cc -o "$WORK/hl" "$WORK/hl.c" $(pkg-config --cflags --libs ctrain) 2>"$WORK/cc.log" &&
    out=$(LD_LIBRARY_PATH="$ROOTFS$LIBDIR" "$WORK/hl" 2>&1)
is "${out:-$(head -n 5 "$WORK/cc.log")}" "1 trainer-lr" "a program built with the root's headers and ctrain.pc runs against its libctrain.so.0"
unset PKG_CONFIG_SYSROOT_DIR PKG_CONFIG_LIBDIR

# --- the root's plugin under srun ----------------------------------------------------------------------
# plugstack.conf: the snippet's own line, its path moved into the scratch root.
sed "s|^optional /|optional $ROOTFS/|" "$ROOTFS/etc/ctrain/plugstack.conf.d/ctrain.conf" >"$WORK/plugstack.conf"
CLUSTER_DIR="$WORK/cluster"
mkdir -p "$CLUSTER_DIR"
"$ROOT/scripts/slurm-cluster" start "$CLUSTER_DIR" --nodes 2 --plugstack "$WORK/plugstack.conf" >"$WORK/start.log" 2>&1
rc=$?
if [ "$rc" -ne 0 ]; then
    sed 's/^/# /' "$WORK/start.log"
    echo "Bail out! SLURM test cluster did not start (status $rc)"
    exit 1
fi
. "$CLUSTER_DIR/env"
is "$(grep -v '^#' "$CLUSTER_DIR/plugstack.conf" | grep -v '^$')" "optional $ROOTFS$LIBDIR/slurm/ctrain.so" \
   "the cluster's plugstack.conf names only the scratch root's plugin"
SHOW='echo "$SLURM_PROCID|$RANK $LOCAL_RANK $WORLD_SIZE $LOCAL_WORLD_SIZE $NODE_RANK|$CTRAIN_STRATEGY"'
run_srun -N2 -n4 --ctrain-strategy=ddp sh -c "$SHOW"
ok "$RC" "srun -N2 -n4 --ctrain-strategy=ddp runs with the RPM's plugin"
[ "$RC" -eq 0 ] || printf '%s\n' "$ERR" | head -n 10 | sed 's/^/#   /'
is "$(printf '%s\n' "$OUT" | sort | tr '\n' ';')" \
   "0|0 0 4 2 0|ddp;1|1 1 4 2 0|ddp;2|2 0 4 2 1|ddp;3|3 1 4 2 1|ddp;" \
   "every task gets RANK LOCAL_RANK WORLD_SIZE LOCAL_WORLD_SIZE NODE_RANK and CTRAIN_STRATEGY"
run_srun -v -N1 -n1 --ctrain-strategy=ddp true
like "$ERR" "ctrain: version $VERSION, built for SLURM $SLURM_VERSION" "srun -v: the plugin's load message"
"$ROOT/scripts/slurm-cluster" stop "$CLUSTER_DIR" >/dev/null 2>&1
CLUSTER_DIR=""

# --- removal -----------------------------------------------------------------------------------------
# An edited snippet is an admin's: rpm -e keeps it as .rpmsave (what %config does).
echo "# site edit" >>"$ROOTFS/etc/ctrain/plugstack.conf.d/ctrain.conf"
rpm --force-debian --root "$ROOTFS" --dbpath /var/lib/rpm -e $PKGS >"$WORK/erase.log" 2>&1
ok $? "rpm -e removes the four packages"
left=$(cd "$ROOTFS" && find . \( -path ./var/lib/rpm -o -path './var/lib/rpm/*' \) -prune -o ! -type d -print | sort)
is "$left" "./etc/ctrain/plugstack.conf.d/ctrain.conf.rpmsave" "nothing is left but the edited snippet, kept as .rpmsave"

spank_done
