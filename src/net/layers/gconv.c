/* src/net/layers/gconv.c: grouped and dilated 2-D convolution, mirroring torch.nn.Conv2d with
 * groups > 1 (depthwise when groups = Cin) or dilation d > 1: square kernel k, stride s, zero
 * padding p, taps d apart,
 * weight (Cout, Cin/groups, k, k), optional bias (Cout). Output channel o reads the input
 * channels of its group g = o / (Cout/groups):
 *   y[n, o, oy, ox] = b[o] + sum_{ic, ky, kx} W[o, ic, ky, kx] x[n, g Cin/groups + ic,
 *                                                              oy s - p + ky d, ox s - p + kx d].
 *
 * Grouped layers are thin (MobileNet's depthwise 3x3 has one input channel per output), so
 * they are computed directly rather than lowered to GEMMs. The forward pass of planes up to
 * about 38x38 puts eight samples side by side in vectors (lanes_forward below). Otherwise, and
 * in the backward pass, a channel's planes of nb samples (a "stack" of about
 * GCONV_STACK_FLOATS floats: 20 samples of a 4x4 plane with padding 1, one of a 16x16 plane)
 * are copied one under the other into a zero-filled buffer of width Ws >= W + p, each sample's
 * block Rs >= H + p rows high, the image at row and column p of its block: the zero columns
 * right of a row are the left padding of the next row, the zero rows below a sample the top
 * padding of the next one. Output element (b, oy, ox) of the stack sits at (b Rs/s + oy) Ws/s
 * + ox, so with stride 1 tap (ky, kx) is the buffer shifted by ky d Ws + kx d and every tap is
 * one contiguous, vectorised loop over the whole stack (the positions that are not outputs,
 * oy >= Hout or ox >= Wout, are computed and discarded).
 * Stride s > 1 splits the buffer into s x s phases (rows and columns taken s apart), in which
 * tap (ky, kx) is phase (ky d % s, kx d % s) shifted by (ky d / s) Ws/s + kx d / s: the same
 * contiguous loops. The zeros sit at the same places for every stack, so a stack is formed by
 * copying the image rows only.
 * The weight gradient is a set of dot products of dy, laid out as the output (zero at the
 * discarded positions), with the shifted input phases; dx, phase by phase of the buffer, sums
 * dy shifted the other way times the taps of that phase. Each output element sums its taps in
 * the order ic, ky, kx; a weight's gradient is summed in float within a stack and over the
 * stacks, in sample order, in double, and nb depends on the layer's shape only, so results do
 * not depend on the thread count. Threads split (samples, channel) pairs in forward and for dx,
 * output channels for dW; a depthwise layer of stride 1 forms dx in the dW task, from the same
 * dy stacks. The dW task reads a channel's planes sample after sample, which the hardware
 * prefetchers do not follow when the planes are small: it prefetches the next stack itself.
 * macs = Hout*Wout*Cout*(Cin/groups)*k*k; fan_in = (Cin/groups)*k*k (PyTorch's). */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/hd.h"
#include "src/net/layers/layers_impl.h"

/* floats of one stack in all phases: about this many (at least one sample). Larger stacks
 * read more planes at once, which the memory system serves worse; smaller ones pay more per
 * call. (tests/test_layers.c sizes its batches to leave partial stacks with 512.) */
#define GCONV_STACK_FLOATS 512

/* Forward of planes whose padded plane has at most this many positions (40x40: MobileNet's
 * planes up to 32x32 with padding 1): eight samples side by side (see lanes_forward); the
 * stacks serve the rest and the backward pass. (tests/test_layers.c has a larger plane.) */
#define GCONV_LANES_POS 1600

struct adapt_gconv {
    struct adapt_layer base;
    int cin, h, w, cout, k, stride, pad, groups, ho, wo, cig, cog, bias;
    int dil;      /* dilation: taps d apart */
    int rq, wq;   /* one sample's block in a phase: rq rows of wq floats (Rs/s, Ws/s) */
    int nb;       /* samples per stack */
    size_t mq;    /* floats of a stack in one phase: nb rq wq */
    size_t reach; /* largest tap shift in a phase: ((k-1) d / s) wq + (k-1) d / s */
    int threads;  /* threads the workspace is sized for */
    int *tph;     /* tap t = ky k + kx: its phase (ky d % s) s + kx d % s ... */
    int *tsh;     /* ... and shift (ky d / s) wq + kx d / s in the phase */
    int *xoff;    /* stride > 2: where input pixel y w + x of sample 0 lies in the phases */
    int lanes;    /* small planes: forward with eight samples side by side */
    int *lpos;    /* lanes: input pixel y w + x -> its position (y + p) Wp + x + p ... */
    int *lout;    /* ... output (oy, ox) -> the position of its tap (0, 0), oy s Wp + ox s ... */
    int *ltap;    /* ... tap t -> its offset from there, ky d Wp + kx d */
    int tab[];    /* tph, tsh, xoff; lpos, lout, ltap */
};

static size_t r16(size_t v)
{
    return (v + 15) & ~(size_t)15;
}

/* Per-thread workspace: the input stack's s*s phases (each mq floats and reach zeros read past
 * the end, lq floats apart), the output stack or dy laid out as the output (after reach zeros
 * read before its start), the phases of the input gradient (laid out as the input's), and the
 * weight-gradient sums of one output channel (cig k k doubles). */
struct gconv_ws {
    float *xph, *ys, *dxph;
    float *xl, *yl; /* lanes: the padded input (Hp Wp, 8) and the output (Hout Wout, 8) */
    size_t lq;      /* floats between phases of xph */
    double *dwsum;
    const float *xt[9], *yt[9]; /* 3x3 kernels: tap t of xph, and ys shifted back by tap t */
};

static size_t gconv_slice(const struct adapt_gconv *c, struct gconv_ws *w, float *base)
{
    const size_t ss = (size_t)c->stride * c->stride;
    const size_t lq = r16(c->mq + c->reach), ly = r16(c->reach) + r16(c->mq);
    const size_t ldx = ss * lq, sums = r16(2 * (size_t)c->cig * c->k * c->k);
    if (w) {
        w->xph = base;
        w->lq = lq;
        w->ys = base + ss * lq + r16(c->reach);
        w->dxph = base + ss * lq + ly;
        w->dwsum = (double *)(base + ss * lq + ly + ldx);
        if (c->k == 3)
            for (int t = 0; t < 9; t++) {
                w->xt[t] = w->xph + (size_t)c->tph[t] * lq + c->tsh[t];
                w->yt[t] = w->ys - c->tsh[t];
            }
    }
    const size_t lx = c->lanes ? r16((size_t)(c->h + 2 * c->pad) * (c->w + 2 * c->pad) * 8) : 0;
    const size_t lyo = c->lanes ? r16((size_t)c->ho * c->wo * 8) : 0;
    if (w) {
        w->xl = base + ss * lq + ly + ldx + sums;
        w->yl = w->xl + lx;
    }
    return ss * lq + ly + ldx + sums + lx + lyo;
}

static size_t gconv_workspace(const struct adapt_layer *l, int n)
{
    const struct adapt_gconv *c = (const struct adapt_gconv *)l;
    return (size_t)c->threads * gconv_slice(c, NULL, NULL);
}

/* Zero the parts of a thread's stacks that calls with n samples read (the zeros stay: only
 * image and output positions are written afterwards). */
static void zero_stacks(const struct adapt_gconv *c, const struct gconv_ws *w, int n)
{
    const size_t ss = (size_t)c->stride * c->stride;
    const size_t used = n < c->nb ? (size_t)n * c->rq * c->wq : c->mq;
    for (size_t f = 0; f < ss; f++)
        memset(w->xph + f * w->lq, 0, (used + c->reach) * sizeof(float));
    memset(w->ys - c->reach, 0, (c->reach + used) * sizeof(float));
}

typedef float v4u __attribute__((vector_size(16), aligned(4), may_alias));

/* Short rows (4..32 floats) are copied with inline vector moves (of 4 floats, which every x86-64
 * has: this code is not cloned), not calls to memcpy, which gcc would otherwise substitute for
 * the copy loops (clang has no such attribute). */
#if defined(__clang__)
#define ROW_LOOPS
#else
#define ROW_LOOPS __attribute__((optimize("no-tree-loop-distribute-patterns")))
#endif

/* d[0..n) = s[0..n) */
static inline __attribute__((always_inline)) void row_copy(float *restrict d,
                                                           const float *restrict s, int n)
{
    int i = 0;
    for (; i + 4 <= n; i += 4) *(v4u *)(d + i) = *(const v4u *)(s + i);
    for (; i < n; i++) d[i] = s[i];
}

/* d[0..n) = s[0..n) + b */
static inline __attribute__((always_inline)) void row_bias(float *restrict d,
                                                           const float *restrict s, int n, float b)
{
    int i = 0;
    for (; i + 4 <= n; i += 4) *(v4u *)(d + i) = *(const v4u *)(s + i) + b;
    for (; i < n; i++) d[i] = s[i] + b;
}

/* d[0..n) += s[0..n) */
static inline __attribute__((always_inline)) void row_add(float *restrict d,
                                                          const float *restrict s, int n)
{
    int i = 0;
    for (; i + 4 <= n; i += 4) *(v4u *)(d + i) += *(const v4u *)(s + i);
    for (; i < n; i++) d[i] += s[i];
}

typedef float v4 __attribute__((vector_size(16)));
typedef int v4i __attribute__((vector_size(16)));
#if defined(__clang__)
#define SHUF4(a, b, i0, i1, i2, i3) __builtin_shufflevector(a, b, i0, i1, i2, i3)
#else
#define SHUF4(a, b, i0, i1, i2, i3) __builtin_shuffle(a, b, (v4i){i0, i1, i2, i3})
#endif

/* Stride 2: the even columns of a row s[0..n) to ev[0..), the odd ones to od[0..) */
static inline __attribute__((always_inline)) void row_split2(float *restrict ev, float *restrict od,
                                                             const float *restrict s, int n)
{
    int x = 0;
    for (; x + 8 <= n; x += 8) {
        const v4 lo = *(const v4u *)(s + x), hi = *(const v4u *)(s + x + 4);
        *(v4u *)(ev + x / 2) = SHUF4(lo, hi, 0, 2, 4, 6);
        *(v4u *)(od + x / 2) = SHUF4(lo, hi, 1, 3, 5, 7);
    }
    for (; x + 1 < n; x += 2) {
        ev[x / 2] = s[x];
        od[x / 2] = s[x + 1];
    }
    if (x < n) ev[x / 2] = s[x];
}

/* The inverse: d[0..n) (= or +=) ev[0], od[0], ev[1], od[1], ... */
static inline __attribute__((always_inline)) void
row_merge2(float *restrict d, const float *restrict ev, const float *restrict od, int n, int acc)
{
    int x = 0;
    for (; x + 8 <= n; x += 8) {
        const v4 e = *(const v4u *)(ev + x / 2), o = *(const v4u *)(od + x / 2);
        v4 lo = SHUF4(e, o, 0, 4, 1, 5), hi = SHUF4(e, o, 2, 6, 3, 7);
        if (acc) {
            lo += *(const v4u *)(d + x);
            hi += *(const v4u *)(d + x + 4);
        }
        *(v4u *)(d + x) = lo;
        *(v4u *)(d + x + 4) = hi;
    }
    for (; x < n; x++) {
        const float v = x & 1 ? od[x / 2] : ev[x / 2];
        d[x] = acc ? d[x] + v : v;
    }
}

/* Stride 2: where the even and odd columns of input row y of a sample's block start in the
 * phases (lq floats apart) */
static inline void rows2(const struct adapt_gconv *c, size_t lq, int y, size_t *ev, size_t *od)
{
    const int p = c->pad, r = p + y;
    const size_t row = (size_t)(r & 1) * 2 * lq + (size_t)(r >> 1) * c->wq;
    *ev = row + (size_t)(p & 1) * lq + (size_t)(p >> 1);
    *od = row + (size_t)((p + 1) & 1) * lq + (size_t)((p + 1) >> 1);
}

/* d[0..n) = 0 */
static inline __attribute__((always_inline)) void row_zero(float *restrict d, int n)
{
    int i = 0;
    for (; i + 4 <= n; i += 4) *(v4u *)(d + i) = (v4u){0.0f, 0.0f, 0.0f, 0.0f};
    for (; i < n; i++) d[i] = 0.0f;
}

/* Copy planes of nb samples, src + b*sstride (h, w), into the image positions of the input
 * stack's phases; with clear, zero those of the samples nb.. of a full stack (a partial
 * stack's last sample reads into the next one's block at positions where dy is zero). */
ROW_LOOPS static void stack_in(const struct adapt_gconv *c, const float *src, size_t sstride,
                               int nb, float *xph, size_t lq, int clear)
{
    const int s = c->stride, p = c->pad, w = c->w, wq = c->wq;
    const size_t blk = (size_t)c->rq * wq, HW = (size_t)c->h * w;
    for (int b = 0; b < (clear ? c->nb : nb); b++) {
        const float *pl = b < nb ? src + (size_t)b * sstride : NULL;
        float *d = xph + b * blk;
        if (s == 1) {
            for (int y = 0; y < c->h; y++)
                if (pl)
                    row_copy(d + (size_t)(p + y) * wq + p, pl + (size_t)y * w, w);
                else
                    row_zero(d + (size_t)(p + y) * wq + p, w);
        } else if (s == 2) {
            for (int y = 0; y < c->h; y++) {
                size_t ev, od;
                rows2(c, lq, y, &ev, &od);
                if (pl) {
                    row_split2(d + ev, d + od, pl + (size_t)y * w, w);
                } else {
                    row_zero(d + ev, (w + 1) / 2);
                    row_zero(d + od, w / 2);
                }
            }
        } else if (pl) {
            for (size_t i = 0; i < HW; i++) d[c->xoff[i]] = pl[i];
        } else {
            for (size_t i = 0; i < HW; i++) d[c->xoff[i]] = 0.0f;
        }
    }
}

/* y[i] (= or +=) w0 p0[i] + w1 p1[i] + w2 p2[i] (the first n of the three), i < m */
ADAPT_HOT_CLONES static void taps_sum(float *restrict y, const float *restrict p0,
                                      const float *restrict p1, const float *restrict p2,
                                      const float *w, int n, int acc, size_t m)
{
    const float w0 = w[0], w1 = n > 1 ? w[1] : 0.0f, w2 = n > 2 ? w[2] : 0.0f;
    if (n == 3) {
        if (acc)
            for (size_t i = 0; i < m; i++) {
                float t = y[i];
                t += w0 * p0[i];
                t += w1 * p1[i];
                t += w2 * p2[i];
                y[i] = t;
            }
        else
            for (size_t i = 0; i < m; i++) {
                float t = w0 * p0[i];
                t += w1 * p1[i];
                t += w2 * p2[i];
                y[i] = t;
            }
    } else if (n == 2) {
        if (acc)
            for (size_t i = 0; i < m; i++) {
                float t = y[i];
                t += w0 * p0[i];
                t += w1 * p1[i];
                y[i] = t;
            }
        else
            for (size_t i = 0; i < m; i++) {
                float t = w0 * p0[i];
                t += w1 * p1[i];
                y[i] = t;
            }
    } else {
        if (acc)
            for (size_t i = 0; i < m; i++) y[i] += w0 * p0[i];
        else
            for (size_t i = 0; i < m; i++) y[i] = w0 * p0[i];
    }
}

/* s[j] = sum_i g[i] pj[i] for the first n of the three, i < m (in a fixed order) */
ADAPT_HOT_CLONES static void taps_dot(const float *restrict g, const float *restrict p0,
                                      const float *restrict p1, const float *restrict p2, int n,
                                      size_t m, float s[3])
{
    float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f;
    if (n == 3) {
#pragma omp simd reduction(+ : s0, s1, s2)
        for (size_t i = 0; i < m; i++) {
            s0 += g[i] * p0[i];
            s1 += g[i] * p1[i];
            s2 += g[i] * p2[i];
        }
    } else if (n == 2) {
#pragma omp simd reduction(+ : s0, s1)
        for (size_t i = 0; i < m; i++) {
            s0 += g[i] * p0[i];
            s1 += g[i] * p1[i];
        }
    } else {
#pragma omp simd reduction(+ : s0)
        for (size_t i = 0; i < m; i++) s0 += g[i] * p0[i];
    }
    s[0] = s0;
    s[1] = s1;
    s[2] = s2;
}

/* y[i] (= or +=) sum_t w[t] p[t][i] over nine taps (a 3x3 kernel), in the order of t */
ADAPT_HOT_CLONES static void taps9_sum(float *restrict y, const float *const *p, const float *w,
                                       int acc, size_t m)
{
    const float *restrict p0 = p[0], *restrict p1 = p[1], *restrict p2 = p[2];
    const float *restrict p3 = p[3], *restrict p4 = p[4], *restrict p5 = p[5];
    const float *restrict p6 = p[6], *restrict p7 = p[7], *restrict p8 = p[8];
    const float w0 = w[0], w1 = w[1], w2 = w[2], w3 = w[3], w4 = w[4], w5 = w[5], w6 = w[6],
                w7 = w[7], w8 = w[8];
    for (size_t i = 0; i < m; i++) {
        float t = acc ? y[i] + w0 * p0[i] : w0 * p0[i];
        t += w1 * p1[i];
        t += w2 * p2[i];
        t += w3 * p3[i];
        t += w4 * p4[i];
        t += w5 * p5[i];
        t += w6 * p6[i];
        t += w7 * p7[i];
        t += w8 * p8[i];
        y[i] = t;
    }
}

/* s[t] = sum_i g[i] p[t][i] over nine taps, i < m (in a fixed order) */
ADAPT_HOT_CLONES static void taps9_dot(const float *restrict g, const float *const *p, size_t m,
                                       float s[9])
{
    const float *restrict p0 = p[0], *restrict p1 = p[1], *restrict p2 = p[2];
    const float *restrict p3 = p[3], *restrict p4 = p[4], *restrict p5 = p[5];
    const float *restrict p6 = p[6], *restrict p7 = p[7], *restrict p8 = p[8];
    float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f, s4 = 0.0f, s5 = 0.0f, s6 = 0.0f, s7 = 0.0f,
          s8 = 0.0f;
#pragma omp simd reduction(+ : s0, s1, s2, s3, s4, s5, s6, s7, s8)
    for (size_t i = 0; i < m; i++) {
        const float v = g[i];
        s0 += v * p0[i];
        s1 += v * p1[i];
        s2 += v * p2[i];
        s3 += v * p3[i];
        s4 += v * p4[i];
        s5 += v * p5[i];
        s6 += v * p6[i];
        s7 += v * p7[i];
        s8 += v * p8[i];
    }
    s[0] = s0;
    s[1] = s1;
    s[2] = s2;
    s[3] = s3;
    s[4] = s4;
    s[5] = s5;
    s[6] = s6;
    s[7] = s7;
    s[8] = s8;
}

/* ys[0..m) (= or +=) the taps wk of the input stack xph, in groups of three */
static void stack_forward(const struct adapt_gconv *c, const struct gconv_ws *ws, const float *wk,
                          size_t m, int acc)
{
    const int kk = c->k * c->k;
    const float *p[3];
    int n = 0;
    if (kk == 9) {
        taps9_sum(ws->ys, ws->xt, wk, acc, m);
        return;
    }
    for (int t = 0; t < kk; t++) {
        p[n++] = ws->xph + (size_t)c->tph[t] * ws->lq + c->tsh[t];
        if (n == 3 || t == kk - 1) {
            taps_sum(ws->ys, p[0], p[n > 1], p[n - 1], wk + t + 1 - n, n, acc, m);
            acc = 1;
            n = 0;
        }
    }
}

/* ---- forward of planes up to GCONV_LANES_POS: eight samples side by side ----
 * A stack still computes 25 positions for the 16 outputs of a 4x4 plane and copies row by row
 * in and out. Here eight samples' planes are transposed, eight pixels at a time, into a padded
 * plane of vectors (position (y + p) Wp + x + p holds pixel (y, x) of the eight samples; the
 * padding is zeroed once per call), each output, of any stride and dilation, is one vector of
 * eight samples summing its taps in the order ic, ky, kx, and the output vectors are
 * transposed back into the eight planes. */
typedef float v8 __attribute__((vector_size(32)));
typedef float v8u __attribute__((vector_size(32), aligned(4), may_alias));
typedef int v8i __attribute__((vector_size(32)));
#if defined(__clang__)
#define SHUF8(a, b, ...) __builtin_shufflevector(a, b, __VA_ARGS__)
#else
#define SHUF8(a, b, ...) __builtin_shuffle(a, b, (v8i){__VA_ARGS__})
#endif

/* r[i][j] <-> r[j][i] */
static inline __attribute__((always_inline)) void tr8(v8 r[8])
{
    v8 t[8], u[8];
    for (int i = 0; i < 8; i += 2) {
        t[i] = SHUF8(r[i], r[i + 1], 0, 8, 1, 9, 4, 12, 5, 13);
        t[i + 1] = SHUF8(r[i], r[i + 1], 2, 10, 3, 11, 6, 14, 7, 15);
    }
    for (int i = 0; i < 8; i += 4) {
        u[i] = SHUF8(t[i], t[i + 2], 0, 1, 8, 9, 4, 5, 12, 13);
        u[i + 1] = SHUF8(t[i], t[i + 2], 2, 3, 10, 11, 6, 7, 14, 15);
        u[i + 2] = SHUF8(t[i + 1], t[i + 3], 0, 1, 8, 9, 4, 5, 12, 13);
        u[i + 3] = SHUF8(t[i + 1], t[i + 3], 2, 3, 10, 11, 6, 7, 14, 15);
    }
    for (int i = 0; i < 4; i++) {
        r[i] = SHUF8(u[i], u[i + 4], 0, 1, 2, 3, 8, 9, 10, 11);
        r[i + 4] = SHUF8(u[i], u[i + 4], 4, 5, 6, 7, 12, 13, 14, 15);
    }
}

/* xl[pos[i] 8 + b] = src[b][i] for the hw pixels i of eight planes */
ADAPT_HOT_CLONES static void lanes_in(float *restrict xl, const float *const *src, const int *pos,
                                      int hw)
{
    int i = 0;
    for (; i + 8 <= hw; i += 8) {
        v8 r[8];
        for (int b = 0; b < 8; b++) r[b] = *(const v8u *)(src[b] + i);
        tr8(r);
        for (int q = 0; q < 8; q++) *(v8 *)(xl + (size_t)pos[i + q] * 8) = r[q];
    }
    for (; i < hw; i++)
        for (int b = 0; b < 8; b++) xl[(size_t)pos[i] * 8 + b] = src[b][i];
}

/* dst[b][i] = yl[i 8 + b] + bias for the p outputs i of the first nb planes */
ADAPT_HOT_CLONES static void lanes_out(float *const *dst, int nb, const float *restrict yl, int p,
                                       float bias)
{
    int i = 0;
    for (; i + 8 <= p; i += 8) {
        v8 r[8];
        for (int q = 0; q < 8; q++) r[q] = *(const v8 *)(yl + (size_t)(i + q) * 8);
        tr8(r);
        for (int b = 0; b < nb; b++) *(v8u *)(dst[b] + i) = r[b] + bias;
    }
    for (; i < p; i++)
        for (int b = 0; b < nb; b++) dst[b][i] = yl[(size_t)i * 8 + b] + bias;
}

/* yl[q] (= or +=) sum_t wk[t] xl[lout[q] + ltap[t]] over the p outputs q, eight samples each */
ADAPT_HOT_CLONES static void lanes_taps(float *restrict yl, const float *restrict xl,
                                        const int *lout, const int *ltap, const float *wk, int kk,
                                        int p, int acc)
{
    if (kk == 9) {
        const float w0 = wk[0], w1 = wk[1], w2 = wk[2], w3 = wk[3], w4 = wk[4], w5 = wk[5],
                    w6 = wk[6], w7 = wk[7], w8 = wk[8];
        const size_t o0 = (size_t)ltap[0] * 8, o1 = (size_t)ltap[1] * 8, o2 = (size_t)ltap[2] * 8,
                     o3 = (size_t)ltap[3] * 8, o4 = (size_t)ltap[4] * 8, o5 = (size_t)ltap[5] * 8,
                     o6 = (size_t)ltap[6] * 8, o7 = (size_t)ltap[7] * 8, o8 = (size_t)ltap[8] * 8;
        for (int q = 0; q < p; q++) {
            const float *x0 = xl + (size_t)lout[q] * 8;
            v8 t = *(const v8 *)(x0 + o0) * w0;
            if (acc) t = *(const v8 *)(yl + (size_t)q * 8) + t;
            t += *(const v8 *)(x0 + o1) * w1;
            t += *(const v8 *)(x0 + o2) * w2;
            t += *(const v8 *)(x0 + o3) * w3;
            t += *(const v8 *)(x0 + o4) * w4;
            t += *(const v8 *)(x0 + o5) * w5;
            t += *(const v8 *)(x0 + o6) * w6;
            t += *(const v8 *)(x0 + o7) * w7;
            t += *(const v8 *)(x0 + o8) * w8;
            *(v8 *)(yl + (size_t)q * 8) = t;
        }
        return;
    }
    for (int q = 0; q < p; q++) {
        const float *x0 = xl + (size_t)lout[q] * 8;
        v8 t = *(const v8 *)(x0 + (size_t)ltap[0] * 8) * wk[0];
        if (acc) t = *(const v8 *)(yl + (size_t)q * 8) + t;
        for (int k = 1; k < kk; k++) t += *(const v8 *)(x0 + (size_t)ltap[k] * 8) * wk[k];
        *(v8 *)(yl + (size_t)q * 8) = t;
    }
}

static void lanes_forward(const struct adapt_gconv *c, const struct adapt_exec *ex, const float *x,
                          const float *w, const float *b, float *y)
{
    const int n = ex->n, cout = c->cout, kk = c->k * c->k;
    const int nq = (n + 7) / 8, hw = c->h * c->w, P = c->ho * c->wo;
    const size_t slice = gconv_slice(c, NULL, NULL);
#pragma omp parallel num_threads(c->threads)
    {
        struct gconv_ws ws;
        gconv_slice(c, &ws, ex->ws + (size_t)omp_get_thread_num() * slice);
        memset(ws.xl, 0, (size_t)(c->h + 2 * c->pad) * (c->w + 2 * c->pad) * 8 * sizeof(float));
#pragma omp for collapse(2) schedule(static)
        for (int q = 0; q < nq; q++)
            for (int o = 0; o < cout; o++) {
                const int j0 = q * 8, nb = n - j0 < 8 ? n - j0 : 8;
                const int g = o / c->cog;
                const float *src[8];
                float *dst[8];
                for (int ic = 0; ic < c->cig; ic++) {
                    const int ci = g * c->cig + ic;
                    /* the lanes past a partial octet repeat its first sample */
                    for (int j = 0; j < 8; j++)
                        src[j] = x + ((size_t)(j0 + (j < nb ? j : 0)) * c->cin + ci) * hw;
                    lanes_in(ws.xl, src, c->lpos, hw);
                    lanes_taps(ws.yl, ws.xl, c->lout, c->ltap, w + ((size_t)o * c->cig + ic) * kk,
                               kk, P, ic > 0);
                }
                for (int j = 0; j < nb; j++) dst[j] = y + ((size_t)(j0 + j) * cout + o) * P;
                lanes_out(dst, nb, ws.yl, P, b ? b[o] : 0.0f);
            }
    }
}

ROW_LOOPS static void gconv_forward(struct adapt_layer *l, const struct adapt_exec *ex,
                                    const float *const *xs, float *y)
{
    struct adapt_gconv *c = (struct adapt_gconv *)l;
    const float *w = adapt_param_in_use(&l->param[0]);
    const float *b = c->bias ? adapt_param_in_use(&l->param[1]) : NULL;
    const float *x = xs[0];
    const int n = ex->n, cout = c->cout, kk = c->k * c->k, wq = c->wq;
    const int nstk = (n + c->nb - 1) / c->nb;
    const size_t HW = (size_t)c->h * c->w, P = (size_t)c->ho * c->wo;
    const size_t slice = gconv_slice(c, NULL, NULL);
    ADAPT_ASSERT(ex->ws != NULL);
    if (c->lanes) {
        lanes_forward(c, ex, x, w, b, y);
        return;
    }
#pragma omp parallel num_threads(c->threads)
    {
        struct gconv_ws ws;
        gconv_slice(c, &ws, ex->ws + (size_t)omp_get_thread_num() * slice);
        zero_stacks(c, &ws, n);
#pragma omp for collapse(2) schedule(static)
        for (int st = 0; st < nstk; st++)
            for (int o = 0; o < cout; o++) {
                const int j0 = st * c->nb, nb = n - j0 < c->nb ? n - j0 : c->nb;
                const int g = o / c->cog;
                const size_t m = (size_t)nb * c->rq * wq;
                for (int ic = 0; ic < c->cig; ic++) {
                    const int ci = g * c->cig + ic;
                    stack_in(c, x + ((size_t)j0 * c->cin + ci) * HW, (size_t)c->cin * HW, nb,
                             ws.xph, ws.lq, 0);
                    stack_forward(c, &ws, w + ((size_t)o * c->cig + ic) * kk, m, ic > 0);
                }
                const float b0 = b ? b[o] : 0.0f;
                for (int j = 0; j < nb; j++) {
                    float *yo = y + ((size_t)(j0 + j) * cout + o) * P;
                    const float *sr = ws.ys + (size_t)j * c->rq * wq;
                    for (int oy = 0; oy < c->ho; oy++)
                        if (b)
                            row_bias(yo + (size_t)oy * c->wo, sr + (size_t)oy * wq, c->wo, b0);
                        else
                            row_copy(yo + (size_t)oy * c->wo, sr + (size_t)oy * wq, c->wo);
                }
            }
    }
}

/* dy of one output channel for nb samples into its output positions of ys (the others stay
 * zero) */
ROW_LOOPS static void dy_in(const struct adapt_gconv *c, const float *dyo, size_t sstride, int nb,
                            float *ys)
{
    for (int j = 0; j < nb; j++) {
        const float *sr = dyo + (size_t)j * sstride;
        float *d = ys + (size_t)j * c->rq * c->wq;
        for (int oy = 0; oy < c->ho; oy++)
            row_copy(d + (size_t)oy * c->wq, sr + (size_t)oy * c->wo, c->wo);
    }
}

/* sum of g[0..m) in a fixed order */
ADAPT_HOT_CLONES static float plane_sum(const float *g, size_t m)
{
    float t = 0.0f;
#pragma omp simd reduction(+ : t)
    for (size_t i = 0; i < m; i++) t += g[i];
    return t;
}

/* Prefetch the planes of the stack of samples j0.. (at most nb, fewer than n - j0) that the
 * weight gradient of output channel o (group g) reads next: x of the group's input channels,
 * dy of channel o. (Inlined: gcc deems a function that only prefetches free of effects and
 * drops its calls.) */
static inline __attribute__((always_inline)) void prefetch_stack(const struct adapt_gconv *c,
                                                                 const float *x, const float *dy,
                                                                 int j0, int n, int g, int o)
{
    const size_t HW = (size_t)c->h * c->w, P = (size_t)c->ho * c->wo;
    const int nb = n - j0 < c->nb ? n - j0 : c->nb;
    for (int j = 0; j < nb; j++) {
        const char *px = (const char *)(x + ((size_t)(j0 + j) * c->cin + (size_t)g * c->cig) * HW);
        const char *pd = (const char *)(dy + ((size_t)(j0 + j) * c->cout + o) * P);
        for (size_t q = 0; q < HW * c->cig * sizeof(float); q += 64) __builtin_prefetch(px + q);
        for (size_t q = 0; q < P * sizeof(float); q += 64) __builtin_prefetch(pd + q);
    }
}

/* The phases of the input gradient of a stack (= or += over the output channels of a group):
 * phase f sums dy (ys) shifted back by each tap of that phase times its weight wk */
static void stack_dx(const struct adapt_gconv *c, const struct gconv_ws *ws, const float *wk,
                     int acc, size_t m)
{
    const int kk = c->k * c->k, ss = c->stride * c->stride;
    if (ss == 1 && kk == 9) {
        taps9_sum(ws->dxph, ws->yt, wk, acc, m);
        return;
    }
    for (int f = 0; f < ss; f++) {
        float *d = ws->dxph + (size_t)f * ws->lq;
        const float *pt[3];
        float wt[3];
        int nt = 0, any = acc;
        for (int t = 0; t < kk; t++) {
            if (c->tph[t] != f) continue;
            pt[nt] = ws->ys - c->tsh[t];
            wt[nt++] = wk[t];
            if (nt == 3) {
                taps_sum(d, pt[0], pt[1], pt[2], wt, 3, any, m);
                any = 1;
                nt = 0;
            }
        }
        if (nt) {
            taps_sum(d, pt[0], pt[nt > 1], pt[nt - 1], wt, nt, any, m);
            any = 1;
        }
        if (!any) memset(d, 0, m * sizeof *d);
    }
}

/* dx planes (h, w) of nb samples, dxc + j*sstride, (= or += with acc) the image positions of
 * the input-gradient phases */
ROW_LOOPS static void dx_out(const struct adapt_gconv *c, const struct gconv_ws *ws, float *dxc,
                             size_t sstride, int nb, unsigned acc)
{
    const int s = c->stride, p = c->pad, w = c->w, wq = c->wq;
    const size_t HW = (size_t)c->h * w;
    for (int j = 0; j < nb; j++, dxc += sstride) {
        const float *sr = ws->dxph + (size_t)j * c->rq * wq;
        if (s == 1) {
            for (int yy = 0; yy < c->h; yy++) {
                const float *r = sr + (size_t)(p + yy) * wq + p;
                if (acc)
                    row_add(dxc + (size_t)yy * w, r, w);
                else
                    row_copy(dxc + (size_t)yy * w, r, w);
            }
        } else if (s == 2) {
            for (int yy = 0; yy < c->h; yy++) {
                size_t ev, od;
                rows2(c, ws->lq, yy, &ev, &od);
                row_merge2(dxc + (size_t)yy * w, sr + ev, sr + od, w, acc);
            }
        } else if (acc) {
            for (size_t i = 0; i < HW; i++) dxc[i] += sr[c->xoff[i]];
        } else {
            for (size_t i = 0; i < HW; i++) dxc[i] = sr[c->xoff[i]];
        }
    }
}

static void gconv_backward(struct adapt_layer *l, const struct adapt_exec *ex,
                           const float *const *xs, const float *y, const float *dy,
                           float *const *dxs, unsigned acc)
{
    struct adapt_gconv *c = (struct adapt_gconv *)l;
    const float *w = adapt_param_in_use(&l->param[0]);
    float *dw = l->param[0].grad.data;
    float *db = c->bias ? l->param[1].grad.data : NULL;
    const float *x = xs[0];
    float *dx = dxs[0];
    const int n = ex->n, cout = c->cout, kk = c->k * c->k, wq = c->wq;
    const int nstk = (n + c->nb - 1) / c->nb;
    /* depthwise with stride 1 (one input and one output channel per group, dx planes no larger
     * than dy's): dx of a channel's stack is formed from the dy stack the weight gradient uses,
     * in the same task, saving a second pass over dy; otherwise the (stack, channel) order of a
     * separate pass writes dx in memory order, which is faster when dx is the larger */
    const int fused = dx && c->cig == 1 && c->cog == 1 && c->stride == 1;
    const size_t HW = (size_t)c->h * c->w, P = (size_t)c->ho * c->wo;
    const size_t slice = gconv_slice(c, NULL, NULL);
    /* the weight gradient reads a channel's planes sample after sample, cin planes apart: the
     * hardware does not see that stream when a plane is shorter than a page */
    const int pf = HW * c->cig * sizeof(float) < 4096;
    ADAPT_ASSERT(ex->ws != NULL);
#pragma omp parallel num_threads(c->threads)
    {
        struct gconv_ws ws;
        gconv_slice(c, &ws, ex->ws + (size_t)omp_get_thread_num() * slice);
        zero_stacks(c, &ws, n);
        /* weight and bias gradients: one output channel per task, stacks in order */
#pragma omp for schedule(static)
        for (int o = 0; o < cout; o++) {
            const int g = o / c->cog;
            double sb = 0.0;
            for (int i = 0; i < c->cig * kk; i++) ws.dwsum[i] = 0.0;
            for (int st = 0; st < nstk; st++) {
                const int j0 = st * c->nb, nb = n - j0 < c->nb ? n - j0 : c->nb;
                const size_t m = (size_t)nb * c->rq * wq;
                const float *dyo = dy + ((size_t)j0 * cout + o) * P;
                if (pf && st + 1 < nstk) prefetch_stack(c, x, dy, j0 + c->nb, n, g, o);
                dy_in(c, dyo, (size_t)cout * P, nb, ws.ys);
                if (db)
                    for (int j = 0; j < nb; j++) sb += plane_sum(dyo + (size_t)j * cout * P, P);
                for (int ic = 0; ic < c->cig; ic++) {
                    const int ci = g * c->cig + ic;
                    stack_in(c, x + ((size_t)j0 * c->cin + ci) * HW, (size_t)c->cin * HW, nb,
                             ws.xph, ws.lq, nb < c->nb);
                    double *sum = ws.dwsum + (size_t)ic * kk;
                    const float *pt[3];
                    int nt = 0;
                    if (kk == 9) {
                        float r[9];
                        taps9_dot(ws.ys, ws.xt, m, r);
                        for (int t = 0; t < 9; t++) sum[t] += r[t];
                        continue;
                    }
                    for (int t = 0; t < kk; t++) {
                        pt[nt++] = ws.xph + (size_t)c->tph[t] * ws.lq + c->tsh[t];
                        if (nt == 3 || t == kk - 1) {
                            float r[3];
                            taps_dot(ws.ys, pt[0], pt[nt > 1], pt[nt - 1], nt, m, r);
                            for (int i = 0; i < nt; i++) sum[t + 1 - nt + i] += r[i];
                            nt = 0;
                        }
                    }
                }
                if (fused) {
                    stack_dx(c, &ws, w + (size_t)o * kk, 0, m);
                    dx_out(c, &ws, dx + ((size_t)j0 * c->cin + o) * HW, (size_t)c->cin * HW, nb,
                           acc & 1u);
                }
            }
            for (int i = 0; i < c->cig * kk; i++)
                dw[(size_t)o * c->cig * kk + i] += (float)ws.dwsum[i];
            if (db) db[o] += (float)sb;
        }
        /* input gradients: one (stack, input channel) per task */
        if (dx && !fused) {
#pragma omp for collapse(2) schedule(static)
            for (int st = 0; st < nstk; st++)
                for (int ci = 0; ci < c->cin; ci++) {
                    const int j0 = st * c->nb, nb = n - j0 < c->nb ? n - j0 : c->nb;
                    const int g = ci / c->cig, ic = ci % c->cig;
                    const size_t m = (size_t)nb * c->rq * wq;
                    for (int oo = 0; oo < c->cog; oo++) {
                        const int o = g * c->cog + oo;
                        dy_in(c, dy + ((size_t)j0 * cout + o) * P, (size_t)cout * P, nb, ws.ys);
                        stack_dx(c, &ws, w + ((size_t)o * c->cig + ic) * kk, oo > 0, m);
                    }
                    dx_out(c, &ws, dx + ((size_t)j0 * c->cin + ci) * HW, (size_t)c->cin * HW, nb,
                           acc & 1u);
                }
        }
    }
    (void)y;
}

static const struct adapt_layer_ops gconv_ops = {
    "conv2d", gconv_forward, gconv_backward, gconv_workspace, NULL, NULL,
};

struct adapt_layer *adapt_gconv2d_create(const char *name, const int in_chw[3], int cout, int k,
                                         int stride, int pad, int groups, int dilation, int bias)
{
    int64_t span = dilation >= 1 && k >= 1 ? (int64_t)(k - 1) * dilation + 1 : 0;
    if (groups < 1 || cout < 1 || in_chw[0] % groups || cout % groups || k < 1 || stride < 1 ||
        pad < 0 || dilation < 1 || (int64_t)in_chw[1] + 2 * pad < span ||
        (int64_t)in_chw[2] + 2 * pad < span) {
        ADAPT_ERROR(ADAPT_EINVAL,
                    "%s: bad grouped conv2d (in %dx%dx%d, out %d, k %d, stride %d, pad %d, "
                    "groups %d, dilation %d: groups must divide both channel counts, the "
                    "dilated kernel fit the padded input)",
                    name ? name : "?", in_chw[0], in_chw[1], in_chw[2], cout, k, stride, pad,
                    groups, dilation);
        return NULL;
    }
    /* int sizes: the weight tensor (and so Cin/groups*k*k), the padded input plane; the
     * phase offsets are checked below */
    const int64_t hp = (int64_t)in_chw[1] + 2 * pad, wp64 = (int64_t)in_chw[2] + 2 * pad;
    if ((int64_t)cout * (in_chw[0] / groups) * k * k > INT_MAX || hp * wp64 > INT_MAX) {
        ADAPT_ERROR(ADAPT_EINVAL,
                    "%s: conv2d out %d kernel %d padding %d groups %d on input (%d, %d, %d): a "
                    "weight tensor or padded plane of more than %d elements",
                    name ? name : "?", cout, k, pad, groups, in_chw[0], in_chw[1], in_chw[2],
                    INT_MAX);
        return NULL;
    }
    const size_t HW = (size_t)in_chw[1] * in_chw[2], kk = (size_t)k * k;
    const int ho = (int)((hp - span) / stride + 1);
    const int wo = (int)((wp64 - span) / stride + 1);
    const int lanes = hp * wp64 <= GCONV_LANES_POS;
    const size_t ntab = 2 * kk + (stride > 2 ? HW : 0) + (lanes ? HW + (size_t)ho * wo + kk : 0);
    struct adapt_gconv *c = calloc(1, sizeof *c + ntab * sizeof(int));
    if (!c) {
        ADAPT_ERROR(ADAPT_ENOMEM, "%s: cannot allocate a conv2d layer", name ? name : "?");
        return NULL;
    }
    struct adapt_layer *l = &c->base;
    if (adapt_layer_setup(l, &gconv_ops, name, 1, in_chw) != ADAPT_OK) {
        free(c);
        return NULL;
    }
    c->cin = in_chw[0];
    c->h = in_chw[1];
    c->w = in_chw[2];
    c->cout = cout;
    c->k = k;
    c->stride = stride;
    c->pad = pad;
    c->groups = l->groups = groups;
    c->dil = l->dilation = dilation;
    c->ho = ho;
    c->wo = wo;
    c->cig = c->cin / groups;
    c->cog = cout / groups;
    c->bias = bias != 0;
    /* a sample's block: Rs >= H + p rows (the zeros below it are the next block's top
     * padding) and >= Hout s (its outputs), Ws likewise; both multiples of s */
    {
        const int s = stride;
        int rs = c->h + pad > c->ho * s ? c->h + pad : c->ho * s;
        int ws = c->w + pad > c->wo * s ? c->w + pad : c->wo * s;
        c->rq = (rs + s - 1) / s;
        c->wq = (ws + s - 1) / s;
        const size_t blk = (size_t)c->rq * c->wq * s * s;
        c->nb = blk >= GCONV_STACK_FLOATS ? 1 : (int)(GCONV_STACK_FLOATS / blk);
        c->mq = (size_t)c->nb * c->rq * c->wq;
        c->reach = (size_t)((k - 1) * dilation / s) * c->wq + (size_t)((k - 1) * dilation / s);
        const size_t lq = r16(c->mq + c->reach);
        if ((size_t)s * s * lq > INT_MAX) { /* the largest of xoff and tsh */
            ADAPT_ERROR(ADAPT_EINVAL,
                        "%s: conv2d stride %d dilation %d on input (%d, %d, %d): phases of "
                        "more than %d elements",
                        name ? name : "?", stride, dilation, in_chw[0], in_chw[1], in_chw[2],
                        INT_MAX);
            free(c);
            return NULL;
        }
        c->tph = c->tab;
        c->tsh = c->tab + kk;
        c->xoff = c->tab + 2 * kk;
        for (int t = 0; t < (int)kk; t++) {
            const int ty = t / k * dilation, tx = t % k * dilation;
            c->tph[t] = ty % s * s + tx % s;
            c->tsh[t] = ty / s * c->wq + tx / s;
        }
        if (s > 2)
            for (int y = 0; y < c->h; y++)
                for (int x = 0; x < c->w; x++) {
                    const int r = pad + y, cc = pad + x;
                    c->xoff[y * c->w + x] =
                        (int)((size_t)(r % s * s + cc % s) * lq + (size_t)(r / s) * c->wq + cc / s);
                }
        c->lanes = lanes;
        c->lpos = c->xoff + (s > 2 ? HW : 0);
        c->lout = c->lpos + (lanes ? HW : 0);
        c->ltap = c->lout + (lanes ? (size_t)ho * wo : 0);
        if (lanes) {
            const int wp = c->w + 2 * pad;
            for (int i = 0; i < (int)HW; i++) c->lpos[i] = (i / c->w + pad) * wp + i % c->w + pad;
            for (int i = 0; i < ho * wo; i++) c->lout[i] = i / wo * s * wp + i % wo * s;
            for (int t = 0; t < (int)kk; t++) c->ltap[t] = t / k * dilation * wp + t % k * dilation;
        }
    }
    c->threads = omp_get_max_threads();
    l->out_dim[0] = cout;
    l->out_dim[1] = c->ho;
    l->out_dim[2] = c->wo;
    int fan_in = c->cig * k * k;
    int wdim[4] = {cout, c->cig, k, k};
    adapt_layer_param_add(l, "weight", ADAPT_PARAM_WEIGHT, 4, wdim, fan_in);
    if (c->bias) adapt_layer_param_add(l, "bias", ADAPT_PARAM_BIAS, 1, &cout, fan_in);
    l->macs = (int64_t)c->ho * c->wo * cout * fan_in;
    l->is_unit = 1;
    l->k = k;
    l->stride = stride;
    l->pad = pad;
    return l;
}
