/* src/quant/kernels.c: SIMD kernels of the CPU rounding, for the grid formats (fixed, bfp, muppet),
 * the float formats (fp16, bf16, float(e,m), e4m3, e5m2) and the MX block formats, and the range
 * reduction.
 *
 * One plain loop around the pure rounding functions of src/quant/quant_impl.h (quant_grid_round
 * or quant_fmt_round), written once and instantiated per format kind, rounding mode, scale
 * variant (grid: split scale; float: wide) and outputs wanted (mask, counters): each instance
 * is a branch-free loop gcc vectorises. The kernels are compiled as run-time dispatched clones
 * (ADAPT_HOT_CLONES); the random bits of a piece come from the vector Philox generator first
 * (src/quant/philox.c).
 */
#include <string.h>

#include "src/quant/quant_cpu.h"
#include "src/base/hd.h"

#if defined(__GNUC__)
#define QUANT_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define QUANT_ALWAYS_INLINE inline
#endif

/* One piece of at most QUANT_PIECE elements. `kind`, `mode`, `var`, `want_mask` and
 * `want_counts` are constants in every instance, so the unused format and branches vanish. */
static QUANT_ALWAYS_INLINE void piece(const int kind, struct quant_grid g, struct quant_fmt f,
                                      const int mode, const int var, const int want_mask,
                                      const int want_counts, const float *x, float *y,
                                      const uint32_t *r, size_t n, uint8_t *mask,
                                      uint64_t *counts, uint32_t *tmp)
{
    uint32_t ns = 0, nzx = 0, nzy = 0; /* saturated, nonzero inputs, nonzero outputs */
#pragma omp simd reduction(+ : ns, nzx, nzy)
    for (size_t j = 0; j < n; j++) {
        uint32_t sat;
        float v = x[j];
        uint32_t rj = mode == QUANT_MODE_STOCHASTIC ? r[j] : 0u;
        float q = kind == QUANT_KIND_GRID ? quant_grid_round(g, mode, var, v, rj, &sat)
                                          : quant_fmt_round(f, mode, var, v, rj, &sat);
        y[j] = q;
        if (want_mask) tmp[j] = sat;
        else if (want_counts) ns += sat;
        if (want_counts) {
            nzx += quant_nonzero(v);
            nzy += quant_nonzero(q);
        }
    }
    /* bytes in a loop of their own: mixed with the float work, gcc unrolls to 64 lanes and
     * spills */
    if (want_mask) {
#pragma omp simd reduction(+ : ns)
        for (size_t j = 0; j < n; j++) {
            mask[j] = (uint8_t)tmp[j];
            ns += tmp[j];
        }
    }
    if (want_counts) {
        /* a zero input always gives a zero output, so flushed = nonzero in - nonzero out */
        counts[0] += ns;
        counts[1] += nzx - nzy;
        counts[2] += n - nzy;
    }
}

/* The 24 loop variants of one kind: mode (3) x scale variant (2) x mask (2) x counters (2). */
static QUANT_ALWAYS_INLINE void dispatch(const int kind, struct quant_grid g, struct quant_fmt f,
                                         int mode, int var, const float *x, float *y,
                                         const uint32_t *r, size_t n, uint8_t *mask,
                                         uint64_t *counts, uint32_t *tmp)
{
#define KERNEL_CASE(M, V)                                                                       \
    do {                                                                                       \
        if (mask && counts) piece(kind, g, f, M, V, 1, 1, x, y, r, n, mask, counts, tmp);      \
        else if (mask) piece(kind, g, f, M, V, 1, 0, x, y, r, n, mask, counts, tmp);           \
        else if (counts) piece(kind, g, f, M, V, 0, 1, x, y, r, n, mask, counts, tmp);         \
        else piece(kind, g, f, M, V, 0, 0, x, y, r, n, mask, counts, tmp);                     \
    } while (0)
    switch (mode) {
    case QUANT_MODE_STOCHASTIC:
        if (var) KERNEL_CASE(QUANT_MODE_STOCHASTIC, 1);
        else KERNEL_CASE(QUANT_MODE_STOCHASTIC, 0);
        break;
    case QUANT_MODE_NEAREST_AWAY:
        if (var) KERNEL_CASE(QUANT_MODE_NEAREST_AWAY, 1);
        else KERNEL_CASE(QUANT_MODE_NEAREST_AWAY, 0);
        break;
    default:
        if (var) KERNEL_CASE(QUANT_MODE_NEAREST_EVEN, 1);
        else KERNEL_CASE(QUANT_MODE_NEAREST_EVEN, 0);
        break;
    }
#undef KERNEL_CASE
}

/* Rounds x[0..n) (element indices index..index+n) piece by piece: pieces aligned in index space,
 * so each takes whole Philox blocks and its counters stay bounded. */
static QUANT_ALWAYS_INLINE void run(const int kind, const struct quant_plan *p, const float *x,
                                    float *y, size_t n, uint64_t index, uint8_t *mask,
                                    uint64_t *counts)
{
    const int var = kind == QUANT_KIND_GRID ? quant_grid_split(p->grid) : p->fmt.wide;
    uint32_t buf[QUANT_PIECE_BUF] __attribute__((aligned(64)));
    uint32_t tmp[QUANT_PIECE] __attribute__((aligned(64)));
    size_t j = 0;
    while (j < n) {
        uint64_t i = index + j;
        size_t len = QUANT_PIECE - (size_t)(i % QUANT_PIECE);
        if (len > n - j) len = n - j;
        const uint32_t *r = p->mode == QUANT_MODE_STOCHASTIC
                                ? quant_sr_fill(buf, p, i, len)
                                : NULL;
        dispatch(kind, p->grid, p->fmt, p->mode, var, x + j, y + j, r, len,
                 mask ? mask + j : NULL, counts, tmp);
        j += len;
    }
}

ADAPT_HOT_CLONES void quant_grid_run(const struct quant_plan *p, const float *x, float *y,
                                     size_t n, uint64_t index, uint8_t *mask, uint64_t *counts)
{
    run(QUANT_KIND_GRID, p, x, y, n, index, mask, counts);
}

ADAPT_HOT_CLONES void quant_fmt_run(const struct quant_plan *p, const float *x, float *y,
                                    size_t n, uint64_t index, uint8_t *mask, uint64_t *counts)
{
    run(QUANT_KIND_FMT, p, x, y, n, index, mask, counts);
}

/* ---- MX block formats ---- */

/* One block of n <= QUANT_MX_BLOCK elements rounded with scale exponent s (up = 2^-s, down =
 * 2^s); sat[j] = 1 where the element was clamped. */
static QUANT_ALWAYS_INLINE void mx_block_scaled(const struct quant_plan *p, const int mode,
                                                const int integer, const float *x, float *y,
                                                const uint32_t *r, size_t n, uint32_t *sat, int s,
                                                float up, float down)
{
    if (integer) {
        const struct quant_grid g = quant_mx_int_grid(s);
#pragma omp simd
        for (size_t j = 0; j < n; j++)
            y[j] = quant_grid_round(g, mode, 1, x[j], mode == QUANT_MODE_STOCHASTIC ? r[j] : 0u,
                                    &sat[j]);
    } else {
        const struct quant_fmt f = p->fmt;
#pragma omp simd
        for (size_t j = 0; j < n; j++)
            y[j] = quant_fmt_round(f, mode, 0, x[j] * up, mode == QUANT_MODE_STOCHASTIC ? r[j] : 0u,
                                   &sat[j]) *
                   down;
    }
}

/* One block of n <= QUANT_MX_BLOCK elements: its scale from the largest magnitude, then every
 * element rounded in the element type. */
static QUANT_ALWAYS_INLINE void mx_block(const struct quant_plan *p, const int mode,
                                         const int integer, const float *x, float *y,
                                         const uint32_t *r, size_t n, uint32_t *sat)
{
    uint32_t amax = 0u;
#pragma omp simd reduction(max : amax)
    for (size_t j = 0; j < n; j++) {
        uint32_t a = quant_f2u(x[j]) & 0x7fffffffu;
        amax = a > amax ? a : amax;
    }
    if (amax >= 0x7f800000u) { /* inf or NaN: the scale is NaN */
        for (size_t j = 0; j < n; j++) y[j] = quant_mx_poison(x[j], &sat[j]);
        return;
    }
    const int s = quant_mx_scale(amax, p->mx.emax);
    mx_block_scaled(p, mode, integer, x, y, r, n, sat, s, quant_pow2f(-s), quant_pow2f(s));
}

/* Sixteen whole blocks (512 elements) at once: each block's two vectors of magnitudes folded
 * into one, then a tree of two-source permutes (four stages, as a 16 x 16 transpose, with a
 * max at each) leaves block b's largest magnitude in lane b, and the sixteen scales come from
 * one vector loop; the blocks are then rounded as mx_block does. The same values as sixteen
 * mx_block calls, without a horizontal reduction and a scalar scale a block. */
typedef uint32_t mxu16 __attribute__((vector_size(64)));
typedef uint32_t mxu16u __attribute__((vector_size(64), aligned(4), may_alias));
typedef int32_t mxi16 __attribute__((vector_size(64)));
#if defined(__clang__)
#define MX_SHUF(a, b, ...) __builtin_shufflevector(a, b, __VA_ARGS__)
#else
#define MX_SHUF(a, b, ...) __builtin_shuffle(a, b, (mxi16){__VA_ARGS__})
#endif
#define MX_LO8 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23
#define MX_HI8 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31
#define MX_LO4 0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27
#define MX_HI4 4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31
#define MX_LO2 0, 1, 4, 5, 8, 9, 12, 13, 16, 17, 20, 21, 24, 25, 28, 29
#define MX_HI2 2, 3, 6, 7, 10, 11, 14, 15, 18, 19, 22, 23, 26, 27, 30, 31
#define MX_LO1 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30
#define MX_HI1 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31

/* the lane-wise max of unsigned vectors a and b (variables): a where a > b (all ones), else b */
#define MX_UMAX(a, b) (((a) & (mxu16)((a) > (b))) | ((b) & ~(mxu16)((a) > (b))))

/* Vectors i and i + 1 of w (each holding lanes of two groups of blocks) folded into vector i / 2:
 * lanes LO and HI of the pair, their max. */
#define MX_FOLD(nv, LO, HI)                                                                        \
    _Pragma("GCC unroll 8") for (int i = 0; i < (nv); i += 2)                                      \
    {                                                                                              \
        mxu16 a = w[i], b = w[i + 1];                                                              \
        mxu16 lo = MX_SHUF(a, b, LO), hi = MX_SHUF(a, b, HI);                                      \
        w[i / 2] = MX_UMAX(lo, hi);                                                                \
    }

static QUANT_ALWAYS_INLINE void mx_block16(const struct quant_plan *p, const int mode,
                                           const int integer, const float *x, float *y,
                                           const uint32_t *r, uint32_t *sat)
{
    const mxu16 abs = (mxu16){0} + 0x7fffffffu;
    mxu16 w[16];
#pragma GCC unroll 16
    for (int b = 0; b < 16; b++) {
        mxu16 lo = *(const mxu16u *)(x + 32 * b) & abs,
              hi = *(const mxu16u *)(x + 32 * b + 16) & abs;
        w[b] = MX_UMAX(lo, hi);
    }
    MX_FOLD(16, MX_LO8, MX_HI8) /* 8 vectors: blocks 2v, 2v + 1 in 8 lanes each */
    MX_FOLD(8, MX_LO4, MX_HI4)  /* 4 vectors: four blocks in 4 lanes each */
    MX_FOLD(4, MX_LO2, MX_HI2)  /* 2 vectors: eight blocks in 2 lanes each */
    MX_FOLD(2, MX_LO1, MX_HI1)  /* lane b: block b */
    uint32_t am[16] __attribute__((aligned(64)));
    int sc[16] __attribute__((aligned(64)));
    float up[16] __attribute__((aligned(64))), down[16] __attribute__((aligned(64)));
    *(mxu16u *)am = w[0];
    const int emax = p->mx.emax;
#pragma omp simd
    for (int b = 0; b < 16; b++) {
        const int s = quant_mx_scale(am[b], emax);
        sc[b] = s;
        up[b] = quant_pow2f(-s);
        down[b] = quant_pow2f(s);
    }
    for (int b = 0; b < 16; b++) {
        const size_t o = 32 * (size_t)b;
        if (am[b] >= 0x7f800000u) { /* inf or NaN: the scale is NaN */
            for (size_t j = 0; j < QUANT_MX_BLOCK; j++)
                y[o + j] = quant_mx_poison(x[o + j], &sat[o + j]);
            continue;
        }
        mx_block_scaled(p, mode, integer, x + o, y + o, r ? r + o : NULL, QUANT_MX_BLOCK, sat + o,
                        sc[b], up[b], down[b]);
    }
}

/* One row segment that starts at a block boundary, piece by piece (whole blocks per piece),
 * blocks of bl elements. */
static QUANT_ALWAYS_INLINE void mx_run(const struct quant_plan *p, const int mode,
                                       const int integer, const float *x, float *y, size_t n,
                                       uint64_t index, uint8_t *mask, uint64_t *counts, size_t bl)
{
    uint32_t buf[QUANT_PIECE_BUF] __attribute__((aligned(64)));
    uint32_t sat[QUANT_PIECE] __attribute__((aligned(64)));
    uint32_t nzin[QUANT_PIECE] __attribute__((aligned(64))); /* inputs: x may be y */
    const size_t step = QUANT_PIECE - QUANT_PIECE % bl;
    for (size_t j = 0; j < n; j += step) {
        size_t len = n - j < step ? n - j : step;
        if (counts) {
#pragma omp simd
            for (size_t k = 0; k < len; k++) nzin[k] = quant_nonzero(x[j + k]);
        }
        const uint32_t *r = mode == QUANT_MODE_STOCHASTIC
                                ? quant_sr_fill(buf, p, index + j, len)
                                : NULL;
        size_t b = 0;
        if (bl == QUANT_MX_BLOCK) {
            /* sixteen whole blocks at once, then whole blocks one at a time with their length
             * a constant (two vectors) */
            for (; b + 16 * QUANT_MX_BLOCK <= len; b += 16 * QUANT_MX_BLOCK)
                mx_block16(p, mode, integer, x + j + b, y + j + b, r ? r + b : NULL, sat + b);
            for (; b + QUANT_MX_BLOCK <= len; b += QUANT_MX_BLOCK)
                mx_block(p, mode, integer, x + j + b, y + j + b, r ? r + b : NULL, QUANT_MX_BLOCK,
                         sat + b);
        }
        for (; b < len; b += bl)
            mx_block(p, mode, integer, x + j + b, y + j + b, r ? r + b : NULL,
                     len - b < bl ? len - b : bl, sat + b);
        if (mask) {
#pragma omp simd
            for (size_t k = 0; k < len; k++) mask[j + k] = (uint8_t)sat[k];
        }
        if (counts) {
            uint32_t ns = 0, nf = 0, nzy = 0; /* a NaN block turns zeros into NaN: count */
#pragma omp simd reduction(+ : ns, nf, nzy)
            for (size_t k = 0; k < len; k++) { /* the flushed values one by one */
                uint32_t nzo = quant_nonzero(y[j + k]);
                ns += sat[k];
                nf += nzin[k] & (nzo ^ 1u);
                nzy += nzo;
            }
            counts[0] += ns;
            counts[1] += nf;
            counts[2] += len - nzy;
        }
    }
}

ADAPT_HOT_CLONES void quant_mx_run(const struct quant_plan *p, const float *x, float *y, size_t n,
                                   uint64_t index, uint8_t *mask, uint64_t *counts, size_t bl)
{
#define MX_CASE(M)                                                                                 \
    do {                                                                                           \
        if (p->mx.integer)                                                                         \
            mx_run(p, M, 1, x, y, n, index, mask, counts, bl);                                     \
        else                                                                                       \
            mx_run(p, M, 0, x, y, n, index, mask, counts, bl);                                     \
    } while (0)
    ADAPT_ASSERT(bl >= 1 && bl <= QUANT_MX_BLOCK);
    switch (p->mode) {
    case QUANT_MODE_STOCHASTIC: MX_CASE(QUANT_MODE_STOCHASTIC); break;
    case QUANT_MODE_NEAREST_AWAY: MX_CASE(QUANT_MODE_NEAREST_AWAY); break;
    default: MX_CASE(QUANT_MODE_NEAREST_EVEN); break;
    }
#undef MX_CASE
}

/* MX blocks down columns [c0, c0 + nc) (nc <= QUANT_MX_LANES) of a row-major (R, C) matrix:
 * blocks of QUANT_MX_BLOCK rows of one column, restarting at every column, element (r, c)
 * random-bit index index + c R + r: mx_block over the transpose, the columns in SIMD lanes.
 * A panel is 64 columns, four 512-bit vectors (256 bytes) per row: each strided row read
 * brings whole adjacent cache lines, which cost less per element than 16 columns did. */
static QUANT_ALWAYS_INLINE void mx_panel(const struct quant_plan *p, const int mode,
                                         const int integer, const int want_counts,
                                         const float *x, float *y, size_t R,
                                         size_t C, size_t c0, size_t nc, uint64_t index,
                                         uint64_t *nsp, uint64_t *nfp, uint64_t *nzp, uint32_t *buf,
                                         uint32_t (*rb)[QUANT_MX_LANES])
{
    uint64_t ns = 0, nf = 0, nz = 0;
    const struct quant_fmt f = p->fmt;
    for (size_t r0 = 0; r0 < R; r0 += QUANT_MX_BLOCK) {
        const size_t n = R - r0 < QUANT_MX_BLOCK ? R - r0 : QUANT_MX_BLOCK;
        uint32_t amax[QUANT_MX_LANES] = {0};
        for (size_t i = 0; i < n; i++) {
            const float *xr = x + (r0 + i) * C + c0;
#pragma omp simd
            for (size_t j = 0; j < nc; j++) {
                uint32_t a = quant_f2u(xr[j]) & 0x7fffffffu;
                amax[j] = a > amax[j] ? a : amax[j];
            }
        }
        int sc[QUANT_MX_LANES];
        float up[QUANT_MX_LANES], down[QUANT_MX_LANES];
        uint32_t bad[QUANT_MX_LANES];
        const int emax = p->mx.emax;
#pragma omp simd
        for (size_t j = 0; j < nc; j++) {
            const uint32_t b = amax[j] >= 0x7f800000u; /* inf or NaN: the block's scale is NaN */
            const int s = quant_mx_scale(amax[j], emax);
            bad[j] = b;
            sc[j] = b ? 0 : s;
        }
#pragma omp simd
        for (size_t j = 0; j < nc; j++) {
            up[j] = quant_pow2f(-sc[j]);
            down[j] = quant_pow2f(sc[j]);
        }
        if (mode == QUANT_MODE_STOCHASTIC) {
            const uint64_t i0 = index + c0 * R + r0; /* bits of (r0, c0) */
            if ((nc - 1) * R + n <= QUANT_PIECE) {   /* short columns: one run of bits for all */
                const uint32_t *r = quant_sr_fill(buf, p, i0, (nc - 1) * R + n);
                for (size_t j = 0; j < nc; j++)
                    for (size_t i = 0; i < n; i++) rb[i][j] = r[j * R + i];
            } else
                for (size_t j = 0; j < nc; j++) {
                    const uint32_t *r = quant_sr_fill(buf, p, i0 + j * R, n);
                    for (size_t i = 0; i < n; i++) rb[i][j] = r[i];
                }
        }
        /* counts per lane, summed once a block: no horizontal sums per row */
        uint32_t cs[QUANT_MX_LANES] = {0}, cf[QUANT_MX_LANES] = {0}, cz[QUANT_MX_LANES] = {0};
        for (size_t i = 0; i < n; i++) {
            const float *xr = x + (r0 + i) * C + c0;
            float *yr = y + (r0 + i) * C + c0;
#pragma omp simd
            for (size_t j = 0; j < nc; j++) {
                const float v = xr[j];
                const uint32_t u = mode == QUANT_MODE_STOCHASTIC ? rb[i][j] : 0u;
                uint32_t sat, satp;
                float q = integer ? quant_grid_round(quant_mx_int_grid(sc[j]), mode, 1, v, u, &sat)
                                  : quant_fmt_round(f, mode, 0, v * up[j], u, &sat) * down[j];
                const float qp = quant_mx_poison(v, &satp);
                q = bad[j] ? qp : q;
                sat = bad[j] ? satp : sat;
                yr[j] = q;
                if (want_counts) {
                    const uint32_t nzo = quant_nonzero(q);
                    cs[j] += sat;
                    cf[j] += quant_nonzero(v) & (nzo ^ 1u);
                    cz[j] += nzo ^ 1u;
                }
            }
        }
        if (!want_counts) continue;
        uint32_t s1 = 0, f1 = 0, z1 = 0;
#pragma omp simd reduction(+ : s1, f1, z1)
        for (size_t j = 0; j < nc; j++) s1 += cs[j], f1 += cf[j], z1 += cz[j];
        ns += s1, nf += f1, nz += z1;
    }
    *nsp += ns, *nfp += nf, *nzp += nz;
}

/* Columns [c0, c1): whole panels with their width a constant (every lane loop one vector), then
 * the last, narrower one. */
static QUANT_ALWAYS_INLINE void mx_cols(const struct quant_plan *p, const int mode,
                                        const int integer, const int want_counts,
                                        const float *x, float *y, size_t R,
                                        size_t C, size_t c0, size_t c1, uint64_t index,
                                        uint64_t *counts)
{
    uint32_t buf[QUANT_PIECE_BUF] __attribute__((aligned(64)));
    uint32_t rb[QUANT_MX_BLOCK][QUANT_MX_LANES] __attribute__((aligned(64)));
    uint64_t ns = 0, nf = 0, nz = 0;
    size_t c = c0;
    for (; c + QUANT_MX_LANES <= c1; c += QUANT_MX_LANES)
        mx_panel(p, mode, integer, want_counts, x, y, R, C, c, QUANT_MX_LANES, index, &ns, &nf,
                 &nz, buf, rb);
    if (c < c1)
        mx_panel(p, mode, integer, want_counts, x, y, R, C, c, c1 - c, index, &ns, &nf, &nz, buf,
                 rb);
    if (want_counts) {
        counts[0] += ns;
        counts[1] += nf;
        counts[2] += nz;
    }
}

ADAPT_HOT_CLONES void quant_mx_cols(const struct quant_plan *p, const float *x, float *y, size_t R,
                                    size_t C, size_t c0, size_t c1, uint64_t index,
                                    uint64_t *counts)
{
    ADAPT_ASSERT(c0 < c1 && c1 <= C);
#define MX_COLS_CASE(M)                                                                            \
    do {                                                                                           \
        if (p->mx.integer && counts) mx_cols(p, M, 1, 1, x, y, R, C, c0, c1, index, counts);       \
        else if (p->mx.integer) mx_cols(p, M, 1, 0, x, y, R, C, c0, c1, index, counts);            \
        else if (counts) mx_cols(p, M, 0, 1, x, y, R, C, c0, c1, index, counts);                   \
        else mx_cols(p, M, 0, 0, x, y, R, C, c0, c1, index, counts);                               \
    } while (0)
    switch (p->mode) {
    case QUANT_MODE_STOCHASTIC: MX_COLS_CASE(QUANT_MODE_STOCHASTIC); break;
    case QUANT_MODE_NEAREST_AWAY: MX_COLS_CASE(QUANT_MODE_NEAREST_AWAY); break;
    default: MX_COLS_CASE(QUANT_MODE_NEAREST_EVEN); break;
    }
#undef MX_COLS_CASE
}

ADAPT_HOT_CLONES void quant_range_keys(const float *x, size_t n, uint32_t k[2])
{
    uint32_t kmax = k[0], kmin = k[1];
#pragma omp simd reduction(max : kmax) reduction(min : kmin)
    for (size_t j = 0; j < n; j++) {
        uint32_t b = quant_f2u(x[j]);
        int fin = (b & 0x7fffffffu) < 0x7f800000u;
        uint32_t key = quant_order_key(b);
        uint32_t a = fin ? key : 0u;
        uint32_t c = fin ? key : 0xffffffffu;
        kmax = a > kmax ? a : kmax;
        kmin = c < kmin ? c : kmin;
    }
    k[0] = kmax;
    k[1] = kmin;
}
