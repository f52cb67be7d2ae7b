/* src/quant/quant.c: plans, the OpenMP drivers and the scalar reference of the rounding kernels.
 *
 * quant_rows splits the work in index space (chunks of QUANT_CHUNK elements starting at
 * multiples of QUANT_CHUNK of the global element index), so the bits do not depend on the
 * number of threads; counters are integer sums.
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "src/quant/quant.h"
#include "src/quant/quant_cpu.h"
#include "src/base/rng.h"

/* ---- plans ---- */

static int spec_mode(const struct quant_spec *s)
{
    if (s->rounding == QUANT_ROUND_STOCHASTIC) return QUANT_MODE_STOCHASTIC;
    return s->tie == QUANT_TIE_AWAY ? QUANT_MODE_NEAREST_AWAY : QUANT_MODE_NEAREST_EVEN;
}

enum adapt_status quant_plan_init(const struct quant_spec *s, const struct quant_range *range,
                                  struct quant_key key, struct quant_plan *p)
{
    enum adapt_status st = quant_spec_check(s);
    if (st != ADAPT_OK) return st;
    const struct quant_type *t = quant_type_of(s->format);
    if (t->needs_range && !range)
        return ADAPT_ERROR(ADAPT_EINVAL, "quant %s: the scale needs the data range", t->name);
    struct quant_plan q;
    memset(&q, 0, sizeof q);
    q.mode = spec_mode(s);
    q.seed = key.seed;
    q.stream = key.stream;
    q.sr_bits = s->sr_bits == QUANT_SR_BITS_16 ? QUANT_SR_BITS_16 : QUANT_SR_BITS_32;
    switch (s->format) {
    case QUANT_FORMAT_FIXED:
        q.kind = QUANT_KIND_GRID;
        q.grid = quant_grid_fixed(s->wl, s->fl);
        break;
    case QUANT_FORMAT_BFP:
        q.kind = QUANT_KIND_GRID;
        q.grid = quant_grid_bfp(s->wl, range->maxabs);
        break;
    case QUANT_FORMAT_MUPPET:
        q.kind = QUANT_KIND_GRID;
        q.grid = quant_grid_muppet(s->wl, range->max, range->min);
        break;
    case QUANT_FORMAT_MXFP8_E4M3:
    case QUANT_FORMAT_MXFP8_E5M2:
    case QUANT_FORMAT_MXFP6_E2M3:
    case QUANT_FORMAT_MXFP6_E3M2:
    case QUANT_FORMAT_MXFP4:
    case QUANT_FORMAT_MXINT8:
        q.kind = QUANT_KIND_MX;
        q.mx.integer = s->format == QUANT_FORMAT_MXINT8;
        if (q.mx.integer) {
            q.mx.emax = 0; /* largest element 127/64 = 1.98... */
        } else {
            q.fmt = quant_fmt_make_mx(s->exp_bits, s->man_bits);
            q.mx.emax = quant_ilog2f(quant_u2f(q.fmt.maxbits));
        }
        break;
    case QUANT_FORMAT_PLUGIN:
        q.kind = QUANT_KIND_PLUGIN;
        q.plugin = s->plugin;
        break;
    default: /* float formats */
        q.kind = QUANT_KIND_FMT;
        if (s->format == QUANT_FORMAT_E4M3)
            q.fmt = quant_fmt_make_e4m3(s->subnormals, s->overflow == QUANT_OVERFLOW_INF);
        else if (s->format == QUANT_FORMAT_FLOAT) /* any bias and all-ones exponent rule */
            q.fmt = quant_fmt_make_custom(s->exp_bits, s->man_bits, quant_spec_bias(s), s->nan,
                                          s->subnormals, s->overflow == QUANT_OVERFLOW_INF);
        else
            q.fmt = quant_fmt_make(s->exp_bits, s->man_bits, s->subnormals,
                                   s->overflow == QUANT_OVERFLOW_INF);
        break;
    }
    *p = q;
    return ADAPT_OK;
}

/* One MX block, scalar (the reference twin's arithmetic, written out). */
static void mx_block_ref(const struct quant_plan *p, const float *x, float *y, size_t n,
                         const uint32_t *r, uint32_t *sat)
{
    float amax = 0.0f;
    int finite = 1;
    for (size_t j = 0; j < n; j++) {
        if (!isfinite(x[j])) finite = 0;
        else if (fabsf(x[j]) > amax) amax = fabsf(x[j]);
    }
    if (!finite) {
        for (size_t j = 0; j < n; j++) y[j] = quant_mx_poison(x[j], &sat[j]);
        return;
    }
    int s = quant_mx_scale(quant_f2u(amax), p->mx.emax);
    for (size_t j = 0; j < n; j++) {
        if (p->mx.integer) {
            y[j] = quant_grid_round(quant_mx_int_grid(s), p->mode, 1, x[j], r[j], &sat[j]);
        } else {
            float t = x[j] * quant_pow2f(-s);
            y[j] = quant_fmt_round(p->fmt, p->mode, 0, t, r[j], &sat[j]) * quant_pow2f(s);
        }
    }
}

float quant_plan_round(const struct quant_plan *p, float v, uint32_t r, uint32_t *sat)
{
    if (p->kind == QUANT_KIND_PLUGIN) /* nearest: u = 1/2 */
        return quant_plugin_round(p->plugin, v, p->mode == QUANT_MODE_STOCHASTIC ? r : 0x80000000u,
                                  sat);
    if (p->kind == QUANT_KIND_MX) {
        float y;
        mx_block_ref(p, &v, &y, 1, &r, sat);
        return y;
    }
    if (p->kind == QUANT_KIND_GRID) {
        switch (p->mode) {
        case QUANT_MODE_STOCHASTIC:
            return quant_grid_round(p->grid, QUANT_MODE_STOCHASTIC, 1, v, r, sat);
        case QUANT_MODE_NEAREST_AWAY:
            return quant_grid_round(p->grid, QUANT_MODE_NEAREST_AWAY, 1, v, r, sat);
        default: return quant_grid_round(p->grid, QUANT_MODE_NEAREST_EVEN, 1, v, r, sat);
        }
    }
    switch (p->mode) {
    case QUANT_MODE_STOCHASTIC:
        return quant_fmt_round(p->fmt, QUANT_MODE_STOCHASTIC, p->fmt.wide, v, r, sat);
    case QUANT_MODE_NEAREST_AWAY:
        return quant_fmt_round(p->fmt, QUANT_MODE_NEAREST_AWAY, p->fmt.wide, v, r, sat);
    default: return quant_fmt_round(p->fmt, QUANT_MODE_NEAREST_EVEN, p->fmt.wide, v, r, sat);
    }
}

/* ---- ranges ---- */

static void range_from_keys(const uint32_t k[2], struct quant_range *r)
{
    if (k[0] == 0u) { /* no finite value */
        r->max = -INFINITY;
        r->min = INFINITY;
        r->maxabs = 0.0f;
        return;
    }
    r->max = quant_u2f(quant_order_unkey(k[0]));
    r->min = quant_u2f(quant_order_unkey(k[1]));
    r->maxabs = fabsf(r->max) > fabsf(r->min) ? fabsf(r->max) : fabsf(r->min);
}

void quant_range_compute(const float *x, size_t n, struct quant_range *r)
{
    uint32_t kmax = 0u, kmin = 0xffffffffu;
    size_t nchunks = (n + QUANT_CHUNK - 1) / QUANT_CHUNK;
#pragma omp parallel for schedule(static) reduction(max                                            \
                                                    : kmax) reduction(min                          \
                                                                      : kmin) if (nchunks > 1)
    for (size_t c = 0; c < nchunks; c++) {
        size_t s = c * QUANT_CHUNK, e = s + QUANT_CHUNK < n ? s + QUANT_CHUNK : n;
        uint32_t k[2] = {0u, 0xffffffffu};
        quant_range_keys(x + s, e - s, k);
        kmax = k[0] > kmax ? k[0] : kmax;
        kmin = k[1] < kmin ? k[1] : kmin;
    }
    uint32_t k[2] = {kmax, kmin};
    range_from_keys(k, r);
}

void quant_range_compute_ref(const float *x, size_t n, struct quant_range *r)
{
    int any = 0;
    float mx = 0.0f, mn = 0.0f;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(x[i])) continue;
        if (!any || x[i] > mx) mx = x[i];
        if (!any || x[i] < mn) mn = x[i];
        any = 1;
    }
    if (!any) {
        r->max = -INFINITY;
        r->min = INFINITY;
        r->maxabs = 0.0f;
        return;
    }
    r->max = mx;
    r->min = mn;
    r->maxabs = fabsf(mx) > fabsf(mn) ? fabsf(mx) : fabsf(mn);
}

/* ---- row kernels ---- */

static void stats_add(struct quant_stats *stats, const uint64_t c[3])
{
    if (!stats) return;
    stats->saturated += c[0];
    stats->flushed += c[1];
    stats->zeros += c[2];
}

static void run_serial(const struct quant_plan *p, const float *x, float *y, size_t n,
                       uint64_t index, uint8_t *mask, uint64_t *c)
{
    if (p->kind == QUANT_KIND_GRID) quant_grid_run(p, x, y, n, index, mask, c);
    else if (p->kind == QUANT_KIND_PLUGIN) quant_plugin_run(p, x, y, n, index, mask, c);
    else quant_fmt_run(p, x, y, n, index, mask, c);
}

/* OpenMP driver: chunks of QUANT_CHUNK elements aligned in index space, one serial SIMD kernel
 * per chunk, integer counters summed. */
static void row_omp(const struct quant_plan *p, const float *x, float *y, size_t n, uint64_t index,
                    uint8_t *mask, struct quant_stats *stats)
{
    if (n == 0) return;
    uint64_t c0 = index / QUANT_CHUNK, c1 = (index + n - 1) / QUANT_CHUNK;
    long long nitems = (long long)(c1 - c0 + 1);
    uint64_t s0 = 0, s1 = 0, s2 = 0;
#pragma omp parallel for schedule(static) reduction(+ : s0, s1, s2) if (nitems > 1)
    for (long long it = 0; it < nitems; it++) {
        uint64_t lo = (c0 + (uint64_t)it) * QUANT_CHUNK, hi = lo + QUANT_CHUNK;
        if (lo < index) lo = index;
        if (hi > index + n) hi = index + n;
        size_t off = (size_t)(lo - index);
        uint64_t c[3] = {0, 0, 0};
        run_serial(p, x + off, y + off, (size_t)(hi - lo), lo, mask ? mask + off : NULL,
                   stats ? c : NULL);
        s0 += c[0];
        s1 += c[1];
        s2 += c[2];
    }
    uint64_t c[3] = {s0, s1, s2};
    stats_add(stats, c);
}

/* Scalar reference: one element at a time, random bits from quant_sr_bits_at. */
static void row_ref(const struct quant_plan *p, const float *x, float *y, size_t n, uint64_t index,
                    uint8_t *mask, struct quant_stats *stats)
{
    uint64_t c[3] = {0, 0, 0};
    for (size_t i = 0; i < n; i++) {
        uint32_t r = p->mode == QUANT_MODE_STOCHASTIC
                         ? quant_sr_bits_at(p->seed, p->stream, p->sr_bits, index + i)
                         : 0u;
        uint32_t sat;
        float v = x[i];
        float q = quant_plan_round(p, v, r, &sat);
        y[i] = q;
        if (mask) mask[i] = (uint8_t)sat;
        c[0] += sat;
        c[1] += (q == 0.0f && v != 0.0f);
        c[2] += (q == 0.0f);
    }
    stats_add(stats, c);
}

void quant_grid_row(const struct quant_plan *p, const float *x, float *y, size_t n, uint64_t index,
                    uint8_t *mask, struct quant_stats *stats)
{
    ADAPT_ASSERT(p->kind == QUANT_KIND_GRID);
    row_omp(p, x, y, n, index, mask, stats);
}

void quant_grid_row_ref(const struct quant_plan *p, const float *x, float *y, size_t n,
                        uint64_t index, uint8_t *mask, struct quant_stats *stats)
{
    ADAPT_ASSERT(p->kind == QUANT_KIND_GRID);
    row_ref(p, x, y, n, index, mask, stats);
}

void quant_float_row(const struct quant_plan *p, const float *x, float *y, size_t n, uint64_t index,
                     uint8_t *mask, struct quant_stats *stats)
{
    ADAPT_ASSERT(p->kind == QUANT_KIND_FMT);
    row_omp(p, x, y, n, index, mask, stats);
}

void quant_float_row_ref(const struct quant_plan *p, const float *x, float *y, size_t n,
                         uint64_t index, uint8_t *mask, struct quant_stats *stats)
{
    ADAPT_ASSERT(p->kind == QUANT_KIND_FMT);
    row_ref(p, x, y, n, index, mask, stats);
}

void quant_plugin_row(const struct quant_plan *p, const float *x, float *y, size_t n,
                      uint64_t index, uint8_t *mask, struct quant_stats *stats)
{
    ADAPT_ASSERT(p->kind == QUANT_KIND_PLUGIN);
    row_omp(p, x, y, n, index, mask, stats);
}

void quant_plugin_row_ref(const struct quant_plan *p, const float *x, float *y, size_t n,
                          uint64_t index, uint8_t *mask, struct quant_stats *stats)
{
    ADAPT_ASSERT(p->kind == QUANT_KIND_PLUGIN);
    row_ref(p, x, y, n, index, mask, stats);
}

/* MX rows: blocks restart at every row; work items are (row, chunk of QUANT_CHUNK elements)
 * pairs, a multiple of the block length, so the blocks and bits do not depend on threads. Rows
 * shorter than a block are one block each: items of whole rows, many a call. */
static void mx_rows(const struct quant_plan *p, const float *x, float *y, size_t rows,
                    size_t cols, uint64_t index, uint8_t *mask, struct quant_stats *stats)
{
    const int short_rows = cols < QUANT_MX_BLOCK && rows > 1;
    const size_t n = rows * cols, bl = short_rows ? cols : QUANT_MX_BLOCK;
    /* short rows: elements an item; else: items a row */
    const size_t per =
        short_rows ? QUANT_CHUNK - QUANT_CHUNK % cols : (cols + QUANT_CHUNK - 1) / QUANT_CHUNK;
    const long long nitems = (long long)(short_rows ? (n + per - 1) / per : rows * per);
    uint64_t cnt[3] = {0, 0, 0}; /* each thread's own, summed at the end */
#pragma omp parallel for schedule(static) reduction(+ : cnt[:3]) if (n > QUANT_CHUNK)
    for (long long it = 0; it < nitems; it++) {
        size_t off, len;
        if (short_rows) {
            off = (size_t)it * per;
            len = n - off < per ? n - off : per;
        } else {
            size_t r = (size_t)it / per, c = ((size_t)it % per) * QUANT_CHUNK;
            off = r * cols + c;
            len = cols - c < QUANT_CHUNK ? cols - c : QUANT_CHUNK;
        }
        quant_mx_run(p, x + off, y + off, len, index + off, mask ? mask + off : NULL,
                     stats ? cnt : NULL, bl);
    }
    stats_add(stats, cnt);
}

void quant_mx_row(const struct quant_plan *p, const float *x, float *y, size_t n, uint64_t index,
                  uint8_t *mask, struct quant_stats *stats)
{
    ADAPT_ASSERT(p->kind == QUANT_KIND_MX);
    if (n) mx_rows(p, x, y, 1, n, index, mask, stats);
}

void quant_mx_row_ref(const struct quant_plan *p, const float *x, float *y, size_t n,
                      uint64_t index, uint8_t *mask, struct quant_stats *stats)
{
    ADAPT_ASSERT(p->kind == QUANT_KIND_MX);
    uint32_t r[QUANT_MX_BLOCK], sat[QUANT_MX_BLOCK];
    float xb[QUANT_MX_BLOCK]; /* the block's inputs, for the counts when x == y */
    uint64_t c[3] = {0, 0, 0};
    for (size_t b = 0; b < n; b += QUANT_MX_BLOCK) {
        size_t len = n - b < QUANT_MX_BLOCK ? n - b : QUANT_MX_BLOCK;
        for (size_t j = 0; j < len; j++)
            r[j] = p->mode == QUANT_MODE_STOCHASTIC
                       ? quant_sr_bits_at(p->seed, p->stream, p->sr_bits, index + b + j)
                       : 0u;
        memcpy(xb, x + b, len * sizeof *xb);
        mx_block_ref(p, xb, y + b, len, r, sat);
        for (size_t j = 0; j < len; j++) {
            if (mask) mask[b + j] = (uint8_t)sat[j];
            c[0] += sat[j];
            c[1] += (y[b + j] == 0.0f && xb[j] != 0.0f);
            c[2] += (y[b + j] == 0.0f);
        }
    }
    stats_add(stats, c);
}

/* ---- entry points ---- */

static enum adapt_status rows_check(const struct quant_spec *s, const float *x, float *y,
                                    size_t rows, size_t cols)
{
    enum adapt_status st = quant_spec_check(s);
    if (st != ADAPT_OK) return st;
    if (rows && cols && (!x || !y)) return ADAPT_ERROR(ADAPT_EINVAL, "quant: NULL array");
    if (cols && rows > SIZE_MAX / cols)
        return ADAPT_ERROR(ADAPT_ERANGE, "quant: %zu x %zu elements overflow", rows, cols);
    uintptr_t a = (uintptr_t)x, b = (uintptr_t)y;
    if (a != b && (a < b ? b - a : a - b) < rows * cols * sizeof(float))
        return ADAPT_ERROR(ADAPT_EINVAL, "quant: input and output overlap without being equal");
    return ADAPT_OK;
}

enum adapt_status quant_cols(const struct quant_spec *s, const float *x, float *y, size_t nmat,
                             size_t rows, size_t cols, struct quant_key key,
                             struct quant_stats *stats)
{
    if (!quant_format_is_mx(s->format))
        return ADAPT_ERROR(ADAPT_EINVAL, "quant_cols: MX formats only");
    if (nmat && rows > SIZE_MAX / nmat)
        return ADAPT_ERROR(ADAPT_ERANGE, "quant: %zu matrices overflow", nmat);
    enum adapt_status st = rows_check(s, x, y, nmat * rows, cols);
    if (st != ADAPT_OK) return st;
    if (!nmat || !rows || !cols) return ADAPT_OK;
    struct quant_plan p;
    if ((st = quant_plan_init(s, NULL, key, &p)) != ADAPT_OK) return st;
    /* items: (matrix, span of whole panels of QUANT_MX_LANES columns, about QUANT_CHUNK
     * elements); the bits do not depend on them */
    size_t span = QUANT_CHUNK / rows / QUANT_MX_LANES * QUANT_MX_LANES;
    if (span < QUANT_MX_LANES) span = QUANT_MX_LANES;
    const size_t per = (cols + span - 1) / span, mn = rows * cols;
    const long long items = (long long)(nmat * per);
    uint64_t c[3] = {0, 0, 0}; /* each thread's own, summed at the end */
#pragma omp parallel for schedule(static) reduction(+ : c[:3]) if (nmat * mn > QUANT_CHUNK)
    for (long long it = 0; it < items; it++) {
        const size_t m = (size_t)it / per, c0 = ((size_t)it % per) * span;
        const size_t c1 = cols - c0 < span ? cols : c0 + span;
        quant_mx_cols(&p, x + m * mn, y + m * mn, rows, cols, c0, c1, key.index + m * mn,
                      stats ? c : NULL);
    }
    stats_add(stats, c);
    return ADAPT_OK;
}

enum adapt_status quant_rows(const struct quant_spec *s, const float *x, float *y, size_t rows,
                             size_t cols, struct quant_key key, uint8_t *mask,
                             struct quant_stats *stats)
{
    enum adapt_status st = rows_check(s, x, y, rows, cols);
    if (st != ADAPT_OK) return st;
    size_t n = rows * cols;
    if (n == 0) return ADAPT_OK;
    const struct quant_type *t = quant_type_of(s->format);
    struct quant_plan p;
    if (quant_format_is_mx(s->format)) {
        if ((st = quant_plan_init(s, NULL, key, &p)) != ADAPT_OK) return st;
        mx_rows(&p, x, y, rows, cols, key.index, mask, stats);
        return ADAPT_OK;
    }
    if (t->needs_range && s->block == QUANT_BLOCK_DIM0 && rows > 1) {
        /* one scale per row: rows in parallel, each reduced and rounded serially */
        struct quant_spec s1 = *s;
        uint64_t s0 = 0, sa = 0, sb = 0;
        s1.block = QUANT_BLOCK_TENSOR;
        if ((st = quant_plan_init(&s1, &(struct quant_range){0.0f, 0.0f, 0.0f}, key, &p)) !=
            ADAPT_OK)
            return st;
#pragma omp parallel for schedule(dynamic, 1) reduction(+ : s0, sa, sb)
        for (long long r = 0; r < (long long)rows; r++) {
            const float *xr = x + (size_t)r * cols;
            uint32_t k[2] = {0u, 0xffffffffu};
            struct quant_range rg;
            struct quant_plan pr = p;
            quant_range_keys(xr, cols, k);
            range_from_keys(k, &rg);
            pr.grid = s->format == QUANT_FORMAT_BFP ? quant_grid_bfp(s->wl, rg.maxabs)
                                                    : quant_grid_muppet(s->wl, rg.max, rg.min);
            uint64_t c[3] = {0, 0, 0};
            run_serial(&pr, xr, y + (size_t)r * cols, cols, key.index + (uint64_t)r * cols,
                       mask ? mask + (size_t)r * cols : NULL, stats ? c : NULL);
            s0 += c[0];
            sa += c[1];
            sb += c[2];
        }
        uint64_t c[3] = {s0, sa, sb};
        stats_add(stats, c);
        return ADAPT_OK;
    }
    struct quant_range rg;
    if (t->needs_range) quant_range_compute(x, n, &rg);
    if ((st = quant_plan_init(s, t->needs_range ? &rg : NULL, key, &p)) != ADAPT_OK) return st;
    t->row(&p, x, y, n, key.index, mask, stats);
    return ADAPT_OK;
}

/* Elements a work item of quant_rows_scaled scales, rounds and scales back while they are in
 * the first-level cache (a multiple of QUANT_PIECE). */
#define SCALED_PIECE ((size_t)4096)

static void scale_span(const float *x, float *y, size_t n, float f)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) y[i] = x[i] * f;
}

enum adapt_status quant_rows_scaled(const struct quant_spec *s, const float *x, float *y,
                                    size_t rows, size_t cols, struct quant_key key, float scale,
                                    float inv, struct quant_stats *stats)
{
    enum adapt_status st = rows_check(s, x, y, rows, cols);
    if (st != ADAPT_OK) return st;
    size_t n = rows * cols;
    if (n == 0) return ADAPT_OK;
    const struct quant_type *t = quant_type_of(s->format);
    size_t nchunks = (n + QUANT_CHUNK - 1) / QUANT_CHUNK;
    if (t->needs_range || quant_format_is_mx(s->format)) { /* scales of their own: 3 passes */
#pragma omp parallel for schedule(static) if (nchunks > 1)
        for (size_t c = 0; c < nchunks; c++) {
            size_t lo = c * QUANT_CHUNK, hi = lo + QUANT_CHUNK < n ? lo + QUANT_CHUNK : n;
            scale_span(x + lo, y + lo, hi - lo, scale);
        }
        if ((st = quant_rows(s, y, y, rows, cols, key, NULL, stats)) != ADAPT_OK) return st;
#pragma omp parallel for schedule(static) if (nchunks > 1)
        for (size_t c = 0; c < nchunks; c++) {
            size_t lo = c * QUANT_CHUNK, hi = lo + QUANT_CHUNK < n ? lo + QUANT_CHUNK : n;
            scale_span(y + lo, y + lo, hi - lo, inv);
        }
        return ADAPT_OK;
    }
    struct quant_plan p;
    if ((st = quant_plan_init(s, NULL, key, &p)) != ADAPT_OK) return st;
    uint64_t s0 = 0, s1 = 0, s2 = 0;
    /* chunks in index space as quant_rows (the bits do not depend on the split) */
    uint64_t c0 = key.index / QUANT_CHUNK, c1 = (key.index + n - 1) / QUANT_CHUNK;
    long long nitems = (long long)(c1 - c0 + 1);
#pragma omp parallel for schedule(static) reduction(+ : s0, s1, s2) if (nitems > 1)
    for (long long it = 0; it < nitems; it++) {
        uint64_t lo = (c0 + (uint64_t)it) * QUANT_CHUNK, hi = lo + QUANT_CHUNK;
        if (lo < key.index) lo = key.index;
        if (hi > key.index + n) hi = key.index + n;
        for (uint64_t a = lo; a < hi;) {
            uint64_t b = (a / SCALED_PIECE + 1) * SCALED_PIECE;
            if (b > hi) b = hi;
            size_t off = (size_t)(a - key.index), m = (size_t)(b - a);
            uint64_t c[3] = {0, 0, 0};
            scale_span(x + off, y + off, m, scale);
            run_serial(&p, y + off, y + off, m, a, NULL, stats ? c : NULL);
            scale_span(y + off, y + off, m, inv);
            s0 += c[0];
            s1 += c[1];
            s2 += c[2];
            a = b;
        }
    }
    uint64_t c[3] = {s0, s1, s2};
    stats_add(stats, c);
    return ADAPT_OK;
}

/* On the bits of |x|: for non-negative floats their order is that of the unsigned integers,
 * and inf and NaN are the patterns from 0x7f800000 up (an integer max the compilers vectorize
 * without fast-math). */
float quant_amax_compute(const float *x, size_t n, int *nonfinite)
{
    uint32_t m = 0;
    size_t nchunks = (n + QUANT_CHUNK - 1) / QUANT_CHUNK;
#pragma omp parallel for schedule(static) reduction(max : m) if (nchunks > 1)
    for (size_t c = 0; c < nchunks; c++) {
        size_t lo = c * QUANT_CHUNK, hi = lo + QUANT_CHUNK < n ? lo + QUANT_CHUNK : n;
        uint32_t cm = 0;
        for (size_t i = lo; i < hi; i++) {
            uint32_t b;
            memcpy(&b, &x[i], sizeof b);
            b &= 0x7fffffffu;
            cm = b > cm ? b : cm;
        }
        m = cm > m ? cm : m;
    }
    *nonfinite = m >= 0x7f800000u;
    return quant_amax_of_bits(m);
}

enum adapt_status quant_rows_ref(const struct quant_spec *s, const float *x, float *y, size_t rows,
                                 size_t cols, struct quant_key key, uint8_t *mask,
                                 struct quant_stats *stats)
{
    enum adapt_status st = rows_check(s, x, y, rows, cols);
    if (st != ADAPT_OK) return st;
    size_t n = rows * cols;
    if (n == 0) return ADAPT_OK;
    const struct quant_type *t = quant_type_of(s->format);
    int per_row = (t->needs_range && s->block == QUANT_BLOCK_DIM0) || quant_format_is_mx(s->format);
    size_t nblocks = per_row ? rows : 1, len = per_row ? cols : n;
    for (size_t b = 0; b < nblocks; b++) {
        struct quant_range rg;
        struct quant_plan p;
        if (t->needs_range) quant_range_compute_ref(x + b * len, len, &rg);
        if ((st = quant_plan_init(s, t->needs_range ? &rg : NULL, key, &p)) != ADAPT_OK) return st;
        t->row_ref(&p, x + b * len, y + b * len, len, key.index + b * len,
                   mask ? mask + b * len : NULL, stats);
    }
    return ADAPT_OK;
}

enum adapt_status quant_array(const struct quant_spec *s, const float *x, float *y, size_t n,
                              struct quant_key key, uint8_t *mask, struct quant_stats *stats)
{
    return quant_rows(s, x, y, 1, n, key, mask, stats);
}
