/* src/net/layers/conv2d.c: 2-D convolution, mirroring torch.nn.Conv2d with
 * square kernel k, stride s, zero padding p, dilation 1, groups 1 and an
 * optional bias: weight (Cout, Cin, k, k), bias (Cout),
 * y[n, o] = b[o] + sum_{c, ky, kx} W[o, c, ky, kx] x[n, c, oy*s - p + ky, ox*s - p + kx].
 *
 * Three ways of computing it, chosen at construction from the shapes:
 *
 * - lowered (the general case): one sample at a time per thread, its im2col
 *   matrix col (Cin*k*k, P), P = Hout*Wout, built in the thread's slice of
 *   the workspace (it fits the core's L2 cache), then products with the
 *   broadcast GEMM of gemm.c, which reads the NCHW tensors in place:
 *     forward   y_n (Cout, P) = W (Cout, Cin*k*k) col + b
 *     backward  dW^T (Cin*k*k, Cout) += col dy_n^T   (per thread, summed at the end)
 *               dcol = W^T dy_n;  dx_n = col2im(dcol)
 *   col is rebuilt in backward rather than kept (it is k*k times the input).
 *
 * - dense: when the input plane is no larger than the kernel (H*W <= k*k,
 *   AlexNet-CIFAR's 4x4 and 2x2 layers), the convolution is a fully
 *   connected layer on the flat input with the expanded weight
 *   W' (Cout*P, Cin*H*W) (W'[(o,p), (c,q)] = W[o, c, tap(p, q)] or 0),
 *   built once per forward into l->saved:
 *     y^T = W' x^T + b;  dx = dy W';  dW' = dy^T x, folded back into dW
 *   (dW' a few output channels at a time, while the block is in cache).
 *   Padding taps are never multiplied (im2col would spend 5/9 of its
 *   products on them for a 2x2 input with a 3x3 kernel) and all three
 *   products are large, well-shaped GEMMs.
 *
 * - fully connected: the kernel covers the whole unpadded input (Hout =
 *   Wout = 1, LeNet-5's C5): W' = W, computed by fc.c (OpenBLAS).
 *
 * Results do not depend on how samples are spread over threads except in
 * dW and db, whose per-thread partial sums are added in thread order.
 * macs = Hout*Wout*Cout*Cin*k*k; fan_in of weight and bias = Cin*k*k
 * (PyTorch's default initialisation bounds use it). */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/hd.h"
#include "src/net/layers/layers_impl.h"
#include "src/net/layers/transpose16.h"

enum conv_mode { CONV_LOWERED = 0, CONV_DENSE, CONV_FC };

/* Largest expanded weight of the dense mode, in floats (16 MiB). */
#define CONV_DENSE_MAX (4u << 20)
/* Output channels whose rows of dW' are computed and folded together (a
 * block of DENSE_GROUP*P rows of Cin*H*W floats: 512 KiB for AlexNet conv2). */
#define DENSE_GROUP 8

struct adapt_conv {
    struct adapt_layer base;
    struct adapt_conv_geom g;
    enum conv_mode mode;
    int cout, bias;
    int ckk;    /* Cin*k*k */
    int P, Pp;  /* Hout*Wout, rounded up to 16 */
    int ldp;    /* row stride of col and tmp: Pp, or Pp + 16 so that rows are an odd
                 * number of cache lines apart (rows 4 KiB apart share L1 sets) */
    int coutp;  /* Cout rounded up to 16 */
    int Q, CQ;  /* dense: H*W and Cin*H*W */
    int32_t *gidx, *toff, *tcnt; /* dense: index tables (dense_tables) */
    int threads; /* threads the workspace is sized for */
};

static size_t r16(size_t v) { return (v + 15) & ~(size_t)15; }

/* this thread's share [lo, hi) of total items, in multiples of align */
static void split(int total, int align, int t, int T, int *lo, int *hi)
{
    int units = (total + align - 1) / align;
    int per = units / T, extra = units % T;
    int u0 = t * per + (t < extra ? t : extra);
    int u1 = u0 + per + (t < extra);
    *lo = u0 * align < total ? u0 * align : total;
    *hi = u1 * align < total ? u1 * align : total;
}

/* ------------------------------------------------------------------ lowered */

/* Per-thread workspace slice: col (ckk, ldp) | dyT (P, coutp) | tmp (cout, ldp)
 * | dWT (ckk, coutp) | db (coutp doubles) | padded plane for im2col. */
struct lowered_ws {
    float *col, *dyT, *tmp, *dwT;
    double *db;
    float *pad;
};

static size_t lowered_slice(const struct adapt_conv *c, struct lowered_ws *w, float *base)
{
    size_t off = 0;
    size_t ncol = r16((size_t)c->ckk * c->ldp), ndyt = r16((size_t)c->P * c->coutp);
    size_t ntmp = r16((size_t)c->cout * c->ldp), ndw = r16((size_t)c->ckk * c->coutp);
    size_t ndb = r16(2 * (size_t)c->coutp), npad = r16(adapt_im2col_scratch(&c->g));
    if (w) {
        w->col = base + off;
        w->dyT = base + (off += ncol);
        w->tmp = base + (off += ndyt);
        w->dwT = base + (off += ntmp);
        w->db = (double *)(base + (off += ndw));
        w->pad = base + (off += ndb);
        off += npad;
    } else {
        off = ncol + ndyt + ntmp + ndw + ndb + npad;
    }
    return off;
}

static void lowered_forward(struct adapt_conv *c, const struct adapt_exec *ex, const float *x,
                            float *y)
{
    struct adapt_layer *l = &c->base;
    const float *w = adapt_param_in_use(&l->param[0]);
    const float *b = c->bias ? adapt_param_in_use(&l->param[1]) : NULL;
    const size_t in_numel = adapt_layer_in_numel(l, 0), P = (size_t)c->P;
    const size_t slice = lowered_slice(c, NULL, NULL);
    const int n = ex->n, cout = c->cout, ckk = c->ckk, Pp = c->Pp, ldp = c->ldp;
    const int init = b ? ADAPT_GEMM_BIAS : ADAPT_GEMM_ZERO;
    ADAPT_ASSERT(ex->ws != NULL);
#pragma omp parallel num_threads(c->threads)
    {
        struct lowered_ws ws;
        lowered_slice(c, &ws, ex->ws + (size_t)omp_get_thread_num() * slice);
#pragma omp for schedule(static)
        for (int j = 0; j < n; j++) {
            float *yj = y + (size_t)j * cout * P;
            adapt_im2col_sample(&c->g, x + (size_t)j * in_numel, ws.col, (size_t)ldp, ws.pad);
            if (P == (size_t)Pp) {
                adapt_gemm_bcast(cout, Pp, ckk, w, ckk, 1, ws.col, ldp, yj, (ptrdiff_t)P, init, b);
            } else {
                adapt_gemm_bcast(cout, Pp, ckk, w, ckk, 1, ws.col, ldp, ws.tmp, ldp, init, b);
                for (int o = 0; o < cout; o++)
                    memcpy(yj + o * P, ws.tmp + (size_t)o * ldp, P * sizeof(float));
            }
        }
    }
}

/* dyT (P, coutp) = dy_n^T (columns cout..coutp-1 untouched); db += row sums */
ADAPT_HOT_CLONES static void transpose_rows(const float *dy, int cout, size_t P, float *dyT,
                                            int coutp, double *db)
{
    for (int o = 0; o < cout; o++) db[o] += adapt_sum_f32(dy + (size_t)o * P, P);
    size_t p0 = 0;
    for (; p0 + 16 <= P; p0 += 16)
        for (int o0 = 0; o0 < cout; o0 += 16) {
            v16 r[16];
            const int m = cout - o0 < 16 ? cout - o0 : 16;
#pragma GCC unroll 16
            for (int i = 0; i < 16; i++)
                r[i] = i < m ? (v16) * (const v16u *)(dy + (size_t)(o0 + i) * P + p0) : (v16){0};
            transpose16(r);
#pragma GCC unroll 16
            for (int q = 0; q < 16; q++) *(v16u *)(dyT + (p0 + q) * coutp + o0) = r[q];
        }
    for (; p0 < P; p0++)
        for (int o = 0; o < cout; o++) dyT[p0 * coutp + o] = dy[(size_t)o * P + p0];
}

/* dW += and db += (each when not NULL; db only with dW) from x and dy, dx (+)= from w and dy
 * (when not NULL) */
static void lowered_backward_ops(struct adapt_conv *c, const struct adapt_exec *ex, const float *x,
                                 const float *dy, const float *w, float *dw, float *db, float *dx,
                                 int acc)
{
    struct adapt_layer *l = &c->base;
    const size_t in_numel = adapt_layer_in_numel(l, 0), P = (size_t)c->P;
    const size_t slice = lowered_slice(c, NULL, NULL);
    const int n = ex->n, cout = c->cout, coutp = c->coutp, ckk = c->ckk, Pp = c->Pp;
    const int ldp = c->ldp;
    ADAPT_ASSERT(ex->ws != NULL && (dw != NULL || db == NULL));
#pragma omp parallel num_threads(c->threads)
    {
        const int t = omp_get_thread_num(), nt = omp_get_num_threads();
        struct lowered_ws ws;
        lowered_slice(c, &ws, ex->ws + (size_t)t * slice);
        memset(ws.dwT, 0, (size_t)ckk * coutp * sizeof(float));
        memset(ws.dyT, 0, P * coutp * sizeof(float)); /* padding columns stay 0 */
        for (int o = 0; o < coutp; o++) ws.db[o] = 0.0;
#pragma omp for schedule(static)
        for (int j = 0; j < n; j++) {
            const float *dyj = dy + (size_t)j * cout * P;
            if (dw) {
                transpose_rows(dyj, cout, P, ws.dyT, coutp, ws.db);
                adapt_im2col_sample(&c->g, x + (size_t)j * in_numel, ws.col, (size_t)ldp, ws.pad);
                /* dW^T (ckk, coutp) += col (ckk, P) dy_n^T (P, coutp) */
                adapt_gemm_bcast(ckk, coutp, (int)P, ws.col, ldp, 1, ws.dyT, coutp, ws.dwT, coutp,
                                 ADAPT_GEMM_ACC, NULL);
            }
            if (!dx) continue;
            /* dy_n with rows ldp apart (and zero padding columns) */
            for (int o = 0; o < cout; o++) {
                memcpy(ws.tmp + (size_t)o * ldp, dyj + o * P, P * sizeof(float));
                memset(ws.tmp + (size_t)o * ldp + P, 0, (Pp - P) * sizeof(float));
            }
            /* dcol (ckk, Pp) = W^T (ckk, cout) dy_n (cout, Pp), into col */
            adapt_gemm_bcast(ckk, Pp, cout, w, 1, ckk, ws.tmp, ldp, ws.col, ldp, ADAPT_GEMM_ZERO,
                             NULL);
            adapt_col2im_sample(&c->g, ws.col, (size_t)ldp, dx + (size_t)j * in_numel, acc, ws.pad);
        }
        /* implicit barrier: every thread's partial sums are complete; add
         * them in thread order, rows of dW^T split over the threads */
        if (dw) {
            struct lowered_ws wu[nt];
            for (int u = 0; u < nt; u++) lowered_slice(c, &wu[u], ex->ws + (size_t)u * slice);
            int k0, k1;
            split(ckk, 1, t, nt, &k0, &k1);
            for (int k = k0; k < k1; k++)
                for (int o = 0; o < cout; o++) {
                    float s = 0.0f;
                    for (int u = 0; u < nt; u++) s += wu[u].dwT[(size_t)k * coutp + o];
                    dw[(size_t)o * ckk + k] += s;
                }
            if (db && t == 0)
                for (int o = 0; o < cout; o++) {
                    double s = 0.0;
                    for (int u = 0; u < nt; u++) s += wu[u].db[o];
                    db[o] += (float)s;
                }
        }
    }
}

static void lowered_backward(struct adapt_conv *c, const struct adapt_exec *ex, const float *x,
                             const float *dy, float *dx, int acc)
{
    struct adapt_layer *l = &c->base;
    lowered_backward_ops(c, ex, x, dy, adapt_param_in_use(&l->param[0]), l->param[0].grad.data,
                         c->bias ? l->param[1].grad.data : NULL, dx, acc);
}

/* ------------------------------------------------------------------ dense */

/* Index tables of the dense mode, built by the constructor:
 * gidx[p*CQ + c*Q + q] = c*(k*k + 1) + tap(p, q), or c*(k*k + 1) + k*k when
 * the tap lies outside the kernel: W' row (o, p) is a gather from the weights
 * of output channel o laid out with one zero after each k x k kernel;
 * toff[t*P + e], e < tcnt[t]: offsets p*CQ + q (relative to the channel's
 * first column) of the entries of W' that hold tap t, for folding dW'. */
static int dense_tables(struct adapt_conv *c)
{
    const struct adapt_conv_geom *g = &c->g;
    const int KK = g->k * g->k, P = c->P, Q = c->Q, CQ = c->CQ;
    c->gidx = malloc((size_t)P * CQ * sizeof *c->gidx);
    c->toff = malloc((size_t)KK * P * sizeof *c->toff);
    c->tcnt = calloc((size_t)KK, sizeof *c->tcnt);
    if (!c->gidx || !c->toff || !c->tcnt) return 0;
    for (int p = 0; p < P; p++) {
        const int py = p / g->wo, px = p % g->wo;
        int32_t *row = c->gidx + (size_t)p * CQ;
        for (int q = 0; q < Q; q++) {
            const int ky = q / g->w - (py * g->stride - g->pad);
            const int kx = q % g->w - (px * g->stride - g->pad);
            int t = KK;
            if (ky >= 0 && ky < g->k && kx >= 0 && kx < g->k) {
                t = ky * g->k + kx;
                c->toff[(size_t)t * P + c->tcnt[t]++] = p * CQ + q;
            }
            for (int ci = 0; ci < g->cin; ci++) row[ci * Q + q] = ci * (KK + 1) + t;
        }
    }
    return 1;
}

static void conv_destroy(struct adapt_layer *l)
{
    struct adapt_conv *c = (struct adapt_conv *)l;
    free(c->gidx);
    free(c->toff);
    free(c->tcnt);
}

ADAPT_HOT_CLONES static void gather_row(const float *src, const int32_t *idx, float *dst, int n)
{
    for (int i = 0; i < n; i++) dst[i] = src[idx[i]];
}

ADAPT_HOT_CLONES static float gather_sum(const float *src, const int32_t *off, int n)
{
    float s = 0.0f;
    for (int e = 0; e < n; e++) s += src[off[e]];
    return s;
}

/* out (cols, ldo) = in (rows, cols)^T, rows of in ldi floats apart */
static void transpose(const float *in, int rows, int cols, size_t ldi, float *out, size_t ldo)
{
    const int B = 16;
#pragma omp parallel for collapse(2) if ((size_t)rows * cols >= ADAPT_PAR_MIN) schedule(static)
    for (int r0 = 0; r0 < rows; r0 += B)
        for (int c0 = 0; c0 < cols; c0 += B) {
            int r1 = r0 + B < rows ? r0 + B : rows, c1 = c0 + B < cols ? c0 + B : cols;
            for (int cc = c0; cc < c1; cc++)
                for (int r = r0; r < r1; r++) out[(size_t)cc * ldo + r] = in[(size_t)r * ldi + cc];
        }
}

/* W' of the weights w into l->saved (each row a gather from the zero-extended kernels of its
 * channel o) and the bias in use of each row (o, p) into the forward's workspace; returns that
 * bias (OP floats, after the forward's x^T (CQ, np) and y^T (OP, np)) */
static float *dense_expand(struct adapt_conv *c, const struct adapt_exec *ex, const float *w)
{
    struct adapt_layer *l = &c->base;
    const float *b = c->bias ? adapt_param_in_use(&l->param[1]) : NULL;
    const int np = (int)r16((size_t)ex->n), OP = c->cout * c->P, CQ = c->CQ;
    const int KK = c->g.k * c->g.k, cin = c->g.cin, P = c->P;
    float *wd = l->saved, *bexp = ex->ws + r16((size_t)CQ * np) + r16((size_t)OP * np);
    float *wz = bexp + r16((size_t)OP);
    ADAPT_ASSERT(wd != NULL && ex->ws != NULL);
#pragma omp parallel for num_threads(c->threads) schedule(static)
    for (int o = 0; o < c->cout; o++) {
        float *wzo = wz + (size_t)o * cin * (KK + 1);
        for (int ci = 0; ci < cin; ci++) {
            memcpy(wzo + ci * (KK + 1), w + ((size_t)o * cin + ci) * KK, KK * sizeof(float));
            wzo[ci * (KK + 1) + KK] = 0.0f;
        }
        for (int p = 0; p < P; p++) {
            gather_row(wzo, c->gidx + (size_t)p * CQ, wd + ((size_t)o * P + p) * CQ, CQ);
            bexp[o * P + p] = b ? b[o] : 0.0f;
        }
    }
    return bexp;
}

static void dense_forward(struct adapt_conv *c, const struct adapt_exec *ex, const float *x,
                          float *y)
{
    struct adapt_layer *l = &c->base;
    const int n = ex->n, np = (int)r16((size_t)n), OP = c->cout * c->P, CQ = c->CQ;
    const float *bexp = dense_expand(c, ex, adapt_param_in_use(&l->param[0])), *wd = l->saved;
    float *xT = ex->ws, *yT = xT + r16((size_t)CQ * np);
    /* x^T (CQ, np), padding columns 0 */
    for (int q = 0; q < CQ; q++)
        for (int j = n; j < np; j++) xT[(size_t)q * np + j] = 0.0f;
    transpose(x, n, CQ, (size_t)CQ, xT, (size_t)np);
    /* y^T (OP, np) = W' x^T + b, rows split over threads */
#pragma omp parallel num_threads(c->threads)
    {
        int r0, r1;
        split(OP, 1, omp_get_thread_num(), omp_get_num_threads(), &r0, &r1);
        if (r1 > r0)
            adapt_gemm_bcast(r1 - r0, np, CQ, wd + (size_t)r0 * CQ, CQ, 1, xT, np,
                             yT + (size_t)r0 * np, np, ADAPT_GEMM_BIAS, bexp + r0);
    }
    transpose(yT, OP, n, (size_t)np, y, (size_t)OP);
}

/* dW += and db += (each when not NULL; db only with dW) from x and dy, dx (+)= from the W'
 * of the last dense_expand and dy (when not NULL) */
static void dense_backward_ops(struct adapt_conv *c, const struct adapt_exec *ex, const float *x,
                               const float *dy, float *dw, float *db, float *dx, int acc)
{
    struct adapt_layer *l = &c->base;
    const int n = ex->n, OP = c->cout * c->P, CQ = c->CQ, P = c->P, Q = c->Q;
    const int KK = c->g.k * c->g.k, cin = c->g.cin;
    const float *wd = l->saved;
    float *dwd = ex->ws;
    ADAPT_ASSERT(wd != NULL && dwd != NULL && (dw != NULL || db == NULL));
#pragma omp parallel num_threads(c->threads)
    {
        const int t = omp_get_thread_num(), nt = omp_get_num_threads();
        int lo, hi;
        if (dx) { /* dx (n, CQ) (+)= dy (n, OP) W' (OP, CQ), columns split */
            split(CQ, 16, t, nt, &lo, &hi);
            if (hi > lo)
                adapt_gemm_bcast(n, hi - lo, OP, dy, OP, 1, wd + lo, CQ, dx + lo, CQ,
                                 acc ? ADAPT_GEMM_ACC : ADAPT_GEMM_ZERO, NULL);
        }
        /* dW' = dy^T x for DENSE_GROUP output channels at a time, folded while
         * it is in cache: dW[o, c, t] += the entries of dW' that hold tap t */
        float *blk = dwd + (size_t)t * DENSE_GROUP * P * CQ;
        const int ngroup = dw ? (c->cout + DENSE_GROUP - 1) / DENSE_GROUP : 0;
#pragma omp for schedule(static)
        for (int gi = 0; gi < ngroup; gi++) {
            const int o0 = gi * DENSE_GROUP;
            const int og = c->cout - o0 < DENSE_GROUP ? c->cout - o0 : DENSE_GROUP;
            adapt_gemm_bcast(og * P, CQ, n, dy + (size_t)o0 * P, 1, OP, x, CQ, blk, CQ,
                             ADAPT_GEMM_ZERO, NULL);
            for (int o = o0; o < o0 + og; o++) {
                const float *bo = blk + (size_t)(o - o0) * P * CQ;
                for (int ci = 0; ci < cin; ci++) {
                    float *dwk = dw + ((size_t)o * cin + ci) * KK;
                    for (int tp = 0; tp < KK; tp++)
                        dwk[tp] += gather_sum(bo + (size_t)ci * Q, c->toff + (size_t)tp * P,
                                              c->tcnt[tp]);
                }
                if (db) {
                    double sum = 0.0;
                    for (int j = 0; j < n; j++)
                        sum += adapt_sum_f32(dy + (size_t)j * OP + (size_t)o * P, P);
                    db[o] += (float)sum;
                }
            }
        }
    }
}

static void dense_backward(struct adapt_conv *c, const struct adapt_exec *ex, const float *x,
                           const float *dy, float *dx, int acc)
{
    struct adapt_layer *l = &c->base;
    dense_backward_ops(c, ex, x, dy, l->param[0].grad.data, c->bias ? l->param[1].grad.data : NULL,
                       dx, acc);
}

/* ------------------------------------------------------------------ ops */

static void conv_forward(struct adapt_layer *l, const struct adapt_exec *ex, const float *const *x,
                         float *y)
{
    struct adapt_conv *c = (struct adapt_conv *)l;
    if (l->arith && adapt_arith_forward(l->arith, &c->g, ex->n, c->ckk, c->cout, x[0],
                                        adapt_param_in_use(&l->param[0]),
                                        c->bias ? adapt_param_in_use(&l->param[1]) : NULL, y))
        return;
    const float *x0 = x[0];
    if (l->mx && !l->mx->channels) {
        adapt_mx_gemm_forward(l->mx, &c->g, ex->n, c->ckk, c->cout, x0,
                              adapt_param_in_use(&l->param[0]),
                              c->bias ? adapt_param_in_use(&l->param[1]) : NULL, y);
        return;
    }
    /* roles.mx_axis = channels: the input's copy along Cin, the weight copy's along Cin (the
     * precision state's), so the layer's own kernels */
    if (l->mx) x0 = adapt_mx_channels_input(l->mx, &c->g, ex->n, x0);
    switch (c->mode) {
    case CONV_FC:
        adapt_fc_forward(ex->n, c->ckk, c->cout, x0, adapt_param_in_use(&l->param[0]),
                         c->bias ? adapt_param_in_use(&l->param[1]) : NULL, y);
        break;
    case CONV_DENSE: dense_forward(c, ex, x0, y); break;
    case CONV_LOWERED: lowered_forward(c, ex, x0, y); break;
    }
}

/* roles.mx_axis = channels (src/net/layers/mx_gemm.c): the weight gradient from the copies along
 * the batch, the input gradient from those along Cout, each in the layer's own kernels; the bias
 * gradient sums the float32 dY (it is no GEMM). */
static void channels_backward(struct adapt_conv *c, const struct adapt_exec *ex, const float *x,
                              const float *dy, float *dx, int acc)
{
    struct adapt_layer *l = &c->base;
    const int n = ex->n, cout = c->cout, P = c->P;
    struct adapt_mx_channels_ops o;
    adapt_mx_channels_operands(l->mx, &c->g, n, c->ckk, cout, x, l->param[0].value.data,
                               adapt_param_in_use(&l->param[0]), dy, &o);
    float *dw = l->param[0].grad.data, *db = c->bias ? l->param[1].grad.data : NULL;
    if (db)
        for (int oc = 0; oc < cout; oc++) {
            double s = 0.0;
            for (int j = 0; j < n; j++) s += adapt_sum_f32(dy + ((size_t)j * cout + oc) * P, P);
            db[oc] += (float)s;
        }
    switch (c->mode) {
    case CONV_FC:
        adapt_fc_backward(n, c->ckk, cout, o.xw, NULL, o.dyw, dw, NULL, NULL, 0);
        if (dx) adapt_fc_backward(n, c->ckk, cout, NULL, o.wd, o.dyd, NULL, NULL, dx, acc);
        break;
    case CONV_DENSE:
        dense_backward_ops(c, ex, o.xw, o.dyw, dw, NULL, NULL, 0);
        if (dx) { /* W' of the input gradient's weight copy */
            dense_expand(c, ex, o.wd);
            dense_backward_ops(c, ex, NULL, o.dyd, NULL, NULL, dx, acc);
        }
        break;
    case CONV_LOWERED:
        lowered_backward_ops(c, ex, o.xw, o.dyw, NULL, dw, NULL, NULL, 0);
        if (dx) lowered_backward_ops(c, ex, NULL, o.dyd, o.wd, NULL, NULL, dx, acc);
        break;
    }
}

static void conv_backward(struct adapt_layer *l, const struct adapt_exec *ex,
                          const float *const *x, const float *y, const float *dy,
                          float *const *dx, unsigned acc)
{
    struct adapt_conv *c = (struct adapt_conv *)l;
    if (l->arith &&
        adapt_arith_backward(l->arith, &c->g, ex->n, c->ckk, c->cout, x[0],
                             adapt_param_in_use(&l->param[0]), dy, l->param[0].grad.data,
                             c->bias ? l->param[1].grad.data : NULL, dx[0], acc & 1u))
        return;
    if (l->mx && l->mx->channels) {
        channels_backward(c, ex, x[0], dy, dx[0], acc & 1u);
        return;
    }
    if (l->mx) {
        adapt_mx_gemm_backward(l->mx, &c->g, ex->n, c->ckk, c->cout, x[0],
                               l->param[0].value.data, adapt_param_in_use(&l->param[0]), dy,
                               l->param[0].grad.data, c->bias ? l->param[1].grad.data : NULL,
                               dx[0], acc & 1u);
        return;
    }
    switch (c->mode) {
    case CONV_FC:
        adapt_fc_backward(ex->n, c->ckk, c->cout, x[0], adapt_param_in_use(&l->param[0]), dy,
                          l->param[0].grad.data, c->bias ? l->param[1].grad.data : NULL, dx[0],
                          acc & 1u);
        break;
    case CONV_DENSE:
        /* a forward under an accumulator model (src/net/layers/arith_gemm.c) builds no W' */
        if (l->arith) dense_expand(c, ex, adapt_param_in_use(&l->param[0]));
        dense_backward(c, ex, x[0], dy, dx[0], acc & 1u);
        break;
    case CONV_LOWERED: lowered_backward(c, ex, x[0], dy, dx[0], acc & 1u); break;
    }
}

static size_t conv_workspace(const struct adapt_layer *l, int n)
{
    const struct adapt_conv *c = (const struct adapt_conv *)l;
    if (n <= 0) return 0;
    switch (c->mode) {
    case CONV_FC: return 0;
    case CONV_DENSE: {
        size_t np = r16((size_t)n), OP = (size_t)c->cout * c->P;
        size_t fwd = r16((size_t)c->CQ * np) + r16(OP * np) + r16(OP) +
                     (size_t)c->cout * c->g.cin * (c->g.k * c->g.k + 1);
        size_t bwd = (size_t)c->threads * DENSE_GROUP * c->P * (size_t)c->CQ;
        return fwd > bwd ? fwd : bwd;
    }
    case CONV_LOWERED: return (size_t)c->threads * lowered_slice(c, NULL, NULL);
    }
    return 0;
}

static size_t conv_saved(const struct adapt_layer *l, int n)
{
    const struct adapt_conv *c = (const struct adapt_conv *)l;
    return c->mode == CONV_DENSE ? (size_t)c->cout * c->P * c->CQ : 0;
}

static const struct adapt_layer_ops conv_ops = {
    "conv2d", conv_forward, conv_backward, conv_workspace, conv_saved, conv_destroy,
};

struct adapt_layer *adapt_conv2d_create(const char *name, const int in_chw[3], int cout, int k,
                                        int stride, int pad, int bias)
{
    struct adapt_conv *c = calloc(1, sizeof *c);
    if (!c) {
        ADAPT_ERROR(ADAPT_ENOMEM, "%s: cannot allocate a conv2d layer", name ? name : "conv2d");
        return NULL;
    }
    struct adapt_layer *l = &c->base;
    if (adapt_layer_setup(l, &conv_ops, name, 1, in_chw) != ADAPT_OK) goto free_layer;
    if (cout <= 0 || k <= 0 || stride <= 0 || pad < 0 || (int64_t)in_chw[1] + 2 * pad < k ||
        (int64_t)in_chw[2] + 2 * pad < k) {
        ADAPT_ERROR(ADAPT_EINVAL,
                    "%s: conv2d out %d kernel %d stride %d padding %d does not fit input "
                    "(%d, %d, %d)",
                    name, cout, k, stride, pad, in_chw[0], in_chw[1], in_chw[2]);
        goto free_layer;
    }
    /* the int sizes below: the weight tensor (and so Cin*k*k), the output plane rounded up,
     * the padded input plane */
    {
        const int64_t ho = ((int64_t)in_chw[1] + 2 * pad - k) / stride + 1;
        const int64_t wo = ((int64_t)in_chw[2] + 2 * pad - k) / stride + 1;
        if ((int64_t)cout * in_chw[0] * k * k > INT_MAX || ho * wo + 32 > INT_MAX ||
            cout > INT_MAX - 16 ||
            ((int64_t)in_chw[1] + 2 * pad) * ((int64_t)in_chw[2] + 2 * pad) > INT_MAX) {
            ADAPT_ERROR(ADAPT_EINVAL,
                        "%s: conv2d out %d kernel %d stride %d padding %d on input (%d, %d, %d): "
                        "a weight tensor or plane of more than %d elements",
                        name, cout, k, stride, pad, in_chw[0], in_chw[1], in_chw[2], INT_MAX);
            goto free_layer;
        }
    }
    struct adapt_conv_geom *g = &c->g;
    g->cin = in_chw[0];
    g->h = in_chw[1];
    g->w = in_chw[2];
    g->k = k;
    g->stride = stride;
    g->pad = pad;
    l->groups = l->dilation = 1;
    g->ho = (g->h + 2 * pad - k) / stride + 1;
    g->wo = (g->w + 2 * pad - k) / stride + 1;
    c->cout = cout;
    c->bias = bias != 0;
    c->ckk = g->cin * k * k;
    c->P = g->ho * g->wo;
    c->Pp = (int)r16((size_t)c->P);
    c->ldp = (c->Pp / 16) % 2 ? c->Pp : c->Pp + 16;
    c->coutp = (int)r16((size_t)cout);
    c->Q = g->h * g->w;
    c->CQ = g->cin * c->Q;
    c->threads = omp_get_max_threads();
    if (pad == 0 && k == g->h && k == g->w)
        c->mode = CONV_FC;
    else if (c->Q <= k * k && c->CQ % 16 == 0 &&
             (size_t)cout * c->P * c->CQ <= CONV_DENSE_MAX)
        c->mode = CONV_DENSE;
    else
        c->mode = CONV_LOWERED;
    if (c->mode == CONV_DENSE && !dense_tables(c)) {
        ADAPT_ERROR(ADAPT_ENOMEM, "%s: cannot allocate conv2d index tables", name);
        goto free_layer;
    }
    l->out_dim[0] = cout;
    l->out_dim[1] = g->ho;
    l->out_dim[2] = g->wo;
    int wdim[4] = {cout, g->cin, k, k};
    adapt_layer_param_add(l, "weight", ADAPT_PARAM_WEIGHT, 4, wdim, c->ckk);
    if (c->bias) adapt_layer_param_add(l, "bias", ADAPT_PARAM_BIAS, 1, &cout, c->ckk);
    l->macs = (int64_t)c->P * cout * c->ckk;
    l->is_unit = 1;
    l->mx_gemm = 1;
    l->k = k;
    l->stride = stride;
    l->pad = pad;
    return l;
free_layer:
    conv_destroy(l);
    free(c);
    return NULL;
}
