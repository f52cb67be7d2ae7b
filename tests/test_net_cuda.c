/* tests/test_net_cuda.c: the GPU engine (src/net/net_cuda.h) against the CPU engine.
 *
 * Exits 77 (skip) when the build has no CUDA or the machine no GPU; runs without fork (CUDA
 * does not survive fork()).
 *
 * Tolerances. The GPU and the CPU add the same products in different orders (cuBLAS and
 * cuDNN tile their reductions; the CPU blocks its GEMMs and parallelises over threads), so an
 * output that sums K terms may differ by up to about K unit roundoffs u = 2^-24 of the sum of
 * the terms' magnitudes. Each check states K and allows |gpu - cpu| <= 4 K u max|cpu| (at
 * least 4 u: one rounding in each engine plus a transcendental function's few ulps). cuDNN
 * may pick transform algorithms (FFT, Winograd) whose error is not a plain summation error:
 * convolutions through cuDNN get at least 2e-5 relative (FFT round trips in float32; cuDNN's
 * documentation on algorithm numerics).
 *
 * Whole networks: the loss agrees to 1e-5 relative and the gradients are compared as norms.
 * In a network of smooth layers (LeNet-5: tanh, average pooling) the layers' errors compound
 * to well under 1e-4. A kink (relu, relu6, max pooling) is different: where the two forward
 * passes put a pre-activation on either side of it, that element's whole gradient is passed
 * by one engine and stopped by the other. With forward values that agree to about 2e-6
 * (measured: ADAPT_TEST_TRACE_ACTS=1 prints each activation's value and gradient difference)
 * about one pre-activation in 10^6 flips, and the gradient's relative norm difference is about
 * the square root of that fraction, 1e-3; with few elements one flip weighs more. Networks with
 * kinks are held to 2e-2, which no semantic error (a wrong mask, a missing accumulation) stays
 * under: those move every element of a layer's gradient.
 */
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
#include "tests/testutil.h"
#include "tests/testutil_cuda.h"

#define U 0x1p-24

static void fill_uniform(float *x, size_t n, uint64_t seed, double lo, double hi)
{
    struct adapt_rng r;
    adapt_rng_init(&r, seed, 11);
    for (size_t i = 0; i < n; i++) x[i] = (float)(lo + (hi - lo) * adapt_rng_uniform(&r));
}

static void fill_labels(int *y, int n, int classes, uint64_t seed)
{
    struct adapt_rng r;
    adapt_rng_init(&r, seed, 12);
    for (int i = 0; i < n; i++) y[i] = (int)(adapt_rng_u32(&r) % (uint32_t)classes);
}

static double max_abs(const float *a, size_t n)
{
    double m = 0.0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs((double)a[i]));
    return m;
}

/* max |g - c| <= rtol max|c| (and no NaN) */
static void expect_close(const char *what, const float *gpu, const float *cpu, size_t n,
                         double rtol)
{
    double m = max_abs(cpu, n), e = 0.0;
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)gpu[i] - (double)cpu[i]);
        if (!(d <= e)) e = d, at = i; /* NaN lands here too */
    }
    ck_assert_msg(e <= rtol * m + 1e-30,
                  "%s: |gpu - cpu| = %g at %zu (gpu %g, cpu %g), "
                  "max |cpu| %g, allowed %g relative",
                  what, e, at, (double)gpu[at], (double)cpu[at], m, rtol);
}

static double rel_norm_diff(const float *a, const float *b, size_t n)
{
    double d = 0.0, s = 0.0;
    for (size_t i = 0; i < n; i++) {
        d += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        s += (double)b[i] * b[i];
    }
    return s > 0.0 ? sqrt(d / s) : sqrt(d);
}

static double tol_sum(double k)
{
    return fmax(4.0 * k * U, 4.0 * U);
}
static double tol_conv(double k)
{
    return adapt_cuda_net_built() == 2 ? fmax(tol_sum(k), 2e-5) : tol_sum(k);
}

/* What a case holds, static so that the checked teardown frees it when an assertion ends the
 * case early (CK_NOFORK: the next case runs in this process and on this GPU). */
static struct adapt_cuda_net *live_d;
static struct adapt_net *live_net;

static void release_live(void)
{
    if (live_d) adapt_cuda_net_free(live_d);
    if (live_net) adapt_net_free(live_net);
    live_d = NULL;
    live_net = NULL;
}

/* ---- one layer on the same input: x -> dropout(p = 0) (exact copy, so the layer's input
 * gets a gradient) -> LAYER -> flatten -> softmax cross-entropy over all outputs ---- */

struct one {
    struct adapt_net *net;
    int a_in, a_out; /* the layer's input and output activations */
};

/* extra: the layer's inputs beyond the first (0 to 2): tanh and sigmoid of it; the network
 * holds batches of up to cap samples */
static struct one one_layer(struct adapt_layer *layer, const int in[3], int extra, int cap)
{
    struct one o = {NULL, 0, 0};
    o.net = live_net = adapt_net_alloc("one", in, 2);
    ck_assert(o.net);
    int a[3] = {adapt_net_add(o.net, adapt_dropout_create("pre", in, 0.0f), 0, -1), -1, -1};
    if (extra > 0) a[1] = adapt_net_add(o.net, adapt_tanh_create("pre2", in), a[0], -1);
    if (extra > 1) a[2] = adapt_net_add(o.net, adapt_sigmoid_create("pre3", in), a[0], -1);
    o.a_in = a[0];
    o.a_out = adapt_net_add_n(o.net, layer, a);
    ck_assert_msg(o.a_out > 0, "%s", adapt_error_message());
    const int *od = adapt_net_act_dim(o.net, o.a_out);
    int flat = adapt_net_add(o.net, adapt_flatten_create("flat", od), o.a_out, -1);
    ck_assert(flat > 0);
    o.net->classes = od[0] * od[1] * od[2];
    ck_assert_int_eq(adapt_net_finalize(o.net, cap), ADAPT_OK);
    adapt_net_init_params(o.net, 5, 2.0);
    /* batch-norm: non-trivial gamma, beta and running statistics */
    for (int p = 0; p < o.net->nparam; p++) {
        struct adapt_param *pp = o.net->param[p];
        if (pp->fan_in == 0)
            fill_uniform(pp->value.data, pp->value.numel, 40 + (uint64_t)p, 0.5, 1.5);
    }
    return o;
}

/* How the GPU computes the layer: PLAIN float32 kernels and cuBLAS; CONV a convolution
 * through cuDNN when the build has it; HALF16, HALFBF16 a conv or linear in fp16 / bf16 on
 * tensor cores (adapt_cuda_net_half). */
enum path { PLAIN = 0, CONV = 1, HALF16, HALFBF16 };

/* Half precision: the GPU's products have operands in the half format and float32
 * accumulation. The CPU reference gets the same operands: the input, the weights and the loss
 * gradient (the layer's output gradient, through flatten) rounded to the format, then float32
 * arithmetic; its products are then exact, as the GPU's, and only the order of the sums
 * differs. Tensor cores may truncate rather than round while they accumulate (twice the
 * error of a rounded sum): 2 tol_sum(K). The GPU rounds its own loss gradient, computed from
 * its own logits, which differ from the CPU's in the last bits: an element within that of a
 * rounding midpoint goes to the other neighbour, 2^-11 (fp16) or 2^-8 (bf16) of it away, and
 * moves a gradient by that fraction of one of its terms; the backward checks allow four such
 * steps of the largest gradient. A wrong layout or operand moves every element by far more. */
static struct quant_spec half_spec(enum path path)
{
    struct quant_spec s;
    quant_spec_init(&s, path == HALFBF16 ? QUANT_FORMAT_BF16 : QUANT_FORMAT_FP16);
    s.rounding = QUANT_ROUND_NEAREST;
    return s;
}

static void round_half(float *x, size_t n, enum path path)
{
    struct quant_spec s = half_spec(path);
    struct quant_key k = {0, 0, 0};
    ck_assert_int_eq(quant_array(&s, x, x, n, k, NULL, NULL), ADAPT_OK);
}

/* the GPU's side of the loss gradient's rounding: the unit's output gradient, rounded on the
 * device before the unit's backward (as AMP's hook does) */
struct half_hook {
    struct adapt_cuda_net *d;
    const struct adapt_net *net;
    int unit;
    enum path path;
};

static enum adapt_status round_dy(void *ctx, int node, const float *y, float *dy, int n)
{
    (void)y;
    const struct half_hook *h = ctx;
    if (node != h->unit) return ADAPT_OK;
    struct quant_spec s = half_spec(h->path);
    struct quant_key k = {0, 0, 0};
    return adapt_cuda_net_round(
        h->d, &s, dy, dy, 1, adapt_layer_out_numel(h->net->nodes[node].layer) * (size_t)n, k, -1);
}

static double tol_path(double k, enum path path)
{
    return path == CONV ? tol_conv(k) : path >= HALF16 ? 2.0 * tol_sum(k) : tol_sum(k);
}

/* Runs the CPU and the GPU step on a batch of n samples (at most the capacity one_layer gave
 * the network) and compares the layer's output (k_fwd terms per output), its input gradient
 * (k_bwd) and each parameter gradient (k_par[i]). */
static void check_layer(const char *what, struct one o, int n, double k_fwd, double k_bwd,
                        const double *k_par, enum path path)
{
    struct adapt_net *net = o.net;
    size_t in_n = net->act_numel[0] * (size_t)n, out_n = net->act_numel[o.a_out] * (size_t)n;
    size_t xin_n = net->act_numel[o.a_in] * (size_t)n;
    float *x = malloc(in_n * sizeof *x);
    int *y = malloc((size_t)n * sizeof *y);
    ck_assert(x && y);
    fill_uniform(x, in_n, 3, -2.0, 2.0);
    fill_labels(y, n, net->classes, 4);
    int unit = -1;
    for (int i = 0; i < net->nnodes; i++)
        if (net->nodes[i].layer->is_unit) unit = i;
    if (path >= HALF16) {
        ck_assert(unit >= 0);
        round_half(x, in_n, path);
        struct adapt_param *w = &net->nodes[unit].layer->param[0];
        round_half(w->value.data, w->value.numel, path);
    }

    ck_assert_msg(adapt_cuda_net_create(net, 0, &live_d) == ADAPT_OK, "%s: %s", what,
                  adapt_error_message());
    struct adapt_cuda_net *d = live_d;
    struct half_hook hh = {d, net, unit, path};
    if (path >= HALF16) {
        ck_assert_msg(adapt_cuda_net_half(
                          d, unit, path == HALF16 ? ADAPT_CUDA_FP16 : ADAPT_CUDA_BF16) == ADAPT_OK,
                      "%s: %s", what, adapt_error_message());
        struct adapt_cuda_hooks hooks = {&hh, NULL, NULL, round_dy, NULL};
        adapt_cuda_net_set_hooks(d, &hooks);
    }
    /* CPU */
    const float *lg = adapt_net_forward(net, x, n, 1);
    size_t lg_n = (size_t)n * (size_t)net->classes;
    float *dl = malloc(lg_n * sizeof *dl);
    ck_assert(dl);
    adapt_softmax_xent(lg, y, n, net->classes, dl, NULL);
    if (path >= HALF16) round_half(dl, lg_n, path);
    adapt_net_backward(net, dl, n);
    float *cy = malloc(out_n * sizeof *cy), *cdx = malloc(xin_n * sizeof *cdx);
    ck_assert(cy && cdx);
    memcpy(cy, net->act[o.a_out], out_n * sizeof *cy);
    memcpy(cdx, net->dact[o.a_in], xin_n * sizeof *cdx);
    float **cg = calloc((size_t)net->nparam + 1, sizeof *cg);
    ck_assert(cg);
    for (int p = 0; p < net->nparam; p++) {
        struct adapt_param *pp = net->param[p];
        if (!pp->grad.data) continue;
        cg[p] = malloc(pp->value.numel * sizeof(float));
        ck_assert(cg[p]);
        memcpy(cg[p], pp->grad.data, pp->value.numel * sizeof(float));
    }
    /* GPU */
    ck_assert_int_eq(adapt_cuda_net_upload(d, x, y, n), ADAPT_OK);
    ck_assert_msg(adapt_cuda_net_step(d, 1, 1) == ADAPT_OK, "%s: %s", what, adapt_error_message());
    double loss;
    int correct;
    ck_assert_int_eq(adapt_cuda_net_result(d, &loss, &correct), ADAPT_OK);
    float *gy = malloc(out_n * sizeof *gy), *gdx = malloc(xin_n * sizeof *gdx);
    ck_assert(gy && gdx);
    ck_assert_int_eq(adapt_cuda_net_read(d, 0, o.a_out, n, gy), ADAPT_OK);
    ck_assert_int_eq(adapt_cuda_net_read(d, 1, o.a_in, n, gdx), ADAPT_OK);
    ck_assert_int_eq(adapt_cuda_net_pull_grads(d), ADAPT_OK);
    char label[512];
    snprintf(label, sizeof label, "%s forward", what);
    expect_close(label, gy, cy, out_n, tol_path(k_fwd, path));
    /* the input gradient also carries the loss gradient's own rounding (c classes), or in
     * half precision its neighbours in the format */
    double dl_tol = path == HALF16 ? 0x1p-9 : path == HALFBF16 ? 0x1p-6 : tol_sum(net->classes);
    snprintf(label, sizeof label, "%s input gradient", what);
    expect_close(label, gdx, cdx, xin_n, tol_path(k_bwd, path) + dl_tol);
    int k = 0;
    for (int p = 0; p < net->nparam; p++) {
        struct adapt_param *pp = net->param[p];
        if (!cg[p]) continue;
        snprintf(label, sizeof label, "%.100s gradient of %.100s", what, pp->name);
        expect_close(label, pp->grad.data, cg[p], pp->value.numel,
                     tol_path(k_par[k], path) + dl_tol);
        k++;
        free(cg[p]);
    }
    free(cg), free(x), free(y), free(dl), free(cy), free(cdx), free(gy), free(gdx);
    release_live(); /* the engine, then the network */
}

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

/* ---- whole models: one optimizer step ---- */

/* The trainable parameters' gradients (values 0) or values (values 1), in network order,
 * copied into (to_flat 1) or out of a flat array. */
static void trainable_copy(struct adapt_net *net, float *flat, int values, int to_flat)
{
    size_t o = 0;
    for (int p = 0; p < net->nparam; p++) {
        struct adapt_param *pp = net->param[p];
        if (!pp->grad.data) continue;
        float *t = values ? pp->value.data : pp->grad.data;
        size_t bytes = pp->value.numel * sizeof(float);
        if (to_flat)
            memcpy(flat + o, t, bytes);
        else
            memcpy(t, flat + o, bytes);
        o += pp->value.numel;
    }
}

/* One step of `model` on a batch of n samples in a network (and engine) made for cap >= n:
 * the CPU's gradients, loss and count of correct rows are the contract. */
static void model_step(const char *model, int n, int cap, const char *fmt, double grad_tol)
{
    struct adapt_net *net = live_net = adapt_model_build(model, 10);
    ck_assert_msg(net, "%s", adapt_error_message());
    ck_assert_int_eq(adapt_net_finalize(net, cap), ADAPT_OK);
    adapt_net_init_params(net, 7, 2.0);
    size_t in_n = net->act_numel[0] * (size_t)n;
    float *x = malloc(in_n * sizeof *x);
    int *y = malloc((size_t)n * sizeof *y);
    ck_assert(x && y);
    fill_uniform(x, in_n, 8, -1.5, 1.5);
    fill_labels(y, n, 10, 9);
    ck_assert_msg(adapt_cuda_net_create(net, 0, &live_d) == ADAPT_OK, "%s", adapt_error_message());
    struct adapt_cuda_net *d = live_d;

    /* quantized copies of every conv/linear weight: the GPU's are bit for bit the CPU's */
    struct quant_spec spec;
    float **wq = calloc((size_t)net->nparam + 1, sizeof *wq);
    ck_assert(wq);
    if (fmt) {
        ck_assert_int_eq(quant_spec_parse(fmt, &spec), ADAPT_OK);
        spec.rounding = QUANT_ROUND_STOCHASTIC;
        for (int p = 0; p < net->nparam; p++) {
            struct adapt_param *pp = net->param[p];
            if (pp->role != ADAPT_PARAM_WEIGHT || pp->fan_in == 0) continue;
            struct quant_key key = {7, ADAPT_STREAM_QUANT + ((uint64_t)p << 8), 0};
            size_t rows = (size_t)pp->value.dim[0], cols = pp->value.numel / rows;
            wq[p] = malloc(pp->value.numel * sizeof(float));
            float *back = malloc(pp->value.numel * sizeof(float));
            ck_assert(wq[p] && back);
            ck_assert_int_eq(quant_rows(&spec, pp->value.data, wq[p], rows, cols, key, NULL, NULL),
                             ADAPT_OK);
            ck_assert_msg(adapt_cuda_net_quantize(d, p, &spec, key) == ADAPT_OK, "%s",
                          adapt_error_message());
            /* the GPU rounding of the same weights with the same key */
            ck_assert_int_eq(
                quant_cuda_rows_host(&spec, pp->value.data, back, rows, cols, key, NULL, NULL),
                ADAPT_OK);
            char label[256];
            snprintf(label, sizeof label, "%.60s %.100s quantized copy", model, pp->name);
            tu_expect_same_bits(label, back, wq[p], pp->value.numel);
            pp->use = wq[p];
            free(back);
        }
    }
    /* CPU step */
    const float *lg = adapt_net_forward(net, x, n, 1);
    float *dl = malloc((size_t)n * 10 * sizeof *dl);
    ck_assert(dl);
    int c_correct = 0;
    double c_loss = adapt_softmax_xent(lg, y, n, 10, dl, &c_correct);
    adapt_net_backward(net, dl, n);
    size_t ng = 0;
    for (int p = 0; p < net->nparam; p++)
        if (net->param[p]->grad.data) ng += net->param[p]->value.numel;
    float *cg = malloc(ng * sizeof *cg), *gg = malloc(ng * sizeof *gg);
    ck_assert(cg && gg);
    trainable_copy(net, cg, 0, 1);
    /* GPU step */
    ck_assert_int_eq(adapt_cuda_net_upload(d, x, y, n), ADAPT_OK);
    ck_assert_msg(adapt_cuda_net_step(d, 1, 1) == ADAPT_OK, "%s", adapt_error_message());
    double g_loss;
    int g_correct;
    ck_assert_int_eq(adapt_cuda_net_result(d, &g_loss, &g_correct), ADAPT_OK);
    g_loss /= n;
    ck_assert_int_eq(adapt_cuda_net_pull_grads(d), ADAPT_OK);
    trainable_copy(net, gg, 0, 1);
    ck_assert_msg(fabs(g_loss - c_loss) <= 1e-5 * fabs(c_loss), "%s %s: loss GPU %.9g CPU %.9g",
                  model, fmt ? fmt : "fp32", g_loss, c_loss);
    ck_assert_int_eq(g_correct, c_correct);
    if (getenv(
            "ADAPT_TEST_TRACE_ACTS")) { /* where the two engines part, activation by activation */
        size_t most = 0;
        for (int a = 0; a < net->nact; a++)
            if (net->act_numel[a] > most) most = net->act_numel[a];
        float *buf = malloc(most * (size_t)n * sizeof *buf);
        ck_assert(buf);
        for (int a = 1; a < net->nact; a++) {
            size_t m = net->act_numel[a] * (size_t)n;
            ck_assert_int_eq(adapt_cuda_net_read(d, 0, a, n, buf), ADAPT_OK);
            double ea = rel_norm_diff(buf, net->act[a], m);
            ck_assert_int_eq(adapt_cuda_net_read(d, 1, a, n, buf), ADAPT_OK);
            double eg = rel_norm_diff(buf, net->dact[a], m);
            const struct adapt_layer *l = net->nodes[a - 1].layer;
            printf("%s act %3d %-24s %-12s value %.3g gradient %.3g\n", model, a, l->name,
                   l->ops->kind, ea, eg);
        }
        free(buf);
    }
    double e = rel_norm_diff(gg, cg, ng), pe = 0.0;
    const char *pw = "";
    size_t o = 0;
    for (int p = 0; p < net->nparam; p++) { /* the parameter that differs most, for the message */
        struct adapt_param *pp = net->param[p];
        if (!pp->grad.data) continue;
        double q = rel_norm_diff(gg + o, cg + o, pp->value.numel);
        if (q > pe) pe = q, pw = pp->name;
        o += pp->value.numel;
    }
    ck_assert_msg(e <= grad_tol,
                  "%s %s: gradients differ by %g (relative norm, allowed %g; most in %s: %g)",
                  model, fmt ? fmt : "fp32", e, grad_tol, pw, pe);
    /* the update: the CPU's SGD from the GPU's gradients (put on the host) gives the GPU's
     * updated weights to rounding (the same operations element by element; nvcc may fuse a
     * multiply-add: 1e-6 of the parameter's largest weight allows a few ulps) */
    struct adapt_sgd opt;
    ck_assert_int_eq(adapt_sgd_init(&opt, net, 0.05, 0.9, 5e-4, 0.0, 0), ADAPT_OK);
    trainable_copy(net, gg, 0, 0);
    adapt_sgd_step(&opt, 1.0);
    ck_assert_int_eq(adapt_cuda_net_sgd(d, 0.05, 0.9, 5e-4, 0, 1.0), ADAPT_OK);
    float *cw = malloc(ng * sizeof *cw);
    ck_assert(cw);
    trainable_copy(net, cw, 1, 1);
    ck_assert_int_eq(adapt_cuda_net_pull_params(d), ADAPT_OK);
    o = 0;
    for (int p = 0; p < net->nparam; p++) {
        struct adapt_param *pp = net->param[p];
        if (!pp->grad.data) continue;
        char label[160];
        snprintf(label, sizeof label, "%.40s SGD step of %.100s", model, pp->name);
        expect_close(label, pp->value.data, cw + o, pp->value.numel, 1e-6);
        o += pp->value.numel;
    }
    /* a batch without labels: the step computes no loss, and the result says so instead of
     * repeating the step's before */
    ck_assert_int_eq(adapt_cuda_net_upload(d, x, NULL, n), ADAPT_OK);
    ck_assert_int_eq(adapt_cuda_net_step(d, 0, 0), ADAPT_OK);
    ck_assert_int_eq(adapt_cuda_net_result(d, &g_loss, &g_correct), ADAPT_OK);
    ck_assert_msg(isnan(g_loss) && g_correct == 0, "%s: no labels: loss %g, %d correct", model,
                  g_loss, g_correct);
    adapt_sgd_free(&opt);
    for (int p = 0; p < net->nparam; p++) free(wq[p]);
    free(wq), free(x), free(y), free(dl), free(cg), free(gg), free(cw);
    release_live(); /* the engine, then the network */
}

/* One model step per loop iteration. LeNet-5's tolerance: cuDNN's transform algorithms (see
 * tol_conv), chosen by timing, add up to 2e-5 per convolution in each direction: measured
 * 1.2e-4 for LeNet-5 with them, under 1e-4 without. The last cases run batches of n_max - 3
 * (the last batch of an epoch): cuDNN's descriptors, set up and timed at n_max, are redone for
 * n, and batch norm's statistics count n samples. */
static const struct {
    const char *model;
    int n, cap;
    const char *fmt;
    int smooth; /* 1: LeNet-5's tolerance (above), 0: 2e-2 (networks with kinks) */
} models[] = {
    {"lenet5", 16, 16, NULL, 1},
    {"lenet5", 16, 16, "fixed(8,4)", 1},
    {"alexnet_cifar", 16, 16, NULL, 0},
    {"alexnet_cifar", 16, 16, "fixed(12,9)", 0},
    {"resnet20", 32, 32, NULL, 0},
    {"resnet20", 8, 8, "fixed(10,7)", 0},
    {"mobilenetv2", 16, 16, NULL, 0},
    {"lenet5", 13, 16, NULL, 1},
    {"resnet20", 29, 32, NULL, 0},
    {"resnet20", 5, 8, "fixed(10,7)", 0},
};
enum { NMODELS = sizeof models / sizeof models[0] };

START_TEST(test_model)
{
    double smooth = adapt_cuda_net_built() == 2 ? 5e-4 : 1e-4;
    printf("test_net_cuda: model case %d: %s %s n %d of %d\n", _i, models[_i].model,
           models[_i].fmt ? models[_i].fmt : "fp32", models[_i].n, models[_i].cap);
    fflush(stdout);
    model_step(models[_i].model, models[_i].n, models[_i].cap, models[_i].fmt,
               models[_i].smooth ? smooth : 2e-2);
}
END_TEST

/* ---- the policies' reductions (adapt_cuda_net_sums, _normalize_acc, _gd, _gather, _range,
 * _hist) against the CPU's arithmetic ----
 *
 * Tensors at odd offsets (the kernels' scalar walk) and at 16-byte aligned ones (their float4
 * walk with a tail), with g and acc aligned differently, entries of zero length first, in the
 * middle and last, an all-zero tensor (no normalisation) and an entry whose acc is NULL. The
 * whole device arrays are compared, so a write outside an entry shows too.
 *
 * Sums: the device sums in double, each thread a few terms, then a tree over the block's 256
 * threads and one atomicAdd per block (at most 1024): for terms of one sign (x^2, |x|,
 * (sum over slices)^2) the relative error is at most (terms per thread + 8 + blocks) 2^-53,
 * under 2.5e-13 here; the reference is summed in long double, so 1e-12 relative holds.
 * Normalisation: the scale is (float)(1 / sqrt(s)) of that double sum (the CPU's adapt.c
 * arithmetic), then float products and sums, so the tensors are bit for bit the CPU's; only
 * where 1 / sqrt(s) lies within 1e-12 of a float rounding boundary may the two engines' sums
 * round it to neighbouring floats, and then the other neighbour's result is accepted too.
 * Range, gather and histogram counts: exact (quant_range_compute, indexing, quant_hist with
 * QUANT_HIST_CLAMP, the CPU push-down's statistics in src/policy/adapt.c). */

enum { NT = 7, RED_TOT = 306400 };
static const size_t red_off[NT] = {1, 1024, 5200, 6001, 6100, 306113, 306200};
static const size_t red_n[NT] = {1001, 4099, 0, 3, 300007, 17, 0};
/* acc offsets in the second array (-1: no acc for that entry) */
static const long red_acc[NT] = {4, 1027, 5200, -1, 6100, 306114, 306200};

static void expect_rel(const char *what, int i, double gpu, long double ref, double rtol)
{
    double r = (double)ref;
    ck_assert_msg(fabs(gpu - r) <= rtol * fabs(r) && !isnan(gpu),
                  "%s of entry %d: GPU %.17g reference %.17g (allowed %g relative)", what, i, gpu,
                  r, rtol);
}

/* The CPU's normalisation (and accumulation into acc when acc is not NULL) of entry i with
 * scale inv, into exp and expacc. */
static void normalize_ref(const float *x, const float *acc, float *exp, float *expacc, size_t n,
                          float inv)
{
    for (size_t j = 0; j < n; j++) {
        volatile float g = x[j] * inv; /* rounded before the sum, as the kernels (no FMA) */
        exp[j] = g;
        if (acc) expacc[j] = acc[j] + g;
    }
}

START_TEST(test_reductions)
{
    const int in[3] = {3, 10, 10};
    struct one o = one_layer(adapt_relu_create("act", in), in, 0, 2);
    ck_assert_msg(adapt_cuda_net_create(o.net, 0, &live_d) == ADAPT_OK, "%s",
                  adapt_error_message());
    struct adapt_cuda_net *d = live_d;
    float *A = NULL, *B = NULL;
    ck_assert_int_eq(adapt_cuda_net_alloc(d, RED_TOT, &A), ADAPT_OK);
    ck_assert_int_eq(adapt_cuda_net_alloc(d, RED_TOT, &B), ADAPT_OK);
    float *hx = malloc(RED_TOT * sizeof *hx), *hacc = malloc(RED_TOT * sizeof *hacc);
    float *ga = malloc(RED_TOT * sizeof *ga), *gb = malloc(RED_TOT * sizeof *gb);
    float *exp = malloc(RED_TOT * sizeof *exp), *expacc = malloc(RED_TOT * sizeof *expacc);
    ck_assert(hx && hacc && ga && gb && exp && expacc);
    fill_uniform(hx, RED_TOT, 61, -2.0, 2.0);
    for (size_t j = 0; j < red_n[5]; j++) hx[red_off[5] + j] = 0.0f; /* the all-zero entry */
    fill_uniform(hacc, RED_TOT, 62, -1.0, 1.0);
    ck_assert_int_eq(adapt_cuda_net_put(d, A, hx, RED_TOT), ADAPT_OK);
    ck_assert_int_eq(adapt_cuda_net_put(d, B, hacc, RED_TOT), ADAPT_OK);
    float *xs[NT], *accs[NT];
    long double sq[NT], ab[NT];
    for (int i = 0; i < NT; i++) {
        xs[i] = A + red_off[i];
        accs[i] = red_acc[i] < 0 ? NULL : B + red_acc[i];
        sq[i] = ab[i] = 0.0L;
        for (size_t j = 0; j < red_n[i]; j++) {
            long double v = hx[red_off[i] + j];
            sq[i] += v * v;
            ab[i] += fabsl(v);
        }
    }
    /* sums of squares and of absolute values */
    double out[2 * NT];
    ck_assert_int_eq(adapt_cuda_net_sums(d, xs, red_n, NT, out), ADAPT_OK);
    for (int i = 0; i < NT; i++) {
        expect_rel("sum of squares", i, out[2 * i], sq[i], 1e-12);
        expect_rel("sum of |x|", i, out[2 * i + 1], ab[i], 1e-12);
    }
    /* normalisation with accumulation, then without (acc NULL): the same scales; the scale
     * each entry took (one of the two floats around the reference) is found from the first
     * call's result and must be the same in the second */
    float inv[NT];
    ck_assert_int_eq(adapt_cuda_net_normalize_acc(d, xs, accs, red_n, NT), ADAPT_OK);
    ck_assert_int_eq(adapt_cuda_net_get(d, A, ga, RED_TOT), ADAPT_OK);
    ck_assert_int_eq(adapt_cuda_net_get(d, B, gb, RED_TOT), ADAPT_OK);
    memcpy(exp, hx, RED_TOT * sizeof *exp);
    memcpy(expacc, hacc, RED_TOT * sizeof *expacc);
    for (int i = 0; i < NT; i++) {
        size_t n = red_n[i];
        const float *acc = red_acc[i] < 0 ? NULL : hacc + red_acc[i];
        float *ea = red_acc[i] < 0 ? NULL : expacc + red_acc[i];
        if (sq[i] > 0.0L) {
            double s = (double)sq[i];
            float c0 = (float)(1.0 / sqrt(s)), c1 = (float)(1.0 / sqrt(s * (1.0 - 1e-12))),
                  c2 = (float)(1.0 / sqrt(s * (1.0 + 1e-12)));
            inv[i] = c0;
            normalize_ref(hx + red_off[i], acc, exp + red_off[i], ea, n, c0);
            for (int t = 0; t < 2; t++) {
                float c = t ? c2 : c1;
                if (c == inv[i] || tu_first_bit_diff(ga + red_off[i], exp + red_off[i], n) < 0)
                    continue;
                inv[i] = c;
                normalize_ref(hx + red_off[i], acc, exp + red_off[i], ea, n, c);
            }
        } else {
            inv[i] = 1.0f; /* g unchanged, acc += g */
            normalize_ref(hx + red_off[i], acc, exp + red_off[i], ea, n, 1.0f);
        }
    }
    tu_expect_same_bits("normalize_acc: g", ga, exp, RED_TOT);
    tu_expect_same_bits("normalize_acc: acc", gb, expacc, RED_TOT);
    ck_assert_int_eq(adapt_cuda_net_put(d, A, hx, RED_TOT), ADAPT_OK);
    ck_assert_int_eq(adapt_cuda_net_normalize_acc(d, xs, NULL, red_n, NT), ADAPT_OK);
    ck_assert_int_eq(adapt_cuda_net_get(d, A, ga, RED_TOT), ADAPT_OK);
    float *gb2 = malloc(RED_TOT * sizeof *gb2);
    ck_assert(gb2);
    ck_assert_int_eq(adapt_cuda_net_get(d, B, gb2, RED_TOT), ADAPT_OK);
    tu_expect_same_bits("normalize_acc without acc: g", ga, exp, RED_TOT);
    tu_expect_same_bits("normalize_acc without acc: acc untouched", gb2, gb, RED_TOT);
    free(gb2);

    /* MuPPET's two sums over rings of r = 3 slices */
    ck_assert_int_eq(adapt_cuda_net_put(d, A, hx, RED_TOT), ADAPT_OK);
    {
        const int r = 3;
        const size_t goff[3] = {1, 6001, 6100}, gn[3] = {331, 0, 4099};
        float *ring[3] = {A + goff[0], A + goff[1], A + goff[2]};
        double gout[6];
        ck_assert_int_eq(adapt_cuda_net_gd(d, ring, gn, 3, r, gout), ADAPT_OK);
        for (int i = 0; i < 3; i++) {
            long double gsq = 0.0L, gss = 0.0L;
            for (size_t j = 0; j < gn[i]; j++) {
                long double sum = 0.0L;
                for (int k = 0; k < r; k++) {
                    long double v = hx[goff[i] + (size_t)k * gn[i] + j];
                    gsq += v * v;
                    sum += v;
                }
                gss += sum * sum;
            }
            expect_rel("gd: sum of g^2", i, gout[2 * i], gsq, 1e-12);
            expect_rel("gd: sum of (sum over slices)^2", i, gout[2 * i + 1], gss, 1e-12);
        }
    }

    /* the push-down's statistics on data with NaN and infinities */
    float *hr = malloc(RED_TOT * sizeof *hr);
    ck_assert(hr);
    memcpy(hr, hx, RED_TOT * sizeof *hr);
    hr[5] = NAN, hr[17] = INFINITY, hr[400] = -INFINITY;         /* in entry 0 */
    hr[2000] = NAN, hr[2001] = INFINITY, hr[2002] = -INFINITY;   /* in entry 1 */
    hr[100000] = NAN, hr[200001] = -INFINITY;                    /* in entry 4 */
    ck_assert_int_eq(adapt_cuda_net_put(d, A, hr, RED_TOT), ADAPT_OK);
    /* (offset, count): the entries above, nothing, only non-finite values, one NaN */
    static const size_t roff[7] = {1, 1024, 6100, 6001, 2000, 5, 306113};
    static const size_t rn[7] = {1001, 4099, 300007, 0, 3, 1, 17};
    uint64_t hc[2048], hg[2048];
    for (int i = 0; i < 7; i++) {
        double lo = 0.0, hi = 0.0;
        ck_assert_int_eq(adapt_cuda_net_range(d, A + roff[i], rn[i], &lo, &hi), ADAPT_OK);
        struct quant_range rg;
        quant_range_compute(hr + roff[i], rn[i], &rg);
        if (rg.min > rg.max) {
            ck_assert_msg(lo > hi, "range %d: no finite value, GPU [%g, %g]", i, lo, hi);
            continue;
        }
        ck_assert_msg(lo == (double)rg.min && hi == (double)rg.max,
                      "range %d: GPU [%a, %a] CPU [%a, %a]", i, lo, hi, (double)rg.min,
                      (double)rg.max);
        /* the histogram over that range (37 bins: counted in shared memory), over a narrower
         * one that clamps (2048 bins: global counters) and over a point (widened by 1) */
        const struct {
            double lo, hi;
            int bins;
        } h[3] = {{lo, hi, 37}, {-1.0, 0.5, 2048}, {0.25, 0.25, 5}};
        for (int t = 0; t < 3; t++) {
            ck_assert_int_eq(
                adapt_cuda_net_hist(d, A + roff[i], rn[i], h[t].lo, h[t].hi, h[t].bins, hg),
                ADAPT_OK);
            ck_assert_int_eq(quant_hist(hr + roff[i], rn[i], 1, h[t].lo, h[t].hi, h[t].bins,
                                        QUANT_HIST_CLAMP, hc),
                             ADAPT_OK);
            int bad = -1, nbad = 0;
            for (int b = 0; b < h[t].bins; b++)
                if (hg[b] != hc[b] && nbad++ == 0) bad = b;
            ck_assert_msg(nbad == 0,
                          "histogram of range case %d over [%g, %g], %d bins: %d bins differ; "
                          "first %d: CPU %llu GPU %llu",
                          i, h[t].lo, h[t].hi, h[t].bins, nbad, bad,
                          (unsigned long long)hc[bad], (unsigned long long)hg[bad]);
        }
    }
    /* an empty histogram: every count 0 */
    for (int b = 0; b < 7; b++) hg[b] = 99;
    ck_assert_int_eq(adapt_cuda_net_hist(d, A + 6001, 0, -1.0, 1.0, 7, hg), ADAPT_OK);
    for (int b = 0; b < 7; b++) ck_assert_msg(hg[b] == 0, "empty histogram: bin %d holds %llu", b,
                                              (unsigned long long)hg[b]);

    /* gathers into B: stride 3 from an odd offset, stride 1 (a copy), nothing */
    ck_assert_int_eq(adapt_cuda_net_put(d, B, hacc, RED_TOT), ADAPT_OK);
    ck_assert_int_eq(adapt_cuda_net_gather(d, A + 1, 3, B + 5, 333), ADAPT_OK);
    ck_assert_int_eq(adapt_cuda_net_gather(d, A + 1024, 1, B + 1001, 7), ADAPT_OK);
    ck_assert_int_eq(adapt_cuda_net_gather(d, A + 1, 5, B + 2000, 0), ADAPT_OK);
    ck_assert_int_eq(adapt_cuda_net_get(d, B, gb, RED_TOT), ADAPT_OK);
    memcpy(expacc, hacc, RED_TOT * sizeof *expacc);
    for (size_t j = 0; j < 333; j++) expacc[5 + j] = hr[1 + 3 * j];
    for (size_t j = 0; j < 7; j++) expacc[1001 + j] = hr[1024 + j];
    tu_expect_same_bits("gather", gb, expacc, RED_TOT);

    free(hr), free(hx), free(hacc), free(ga), free(gb), free(exp), free(expacc);
    release_live(); /* A and B go with the engine */
}
END_TEST

/* ---- pipelined steps: the next batch uploaded while the step before runs ----
 *
 * Six float32 steps of LeNet-5 (upload, step, adapt_cuda_net_sgd: the update the fp32 policy
 * makes on the device) run three times on one engine, from the same weights and fresh SGD
 * state (adapt_cuda_net_push_params, adapt_cuda_net_push_sgd with steps 0): sequentially (each
 * step's result awaited before the next upload), pipelined as adapt-bench and the trainer
 * queue them (upload of batch s + 1 right after step s and its update are queued, from one
 * host buffer that is overwritten, and at the end NaN-filled, as soon as upload returns; no
 * wait but upload's own for its staging slot), and sequentially again. One engine, so one
 * choice of cuDNN algorithms (cudnnFind*, at creation) and one cuBLAS handle and stream: the
 * arithmetic is the same, and the final weights, loss and count of correct rows must be bit
 * for bit the sequential run's. If the two sequential runs already differ (cuDNN picked a
 * non-deterministic algorithm: those add with atomics), the pipelined run is held to 1e-5 of
 * the weights' norm instead, the size of atomics' reordering over six steps; a wrong batch or
 * a batch overwritten while it is read moves the weights by far more. */
START_TEST(test_pipeline)
{
    enum { STEPS = 6, RUNS = 3 };
    const int n = 16;
    struct adapt_net *net = live_net = adapt_model_build("lenet5", 10);
    ck_assert_msg(net, "%s", adapt_error_message());
    ck_assert_int_eq(adapt_net_finalize(net, n), ADAPT_OK);
    adapt_net_init_params(net, 7, 2.0);
    size_t nall = 0, ng = 0;
    for (int p = 0; p < net->nparam; p++) {
        nall += net->param[p]->value.numel;
        if (net->param[p]->grad.data) ng += net->param[p]->value.numel;
    }
    float *init = malloc(nall * sizeof *init);
    ck_assert(init);
    for (int p = 0, o = 0; p < net->nparam; p++) {
        memcpy(init + o, net->param[p]->value.data, net->param[p]->value.numel * sizeof(float));
        o += (int)net->param[p]->value.numel;
    }
    size_t in_n = net->act_numel[0] * (size_t)n;
    float *x[STEPS], *xs = malloc(in_n * sizeof *xs);
    int *y[STEPS], *ys = malloc((size_t)n * sizeof *ys);
    ck_assert(xs && ys);
    for (int s = 0; s < STEPS; s++) {
        x[s] = malloc(in_n * sizeof *x[s]);
        y[s] = malloc((size_t)n * sizeof *y[s]);
        ck_assert(x[s] && y[s]);
        fill_uniform(x[s], in_n, 100 + (uint64_t)s, -1.5, 1.5);
        fill_labels(y[s], n, 10, 200 + (uint64_t)s);
    }
    ck_assert_msg(adapt_cuda_net_create(net, 0, &live_d) == ADAPT_OK, "%s", adapt_error_message());
    struct adapt_cuda_net *d = live_d;
    float *w[RUNS];
    double loss[RUNS];
    int correct[RUNS];
    for (int run = 0; run < RUNS; run++) {
        for (int p = 0, o = 0; p < net->nparam; p++) {
            memcpy(net->param[p]->value.data, init + o,
                   net->param[p]->value.numel * sizeof(float));
            o += (int)net->param[p]->value.numel;
        }
        ck_assert_int_eq(adapt_cuda_net_push_params(d), ADAPT_OK);
        struct adapt_sgd opt; /* steps 0: the first update starts the momentum buffers */
        ck_assert_int_eq(adapt_sgd_init(&opt, net, 0.05, 0.9, 5e-4, 0.0, 0), ADAPT_OK);
        ck_assert_int_eq(adapt_cuda_net_push_sgd(d, &opt), ADAPT_OK);
        adapt_sgd_free(&opt);
        if (run == 1) { /* pipelined */
            memcpy(xs, x[0], in_n * sizeof *xs);
            memcpy(ys, y[0], (size_t)n * sizeof *ys);
            ck_assert_int_eq(adapt_cuda_net_upload(d, xs, ys, n), ADAPT_OK);
            for (int s = 0; s < STEPS; s++) {
                ck_assert_msg(adapt_cuda_net_step(d, 1, 1) == ADAPT_OK, "%s",
                              adapt_error_message());
                ck_assert_int_eq(adapt_cuda_net_sgd(d, 0.05, 0.9, 5e-4, 0, 1.0), ADAPT_OK);
                if (s + 1 < STEPS) {
                    memcpy(xs, x[s + 1], in_n * sizeof *xs);
                    memcpy(ys, y[s + 1], (size_t)n * sizeof *ys);
                    ck_assert_int_eq(adapt_cuda_net_upload(d, xs, ys, n), ADAPT_OK);
                }
                /* the caller's arrays are free once upload returns */
                for (size_t i = 0; i < in_n; i++) xs[i] = NAN;
                for (int i = 0; i < n; i++) ys[i] = -1;
            }
            ck_assert_int_eq(adapt_cuda_net_result(d, &loss[run], &correct[run]), ADAPT_OK);
        } else {
            for (int s = 0; s < STEPS; s++) {
                ck_assert_int_eq(adapt_cuda_net_upload(d, x[s], y[s], n), ADAPT_OK);
                ck_assert_msg(adapt_cuda_net_step(d, 1, 1) == ADAPT_OK, "%s",
                              adapt_error_message());
                ck_assert_int_eq(adapt_cuda_net_sgd(d, 0.05, 0.9, 5e-4, 0, 1.0), ADAPT_OK);
                ck_assert_int_eq(adapt_cuda_net_result(d, &loss[run], &correct[run]), ADAPT_OK);
            }
        }
        ck_assert_int_eq(adapt_cuda_net_pull_params(d), ADAPT_OK);
        w[run] = malloc(ng * sizeof *w[run]);
        ck_assert(w[run]);
        trainable_copy(net, w[run], 1, 1);
        ck_assert_msg(isfinite(loss[run]), "run %d: loss %g", run, loss[run]);
    }
    int deterministic = tu_first_bit_diff(w[2], w[0], ng) < 0 && loss[2] == loss[0];
    if (deterministic) {
        tu_expect_same_bits("pipelined steps: weights", w[1], w[0], ng);
        ck_assert_msg(loss[1] == loss[0] && correct[1] == correct[0],
                      "pipelined steps: last loss %a (%d correct), sequential %a (%d correct)",
                      loss[1], correct[1], loss[0], correct[0]);
    } else {
        double e = rel_norm_diff(w[1], w[0], ng), e2 = rel_norm_diff(w[2], w[0], ng);
        printf("test_net_cuda: two sequential runs differ by %g (relative norm): a "
               "non-deterministic cuDNN algorithm; pipelined run differs by %g\n",
               e2, e);
        ck_assert_msg(e <= 1e-5 && fabs(loss[1] - loss[0]) <= 1e-5 * fabs(loss[0]),
                      "pipelined steps: weights differ by %g (relative norm), loss %.9g vs %.9g",
                      e, loss[1], loss[0]);
    }
    for (int r = 0; r < RUNS; r++) free(w[r]);
    for (int s = 0; s < STEPS; s++) free(x[s]), free(y[s]);
    free(xs), free(ys), free(init);
    release_live();
}
END_TEST

int main(void)
{
    char desc[256];
    if (!tu_cuda_device("test_net_cuda", adapt_cuda_net_built(), desc, sizeof desc)) return 77;
    printf("test_net_cuda: convolutions through %s\n",
           adapt_cuda_net_built() == 2 ? "cuDNN" : "im2col and cuBLAS");
    Suite *su = suite_create("net_cuda");
    /* one case per loop iteration; each test case's checked teardown (after the watchdog's)
     * frees the engine and the network a failed iteration left */
    TCase *tp = tcase_create("products");
    tu_watchdog(tp, "products", 60);
    tcase_add_checked_fixture(tp, NULL, release_live);
    tcase_add_loop_test(tp, test_layer_product, 0, NPRODUCT);
    suite_add_tcase(su, tp);
    TCase *te = tcase_create("elementwise");
    tu_watchdog(te, "elementwise", 60);
    tcase_add_checked_fixture(te, NULL, release_live);
    tcase_add_loop_test(te, test_layer_elementwise, 0, NELEMENTWISE);
    suite_add_tcase(su, te);
    TCase *tm = tcase_create("models");
    tu_watchdog(tm, "models", 200);
    tcase_add_checked_fixture(tm, NULL, release_live);
    tcase_add_loop_test(tm, test_model, 0, NMODELS);
    suite_add_tcase(su, tm);
    TCase *tr = tcase_create("reductions");
    tu_watchdog(tr, "reductions", 60);
    tcase_add_checked_fixture(tr, NULL, release_live);
    tcase_add_test(tr, test_reductions);
    suite_add_tcase(su, tr);
    TCase *tq = tcase_create("pipeline");
    tu_watchdog(tq, "pipeline", 120);
    tcase_add_checked_fixture(tq, NULL, release_live);
    tcase_add_test(tq, test_pipeline);
    suite_add_tcase(su, tq);
    return tu_run_suite(su, CK_NOFORK);
}
