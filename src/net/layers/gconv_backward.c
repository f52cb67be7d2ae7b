/* src/net/layers/gconv_backward.c: the backward pass of the grouped and dilated 2-D convolution
 * (gconv.c, whose opening comment describes the stacks and their phases): the weight and bias
 * gradients, one output channel per task, as dot products of dy laid out as the output with the
 * shifted input phases; the input gradient, phase by phase, from dy shifted the other way. */
#include <stddef.h>
#include <string.h>

#include "src/base/hd.h"
#include "src/net/layers/gconv_impl.h"
#include "src/net/layers/layers_impl.h"

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
        gconv_taps9_sum(ws->dxph, ws->yt, wk, acc, m);
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
                gconv_taps_sum(d, pt[0], pt[1], pt[2], wt, 3, any, m);
                any = 1;
                nt = 0;
            }
        }
        if (nt) {
            gconv_taps_sum(d, pt[0], pt[nt > 1], pt[nt - 1], wt, nt, any, m);
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

void gconv_backward(struct adapt_layer *l, const struct adapt_exec *ex, const float *const *xs,
                    const float *y, const float *dy, float *const *dxs, unsigned acc)
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
        gconv_zero_stacks(c, &ws, n);
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
                    gconv_stack_in(c, x + ((size_t)j0 * c->cin + ci) * HW, (size_t)c->cin * HW, nb,
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
