/* tests/test_policy_engine.c: the precision engine and AdaPT in training, part of
 * tests/test_policy, on LeNet-5 with set gradients: the weight copies and outputs on the format's
 * grid, the saturating straight-through estimator, AdaPT's lookback, strategy and events, its
 * reference behaviour with batch norm and L1, and the push-down's noise threshold on real
 * weights. Expected values are worked out in the comment above each test. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "src/config/config.h"
#include "src/net/optim.h"
#include "src/policy/policy.h"
#include "src/policy/policy_core.h"
#include "src/policy/precision.h"
#include "tests/test_policy.h"
#include "tests/testutil.h"

/* tests/test_policy.h */
/* Weight copies: fixed <8,4> nearest puts every weight of an active unit on
 * the grid k/16 inside [-8, 8 - 1/16] and the layer computes with the copy;
 * a float unit computes with the master. Outputs of every layer after a unit
 * are on the same grid after a training forward. */
START_TEST(test_precision_copies_and_outputs)
{
    struct adapt_net *net = small_lenet(2);
    struct adapt_precision *p;
    ck_assert_int_eq(adapt_precision_alloc(&p, net, 1, ADAPT_QOUT_ALL, QUANT_ROUND_NEAREST, 7),
                     ADAPT_OK);
    struct quant_spec s;
    ck_assert_int_eq(quant_spec_parse("fixed(8,4)", &s), ADAPT_OK);
    for (int u = 0; u < p->nunits; u++) adapt_precision_set(p, u, &s);
    adapt_precision_set_float(p, 4);
    adapt_precision_refresh_weights(p, 1);
    for (int u = 0; u < 4; u++) {
        const struct adapt_param *w = &p->u[u].layer->param[0];
        ck_assert_ptr_eq(w->use, p->u[u].wq);
        for (size_t i = 0; i < w->value.numel; i++) {
            float v = w->use[i] * 16.0f;
            ck_assert_float_eq(v, nearbyintf(v));
            ck_assert(w->use[i] >= -8.0f && w->use[i] <= 8.0f - 1.0f / 16);
        }
    }
    ck_assert_ptr_eq(p->u[4].layer->param[0].use, p->u[4].layer->param[0].value.data);
    float x[2 * 32 * 32];
    for (int i = 0; i < 2 * 32 * 32; i++) x[i] = (float)sin(0.37 * i) * 2.385f;
    adapt_net_forward(net, x, 2, 1);
    /* activations 1..10 follow units 0..3 (<8,4>); conv 0's output: */
    for (int a = 1; a <= 10; a++)
        for (size_t i = 0; i < net->act_numel[a] * 2; i++) {
            float v = net->act[a][i] * 16.0f;
            ck_assert_msg(v == nearbyintf(v), "activation %d[%zu] = %g is off the grid", a, i,
                          net->act[a][i]);
        }
    adapt_precision_free(p);
    ck_assert_ptr_eq(net->param[0]->use, net->param[0]->value.data);
    adapt_net_free(net);
}
END_TEST

/* quantization.ste: with fixed <4,2> the grid ends are 1.75 and -2
 * ((2^3 - 1) / 4 and -2^3 / 4). Saturating: an output at 1.75 keeps a
 * gradient that lowers it (dy > 0) and loses one that raises it (dy < 0);
 * at -2 the other way round; inside the range nothing changes. Plain
 * straight-through changes nothing. The saturation count of a training
 * forward is taken once (then NaN). */
START_TEST(test_precision_saturating_ste)
{
    struct adapt_net *net = small_lenet(1);
    struct adapt_precision *p;
    ck_assert_int_eq(adapt_precision_alloc(&p, net, 1, ADAPT_QOUT_UNITS, QUANT_ROUND_NEAREST, 7),
                     ADAPT_OK);
    ck_assert_int_eq(p->ste, ADAPT_STE_PLAIN);
    struct quant_spec s;
    ck_assert_int_eq(quant_spec_parse("fixed(4,2)", &s), ADAPT_OK);
    for (int u = 0; u < p->nunits; u++) adapt_precision_set(p, u, &s);
    adapt_precision_refresh_weights(p, 1);
    float x[32 * 32];
    for (int i = 0; i < 32 * 32; i++) x[i] = (float)sin(0.37 * i) * 40.0f;
    adapt_net_forward(net, x, 1, 1);
    double f = adapt_precision_take_act_sat(p, 0);
    ck_assert(f > 0.0 && f <= 1.0);
    ck_assert(isnan(adapt_precision_take_act_sat(p, 0)));
    adapt_net_forward(net, x, 1, 0); /* evaluation forwards are not counted */
    ck_assert(isnan(adapt_precision_take_act_sat(p, 0)));

    /* the rule on node 0 (conv 0, a rounded unit output) */
    size_t m = net->act_numel[1];
    float *y = malloc(sizeof(float) * m), *dy = malloc(sizeof(float) * m);
    ck_assert(y && dy);
    const float ys[6] = {1.75f, 1.75f, -2.0f, -2.0f, 0.5f, 0.5f};
    const float ds[6] = {-1.0f, 1.0f, -1.0f, 1.0f, -1.0f, 1.0f};
    const float want[6] = {0.0f, 1.0f, -1.0f, 0.0f, -1.0f, 1.0f};
    for (int mode = 0; mode < 2; mode++) {
        p->ste = mode ? ADAPT_STE_SATURATING : ADAPT_STE_PLAIN;
        for (size_t i = 0; i < m; i++) {
            y[i] = ys[i % 6];
            dy[i] = ds[i % 6];
        }
        net->dout_hook(net->hook_ctx, 0, y, dy, 1);
        for (size_t i = 0; i < m; i++)
            ck_assert_float_eq(dy[i], mode ? want[i % 6] : ds[i % 6]);
    }
    free(y);
    free(dy);
    adapt_precision_free(p);
    ck_assert_ptr_null(net->dout_hook);
    adapt_net_free(net);
}
END_TEST

/* tests/test_policy.h */
void set_grads(struct adapt_net *net, float v)
{
    for (int k = 0; k < net->nparam; k++)
        if (net->param[k]->role != ADAPT_PARAM_BUFFER)
            for (size_t i = 0; i < net->param[k]->grad.numel; i++) net->param[k]->grad.data[i] = v;
}

/* AdaPT in the engine: identical normalised gradients twice give G = 2 g/|g|,
 * D = n / ||G|| = 1 each time, so lb_new = 100 and from lb 25:
 * lb = 100*0.33 + 0.67*25 = 49.75, then 33 + 0.67*49.75 = 66.3325; the
 * gradients are normalised to unit L2 norm per tensor. */
START_TEST(test_adapt_policy_lookback)
{
    struct adapt_net *net = small_lenet(1);
    static struct adapt_config cfg;
    adapt_config_init(&cfg);
    ck_assert_int_eq(adapt_config_set(&cfg, "policy.name=adapt"), ADAPT_OK);
    ck_assert_int_eq(adapt_config_set(&cfg, "quantization.lb_update=step"), ADAPT_OK);
    ck_assert_int_eq(adapt_config_set(&cfg, "quantization.quant_grads=false"), ADAPT_OK);
    struct adapt_policy *p;
    ck_assert_int_eq(adapt_policy_alloc(&p, &cfg, net, 1), ADAPT_OK);
    ck_assert_int_eq(p->prec->u[0].spec.wl, 8);
    ck_assert_int_eq(p->prec->u[0].spec.fl, 4);
    set_grads(net, 0.25f);
    ck_assert_int_eq(p->type->observe(p, 1, 2.3, 0), 0);
    ck_assert_double_eq_tol(p->lb[0], 49.75, 1e-9);
    double s = 0;
    const struct adapt_param *w = net->param[0];
    for (size_t i = 0; i < w->grad.numel; i++) s += (double)w->grad.data[i] * w->grad.data[i];
    ck_assert_double_eq_tol(s, 1.0, 1e-5);
    set_grads(net, -1.5f); /* normalised: same direction up to sign -> G = 0 -> D = inf */
    p->type->observe(p, 2, 2.3, 0);
    /* D = inf: lb_new = lb_lwr = 25: 25*0.33 + 0.67*49.75 = 41.5825 */
    ck_assert_double_eq_tol(p->lb[0], 41.5825, 1e-9);
    adapt_policy_free(p);
    adapt_net_free(net);
}
END_TEST

/* quantization.lb_update = window, with lb_lwr 2, lb_upr 4, gamma 1: identical normalised
 * gradients give G = n g/|g|, D = n / ||G|| = 1, lb_new = ceil(4 / 1) = 4. The first window
 * takes lb_lwr = 2 steps: after step 1 lb and r are untouched (2, r_lwr = 50); step 2
 * completes it, lb = 4 and r = 51 (lb at lb_upr), and decide runs the push-down and push-up
 * (two events) and starts a window of 4 steps: steps 3 to 5 decide nothing. With
 * lb_update = step, lb is already 4 and r 51 after step 1, r is 52 after step 2, and no
 * decision comes at step 2 (n = 2 < lb = 4). */
START_TEST(test_adapt_policy_lb_window)
{
    for (int window = 0; window <= 1; window++) {
        struct adapt_net *net = small_lenet(1);
        static struct adapt_config cfg;
        adapt_config_init(&cfg);
        ck_assert_int_eq(adapt_config_set(&cfg, "policy.name=adapt"), ADAPT_OK);
        ck_assert_int_eq(adapt_config_set(&cfg, "quantization.quant_grads=false"), ADAPT_OK);
        ck_assert_int_eq(adapt_config_set(&cfg, "quantization.lb_lwr=2"), ADAPT_OK);
        ck_assert_int_eq(adapt_config_set(&cfg, "quantization.lb_upr=4"), ADAPT_OK);
        ck_assert_int_eq(adapt_config_set(&cfg, "quantization.gamma=1"), ADAPT_OK);
        ck_assert_int_eq(adapt_config_set(&cfg, window ? "quantization.lb_update=window"
                                                       : "quantization.lb_update=step"),
                         ADAPT_OK);
        struct adapt_policy *p;
        ck_assert_int_eq(adapt_policy_alloc(&p, &cfg, net, 1), ADAPT_OK);
        set_grads(net, 0.25f);
        p->type->observe(p, 1, 2.3, 0);
        ck_assert_int_eq(p->type->decide(p, 1), ADAPT_OK);
        ck_assert_double_eq(p->lb[0], window ? 2.0 : 4.0);
        ck_assert_int_eq(p->r[0], window ? 50 : 51);
        ck_assert_int_eq(p->n_events, 0);
        set_grads(net, 0.25f);
        p->type->observe(p, 2, 2.3, 0);
        ck_assert_double_eq(p->lb[0], 4.0);
        ck_assert_int_eq(p->r[0], window ? 51 : 52);
        ck_assert_int_eq(p->type->decide(p, 2), ADAPT_OK);
        /* a push-down and a push-up event per unit that decided */
        ck_assert_int_eq(p->n_events, window ? 2 * p->prec->nunits : 0);
        adapt_policy_clear_events(p);
        for (long step = 3; window && step <= 5; step++) {
            set_grads(net, 0.25f);
            p->type->observe(p, step, 2.3, 0);
            ck_assert_int_eq(p->type->decide(p, step), ADAPT_OK);
            ck_assert_double_eq(p->lb[0], 4.0);
            ck_assert_int_eq(p->r[0], 51);
            ck_assert_int_eq(p->n_events, 0);
        }
        adapt_policy_free(p);
        adapt_net_free(net);
    }
}
END_TEST

/* The event of unit u and kind k among the policy's events, or NULL. */
static const struct adapt_trace_event *event_of(const struct adapt_policy *p, int u, int kind)
{
    for (int i = 0; i < p->n_events; i++)
        if (p->events[i].unit == u && (int)p->events[i].kind == kind) return &p->events[i];
    return NULL;
}

/* A reference policy on LeNet-5 with one [reference] switch set (NULL: none) and extra keys. */
static struct adapt_policy *ref_policy(struct adapt_net *net, struct adapt_config *cfg,
                                       const char *sw, const char *const *keys)
{
    adapt_config_init(cfg);
    ck_assert_int_eq(adapt_config_set(cfg, "policy.name=adapt"), ADAPT_OK);
    ck_assert_int_eq(adapt_config_set(cfg, "quantization.compat=reference"), ADAPT_OK);
    ck_assert_int_eq(adapt_config_set(cfg, "quantization.quant_grads=false"), ADAPT_OK);
    for (; keys && *keys; keys++) ck_assert_int_eq(adapt_config_set(cfg, *keys), ADAPT_OK);
    if (sw) ck_assert_int_eq(adapt_config_set(cfg, sw), ADAPT_OK);
    struct adapt_policy *p;
    ck_assert_int_eq(adapt_policy_alloc(&p, cfg, net, 1), ADAPT_OK);
    return p;
}

/* Each rule switch of [reference], turned off alone under compat = reference, on LeNet-5:
 * - lb_ceil: one step of identical gradients (D = 1, lb_new = 100) from lb 25 gives
 *   0.33 * 100 + 0.67 * 25 = 49.75, rounded up to 50 when on.
 * - strategy: after one loss the published rule changes nothing (at most k losses stored):
 *   min; the corrected rule compares the loss with the mean of itself: min -> mean.
 * - kl_test: unit 0 (6x1x5x5 weights) is tested on its first slice w[0], 25 weights, when
 *   on, and on all 150 (pd_sample 4096 > 150) when off (the event's sample).
 * - pd_bisect (with kl_test off): unit 0's weights all 0, so every format is lossless. From
 *   <8,4>, fl_min 4: FL stays 4 untested in both; WL: the published loop tests 6 and 5 and
 *   returns lo = 4 (2 tests), the corrected search over (3, 8] tests 6, 5 and 4 (3 tests);
 *   both end at <4,4>.
 * - pu_s2_zero: 8 steps whose unit gradients are orthogonal unit vectors (one-hot at the
 *   step's index) give D = 8 / sqrt(8) = 2.83, lambda = ln D - 1 = 0.040, s1 = 64 (capped),
 *   s2 = ceil(32 lambda^2) - FL = 1 - FL < 0, bounded below by 0 when on and by 1 when off;
 *   strategy min (the published rule has not moved with 8 losses and lb 8): s = 0 or 1. */
START_TEST(test_adapt_reference_switches)
{
    static struct adapt_config cfg;
    for (int on = 0; on <= 1; on++) {
        struct adapt_net *net = small_lenet(1);
        struct adapt_policy *p = ref_policy(net, &cfg, on ? NULL : "reference.lb_ceil=off", NULL);
        set_grads(net, 0.25f);
        p->type->observe(p, 1, 2.3, 0);
        ck_assert_double_eq_tol(p->lb[0], on ? 50.0 : 49.75, 1e-9);
        adapt_policy_free(p);
        p = ref_policy(net, &cfg, on ? NULL : "reference.strategy=off", NULL);
        set_grads(net, 0.25f);
        p->type->observe(p, 1, 2.3, 0);
        ck_assert_int_eq(p->strategy, on ? ADAPT_TRACE_STRATEGY_MIN : ADAPT_TRACE_STRATEGY_MEAN);
        adapt_policy_free(p);

        static const char *const lb1[] = {"quantization.lb_lwr=1", "quantization.lb_upr=1",
                                          NULL};
        p = ref_policy(net, &cfg, on ? NULL : "reference.kl_test=off", lb1);
        set_grads(net, 0.25f);
        p->type->observe(p, 1, 2.3, 0);
        ck_assert_int_eq(p->type->decide(p, 1), ADAPT_OK);
        const struct adapt_trace_event *e = event_of(p, 0, ADAPT_TRACE_EVENT_PD);
        ck_assert_ptr_nonnull(e);
        ck_assert_int_eq(e->sample, on ? 25 : 150);
        adapt_policy_free(p);

        static const char *const kl_off[] = {"quantization.lb_lwr=1", "quantization.lb_upr=1",
                                             "reference.kl_test=off", NULL};
        p = ref_policy(net, &cfg, on ? NULL : "reference.pd_bisect=off", kl_off);
        struct adapt_param *w = net->param[0];
        ck_assert_ptr_eq(w, &p->prec->u[0].layer->param[0]);
        memset(w->value.data, 0, sizeof(float) * w->value.numel);
        set_grads(net, 0.25f);
        p->type->observe(p, 1, 2.3, 0);
        ck_assert_int_eq(p->type->decide(p, 1), ADAPT_OK);
        e = event_of(p, 0, ADAPT_TRACE_EVENT_PD);
        ck_assert_ptr_nonnull(e);
        ck_assert_int_eq(e->kl_evals, on ? 2 : 3);
        ck_assert_int_eq(e->after[0], 4);
        ck_assert_int_eq(e->after[1], 4);
        adapt_policy_free(p);

        static const char *const lb8[] = {"quantization.lb_lwr=8", "quantization.lb_upr=8",
                                          NULL};
        p = ref_policy(net, &cfg, on ? NULL : "reference.pu_s2_zero=off", lb8);
        for (long step = 1; step <= 8; step++) {
            set_grads(net, 0.25f);
            for (int u = 0; u < p->prec->nunits; u++) {
                struct adapt_param *pw = &p->prec->u[u].layer->param[0];
                memset(pw->grad.data, 0, sizeof(float) * pw->grad.numel);
                pw->grad.data[step - 1] = 1.0f;
            }
            p->type->observe(p, step, 2.3, 0);
            ck_assert_int_eq(p->type->decide(p, step), ADAPT_OK);
            if (step < 8) ck_assert_int_eq(p->n_events, 0);
        }
        ck_assert_int_eq(p->strategy, ADAPT_TRACE_STRATEGY_MIN);
        e = event_of(p, 0, ADAPT_TRACE_EVENT_PU);
        ck_assert_ptr_nonnull(e);
        ck_assert_int_eq(e->s, on ? 0 : 1);
        adapt_policy_free(p);
        adapt_net_free(net);
    }
}
END_TEST

/* 1 when every value of x[0..n) is on the grid of fixed <wl, fl> (a multiple of 2^-fl inside
 * [-2^(wl-1-fl), 2^(wl-1-fl))). */
static int on_grid(const float *x, size_t n, int wl, int fl)
{
    const double lim = ldexp(1.0, wl - 1 - fl);
    for (size_t i = 0; i < n; i++) {
        double v = ldexp((double)x[i], fl);
        if (v != nearbyint(v) || x[i] < -lim || x[i] >= lim) return 0;
    }
    return 1;
}

/* reference.SW = on with a model whose published modules are not known: refused, the message
 * naming the switch and the model. */
static void expect_switch_refused(const char *model, const char *sw)
{
    static struct adapt_config cfg;
    char kv[96];
    struct adapt_net *net = adapt_model_build(model, 10);
    ck_assert_ptr_nonnull(net);
    ck_assert_int_eq(adapt_net_finalize(net, 1), ADAPT_OK);
    adapt_config_init(&cfg);
    ck_assert_int_eq(adapt_config_set(&cfg, "policy.name=adapt"), ADAPT_OK);
    snprintf(kv, sizeof kv, "model.name=%s", model);
    ck_assert_int_eq(adapt_config_set(&cfg, kv), ADAPT_OK);
    snprintf(kv, sizeof kv, "reference.%s=on", sw);
    ck_assert_int_eq(adapt_config_set(&cfg, kv), ADAPT_OK);
    struct adapt_policy *p = NULL;
    adapt_error_clear();
    ck_assert_int_eq(adapt_policy_alloc(&p, &cfg, net, 1), ADAPT_EUNSUPPORTED);
    snprintf(kv, sizeof kv, "reference.%s", sw);
    ck_assert_msg(strstr(adapt_error_message(), kv) && strstr(adapt_error_message(), model), "%s",
                  adapt_error_message());
    adapt_net_free(net);
}

/* A LeNet-5 under compat = reference (switch sw set too, unless NULL) with unit 0 at <12,9>
 * and unit 1 at <10,6>, after a training forward of two images (a smooth pattern). */
static struct adapt_policy *lenet_two_formats(struct adapt_net *net, struct adapt_config *cfg,
                                              const char *sw)
{
    float x[2 * 32 * 32];
    for (int i = 0; i < 2 * 32 * 32; i++) x[i] = (float)sin(0.37 * i) * 2.385f;
    struct adapt_policy *p = ref_policy(net, cfg, sw, NULL);
    struct quant_spec s;
    ck_assert_int_eq(quant_spec_parse("fixed(12,9)", &s), ADAPT_OK);
    adapt_precision_set(p->prec, 0, &s);
    ck_assert_int_eq(quant_spec_parse("fixed(10,6)", &s), ADAPT_OK);
    adapt_precision_set(p->prec, 1, &s);
    adapt_precision_refresh_weights(p->prec, 1);
    adapt_net_forward(net, x, 2, 1);
    return p;
}

/* reference.act_formats on LeNet-5 (the published model indexes its formats by module position
 * with a counter that never moves): with unit 0 (conv) at <12,9> and unit 1 (conv) at <10,6>,
 * unit 1's output (activation 4) is rounded to the start format <8,4> and unit 3's (the first
 * linear, activation 10) to unit 0's <12,9>, whose grid is finer than <8,4>'s. Off, each unit
 * rounds to its own: unit 1's output to <10,6> (some values off <8,4>'s grid), unit 3's to its
 * <8,4>. */
START_TEST(test_adapt_reference_act_formats)
{
    static struct adapt_config cfg;
    for (int on = 0; on <= 1; on++) {
        struct adapt_net *net = small_lenet(2);
        struct adapt_policy *p =
            lenet_two_formats(net, &cfg, on ? NULL : "reference.act_formats=off");
        const size_t n4 = net->act_numel[4] * 2, n10 = net->act_numel[10] * 2;
        if (on) {
            ck_assert(on_grid(net->act[4], n4, 8, 4));
            ck_assert(on_grid(net->act[10], n10, 12, 9));
            ck_assert(!on_grid(net->act[10], n10, 8, 4));
        } else {
            ck_assert(on_grid(net->act[4], n4, 10, 6));
            ck_assert(!on_grid(net->act[4], n4, 8, 4));
            ck_assert(on_grid(net->act[10], n10, 8, 4));
        }
        adapt_policy_free(p);
        adapt_net_free(net);
    }
    /* ResNet-20 (models/resnet_fp.py at 980eead): the format list has an entry per parameter,
     * P0-P2 the stem conv and its batch norm's gamma and beta (unit 0's), then per block conv1,
     * bn1 (2), conv2, bn2 (2) and in layer2.0 and layer3.0 the shortcut conv and its batch norm
     * (2): P3-P5 unit 1, P6-P8 unit 2, ..., P21-P23 unit 7 (layer2.0.conv1), P24-P26 unit 8,
     * P27-P29 unit 9 (its shortcut), P30-P32 unit 10, ... The blocks' conv and batch-norm modules
     * are counted from 0: layer1.0.conv1 is module 0, its conv2 module 2, layer1.1.conv1 4, ...,
     * layer2.0.conv1 12, conv2 14, shortcut 16, layer2.1 18 and 20, layer2.2 22 and 24,
     * layer3.0 26, 28, 30, layer3.1 32 and 34, layer3.2 36 and 38; module m takes parameter m's
     * unit: module 12 -> P12 (unit 4), 16 -> P16 (unit 5), 30 -> P30 (unit 10), 38 -> P38
     * (unit 12). The stem conv (unit 0) and the linear (unit 21) keep their own. */
    static const int want[22] = {0, 0, 0, 1, 2, 2, 3, 4, 4, 5, 6,
                                 6, 7, 8, 8, 9, 10, 10, 11, 12, 12, 21};
    struct adapt_net *net = adapt_model_build("resnet20", 10);
    ck_assert_ptr_nonnull(net);
    ck_assert_int_eq(adapt_net_finalize(net, 1), ADAPT_OK);
    ck_assert_int_eq(net->nunits, 22);
    for (int on = 0; on <= 1; on++) {
        adapt_config_init(&cfg);
        ck_assert_int_eq(adapt_config_set(&cfg, "policy.name=adapt"), ADAPT_OK);
        ck_assert_int_eq(adapt_config_set(&cfg, "model.name=resnet20"), ADAPT_OK);
        ck_assert_int_eq(adapt_config_set(&cfg, "quantization.compat=reference"), ADAPT_OK);
        if (!on) ck_assert_int_eq(adapt_config_set(&cfg, "reference.act_formats=off"), ADAPT_OK);
        struct adapt_policy *p = NULL;
        ck_assert_msg(adapt_policy_alloc(&p, &cfg, net, 1) == ADAPT_OK, "%s",
                      adapt_error_message());
        for (int u = 0; u < 22; u++) {
            const int got = p->prec->act_unit ? p->prec->act_unit[u] : u;
            ck_assert_msg(got == (on ? want[u] : u), "act_formats %s: unit %d (%s) takes unit "
                          "%d's activation format, expected %d", on ? "auto" : "off", u,
                          p->prec->u[u].layer->name, got, on ? want[u] : u);
        }
        adapt_policy_free(p);
    }
    adapt_net_free(net);
    /* a model whose published indexing is not known is refused by name when the switch is on */
    expect_switch_refused("mobilenetv2", "act_formats");
}
END_TEST

/* reference.pool_rounding on LeNet-5 (models/lenet5_fp.py and qlayers/qavgpool2d_fp.py at
 * 980eead: the QAvgPool2d_FP modules round their input and output, and the forward's counter
 * gives both the first format entry, conv1's): with unit 0 at <12,9> and unit 1 at <10,6>, the
 * first pool's input (the tanh output, activation 2, rounded in place) and output (activation
 * 3) and the second pool's (activations 5 and 6) lie on <12,9>'s grid, and the second's output
 * not on <8,4>'s or <10,6>'s coarser ones. Off, a tanh output is not on <12,9>'s grid (tanh of
 * these inputs is no multiple of 2^-9). */
START_TEST(test_adapt_reference_pool_rounding)
{
    static struct adapt_config cfg;
    for (int on = 0; on <= 1; on++) {
        struct adapt_net *net = small_lenet(2);
        struct adapt_policy *p =
            lenet_two_formats(net, &cfg, on ? NULL : "reference.pool_rounding=off");
        ck_assert_str_eq(net->nodes[2].layer->ops->kind, "avgpool2d");
        ck_assert_str_eq(net->nodes[5].layer->ops->kind, "avgpool2d");
        for (int a = 2; a <= 6; a++) {
            if (a == 4) continue; /* conv2's output, in the start format under act_formats */
            const size_t n = net->act_numel[a] * 2;
            ck_assert_msg(on_grid(net->act[a], n, 12, 9) == on, "activation %d, pool_rounding %s",
                          a, on ? "auto" : "off");
        }
        if (on) {
            ck_assert(!on_grid(net->act[6], net->act_numel[6] * 2, 10, 6));
            ck_assert(!on_grid(net->act[6], net->act_numel[6] * 2, 8, 4));
        }
        adapt_policy_free(p);
        adapt_net_free(net);
    }
}
END_TEST

/* reference.pool_rounding and bn_rounding on ResNet-20 (models/resnet_fp.py at 980eead): the
 * format list has an entry per parameter, three per unit up to the last block's (P3u to P3u+2:
 * a conv's weight and its batch norm's gamma and beta; see test_adapt_reference_act_formats),
 * so entry m is unit m / 3's. The stem's batch norm takes entry 2 (unit 0); the blocks' conv
 * and batch-norm modules are counted from 0, each block's batch norms being modules 1, 3 (and
 * a shortcut's 5) after its first conv: layer1.0 1 and 3, layer1.1 5 and 7, layer1.2 9 and 11,
 * layer2.0 13, 15 and the shortcut's 17, layer2.1 19, 21, layer2.2 23, 25, layer3.0 27, 29,
 * 31, layer3.1 33, 35, layer3.2 37, 39; the average pool entry 65 - 3 = 62 (unit 20). Off
 * (and for every other node) nothing. A model whose published modules are not known is
 * refused by name when a switch is on. */
START_TEST(test_adapt_reference_bn_rounding)
{
    static struct adapt_config cfg;
    static const int bn_module[21] = {-1, 1,  3,  5,  7,  9,  11, 13, 15, 17, 19,
                                      21, 23, 25, 27, 29, 31, 33, 35, 37, 39};
    struct adapt_net *net = adapt_model_build("resnet20", 10);
    ck_assert_ptr_nonnull(net);
    ck_assert_int_eq(adapt_net_finalize(net, 1), ADAPT_OK);
    for (int on = 0; on <= 1; on++) {
        adapt_config_init(&cfg);
        ck_assert_int_eq(adapt_config_set(&cfg, "policy.name=adapt"), ADAPT_OK);
        ck_assert_int_eq(adapt_config_set(&cfg, "model.name=resnet20"), ADAPT_OK);
        ck_assert_int_eq(adapt_config_set(&cfg, "quantization.compat=reference"), ADAPT_OK);
        if (!on) {
            ck_assert_int_eq(adapt_config_set(&cfg, "reference.bn_rounding=off"), ADAPT_OK);
            ck_assert_int_eq(adapt_config_set(&cfg, "reference.pool_rounding=off"), ADAPT_OK);
        }
        struct adapt_policy *p = NULL;
        ck_assert_msg(adapt_policy_alloc(&p, &cfg, net, 1) == ADAPT_OK, "%s",
                      adapt_error_message());
        int nbn = 0, npool = 0;
        for (int i = 0; i < net->nnodes; i++) {
            const struct adapt_layer *l = net->nodes[i].layer;
            const int got =
                p->prec->node_from ? p->prec->node_from[i] : -1; /* -1: not rounded this way */
            int want = -1;
            if (!strcmp(l->ops->kind, "batchnorm2d")) {
                ck_assert_int_lt(nbn, 21);
                want = nbn ? bn_module[nbn] / 3 : 0;
                nbn++;
            } else if (!strcmp(l->ops->kind, "avgpool2d")) {
                want = 20;
                npool++;
            }
            if (!on) want = -1;
            ck_assert_msg(got == want, "%s: node %d (%s) rounded in unit %d's format, expected %d",
                          on ? "auto" : "off", i, l->name, got, want);
        }
        ck_assert_int_eq(nbn, 21);
        ck_assert_int_eq(npool, 1);
        adapt_policy_free(p);
    }
    adapt_net_free(net);
    expect_switch_refused("alexnet_mnist", "pool_rounding");
}
END_TEST

/* reference.loss_penalty, turned on alone in a corrected run: the strategy compares the loss
 * plus the mean over parameters of WL/32 x non-zero fraction. Two steps of loss 2.3; between
 * them the units' weight copies become 0, so the penalty falls (from about 8/32 to the biases'
 * share alone). Off, the compared losses are equal, |mean| <= |loss| twice: min -> mean -> max.
 * On, step 1 stores 2.3 + pen1 (min -> mean), step 2 compares the mean of 2.3 + pen1 and
 * 2.3 + pen2 with 2.3 + pen2 < it: back to min. */
START_TEST(test_adapt_reference_loss_penalty)
{
    static struct adapt_config cfg;
    for (int on = 0; on <= 1; on++) {
        struct adapt_net *net = small_lenet(1);
        adapt_config_init(&cfg);
        ck_assert_int_eq(adapt_config_set(&cfg, "policy.name=adapt"), ADAPT_OK);
        ck_assert_int_eq(adapt_config_set(&cfg, "quantization.quant_grads=false"), ADAPT_OK);
        ck_assert_int_eq(adapt_config_set(&cfg, on ? "reference.loss_penalty=on"
                                                   : "reference.loss_penalty=auto"),
                         ADAPT_OK);
        struct adapt_policy *p;
        ck_assert_int_eq(adapt_policy_alloc(&p, &cfg, net, 1), ADAPT_OK);
        adapt_precision_refresh_weights(p->prec, 1);
        set_grads(net, 0.25f);
        p->type->observe(p, 1, 2.3, 0);
        ck_assert_int_eq(p->strategy, ADAPT_TRACE_STRATEGY_MEAN);
        for (int u = 0; u < p->prec->nunits; u++) {
            struct adapt_param *w = &p->prec->u[u].layer->param[0];
            ck_assert_ptr_ne(w->use, w->value.data);
            memset(w->use, 0, sizeof(float) * w->value.numel);
        }
        set_grads(net, 0.25f);
        p->type->observe(p, 2, 2.3, 0);
        ck_assert_int_eq(p->strategy, on ? ADAPT_TRACE_STRATEGY_MIN : ADAPT_TRACE_STRATEGY_MAX);
        adapt_policy_free(p);
        adapt_net_free(net);
    }
}
END_TEST

/* The configured strategy reaches the policy and the trace as the same enum; the
 * checkpoint's policy state counts it from 0 (min), as it always has. Events for the
 * trace are kept however many there are. */
START_TEST(test_adapt_strategy_and_events)
{
    static const struct {
        const char *set;
        enum adapt_trace_strategy st;
        int saved;
    } c[] = {{"quantization.strategy=min", ADAPT_TRACE_STRATEGY_MIN, 0},
             {"quantization.strategy=mean", ADAPT_TRACE_STRATEGY_MEAN, 1},
             {"quantization.strategy=max", ADAPT_TRACE_STRATEGY_MAX, 2}};
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        struct adapt_net *net = small_lenet(1);
        static struct adapt_config cfg;
        adapt_config_init(&cfg);
        ck_assert_int_eq(adapt_config_set(&cfg, "policy.name=adapt"), ADAPT_OK);
        ck_assert_int_eq(adapt_config_set(&cfg, c[i].set), ADAPT_OK);
        ck_assert_int_eq(cfg.quantization.strategy, c[i].st);
        struct adapt_policy *p;
        ck_assert_int_eq(adapt_policy_alloc(&p, &cfg, net, 1), ADAPT_OK);
        ck_assert_int_eq(p->strategy, c[i].st);
        json_t *j = p->type->save_json(p);
        ck_assert_int_eq(json_integer_value(json_object_get(j, "strategy")), c[i].saved);
        json_decref(j);
        struct adapt_trace_event e;
        memset(&e, 0, sizeof e);
        for (int k = 0; k < 100; k++) {
            e.unit = k;
            ck_assert_int_eq(adapt_policy_add_event(p, &e), ADAPT_OK);
        }
        ck_assert_int_eq(p->n_events, 100);
        ck_assert_int_eq(p->events[99].unit, 99);
        adapt_policy_clear_events(p);
        ck_assert_int_eq(p->n_events, 0);
        adapt_policy_free(p);
        adapt_net_free(net);
    }
}
END_TEST

/* compat = reference: batch-norm gamma / beta and their gradients take the
 * format of the conv before them (<8,4> at the start: grid 1/16); the L1
 * term reads the quantized copies (sign(w_q), 0 where w_q = 0). Corrected
 * leaves batch-norm in float32. Master gamma 1.03 is off the grid; after a
 * refresh the layers compute with a copy on it (1.0 or 1.0625). The switches
 * reference.bn_format and reference.l1_quantized each turn one of the two off alone. */
START_TEST(test_adapt_reference_bn_l1)
{
    static const char *const off[4] = {NULL, NULL, "reference.bn_format=off",
                                       "reference.l1_quantized=off"};
    for (int c = 0; c < 4; c++) {
        const int ref = c > 0, bn = c == 1 || c == 3, l1 = c == 1 || c == 2;
        struct adapt_net *net = adapt_model_build("resnet20", 10);
        ck_assert_ptr_nonnull(net);
        ck_assert_int_eq(adapt_net_finalize(net, 1), ADAPT_OK);
        adapt_net_init_params(net, 5, 0.5);
        static struct adapt_config cfg;
        adapt_config_init(&cfg);
        ck_assert_int_eq(adapt_config_set(&cfg, "policy.name=adapt"), ADAPT_OK);
        ck_assert_int_eq(adapt_config_set(&cfg, ref ? "quantization.compat=reference"
                                                    : "quantization.compat=corrected"), ADAPT_OK);
        ck_assert_int_eq(adapt_config_set(&cfg, "model.name=resnet20"), ADAPT_OK);
        if (off[c]) ck_assert_int_eq(adapt_config_set(&cfg, off[c]), ADAPT_OK);
        struct adapt_policy *p;
        ck_assert_int_eq(adapt_policy_alloc(&p, &cfg, net, 1), ADAPT_OK);
        int nbn = 0;
        for (int k = 0; k < net->nparam; k++) {
            struct adapt_param *pp = net->param[k];
            if (pp->role == ADAPT_PARAM_BUFFER || pp == &p->prec->u[0].layer->param[0]) continue;
            int own = 0;
            for (int u = 0; u < p->prec->nunits; u++)
                for (int q = 0; q < p->prec->u[u].layer->nparam; q++)
                    own |= pp == &p->prec->u[u].layer->param[q];
            if (own) continue;
            ck_assert_int_ge(p->prec->param_unit[k], 0);
            nbn++;
            for (size_t i = 0; i < pp->value.numel; i++) {
                pp->value.data[i] = 1.03f;
                pp->grad.data[i] = 0.03f;
            }
        }
        ck_assert_int_gt(nbn, 0);
        adapt_precision_refresh_weights(p->prec, 1);
        adapt_precision_quantize_grads(p->prec, 1);
        for (int k = 0; k < net->nparam; k++) {
            struct adapt_param *pp = net->param[k];
            if (pp->role == ADAPT_PARAM_BUFFER || pp->value.data[0] != 1.03f) continue;
            for (size_t i = 0; i < pp->value.numel; i++) {
                float v = pp->use[i], g = pp->grad.data[i];
                if (bn)
                    ck_assert_msg((v == 1.0f || v == 1.0625f) && (g == 0.0f || g == 0.0625f),
                                  "%s[%zu]: value %g, gradient %g: not on the <8,4> grid",
                                  pp->name, i, v, g);
                else
                    ck_assert(v == 1.03f && g == 0.03f);
            }
        }
        ck_assert_int_eq(p->l1_quantized, l1);
        struct adapt_sgd opt;
        ck_assert_int_eq(adapt_sgd_init(&opt, net, 0.01, 0.0, 0.0, 0.5, 0), ADAPT_OK);
        opt.l1_quantized = p->l1_quantized;
        struct adapt_param *w = &p->prec->u[0].layer->param[0];
        for (size_t i = 0; i < w->value.numel; i++) {
            w->value.data[i] = 0.01f; /* rounds to 0 or 1/16 */
            w->grad.data[i] = 0.0f;
        }
        adapt_precision_refresh_weights(p->prec, 2);
        adapt_sgd_prepare(&opt, 1.0, 1.0);
        size_t zeros = 0;
        for (size_t i = 0; i < w->value.numel; i++) {
            float want = l1 ? (w->use[i] > 0.0f ? 0.5f : 0.0f) : 0.5f;
            ck_assert_float_eq(w->grad.data[i], want);
            zeros += w->use[i] == 0.0f;
        }
        ck_assert_int_gt(zeros, 0);
        adapt_sgd_free(&opt);
        adapt_policy_free(p);
        adapt_net_free(net);
    }
}
END_TEST

/* The corrected push-down on real weights: LeNet-5's conv at node 6 (48,000
 * weights, initialisation seed 2385, gain 0.5) from <32,28>, r = 50, lb 1 so
 * that the first step pushes down. adapt-bench kl --model lenet5 --seed 2385
 * measures the KL of nearest rounding per FL and the noise level
 * (r - 1) / (2 m): with the default test (m = 4096 sampled weights, KL <=
 * (r - 1) / (2 m) = 0.006) the first lossless FL is 11 (FL 10: KL 0.02);
 * with the strict test (whole tensor, KL = 0) it is 23 or more. */
static int pd_fl_of_unit(const char *sets[], int nsets, int unit)
{
    struct adapt_net *net = small_lenet(1);
    static struct adapt_config cfg;
    adapt_config_init(&cfg);
    ck_assert_int_eq(adapt_config_set(&cfg, "policy.name=adapt"), ADAPT_OK);
    ck_assert_int_eq(adapt_config_set(&cfg, "quantization.start_wl=32"), ADAPT_OK);
    ck_assert_int_eq(adapt_config_set(&cfg, "quantization.start_fl=28"), ADAPT_OK);
    ck_assert_int_eq(adapt_config_set(&cfg, "quantization.lb_lwr=1"), ADAPT_OK);
    ck_assert_int_eq(adapt_config_set(&cfg, "quantization.lb_upr=1"), ADAPT_OK);
    for (int i = 0; i < nsets; i++) ck_assert_int_eq(adapt_config_set(&cfg, sets[i]), ADAPT_OK);
    struct adapt_policy *p;
    ck_assert_int_eq(adapt_policy_alloc(&p, &cfg, net, 1), ADAPT_OK);
    set_grads(net, 0.25f);
    p->type->observe(p, 1, 2.3, 0);
    ck_assert_int_eq(p->type->decide(p, 1), ADAPT_OK);
    int fl = -1;
    for (int i = 0; i < p->n_events; i++)
        if (p->events[i].kind == ADAPT_TRACE_EVENT_PD && p->events[i].unit == unit)
            fl = p->events[i].after[1];
    adapt_policy_free(p);
    adapt_net_free(net);
    return fl;
}

START_TEST(test_pd_noise_threshold)
{
    int fl = pd_fl_of_unit(NULL, 0, 2);
    ck_assert_msg(fl >= 10 && fl <= 12, "default push-down: FL %d, want 10-12", fl);
    const char *strict[] = {"quantization.kl_noise=0", "quantization.pd_sample=0"};
    int fs = pd_fl_of_unit(strict, 2, 2);
    ck_assert_msg(fs >= 22, "strict push-down: FL %d, want >= 22", fs);
}
END_TEST

void test_policy_add_engine(TCase *engine)
{
    tcase_add_test(engine, test_precision_copies_and_outputs);
    tcase_add_test(engine, test_precision_saturating_ste);
    tcase_add_test(engine, test_adapt_policy_lookback);
    tcase_add_test(engine, test_adapt_policy_lb_window);
    tcase_add_test(engine, test_adapt_reference_switches);
    tcase_add_test(engine, test_adapt_reference_act_formats);
    tcase_add_test(engine, test_adapt_reference_pool_rounding);
    tcase_add_test(engine, test_adapt_reference_bn_rounding);
    tcase_add_test(engine, test_adapt_reference_loss_penalty);
    tcase_add_test(engine, test_adapt_strategy_and_events);
    tcase_add_test(engine, test_pd_noise_threshold);
    tcase_add_test(engine, test_adapt_reference_bn_l1);
}
