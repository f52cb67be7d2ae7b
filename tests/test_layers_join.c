/* tests/test_layers_join.c: the layers that pass values on rather than compute with them,
 * part of tests/test_layers: dropout (its mask's rate, scaling and seeding), concat (by hand
 * from PyTorch 1.13 and against finite differences of the channels put one after the other),
 * add and flatten (dyadic data: bit-exact). */
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

void test_layers_add_join(TCase *conv, TCase *elementwise)
{
    tcase_add_test(conv, test_dropout);
    tcase_add_test(conv, test_concat);
    tcase_add_test(conv, test_concat3);
    tcase_add_test(elementwise, test_add_flatten);
}
