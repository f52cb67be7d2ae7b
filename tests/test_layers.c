/* tests/test_layers.c: the CPU layer kinds (src/layers) against
 *  - small cases whose expected values were computed with PyTorch 1.13
 *    (torch.nn.functional on the same float32 inputs; noted per case),
 *  - double-precision reference forwards written here as plain loops,
 *  - finite-difference gradients of those references, for every input and
 *    every trained parameter.
 *
 * Tolerances. The finite differences are central differences of the
 * double-precision reference, so their own error (truncation h^2 |f'''| / 6
 * with h = 2^-10 or 2^-12, and rounding ~2^-52 sum|y dy| / h) stays below
 * 1e-7 of the values compared; what the tolerance has to cover is the
 * float32 rounding of the layer's analytic gradient. An element that is a
 * float sum of m terms bounded by T has an error of at most about
 * lambda sqrt(m) u sum|t| <= lambda sqrt(m) u m T (u = 2^-24, probabilistic
 * bound of Higham & Mary 2019 with lambda = 4); sum_tol(m, T) below. Inputs
 * are uniform, so sum|t| is typically m T / 4 and the bound has a wide margin
 * while still far below any real error (gradients here are O(0.1 .. 10)).
 *
 * Bit-exact checks (accumulation, chunking, add, flatten) use dyadic
 * values (small integers / 2^b) whose sums and products are exact in float,
 * so every summation order gives the same bits. */
#include <check.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/status.h"
#include "src/net/layer.h"
#include "src/net/layers/layers_impl.h"
#include "tests/testutil_net.h"

#define U 5.9604644775390625e-08 /* 2^-24 */

static double sum_tol(double m, double tmax) { return 4.0 * sqrt(m) * U * m * tmax; }

/* ------------------------------------------------------------------ references */

typedef void (*ref_fn)(const struct tu_layer *t, const void *arg, double *y);

struct conv_arg {
    int cin, h, w, cout, k, s, p, bias;
};

/* y and (when yabs) sum of |terms| per output element */
static void ref_conv_abs(const struct tu_layer *t, const struct conv_arg *a, double *y,
                         double *yabs)
{
    const int ho = (a->h + 2 * a->p - a->k) / a->s + 1, wo = (a->w + 2 * a->p - a->k) / a->s + 1;
    const float *W = t->l->param[0].value.data;
    const float *b = a->bias ? t->l->param[1].value.data : NULL;
    for (int n = 0; n < t->n; n++)
        for (int o = 0; o < a->cout; o++)
            for (int oy = 0; oy < ho; oy++)
                for (int ox = 0; ox < wo; ox++) {
                    double s = b ? b[o] : 0.0, sa = b ? fabs(b[o]) : 0.0;
                    for (int c = 0; c < a->cin; c++)
                        for (int ky = 0; ky < a->k; ky++)
                            for (int kx = 0; kx < a->k; kx++) {
                                int iy = oy * a->s - a->p + ky, ix = ox * a->s - a->p + kx;
                                if (iy < 0 || iy >= a->h || ix < 0 || ix >= a->w) continue;
                                double v =
                                    (double)W[((o * a->cin + c) * a->k + ky) * a->k + kx] *
                                    t->x[0][((size_t)(n * a->cin + c) * a->h + iy) * a->w + ix];
                                s += v;
                                sa += fabs(v);
                            }
                    size_t i = (((size_t)n * a->cout + o) * ho + oy) * wo + ox;
                    y[i] = s;
                    if (yabs) yabs[i] = sa;
                }
}

static void ref_conv(const struct tu_layer *t, const void *arg, double *y)
{
    ref_conv_abs(t, arg, y, NULL);
}

struct lin_arg {
    int in, out, bias;
};

static void ref_linear(const struct tu_layer *t, const void *arg, double *y)
{
    const struct lin_arg *a = arg;
    const float *W = t->l->param[0].value.data, *b = a->bias ? t->l->param[1].value.data : NULL;
    for (int n = 0; n < t->n; n++)
        for (int o = 0; o < a->out; o++) {
            double s = b ? b[o] : 0.0;
            for (int i = 0; i < a->in; i++) s += (double)W[o * a->in + i] * t->x[0][n * a->in + i];
            y[n * a->out + o] = s;
        }
}

static void ref_tanh(const struct tu_layer *t, const void *arg, double *y)
{
    for (size_t i = 0; i < tu_layer_out_len(t); i++) y[i] = tanh((double)t->x[0][i]);
}

static void ref_relu(const struct tu_layer *t, const void *arg, double *y)
{
    for (size_t i = 0; i < tu_layer_out_len(t); i++) y[i] = t->x[0][i] > 0.0f ? t->x[0][i] : 0.0;
}

/* the inputs' channels one after the other, per sample */
static void ref_concat(const struct tu_layer *t, const void *arg, double *y)
{
    (void)arg;
    size_t o = 0;
    for (int j = 0; j < t->n; j++)
        for (int k = 0; k < t->l->nin; k++) {
            size_t m = adapt_layer_in_numel(t->l, k);
            for (size_t i = 0; i < m; i++) y[o++] = t->x[k][(size_t)j * m + i];
        }
}

struct pool_arg {
    int c, h, w, k, s, max; /* k == 0: global average */
    int p, excl;            /* padding; excl: average over the cells inside (count_include_pad 0) */
};

/* PyTorch's pools by their definition: padded cells are -inf for max, 0 for average (divisor
 * k*k, or the cells inside with excl) */
static void ref_pool(const struct tu_layer *t, const void *arg, double *y)
{
    const struct pool_arg *a = arg;
    const int k = a->k ? a->k : a->h, s = a->k ? a->s : 1, p = a->k ? a->p : 0;
    const int ho = (a->h + 2 * p - k) / s + 1, wo = a->k ? (a->w + 2 * p - k) / s + 1 : 1;
    const int kw = a->k ? a->k : a->w;
    for (int q = 0; q < t->n * a->c; q++)
        for (int oy = 0; oy < ho; oy++)
            for (int ox = 0; ox < wo; ox++) {
                double m = -INFINITY, sum = 0.0;
                int cnt = 0;
                for (int ky = 0; ky < k; ky++)
                    for (int kx = 0; kx < kw; kx++) {
                        int iy = oy * s - p + ky, ix = ox * s - p + kx;
                        if (iy < 0 || iy >= a->h || ix < 0 || ix >= a->w) continue;
                        double v = t->x[0][((size_t)q * a->h + iy) * a->w + ix];
                        m = v > m ? v : m;
                        sum += v;
                        cnt++;
                    }
                y[((size_t)q * ho + oy) * wo + ox] = a->max ? m : sum / (a->excl ? cnt : k * kw);
            }
}

struct bn_arg {
    int c, hw;
    double eps;
    int training;
};

/* also returns per-channel batch mean and biased variance when asked */
static void ref_bn_stats(const struct tu_layer *t, const struct bn_arg *a, double *y, double *mean,
                         double *var)
{
    const float *g = t->l->param[0].value.data, *b = t->l->param[1].value.data;
    const float *rm = t->l->param[2].value.data, *rv = t->l->param[3].value.data;
    for (int c = 0; c < a->c; c++) {
        double mu = 0.0, v = 0.0, M = (double)t->n * a->hw;
        for (int n = 0; n < t->n; n++)
            for (int i = 0; i < a->hw; i++) mu += t->x[0][((size_t)n * a->c + c) * a->hw + i];
        mu /= M;
        for (int n = 0; n < t->n; n++)
            for (int i = 0; i < a->hw; i++) {
                double d = t->x[0][((size_t)n * a->c + c) * a->hw + i] - mu;
                v += d * d;
            }
        v /= M;
        if (mean) mean[c] = mu;
        if (var) var[c] = v;
        double m = a->training ? mu : rm[c], s = a->training ? v : rv[c];
        double is = 1.0 / sqrt(s + a->eps);
        for (int n = 0; n < t->n; n++)
            for (int i = 0; i < a->hw; i++) {
                size_t j = ((size_t)n * a->c + c) * a->hw + i;
                y[j] = (t->x[0][j] - m) * is * g[c] + b[c];
            }
    }
}

static void ref_bn(const struct tu_layer *t, const void *arg, double *y)
{
    ref_bn_stats(t, arg, y, NULL, NULL);
}

/* ------------------------------------------------------------------ gradient checks */

struct fd_ctx {
    struct tu_layer *t;
    ref_fn ref;
    const void *arg;
    double *y;
};

/* L = sum_i ref(x)_i dy_i, whose gradient is what backward computes for dy. */
static double fd_loss(void *p)
{
    struct fd_ctx *c = p;
    c->ref(c->t, c->arg, c->y);
    double L = 0.0;
    for (size_t i = 0; i < tu_layer_out_len(c->t); i++) L += c->y[i] * c->t->dy[i];
    return L;
}

/* Forward + backward of the float layer with the current dy (gradients
 * zeroed first), then finite differences for every input i with
 * atol_x[i] >= 0 (atol_x has an entry per input) and every trained parameter p with
 * atol_p[p] >= 0. */
static void check_grads(struct tu_layer *t, ref_fn ref, const void *arg, float h,
                        const double *atol_x, const double atol_p[4], size_t max_checks)
{
    tu_layer_zero_grads(t);
    tu_layer_forward(t);
    tu_layer_backward(t, 0);
    struct fd_ctx c = {t, ref, arg, malloc(tu_layer_out_len(t) * sizeof(double))};
    ck_assert_ptr_nonnull(c.y);
    struct tu_fd_opts o = {h, 4 * U, 0.0, max_checks};
    struct tu_fd_result r;
    for (int i = 0; i < t->l->nin; i++) {
        if (atol_x[i] < 0) continue;
        o.atol = atol_x[i];
        ck_assert_msg(tu_gradcheck(fd_loss, &c, t->x[i], tu_layer_in_len(t, i), t->dx[i], &o, &r) ==
                          0,
                      "%s: dx[%d] index %zu analytic %.9g fd %.9g (%.3g x tol)", t->l->name, i,
                      r.worst, r.worst_an, r.worst_fd, r.worst_ratio);
    }
    for (int p = 0; p < t->l->nparam; p++) {
        struct adapt_param *pp = &t->l->param[p];
        if (pp->role == ADAPT_PARAM_BUFFER || atol_p[p] < 0) continue;
        o.atol = atol_p[p];
        ck_assert_msg(tu_gradcheck(fd_loss, &c, pp->value.data, pp->value.numel, pp->grad.data, &o,
                                   &r) == 0,
                      "%s: d%s index %zu analytic %.9g fd %.9g (%.3g x tol)", t->l->name, pp->name,
                      r.worst, r.worst_an, r.worst_fd, r.worst_ratio);
    }
    free(c.y);
}

/* ------------------------------------------------------------------ GEMM */

/* adapt_gemm_bcast against a double-precision triple loop, over row counts
 * that hit every register tile (1..24 rows with 16 columns, 1..12 with 32),
 * transposed and strided A, and the three init modes. Each element sums K
 * products |a b| <= 2.385 * 1 (plus |C| or |bias| <= 1): sum_tol(K + 1, 2.385). */
START_TEST(test_gemm_bcast)
{
    static const int Ms[] = {1, 5, 12, 13, 24, 25, 37};
    static const int Ns[] = {16, 32, 48, 80};
    static const int Ks[] = {1, 9, 70};
    float *A = malloc(37 * 70 * 2 * sizeof(float)), *B = malloc(70 * 96 * sizeof(float));
    float *C = malloc(37 * 96 * sizeof(float)), *C0 = malloc(37 * 96 * sizeof(float));
    float bias[37];
    tu_fill_uniform(A, 37 * 70 * 2, 201, -2.385f, 2.385f);
    tu_fill_uniform(B, 70 * 96, 202, -1.0f, 1.0f);
    tu_fill_uniform(C0, 37 * 96, 203, -1.0f, 1.0f);
    tu_fill_uniform(bias, 37, 204, -1.0f, 1.0f);
    for (int mi = 0; mi < 7; mi++)
        for (int ni = 0; ni < 4; ni++)
            for (int ki = 0; ki < 3; ki++)
                for (int mode = 0; mode < 6; mode++) {
                    const int M = Ms[mi], N = Ns[ni], K = Ks[ki], init = mode % 3;
                    /* A row-major with row stride 2K, or transposed (A[i][k] at k*M + i) */
                    const ptrdiff_t ars = mode < 3 ? 2 * K : 1, acs = mode < 3 ? 1 : M;
                    const ptrdiff_t ldb = 96, ldc = 96;
                    memcpy(C, C0, 37 * 96 * sizeof(float));
                    adapt_gemm_bcast(M, N, K, A, ars, acs, B, ldb, C, ldc, init, bias);
                    for (int i = 0; i < M; i++)
                        for (int j = 0; j < 96; j++) {
                            if (j >= N) { /* columns past N untouched */
                                ck_assert(C[i * ldc + j] == C0[i * ldc + j]);
                                continue;
                            }
                            double r = init == ADAPT_GEMM_ACC    ? C0[i * ldc + j]
                                       : init == ADAPT_GEMM_BIAS ? bias[i]
                                                                 : 0.0;
                            for (int k = 0; k < K; k++)
                                r += (double)A[i * ars + k * acs] * B[k * ldb + j];
                            ck_assert_msg(fabs(C[i * ldc + j] - r) <= sum_tol(K + 1, 2.385),
                                          "M %d N %d K %d mode %d: C[%d][%d] = %.9g, want %.9g", M,
                                          N, K, mode, i, j, C[i * ldc + j], r);
                        }
                }
    free(A);
    free(B);
    free(C);
    free(C0);
}
END_TEST

/* ------------------------------------------------------------------ conv2d */

/* PyTorch 1.13: F.conv2d(x (1,2,3,3), w (2,2,2,2), b, stride=2, padding=1) */
START_TEST(test_conv_hand)
{
    static const float x[18] = {2.385f, -1.25f, 0.5f,   3.0f,   -0.75f,  1.125f,
                                -2.0f,  0.25f,  1.5f,   -0.375f, 2.75f, -1.625f,
                                0.875f, -3.125f, 1.0f,  2.25f,  -0.5f,  -1.875f};
    static const float w[16] = {0.5f,   -1.5f, 2.0f,  0.25f,  -0.75f, 1.25f,  0.125f, -2.5f,
                                1.75f,  0.375f, -0.625f, 1.0f, -1.125f, 0.875f, 2.125f, -0.25f};
    static const float b[2] = {0.3f, -0.7f};
    static const float want[8] = {1.83375001f, 2.33124995f, -9.23124981f, 7.33125019f,
                                  1.77874994f, 6.83125019f, -1.37187505f, 3.54999995f};
    int chw[3] = {2, 3, 3};
    struct tu_layer t;
    tu_layer_bind(&t, adapt_conv2d_create("c", chw, 2, 2, 2, 1, 1), 1, 1);
    ck_assert_int_eq(t.l->out_dim[0], 2);
    ck_assert_int_eq(t.l->out_dim[1], 2);
    ck_assert_int_eq(t.l->out_dim[2], 2);
    memcpy(t.x[0], x, sizeof x);
    memcpy(t.l->param[0].value.data, w, sizeof w);
    memcpy(t.l->param[1].value.data, b, sizeof b);
    tu_layer_forward(&t);
    /* every output sums at most 8 products: a few ulps of the largest (|y| < 10) */
    for (int i = 0; i < 8; i++) ck_assert_float_eq_tol(t.y[i], want[i], 8 * 16 * U);
    ck_assert_str_eq(t.l->param[0].name, "c.weight");
    ck_assert_str_eq(t.l->param[1].name, "c.bias");
    ck_assert_int_eq(t.l->param[0].fan_in, 8);
    ck_assert_int_eq(t.l->macs, 2 * 2 * 2 * 8);
    ck_assert_int_eq(t.l->is_unit, 1);
    tu_layer_release(&t);
}
END_TEST

static const struct conv_arg conv_cases[] = {
    {3, 7, 7, 4, 3, 1, 1, 1},  /* 3x3 same padding */
    {2, 9, 9, 3, 3, 2, 1, 0},  /* stride 2, no bias (ResNet downsampling) */
    {3, 13, 13, 4, 11, 4, 5, 1}, /* k11 s4 p5 (AlexNet-CIFAR conv1) */
    {4, 8, 8, 3, 1, 2, 0, 0},  /* 1x1 stride 2 projection */
    {3, 5, 5, 4, 5, 1, 0, 1},  /* kernel covers the input: fully connected path */
    {2, 6, 5, 3, 3, 1, 0, 1},  /* non-square plane */
    {2, 8, 8, 3, 5, 2, 2, 1},  /* k5 s2 p2, P = 16 */
    {3, 10, 12, 14, 3, 1, 1, 1}, /* two row blocks of 7 output channels, P = 120 */
    {4, 2, 2, 5, 3, 1, 1, 1},  /* plane within the kernel: dense (AlexNet conv3..5) */
    {2, 4, 4, 3, 5, 1, 2, 0},  /* dense with k5 p2 (AlexNet conv2) */
    {16, 3, 3, 3, 3, 2, 1, 1}, /* dense with stride 2 */
    {3, 16, 16, 5, 3, 1, 1, 1}, /* output rows of 16 (vector im2col rows) */
    {4, 8, 8, 6, 3, 1, 1, 0},  /* output rows of 8 */
    {2, 17, 17, 3, 3, 2, 0, 1}, /* stride 2 with an odd plane and no padding */
    {1, 32, 32, 6, 5, 1, 0, 1}, /* LeNet-5 C1: rows of 28 (vector tails) */
    {2, 14, 14, 5, 5, 1, 0, 1}, /* LeNet-5 C3 shape: rows of 10 */
};

START_TEST(test_conv_ref_and_grads)
{
    const struct conv_arg *a = &conv_cases[_i];
    int chw[3] = {a->cin, a->h, a->w};
    const int n = 2;
    struct tu_layer t;
    tu_layer_bind(&t, adapt_conv2d_create("conv", chw, a->cout, a->k, a->s, a->p, a->bias), n, 1);
    const int ho = (a->h + 2 * a->p - a->k) / a->s + 1, wo = (a->w + 2 * a->p - a->k) / a->s + 1;
    ck_assert_int_eq(t.l->out_dim[1], ho);
    ck_assert_int_eq(t.l->out_dim[2], wo);
    ck_assert_int_eq(t.l->macs, (int64_t)ho * wo * a->cout * a->cin * a->k * a->k);
    size_t nx = tu_layer_in_len(&t, 0), ny = tu_layer_out_len(&t);
    tu_fill_uniform(t.x[0], nx, 11 + _i, -2.385f, 2.385f);
    tu_fill_uniform(t.l->param[0].value.data, t.l->param[0].value.numel, 12 + _i, -0.9f, 0.9f);
    if (a->bias) tu_fill_uniform(t.l->param[1].value.data, a->cout, 13 + _i, -0.5f, 0.5f);
    tu_fill_uniform(t.dy, ny, 14 + _i, -1.0f, 1.0f);

    /* forward against the double reference: per element 4 sqrt(m) u sum|terms| + 2u|y| */
    double *y = malloc(ny * sizeof(double)), *ya = malloc(ny * sizeof(double));
    tu_layer_forward(&t);
    ref_conv_abs(&t, a, y, ya);
    const double m = (double)a->cin * a->k * a->k + 1;
    for (size_t i = 0; i < ny; i++)
        ck_assert_msg(fabs(t.y[i] - y[i]) <= 4 * sqrt(m) * U * ya[i] + 2 * U * fabs(y[i]),
                      "y[%zu] = %.9g, reference %.9g", i, t.y[i], y[i]);
    free(y);
    free(ya);

    /* dx: sum of <= cout*k*k terms dy*W (|t| <= 0.9); dW: n*P terms dy*x
     * (|t| <= 2.385); db: n*P terms dy (|t| <= 1) */
    double ax[2] = {sum_tol((double)a->cout * a->k * a->k, 0.9), -1};
    double ap[4] = {sum_tol((double)n * ho * wo, 2.385), sum_tol((double)n * ho * wo, 1.0), -1, -1};
    check_grads(&t, ref_conv, a, 0x1p-10f, ax, ap, 48);
    tu_layer_release(&t);
}
END_TEST

/* Grouped convolution (weight (cout, cin/groups, k, k)) in double. */
struct gconv_arg {
    int cin, h, w, cout, k, s, p, groups, bias, d;
};

static void ref_gconv(const struct tu_layer *t, const void *arg, double *y)
{
    const struct gconv_arg *a = arg;
    const float *W = t->l->param[0].value.data, *b = a->bias ? t->l->param[1].value.data : NULL;
    const int d = a->d, span = (a->k - 1) * d + 1;
    const int ho = (a->h + 2 * a->p - span) / a->s + 1, wo = (a->w + 2 * a->p - span) / a->s + 1;
    const int cig = a->cin / a->groups, cog = a->cout / a->groups;
    for (int n = 0; n < t->n; n++)
        for (int o = 0; o < a->cout; o++)
            for (int oy = 0; oy < ho; oy++)
                for (int ox = 0; ox < wo; ox++) {
                    double s = b ? b[o] : 0.0;
                    for (int ic = 0; ic < cig; ic++)
                        for (int ky = 0; ky < a->k; ky++)
                            for (int kx = 0; kx < a->k; kx++) {
                                int iy = oy * a->s - a->p + ky * d, ix = ox * a->s - a->p + kx * d;
                                int c = (o / cog) * cig + ic;
                                if (iy < 0 || iy >= a->h || ix < 0 || ix >= a->w) continue;
                                s += (double)W[((o * cig + ic) * a->k + ky) * a->k + kx] *
                                     t->x[0][((size_t)(n * a->cin + c) * a->h + iy) * a->w + ix];
                            }
                    y[(((size_t)n * a->cout + o) * ho + oy) * wo + ox] = s;
                }
}

/* PyTorch 1.13: F.conv2d(x (1,2,3,3), w (2,1,2,2), b, stride=1, padding=1, groups=2) and its
 * backward for dy = arange(32)/8 - 1 (x, w, b as in test_conv_hand). */
START_TEST(test_gconv_hand)
{
    static const float x[18] = {2.385f, -1.25f, 0.5f,   3.0f,   -0.75f,  1.125f,
                                -2.0f,  0.25f,  1.5f,   -0.375f, 2.75f, -1.625f,
                                0.875f, -3.125f, 1.0f,  2.25f,  -0.5f,  -1.875f};
    static const float w[8] = {0.5f, -1.5f, 2.0f, 0.25f, -0.75f, 1.25f, 0.125f, -2.5f};
    static const float b[2] = {0.3f, -0.7f};
    static const float want[32] = {
        0.89625001f, 4.75750017f, -2.07500005f, 1.29999995f,  -2.52749991f, 9.18000031f,
        -2.29375005f, 2.79999995f, -4.69999981f, -1.01250005f, -0.88750005f, 3.86249995f,
        3.29999995f, -1.07500005f, -1.82500005f, 1.04999995f,  0.23750001f, -7.62187481f,
        3.70624995f, -0.90312499f, -3.35625005f, 10.94062519f, -7.68437481f, 0.64375001f,
        -5.23124981f, -3.73124981f, 7.51875019f, -1.68437505f, 2.11249995f, -3.01250005f,
        -2.66875005f, 0.70625001f};
    static const float want_dx[18] = {-1.4375f,    -1.28125f, -1.125f,    -0.8125f,  -0.65625f,
                                      -0.5f,       -0.1875f,  -0.03125f,  0.125f,    -1.703125f,
                                      -1.9375f,    -2.171875f, -2.640625f, -2.875f,  -3.109375f,
                                      -3.578125f,  -3.8125f,  -4.046875f};
    static const float want_dw[8] = {0.21500003f, -0.38f,     -2.16499996f, -2.75999999f,
                                     -2.5f,       -2.421875f, -2.1875f,     -2.109375f};
    int chw[3] = {2, 3, 3};
    struct tu_layer t;
    tu_layer_bind(&t, adapt_gconv2d_create("g", chw, 2, 2, 1, 1, 2, 1, 1), 1, 1);
    ck_assert_str_eq(t.l->ops->kind, "conv2d");
    ck_assert_int_eq(t.l->param[0].value.dim[1], 1);
    ck_assert_int_eq(t.l->param[0].fan_in, 4);
    ck_assert_int_eq(t.l->macs, 16 * 2 * 4);
    memcpy(t.x[0], x, sizeof x);
    memcpy(t.l->param[0].value.data, w, sizeof w);
    memcpy(t.l->param[1].value.data, b, sizeof b);
    for (int i = 0; i < 32; i++) t.dy[i] = (float)i / 8 - 1;
    tu_layer_zero_grads(&t);
    tu_layer_forward(&t);
    tu_layer_backward(&t, 0);
    for (int i = 0; i < 32; i++) ck_assert_float_eq_tol(t.y[i], want[i], 16 * 16 * U);
    for (int i = 0; i < 18; i++) ck_assert_float_eq_tol(t.dx[0][i], want_dx[i], 8 * 8 * U);
    for (int i = 0; i < 8; i++)
        ck_assert_float_eq_tol(t.l->param[0].grad.data[i], want_dw[i], 64 * 8 * U);
    ck_assert_float_eq_tol(t.l->param[1].grad.data[0], -1.0f, 16 * U);
    ck_assert_float_eq_tol(t.l->param[1].grad.data[1], 31.0f, 64 * U);
    tu_layer_release(&t);
}
END_TEST

static const struct gconv_arg gconv_cases[] = {
    {4, 7, 7, 4, 3, 1, 1, 4, 0, 1},   /* depthwise 3x3 (MobileNet) */
    {6, 9, 9, 6, 3, 2, 1, 6, 0, 1},   /* depthwise, stride 2 */
    {6, 8, 8, 12, 3, 1, 1, 6, 1, 1},  /* channel multiplier 2, bias */
    {4, 6, 5, 6, 3, 1, 0, 2, 1, 1},   /* two groups of 2 -> 3, non-square, no padding */
    {8, 5, 5, 4, 1, 1, 0, 4, 0, 1},   /* grouped 1x1 */
    {3, 17, 17, 3, 5, 2, 2, 3, 1, 1}, /* depthwise k5 s2 p2, odd plane */
    {3, 9, 9, 4, 3, 1, 2, 1, 1, 2}, /* dilation 2, groups 1 (the direct path) */
    {4, 11, 10, 4, 3, 2, 1, 4, 0, 3}, /* depthwise, dilation 3, stride 2 */
};

/* A grouped convolution of n samples with seeded uniform data (seeds seed..seed+3): its
 * forward against the double reference ref_gconv, then its finite-difference gradients
 * (probes per tensor). Returns with the layer bound, dx formed, and ax[0] the input gradient's
 * summation bound. */
static void gconv_forward_and_grads(struct tu_layer *t, const struct gconv_arg *a, int n,
                                    int seed, int probes, double ax[2])
{
    int chw[3] = {a->cin, a->h, a->w};
    tu_layer_bind(t, adapt_gconv2d_create("gc", chw, a->cout, a->k, a->s, a->p, a->groups,
                                          a->d, a->bias),
                  n, 1);
    size_t nx = tu_layer_in_len(t, 0), ny = tu_layer_out_len(t);
    tu_fill_uniform(t->x[0], nx, seed, -2.385f, 2.385f);
    tu_fill_uniform(t->l->param[0].value.data, t->l->param[0].value.numel, seed + 1, -0.9f,
                    0.9f);
    if (a->bias) tu_fill_uniform(t->l->param[1].value.data, a->cout, seed + 2, -0.5f, 0.5f);
    tu_fill_uniform(t->dy, ny, seed + 3, -1.0f, 1.0f);
    double *y = malloc(ny * sizeof(double));
    tu_layer_forward(t);
    ref_gconv(t, a, y);
    const double m = (double)a->cin / a->groups * a->k * a->k + 1;
    for (size_t i = 0; i < ny; i++)
        ck_assert_msg(fabs(t->y[i] - y[i]) <= sum_tol(m, 2.385 * 0.9) + 2 * U * fabs(y[i]),
                      "n = %d: y[%zu] = %.9g, reference %.9g", n, i, t->y[i], y[i]);
    free(y);
    const int ho = t->l->out_dim[1], wo = t->l->out_dim[2];
    ax[0] = sum_tol((double)a->cout / a->groups * a->k * a->k, 0.9);
    ax[1] = -1;
    double ap[4] = {sum_tol((double)n * ho * wo, 2.385), sum_tol((double)n * ho * wo, 1.0), -1,
                    -1};
    check_grads(t, ref_gconv, a, 0x1p-10f, ax, ap, probes);
}

START_TEST(test_gconv_ref_and_grads)
{
    const struct gconv_arg *a = &gconv_cases[_i];
    struct tu_layer t;
    double ax[2];
    gconv_forward_and_grads(&t, a, 2, 31 + _i, 48, ax);
    size_t nx = tu_layer_in_len(&t, 0);
    /* backward with acc adds into dx: twice the gradient after a second accumulating pass
     * (up to the rounding of adding each term to the first pass's value) */
    float *first = malloc(nx * sizeof(float));
    memcpy(first, t.dx[0], nx * sizeof(float));
    tu_layer_backward(&t, 1);
    for (size_t i = 0; i < nx; i++)
        ck_assert_msg(fabs(t.dx[0][i] - 2 * first[i]) <= 2 * ax[0] + 4 * U * fabs(first[i]),
                      "dx[%zu] = %.9g after accumulating, first pass %.9g", i, t.dx[0][i],
                      first[i]);
    free(first);
    tu_layer_release(&t);
}
END_TEST

/* In backward, and in forward for planes larger than 40x40 with padding, a channel's planes
 * of several samples are convolved as one stack laid one under the other (a stack holds about
 * 512 floats: 20 samples of a 4x4 plane with padding 1, 5 of an 8x8 plane with stride 2); the
 * forward of smaller planes puts eight samples side by side. These batches leave several full
 * stacks or groups of eight and a partial one, against the double reference (forward and
 * finite-difference gradients, which cover every sample's dx and dW); the last cases are
 * planes large enough for the stacks in forward too. */
struct gconv_stack_case {
    struct gconv_arg a;
    int n;
};

static const struct gconv_stack_case gconv_stack_cases[] = {
    {{5, 4, 4, 5, 3, 1, 1, 5, 0, 1}, 45},  /* depthwise 4x4 (MobileNet's last planes) */
    {{3, 2, 2, 3, 3, 1, 1, 3, 1, 1}, 61},  /* 2x2 plane, bias */
    {{4, 1, 1, 4, 3, 1, 1, 4, 0, 1}, 131}, /* 1x1 plane with padding 1: only the centre tap */
    {{3, 4, 4, 3, 3, 1, 2, 3, 0, 2}, 31},  /* dilation 2, padding 2 */
    {{3, 8, 8, 3, 3, 2, 1, 3, 0, 1}, 13},  /* stride 2 (8x8 -> 4x4) */
    {{2, 4, 4, 2, 3, 2, 1, 2, 1, 1}, 17},  /* stride 2 (4x4 -> 2x2), bias */
    {{3, 7, 7, 3, 3, 3, 1, 3, 0, 1}, 13},  /* stride 3 */
    {{4, 5, 3, 4, 3, 2, 1, 4, 0, 2}, 47},  /* stride 2, dilation 2, non-square */
    {{4, 4, 4, 8, 3, 1, 1, 2, 1, 1}, 23},  /* two groups of 2 -> 4, bias */
    {{4, 3, 5, 4, 1, 2, 0, 4, 0, 1}, 47},  /* grouped 1x1, stride 2, no padding */
    {{2, 3, 3, 2, 1, 1, 1, 2, 0, 1}, 37},  /* padding wider than the kernel */
    {{2, 5, 5, 2, 2, 1, 0, 2, 1, 1}, 33},  /* even kernel, no padding */
    {{2, 42, 41, 2, 3, 1, 1, 2, 1, 1}, 3}, /* 42x41: stacks in forward */
    {{2, 45, 45, 2, 3, 2, 1, 2, 0, 1}, 3}, /* stride 2 */
    {{2, 40, 40, 4, 3, 1, 2, 1, 1, 2}, 2}, /* dilation 2, groups 1 */
};

START_TEST(test_gconv_stacks)
{
    const struct gconv_stack_case *sc = &gconv_stack_cases[_i];
    struct tu_layer t;
    double ax[2];
    gconv_forward_and_grads(&t, &sc->a, sc->n, 131 + _i, 96, ax);
    tu_layer_release(&t);
}
END_TEST

/* Dyadic data (exact in any order): a batch gives the same bits as one sample at a time and
 * as two samples at a time, backward with acc adds into dx exactly; then with uniform data,
 * a layer that runs on two threads gives the same bits as one on a single thread. */
START_TEST(test_gconv_stacks_exact)
{
    const struct gconv_stack_case *sc = &gconv_stack_cases[_i];
    const struct gconv_arg *a = &sc->a;
    int chw[3] = {a->cin, a->h, a->w};
    const int n = sc->n;
    struct tu_layer t;
    tu_layer_bind(
        &t, adapt_gconv2d_create("gs", chw, a->cout, a->k, a->s, a->p, a->groups, a->d, a->bias), n,
        1);
    struct adapt_layer *l = t.l;
    const size_t nx = tu_layer_in_len(&t, 0), ny = tu_layer_out_len(&t);
    const size_t sx = nx / n, sy = ny / n, nw = l->param[0].value.numel;
    tu_fill_dyadic(t.x[0], nx, 141 + _i, -16, 16, 3);
    tu_fill_dyadic(l->param[0].value.data, nw, 142 + _i, -16, 16, 4);
    if (a->bias) tu_fill_dyadic(l->param[1].value.data, a->cout, 143 + _i, -16, 16, 4);
    tu_fill_dyadic(t.dy, ny, 144 + _i, -8, 8, 3);
    tu_layer_zero_grads(&t);
    tu_layer_forward(&t);
    tu_layer_backward(&t, 0);
    float *y1 = malloc(ny * sizeof(float)), *dx1 = malloc(nx * sizeof(float));
    float *dw1 = malloc(nw * sizeof(float)), db1[8] = {0};
    memcpy(y1, t.y, ny * sizeof(float));
    memcpy(dx1, t.dx[0], nx * sizeof(float));
    memcpy(dw1, l->param[0].grad.data, nw * sizeof(float));
    if (a->bias) memcpy(db1, l->param[1].grad.data, a->cout * sizeof(float));
    for (int step = 1; step <= 2; step++) {
        tu_layer_zero_grads(&t);
        memset(t.y, 0, ny * sizeof(float));
        memset(t.dx[0], 0, nx * sizeof(float));
        for (int j = 0; j < n; j += step) {
            struct adapt_exec ex = {n - j < step ? n - j : step, 1, t.ws, 0, 0};
            const float *xs[2] = {t.x[0] + j * sx, NULL};
            float *dxs[2] = {t.dx[0] + j * sx, NULL};
            l->ops->forward(l, &ex, xs, t.y + j * sy);
            l->ops->backward(l, &ex, xs, t.y + j * sy, t.dy + j * sy, dxs, 0);
        }
        ck_assert_int_eq(tu_first_bit_diff(t.y, y1, ny), -1);
        ck_assert_int_eq(tu_first_bit_diff(t.dx[0], dx1, nx), -1);
        ck_assert_int_eq(tu_first_bit_diff(l->param[0].grad.data, dw1, nw), -1);
        if (a->bias) ck_assert_int_eq(tu_first_bit_diff(l->param[1].grad.data, db1, a->cout), -1);
    }
    float *prev = malloc(nx * sizeof(float));
    tu_fill_dyadic(prev, nx, 145 + _i, -64, 64, 3);
    memcpy(t.dx[0], prev, nx * sizeof(float));
    tu_layer_backward(&t, 1);
    for (size_t i = 0; i < nx; i++) ck_assert(t.dx[0][i] == prev[i] + dx1[i]);
    free(prev);

    /* one thread against two */
    const int saved = omp_get_max_threads();
    struct tu_layer t1, t2;
    omp_set_num_threads(1);
    tu_layer_bind(
        &t1, adapt_gconv2d_create("g1", chw, a->cout, a->k, a->s, a->p, a->groups, a->d, a->bias),
        n, 1);
    omp_set_num_threads(2);
    tu_layer_bind(
        &t2, adapt_gconv2d_create("g2", chw, a->cout, a->k, a->s, a->p, a->groups, a->d, a->bias),
        n, 1);
    omp_set_num_threads(saved);
    struct tu_layer *tt[2] = {&t1, &t2};
    for (int r = 0; r < 2; r++) {
        tu_fill_uniform(tt[r]->x[0], nx, 151 + _i, -2.385f, 2.385f);
        tu_fill_uniform(tt[r]->l->param[0].value.data, nw, 152 + _i, -0.9f, 0.9f);
        if (a->bias) tu_fill_uniform(tt[r]->l->param[1].value.data, a->cout, 153 + _i, -0.5f, 0.5f);
        tu_fill_uniform(tt[r]->dy, ny, 154 + _i, -1.0f, 1.0f);
        tu_layer_zero_grads(tt[r]);
        tu_layer_forward(tt[r]);
        tu_layer_backward(tt[r], 0);
    }
    ck_assert_int_eq(tu_first_bit_diff(t1.y, t2.y, ny), -1);
    ck_assert_int_eq(tu_first_bit_diff(t1.dx[0], t2.dx[0], nx), -1);
    ck_assert_int_eq(tu_first_bit_diff(t1.l->param[0].grad.data, t2.l->param[0].grad.data, nw), -1);
    if (a->bias)
        ck_assert_int_eq(
            tu_first_bit_diff(t1.l->param[1].grad.data, t2.l->param[1].grad.data, a->cout), -1);
    tu_layer_release(&t1);
    tu_layer_release(&t2);
    free(y1);
    free(dx1);
    free(dw1);
    tu_layer_release(&t);
}
END_TEST

/* PyTorch 1.13: F.relu6 and its backward (ones) on -1.5, 0, 0.5, 5.999, 6, 7.25, NaN:
 * 0, 0, 0.5, 5.999, 6, 6, NaN and gradients 0, 0, 1, 1, 0, 0, 1 (NaN passes it). */
START_TEST(test_relu6_hand)
{
    static const float x[7] = {-1.5f, 0.0f, 0.5f, 5.999f, 6.0f, 7.25f, NAN};
    static const float want[6] = {0.0f, 0.0f, 0.5f, 5.999f, 6.0f, 6.0f};
    static const float want_dx[7] = {0, 0, 1, 1, 0, 0, 1};
    int chw[3] = {7, 1, 1};
    struct tu_layer t;
    tu_layer_bind(&t, adapt_relu6_create("r6", chw), 1, 1);
    memcpy(t.x[0], x, sizeof x);
    for (int i = 0; i < 7; i++) t.dy[i] = 1.0f;
    tu_layer_forward(&t);
    tu_layer_backward(&t, 0);
    for (int i = 0; i < 6; i++) ck_assert(t.y[i] == want[i]);
    ck_assert(isnan(t.y[6]));
    for (int i = 0; i < 7; i++) ck_assert(t.dx[0][i] == want_dx[i]);
    ck_assert_str_eq(t.l->ops->kind, "relu6");
    tu_layer_release(&t);
}
END_TEST

/* PyTorch 1.13: torch.sigmoid and F.hardswish on the values below, and their gradients for
 * dy = 1 (sigmoid_backward from y; hardswish_backward from x: -0.5 at x = -3, 1.5 at 3). */
START_TEST(test_sigmoid_hardswish_hand)
{
    static const float x[9] = {-20.0f, -3.5f, -3.0f, -1.25f, 0.0f, 0.75f, 3.0f, 4.5f, 20.0f};
    static const float sig[9] = {2.06115369e-09f, 0.0293122306f, 0.0474258736f,
                                 0.222700134f,    0.5f,          0.679178715f,
                                 0.952574134f,    0.989013076f,  1.0f};
    static const float dsig[9] = {2.06115369e-09f, 0.0284530222f, 0.0451766588f,
                                  0.173104793f,    0.25f,         0.217894986f,
                                  0.0451766551f,   0.0108662117f, 0.0f};
    static const float hs[9] = {-0.0f, -0.0f, -0.0f, -0.364583343f, 0.0f, 0.46875f, 3.0f, 4.5f,
                                20.0f};
    static const float dhs[9] = {0.0f, 0.0f, -0.5f, 0.0833333433f, 0.5f, 0.75f, 1.5f, 1.0f, 1.0f};
    int chw[3] = {9, 1, 1};
    for (int k = 0; k < 2; k++) {
        struct tu_layer t;
        tu_layer_bind(&t, k ? adapt_hardswish_create("h", chw) : adapt_sigmoid_create("s", chw),
                      1, 1);
        memcpy(t.x[0], x, sizeof x);
        for (int i = 0; i < 9; i++) t.dy[i] = 1.0f;
        tu_layer_forward(&t);
        tu_layer_backward(&t, 0);
        const float *wy = k ? hs : sig, *wd = k ? dhs : dsig;
        /* a few ulps relative (sigmoid's tails keep their relative accuracy) */
        for (int i = 0; i < 9; i++) {
            ck_assert_msg(fabsf(t.y[i] - wy[i]) <= 4 * U * fabsf(wy[i]) + 1e-30f,
                          "%s(%g) = %.9g, PyTorch %.9g", t.l->ops->kind, x[i], t.y[i], wy[i]);
            ck_assert_msg(fabsf(t.dx[0][i] - wd[i]) <= 8 * U * fabsf(wd[i]) + 1e-30f,
                          "%s'(%g) = %.9g, PyTorch %.9g", t.l->ops->kind, x[i], t.dx[0][i], wd[i]);
        }
        tu_layer_release(&t);
    }
}
END_TEST

static void ref_sigmoid(const struct tu_layer *t, const void *arg, double *y)
{
    for (size_t i = 0; i < tu_layer_out_len(t); i++) y[i] = 1.0 / (1.0 + exp(-(double)t->x[0][i]));
}

static void ref_hardswish(const struct tu_layer *t, const void *arg, double *y)
{
    for (size_t i = 0; i < tu_layer_out_len(t); i++) {
        double v = t->x[0][i], r = v + 3 < 0 ? 0 : v + 3 > 6 ? 6 : v + 3;
        y[i] = v * r / 6;
    }
}

static void ref_relu6(const struct tu_layer *t, const void *arg, double *y)
{
    for (size_t i = 0; i < tu_layer_out_len(t); i++) {
        double v = t->x[0][i];
        y[i] = v < 0 ? 0 : v > 6 ? 6 : v;
    }
}

/* sigmoid, hardswish and relu6 (inputs in [-7, 7], away from the kinks at 0, +-3 and 6) */
START_TEST(test_sigmoid_hardswish_grads)
{
    int chw[3] = {3, 5, 7};
    static ref_fn const refs[3] = {ref_sigmoid, ref_hardswish, ref_relu6};
    for (int k = 0; k < 3; k++) {
        struct tu_layer t;
        tu_layer_bind(&t, k == 2   ? adapt_relu6_create("r6", chw)
                          : k == 1 ? adapt_hardswish_create("h", chw)
                                   : adapt_sigmoid_create("s", chw),
                      2, 1);
        size_t nx = tu_layer_in_len(&t, 0);
        /* away from hardswish's kinks at -3 and 3 by more than the step */
        tu_fill_away_from_zero(t.x[0], nx, 51 + k, 0.01f, 7.0f);
        for (size_t i = 0; i < nx; i++)
            if (fabsf(fabsf(t.x[0][i]) - 3.0f) < 0.01f || fabsf(t.x[0][i] - 6.0f) < 0.01f)
                t.x[0][i] = 2.5f;
        tu_fill_uniform(t.dy, nx, 53 + k, -1.0f, 1.0f);
        double ax[2] = {8 * U, -1}, ap[4] = {-1, -1, -1, -1};
        check_grads(&t, refs[k], NULL, 0x1p-12f, ax, ap, 64);
        tu_layer_release(&t);
    }
}
END_TEST

/* GELU references in double: x Phi(x) with Phi(x) = erfc(-x / sqrt 2) / 2, and PyTorch's tanh
 * form */
static double gelu_ref(double x) { return x * 0.5 * erfc(-x / sqrt(2.0)); }
static double gelu_tanh_ref(double x)
{
    return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

static void ref_gelu(const struct tu_layer *t, const void *arg, double *y)
{
    const int approximate = arg ? *(const int *)arg : 0;
    for (size_t i = 0; i < tu_layer_out_len(t); i++)
        y[i] = approximate ? gelu_tanh_ref(t->x[0][i]) : gelu_ref(t->x[0][i]);
}

/* PyTorch 1.13: F.gelu(x) and F.gelu(x, approximate='tanh') on the float32 values below, and
 * their gradients for dy = 1 (GeluBackward). PyTorch forms 0.5 x (1 + erf(x / sqrt 2)), whose
 * 1 + erf rounds to u absolute, so its values carry up to u |x| besides a few ulps; the layer's
 * Phi is within 8 ulp (test_gelu_accuracy). Hence |layer - PyTorch| <= 10 u |y| + 2 u |x| for
 * the values and 10 u (|Phi| + |x phi|) + 2 u for the gradients (Phi + x phi, in double here).
 * The tanh form: tanh within 3 ulp here, 1 ulp in PyTorch, enters as 0.5 x tanh: 4 u |x| more. */
START_TEST(test_gelu_hand)
{
    static const float x[16] = {-4.0f, -3.0f, -2.385f, -1.25f, -0.75f, -0.1f, -1e-3f, 0.0f,
                                2e-4f, 0.05f, 0.5f,   1.0f,   1.7f,  2.385f, 3.5f,  6.0f};
    static const float want[2][16] = {
        {-0.000126719475f, -0.00404986739f, -0.0203668438f, -0.132062316f, -0.169970468f,
         -0.0460172109f, -0.000499601127f, 0.0f, 0.000100015975f, 0.0259969477f, 0.345731199f,
         0.841344714f, 1.62423885f, 2.36463308f, 3.49918556f, 6.0f},
        {-7.02142715e-05f, -0.00363743305f, -0.0199774764f, -0.132285804f, -0.170039445f,
         -0.0460172482f, -0.000499601068f, 0.0f, 0.000100015961f, 0.0259969383f, 0.345714003f,
         0.841192007f, 1.62410593f, 2.36502242f, 3.49938369f, 6.0f}};
    static const float want_dx[2][16] = {
        {-0.000503629446f, -0.0119456053f, -0.0468229949f, -0.122661471f, 0.000774204731f,
         0.420476824f, 0.499202192f, 0.5f, 0.500159681f, 0.539861143f, 0.86749506f,
         1.08331537f, 1.11531794f, 1.04682302f, 1.00282168f, 1.0f},
        {-0.000334972079f, -0.0115842968f, -0.047357861f, -0.122492626f, 0.00106176734f,
         0.420478195f, 0.499202132f, 0.5f, 0.500159621f, 0.539860845f, 0.86736989f,
         1.08296406f, 1.11591458f, 1.04735792f, 1.00242245f, 1.0f}};
    int chw[3] = {16, 1, 1};
    for (int ap = 0; ap < 2; ap++) {
        struct tu_layer t;
        tu_layer_bind(&t, adapt_gelu_create("g", chw, ap), 1, 1);
        ck_assert_str_eq(t.l->ops->kind, "gelu");
        ck_assert_int_eq(t.l->approximate, ap);
        ck_assert_int_eq(t.l->elementwise, 16);
        memcpy(t.x[0], x, sizeof x);
        for (int i = 0; i < 16; i++) t.dy[i] = 1.0f;
        tu_layer_forward(&t);
        tu_layer_backward(&t, 0);
        for (int i = 0; i < 16; i++) {
            double xi = x[i], phi = exp(-xi * xi / 2) / sqrt(2 * M_PI);
            double cdf = 0.5 * erfc(-xi / sqrt(2.0));
            double ty = 10 * U * fabs(want[ap][i]) + (2 + 4 * ap) * U * fabs(xi);
            double td = 10 * U * (cdf + fabs(xi) * phi) + 2 * U + 4 * ap * U * (1 + fabs(xi));
            ck_assert_msg(fabs(t.y[i] - want[ap][i]) <= ty, "gelu(%g, approximate %d) = %.9g, "
                          "PyTorch %.9g", x[i], ap, t.y[i], want[ap][i]);
            ck_assert_msg(fabs(t.dx[0][i] - want_dx[ap][i]) <= td, "gelu'(%g, approximate %d) "
                          "= %.9g, PyTorch %.9g", x[i], ap, t.dx[0][i], want_dx[ap][i]);
        }
        tu_layer_release(&t);
    }
}
END_TEST

/* GELU = x Phi(x) and its gradient Phi(x) + x phi(x) against erfc() and exp() in double on every
 * 613th float in [0, 14] and its negative (the bounds of act.c's header, measured there on
 * every 5th float: Phi and x Phi(x) within 8 ulp while Phi is a normal float, x >= -13.09,
 * the gradient within 8 ulp of |Phi| + |x phi|), then the special values: NaN, +-inf (as
 * PyTorch: gelu(inf) = inf, gelu(-inf) = NaN), -0, x below -13.1 (Phi flushed: -0). */
START_TEST(test_gelu_accuracy)
{
    const uint32_t top = 0x41600000u; /* 14.0f */
    const size_t stride = 613, cnt = top / stride + 1;
    int chw[3] = {1, 1, (int)(2 * cnt + 8)};
    struct tu_layer t;
    tu_layer_bind(&t, adapt_gelu_create("g", chw, 0), 1, 1);
    for (size_t i = 0; i < cnt; i++) {
        uint32_t u = (uint32_t)(i * stride);
        float f;
        memcpy(&f, &u, sizeof f);
        t.x[0][2 * i] = f;
        t.x[0][2 * i + 1] = -f;
    }
    float *sp = t.x[0] + 2 * cnt;
    const float special[8] = {NAN, INFINITY, -INFINITY, -0.0f, -13.5f, -1e30f, 1e30f, 1e-40f};
    memcpy(sp, special, sizeof special);
    for (size_t i = 0; i < 2 * cnt + 8; i++) t.dy[i] = 1.0f;
    tu_layer_forward(&t);
    tu_layer_backward(&t, 0);
    double worst[2] = {0.0, 0.0};
    float at[2] = {0.0f, 0.0f};
    for (size_t i = 0; i < 2 * cnt; i++) {
        double x = t.x[0][i], cdf = 0.5 * erfc(-x / sqrt(2.0));
        double pdf = exp(-x * x / 2) / sqrt(2 * M_PI);
        if (cdf < FLT_MIN || fabs(x * cdf) < FLT_MIN) continue;
        double e = tu_ulp_error(t.y[i], x * cdf);
        /* the gradient in ulps of |Phi| + |x phi| (it cancels for negative x) */
        double d = fabs(t.dx[0][i] - (cdf + x * pdf)) /
                   ldexp(1.0, ilogb(cdf + fabs(x) * pdf) - 23);
        if (e > worst[0]) worst[0] = e, at[0] = (float)x;
        if (d > worst[1]) worst[1] = d, at[1] = (float)x;
    }
    ck_assert_msg(worst[0] <= 8.0, "gelu max error %.3f ulp at %.9g", worst[0], at[0]);
    ck_assert_msg(worst[1] <= 8.0, "gelu' max error %.3f ulp at %.9g", worst[1], at[1]);
    const float *r = t.y + 2 * cnt, *g = t.dx[0] + 2 * cnt;
    ck_assert(isnan(r[0]) && isnan(g[0]));
    ck_assert(r[1] == INFINITY);
    ck_assert(isnan(r[2]));
    ck_assert(r[3] == 0.0f && signbit(r[3]) && g[3] == 0.5f);
    ck_assert(r[4] == 0.0f && g[4] == 0.0f);
    ck_assert(r[5] == 0.0f && r[6] == 1e30f && g[6] == 1.0f);
    ck_assert(r[7] == 0.5f * 1e-40f && g[7] == 0.5f);
    tu_layer_release(&t);
}
END_TEST

/* GELU and its tanh form against finite differences of the double references: smooth, so the
 * difference quotient with h = 2^-12 is within 1e-7 of the derivative; what remains is the
 * layer's own gradient error, within 8 ulp of |Phi| + |x phi| <= 1.13 (test_gelu_accuracy),
 * and for the tanh form a few ulps of terms up to 1.2: 16 u. */
START_TEST(test_gelu_grads)
{
    int chw[3] = {3, 5, 7};
    for (int ap = 0; ap < 2; ap++) {
        struct tu_layer t;
        tu_layer_bind(&t, adapt_gelu_create("g", chw, ap), 2, 1);
        size_t nx = tu_layer_in_len(&t, 0);
        tu_fill_uniform(t.x[0], nx, 57 + ap, -7.0f, 7.0f);
        tu_fill_uniform(t.dy, nx, 59 + ap, -1.0f, 1.0f);
        double ax[2] = {16 * U, -1}, ap4[4] = {-1, -1, -1, -1};
        check_grads(&t, ref_gelu, &ap, 0x1p-12f, ax, ap4, 64);
        tu_layer_release(&t);
    }
}
END_TEST

/* Dropout: evaluation passes x through; training keeps a fraction near 1 - p scaled by
 * 1/(1 - p), the same mask for the same (seed, layer, micro-batch) and another for the next
 * micro-batch; backward multiplies dy by the same mask. p = 0 is the identity. */
START_TEST(test_dropout)
{
    int chw[3] = {4, 16, 16};
    const int n = 8;
    struct tu_layer t;
    tu_layer_bind(&t, adapt_dropout_create("d", chw, 0.25f), n, 1);
    size_t m = tu_layer_in_len(&t, 0);
    for (size_t i = 0; i < m; i++) t.x[0][i] = 1.0f + (float)(i % 7);
    t.ex.rng_seed = 9;
    t.ex.rng_iter = 3;
    tu_layer_forward(&t);
    size_t kept = 0;
    for (size_t i = 0; i < m; i++) {
        if (t.y[i] != 0.0f) {
            kept++;
            ck_assert_float_eq(t.y[i], t.x[0][i] * (1.0f / 0.75f)); /* x scale, as PyTorch */
        }
    }
    /* 8192 draws of p = 0.75: within 5 standard deviations (sqrt(8192 * 0.1875) = 39) */
    ck_assert_msg(labs((long)kept - 6144) <= 5 * 39, "kept %zu of %zu", kept, m);
    float *first = malloc(m * sizeof(float));
    memcpy(first, t.y, m * sizeof(float));
    for (size_t i = 0; i < m; i++) t.dy[i] = 2.0f;
    tu_layer_backward(&t, 0);
    for (size_t i = 0; i < m; i++)
        ck_assert_float_eq(t.dx[0][i], first[i] != 0.0f ? 2.0f * (1.0f / 0.75f) : 0.0f);
    tu_layer_forward(&t); /* same key: same mask */
    ck_assert_int_eq(memcmp(first, t.y, m * sizeof(float)), 0);
    t.ex.rng_iter = 4;    /* the next micro-batch: another mask */
    tu_layer_forward(&t);
    ck_assert_int_ne(memcmp(first, t.y, m * sizeof(float)), 0);
    t.ex.training = 0;    /* evaluation */
    tu_layer_forward(&t);
    ck_assert_int_eq(memcmp(t.x[0], t.y, m * sizeof(float)), 0);
    free(first);
    tu_layer_release(&t);
    ck_assert_ptr_null(adapt_dropout_create("d", chw, 1.0f));
}
END_TEST

/* Concat: the channels of x0 then x1; backward hands each its slice, adding under acc. */
START_TEST(test_concat)
{
    int a[3] = {2, 3, 3}, b[3] = {3, 3, 3};
    struct adapt_layer *l = adapt_concat_create("c", a, b);
    ck_assert_ptr_nonnull(l);
    ck_assert_int_eq(l->out_dim[0], 5);
    struct tu_layer t;
    tu_layer_bind(&t, l, 2, 1);
    for (int i = 0; i < 36; i++) t.x[0][i] = (float)i;
    for (int i = 0; i < 54; i++) t.x[1][i] = 100.0f + i;
    tu_layer_forward(&t);
    /* sample 1: its 18 values of x0, then its 27 of x1 */
    ck_assert_float_eq(t.y[45 + 0], 18.0f);
    ck_assert_float_eq(t.y[45 + 17], 35.0f);
    ck_assert_float_eq(t.y[45 + 18], 127.0f);
    for (int i = 0; i < 90; i++) t.dy[i] = (float)i;
    tu_layer_backward(&t, 0);
    ck_assert_float_eq(t.dx[0][18], 45.0f);
    ck_assert_float_eq(t.dx[1][27], 63.0f);
    tu_layer_backward(&t, 2); /* add into dx[1] only */
    ck_assert_float_eq(t.dx[0][18], 45.0f);
    ck_assert_float_eq(t.dx[1][27], 126.0f);
    tu_layer_release(&t);
    int c[3] = {3, 4, 4};
    ck_assert_ptr_null(adapt_concat_create("c", a, c));
}
END_TEST

/* PyTorch 1.13: torch.cat((x0, x1, x2), 1) of x0 = arange(4) + 1 as (2,1,1,2), x1 = arange(8) + 11
 * as (2,2,1,2), x2 = arange(4) + 21 as (2,1,1,2), backward of dy = arange(16) / 4: copies, so
 * equal bits. Then the same layer's gradient against finite differences, and the shape checks. */
START_TEST(test_concat3)
{
    static const float want_y[16] = {1, 2, 11, 12, 13, 14, 21, 22, 3, 4, 15, 16, 17, 18, 23, 24};
    static const float want_dx0[4] = {0, 0.25f, 2, 2.25f};
    static const float want_dx1[8] = {0.5f, 0.75f, 1, 1.25f, 2.5f, 2.75f, 3, 3.25f};
    static const float want_dx2[4] = {1.5f, 1.75f, 3.5f, 3.75f};
    const int in[3][3] = {{1, 1, 2}, {2, 1, 2}, {1, 1, 2}};
    struct tu_layer t;
    tu_layer_bind(&t, adapt_concat_n_create("cat", 3, in), 2, 1);
    ck_assert_int_eq(t.l->nin, 3);
    ck_assert_int_eq(t.l->out_dim[0], 4);
    ck_assert_int_eq(t.l->elementwise, 0);
    for (int i = 0; i < 4; i++) t.x[0][i] = (float)(i + 1), t.x[2][i] = (float)(i + 21);
    for (int i = 0; i < 8; i++) t.x[1][i] = (float)(i + 11);
    for (int i = 0; i < 16; i++) t.dy[i] = (float)i / 4;
    tu_layer_forward(&t);
    tu_layer_backward(&t, 0);
    for (int i = 0; i < 16; i++) ck_assert(t.y[i] == want_y[i]);
    for (int i = 0; i < 4; i++) ck_assert(t.dx[0][i] == want_dx0[i] && t.dx[2][i] == want_dx2[i]);
    for (int i = 0; i < 8; i++) ck_assert(t.dx[1][i] == want_dx1[i]);
    /* acc bit 1 adds into dx[1] only; dx[2] NULL is left alone */
    t.dx[2][0] = -7.0f;
    tu_layer_backward_sel(&t, 3u, 2u);
    ck_assert(t.dx[0][1] == want_dx0[1] && t.dx[1][3] == 2 * want_dx1[3] && t.dx[2][0] == -7.0f);
    tu_layer_release(&t);

    /* finite differences: the layer is linear and copies, so only the difference quotient's own
     * rounding remains (values O(1), steps 2^-10: below 1e-9) */
    const int big[3][3] = {{2, 3, 4}, {3, 3, 4}, {1, 3, 4}};
    tu_layer_bind(&t, adapt_concat_n_create("cat", 3, big), 2, 1);
    for (int k = 0; k < 3; k++)
        tu_fill_uniform(t.x[k], tu_layer_in_len(&t, k), 121 + k, -2.385f, 2.385f);
    tu_fill_uniform(t.dy, tu_layer_out_len(&t), 124, -1.0f, 1.0f);
    double ax[3] = {1e-9, 1e-9, 1e-9}, none[4] = {-1, -1, -1, -1};
    check_grads(&t, ref_concat, NULL, 0x1p-10f, ax, none, 0);
    tu_layer_release(&t);

    const int off[3][3] = {{1, 4, 4}, {2, 4, 4}, {1, 4, 5}};
    ck_assert_ptr_null(adapt_concat_n_create("cat", 3, off));
    ck_assert_ptr_nonnull(strstr(adapt_error_message(), "input 2"));
    ck_assert_ptr_null(adapt_concat_n_create("cat", 1, off));
    ck_assert_ptr_null(adapt_concat_n_create("cat", ADAPT_LAYER_MAX_IN + 1, off));
}
END_TEST

/* With dyadic data every result is exact, so results must not depend on how
 * samples are spread over threads nor on the order of accumulation: a batch
 * of 8 gives the same bits as 8 single-sample calls; backward with acc adds
 * exactly. */
START_TEST(test_conv_chunks_and_accumulate)
{
    int chw[3] = {16, 32, 32};
    const int n = 8;
    struct tu_layer t;
    tu_layer_bind(&t, adapt_conv2d_create("layer1.0.conv1", chw, 16, 3, 1, 1, 1), n, 1);
    struct adapt_layer *l = t.l;
    size_t nx = tu_layer_in_len(&t, 0), ny = tu_layer_out_len(&t);
    size_t sx = nx / n, sy = ny / n;
    size_t nw = l->param[0].value.numel;
    tu_fill_dyadic(t.x[0], nx, 21, -16, 16, 3);
    tu_fill_dyadic(l->param[0].value.data, nw, 22, -16, 16, 4);
    tu_fill_dyadic(l->param[1].value.data, 16, 23, -16, 16, 4);
    tu_fill_dyadic(t.dy, ny, 24, -8, 8, 3);
    tu_layer_forward(&t);
    tu_layer_backward(&t, 0);
    float *y1 = malloc(ny * sizeof(float)), *dx1 = malloc(nx * sizeof(float));
    float *dw1 = malloc(nw * sizeof(float)), db1[16];
    memcpy(y1, t.y, ny * sizeof(float));
    memcpy(dx1, t.dx[0], nx * sizeof(float));
    memcpy(dw1, l->param[0].grad.data, nw * sizeof(float));
    memcpy(db1, l->param[1].grad.data, sizeof db1);

    /* the forward is exact: compare with the double reference bit for bit */
    double *yr = malloc(ny * sizeof(double));
    struct conv_arg a = {16, 32, 32, 16, 3, 1, 1, 1};
    ref_conv(&t, &a, yr);
    for (size_t i = 0; i < ny; i++) ck_assert(t.y[i] == (float)yr[i] && yr[i] == (float)yr[i]);
    free(yr);

    /* one sample at a time, accumulating parameter gradients: same bits */
    tu_layer_zero_grads(&t);
    struct adapt_exec ex1 = {1, 1, t.ws, 0, 0};
    for (int j = 0; j < n; j++) {
        const float *xs[2] = {t.x[0] + j * sx, NULL};
        float *dxs[2] = {t.dx[0] + j * sx, NULL};
        l->ops->forward(l, &ex1, xs, t.y + j * sy);
        l->ops->backward(l, &ex1, xs, t.y + j * sy, t.dy + j * sy, dxs, 0);
    }
    ck_assert_int_eq(tu_first_bit_diff(t.y, y1, ny), -1);
    ck_assert_int_eq(tu_first_bit_diff(t.dx[0], dx1, nx), -1);
    ck_assert_int_eq(tu_first_bit_diff(l->param[0].grad.data, dw1, nw), -1);
    ck_assert_int_eq(tu_first_bit_diff(l->param[1].grad.data, db1, 16), -1);

    /* acc bit: dx = prev + fresh; parameter gradients add up (2 x fresh) */
    float *prev = malloc(nx * sizeof(float));
    tu_fill_dyadic(prev, nx, 25, -64, 64, 3);
    memcpy(t.dx[0], prev, nx * sizeof(float));
    tu_layer_backward(&t, 1);
    for (size_t i = 0; i < nx; i++) ck_assert(t.dx[0][i] == prev[i] + dx1[i]);
    for (size_t i = 0; i < nw; i++) ck_assert(l->param[0].grad.data[i] == 2.0f * dw1[i]);
    for (int i = 0; i < 16; i++) ck_assert(l->param[1].grad.data[i] == 2.0f * db1[i]);

    /* dx == NULL (network input): parameter gradients still accumulate */
    tu_layer_backward_sel(&t, 0, 0);
    for (size_t i = 0; i < nw; i++) ck_assert(l->param[0].grad.data[i] == 3.0f * dw1[i]);
    free(prev);
    free(y1);
    free(dx1);
    free(dw1);
    tu_layer_release(&t);
}
END_TEST

/* ------------------------------------------------------------------ linear */

/* PyTorch 1.13: F.linear(x (2,3), w (2,3), b) */
START_TEST(test_linear_hand_and_grads)
{
    static const float x[6] = {2.385f, -1.5f, 0.75f, -0.25f, 3.125f, 1.0f};
    static const float w[6] = {0.5f, -2.0f, 1.25f, -0.875f, 0.375f, 2.5f};
    static const float b[2] = {0.1f, -0.2f};
    static const float want[4] = {5.23000002f, -0.97437495f, -5.0250001f, 3.69062495f};
    int chw[3] = {3, 1, 1};
    struct tu_layer t;
    tu_layer_bind(&t, adapt_linear_create("fc", chw, 2, 1), 2, 1);
    memcpy(t.x[0], x, sizeof x);
    memcpy(t.l->param[0].value.data, w, sizeof w);
    memcpy(t.l->param[1].value.data, b, sizeof b);
    tu_layer_forward(&t);
    for (int i = 0; i < 4; i++) ck_assert_float_eq_tol(t.y[i], want[i], 4 * 8 * U);
    ck_assert_int_eq(t.l->macs, 6);
    ck_assert_int_eq(t.l->param[0].fan_in, 3);
    tu_layer_release(&t);

    /* (C, H, W) = (5, 2, 3) read as 30 flat features */
    int chw2[3] = {5, 2, 3};
    struct lin_arg a = {30, 7, 1};
    tu_layer_bind(&t, adapt_linear_create("fc2", chw2, 7, 1), 3, 1);
    ck_assert_int_eq(t.l->out_dim[0], 7);
    ck_assert_int_eq(t.l->out_dim[1] * t.l->out_dim[2], 1);
    tu_fill_uniform(t.x[0], 90, 31, -2.385f, 2.385f);
    tu_fill_uniform(t.l->param[0].value.data, 210, 32, -0.9f, 0.9f);
    tu_fill_uniform(t.l->param[1].value.data, 7, 33, -0.5f, 0.5f);
    tu_fill_uniform(t.dy, 21, 34, -1.0f, 1.0f);
    /* dx: 7 terms dy*W; dW: 3 terms dy*x; db: 3 terms dy */
    double ax[2] = {sum_tol(7, 0.9), -1};
    double ap[4] = {sum_tol(3, 2.385), sum_tol(3, 1.0), -1, -1};
    check_grads(&t, ref_linear, &a, 0x1p-10f, ax, ap, 0);
    tu_layer_release(&t);
}
END_TEST

/* ------------------------------------------------------------------ activations */

/* PyTorch 1.13: torch.tanh on float32 */
START_TEST(test_tanh_hand)
{
    static const float x[8] = {-2.385f, -0.5f, -1e-4f, 0.0f, 0.3f, 1.7f, 9.2f, 20.0f};
    static const float want[8] = {-0.983181834f, -0.462117165f, -9.99999975e-05f, 0.0f,
                                  0.291312635f,  0.935409069f,  1.0f,             1.0f};
    int chw[3] = {1, 2, 4};
    struct tu_layer t;
    tu_layer_bind(&t, adapt_tanh_create("t", chw), 1, 1);
    memcpy(t.x[0], x, sizeof x);
    tu_layer_forward(&t);
    /* within the accuracy stated in act.c (3 ulp) of the correctly rounded value */
    for (int i = 0; i < 8; i++)
        ck_assert_msg(tu_ulp_error(t.y[i], want[i]) <= 3.0, "tanh(%g)", x[i]);
    ck_assert_int_eq(t.l->elementwise, 8);
    tu_layer_release(&t);
}
END_TEST

/* Every 613th float in [0, 12] (and its negative) against tanh() in double:
 * at most 3 ulp. Special values: -0, subnormals, NaN, infinities. */
START_TEST(test_tanh_accuracy)
{
    const uint32_t top = 0x41400000u; /* 12.0f */
    const size_t stride = 613, cnt = top / stride + 1;
    int chw[3] = {1, 1, (int)(2 * cnt + 8)};
    struct tu_layer t;
    tu_layer_bind(&t, adapt_tanh_create("t", chw), 1, 1);
    for (size_t i = 0; i < cnt; i++) {
        uint32_t u = (uint32_t)(i * stride);
        float f;
        memcpy(&f, &u, sizeof f);
        t.x[0][2 * i] = f;
        t.x[0][2 * i + 1] = -f;
    }
    float *sp = t.x[0] + 2 * cnt;
    sp[0] = -0.0f;
    sp[1] = 1e-40f;
    sp[2] = -FLT_MIN;
    sp[3] = NAN;
    sp[4] = INFINITY;
    sp[5] = -INFINITY;
    sp[6] = 9.01f;
    sp[7] = -1e30f;
    tu_layer_forward(&t);
    double worst = 0.0;
    float at = 0.0f;
    for (size_t i = 0; i < 2 * cnt; i++) {
        double e = tu_ulp_error(t.y[i], tanh((double)t.x[0][i]));
        if (e > worst) {
            worst = e;
            at = t.x[0][i];
        }
    }
    ck_assert_msg(worst <= 3.0, "tanh max error %.3f ulp at %.9g", worst, at);
    const float *r = t.y + 2 * cnt;
    ck_assert(r[0] == 0.0f && signbit(r[0]));
    ck_assert(r[1] == 1e-40f);
    ck_assert(r[2] == -FLT_MIN);
    ck_assert(isnan(r[3]));
    ck_assert(r[4] == 1.0f && r[5] == -1.0f);
    ck_assert(tu_ulp_error(r[6], tanh(9.01)) <= 1.0);
    ck_assert(r[7] == -1.0f);
    tu_layer_release(&t);
}
END_TEST

START_TEST(test_act_grads)
{
    int chw[3] = {3, 5, 7};
    struct tu_layer t;
    /* tanh: dx = (1 - y^2) dy with y within 3 ulp: |err| <= 8 u |dy| + rounding 2u */
    tu_layer_bind(&t, adapt_tanh_create("t", chw), 2, 1);
    tu_fill_uniform(t.x[0], 210, 41, -3.0f, 3.0f);
    tu_fill_uniform(t.dy, 210, 42, -1.0f, 1.0f);
    double at[2] = {10 * U, -1}, none[4] = {-1, -1, -1, -1};
    check_grads(&t, ref_tanh, NULL, 0x1p-12f, at, none, 0);
    tu_layer_release(&t);

    /* relu: exact (dx = dy or 0) away from the kink: |x| >= 0.05 >> h */
    tu_layer_bind(&t, adapt_relu_create("r", chw), 2, 1);
    tu_fill_away_from_zero(t.x[0], 210, 43, 0.05f, 2.385f);
    tu_fill_uniform(t.dy, 210, 44, -1.0f, 1.0f);
    double ar[2] = {1e-9, -1};
    check_grads(&t, ref_relu, NULL, 0x1p-10f, ar, none, 0);
    for (int i = 0; i < 210; i++) ck_assert(t.y[i] == (t.x[0][i] > 0 ? t.x[0][i] : 0.0f));
    /* NaN propagates (torch.relu(nan) = nan) and its gradient passes through */
    t.x[0][3] = NAN;
    tu_layer_forward(&t);
    ck_assert(isnan(t.y[3]));
    tu_layer_backward(&t, 0);
    ck_assert(t.dx[0][3] == t.dy[3]);
    tu_layer_release(&t);
}
END_TEST

/* acc semantics and in-place use of the element-wise layers (dyadic: exact) */
START_TEST(test_act_accumulate_inplace)
{
    int chw[3] = {4, 64, 130}; /* 33280 floats per sample: the parallel path */
    struct tu_layer t;
    tu_layer_bind(&t, adapt_relu_create("r", chw), 2, 1);
    size_t n = tu_layer_out_len(&t);
    tu_fill_dyadic(t.x[0], n, 51, -64, 64, 4);
    tu_fill_dyadic(t.dy, n, 52, -64, 64, 4);
    tu_layer_forward(&t);
    tu_layer_backward(&t, 0);
    float *fresh = malloc(n * sizeof(float)), *prev = malloc(n * sizeof(float));
    memcpy(fresh, t.dx[0], n * sizeof(float));
    tu_fill_dyadic(prev, n, 53, -64, 64, 4);
    memcpy(t.dx[0], prev, n * sizeof(float));
    tu_layer_backward(&t, 1);
    for (size_t i = 0; i < n; i++) ck_assert(t.dx[0][i] == prev[i] + fresh[i]);
    /* in place: y == x, dx == dy */
    float *y0 = malloc(n * sizeof(float));
    memcpy(y0, t.y, n * sizeof(float));
    const float *xs[2] = {t.x[0], NULL};
    t.l->ops->forward(t.l, &t.ex, xs, t.x[0]);
    ck_assert_int_eq(tu_first_bit_diff(t.x[0], y0, n), -1);
    float *dxs[2] = {t.dy, NULL};
    t.l->ops->backward(t.l, &t.ex, xs, t.y, t.dy, dxs, 0);
    ck_assert_int_eq(tu_first_bit_diff(t.dy, fresh, n), -1);
    free(fresh);
    free(prev);
    free(y0);
    tu_layer_release(&t);
}
END_TEST

/* ------------------------------------------------------------------ pooling */

/* PyTorch 1.13: F.max_pool2d(x (1,1,4,4), 2, 2) and (x, 3, 1), backward with
 * dy = (1, 2, 3, 4) and (1, 10, 100, 1000). Ties: window 2 has 2.385 at
 * indices 2 and 7, window 4 has -0.5 at 11 and 14; the first wins. */
START_TEST(test_maxpool_hand)
{
    static const float x[16] = {1.5f,  2.385f, 2.385f, 0.5f,  -1.0f, 0.25f, 0.0f,  2.385f,
                                3.0f,  3.0f,   -2.0f,  -0.5f, 3.0f,  1.0f,  -0.5f, -3.0f};
    static const float want_y[4] = {2.385f, 2.385f, 3.0f, -0.5f};
    static const float want_dx[16] = {0, 1, 2, 0, 0, 0, 0, 0, 3, 0, 0, 4, 0, 0, 0, 0};
    static const float want_dx3[16] = {0, 0, 0, 0, 0, 0, 0, 0, 101, 1010, 0, 0, 0, 0, 0, 0};
    int chw[3] = {1, 4, 4};
    struct tu_layer t;
    tu_layer_bind(&t, adapt_maxpool2d_create("p", chw, 2, 2), 1, 1);
    memcpy(t.x[0], x, sizeof x);
    for (int i = 0; i < 4; i++) t.dy[i] = (float)(i + 1);
    tu_layer_forward(&t);
    tu_layer_backward(&t, 0);
    for (int i = 0; i < 4; i++) ck_assert(t.y[i] == want_y[i]);
    for (int i = 0; i < 16; i++) ck_assert(t.dx[0][i] == want_dx[i]);
    ck_assert_int_eq(t.l->elementwise, 16);
    /* two NaNs in window 1 (indices 4 and 5): the scan keeps the last */
    t.x[0][4] = NAN;
    t.x[0][5] = NAN;
    tu_layer_forward(&t);
    tu_layer_backward(&t, 0);
    ck_assert(isnan(t.y[0]) && t.y[1] == 2.385f);
    ck_assert(t.dx[0][5] == 1.0f && t.dx[0][4] == 0.0f && t.dx[0][1] == 0.0f);
    tu_layer_release(&t);

    tu_layer_bind(&t, adapt_maxpool2d_create("p", chw, 3, 1), 1, 1);
    memcpy(t.x[0], x, sizeof x);
    t.dy[0] = 1;
    t.dy[1] = 10;
    t.dy[2] = 100;
    t.dy[3] = 1000;
    tu_layer_forward(&t);
    tu_layer_backward(&t, 0);
    for (int i = 0; i < 4; i++) ck_assert(t.y[i] == 3.0f);
    for (int i = 0; i < 16; i++) ck_assert(t.dx[0][i] == want_dx3[i]);
    /* NaN wins its window (PyTorch's CPU kernel) and receives the gradient */
    t.x[0][5] = NAN;
    tu_layer_forward(&t);
    tu_layer_backward(&t, 0);
    ck_assert(isnan(t.y[0]) && isnan(t.y[1]) && isnan(t.y[2]) && isnan(t.y[3]));
    ck_assert(t.dx[0][5] == 1111.0f);
    tu_layer_release(&t);
}
END_TEST

/* PyTorch 1.13: F.avg_pool2d(x (1,1,5,5), 2, 2), (x, 3, 2), adaptive_avg_pool2d(x, 1) */
START_TEST(test_avgpool_hand)
{
    static const float x[25] = {1.5f, 2.385f, -0.75f, 0.5f, 4.0f, -1.0f, 0.25f, 0.125f, 2.0f,
                                -2.0f, 3.0f, 1.75f, -2.5f, -0.5f, 1.0f, 0.0f, 1.0f, -0.5f,
                                -3.0f, 8.0f, 9.0f, 9.0f, 9.0f, 9.0f, 9.0f};
    static const float want2[4] = {0.783749998f, 0.46875f, 1.4375f, -1.625f};
    static const float want3[4] = {0.528888941f, 0.208333328f, 3.30555558f, 3.27777767f};
    int chw[3] = {1, 5, 5};
    struct tu_layer t;
    tu_layer_bind(&t, adapt_avgpool2d_create("a", chw, 2, 2), 1, 1);
    memcpy(t.x[0], x, sizeof x);
    for (int i = 0; i < 4; i++) t.dy[i] = (float)(i + 1);
    for (int i = 0; i < 25; i++) t.dx[0][i] = 7.0f; /* must be overwritten */
    tu_layer_forward(&t);
    tu_layer_backward(&t, 0);
    /* sums of 4 values, times 1/4: one or two roundings */
    for (int i = 0; i < 4; i++) ck_assert_float_eq_tol(t.y[i], want2[i], 4 * U * 2);
    /* floor mode leaves row 4 and column 4 out: their gradient is 0 */
    for (int i = 0; i < 25; i++) {
        int r = i / 5, c = i % 5;
        float g = (r < 4 && c < 4) ? (float)((r / 2) * 2 + c / 2 + 1) * 0.25f : 0.0f;
        ck_assert(t.dx[0][i] == g);
    }
    tu_layer_release(&t);

    tu_layer_bind(&t, adapt_avgpool2d_create("a", chw, 3, 2), 1, 1);
    memcpy(t.x[0], x, sizeof x);
    tu_layer_forward(&t);
    for (int i = 0; i < 4; i++) ck_assert_float_eq_tol(t.y[i], want3[i], 9 * U * 4);
    tu_layer_release(&t);

    tu_layer_bind(&t, adapt_avgpool2d_create("gap", chw, 0, 0), 1, 1);
    ck_assert_int_eq(t.l->out_dim[1], 1);
    ck_assert_int_eq(t.l->out_dim[2], 1);
    memcpy(t.x[0], x, sizeof x);
    tu_layer_forward(&t);
    ck_assert_float_eq_tol(t.y[0], 2.41040015f, 2 * U * 2.5);
    tu_layer_release(&t);
}
END_TEST

/* PyTorch 1.13, padded pools on the inputs of test_maxpool_hand (x4) and test_avgpool_hand
 * (x5), each backward with dy = 1, 2, ... in output order:
 *   F.max_pool2d(x4, 3, 2, padding=1);
 *   F.max_pool2d(-x4.abs() - 0.5, 2, 1, padding=1) (every value negative: a zero padding would
 *     win the border windows; the corner windows hold one cell each);
 *   F.avg_pool2d(x5, 3, 2, padding=1, count_include_pad=True) and (..., False). */
START_TEST(test_pool_pad_hand)
{
    static const float x4[16] = {1.5f,  2.385f, 2.385f, 0.5f,  -1.0f, 0.25f, 0.0f,  2.385f,
                                 3.0f,  3.0f,   -2.0f,  -0.5f, 3.0f,  1.0f,  -0.5f, -3.0f};
    static const float x5[25] = {1.5f, 2.385f, -0.75f, 0.5f, 4.0f, -1.0f, 0.25f, 0.125f, 2.0f,
                                 -2.0f, 3.0f, 1.75f, -2.5f, -0.5f, 1.0f, 0.0f, 1.0f, -0.5f,
                                 -3.0f, 8.0f, 9.0f, 9.0f, 9.0f, 9.0f, 9.0f};
    static const float max_y[4] = {2.385f, 2.385f, 3.0f, 3.0f};
    static const float max_dx[16] = {0, 3, 0, 0, 0, 0, 0, 0, 3, 4, 0, 0, 0, 0, 0, 0};
    static const float neg_y[25] = {-2.0f, -2.0f, -2.885f, -1.0f, -1.0f, -1.5f, -0.75f,
                                    -0.5f, -0.5f, -1.0f, -1.5f, -0.75f, -0.5f, -0.5f,
                                    -1.0f, -3.5f, -1.5f, -1.0f, -1.0f, -1.0f, -3.5f,
                                    -1.5f, -1.0f, -1.0f, -3.5f};
    static const float neg_dx[16] = {3, 3, 0, 19, 17, 19, 44, 0, 16, 0, 0, 54, 21, 39, 65, 25};
    static const float avg_y[2][9] = {
        {0.348333329f, 0.50111115f, 0.5f, 0.555555582f, -0.152777776f, 0.611111104f,
         2.11111116f, 2.72222233f, 2.55555558f},
        {0.783749998f, 0.751666725f, 1.125f, 0.833333313f, -0.152777776f, 0.916666687f, 4.75f,
         4.08333349f, 5.75f}};
    static const float avg_dx[2][25] = {
        {0.111111112f, 0.333333343f, 0.222222224f, 0.555555582f, 0.333333343f,
         0.555555582f, 1.33333337f,  0.777777791f, 1.77777791f,  1.0f,
         0.444444448f, 1.0f,         0.555555582f, 1.22222233f,  0.666666687f,
         1.22222221f,  2.66666675f,  1.44444442f,  3.11111116f,  1.66666675f,
         0.777777791f, 1.66666675f,  0.888888896f, 1.88888884f,  1.0f},
        {0.25f,        0.583333373f, 0.333333343f, 1.08333337f,  0.75f,
         0.916666687f, 1.80555558f,  0.888888955f, 2.63888884f,  1.75f,
         0.666666687f, 1.22222233f,  0.555555582f, 1.55555558f,  1.0f,
         2.41666675f,  4.30555582f,  1.88888896f,  5.13888884f,  3.25f,
         1.75f,        3.08333349f,  1.33333337f,  3.58333349f,  2.25f}};
    int c4[3] = {1, 4, 4}, c5[3] = {1, 5, 5};
    struct tu_layer t;
    /* max: values and gradients are copies and sums of small integers, so exact */
    tu_layer_bind(&t, adapt_maxpool2d_pad_create("p", c4, 3, 2, 1), 1, 1);
    ck_assert_int_eq(t.l->out_dim[1], 2);
    ck_assert_int_eq(t.l->pad, 1);
    /* cells read: per axis windows [-1, 2) and [1, 4) clipped: 2 + 3 = 5, so 5 x 5 */
    ck_assert_int_eq(t.l->elementwise, 25);
    memcpy(t.x[0], x4, sizeof x4);
    for (int i = 0; i < 4; i++) t.dy[i] = (float)(i + 1);
    tu_layer_forward(&t);
    tu_layer_backward(&t, 0);
    for (int i = 0; i < 4; i++) ck_assert(t.y[i] == max_y[i]);
    for (int i = 0; i < 16; i++) ck_assert(t.dx[0][i] == max_dx[i]);
    tu_layer_release(&t);

    tu_layer_bind(&t, adapt_maxpool2d_pad_create("p", c4, 2, 1, 1), 1, 1);
    ck_assert_int_eq(t.l->out_dim[1], 5);
    ck_assert_int_eq(t.l->out_dim[2], 5);
    for (int i = 0; i < 16; i++) t.x[0][i] = -fabsf(x4[i]) - 0.5f;
    for (int i = 0; i < 25; i++) t.dy[i] = (float)(i + 1);
    tu_layer_forward(&t);
    tu_layer_backward(&t, 0);
    for (int i = 0; i < 25; i++) ck_assert_msg(t.y[i] == neg_y[i], "y[%d] = %g", i, t.y[i]);
    for (int i = 0; i < 16; i++) ck_assert(t.dx[0][i] == neg_dx[i]);
    tu_layer_release(&t);

    for (int excl = 0; excl < 2; excl++) {
        tu_layer_bind(&t, adapt_avgpool2d_pad_create("a", c5, 3, 2, 1, !excl), 1, 1);
        ck_assert_int_eq(t.l->out_dim[1], 3);
        ck_assert_int_eq(t.l->count_include_pad, !excl);
        memcpy(t.x[0], x5, sizeof x5);
        for (int i = 0; i < 9; i++) t.dy[i] = (float)(i + 1);
        tu_layer_forward(&t);
        tu_layer_backward(&t, 0);
        /* both sum at most 9 values below 9.1 (each within sum_tol(9, 9.1) of the exact sum)
         * and divide by at least 4 (PyTorch divides, the layer multiplies by 1 / divisor: two
         * roundings of |y| <= 6) */
        for (int i = 0; i < 9; i++)
            ck_assert_msg(fabsf(t.y[i] - avg_y[excl][i]) <=
                              2 * (sum_tol(9, 9.1) / 4 + 2 * U * 6),
                          "count_include_pad %d: y[%d] = %.9g, PyTorch %.9g", !excl, i, t.y[i],
                          avg_y[excl][i]);
        /* dx: sums of at most 4 terms dy / divisor (|t| <= 9 / 4), in both */
        for (int i = 0; i < 25; i++)
            ck_assert_msg(fabsf(t.dx[0][i] - avg_dx[excl][i]) <= 2 * sum_tol(4, 2.25),
                          "count_include_pad %d: dx[%d] = %.9g, PyTorch %.9g", !excl, i,
                          t.dx[0][i], avg_dx[excl][i]);
        tu_layer_release(&t);
    }
}
END_TEST

/* max values are distinct by >= 0.01 >> 2h, so no difference crosses a tie */
static void fill_distinct(float *v, size_t n, uint64_t seed)
{
    float *tmp = malloc(n * sizeof(float));
    tu_fill_uniform(tmp, n, seed, 0.0f, 1.0f);
    /* rank-order the random keys: v[i] = 0.01 * rank - offset */
    for (size_t i = 0; i < n; i++) {
        size_t rank = 0;
        for (size_t j = 0; j < n; j++) rank += tmp[j] < tmp[i] || (tmp[j] == tmp[i] && j < i);
        v[i] = 0.01f * (float)rank - 0.005f * (float)n;
    }
    free(tmp);
}

static const struct pool_arg pool_cases[] = {
    {3, 6, 6, 2, 2, 1, 0, 0}, /* max 2/2 */
    {2, 7, 7, 3, 2, 1, 0, 0}, /* max 3/2: overlapping windows, floor mode */
    {3, 6, 6, 2, 2, 0, 0, 0}, /* avg 2/2 */
    {2, 7, 7, 3, 2, 0, 0, 0}, /* avg 3/2 */
    {2, 5, 4, 2, 1, 0, 0, 0}, /* avg 2/1 non-square */
    {3, 5, 6, 0, 0, 0, 0, 0}, /* global */
    {3, 7, 7, 3, 2, 1, 1, 0}, /* max 3/2 padding 1 (the ResNet stem's pool) */
    {2, 6, 5, 2, 1, 1, 1, 0}, /* max 2/1 padding 1: corner windows of one cell */
    {2, 7, 6, 3, 2, 0, 1, 0}, /* avg 3/2 padding 1, divisor k*k */
    {2, 7, 6, 3, 2, 0, 1, 1}, /* the same counting only the cells inside */
    {2, 6, 6, 5, 2, 0, 2, 1}, /* avg 5/2 padding 2, cells inside: 3 x 3 windows overlap */
};

START_TEST(test_pool_grads)
{
    const struct pool_arg *a = &pool_cases[_i];
    int chw[3] = {a->c, a->h, a->w};
    struct tu_layer t;
    tu_layer_bind(&t, a->max ? adapt_maxpool2d_pad_create("p", chw, a->k, a->s, a->p)
                             : adapt_avgpool2d_pad_create("p", chw, a->k, a->s, a->p, !a->excl),
                  2, 1);
    size_t nx = tu_layer_in_len(&t, 0), ny = tu_layer_out_len(&t);
    if (a->max)
        fill_distinct(t.x[0], nx, 61 + _i);
    else
        tu_fill_uniform(t.x[0], nx, 61 + _i, -2.385f, 2.385f);
    tu_fill_uniform(t.dy, ny, 62 + _i, -1.0f, 1.0f);
    double *y = malloc(ny * sizeof(double));
    tu_layer_forward(&t);
    ref_pool(&t, a, y);
    int kk = a->k ? a->k * a->k : a->h * a->w;
    /* average: a sum of m <= kk terms |t| <= 2.385 times 1 / m or 1 / kk: the sum's error
     * over the divisor (sum_tol(m, T) / m grows with m), then the roundings of 1 / divisor and
     * of the product */
    for (size_t i = 0; i < ny; i++)
        ck_assert_msg(fabs(t.y[i] - y[i]) <=
                          (a->max ? 0.0 : sum_tol(kk, 2.385) / kk + 2 * U * fabs(y[i])),
                      "y[%zu] %.9g vs %.9g", i, t.y[i], y[i]);
    free(y);
    /* dx: each input sums dy / divisor (|t| <= 1) over the windows that hold it, at most
     * ceil(k / s)^2 */
    int ov = a->k ? (a->k + a->s - 1) / a->s : 1;
    double ax[2] = {sum_tol(ov * ov, 1.0), -1}, none[4] = {-1, -1, -1, -1};
    check_grads(&t, ref_pool, a, 0x1p-10f, ax, none, 0);
    tu_layer_release(&t);
}
END_TEST

START_TEST(test_pool_accumulate)
{
    int chw[3] = {64, 8, 8};
    for (int kind = 0; kind < 5; kind++) {
        struct tu_layer t;
        /* padded: max 3/2 and average 2/2 (divisor 4: sums stay dyadic) with padding 1 */
        struct adapt_layer *l = kind == 0   ? adapt_maxpool2d_create("p", chw, 2, 2)
                                : kind == 1 ? adapt_avgpool2d_create("p", chw, 2, 2)
                                : kind == 2 ? adapt_avgpool2d_create("p", chw, 0, 0)
                                : kind == 3 ? adapt_maxpool2d_pad_create("p", chw, 3, 2, 1)
                                            : adapt_avgpool2d_pad_create("p", chw, 2, 2, 1, 1);
        tu_layer_bind(&t, l, 16, 1);
        size_t nx = tu_layer_in_len(&t, 0), ny = tu_layer_out_len(&t);
        tu_fill_dyadic(t.x[0], nx, 71, -64, 64, 3);
        tu_fill_dyadic(t.dy, ny, 72, -64, 64, 3);
        tu_layer_forward(&t);
        tu_layer_backward(&t, 0);
        float *fresh = malloc(nx * sizeof(float)), *prev = malloc(nx * sizeof(float));
        memcpy(fresh, t.dx[0], nx * sizeof(float));
        tu_fill_dyadic(prev, nx, 73, -64, 64, 3);
        memcpy(t.dx[0], prev, nx * sizeof(float));
        tu_layer_backward(&t, 1);
        for (size_t i = 0; i < nx; i++) ck_assert(t.dx[0][i] == prev[i] + fresh[i]);
        free(fresh);
        free(prev);
        tu_layer_release(&t);
    }
}
END_TEST

/* ------------------------------------------------------------------ batch norm */

/* PyTorch 1.13: nn.BatchNorm2d(2) with weight (1.5, -0.5), bias (0.25, 2.0),
 * training forward of x (3,2,1,2), backward of dy, then eval forward. */
START_TEST(test_bn_hand)
{
    static const float x[12] = {2.385f, -1.0f, 0.5f, 3.25f, -0.75f, 1.125f,
                                4.0f,   -2.5f, 0.0f, 1.75f, -1.5f, 0.375f};
    static const float dy[12] = {0.5f, -1.0f, 2.0f, 0.25f, -0.75f, 1.5f,
                                 1.0f, -0.5f, 0.125f, 0.375f, -2.0f, 1.25f};
    static const float want_y[12] = {2.39286137f, -1.63690853f, 2.04020905f, 1.45047712f,
                                     -1.33928883f, 0.892858446f, 1.28964114f, 2.68355298f,
                                     -0.446429938f, 1.63690758f, 2.46910501f, 2.06701493f};
    static const float want_dx[12] = {-0.601879835f, -0.416193813f, -0.368700683f, 0.172131687f,
                                      -0.264172643f, 1.32241535f,   0.0564452708f, -0.0131789949f,
                                      0.340700537f,  -0.380869478f, 0.368692398f,  -0.215389654f};
    static const float want_eval[12] = {3.59177732f,   -1.27042603f, 1.8269372f,  0.72334826f,
                                        -0.911326826f, 1.78191721f,  0.42236948f, 3.03085256f,
                                        0.165970787f,  2.67966533f,  2.62954736f, 1.87710035f};
    int chw[3] = {2, 1, 2};
    struct tu_layer t;
    tu_layer_bind(&t, adapt_batchnorm2d_create("bn", chw, 1e-5f, 0.1f), 3, 1);
    struct adapt_layer *l = t.l;
    ck_assert_int_eq(l->nparam, 4);
    ck_assert_str_eq(l->param[2].name, "bn.running_mean");
    ck_assert_str_eq(l->param[3].name, "bn.running_var");
    ck_assert_int_eq(l->param[0].role, ADAPT_PARAM_WEIGHT);
    ck_assert_int_eq(l->param[1].role, ADAPT_PARAM_BIAS);
    ck_assert_int_eq(l->param[3].role, ADAPT_PARAM_BUFFER);
    ck_assert_int_eq(l->is_unit, 0);
    ck_assert_ptr_eq(l->counter, &t.counter);
    t.counter = 99;
    adapt_layer_reset_defaults(l);
    ck_assert_int_eq(t.counter, 0);
    ck_assert(l->param[0].value.data[1] == 1.0f && l->param[1].value.data[1] == 0.0f);
    ck_assert(l->param[2].value.data[1] == 0.0f && l->param[3].value.data[1] == 1.0f);
    l->param[0].value.data[0] = 1.5f;
    l->param[0].value.data[1] = -0.5f;
    l->param[1].value.data[0] = 0.25f;
    l->param[1].value.data[1] = 2.0f;
    memcpy(t.x[0], x, sizeof x);
    memcpy(t.dy, dy, sizeof dy);
    tu_layer_forward(&t);
    tu_layer_backward(&t, 0);
    /* values O(1) after a handful of roundings each */
    for (int i = 0; i < 12; i++) {
        ck_assert_float_eq_tol(t.y[i], want_y[i], 32 * U);
        ck_assert_float_eq_tol(t.dx[0][i], want_dx[i], 32 * U);
    }
    ck_assert_float_eq_tol(l->param[2].value.data[0], 0.0584999993f, 8 * U * 0.06);
    ck_assert_float_eq_tol(l->param[2].value.data[1], 0.0687500015f, 8 * U * 0.07);
    ck_assert_float_eq_tol(l->param[3].value.data[0], 1.09051001f, 8 * U);
    ck_assert_float_eq_tol(l->param[3].value.data[1], 1.55234373f, 8 * U);
    ck_assert_int_eq(t.counter, 1);
    ck_assert_float_eq_tol(l->param[0].grad.data[0], 3.69842052f, 32 * U);
    ck_assert_float_eq_tol(l->param[0].grad.data[1], 3.92707872f, 32 * U);
    ck_assert(l->param[1].grad.data[0] == 0.75f && l->param[1].grad.data[1] == 2.0f);
    t.ex.training = 0;
    tu_layer_forward(&t);
    for (int i = 0; i < 12; i++) ck_assert_float_eq_tol(t.y[i], want_eval[i], 32 * U);
    ck_assert_int_eq(t.counter, 1);
    tu_layer_release(&t);
}
END_TEST

START_TEST(test_bn_grads)
{
    const int training = _i;
    int chw[3] = {3, 4, 5};
    const int n = 3, hw = 20;
    struct tu_layer t;
    tu_layer_bind(&t, adapt_batchnorm2d_create("bn", chw, 1e-5f, 0.1f), n, training);
    size_t nx = tu_layer_in_len(&t, 0);
    adapt_layer_reset_defaults(t.l);
    tu_fill_uniform(t.x[0], nx, 81, -2.385f, 2.385f);
    for (int c = 0; c < 3; c++) /* channels with offset means */
        for (int j = 0; j < n; j++)
            for (int i = 0; i < hw; i++) t.x[0][(j * 3 + c) * hw + i] += 1.5f * (float)c;
    tu_fill_uniform(t.l->param[0].value.data, 3, 82, 0.5f, 1.5f);
    tu_fill_uniform(t.l->param[1].value.data, 3, 83, -0.5f, 0.5f);
    tu_fill_uniform(t.l->param[2].value.data, 3, 84, -0.5f, 0.5f);
    tu_fill_uniform(t.l->param[3].value.data, 3, 85, 0.5f, 2.0f);
    tu_fill_uniform(t.dy, nx, 86, -1.0f, 1.0f);
    struct bn_arg a = {3, hw, 1e-5, training};
    /* The variance of uniform(-2.385, 2.385) is 1.9, so invstd ~ 0.73, and
     * running_var >= 0.5 gives invstd <= 1.42; xhat is within +-3, gamma <= 1.5.
     * Training dx = gamma invstd (dy - mean dy - xhat mean(dy xhat)): its
     * sums over M = 60 terms with |t| <= 3 carry sum_tol(60, 3), times
     * gamma invstd <= 2.2, plus a few roundings of |dx| <= 2.2 (1 + 1 + 3).
     * dgamma: 60 terms dy xhat (|t| <= 3); dbeta: 60 terms dy. */
    double ax[2] = {2.2 * sum_tol(60, 3.0) + 16 * U * 11.0, -1};
    double ap[4] = {sum_tol(60, 3.0), sum_tol(60, 1.0), -1, -1};
    check_grads(&t, ref_bn, &a, 0x1p-12f, ax, ap, 0);

    /* the float forward against the reference, and the running statistics */
    double *y = malloc(nx * sizeof(double)), mean[3], var[3];
    ref_bn_stats(&t, &a, y, mean, var);
    for (size_t i = 0; i < nx; i++) ck_assert(fabs(t.y[i] - y[i]) <= 64 * U * (1.0 + fabs(y[i])));
    if (training) {
        /* check_grads ran one forward: running = 0.9 start + 0.1 stat (unbiased var) */
        float rm0[3], rv0[3];
        tu_fill_uniform(rm0, 3, 84, -0.5f, 0.5f);
        tu_fill_uniform(rv0, 3, 85, 0.5f, 2.0f);
        for (int c = 0; c < 3; c++) {
            ck_assert(fabs(t.l->param[2].value.data[c] - (0.9 * rm0[c] + 0.1 * mean[c])) <=
                      16 * U * 4);
            ck_assert(fabs(t.l->param[3].value.data[c] - (0.9 * rv0[c] + 0.1 * var[c] * 60 / 59)) <=
                      16 * U * 4);
            ck_assert(fabs(t.saved[c] - mean[c]) <= 4 * U * 4);
            ck_assert(fabs(t.saved[3 + c] - 1 / sqrt(var[c] + 1e-5)) <= 4 * U * 2);
        }
        ck_assert_int_eq(t.counter, 1);
    } else {
        ck_assert_int_eq(t.counter, 0);
    }
    free(y);
    tu_layer_release(&t);
}
END_TEST

/* Statistics stay accurate when |mean| >> std (the shifted sums): x = 1000 +
 * noise of std 0.01; float E[x^2] - E[x]^2 would lose every digit. */
START_TEST(test_bn_large_mean)
{
    int chw[3] = {2, 16, 16};
    struct tu_layer t;
    tu_layer_bind(&t, adapt_batchnorm2d_create("bn", chw, 1e-5f, 0.1f), 4, 1);
    adapt_layer_reset_defaults(t.l);
    size_t nx = tu_layer_in_len(&t, 0);
    tu_fill_uniform(t.x[0], nx, 91, -0.017f, 0.017f);
    for (size_t i = 0; i < nx; i++) t.x[0][i] += 1000.0f;
    tu_layer_forward(&t);
    struct bn_arg a = {2, 256, 1e-5, 1};
    double mean[2], var[2], *y = malloc(nx * sizeof(double));
    ref_bn_stats(&t, &a, y, mean, var);
    /* each x - s is exact (Sterbenz), so only summation rounding remains:
     * relative error of var well below 1e-5 */
    for (int c = 0; c < 2; c++) {
        double is = 1 / sqrt(var[c] + 1e-5);
        ck_assert_msg(fabs(t.saved[2 + c] - is) <= 1e-5 * is, "invstd %.9g vs %.9g", t.saved[2 + c],
                      is);
    }
    /* y: x - mean is O(0.017) out of 1000, so float x carries 2^-14 absolute
     * error relative to the spread: |y| ~ 1.7 with abs error <= 1000 u invstd */
    for (size_t i = 0; i < nx; i++)
        ck_assert(fabs(t.y[i] - y[i]) <= 4 * 1000 * U / sqrt(var[i / 256 % 2]));
    free(y);
    tu_layer_release(&t);
}
END_TEST

/* ------------------------------------------------------------------ add, flatten */

START_TEST(test_add_flatten)
{
    int chw[3] = {3, 40, 300}; /* 36000 per sample: parallel path */
    struct tu_layer t;
    tu_layer_bind(&t, adapt_add_create("add", chw), 2, 1);
    ck_assert_int_eq(t.l->nin, 2);
    size_t n = tu_layer_out_len(&t);
    tu_fill_dyadic(t.x[0], n, 101, -64, 64, 3);
    tu_fill_dyadic(t.x[1], n, 102, -64, 64, 3);
    tu_fill_dyadic(t.dy, n, 103, -64, 64, 3);
    tu_fill_dyadic(t.dx[1], n, 104, -64, 64, 3);
    float *prev = malloc(n * sizeof(float));
    memcpy(prev, t.dx[1], n * sizeof(float));
    tu_layer_forward(&t);
    for (size_t i = 0; i < n; i++) ck_assert(t.y[i] == t.x[0][i] + t.x[1][i]);
    tu_layer_backward(&t, 2u); /* dx0 = dy, dx1 += dy */
    ck_assert_int_eq(tu_first_bit_diff(t.dx[0], t.dy, n), -1);
    for (size_t i = 0; i < n; i++) ck_assert(t.dx[1][i] == prev[i] + t.dy[i]);
    tu_layer_backward_sel(&t, 2u, 0); /* dx0 == NULL */
    ck_assert_int_eq(tu_first_bit_diff(t.dx[1], t.dy, n), -1);
    free(prev);
    tu_layer_release(&t);

    int chw2[3] = {4, 3, 5};
    tu_layer_bind(&t, adapt_flatten_create("flat", chw2), 2, 1);
    ck_assert_int_eq(t.l->out_dim[0], 60);
    ck_assert_int_eq(t.l->out_dim[1] * t.l->out_dim[2], 1);
    tu_fill_uniform(t.x[0], 120, 105, -2.385f, 2.385f);
    tu_fill_uniform(t.dy, 120, 106, -1.0f, 1.0f);
    tu_layer_forward(&t);
    ck_assert_int_eq(tu_first_bit_diff(t.y, t.x[0], 120), -1);
    tu_layer_backward(&t, 0);
    ck_assert_int_eq(tu_first_bit_diff(t.dx[0], t.dy, 120), -1);
    tu_layer_release(&t);
}
END_TEST

/* ------------------------------------------------------------------ softmax cross-entropy */

/* PyTorch 1.13: F.cross_entropy(z (2,3), labels (0, 1)) = 0.441343843937
 * (float32; 0.441343859934787 in float64), grad from .backward(). Row 2 ties
 * its maximum (0.25 at classes 0 and 1): arg-max is the first, so only row 1
 * counts as correct. */
START_TEST(test_xent_hand)
{
    static const float z[6] = {2.385f, -1.0f, 0.5f, 0.25f, 0.25f, -3.0f};
    static const int lab[2] = {0, 1};
    static const float want[6] = {-0.0783105195f, 0.0142858457f, 0.0640247166f,
                                  0.245245397f,   -0.254754603f, 0.0095091965f};
    float d[6];
    int ok = -1;
    double loss = adapt_softmax_xent(z, lab, 2, 3, d, &ok);
    /* float exponentials: each exp(z - max) within ~4 u relative, so
     * log(sum) within ~4 u absolute */
    ck_assert_double_eq_tol(loss, 0.441343859934787, 8 * U);
    for (int i = 0; i < 6; i++) ck_assert_float_eq_tol(d[i], want[i], 4 * U);
    ck_assert_int_eq(ok, 1);
    ck_assert_double_eq(adapt_softmax_xent(z, lab, 2, 3, NULL, NULL), loss);
    /* large logits do not overflow: loss of (1000, 0) with label 1 is 1000 */
    float big[2] = {1000.0f, 0.0f};
    int one = 1;
    ck_assert_double_eq_tol(adapt_softmax_xent(big, &one, 1, 2, d, NULL), 1000.0, 1e-9);
    ck_assert_float_eq(d[0], 1.0f);
    ck_assert_float_eq(d[1], -1.0f);
}
END_TEST

struct xent_ctx {
    float *z;
    const int *lab;
    int n, c;
};

static double xent_ref(void *p)
{
    struct xent_ctx *x = p;
    double L = 0.0;
    for (int i = 0; i < x->n; i++) {
        double m = -INFINITY, s = 0.0;
        for (int j = 0; j < x->c; j++) m = fmax(m, x->z[i * x->c + j]);
        for (int j = 0; j < x->c; j++) s += exp(x->z[i * x->c + j] - m);
        L += m + log(s) - x->z[i * x->c + x->lab[i]];
    }
    return L / x->n;
}

START_TEST(test_xent_grads)
{
    enum { N = 16, C = 10 };
    float z[N * C], d[N * C];
    int lab[N];
    tu_fill_uniform(z, N * C, 111, -4.0f, 4.0f);
    for (int i = 0; i < N; i++) lab[i] = (i * 7) % C;
    double loss = adapt_softmax_xent(z, lab, N, C, d, NULL);
    struct xent_ctx c = {z, lab, N, C};
    ck_assert_double_eq_tol(loss, xent_ref(&c), 1e-6 * loss);
    /* each gradient is (p - onehot) / n with p from a few roundings: 8 u / n */
    struct tu_fd_opts o = {0x1p-12f, 0.0, 8 * U / N, 0};
    struct tu_fd_result r;
    ck_assert_msg(tu_gradcheck(xent_ref, &c, z, N * C, d, &o, &r) == 0,
                  "xent index %zu: %.9g vs %.9g", r.worst, r.worst_an, r.worst_fd);
    for (int i = 0; i < N; i++) {
        double s = 0.0;
        for (int j = 0; j < C; j++) s += d[i * C + j];
        ck_assert(fabs(s) <= 16 * U / N); /* rows of the gradient sum to 0 */
    }
}
END_TEST

/* ------------------------------------------------------------------ accumulation */

/* Bit 0 of acc adds the input gradient to what dx holds, for every kind not
 * covered above: linear, the dense and fully connected convolutions (dyadic
 * data: exact, so bit-equal), tanh and batch norm (not exact: the fresh value
 * and the sum may round differently, at most a few ulps of the operands:
 * 8 u (|prev| + 4 max|fresh|), the largest BN term being a few times the
 * largest gradient for these inputs). Parameter gradients double. */
START_TEST(test_accumulate_kinds)
{
    int c16[3] = {16, 2, 2}, c3[3] = {3, 5, 5}, c7[3] = {7, 3, 4};
    struct adapt_layer *ls[5] = {
        adapt_linear_create("fc", c7, 9, 1), adapt_conv2d_create("dense", c16, 8, 3, 1, 1, 1),
        adapt_conv2d_create("fc5", c3, 6, 5, 1, 0, 1), adapt_tanh_create("t", c7),
        adapt_batchnorm2d_create("bn", c7, 1e-5f, 0.1f)};
    for (int k = 0; k < 5; k++) {
        struct tu_layer t;
        tu_layer_bind(&t, ls[k], 3, 1);
        struct adapt_layer *l = t.l;
        size_t nx = tu_layer_in_len(&t, 0), ny = tu_layer_out_len(&t);
        tu_fill_dyadic(t.x[0], nx, 301 + k, -32, 32, 4);
        tu_fill_dyadic(t.dy, ny, 302 + k, -32, 32, 4);
        if (k == 4) adapt_layer_reset_defaults(l);
        for (int p = 0; p < l->nparam && k < 3; p++)
            tu_fill_dyadic(l->param[p].value.data, l->param[p].value.numel, 303 + p, -16, 16, 4);
        tu_layer_forward(&t);
        tu_layer_backward(&t, 0);
        float *fresh = malloc(nx * sizeof(float)), *prev = malloc(nx * sizeof(float));
        float *g0 = malloc(l->param[0].grad.numel * sizeof(float) + 1);
        memcpy(fresh, t.dx[0], nx * sizeof(float));
        if (l->nparam) memcpy(g0, l->param[0].grad.data, l->param[0].grad.numel * sizeof(float));
        tu_fill_dyadic(prev, nx, 304 + k, -64, 64, 3);
        memcpy(t.dx[0], prev, nx * sizeof(float));
        tu_layer_backward(&t, 1);
        float fm = 0.0f; /* max |fresh| */
        for (size_t i = 0; i < nx; i++) fm = fabsf(fresh[i]) > fm ? fabsf(fresh[i]) : fm;
        for (size_t i = 0; i < nx; i++) {
            if (k < 3)
                ck_assert_msg(t.dx[0][i] == prev[i] + fresh[i], "%s: dx[%zu]", l->name, i);
            else
                ck_assert_msg(
                    fabsf(t.dx[0][i] - (prev[i] + fresh[i])) <= 8 * U * (fabsf(prev[i]) + 4 * fm),
                    "%s: dx[%zu] %.9g vs %.9g", l->name, i, t.dx[0][i], prev[i] + fresh[i]);
        }
        for (size_t i = 0; l->nparam && i < l->param[0].grad.numel; i++)
            ck_assert_msg(fabsf(l->param[0].grad.data[i] - 2 * g0[i]) <=
                              (k < 3 ? 0 : 8 * U * fabsf(g0[i])),
                          "%s: dW[%zu]", l->name, i);
        free(fresh);
        free(prev);
        free(g0);
        tu_layer_release(&t);
    }
}
END_TEST

/* ------------------------------------------------------------------ errors and shapes */

START_TEST(test_constructor_errors)
{
    int chw[3] = {3, 8, 8}, bad[3] = {3, 0, 8};
    adapt_error_clear();
    ck_assert_ptr_null(adapt_conv2d_create("features.0", chw, 4, 11, 1, 1, 1));
    ck_assert_ptr_nonnull(strstr(adapt_error_message(), "features.0"));
    ck_assert_ptr_null(adapt_conv2d_create("c", chw, 0, 3, 1, 1, 1));
    ck_assert_ptr_null(adapt_conv2d_create("c", chw, 4, 3, 0, 1, 1));
    ck_assert_ptr_null(adapt_conv2d_create("c", chw, 4, 3, 1, -1, 1));
    ck_assert_ptr_null(adapt_conv2d_create("c", bad, 4, 3, 1, 1, 1));
    ck_assert_ptr_nonnull(strstr(adapt_error_message(), "(3, 0, 8)"));
    ck_assert_ptr_null(adapt_linear_create("fc", chw, 0, 1));
    ck_assert_ptr_null(adapt_maxpool2d_create("p", chw, 9, 1));
    ck_assert_ptr_null(adapt_maxpool2d_create("p", chw, 0, 1)); /* global is average only */
    ck_assert_ptr_null(adapt_avgpool2d_create("p", chw, 2, 0));
    ck_assert_ptr_null(adapt_maxpool2d_pad_create("p", chw, 3, 1, 2)); /* pad > k / 2 */
    ck_assert_ptr_nonnull(strstr(adapt_error_message(), "padding 2"));
    ck_assert_ptr_null(adapt_avgpool2d_pad_create("p", chw, 4, 1, -1, 1));
    ck_assert_ptr_null(adapt_avgpool2d_pad_create("p", chw, 0, 0, 1, 1)); /* global */
    ck_assert_ptr_null(adapt_batchnorm2d_create("bn", chw, 0.0f, 0.1f));
    ck_assert_ptr_null(adapt_batchnorm2d_create("bn", chw, 1e-5f, 1.5f));
    ck_assert_ptr_null(adapt_relu_create("r", bad));
    ck_assert_ptr_null(adapt_tanh_create(NULL, chw));
    char longname[ADAPT_NAME_MAX];
    memset(longname, 'a', sizeof longname - 1);
    longname[sizeof longname - 1] = 0;
    ck_assert_ptr_null(adapt_add_create(longname, chw));
    ck_assert_ptr_nonnull(strstr(adapt_error_message(), "longer than"));
    /* the longest accepted name still fits "<name>.running_mean" */
    longname[ADAPT_NAME_MAX - 15] = 0;
    struct adapt_layer *l = adapt_batchnorm2d_create(longname, chw, 1e-5f, 0.1f);
    ck_assert_ptr_nonnull(l);
    ck_assert_uint_eq(strlen(l->param[2].name), ADAPT_NAME_MAX - 2);
    adapt_layer_free(l);
    adapt_layer_free(NULL);
}
END_TEST

/* Parameter counts and MACs of the three models (doc/models.md),
 * built from these constructors: LeNet-5 61,706 params and 416,520 MACs
 * ("0.42 M"); AlexNet-CIFAR 2,472,266 and 1,486,848 + 4,915,200 +
 * 2,654,208 + 3,538,944 + 2,359,296 + 2,560 = 14,957,056 ("14.96 M");
 * ResNet-20 272,474 and 40,813,184 (counted with PyTorch hooks on the
 * reference model of shared/bench/torch_train_step.py: "about 40.8 M"). */
struct tally {
    int64_t params, macs;
    int chw[3];
};

static void take(struct tally *s, struct adapt_layer *l)
{
    ck_assert_ptr_nonnull(l);
    for (int p = 0; p < l->nparam; p++)
        if (l->param[p].role != ADAPT_PARAM_BUFFER) s->params += (int64_t)l->param[p].value.numel;
    s->macs += l->macs;
    memcpy(s->chw, l->out_dim, sizeof s->chw);
    adapt_layer_free(l);
}

static void bn_relu(struct tally *s)
{
    take(s, adapt_batchnorm2d_create("bn", s->chw, 1e-5f, 0.1f));
    take(s, adapt_relu_create("relu", s->chw));
}

START_TEST(test_model_shapes)
{
    struct tally s = {0, 0, {1, 32, 32}};
    take(&s, adapt_conv2d_create("c1", s.chw, 6, 5, 1, 0, 1));
    take(&s, adapt_tanh_create("t", s.chw));
    take(&s, adapt_avgpool2d_create("p", s.chw, 2, 2));
    take(&s, adapt_conv2d_create("c3", s.chw, 16, 5, 1, 0, 1));
    take(&s, adapt_avgpool2d_create("p", s.chw, 2, 2));
    take(&s, adapt_conv2d_create("c5", s.chw, 120, 5, 1, 0, 1));
    take(&s, adapt_linear_create("f6", s.chw, 84, 1));
    take(&s, adapt_linear_create("f7", s.chw, 10, 1));
    ck_assert_int_eq(s.params, 61706);
    ck_assert_int_eq(s.macs, 416520);

    struct tally a = {0, 0, {3, 32, 32}};
    take(&a, adapt_conv2d_create("f0", a.chw, 64, 11, 4, 5, 1));
    take(&a, adapt_maxpool2d_create("f2", a.chw, 2, 2));
    take(&a, adapt_conv2d_create("f3", a.chw, 192, 5, 1, 2, 1));
    take(&a, adapt_maxpool2d_create("f5", a.chw, 2, 2));
    take(&a, adapt_conv2d_create("f6", a.chw, 384, 3, 1, 1, 1));
    take(&a, adapt_conv2d_create("f8", a.chw, 256, 3, 1, 1, 1));
    take(&a, adapt_conv2d_create("f10", a.chw, 256, 3, 1, 1, 1));
    take(&a, adapt_maxpool2d_create("f12", a.chw, 2, 2));
    ck_assert_int_eq(a.chw[0] * a.chw[1] * a.chw[2], 256);
    take(&a, adapt_flatten_create("flat", a.chw));
    take(&a, adapt_linear_create("classifier", a.chw, 10, 1));
    ck_assert_int_eq(a.params, 2472266);
    ck_assert_int_eq(a.macs, 14957056);

    struct tally r = {0, 0, {3, 32, 32}};
    take(&r, adapt_conv2d_create("conv", r.chw, 16, 3, 1, 1, 0));
    bn_relu(&r);
    int cin = 16;
    for (int stage = 0; stage < 3; stage++)
        for (int b = 0; b < 3; b++) {
            int cout = 16 << stage, stride = (stage > 0 && b == 0) ? 2 : 1;
            int in[3] = {r.chw[0], r.chw[1], r.chw[2]};
            take(&r, adapt_conv2d_create("conv1", r.chw, cout, 3, stride, 1, 0));
            bn_relu(&r);
            take(&r, adapt_conv2d_create("conv2", r.chw, cout, 3, 1, 1, 0));
            take(&r, adapt_batchnorm2d_create("bn2", r.chw, 1e-5f, 0.1f));
            int out[3] = {r.chw[0], r.chw[1], r.chw[2]};
            if (stride != 1 || cin != cout) {
                memcpy(r.chw, in, sizeof in);
                take(&r, adapt_conv2d_create("shortcut.0", r.chw, cout, 1, stride, 0, 0));
                take(&r, adapt_batchnorm2d_create("shortcut.1", r.chw, 1e-5f, 0.1f));
                ck_assert(memcmp(r.chw, out, sizeof out) == 0);
            }
            take(&r, adapt_add_create("add", r.chw));
            take(&r, adapt_relu_create("relu", r.chw));
            cin = cout;
        }
    take(&r, adapt_avgpool2d_create("gap", r.chw, 0, 0));
    take(&r, adapt_linear_create("fc", r.chw, 10, 1));
    ck_assert_int_eq(r.params, 272474);
    ck_assert_int_eq(r.macs, 40813184);
}
END_TEST

static Suite *layers_suite(void)
{
    Suite *s = suite_create("layers");
    TCase *tc = tcase_create("conv");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_gemm_bcast);
    tcase_add_test(tc, test_conv_hand);
    tcase_add_test(tc, test_gconv_hand);
    tcase_add_loop_test(tc, test_gconv_ref_and_grads, 0,
                        (int)(sizeof gconv_cases / sizeof gconv_cases[0]));
    tcase_add_loop_test(tc, test_gconv_stacks, 0,
                        (int)(sizeof gconv_stack_cases / sizeof gconv_stack_cases[0]));
    tcase_add_loop_test(tc, test_gconv_stacks_exact, 0,
                        (int)(sizeof gconv_stack_cases / sizeof gconv_stack_cases[0]));
    tcase_add_test(tc, test_relu6_hand);
    tcase_add_test(tc, test_sigmoid_hardswish_hand);
    tcase_add_test(tc, test_sigmoid_hardswish_grads);
    tcase_add_test(tc, test_gelu_hand);
    tcase_add_test(tc, test_gelu_accuracy);
    tcase_add_test(tc, test_gelu_grads);
    tcase_add_test(tc, test_dropout);
    tcase_add_test(tc, test_concat);
    tcase_add_test(tc, test_concat3);
    tcase_add_loop_test(tc, test_conv_ref_and_grads, 0,
                        (int)(sizeof conv_cases / sizeof conv_cases[0]));
    tcase_add_test(tc, test_conv_chunks_and_accumulate);
    suite_add_tcase(s, tc);

    tc = tcase_create("dense");
    tcase_add_test(tc, test_linear_hand_and_grads);
    tcase_add_test(tc, test_xent_hand);
    tcase_add_test(tc, test_xent_grads);
    suite_add_tcase(s, tc);

    tc = tcase_create("elementwise");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_tanh_hand);
    tcase_add_test(tc, test_tanh_accuracy);
    tcase_add_test(tc, test_act_grads);
    tcase_add_test(tc, test_act_accumulate_inplace);
    tcase_add_test(tc, test_add_flatten);
    suite_add_tcase(s, tc);

    tc = tcase_create("pool");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_maxpool_hand);
    tcase_add_test(tc, test_avgpool_hand);
    tcase_add_test(tc, test_pool_pad_hand);
    tcase_add_loop_test(tc, test_pool_grads, 0, (int)(sizeof pool_cases / sizeof pool_cases[0]));
    tcase_add_test(tc, test_pool_accumulate);
    suite_add_tcase(s, tc);

    tc = tcase_create("batchnorm");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_bn_hand);
    tcase_add_loop_test(tc, test_bn_grads, 0, 2);
    tcase_add_test(tc, test_bn_large_mean);
    suite_add_tcase(s, tc);

    tc = tcase_create("accumulate");
    tcase_add_test(tc, test_accumulate_kinds);
    suite_add_tcase(s, tc);

    tc = tcase_create("api");
    tcase_add_test(tc, test_constructor_errors);
    tcase_add_test(tc, test_model_shapes);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run_suite(layers_suite(), CK_FORK_GETENV);
}
