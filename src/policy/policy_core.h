/* src/policy/policy_core.h: the decision rules of the precision policies as
 * pure functions of their statistics (doc/algorithms.md), so each can be
 * driven from synthetic numbers in tests.
 *
 * AdaPT (Kummer et al., SDM 2023, section 3; "compat" selects the published
 * reference implementation's variants, doc/algorithms.md):
 *   adapt_lookback_update   lb_new = ceil(clamp(lb_upr / D, lb_lwr, lb_upr)),
 *                           lb = lb_new * gamma + (1 - gamma) * lb
 *   adapt_resolution_update r +-1 at the lookback bounds, clamped
 *   adapt_strategy_update   min / mean / max from the loss history
 *   adapt_pd_bisect         push-down: smallest lossless <WL, FL> by bisection
 *   adapt_pu                push-up from the gradient diversity D
 * MuPPET (Rajagopal et al., FPL 2020; doc/algorithms.md): gradient diversity of
 *   the last r epochs' gradients and the switching rule with
 *   T(e) = 1 + 1.5 exp(-0.1 e).
 * AMP (PyTorch GradScaler): dynamic loss scale.
 *
 *   struct adapt_pd_result pd;
 *   adapt_pd_bisect(8, 6, 4, ADAPT_COMPAT_CORRECTED, my_oracle, ctx, &pd);
 *   int wl = pd.wl, fl = pd.fl, s;
 *   adapt_pu(D, ADAPT_TRACE_STRATEGY_MIN, 4, ADAPT_COMPAT_CORRECTED, &wl, &fl, &s);
 *
 * The strategy is enum adapt_trace_strategy (src/trace/trace.h; the rules use
 * MIN, MEAN and MAX, never NONE), the compatibility mode enum adapt_compat
 * (src/config/config.h).
 *
 * Non-goals: no tensors and no quantization here (the oracle does that).
 */
#ifndef ADAPT_POLICY_CORE_H
#define ADAPT_POLICY_CORE_H

#include <stddef.h>

#include "src/config/config.h"
#include "src/trace/trace.h"

/* Gradient diversity of eq. 3.5 from the accumulated normalised gradient:
 * D = n / ||G||_2 (+inf when ||G|| = 0). */
double adapt_gradient_diversity(long n, double g_norm);

/* One lookback update (every step). corrected: lb stays real; reference: the
 * result is rounded up every step. D <= 0 counts as lb_new = lb_upr. */
double adapt_lookback_update(double lb, double D, int lb_lwr, int lb_upr, double gamma,
                             enum adapt_compat compat);
/* round(lb) == lb_upr: r + 1; == lb_lwr: r - 1; then clamped to [r_lwr, r_upr]. */
int adapt_resolution_update(int r, double lb, int lb_lwr, int lb_upr, int r_lwr, int r_upr);

/* The global push-up strategy and the loss history it reads. */
struct adapt_strategy_state {
    enum adapt_trace_strategy st;
    int cap;      /* history capacity (>= lb_upr) */
    int n, pos;   /* losses held, next slot */
    double *hist; /* (cap) ring of the last losses */
};
/* Keeps the last k = max(1, round(mean_lb)) losses including `loss`; if
 * |mean of them| <= |loss| the strategy moves up (min -> mean -> max),
 * otherwise it falls back to min. Returns the new strategy. */
enum adapt_trace_strategy adapt_strategy_update(struct adapt_strategy_state *s, double loss,
                                                double mean_lb);

/* compat = reference: the published implementation's window. k =
 * int(mean_lb) (truncated; mean_lb is the previous step's mean lookback);
 * while at most k losses are stored nothing changes; otherwise avg =
 * |sum of the stored losses / k| (k + 1 of them in the steady state, the
 * current loss not among them) is compared with |loss| as above and the
 * history is cut to its last k. Then `loss` is stored. Needs cap >= k + 1. */
enum adapt_trace_strategy adapt_strategy_update_reference(struct adapt_strategy_state *s,
                                                          double loss, double mean_lb);

/* Push-down oracle: 1 when quantizing the weights with <wl, fl> loses
 * information (KL above the threshold), 0 when lossless. */
typedef int (*adapt_lossy_fn)(void *ctx, int wl, int fl);

struct adapt_pd_result {
    int wl, fl; /* the result */
    int steps;  /* bisection iterations (FL and WL) */
    int evals;  /* oracle calls */
};
/* corrected: the smallest lossless FL in [fl_min, fl] at wl, then the
 * smallest lossless WL in [max(FL*, 1), wl] at FL*, both by bisection with
 * mid = ceil((lo + hi) / 2) over (lo - 1, hi] (the lower end is tested; the
 * upper end is the fallback and is not). reference: the published loops:
 * FL over [fl_min, fl] tested at lo, WL over [FL*, wl] tested at mid, lossy
 * -> lo = mid, else hi = mid, at most hi - lo iterations counted on entry,
 * leaving once hi - lo <= 1, each returning lo (so an interval of width 1
 * on entry is tested once, and fl < fl_min gives fl_min). See
 * doc/algorithms.md. */
void adapt_pd_bisect(int wl, int fl, int fl_min, enum adapt_compat compat, adapt_lossy_fn lossy,
                     void *ctx, struct adapt_pd_result *out);

/* Push-up (natural log): lambda = ln(D) - 1; s = 1, or when 0 < D < inf and
 * lambda > 0: s1 = max(ceil(1/lambda^2), 1), s2 = max(min(ceil(32 lambda^2),
 * 32) - FL, m) with m = 1 (corrected, the paper) or 0 (reference), s = min |
 * ceil(mean) | max of them by strategy; FL = min(FL + s, 32); WL =
 * min(max(WL, FL) + 1, 32); then buffer bits b: FL = min(FL, 32 - b); WL =
 * max(min(FL + b, 32), WL). *s_out gets s. */
void adapt_pu(double D, enum adapt_trace_strategy st, int buffer_bits,
              enum adapt_compat compat, int *wl, int *fl, int *s_out);

/* MuPPET: GD = sum_k ||g_k||^2 / ||sum_k g_k||^2 over r gradients of n
 * elements (+inf when the sum is zero). */
double adapt_muppet_gd(const float *const *g, int r, size_t n);
/* The same ratio from its two sums, sq = sum_k ||g_k||^2 and ss = ||sum_k g_k||^2 (the GPU
 * engine computes them on the device: adapt_cuda_net_gd). */
double adapt_muppet_gd_of(double sq, double ss);
/* T(e) = 1 + 1.5 exp(-0.1 e). */
double adapt_muppet_threshold(int epoch);

struct adapt_muppet_rule {
    double max_gd;  /* largest S since the last switch (0: none yet) */
    int violations; /* since the last switch */
    int patience;   /* violations that trigger a switch (2) */
};
/* Feeds S (mean GD over tensors) measured at the end of `epoch`: if S >=
 * max_gd, max_gd = S; else if max_gd / S > T(epoch) a violation is counted.
 * Returns 1 (and resets max_gd and the count) when the violations reach the
 * patience: switch to the next precision level. */
int adapt_muppet_observe(struct adapt_muppet_rule *m, double S, int epoch);

/* PyTorch GradScaler: skip the step and halve the scale on inf/NaN
 * gradients; double it after growth_interval clean steps in a row. */
struct adapt_amp_scaler {
    double scale;
    int growth_interval;
    int good_steps;
};
/* Returns 1 when the step must be skipped (overflow). */
int adapt_amp_scaler_update(struct adapt_amp_scaler *s, int overflow);

#endif
