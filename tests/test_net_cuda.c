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

/* ---- one layer on the same input: x -> dropout(p = 0) (exact copy, so the layer's input
 * gets a gradient) -> LAYER -> flatten -> softmax cross-entropy over all outputs ---- */

struct one {
    struct adapt_net *net;
    int a_in, a_out; /* the layer's input and output activations */
};

/* extra: the layer's inputs beyond the first (0 to 2): tanh and sigmoid of it */
static struct one one_layer(struct adapt_layer *layer, const int in[3], int extra, int n)
{
    struct one o = {NULL, 0, 0};
    o.net = adapt_net_alloc("one", in, 2);
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
    ck_assert_int_eq(adapt_net_finalize(o.net, n), ADAPT_OK);
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

/* Runs the CPU and the GPU step and compares the layer's output (k_fwd terms per output),
 * its input gradient (k_bwd) and each parameter gradient (k_par[i]). */
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

    struct adapt_cuda_net *d = NULL;
    ck_assert_msg(adapt_cuda_net_create(net, 0, &d) == ADAPT_OK, "%s: %s", what,
                  adapt_error_message());
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
    adapt_cuda_net_free(d);
    free(cg), free(x), free(y), free(dl), free(cy), free(cdx), free(gy), free(gdx);
    adapt_net_free(net);
}

/* convolutions: plain, strided with padding, large kernel, depthwise, grouped, dilated */
static const struct {
    int cin, h, cout, k, stride, pad, groups, dil;
} cs[] = {{3, 13, 8, 3, 1, 1, 1, 1}, {4, 17, 6, 5, 2, 2, 1, 1}, {3, 32, 4, 11, 4, 5, 1, 1},
          {8, 9, 8, 3, 1, 1, 8, 1},  {6, 11, 4, 3, 2, 1, 2, 1}, {4, 12, 4, 3, 1, 2, 1, 2}};

static void conv_cases(enum path path)
{
    const int n = 6;
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        int in[3] = {cs[i].cin, cs[i].h, cs[i].h};
        struct adapt_layer *l =
            cs[i].groups == 1 && cs[i].dil == 1
                ? adapt_conv2d_create("conv", in, cs[i].cout, cs[i].k, cs[i].stride, cs[i].pad, 1)
                : adapt_gconv2d_create("conv", in, cs[i].cout, cs[i].k, cs[i].stride, cs[i].pad,
                                       cs[i].groups, cs[i].dil, 1);
        ck_assert_msg(l, "%s", adapt_error_message());
        struct one o = one_layer(l, in, 0, n);
        const int *od = adapt_net_act_dim(o.net, o.a_out);
        double kk = (double)cs[i].k * cs[i].k, cig = (double)cs[i].cin / cs[i].groups;
        double cog = (double)cs[i].cout / cs[i].groups, P = (double)n * od[1] * od[2];
        /* forward: cin/g k k terms; input gradient: cout/g k k; weight gradient: n Ho Wo;
         * bias gradient: n Ho Wo */
        double kp[2] = {P, P};
        char what[64];
        snprintf(what, sizeof what, "conv case %zu%s", i,
                 path == HALF16     ? " fp16"
                 : path == HALFBF16 ? " bf16"
                                    : "");
        check_layer(what, o, n, cig * kk, cog * kk, kp, path);
    }
}

static void linear_case(enum path path)
{
    const int n = 9, in[3] = {5, 3, 3};
    struct one o = one_layer(adapt_linear_create("fc", in, 17, 1), in, 0, n);
    /* forward: 45 terms; input gradient: 17; weight and bias gradients: n */
    double kp[2] = {n, n};
    check_layer(path == HALF16     ? "linear fp16"
                : path == HALFBF16 ? "linear bf16"
                                   : "linear",
                o, n, 45, 17, kp, path);
}

START_TEST(test_layer_conv)
{
    conv_cases(CONV);
}
END_TEST

START_TEST(test_layer_linear)
{
    linear_case(PLAIN);
}
END_TEST

/* conv and linear on tensor cores (AMP): both half formats */
START_TEST(test_layer_half)
{
    for (enum path p = HALF16; p <= HALFBF16; p++) {
        conv_cases(p);
        linear_case(p);
    }
}
END_TEST

START_TEST(test_layer_elementwise)
{
    const int n = 4, in[3] = {3, 10, 10};
    const char *names[] = {"relu", "relu6", "tanh", "sigmoid", "hardswish", "gelu", "gelu tanh"};
    for (int a = 0; a < 7; a++) {
        struct adapt_layer *l = a == 0   ? adapt_relu_create("act", in)
                                : a == 1 ? adapt_relu6_create("act", in)
                                : a == 2 ? adapt_tanh_create("act", in)
                                : a == 3 ? adapt_sigmoid_create("act", in)
                                : a == 4 ? adapt_hardswish_create("act", in)
                                         : adapt_gelu_create("act", in, a == 6);
        /* one term each way (a few ulps for tanh, sigmoid and gelu: K = 4; the same gelu
         * source on both, contracted differently) */
        check_layer(names[a], one_layer(l, in, 0, n), n, 4, 4, NULL, 0);
    }
    int in6[3] = {6, 10, 10};
    check_layer("maxpool 2/2", one_layer(adapt_maxpool2d_create("p", in, 2, 2), in, 0, n), n, 1, 1,
                NULL, 0);
    check_layer("maxpool 3/2", one_layer(adapt_maxpool2d_create("p", in, 3, 2), in, 0, n), n, 1, 9,
                NULL, 0);
    check_layer("avgpool 2/2", one_layer(adapt_avgpool2d_create("p", in, 2, 2), in, 0, n), n, 4, 1,
                NULL, 0);
    check_layer("global avgpool", one_layer(adapt_avgpool2d_create("p", in, 0, 0), in, 0, n), n,
                100, 1, NULL, 0);
    /* padded pools: windows clipped to the input; an input lies in at most 2 x 2 windows */
    check_layer("maxpool 3/2 pad 1",
                one_layer(adapt_maxpool2d_pad_create("p", in, 3, 2, 1), in, 0, n), n, 1, 4, NULL,
                0);
    check_layer("maxpool 2/1 pad 1",
                one_layer(adapt_maxpool2d_pad_create("p", in, 2, 1, 1), in, 0, n), n, 1, 4, NULL,
                0);
    for (int cip = 0; cip < 2; cip++)
        check_layer(cip ? "avgpool 3/2 pad 1" : "avgpool 3/2 pad 1 count_include_pad 0",
                    one_layer(adapt_avgpool2d_pad_create("p", in, 3, 2, 1, cip), in, 0, n), n, 9,
                    4, NULL, 0);
    check_layer("add", one_layer(adapt_add_create("add", in), in, 1, n), n, 1, 2, NULL, 0);
    check_layer("concat", one_layer(adapt_concat_create("cat", in, in), in, 1, n), n, 1, 1, NULL,
                0);
    const int in3[3][3] = {{in[0], in[1], in[2]}, {in[0], in[1], in[2]}, {in[0], in[1], in[2]}};
    /* the first input's gradient sums three terms (through the copy, tanh and sigmoid) */
    check_layer("concat of three", one_layer(adapt_concat_n_create("cat", 3, in3), in, 2, n), n,
                1, 3, NULL, 0);
    check_layer("dropout 0.3", one_layer(adapt_dropout_create("drop", in6, 0.3f), in6, 0, n), n, 1,
                1, NULL, 0);
    /* batch norm: statistics over n H W = 400 terms, gradients the same */
    double kp[2] = {400, 400};
    check_layer("batchnorm", one_layer(adapt_batchnorm2d_create("bn", in, 1e-5f, 0.1f), in, 0, n),
                n, 400, 400, kp, 0);
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

static void model_step(const char *model, int n, const char *fmt, double grad_tol)
{
    struct adapt_net *net = adapt_model_build(model, 10);
    ck_assert_msg(net, "%s", adapt_error_message());
    ck_assert_int_eq(adapt_net_finalize(net, n), ADAPT_OK);
    adapt_net_init_params(net, 7, 2.0);
    size_t in_n = net->act_numel[0] * (size_t)n;
    float *x = malloc(in_n * sizeof *x);
    int *y = malloc((size_t)n * sizeof *y);
    ck_assert(x && y);
    fill_uniform(x, in_n, 8, -1.5, 1.5);
    fill_labels(y, n, 10, 9);
    struct adapt_cuda_net *d = NULL;
    ck_assert_msg(adapt_cuda_net_create(net, 0, &d) == ADAPT_OK, "%s", adapt_error_message());

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
            for (size_t i = 0; i < pp->value.numel; i++)
                ck_assert_msg(tu_same_bits(back[i], wq[p][i]), "%s %s[%zu]: CPU %a GPU %a", model,
                              pp->name, i, wq[p][i], back[i]);
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
    adapt_cuda_net_free(d);
    adapt_net_free(net);
}

START_TEST(test_model_lenet5)
{
    /* cuDNN's transform algorithms (see tol_conv), chosen by timing, add up to 2e-5 per
     * convolution in each direction: measured 1.2e-4 for LeNet-5 with them, under 1e-4
     * without */
    double smooth = adapt_cuda_net_built() == 2 ? 5e-4 : 1e-4;
    model_step("lenet5", 16, NULL, smooth);
    model_step("lenet5", 16, "fixed(8,4)", smooth);
}
END_TEST

START_TEST(test_model_alexnet)
{
    model_step("alexnet_cifar", 16, NULL, 2e-2);
    model_step("alexnet_cifar", 16, "fixed(12,9)", 2e-2);
}
END_TEST

START_TEST(test_model_resnet20)
{
    model_step("resnet20", 32, NULL, 2e-2);
    model_step("resnet20", 8, "fixed(10,7)", 2e-2);
}
END_TEST

START_TEST(test_model_mobilenet)
{
    model_step("mobilenetv2", 16, NULL, 2e-2);
}
END_TEST

int main(void)
{
    char desc[256];
    if (!tu_cuda_device("test_net_cuda", adapt_cuda_net_built(), desc, sizeof desc)) return 77;
    printf("test_net_cuda: convolutions through %s\n",
           adapt_cuda_net_built() == 2 ? "cuDNN" : "im2col and cuBLAS");
    Suite *su = suite_create("net_cuda");
    TCase *tl = tcase_create("layers");
    tu_watchdog(tl, "layers", 120);
    tcase_add_test(tl, test_layer_conv);
    tcase_add_test(tl, test_layer_linear);
    tcase_add_test(tl, test_layer_half);
    tcase_add_test(tl, test_layer_elementwise);
    suite_add_tcase(su, tl);
    TCase *tm = tcase_create("models");
    tu_watchdog(tm, "models", 300);
    tcase_add_test(tm, test_model_lenet5);
    tcase_add_test(tm, test_model_alexnet);
    tcase_add_test(tm, test_model_resnet20);
    tcase_add_test(tm, test_model_mobilenet);
    suite_add_tcase(su, tm);
    return tu_run_suite(su, CK_NOFORK);
}
