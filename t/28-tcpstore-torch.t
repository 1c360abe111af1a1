#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# ctrain's TCPStore and PyTorch 2.6's (use_libuv=False: TCPStoreBackend.cpp's server), both ways:
# torch's client on ctrain's store, ctrain's client on torch's master store; each side runs every
# query and waits for a key the other sets (t/tools/tcpstore_torch.py, t/tools/tcpstore_peer.c).
# Debian 12's PyTorch 1.13 speaks an older protocol (no VALIDATE, no PING, other query numbers):
# there the test runs in the Debian 13 root when scripts/debian13 setup made one
# (CTRAIN_DEBIAN13_ROOT), and skips otherwise; the Debian 13 suite (make test-debian13) runs it.
top="$(cd "$(dirname "$0")/.." && pwd -P)"
. "$top/t/lib/ci.sh"
BUILD=${CTRAIN_BUILD:-build}
PEER="$BUILD/t/tcpstore_peer"
cd "$top" || exit 1

torch_version() {   # torch_version [RUNNER...]: PyTorch's version under /usr/bin/python3, "" if none
    "$@" /usr/bin/python3 -c 'import torch.distributed as d; import torch; print(torch.__version__ if d.is_available() else "")' 2>/dev/null
}
new_enough() {      # 2.6 and later speak the protocol the store implements
    case "$1" in '' | 0.* | 1.* | 2.[0-5] | 2.[0-5].* | 2.[0-5][!0-9]*) return 1 ;; esac
    return 0
}

RUN=
version=$(torch_version)
if [ -z "$version" ] && [ ! -d "${CTRAIN_DEBIAN13_ROOT:-$top/build/debian13}/usr" ]; then
    ci_needs "python3-torch not installed"
    echo "1..0 # SKIP python3-torch is not installed (scripts/install-deps --ci installs it)"
    exit 0
fi
if ! new_enough "$version"; then
    export CTRAIN_DEBIAN13_ROOT=${CTRAIN_DEBIAN13_ROOT:-$top/build/debian13}
    if [ "$(id -u)" -eq 0 ] && scripts/debian13 run true >/dev/null 2>&1; then
        RUN="scripts/debian13 run"
        version=$(torch_version $RUN)
    fi
    if ! new_enough "$version"; then
        echo "1..0 # SKIP needs PyTorch >= 2.6, this platform has ${version:-none} and no current Debian 13 root to run it in (scripts/debian13 setup; make test-debian13 runs it)"
        exit 0
    fi
fi

# Every line of the exchange as a numbered TAP test, then its exit status as one more.
n=0
for mode in torch-client torch-master; do
    out=$($RUN /usr/bin/python3 t/tools/tcpstore_torch.py "$PEER" "$mode" 2>&1)
    rc=$?
    printf '%s\n' "$out" | awk -v n="$n" -v mode="$mode" '
        /^ok / { sub(/^ok/, "ok " ++n " " mode); print; next }
        /^not ok / { sub(/^not ok/, "not ok " ++n " " mode); print; next }
        { print "# " $0 }
        END { print "#n " n }' >"${TMPDIR:-/tmp}/ctrain-t28.$$"
    n=$(sed -n 's/^#n //p' "${TMPDIR:-/tmp}/ctrain-t28.$$")
    grep -v '^#n ' "${TMPDIR:-/tmp}/ctrain-t28.$$"
    rm -f "${TMPDIR:-/tmp}/ctrain-t28.$$"
    n=$((n + 1))
    if [ "$rc" -eq 0 ]; then
        echo "ok $n - $mode: the exchange with PyTorch $version ended well"
    else
        echo "not ok $n - $mode: the exchange with PyTorch $version failed (exit $rc)"
    fi
done
echo "1..$n"
