#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# SLURM's GPU numbers to physical GPUs (include/ctrain/gres.h): gres.conf, the driver's minors, topologies.
CT_TOPOLOGIES="$(dirname "$0")/fixtures/topologies" exec "$(dirname "$0")/../${CTRAIN_BUILD:-build}/t/test_gres"
