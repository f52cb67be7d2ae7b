/* src/net/layers/gemm.c: a single-threaded matrix product for the convolution
 * kernels, C (M x N) = A (M x K) B (K x N) (+ C or + a bias per row), that
 * reads A element by element through arbitrary strides and B, C by rows of
 * 16 floats. No operand is packed: A's elements are broadcast (so A may be
 * a transposed weight or a strided slice), B's rows are streamed as vectors.
 *
 * Why not OpenBLAS here: in a convolution one operand is small (the weight,
 * or one sample's output gradient) and the other is one sample's im2col
 * matrix, which fits the core's L2 cache. A packed GEMM copies that large
 * operand once more and, with M = 16..64 rows, spends as long packing as
 * computing; this kernel reaches about 200 GFLOP/s on one AVX-512 core for
 * those shapes, where OpenBLAS 0.3.21 gives about 100.
 *
 * Register tile: MR rows x 32 columns (24 accumulators for MR = 12) or
 * MR x 16 (MR <= 24) where the AVX-512 clones run, MR x 16 with MR <= 6 in
 * 8-float vectors elsewhere (adapt_gemm_bcast), written with GCC vector extensions so the
 * AVX-512, AVX2 and baseline clones (ADAPT_HOT_CLONES) come from one source. */
#include <stddef.h>

#include "src/base/hd.h"
#include "src/net/layers/layers_impl.h"

typedef float v16 __attribute__((vector_size(64)));
typedef float v16u __attribute__((vector_size(64), aligned(4), may_alias));

#define UK_ARGS                                                                                \
    int K, const float *ADAPT_RESTRICT A, ptrdiff_t ars, ptrdiff_t acs,                        \
        const float *ADAPT_RESTRICT B, ptrdiff_t ldb, float *ADAPT_RESTRICT C, ptrdiff_t ldc, \
        int init, const float *bias

/* The register tile: MR and NV are constants after inlining. */
static inline __attribute__((always_inline)) void uk_body(const int MR, const int NV, UK_ARGS)
{
    v16 c[24][2];
#pragma GCC unroll 24
    for (int i = 0; i < MR; i++)
#pragma GCC unroll 2
        for (int v = 0; v < NV; v++) {
            if (init == ADAPT_GEMM_ACC)
                c[i][v] = *(const v16u *)(C + i * ldc + 16 * v);
            else if (init == ADAPT_GEMM_BIAS)
                c[i][v] = (v16){0} + bias[i];
            else
                c[i][v] = (v16){0};
        }
    for (int k = 0; k < K; k++) {
        v16 b[2];
#pragma GCC unroll 2
        for (int v = 0; v < NV; v++) b[v] = *(const v16u *)(B + k * ldb + 16 * v);
        const float *a = A + k * acs;
#pragma GCC unroll 24
        for (int i = 0; i < MR; i++) {
            const float ai = a[i * ars];
#pragma GCC unroll 2
            for (int v = 0; v < NV; v++) c[i][v] += ai * b[v];
        }
    }
#pragma GCC unroll 24
    for (int i = 0; i < MR; i++)
#pragma GCC unroll 2
        for (int v = 0; v < NV; v++) *(v16u *)(C + i * ldc + 16 * v) = c[i][v];
}

typedef void (*uk_fn)(UK_ARGS);

#define UK(MR, NV)                                                                      \
    ADAPT_HOT_CLONES __attribute__((noinline)) static void uk_##MR##x##NV(UK_ARGS)      \
    {                                                                                   \
        uk_body(MR, NV, K, A, ars, acs, B, ldb, C, ldc, init, bias);                    \
    }

UK(1, 2) UK(2, 2) UK(3, 2) UK(4, 2) UK(5, 2) UK(6, 2) UK(7, 2) UK(8, 2) UK(9, 2) UK(10, 2)
UK(11, 2) UK(12, 2)
UK(1, 1) UK(2, 1) UK(3, 1) UK(4, 1) UK(5, 1) UK(6, 1) UK(7, 1) UK(8, 1) UK(9, 1) UK(10, 1)
UK(11, 1) UK(12, 1) UK(13, 1) UK(14, 1) UK(15, 1) UK(16, 1) UK(17, 1) UK(18, 1) UK(19, 1)
UK(20, 1) UK(21, 1) UK(22, 1) UK(23, 1) UK(24, 1)

/* Without AVX-512 the tile is kept in 8-float vectors: gcc lowers an array of 16-float
 * vectors to pairs of AVX2 registers only outside loops, and spills the accumulators to the
 * stack on every k (about 6 GFLOP/s instead of 60 on one Zen 2 core). MR <= 6 rows of 16
 * columns: 12 accumulators, 2 rows of B and a broadcast fill 15 of AVX2's 16 registers. */
typedef float v8 __attribute__((vector_size(32)));
typedef float v8u __attribute__((vector_size(32), aligned(4), may_alias));

static inline __attribute__((always_inline)) void uk8_body(const int MR, UK_ARGS)
{
    v8 c[6][2];
#pragma GCC unroll 6
    for (int i = 0; i < MR; i++)
#pragma GCC unroll 2
        for (int v = 0; v < 2; v++) {
            if (init == ADAPT_GEMM_ACC)
                c[i][v] = *(const v8u *)(C + i * ldc + 8 * v);
            else if (init == ADAPT_GEMM_BIAS)
                c[i][v] = (v8){0} + bias[i];
            else
                c[i][v] = (v8){0};
        }
    for (int k = 0; k < K; k++) {
        const v8 b0 = *(const v8u *)(B + k * ldb), b1 = *(const v8u *)(B + k * ldb + 8);
        const float *a = A + k * acs;
#pragma GCC unroll 6
        for (int i = 0; i < MR; i++) {
            const float ai = a[i * ars];
            c[i][0] += ai * b0;
            c[i][1] += ai * b1;
        }
    }
#pragma GCC unroll 6
    for (int i = 0; i < MR; i++)
#pragma GCC unroll 2
        for (int v = 0; v < 2; v++) *(v8u *)(C + i * ldc + 8 * v) = c[i][v];
}

#define UK8(MR)                                                                         \
    ADAPT_HOT_CLONES __attribute__((noinline)) static void uk8_##MR(UK_ARGS)            \
    {                                                                                   \
        uk8_body(MR, K, A, ars, acs, B, ldb, C, ldc, init, bias);                       \
    }

UK8(1) UK8(2) UK8(3) UK8(4) UK8(5) UK8(6)

static const uk_fn uk8[7] = {NULL, uk8_1, uk8_2, uk8_3, uk8_4, uk8_5, uk8_6};

static const uk_fn uk2[13] = {NULL,    uk_1x2, uk_2x2, uk_3x2, uk_4x2,  uk_5x2, uk_6x2,
                              uk_7x2,  uk_8x2, uk_9x2, uk_10x2, uk_11x2, uk_12x2};
static const uk_fn uk1[25] = {NULL,     uk_1x1,  uk_2x1,  uk_3x1,  uk_4x1,  uk_5x1,  uk_6x1,
                              uk_7x1,   uk_8x1,  uk_9x1,  uk_10x1, uk_11x1, uk_12x1, uk_13x1,
                              uk_14x1,  uk_15x1, uk_16x1, uk_17x1, uk_18x1, uk_19x1, uk_20x1,
                              uk_21x1,  uk_22x1, uk_23x1, uk_24x1};

/* Splits m rows into blocks of at most cap, as even as possible. */
static int row_block(int m, int cap)
{
    int nb = (m + cap - 1) / cap;
    return (m + nb - 1) / nb;
}

/* Operands up to this many floats are taken to stay in the core's L2
 * cache (1 MiB of the 2 MiB here) when re-read. */
#define GEMM_L2_FLOATS (256u << 10)

static void tile(int i, int j, int mr, int nv, int K, const float *A, ptrdiff_t ars,
                 ptrdiff_t acs, const float *B, ptrdiff_t ldb, float *C, ptrdiff_t ldc, int init,
                 const float *bias)
{
    (nv == 2 ? uk2 : nv == 1 ? uk1 : uk8)[mr](K, A + i * ars, ars, acs, B + j, ldb, C + i * ldc + j, ldc, init,
                              bias ? bias + i : NULL);
}

/* 1 when the AVX-512 clones run: 24 accumulators of 16 floats then fit the
 * 32 vector registers. With AVX2 (16 registers of 8 floats) or less the same
 * tiles spill to the stack; 6 rows x 16 columns (12 AVX2 registers) do not.
 * Mirrors the clone selection of ADAPT_HOT_CLONES (x86-64-v4). */
static int gemm_wide_tiles(void)
{
#if defined(__x86_64__) && defined(__GNUC__)
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
#else
    return 0;
#endif
}

/* The tile shape changes which elements of C are computed together, never
 * the order in which one element sums over k: results are the same bits for
 * every tile shape. */
void adapt_gemm_bcast(int M, int N, int K, const float *A, ptrdiff_t ars, ptrdiff_t acs,
                      const float *B, ptrdiff_t ldb, float *C, ptrdiff_t ldc, int init,
                      const float *bias)
{
    ADAPT_ASSERT(N % 16 == 0 && M > 0 && K > 0);
    const int wide = gemm_wide_tiles();
    /* nv: 16-float vectors per tile row (0: 16 columns in 8-float vectors) */
    const int nv = wide ? 2 : 0, cols = wide ? 32 : 16;
    const int mrt = row_block(M, wide ? 12 : 6), mr1 = row_block(M, wide ? 24 : 6);
    const int nt = N / cols * cols;
    /* Column blocks outside re-read A once per tile of columns; row blocks
     * outside re-read B once per block of rows. Re-reading from L2 is cheap,
     * from memory it is not: go row blocks outside when only B fits L2. */
    const size_t asz = (size_t)M * K, bsz = (size_t)K * N;
    const int rows_outside = asz > GEMM_L2_FLOATS && bsz <= GEMM_L2_FLOATS && N > cols;
    if (rows_outside) {
        for (int i = 0; i < M; i += mrt) {
            int mr = M - i < mrt ? M - i : mrt;
            for (int j = 0; j < nt; j += cols)
                tile(i, j, mr, nv, K, A, ars, acs, B, ldb, C, ldc, init, bias);
        }
    } else {
        for (int j = 0; j < nt; j += cols)
            for (int i = 0; i < M; i += mrt) {
                int mr = M - i < mrt ? M - i : mrt;
                tile(i, j, mr, nv, K, A, ars, acs, B, ldb, C, ldc, init, bias);
            }
    }
    if (nt < N) /* wide tiles: the last 16 columns */
        for (int i = 0; i < M; i += mr1) {
            int mr = M - i < mr1 ? M - i : mr1;
            tile(i, nt, mr, wide ? 1 : 0, K, A, ars, acs, B, ldb, C, ldc, init, bias);
        }
}
