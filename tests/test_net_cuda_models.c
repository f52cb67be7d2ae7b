/* tests/test_net_cuda_models.c: whole models on the GPU against the CPU, part of
 * tests/test_net_cuda: one optimizer step of each built-in model (float32 and fixed point, full
 * and smaller batches), and pipelined steps (the next batch uploaded while a step runs) against
 * sequential ones. */
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

void test_net_cuda_add_models(TCase *models, TCase *pipeline)
{
    tcase_add_loop_test(models, test_model, 0, NMODELS);
    tcase_add_test(pipeline, test_pipeline);
}
