#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
exec "$(dirname "$0")/../${CTRAIN_BUILD:-build}/t/test_gpt_cuda"
