/* src/perfmodel/cost.c: the analytical (and hardware-calibrated) cost of a run.
 *
 * Costs are MAC-equivalents (one 32-bit MAC or one FP32 element operation =
 * 1). For a logged interval (prev step, step] of D optimizer steps and S
 * samples, with the units' state at `step` (WL_u, non-zero fraction nz_u):
 *
 *   compute  S * sum_u passes_u * F_u * nz_u * WL_u / 32
 *            passes = 3 (forward, backward-data, weight gradient), 2 for the
 *            unit that reads the network input (no backward-data)
 *   elemwise S * sum_j 2 * E_j * WL_gov(j) / 32   (forward + backward; layer j
 *            takes the format of the last unit before it, doc/models.md)
 *   update   D * P * update_ops + max(accum - D, 0) * P * accum_ops   (FP32)
 *   overhead push-down: evals * sample * (quantize_ops + bin_ops)
 *            + sample * bin_ops (the weights' own histogram) + evals * r * kl_ops;
 *            AdaPT (units that carry a lookback): D * weights_u * gacc_ops
 *
 * C32 prices the same intervals at WL 32, dense, without overhead. Samples
 * per step come from the epoch structure: each optimizer step trains
 * batch * accumulation samples, the last step of an epoch the remainder of
 * the header's dataset.train.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "src/perfmodel/perf.h"

#define WL_SLOTS 33

void perf_params_init(struct perf_params *p)
{
    memset(p, 0, sizeof *p);
    p->paper_compat = 0;
    p->target_acc = NAN;
    p->target_tol = 0.005;
    p->update_ops = 4.0;
    p->accum_ops = 1.0;
    p->quantize_ops = 2.0;
    p->bin_ops = 1.0;
    p->kl_ops = 1.0;
    p->gacc_ops = 2.0;
    p->muppet_r = 3;
}

/* Per-model quantities the interval prices need. */
struct plan {
    const struct perf_model *m;
    int nu;
    int64_t *F, *W;   /* (nu) forward MACs per sample; weight elements */
    int *passes;      /* (nu) */
    int64_t P, Wsum;  /* trainable parameters; sum of W */
    int ne;
    int64_t *E;       /* (ne) element operations per sample of element-wise layers */
    int *egov;        /* (ne) governing unit */
    int na;
    int64_t *A;       /* (na) stored activations per sample (layer outputs, flatten excluded) */
    int *agov;        /* (na) */
    int64_t in_numel; /* network input per sample (quantized with unit 0) */
    /* memory of the policy's own state (perf_policy_state_bits) */
    double state_bits; /* bits held whatever the formats */
    int grad32;        /* 1: weight gradients are float32 tensors whatever the WL (AMP) */
    /* hardware-calibrated: seconds per micro-batch, cached per unit/layer and WL */
    const struct perf_hw *hw;
    int batch;
    double *tg, *tf;  /* (nu * WL_SLOTS) all GEMMs / forward GEMM; NaN = not yet */
    double *te;       /* (ne * WL_SLOTS) one pass of the layer's element operations */
    double t_op32;    /* seconds per FP32 element operation */
};

static void plan_free(struct plan *pl)
{
    free(pl->F);
    free(pl->W);
    free(pl->passes);
    free(pl->E);
    free(pl->egov);
    free(pl->A);
    free(pl->agov);
    free(pl->tg);
    free(pl->tf);
    free(pl->te);
    memset(pl, 0, sizeof *pl);
}

static enum adapt_status plan_init(struct plan *pl, const struct perf_model *m,
                                   const struct perf_hw *hw, int batch)
{
    memset(pl, 0, sizeof *pl);
    pl->m = m;
    pl->nu = m->n_units;
    int nl = m->n_layers;
    pl->F = calloc((size_t)pl->nu, sizeof *pl->F);
    pl->W = calloc((size_t)pl->nu, sizeof *pl->W);
    pl->passes = calloc((size_t)pl->nu, sizeof *pl->passes);
    pl->E = calloc((size_t)nl, sizeof *pl->E);
    pl->egov = calloc((size_t)nl, sizeof *pl->egov);
    pl->A = calloc((size_t)nl, sizeof *pl->A);
    pl->agov = calloc((size_t)nl, sizeof *pl->agov);
    if (!pl->F || !pl->W || !pl->passes || !pl->E || !pl->egov || !pl->A || !pl->agov) goto nomem;
    for (int u = 0; u < pl->nu; u++) {
        struct perf_gemm g[3];
        pl->F[u] = m->units[u].macs;
        pl->W[u] = m->units[u].weights;
        pl->passes[u] = perf_model_unit_gemms(m, u, 1, g);
        pl->Wsum += pl->W[u];
    }
    pl->P = 0;
    int gov = 0;
    for (int i = 0; i < nl; i++) {
        const struct adapt_trace_layer *l = &m->layers[i];
        pl->P += l->params;
        if (l->unit >= 0) gov = l->unit;
        if (l->unit < 0 && l->elementwise > 0) {
            pl->E[pl->ne] = l->elementwise;
            pl->egov[pl->ne++] = gov;
        }
        if (strcmp(l->kind, "flatten")) {
            int64_t n = 1;
            for (int d = 0; d < l->out_ndim; d++) n *= l->out[d];
            pl->A[pl->na] = n;
            pl->agov[pl->na++] = gov;
        }
    }
    pl->in_numel = (int64_t)m->input[0] * m->input[1] * m->input[2];
    pl->hw = hw;
    pl->batch = batch;
    if (hw) {
        pl->tg = malloc(sizeof(double) * (size_t)pl->nu * WL_SLOTS);
        pl->tf = malloc(sizeof(double) * (size_t)pl->nu * WL_SLOTS);
        pl->te = malloc(sizeof(double) * (size_t)(pl->ne ? pl->ne : 1) * WL_SLOTS);
        if (!pl->tg || !pl->tf || !pl->te) goto nomem;
        for (int i = 0; i < pl->nu * WL_SLOTS; i++) pl->tg[i] = pl->tf[i] = NAN;
        for (int i = 0; i < pl->ne * WL_SLOTS; i++) pl->te[i] = NAN;
        enum adapt_status st = perf_hw_elementwise_seconds(hw, "fp32", 1.0, &pl->t_op32);
        if (st != ADAPT_OK) {
            plan_free(pl);
            return st;
        }
    }
    return ADAPT_OK;
nomem:
    plan_free(pl);
    return ADAPT_ERROR(ADAPT_ENOMEM, "model %s: out of memory", m->name);
}

/* Seconds of unit u's GEMMs (all, and forward only) for one micro-batch at wl. */
static enum adapt_status unit_seconds(struct plan *pl, int u, int wl, double *all, double *fwd)
{
    double *a = &pl->tg[u * WL_SLOTS + wl], *f = &pl->tf[u * WL_SLOTS + wl];
    if (isnan(*a)) {
        struct perf_gemm g[3];
        int n = perf_model_unit_gemms(pl->m, u, pl->batch, g);
        const char *type = perf_hw_type_for(pl->hw, wl);
        double s = 0, t;
        enum adapt_status st;
        for (int i = 0; i < 3; i++) {
            if (n == 2 && i == 1) continue;
            if ((st = perf_hw_gemm_seconds(pl->hw, type, &g[i], &t)) != ADAPT_OK) return st;
            s += t;
            if (i == 0) *f = t;
        }
        *a = s;
    }
    *all = *a;
    *fwd = *f;
    return ADAPT_OK;
}

static enum adapt_status ew_seconds(struct plan *pl, int j, int wl, double *s)
{
    double *e = &pl->te[j * WL_SLOTS + wl];
    if (isnan(*e)) {
        enum adapt_status st = perf_hw_elementwise_seconds(
            pl->hw, perf_hw_type_for(pl->hw, wl), (double)pl->E[j] * pl->batch, e);
        if (st != ADAPT_OK) return st;
    }
    *s = *e;
    return ADAPT_OK;
}

/* Measured seconds of one batch at WL 32 (*t32) and at the formats wl (*tq):
 * every unit's three GEMMs and the element-wise work forward and backward, or
 * with forward_only the forward GEMM and element-wise pass alone. */
static enum adapt_status batch_seconds(struct plan *pl, const int *wl, int forward_only,
                                       double *t32, double *tq)
{
    double a = 0, b = 0, all, f, e;
    const double ew_passes = forward_only ? 1.0 : 2.0;
    enum adapt_status st;
    for (int u = 0; u < pl->nu; u++) {
        if ((st = unit_seconds(pl, u, 32, &all, &f)) != ADAPT_OK) return st;
        a += forward_only ? f : all;
        if ((st = unit_seconds(pl, u, wl[u], &all, &f)) != ADAPT_OK) return st;
        b += forward_only ? f : all;
    }
    for (int j = 0; j < pl->ne; j++) {
        if ((st = ew_seconds(pl, j, 32, &e)) != ADAPT_OK) return st;
        a += ew_passes * e;
        if ((st = ew_seconds(pl, j, wl[pl->egov[j]], &e)) != ADAPT_OK) return st;
        b += ew_passes * e;
    }
    *t32 = a;
    *tq = b;
    return ADAPT_OK;
}


/* Cost of one interval. wl[u] in 1..32, nz[u] in [0,1]. */
struct interval {
    double c32, cq, c32_compute, cq_compute, c32_ew, cq_ew, update;
    double t32, tq;
    double *unit_c32, *unit_cq; /* (nu) compute parts, added to */
};

/* Adds an interval's costs and measured times to the run totals. */
static void add_interval(struct perf_run *r, const struct interval *iv)
{
    r->c32 += iv->c32;
    r->cq += iv->cq;
    r->c32_compute += iv->c32_compute;
    r->cq_compute += iv->cq_compute;
    r->c32_ew += iv->c32_ew;
    r->cq_ew += iv->cq_ew;
    r->update += iv->update;
    r->t32_s += iv->t32;
    r->tq_s += iv->tq;
}

static enum adapt_status price(struct plan *pl, const struct perf_params *p, const int *wl,
                               const double *nz, double samples, int64_t delta, int64_t accum,
                               double overhead, struct interval *iv)
{
    double c32 = 0, cq = 0, e32 = 0, eq = 0;
    for (int u = 0; u < pl->nu; u++) {
        double full = samples * pl->passes[u] * (double)pl->F[u];
        /* forward and backward-data multiply by W and skip its zeros; the weight
         * gradient dW = dY X^T reads no weight and stays dense */
        double q = samples * (double)pl->F[u] * wl[u] / 32.0 * (nz[u] * (pl->passes[u] - 1) + 1.0);
        c32 += full;
        cq += q;
        if (iv->unit_c32) iv->unit_c32[u] += full;
        if (iv->unit_cq) iv->unit_cq[u] += q;
    }
    for (int j = 0; j < pl->ne; j++) {
        double full = samples * 2.0 * (double)pl->E[j];
        e32 += full;
        eq += full * wl[pl->egov[j]] / 32.0;
    }
    int64_t extra = accum > delta ? accum - delta : 0;
    double upd = (double)delta * pl->P * p->update_ops + (double)extra * pl->P * p->accum_ops;
    iv->c32_compute = c32;
    iv->cq_compute = cq;
    iv->c32_ew = e32;
    iv->cq_ew = eq;
    iv->update = upd;
    iv->c32 = c32 + e32 + upd;
    iv->cq = cq + eq + upd + overhead;
    iv->t32 = iv->tq = 0;
    if (pl->hw) {
        /* dense kernels: sparsity is not exploited by the measured GEMMs */
        double mb = samples / pl->batch, t32, tq;
        enum adapt_status st = batch_seconds(pl, wl, 0, &t32, &tq);
        if (st != ADAPT_OK) return st;
        iv->t32 = mb * t32 + upd * pl->t_op32;
        iv->tq = mb * tq + (upd + overhead) * pl->t_op32;
    }
    return ADAPT_OK;
}

/* Forward cost of one sample (inference) at the given formats. */
static void forward_cost(const struct plan *pl, const int *wl, const double *nz, double *c32,
                         double *cq)
{
    double a = 0, b = 0;
    for (int u = 0; u < pl->nu; u++) {
        a += (double)pl->F[u];
        b += (double)pl->F[u] * nz[u] * wl[u] / 32.0;
    }
    for (int j = 0; j < pl->ne; j++) {
        a += (double)pl->E[j];
        b += (double)pl->E[j] * wl[pl->egov[j]] / 32.0;
    }
    *c32 = a;
    *cq = b;
}

static enum adapt_status forward_seconds(struct plan *pl, const int *wl, double *t32, double *tq)
{
    return batch_seconds(pl, wl, 1, t32, tq);
}

/* Training memory in bits for micro-batch b: FP32 master weights and
 * momentum always; gradients at WL (FP32 for non-unit parameters, and for
 * every parameter with grad32); a quantized weight copy when WL < 32; the
 * policy's own state (state_bits); stored activations at the WL of their
 * unit (the input at unit 0's). */
static double memory_bits(const struct plan *pl, const int *wl, int b)
{
    double m = 64.0 * (double)pl->P + 32.0 * (double)(pl->P - pl->Wsum) + pl->state_bits;
    for (int u = 0; u < pl->nu; u++)
        m += (double)pl->W[u] * ((pl->grad32 ? 32 : wl[u]) + (wl[u] < 32 ? wl[u] : 0));
    double act = (double)pl->in_numel * wl[0];
    for (int j = 0; j < pl->na; j++) act += (double)pl->A[j] * wl[pl->agov[j]];
    return m + act * b;
}

static double memory_bits_fp32(const struct plan *pl, int b)
{
    double act = (double)pl->in_numel;
    for (int j = 0; j < pl->na; j++) act += (double)pl->A[j];
    return 96.0 * (double)pl->P + 32.0 * act * b;
}

double perf_policy_state_bits(const char *policy, int64_t unit_weights, int muppet_r,
                              int *grad32)
{
    if (grad32) *grad32 = policy && !strcmp(policy, "amp");
    if (!policy) return 0;
    /* AdaPT: the accumulated normalised gradient G, float32, weight-shaped per unit */
    if (!strcmp(policy, "adapt")) return 32.0 * (double)unit_weights;
    /* MuPPET: the last r epochs' weight gradients of every unit, float32 */
    if (!strcmp(policy, "muppet") || !strcmp(policy, "schedule"))
        return 32.0 * (double)muppet_r * (double)unit_weights;
    return 0;
}

double perf_su3(double c32, double cq, int epochs, int accumulation, int batch, int cifar)
{
    if (!(epochs > 0 && accumulation > 0 && batch > 0)) return NAN;
    double bs = cifar ? 128.0 / (double)batch : 1.0;
    double den = cq + c32 * bs / (double)accumulation;
    return den > 0 ? 150.0 / (double)epochs * 2.0 * c32 / den : NAN;
}

double perf_su2_reference(double su1_paper, int target_epoch, int epochs)
{
    if (target_epoch < 0 || epochs < 1 || target_epoch >= epochs) return NAN;
    return su1_paper * (double)epochs / (double)(target_epoch + 1);
}

/* ------------------------------------------------------------- run helpers */

static char *dupstr(const char *s)
{
    if (!s) s = "";
    char *c = malloc(strlen(s) + 1);
    if (c) strcpy(c, s);
    return c;
}

void perf_run_free(struct perf_run *r)
{
    if (!r) return;
    free(r->name);
    free(r->path);
    free(r->config);
    free(r->compat);
    free(r->policy);
    free(r->model);
    free(r->dataset);
    free(r->hw_device);
    for (int u = 0; u < r->n_units; u++) free(r->units[u].name);
    free(r->units);
    free(r->points);
    free(r->epoch_c32);
    free(r->epoch_cq);
    free(r->epoch_val_acc);
    free(r);
}

static struct perf_run *run_alloc(const struct perf_model *m, int64_t n_points, int n_epochs)
{
    struct perf_run *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->n_units = m->n_units;
    r->units = calloc((size_t)m->n_units, sizeof *r->units);
    r->points = calloc((size_t)(n_points > 0 ? n_points : 1), sizeof *r->points);
    r->epoch_c32 = calloc((size_t)(n_epochs > 0 ? n_epochs : 1), sizeof(double));
    r->epoch_cq = calloc((size_t)(n_epochs > 0 ? n_epochs : 1), sizeof(double));
    r->epoch_val_acc = calloc((size_t)(n_epochs > 0 ? n_epochs : 1), sizeof(double));
    if (!r->units || !r->points || !r->epoch_c32 || !r->epoch_cq || !r->epoch_val_acc) {
        perf_run_free(r);
        return NULL;
    }
    for (int u = 0; u < m->n_units; u++) {
        struct perf_unit_result *ur = &r->units[u];
        if (!(ur->name = dupstr(m->units[u].name))) {
            perf_run_free(r);
            return NULL;
        }
        ur->macs = m->units[u].macs;
        ur->weights = m->units[u].weights;
        ur->final_sparsity = NAN;
    }
    r->su2 = r->su2_paper = r->su2_ref = r->su3 = r->target_acc = NAN;
    r->target_epoch = r->baseline_epoch = -1;
    r->sparsity_final = r->sparsity_mean = r->best_val_acc = r->test_acc = NAN;
    return r;
}

static void run_finish(struct perf_run *r)
{
    r->su1 = r->cq > 0 ? r->c32 / r->cq : NAN;
    r->su1_paper = r->cq + r->c32 > 0 ? 2.0 * r->c32 / (r->cq + r->c32) : NAN;
    r->su3 = perf_su3(r->c32, r->cq, r->epochs, r->accumulation, r->batch,
                      r->dataset && !strncmp(r->dataset, "cifar", 5));
    r->overhead_share = r->cq > 0 ? r->overhead / r->cq : NAN;
    if (r->has_hw) r->su1_hw = r->tq_s > 0 ? r->t32_s / r->tq_s : NAN;
}

/* Epoch boundaries: bound[e] = optimizer steps done before epoch e. */
struct epochs {
    int n;         /* boundaries held: epochs 0..n-2 are delimited */
    int64_t *bound;
    int64_t nominal; /* steps of a full epoch */
    double S;        /* samples per epoch */
    int64_t per_step; /* batch * accumulation */
};

static int64_t epoch_of(const struct epochs *ep, int64_t step)
{
    /* the epoch holding optimizer step `step` (1-based): bound[e] < step <= bound[e+1] */
    int lo = 0, hi = ep->n - 1;
    while (hi - lo > 1) {
        int mid = (lo + hi) / 2;
        if (ep->bound[mid] < step) lo = mid;
        else hi = mid;
    }
    return lo;
}

/* Samples trained by steps 1..s. */
static double samples_to(const struct epochs *ep, int64_t s)
{
    if (s <= 0) return 0;
    int64_t e = epoch_of(ep, s);
    double done = (double)e * ep->S;
    double in = (double)(s - ep->bound[e]) * (double)ep->per_step;
    return done + (in < ep->S ? in : ep->S);
}

static double epoch_x(const struct epochs *ep, int64_t s)
{
    if (s <= 0) return 0;
    int64_t e = epoch_of(ep, s);
    double len = (double)(ep->bound[e + 1] - ep->bound[e]);
    return (double)e + (double)(s - ep->bound[e]) / (len > 0 ? len : 1);
}

static enum adapt_status epochs_build(struct epochs *ep, const struct adapt_trace *t, int64_t last,
                                      int64_t per_step)
{
    ep->S = (double)t->header.dataset.train;
    ep->per_step = per_step;
    int64_t micro = (t->header.dataset.train + per_step - 1) / per_step;
    ep->nominal = micro > 0 ? micro : 1;
    int64_t top = last;
    if (t->n_epochs && t->epochs[t->n_epochs - 1].step > top) top = t->epochs[t->n_epochs - 1].step;
    int64_t cap = t->n_epochs + 2 + top / ep->nominal + 1;
    ep->bound = malloc(sizeof(int64_t) * (size_t)cap);
    if (!ep->bound) return ADAPT_ERROR(ADAPT_ENOMEM, "%s: out of memory", t->path);
    ep->n = 0;
    ep->bound[ep->n++] = 0;
    for (int e = 0; e < t->n_epochs; e++) ep->bound[ep->n++] = t->epochs[e].step;
    while (ep->bound[ep->n - 1] < top + 1 && ep->n < cap) {
        ep->bound[ep->n] = ep->bound[ep->n - 1] + ep->nominal;
        ep->n++;
    }
    if (ep->bound[ep->n - 1] <= top) ep->bound[ep->n - 1] = top + 1;
    return ADAPT_OK;
}

/* ------------------------------------------------------------------ analyze */

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
        if (t->epochs[e].step < 1 || (e > 0 && t->epochs[e].step <= t->epochs[e - 1].step)) {
            return ADAPT_ERROR(ADAPT_EFORMAT,
                               "%s:%lld: epoch record %d: step %lld does not follow the previous "
                               "epoch's",
                               t->path, (long long)t->epoch_line[e], t->epochs[e].epoch,
                               (long long)t->epochs[e].step);
        }
    return ADAPT_OK;
}

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

/* A run's name: the stem of its configuration file, with the AdaPT compat
 * mode when it is "reference" and the seed when it is not 1; the trace's
 * folder when the run had no configuration file. */
static const char *run_name(const struct adapt_trace *t, char *buf, size_t n)
{
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

/* Weight-weighted sparsity of a step; NaN when no unit reports one. */
static double step_sparsity(const struct plan *pl, const struct adapt_trace_step *s)
{
    double num = 0, den = 0;
    for (int u = 0; u < pl->nu; u++)
        if (!isnan(s->units[u].sparsity)) {
            num += s->units[u].sparsity * (double)pl->W[u];
            den += (double)pl->W[u];
        }
    return den > 0 ? num / den : NAN;
}

/* The target accuracy, the run's first epoch at it and SU2 in the reference
 * convention (no baseline needed: SU1 paper over the fraction of the run's
 * epochs trained when the target is first reached). */
static void set_target(struct perf_run *run, double target)
{
    run->target_acc = target;
    run->target_epoch = -1;
    for (int e = 0; e < run->n_epoch_marks; e++)
        if (run->epoch_val_acc[e] >= target) {
            run->target_epoch = e;
            break;
        }
    run->su2_ref = perf_su2_reference(run->su1_paper, run->target_epoch, run->n_epoch_marks);
}

enum adapt_status perf_run_analyze(struct perf_run **out, const struct adapt_trace *t,
                                   const struct perf_params *p, const struct perf_hw *hw)
{
    *out = NULL;
    enum adapt_status st;
    struct perf_model *m = NULL;
    struct plan pl;
    struct epochs ep = {0};
    struct perf_run *r = NULL;
    int *wl = NULL;
    double *nz = NULL;
    memset(&pl, 0, sizeof pl);
    if ((st = perf_model_from_header(&m, &t->header, t->path)) != ADAPT_OK) return st;
    if ((st = validate(t)) != ADAPT_OK) goto out;
    int64_t batch = t->header.cfg.batch, accum = t->header.cfg.accumulation;
    if (batch < 1 || accum < 1) {
        st = ADAPT_ERROR(ADAPT_EFORMAT,
                         "%s:1: config.train.batch (>= 1) and config.train.accumulation_steps "
                         "(>= 1, default 1) must be integers",
                         t->path);
        goto out;
    }
    if ((st = plan_init(&pl, m, hw, (int)batch)) != ADAPT_OK) goto out;
    int mr = t->header.cfg.muppet_r > 0 ? t->header.cfg.muppet_r : p->muppet_r;
    pl.state_bits = perf_policy_state_bits(t->header.policy, pl.Wsum, mr, &pl.grad32);
    int64_t last = t->steps[t->n_steps - 1].step;
    int64_t end = last;
    if (t->n_epochs && t->epochs[t->n_epochs - 1].step > end) end = t->epochs[t->n_epochs - 1].step;
    if ((st = epochs_build(&ep, t, end, batch * accum)) != ADAPT_OK) goto out;
    int tail = end > last; /* steps after the last step line, priced at its state */
    r = run_alloc(m, t->n_steps + tail, t->n_epochs);
    wl = calloc((size_t)pl.nu, sizeof *wl);
    nz = calloc((size_t)pl.nu, sizeof *nz);
    double *uc32 = calloc((size_t)pl.nu, sizeof *uc32), *ucq = calloc((size_t)pl.nu, sizeof *ucq);
    double *wl_sum = calloc((size_t)pl.nu, sizeof *wl_sum);
    if (!r || !wl || !nz || !uc32 || !ucq || !wl_sum) {
        free(uc32);
        free(ucq);
        free(wl_sum);
        st = ADAPT_ERROR(ADAPT_ENOMEM, "%s: out of memory", t->path);
        goto out;
    }
    char nb[512];
    r->name = dupstr(run_name(t, nb, sizeof nb));
    r->config = dupstr(t->header.config_file ? t->header.config_file : "");
    r->compat = dupstr(run_compat(t));
    r->path = dupstr(t->path);
    r->policy = dupstr(t->header.policy);
    r->model = dupstr(t->header.model.name);
    r->dataset = dupstr(t->header.dataset.name);
    r->batch = (int)batch;
    r->accumulation = (int)accum;
    r->complete = t->has_end;
    r->epochs = t->n_epochs;
    r->steps = end;
    if (!r->name || !r->path || !r->policy || !r->model || !r->dataset || !r->config ||
        !r->compat) {
        st = ADAPT_ERROR(ADAPT_ENOMEM, "%s: out of memory", t->path);
        goto free_units;
    }
    if (hw) {
        r->has_hw = 1;
        if (!(r->hw_device = dupstr(perf_hw_describe(hw)))) {
            st = ADAPT_ERROR(ADAPT_ENOMEM, "%s: out of memory", t->path);
            goto free_units;
        }
    }
    double mem32 = memory_bits_fp32(&pl, (int)batch), mem_peak = 0;
    double sp_sum = 0;
    int64_t sp_n = 0;
    struct interval iv;
    memset(&iv, 0, sizeof iv);
    iv.unit_c32 = uc32;
    iv.unit_cq = ucq;
    int64_t prev = 0;
    for (int64_t i = 0; i < t->n_steps + tail; i++) {
        const struct adapt_trace_step *s = &t->steps[i < t->n_steps ? i : t->n_steps - 1];
        int64_t step = i < t->n_steps ? s->step : end;
        int64_t delta = step - prev;
        double samples = samples_to(&ep, step) - samples_to(&ep, prev);
        int lb_units = 0;
        for (int u = 0; u < pl.nu; u++) {
            const struct adapt_trace_unit_state *us = &s->units[u];
            wl[u] = us->wl;
            nz[u] = isnan(us->sparsity) ? 1.0 : 1.0 - us->sparsity;
            wl_sum[u] += (double)delta * us->wl;
            if (!isnan(us->lb)) lb_units = 1;
        }
        double ovh_pd = 0, ovh_acc = 0;
        if (i < t->n_steps) {
            for (int k = 0; k < s->n_events; k++) {
                const struct adapt_trace_event *e = &s->events[k];
                if (e->kind == ADAPT_TRACE_EVENT_PU) {
                    r->n_pu++;
                    r->units[e->unit].n_pu++;
                    continue;
                }
                r->n_pd++;
                r->units[e->unit].n_pd++;
                double sample = e->sample > 0 ? (double)e->sample : (double)pl.W[e->unit];
                double evals = e->kl_evals > 0 ? e->kl_evals : e->bisect_steps;
                int bins = s->units[e->unit].r > 0 ? s->units[e->unit].r : 0;
                ovh_pd += evals * sample * (p->quantize_ops + p->bin_ops) + sample * p->bin_ops +
                          evals * bins * p->kl_ops;
            }
        }
        for (int u = 0; lb_units && u < pl.nu; u++)
            if (!isnan(s->units[u].lb)) ovh_acc += (double)delta * pl.W[u] * p->gacc_ops;
        int64_t acc = i < t->n_steps ? s->accum : delta * accum;
        if ((st = price(&pl, p, wl, nz, samples, delta, acc, ovh_pd + ovh_acc, &iv)) != ADAPT_OK)
            goto free_units;
        add_interval(r, &iv);
        r->overhead_pd += ovh_pd;
        r->overhead_acc += ovh_acc;
        r->overhead += ovh_pd + ovh_acc;
        r->samples += samples;
        struct perf_point *pt = &r->points[r->n_points++];
        pt->step = step;
        pt->epoch_x = epoch_x(&ep, step);
        pt->samples = samples;
        pt->c32 = iv.c32;
        pt->cq = iv.cq;
        pt->overhead = ovh_pd + ovh_acc;
        double mem = memory_bits(&pl, wl, (int)batch);
        if (mem > mem_peak) mem_peak = mem;
        if (i < t->n_steps) {
            double sp = step_sparsity(&pl, s);
            if (!isnan(sp)) {
                sp_sum += sp;
                sp_n++;
            }
        }
        prev = step;
    }
    /* cumulative cost at each epoch record: the interval holding the epoch's
     * last step counts in proportion to its samples */
    {
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
                double part = samples_to(&ep, es) - samples_to(&ep, before);
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
    if (t->has_test) r->test_acc = t->test.test_acc;
    r->mem_rel = mem_peak / mem32;
    /* final formats: the last step line */
    const struct adapt_trace_step *fin = &t->steps[t->n_steps - 1];
    double size_num = 0, size_den = 0;
    for (int u = 0; u < pl.nu; u++) {
        struct perf_unit_result *ur = &r->units[u];
        const struct adapt_trace_unit_state *us = &fin->units[u];
        ur->passes = pl.passes[u];
        ur->c32 = uc32[u];
        ur->cq = ucq[u];
        ur->mean_wl = wl_sum[u] / (double)end;
        ur->final_wl = us->wl;
        ur->final_fl = us->fl;
        ur->final_sparsity = us->sparsity;
        wl[u] = us->wl;
        nz[u] = isnan(us->sparsity) ? 1.0 : 1.0 - us->sparsity;
        size_num += (double)us->wl * (double)pl.W[u] * nz[u];
        size_den += 32.0 * (double)pl.W[u];
    }
    r->model_size = size_num / size_den;
    double f32, fq;
    forward_cost(&pl, wl, nz, &f32, &fq);
    r->inference_su = f32 / fq;
    if (hw) {
        double t32, tq;
        if ((st = forward_seconds(&pl, wl, &t32, &tq)) != ADAPT_OK) goto free_units;
        r->inference_su_hw = t32 / tq;
    }
    r->sparsity_final = step_sparsity(&pl, fin);
    r->sparsity_mean = sp_n ? sp_sum / (double)sp_n : NAN;
    run_finish(r);
    if (!isnan(p->target_acc)) set_target(r, p->target_acc);
free_units:
    free(uc32);
    free(ucq);
    free(wl_sum);
out:
    free(wl);
    free(nz);
    free(ep.bound);
    plan_free(&pl);
    perf_model_free(m);
    if (st != ADAPT_OK) {
        perf_run_free(r);
        return st;
    }
    *out = r;
    return ADAPT_OK;
}

enum adapt_status perf_run_set_baseline(struct perf_run *run, const struct perf_run *base,
                                        const struct perf_params *p)
{
    if (isnan(base->best_val_acc))
        return ADAPT_ERROR(ADAPT_EINVAL,
                           "baseline %s has no validation accuracy (epoch records with val_acc): "
                           "SU2 needs one",
                           base->path);
    double target = isnan(p->target_acc) ? base->best_val_acc - p->target_tol : p->target_acc;
    set_target(run, target);
    run->baseline_epoch = -1;
    run->su2 = run->su2_paper = NAN;
    for (int e = 0; e < base->n_epoch_marks; e++)
        if (base->epoch_val_acc[e] >= target) {
            run->baseline_epoch = e;
            break;
        }
    if (run->baseline_epoch >= 0 && run->target_epoch >= 0) {
        double cb = base->epoch_c32[run->baseline_epoch], cq = run->epoch_cq[run->target_epoch];
        run->su2 = cb / cq;
        run->su2_paper = 2.0 * cb / (cq + cb);
    }
    return ADAPT_OK;
}

/* ----------------------------------------------------------------- schedule */

enum adapt_status perf_schedule_price(struct perf_run **out, const char *schedule,
                                      const struct perf_model *m, int batch,
                                      int64_t samples_per_epoch, const struct perf_params *p,
                                      const struct perf_hw *hw)
{
    *out = NULL;
    int lv_wl[64], lv_ep[64], n = 0, total = 0;
    const char *s = schedule;
    while (*s) {
        char *end;
        long w = strtol(s, &end, 10), e;
        if (end == s || *end != ':') goto bad;
        const char *q = end + 1;
        e = strtol(q, &end, 10);
        if (end == q || (*end && *end != ',') || w < 1 || w > 32 || e < 1 || e > 100000 || n == 64)
            goto bad;
        lv_wl[n] = (int)w;
        lv_ep[n++] = (int)e;
        total += (int)e;
        if (*end == ',' && !end[1]) goto bad;
        s = *end ? end + 1 : end;
    }
    if (n == 0) goto bad;
    if (batch < 1 || samples_per_epoch < 1)
        return ADAPT_ERROR(ADAPT_EINVAL, "schedule: batch (%d) and samples per epoch (%lld) must "
                                         "be at least 1",
                           batch, (long long)samples_per_epoch);
    struct plan pl;
    enum adapt_status st = plan_init(&pl, m, hw, batch);
    if (st != ADAPT_OK) return st;
    pl.state_bits = perf_policy_state_bits("schedule", pl.Wsum, p->muppet_r, &pl.grad32);
    struct perf_run *r = run_alloc(m, total, total);
    int *wl = calloc((size_t)m->n_units, sizeof *wl);
    double *nz = calloc((size_t)m->n_units, sizeof *nz);
    double *uc32 = calloc((size_t)m->n_units, sizeof *uc32);
    double *ucq = calloc((size_t)m->n_units, sizeof *ucq);
    char *name = malloc(strlen(schedule) + 16);
    if (!r || !wl || !nz || !uc32 || !ucq || !name) {
        st = ADAPT_ERROR(ADAPT_ENOMEM, "schedule: out of memory");
        goto out;
    }
    sprintf(name, "schedule %s", schedule);
    r->name = name;
    name = NULL;
    r->path = dupstr("");
    r->config = dupstr("");
    r->compat = dupstr("");
    r->policy = dupstr("schedule");
    r->model = dupstr(m->name);
    r->dataset = dupstr("");
    if (!r->path || !r->policy || !r->model || !r->dataset || !r->config || !r->compat) {
        st = ADAPT_ERROR(ADAPT_ENOMEM, "schedule: out of memory");
        goto out;
    }
    r->batch = batch;
    r->accumulation = 1;
    r->complete = 1;
    r->epochs = total;
    int64_t steps_per_epoch = (samples_per_epoch + batch - 1) / batch;
    r->steps = steps_per_epoch * total;
    if (hw) {
        r->has_hw = 1;
        if (!(r->hw_device = dupstr(perf_hw_describe(hw)))) {
            st = ADAPT_ERROR(ADAPT_ENOMEM, "schedule: out of memory");
            goto out;
        }
    }
    double mem32 = memory_bits_fp32(&pl, batch), mem_peak = 0;
    struct interval iv;
    memset(&iv, 0, sizeof iv);
    iv.unit_c32 = uc32;
    iv.unit_cq = ucq;
    int epoch = 0;
    double wl_steps = 0;
    for (int l = 0; l < n; l++)
        for (int e = 0; e < lv_ep[l]; e++, epoch++) {
            for (int u = 0; u < m->n_units; u++) {
                wl[u] = lv_wl[l];
                nz[u] = 1.0;
            }
            if ((st = price(&pl, p, wl, nz, (double)samples_per_epoch, steps_per_epoch,
                            steps_per_epoch, 0.0, &iv)) != ADAPT_OK)
                goto out;
            add_interval(r, &iv);
            r->samples += (double)samples_per_epoch;
            wl_steps += (double)lv_wl[l] * steps_per_epoch;
            struct perf_point *pt = &r->points[r->n_points++];
            pt->step = (int64_t)(epoch + 1) * steps_per_epoch;
            pt->epoch_x = epoch + 1;
            pt->samples = (double)samples_per_epoch;
            pt->c32 = iv.c32;
            pt->cq = iv.cq;
            r->epoch_c32[epoch] = r->c32;
            r->epoch_cq[epoch] = r->cq;
            r->epoch_val_acc[epoch] = NAN;
            double mem = memory_bits(&pl, wl, batch);
            if (mem > mem_peak) mem_peak = mem;
        }
    r->n_epoch_marks = total;
    r->mem_rel = mem_peak / mem32;
    for (int u = 0; u < m->n_units; u++) {
        struct perf_unit_result *ur = &r->units[u];
        ur->passes = pl.passes[u];
        ur->c32 = uc32[u];
        ur->cq = ucq[u];
        ur->mean_wl = wl_steps / (double)r->steps;
        ur->final_wl = lv_wl[n - 1];
        ur->final_fl = -1;
    }
    double sz = lv_wl[n - 1] / 32.0;
    r->model_size = sz;
    double f32, fq;
    forward_cost(&pl, wl, nz, &f32, &fq);
    r->inference_su = f32 / fq;
    if (hw) {
        double t32, tq;
        if ((st = forward_seconds(&pl, wl, &t32, &tq)) != ADAPT_OK) goto out;
        r->inference_su_hw = t32 / tq;
    }
    run_finish(r);
    /* a schedule is MuPPET's run on its own baseline: no rescaling */
    r->su3 = r->su1_paper;
out:
    free(name);
    free(wl);
    free(nz);
    free(uc32);
    free(ucq);
    plan_free(&pl);
    if (st != ADAPT_OK) {
        perf_run_free(r);
        return st;
    }
    *out = r;
    return ADAPT_OK;
bad:
    return ADAPT_ERROR(ADAPT_EINVAL,
                       "schedule '%s': expected WL:EPOCHS,... with WL in 1..32 and EPOCHS >= 1 "
                       "(e.g. 8:16,12:10,14:14,16:14,32:45)",
                       schedule);
}
