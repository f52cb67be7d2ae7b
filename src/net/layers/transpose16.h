/* src/net/layers/transpose16.h: a 16 x 16 float transpose in sixteen 64-byte vectors (GCC and
 * clang vector extensions; one two-source permute per step, vpermt2ps where AVX-512 is
 * compiled in), for the layers' transposes. */
#ifndef ADAPT_TRANSPOSE16_H
#define ADAPT_TRANSPOSE16_H

typedef float v16 __attribute__((vector_size(64)));
typedef float v16u __attribute__((vector_size(64), aligned(4), may_alias));
typedef int v16i __attribute__((vector_size(64)));

/* Two-source permutes with constant indices: gcc's __builtin_shuffle takes an
 * index vector, clang's __builtin_shufflevector the indices themselves. */
#if defined(__clang__)
#define SHUFFLE2(a, b, ...) __builtin_shufflevector(a, b, __VA_ARGS__)
#else
#define SHUFFLE2(a, b, ...) __builtin_shuffle(a, b, (v16i){__VA_ARGS__})
#endif
/* Stage d of transpose16: rows i and i + d take these lanes of (r[i], r[i + d]). */
#define T16_LO8 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23
#define T16_HI8 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31
#define T16_LO4 0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27
#define T16_HI4 4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31
#define T16_LO2 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29
#define T16_HI2 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31
#define T16_LO1 0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30
#define T16_HI1 1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31
#define T16_STAGE(d, LO, HI)                                                                       \
    _Pragma("GCC unroll 16") for (int i = 0; i < 16; i++) if (!(i & (d)))                          \
    {                                                                                              \
        v16 a = r[i], b = r[i + (d)];                                                              \
        r[i] = SHUFFLE2(a, b, LO);                                                                 \
        r[i + (d)] = SHUFFLE2(a, b, HI);                                                           \
    }

/* Transposes the 16 x 16 block r in place: stage d swaps the off-diagonal
 * d x d sub-blocks of row pairs (i, i + d); after d = 8, 4, 2, 1 row q holds
 * column q. Each step is one two-source permute (vpermt2ps on AVX-512). */
static inline __attribute__((always_inline)) void transpose16(v16 r[16])
{
    T16_STAGE(8, T16_LO8, T16_HI8)
    T16_STAGE(4, T16_LO4, T16_HI4)
    T16_STAGE(2, T16_LO2, T16_HI2)
    T16_STAGE(1, T16_LO1, T16_HI1)
}

#endif
