/* src/perfmodel/analyze.c: a run priced from its trace (perf_run_analyze).
 *
 * The trace is checked first (step and epoch records in order, word lengths
 * and sparsities in range), then each logged step line closes an interval
 * (prev step, step] priced at that line's unit states (src/perfmodel/price.c)
 * with the push-down and AdaPT overhead the line recorded; steps after the
 * last step line up to the last epoch record are priced at its state. Samples
 * per step come from the epoch structure: each optimizer step trains
 * batch * accumulation samples, the last step of an epoch the remainder of
 * the header's dataset.train.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/perfmodel/internal.h"
#include "src/perfmodel/perf.h"

/* ----------------------------------------------------------------- epochs */

/* Epoch boundaries: bound[e] = optimizer steps done before epoch e, for the epochs the epoch
 * records delimit; after the last record every epoch is `nominal` steps long. Only the records'
 * boundaries are stored: a step number in the file sizes nothing. */
struct epochs {
    int n;           /* boundaries held: bound[0] = 0, then each epoch record's step */
    int64_t *bound;  /* (n) increasing */
    int64_t nominal; /* steps of a full epoch, >= 1 */
    double S;        /* samples per epoch */
    int64_t per_step; /* batch * accumulation */
};

/* The epoch holding optimizer step s >= 1 (bound[e] < s <= bound[e + 1]), its first bound and
 * its length in steps. */
static int64_t epoch_of(const struct epochs *ep, int64_t s, int64_t *first, int64_t *len)
{
    int64_t last = ep->bound[ep->n - 1];
    if (s > last) { /* after the last epoch record: whole epochs of nominal steps */
        int64_t k = (s - last - 1) / ep->nominal;
        *first = last + k * ep->nominal; /* < s */
        *len = ep->nominal;
        return ep->n - 1 + k;
    }
    int lo = 0, hi = ep->n - 1;
    while (hi - lo > 1) {
        int mid = lo + (hi - lo) / 2;
        if (ep->bound[mid] < s)
            lo = mid;
        else hi = mid;
    }
    *first = ep->bound[lo];
    *len = ep->bound[lo + 1] - ep->bound[lo];
    return lo;
}

/* Samples trained by steps 1..s. */
static double samples_to(const struct epochs *ep, int64_t s)
{
    if (s <= 0) return 0;
    int64_t first, len, e = epoch_of(ep, s, &first, &len);
    double done = (double)e * ep->S;
    double in = (double)(s - first) * (double)ep->per_step;
    return done + (in < ep->S ? in : ep->S);
}

static double epoch_x(const struct epochs *ep, int64_t s)
{
    if (s <= 0) return 0;
    int64_t first, len, e = epoch_of(ep, s, &first, &len);
    return (double)e + (double)(s - first) / (double)(len > 0 ? len : 1);
}

/* The boundaries of the epoch records (validate() has checked that their steps increase). */
static enum adapt_status epochs_build(struct epochs *ep, const struct adapt_trace *t,
                                      int64_t per_step)
{
    int64_t train = t->header.dataset.train;
    ep->S = (double)train;
    ep->per_step = per_step;
    ep->nominal = train / per_step + (train % per_step != 0); /* ceil, without overflow */
    if (ep->nominal < 1) ep->nominal = 1;
    ep->bound = malloc(sizeof(int64_t) * ((size_t)t->n_epochs + 1));
    if (!ep->bound) return ADAPT_ERROR(ADAPT_ENOMEM, "%s: out of memory", t->path);
    ep->n = 0;
    ep->bound[ep->n++] = 0;
    for (int e = 0; e < t->n_epochs; e++) ep->bound[ep->n++] = t->epochs[e].step;
    return ADAPT_OK;
}

/* ------------------------------------------------------------- validation */

static enum adapt_status step_error(const struct adapt_trace *t, int64_t i, const char *what,
                                    int unit)
{
    long long ln = (long long)t->step_line[i];
    if (unit >= 0)
        return ADAPT_ERROR(ADAPT_EFORMAT, "%s:%lld: step %lld, unit %d: %s", t->path, ln,
                           (long long)t->steps[i].step, unit, what);
    return ADAPT_ERROR(ADAPT_EFORMAT, "%s:%lld: step %lld: %s", t->path, ln,
                       (long long)t->steps[i].step, what);
}

static enum adapt_status validate(const struct adapt_trace *t)
{
    if (t->n_steps < 1)
        return ADAPT_ERROR(ADAPT_EFORMAT, "%s: no step records: nothing to price", t->path);
    if (t->header.dataset.train < 1)
        return ADAPT_ERROR(ADAPT_EFORMAT, "%s:1: dataset.train must be at least 1", t->path);
    for (int64_t i = 0; i < t->n_steps; i++) {
        const struct adapt_trace_step *s = &t->steps[i];
        if (s->step < 1 || (i > 0 && s->step <= t->steps[i - 1].step))
            return step_error(t, i, "step numbers must start at 1 or more and increase", -1);
        if (i > 0 && s->epoch < t->steps[i - 1].epoch)
            return step_error(t, i, "epoch numbers must not decrease", -1);
        for (int u = 0; u < s->n_units; u++) {
            const struct adapt_trace_unit_state *us = &s->units[u];
            if (us->wl < 1 || us->wl > 32) return step_error(t, i, "wl must be in 1..32", u);
            if (!isnan(us->sparsity) && !(us->sparsity >= 0 && us->sparsity <= 1))
                return step_error(t, i, "sparsity must be in [0, 1]", u);
        }
    }
    for (int e = 0; e < t->n_epochs; e++)
        if (t->epochs[e].step < 1 || (e > 0 && t->epochs[e].step <= t->epochs[e - 1].step))
            return ADAPT_ERROR(ADAPT_EFORMAT,
                               "%s:%lld: epoch record %d: step %lld does not follow the previous "
                               "epoch's",
                               t->path, (long long)t->epoch_line[e], t->epochs[e].epoch,
                               (long long)t->epochs[e].step);
    return ADAPT_OK;
}

/* ------------------------------------------------------------------ names */

static const char *base_name(const char *path, char *buf, size_t n)
{
    /* runs/NAME/trace.jsonl -> NAME; dir/x.jsonl -> x */
    const char *slash = strrchr(path, '/');
    const char *file = slash ? slash + 1 : path;
    if (!strcmp(file, "trace.jsonl") && slash) {
        const char *p = slash;
        while (p > path && p[-1] != '/') p--;
        snprintf(buf, n, "%.*s", (int)(slash - p), p);
        if (buf[0]) return buf;
    }
    snprintf(buf, n, "%s", file);
    char *dot = strrchr(buf, '.');
    if (dot && dot != buf) *dot = 0;
    return buf;
}

/* "corrected" or "reference" for an AdaPT run (its quantization.compat), ""
 * for other policies. */
static const char *run_compat(const struct adapt_trace *t)
{
    if (!t->header.policy || strcmp(t->header.policy, "adapt")) return "";
    return t->header.cfg.compat ? t->header.cfg.compat : "corrected";
}

/* A run's name: its run.name when set; else the stem of its configuration
 * file, with the AdaPT compat mode when it is "reference" and the seed when
 * it is not 1; the trace's folder when the run had no configuration file. */
static const char *run_name(const struct adapt_trace *t, char *buf, size_t n)
{
    if (t->header.cfg.name && t->header.cfg.name[0]) return t->header.cfg.name;
    const char *cf = t->header.config_file;
    if (!cf || !cf[0]) return base_name(t->path, buf, n);
    const char *slash = strrchr(cf, '/');
    const char *file = slash ? slash + 1 : cf;
    size_t len = strlen(file);
    if (len > 4 && !strcmp(file + len - 4, ".ini")) len -= 4;
    int k = snprintf(buf, n, "%.*s", (int)len, file);
    const char *compat = run_compat(t);
    if (k >= 0 && (size_t)k < n && !strcmp(compat, "reference"))
        k += snprintf(buf + k, n - (size_t)k, " [reference]");
    if (k >= 0 && (size_t)k < n && t->header.seed != 1)
        snprintf(buf + k, n - (size_t)k, " seed %lld", (long long)t->header.seed);
    return buf;
}

/* --------------------------------------------------------------- analysis */

/* One analysis in progress: the trace, the plan and the run being filled. */
struct analysis {
    const struct adapt_trace *t;
    const struct perf_params *p;
    struct perf_model *m;
    struct perf_plan pl;
    struct epochs ep;
    struct perf_run *r;
    int64_t batch, accum;
    int64_t end;  /* the run's last optimizer step (step line or epoch record) */
    int tail;     /* 1: steps after the last step line, priced at its state */
    int *wl;      /* (nu) formats of the interval being priced */
    double *nz;   /* (nu) non-zero fractions */
    double *uc32, *ucq, *wl_sum; /* (nu) per-unit compute costs; WL x steps */
    double mem_peak, sp_sum;     /* peak training memory; sum of step sparsities */
    int64_t sp_n;                /* steps with a sparsity */
};

static void analysis_free(struct analysis *a)
{
    free(a->uc32);
    free(a->ucq);
    free(a->wl_sum);
    free(a->wl);
    free(a->nz);
    free(a->ep.bound);
    perf_plan_free(&a->pl);
    perf_model_free(a->m);
}

/* Weight-weighted sparsity of a step; NaN when no unit reports one. */
static double step_sparsity(const struct perf_plan *pl, const struct adapt_trace_step *s)
{
    double num = 0, den = 0;
    for (int u = 0; u < pl->nu; u++)
        if (!isnan(s->units[u].sparsity)) {
            num += s->units[u].sparsity * (double)pl->W[u];
            den += (double)pl->W[u];
        }
    return den > 0 ? num / den : NAN;
}

/* The plan, the epoch structure, the run and the per-unit arrays. */
static enum adapt_status analysis_init(struct analysis *a, const struct perf_hw *hw)
{
    const struct adapt_trace *t = a->t;
    enum adapt_status st;
    a->batch = t->header.cfg.batch;
    a->accum = t->header.cfg.accumulation;
    if (a->batch < 1 || a->accum < 1)
        return ADAPT_ERROR(ADAPT_EFORMAT,
                           "%s:1: config.train.batch (>= 1) and config.train.accumulation_steps "
                           "(>= 1, default 1) must be integers",
                           t->path);
    if ((st = perf_plan_init(&a->pl, a->m, hw, (int)a->batch)) != ADAPT_OK) return st;
    int mr = t->header.cfg.muppet_r > 0 ? t->header.cfg.muppet_r : a->p->muppet_r;
    a->pl.state_bits = perf_policy_state_bits(t->header.policy, a->pl.Wsum, mr, &a->pl.grad32);
    a->pl.has_roles = t->header.has_roles;
    memcpy(a->pl.role_bits, t->header.role_bits, sizeof a->pl.role_bits);
    int64_t last = t->steps[t->n_steps - 1].step;
    a->end = last;
    if (t->n_epochs && t->epochs[t->n_epochs - 1].step > a->end)
        a->end = t->epochs[t->n_epochs - 1].step;
    if ((st = epochs_build(&a->ep, t, a->batch * a->accum)) != ADAPT_OK) return st;
    a->tail = a->end > last;
    size_t nu = (size_t)a->pl.nu;
    a->r = perf_run_alloc(a->m, t->n_steps + a->tail, t->n_epochs);
    a->wl = calloc(nu, sizeof *a->wl);
    a->nz = calloc(nu, sizeof *a->nz);
    a->uc32 = calloc(nu, sizeof *a->uc32);
    a->ucq = calloc(nu, sizeof *a->ucq);
    a->wl_sum = calloc(nu, sizeof *a->wl_sum);
    if (!a->r || !a->wl || !a->nz || !a->uc32 || !a->ucq || !a->wl_sum)
        return ADAPT_ERROR(ADAPT_ENOMEM, "%s: out of memory", t->path);
    return ADAPT_OK;
}

/* The run's name, file, policy, model, data set and shape. */
static enum adapt_status run_identity(struct analysis *a, const struct perf_hw *hw)
{
    const struct adapt_trace *t = a->t;
    struct perf_run *r = a->r;
    char nb[512];
    r->name = perf_dupstr(run_name(t, nb, sizeof nb));
    r->config = perf_dupstr(t->header.config_file ? t->header.config_file : "");
    r->compat = perf_dupstr(run_compat(t));
    r->path = perf_dupstr(t->path);
    r->policy = perf_dupstr(t->header.policy);
    r->model = perf_dupstr(t->header.model.name);
    r->dataset = perf_dupstr(t->header.dataset.name);
    r->batch = (int)a->batch;
    r->accumulation = (int)a->accum;
    r->complete = t->has_end;
    r->epochs = t->n_epochs;
    r->steps = a->end;
    if (!r->name || !r->path || !r->policy || !r->model || !r->dataset || !r->config ||
        !r->compat)
        return ADAPT_ERROR(ADAPT_ENOMEM, "%s: out of memory", t->path);
    if (hw) {
        r->has_hw = 1;
        if (!(r->hw_device = perf_dupstr(perf_hw_describe(hw))))
            return ADAPT_ERROR(ADAPT_ENOMEM, "%s: out of memory", t->path);
    }
    return ADAPT_OK;
}

/* Push-down overhead of the events of step line s, counting them. */
static double pushdown_overhead(struct analysis *a, const struct adapt_trace_step *s)
{
    const struct perf_params *p = a->p;
    struct perf_run *r = a->r;
    double ovh_pd = 0;
    for (int k = 0; k < s->n_events; k++) {
        const struct adapt_trace_event *e = &s->events[k];
        if (e->kind == ADAPT_TRACE_EVENT_PU) {
            r->n_pu++;
            r->units[e->unit].n_pu++;
            continue;
        }
        r->n_pd++;
        r->units[e->unit].n_pd++;
        double sample = e->sample > 0 ? (double)e->sample : (double)a->pl.W[e->unit];
        double evals = e->kl_evals > 0 ? e->kl_evals : e->bisect_steps;
        int bins = s->units[e->unit].r > 0 ? s->units[e->unit].r : 0;
        ovh_pd += evals * sample * (p->quantize_ops + p->bin_ops) + sample * p->bin_ops +
                  evals * bins * p->kl_ops;
    }
    return ovh_pd;
}

/* Prices interval i, (prev, step]: step line i, or the tail after the last
 * one (i = n_steps) at its state. */
static enum adapt_status price_step(struct analysis *a, int64_t i, int64_t prev, int64_t *step_out)
{
    const struct adapt_trace *t = a->t;
    struct perf_run *r = a->r;
    struct perf_plan *pl = &a->pl;
    const struct adapt_trace_step *s = &t->steps[i < t->n_steps ? i : t->n_steps - 1];
    int64_t step = i < t->n_steps ? s->step : a->end;
    int64_t delta = step - prev;
    double samples = samples_to(&a->ep, step) - samples_to(&a->ep, prev);
    int lb_units = 0;
    for (int u = 0; u < pl->nu; u++) {
        const struct adapt_trace_unit_state *us = &s->units[u];
        a->wl[u] = us->wl;
        a->nz[u] = isnan(us->sparsity) ? 1.0 : 1.0 - us->sparsity;
        a->wl_sum[u] += (double)delta * us->wl;
        if (!isnan(us->lb)) lb_units = 1;
    }
    double ovh_pd = i < t->n_steps ? pushdown_overhead(a, s) : 0, ovh_acc = 0;
    for (int u = 0; lb_units && u < pl->nu; u++)
        if (!isnan(s->units[u].lb)) ovh_acc += (double)delta * pl->W[u] * a->p->gacc_ops;
    if (i == t->n_steps && delta > INT64_MAX / a->accum)
        return ADAPT_ERROR(ADAPT_EFORMAT,
                           "%s:1: config.train.accumulation_steps = %lld times the %lld steps "
                           "after the last step record overflows a 64-bit count",
                           t->path, (long long)a->accum, (long long)delta);
    int64_t acc = i < t->n_steps ? s->accum : delta * a->accum;
    struct perf_interval iv = {0};
    iv.unit_c32 = a->uc32;
    iv.unit_cq = a->ucq;
    enum adapt_status st =
        perf_price_interval(pl, a->p, a->wl, a->nz, samples, delta, acc, ovh_pd + ovh_acc, &iv);
    if (st != ADAPT_OK) return st;
    perf_interval_add(r, &iv);
    r->overhead_pd += ovh_pd;
    r->overhead_acc += ovh_acc;
    r->overhead += ovh_pd + ovh_acc;
    r->samples += samples;
    struct perf_point *pt = &r->points[r->n_points++];
    pt->step = step;
    pt->epoch_x = epoch_x(&a->ep, step);
    pt->samples = samples;
    pt->c32 = iv.c32;
    pt->cq = iv.cq;
    pt->overhead = ovh_pd + ovh_acc;
    double mem = perf_memory_bits(pl, a->wl, (int)a->batch);
    if (mem > a->mem_peak) a->mem_peak = mem;
    double sp = i < t->n_steps ? step_sparsity(pl, s) : NAN;
    if (!isnan(sp)) {
        a->sp_sum += sp;
        a->sp_n++;
    }
    *step_out = step;
    return ADAPT_OK;
}

/* The comp policy's search (sample records): each sampled plan priced at its own formats, as
 * overhead before the first step (added to the first interval, so the cost curve and the
 * per-epoch costs include it). */
static enum adapt_status price_search(struct analysis *a, const struct perf_hw *hw)
{
    const struct adapt_trace *t = a->t;
    struct perf_run *r = a->r;
    double cq_all = 0, tq_all = 0;
    for (int i = 0; i < t->n_samples; i++) {
        const struct adapt_trace_sample *s = &t->samples[i];
        int64_t micro = s->samples / a->batch + (s->samples % a->batch != 0);
        double cq, tq;
        /* without conversions, as the training intervals are priced */
        enum adapt_status st =
            perf_price_plan(a->m, a->p, hw, s->wl, s->gov, NULL, (int)a->batch,
                            (double)s->samples, s->steps, micro, &cq, &tq);
        if (st != ADAPT_OK) return st;
        cq_all += cq;
        if (hw) tq_all += tq;
        if (s->stage == 1) r->search_epochs++;
        else r->search_batches++;
    }
    r->overhead_search = cq_all;
    r->overhead += cq_all;
    r->cq += cq_all;
    r->tq_s += tq_all;
    if (r->n_points > 0) {
        r->points[0].cq += cq_all;
        r->points[0].overhead += cq_all;
    }
    return ADAPT_OK;
}

/* Cumulative cost at each epoch record (the interval holding the epoch's last
 * step counts in proportion to its samples) and the best validation accuracy. */
static void mark_epochs(struct analysis *a)
{
    const struct adapt_trace *t = a->t;
    struct perf_run *r = a->r;
    double c32 = 0, cq = 0;
    int64_t k = 0, before = 0;
    for (int e = 0; e < t->n_epochs; e++) {
        int64_t es = t->epochs[e].step;
        while (k < r->n_points && r->points[k].step <= es) {
            c32 += r->points[k].c32;
            cq += r->points[k].cq;
            before = r->points[k].step;
            k++;
        }
        double f = 0;
        if (k < r->n_points && es > before) {
            double part = samples_to(&a->ep, es) - samples_to(&a->ep, before);
            f = r->points[k].samples > 0 ? part / r->points[k].samples : 0;
        }
        r->epoch_c32[e] = c32 + f * (k < r->n_points ? r->points[k].c32 : 0);
        r->epoch_cq[e] = cq + f * (k < r->n_points ? r->points[k].cq : 0);
        r->epoch_val_acc[e] = t->epochs[e].val_acc;
        if (!isnan(t->epochs[e].val_acc) &&
            (isnan(r->best_val_acc) || t->epochs[e].val_acc > r->best_val_acc))
            r->best_val_acc = t->epochs[e].val_acc;
    }
    r->n_epoch_marks = t->n_epochs;
}

/* Per-unit results, model size, inference speed-up and sparsity at the
 * formats of the last step line. */
static enum adapt_status final_formats(struct analysis *a, const struct perf_hw *hw)
{
    const struct adapt_trace *t = a->t;
    struct perf_run *r = a->r;
    struct perf_plan *pl = &a->pl;
    const struct adapt_trace_step *fin = &t->steps[t->n_steps - 1];
    double size_num = 0, size_den = 0;
    for (int u = 0; u < pl->nu; u++) {
        struct perf_unit_result *ur = &r->units[u];
        const struct adapt_trace_unit_state *us = &fin->units[u];
        ur->passes = pl->passes[u];
        ur->c32 = a->uc32[u];
        ur->cq = a->ucq[u];
        ur->mean_wl = a->wl_sum[u] / (double)a->end;
        ur->final_wl = us->wl;
        ur->final_fl = us->fl;
        ur->final_sparsity = us->sparsity;
        a->wl[u] = us->wl;
        a->nz[u] = isnan(us->sparsity) ? 1.0 : 1.0 - us->sparsity;
        /* with [roles], the weights as the weight role stores them */
        const double wbits = pl->has_roles && pl->role_bits[0] >= 0 ? pl->role_bits[0] : us->wl;
        size_num += wbits * (double)pl->W[u] * a->nz[u];
        size_den += 32.0 * (double)pl->W[u];
    }
    r->model_size = size_num / size_den;
    double f32, fq;
    perf_forward_cost(pl, a->wl, a->nz, &f32, &fq);
    r->inference_su = f32 / fq;
    if (hw) {
        double t32, tq;
        enum adapt_status st = perf_forward_seconds(pl, a->wl, &t32, &tq);
        if (st != ADAPT_OK) return st;
        r->inference_su_hw = t32 / tq;
    }
    r->sparsity_final = step_sparsity(pl, fin);
    r->sparsity_mean = a->sp_n ? a->sp_sum / (double)a->sp_n : NAN;
    return ADAPT_OK;
}

enum adapt_status perf_run_analyze(struct perf_run **out, const struct adapt_trace *t,
                                   const struct perf_params *p, const struct perf_hw *hw)
{
    *out = NULL;
    struct analysis a;
    memset(&a, 0, sizeof a);
    a.t = t;
    a.p = p;
    enum adapt_status st = perf_model_from_header(&a.m, &t->header, t->path);
    if (st != ADAPT_OK) return st;
    if ((st = validate(t)) != ADAPT_OK || (st = analysis_init(&a, hw)) != ADAPT_OK ||
        (st = run_identity(&a, hw)) != ADAPT_OK)
        goto free_analysis;
    struct perf_run *r = a.r;
    double mem32 = perf_memory_bits_fp32(&a.pl, (int)a.batch);
    for (int64_t i = 0, prev = 0; i < t->n_steps + a.tail; i++)
        if ((st = price_step(&a, i, prev, &prev)) != ADAPT_OK) goto free_analysis;
    if ((st = price_search(&a, hw)) != ADAPT_OK) goto free_analysis;
    mark_epochs(&a);
    if (t->has_test) r->test_acc = t->test.test_acc;
    r->mem_rel = a.mem_peak / mem32;
    if ((st = final_formats(&a, hw)) != ADAPT_OK) goto free_analysis;
    perf_run_finish(r);
    if (!isnan(p->target_acc)) perf_run_set_target(r, p->target_acc);
free_analysis:
    if (st != ADAPT_OK) perf_run_free(a.r);
    else *out = a.r;
    analysis_free(&a);
    return st;
}
