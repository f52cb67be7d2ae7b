/* src/policy/roles.c: tensor roles of the precision state (src/policy/precision.h) and their
 * scaling: per-tensor scales from the current amax or from an amax history, as Transformer
 * Engine's current and delayed scaling describe them (doc/numerics.md, "Tensor roles and
 * scaling"). */
#include "src/policy/roles.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

float adapt_role_format_max(const struct quant_spec *s)
{
    struct quant_spec t = *s;
    t.overflow = QUANT_OVERFLOW_SATURATE;
    t.rounding = QUANT_ROUND_NEAREST;
    const float big = FLT_MAX;
    float m = 0.0f;
    struct quant_key k = {0, 0, 0};
    if (quant_array(&t, &big, &m, 1, k, NULL, NULL) != ADAPT_OK || !isfinite(m)) return 0.0f;
    return m;
}

float adapt_role_scale_for(const struct adapt_precision *p, float fmax, float amax)
{
    if (!(amax > 0.0f) || !isfinite(amax) || !(fmax > 0.0f)) return 0.0f;
    double sc = ldexp((double)fmax / (double)amax, -p->margin);
    if (p->scale_pow2) sc = ldexp(1.0, (int)floor(log2(sc)));
    if (sc > FLT_MAX) sc = ldexp(1.0, 127); /* an amax that small: the largest power of two */
    if (sc < FLT_MIN) return 0.0f;
    return (float)sc;
}

const struct adapt_role_fmt *adapt_precision_role(const struct adapt_precision *p, int u,
                                                  enum adapt_role r)
{
    static const struct adapt_role_fmt auto_role = {ADAPT_ROLE_AUTO, {0}, -1, ADAPT_SCALING_NONE};
    return p->roles ? &p->roles[(size_t)u * ADAPT_ROLE_N + (size_t)r] : &auto_role;
}

enum adapt_status adapt_precision_set_unit_role(struct adapt_precision *p, int u,
                                                enum adapt_role r, const struct adapt_role_fmt *f)
{
    ADAPT_ASSERT(p->roles && u >= 0 && u < p->nunits && r >= 0 && r < ADAPT_ROLE_N);
    p->roles[(size_t)u * ADAPT_ROLE_N + (size_t)r] = *f;
    if (f->scaling != ADAPT_SCALING_NONE && !p->rstate) {
        size_t n = (size_t)ADAPT_ROLE_N * (size_t)p->net->nnodes;
        if (!(p->rstate = calloc(n, sizeof *p->rstate)))
            return ADAPT_ERROR(ADAPT_ENOMEM, "cannot allocate the scale states");
        for (size_t i = 0; i < n; i++) p->rstate[i].scale = p->rstate[i].last_scale = 1.0f;
    }
    /* error-gradient roles need the backward hook */
    if (r == ADAPT_ROLE_GRAD_INPUT && f->kind != ADAPT_ROLE_AUTO)
        adapt_precision_install_grad_hook(p);
    return ADAPT_OK;
}

enum adapt_status adapt_precision_set_roles(struct adapt_precision *p,
                                            const struct adapt_role_fmt roles[ADAPT_ROLE_N],
                                            const struct adapt_roles_opts *o)
{
    if (p->dev) /* adapt_precision_use_cuda makes the device arrays the roles need */
        return ADAPT_ERROR(ADAPT_EINVAL, "tensor roles are set before a GPU engine is attached");
    p->amax_history = o->amax_history > 0 ? o->amax_history : 1;
    p->amax_most_recent = o->most_recent;
    p->margin = o->margin;
    p->scale_pow2 = o->pow2;
    if (!p->roles && !(p->roles = calloc((size_t)p->nunits * ADAPT_ROLE_N + 1, sizeof *p->roles)))
        return ADAPT_ERROR(ADAPT_ENOMEM, "cannot allocate the tensor roles");
    for (int u = 0; u < p->nunits; u++)
        for (int r = 0; r < ADAPT_ROLE_N; r++) {
            enum adapt_status st = adapt_precision_set_unit_role(p, u, (enum adapt_role)r,
                                                                 &roles[r]);
            if (st) return st;
        }
    return ADAPT_OK;
}

const struct adapt_role_state *adapt_precision_role_state(const struct adapt_precision *p,
                                                          enum adapt_role r, int id)
{
    if (!p->rstate) return NULL;
    return &p->rstate[(size_t)r * (size_t)p->net->nnodes + (size_t)id];
}

/* The delayed scale after this amax joins the history: from the history's max or its most
 * recent value; unchanged when that gives none (all zero so far, or inf/NaN). */
static void delayed_update(struct adapt_precision *p, struct adapt_role_state *rs, float amax,
                           float fmax)
{
    if (!rs->hist && !(rs->hist = calloc((size_t)p->amax_history, sizeof *rs->hist))) return;
    rs->hist_pos = (rs->hist_pos + 1) % p->amax_history;
    rs->hist[rs->hist_pos] = amax;
    if (rs->hist_n < p->amax_history) rs->hist_n++;
    float a = amax;
    if (!p->amax_most_recent)
        for (int i = 0; i < rs->hist_n; i++)
            if (rs->hist[i] > a || isnan(rs->hist[i])) a = rs->hist[i];
    float s = adapt_role_scale_for(p, fmax, a);
    if (s > 0.0f) rs->scale = s;
}

/* A training rounding's n values and counts into the tensor's state and st (may be NULL). */
static void add_counts(struct adapt_role_state *rs, size_t n, const struct quant_stats *q,
                       struct quant_stats *st)
{
    rs->n += n;
    rs->sat += q->saturated;
    rs->flush += q->flushed;
    if (st) {
        st->saturated += q->saturated;
        st->flushed += q->flushed;
        st->zeros += q->zeros;
    }
}

/* The GPU engine's rows (device arrays): each row's amax and the rounding computed on the device,
 * the scales here as on the host; the tensor's amax, the smallest scale and the counts out. */
static enum adapt_status rowwise_dev(struct adapt_precision *p, const struct quant_spec *s,
                                     const float *x, float *y, size_t srows, size_t c, float fmax,
                                     struct quant_key key, float *amax, float *smin, uint64_t cnt[3])
{
    float *a = malloc(2 * srows * sizeof *a);
    if (!a) return ADAPT_ERROR(ADAPT_ENOMEM, "cannot allocate %zu row scales", srows);
    float *sc = a + srows;
    enum adapt_status e = adapt_cuda_net_amax_rows(p->dev, x, srows, c, a);
    for (size_t r = 0; !e && r < srows; r++) {
        sc[r] = adapt_role_scale_for(p, fmax, a[r]);
        if (!(sc[r] > 0.0f)) sc[r] = 1.0f;
        *amax = a[r] > *amax ? a[r] : *amax;
        *smin = sc[r] < *smin ? sc[r] : *smin;
    }
    if (!e) e = adapt_cuda_net_round_scaled(p->dev, s, x, y, srows, c, srows, sc, key, cnt);
    free(a);
    return e;
}

/* Rowwise: each of the srows rows its own current scale, rounded as the whole tensor would be
 * (element i keeps its random bits: the key's index + i). The state takes the tensor's amax
 * and the smallest row scale (the one of the row that holds the amax). */
static enum adapt_status round_rowwise(struct adapt_precision *p, struct adapt_role_state *rs,
                                       const struct quant_spec *s, const float *x, float *y,
                                       size_t n, size_t srows, struct quant_key key,
                                       struct quant_stats *st)
{
    enum adapt_status e = quant_spec_check(s);
    if (e) return e;
    ADAPT_ASSERT(srows > 0 && n % srows == 0);
    const size_t c = n / srows;
    const float fmax = adapt_role_format_max(s);
    float amax = 0.0f, smin = INFINITY;
    uint64_t sat = 0, flush = 0, zeros = 0;
    if (p->dev) {
        uint64_t cnt[3] = {0, 0, 0};
        if ((e = rowwise_dev(p, s, x, y, srows, c, fmax, key, &amax, &smin, cnt))) return e;
        sat = cnt[0], flush = cnt[1], zeros = cnt[2];
    } else {
        #pragma omp parallel for schedule(static) reduction(max : amax) reduction(min : smin) \
            reduction(+ : sat, flush, zeros) if (n > 65536 && srows > 1)
        for (size_t r = 0; r < srows; r++) {
            int nonfinite = 0;
            float a = quant_amax_compute(x + r * c, c, &nonfinite);
            float sc = adapt_role_scale_for(p, fmax, a);
            if (!(sc > 0.0f)) sc = 1.0f; /* an all-zero row, or one with an inf or NaN */
            struct quant_key k = key;
            k.index += (uint64_t)(r * c);
            struct quant_stats q = {0, 0, 0};
            quant_rows_scaled(s, x + r * c, y + r * c, 1, c, k, sc, 1.0f / sc, &q);
            amax = a > amax ? a : amax;
            smin = sc < smin ? sc : smin;
            sat += q.saturated;
            flush += q.flushed;
            zeros += q.zeros;
        }
    }
    if (p->eval_round || p->replay) return ADAPT_OK;
    add_counts(rs, n, &(struct quant_stats){sat, flush, zeros}, st);
    rs->last_scale = rs->scale = smin;
    rs->amax = amax;
    return ADAPT_OK;
}

enum adapt_status adapt_role_round_scaled(struct adapt_precision *p, enum adapt_role r, int id,
                                          enum adapt_role_scaling sc, const struct quant_spec *s,
                                          const float *x, float *y, size_t rows, size_t cols,
                                          size_t srows, struct quant_key key,
                                          struct quant_stats *st)
{
    ADAPT_ASSERT(p->rstate);
    struct adapt_role_state *rs = &p->rstate[(size_t)r * (size_t)p->net->nnodes + (size_t)id];
    size_t n = rows * cols;
    if (sc == ADAPT_SCALING_ROWWISE) return round_rowwise(p, rs, s, x, y, n, srows, key, st);
    /* an inf or NaN anywhere: amax inf (TE's amax is NaN/inf then too), no scale from it */
    int nonfinite = 0;
    float amax;
    if (p->dev) {
        enum adapt_status e = adapt_cuda_net_amax_rows(p->dev, x, 1, n, &amax);
        if (e) return e;
    } else {
        amax = quant_amax_compute(x, n, &nonfinite);
    }
    float fmax = adapt_role_format_max(s);
    float scale = p->replay ? rs->last_scale : rs->scale;
    if (sc == ADAPT_SCALING_CURRENT && !p->replay) { /* evaluation too: this tensor's scale */
        float c = adapt_role_scale_for(p, fmax, amax);
        scale = c > 0.0f ? c : 1.0f;
    }
    struct quant_stats qs = {0, 0, 0};
    enum adapt_status e;
    if (p->dev) {
        uint64_t c[3] = {0, 0, 0};
        e = adapt_cuda_net_round_scaled(p->dev, s, x, y, rows, cols, 1, &scale, key, c);
        qs = (struct quant_stats){c[0], c[1], c[2]};
    } else {
        e = quant_rows_scaled(s, x, y, rows, cols, key, scale, 1.0f / scale, &qs);
    }
    if (e) return e;
    /* evaluation, and the same rounding again after a resume (the step record before the
     * checkpoint reported it): the training's state untouched */
    if (p->eval_round || p->replay) return ADAPT_OK;
    add_counts(rs, n, &qs, st);
    rs->last_scale = scale;
    if (sc == ADAPT_SCALING_CURRENT) rs->scale = scale;
    rs->amax = amax;
    if (sc == ADAPT_SCALING_DELAYED) delayed_update(p, rs, amax, fmax);
    return ADAPT_OK;
}

void adapt_precision_take_scales(struct adapt_precision *p, int u,
                                 struct adapt_trace_role_scale out[ADAPT_TRACE_SCALED_ROLES])
{
    static const enum adapt_role roles[ADAPT_TRACE_SCALED_ROLES] = {
        ADAPT_ROLE_WEIGHT, ADAPT_ROLE_INPUT, ADAPT_ROLE_GRAD_OUTPUT};
    for (int k = 0; k < ADAPT_TRACE_SCALED_ROLES; k++) {
        memset(&out[k], 0, sizeof out[k]);
        enum adapt_role r = roles[k];
        if (!p->rstate || adapt_precision_role(p, u, r)->scaling == ADAPT_SCALING_NONE) continue;
        int id = r == ADAPT_ROLE_GRAD_OUTPUT ? p->u[u].node : u; /* as the roundings key them */
        struct adapt_role_state *rs = &p->rstate[(size_t)r * (size_t)p->net->nnodes + (size_t)id];
        if (!rs->n) continue; /* not rounded yet */
        out[k].amax = rs->amax;
        out[k].scale = rs->last_scale; /* the scale that tensor was rounded with */
        out[k].sat = (int64_t)(rs->sat - rs->sat_taken);
        out[k].flush = (int64_t)(rs->flush - rs->flush_taken);
        rs->sat_taken = rs->sat;
        rs->flush_taken = rs->flush;
    }
}

json_t *adapt_precision_scales_json(const struct adapt_precision *p)
{
    if (!p->rstate) return NULL;
    json_t *t = json_array();
    size_t nn = (size_t)p->net->nnodes;
    for (size_t i = 0; t && i < (size_t)ADAPT_ROLE_N * nn; i++) {
        const struct adapt_role_state *rs = &p->rstate[i];
        if (!rs->n && !rs->hist_n) continue;
        json_t *h = json_array();
        for (int k = 0; h && rs->hist && k < p->amax_history; k++)
            json_array_append_new(h, json_real(rs->hist[k]));
        json_t *e = h ? json_pack("[iifiiofII]", (int)(i / nn), (int)(i % nn), (double)rs->scale,
                                  rs->hist_pos, rs->hist_n, h, (double)rs->last_scale,
                                  (json_int_t)(rs->sat - rs->sat_taken),
                                  (json_int_t)(rs->flush - rs->flush_taken))
                      : NULL;
        if (!e || json_array_append_new(t, e)) {
            json_decref(t);
            return NULL;
        }
    }
    json_t *o = t ? json_pack("{s:i,s:o}", "history", p->amax_history, "tensors", t) : NULL;
    return o;
}

enum adapt_status adapt_precision_scales_load(struct adapt_precision *p, const json_t *j,
                                              const char *path)
{
    if (!p->rstate)
        return ADAPT_ERROR(ADAPT_EFORMAT, "%s: the checkpoint holds scale states, but no role of "
                                          "this run is scaled", path);
    json_int_t hist = json_integer_value(json_object_get(j, "history"));
    const json_t *t = json_object_get(j, "tensors");
    if (hist != p->amax_history || !json_is_array(t))
        return ADAPT_ERROR(ADAPT_EFORMAT, "%s: role_scales: amax history of %lld values, the run "
                                          "keeps %d (roles.amax_history)",
                           path, (long long)hist, p->amax_history);
    size_t nn = (size_t)p->net->nnodes;
    for (size_t i = 0; i < json_array_size(t); i++) {
        const json_t *e = json_array_get(t, i);
        int r = (int)json_integer_value(json_array_get(e, 0));
        int id = (int)json_integer_value(json_array_get(e, 1));
        double scale = json_number_value(json_array_get(e, 2));
        int pos = (int)json_integer_value(json_array_get(e, 3));
        int n = (int)json_integer_value(json_array_get(e, 4));
        const json_t *h = json_array_get(e, 5);
        size_t hn = json_array_size(h);
        double last = json_number_value(json_array_get(e, 6));
        json_int_t sat = json_integer_value(json_array_get(e, 7));
        json_int_t flush = json_integer_value(json_array_get(e, 8));
        if (json_array_size(e) != 9 || sat < 0 || flush < 0 || !(last > 0) || !isfinite(last) || r < 0 || r >= ADAPT_ROLE_N || id < 0 || (size_t)id >= nn ||
            !(scale > 0) || !isfinite(scale) || pos < 0 || pos >= p->amax_history || n < 0 ||
            n > p->amax_history || (hn && hn != (size_t)p->amax_history) || (n && !hn))
            return ADAPT_ERROR(ADAPT_EFORMAT, "%s: role_scales tensor %zu does not fit this run",
                               path, i);
        struct adapt_role_state *rs = &p->rstate[(size_t)r * nn + (size_t)id];
        rs->scale = (float)scale;
        rs->last_scale = (float)last;
        rs->sat = (uint64_t)sat; /* not reported by a step record yet */
        rs->flush = (uint64_t)flush;
        rs->sat_taken = rs->flush_taken = 0;
        rs->hist_pos = pos;
        rs->hist_n = n;
        rs->n = 1; /* rounded before */
        if (hn && !rs->hist && !(rs->hist = calloc((size_t)p->amax_history, sizeof *rs->hist)))
            return ADAPT_ERROR(ADAPT_ENOMEM, "cannot allocate an amax history");
        for (size_t k = 0; k < hn; k++) rs->hist[k] = (float)json_number_value(json_array_get(h, k));
    }
    return ADAPT_OK;
}
