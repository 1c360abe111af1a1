#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The strategy names Lightning users type resolve to ctrain's strategies: ddp_notebook and
# ddp_spawn are ddp_fork; ddp[_spawn|_fork]_find_unused_parameters_false|true are ddp or ddp_fork
# with find_unused=0|1 (what they mean: include/ctrain/registry.h's table, README's strategies).
# `ctrain plan` resolves each (no training); t/07 trains a model with an unused parameter.
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B="$ROOT/${CTRAIN_BUILD:-build}"
T=$(mktemp -d /tmp/ctrain-t12-XXXXXX)
trap 'rm -rf "$T"' EXIT
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); echo "not ok $n - $1"; [ -n "$2" ] && sed 's/^/# /' "$2"; }
field() { sed -n "s/^[[:space:]]*\"$1\":[[:space:]]*\"\\([^\"]*\\)\".*/\\1/p" "$2" | head -1; }

# NAME STRATEGY LAUNCHER OPTIONS
cases='ddp_notebook ddp_fork fork bucket_mb=0.5,overlap=1,backend=auto
ddp_spawn ddp_fork fork bucket_mb=0.5,overlap=1,backend=auto
ddp_find_unused_parameters_false ddp_find_unused_parameters_false subprocess bucket_mb=0.5,overlap=1,find_unused=0,backend=auto
ddp_find_unused_parameters_true ddp_find_unused_parameters_true subprocess bucket_mb=0.5,overlap=1,find_unused=1,backend=auto
ddp_spawn_find_unused_parameters_false ddp_fork_find_unused_parameters_false fork bucket_mb=0.5,overlap=1,find_unused=0,backend=auto
ddp_spawn_find_unused_parameters_true ddp_fork_find_unused_parameters_true fork bucket_mb=0.5,overlap=1,find_unused=1,backend=auto
ddp_fork_find_unused_parameters_false ddp_fork_find_unused_parameters_false fork bucket_mb=0.5,overlap=1,find_unused=0,backend=auto
ddp_fork_find_unused_parameters_true ddp_fork_find_unused_parameters_true fork bucket_mb=0.5,overlap=1,find_unused=1,backend=auto'
echo "1..10"
echo "$cases" | while read -r name st launcher opts; do
    env -u SLURM_JOB_ID -u SLURM_PROCID -u OMPI_COMM_WORLD_SIZE -u PMIX_RANK \
        "$B/ctrain" plan --accelerator cpu --devices 2 --strategy "$name" >"$T/$name.json" 2>&1
    rc=$?
    if [ $rc -eq 0 ] && [ "$(field strategy "$T/$name.json")" = "$st" ] &&
       [ "$(field launcher "$T/$name.json")" = "$launcher" ] &&
       [ "$(field strategy_options "$T/$name.json")" = "$opts" ]; then
        echo "ok - --strategy $name plans $st ($launcher launcher, $opts)"
    else
        echo "not ok - --strategy $name plans $st ($launcher launcher, $opts)"; sed 's/^/# /' "$T/$name.json"
    fi
done
n=8
"$B/ctrain" plan --accelerator cpu --devices 2 --strategy ddp_find_unused_parameters_true:find_unused=2 >"$T/bad.out" 2>&1
rc=$?
if [ $rc -ne 0 ] && grep -q "find_unused=2" "$T/bad.out" && grep -q "hint:" "$T/bad.out"; then
    ok "find_unused=2 is refused, naming it, with a hint"
else
    nok "find_unused=2 is refused, naming it, with a hint" "$T/bad.out"
fi
"$B/ctrain" plan --accelerator cpu --devices 2 --strategy ddp:find_unused=1 >"$T/bad2.out" 2>&1
rc=$?
if [ $rc -ne 0 ] && grep -q "has no option 'find_unused'" "$T/bad2.out" && grep -q "hint:" "$T/bad2.out"; then
    ok "plain ddp takes no find_unused option (the Lightning names carry it)"
else
    nok "plain ddp takes no find_unused option (the Lightning names carry it)" "$T/bad2.out"
fi
