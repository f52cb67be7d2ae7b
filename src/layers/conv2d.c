/* src/layers/conv2d.c: 2-D convolution, mirroring torch.nn.Conv2d with
 * square kernel k, stride s, zero padding p, dilation 1, groups 1 and an
 * optional bias: weight (Cout, Cin, k, k), bias (Cout),
 * y[n, o] = b[o] + sum_{c, ky, kx} W[o, c, ky, kx] x[n, c, oy*s - p + ky, ox*s - p + kx].
 *
 * The batch is cut into chunks of nb samples whose im2col matrix col
 * (Cin*k*k, nb*P), P = Hout*Wout, fits a few MiB, so every GEMM is large and
 * its operands stay in cache:
 *   forward   Yc (Cout, nb*P) = W (Cout, Cin*k*k) col;  y = Yc + b, scattered to NCHW
 *   backward  dYc (Cout, nb*P) = dy gathered from NCHW (db += its row sums)
 *             dW += dYc col^T;  dcol = W^T dYc;  dx = col2im(dcol)
 * (col is rebuilt in backward rather than kept: it is k*k times the input).
 * A convolution whose kernel covers its whole unpadded input (Hout = Wout =
 * 1, e.g. LeNet-5's C5) is a fully connected layer on the flat input and
 * skips the lowering. GEMMs are OpenBLAS cblas_sgemm from serial code;
 * im2col, col2im, scatter and gather are OpenMP loops.
 *
 * Workspace: (round16(Cin*k*k*nb*P) + Cout*nb*P) floats; nothing is saved
 * between forward and backward. macs = Hout*Wout*Cout*Cin*k*k; fan_in of
 * weight and bias = Cin*k*k (PyTorch's bias bound 1/sqrt(fan_in)). */
#include <cblas.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/hd.h"
#include "src/layers/layers_impl.h"

/* Target size of one chunk's col + dYc, in floats (4 MiB: the two L2 caches
 * hold it, and GEMMs stay wide). */
#define CONV_CHUNK_FLOATS (1u << 20)

struct adapt_conv {
    struct adapt_layer base;
    struct adapt_conv_geom g;
    int cout, bias;
    int ckk; /* Cin*k*k */
    int P;   /* Hout*Wout */
    int fc;  /* kernel covers the whole unpadded input */
};

static int conv_chunk(const struct adapt_conv *c, int n)
{
    size_t per = (size_t)(c->ckk + c->cout) * c->P;
    size_t nbmax = CONV_CHUNK_FLOATS / per;
    if (nbmax < 1) nbmax = 1;
    if (nbmax >= (size_t)n) return n;
    size_t nchunk = ((size_t)n + nbmax - 1) / nbmax;
    return (int)(((size_t)n + nchunk - 1) / nchunk);
}

static size_t round16(size_t v) { return (v + 15) & ~(size_t)15; }

static size_t conv_workspace(const struct adapt_layer *l, int n)
{
    const struct adapt_conv *c = (const struct adapt_conv *)l;
    if (c->fc || n <= 0) return 0;
    size_t L = (size_t)conv_chunk(c, n) * c->P;
    return round16((size_t)c->ckk * L) + (size_t)c->cout * L;
}

/* y (NCHW, samples n0..n0+m) = Yc + b */
ADAPT_HOT_CLONES static void scatter_plane(const float *src, float *dst, size_t P, float b)
{
    for (size_t i = 0; i < P; i++) dst[i] = src[i] + b;
}

/* dst = src; returns the sum of src */
ADAPT_HOT_CLONES static double gather_plane(const float *src, float *dst, size_t P)
{
    float acc[16] = {0};
    size_t i = 0;
    for (; i + 16 <= P; i += 16)
        for (int v = 0; v < 16; v++) {
            dst[i + v] = src[i + v];
            acc[v] += src[i + v];
        }
    double s = 0.0;
    for (int v = 0; v < 16; v++) s += acc[v];
    for (; i < P; i++) {
        dst[i] = src[i];
        s += src[i];
    }
    return s;
}

static void conv_forward(struct adapt_layer *l, const struct adapt_exec *ex, const float *const *x,
                         float *y)
{
    struct adapt_conv *c = (struct adapt_conv *)l;
    const float *w = adapt_param_in_use(&l->param[0]);
    const float *b = c->bias ? adapt_param_in_use(&l->param[1]) : NULL;
    const int n = ex->n;
    if (c->fc) {
        adapt_fc_forward(n, c->ckk, c->cout, x[0], w, b, y);
        return;
    }
    const size_t in_numel = adapt_layer_in_numel(l, 0), P = (size_t)c->P;
    const int nb = conv_chunk(c, n), cout = c->cout;
    float *col = ex->ws;
    ADAPT_ASSERT(col != NULL);
    for (int n0 = 0; n0 < n; n0 += nb) {
        const int m = n - n0 < nb ? n - n0 : nb;
        const size_t L = (size_t)m * P;
        float *yc = col + round16((size_t)c->ckk * L);
        adapt_im2col(&c->g, x[0] + (size_t)n0 * in_numel, m, col, L);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, cout, (int)L, c->ckk, 1.0f, w,
                    c->ckk, col, (int)L, 0.0f, yc, (int)L);
        float *yn = y + (size_t)n0 * cout * P;
        const long tasks = (long)m * cout;
#pragma omp parallel for if ((size_t)tasks * P >= ADAPT_PAR_MIN) schedule(static)
        for (long t = 0; t < tasks; t++) {
            long j = t / cout, o = t % cout;
            scatter_plane(yc + (size_t)o * L + (size_t)j * P, yn + (size_t)t * P, P,
                          b ? b[o] : 0.0f);
        }
    }
}

static void conv_backward(struct adapt_layer *l, const struct adapt_exec *ex,
                          const float *const *x, const float *y, const float *dy,
                          float *const *dx, unsigned acc)
{
    struct adapt_conv *c = (struct adapt_conv *)l;
    const float *w = adapt_param_in_use(&l->param[0]);
    float *dw = l->param[0].grad.data;
    float *db = c->bias ? l->param[1].grad.data : NULL;
    const int n = ex->n;
    float *d = dx[0];
    if (c->fc) {
        adapt_fc_backward(n, c->ckk, c->cout, x[0], w, dy, dw, db, d, acc & 1u);
        return;
    }
    const size_t in_numel = adapt_layer_in_numel(l, 0), P = (size_t)c->P;
    const int nb = conv_chunk(c, n), cout = c->cout;
    float *col = ex->ws;
    ADAPT_ASSERT(col != NULL && dw != NULL);
    for (int n0 = 0; n0 < n; n0 += nb) {
        const int m = n - n0 < nb ? n - n0 : nb;
        const size_t L = (size_t)m * P;
        float *dyc = col + round16((size_t)c->ckk * L);
        const float *dyn = dy + (size_t)n0 * cout * P;
        adapt_im2col(&c->g, x[0] + (size_t)n0 * in_numel, m, col, L);
#pragma omp parallel for if ((size_t)m * cout * P >= ADAPT_PAR_MIN) schedule(static)
        for (int o = 0; o < cout; o++) {
            double s = 0.0;
            for (int j = 0; j < m; j++)
                s += gather_plane(dyn + ((size_t)j * cout + o) * P, dyc + (size_t)o * L + (size_t)j * P,
                                  P);
            if (db) db[o] += (float)s;
        }
        /* dW (Cout, ckk) += dYc (Cout, L) col^T (L, ckk) */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, cout, c->ckk, (int)L, 1.0f, dyc,
                    (int)L, col, (int)L, 1.0f, dw, c->ckk);
        if (!d) continue;
        /* dcol (ckk, L) = W^T (ckk, Cout) dYc (Cout, L), into col's space */
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, c->ckk, (int)L, cout, 1.0f, w,
                    c->ckk, dyc, (int)L, 0.0f, col, (int)L);
        adapt_col2im(&c->g, col, L, m, d + (size_t)n0 * in_numel, acc & 1u);
    }
}

static const struct adapt_layer_ops conv_ops = {
    "conv2d", conv_forward, conv_backward, conv_workspace, NULL, NULL,
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
    if (adapt_layer_setup(l, &conv_ops, name, 1, in_chw) != ADAPT_OK) goto fail;
    if (cout <= 0 || k <= 0 || stride <= 0 || pad < 0 || in_chw[1] + 2 * pad < k ||
        in_chw[2] + 2 * pad < k) {
        ADAPT_ERROR(ADAPT_EINVAL,
                    "%s: conv2d out %d kernel %d stride %d padding %d does not fit input "
                    "(%d, %d, %d)",
                    name, cout, k, stride, pad, in_chw[0], in_chw[1], in_chw[2]);
        goto fail;
    }
    struct adapt_conv_geom *g = &c->g;
    g->cin = in_chw[0];
    g->h = in_chw[1];
    g->w = in_chw[2];
    g->k = k;
    g->stride = stride;
    g->pad = pad;
    g->ho = (g->h + 2 * pad - k) / stride + 1;
    g->wo = (g->w + 2 * pad - k) / stride + 1;
    c->cout = cout;
    c->bias = bias != 0;
    c->ckk = g->cin * k * k;
    c->P = g->ho * g->wo;
    c->fc = pad == 0 && k == g->h && k == g->w;
    l->out_dim[0] = cout;
    l->out_dim[1] = g->ho;
    l->out_dim[2] = g->wo;
    int wdim[4] = {cout, g->cin, k, k};
    adapt_layer_param_add(l, "weight", ADAPT_PARAM_WEIGHT, 4, wdim, c->ckk);
    if (c->bias) adapt_layer_param_add(l, "bias", ADAPT_PARAM_BIAS, 1, &cout, c->ckk);
    l->macs = (int64_t)c->P * cout * c->ckk;
    l->is_unit = 1;
    l->k = k;
    l->stride = stride;
    l->pad = pad;
    return l;
fail:
    free(c);
    return NULL;
}
