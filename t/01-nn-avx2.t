#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# engine/nn's unit tests (t/01-nn.t) again with oneDNN held to AVX2: no bf16 matmul there, so
# ct_gemm's bf16 products run widened to fp32 (oneDNN's fp32 matmul) and must agree just the same.
# DNNL_MAX_CPU_ISA is oneDNN 2's variable (Debian 12), ONEDNN_MAX_CPU_ISA oneDNN 3's.
DNNL_MAX_CPU_ISA=AVX2 ONEDNN_MAX_CPU_ISA=AVX2 exec "$(dirname "$0")/../${CTRAIN_BUILD:-build}/t/test_nn"
