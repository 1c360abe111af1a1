#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The CUDA GPT against the cpu GPT, driven directly (the connector refuses --model gpt --accelerator
# cuda until this passes on a GPU): loss and every gradient in 32-true (1e-4) and bf16-mixed (1e-2)
# with both attention paths, announcement order, determinism, grad norm, clipping, AdamW, the host
# round trip. SKIPs "no CUDA device" where there is none.
exec "$(dirname "$0")/../${CTRAIN_BUILD:-build}/t/gpt_cuda_check"
