#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# EasyBuild and Lmod, as README's "Installing at a site" installs ctrain as a module: EasyBuild 5.4
# (scripts/easybuild-venv) builds easybuild/ctrain-VERSION.eb (SYSTEM toolchain) from make dist's
# tarball into a scratch prefix, checking its OS dependencies and running its sanity check
# (ctrain --version, ctrain plan) with the module loaded; the module file sets nothing about SLURM
# or the SPANK plugin, and the prefix holds no plugin; then Debian's Lmod: module use, module avail,
# module load ctrain, a 5-step fit and ctrain plan from the module's PATH, pkg-config through it,
# module unload. The site variant (GCCcore toolchain) is resolved by EasyBuild's dry run against its
# own easyconfigs, not built (no EasyBuild toolchain here).
# Runs in `make test` on Debian 12 only: the module builds from the tarball, which a sanitizer
# build (check-asan) or the Debian 13 suite does not change, so those suites skip it.
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/t/lib/ci.sh"
n=0
failed=0
ok() { n=$((n + 1)); if [ "$1" -eq 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; failed=1; fi; }
is() { if [ "$1" = "$2" ]; then ok 0 "$3"; else ok 1 "$3"; printf '#   got:  %s\n#   want: %s\n' "$1" "$2" | head -n 20; fi; }
like() { if printf '%s\n' "$1" | grep -Eq -- "$2"; then ok 0 "$3"; else ok 1 "$3"; printf '%s\n' "$1" | tail -n 15 | sed 's/^/#   /'; echo "#   wanted: /$2/"; fi; }

VENV=${CTRAIN_EB_VENV:-$ROOT/build/ebvenv}
LMOD_INIT=/usr/share/lmod/lmod/init/bash
FMNIST=/usr/share/datasets/fashion-mnist
VERSION=$(sed -n 1p "$ROOT/VERSION")

cannot_run() {
    case "${CTRAIN_BUILD:-build}" in
        build) ;;
        *) echo "the module builds from the release tarball, once, in make test's suite (not for CTRAIN_BUILD=$CTRAIN_BUILD)"; return ;;
    esac
    git -C "$ROOT" rev-parse --is-inside-work-tree >/dev/null 2>&1 ||
        { echo "$ROOT is not a git checkout (make dist packs the files git tracks)"; return; }
    [ -f "$LMOD_INIT" ] || { echo "missing: Lmod not installed ($LMOD_INIT; scripts/install-deps)"; return; }
    [ -x "$VENV/bin/eb" ] || { echo "missing: EasyBuild not in $VENV (scripts/easybuild-venv)"; return; }
    [ -f "$FMNIST/train-images-idx3-ubyte.gz" ] || { echo "missing: dataset-fashion-mnist not installed"; return; }
    echo ""
}
# Why the test cannot run here, or "": a missing package ("missing: ...") fails under CI=true.
why=$(cannot_run)
case "$why" in missing:*) ci_needs "${why#missing: }" ;; esac
if [ -n "$why" ]; then
    echo "1..0 # SKIP ${why#missing: }"
    exit 0
fi
echo "1..15"
W=$(mktemp -d /tmp/ct-eb.XXXXXX)
trap 'rm -rf "$W"' EXIT
cd "$ROOT" || exit 1

# EasyBuild's configuration: everything under $W; Lmod writes and reads Lua modules. As root
# (the suite runs as root) EasyBuild wants to be told.
export PATH="$VENV/bin:$PATH"
export EASYBUILD_PREFIX="$W/eb" EASYBUILD_INSTALLPATH="$W/inst" EASYBUILD_BUILDPATH="$W/build" \
       EASYBUILD_SOURCEPATH="$W/src" EASYBUILD_TMPDIR="$W/tmp" EASYBUILD_MODULES_TOOL=Lmod \
       EASYBUILD_MODULE_SYNTAX=Lua EASYBUILD_PARALLEL=2
[ "$(id -u)" -ne 0 ] || export EASYBUILD_ALLOW_USE_AS_ROOT_AND_ACCEPT_CONSEQUENCES=1
# shellcheck disable=SC1090
. "$LMOD_INIT"

make -s DIST_DIR="$W/src" dist >"$W/dist.log" 2>&1
ok $? "make dist: the tarball EasyBuild builds from"
eb "easybuild/ctrain-$VERSION.eb" >"$W/eb.log" 2>&1
rc=$?
ok "$rc" "eb easybuild/ctrain-$VERSION.eb: built and installed from the tarball"
if [ "$rc" -ne 0 ]; then
    grep -E 'ERROR|error|FAILED' "$W/eb.log" | head -n 20 | sed 's/^/#   /'
    echo "Bail out! EasyBuild failed"
    exit 1
fi
like "$(grep -A1 "running command 'ctrain --version'" "$W/eb.log")" "result for command 'ctrain --version': OK" \
     "the sanity check runs ctrain --version"
like "$(grep -A1 "running command 'ctrain plan'" "$W/eb.log")" "result for command 'ctrain plan': OK" \
     "the sanity check runs ctrain plan"
ok "$(grep -q "^== building..." "$W/eb.log" && ! git -C "$W/build" rev-parse --git-dir >/dev/null 2>&1; echo $?)" \
   "built in $W/build, outside any git checkout"

MOD="$W/inst/modules/all/ctrain/$VERSION.lua"
SW="$W/inst/software/ctrain/$VERSION"
ok "$([ -f "$MOD" ]; echo $?)" "the module file modules/all/ctrain/$VERSION.lua"
# What the module changes in the environment: the prefix's paths and EasyBuild's own variables; no
# SLURM_*/SPANK variable, no LD_PRELOAD, no plugstack, nothing it runs or loads.
is "$(sed -n 's/^\(setenv\|pushenv\|prepend_path\|append_path\|remove_path\)("\([A-Za-z_]*\)".*/\1 \2/p; /^\(load\|execute\|source_sh\|depends_on\)(/p' "$MOD" | sort | tr '\n' ';')" \
   "prepend_path CMAKE_PREFIX_PATH;prepend_path CPATH;prepend_path LD_LIBRARY_PATH;prepend_path LIBRARY_PATH;prepend_path PATH;prepend_path PKG_CONFIG_PATH;setenv EBDEVELCTRAIN;setenv EBROOTCTRAIN;setenv EBVERSIONCTRAIN;" \
   "the module sets only the prefix's paths and EasyBuild's variables: nothing about SLURM or the plugin"
is "$(cd "$SW" && find . -name easybuild -prune -o \( -name '*.so' -o -name '*.conf' -o -name '*.8' \) -print | sort)" "./lib/libctrain.so" \
   "the prefix holds no plugin, snippet or plugin manual (only libctrain.so)"

# --- under Lmod, as a user does ------------------------------------------------------------------------
module use "$W/inst/modules/all"
like "$(module -t avail ctrain 2>&1)" "^ctrain/$VERSION\$" "module avail lists ctrain/$VERSION"
module load ctrain
is "$(command -v ctrain)" "$SW/bin/ctrain" "module load ctrain puts the module's ctrain first on PATH"
like "$(ctrain --version 2>&1)" "^ctrain $VERSION \\(built for SLURM" "ctrain --version"
out=$(cd "$W" && ctrain fit --max-steps 5 --progress off --limit-val-batches 2 --data "$FMNIST" --default-root-dir "$W/run" 2>&1)
rc=$?
[ "$rc" -eq 0 ] && printf '%s\n' "$out" | grep -q "fit done: .*5 steps"
ok $? "ctrain fit --max-steps 5 from the module: 5 steps, exit 0"
[ "$rc" -eq 0 ] || printf '%s\n' "$out" | tail -n 10 | sed 's/^/#   /'
like "$(ctrain plan --strategy ddp --devices 2 2>&1)" '"strategy":[[:space:]]*"ddp"' "ctrain plan --strategy ddp from the module"
is "$(pkg-config --modversion ctrain 2>&1)" "$VERSION" "pkg-config finds ctrain.pc through the module"
module unload ctrain

# --- the site variant: resolved, not built ----------------------------------------------------------------
gcc_eb=$(ls easybuild/ctrain-"$VERSION"-GCCcore-*.eb 2>/dev/null | head -n 1)
eb "$gcc_eb" --dry-run --robot >"$W/dry.log" 2>&1
rc=$?
[ "$rc" -eq 0 ] && grep -q "module: ctrain/$VERSION-GCCcore-" "$W/dry.log" && grep -q "module: GCCcore/" "$W/dry.log"
ok $? "eb --dry-run --robot ${gcc_eb:-easybuild/ctrain-$VERSION-GCCcore-*.eb}: its toolchain and dependencies resolve in EasyBuild's easyconfigs"
[ "$rc" -eq 0 ] || tail -n 10 "$W/dry.log" | sed 's/^/#   /'
exit "$failed"
