/* src/base/hd.h: host/device qualifiers and small portability macros.
 *
 * Headers included by both gcc and nvcc mark their inline functions
 * ADAPT_HD so the same source compiles for CPU loops and CUDA kernels. Such
 * headers stay ISO C11 that is also valid C++ (no designated initialisers,
 * VLAs or statement expressions).
 *
 * ADAPT_HOT_CLONES asks gcc for run-time dispatched copies of a hot loop
 * (AVX-512, AVX2+FMA, baseline) so the default build stays portable (and
 * runs under valgrind) while using the vector units of the machine at hand.
 */
#ifndef ADAPT_BASE_HD_H
#define ADAPT_BASE_HD_H

#if defined(__CUDACC__)
#define ADAPT_HD __host__ __device__
#else
#define ADAPT_HD
#endif

#define ADAPT_INLINE static inline

#if defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__) && \
    (defined(__x86_64__) || defined(__i386__)) && !defined(ADAPT_NO_CLONES) && \
    !defined(ADAPT_NATIVE)
#define ADAPT_HOT_CLONES \
    __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#define ADAPT_HAVE_HOT_CLONES 1
#else
#define ADAPT_HOT_CLONES
#endif

#if defined(__GNUC__)
#define ADAPT_RESTRICT __restrict__
#define ADAPT_LIKELY(x) __builtin_expect(!!(x), 1)
#define ADAPT_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define ADAPT_RESTRICT
#define ADAPT_LIKELY(x) (x)
#define ADAPT_UNLIKELY(x) (x)
#endif

/* Alignment of every tensor allocation, in bytes. */
#define ADAPT_ALIGN 64

#endif
