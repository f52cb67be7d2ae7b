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
 * What agrees to a tolerance: the loss and the updated weights, against the CPU run and against
 * how far the CPU engine moves from itself (the twin, below). The engines sum in different
 * orders (test_net_cuda.c explains the float32 tolerances), and a rounding to a fixed-point
 * grid turns a difference of an ulp into one of a grid step where a value sits near a rounding
 * boundary: with stochastic rounding the boundary is the random threshold, so a fraction of
 * about (difference / grid step) of the values flips, each by one grid step. Downstream of a
 * rounded activation a flip is itself a difference that flips further roundings, so with
 * rounded activations (MuPPET, 8-12 bit fixed point) and batch statistics over 5-16 samples,
 * two runs whose sums differ only in order drift apart within a few steps; how far depends on
 * the case (on an H200, runs of the same case differed by up to 2 % in the loss after 2-4
 * steps, with cuDNN's algorithms picked by timing). So each case measures the spread: three
 * more sides, the twins, are the CPU engine again with the same policy and the same weight
 * copies, whose later roundings draw from other seeds (the stochastic-rounding spread; the
 * rounding to nearest of the float policies is not affected) and which are fed the same
 * batches with one ulp added to or taken from every other input value (the size of
 * difference the engines' summation orders make). The GPU's loss must be within max(1e-3
 * relative, 8 x the farthest twin's distance from the CPU); after the last step each weight
 * tensor within max(1e-2, 8 x the farthest twin's) as a relative norm, and MuPPET's gradient
 * diversity likewise. One twin is not enough: the loss is one number, and a reseeded run's
 * can land near the CPU's by chance while its activations are 10-50 % away (ResNet-20 on an
 * H200, ADAPT_TEST_TRACE_DIFFS below: the GPU's activations stayed 10x closer to the CPU's
 * than the twin's, yet its loss was once 19x farther). So the GPU run must look like a CPU
 * run; a semantic error (a missing rounding, an unscaled gradient, a skipped update) moves
 * every element the same way, beyond another seed's spread; and the bit-for-bit checks above
 * (weight copies before the first update, every precision decision) do not depend on the
 * twin.
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
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

/* What a case holds, static so that the checked teardown frees it when an assertion ends the
 * case early (CK_NOFORK: the next case runs in this process and on this GPU). Zeroed means
 * not held; adapt_sgd_free and adapt_policy_free accept zeroed state. */
enum { NTWIN = 3 }; /* CPU twins: the spread is the farthest of them (see above) */
static struct side live_c, live_g, live_t[NTWIN];
static struct adapt_cuda_net *live_d;

static double case_l1; /* the optimizer's L1 decay of the case running */

static void side_init(struct side *s, const char *model, int cap, const struct adapt_config *cfg)
{
    s->net = adapt_model_build(model, 10);
    ck_assert_msg(s->net, "%s", adapt_error_message());
    ck_assert_int_eq(adapt_net_finalize(s->net, cap), ADAPT_OK);
    adapt_net_init_params(s->net, 5, 2.0);
    ck_assert_int_eq(adapt_sgd_init(&s->opt, s->net, 0.05, 0.9, 5e-4, case_l1, 0), ADAPT_OK);
    ck_assert_msg(adapt_policy_alloc(&s->pol, cfg, s->net, 3) == ADAPT_OK, "%s",
                  adapt_error_message());
    if (s->pol->prec) adapt_precision_refresh_weights(s->pol->prec, 0);
}

static void side_free(struct side *s)
{
    adapt_policy_free(s->pol);
    adapt_sgd_free(&s->opt);
    adapt_net_free(s->net);
    memset(s, 0, sizeof *s);
}

/* the policies first (the GPU side's refers to the engine), then the engine, as the cases do */
static void release_live(void)
{
    if (live_c.net) side_free(&live_c);
    if (live_g.net) side_free(&live_g);
    for (int k = 0; k < NTWIN; k++)
        if (live_t[k].net) side_free(&live_t[k]);
    if (live_d) adapt_cuda_net_free(live_d);
    live_d = NULL;
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

/* Forward and backward of a CPU side on the batch (x, y), as the trainer takes them: the loss.
 * cpu_update then takes the policy's step. */
static double cpu_pass(struct side *s, const float *x, const int *y, int n, int step, float *dl)
{
    if (s->pol->prec) s->pol->prec->iter = step - 1;
    s->net->rng_iter = step - 1;
    const float *lg = adapt_net_forward(s->net, x, n, 1);
    double l = adapt_softmax_xent(lg, y, n, 10, dl, NULL);
    for (int i = 0; i < n * 10; i++) dl[i] *= (float)s->pol->loss_scale; /* as the trainer */
    adapt_net_backward(s->net, dl, n);
    return l;
}

static void cpu_update(struct side *s, int step, double l)
{
    ck_assert_int_eq(adapt_policy_step(s->pol, &s->opt, step, l, 1, 1, NULL), ADAPT_OK);
}

/* ADAPT_TEST_TRACE_DIFFS=MODEL (or "all"): where the engines part, step by step: every
 * activation and its gradient and every parameter's gradient after the backward (before the
 * policy's step), and every parameter and buffer after it, as relative norms GPU-CPU beside
 * twin-CPU. Pulls from the device between steps, so only for looking, never in a checked run. */
static int trace_diffs(const char *model)
{
    const char *e = getenv("ADAPT_TEST_TRACE_DIFFS");
    return e && *e && (!strcmp(e, "all") || !strcmp(e, model));
}

static void trace_pass(const char *model, const char *what, int step, int n)
{
    struct adapt_net *c = live_c.net, *g = live_g.net, *t = live_t[0].net;
    size_t most = 0;
    for (int a = 0; a < c->nact; a++)
        if (c->act_numel[a] > most) most = c->act_numel[a];
    float *buf = malloc(most * (size_t)n * sizeof *buf);
    ck_assert(buf);
    for (int a = 1; a < c->nact; a++) {
        size_t m = c->act_numel[a] * (size_t)n;
        ck_assert_int_eq(adapt_cuda_net_read(live_d, 0, a, n, buf), ADAPT_OK);
        double ea = rel_norm_diff(buf, c->act[a], m), ta = rel_norm_diff(t->act[a], c->act[a], m);
        ck_assert_int_eq(adapt_cuda_net_read(live_d, 1, a, n, buf), ADAPT_OK);
        double eg = rel_norm_diff(buf, c->dact[a], m), tg = rel_norm_diff(t->dact[a], c->dact[a], m);
        const struct adapt_layer *l = c->nodes[a - 1].layer;
        printf("diff %s %s step %d act %3d %-22s %-10s value %.3g (twin %.3g) gradient %.3g "
               "(twin %.3g)\n", model, what, step, a, l->name, l->ops->kind, ea, ta, eg, tg);
    }
    free(buf);
    ck_assert_int_eq(adapt_cuda_net_pull_grads(live_d), ADAPT_OK);
    for (int p = 0; p < c->nparam; p++) {
        const struct adapt_param *pc = c->param[p];
        if (!pc->grad.data) continue;
        size_t m = pc->grad.numel;
        printf("diff %s %s step %d grad %-28s %.3g (twin %.3g)\n", model, what, step, pc->name,
               rel_norm_diff(g->param[p]->grad.data, pc->grad.data, m),
               rel_norm_diff(t->param[p]->grad.data, pc->grad.data, m));
    }
    fflush(stdout);
}

static void trace_params(const char *model, const char *what, int step)
{
    struct adapt_net *c = live_c.net, *g = live_g.net, *t = live_t[0].net;
    ck_assert_int_eq(adapt_cuda_net_pull_params(live_d), ADAPT_OK);
    for (int p = 0; p < c->nparam; p++) {
        const struct adapt_param *pc = c->param[p];
        size_t m = pc->value.numel;
        printf("diff %s %s step %d param %-28s %.3g (twin %.3g)\n", model, what, step, pc->name,
               rel_norm_diff(g->param[p]->value.data, pc->value.data, m),
               rel_norm_diff(t->param[p]->value.data, pc->value.data, m));
    }
    fflush(stdout);
}

/* The scale states of the scaled roles (src/policy/roles.c) of the CPU side c and the GPU side
 * g. Before the first update (step 0) only the weights and masters have been rounded, from the
 * same masters: amax, scale and counts equal bit for bit. After step s the tensors differ as the
 * values do (see above): each amax within 1e-2 relative after the first step and 5e-2 after
 * later ones (a largest value moves with its tensor, by the engines' summation orders and the
 * rounding flips they cause, which grow step by step: 1.2 % for an activation of AlexNet-CIFAR
 * under fp8_hybrid_delayed at step 3 on an H100) and each scale within a factor of 2 (a power
 * of two may step once where an amax sits near one), both printed when they are not. */
static void check_scales(const struct side *c, const struct side *g, const char *model, int n,
                         const char *what, int step)
{
    const struct adapt_precision *pc = c->pol->prec, *pg = g->pol->prec;
    if (!pc || !pc->rstate) return;
    ck_assert_msg(pg && pg->rstate, "%s %s: the GPU side keeps no scale states", model, what);
    for (int r = 0; r < ADAPT_ROLE_N; r++)
        for (int id = 0; id < c->net->nnodes; id++) {
            const struct adapt_role_state *a = adapt_precision_role_state(pc, r, id),
                                          *b = adapt_precision_role_state(pg, r, id);
            ck_assert_msg(a->n == b->n, "%s n %d %s step %d role %s tensor %d: %llu values "
                          "rounded on the CPU, %llu on the GPU", model, n, what, step,
                          adapt_role_names[r], id, (unsigned long long)a->n,
                          (unsigned long long)b->n);
            if (!a->n) continue;
            if (step == 0) {
                ck_assert_msg(a->amax == b->amax && a->scale == b->scale &&
                                  a->last_scale == b->last_scale && a->sat == b->sat &&
                                  a->flush == b->flush,
                              "%s n %d %s role %s tensor %d before the first update: amax CPU "
                              "%.9g GPU %.9g, scale CPU %.9g GPU %.9g, saturated CPU %llu GPU "
                              "%llu, flushed CPU %llu GPU %llu", model, n, what,
                              adapt_role_names[r], id, a->amax, b->amax, a->scale, b->scale,
                              (unsigned long long)a->sat, (unsigned long long)b->sat,
                              (unsigned long long)a->flush, (unsigned long long)b->flush);
                continue;
            }
            const double ea = fabs((double)a->amax - b->amax) / fmax(fabs(a->amax), 1e-30);
            const double es = (double)a->last_scale / b->last_scale;
            ck_assert_msg(ea <= (step > 1 ? 5e-2 : 1e-2) && es >= 0.5 && es <= 2.0,
                          "%s n %d %s step %d role %s tensor %d: amax CPU %.9g GPU %.9g, scale "
                          "CPU %.9g GPU %.9g", model, n, what, step, adapt_role_names[r], id,
                          a->amax, b->amax, a->last_scale, b->last_scale);
        }
}

/* `steps` optimizer steps of `model` under the settings `sets` on both engines, with batches
 * of n samples in networks (and a device engine) made for cap >= n: n < cap checks that
 * nothing assumes full batches (per-batch scratch, statistics, the half-precision copies). */
static void policy_steps(const char *model, int n, int cap, const char *const *sets, int steps)
{
    static struct adapt_config cfg;
    adapt_config_init(&cfg);
    for (int i = 0; sets[i]; i++)
        ck_assert_msg(adapt_config_set(&cfg, sets[i]) == ADAPT_OK, "%s: %s", sets[i],
                      adapt_error_message());
    struct side *c = &live_c, *g = &live_g, *t = live_t;
    side_init(c, model, cap, &cfg);
    side_init(g, model, cap, &cfg);
    for (int k = 0; k < NTWIN; k++) {
        side_init(&t[k], model, cap, &cfg);
        if (t[k].pol->prec) t[k].pol->prec->seed ^= 0x7e57u * (k + 1u); /* after the first copies */
    }
    ck_assert_msg(adapt_cuda_net_create(g->net, 0, &live_d) == ADAPT_OK, "%s",
                  adapt_error_message());
    struct adapt_cuda_net *d = live_d;
    ck_assert_int_eq(adapt_cuda_net_push_sgd(d, &g->opt), ADAPT_OK);
    ck_assert_msg(adapt_policy_use_cuda(g->pol, d, 0) == ADAPT_OK, "%s", adapt_error_message());
    static char what[256]; /* the settings, for the messages */
    what[0] = '\0';
    for (int i = 0; sets[i]; i++)
        snprintf(what + strlen(what), sizeof what - strlen(what), "%s%s", i ? " " : "", sets[i]);

    /* the copies before the first update: bit for bit */
    for (int u = 0; c->pol->prec && u < c->pol->prec->nunits; u++) {
        const struct adapt_unit_prec *cu = &c->pol->prec->u[u], *gu = &g->pol->prec->u[u];
        if (!cu->active) continue;
        size_t m = cu->layer->param[0].value.numel;
        float *back = malloc(m * sizeof *back);
        ck_assert(back);
        ck_assert_int_eq(adapt_cuda_net_get(d, gu->d_wq, back, m), ADAPT_OK);
        char label[256];
        snprintf(label, sizeof label, "%s n %d %s unit %d weight copy", model, n, what, u);
        tu_expect_same_bits(label, back, cu->wq, m);
        free(back);
    }

    /* scaled roles: the weights' amax and scales (the same masters) bit for bit, and after each
     * step every scaled tensor's amax, scale and counts against the CPU's (check_scales) */
    check_scales(c, g, model, n, what, 0);

    size_t in = c->net->act_numel[0] * (size_t)n;
    float *x = malloc(in * sizeof *x), *xt = malloc(in * sizeof *xt);
    float *dl = malloc((size_t)n * 10 * sizeof *dl);
    int *y = malloc((size_t)n * sizeof *y);
    ck_assert(x && xt && y && dl);
    for (int s = 1; s <= steps; s++) {
        fill(x, in, y, n, (uint64_t)s);
        double lc = cpu_pass(c, x, y, n, s, dl);
        double lt[NTWIN], dlt = 0.0; /* the twins' losses, the farthest one's distance */
        for (int k = 0; k < NTWIN; k++) { /* twin k: one ulp up or down on every other input */
            for (size_t i = 0; i < in; i++)
                xt[i] = ((i + k) & 1) ? nextafterf(x[i], k < 2 ? INFINITY : -INFINITY) : x[i];
            lt[k] = cpu_pass(&t[k], xt, y, n, s, dl);
            dlt = fmax(dlt, fabs(lt[k] - lc));
        }
        if (g->pol->prec) g->pol->prec->iter = s - 1;
        g->net->rng_iter = s - 1;
        double lgpu = 0.0;
        ck_assert_int_eq(adapt_cuda_net_upload(d, x, y, n), ADAPT_OK);
        ck_assert_msg(adapt_cuda_net_step(d, 1, 1) == ADAPT_OK, "%s", adapt_error_message());
        ck_assert_int_eq(adapt_cuda_net_result(d, &lgpu, NULL), ADAPT_OK);
        lgpu /= n;
        if (trace_diffs(model)) trace_pass(model, what, s, n);
        cpu_update(c, s, lc);
        for (int k = 0; k < NTWIN; k++) cpu_update(&t[k], s, lt[k]);
        ck_assert_msg(adapt_policy_step(g->pol, &g->opt, s, lgpu, 1, 1, NULL) == ADAPT_OK, "%s",
                      adapt_error_message());
        if (trace_diffs(model)) trace_params(model, what, s);
        ck_assert_msg(c->pol->overflow == g->pol->overflow && c->pol->loss_scale == g->pol->loss_scale,
                      "%s %s step %d: overflow CPU %d GPU %d, loss scale CPU %g GPU %g", model,
                      what, s, c->pol->overflow, g->pol->overflow, c->pol->loss_scale,
                      g->pol->loss_scale);
        if (c->pol->type->epoch_end) { /* every step ends an epoch */
            double lr_c = cfg.optim.lr, lr_g = cfg.optim.lr;
            int stop_c = 0, stop_g = 0;
            c->pol->epoch = g->pol->epoch = s - 1;
            ck_assert_int_eq(c->pol->type->epoch_end(c->pol, s - 1, &lr_c, &stop_c), ADAPT_OK);
            double gt = NAN, dgt = 0.0; /* the farthest twin's gradient diversity */
            for (int k = 0; k < NTWIN; k++) {
                double lr_t = cfg.optim.lr;
                int stop_t = 0;
                t[k].pol->epoch = s - 1;
                ck_assert_int_eq(t[k].pol->type->epoch_end(t[k].pol, s - 1, &lr_t, &stop_t),
                                 ADAPT_OK);
                double gk = adapt_muppet_last_gd(t[k].pol), gck = adapt_muppet_last_gd(c->pol);
                if (!isnan(gk) && (isnan(gt) || fabs(gk - gck) > dgt)) gt = gk, dgt = fabs(gk - gck);
            }
            ck_assert_msg(g->pol->type->epoch_end(g->pol, s - 1, &lr_g, &stop_g) == ADAPT_OK, "%s",
                          adapt_error_message());
            double gc = adapt_muppet_last_gd(c->pol), gg = adapt_muppet_last_gd(g->pol);
            double gtol = fmax(1e-2 * fabs(gc), 8.0 * dgt);
            ck_assert_msg(isnan(gc) == isnan(gg) && (isnan(gc) || fabs(gg - gc) <= gtol),
                          "%s %s epoch %d: gradient diversity CPU %.9g GPU %.9g (twin %.9g, "
                          "tolerance %.3g)", model, what, s - 1, gc, gg, gt, gtol);
            ck_assert_msg(lr_c == lr_g && stop_c == stop_g,
                          "%s %s epoch %d: lr CPU %g GPU %g, stop CPU %d GPU %d", model, what,
                          s - 1, lr_c, lr_g, stop_c, stop_g);
        }
        double ltol = fmax(1e-3 * fabs(lc), 8.0 * dlt);
        /* every twin equal to the CPU: an input role rounds the network's input to 8 bits, which
         * takes the twins' ulps away, and the recipe rounds to nearest, which takes the seeds'
         * effect away, so the twins measure no spread. The engines' float32 sums still flip a
         * few 8-bit roundings (one e4m3 step is 6-12 %) and these flips grow from the second
         * step on (on an H100: 0.2-0.5 % in the loss of ResNet-20 by step 2-3): 2 % there */
        if (dlt == 0.0 && s > 1) ltol = fmax(ltol, 2e-2 * fabs(lc));
        ck_assert_msg(fabs(lgpu - lc) <= ltol,
                      "%s %s step %d: loss GPU %.9g CPU %.9g (the farthest of %d twins %.3g from "
                      "the CPU, tolerance %.3g)", model, what, s, lgpu, lc, NTWIN, dlt, ltol);
        for (int u = 0; c->pol->prec && u < c->pol->prec->nunits; u++) {
            const struct quant_spec *a = &c->pol->prec->u[u].spec, *b = &g->pol->prec->u[u].spec;
            ck_assert_msg(a->wl == b->wl && a->fl == b->fl &&
                              c->pol->prec->u[u].active == g->pol->prec->u[u].active,
                          "%s %s step %d unit %d: CPU <%d,%d> GPU <%d,%d> (lookback CPU %g "
                          "GPU %g)",
                          model, what, s, u, a->wl, a->fl, b->wl, b->fl,
                          c->pol->lb ? c->pol->lb[u] : 0.0, g->pol->lb ? g->pol->lb[u] : 0.0);
        }
        check_scales(c, g, model, n, what, s);
        ck_assert_int_eq(c->pol->n_events, g->pol->n_events);
        adapt_policy_clear_events(c->pol);
        adapt_policy_clear_events(g->pol);
        for (int k = 0; k < NTWIN; k++) adapt_policy_clear_events(t[k].pol);
    }
    ck_assert_int_eq(adapt_cuda_net_pull_params(d), ADAPT_OK);
    for (int p = 0; p < c->net->nparam; p++) {
        const struct adapt_param *a = c->net->param[p], *b = g->net->param[p];
        if (a->role == ADAPT_PARAM_BUFFER) continue;
        double e = rel_norm_diff(b->value.data, a->value.data, a->value.numel);
        double et = 0.0;
        for (int k = 0; k < NTWIN; k++)
            et = fmax(et, rel_norm_diff(t[k].net->param[p]->value.data, a->value.data,
                                        a->value.numel));
        ck_assert_msg(e <= fmax(1e-2, 8.0 * et),
                      "%s %s: %s after %d steps differs by %g (relative norm; twin %g)", model,
                      what, a->name, steps, e, et);
    }
    free(x), free(xt), free(y), free(dl);
    release_live();
}

static const char *const fixed8[] = {"policy.name=fixed", "policy.format=fixed(12,8)", NULL};
static const char *const adapt_quick[] = {"policy.name=adapt", "quantization.lb_lwr=1",
                                          "quantization.lb_upr=2", NULL};
/* the reference's loss penalty (ResNet-20's) and its pooling and batch-norm rounding run on
 * the CPU engine only */
static const char *const adapt_ref[] = {
    "policy.name=adapt",          "quantization.compat=reference",
    "quantization.lb_lwr=1",      "quantization.lb_upr=2",
    "reference.loss_penalty=off", "reference.pool_rounding=off",
    "reference.bn_rounding=off",  NULL};
static const char *const muppet_quick[] = {"policy.name=muppet", "policy.muppet_r=2",
                                           "policy.muppet_patience=1", NULL};
static const char *const muppet_replay[] = {"policy.name=muppet",
                                            "policy.muppet_schedule=8:1,12:1,32:2", NULL};
static const char *const amp16[] = {"policy.name=amp", "policy.amp_type=fp16", NULL};
static const char *const ampbf16[] = {"policy.name=amp", "policy.amp_type=bf16", NULL};
static const char *const fp32[] = {"policy.name=fp32", NULL};
/* tensor roles (doc/numerics.md, "Tensor roles and scaling"): the recipes, rowwise scales and
 * rounded error gradients sent back, on the fixed and AdaPT policies */
static const char *const fp8_delayed[] = {"policy.name=fixed", "policy.format=fixed(12,8)",
                                          "roles.recipe=fp8_hybrid_delayed", NULL};
static const char *const fp8_current[] = {"policy.name=fixed", "policy.format=fixed(12,8)",
                                          "roles.recipe=fp8_current", NULL};
static const char *const mxfp8[] = {"policy.name=fixed", "policy.format=fixed(12,8)",
                                    "roles.recipe=mxfp8", NULL};
static const char *const bf16_master[] = {"policy.name=fixed", "policy.format=fixed(12,8)",
                                          "roles.recipe=bf16_sr_master", NULL};
static const char *const w4a8[] = {"policy.name=fixed", "policy.format=fixed(12,8)",
                                   "roles.recipe=w4a8", NULL};
static const char *const rowwise[] = {"policy.name=fixed", "policy.format=fixed(12,8)",
                                      "roles.weight=e4m3 nearest rowwise",
                                      "roles.input=e4m3 stochastic current",
                                      "roles.grad_input=float(5,2) stochastic delayed", NULL};
static const char *const adapt_e5m2[] = {"policy.name=adapt", "quantization.lb_lwr=1",
                                         "quantization.lb_upr=2",
                                         "roles.grad_output=float(5,2) nearest current", NULL};

/* One case per (model, policy, batch): a failing case reports itself and the next still runs.
 * n < cap: the last batch of an epoch, smaller than the networks were made for. */
static const struct {
    const char *model;
    const char *const *sets;
    int n, cap, steps;
    double l1;
} cases[] = {
    {"lenet5", fp32, 16, 16, 3, 0.0},
    {"lenet5", fixed8, 16, 16, 3, 0.0},
    {"lenet5", adapt_quick, 16, 16, 3, 0.0},
    {"lenet5", adapt_ref, 16, 16, 3, 0.0},
    {"lenet5", muppet_quick, 16, 16, 4, 0.0},
    {"lenet5", muppet_replay, 16, 16, 4, 0.0},
    {"lenet5", amp16, 16, 16, 3, 0.0},
    {"lenet5", ampbf16, 16, 16, 3, 0.0},
    {"alexnet_cifar", fixed8, 16, 16, 3, 0.0},
    {"alexnet_cifar", adapt_quick, 16, 16, 3, 0.0},
    {"alexnet_cifar", muppet_quick, 16, 16, 4, 0.0},
    {"alexnet_cifar", amp16, 16, 16, 3, 0.0},
    {"resnet20", fixed8, 8, 8, 3, 0.0},
    {"resnet20", adapt_quick, 8, 8, 3, 0.0},
    {"resnet20", adapt_ref, 8, 8, 3, 0.0},
    {"resnet20", muppet_quick, 8, 8, 4, 0.0},
    {"resnet20", amp16, 8, 8, 3, 0.0},
    /* batches of n_max - 3: AMP's half-precision units carve their copies by n */
    {"lenet5", amp16, 13, 16, 3, 0.0},
    {"lenet5", fixed8, 13, 16, 3, 0.0},
    {"resnet20", amp16, 5, 8, 3, 0.0},
    /* L1 with the loss scale: l1 x S = 65536 overflows fp16 when added before the rounding;
     * AMP adds it in float32 after it (no skipped step), on both engines */
    {"lenet5", amp16, 16, 16, 3, 1.0},
    {"lenet5", fp8_delayed, 16, 16, 3, 0.0},
    {"lenet5", fp8_current, 16, 16, 3, 0.0},
    {"lenet5", mxfp8, 16, 16, 3, 0.0},
    {"lenet5", bf16_master, 16, 16, 3, 0.0},
    {"lenet5", w4a8, 13, 16, 3, 0.0},
    {"lenet5", rowwise, 16, 16, 3, 0.0},
    {"lenet5", adapt_e5m2, 16, 16, 3, 0.0},
    /* one step: these recipes round the input to 8 bits and every role to nearest, so the twins
     * equal the CPU and measure no spread, while the engines' float32 sums flip a few 8-bit
     * roundings whose effect grows chaotically from step to step (on an H100, after 3 steps:
     * ResNet-20's weights 1-5 % apart, a gradient's amax 9 %) */
    {"alexnet_cifar", fp8_delayed, 16, 16, 1, 0.0},
    {"resnet20", fp8_delayed, 8, 8, 1, 0.0},
    {"resnet20", mxfp8, 8, 8, 1, 0.0},
};
enum { NCASES = sizeof cases / sizeof cases[0] };

START_TEST(test_policy_step)
{
    printf("test_policy_cuda: case %d: %s %s n %d of %d, l1 %g\n", _i, cases[_i].model,
           cases[_i].sets[0], cases[_i].n, cases[_i].cap, cases[_i].l1);
    fflush(stdout);
    case_l1 = cases[_i].l1;
    policy_steps(cases[_i].model, cases[_i].n, cases[_i].cap, cases[_i].sets, cases[_i].steps);
}
END_TEST

/* A policy attached to the same engine again (a resume, a bench that attaches twice) frees
 * the device arrays of its earlier attachment: the engine holds as many arrays after the
 * second attachment as after the first, and a step still runs. Needs no kernel to give right
 * values, so tests/cuda_census.test runs it under the counting stand-in too. */
static const char *const *const reattach_sets[] = {fixed8, adapt_quick, muppet_quick, amp16,
                                                   fp8_delayed};
enum { NREATTACH = sizeof reattach_sets / sizeof reattach_sets[0] };

START_TEST(test_reattach)
{
    static struct adapt_config cfg;
    adapt_config_init(&cfg);
    const char *const *sets = reattach_sets[_i];
    for (int i = 0; sets[i]; i++)
        ck_assert_msg(adapt_config_set(&cfg, sets[i]) == ADAPT_OK, "%s: %s", sets[i],
                      adapt_error_message());
    struct side *g = &live_g;
    side_init(g, "lenet5", 8, &cfg);
    ck_assert_msg(adapt_cuda_net_create(g->net, 0, &live_d) == ADAPT_OK, "%s",
                  adapt_error_message());
    ck_assert_int_eq(adapt_cuda_net_push_sgd(live_d, &g->opt), ADAPT_OK);
    ck_assert_msg(adapt_policy_use_cuda(g->pol, live_d, 0) == ADAPT_OK, "%s", adapt_error_message());
    int first = adapt_cuda_net_arrays(live_d);
    ck_assert_msg(adapt_policy_use_cuda(g->pol, live_d, 0) == ADAPT_OK, "%s", adapt_error_message());
    int second = adapt_cuda_net_arrays(live_d);
    ck_assert_msg(adapt_policy_use_cuda(g->pol, live_d, 0) == ADAPT_OK, "%s", adapt_error_message());
    int third = adapt_cuda_net_arrays(live_d);
    ck_assert_msg(first == second && second == third,
                  "%s: the engine holds %d policy arrays after the first attachment, %d after "
                  "the second, %d after the third", sets[0], first, second, third);
    size_t in = g->net->act_numel[0] * 8;
    float *x = malloc(in * sizeof *x);
    int *y = malloc(8 * sizeof *y);
    ck_assert(x && y);
    fill(x, in, y, 8, 1);
    ck_assert_int_eq(adapt_cuda_net_upload(live_d, x, y, 8), ADAPT_OK);
    ck_assert_msg(adapt_cuda_net_step(live_d, 1, 1) == ADAPT_OK, "%s", adapt_error_message());
    double loss = 0.0;
    ck_assert_int_eq(adapt_cuda_net_result(live_d, &loss, NULL), ADAPT_OK);
    ck_assert_msg(adapt_policy_step(g->pol, &g->opt, 1, loss / 8, 1, 1, NULL) == ADAPT_OK, "%s",
                  adapt_error_message());
    free(x), free(y);
    release_live();
}
END_TEST

/* The scaled roles' device work (adapt_cuda_net_amax_rows, adapt_cuda_net_round_scaled) against
 * the CPU's (quant_amax_compute, quant_rows_scaled, which the CPU engine's roles call), bit for
 * bit with the counts, on rows that hold an inf, a NaN, only zeros, values past the format's
 * largest and below its smallest, at offsets that are not 16-byte aligned, with one scale per
 * tensor and one per row. */
START_TEST(test_scaled_kernels)
{
    static struct adapt_config cfg;
    adapt_config_init(&cfg);
    ck_assert_int_eq(adapt_config_set(&cfg, "policy.name=fp32"), ADAPT_OK);
    struct side *g = &live_g;
    side_init(g, "lenet5", 4, &cfg);
    ck_assert_msg(adapt_cuda_net_create(g->net, 0, &live_d) == ADAPT_OK, "%s",
                  adapt_error_message());
    enum { ROWS = 7, COLS = 1237, N = ROWS * COLS };
    float *x = malloc((N + 1) * sizeof *x), *want = malloc(N * sizeof *want),
          *got = malloc(N * sizeof *got), *dx = NULL, *dy = NULL;
    ck_assert(x && want && got);
    ck_assert_int_eq(adapt_cuda_net_alloc(live_d, N + 1, &dx), ADAPT_OK);
    ck_assert_int_eq(adapt_cuda_net_alloc(live_d, N, &dy), ADAPT_OK);
    struct adapt_rng r;
    adapt_rng_init(&r, 11, 3);
    for (int i = 0; i < N + 1; i++) /* magnitudes over 2^-30 .. 2^20 */
        x[i] = (float)((adapt_rng_uniform(&r) - 0.5) * ldexp(1.0, (int)adapt_rng_below(&r, 50) - 30));
    x[1 + 1 * COLS + 5] = INFINITY; /* row 1: an inf; row 2: a NaN; row 3: zeros */
    x[1 + 2 * COLS + 17] = NAN;
    for (int i = 0; i < COLS; i++) x[1 + 3 * COLS + i] = 0.0f;
    ck_assert_int_eq(adapt_cuda_net_put(live_d, dx, x, N + 1), ADAPT_OK);
    float amax[ROWS], want_amax[ROWS];
    ck_assert_int_eq(adapt_cuda_net_amax_rows(live_d, dx + 1, ROWS, COLS, amax), ADAPT_OK);
    for (int k = 0; k < ROWS; k++) {
        int nonfinite = 0;
        want_amax[k] = quant_amax_compute(x + 1 + (size_t)k * COLS, COLS, &nonfinite);
        ck_assert_msg(memcmp(&amax[k], &want_amax[k], sizeof amax[k]) == 0,
                      "row %d: amax GPU %.9g CPU %.9g", k, amax[k], want_amax[k]);
    }
    static const char *const fmts[] = {"e4m3", "float(5,2)", "fixed(4,0)", "fixed(8,0)", "bf16"};
    for (int f = 0; f < 5; f++)
        for (int rnd = 0; rnd < 2; rnd++) {
            struct quant_spec s;
            ck_assert_int_eq(quant_spec_parse(fmts[f], &s), ADAPT_OK);
            s.rounding = rnd ? QUANT_ROUND_STOCHASTIC : QUANT_ROUND_NEAREST;
            struct quant_key key = {99, 1234u + (uint64_t)f, 3};
            float sc[ROWS];
            for (int k = 0; k < ROWS; k++) /* 2^-k x a float32 scale, and 2^40 (overflow) */
                sc[k] = k == 4 ? 0x1p40f : (float)ldexp(1.7, 5 - 3 * k);
            for (int per_row = 0; per_row < 2; per_row++) {
                const size_t srows = per_row ? ROWS : 1;
                struct quant_stats ws = {0, 0, 0};
                for (size_t k = 0; k < srows; k++) {
                    struct quant_key kk = key;
                    kk.index += k * (N / srows);
                    ck_assert_int_eq(quant_rows_scaled(&s, x + 1 + k * (N / srows),
                                                       want + k * (N / srows), 1, N / srows, kk,
                                                       sc[k], 1.0f / sc[k], &ws),
                                     ADAPT_OK);
                }
                uint64_t c[3] = {0, 0, 0};
                ck_assert_msg(adapt_cuda_net_round_scaled(live_d, &s, dx + 1, dy, ROWS, COLS,
                                                          srows, sc, key, c) == ADAPT_OK,
                              "%s", adapt_error_message());
                ck_assert_int_eq(adapt_cuda_net_get(live_d, dy, got, N), ADAPT_OK);
                char label[128];
                snprintf(label, sizeof label, "%s %s, %zu scales", fmts[f],
                         rnd ? "stochastic" : "nearest", srows);
                tu_expect_same_bits(label, got, want, N);
                ck_assert_msg(c[0] == ws.saturated && c[1] == ws.flushed && c[2] == ws.zeros,
                              "%s: saturated GPU %llu CPU %llu, flushed GPU %llu CPU %llu, zeros "
                              "GPU %llu CPU %llu", label, (unsigned long long)c[0],
                              (unsigned long long)ws.saturated, (unsigned long long)c[1],
                              (unsigned long long)ws.flushed, (unsigned long long)c[2],
                              (unsigned long long)ws.zeros);
            }
        }
    free(x), free(want), free(got);
    release_live();
}
END_TEST

int main(void)
{
    char desc[256];
    if (!tu_cuda_device("test_policy_cuda", adapt_cuda_net_built(), desc, sizeof desc)) return 77;
    Suite *su = suite_create("policy_cuda");
    TCase *tc = tcase_create("steps");
    tu_watchdog(tc, "steps", 300); /* per case */
    /* after the watchdog's: frees what a failed case left */
    tcase_add_checked_fixture(tc, NULL, release_live);
    tcase_add_loop_test(tc, test_policy_step, 0, NCASES);
    suite_add_tcase(su, tc);
    TCase *tr = tcase_create("reattach");
    tu_watchdog(tr, "reattach", 60);
    tcase_add_checked_fixture(tr, NULL, release_live);
    tcase_add_loop_test(tr, test_reattach, 0, NREATTACH);
    suite_add_tcase(su, tr);
    TCase *tk = tcase_create("scaled");
    tu_watchdog(tk, "scaled", 60);
    tcase_add_checked_fixture(tk, NULL, release_live);
    tcase_add_test(tk, test_scaled_kernels);
    suite_add_tcase(su, tk);
    return tu_run_suite(su, CK_NOFORK);
}
