/* tests/test_net_cuda_layers.c: every layer kind on the GPU against the CPU, part of
 * tests/test_net_cuda, in the one-layer network (tests/test_net_cuda.h): convolutions and the
 * linear layer in float32 and on tensor cores in fp16 and bf16, at full and smaller batches, and
 * the other layers, forward and backward. */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/rng.h"
#include "src/cuda/device.h"
#include "src/net/net.h"
#include "src/net/net_cuda.h"
#include "src/net/optim.h"
#include "src/quant/quant.h"
#include "tests/test_net_cuda.h"
#include "tests/testutil.h"

/* convolutions: plain, strided with padding, large kernel, depthwise, grouped, dilated */
static const struct {
    int cin, h, cout, k, stride, pad, groups, dil;
} cs[] = {{3, 13, 8, 3, 1, 1, 1, 1}, {4, 17, 6, 5, 2, 2, 1, 1}, {3, 32, 4, 11, 4, 5, 1, 1},
          {8, 9, 8, 3, 1, 1, 8, 1},  {6, 11, 4, 3, 2, 1, 2, 1}, {4, 12, 4, 3, 1, 2, 1, 2}};

static const char *path_name(enum path path)
{
    return path == HALF16 ? " fp16" : path == HALFBF16 ? " bf16" : "";
}

/* conv case i on a batch of n in a network made for cap */
static void conv_case(size_t i, enum path path, int n, int cap)
{
    int in[3] = {cs[i].cin, cs[i].h, cs[i].h};
    struct adapt_layer *l =
        cs[i].groups == 1 && cs[i].dil == 1
            ? adapt_conv2d_create("conv", in, cs[i].cout, cs[i].k, cs[i].stride, cs[i].pad, 1)
            : adapt_gconv2d_create("conv", in, cs[i].cout, cs[i].k, cs[i].stride, cs[i].pad,
                                   cs[i].groups, cs[i].dil, 1);
    ck_assert_msg(l, "%s", adapt_error_message());
    struct one o = one_layer(l, in, 0, cap);
    const int *od = adapt_net_act_dim(o.net, o.a_out);
    double kk = (double)cs[i].k * cs[i].k, cig = (double)cs[i].cin / cs[i].groups;
    double cog = (double)cs[i].cout / cs[i].groups, P = (double)n * od[1] * od[2];
    /* forward: cin/g k k terms; input gradient: cout/g k k; weight gradient: n Ho Wo;
     * bias gradient: n Ho Wo */
    double kp[2] = {P, P};
    char what[96];
    snprintf(what, sizeof what, "conv case %zu%s n %d of %d", i, path_name(path), n, cap);
    check_layer(what, o, n, cig * kk, cog * kk, kp, path);
}

static void linear_case(enum path path, int n, int cap)
{
    const int in[3] = {5, 3, 3};
    struct one o = one_layer(adapt_linear_create("fc", in, 17, 1), in, 0, cap);
    /* forward: 45 terms; input gradient: 17; weight and bias gradients: n */
    double kp[2] = {n, n};
    char what[96];
    snprintf(what, sizeof what, "linear%s n %d of %d", path_name(path), n, cap);
    check_layer(what, o, n, 45, 17, kp, path);
}

/* The products' cases, one loop iteration each: the six convolutions and the linear layer in
 * float32 (convolutions through cuDNN when built with it) and on tensor cores in fp16 and bf16
 * (AMP), at full batches (6 and 9); then batches of n_max - 3, which the cuDNN descriptors
 * (set up at n_max) and the half path's per-batch carve of its copies must follow. */
enum { NPRODUCT_FULL = 3 * 7 };
static const struct {
    int conv; /* conv case, -1: linear */
    enum path path;
} product_short[] = {{1, CONV}, {5, CONV}, {-1, PLAIN}, {1, HALF16}, {3, HALFBF16}, {-1, HALFBF16}};
enum { NPRODUCT = NPRODUCT_FULL + (int)(sizeof product_short / sizeof product_short[0]) };

START_TEST(test_layer_product)
{
    if (_i < NPRODUCT_FULL) {
        static const enum path paths[3] = {CONV, HALF16, HALFBF16};
        enum path path = paths[_i / 7];
        int j = _i % 7;
        if (j < 6)
            conv_case((size_t)j, path, 6, 6);
        else
            linear_case(path == CONV ? PLAIN : path, 9, 9);
        return;
    }
    int c = product_short[_i - NPRODUCT_FULL].conv;
    enum path path = product_short[_i - NPRODUCT_FULL].path;
    if (c >= 0)
        conv_case((size_t)c, path, 6 - 3, 6);
    else
        linear_case(path, 9 - 3, 9);
}
END_TEST

/* The other layers, one loop iteration each (the same checks as before, case by case). */
enum { NELEMENTWISE = 20 };

START_TEST(test_layer_elementwise)
{
    const int n = 4, in[3] = {3, 10, 10};
    const char *names[] = {"relu", "relu6", "tanh", "sigmoid", "hardswish", "gelu", "gelu tanh"};
    int in6[3] = {6, 10, 10};
    const int in3[3][3] = {{in[0], in[1], in[2]}, {in[0], in[1], in[2]}, {in[0], in[1], in[2]}};
    double kp[2] = {400, 400};
    int a = _i;
    if (a < 7) {
        struct adapt_layer *l = a == 0   ? adapt_relu_create("act", in)
                                : a == 1 ? adapt_relu6_create("act", in)
                                : a == 2 ? adapt_tanh_create("act", in)
                                : a == 3 ? adapt_sigmoid_create("act", in)
                                : a == 4 ? adapt_hardswish_create("act", in)
                                         : adapt_gelu_create("act", in, a == 6);
        /* one term each way (a few ulps for tanh, sigmoid and gelu: K = 4; the same gelu
         * source on both, contracted differently) */
        check_layer(names[a], one_layer(l, in, 0, n), n, 4, 4, NULL, 0);
        return;
    }
    switch (a) {
    case 7:
        check_layer("maxpool 2/2", one_layer(adapt_maxpool2d_create("p", in, 2, 2), in, 0, n), n,
                    1, 1, NULL, 0);
        break;
    case 8:
        check_layer("maxpool 3/2", one_layer(adapt_maxpool2d_create("p", in, 3, 2), in, 0, n), n,
                    1, 9, NULL, 0);
        break;
    case 9:
        check_layer("avgpool 2/2", one_layer(adapt_avgpool2d_create("p", in, 2, 2), in, 0, n), n,
                    4, 1, NULL, 0);
        break;
    case 10:
        check_layer("global avgpool", one_layer(adapt_avgpool2d_create("p", in, 0, 0), in, 0, n),
                    n, 100, 1, NULL, 0);
        break;
    /* padded pools: windows clipped to the input; an input lies in at most 2 x 2 windows */
    case 11:
        check_layer("maxpool 3/2 pad 1",
                    one_layer(adapt_maxpool2d_pad_create("p", in, 3, 2, 1), in, 0, n), n, 1, 4,
                    NULL, 0);
        break;
    case 12:
        check_layer("maxpool 2/1 pad 1",
                    one_layer(adapt_maxpool2d_pad_create("p", in, 2, 1, 1), in, 0, n), n, 1, 4,
                    NULL, 0);
        break;
    case 13:
    case 14: {
        int cip = a - 13;
        check_layer(cip ? "avgpool 3/2 pad 1" : "avgpool 3/2 pad 1 count_include_pad 0",
                    one_layer(adapt_avgpool2d_pad_create("p", in, 3, 2, 1, cip), in, 0, n), n, 9,
                    4, NULL, 0);
        break;
    }
    case 15:
        check_layer("add", one_layer(adapt_add_create("add", in), in, 1, n), n, 1, 2, NULL, 0);
        break;
    case 16:
        check_layer("concat", one_layer(adapt_concat_create("cat", in, in), in, 1, n), n, 1, 1,
                    NULL, 0);
        break;
    case 17:
        /* the first input's gradient sums three terms (through the copy, tanh and sigmoid) */
        check_layer("concat of three", one_layer(adapt_concat_n_create("cat", 3, in3), in, 2, n),
                    n, 1, 3, NULL, 0);
        break;
    case 18:
        check_layer("dropout 0.3", one_layer(adapt_dropout_create("drop", in6, 0.3f), in6, 0, n),
                    n, 1, 1, NULL, 0);
        break;
    case 19:
        /* batch norm: statistics over n H W = 400 terms, gradients the same */
        check_layer("batchnorm",
                    one_layer(adapt_batchnorm2d_create("bn", in, 1e-5f, 0.1f), in, 0, n), n, 400,
                    400, kp, 0);
        break;
    default:
        ck_abort_msg("no elementwise case %d", a);
    }
}
END_TEST

void test_net_cuda_add_layers(TCase *products, TCase *elementwise)
{
    tcase_add_loop_test(products, test_layer_product, 0, NPRODUCT);
    tcase_add_loop_test(elementwise, test_layer_elementwise, 0, NELEMENTWISE);
}
