/* SPDX-License-Identifier: BSD-3-Clause */
/* The CPU's own answer to what it computes in hardware; see cpu.h. */
#include "engine/util/cpu.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <stddef.h>
#include <stdint.h>

/* XCR0, the state components the OS saves (0 when it does not use XSAVE: none of AVX's). */
static uint64_t xcr0(void)
{
    unsigned a, b, c, d;
    uint32_t lo, hi;

    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_OSXSAVE))
        return 0;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

int ct_cpu_avx512(void)
{
    /* XCR0: SSE and AVX (bits 1-2), AVX-512's opmask and upper registers (5-7) */
    const uint64_t avx512_state = 0xe6;
    unsigned a, b, c, d;

    if (__get_cpuid_max(0, NULL) < 7)
        return 0;
    __cpuid_count(7, 0, a, b, c, d);
    return ((b >> 16) & 1) && (xcr0() & avx512_state) == avx512_state;   /* CPUID.(7,0):EBX[16] AVX512F */
}

int ct_cpu_bf16_instructions(void)
{
    /* XCR0: SSE and AVX (bits 1-2), AVX-512's opmask and upper registers (5-7), AMX's tiles (17-18). */
    const uint64_t avx512_state = 0xe6, amx_state = 0x60000;
    unsigned a, b, c, d, max = __get_cpuid_max(0, NULL), avx512_bf16 = 0, amx_bf16 = 0;
    uint64_t x = xcr0();

    if (max < 7)
        return 0;
    __cpuid_count(7, 0, a, b, c, d);
    amx_bf16 = (d >> 22) & 1;           /* CPUID.(7,0):EDX[22] AMX-BF16 */
    if ((b >> 16) & 1 && a >= 1) {      /* AVX512F, and leaf 7 has sub-leaf 1 */
        __cpuid_count(7, 1, a, b, c, d);
        avx512_bf16 = (a >> 5) & 1;     /* CPUID.(7,1):EAX[5] AVX512_BF16 */
    }
    return (avx512_bf16 && (x & avx512_state) == avx512_state) || (amx_bf16 && (x & amx_state) == amx_state);
}

#elif defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>

#ifndef HWCAP2_BF16
#define HWCAP2_BF16 (1UL << 14)
#endif

int ct_cpu_bf16_instructions(void)
{
    return (getauxval(AT_HWCAP2) & HWCAP2_BF16) != 0;
}

int ct_cpu_avx512(void)
{
    return -1;
}

#else

int ct_cpu_bf16_instructions(void)
{
    return -1;
}

int ct_cpu_avx512(void)
{
    return -1;
}

#endif
