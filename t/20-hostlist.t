#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The unit test compares with the scontrol on PATH and, on a SLURM older than 23.02.5, with the
# Debian 13 root's (SLURM 24.11) when scripts/debian13 setup made one.
top="$(cd "$(dirname "$0")/.." && pwd -P)"
CTRAIN_DEBIAN13_ROOT=${CTRAIN_DEBIAN13_ROOT:-$top/build/debian13}
export CTRAIN_DEBIAN13_ROOT
exec "$top/${CTRAIN_BUILD:-build}/t/test_hostlist"
