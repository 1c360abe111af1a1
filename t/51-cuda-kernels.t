#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The CUDA MLP against the cpu implementation (forward, gradients, AdamW, bf16-mixed, 16-mixed) and
# the cuda accelerator's memory stats; every test SKIPs "no CUDA device" where there is none.
# CTRAIN_BUILD: a build folder, relative to the checkout or absolute (scripts/gpu-check: the GPU kit's).
case "${CTRAIN_BUILD:-build}" in
    /*) exec "$CTRAIN_BUILD/t/cuda_check" ;;
    *) exec "$(dirname "$0")/../${CTRAIN_BUILD:-build}/t/cuda_check" ;;
esac
