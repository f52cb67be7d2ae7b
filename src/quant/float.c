/* src/quant/float.c: SIMD kernels for the float formats (fp16, bf16, float(e,m)).
 *
 * One plain loop per (rounding mode, mask wanted) around quant_fmt_round from
 * src/quant/quant_impl.h, compiled as run-time dispatched clones (ADAPT_HOT_CLONES).
 */
#include "src/quant/quant_cpu.h"
#include "src/base/hd.h"

#if defined(__GNUC__)
#define QUANT_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define QUANT_ALWAYS_INLINE inline
#endif

static QUANT_ALWAYS_INLINE void fmt_piece(struct quant_fmt f, const int mode, const int wide,
                                          const int want_mask, const int want_counts,
                                          const float *x, float *y, const uint32_t *r, size_t n,
                                          uint8_t *mask, uint64_t *counts, uint32_t *tmp)
{
    uint32_t ns = 0, nzx = 0, nzy = 0; /* saturated, nonzero inputs, nonzero outputs */
#pragma omp simd reduction(+ : ns, nzx, nzy)
    for (size_t j = 0; j < n; j++) {
        uint32_t sat;
        float v = x[j];
        float q = quant_fmt_round(f, mode, wide, v, mode == QUANT_MODE_STOCHASTIC ? r[j] : 0u, &sat);
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

/* The 24 loop variants: mode (3) x wide (2) x mask (2) x counters (2). */
static QUANT_ALWAYS_INLINE void fmt_dispatch(struct quant_fmt f, int mode, const float *x, float *y,
                                             const uint32_t *r, size_t n, uint8_t *mask,
                                             uint64_t *counts, uint32_t *tmp)
{
#define FMT_CASE(M, W)                                                                         \
    do {                                                                                       \
        if (mask && counts) fmt_piece(f, M, W, 1, 1, x, y, r, n, mask, counts, tmp);                \
        else if (mask) fmt_piece(f, M, W, 1, 0, x, y, r, n, mask, counts, tmp);                     \
        else if (counts) fmt_piece(f, M, W, 0, 1, x, y, r, n, mask, counts, tmp);                   \
        else fmt_piece(f, M, W, 0, 0, x, y, r, n, mask, counts, tmp);                               \
    } while (0)
    switch (mode) {
    case QUANT_MODE_STOCHASTIC:
        if (f.wide) FMT_CASE(QUANT_MODE_STOCHASTIC, 1);
        else FMT_CASE(QUANT_MODE_STOCHASTIC, 0);
        break;
    case QUANT_MODE_NEAREST_AWAY:
        if (f.wide) FMT_CASE(QUANT_MODE_NEAREST_AWAY, 1);
        else FMT_CASE(QUANT_MODE_NEAREST_AWAY, 0);
        break;
    default:
        if (f.wide) FMT_CASE(QUANT_MODE_NEAREST_EVEN, 1);
        else FMT_CASE(QUANT_MODE_NEAREST_EVEN, 0);
        break;
    }
#undef FMT_CASE
}

ADAPT_HOT_CLONES void quant_fmt_run(const struct quant_plan *p, const float *x, float *y, size_t n,
                                    uint64_t index, uint8_t *mask, uint64_t *counts)
{
    const struct quant_fmt f = p->fmt;
    uint32_t buf[QUANT_PIECE_BUF] __attribute__((aligned(64)));
    uint32_t tmp[QUANT_PIECE] __attribute__((aligned(64)));
    size_t j = 0;
    while (j < n) { /* pieces aligned in index space: whole Philox blocks, bounded counters */
        uint64_t i = index + j;
        size_t len = QUANT_PIECE - (size_t)(i % QUANT_PIECE);
        if (len > n - j) len = n - j;
        const uint32_t *r = p->mode == QUANT_MODE_STOCHASTIC ? quant_philox_fill(buf, p->seed, p->stream, i, len) : NULL;
        fmt_dispatch(f, p->mode, x + j, y + j, r, len, mask ? mask + j : NULL, counts, tmp);
        j += len;
    }
}
