/* tests/test_layers_gconv.c: grouped (and depthwise) convolution, part of tests/test_layers:
 * a case by hand from PyTorch 1.13, the double-precision reference forward with its
 * finite-difference gradients over a table of shapes, and the stacked-planes paths (batch against
 * one sample at a time, bit-exact on dyadic data). */
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

void test_layers_add_gconv(TCase *conv)
{
    tcase_add_test(conv, test_gconv_hand);
    tcase_add_loop_test(conv, test_gconv_ref_and_grads, 0,
                        (int)(sizeof gconv_cases / sizeof gconv_cases[0]));
    tcase_add_loop_test(conv, test_gconv_stacks, 0,
                        (int)(sizeof gconv_stack_cases / sizeof gconv_stack_cases[0]));
    tcase_add_loop_test(conv, test_gconv_stacks_exact, 0,
                        (int)(sizeof gconv_stack_cases / sizeof gconv_stack_cases[0]));
}
