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
 *
 * This file: the tolerances and the one-layer network of tests/test_net_cuda.h with the check of
 * a layer on it, and main. The layer cases are in test_net_cuda_layers.c, whole models and
 * pipelined steps in test_net_cuda_models.c, the policies' reductions in
 * test_net_cuda_reductions.c.
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
#include "tests/test_net_cuda.h"
#include "tests/testutil.h"
#include "tests/testutil_cuda.h"

/* ---- fills, comparisons, tolerances, the case's engine and network (tests/test_net_cuda.h) */

void fill_uniform(float *x, size_t n, uint64_t seed, double lo, double hi)
{
    struct adapt_rng r;
    adapt_rng_init(&r, seed, 11);
    for (size_t i = 0; i < n; i++) x[i] = (float)(lo + (hi - lo) * adapt_rng_uniform(&r));
}

void fill_labels(int *y, int n, int classes, uint64_t seed)
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

void expect_close(const char *what, const float *gpu, const float *cpu, size_t n,
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

double rel_norm_diff(const float *a, const float *b, size_t n)
{
    double d = 0.0, s = 0.0;
    for (size_t i = 0; i < n; i++) {
        d += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        s += (double)b[i] * b[i];
    }
    return s > 0.0 ? sqrt(d / s) : sqrt(d);
}

double tol_sum(double k)
{
    return fmax(4.0 * k * U, 4.0 * U);
}
double tol_conv(double k)
{
    return adapt_cuda_net_built() == 2 ? fmax(tol_sum(k), 2e-5) : tol_sum(k);
}

struct adapt_cuda_net *live_d;
struct adapt_net *live_net;

void release_live(void)
{
    if (live_d) adapt_cuda_net_free(live_d);
    if (live_net) adapt_net_free(live_net);
    live_d = NULL;
    live_net = NULL;
}

/* ---- one layer on the same input: x -> dropout(p = 0) (exact copy, so the layer's input
 * gets a gradient) -> LAYER -> flatten -> softmax cross-entropy over all outputs ---- */

struct one one_layer(struct adapt_layer *layer, const int in[3], int extra, int cap)
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

void check_layer(const char *what, struct one o, int n, double k_fwd, double k_bwd,
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
    TCase *te = tcase_create("elementwise");
    tu_watchdog(te, "elementwise", 60);
    tcase_add_checked_fixture(te, NULL, release_live);
    test_net_cuda_add_layers(tp, te);
    suite_add_tcase(su, tp);
    suite_add_tcase(su, te);
    TCase *tm = tcase_create("models");
    tu_watchdog(tm, "models", 200);
    tcase_add_checked_fixture(tm, NULL, release_live);
    TCase *tr = tcase_create("reductions");
    tu_watchdog(tr, "reductions", 60);
    tcase_add_checked_fixture(tr, NULL, release_live);
    TCase *tq = tcase_create("pipeline");
    tu_watchdog(tq, "pipeline", 120);
    tcase_add_checked_fixture(tq, NULL, release_live);
    test_net_cuda_add_models(tm, tq);
    test_net_cuda_add_reductions(tr);
    suite_add_tcase(su, tm);
    suite_add_tcase(su, tr);
    suite_add_tcase(su, tq);
    return tu_run_suite(su, CK_NOFORK);
}
