/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain — what this CPU can compute in hardware, read from the CPU itself (cpuid on x86-64, the
 * kernel's hardware capabilities on aarch64), never from an environment variable (internal to
 * libctrain-core: the connector's plan-time notices). */
#ifndef CTRAIN_UTIL_CPU_H
#define CTRAIN_UTIL_CPU_H

/* Whether the CPU multiplies bf16 in hardware and the kernel lets programs use it: x86-64
 * AVX512-BF16 (with AVX-512 state enabled in XCR0) or AMX-BF16 (with tile state enabled);
 * aarch64 the BF16 extension (HWCAP2_BF16). 1 yes, 0 no, -1 where it cannot tell (another
 * architecture). Without it the engine keeps bf16 storage and computes the products in fp32. */
int ct_cpu_bf16_instructions(void);

/* Whether the CPU has AVX-512 (AVX512F) and the kernel saves its state (XCR0): 1 yes, 0 no (an
 * x86-64 CPU without it: AVX2 and older, e.g. AMD before Zen 4), -1 another architecture. Read
 * with cpuid, as oneDNN and OpenBLAS read it for their kernels (a CPU model such as
 * `qemu-x86_64 -cpu Haswell` hides it from all three alike). */
int ct_cpu_avx512(void);

/* Those instructions' names on this architecture, for messages. */
#if defined(__x86_64__) || defined(__i386__)
#define CT_CPU_BF16_ISA "AVX512-BF16 or AMX-BF16"
#elif defined(__aarch64__)
#define CT_CPU_BF16_ISA "the Arm BF16 extension"
#else
#define CT_CPU_BF16_ISA "bf16 instructions"
#endif

#endif
