/* tests/test_layers.c: the CPU layer kinds (src/layers) against
 *  - small cases whose expected values were computed with PyTorch 1.13
 *    (torch.nn.functional on the same float32 inputs; noted per case),
 *  - double-precision reference forwards written here as plain loops,
 *  - finite-difference gradients of those references, for every input and
 *    every trained parameter (tolerances: tests/test_layers.h).
 *
 * Bit-exact checks (accumulation, chunking, add, flatten) use dyadic
 * values (small integers / 2^b) whose sums and products are exact in float,
 * so every summation order gives the same bits.
 *
 * This file: the gradient check, the GEMM, convolution, linear and softmax cross-entropy, and
 * the suite. The other layer kinds are in test_layers_gconv.c (grouped convolution),
 * test_layers_act.c (activations), test_layers_join.c (dropout, concat, add, flatten),
 * test_layers_pool.c, test_layers_bn.c (batch norm) and test_layers_api.c (accumulation into
 * dx for every kind, constructor errors, the models' shapes). */
#include <check.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/status.h"
#include "src/net/layer.h"
#include "src/net/layers/layers_impl.h"
#include "tests/test_layers.h"
#include "tests/testutil_net.h"

double sum_tol(double m, double tmax)
{
    return 4.0 * sqrt(m) * U * m * tmax;
}

/* ------------------------------------------------------------------ references */

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

/* the gradient check (tests/test_layers.h) */
void check_grads(struct tu_layer *t, ref_fn ref, const void *arg, float h, const double *atol_x,
                 const double atol_p[4], size_t max_checks)
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

/* The cross-entropy of softmax(z) (reference.softmax_before_ce), by hand: z = (0, ln 3),
 * label 1. p = softmax(z) = (1/4, 3/4); the loss is the cross-entropy of p as logits,
 * log(e^0.25 + e^0.75) - 0.75 = log(1 + e^0.5) - 0.5 = 0.474076984 (the plain loss of z is
 * -log(3/4) = 0.287682072). q = softmax(p) = (1, e^0.5) / (1 + e^0.5) = (0.377540669,
 * 0.622459331); g = q - onehot = (0.377540669, -0.377540669); g.p = -0.188770334;
 * dz = p (g - g.p) = (0.25 * 0.566311003, 0.75 * -0.188770334) = (0.141577751, -0.141577751).
 * The arg-max is z's. Then a finite-difference check on random rows. */
static double xent2_ref(void *p)
{
    struct xent_ctx *x = p;
    double L = 0.0;
    for (int i = 0; i < x->n; i++) {
        double m = -INFINITY, s = 0.0, s2 = 0.0;
        for (int j = 0; j < x->c; j++) m = fmax(m, x->z[i * x->c + j]);
        for (int j = 0; j < x->c; j++) s += exp(x->z[i * x->c + j] - m);
        for (int j = 0; j < x->c; j++) s2 += exp(exp(x->z[i * x->c + j] - m) / s);
        L += log(s2) - exp(x->z[i * x->c + x->lab[i]] - m) / s;
    }
    return L / x->n;
}

START_TEST(test_xent_softmax_first)
{
    float z[2] = {0.0f, (float)log(3.0)}, d[2];
    int one = 1, ok = -1;
    ck_assert_double_eq_tol(adapt_softmax2_xent(z, &one, 1, 2, d, &ok), 0.474076984, 1e-7);
    ck_assert_double_eq_tol(adapt_softmax_xent(z, &one, 1, 2, NULL, NULL), 0.287682072, 1e-7);
    ck_assert_float_eq_tol(d[0], 0.141577751f, 1e-7f);
    ck_assert_float_eq_tol(d[1], -0.141577751f, 1e-7f);
    ck_assert_int_eq(ok, 1);
    enum { N = 16, C = 10 };
    float zz[N * C], dd[N * C];
    int lab[N];
    tu_fill_uniform(zz, N * C, 112, -4.0f, 4.0f);
    for (int i = 0; i < N; i++) lab[i] = (i * 3) % C;
    struct xent_ctx c = {zz, lab, N, C};
    double loss = adapt_softmax2_xent(zz, lab, N, C, dd, NULL);
    ck_assert_double_eq_tol(loss, xent2_ref(&c), 1e-9);
    /* computed in double, rounded once to float: a few u of the largest gradient, 1 / n */
    struct tu_fd_opts o = {0x1p-12f, 0.0, 8 * U / N, 0};
    struct tu_fd_result r;
    ck_assert_msg(tu_gradcheck(xent2_ref, &c, zz, N * C, dd, &o, &r) == 0,
                  "xent2 index %zu: %.9g vs %.9g", r.worst, r.worst_an, r.worst_fd);
}
END_TEST

static Suite *layers_suite(void)
{
    Suite *s = suite_create("layers");
    TCase *tc = tcase_create("conv");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_gemm_bcast);
    tcase_add_test(tc, test_conv_hand);
    test_layers_add_gconv(tc);
    TCase *te = tcase_create("elementwise");
    tcase_set_timeout(te, 30);
    test_layers_add_act(tc, te);
    test_layers_add_join(tc, te);
    tcase_add_loop_test(tc, test_conv_ref_and_grads, 0,
                        (int)(sizeof conv_cases / sizeof conv_cases[0]));
    tcase_add_test(tc, test_conv_chunks_and_accumulate);
    suite_add_tcase(s, tc);

    tc = tcase_create("dense");
    tcase_add_test(tc, test_linear_hand_and_grads);
    tcase_add_test(tc, test_xent_hand);
    tcase_add_test(tc, test_xent_grads);
    tcase_add_test(tc, test_xent_softmax_first);
    suite_add_tcase(s, tc);

    suite_add_tcase(s, te);

    tc = tcase_create("pool");
    tcase_set_timeout(tc, 30);
    test_layers_add_pool(tc);
    suite_add_tcase(s, tc);

    tc = tcase_create("batchnorm");
    tcase_set_timeout(tc, 30);
    test_layers_add_bn(tc);
    suite_add_tcase(s, tc);

    TCase *ta = tcase_create("accumulate");
    tc = tcase_create("api");
    test_layers_add_api(ta, tc);
    suite_add_tcase(s, ta);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run_suite(layers_suite(), CK_FORK_GETENV);
}
