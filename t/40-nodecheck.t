#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# A node's own checks before a step starts (--ctrain-preflight): GPU device files present, in the
# topology and held by no other process, the fabric's port ACTIVE, the sockets' interface up with
# carrier and an address, the run directory writable, memory free (t/unit/test_nodecheck.c).
exec "$(dirname "$0")/../${CTRAIN_BUILD:-build}/t/test_nodecheck"
