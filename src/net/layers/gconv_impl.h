/* src/net/layers/gconv_impl.h: what the grouped and dilated convolution's forward (gconv.c) and
 * backward (gconv_backward.c) share (private to src/net/layers): the layer and its per-thread
 * workspace, the inline row moves of the stacks, and the stack and tap kernels both passes run.
 * gconv.c's opening comment describes the stacks, phases and lanes.
 */
#ifndef ADAPT_NET_GCONV_IMPL_H
#define ADAPT_NET_GCONV_IMPL_H

#include <stddef.h>

#include "src/base/hd.h"
#include "src/net/layers/layers_impl.h"

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

/* ---- gconv.c (defined with ROW_LOOPS or ADAPT_HOT_CLONES, as the comments of the row moves
 * and src/base/hd.h say) */

/* The parts of a thread's workspace at base (w NULL: only the size); its floats. */
size_t gconv_slice(const struct adapt_gconv *c, struct gconv_ws *w, float *base);
/* Zero the parts of a thread's stacks that calls with n samples read (the zeros stay: only
 * image and output positions are written afterwards). */
void gconv_zero_stacks(const struct adapt_gconv *c, const struct gconv_ws *w, int n);
/* Copy planes of nb samples, src + b*sstride (h, w), into the image positions of the input
 * stack's phases; with clear, zero those of the samples nb.. of a full stack. */
void gconv_stack_in(const struct adapt_gconv *c, const float *src, size_t sstride, int nb,
                    float *xph, size_t lq, int clear);
/* y[i] (= or +=) w0 p0[i] + w1 p1[i] + w2 p2[i] (the first n of the three), i < m */
void gconv_taps_sum(float *restrict y, const float *restrict p0, const float *restrict p1,
                    const float *restrict p2, const float *w, int n, int acc, size_t m);
/* y[i] (= or +=) sum_t w[t] p[t][i] over nine taps (a 3x3 kernel), in the order of t */
void gconv_taps9_sum(float *restrict y, const float *const *p, const float *w, int acc, size_t m);

/* ---- gconv_backward.c */

/* The layer's backward pass (struct adapt_layer_ops.backward). */
void gconv_backward(struct adapt_layer *l, const struct adapt_exec *ex, const float *const *xs,
                    const float *y, const float *dy, float *const *dxs, unsigned acc);

#endif
