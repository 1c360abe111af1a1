#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
CT_TOPOLOGIES="$(dirname "$0")/fixtures/topologies" exec "$(dirname "$0")/../${CTRAIN_BUILD:-build}/t/test_bind"
