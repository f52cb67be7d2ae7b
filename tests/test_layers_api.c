/* tests/test_layers_api.c: what every layer kind promises, part of tests/test_layers:
 * accumulation into dx (bit 0 of acc) for the kinds the other files do not cover, the
 * constructors' refusals of bad shapes and arguments, and the parameter and MAC counts of the
 * models built from these constructors (doc/models.md). */
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

/* ------------------------------------------------------------------ accumulation */

/* Bit 0 of acc adds the input gradient to what dx holds, for every kind not
 * covered in the other files of tests/test_layers: linear, the dense and fully
 * connected convolutions (dyadic data: exact, so bit-equal), tanh and batch
 * norm (not exact: the fresh value and the sum may round differently, at most
 * a few ulps of the operands: 8 u (|prev| + 4 max|fresh|), the largest BN term
 * being a few times the largest gradient for these inputs). Parameter
 * gradients double. */
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

/* adapt_transpose (mx_gemm.c): whole 16 x 16 tiles in vectors, the edges one by one; every
 * element lands at its transposed place for sizes around the tile, with strides wider than
 * the matrix, and the padding of out is left alone. */
START_TEST(test_transpose_sizes)
{
    static const size_t sz[] = {1, 15, 16, 17, 33, 48};
    for (size_t a = 0; a < 6; a++)
        for (size_t b = 0; b < 6; b++) {
            const size_t rows = sz[a], cols = sz[b], ldi = cols + 3, ldo = rows + 5;
            float *in = malloc(rows * ldi * sizeof *in), *out = malloc(cols * ldo * sizeof *out);
            for (size_t i = 0; i < rows * ldi; i++) in[i] = (float)i;
            for (size_t i = 0; i < cols * ldo; i++) out[i] = -1.0f;
            adapt_transpose(in, rows, cols, ldi, out, ldo);
            for (size_t c = 0; c < cols; c++)
                for (size_t r = 0; r < ldo; r++)
                    ck_assert_msg(out[c * ldo + r] == (r < rows ? (float)(r * ldi + c) : -1.0f),
                                  "%zu x %zu: out[%zu][%zu] = %g", rows, cols, c, r,
                                  out[c * ldo + r]);
            free(in), free(out);
        }
}
END_TEST

void test_layers_add_api(TCase *accumulate, TCase *api)
{
    tcase_add_test(api, test_transpose_sizes);
    tcase_add_test(accumulate, test_accumulate_kinds);
    tcase_add_test(api, test_constructor_errors);
    tcase_add_test(api, test_model_shapes);
}
