#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The TCPStore server and client (PyTorch's wire protocol) against each other and raw sockets:
# t/unit/test_tcpstore.c. t/28-tcpstore-torch.t checks them against PyTorch 2.6's own.
top="$(cd "$(dirname "$0")/.." && pwd -P)"
exec "$top/${CTRAIN_BUILD:-build}/t/test_tcpstore"
