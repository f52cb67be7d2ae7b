/* src/data/resize.c: bilinear resizing of 8-bit grayscale images with the arithmetic of the
 * Pillow library's resize(BILINEAR) on "L" images (what torchvision's Resize does to a PIL
 * image), so that images resized here hold the same bytes as the published pipeline's.
 *
 * The filter is the triangle 1 - |t| on [-1, 1], stretched by the down-scaling factor when
 * shrinking (support = max(1, in / out)); for an upscale such as 28 -> 32 it is plain
 * bilinear interpolation, with or without antialiasing. Per output position xx of an axis:
 *   scale  = in / out,  fs = max(1, scale),  support = fs
 *   center = (xx + 0.5) * scale
 *   lo     = (int)(center - support + 0.5) clamped to >= 0 (truncation toward zero)
 *   hi     = (int)(center + support + 0.5) clamped to <= in
 *   w[x]   = tri((x + 0.5 - center) / fs) for x in [lo, hi), then divided by their sum
 *   k[x]   = (int)(w[x] * 2^22 + 0.5)                      (22 fraction bits)
 *   out    = clamp((2^21 + sum_x in[x] * k[x]) >> 22, 0, 255)
 * Rows are resized first (horizontal pass) into an 8-bit image, which the vertical pass
 * then resizes; an axis whose size does not change is not filtered at all.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "src/data/data.h"

#define FRAC_BITS 22 /* 32 - 8 - 2: 8-bit pixels times weights fit an int with room to spare */

struct axis {
    int ksize;   /* taps reserved per output position */
    int *lo;     /* (out) first input index */
    int *cnt;    /* (out) taps used */
    int32_t *k;  /* (out * ksize) fixed-point weights */
};

static void axis_free(struct axis *a)
{
    free(a->lo);
    free(a->cnt);
    free(a->k);
}

static double triangle(double t)
{
    if (t < 0.0) t = -t;
    return t < 1.0 ? 1.0 - t : 0.0;
}

static enum adapt_status axis_make(struct axis *a, int in, int out)
{
    double scale = (double)in / out;
    double fs = scale < 1.0 ? 1.0 : scale;
    double support = fs, inv = 1.0 / fs;
    a->ksize = (int)ceil(support) * 2 + 1;
    a->lo = malloc(sizeof *a->lo * (size_t)out);
    a->cnt = malloc(sizeof *a->cnt * (size_t)out);
    a->k = calloc((size_t)out * (size_t)a->ksize, sizeof *a->k);
    double *w = malloc(sizeof *w * (size_t)a->ksize);
    if (!a->lo || !a->cnt || !a->k || !w) {
        free(w);
        axis_free(a);
        return ADAPT_ERROR(ADAPT_ENOMEM, "bilinear resize %d -> %d: cannot allocate weights",
                           in, out);
    }
    for (int xx = 0; xx < out; xx++) {
        double center = (xx + 0.5) * scale, sum = 0.0;
        int lo = (int)(center - support + 0.5), hi = (int)(center + support + 0.5);
        if (lo < 0) lo = 0;
        if (hi > in) hi = in;
        int n = hi - lo;
        for (int x = 0; x < n; x++) {
            w[x] = triangle((x + lo - center + 0.5) * inv);
            sum += w[x];
        }
        for (int x = 0; x < n; x++) {
            double v = sum != 0.0 ? w[x] / sum : w[x];
            /* round half away from zero, as a cast after adding +-0.5 */
            a->k[(size_t)xx * a->ksize + x] =
                (int32_t)(v < 0 ? -0.5 + v * (1 << FRAC_BITS) : 0.5 + v * (1 << FRAC_BITS));
        }
        a->lo[xx] = lo;
        a->cnt[xx] = n;
    }
    free(w);
    return ADAPT_OK;
}

static uint8_t fixed_to_u8(int32_t acc)
{
    if (acc < 0) return 0;
    acc >>= FRAC_BITS;
    return acc > 255 ? 255 : (uint8_t)acc;
}

/* One output sample: pixels p[lo * stride], p[(lo + 1) * stride], ... weighted by k. */
static uint8_t tap(const uint8_t *p, size_t stride, const struct axis *a, int o)
{
    const int32_t *k = a->k + (size_t)o * a->ksize;
    const uint8_t *s = p + (size_t)a->lo[o] * stride;
    int32_t acc = 1 << (FRAC_BITS - 1);
    for (int x = 0; x < a->cnt[o]; x++) acc += (int32_t)s[(size_t)x * stride] * k[x];
    return fixed_to_u8(acc);
}

enum adapt_status adapt_resize_bilinear(const uint8_t *src, int n, int sh, int sw, uint8_t *dst,
                                        int dh, int dw)
{
    if (n < 0 || sh < 1 || sw < 1 || dh < 1 || dw < 1)
        return ADAPT_ERROR(ADAPT_EINVAL, "bilinear resize of %d images %dx%d -> %dx%d: expected "
                           "positive sizes", n, sh, sw, dh, dw);
    struct axis ax = {0}, ay = {0};
    enum adapt_status st;
    int hor = dw != sw, ver = dh != sh;
    uint8_t *rows = NULL;
    if ((st = axis_make(&ax, sw, dw))) return st;
    if ((st = axis_make(&ay, sh, dh))) {
        axis_free(&ax);
        return st;
    }
    if (hor && ver && !(rows = malloc((size_t)sh * (size_t)dw))) {
        axis_free(&ay);
        axis_free(&ax);
        return ADAPT_ERROR(ADAPT_ENOMEM, "bilinear resize %dx%d -> %dx%d: cannot allocate a "
                           "row buffer", sh, sw, dh, dw);
    }
    for (int i = 0; i < n; i++) {
        const uint8_t *s = src + (size_t)i * sh * sw;
        uint8_t *d = dst + (size_t)i * dh * dw;
        const uint8_t *mid = s; /* the horizontally resized image, sh x (hor ? dw : sw) */
        int mw = sw;
        if (hor) {
            uint8_t *m = ver ? rows : d;
            for (int r = 0; r < sh; r++)
                for (int o = 0; o < dw; o++)
                    m[(size_t)r * dw + o] = tap(s + (size_t)r * sw, 1, &ax, o);
            mid = m;
            mw = dw;
        }
        if (ver) {
            for (int o = 0; o < dh; o++)
                for (int c = 0; c < mw; c++) d[(size_t)o * mw + c] = tap(mid + c, mw, &ay, o);
        } else if (!hor) {
            memcpy(d, s, (size_t)sh * sw);
        }
    }
    free(rows);
    axis_free(&ay);
    axis_free(&ax);
    return ADAPT_OK;
}
