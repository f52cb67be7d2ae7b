/* src/policy/policy_core.c: decision rules of AdaPT, MuPPET and AMP. */
#include "src/policy/policy_core.h"

#include <math.h>

double adapt_gradient_diversity(long n, double g_norm)
{
    return g_norm > 0.0 ? (double)n / g_norm : INFINITY;
}

double adapt_lookback_update(double lb, double D, int lb_lwr, int lb_upr, double gamma,
                             enum adapt_compat compat)
{
    double nw;
    if (!(D > 0.0)) {
        nw = lb_upr;
    } else {
        double q = (double)lb_upr / D; /* D = +inf gives 0 -> lb_lwr */
        if (q < lb_lwr) q = lb_lwr;
        if (q > lb_upr) q = lb_upr;
        nw = ceil(q);
    }
    double v = nw * gamma + (1.0 - gamma) * lb;
    return compat == ADAPT_COMPAT_REFERENCE ? ceil(v) : v;
}

int adapt_resolution_update(int r, double lb, int lb_lwr, int lb_upr, int r_lwr, int r_upr)
{
    long k = lround(lb);
    if (k == lb_upr) r += 1;
    else if (k == lb_lwr) r -= 1;
    if (r < r_lwr) r = r_lwr;
    if (r > r_upr) r = r_upr;
    return r;
}

enum adapt_trace_strategy adapt_strategy_update(struct adapt_strategy_state *s, double loss,
                                                double mean_lb)
{
    s->hist[s->pos] = loss;
    s->pos = (s->pos + 1) % s->cap;
    if (s->n < s->cap) s->n++;
    long k = lround(mean_lb);
    if (k < 1) k = 1;
    if (k > s->n) k = s->n;
    double sum = 0.0;
    for (long i = 1; i <= k; i++) sum += s->hist[(s->pos - i + s->cap) % s->cap];
    double mean = sum / (double)k;
    if (fabs(mean) <= fabs(loss)) {
        if (s->st == ADAPT_TRACE_STRATEGY_MIN) s->st = ADAPT_TRACE_STRATEGY_MEAN;
        else if (s->st == ADAPT_TRACE_STRATEGY_MEAN) s->st = ADAPT_TRACE_STRATEGY_MAX;
    } else {
        s->st = ADAPT_TRACE_STRATEGY_MIN;
    }
    return s->st;
}

enum adapt_trace_strategy adapt_strategy_update_reference(struct adapt_strategy_state *s,
                                                          double loss, double mean_lb)
{
    int k = (int)mean_lb; /* truncated, as int() does */
    if (k < 1) k = 1;
    if (k > s->cap - 1) k = s->cap - 1;
    if (s->n > k) {
        double sum = 0.0;
        for (int i = 1; i <= s->n; i++) sum += s->hist[(s->pos - i + s->cap) % s->cap];
        double avg = fabs(sum / (double)k);
        if (avg <= fabs(loss)) {
            if (s->st == ADAPT_TRACE_STRATEGY_MIN) s->st = ADAPT_TRACE_STRATEGY_MEAN;
            else if (s->st == ADAPT_TRACE_STRATEGY_MEAN) s->st = ADAPT_TRACE_STRATEGY_MAX;
        } else {
            s->st = ADAPT_TRACE_STRATEGY_MIN;
        }
        s->n = k; /* keep the last k */
    }
    s->hist[s->pos] = loss;
    s->pos = (s->pos + 1) % s->cap;
    if (s->n < s->cap) s->n++;
    return s->st;
}

/* The oracle with the free variable (FL when which == 0, else WL) at x. */
static int probe(adapt_lossy_fn lossy, void *ctx, int which, int x, int wl_fixed, int fl_fixed,
                 struct adapt_pd_result *out)
{
    out->evals++;
    out->steps++;
    return which == 0 ? lossy(ctx, wl_fixed, x) : lossy(ctx, x, fl_fixed);
}

/* Corrected: the smallest x in [lo, hi] that is lossless, taking hi as the
 * fallback (kept when everything below it is lossy) and the losses as
 * monotone in x. The search runs over (lo - 1, hi] with lo - 1 standing for
 * "lossy", so lo itself is tested (doc/algorithms.md, push-down). */
static int bisect_smallest(int lo, int hi, adapt_lossy_fn lossy, void *ctx, int which,
                           int wl_fixed, int fl_fixed, struct adapt_pd_result *out)
{
    int bad = lo - 1;
    while (hi - bad > 1) {
        int mid = bad + (hi - bad + 1) / 2; /* ceil((bad + hi) / 2) */
        if (probe(lossy, ctx, which, mid, wl_fixed, fl_fixed, out)) bad = mid;
        else hi = mid;
    }
    return hi;
}

/* Reference: the published loop. At most hi - lo iterations as counted on
 * entry; mid = ceil((lo + hi) / 2); the test is at lo (probe_low) or at mid;
 * lossy -> lo = mid, else hi = mid; leave once hi - lo <= 1; return lo. An
 * interval of width 1 on entry still gets its one test; an empty or
 * negative one returns lo untested. */
static int bisect_reference(int lo, int hi, int probe_low, adapt_lossy_fn lossy, void *ctx,
                            int which, int wl_fixed, int fl_fixed, struct adapt_pd_result *out)
{
    for (int n = 0, count = hi - lo; n < count; n++) {
        int mid = (lo + hi + 1) / 2; /* lo, hi >= 0 */
        if (probe(lossy, ctx, which, probe_low ? lo : mid, wl_fixed, fl_fixed, out)) lo = mid;
        else hi = mid;
        if (hi - lo <= 1) break;
    }
    return lo;
}

void adapt_pd_bisect(int wl, int fl, int fl_min, enum adapt_compat compat, adapt_lossy_fn lossy,
                     void *ctx, struct adapt_pd_result *out)
{
    out->steps = out->evals = 0;
    int f, w;
    if (compat == ADAPT_COMPAT_REFERENCE) {
        f = bisect_reference(fl_min, fl, 1, lossy, ctx, 0, wl, 0, out);
        w = bisect_reference(f, wl, 0, lossy, ctx, 1, 0, f, out);
    } else {
        f = fl > fl_min ? bisect_smallest(fl_min, fl, lossy, ctx, 0, wl, 0, out) : fl;
        int wlo = f > 1 ? f : 1; /* WL = FL is a format (no integer bit); WL >= 1 */
        w = wl > wlo ? bisect_smallest(wlo, wl, lossy, ctx, 1, 0, f, out) : wl;
    }
    out->wl = w;
    out->fl = f;
}

void adapt_pu(double D, enum adapt_trace_strategy st, int buffer_bits,
              enum adapt_compat compat, int *wl, int *fl, int *s_out)
{
    int s = 1;
    double lambda = log(D) - 1.0;
    if (D > 0.0 && isfinite(D) && lambda > 0.0) {
        double l2 = lambda * lambda;
        double a = ceil(1.0 / l2);
        int s1 = a > 64.0 ? 64 : (int)a; /* large values only matter through min/max with s2 */
        if (s1 < 1) s1 = 1;
        double b = ceil(32.0 * l2);
        int s2 = (b > 32.0 ? 32 : (int)b) - *fl;
        int s2_min = compat == ADAPT_COMPAT_REFERENCE ? 0 : 1; /* the paper's bound is 1 */
        if (s2 < s2_min) s2 = s2_min;
        switch (st) {
        case ADAPT_TRACE_STRATEGY_MIN: s = s1 < s2 ? s1 : s2; break;
        case ADAPT_TRACE_STRATEGY_MEAN: s = (s1 + s2 + 1) / 2; break;
        case ADAPT_TRACE_STRATEGY_MAX: s = s1 > s2 ? s1 : s2; break;
        case ADAPT_TRACE_STRATEGY_NONE: break; /* no strategy: s = 1 */
        }
    }
    int f = *fl + s;
    if (f > 32) f = 32;
    int w = (*wl > f ? *wl : f) + 1;
    if (w > 32) w = 32;
    if (f > 32 - buffer_bits) f = 32 - buffer_bits;
    int wb = f + buffer_bits;
    if (wb > 32) wb = 32;
    if (wb > w) w = wb;
    *fl = f;
    *wl = w;
    if (s_out) *s_out = s;
}

double adapt_muppet_gd(const float *const *g, int r, size_t n)
{
    double sq = 0.0, ss = 0.0;
    for (size_t i = 0; i < n; i++) {
        double sum = 0.0;
        for (int k = 0; k < r; k++) {
            double v = g[k][i];
            sq += v * v;
            sum += v;
        }
        ss += sum * sum;
    }
    return adapt_muppet_gd_of(sq, ss);
}

double adapt_muppet_gd_of(double sq, double ss)
{
    return ss > 0.0 ? sq / ss : INFINITY;
}

double adapt_muppet_threshold(int epoch) { return 1.0 + 1.5 * exp(-0.1 * epoch); }

int adapt_muppet_observe(struct adapt_muppet_rule *m, double S, int epoch)
{
    if (S >= m->max_gd) {
        m->max_gd = S;
    } else if (m->max_gd / S > adapt_muppet_threshold(epoch)) {
        m->violations++;
        if (m->violations >= m->patience) {
            m->max_gd = 0.0;
            m->violations = 0;
            return 1;
        }
    }
    return 0;
}

int adapt_amp_scaler_update(struct adapt_amp_scaler *s, int overflow)
{
    if (overflow) {
        s->scale *= 0.5;
        s->good_steps = 0;
        return 1;
    }
    if (++s->good_steps >= s->growth_interval) {
        s->scale *= 2.0;
        s->good_steps = 0;
    }
    return 0;
}
