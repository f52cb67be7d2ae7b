/* src/perfmodel/schedule.c: the cost of a global per-epoch word-length schedule
 * (perf_schedule_price): MuPPET's runs priced without a trace, every unit at
 * the schedule's WL, dense, without overhead, one interval per epoch. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/perfmodel/internal.h"
#include "src/perfmodel/perf.h"

#define SCHEDULE_MAX_LEVELS 64

/* A parsed schedule "WL:EPOCHS,...". */
struct schedule {
    int n;                          /* levels */
    int total;                      /* epochs over all levels */
    int wl[SCHEDULE_MAX_LEVELS];    /* word length of each level */
    int epochs[SCHEDULE_MAX_LEVELS]; /* epochs of each level */
};

static enum adapt_status schedule_syntax(const char *schedule)
{
    return ADAPT_ERROR(ADAPT_EINVAL,
                       "schedule '%s': expected WL:EPOCHS,... with WL in 1..32 and EPOCHS >= 1 "
                       "(e.g. 8:16,12:10,14:14,16:14,32:45)",
                       schedule);
}

static enum adapt_status schedule_parse(const char *schedule, struct schedule *sc)
{
    sc->n = sc->total = 0;
    const char *s = schedule;
    while (*s) {
        char *end;
        long w = strtol(s, &end, 10), e;
        if (end == s || *end != ':') return schedule_syntax(schedule);
        const char *q = end + 1;
        e = strtol(q, &end, 10);
        if (end == q || (*end && *end != ',') || w < 1 || w > 32 || e < 1 || e > 100000 ||
            sc->n == SCHEDULE_MAX_LEVELS)
            return schedule_syntax(schedule);
        sc->wl[sc->n] = (int)w;
        sc->epochs[sc->n++] = (int)e;
        sc->total += (int)e;
        if (*end == ',' && !end[1]) return schedule_syntax(schedule);
        s = *end ? end + 1 : end;
    }
    return sc->n ? ADAPT_OK : schedule_syntax(schedule);
}

/* One schedule being priced: the plan, the run being filled and scratch arrays. */
struct pricing {
    const struct schedule *sc;
    const struct perf_params *p;
    struct perf_plan pl;
    struct perf_run *r;
    int batch;
    int64_t samples_per_epoch, steps_per_epoch;
    int *wl;              /* (nu) the formats of the epoch being priced */
    double *nz;           /* (nu) non-zero fractions: 1 */
    double *uc32, *ucq;   /* (nu) per-unit compute costs */
};

/* The run's name, model and shape. */
static enum adapt_status schedule_identity(struct pricing *pr, const char *schedule,
                                           const struct perf_model *m, const struct perf_hw *hw)
{
    struct perf_run *r = pr->r;
    char *name = malloc(strlen(schedule) + 16);
    if (!name) return ADAPT_ERROR(ADAPT_ENOMEM, "schedule: out of memory");
    sprintf(name, "schedule %s", schedule);
    r->name = name;
    r->path = perf_dupstr("");
    r->config = perf_dupstr("");
    r->compat = perf_dupstr("");
    r->policy = perf_dupstr("schedule");
    r->model = perf_dupstr(m->name);
    r->dataset = perf_dupstr("");
    if (!r->path || !r->policy || !r->model || !r->dataset || !r->config || !r->compat)
        return ADAPT_ERROR(ADAPT_ENOMEM, "schedule: out of memory");
    r->batch = pr->batch;
    r->accumulation = 1;
    r->complete = 1;
    r->epochs = pr->sc->total;
    r->steps = pr->steps_per_epoch * pr->sc->total;
    if (hw) {
        r->has_hw = 1;
        if (!(r->hw_device = perf_dupstr(perf_hw_describe(hw))))
            return ADAPT_ERROR(ADAPT_ENOMEM, "schedule: out of memory");
    }
    return ADAPT_OK;
}

/* Prices each epoch of each level; *wl_steps = sum of WL x optimizer steps. */
static enum adapt_status price_epochs(struct pricing *pr, double *mem_peak, double *wl_steps)
{
    const struct schedule *sc = pr->sc;
    struct perf_run *r = pr->r;
    struct perf_interval iv = {0};
    iv.unit_c32 = pr->uc32;
    iv.unit_cq = pr->ucq;
    int epoch = 0;
    for (int l = 0; l < sc->n; l++)
        for (int e = 0; e < sc->epochs[l]; e++, epoch++) {
            for (int u = 0; u < pr->pl.nu; u++) {
                pr->wl[u] = sc->wl[l];
                pr->nz[u] = 1.0;
            }
            enum adapt_status st = perf_price_interval(
                &pr->pl, pr->p, pr->wl, pr->nz, (double)pr->samples_per_epoch,
                pr->steps_per_epoch, pr->steps_per_epoch, 0.0, &iv);
            if (st != ADAPT_OK) return st;
            perf_interval_add(r, &iv);
            r->samples += (double)pr->samples_per_epoch;
            *wl_steps += (double)sc->wl[l] * pr->steps_per_epoch;
            struct perf_point *pt = &r->points[r->n_points++];
            pt->step = (int64_t)(epoch + 1) * pr->steps_per_epoch;
            pt->epoch_x = epoch + 1;
            pt->samples = (double)pr->samples_per_epoch;
            pt->c32 = iv.c32;
            pt->cq = iv.cq;
            r->epoch_c32[epoch] = r->c32;
            r->epoch_cq[epoch] = r->cq;
            r->epoch_val_acc[epoch] = NAN;
            double mem = perf_memory_bits(&pr->pl, pr->wl, pr->batch);
            if (mem > *mem_peak) *mem_peak = mem;
        }
    r->n_epoch_marks = sc->total;
    return ADAPT_OK;
}

/* Per-unit results, model size and inference speed-up at the last level. */
static enum adapt_status final_level(struct pricing *pr, double wl_steps,
                                     const struct perf_hw *hw)
{
    const struct schedule *sc = pr->sc;
    struct perf_run *r = pr->r;
    for (int u = 0; u < pr->pl.nu; u++) {
        struct perf_unit_result *ur = &r->units[u];
        ur->passes = pr->pl.passes[u];
        ur->c32 = pr->uc32[u];
        ur->cq = pr->ucq[u];
        ur->mean_wl = wl_steps / (double)r->steps;
        ur->final_wl = sc->wl[sc->n - 1];
        ur->final_fl = -1;
    }
    double sz = sc->wl[sc->n - 1] / 32.0;
    r->model_size = sz;
    double f32, fq;
    perf_forward_cost(&pr->pl, pr->wl, pr->nz, &f32, &fq);
    r->inference_su = f32 / fq;
    if (hw) {
        double t32, tq;
        enum adapt_status st = perf_forward_seconds(&pr->pl, pr->wl, &t32, &tq);
        if (st != ADAPT_OK) return st;
        r->inference_su_hw = t32 / tq;
    }
    return ADAPT_OK;
}

enum adapt_status perf_schedule_price(struct perf_run **out, const char *schedule,
                                      const struct perf_model *m, int batch,
                                      int64_t samples_per_epoch, const struct perf_params *p,
                                      const struct perf_hw *hw)
{
    *out = NULL;
    struct schedule sc;
    enum adapt_status st = schedule_parse(schedule, &sc);
    if (st != ADAPT_OK) return st;
    if (batch < 1 || samples_per_epoch < 1)
        return ADAPT_ERROR(ADAPT_EINVAL, "schedule: batch (%d) and samples per epoch (%lld) must "
                                         "be at least 1",
                           batch, (long long)samples_per_epoch);
    int64_t steps_per_epoch = samples_per_epoch / batch + (samples_per_epoch % batch != 0);
    if (steps_per_epoch > ADAPT_TRACE_STEP_MAX / sc.total)
        return ADAPT_ERROR(ADAPT_EINVAL,
                           "schedule: %d epochs of %lld steps (batch %d) are more "
                           "than %lld optimizer steps",
                           sc.total, (long long)steps_per_epoch, batch,
                           (long long)ADAPT_TRACE_STEP_MAX);
    struct pricing pr = {.sc = &sc, .p = p, .batch = batch, .samples_per_epoch = samples_per_epoch};
    if ((st = perf_plan_init(&pr.pl, m, hw, batch)) != ADAPT_OK) return st;
    pr.pl.state_bits = perf_policy_state_bits("schedule", pr.pl.Wsum, p->muppet_r, &pr.pl.grad32);
    pr.steps_per_epoch = steps_per_epoch;
    pr.r = perf_run_alloc(m, sc.total, sc.total);
    pr.wl = calloc((size_t)m->n_units, sizeof *pr.wl);
    pr.nz = calloc((size_t)m->n_units, sizeof *pr.nz);
    pr.uc32 = calloc((size_t)m->n_units, sizeof *pr.uc32);
    pr.ucq = calloc((size_t)m->n_units, sizeof *pr.ucq);
    if (!pr.r || !pr.wl || !pr.nz || !pr.uc32 || !pr.ucq) {
        st = ADAPT_ERROR(ADAPT_ENOMEM, "schedule: out of memory");
        goto free_pricing;
    }
    double mem_peak = 0, wl_steps = 0;
    if ((st = schedule_identity(&pr, schedule, m, hw)) != ADAPT_OK ||
        (st = price_epochs(&pr, &mem_peak, &wl_steps)) != ADAPT_OK)
        goto free_pricing;
    pr.r->mem_rel = mem_peak / perf_memory_bits_fp32(&pr.pl, batch);
    if ((st = final_level(&pr, wl_steps, hw)) != ADAPT_OK) goto free_pricing;
    perf_run_finish(pr.r);
    /* a schedule is MuPPET's run on its own baseline: no rescaling */
    pr.r->su3 = pr.r->su1_paper;
    *out = pr.r;
    pr.r = NULL;
free_pricing:
    perf_run_free(pr.r);
    free(pr.wl);
    free(pr.nz);
    free(pr.uc32);
    free(pr.ucq);
    perf_plan_free(&pr.pl);
    return st;
}
