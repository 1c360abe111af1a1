#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The GPU kit (scripts/gpu-kit) runs from its own files alone, as on a GPU machine's image without
# Debian's libraries: packed from the suite's build (xz -0: the format, not the ratio, is tested), it
# is unpacked in a mount namespace where the system's copies of every library it carries and Open
# MPI's and PMIx's folders are hidden (empty files and folders mounted over them). There, a cpu fit,
# a GPT fit on its token shards, an MPI singleton and ctrain's own launcher with its PMIx server run
# from the kit, and scripts/gpu-check, given no GPU (CUDA_VISIBLE_DEVICES empty), ends 0 with every
# check skipped and the reason, a log per check and summary.json (where cudart, cuBLAS and NCCL
# were found in it); on a machine whose glibc is older than the kit's it ends 1 and says so; with the
# CUDA toolkit's folder hidden it finds the CUDA libraries where a PyTorch wheel keeps them
# (site-packages/nvidia/*/lib), or ends 1 naming the missing. Needs a CUDA build and root (or
# unprivileged user namespaces). KEEP=1 keeps the test's folder (/tmp/ctrain-t54-*) for a look.
ROOT=$(cd "$(dirname "$0")/.." && pwd)
case "${CTRAIN_BUILD:-build}" in /*) B=$CTRAIN_BUILD ;; *) B="$ROOT/${CTRAIN_BUILD:-build}" ;; esac
T=$(mktemp -d /tmp/ctrain-t54-XXXXXX)
trap '[ -n "${KEEP:-}" ] || rm -rf "$T"' EXIT
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); echo "not ok $n - $1"; [ -n "${2:-}" ] && sed 's/^/# /' "$2" | tail -40; }
check() { if eval "$1"; then ok "$2"; else nok "$2" "${3:-}"; fi; }
N=14
skip_all() { echo "1..0 # SKIP $1"; exit 0; }

[ -f "$B/libctrain-cuda.so.0" ] || skip_all "$B is not a CUDA build (the kit is one)"
# make check-asan's build: a kit of it would never be carried to a GPU machine (and with the CUDA
# module and the sanitizers' runtimes it is over the 64 MiB a kit may be); make test packs its own.
ldd "$B/ctrain" 2>/dev/null | grep -q 'libasan' &&
    skip_all "$B is a sanitizer build: the kit is made and checked from make test's build"
[ -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] || skip_all "dataset-fashion-mnist not installed"
command -v ompi_info >/dev/null || skip_all "no ompi_info (openmpi-bin)"
UNSHARE="unshare -m"
[ "$(id -u)" -eq 0 ] || UNSHARE="unshare -rm"
$UNSHARE true 2>/dev/null || skip_all "no mount namespace here ($UNSHARE failed)"
echo "1..$N"

# 1-2: the kit from the suite's build.
t0=$(date +%s)
"$ROOT/scripts/gpu-kit" --build "$B" --out "$T/kit.tar.xz" --xz-level 0 --max-size 64 >"$T/kit.out" 2>&1
rc=$?
check '[ $rc -eq 0 ] && [ -s "$T/kit.tar.xz" ]' \
    "gpu-kit packs the suite's build in $(($(date +%s) - t0)) s: $(sed -n 's/.*: \([0-9]* KiB.*\)/\1/p' "$T/kit.out")" "$T/kit.out"
mkdir "$T/x" && xz -dc "$T/kit.tar.xz" | tar -C "$T/x" -xf -
K="$T/x/ctrain-gpukit"
check '[ -x "$K/build/ctrain" ] && [ -f "$K/build/libctrain-cuda.so.0" ] && [ -x "$K/build/t/cuda_check" ] && [ -x "$K/build/t/nccl_check" ] &&
       [ -f "$K/data/fashion-mnist/t10k-labels-idx1-ubyte.gz" ] && [ -f "$K/data/gpt/train.bin" ] && [ -f "$K/env.sh" ] &&
       [ -f "$K/lib/libmpi.so.40" ] && [ -f "$K/lib/libdnnl.so.2" ] && ls "$K/openmpi/lib" | grep -q "^mca_" &&
       ! ls "$K/lib" | grep -Eq "^(libc|libm|ld-linux|libcuda|libcudart|libcublas|libnccl)[.-]"' \
    "the kit holds ctrain, its CUDA module, the CUDA tools, the data, Open MPI's components and the Debian libraries, not glibc's or CUDA's" \
    "$K/MANIFEST"

# What to hide: every system file of a library the kit carries, and Open MPI's and PMIx's folders.
: >"$T/empty" && mkdir "$T/empty.d"
for lib in "$K"/lib/*; do
    "$(command -v ldconfig || echo /sbin/ldconfig)" -p | awk -v n="${lib##*/}" '$1 == n { print $NF }' | while read -r p; do readlink -f "$p"; done
done | sort -u >"$T/hide.files"
pmix=$(dirname "$(dirname "$(readlink -f "$(ldd "$B/ctrain" | awk '$1 == "libpmix.so.2" { print $3 }')")")")
{ for p in pkglibdir pkgdatadir sysconfdir; do ompi_info --path $p | sed 's/.*: *//'; done; echo "$pmix"; } >"$T/hide.dirs"
# The CUDA toolkit's library folder (hidden last: ctrain needs it until then).
dirname "$(readlink -f "$(ldd "$B/libctrain-cuda.so.0" | awk '$1 == "libcudart.so.13" { print $3 }')")" >"$T/cuda.dir"

cat >"$T/inner.sh" <<'EOF'
# In the namespace: hide, then run from the kit. $1: the test's folder, $2: the kit, $3: the checkout.
T=$1 K=$2 ROOT=$3 n=2
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); echo "not ok $n - $1"; [ -n "${2:-}" ] && sed 's/^/# /' "$2" | tail -40; }
check() { if eval "$1"; then ok "$2"; else nok "$2" "${3:-}"; fi; }
while read -r f; do mount --bind "$T/empty" "$f" || exit 1; done <"$T/hide.files"
while read -r d; do [ -d "$d" ] && { mount --bind "$T/empty.d" "$d" || exit 1; }; done <"$T/hide.dirs"

"$K/build/ctrain" --version >"$T/bare.out" 2>&1
check '[ $? -ne 0 ] && grep -q "shared object\|too short\|invalid ELF" "$T/bare.out"' \
    "without the kit's libraries ctrain does not start: the system's copies are hidden ($(head -c 90 "$T/bare.out"))" "$T/bare.out"

CTRAIN_KIT=$K
. "$K/env.sh"
"$K/build/ctrain" --version >"$T/version.out" 2>&1 && ldd "$K/build/ctrain" >"$T/ldd.out" 2>&1
check '[ $? -eq 0 ] && ! grep -q "not found" "$T/ldd.out" &&
       [ "$(grep "=> /" "$T/ldd.out" | grep -v "=> $K/lib/" | grep -Evc "/(libc|libm|libmvec|libdl|librt|libpthread|libresolv)\.so|/cuda")" -eq 0 ]' \
    "with env.sh ctrain starts and every library it loads, but glibc's and CUDA's, is the kit's" "$T/ldd.out"

"$K/build/ctrain" fit --accelerator cpu --data "$K/data/fashion-mnist" --max-steps 30 --batch-size 64 --progress off \
    --default-root-dir "$T/fit" >"$T/fit.out" 2>&1
check '[ $? -eq 0 ] && grep -q "\"test_acc\":[[:space:]]*0\.[0-9]" "$T/fit/summary.json"' \
    "a cpu fit on the kit's Fashion-MNIST (30 steps, test accuracy $(sed -n 's/.*"test_acc":[[:space:]]*\([0-9.]*\).*/\1/p' "$T/fit/summary.json" 2>/dev/null))" "$T/fit.out"

"$K/build/ctrain" fit --accelerator cpu --model gpt --data "$K/data/gpt" --model-config n_layer=1,n_head=2,n_embd=32,seq_len=32 \
    --batch-size 4 --max-steps 3 --progress off --default-root-dir "$T/gpt" >"$T/gpt.out" 2>&1
check '[ $? -eq 0 ] && [ -f "$T/gpt/summary.json" ]' "a GPT fit on the kit's token shards (3 steps)" "$T/gpt.out"

"$K/build/t/mpi_allreduce" >"$T/mpi.out" 2>&1
check '[ $? -eq 0 ] && grep -q "allreduce ok rank 0 of 1" "$T/mpi.out" && ! grep -qi "unable to open\|mca_base_component" "$T/mpi.out"' \
    "an MPI singleton from the kit's Open MPI (every component it loads is there)" "$T/mpi.out"

"$K/build/t/launch_probe" subprocess kv 2 >"$T/kv.out" 2>&1
check '[ $? -eq 0 ] && [ "$(grep -c "kv ok rank [01] of 2" "$T/kv.out")" -eq 2 ]' \
    "ctrain's own launcher and PMIx server from the kit: 2 ranks exchange through the store, then MPI" "$T/kv.out"

CUDA_VISIBLE_DEVICES= OUT="$T/out" "$ROOT/scripts/gpu-check" --kit "$T/kit.tar.xz" >"$T/check.out" 2>&1
check '[ $? -eq 0 ] && [ "$(grep -c "\"result\": \"skip\"" "$T/out/summary.json")" -eq 13 ] &&
       [ "$(grep -c "\"reason\": \"no CUDA device (" "$T/out/summary.json")" -eq 13 ] &&
       grep -q "\"cuda_libraries_found\": \"libcudart.so.13 /[^;]*/libcudart.so.13; .*libnccl.so.2 /" "$T/out/summary.json"' \
    "gpu-check without a GPU: exit 0, its 13 checks skipped with the reason; where cudart and NCCL were found" "$T/check.out"
check 'python3 -m json.tool "$T/out/summary.json" >/dev/null && grep -q "\"device\": " "$T/out/summary.json" &&
       grep -q "\"driver\": " "$T/out/summary.json" && grep -q "\"cuda\": " "$T/out/summary.json" &&
       [ "$(grep -c "^== " "$T/out/checks.log")" -eq 13 ] && [ "$(tar tzf "$T/out/logs.tar.gz" | grep -c "\.log$")" -ge 14 ] &&
       [ "$(ls "$T/out" | wc -l)" -eq 3 ]' \
    "summary.json is JSON with the device, driver and CUDA fields; checks.log and logs.tar.gz hold a log per check (3 files)" \
    "$T/out/summary.json"

# A machine whose glibc is older than the kit's (ldd --version says 2.31): nothing can run; exit 1, why.
mkdir "$T/oldglibc"
printf '#!/bin/sh\n[ "$1" = --version ] && { echo "ldd (GNU libc) 2.31"; exit 0; }\nexec /usr/bin/ldd "$@"\n' >"$T/oldglibc/ldd"
chmod +x "$T/oldglibc/ldd"
CUDA_VISIBLE_DEVICES= PATH="$T/oldglibc:$PATH" OUT="$T/out2" "$ROOT/scripts/gpu-check" --kit "$T/kit.tar.xz" >"$T/check2.out" 2>&1
check '[ $? -eq 1 ] && grep -q "\"skip_reason\": \"this machine.s glibc 2.31 is older than the 2.36 the kit" "$T/out2/summary.json"' \
    "gpu-check where glibc is older than the kit's: exit 1, the reason in summary.json" "$T/check2.out"
CUDA_VISIBLE_DEVICES= OUT="$T/out5" "$ROOT/scripts/gpu-check" --kit "$T/kit.tar.xz" --only t51,nccl >"$T/check5.out" 2>&1
check '[ $? -eq 0 ] && [ "$(grep -c "\"reason\": \"not among --only t51,nccl\"" "$T/out5/summary.json")" -eq 11 ] &&
       grep -q "\"name\": \"nccl\", \"result\": \"skip\", .*\"reason\": \"no CUDA device (" "$T/out5/summary.json"' \
    "gpu-check --only t51,nccl: the 11 others recorded as not asked for" "$T/out5/summary.json"

# 13-14: the CUDA libraries where the toolkit's folder is gone: in a PyTorch wheel's layout
# (site-packages/nvidia/cu13/lib, named by a stand-in python3), else missing, by name.
cuda=$(cat "$T/cuda.dir")
mkdir -p "$T/site/nvidia/cu13/lib" "$T/fakepy"
mount --bind "$cuda" "$T/site/nvidia/cu13/lib" && mount --bind "$T/empty.d" "$cuda"
printf '#!/bin/sh\ncase "$*" in *getsitepackages*) echo "%s" ;; *) exit 1 ;; esac\n' "$T/site" >"$T/fakepy/python3"
chmod +x "$T/fakepy/python3"
CUDA_VISIBLE_DEVICES= PYTHON="$T/fakepy/python3" OUT="$T/out3" "$ROOT/scripts/gpu-check" --kit "$T/kit.tar.xz" >"$T/check3.out" 2>&1
check '[ $? -eq 0 ] && grep -q "\"cuda_libraries\": \"$T/site/nvidia/cu13/lib\"" "$T/out3/summary.json" &&
       grep -q "\"cuda_libraries_found\": \"libcudart.so.13 $T/site/nvidia/cu13/lib/libcudart.so.13; " "$T/out3/summary.json" &&
       grep -q "\"skip_reason\": \"no CUDA device (" "$T/out3/summary.json" && ! grep -q "shared librar" "$T/out3/summary.json"' \
    "gpu-check finds the CUDA libraries in a PyTorch wheel's folder when the toolkit's is gone" "$T/check3.out"
CUDA_VISIBLE_DEVICES= PYTHON=/bin/false OUT="$T/out4" "$ROOT/scripts/gpu-check" --kit "$T/kit.tar.xz" >"$T/check4.out" 2>&1
check '[ $? -eq 1 ] && grep -q "\"skip_reason\": \"the machine has no.*libcudart.so.13" "$T/out4/summary.json"' \
    "without them anywhere: exit 1, the missing libraries named in summary.json" "$T/check4.out"
EOF
$UNSHARE sh "$T/inner.sh" "$T" "$K" "$ROOT"
[ $? -eq 0 ] || echo "# the namespace script failed (a mount?)"
