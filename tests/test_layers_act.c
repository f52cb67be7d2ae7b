/* tests/test_layers_act.c: the activations, part of tests/test_layers: relu6, sigmoid,
 * hardswish, GELU (exact and tanh form) and tanh on values by hand from PyTorch 1.13, GELU and
 * tanh against erfc(), exp() and tanh() in double over many floats (in ulps), every kind's
 * gradient against finite differences of a double reference, and accumulation and in-place use
 * of the element-wise layers (dyadic data: exact). */
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

static void ref_tanh(const struct tu_layer *t, const void *arg, double *y)
{
    for (size_t i = 0; i < tu_layer_out_len(t); i++) y[i] = tanh((double)t->x[0][i]);
}

static void ref_relu(const struct tu_layer *t, const void *arg, double *y)
{
    for (size_t i = 0; i < tu_layer_out_len(t); i++) y[i] = t->x[0][i] > 0.0f ? t->x[0][i] : 0.0;
}

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

void test_layers_add_act(TCase *conv, TCase *elementwise)
{
    tcase_add_test(conv, test_relu6_hand);
    tcase_add_test(conv, test_sigmoid_hardswish_hand);
    tcase_add_test(conv, test_sigmoid_hardswish_grads);
    tcase_add_test(conv, test_gelu_hand);
    tcase_add_test(conv, test_gelu_accuracy);
    tcase_add_test(conv, test_gelu_grads);
    tcase_add_test(elementwise, test_tanh_hand);
    tcase_add_test(elementwise, test_tanh_accuracy);
    tcase_add_test(elementwise, test_act_grads);
    tcase_add_test(elementwise, test_act_accumulate_inplace);
}
