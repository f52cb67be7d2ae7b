/* src/net/layers/mx_gemm.c: conv2d and linear with MX blocks along the reduction dimension of
 * each of their three GEMMs (roles.mx_axis = gemm; struct adapt_mx_gemm in src/net/layer.h,
 * doc/numerics.md "Block formats: OCP Microscaling (MX)"). With P = Hout*Wout output pixels
 * per sample (1 for linear) and K = Cin*k*k (in for linear), the GEMMs of a batch of N are
 *
 *   forward     Y (Cout, N*P) = W (Cout, K) Xcol (K, N*P)        blocks along K
 *   input grad  dXcol (K, N*P) = W^T (K, Cout) dY (Cout, N*P)    blocks along Cout
 *   weight grad dW (Cout, K) += dY (Cout, N*P) Xcol^T (N*P, K)   blocks along N*P
 *
 * and each operand copy is rounded with quant_rows over one row-major matrix whose rows run
 * along the reduction dimension (blocks restart at every row), so element (r, c) of a copy with
 * `cols` columns takes random-bit index r * cols + c of that copy's stream (mx->key):
 *
 *   ADAPT_MX_X_FWD    Xcol^T (N*P, K): row n*P + p, column k
 *   ADAPT_MX_X_WGRAD  Xcol (K, N*P):   row k, column n*P + p
 *   ADAPT_MX_W_DGRAD  W^T (K, Cout):   row k, column o
 *   ADAPT_MX_DY_DGRAD dY^T (N*P, Cout): row n*P + p, column o
 *   ADAPT_MX_DY_WGRAD dY (Cout, N*P):  row o, column n*P + p
 *
 * with p = oy*Wout + ox and k = (c*k + ky)*k + kx (im2col.c's order). The forward's weight is
 * the unit's copy (its rows run along K). The weight-gradient blocks run across samples where
 * P is not a multiple of 32. The bias gradient sums the float32 output gradient (it is no
 * GEMM). Convolutions run one sample per thread with the broadcast GEMM of gemm.c, as
 * conv2d.c's lowered mode, or a group of samples side by side where a sample has fewer than 64
 * output pixels (group_of); where a quarter or more of the lowered products are padding taps,
 * the forward and the input gradient run one GEMM per output pixel over its taps inside the
 * input (pixel_taps), and the weight gradient one per tap over the pixels it lies inside the
 * input for; linear layers call OpenBLAS, as fc.c.
 *
 * Under roles.mx_axis = channels (mx->channels), as microxcaling's MX convolution, three of a
 * convolution's copies are of its unlowered tensors, each element rounded once for its GEMM
 * whichever pixels read it (linear layers as above):
 *
 *   ADAPT_MX_X_FWD    x^T per sample (H*W, Cin): row n*H*W + h*W + w, column c (blocks along Cin)
 *   ADAPT_MX_X_WGRAD  x^T (Cin*H*W, N): row (c*H + h)*W + w, column n (blocks along the batch)
 *   ADAPT_MX_DY_WGRAD dY^T (Cout*P, N): row o*P + p, column n (blocks along the batch)
 *
 * and the forward's weight copy has its blocks along Cin at each (o, ky, kx)
 * (adapt_mx_channels_weight, made by the precision state). Each copy is rounded down the
 * columns of the tensor as it lies (quant_cols), with the bits of quant_rows over the transposes
 * above. The forward and backward then run in conv2d.c's own kernels on these copies
 * (adapt_mx_channels_input, _operands); the input gradient's copies W^T and dY^T are those
 * above. */
#include <cblas.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/hd.h"
#include "src/net/layers/layers_impl.h"
#include "src/net/layers/transpose16.h"

static size_t r16(size_t v)
{
    return (v + 15) & ~(size_t)15;
}

static void round_copy(const struct quant_spec *s, float *x, size_t rows, size_t cols,
                       struct quant_key key, size_t offset)
{
    key.index += offset;
    enum adapt_status st = quant_rows(s, x, x, rows, cols, key, NULL, NULL);
    ADAPT_ASSERT(st == ADAPT_OK);
}

/* whole 16 x 16 tiles in vectors (transpose16), the edges element by element */
ADAPT_HOT_CLONES void adapt_transpose(const float *in, size_t rows, size_t cols, size_t ldi,
                                      float *out, size_t ldo)
{
    size_t r0 = 0;
    for (; r0 + 16 <= rows; r0 += 16) {
        size_t c0 = 0;
        for (; c0 + 16 <= cols; c0 += 16) {
            v16 r[16];
#pragma GCC unroll 16
            for (int i = 0; i < 16; i++) r[i] = *(const v16u *)(in + (r0 + i) * ldi + c0);
            transpose16(r);
#pragma GCC unroll 16
            for (int q = 0; q < 16; q++) *(v16u *)(out + (c0 + q) * ldo + r0) = r[q];
        }
        for (size_t c = c0; c < cols; c++)
            for (size_t r = r0; r < r0 + 16; r++) out[c * ldo + r] = in[r * ldi + c];
    }
    for (size_t c = 0; c < cols; c++)
        for (size_t r = r0; r < rows; r++) out[c * ldo + r] = in[r * ldi + c];
}

float *adapt_gemm_scratch(struct adapt_mx_scratch *s, size_t n)
{
    if (s->n < n) {
        free(s->buf);
        s->buf = aligned_alloc(64, r16(n) * sizeof(float));
        ADAPT_ASSERT(s->buf != NULL);
        s->n = r16(n);
    }
    return s->buf;
}

/* Per-thread slice of a convolution's backward, for a group of samples with GP pixels in all:
 * col (K, ldp) | t (GP, Cout) | tmp (Cout, ldp) | im2col's scratch. */
struct slice {
    float *col, *t, *tmp, *pad;
};
static size_t slice_size(const struct adapt_conv_geom *g, size_t K, size_t cout, size_t GP,
                         size_t ldp, struct slice *s, float *base)
{
    size_t ncol = r16(K * ldp), nt = r16(GP * cout), ntmp = r16(cout * ldp);
    size_t npad = r16(adapt_im2col_scratch(g));
    if (s) {
        s->col = base;
        s->t = base + ncol;
        s->tmp = s->t + nt;
        s->pad = s->tmp + ntmp;
    }
    return ncol + nt + ntmp + npad;
}

/* nmat matrices (rows, cols) of x rounded with s in blocks down their columns into y (quant_cols:
 * element (r, c) of matrix m at random-bit index m rows cols + c rows + r + key.index + offset) */
static void round_cols(const struct quant_spec *s, const float *x, float *y, size_t nmat,
                       size_t rows, size_t cols, struct quant_key key, size_t offset)
{
    key.index += offset;
    enum adapt_status st = quant_cols(s, x, y, nmat, rows, cols, key, NULL);
    ADAPT_ASSERT(st == ADAPT_OK);
}

const float *adapt_mx_channels_input(struct adapt_mx_gemm *mx, const struct adapt_conv_geom *g,
                                     int n, const float *x)
{
    if (!mx->x) return x;
    const size_t hw = (size_t)g->h * g->w, cin = (size_t)g->cin, in = cin * hw;
    float *xq = adapt_gemm_scratch(mx->scratch, (size_t)n * in);
    /* each sample (Cin, H*W) down its columns: input pixel q's Cin values, index j in + q Cin + c */
    round_cols(&mx->xs, x, xq, (size_t)n, cin, hw, mx->key[ADAPT_MX_X_FWD], 0);
    return xq;
}

/* Samples per GEMM when a sample has few output pixels: at least 64 rows or columns of the
 * product (AlexNet-CIFAR's 2 x 2 and 4 x 4 planes), which the microkernels fill instead of
 * padding P up to 16 columns or running four-row tiles. The tiles never change the order in
 * which an element sums (gemm.c), so the bits are the same for any grouping. */
static int group_of(size_t P, int n)
{
    size_t G = P >= 64 ? 1 : (64 + P - 1) / P;
    return (int)(G < (size_t)n ? G : (size_t)n);
}

/* The taps (ky, kx) of output pixel p that lie inside the input: ky in [r[0], r[1]), kx in
 * [r[2], r[3]) (empty where an end is at or below its start). */
static void tap_range(const struct adapt_conv_geom *g, size_t p, int r[4])
{
    const int k = g->k, oy = (int)(p / (size_t)g->wo), ox = (int)(p % (size_t)g->wo);
    const int y0 = oy * g->stride - g->pad, x0 = ox * g->stride - g->pad;
    r[0] = y0 < 0 ? -y0 : 0, r[1] = g->h - y0 < k ? g->h - y0 : k;
    r[2] = x0 < 0 ? -x0 : 0, r[3] = g->w - x0 < k ? g->w - x0 : k;
}

/* Each output pixel's taps inside the input: ks[off[p] .. off[p + 1]) are the rows k of its
 * lowered column that are not zero padding, in increasing order (channel 0's first, so the
 * first off[p + 1] - off[p] over Cin of them are its taps ky k + kx), kmax the most of any
 * pixel. skip when a quarter or more of the lowered products are padding taps (small planes:
 * AlexNet's 4 x 4 and 2 x 2), where the three GEMMs multiply only the taps inside the input;
 * ks and off are made only then. */
struct pixel_taps {
    int *ks;
    size_t *off, kmax;
    int skip;
};
static struct pixel_taps pixel_taps_make(const struct adapt_conv_geom *g, size_t K)
{
    const size_t P = (size_t)g->ho * g->wo;
    struct pixel_taps t = {NULL, NULL, 0, 0};
    size_t inside = 0;
    for (size_t p = 0; p < P; p++) {
        int r[4];
        tap_range(g, p, r);
        if (r[1] > r[0] && r[3] > r[2]) inside += (size_t)(r[1] - r[0]) * (size_t)(r[3] - r[2]);
    }
    t.skip = 4 * inside * (size_t)g->cin <= 3 * K * P;
    if (!t.skip) return t;
    t.ks = malloc(inside * (size_t)g->cin * sizeof(int));
    t.off = malloc((P + 1) * sizeof(size_t));
    ADAPT_ASSERT(t.ks != NULL && t.off != NULL);
    t.off[0] = 0;
    for (size_t p = 0; p < P; p++) {
        int r[4];
        tap_range(g, p, r);
        size_t n = t.off[p];
        for (int c = 0; c < g->cin; c++)
            for (int ky = r[0]; ky < r[1]; ky++)
                for (int kx = r[2]; kx < r[3]; kx++) t.ks[n++] = (c * g->k + ky) * g->k + kx;
        t.off[p + 1] = n;
        t.kmax = n - t.off[p] > t.kmax ? n - t.off[p] : t.kmax;
    }
    return t;
}
static void pixel_taps_free(struct pixel_taps *t)
{
    free(t->ks);
    free(t->off);
}

/* Forward, Y^T (N P, Cout) = Xcol^T W^T with Xcol rounded down its columns (blocks along K).
 * With pixel_taps' skip, each output pixel p is its own GEMM over the rows of its taps inside
 * the input, samples in rows: W^T's rows of those taps (gathered once a call) and the
 * rounded columns of pixel p gathered into a (K_p, samples) panel. A padding tap's rounded
 * value is 0, so leaving it out changes no sum: each output sums the same nonzero products in
 * the same order (gemm.c sums k in order), and the bits are those of the full GEMM. */
static void conv_forward(struct adapt_mx_gemm *mx, const struct adapt_conv_geom *g, int n, int K,
                         int cout, const float *x, const float *w, const float *b, float *y)
{
    const size_t P = (size_t)g->ho * g->wo, Kz = (size_t)K, cz = (size_t)cout;
    const size_t in = (size_t)g->cin * g->h * g->w, coutp = r16(cz);
    struct pixel_taps tp = pixel_taps_make(g, Kz);
    const int *ks = tp.ks, skip = tp.skip;
    const size_t *koff = tp.off, kmax = tp.kmax;
    const int T = omp_get_max_threads();
    const int G = skip ? (n < 32 ? n : 32) : group_of(P, n);
    const size_t GP = (size_t)G * P;
    /* per thread: col (K, G*P) | yt (G*P, coutp) | im2col's scratch | skip: the (K_p, G)
     * panel; shared: W^T (K, coutp) | skip: W^T's rows of each pixel's taps */
    const size_t npan = skip ? r16(kmax * (size_t)G) : 0, nwp = skip ? r16(koff[P] * coutp) : 0;
    const size_t per = r16(Kz * GP) + r16(GP * coutp) + r16(adapt_im2col_scratch(g)) + npan;
    float *ws = adapt_gemm_scratch(mx->scratch, per * (size_t)T + r16(Kz * coutp) + nwp);
    float *wt = ws + per * (size_t)T, *wtp = wt + r16(Kz * coutp);
    for (size_t k = 0; k < Kz; k++)
        for (size_t o = 0; o < coutp; o++) wt[k * coutp + o] = o < cz ? w[o * Kz + k] : 0.0f;
    if (skip)
        for (size_t r = 0; r < koff[P]; r++)
            memcpy(wtp + r * coutp, wt + (size_t)ks[r] * coutp, coutp * sizeof(float));
#pragma omp parallel num_threads(T)
    {
        float *col = ws + per * (size_t)omp_get_thread_num(), *yt = col + r16(Kz * GP);
        float *pad = yt + r16(GP * coutp), *pan = pad + r16(adapt_im2col_scratch(g));
#pragma omp for schedule(static)
        for (int j0 = 0; j0 < n; j0 += G) {
            const int gn = n - j0 < G ? n - j0 : G;
            const size_t gp = (size_t)gn * P;
            /* the group's samples lowered side by side, col (K, gn P): column i P + p is pixel
             * p of sample j0 + i */
            for (int i = 0; i < gn; i++)
                adapt_im2col_into(g, x + (size_t)(j0 + i) * in, col + (size_t)i * P, gp, pad);
            if (mx->x) /* each pixel's values along K: a column of col, a row of Xcol^T */
                round_cols(&mx->xs, col, col, 1, Kz, gp, mx->key[ADAPT_MX_X_FWD],
                           (size_t)j0 * P * Kz);
            if (!skip) /* Y^T (gn P, coutp) = Xcol^T W^T, Xcol^T read down col's columns */
                adapt_gemm_bcast((int)gp, (int)coutp, K, col, 1, (ptrdiff_t)gp, wt,
                                 (ptrdiff_t)coutp, yt, (ptrdiff_t)coutp, ADAPT_GEMM_ZERO, NULL);
            else
                for (size_t p = 0; p < P; p++) {
                    const size_t kp = koff[p + 1] - koff[p];
                    const int *kr = ks + koff[p];
                    float *yp = yt + p * coutp; /* rows i P + p */
                    if (kp == 0) {              /* every tap in the padding */
                        for (int i = 0; i < gn; i++)
                            memset(yp + (size_t)i * P * coutp, 0, coutp * sizeof(float));
                        continue;
                    }
                    for (size_t r = 0; r < kp; r++) {
                        const float *src = col + (size_t)kr[r] * gp + p;
                        for (int i = 0; i < gn; i++) pan[r * (size_t)gn + i] = src[(size_t)i * P];
                    }
                    adapt_gemm_bcast(gn, (int)coutp, (int)kp, pan, 1, gn, wtp + koff[p] * coutp,
                                     (ptrdiff_t)coutp, yp, (ptrdiff_t)(P * coutp), ADAPT_GEMM_ZERO,
                                     NULL);
                }
            for (int i = 0; i < gn; i++) {
                float *yj = y + (size_t)(j0 + i) * cz * P;
                const float *yti = yt + (size_t)i * P * coutp;
                for (size_t o = 0; o < cz; o++) {
                    const float bo = b ? b[o] : 0.0f;
                    for (size_t p = 0; p < P; p++) yj[o * P + p] = yti[p * coutp + o] + bo;
                }
            }
        }
    }
    pixel_taps_free(&tp);
}

void adapt_mx_channels_operands(struct adapt_mx_gemm *mx, const struct adapt_conv_geom *g, int n,
                                int K, int cout, const float *x, const float *w_master,
                                const float *w_use, const float *dy,
                                struct adapt_mx_channels_ops *o)
{
    const size_t P = (size_t)g->ho * g->wo, N = (size_t)n, cz = (size_t)cout, Kz = (size_t)K;
    const size_t in = (size_t)g->cin * g->h * g->w, ny = N * cz * P;
    const size_t nxw = mx->x ? r16(N * in) : 0, ndy = mx->dy ? r16(ny) : 0;
    const size_t nwd = mx->w ? r16(Kz * cz) : 0;
    float *xw = adapt_gemm_scratch(mx->scratch, nxw + 2 * ndy + nwd + 16);
    float *dyw = xw + nxw, *dyd = dyw + ndy, *wd = dyd + ndy;
    o->xw = x, o->dyw = o->dyd = dy, o->wd = w_use;
    if (mx->x) { /* x (N, in) down its columns: each element's N samples, index e N + j */
        round_cols(&mx->xs, x, xw, 1, N, in, mx->key[ADAPT_MX_X_WGRAD], 0);
        o->xw = xw;
    }
    if (mx->dy) {
        /* dY (N, Cout*P) down its columns: each element's N samples, index e N + j */
        round_cols(&mx->dys, dy, dyw, 1, N, cz * P, mx->key[ADAPT_MX_DY_WGRAD], 0);
        /* each sample (Cout, P) down its columns: output pixel p's Cout values, index
         * (j P + p) Cout + o */
        round_cols(&mx->dys, dy, dyd, N, cz, P, mx->key[ADAPT_MX_DY_DGRAD], 0);
        o->dyw = dyw, o->dyd = dyd;
    }
    if (mx->w) { /* the master (Cout, K) down its columns: along Cout, index k Cout + o */
        round_cols(&mx->ws, w_master, wd, 1, cz, Kz, mx->key[ADAPT_MX_W_DGRAD], 0);
        o->wd = wd;
    }
}

static void conv_backward(struct adapt_mx_gemm *mx, const struct adapt_conv_geom *g, int n, int K,
                          int cout, const float *x, const float *w_master, const float *w_use,
                          const float *dy, float *dw, float *db, float *dx, int acc)
{
    const size_t P = (size_t)g->ho * g->wo, NP = (size_t)n * P;
    const size_t in = (size_t)g->cin * g->h * g->w, coutp = r16((size_t)cout);
    const size_t Kz = (size_t)K, cz = (size_t)cout;
    struct pixel_taps tp = pixel_taps_make(g, Kz);
    const int skip = tp.skip, T = omp_get_max_threads();
    /* skip: the weight gradient per tap (ky, kx) over the pixels it lies inside the input for,
     * tpix[tap P ..] (tcnt[tap] of them) */
    const size_t kk = (size_t)g->k * g->k, cin = (size_t)g->cin;
    int *tpix = NULL;
    size_t *tcnt = NULL;
    if (skip) { /* from pixel_taps: pixel p's taps are its first rows, channel 0's */
        tpix = malloc(kk * P * sizeof(int));
        tcnt = calloc(kk, sizeof(size_t));
        ADAPT_ASSERT(tpix != NULL && tcnt != NULL);
        for (size_t p = 0; p < P; p++)
            for (size_t q = tp.off[p]; q < tp.off[p] + (tp.off[p + 1] - tp.off[p]) / cin; q++) {
                const size_t tap = (size_t)tp.ks[q];
                tpix[tap * P + tcnt[tap]++] = (int)p;
            }
    }
    const int G = skip ? (n < 32 ? n : 32) : group_of(P, n);
    const size_t GP = (size_t)G * P, ldp = r16(GP) + 16, gnp = r16((size_t)G);
    /* per thread: the slice | skip: dY's pixel panel (Cout, gnp) | dXcol's (kmax, gnp) */
    const size_t nbp = skip ? r16(cz * gnp) : 0, ncp = skip ? r16(tp.kmax * gnp) : 0;
    const size_t per = slice_size(g, Kz, cz, GP, ldp, NULL, NULL) + nbp + ncp;
    /* shared: dyn (Cout, N*P) | xn (K, N*P) | dynT (N*P, coutp) | dwT (K, coutp) | wt (K, Cout)
     * | skip: wt's rows of each pixel's taps */
    const size_t ndyn = r16(cz * NP), nxn = r16(Kz * NP), ndynt = r16(NP * coutp);
    const size_t ndwt = r16(Kz * coutp), nwt = r16(Kz * cz), nwp = skip ? r16(tp.off[P] * cz) : 0;
    /* skip, per thread: a tap's rows of Xcol (Cin, its columns) and rows of dY^T */
    const size_t nat = r16(cin * NP), pertap = skip ? nat + r16(NP * coutp) : 0;
    float *ws = adapt_gemm_scratch(mx->scratch, per * (size_t)T + ndyn + nxn + ndynt + ndwt + nwt +
                                                    nwp + pertap * (size_t)T);
    float *dyn = ws + per * (size_t)T, *xn = dyn + ndyn, *dynt = xn + nxn, *dwt = dynt + ndynt;
    float *wt = dwt + ndwt, *wtp = wt + nwt, *wtap = wtp + nwp;
    /* the weight gradient's operands, (Cout, N*P) and (K, N*P) */
#pragma omp parallel num_threads(T)
    {
        struct slice s;
        slice_size(g, Kz, cz, GP, ldp, &s, ws + per * (size_t)omp_get_thread_num());
#pragma omp for schedule(static)
        for (int j = 0; j < n; j++) {
            for (int o = 0; o < cout; o++)
                memcpy(dyn + (size_t)o * NP + (size_t)j * P, dy + ((size_t)j * cz + o) * P,
                       P * sizeof(float));
            /* straight into the sample's columns of xn (K, N*P) */
            adapt_im2col_into(g, x + (size_t)j * in, xn + (size_t)j * P, NP, s.pad);
        }
    }
    if (db)
        for (int o = 0; o < cout; o++) db[o] += (float)adapt_sum_f32(dyn + o * NP, NP);
    /* rounded by quant_rows' own threads (outside a parallel region) */
    if (mx->x) round_copy(&mx->xs, xn, Kz, NP, mx->key[ADAPT_MX_X_WGRAD], 0);
    if (mx->dy) round_copy(&mx->dys, dyn, cz, NP, mx->key[ADAPT_MX_DY_WGRAD], 0);
    if (dx) { /* W^T (K, Cout), blocks along Cout */
        adapt_transpose(mx->w ? w_master : w_use, cz, Kz, Kz, wt, cz);
        if (mx->w) round_copy(&mx->ws, wt, Kz, cz, mx->key[ADAPT_MX_W_DGRAD], 0);
    }
#pragma omp parallel num_threads(T)
    {
        struct slice s;
        slice_size(g, Kz, cz, GP, ldp, &s, ws + per * (size_t)omp_get_thread_num());
        /* dynT (N*P, coutp), padding columns 0 */
#pragma omp for schedule(static)
        for (size_t i0 = 0; i0 < NP; i0 += 64) {
            size_t i1 = i0 + 64 < NP ? i0 + 64 : NP;
            for (size_t i = i0; i < i1; i++)
                memset(dynt + i * coutp + cz, 0, (coutp - cz) * sizeof(float));
            adapt_transpose(dyn + i0, cz, i1 - i0, NP, dynt + i0 * coutp, coutp);
        }
        /* dW^T (K, coutp) = Xcol (K, N*P) dY^T (N*P, coutp), rows of K split over the threads
         * (each row summed over the whole batch by one thread) */
        int t = omp_get_thread_num(), nt = omp_get_num_threads();
        int k0 = (int)((Kz * (size_t)t) / (size_t)nt),
            k1 = (int)((Kz * (size_t)(t + 1)) / (size_t)nt);
        if (skip) {
            /* per tap, its rows c kk + tap summed over the columns n P + p of the pixels p it
             * lies inside the input for, in order: Xcol's other entries are padding, rounded
             * to 0, so each row sums the same nonzero products in the same order */
            float *at = wtap + pertap * (size_t)t, *bt = at + nat;
#pragma omp for schedule(dynamic, 1)
            for (size_t tap = 0; tap < kk; tap++) {
                const size_t np = tcnt[tap], m = (size_t)n * np;
                const int *pv = tpix + tap * P;
                if (m == 0) {
                    for (size_t c = 0; c < cin; c++)
                        memset(dwt + (c * kk + tap) * coutp, 0, coutp * sizeof(float));
                    continue;
                }
                for (size_t c = 0; c < cin; c++) {
                    const float *src = xn + (c * kk + tap) * NP;
                    float *dst = at + c * m;
                    for (size_t j = 0; j < (size_t)n; j++)
                        for (size_t q = 0; q < np; q++) dst[j * np + q] = src[j * P + pv[q]];
                }
                for (size_t j = 0; j < (size_t)n; j++)
                    for (size_t q = 0; q < np; q++)
                        memcpy(bt + (j * np + q) * coutp, dynt + (j * P + pv[q]) * coutp,
                               coutp * sizeof(float));
                adapt_gemm_bcast((int)cin, (int)coutp, (int)m, at, (ptrdiff_t)m, 1, bt,
                                 (ptrdiff_t)coutp, dwt + tap * coutp, (ptrdiff_t)(kk * coutp),
                                 ADAPT_GEMM_ZERO, NULL);
            }
        } else if (k1 > k0)
            adapt_gemm_bcast(k1 - k0, (int)coutp, (int)NP, xn + (size_t)k0 * NP, (ptrdiff_t)NP, 1,
                             dynt, (ptrdiff_t)coutp, dwt + (size_t)k0 * coutp, (ptrdiff_t)coutp,
                             ADAPT_GEMM_ZERO, NULL);
#pragma omp barrier
#pragma omp for schedule(static)
        for (int o = 0; o < cout; o++)
            for (size_t k = 0; k < Kz; k++) dw[(size_t)o * Kz + k] += dwt[k * coutp + o];
        if (dx && skip) {
            /* wt's rows of each pixel's taps; the padding taps' entries of col zero (never
             * written below, and col2im adds them to the padding it drops) */
#pragma omp for schedule(static)
            for (size_t r = 0; r < tp.off[P]; r++)
                memcpy(wtp + r * cz, wt + (size_t)tp.ks[r] * cz, cz * sizeof(float));
            memset(s.col, 0, Kz * ldp * sizeof(float));
            float *bp = s.pad + r16(adapt_im2col_scratch(g)), *cp = bp + nbp;
#pragma omp for schedule(static)
            for (int j0 = 0; j0 < n; j0 += G) {
                /* per pixel p: dXcol's rows of its taps inside, (K_p, gn) = wt's rows (K_p,
                 * Cout) dY_p (Cout, gn), the same sums over Cout as the full GEMM's */
                const int gn = n - j0 < G ? n - j0 : G;
                const float *dyj = dy + (size_t)j0 * cz * P;
                if (mx->dy) {
                    round_cols(&mx->dys, dyj, s.t, (size_t)gn, cz, P, mx->key[ADAPT_MX_DY_DGRAD],
                               (size_t)j0 * P * cz);
                    dyj = s.t;
                }
                for (size_t p = 0; p < P; p++) {
                    const size_t kp = tp.off[p + 1] - tp.off[p];
                    const int *kr = tp.ks + tp.off[p];
                    if (kp == 0) continue;
                    for (size_t o = 0; o < cz; o++) {
                        float *row = bp + o * gnp;
                        for (int i = 0; i < gn; i++) row[i] = dyj[((size_t)i * cz + o) * P + p];
                        for (size_t i = (size_t)gn; i < gnp; i++) row[i] = 0.0f;
                    }
                    adapt_gemm_bcast((int)kp, (int)gnp, cout, wtp + tp.off[p] * cz, (ptrdiff_t)cz,
                                     1, bp, (ptrdiff_t)gnp, cp, (ptrdiff_t)gnp, ADAPT_GEMM_ZERO,
                                     NULL);
                    for (size_t r = 0; r < kp; r++) {
                        float *dst = s.col + (size_t)kr[r] * ldp + p;
                        for (int i = 0; i < gn; i++) dst[(size_t)i * P] = cp[r * gnp + (size_t)i];
                    }
                }
                for (int i = 0; i < gn; i++)
                    adapt_col2im_sample(g, s.col + (size_t)i * P, ldp, dx + (size_t)(j0 + i) * in,
                                        acc, s.pad);
            }
        } else if (dx) { /* dXcol (K, G*P) = W^T dY for a group of G samples side by side, dY's
                          * pixels blocked along Cout */
#pragma omp for schedule(static)
            for (int j0 = 0; j0 < n; j0 += G) {
                const int gn = n - j0 < G ? n - j0 : G;
                const size_t gp = (size_t)gn * P, gpp = r16(gp);
                const float *dyj = dy + (size_t)j0 * cz * P;
                if (mx->dy) { /* each dY_n (Cout, P) down its columns: pixel p's Cout values */
                    round_cols(&mx->dys, dyj, s.t, (size_t)gn, cz, P, mx->key[ADAPT_MX_DY_DGRAD],
                               (size_t)j0 * P * cz);
                    dyj = s.t;
                }
                for (int o = 0; o < cout; o++) {
                    float *row = s.tmp + (size_t)o * ldp;
                    for (int i = 0; i < gn; i++)
                        memcpy(row + (size_t)i * P, dyj + ((size_t)i * cz + o) * P,
                               P * sizeof(float));
                    memset(row + gp, 0, (ldp - gp) * sizeof(float));
                }
                adapt_gemm_bcast(K, (int)gpp, cout, wt, (ptrdiff_t)cz, 1, s.tmp, (ptrdiff_t)ldp,
                                 s.col, (ptrdiff_t)ldp, ADAPT_GEMM_ZERO, NULL);
                for (int i = 0; i < gn; i++)
                    adapt_col2im_sample(g, s.col + (size_t)i * P, ldp, dx + (size_t)(j0 + i) * in,
                                        acc, s.pad);
            }
        }
    }
    pixel_taps_free(&tp);
    free(tpix);
    free(tcnt);
}

/* linear: x (N, K), y (N, Cout), OpenBLAS as fc.c */
static void fc_forward(struct adapt_mx_gemm *mx, int n, int K, int cout, const float *x,
                       const float *w, const float *b, float *y)
{
    const float *xq = x;
    if (mx->x) {
        float *t = adapt_gemm_scratch(mx->scratch, (size_t)n * K);
        memcpy(t, x, (size_t)n * K * sizeof(float));
        round_copy(&mx->xs, t, (size_t)n, (size_t)K, mx->key[ADAPT_MX_X_FWD], 0);
        xq = t;
    }
    adapt_fc_forward(n, K, cout, xq, w, b, y);
}

static void fc_backward(struct adapt_mx_gemm *mx, int n, int K, int cout, const float *x,
                        const float *w_master, const float *w_use, const float *dy, float *dw,
                        float *db, float *dx, int acc)
{
    const size_t N = (size_t)n, Kz = (size_t)K, cz = (size_t)cout;
    const size_t nxn = r16(Kz * N), ndyn = r16(cz * N), nwt = r16(Kz * cz), ndyt = r16(N * cz);
    float *xn = adapt_gemm_scratch(mx->scratch, nxn + ndyn + nwt + ndyt), *dyn = xn + nxn,
          *wt = dyn + ndyn;
    float *dyt = wt + nwt;
    adapt_transpose(x, N, Kz, Kz, xn, N);
    adapt_transpose(dy, N, cz, cz, dyn, N);
    if (db)
        for (int o = 0; o < cout; o++) db[o] += (float)adapt_sum_f32(dyn + o * N, N);
    if (mx->x) round_copy(&mx->xs, xn, Kz, N, mx->key[ADAPT_MX_X_WGRAD], 0);
    if (mx->dy) round_copy(&mx->dys, dyn, cz, N, mx->key[ADAPT_MX_DY_WGRAD], 0);
    /* dW (Cout, K) += dY (Cout, N) Xcol^T (N, K) */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, cout, K, n, 1.0f, dyn, n, xn, n, 1.0f, dw,
                K);
    if (!dx) return;
    adapt_transpose(mx->w ? w_master : w_use, cz, Kz, Kz, wt, cz);
    if (mx->w) round_copy(&mx->ws, wt, Kz, cz, mx->key[ADAPT_MX_W_DGRAD], 0);
    memcpy(dyt, dy, N * cz * sizeof(float));
    if (mx->dy) round_copy(&mx->dys, dyt, N, cz, mx->key[ADAPT_MX_DY_DGRAD], 0);
    /* dX (N, K) = dY^T (N, Cout) W (Cout, K), W^T's rows blocked */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, K, cout, 1.0f, dyt, cout, wt, cout,
                acc ? 1.0f : 0.0f, dx, K);
}

void adapt_mx_gemm_forward(struct adapt_mx_gemm *mx, const struct adapt_conv_geom *g, int n, int K,
                           int cout, const float *x, const float *w, const float *b, float *y)
{
    if (g)
        conv_forward(mx, g, n, K, cout, x, w, b, y);
    else
        fc_forward(mx, n, K, cout, x, w, b, y);
}

void adapt_mx_gemm_backward(struct adapt_mx_gemm *mx, const struct adapt_conv_geom *g, int n, int K,
                            int cout, const float *x, const float *w_master, const float *w_use,
                            const float *dy, float *dw, float *db, float *dx, int acc)
{
    if (g)
        conv_backward(mx, g, n, K, cout, x, w_master, w_use, dy, dw, db, dx, acc);
    else
        fc_backward(mx, n, K, cout, x, w_master, w_use, dy, dw, db, dx, acc);
}
