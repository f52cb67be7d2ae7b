/* src/layers/im2col.c: lowering of a zero-padded, strided 2-D convolution to
 * a matrix product (im2col, as in Caffe and PyTorch's slow_conv2d) and its
 * adjoint (col2im). Layout of col for a chunk of nb samples: row
 * r = (c*k + ky)*k + kx, column j*P + oy*wo + ox, so the whole chunk is one
 * (Cin*k*k, nb*P) matrix and one GEMM covers it. */
#include <string.h>

#include "src/base/hd.h"
#include "src/layers/layers_impl.h"

/* The output columns ox whose input column ix = ox*s - p + kx lies in [0, w). */
ADAPT_INLINE void valid_cols(const struct adapt_conv_geom *g, int kx, int *ox0, int *ox1)
{
    int lo = g->pad - kx; /* ox*s >= lo */
    int a = lo <= 0 ? 0 : (lo + g->stride - 1) / g->stride;
    int hi = g->w - 1 + g->pad - kx; /* ox*s <= hi */
    int b = hi < 0 ? 0 : hi / g->stride + 1;
    if (b > g->wo) b = g->wo;
    if (a > b) a = b;
    *ox0 = a;
    *ox1 = b;
}

ADAPT_HOT_CLONES static void im2col_plane(const struct adapt_conv_geom *g, const float *x,
                                          float *dst, size_t ldc)
{
    const int k = g->k, s = g->stride, p = g->pad, wo = g->wo, ho = g->ho;
    for (int ky = 0; ky < k; ky++)
        for (int kx = 0; kx < k; kx++) {
            float *d = dst + (size_t)(ky * k + kx) * ldc;
            int ox0, ox1;
            valid_cols(g, kx, &ox0, &ox1);
            for (int oy = 0; oy < ho; oy++) {
                float *ADAPT_RESTRICT dr = d + (size_t)oy * wo;
                int iy = oy * s - p + ky;
                if (iy < 0 || iy >= g->h) {
                    memset(dr, 0, (size_t)wo * sizeof(float));
                    continue;
                }
                const float *ADAPT_RESTRICT xr = x + (size_t)iy * g->w + (kx - p);
                for (int ox = 0; ox < ox0; ox++) dr[ox] = 0.0f;
                if (s == 1)
                    for (int ox = ox0; ox < ox1; ox++) dr[ox] = xr[ox];
                else
                    for (int ox = ox0; ox < ox1; ox++) dr[ox] = xr[ox * s];
                for (int ox = ox1; ox < wo; ox++) dr[ox] = 0.0f;
            }
        }
}

ADAPT_HOT_CLONES static void col2im_plane(const struct adapt_conv_geom *g, const float *src,
                                          size_t ldc, float *dx, int acc)
{
    const int k = g->k, s = g->stride, p = g->pad, wo = g->wo, ho = g->ho;
    if (!acc) memset(dx, 0, (size_t)g->h * g->w * sizeof(float));
    for (int ky = 0; ky < k; ky++)
        for (int kx = 0; kx < k; kx++) {
            const float *d = src + (size_t)(ky * k + kx) * ldc;
            int ox0, ox1;
            valid_cols(g, kx, &ox0, &ox1);
            for (int oy = 0; oy < ho; oy++) {
                int iy = oy * s - p + ky;
                if (iy < 0 || iy >= g->h) continue;
                const float *ADAPT_RESTRICT dr = d + (size_t)oy * wo;
                float *ADAPT_RESTRICT xr = dx + (size_t)iy * g->w + (kx - p);
                if (s == 1)
                    for (int ox = ox0; ox < ox1; ox++) xr[ox] += dr[ox];
                else
                    for (int ox = ox0; ox < ox1; ox++) xr[ox * s] += dr[ox];
            }
        }
}

void adapt_im2col(const struct adapt_conv_geom *g, const float *x, int nb, float *col, size_t ldc)
{
    const size_t kk = (size_t)g->k * g->k, P = (size_t)g->ho * g->wo;
    const size_t plane = (size_t)g->h * g->w;
    const long tasks = (long)nb * g->cin;
    const int cin = g->cin;
#pragma omp parallel for if ((size_t)tasks * kk * P >= ADAPT_PAR_MIN) schedule(static)
    for (long t = 0; t < tasks; t++) {
        long j = t / cin, c = t % cin;
        im2col_plane(g, x + (size_t)t * plane, col + (size_t)c * kk * ldc + (size_t)j * P, ldc);
    }
}

void adapt_col2im(const struct adapt_conv_geom *g, const float *col, size_t ldc, int nb, float *dx,
                  int acc)
{
    const size_t kk = (size_t)g->k * g->k, P = (size_t)g->ho * g->wo;
    const size_t plane = (size_t)g->h * g->w;
    const long tasks = (long)nb * g->cin;
    const int cin = g->cin;
#pragma omp parallel for if ((size_t)tasks * kk * P >= ADAPT_PAR_MIN) schedule(static)
    for (long t = 0; t < tasks; t++) {
        long j = t / cin, c = t % cin;
        col2im_plane(g, col + (size_t)c * kk * ldc + (size_t)j * P, ldc, dx + (size_t)t * plane,
                     acc);
    }
}
