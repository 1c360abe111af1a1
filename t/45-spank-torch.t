#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# A plain PyTorch DDP script (init_process_group(init_method="env://", backend="gloo")) runs
# unmodified under srun --ctrain-strategy=ddp -N2 -n4 with Debian's python3-torch (1.13 on Debian 12,
# 2.6 on Debian 13), across two hosts of scripts/slurm-cluster: its gradients cross the nodes' eth0
# (each node's counters, from its own network namespace's /proc/net/dev).
. "$(dirname "$0")/lib/spank.sh"
if ! /usr/bin/python3 -c 'import torch.distributed' >/dev/null 2>&1; then
    ci_needs "python3-torch not installed"
    echo "1..0 # SKIP python3-torch is not installed (scripts/install-deps --ci installs it)"
    exit 0
fi
spank_plan 4
spank_cluster 2 ""
# eth_bytes NODE: "RX TX" bytes of eth0 in NODE's network namespace
eth_bytes() { "$ROOT/scripts/slurm-cluster" exec "$CLUSTER_DIR" "$1" awk '$1 == "eth0:" { print $2, $10 }' /proc/net/dev; }
set -- $(eth_bytes n1) $(eth_bytes n2)
rx1=$1 tx1=$2 rx2=$3 tx2=$4
# Debian 13's PyTorch 2.6 is built without libuv, while its TCPStore (the env:// rendezvous) asks
# for libuv by default since 2.4: USE_LIBUV=0 is PyTorch's own switch back (srun passes it on).
# PyTorch 1.13 ignores it.
USE_LIBUV=0 run_srun -N2 -n4 --ctrain-strategy=ddp /usr/bin/python3 "$ROOT/t/fixtures/ddp_plain.py"
ok "$RC" "srun --ctrain-strategy=ddp -N2 -n4 python3 ddp_plain.py"
[ "$RC" -eq 0 ] || printf '%s\n' "$ERR" | tail -n 15 | sed 's/^/#   /'
is "$(printf '%s\n' "$OUT" | sort | tr '\n' ';')" \
   "rank 0 of 4 local 0 sum 6 same True;rank 1 of 4 local 1 sum 6 same True;rank 2 of 4 local 0 sum 6 same True;rank 3 of 4 local 1 sum 6 same True;" \
   "four ranks over two nodes rendezvous through MASTER_ADDR/PORT, allreduce and stay in sync"
# Two ranks a node: whatever gloo's algorithm, the gradients' sum reaches both nodes only if each
# node sends and receives at least half of them (P/2, P = (1024 x 1024 + 1024) x 4 bytes).
set -- $(eth_bytes n1) $(eth_bytes n2)
want=$(((1024 * 1024 + 1024) * 4 / 2))
d_tx1=$(($2 - tx1)) d_rx1=$(($1 - rx1)) d_tx2=$(($4 - tx2)) d_rx2=$(($3 - rx2))
[ "$d_tx1" -ge "$want" ] && [ "$d_rx1" -ge "$want" ] && [ "$d_tx2" -ge "$want" ] && [ "$d_rx2" -ge "$want" ]
ok $? "the gradients crossed eth0: n1 sent $d_tx1 received $d_rx1, n2 sent $d_tx2 received $d_rx2 bytes (>= $want)"
run_srun -N2 -n4 /usr/bin/python3 -c 'import os; print(os.environ.get("MASTER_ADDR", "none"))'
is "$(printf '%s\n' "$OUT" | sort -u)" "none" "the same script's srun without ctrain options gets no rendezvous"
spank_done
