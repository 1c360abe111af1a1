#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Network variables for every task of a ctrain step, CPU-only steps too: the fabric nearest the
# task when the topology has one, else the interface carrying the node's own address (SLURM's
# NodeAddr: each node of the test cluster is a host whose one interface, eth0, holds it).
# A user's value is kept and --ctrain-bind=verbose says so; Open MPI's include list is not set
# beside a user's exclude list; bind=none sets none.
. "$(dirname "$0")/lib/spank.sh"
spank_plan 12
spank_cluster 2 ""
FIX="$ROOT/t/fixtures/topologies"
# The cluster's env exports Open MPI's network settings; these tasks start without them.
unset OMPI_MCA_btl_tcp_if_include OMPI_MCA_oob_tcp_if_include NCCL_SOCKET_IFNAME GLOO_SOCKET_IFNAME \
    UCX_NET_DEVICES NCCL_IB_HCA OMPI_MCA_btl_tcp_if_exclude
SHOW='echo "$SLURM_PROCID|${NCCL_SOCKET_IFNAME-unset}|${GLOO_SOCKET_IFNAME-unset}|${UCX_NET_DEVICES-unset}|${OMPI_MCA_btl_tcp_if_include-unset}|${NCCL_IB_HCA-unset}"'

# No network device in the topology (CPUs and memory only): the node's address decides.
spank_plugstack "$SHIPPED" "topology=$FIX/16em64t-4s2c2t.xml"
run_srun -N2 -n4 --ctrain-strategy=ddp --ctrain-bind=verbose sh -c "$SHOW"
ok "$RC" "a CPU-only step over 2 nodes runs"
is "$(printf '%s\n' "$OUT" | cut -d'|' -f2- | sort -u)" "=eth0|eth0|eth0|eth0|unset" \
   "every task of a CPU-only step: NCCL, Gloo, UCX and Open MPI TCP on the interface of the node's address"
is "$(printf '%s\n' "$ERR" | grep -c "ctrain: net: rank [0-3] (node [01]): eth0, UCX eth0: no network device in the topology, so eth0 carries the node's address 198\.1[89]\.[0-9]*\.[12]$")" 4 \
   "--ctrain-bind=verbose says which interface and why, for every task"

# A user's settings are kept, and verbose says so.
NCCL_SOCKET_IFNAME=eth7 GLOO_SOCKET_IFNAME=eth7 run_srun -N1 -n1 --ctrain-strategy=ddp --ctrain-bind=verbose sh -c "$SHOW"
is "$(printf '%s\n' "$OUT" | cut -d'|' -f2-4)" "eth7|eth7|eth0" "a user's NCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME are kept"
like "$ERR" "ctrain: net: rank 0: NCCL_SOCKET_IFNAME kept as set by the user \\(eth7; ctrain's choice: =eth0\\)" \
   "verbose says a user's value was kept over ctrain's choice"
# Open MPI refuses btl_tcp_if_include beside btl_tcp_if_exclude.
OMPI_MCA_btl_tcp_if_exclude=docker0 run_srun -N1 -n1 --ctrain-strategy=ddp sh -c "$SHOW"
is "$(printf '%s\n' "$OUT" | cut -d'|' -f5)" "unset" "a user's OMPI_MCA_btl_tcp_if_exclude: no include list beside it"

# A fabric nearest the task (InfiniBand HCA mlx5_0, its IPoIB ib0 absent on this machine): UCX and
# NCCL use the HCA, the sockets the node's interface, and the reason names ib0.
spank_plugstack "$SHIPPED" "topology=$FIX/32em64t-2n8c2t-pci-wholeio.xml"
run_srun -N2 -n2 --ctrain-strategy=ddp --ctrain-bind=verbose sh -c "$SHOW"
is "$(printf '%s\n' "$OUT" | cut -d'|' -f2- | sort -u)" "=eth0|eth0|mlx5_0:1|eth0|=mlx5_0" \
   "a CPU-only step on an InfiniBand node: UCX_NET_DEVICES and NCCL_IB_HCA name the HCA"
like "$ERR" "fabric mlx5_0; sockets: its interface ib0 is not up with an address here, so eth0 carries" \
   "the reason says why the sockets are not on the HCA's interface"

# The machine's own topology (no topology=): the interface hwloc finds (a PCI NIC) when it is up
# here, else the node's address; never an interface that is down or absent.
spank_plugstack "$SHIPPED" ""
run_srun -N1 -n1 --ctrain-strategy=ddp sh -c "$SHOW"
ifname=$(printf '%s\n' "$OUT" | cut -d'|' -f3)
ok "$([ -n "$ifname" ] && [ "$ifname" != unset ] && ip -o addr show dev "$ifname" up 2>/dev/null | grep -q inet && echo 0 || echo 1)" \
   "this machine's topology: an interface that is up with an address ($ifname)"

# --ctrain-bind=none and a site's bind=none: no placement decisions, network ones included.
run_srun -N1 -n1 --ctrain-strategy=ddp --ctrain-bind=none sh -c "$SHOW"
is "$(printf '%s\n' "$OUT" | cut -d'|' -f2-)" "unset|unset|unset|unset|unset" "--ctrain-bind=none sets no network variable"
# A step without ctrain options gets none (t/42-spank-env checks it is untouched altogether).
run_srun -N1 -n1 sh -c "$SHOW"
is "$(printf '%s\n' "$OUT" | cut -d'|' -f2-)" "unset|unset|unset|unset|unset" "a step without ctrain options gets no network variable"
# The cluster's own Open MPI settings (exported by DIR/env) stay the user's.
OMPI_MCA_btl_tcp_if_include=lo run_srun -N1 -n1 --ctrain-strategy=ddp sh -c "$SHOW"
is "$(printf '%s\n' "$OUT" | cut -d'|' -f5)" "lo" "a user's OMPI_MCA_btl_tcp_if_include is kept"
spank_done
