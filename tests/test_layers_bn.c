/* tests/test_layers_bn.c: batch norm, part of tests/test_layers: training and evaluation by
 * hand from PyTorch 1.13, a double-precision reference (with the batch statistics) and its
 * finite-difference gradients in training and evaluation mode, and statistics that stay
 * accurate when |mean| >> std. */
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

void test_layers_add_bn(TCase *batchnorm)
{
    tcase_add_test(batchnorm, test_bn_hand);
    tcase_add_loop_test(batchnorm, test_bn_grads, 0, 2);
    tcase_add_test(batchnorm, test_bn_large_mean);
}
