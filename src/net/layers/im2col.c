/* src/net/layers/im2col.c: lowering of a zero-padded, strided 2-D convolution of
 * one sample to a matrix product (im2col, as in Caffe and PyTorch's
 * slow_conv2d) and its adjoint (col2im). Layout of col: row
 * r = (c*k + ky)*k + kx, column oy*wo + ox, rows ldc floats apart. Each
 * channel goes through a zero-padded copy of its plane, split into stride
 * phases (scratch), so every col row is a set of contiguous row copies
 * without bounds tests. Serial: the convolution runs one sample per thread. */
#include <string.h>

#include "src/base/hd.h"
#include "src/net/layers/layers_impl.h"

typedef float v16u __attribute__((vector_size(64), aligned(4), may_alias));

/* Rows here are short (8..40 floats): inline vector copies, not calls to
 * memmove, which gcc would otherwise substitute for the copy loops (clang has
 * no such attribute). */
#if defined(__clang__)
#define ROW_LOOPS
#else
#define ROW_LOOPS __attribute__((optimize("no-tree-loop-distribute-patterns")))
#endif

typedef float v8u __attribute__((vector_size(32), aligned(4), may_alias));
typedef float v4u __attribute__((vector_size(16), aligned(4), may_alias));
typedef float v16 __attribute__((vector_size(64)));
typedef float v8 __attribute__((vector_size(32)));
typedef float v4 __attribute__((vector_size(16)));
typedef int v16i __attribute__((vector_size(64)));
typedef int v8i __attribute__((vector_size(32)));
typedef int v4i __attribute__((vector_size(16)));

/* d[0..n) = s[0..n); a tail shorter than a vector is copied as one vector
 * that overlaps the previous one (no scalar loop, no access past n) */
static inline __attribute__((always_inline)) void copy_row(float *ADAPT_RESTRICT d,
                                                            const float *ADAPT_RESTRICT s, int n)
{
    if (n >= 16) {
        int i = 0;
        for (; i + 16 <= n; i += 16) *(v16u *)(d + i) = *(const v16u *)(s + i);
        if (i < n) *(v16u *)(d + n - 16) = *(const v16u *)(s + n - 16);
    } else if (n >= 8) {
        *(v8u *)d = *(const v8u *)s;
        *(v8u *)(d + n - 8) = *(const v8u *)(s + n - 8);
    } else if (n >= 4) {
        *(v4u *)d = *(const v4u *)s;
        *(v4u *)(d + n - 4) = *(const v4u *)(s + n - 4);
    } else {
        for (int i = 0; i < n; i++) d[i] = s[i];
    }
}

/* d[0..n) += s[0..n). A tail shorter than a vector is handled as one vector
 * ending at n whose lanes overlapping the previous vector add 0: both are
 * loaded before either is stored, and the tail is stored first, so the
 * overlapped lanes end up with the previous vector's sums. */
#define ADD_TAIL(VT, VI, W, LANES)                                               \
    do {                                                                       \
        const VI lane = LANES;                                                 \
        VT a = *(const VT##u *)(d + i0), b = *(const VT##u *)(d + n - W);      \
        VT sa = *(const VT##u *)(s + i0), sb = *(const VT##u *)(s + n - W);    \
        VI keep = lane >= (i0 + W - (n - W));                                  \
        sb = (VT)((VI)sb & keep);                                              \
        *(VT##u *)(d + n - W) = b + sb;                                        \
        *(VT##u *)(d + i0) = a + sa;                                           \
    } while (0)

#define LANES16 {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}
#define LANES8 {0, 1, 2, 3, 4, 5, 6, 7}
#define LANES4 {0, 1, 2, 3}

static inline __attribute__((always_inline)) void add_row(float *ADAPT_RESTRICT d,
                                                           const float *ADAPT_RESTRICT s, int n)
{
    if (n >= 16) {
        int i0 = 0;
        for (; i0 + 32 <= n; i0 += 16) *(v16u *)(d + i0) += *(const v16u *)(s + i0);
        if (i0 + 16 == n)
            *(v16u *)(d + i0) += *(const v16u *)(s + i0);
        else
            ADD_TAIL(v16, v16i, 16, LANES16);
    } else if (n >= 8) {
        const int i0 = 0;
        if (n == 8)
            *(v8u *)d += *(const v8u *)s;
        else
            ADD_TAIL(v8, v8i, 8, LANES8);
    } else if (n >= 4) {
        const int i0 = 0;
        if (n == 4)
            *(v4u *)d += *(const v4u *)s;
        else
            ADD_TAIL(v4, v4i, 4, LANES4);
    } else {
        for (int i = 0; i < n; i++) d[i] += s[i];
    }
}

/* The "phase planes" of one channel: the zero-padded plane (hp, wp),
 * wp = w + 2p, with every row split into its s phases, phase f holding
 * columns f, f + s, f + 2s, ... in wq = ceil(wp / s) floats:
 *   ph[(iy*s + f)*wq + m] = padded[iy][f + m*s].
 * Input column ox*s + kx of an output row is then element kx/s + ox of
 * phase kx%s, so every col row is a contiguous copy whatever the stride.
 * (stride 1: ph is the padded plane itself.) */
static int phase_width(const struct adapt_conv_geom *g)
{
    return (g->w + 2 * g->pad + g->stride - 1) / g->stride;
}

size_t adapt_im2col_scratch(const struct adapt_conv_geom *g)
{
    if (g->pad == 0 && g->stride == 1) return 0; /* the input plane is used as is */
    return (size_t)(g->h + 2 * g->pad) * g->stride * phase_width(g);
}

/* the m of phase f whose input column f + m*s - p lies in [0, w) */
static inline void phase_range(const struct adapt_conv_geom *g, int f, int wq, int *m0, int *m1)
{
    const int s = g->stride, lo = g->pad - f, hi = g->w - 1 + g->pad - f;
    int a = lo <= 0 ? 0 : (lo + s - 1) / s;
    int b = hi < 0 ? 0 : hi / s + 1;
    if (b > wq) b = wq;
    if (a > b) a = b;
    *m0 = a;
    *m1 = b;
}

/* Phases f >= k and, when k < s, padded rows iy with iy % s >= k are never
 * read by im2col_plane and are left unwritten. */
ADAPT_HOT_CLONES ROW_LOOPS static void to_phases(const struct adapt_conv_geom *g, const float *x,
                                                 float *ph)
{
    const int p = g->pad, s = g->stride, k = g->k, wq = phase_width(g), hp = g->h + 2 * p;
    const int nf = k < s ? k : s;
    int m0[nf], m1[nf];
    for (int f = 0; f < nf; f++) phase_range(g, f, wq, &m0[f], &m1[f]);
    for (int iy = 0; iy < hp; iy++) {
        if (k < s && iy % s >= k) continue;
        float *r = ph + (size_t)iy * s * wq;
        const int y = iy - p;
        if (y < 0 || y >= g->h) {
            memset(r, 0, (size_t)nf * wq * sizeof(float));
            continue;
        }
        const float *xr = x + (size_t)y * g->w;
        if (s == 1) {
            for (int i = 0; i < p; i++) r[i] = 0.0f;
            copy_row(r + p, xr, g->w);
            for (int i = p + g->w; i < wq; i++) r[i] = 0.0f;
            continue;
        }
        for (int f = 0; f < nf; f++) {
            float *rf = r + (size_t)f * wq;
            const float *xf = xr + f - p;
            for (int m = 0; m < m0[f]; m++) rf[m] = 0.0f;
            for (int m = m0[f]; m < m1[f]; m++) rf[m] = xf[m * s];
            for (int m = m1[f]; m < wq; m++) rf[m] = 0.0f;
        }
    }
}

/* dx (=|+=) the input positions of the phase planes ph (each input column
 * ix is element (ix + p) / s of phase (ix + p) % s) */
ADAPT_HOT_CLONES ROW_LOOPS static void from_phases(const struct adapt_conv_geom *g, const float *ph,
                                                   float *dx, int acc)
{
    const int p = g->pad, s = g->stride, wq = phase_width(g);
    for (int y = 0; y < g->h; y++) {
        const float *r = ph + (size_t)(y + p) * s * wq;
        float *d = dx + (size_t)y * g->w;
        if (s == 1) {
            if (acc)
                add_row(d, r + p, g->w);
            else
                copy_row(d, r + p, g->w);
            continue;
        }
        for (int f = 0; f < s; f++) {
            int m0, m1;
            phase_range(g, f, wq, &m0, &m1);
            const float *rf = r + (size_t)f * wq;
            float *df = d + f - p;
            if (acc)
                for (int m = m0; m < m1; m++) df[m * s] += rf[m];
            else
                for (int m = m0; m < m1; m++) df[m * s] = rf[m];
        }
    }
}

/* Copies (or adds) ho rows of wo floats between a strided source and a
 * packed destination; the common widths get loops without tail tests. */
#define ROWS(OP, d, dstep, sp, sstep)                                                        \
    do {                                                                                    \
        if (wo == 16)                                                                       \
            for (int oy = 0; oy < ho; oy++)                                                 \
                OP##_16((d) + (size_t)oy * (dstep), (sp) + (size_t)oy * (sstep));          \
        else if (wo == 32)                                                                  \
            for (int oy = 0; oy < ho; oy++) {                                               \
                OP##_16((d) + (size_t)oy * (dstep), (sp) + (size_t)oy * (sstep));          \
                OP##_16((d) + (size_t)oy * (dstep) + 16, (sp) + (size_t)oy * (sstep) + 16); \
            }                                                                               \
        else if (wo == 8)                                                                   \
            for (int oy = 0; oy < ho; oy++)                                                 \
                OP##_8((d) + (size_t)oy * (dstep), (sp) + (size_t)oy * (sstep));           \
        else                                                                                \
            for (int oy = 0; oy < ho; oy++)                                                 \
                OP##_row((d) + (size_t)oy * (dstep), (sp) + (size_t)oy * (sstep), wo);     \
    } while (0)

#define copy_16(d, s) (*(v16u *)(d) = *(const v16u *)(s))
#define copy_8(d, s) (*(v8u *)(d) = *(const v8u *)(s))
#define add_16(d, s) (*(v16u *)(d) += *(const v16u *)(s))
#define add_8(d, s) (*(v8u *)(d) += *(const v8u *)(s))

/* col rows of one channel from its phase planes (row stride wq per phase) */
ADAPT_HOT_CLONES ROW_LOOPS static void im2col_plane(const struct adapt_conv_geom *g,
                                                    const float *ph, int wq, float *dst, size_t ldc)
{
    const int k = g->k, s = g->stride, wo = g->wo, ho = g->ho;
    const size_t oy_step = (size_t)s * s * wq;
    for (int ky = 0; ky < k; ky++)
        for (int kx = 0; kx < k; kx++) {
            float *d = dst + (size_t)(ky * k + kx) * ldc;
            const float *src = ph + (size_t)(ky * s + kx % s) * wq + kx / s;
            ROWS(copy, d, wo, src, oy_step);
        }
}

/* adds the col rows of one channel into its phase planes */
ADAPT_HOT_CLONES ROW_LOOPS static void col2im_plane(const struct adapt_conv_geom *g,
                                                    const float *src, size_t ldc, float *ph, int wq)
{
    const int k = g->k, s = g->stride, wo = g->wo, ho = g->ho;
    const size_t oy_step = (size_t)s * s * wq;
    for (int ky = 0; ky < k; ky++)
        for (int kx = 0; kx < k; kx++) {
            const float *d = src + (size_t)(ky * k + kx) * ldc;
            float *dst = ph + (size_t)(ky * s + kx % s) * wq + kx / s;
            ROWS(add, dst, oy_step, d, wo);
        }
}

static void im2col(const struct adapt_conv_geom *g, const float *x, float *col, size_t ldc,
                   float *scratch, int pad_columns)
{
    const size_t kk = (size_t)g->k * g->k, plane = (size_t)g->h * g->w;
    const size_t P = (size_t)g->ho * g->wo;
    const int direct = adapt_im2col_scratch(g) == 0;
    const int wq = direct ? g->w : phase_width(g);
    for (int c = 0; c < g->cin; c++) {
        float *dst = col + (size_t)c * kk * ldc;
        const float *ph = x + (size_t)c * plane;
        if (!direct) {
            to_phases(g, ph, scratch);
            ph = scratch;
        }
        im2col_plane(g, ph, wq, dst, ldc);
        if (pad_columns && ldc > P) /* padding columns: keep them finite */
            for (size_t r = 0; r < kk; r++) memset(dst + r * ldc + P, 0, (ldc - P) * sizeof(float));
    }
}

void adapt_im2col_sample(const struct adapt_conv_geom *g, const float *x, float *col, size_t ldc,
                         float *scratch)
{
    im2col(g, x, col, ldc, scratch, 1);
}

void adapt_im2col_into(const struct adapt_conv_geom *g, const float *x, float *col, size_t ldc,
                       float *scratch)
{
    im2col(g, x, col, ldc, scratch, 0);
}

void adapt_col2im_sample(const struct adapt_conv_geom *g, const float *col, size_t ldc, float *dx,
                         int acc, float *scratch)
{
    const size_t kk = (size_t)g->k * g->k, plane = (size_t)g->h * g->w;
    const size_t nscratch = adapt_im2col_scratch(g);
    for (int c = 0; c < g->cin; c++) {
        const float *src = col + (size_t)c * kk * ldc;
        float *dp = dx + (size_t)c * plane;
        if (nscratch) {
            memset(scratch, 0, nscratch * sizeof(float));
            col2im_plane(g, src, ldc, scratch, phase_width(g));
            from_phases(g, scratch, dp, acc);
        } else {
            if (!acc) memset(dp, 0, plane * sizeof(float));
            col2im_plane(g, src, ldc, dp, g->w);
        }
    }
}
