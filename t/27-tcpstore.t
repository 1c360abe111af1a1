#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The TCPStore server and client (PyTorch's wire protocol) against each other and raw sockets:
# t/unit/test_tcpstore.c. t/28-tcpstore-torch.t checks them against PyTorch 2.6's own.
# What one client can cost is bounded: the handshake deadline, the pending cap, EMFILE, a half-sent
# MULTI_SET (~8 s, most of it the 5 s deadline).
top="$(cd "$(dirname "$0")/.." && pwd -P)"
exec "$top/${CTRAIN_BUILD:-build}/t/test_tcpstore"
