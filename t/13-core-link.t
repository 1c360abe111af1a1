#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# libctrain-core stays free of MPI, PMIx, BLAS, oneDNN, CUDA, protobuf-c and gloo: the SPANK plugin links
# it into srun and slurmstepd. The Makefile decides what goes in by folder (CORE_DIRS; engine/health/fit,
# the checks that run inside a fit, goes into libctrain beside engine/health's core nodecheck.c), so the
# whole archive must link into a program with hwloc, cJSON and libm alone; the check fails when an
# object of a fit check (engine/health/fit/preflight.o: GEMMs, the strategy's collectives) is put in.
. "$(dirname "$0")/lib/launch.sh"
A="$T/../${CTRAIN_BUILD:-build}"
[ -f "$A/libctrain-core.a" ] || { echo "1..0 # SKIP no $A/libctrain-core.a (run make first)"; exit 0; }
echo "1..3"
CORE="$A/libctrain-core.a"
printf 'int main(void) { return 0; }\n' >"$tmp/main.c"
libs="$(pkg-config --libs hwloc libcjson 2>/dev/null) -lm"
# An ASan+UBSan build's objects need the sanitizers' runtimes (make check-asan).
san=
nm "$CORE" 2>/dev/null | grep -q ' U __\(asan\|ubsan\)_' && san="-fsanitize=address,undefined"
link() {
    ${CC:-cc} $san -o "$tmp/prog" "$tmp/main.c" -Wl,--whole-archive "$@" -Wl,--no-whole-archive $libs \
        >"$tmp/link.err" 2>&1
}

link "$CORE"
ok $? "every object of libctrain-core.a links with hwloc, cJSON and libm alone ($(ar t "$CORE" | wc -l) objects)" ||
    diag "$tmp/link.err"
bad=$(nm "$CORE" 2>/dev/null | awk '$1 == "U" { print $2 }' |
      grep -E '^_*(MPI_|PMIx_|cblas_|openblas|dnnl_|cuda|cublas|nccl|protobuf_c_|gloo)' | sort -u | tr '\n' ' ')
[ -z "$bad" ]
ok $? "libctrain-core.a needs no MPI, PMIx, BLAS, oneDNN, CUDA, NCCL, protobuf-c or gloo symbol${bad:+: $bad}"
fit_obj="$A/obj/engine/health/fit/preflight.o"
[ -f "$fit_obj" ] && ! link "$CORE" "$fit_obj" && grep -q 'undefined reference' "$tmp/link.err"
ok $? "the check fails with a fit check's object in the core ($(grep -c 'undefined reference' "$tmp/link.err") undefined references)"
