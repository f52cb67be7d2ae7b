/* src/perfmodel/price.c: the analytical (and hardware-calibrated) cost of one logged interval.
 *
 * Costs are MAC-equivalents (one 32-bit MAC or one FP32 element operation =
 * 1). For a logged interval (prev step, step] of D optimizer steps and S
 * samples, with the units' state at `step` (WL_u, non-zero fraction nz_u):
 *
 *   compute  S * sum_u passes_u * F_u * nz_u * WL_u / 32
 *            passes = 3 (forward, backward-data, weight gradient), 2 for the
 *            unit that reads the network input (no backward-data)
 *   elemwise S * sum_j 2 * E_j * WL_gov(j) / 32   (forward + backward; layer j
 *            takes the format of the last unit before it, doc/models.md, or, where
 *            the trace records graph propagation, its precision_unit: WL 32 for a
 *            float32 layer)
 *   update   D * P * update_ops + max(accum - D, 0) * P * accum_ops   (FP32)
 *   overhead push-down: evals * sample * (quantize_ops + bin_ops)
 *            + sample * bin_ops (the weights' own histogram) + evals * r * kl_ops;
 *            AdaPT (units that carry a lookback): D * weights_u * gacc_ops
 *            (the overhead is counted by the caller, src/perfmodel/analyze.c)
 *
 * With tensor roles (the header's "roles") each GEMM is priced at the wider of its operands'
 * bits instead of WL_u: forward max(input, weight) * nz, backward-data max(grad_output,
 * weight) * nz, weight gradient max(grad_output, input), a role in the unit's format at WL_u.
 *
 * A per-layer format plan (perf_price_plan with formats: CoMP's search) also pays for its
 * conversions (perf_price_casts): each tensor passing, in network order, between layers of
 * different formats (the input and the loss float32) costs cast_ops per element forward and
 * again backward (its error gradient), plus cast_fixed_ops per conversion and micro-batch.
 * Traces are priced without them.
 *
 * C32 prices the same intervals at WL 32, dense, without overhead. With a
 * timing table the same interval is also priced in measured seconds per
 * micro-batch, cached per unit, layer and word length.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "src/perfmodel/internal.h"
#include "src/perfmodel/perf.h"

/* ------------------------------------------------------------------- plan */

void perf_plan_free(struct perf_plan *pl)
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

/* Unit u's GEMMs in 32-bit MAC-equivalents per forward MAC: WL_u (nz (passes - 1) + 1) / 32, or
 * with roles each GEMM at its wider operand (the header comment). */
static double unit_gemm_factor(const struct perf_plan *pl, int u, int wl, double nz, int passes)
{
    if (!pl->has_roles) return wl / 32.0 * (nz * (passes - 1) + 1.0);
    const int *rb = pl->role_bits;
    const double w = rb[0] < 0 ? wl : rb[0], x = rb[2] < 0 ? wl : rb[2],
                 g = rb[6] < 0 ? wl : rb[6];
    (void)u;
    double f = fmax(x, w) * nz + fmax(g, x);
    if (passes >= 3) f += fmax(g, w) * nz;
    return f / 32.0;
}

/* The word length of governing unit g: -1 is a float32 layer (graph propagation). */
static int gov_wl(const int *wl, int g) { return g < 0 ? 32 : wl[g]; }

/* The units' MACs, weights and passes; the element-wise layers and stored
 * activations with their governing units: the last unit before them, or the unit whose
 * format the trace records for them (-1: float32) under graph propagation. */
static void plan_layers(struct perf_plan *pl, const struct perf_model *m)
{
    int nl = m->n_layers;
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
        int g = l->precision ? l->precision_unit : gov;
        if (l->unit < 0 && l->elementwise > 0) {
            pl->E[pl->ne] = l->elementwise;
            pl->egov[pl->ne++] = g;
        }
        if (strcmp(l->kind, "flatten")) {
            int64_t n = 1;
            for (int d = 0; d < l->out_ndim; d++) n *= l->out[d];
            pl->A[pl->na] = n;
            pl->agov[pl->na++] = g;
        }
    }
    pl->in_numel = (int64_t)m->input[0] * m->input[1] * m->input[2];
}

/* The empty timing caches and the measured cost of an FP32 element operation. */
static enum adapt_status plan_timing(struct perf_plan *pl)
{
    pl->tg = malloc(sizeof(double) * (size_t)pl->nu * PERF_WL_SLOTS);
    pl->tf = malloc(sizeof(double) * (size_t)pl->nu * PERF_WL_SLOTS);
    pl->te = malloc(sizeof(double) * (size_t)(pl->ne ? pl->ne : 1) * PERF_WL_SLOTS);
    if (!pl->tg || !pl->tf || !pl->te)
        return ADAPT_ERROR(ADAPT_ENOMEM, "model %s: out of memory", pl->m->name);
    for (int i = 0; i < pl->nu * PERF_WL_SLOTS; i++) pl->tg[i] = pl->tf[i] = NAN;
    for (int i = 0; i < pl->ne * PERF_WL_SLOTS; i++) pl->te[i] = NAN;
    return perf_hw_elementwise_seconds(pl->hw, "fp32", 1.0, &pl->t_op32);
}

enum adapt_status perf_plan_init(struct perf_plan *pl, const struct perf_model *m,
                                 const struct perf_hw *hw, int batch)
{
    enum adapt_status st = ADAPT_OK;
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
    if (!pl->F || !pl->W || !pl->passes || !pl->E || !pl->egov || !pl->A || !pl->agov) {
        st = ADAPT_ERROR(ADAPT_ENOMEM, "model %s: out of memory", m->name);
        goto free_plan;
    }
    plan_layers(pl, m);
    pl->hw = hw;
    pl->batch = batch;
    if (hw && (st = plan_timing(pl)) != ADAPT_OK) goto free_plan;
    return ADAPT_OK;
free_plan:
    perf_plan_free(pl);
    return st;
}

/* ------------------------------------------------------------------ timed */

/* Seconds of unit u's GEMMs (all, and forward only) for one micro-batch at wl. */
static enum adapt_status unit_seconds(struct perf_plan *pl, int u, int wl, double *all, double *fwd)
{
    double *a = &pl->tg[u * PERF_WL_SLOTS + wl], *f = &pl->tf[u * PERF_WL_SLOTS + wl];
    if (isnan(*a)) {
        struct perf_gemm g[3];
        int n = perf_model_unit_gemms(pl->m, u, pl->batch, g);
        const char *type = perf_hw_type_for(pl->hw, wl);
        double s = 0, t;
        enum adapt_status st;
        for (int i = 0; i < 3; i++) {
            if (n == 2 && i == 1) continue;
            if ((st = perf_hw_gemm_seconds(pl->hw, type, &g[i], &t)) != ADAPT_OK) return st;
            t *= (double)g[i].count; /* a grouped conv: one GEMM per group */
            s += t;
            if (i == 0) *f = t;
        }
        *a = s;
    }
    *all = *a;
    *fwd = *f;
    return ADAPT_OK;
}

static enum adapt_status ew_seconds(struct perf_plan *pl, int j, int wl, double *s)
{
    double *e = &pl->te[j * PERF_WL_SLOTS + wl];
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
static enum adapt_status batch_seconds(struct perf_plan *pl, const int *wl, int forward_only,
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
        if ((st = ew_seconds(pl, j, gov_wl(wl, pl->egov[j]), &e)) != ADAPT_OK) return st;
        b += ew_passes * e;
    }
    *t32 = a;
    *tq = b;
    return ADAPT_OK;
}

/* ------------------------------------------------------------- interval */

void perf_interval_add(struct perf_run *r, const struct perf_interval *iv)
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

enum adapt_status perf_price_interval(struct perf_plan *pl, const struct perf_params *p,
                                      const int *wl, const double *nz, double samples,
                                      int64_t delta, int64_t accum, double overhead,
                                      struct perf_interval *iv)
{
    double c32 = 0, cq = 0, e32 = 0, eq = 0;
    for (int u = 0; u < pl->nu; u++) {
        double full = samples * pl->passes[u] * (double)pl->F[u];
        /* forward and backward-data multiply by W and skip its zeros; the weight
         * gradient dW = dY X^T reads no weight and stays dense */
        double q = samples * (double)pl->F[u] * unit_gemm_factor(pl, u, wl[u], nz[u], pl->passes[u]);
        c32 += full;
        cq += q;
        if (iv->unit_c32) iv->unit_c32[u] += full;
        if (iv->unit_cq) iv->unit_cq[u] += q;
    }
    for (int j = 0; j < pl->ne; j++) {
        double full = samples * 2.0 * (double)pl->E[j];
        e32 += full;
        eq += full * gov_wl(wl, pl->egov[j]) / 32.0;
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

void perf_forward_cost(const struct perf_plan *pl, const int *wl, const double *nz, double *c32,
                       double *cq)
{
    double a = 0, b = 0;
    for (int u = 0; u < pl->nu; u++) {
        a += (double)pl->F[u];
        b += (double)pl->F[u] * nz[u] *
             (pl->has_roles ? fmax(pl->role_bits[0] < 0 ? wl[u] : pl->role_bits[0],
                                   pl->role_bits[2] < 0 ? wl[u] : pl->role_bits[2])
                            : wl[u]) /
             32.0;
    }
    for (int j = 0; j < pl->ne; j++) {
        a += (double)pl->E[j];
        b += (double)pl->E[j] * gov_wl(wl, pl->egov[j]) / 32.0;
    }
    *c32 = a;
    *cq = b;
}

enum adapt_status perf_forward_seconds(struct perf_plan *pl, const int *wl, double *t32,
                                       double *tq)
{
    return batch_seconds(pl, wl, 1, t32, tq);
}

/* Training memory in bits for micro-batch b: FP32 master weights and
 * momentum always; gradients at WL (FP32 for non-unit parameters, and for
 * every parameter with grad32); a quantized weight copy when WL < 32; the
 * policy's own state (state_bits); stored activations at the WL of their
 * unit (the input at unit 0's). With [roles] each tensor at its role's format
 * where the role sets one (role_memory_bits). */
static double role_memory_bits(const struct perf_plan *pl, const int *wl, int b)
{
    const int *rb = pl->role_bits; /* adapt_trace_role_names order; -1: the unit's WL */
    const double master = rb[8] < 0 ? 32.0 : rb[8];
    /* momentum float32; the units' weights' masters at the master role's bits, every other
     * parameter's master and gradient float32 */
    double m = 32.0 * (double)pl->P + master * (double)pl->Wsum +
               64.0 * (double)(pl->P - pl->Wsum) + pl->state_bits;
    for (int u = 0; u < pl->nu; u++) {
        double w = rb[0] < 0 ? wl[u] : rb[0], g = rb[4] < 0 ? wl[u] : rb[4];
        if (pl->grad32) g = 32.0;
        m += (double)pl->W[u] * (g + (w < master ? w : 0.0)); /* a copy narrower than the master */
    }
    /* stored activations: what the backward GEMMs read is the units' inputs, at the input
     * role's bits when it sets them, else at their governing unit's WL as without roles */
    double act = (double)pl->in_numel * (rb[2] < 0 ? wl[0] : rb[2]);
    for (int j = 0; j < pl->na; j++)
        act += (double)pl->A[j] * (rb[2] < 0 ? gov_wl(wl, pl->agov[j]) : rb[2]);
    return m + act * b;
}

double perf_memory_bits(const struct perf_plan *pl, const int *wl, int b)
{
    if (pl->has_roles) return role_memory_bits(pl, wl, b);
    double m = 64.0 * (double)pl->P + 32.0 * (double)(pl->P - pl->Wsum) + pl->state_bits;
    for (int u = 0; u < pl->nu; u++)
        m += (double)pl->W[u] * ((pl->grad32 ? 32 : wl[u]) + (wl[u] < 32 ? wl[u] : 0));
    double act = (double)pl->in_numel * wl[0];
    for (int j = 0; j < pl->na; j++) act += (double)pl->A[j] * gov_wl(wl, pl->agov[j]);
    return m + act * b;
}

double perf_memory_bits_fp32(const struct perf_plan *pl, int b)
{
    double act = (double)pl->in_numel;
    for (int j = 0; j < pl->na; j++) act += (double)pl->A[j];
    return 96.0 * (double)pl->P + 32.0 * act * b;
}

static int64_t out_numel(const struct adapt_trace_layer *l)
{
    int64_t n = 1;
    for (int d = 0; d < l->out_ndim; d++) n *= l->out[d];
    return n;
}

double perf_price_casts(const struct perf_model *m, const struct perf_params *p, const int *fmt,
                        double samples, double micro, int *n)
{
    /* the tensor entering layer i: the network input (float32, no gradient), then layer
     * i-1's output (and its error gradient backward); the loss reads float32 */
    int prev = -1, passes = 1, count = 0;
    int64_t numel = (int64_t)m->input[0] * m->input[1] * m->input[2];
    double elems = 0;
    for (int i = 0; i <= m->n_layers; i++) {
        int f = i < m->n_layers ? fmt[i] : -1;
        if (f != prev) {
            elems += (double)passes * (double)numel;
            count += passes;
        }
        if (i == m->n_layers) break;
        prev = f;
        numel = out_numel(&m->layers[i]);
        passes = 2;
    }
    if (n) *n = count;
    return samples * p->cast_ops * elems + micro * p->cast_fixed_ops * count;
}

enum adapt_status perf_price_plan(const struct perf_model *m, const struct perf_params *p,
                                  const struct perf_hw *hw, const int *wl, const int *gov,
                                  const int *fmt, int batch, double samples, int64_t steps,
                                  int64_t accum, double *cq, double *tq)
{
    struct adapt_trace_layer *ls = malloc(sizeof *ls * (size_t)(m->n_layers ? m->n_layers : 1));
    if (!ls) return ADAPT_ERROR(ADAPT_ENOMEM, "model %s: out of memory", m->name);
    memcpy(ls, m->layers, sizeof *ls * (size_t)m->n_layers);
    for (int i = 0; i < m->n_layers; i++) {
        ls[i].precision = gov[i] < 0 ? "float32" : "plan"; /* only float32 or not is read */
        ls[i].precision_unit = gov[i];
    }
    struct perf_model view = *m;
    view.layers = ls;
    view.storage = NULL;
    double *nz = malloc(sizeof(double) * (size_t)(m->n_units ? m->n_units : 1));
    struct perf_plan pl;
    enum adapt_status st = nz ? perf_plan_init(&pl, &view, hw, batch)
                              : ADAPT_ERROR(ADAPT_ENOMEM, "model %s: out of memory", m->name);
    if (st == ADAPT_OK) {
        for (int u = 0; u < m->n_units; u++) nz[u] = 1.0;
        struct perf_interval iv = {0};
        st = perf_price_interval(&pl, p, wl, nz, samples, steps, accum, 0.0, &iv);
        if (st == ADAPT_OK) {
            /* conversions: MAC-equivalents, or FP32 element operations at the table's rate */
            double casts = fmt ? perf_price_casts(m, p, fmt, samples, samples / batch, NULL) : 0;
            *cq = iv.cq + casts;
            if (tq) *tq = hw ? iv.tq + casts * pl.t_op32 : NAN;
        }
        perf_plan_free(&pl);
    }
    free(nz);
    free(ls);
    return st;
}
