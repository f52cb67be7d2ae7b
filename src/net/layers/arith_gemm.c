/* src/net/layers/arith_gemm.c: conv2d and linear with an accumulator model in their three
 * GEMMs (arithmetic.accumulator; struct adapt_arith in src/net/layer.h; doc/numerics.md,
 * "Accumulators"). With P = Hout*Wout output pixels per sample (1 for linear), K = Cin*k*k (in
 * for linear) and a batch of N, each GEMM sums its products in this fixed order:
 *
 *   forward      y[n, o, p]  = sum over k of X[n, p, k] W[o, k]         k = (c*k + ky)*k + kx
 *   input grad   dXcol[k, p] = sum over o of W[o, k] dY[n, o, p]         o = 0 .. Cout-1
 *   weight grad  dW[o, k]    = sum over (n, p) of dY[n, o, p] X[n, p, k]  n, then p
 *
 * (X the lowered input, im2col.c's order; for linear p is absent and k the feature). The bias
 * is added to the forward sum in float32; the bias gradient is the float32 sum of dY
 * (adapt_sum_f32, no GEMM); a convolution's input gradient adds the overlapping windows of dXcol
 * in float32 (col2im.c), after the GEMM. A GEMM runs under the model when the model is a float
 * one, or when both its operands are on fixed-point grids (exact, int); otherwise in float32
 * (the same order, quant_acc_gemm's float32 kind), or, when the whole pass is float32, with the
 * layer's own kernels. */
#include <stdlib.h>
#include <string.h>

#include "src/base/log.h"
#include "src/net/layers/layers_impl.h"

static size_t r16(size_t v)
{
    return (v + 15) & ~(size_t)15;
}

/* A convolution's weight gradient as dW^T = X dY^T: the weight-gradient GEMM with its operands
 * swapped (products commute, the order of the sums is the same) */
#define WGRAD_T ADAPT_ARITH_N

/* the grids of GEMM g's two operands (A first, as the calls below pass them) */
static void operands(const struct adapt_arith *ar, int g, int *fla, int *flb)
{
    switch (g) {
    case ADAPT_ARITH_FWD: *fla = ar->fl_w, *flb = ar->fl_x; break;
    case ADAPT_ARITH_DGRAD: *fla = ar->fl_w, *flb = ar->fl_dy; break;
    case WGRAD_T: *fla = ar->fl_x, *flb = ar->fl_dy; break;
    default: *fla = ar->fl_dy, *flb = ar->fl_x; break;
    }
}

/* 1 when GEMM g of the unit runs under its model */
static int gemm_on(const struct adapt_arith *ar, int g)
{
    if (ar->acc.kind == QUANT_ACC_FLOAT32) return 0;
    if (ar->acc.kind == QUANT_ACC_FLOAT) return 1;
    int fla, flb;
    operands(ar, g, &fla, &flb);
    return fla >= 0 && flb >= 0;
}

/* C (m x n, ldc) = A (m x k, lda) B (k x n, ldb) for GEMM g: under the model when it applies
 * (on = gemm_on), in float32 otherwise; overflows counted into *ov. */
static void gemm(struct adapt_arith *ar, int g, int on, int m, int n, int k, const float *A,
                 ptrdiff_t lda, const float *B, ptrdiff_t ldb, float *C, ptrdiff_t ldc,
                 uint64_t *ov)
{
    static const struct quant_acc f32 = {.kind = QUANT_ACC_FLOAT32};
    int fla = 0, flb = 0;
    if (on) operands(ar, g, &fla, &flb);
    struct quant_acc_stats st = {0};
    if (on &&
        quant_acc_gemm(&ar->acc, m, n, k, A, lda, fla, B, ldb, flb, C, ldc, &st) == ADAPT_OK) {
        *ov += st.overflows;
        return;
    }
    if (on) {
        uint64_t first;
#pragma omp atomic capture
        first = ar->offgrid++;
        if (!first)
            adapt_log(ADAPT_LOG_WARN, "accumulator model: %s; this GEMM runs in float32",
                      adapt_error_message());
    }
    enum adapt_status st32 = quant_acc_gemm(&f32, m, n, k, A, lda, 0, B, ldb, 0, C, ldc, NULL);
    ADAPT_ASSERT(st32 == ADAPT_OK);
}

static void count(struct adapt_arith *ar, int g, int on, uint64_t ov)
{
    if (!on) return;
#pragma omp atomic
    ar->overflows[g] += ov;
#pragma omp atomic
    ar->gemms[g]++;
}

/* The forward GEMM of a convolution runs on blocks of whole samples, each thread lowering its
 * block and multiplying it: a block's lowered input (K, nb P) is about FWD_BLOCK floats, to stay
 * in a core's cache between im2col and the kernel's packing, and has at least FWD_COLS_PER_OUT
 * columns per output channel, so that the weight codes made per block cost little beside it. */
#define FWD_BLOCK        ((size_t)1 << 17)
#define FWD_COLS_PER_OUT 4
#define DGRAD_BLOCK      ((size_t)1 << 20)

int adapt_arith_forward(struct adapt_arith *ar, const struct adapt_conv_geom *g, int n, int K,
                        int cout, const float *x, const float *w, const float *b, float *y)
{
    if (!gemm_on(ar, ADAPT_ARITH_FWD)) return 0;
    const size_t Kz = (size_t)K, cz = (size_t)cout, N = (size_t)n;
    uint64_t ov = 0;
    if (!g) { /* Y^T (Cout, N) = W (Cout, K) X^T (K, N) */
        float *xt = adapt_gemm_scratch(ar->scratch, r16(Kz * N) + r16(cz * N));
        float *yt = xt + r16(Kz * N);
        adapt_transpose(x, N, Kz, Kz, xt, N);
        /* each thread its columns (samples): one parallel region, the GEMMs serial in it */
        const int T = omp_get_max_threads();
#pragma omp parallel num_threads(T) reduction(+ : ov)
        {
            const int t = omp_get_thread_num(), nt = omp_get_num_threads();
            const int j0 = (int)((long long)n * t / nt), j1 = (int)((long long)n * (t + 1) / nt);
            if (j1 > j0)
                gemm(ar, ADAPT_ARITH_FWD, 1, cout, j1 - j0, K, w, K, xt + j0, n, yt + j0, n, &ov);
        }
        adapt_transpose(yt, cz, N, N, y, cz);
        if (b)
            for (size_t i = 0; i < N; i++)
                for (size_t o = 0; o < cz; o++) y[i * cz + o] += b[o];
        count(ar, ADAPT_ARITH_FWD, 1, ov);
        return 1;
    }
    /* per block of nb samples: Y (Cout, nb P) = W (Cout, K) Xcol (K, nb P), sample j's
     * columns j P .. j P + P - 1 */
    const size_t P = (size_t)g->ho * g->wo, in = (size_t)g->cin * g->h * g->w;
    size_t nb = FWD_BLOCK / (Kz * P), nmin = (FWD_COLS_PER_OUT * cz + P - 1) / P;
    nb = nb < nmin ? nmin : nb;
    nb = nb < 1 ? 1 : nb > N ? N : nb;
    const int nblk = (int)((N + nb - 1) / nb);
    const int T = omp_get_max_threads() < nblk ? omp_get_max_threads() : nblk;
    /* per thread: col (K, nb P) | yt (Cout, nb P) | im2col's scratch */
    const size_t ncol = r16(Kz * nb * P), nyt = r16(cz * nb * P);
    const size_t per = ncol + nyt + r16(adapt_im2col_scratch(g));
    float *ws = adapt_gemm_scratch(ar->scratch, per * (size_t)T);
#pragma omp parallel num_threads(T) reduction(+ : ov)
    {
        float *col = ws + per * (size_t)omp_get_thread_num(), *yt = col + ncol, *pad = yt + nyt;
#pragma omp for schedule(static)
        for (int blk = 0; blk < nblk; blk++) {
            const size_t j0 = (size_t)blk * nb, jn = N - j0 < nb ? N - j0 : nb, ld = jn * P;
            for (size_t j = 0; j < jn; j++)
                adapt_im2col_into(g, x + (j0 + j) * in, col + j * P, ld, pad);
            gemm(ar, ADAPT_ARITH_FWD, 1, cout, (int)ld, K, w, K, col, (ptrdiff_t)ld, yt,
                 (ptrdiff_t)ld, &ov);
            for (size_t j = 0; j < jn; j++)
                for (size_t o = 0; o < cz; o++) {
                    const float bo = b ? b[o] : 0.0f, *src = yt + o * ld + j * P;
                    float *dst = y + ((j0 + j) * cz + o) * P;
                    for (size_t p = 0; p < P; p++) dst[p] = src[p] + bo;
                }
        }
    }
    count(ar, ADAPT_ARITH_FWD, 1, ov);
    return 1;
}

/* linear: x (N, K), dy (N, Cout) */
static void fc_backward(struct adapt_arith *ar, int ond, int onw, int n, int K, int cout,
                        const float *x, const float *w, const float *dy, float *dw, float *db,
                        float *dx, int acc)
{
    const size_t N = (size_t)n, Kz = (size_t)K, cz = (size_t)cout;
    float *dyt = adapt_gemm_scratch(ar->scratch, r16(cz * N) + r16(cz * Kz) + r16(N * Kz));
    float *tw = dyt + r16(cz * N), *tx = tw + r16(cz * Kz);
    adapt_transpose(dy, N, cz, cz, dyt, N);
    if (db)
        for (size_t o = 0; o < cz; o++) db[o] += (float)adapt_sum_f32(dyt + o * N, N);
    uint64_t ov = 0;
    /* dW (Cout, K) += dY^T (Cout, N) X (N, K) */
    gemm(ar, ADAPT_ARITH_WGRAD, onw, cout, K, n, dyt, n, x, K, tw, K, &ov);
    for (size_t i = 0; i < cz * Kz; i++) dw[i] += tw[i];
    count(ar, ADAPT_ARITH_WGRAD, onw, ov);
    if (!dx) return;
    /* dX (N, K) = dY (N, Cout) W (Cout, K) */
    ov = 0;
    gemm(ar, ADAPT_ARITH_DGRAD, ond, n, K, cout, dy, cout, w, K, acc ? tx : dx, K, &ov);
    if (acc)
        for (size_t i = 0; i < N * Kz; i++) dx[i] += tx[i];
    count(ar, ADAPT_ARITH_DGRAD, ond, ov);
}

int adapt_arith_backward(struct adapt_arith *ar, const struct adapt_conv_geom *g, int n, int K,
                         int cout, const float *x, const float *w, const float *dy, float *dw,
                         float *db, float *dx, int acc)
{
    const int ond = dx && gemm_on(ar, ADAPT_ARITH_DGRAD), onw = gemm_on(ar, ADAPT_ARITH_WGRAD);
    if (!ond && !onw) return 0;
    if (!g) {
        fc_backward(ar, ond, onw, n, K, cout, x, w, dy, dw, db, dx, acc);
        return 1;
    }
    const size_t P = (size_t)g->ho * g->wo, NP = (size_t)n * P, Kz = (size_t)K, cz = (size_t)cout;
    const size_t in = (size_t)g->cin * g->h * g->w;
    const int T = omp_get_max_threads();
    /* the input gradient's GEMM runs on blocks of nb whole samples, about DGRAD_BLOCK floats of
     * dXcol, so that W^T's codes are made once per block rather than once per sample */
    size_t nb = dx ? DGRAD_BLOCK / (Kz * P) : 0;
    nb = nb < 1 ? 1 : nb > (size_t)n ? (size_t)n : nb;
    /* shared: dyn (Cout, N*P) | dyt (N*P, Cout) | xc (K, N*P) | twt (K, Cout) | wt (K, Cout) |
     * dXcol (K, nb P); per thread: im2col's scratch */
    const size_t ndyn = r16(cz * NP), nxc = r16(NP * Kz), ntw = r16(cz * Kz), nwt = r16(Kz * cz);
    const size_t ncol = dx ? r16(Kz * nb * P) : 0, per = r16(adapt_im2col_scratch(g));
    float *ws =
        adapt_gemm_scratch(ar->scratch, 2 * ndyn + nxc + ntw + nwt + ncol + per * (size_t)T);
    float *dyn = ws, *dyt = dyn + ndyn, *xc = dyt + ndyn, *twt = xc + nxc, *wt = twt + ntw;
    float *col = wt + nwt, *th = col + ncol;
#pragma omp parallel for schedule(static) num_threads(T)
    for (int j = 0; j < n; j++) {
        const float *dyj = dy + (size_t)j * cz * P;
        for (size_t o = 0; o < cz; o++)
            memcpy(dyn + o * NP + (size_t)j * P, dyj + o * P, P * sizeof(float));
        adapt_transpose(dyj, cz, P, P, dyt + (size_t)j * P * cz, cz);
        adapt_im2col_into(g, x + (size_t)j * in, xc + (size_t)j * P, NP,
                          th + per * (size_t)omp_get_thread_num());
    }
    if (db)
        for (size_t o = 0; o < cz; o++) db[o] += (float)adapt_sum_f32(dyn + o * NP, NP);
    /* dW^T (K, Cout) = X (K, N*P) dY^T (N*P, Cout): one reduction over the batch per element,
     * samples n then pixels p, the lowered input in im2col's layout */
    uint64_t ov = 0;
    gemm(ar, WGRAD_T, onw, K, cout, (int)NP, xc, (ptrdiff_t)NP, dyt, cout, twt, cout, &ov);
    for (size_t o = 0; o < cz; o++)
        for (size_t k = 0; k < Kz; k++) dw[o * Kz + k] += twt[k * cz + o];
    count(ar, ADAPT_ARITH_WGRAD, onw, ov);
    if (!dx) return 1;
    adapt_transpose(w, cz, Kz, Kz, wt, cz);
    ov = 0;
    for (size_t j0 = 0; j0 < (size_t)n; j0 += nb) {
        const size_t jn = (size_t)n - j0 < nb ? (size_t)n - j0 : nb, ld = jn * P;
        /* dXcol (K, jn P) = W^T (K, Cout) dY (Cout, jn P), the block's columns of dyn */
        gemm(ar, ADAPT_ARITH_DGRAD, ond, K, (int)ld, cout, wt, cout, dyn + j0 * P, (ptrdiff_t)NP,
             col, (ptrdiff_t)ld, &ov);
#pragma omp parallel for schedule(static) num_threads(T)
        for (size_t j = 0; j < jn; j++)
            adapt_col2im_sample(g, col + j * P, ld, dx + (j0 + j) * in, acc,
                                th + per * (size_t)omp_get_thread_num());
    }
    count(ar, ADAPT_ARITH_DGRAD, ond, ov);
    return 1;
}
