#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# PyTorch Lightning 2.x (from PyPI, in a venv over the system's PyTorch: a test peer, never a
# dependency of ctrain) under the plugin: srun -N2 --ntasks-per-node=2 --ctrain-strategy=ddp with
# Trainer(accelerator="cpu", strategy="ddp", devices=2, num_nodes=2).
# Which Lightning environment takes the job is Lightning's choice, and a decided one: Lightning
# checks SLURMEnvironment first, and srun's tasks have SLURM_NTASKS, so SLURMEnvironment reads
# SLURM_PROCID/LOCALID/NODEID/NTASKS (the same layout the plugin checked) and honours the plugin's
# MASTER_ADDR and MASTER_PORT (its own default would derive a port from the job id alone, the
# same for two steps of one job). The plugin's RANK/GROUP_RANK/LOCAL_RANK/LOCAL_WORLD_SIZE would
# let TorchElasticEnvironment claim the job as well, with the same layout; Lightning asks SLURM's
# first, and the test checks that it did.
# Lightning 2.x needs PyTorch >= 2.1: on Debian 12 (1.13) the test skips; it runs in the Debian 13
# root (make test-debian13), whose setup installs the venv ($CTRAIN_PEERS_VENV, /opt/ctrain-peers).
. "$(dirname "$0")/lib/spank.sh"
VENV=${CTRAIN_PEERS_VENV:-/opt/ctrain-peers}
torch_version=$(/usr/bin/python3 -c 'import torch; print(torch.__version__)' 2>/dev/null)
case "$torch_version" in
    '') ci_needs "python3-torch not installed"
        echo "1..0 # SKIP python3-torch is not installed (scripts/install-deps --ci installs it)"; exit 0 ;;
    0.* | 1.* | 2.0.*)
        echo "1..0 # SKIP PyTorch Lightning 2.x needs PyTorch >= 2.1, this platform has $torch_version (runs on Debian 13: make test-debian13)"
        exit 0 ;;
esac
if ! "$VENV/bin/python" -c 'import pytorch_lightning' >/dev/null 2>&1; then
    ci_needs "PyTorch Lightning not installed in $VENV"
    echo "1..0 # SKIP PyTorch Lightning is not installed in $VENV (scripts/debian13 setup installs it in the root)"
    exit 0
fi
spank_plan 6
spank_cluster 2 ""
# Debian's PyTorch 2.6 is built without libuv, while its TCPStore (the env:// rendezvous) asks for
# libuv by default since 2.4: USE_LIBUV=0 is PyTorch's own switch back (srun passes it on).
USE_LIBUV=0 run_srun -N2 --ntasks-per-node=2 --ctrain-strategy=ddp "$VENV/bin/python" "$ROOT/t/fixtures/lightning_ddp.py"
ok "$RC" "srun -N2 --ntasks-per-node=2 --ctrain-strategy=ddp python lightning_ddp.py (Lightning $("$VENV/bin/python" -c 'import pytorch_lightning as p; print(p.__version__)'), torch $torch_version)"
[ "$RC" -eq 0 ] || printf '%s\n' "$ERR" | tail -n 20 | sed 's/^/#   /'
lines=$(printf '%s\n' "$OUT" | grep '^env ' | sort -k4n)
is "$(printf '%s\n' "$lines" | awk '{ print $2 }' | sort | uniq -c | awk '{ print $1, $2 }')" "4 SLURMEnvironment" \
   "Lightning chose its SLURMEnvironment on all four ranks"
is "$(printf '%s\n' "$lines" | awk '{ printf "%s/%s l%s n%s;", $4, $6, $8, $10 }')" "0/4 l0 n0;1/4 l1 n0;2/4 l0 n1;3/4 l1 n1;" \
   "one process group of 4: global rank, local rank and node as the plugin laid them out"
is "$(printf '%s\n' "$lines" | awk '{ print $12 }' | sort -u | wc -l)" "1" "every rank trained the same number of steps"
ports=$(printf '%s\n' "$lines" | awk '{ split($14, a, ":"); print $14, (a[2] == $16 ? "plugin" : "other") }' | sort -u)
is "$(printf '%s\n' "$ports" | wc -l | tr -d ' ') $(printf '%s\n' "$ports" | awk '{ print $2 }' | sort -u | tr '\n' ' ')" "1 plugin " \
   "every rank rendezvoused at one address, on the plugin's MASTER_PORT ($(printf '%s\n' "$ports" | head -n 1))"
is "$(printf '%s\n' "$lines" | awk '{ print $18 }' | sort -u | wc -l | tr -d ' ')" "1" \
   "the four ranks end with the same weights ($(printf '%s\n' "$lines" | awk 'NR == 1 { print $18 }'))"
spank_done
