#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The CUDA MLP against the cpu implementation (forward, gradients, AdamW, bf16-mixed, 16-mixed) and
# the cuda accelerator's memory stats; every test SKIPs "no CUDA device" where there is none.
exec "$(dirname "$0")/../${CTRAIN_BUILD:-build}/t/cuda_check"
