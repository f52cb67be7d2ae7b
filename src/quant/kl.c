/* src/quant/kl.c: histograms and the quantization-loss divergences of doc/algorithms.md. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "src/quant/quant.h"
#include "src/quant/quant_cpu.h"
#include "src/base/rng.h"

/* Bin of v, or -1 when dropped. */
static inline int hist_bin(float v, double lo, double hi, int bins, enum quant_hist_edges edges)
{
    double d = (double)v;
    if (d != d) return -1;
    if (d < lo) return edges == QUANT_HIST_CLAMP ? 0 : -1;
    if (d > hi) return edges == QUANT_HIST_CLAMP ? bins - 1 : -1;
    double b = floor((d - lo) * (double)bins / (hi - lo));
    return b >= (double)bins ? bins - 1 : (int)b;
}

static void widen(double *lo, double *hi)
{
    if (*lo == *hi) {
        *lo -= 1.0;
        *hi += 1.0;
    }
}

static enum adapt_status hist_args(const char *who, size_t n, size_t stride, double lo, double hi,
                                   int bins)
{
    if (bins < 1) return ADAPT_ERROR(ADAPT_EINVAL, "%s: %d bins (need at least 1)", who, bins);
    if (stride < 1) return ADAPT_ERROR(ADAPT_EINVAL, "%s: stride 0", who);
    if (!(lo <= hi) || !isfinite(lo) || !isfinite(hi))
        return ADAPT_ERROR(ADAPT_EINVAL, "%s: bad range [%g, %g]", who, lo, hi);
    (void)n;
    return ADAPT_OK;
}

/* Histograms of m sampled values: q gets x[i*stride], p gets the plan's rounding of it (when p
 * is non-NULL; random value number index + i*stride). Integer counts: order-independent. */
static enum adapt_status hist_pair(const float *x, size_t m, size_t stride, double lo, double hi,
                                   int bins, enum quant_hist_edges edges, uint64_t *hq,
                                   const struct quant_plan *plan, uint64_t index, uint64_t *hp)
{
    int failed = 0;
    memset(hq, 0, (size_t)bins * sizeof *hq);
    if (hp) memset(hp, 0, (size_t)bins * sizeof *hp);
#pragma omp parallel if (m > 65536)
    {
        uint64_t *lq = calloc((size_t)bins * (hp ? 2 : 1), sizeof *lq);
        uint64_t *lp = lq ? lq + bins : NULL;
        if (!lq) {
#pragma omp atomic write
            failed = 1;
        }
#pragma omp for schedule(static)
        for (long long i = 0; i < (long long)m; i++) {
            if (!lq) continue;
            size_t k = (size_t)i * stride;
            float v = x[k];
            int b = hist_bin(v, lo, hi, bins, edges);
            if (b >= 0) lq[b]++;
            if (hp) {
                uint32_t r =
                    plan->mode == QUANT_MODE_STOCHASTIC
                        ? quant_sr_bits_at(plan->seed, plan->stream, plan->sr_bits, index + k)
                        : 0u;
                uint32_t sat;
                b = hist_bin(quant_plan_round(plan, v, r, &sat), lo, hi, bins, edges);
                if (b >= 0) lp[b]++;
            }
        }
        if (lq) {
#pragma omp critical(quant_hist_merge)
            for (int b = 0; b < bins; b++) {
                hq[b] += lq[b];
                if (hp) hp[b] += lp[b];
            }
            free(lq);
        }
    }
    if (failed) return ADAPT_ERROR(ADAPT_ENOMEM, "quant histogram: no memory for %d bins", bins);
    return ADAPT_OK;
}

enum adapt_status quant_hist(const float *x, size_t n, size_t stride, double lo, double hi,
                             int bins, enum quant_hist_edges edges, uint64_t *counts)
{
    enum adapt_status st = hist_args("quant_hist", n, stride, lo, hi, bins);
    if (st != ADAPT_OK) return st;
    if (n && (!x || !counts)) return ADAPT_ERROR(ADAPT_EINVAL, "quant_hist: NULL array");
    widen(&lo, &hi);
    return hist_pair(x, n, stride, lo, hi, bins, edges, counts, NULL, 0, NULL);
}

static uint64_t hist_total(const uint64_t *h, int bins)
{
    uint64_t t = 0;
    for (int b = 0; b < bins; b++) t += h[b];
    return t;
}

double quant_kl_counts(const uint64_t *p, const uint64_t *q, int bins)
{
    uint64_t tp = hist_total(p, bins), tq = hist_total(q, bins);
    if (tp == 0) return 0.0;
    double kl = 0.0;
    for (int b = 0; b < bins; b++) {
        if (!p[b]) continue;
        if (!q[b]) return INFINITY;
        double pb = (double)p[b] / (double)tp, qb = (double)q[b] / (double)tq;
        kl += pb * log(pb / qb);
    }
    return kl;
}

double quant_kl_reference_counts(const uint64_t *w, const uint64_t *wq, int bins)
{
    uint64_t tw = hist_total(w, bins), tq = hist_total(wq, bins);
    double s = 0.0;
    for (int b = 0; b < bins; b++) {
        double wb = tw ? (double)w[b] / (double)tw : 0.0;
        double qb = tq ? (double)wq[b] / (double)tq : 0.0;
        s += exp(qb) * (qb - wb);
    }
    return s / (double)bins;
}

/* Both divergences share the pipeline: sample, range, plan, histograms. */
static enum adapt_status kl_hists(const char *who, const struct quant_spec *s, const float *w,
                                  size_t n, size_t sample, int bins, struct quant_key key,
                                  enum quant_hist_edges edges, uint64_t **hq, uint64_t **hp)
{
    enum adapt_status st = quant_spec_check(s);
    if (st != ADAPT_OK) return st;
    if (bins < 1) return ADAPT_ERROR(ADAPT_EINVAL, "%s: %d bins (need at least 1)", who, bins);
    if (n == 0 || !w) return ADAPT_ERROR(ADAPT_EINVAL, "%s: no weights", who);
    if (quant_format_is_mx(s->format)) /* a sampled value has no block to take its scale from */
        return ADAPT_ERROR(ADAPT_EUNSUPPORTED, "%s: the MX block formats are not supported",
                           who);
    size_t m = n, stride = 1;
    if (sample && sample < n) {
        m = sample;
        stride = n / sample;
    }
    /* range of the sample (finite values) */
    float lo = 0.0f, hi = 0.0f;
    int any = 0;
    for (size_t i = 0; i < m; i++) {
        float v = w[i * stride];
        if (!isfinite(v)) continue;
        if (!any || v < lo) lo = v;
        if (!any || v > hi) hi = v;
        any = 1;
    }
    if (!any) return ADAPT_ERROR(ADAPT_EINVAL, "%s: no finite weight in the sample", who);
    const struct quant_type *t = quant_type_of(s->format);
    struct quant_range rg;
    struct quant_plan plan;
    if (t->needs_range) quant_range_compute(w, n, &rg);
    if ((st = quant_plan_init(s, t->needs_range ? &rg : NULL, key, &plan)) != ADAPT_OK) return st;
    uint64_t *h = calloc(2 * (size_t)bins, sizeof *h);
    if (!h) return ADAPT_ERROR(ADAPT_ENOMEM, "%s: no memory for %d bins", who, bins);
    double dlo = lo, dhi = hi;
    widen(&dlo, &dhi);
    st = hist_pair(w, m, stride, dlo, dhi, bins, edges, h, &plan, key.index, h + bins);
    if (st != ADAPT_OK) {
        free(h);
        return st;
    }
    *hq = h;
    *hp = h + bins;
    return ADAPT_OK;
}

enum adapt_status quant_kl(const struct quant_spec *s, const float *w, size_t n, size_t sample,
                           int bins, struct quant_key key, double *kl)
{
    uint64_t *hq = NULL, *hp = NULL; /* set when kl_hists succeeds (gcc 13 cannot tell) */
    enum adapt_status st =
        kl_hists("quant_kl", s, w, n, sample, bins, key, QUANT_HIST_CLAMP, &hq, &hp);
    if (st != ADAPT_OK) return st;
    *kl = quant_kl_counts(hp, hq, bins);
    free(hq);
    return ADAPT_OK;
}

enum adapt_status quant_kl_reference(const struct quant_spec *s, const float *w, size_t n,
                                     size_t sample, int bins, struct quant_key key, double *div)
{
    uint64_t *hq = NULL, *hp = NULL; /* set when kl_hists succeeds (gcc 13 cannot tell) */
    enum adapt_status st =
        kl_hists("quant_kl_reference", s, w, n, sample, bins, key, QUANT_HIST_DROP, &hq, &hp);
    if (st != ADAPT_OK) return st;
    *div = quant_kl_reference_counts(hq, hp, bins);
    free(hq);
    return ADAPT_OK;
}
