/* src/quant/grid.c: SIMD kernels for the grid formats (fixed, bfp, muppet) and the range reduction.
 *
 * One plain loop per (rounding mode, mask wanted) around quant_grid_round from
 * src/quant/quant_impl.h, compiled as run-time dispatched clones (ADAPT_HOT_CLONES); the random bits
 * of a piece come from the vector Philox generator first (src/quant/philox.c).
 */
#include <string.h>

#include "src/quant/quant_cpu.h"
#include "src/base/hd.h"

#if defined(__GNUC__)
#define QUANT_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define QUANT_ALWAYS_INLINE inline
#endif

static QUANT_ALWAYS_INLINE void grid_piece(struct quant_grid g, const int mode, const int split,
                                           const int want_mask, const int want_counts,
                                           const float *x, float *y, const uint32_t *r, size_t n,
                                           uint8_t *mask, uint64_t counts[3], uint32_t *tmp)
{
    uint32_t ns = 0, nzx = 0, nzy = 0; /* saturated, nonzero inputs, nonzero outputs */
#pragma omp simd reduction(+ : ns, nzx, nzy)
    for (size_t j = 0; j < n; j++) {
        uint32_t sat;
        float v = x[j];
        float q = quant_grid_round(g, mode, split, v, mode == QUANT_MODE_STOCHASTIC ? r[j] : 0u, &sat);
        y[j] = q;
        if (want_mask) tmp[j] = sat;
        else if (want_counts) ns += sat;
        if (want_counts) {
            nzx += quant_nonzero(v);
            nzy += quant_nonzero(q);
        }
    }
    /* bytes in a loop of their own: mixed with the float work, gcc unrolls to 64 lanes and spills */
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

/* The 24 loop variants: mode (3) x split scale (2) x mask (2) x counters (2). */
static QUANT_ALWAYS_INLINE void grid_dispatch(struct quant_grid g, int mode, const float *x, float *y,
                                              const uint32_t *r, size_t n, uint8_t *mask,
                                              uint64_t *counts, uint32_t *tmp)
{
    const int split = quant_grid_split(g);
#define GRID_CASE(M, S)                                                                        \
    do {                                                                                       \
        if (mask && counts) grid_piece(g, M, S, 1, 1, x, y, r, n, mask, counts, tmp);               \
        else if (mask) grid_piece(g, M, S, 1, 0, x, y, r, n, mask, counts, tmp);                    \
        else if (counts) grid_piece(g, M, S, 0, 1, x, y, r, n, mask, counts, tmp);                  \
        else grid_piece(g, M, S, 0, 0, x, y, r, n, mask, counts, tmp);                              \
    } while (0)
    switch (mode) {
    case QUANT_MODE_STOCHASTIC:
        if (split) GRID_CASE(QUANT_MODE_STOCHASTIC, 1);
        else GRID_CASE(QUANT_MODE_STOCHASTIC, 0);
        break;
    case QUANT_MODE_NEAREST_AWAY:
        if (split) GRID_CASE(QUANT_MODE_NEAREST_AWAY, 1);
        else GRID_CASE(QUANT_MODE_NEAREST_AWAY, 0);
        break;
    default:
        if (split) GRID_CASE(QUANT_MODE_NEAREST_EVEN, 1);
        else GRID_CASE(QUANT_MODE_NEAREST_EVEN, 0);
        break;
    }
#undef GRID_CASE
}

ADAPT_HOT_CLONES void quant_grid_run(const struct quant_plan *p, const float *x, float *y, size_t n,
                                     uint64_t index, uint8_t *mask, uint64_t *counts)
{
    const struct quant_grid g = p->grid;
    uint32_t buf[QUANT_PIECE_BUF] __attribute__((aligned(64)));
    uint32_t tmp[QUANT_PIECE] __attribute__((aligned(64)));
    size_t j = 0;
    while (j < n) { /* pieces aligned in index space: whole Philox blocks, bounded counters */
        uint64_t i = index + j;
        size_t len = QUANT_PIECE - (size_t)(i % QUANT_PIECE);
        if (len > n - j) len = n - j;
        const uint32_t *r = p->mode == QUANT_MODE_STOCHASTIC ? quant_philox_fill(buf, p->seed, p->stream, i, len) : NULL;
        grid_dispatch(g, p->mode, x + j, y + j, r, len, mask ? mask + j : NULL, counts, tmp);
        j += len;
    }
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
