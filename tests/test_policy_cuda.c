/* tests/test_policy_cuda.c: the precision policies on the GPU engine (adapt_policy_use_cuda)
 * against the same policies on the CPU engine.
 *
 * Exits 77 (skip) when the build has no CUDA or the machine no GPU; runs without fork (CUDA
 * does not survive fork()).
 *
 * Two copies of a model start from the same weights; one trains on the CPU, the other on the
 * GPU, on the same batches, with the same policy and seed, for a few optimizer steps.
 *
 * What must be equal, bit for bit: the weight copies the units compute with before the first
 * update (the same masters rounded with the same Philox counters: src/quant/cuda/quant.cu is
 * the CPU rounding), and the precision decisions (every unit's <WL, FL> after every step).
 * AdaPT's push-down reads a histogram of the weights (equal while the weights are; after an
 * update they differ by rounding, far from any bin edge in these runs) and its push-up reads
 * the gradient diversity, a ratio of norms that agrees to about 1e-6; the thresholds it is
 * compared with are not that close in these runs, so the decisions agree. Where a statistic
 * sits on a threshold the message prints both engines' values.
 *
 * MuPPET: every step here ends an epoch, so the gradient copies are taken and, every r epochs,
 * the gradient diversity GD is computed (on the device from the copies there); GD is a ratio of
 * sums of squares of gradients that differ by the engines' summation order and a few
 * stochastic-rounding flips, held to 1e-2 relative, and the level, learning rate and stop
 * decisions must be equal. AMP: the overflow decision (skip or not) and the loss scale after
 * every step must be equal (an overflow is an inf in fp16/bf16, not a near tie). Its conv and
 * linear layers multiply on tensor cores on the GPU (adapt_cuda_net_half) with operands in
 * the half format, which both engines round to it, and float32 accumulation: their values
 * differ from the CPU's by the order of the sums, as in float32, and get the same tolerances.
 *
 * What agrees to a tolerance: the loss and the updated weights. The engines sum in different
 * orders (test_net_cuda.c explains the float32 tolerances), and a rounding to a fixed-point
 * grid turns a difference of an ulp into one of a grid step where a value sits near a rounding
 * boundary: with stochastic rounding the boundary is the random threshold, so about one value
 * in (grid step / ulp) flips, each by one grid step. The loss is held to 1e-3 relative and the
 * weights, as a relative norm of the difference, to 1e-2 after three steps: a semantic error
 * (a missing rounding, an unscaled gradient, a skipped update) moves every element by far
 * more.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/rng.h"
#include "src/config/config.h"
#include "src/cuda/device.h"
#include "src/net/net.h"
#include "src/net/net_cuda.h"
#include "src/net/optim.h"
#include "src/policy/policy.h"
#include "tests/testutil.h"
#include "tests/testutil_cuda.h"

struct side {
    struct adapt_net *net;
    struct adapt_policy *pol;
    struct adapt_sgd opt;
};

static void side_init(struct side *s, const char *model, int n, const struct adapt_config *cfg)
{
    s->net = adapt_model_build(model, 10);
    ck_assert_msg(s->net, "%s", adapt_error_message());
    ck_assert_int_eq(adapt_net_finalize(s->net, n), ADAPT_OK);
    adapt_net_init_params(s->net, 5, 2.0);
    ck_assert_int_eq(adapt_sgd_init(&s->opt, s->net, 0.05, 0.9, 5e-4, 0.0, 0), ADAPT_OK);
    ck_assert_msg(adapt_policy_alloc(&s->pol, cfg, s->net, 3) == ADAPT_OK, "%s",
                  adapt_error_message());
    if (s->pol->prec) adapt_precision_refresh_weights(s->pol->prec, 0);
}

static void side_free(struct side *s)
{
    adapt_policy_free(s->pol);
    adapt_sgd_free(&s->opt);
    adapt_net_free(s->net);
}

static double rel_norm_diff(const float *a, const float *b, size_t n)
{
    double d = 0.0, r = 0.0;
    for (size_t i = 0; i < n; i++) {
        double e = (double)a[i] - (double)b[i];
        d += e * e;
        r += (double)b[i] * b[i];
    }
    return r > 0.0 ? sqrt(d / r) : sqrt(d);
}

static void fill(float *x, size_t m, int *y, int n, uint64_t seed)
{
    struct adapt_rng r;
    adapt_rng_init(&r, seed, 21);
    for (size_t i = 0; i < m; i++) x[i] = (float)(3.0 * adapt_rng_uniform(&r) - 1.5);
    for (int i = 0; i < n; i++) y[i] = (int)adapt_rng_below(&r, 10);
}

/* `steps` optimizer steps of `model` (batch n) under the settings `sets` on both engines. */
static void policy_steps(const char *model, int n, const char *const *sets, int steps)
{
    static struct adapt_config cfg;
    adapt_config_init(&cfg);
    for (int i = 0; sets[i]; i++)
        ck_assert_msg(adapt_config_set(&cfg, sets[i]) == ADAPT_OK, "%s: %s", sets[i],
                      adapt_error_message());
    struct side c, g;
    side_init(&c, model, n, &cfg);
    side_init(&g, model, n, &cfg);
    struct adapt_cuda_net *d = NULL;
    ck_assert_msg(adapt_cuda_net_create(g.net, 0, &d) == ADAPT_OK, "%s", adapt_error_message());
    ck_assert_int_eq(adapt_cuda_net_push_sgd(d, &g.opt), ADAPT_OK);
    ck_assert_msg(adapt_policy_use_cuda(g.pol, d, 0) == ADAPT_OK, "%s", adapt_error_message());
    const char *what = sets[0];

    /* the copies before the first update: bit for bit */
    for (int u = 0; c.pol->prec && u < c.pol->prec->nunits; u++) {
        const struct adapt_unit_prec *cu = &c.pol->prec->u[u], *gu = &g.pol->prec->u[u];
        if (!cu->active) continue;
        size_t m = cu->layer->param[0].value.numel;
        float *back = malloc(m * sizeof *back);
        ck_assert(back);
        ck_assert_int_eq(adapt_cuda_net_get(d, gu->d_wq, back, m), ADAPT_OK);
        for (size_t i = 0; i < m; i++)
            ck_assert_msg(tu_same_bits(back[i], cu->wq[i]),
                          "%s %s unit %d weight copy [%zu]: CPU %a GPU %a", model, what, u, i,
                          cu->wq[i], back[i]);
        free(back);
    }

    size_t in = c.net->act_numel[0] * (size_t)n;
    float *x = malloc(in * sizeof *x), *dl = malloc((size_t)n * 10 * sizeof *dl);
    int *y = malloc((size_t)n * sizeof *y);
    ck_assert(x && y && dl);
    for (int s = 1; s <= steps; s++) {
        fill(x, in, y, n, (uint64_t)s);
        if (c.pol->prec) c.pol->prec->iter = g.pol->prec->iter = s - 1;
        c.net->rng_iter = g.net->rng_iter = s - 1;
        const float *lg = adapt_net_forward(c.net, x, n, 1);
        double lc = adapt_softmax_xent(lg, y, n, 10, dl, NULL);
        for (int i = 0; i < n * 10; i++) dl[i] *= (float)c.pol->loss_scale; /* as the trainer */
        adapt_net_backward(c.net, dl, n);
        ck_assert_int_eq(adapt_policy_step(c.pol, &c.opt, s, lc, 1, 1, NULL), ADAPT_OK);
        double lgpu = 0.0;
        ck_assert_int_eq(adapt_cuda_net_upload(d, x, y, n), ADAPT_OK);
        ck_assert_msg(adapt_cuda_net_step(d, 1, 1) == ADAPT_OK, "%s", adapt_error_message());
        ck_assert_int_eq(adapt_cuda_net_result(d, &lgpu, NULL), ADAPT_OK);
        lgpu /= n;
        ck_assert_msg(adapt_policy_step(g.pol, &g.opt, s, lgpu, 1, 1, NULL) == ADAPT_OK, "%s",
                      adapt_error_message());
        ck_assert_msg(c.pol->overflow == g.pol->overflow && c.pol->loss_scale == g.pol->loss_scale,
                      "%s %s step %d: overflow CPU %d GPU %d, loss scale CPU %g GPU %g", model,
                      what, s, c.pol->overflow, g.pol->overflow, c.pol->loss_scale,
                      g.pol->loss_scale);
        if (c.pol->type->epoch_end) { /* every step ends an epoch */
            double lr_c = cfg.optim.lr, lr_g = cfg.optim.lr;
            int stop_c = 0, stop_g = 0;
            c.pol->epoch = g.pol->epoch = s - 1;
            ck_assert_int_eq(c.pol->type->epoch_end(c.pol, s - 1, &lr_c, &stop_c), ADAPT_OK);
            ck_assert_msg(g.pol->type->epoch_end(g.pol, s - 1, &lr_g, &stop_g) == ADAPT_OK, "%s",
                          adapt_error_message());
            double gc = adapt_muppet_last_gd(c.pol), gg = adapt_muppet_last_gd(g.pol);
            ck_assert_msg(isnan(gc) == isnan(gg) && (isnan(gc) || fabs(gg - gc) <= 1e-2 * fabs(gc)),
                          "%s %s epoch %d: gradient diversity CPU %.9g GPU %.9g", model, what,
                          s - 1, gc, gg);
            ck_assert_msg(lr_c == lr_g && stop_c == stop_g,
                          "%s %s epoch %d: lr CPU %g GPU %g, stop CPU %d GPU %d", model, what,
                          s - 1, lr_c, lr_g, stop_c, stop_g);
        }
        ck_assert_msg(fabs(lgpu - lc) <= 1e-3 * fabs(lc), "%s %s step %d: loss GPU %.9g CPU %.9g",
                      model, what, s, lgpu, lc);
        for (int u = 0; c.pol->prec && u < c.pol->prec->nunits; u++) {
            const struct quant_spec *a = &c.pol->prec->u[u].spec, *b = &g.pol->prec->u[u].spec;
            ck_assert_msg(a->wl == b->wl && a->fl == b->fl &&
                              c.pol->prec->u[u].active == g.pol->prec->u[u].active,
                          "%s %s step %d unit %d: CPU <%d,%d> GPU <%d,%d> (lookback CPU %g "
                          "GPU %g)",
                          model, what, s, u, a->wl, a->fl, b->wl, b->fl,
                          c.pol->lb ? c.pol->lb[u] : 0.0, g.pol->lb ? g.pol->lb[u] : 0.0);
        }
        ck_assert_int_eq(c.pol->n_events, g.pol->n_events);
        adapt_policy_clear_events(c.pol);
        adapt_policy_clear_events(g.pol);
    }
    ck_assert_int_eq(adapt_cuda_net_pull_params(d), ADAPT_OK);
    for (int p = 0; p < c.net->nparam; p++) {
        const struct adapt_param *a = c.net->param[p], *b = g.net->param[p];
        if (a->role == ADAPT_PARAM_BUFFER) continue;
        double e = rel_norm_diff(b->value.data, a->value.data, a->value.numel);
        ck_assert_msg(e <= 1e-2, "%s %s: %s after %d steps differs by %g (relative norm)", model,
                      what, a->name, steps, e);
    }
    free(x), free(y), free(dl);
    side_free(&c);
    side_free(&g);
    adapt_cuda_net_free(d);
}

static const char *const fixed8[] = {"policy.name=fixed", "policy.format=fixed(12,8)", NULL};
static const char *const adapt_quick[] = {"policy.name=adapt", "quantization.lb_lwr=1",
                                          "quantization.lb_upr=2", NULL};
static const char *const adapt_ref[] = {"policy.name=adapt", "quantization.compat=reference",
                                        "quantization.lb_lwr=1", "quantization.lb_upr=2", NULL};
static const char *const muppet_quick[] = {"policy.name=muppet", "policy.muppet_r=2",
                                           "policy.muppet_patience=1", NULL};
static const char *const muppet_replay[] = {"policy.name=muppet",
                                            "policy.muppet_schedule=8:1,12:1,32:2", NULL};
static const char *const amp16[] = {"policy.name=amp", "policy.amp_type=fp16", NULL};
static const char *const ampbf16[] = {"policy.name=amp", "policy.amp_type=bf16", NULL};
static const char *const fp32[] = {"policy.name=fp32", NULL};

START_TEST(test_lenet5)
{
    policy_steps("lenet5", 16, fp32, 3);
    policy_steps("lenet5", 16, fixed8, 3);
    policy_steps("lenet5", 16, adapt_quick, 3);
    policy_steps("lenet5", 16, adapt_ref, 3);
    policy_steps("lenet5", 16, muppet_quick, 4);
    policy_steps("lenet5", 16, muppet_replay, 4);
    policy_steps("lenet5", 16, amp16, 3);
    policy_steps("lenet5", 16, ampbf16, 3);
}
END_TEST

START_TEST(test_alexnet)
{
    policy_steps("alexnet_cifar", 16, fixed8, 3);
    policy_steps("alexnet_cifar", 16, adapt_quick, 3);
    policy_steps("alexnet_cifar", 16, muppet_quick, 4);
    policy_steps("alexnet_cifar", 16, amp16, 3);
}
END_TEST

START_TEST(test_resnet20)
{
    policy_steps("resnet20", 8, fixed8, 3);
    policy_steps("resnet20", 8, adapt_quick, 3);
    policy_steps("resnet20", 8, adapt_ref, 3);
    policy_steps("resnet20", 8, muppet_quick, 4);
    policy_steps("resnet20", 8, amp16, 3);
}
END_TEST

int main(void)
{
    char desc[256];
    if (!tu_cuda_device("test_policy_cuda", adapt_cuda_net_built(), desc, sizeof desc)) return 77;
    Suite *su = suite_create("policy_cuda");
    TCase *tc = tcase_create("steps");
    tu_watchdog(tc, "steps", 300);
    tcase_add_test(tc, test_lenet5);
    tcase_add_test(tc, test_alexnet);
    tcase_add_test(tc, test_resnet20);
    suite_add_tcase(su, tc);
    return tu_run_suite(su, CK_NOFORK);
}
