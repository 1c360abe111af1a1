#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Memory pages measured and moved: the pool fsdp's released units trade pages through
# (t/unit/test_pages.c).
exec "$(dirname "$0")/../${CTRAIN_BUILD:-build}/t/test_pages"
