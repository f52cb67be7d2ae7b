/* src/train/comp_search.c: the comp policy's plan search (src/policy/comp.h): it trains sampled
 * plans from a restored copy of the starting state, prices them with the performance model,
 * and writes the samples into the trace. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/net/net.h"
#include "src/net/optim.h"
#include "src/perfmodel/perf.h"
#include "src/policy/comp.h"
#include "src/policy/policy.h"
#include "src/train/internal.h"
#include "src/train/run_dir.h"

/* What a sampled plan starts from: the master weights and buffers, the momentum, the
 * optimizer's step count and learning rate, and the schedule. The data order and every random
 * bit are keyed by (seed, epoch, batch), so restarting epoch 0 restores them too. */
struct snapshot {
    float **param; /* (nparam) */
    float **mom;   /* (opt.nbuf) */
    long steps;
    double lr;
    struct adapt_sched sched;
};

static void snapshot_free(struct train_run *r, struct snapshot *s)
{
    for (int k = 0; s->param && k < r->net->nparam; k++) free(s->param[k]);
    for (int k = 0; s->mom && k < r->opt.nbuf; k++) free(s->mom[k]);
    free(s->param);
    free(s->mom);
    memset(s, 0, sizeof *s);
}

static enum adapt_status snapshot_take(struct train_run *r, struct snapshot *s)
{
    memset(s, 0, sizeof *s);
    s->param = calloc((size_t)r->net->nparam + 1, sizeof *s->param);
    s->mom = calloc((size_t)r->opt.nbuf + 1, sizeof *s->mom);
    int ok = s->param && s->mom;
    for (int k = 0; ok && k < r->net->nparam; k++) {
        const struct adapt_tensor *v = &r->net->param[k]->value;
        ok = (s->param[k] = malloc(sizeof(float) * (v->numel ? v->numel : 1))) != NULL;
        if (ok) memcpy(s->param[k], v->data, sizeof(float) * v->numel);
    }
    for (int k = 0; ok && k < r->opt.nbuf; k++) {
        size_t n = r->opt.par[k]->value.numel;
        ok = (s->mom[k] = malloc(sizeof(float) * (n ? n : 1))) != NULL;
        if (ok) memcpy(s->mom[k], r->opt.buf[k], sizeof(float) * n);
    }
    if (!ok) {
        snapshot_free(r, s);
        return ADAPT_ERROR(ADAPT_ENOMEM, "policy = comp: cannot keep a copy of the training state");
    }
    s->steps = r->opt.steps;
    s->lr = r->opt.lr;
    s->sched = r->sched;
    return ADAPT_OK;
}

static void snapshot_restore(struct train_run *r, const struct snapshot *s)
{
    for (int k = 0; k < r->net->nparam; k++) {
        struct adapt_param *p = r->net->param[k];
        memcpy(p->value.data, s->param[k], sizeof(float) * p->value.numel);
    }
    for (int k = 0; k < r->opt.nbuf; k++)
        memcpy(r->opt.buf[k], s->mom[k], sizeof(float) * r->opt.par[k]->value.numel);
    adapt_net_zero_grad(r->net);
    r->opt.steps = s->steps;
    r->opt.lr = s->lr;
    r->sched = s->sched;
}

struct search {
    struct train_run *r;
    struct snapshot snap;
    struct perf_model *pm;
    struct perf_hw *hw;
    struct perf_params pp;
    int *wl, *gov, *fmt;
    double t_start;
};

/* Restores the starting state and trains with plan from it. */
static enum adapt_status search_start(struct search *s, const char *plan)
{
    snapshot_restore(s->r, &s->snap);
    return adapt_policy_comp_apply(s->r->pol, plan, s->snap.steps);
}

static enum adapt_status search_epoch(void *ctx, const char *plan, double *loss, long *steps,
                                      long *samples)
{
    struct search *s = ctx;
    struct train_run *r = s->r;
    const struct adapt_config *cfg = r->cfg;
    enum adapt_status st = search_start(s, plan);
    if (st) return st;
    const int accum = cfg->train.accumulation_steps, nbatches = adapt_loader_batches(&r->tl);
    const long max_steps = cfg->policy.comp_sample_steps;
    long step = s->snap.steps, seen = 0;
    double loss_sum = 0.0, step_loss = 0.0, mean;
    int micro = 0, batch_i = 0, nb;
    double t0 = train_now_s();
    adapt_loader_start(&r->tl, 0);
    r->opt.lr = r->sched.lr;
    r->pol->epoch = 0;
    while ((nb = adapt_loader_next(&r->tl, r->x, r->y)) > 0) {
        int c = 0;
        train_set_iter(r, 0, nbatches, batch_i);
        double l = train_micro_batch(r, nb, &c);
        if (r->dev_st) return r->dev_st;
        loss_sum += l * nb;
        seen += nb;
        step_loss += l;
        micro++;
        batch_i++;
        if (micro == accum || batch_i == nbatches) {
            step++;
            if ((st = train_optimizer_step(r, step, step_loss, l, micro, batch_i == nbatches,
                                           &mean)))
                return st;
            adapt_policy_clear_events(r->pol);
            micro = 0;
            step_loss = 0.0;
            if (max_steps > 0 && step - s->snap.steps >= max_steps) break;
        }
        if (train_stop_requested) break;
    }
    if (train_stop_requested)
        return ADAPT_ERROR(ADAPT_EINTERRUPTED, "interrupted during the comp search: nothing "
                                               "was written; start the run again");
    *loss = seen ? loss_sum / (double)seen : NAN;
    *steps = step - s->snap.steps;
    *samples = seen;
    if (!r->opts->quiet) {
        printf("comp stage 1: plan %s  loss %.4f  %ld steps  %.1f s\n", plan, *loss, *steps,
               train_now_s() - t0);
        fflush(stdout);
    }
    return ADAPT_OK;
}

static enum adapt_status search_batch(void *ctx, const char *plan, double *loss, long *samples)
{
    struct search *s = ctx;
    struct train_run *r = s->r;
    enum adapt_status st = search_start(s, plan);
    if (st) return st;
    adapt_loader_start(&r->tl, 0);
    int nb = adapt_loader_next(&r->tl, r->x, r->y), c = 0;
    train_set_iter(r, 0, adapt_loader_batches(&r->tl), 0);
    *loss = nb > 0 ? train_micro_batch(r, nb, &c) : NAN;
    if (r->dev_st) return r->dev_st;
    *samples = nb > 0 ? nb : 0;
    adapt_net_zero_grad(r->net);
    return ADAPT_OK;
}

static enum adapt_status search_cost(void *ctx, const char *plan, double *cost)
{
    struct search *s = ctx;
    const struct adapt_config *cfg = s->r->cfg;
    adapt_policy_comp_cost_view(s->r->pol, plan, s->wl, s->gov);
    /* the conversions between layers of different formats are part of a plan's price */
    adapt_comp_plan_formats(adapt_policy_comp_space(s->r->pol), plan, s->fmt);
    int accum = cfg->train.accumulation_steps;
    double cq, tq;
    enum adapt_status st =
        perf_price_plan(s->pm, &s->pp, s->hw, s->wl, s->gov, s->fmt, cfg->train.batch,
                        (double)cfg->train.batch * accum, 1, accum, &cq, &tq);
    *cost = s->hw ? tq : cq;
    return st;
}

/* The comp policy's two-stage search (src/policy/comp.h) from the initial state, which is
 * restored before training with the chosen plan; *res keeps the samples for the trace. */
enum adapt_status train_comp_search(struct train_run *r, struct adapt_comp_result *res)
{
    const struct adapt_config *cfg = r->cfg;
    struct search s;
    memset(&s, 0, sizeof s);
    s.r = r;
    s.t_start = train_now_s();
    perf_params_init(&s.pp);
    enum adapt_status st;
    struct adapt_graph *g = NULL;
    if ((st = adapt_graph_load(&g, train_model_name(cfg), r->net->classes, cfg->model.args)))
        return st;
    st = perf_model_from_graph(&s.pm, g);
    adapt_graph_free(g);
    if (st) return st;
    if (cfg->policy.comp_hw[0] && (st = perf_hw_load(&s.hw, cfg->policy.comp_hw))) {
        st = ADAPT_ERROR(st, "policy.comp_hw: %s", adapt_error_message());
        goto free_search;
    }
    s.wl = malloc(sizeof(int) * (size_t)(r->net->nunits + 1));
    s.gov = malloc(sizeof(int) * (size_t)(r->net->nnodes + 1));
    s.fmt = malloc(sizeof(int) * (size_t)(r->net->nnodes + 1));
    if (!s.wl || !s.gov || !s.fmt) {
        st = ADAPT_ERROR(ADAPT_ENOMEM, "cannot allocate the comp search");
        goto free_search;
    }
    if ((st = snapshot_take(r, &s.snap))) goto free_search;
    struct adapt_comp_hooks h = {&s, search_epoch, search_batch, search_cost};
    if (!r->opts->quiet) {
        printf("comp search: %s, tolerance %g, cost %s\n", cfg->policy.comp_formats,
               cfg->policy.comp_tolerance, s.hw ? perf_hw_describe(s.hw) : "analytical");
        fflush(stdout);
    }
    if ((st = adapt_comp_search(adapt_policy_comp_space(r->pol), &h, cfg->policy.comp_tolerance,
                                cfg->policy.comp_max_plans, res)))
        goto free_search;
    if ((st = search_start(&s, res->plan))) goto free_search;
    adapt_policy_comp_searched(r->pol);
    if (!r->opts->quiet) {
        printf("comp plan: %s (%d plans sampled, %.1f s)\n", res->plan, res->n_samples,
               train_now_s() - s.t_start);
        fflush(stdout);
    }
free_search:
    snapshot_free(r, &s.snap);
    free(s.wl);
    free(s.gov);
    free(s.fmt);
    perf_hw_free(s.hw);
    perf_model_free(s.pm);
    return st;
}

/* --dry-run: what the comp search will sample; fails as the search would (too many plans). */
enum adapt_status train_print_search_space(struct train_run *r)
{
    const struct adapt_config *cfg = r->cfg;
    const struct adapt_comp_space *sp = adapt_policy_comp_space(r->pol);
    printf("comp search: formats %s (digit %d = float32); units tried in stage 1:",
           cfg->policy.comp_formats, sp->k);
    for (int i = 0; i < sp->n; i++)
        if (sp->unit[i] >= 0 && sp->tried[i]) printf(" %s", r->net->nodes[i].layer->name);
    printf("; set to format 0:");
    for (int i = 0; i < sp->n; i++)
        if (sp->unit[i] >= 0 && !sp->tried[i]) printf(" %s", r->net->nodes[i].layer->name);
    char *plans = NULL;
    int n = 0;
    printf("\n");
    enum adapt_status st = adapt_comp_stage1_plans(sp, cfg->policy.comp_max_plans, &plans, &n);
    if (!st)
        printf("comp search: %d stage-1 plans (%s each)\n", n,
               cfg->policy.comp_sample_steps ? "comp_sample_steps optimizer steps" : "one epoch");
    free(plans);
    struct perf_hw *hw = NULL;
    if (!st && cfg->policy.comp_hw[0]) {
        if ((st = perf_hw_load(&hw, cfg->policy.comp_hw)))
            return ADAPT_ERROR(st, "policy.comp_hw: %s", adapt_error_message());
        printf("comp search: plans priced by %s\n", perf_hw_describe(hw));
        perf_hw_free(hw);
    }
    return st;
}

/* The search's samples into the trace, after its header. */
enum adapt_status train_write_samples(struct train_run *r, const struct adapt_comp_result *res)
{
    int *wl = malloc(sizeof(int) * (size_t)(r->net->nunits + 1));
    int *gov = malloc(sizeof(int) * (size_t)(r->net->nnodes + 1));
    enum adapt_status st = wl && gov ? ADAPT_OK
                                     : ADAPT_ERROR(ADAPT_ENOMEM, "cannot write the comp search");
    for (int i = 0; !st && i < res->n_samples; i++) {
        const struct adapt_comp_sample *c = &res->samples[i];
        adapt_policy_comp_cost_view(r->pol, c->plan, wl, gov);
        struct adapt_trace_sample ts = {c->stage, c->plan, c->steps, c->samples,
                                        c->loss,  c->cost, c->safe,  c->chosen,
                                        r->net->nunits, wl, r->net->nnodes, gov};
        st = adapt_run_dir_sample(&r->dir, &ts);
    }
    free(wl);
    free(gov);
    return st;
}
