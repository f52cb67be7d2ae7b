/* tests/test_layers_pool.c: max and average pooling, part of tests/test_layers: cases by hand
 * from PyTorch 1.13 (ties, overlapping windows, padding, the global average), a
 * double-precision reference by the pools' definition with its finite-difference gradients
 * over a table of shapes, and accumulation into dx. */
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

void test_layers_add_pool(TCase *pool)
{
    tcase_add_test(pool, test_maxpool_hand);
    tcase_add_test(pool, test_avgpool_hand);
    tcase_add_test(pool, test_pool_pad_hand);
    tcase_add_loop_test(pool, test_pool_grads, 0, (int)(sizeof pool_cases / sizeof pool_cases[0]));
    tcase_add_test(pool, test_pool_accumulate);
}
