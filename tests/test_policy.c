/* tests/test_policy.c: the precision policies' decision rules
 * (src/policy/policy_core.c) driven by synthetic statistics. Every expected
 * value is worked out by hand in the comment above it from the rules in the
 * spec (sections 3 and 4).
 *
 * This file: the rules of AdaPT (push-down, push-up, lookback, resolution, strategy), MuPPET
 * and AMP's loss scaler, and main. The policies in the training engine, on a real network, are
 * checked in test_policy_engine.c (the precision copies, AdaPT) and test_policy_amp_muppet.c. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "src/config/config.h"
#include "src/net/optim.h"
#include "src/policy/policy.h"
#include "src/policy/policy_core.h"
#include "src/policy/precision.h"
#include "tests/test_policy.h"
#include "tests/testutil.h"

/* Oracle: lossless iff fl >= 6 and wl >= 9. */
struct oracle {
    int calls;
    int last_wl[32], last_fl[32];
};
static int lossy_6_9(void *ctx, int wl, int fl)
{
    struct oracle *o = ctx;
    o->last_wl[o->calls] = wl;
    o->last_fl[o->calls] = fl;
    o->calls++;
    return fl < 6 || wl < 9;
}

/* corrected, start <16,12>, fl_min 4; the search keeps "lossy" at lo - 1 =
 * 3 so that fl_min itself can be the answer:
 * FL: (3,12] mid 8 lossless -> hi 8; (3,8] mid 6 lossless -> hi 6; (3,6]
 *     mid 5 lossy -> 5; (5,6]: stop, FL 6.
 * WL: (5,16] mid 11 -> hi 11; (5,11] mid 8 lossy -> 8; (8,11] mid 10 -> hi
 *     10; (8,10] mid 9 -> hi 9; stop: WL 9. 7 oracle calls, result <9,6>. */
START_TEST(test_pd_corrected)
{
    struct oracle o = {0};
    struct adapt_pd_result r;
    adapt_pd_bisect(16, 12, 4, ADAPT_COMPAT_CORRECTED, lossy_6_9, &o, &r);
    ck_assert_int_eq(r.wl, 9);
    ck_assert_int_eq(r.fl, 6);
    ck_assert_int_eq(r.steps, 7);
    ck_assert_int_eq(r.evals, 7);
    ck_assert_int_eq(o.calls, 7);
    static const int fl_probe[3] = {8, 6, 5}, wl_probe[4] = {11, 8, 10, 9};
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(o.last_fl[i], fl_probe[i]);
        ck_assert_int_eq(o.last_wl[i], 16);
    }
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(o.last_wl[3 + i], wl_probe[i]);
        ck_assert_int_eq(o.last_fl[3 + i], 6);
    }
}
END_TEST

/* corrected reaches the lower bounds: everything lossless from <9,5>,
 * fl_min 4: FL (3,5] mid 4 -> hi 4; WL (3,9] mid 6 -> 6, mid 5 -> 5, mid 4
 * -> 4: <4,4>, the smallest format the search may return. Lossy iff
 * fl < 4 or wl < 6 from <12,9>: FL (3,9] mid 6, 5, 4 lossless -> FL 4; WL
 * (3,12] mid 8 -> 8, mid 6 -> 6, mid 5 lossy, stop: <6,4>. */
static int lossy_4_6(void *ctx, int wl, int fl) { (void)ctx; return fl < 4 || wl < 6; }
static int never_lossy(void *ctx, int wl, int fl) { (void)ctx, (void)wl, (void)fl; return 0; }
START_TEST(test_pd_corrected_lower_bound)
{
    struct adapt_pd_result r;
    adapt_pd_bisect(9, 5, 4, ADAPT_COMPAT_CORRECTED, never_lossy, NULL, &r);
    ck_assert_int_eq(r.fl, 4);
    ck_assert_int_eq(r.wl, 4);
    adapt_pd_bisect(12, 9, 4, ADAPT_COMPAT_CORRECTED, lossy_4_6, NULL, &r);
    ck_assert_int_eq(r.fl, 4);
    ck_assert_int_eq(r.wl, 6);
}
END_TEST

/* reference: FL probes at lo and returns lo: [4,12] probe 4 lossy -> lo 8;
 * [8,12] probe 8 lossless -> hi 10; [8,10] probe 8 -> hi 9; FL = lo = 8.
 * WL probes mid, returns lo: [8,16] mid 12 -> hi 12; mid 10 -> hi 10; mid 9
 * -> hi 9; WL = lo = 8. Result <8,8>: lossy by the oracle's own measure, the
 * published implementation's behaviour. */
START_TEST(test_pd_reference)
{
    struct oracle o = {0};
    struct adapt_pd_result r;
    adapt_pd_bisect(16, 12, 4, ADAPT_COMPAT_REFERENCE, lossy_6_9, &o, &r);
    ck_assert_int_eq(r.fl, 8);
    ck_assert_int_eq(r.wl, 8);
    ck_assert_int_eq(r.evals, 6);
    ck_assert_int_eq(o.last_fl[0], 4);
    ck_assert_int_eq(o.last_fl[1], 8);
}
END_TEST

/* A transcription of the published reference's push-down loops, used as the
 * oracle of test_pd_reference_exhaustive: each loop runs at most (hi - lo)
 * times as counted on entry, computes mid = ceil((lo + hi) / 2), tests FL at
 * lo (the FL loop) or WL at mid (the WL loop), moves lo up to mid when lossy
 * and hi down to mid otherwise, leaves once hi - lo <= 1, and returns lo. */
struct probe_log {
    int n;
    int wl[64], fl[64];
    int a, b; /* threshold oracle: lossy iff fl < a or wl < b */
};
static int lossy_threshold(void *ctx, int wl, int fl)
{
    struct probe_log *o = ctx;
    if (o->n < 64) {
        o->wl[o->n] = wl;
        o->fl[o->n] = fl;
    }
    o->n++;
    return fl < o->a || wl < o->b;
}
static void ref_push_down(int wl, int fl, int fl_min, struct probe_log *o, int *wl_out, int *fl_out)
{
    int lo = fl_min, hi = fl;
    for (int n = 0, count = hi - lo; n < count; n++) {
        int mid = (hi + lo + 1) / 2;
        if (lossy_threshold(o, wl, lo)) lo = mid;
        else hi = mid;
        if (hi - lo <= 1) break;
    }
    int f = lo;
    lo = f;
    hi = wl;
    for (int n = 0, count = hi - lo; n < count; n++) {
        int mid = (hi + lo + 1) / 2;
        if (lossy_threshold(o, mid, f)) lo = mid;
        else hi = mid;
        if (hi - lo <= 1) break;
    }
    *wl_out = lo;
    *fl_out = f;
}

/* Reference push-down against the transcription above, exhaustively: every
 * start <wl, fl> with wl in 1..16, fl in 0..16, every lower bound fl_min in
 * 0..6 and every threshold oracle (lossy iff fl < a or wl < b, a and b in
 * 0..18): same result, same probes in the same order. The cases with
 * hi - lo = 1 on entry are where a loop that stops as soon as hi - lo <= 1
 * differs (it makes no test; the reference makes one). */
START_TEST(test_pd_reference_exhaustive)
{
    long cases = 0, width1 = 0;
    for (int wl = 1; wl <= 16; wl++)
        for (int fl = 0; fl <= 16; fl++)
            for (int lo = 0; lo <= 6; lo++)
                for (int a = 0; a <= 18; a++)
                    for (int b = 0; b <= 18; b++) {
                        struct probe_log want = {0}, got = {0};
                        want.a = got.a = a;
                        want.b = got.b = b;
                        int rw, rf;
                        ref_push_down(wl, fl, lo, &want, &rw, &rf);
                        struct adapt_pd_result r;
                        adapt_pd_bisect(wl, fl, lo, ADAPT_COMPAT_REFERENCE, lossy_threshold, &got,
                                        &r);
                        if (!(r.wl == rw && r.fl == rf && got.n == want.n && r.evals == got.n))
                            ck_abort_msg("<%d,%d> fl_min %d oracle (%d,%d): got <%d,%d> in %d "
                                         "tests, reference <%d,%d> in %d", wl, fl, lo, a, b, r.wl,
                                         r.fl, got.n, rw, rf, want.n);
                        int same = 1;
                        for (int i = 0; i < want.n && i < 64; i++)
                            same &= got.wl[i] == want.wl[i] && got.fl[i] == want.fl[i];
                        if (!same) ck_abort_msg("<%d,%d> fl_min %d: other probes", wl, fl, lo);
                        cases++;
                        width1 += fl - lo == 1;
                    }
    ck_assert_int_eq(cases, 16L * 17 * 7 * 19 * 19);
    ck_assert_int_gt(width1, 0);
}
END_TEST

/* <9,5>, fl_min 4, lossy iff fl < 6. The FL interval [4,5] still gets one
 * test (FL 4, lossy) -> lo = 5; WL [5,9] at FL 5 is lossy everywhere: mid 7
 * -> lo 7, mid 8 -> lo 8, stop; result <8,5> (a loop without the test on
 * [4,5] returns FL 4: <8,4>). */
static int lossy_fl6(void *ctx, int wl, int fl) { (void)ctx, (void)wl; return fl < 6; }
START_TEST(test_pd_reference_width1)
{
    struct adapt_pd_result r;
    adapt_pd_bisect(9, 5, 4, ADAPT_COMPAT_REFERENCE, lossy_fl6, NULL, &r);
    ck_assert_int_eq(r.fl, 5);
    ck_assert_int_eq(r.wl, 8);
}
END_TEST

/* Everything lossless from <8,4> with fl_min 4: the FL range is empty; WL
 * searches (3,8]: mid 6 -> hi 6, mid 5 -> hi 5, mid 4 -> hi 4; result <4,4>,
 * 3 calls. Everything lossy: FL (3,10] mid 7 -> 7, mid 9 -> 9, stop: hi 10;
 * WL (9,12] mid 11 -> 11: hi 12; the format is unchanged. */
static int lossless(void *ctx, int wl, int fl) { (void)ctx; (void)wl; (void)fl; return 0; }
static int lossy_all(void *ctx, int wl, int fl) { (void)ctx; (void)wl; (void)fl; return 1; }
START_TEST(test_pd_edges)
{
    struct adapt_pd_result r;
    adapt_pd_bisect(8, 4, 4, ADAPT_COMPAT_CORRECTED, lossless, NULL, &r);
    ck_assert_int_eq(r.wl, 4);
    ck_assert_int_eq(r.fl, 4);
    ck_assert_int_eq(r.evals, 3);
    adapt_pd_bisect(12, 10, 4, ADAPT_COMPAT_CORRECTED, lossy_all, NULL, &r);
    ck_assert_int_eq(r.wl, 12);
    ck_assert_int_eq(r.fl, 10);
    ck_assert_int_eq(r.evals, 3);
}
END_TEST

/* Push-up from <8,4>, buffer 4. D = e^2: lambda = 1, s1 = 1, s2 = 32 - 4 = 28.
 *  min:  s 1  -> FL 5,  WL max(8,5)+1 = 9;  buffer: FL 5,  WL max(9, 9)   -> <9,5>
 *  mean: s 15 -> FL 19, WL 20;              buffer: FL 19, WL max(23, 20) -> <23,19>
 *  max:  s 28 -> FL 32, WL 32;              buffer: FL 28, WL 32          -> <32,28>
 * D = e^1.5: lambda 0.5, s1 = ceil(4) = 4, s2 = ceil(8) - 4 = 4; min 4 ->
 *  FL 8, WL 9; buffer: WL max(12, 9) -> <12,8>.
 * D = 2 (lambda < 0) and D = +inf: s = 1 -> <9,5>. */
START_TEST(test_pu)
{
    static const struct {
        double D;
        enum adapt_trace_strategy st;
        int wl, fl, s;
    } c[] = {{M_E * M_E, ADAPT_TRACE_STRATEGY_MIN, 9, 5, 1},
             {M_E * M_E, ADAPT_TRACE_STRATEGY_MEAN, 23, 19, 15},
             {M_E * M_E, ADAPT_TRACE_STRATEGY_MAX, 32, 28, 28},
             {4.4816890703380645, ADAPT_TRACE_STRATEGY_MIN, 12, 8, 4},
             {2.0, ADAPT_TRACE_STRATEGY_MAX, 9, 5, 1},
             {INFINITY, ADAPT_TRACE_STRATEGY_MAX, 9, 5, 1}};
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        int wl = 8, fl = 4, s = -1;
        adapt_pu(c[i].D, c[i].st, 4, ADAPT_COMPAT_CORRECTED, &wl, &fl, &s);
        ck_assert_msg(wl == c[i].wl && fl == c[i].fl && s == c[i].s,
                      "case %zu: got <%d,%d> s %d, want <%d,%d> s %d", i, wl, fl, s, c[i].wl,
                      c[i].fl, c[i].s);
    }
    /* buffer 0 and FL near the top: <30,30>, D = e^2 max: s2 = 32-30 = 2, s = 2
     * -> FL 32, WL 32 */
    int wl = 30, fl = 30;
    adapt_pu(M_E * M_E, ADAPT_TRACE_STRATEGY_MAX, 0, ADAPT_COMPAT_CORRECTED, &wl, &fl, NULL);
    ck_assert_int_eq(fl, 32);
    ck_assert_int_eq(wl, 32);
}
END_TEST

/* s2's lower bound. D = e^1.5: lambda 0.5, s1 = 4, ceil(32 * 0.25) = 8; at
 * FL 8, s2 = 8 - 8 = 0 -> corrected (the paper's bound 1): s2 = 1, min s 1,
 * FL 9, WL max(12, 9) + 1 = 13, buffer 4: max(13, 13) -> <13,9>; reference
 * (bound 0): s 0, FL 8, WL 13 -> <13,8>. */
START_TEST(test_pu_s2_bound)
{
    int wl = 12, fl = 8, s = -1;
    adapt_pu(4.4816890703380645, ADAPT_TRACE_STRATEGY_MIN, 4, ADAPT_COMPAT_CORRECTED, &wl, &fl, &s);
    ck_assert_int_eq(s, 1);
    ck_assert_int_eq(fl, 9);
    ck_assert_int_eq(wl, 13);
    wl = 12, fl = 8;
    adapt_pu(4.4816890703380645, ADAPT_TRACE_STRATEGY_MIN, 4, ADAPT_COMPAT_REFERENCE, &wl, &fl, &s);
    ck_assert_int_eq(s, 0);
    ck_assert_int_eq(fl, 8);
    ck_assert_int_eq(wl, 13);
}
END_TEST

/* Lookback, lb_lwr 25, lb_upr 100, gamma 0.33, from lb 50:
 * D = 4: 100/4 = 25 -> new 25; 25*0.33 + 0.67*50 = 41.75 (reference: 42).
 * D = 0.5: 200 -> 100; 33 + 33.5 = 66.5 (reference 67).
 * D = +inf: 0 -> 25 -> 41.75. D = 0: lb_upr -> 66.5.
 * Reference sticks above lb_upr: from 101 with new 100: 33 + 67.67 = 100.67
 * -> ceil 101, again and again; corrected converges to 100. */
START_TEST(test_lookback)
{
    const enum adapt_compat cor = ADAPT_COMPAT_CORRECTED, ref = ADAPT_COMPAT_REFERENCE;
    ck_assert_double_eq_tol(adapt_lookback_update(50, 4, 25, 100, 0.33, cor), 41.75, 1e-12);
    ck_assert_double_eq(adapt_lookback_update(50, 4, 25, 100, 0.33, ref), 42.0);
    ck_assert_double_eq_tol(adapt_lookback_update(50, 0.5, 25, 100, 0.33, cor), 66.5, 1e-12);
    ck_assert_double_eq(adapt_lookback_update(50, 0.5, 25, 100, 0.33, ref), 67.0);
    ck_assert_double_eq_tol(adapt_lookback_update(50, INFINITY, 25, 100, 0.33, cor), 41.75, 1e-12);
    ck_assert_double_eq_tol(adapt_lookback_update(50, 0.0, 25, 100, 0.33, cor), 66.5, 1e-12);
    double r = 101, c = 101;
    for (int i = 0; i < 50; i++) {
        r = adapt_lookback_update(r, 0.5, 25, 100, 0.33, ADAPT_COMPAT_REFERENCE);
        c = adapt_lookback_update(c, 0.5, 25, 100, 0.33, ADAPT_COMPAT_CORRECTED);
    }
    ck_assert_double_eq(r, 101.0);
    ck_assert_double_eq_tol(c, 100.0, 1e-6);
    /* D = 1 / n / ||G||: D(10, 2.5) = 4 */
    ck_assert_double_eq(adapt_gradient_diversity(10, 2.5), 4.0);
    ck_assert(isinf(adapt_gradient_diversity(10, 0.0)));
}
END_TEST

/* Resolution: round(99.6) = 100 = lb_upr -> r + 1; round(25.4) = 25 = lb_lwr
 * -> r - 1; in between unchanged; clamped to [50, 150]. */
START_TEST(test_resolution)
{
    ck_assert_int_eq(adapt_resolution_update(100, 99.6, 25, 100, 50, 150), 101);
    ck_assert_int_eq(adapt_resolution_update(100, 25.4, 25, 100, 50, 150), 99);
    ck_assert_int_eq(adapt_resolution_update(100, 60.0, 25, 100, 50, 150), 100);
    ck_assert_int_eq(adapt_resolution_update(150, 100.0, 25, 100, 50, 150), 150);
    ck_assert_int_eq(adapt_resolution_update(50, 25.0, 25, 100, 50, 150), 50);
}
END_TEST

/* Strategy with capacity 4, from min:
 *  1.0 (k 1: mean 1.0 <= 1.0)             -> mean
 *  0.5 (k 2: mean 0.75 > 0.5)             -> min
 *  0.8 (k 2: mean(0.5,0.8) 0.65 <= 0.8)   -> mean
 *  0.9 (k 3: mean(0.5,0.8,0.9) 0.733)     -> max
 *  1.0 (k 3: mean 0.9 <= 1.0)             -> max (stays)
 *  0.1 (k 3: mean(0.9,1.0,0.1) 0.667)     -> min */
START_TEST(test_strategy)
{
    double hist[4];
    struct adapt_strategy_state s = {ADAPT_TRACE_STRATEGY_MIN, 4, 0, 0, hist};
    static const double loss[6] = {1.0, 0.5, 0.8, 0.9, 1.0, 0.1};
    static const double mlb[6] = {2, 2, 2, 3, 3, 3};
    static const enum adapt_trace_strategy want[6] = {
        ADAPT_TRACE_STRATEGY_MEAN, ADAPT_TRACE_STRATEGY_MIN, ADAPT_TRACE_STRATEGY_MEAN,
        ADAPT_TRACE_STRATEGY_MAX,  ADAPT_TRACE_STRATEGY_MAX, ADAPT_TRACE_STRATEGY_MIN};
    for (int i = 0; i < 6; i++)
        ck_assert_int_eq(adapt_strategy_update(&s, loss[i], mlb[i]), want[i]);
}
END_TEST

/* The reference window, capacity 8, from min; k = int(mean lb):
 *  1.0 k 2: 0 stored <= 2: store              [1.0]
 *  0.9 k 2: 1 stored: store                   [1.0 0.9]
 *  0.8 k 2.9 -> 2: 2 stored: store            [1.0 0.9 0.8]
 *  0.7 k 2: 3 > 2: |2.7 / 2| = 1.35 > 0.7 -> min; keep last 2, store [0.9 0.8 0.7]
 *  2.0 k 2: |2.4 / 2| = 1.2 <= 2.0 -> mean    [0.8 0.7 2.0]
 *  3.0 k 2: |3.5 / 2| = 1.75 <= 3 -> max      [0.7 2.0 3.0]
 *  1.0 k 4: 3 stored <= 4: no change (max)    [0.7 2.0 3.0 1.0]
 *  1.0 k 3: 4 > 3: |6.7 / 3| = 2.233 > 1 -> min; keep 3 [2.0 3.0 1.0 1.0]
 * The window that includes the current loss would move to mean at once. */
START_TEST(test_strategy_reference)
{
    double hist[8];
    struct adapt_strategy_state s = {ADAPT_TRACE_STRATEGY_MIN, 8, 0, 0, hist};
    static const double loss[8] = {1.0, 0.9, 0.8, 0.7, 2.0, 3.0, 1.0, 1.0};
    static const double mlb[8] = {2, 2, 2.9, 2, 2, 2, 4, 3};
    static const enum adapt_trace_strategy want[8] = {
        ADAPT_TRACE_STRATEGY_MIN,  ADAPT_TRACE_STRATEGY_MIN, ADAPT_TRACE_STRATEGY_MIN,
        ADAPT_TRACE_STRATEGY_MIN,  ADAPT_TRACE_STRATEGY_MEAN, ADAPT_TRACE_STRATEGY_MAX,
        ADAPT_TRACE_STRATEGY_MAX,  ADAPT_TRACE_STRATEGY_MIN};
    static const int held[8] = {1, 2, 3, 3, 3, 3, 4, 4};
    for (int i = 0; i < 8; i++) {
        ck_assert_int_eq(adapt_strategy_update_reference(&s, loss[i], mlb[i]), want[i]);
        ck_assert_int_eq(s.n, held[i]);
    }
}
END_TEST

/* MuPPET GD: g1 = (1,0), g2 = (0,1): 2 / |(1,1)|^2 = 1. g1 = g2 = (1,2):
 * 10 / |(2,4)|^2 = 0.5. (3,0), (-1,1): 11 / |(2,1)|^2 = 2.2. */
START_TEST(test_muppet_gd)
{
    float a[2] = {1, 0}, b[2] = {0, 1}, c[2] = {1, 2}, d[2] = {3, 0}, e[2] = {-1, 1};
    const float *g1[2] = {a, b}, *g2[2] = {c, c}, *g3[2] = {d, e};
    ck_assert_double_eq_tol(adapt_muppet_gd(g1, 2, 2), 1.0, 1e-12);
    ck_assert_double_eq_tol(adapt_muppet_gd(g2, 2, 2), 0.5, 1e-12);
    ck_assert_double_eq_tol(adapt_muppet_gd(g3, 2, 2), 2.2, 1e-12);
}
END_TEST

/* Switching: T(0) = 2.5, T(10) = 1 + 1.5/e = 1.5518192. S at epochs 3, 6, 9,
 * 12 = 1.0, 0.5, 0.55, 0.6 with patience 2: 1.0 sets max; at 6, 1/0.5 = 2 >
 * T(6) = 1.8232 -> violation 1; at 9, 1/0.55 = 1.818 > T(9) = 1.6099 ->
 * violation 2 -> switch (reset); at 12, 0.6 >= 0 is the new max. An S with
 * ratio under T(e) is no violation: max 1.0, S 0.7 at epoch 3 (1.43 < 2.11). */
START_TEST(test_muppet_rule)
{
    ck_assert_double_eq_tol(adapt_muppet_threshold(0), 2.5, 1e-12);
    ck_assert_double_eq_tol(adapt_muppet_threshold(10), 1.5518191617571635, 1e-12);
    struct adapt_muppet_rule m = {0.0, 0, 2};
    ck_assert_int_eq(adapt_muppet_observe(&m, 1.0, 3), 0);
    ck_assert_int_eq(adapt_muppet_observe(&m, 0.5, 6), 0);
    ck_assert_int_eq(m.violations, 1);
    ck_assert_int_eq(adapt_muppet_observe(&m, 0.55, 9), 1);
    ck_assert_int_eq(m.violations, 0);
    ck_assert_int_eq(adapt_muppet_observe(&m, 0.6, 12), 0);
    ck_assert_double_eq(m.max_gd, 0.6);
    struct adapt_muppet_rule n = {1.0, 0, 2};
    ck_assert_int_eq(adapt_muppet_observe(&n, 0.7, 3), 0);
    ck_assert_int_eq(n.violations, 0);
}
END_TEST

/* Loss scale 65536, growth interval 3: overflow -> skip, 32768; three clean
 * steps -> 65536; one clean, overflow -> skip, 32768; the clean count
 * restarted, so two clean steps leave it at 32768. */
START_TEST(test_amp_scaler)
{
    struct adapt_amp_scaler s = {65536.0, 3, 0};
    ck_assert_int_eq(adapt_amp_scaler_update(&s, 1), 1);
    ck_assert_double_eq(s.scale, 32768.0);
    for (int i = 0; i < 3; i++) ck_assert_int_eq(adapt_amp_scaler_update(&s, 0), 0);
    ck_assert_double_eq(s.scale, 65536.0);
    adapt_amp_scaler_update(&s, 0);
    ck_assert_int_eq(adapt_amp_scaler_update(&s, 1), 1);
    ck_assert_double_eq(s.scale, 32768.0);
    adapt_amp_scaler_update(&s, 0);
    adapt_amp_scaler_update(&s, 0);
    ck_assert_double_eq(s.scale, 32768.0);
}
END_TEST

/* MuPPET switch epochs for a GD sequence (r = 3: checks at epochs 2, 5, 8,
 * ...; T(e) = 1 + 1.5 exp(-0.1 e): T(8) 1.674, T(11) 1.4993, T(17) 1.2737,
 * T(20) 1.2030, T(23) 1.1504). S = 1.0, 0.9 (1.11 < T), 0.55 (1.818 > T(8):
 * violation 1), 0.6 (1.667 > T(11): violation 2, switch at 11), 1.0 (new
 * max), 0.7 (1.43 > T(17): 1), 0.9 (1.11 < T(20)), 0.8 (1.25 > T(23): 2,
 * switch at 23). */
START_TEST(test_muppet_switch_epochs)
{
    static const double S[8] = {1.0, 0.9, 0.55, 0.6, 1.0, 0.7, 0.9, 0.8};
    struct adapt_muppet_rule m = {0.0, 0, 2};
    int switched[8], ns = 0;
    for (int k = 0; k < 8; k++) {
        int e = 3 * k + 2;
        if (adapt_muppet_observe(&m, S[k], e)) switched[ns++] = e;
    }
    ck_assert_int_eq(ns, 2);
    ck_assert_int_eq(switched[0], 11);
    ck_assert_int_eq(switched[1], 23);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("policy");
    TCase *a = tcase_create("adapt");
    tcase_set_timeout(a, 60);
    tcase_add_test(a, test_pd_corrected);
    tcase_add_test(a, test_pd_corrected_lower_bound);
    tcase_add_test(a, test_pd_reference);
    tcase_add_test(a, test_pd_reference_exhaustive);
    tcase_add_test(a, test_pd_reference_width1);
    tcase_add_test(a, test_pd_edges);
    tcase_add_test(a, test_pu);
    tcase_add_test(a, test_lookback);
    tcase_add_test(a, test_resolution);
    tcase_add_test(a, test_strategy);
    tcase_add_test(a, test_strategy_reference);
    tcase_add_test(a, test_pu_s2_bound);
    suite_add_tcase(s, a);
    TCase *m = tcase_create("muppet_amp");
    tcase_add_test(m, test_muppet_gd);
    tcase_add_test(m, test_muppet_rule);
    tcase_add_test(m, test_amp_scaler);
    tcase_add_test(m, test_muppet_switch_epochs);
    suite_add_tcase(s, m);
    TCase *e = tcase_create("engine");
    tcase_set_timeout(e, 30);
    test_policy_add_engine(e);
    test_policy_add_amp_muppet(e);
    suite_add_tcase(s, e);
    return tu_run_suite(s, CK_FORK_GETENV);
}
