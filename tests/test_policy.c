/* tests/test_policy.c: the precision policies' decision rules
 * (src/policy/policy_core.c) driven by synthetic statistics. Every expected
 * value is worked out by hand in the comment above it from the rules in the
 * spec (sections 3 and 4). */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "src/config/config.h"
#include "src/net/optim.h"
#include "src/policy/policy.h"
#include "src/policy/policy_core.h"
#include "src/policy/precision.h"
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

static struct adapt_net *small_lenet(int n)
{
    struct adapt_net *net = adapt_model_build("lenet5", 10);
    ck_assert_ptr_nonnull(net);
    ck_assert_int_eq(adapt_net_finalize(net, n), ADAPT_OK);
    adapt_net_init_params(net, 2385, 0.5);
    return net;
}

/* Weight copies: fixed <8,4> nearest puts every weight of an active unit on
 * the grid k/16 inside [-8, 8 - 1/16] and the layer computes with the copy;
 * a float unit computes with the master. Outputs of every layer after a unit
 * are on the same grid after a training forward. */
START_TEST(test_precision_copies_and_outputs)
{
    struct adapt_net *net = small_lenet(2);
    struct adapt_precision *p;
    ck_assert_int_eq(adapt_precision_alloc(&p, net, 1, ADAPT_QOUT_ALL, QUANT_ROUND_NEAREST, 7),
                     ADAPT_OK);
    struct quant_spec s;
    ck_assert_int_eq(quant_spec_parse("fixed(8,4)", &s), ADAPT_OK);
    for (int u = 0; u < p->nunits; u++) adapt_precision_set(p, u, &s);
    adapt_precision_set_float(p, 4);
    adapt_precision_refresh_weights(p, 1);
    for (int u = 0; u < 4; u++) {
        const struct adapt_param *w = &p->u[u].layer->param[0];
        ck_assert_ptr_eq(w->use, p->u[u].wq);
        for (size_t i = 0; i < w->value.numel; i++) {
            float v = w->use[i] * 16.0f;
            ck_assert_float_eq(v, nearbyintf(v));
            ck_assert(w->use[i] >= -8.0f && w->use[i] <= 8.0f - 1.0f / 16);
        }
    }
    ck_assert_ptr_eq(p->u[4].layer->param[0].use, p->u[4].layer->param[0].value.data);
    float x[2 * 32 * 32];
    for (int i = 0; i < 2 * 32 * 32; i++) x[i] = (float)sin(0.37 * i) * 2.385f;
    adapt_net_forward(net, x, 2, 1);
    /* activations 1..10 follow units 0..3 (<8,4>); conv 0's output: */
    for (int a = 1; a <= 10; a++)
        for (size_t i = 0; i < net->act_numel[a] * 2; i++) {
            float v = net->act[a][i] * 16.0f;
            ck_assert_msg(v == nearbyintf(v), "activation %d[%zu] = %g is off the grid", a, i,
                          net->act[a][i]);
        }
    adapt_precision_free(p);
    ck_assert_ptr_eq(net->param[0]->use, net->param[0]->value.data);
    adapt_net_free(net);
}
END_TEST

/* quantization.ste: with fixed <4,2> the grid ends are 1.75 and -2
 * ((2^3 - 1) / 4 and -2^3 / 4). Saturating: an output at 1.75 keeps a
 * gradient that lowers it (dy > 0) and loses one that raises it (dy < 0);
 * at -2 the other way round; inside the range nothing changes. Plain
 * straight-through changes nothing. The saturation count of a training
 * forward is taken once (then NaN). */
START_TEST(test_precision_saturating_ste)
{
    struct adapt_net *net = small_lenet(1);
    struct adapt_precision *p;
    ck_assert_int_eq(adapt_precision_alloc(&p, net, 1, ADAPT_QOUT_UNITS, QUANT_ROUND_NEAREST, 7),
                     ADAPT_OK);
    ck_assert_int_eq(p->ste, ADAPT_STE_PLAIN);
    struct quant_spec s;
    ck_assert_int_eq(quant_spec_parse("fixed(4,2)", &s), ADAPT_OK);
    for (int u = 0; u < p->nunits; u++) adapt_precision_set(p, u, &s);
    adapt_precision_refresh_weights(p, 1);
    float x[32 * 32];
    for (int i = 0; i < 32 * 32; i++) x[i] = (float)sin(0.37 * i) * 40.0f;
    adapt_net_forward(net, x, 1, 1);
    double f = adapt_precision_take_act_sat(p, 0);
    ck_assert(f > 0.0 && f <= 1.0);
    ck_assert(isnan(adapt_precision_take_act_sat(p, 0)));
    adapt_net_forward(net, x, 1, 0); /* evaluation forwards are not counted */
    ck_assert(isnan(adapt_precision_take_act_sat(p, 0)));

    /* the rule on node 0 (conv 0, a rounded unit output) */
    size_t m = net->act_numel[1];
    float *y = malloc(sizeof(float) * m), *dy = malloc(sizeof(float) * m);
    ck_assert(y && dy);
    const float ys[6] = {1.75f, 1.75f, -2.0f, -2.0f, 0.5f, 0.5f};
    const float ds[6] = {-1.0f, 1.0f, -1.0f, 1.0f, -1.0f, 1.0f};
    const float want[6] = {0.0f, 1.0f, -1.0f, 0.0f, -1.0f, 1.0f};
    for (int mode = 0; mode < 2; mode++) {
        p->ste = mode ? ADAPT_STE_SATURATING : ADAPT_STE_PLAIN;
        for (size_t i = 0; i < m; i++) {
            y[i] = ys[i % 6];
            dy[i] = ds[i % 6];
        }
        net->dout_hook(net->hook_ctx, 0, y, dy, 1);
        for (size_t i = 0; i < m; i++)
            ck_assert_float_eq(dy[i], mode ? want[i % 6] : ds[i % 6]);
    }
    free(y);
    free(dy);
    adapt_precision_free(p);
    ck_assert_ptr_null(net->dout_hook);
    adapt_net_free(net);
}
END_TEST

static void set_grads(struct adapt_net *net, float v)
{
    for (int k = 0; k < net->nparam; k++)
        if (net->param[k]->role != ADAPT_PARAM_BUFFER)
            for (size_t i = 0; i < net->param[k]->grad.numel; i++) net->param[k]->grad.data[i] = v;
}

/* AdaPT in the engine: identical normalised gradients twice give G = 2 g/|g|,
 * D = n / ||G|| = 1 each time, so lb_new = 100 and from lb 25:
 * lb = 100*0.33 + 0.67*25 = 49.75, then 33 + 0.67*49.75 = 66.3325; the
 * gradients are normalised to unit L2 norm per tensor. */
START_TEST(test_adapt_policy_lookback)
{
    struct adapt_net *net = small_lenet(1);
    static struct adapt_config cfg;
    adapt_config_init(&cfg);
    ck_assert_int_eq(adapt_config_set(&cfg, "policy.name=adapt"), ADAPT_OK);
    ck_assert_int_eq(adapt_config_set(&cfg, "quantization.quant_grads=false"), ADAPT_OK);
    struct adapt_policy *p;
    ck_assert_int_eq(adapt_policy_alloc(&p, &cfg, net, 1), ADAPT_OK);
    ck_assert_int_eq(p->prec->u[0].spec.wl, 8);
    ck_assert_int_eq(p->prec->u[0].spec.fl, 4);
    set_grads(net, 0.25f);
    ck_assert_int_eq(p->type->observe(p, 1, 2.3, 0), 0);
    ck_assert_double_eq_tol(p->lb[0], 49.75, 1e-9);
    double s = 0;
    const struct adapt_param *w = net->param[0];
    for (size_t i = 0; i < w->grad.numel; i++) s += (double)w->grad.data[i] * w->grad.data[i];
    ck_assert_double_eq_tol(s, 1.0, 1e-5);
    set_grads(net, -1.5f); /* normalised: same direction up to sign -> G = 0 -> D = inf */
    p->type->observe(p, 2, 2.3, 0);
    /* D = inf: lb_new = lb_lwr = 25: 25*0.33 + 0.67*49.75 = 41.5825 */
    ck_assert_double_eq_tol(p->lb[0], 41.5825, 1e-9);
    adapt_policy_free(p);
    adapt_net_free(net);
}
END_TEST

/* The configured strategy reaches the policy and the trace as the same enum; the
 * checkpoint's policy state counts it from 0 (min), as it always has. Events for the
 * trace are kept however many there are. */
START_TEST(test_adapt_strategy_and_events)
{
    static const struct {
        const char *set;
        enum adapt_trace_strategy st;
        int saved;
    } c[] = {{"quantization.strategy=min", ADAPT_TRACE_STRATEGY_MIN, 0},
             {"quantization.strategy=mean", ADAPT_TRACE_STRATEGY_MEAN, 1},
             {"quantization.strategy=max", ADAPT_TRACE_STRATEGY_MAX, 2}};
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        struct adapt_net *net = small_lenet(1);
        static struct adapt_config cfg;
        adapt_config_init(&cfg);
        ck_assert_int_eq(adapt_config_set(&cfg, "policy.name=adapt"), ADAPT_OK);
        ck_assert_int_eq(adapt_config_set(&cfg, c[i].set), ADAPT_OK);
        ck_assert_int_eq(cfg.quantization.strategy, c[i].st);
        struct adapt_policy *p;
        ck_assert_int_eq(adapt_policy_alloc(&p, &cfg, net, 1), ADAPT_OK);
        ck_assert_int_eq(p->strategy, c[i].st);
        json_t *j = p->type->save_json(p);
        ck_assert_int_eq(json_integer_value(json_object_get(j, "strategy")), c[i].saved);
        json_decref(j);
        struct adapt_trace_event e;
        memset(&e, 0, sizeof e);
        for (int k = 0; k < 100; k++) {
            e.unit = k;
            ck_assert_int_eq(adapt_policy_add_event(p, &e), ADAPT_OK);
        }
        ck_assert_int_eq(p->n_events, 100);
        ck_assert_int_eq(p->events[99].unit, 99);
        adapt_policy_clear_events(p);
        ck_assert_int_eq(p->n_events, 0);
        adapt_policy_free(p);
        adapt_net_free(net);
    }
}
END_TEST

/* AMP with injected overflow: a gradient of 1e5 is inf in fp16 -> the step
 * is skipped and the scale halves (65536 -> 32768); a finite one is divided
 * by the scale it was produced with: 3.0 (exact in fp16) / 32768. */
START_TEST(test_amp_policy_overflow)
{
    struct adapt_net *net = small_lenet(1);
    static struct adapt_config cfg;
    adapt_config_init(&cfg);
    ck_assert_int_eq(adapt_config_set(&cfg, "policy.name=amp"), ADAPT_OK);
    struct adapt_policy *p;
    ck_assert_int_eq(adapt_policy_alloc(&p, &cfg, net, 1), ADAPT_OK);
    ck_assert_double_eq(p->loss_scale, 65536.0);
    set_grads(net, 1e5f);
    ck_assert_int_eq(p->type->observe(p, 1, 2.3, 0), 1);
    ck_assert_double_eq(p->loss_scale, 32768.0);
    ck_assert(p->overflow);
    set_grads(net, 3.0f);
    ck_assert_int_eq(p->type->observe(p, 2, 2.3, 0), 0);
    ck_assert_float_eq(net->param[0]->grad.data[0], 3.0f / 32768.0f);
    ck_assert_double_eq(p->loss_scale, 32768.0);
    adapt_policy_free(p);
    adapt_net_free(net);
}
END_TEST

/* 1 when v is an IEEE 754 binary16 value: 0, or at most 65504 in magnitude with 11
 * significant bits (step 2^(e-11) for v in [2^(e-1), 2^e), e >= -13) or a multiple of 2^-24
 * (subnormals, below 2^-14). */
static int on_half_grid(float v)
{
    if (v == 0.0f) return 1;
    if (!isfinite(v) || fabsf(v) > 65504.0f) return 0;
    int e;
    frexp(v, &e);
    double q = ldexp(v, e >= -13 ? 11 - e : 24);
    return q == nearbyint(q);
}

/* AMP's backward is the one of units computing in fp16: the gradient of every unit's output
 * (rounded before the unit reads it) and the one it writes for its input are fp16 values, so
 * the products of its backward have fp16 operands, as on tensor cores. Under fp32 the same
 * backward leaves most of them off that grid (the check can fail). Loss gradients of the
 * order 1e-1 with an off-grid part of 1e-7. */
START_TEST(test_amp_half_backward)
{
    for (int amp = 0; amp <= 1; amp++) {
        struct adapt_net *net = small_lenet(2);
        static struct adapt_config cfg;
        adapt_config_init(&cfg);
        ck_assert_int_eq(adapt_config_set(&cfg, amp ? "policy.name=amp" : "policy.name=fp32"),
                         ADAPT_OK);
        struct adapt_policy *p;
        ck_assert_int_eq(adapt_policy_alloc(&p, &cfg, net, 1), ADAPT_OK);
        if (amp) ck_assert_int_eq(adapt_precision_refresh_weights(p->prec, 1), ADAPT_OK);
        float x[2 * 32 * 32], dl[2 * 10];
        for (int i = 0; i < 2 * 32 * 32; i++) x[i] = (float)sin(0.37 * i) * 2.385f;
        for (int i = 0; i < 2 * 10; i++) dl[i] = (float)(0.1 * cos(1.3 * i) + 1e-7);
        adapt_net_forward(net, x, 2, 1);
        adapt_net_backward(net, dl, 2);
        size_t off = 0, checked = 0;
        for (int i = 0; i < net->nnodes; i++) {
            const struct adapt_node *nd = &net->nodes[i];
            if (!nd->layer->is_unit) continue;
            int acts[2] = {nd->out, nd->in[0]};
            for (int k = 0; k < 2; k++) {
                if (acts[k] == 0) continue; /* the network input has no gradient */
                for (size_t j = 0; j < net->act_numel[acts[k]] * 2; j++) {
                    float g = net->dact[acts[k]][j];
                    checked++;
                    off += !on_half_grid(g);
                    ck_assert_msg(
                        !amp || on_half_grid(g),
                        "amp: gradient of activation %d [%zu] = %.9g is not an fp16 value", acts[k],
                        j, g);
                }
            }
        }
        ck_assert(checked > 1000);
        if (!amp)
            ck_assert_msg(off > checked / 2, "fp32: only %zu of %zu off the fp16 grid", off,
                          checked);
        adapt_policy_free(p);
        adapt_net_free(net);
    }
}
END_TEST

/* MuPPET schedule replay 8:2,16:1,32:1: epochs 0-1 muppet(8), epoch 2
 * muppet(16), epoch 3 float32 (the switch happens at the end of the epoch
 * before). */
START_TEST(test_muppet_policy_replay)
{
    struct adapt_net *net = small_lenet(1);
    static struct adapt_config cfg;
    adapt_config_init(&cfg);
    ck_assert_int_eq(adapt_config_set(&cfg, "policy.name=muppet"), ADAPT_OK);
    ck_assert_int_eq(adapt_config_set(&cfg, "policy.muppet_schedule=8:2,16:1,32:1"), ADAPT_OK);
    struct adapt_policy *p;
    ck_assert_int_eq(adapt_policy_alloc(&p, &cfg, net, 1), ADAPT_OK);
    double lr = 0.01;
    int stop = -1;
    ck_assert_int_eq(p->prec->u[0].spec.format, QUANT_FORMAT_MUPPET);
    ck_assert_int_eq(p->prec->u[0].spec.wl, 8);
    ck_assert_int_eq(p->type->epoch_end(p, 0, &lr, &stop), ADAPT_OK);
    ck_assert_int_eq(p->prec->u[0].spec.wl, 8);
    ck_assert_int_eq(p->type->epoch_end(p, 1, &lr, &stop), ADAPT_OK);
    ck_assert_int_eq(p->prec->u[0].spec.wl, 16);
    ck_assert(p->prec->u[0].active);
    ck_assert_int_eq(p->type->epoch_end(p, 2, &lr, &stop), ADAPT_OK);
    ck_assert(!p->prec->u[0].active);
    adapt_policy_free(p);
    adapt_net_free(net);
}
END_TEST


/* AMP with L1: the L1 term is part of the scaled loss, so unscaling leaves
 * l1 * sign(w). Zero loss gradients, l1 = 2^-10, lr = 2^-4, momentum 0:
 * scaled gradient 65536 * 2^-10 = 64 (exact in fp16), unscaled 2^-10, so
 * every weight moves by 2^-14 against its sign (dividing the L1 term by
 * the scale as well would move it by 2^-30). */
START_TEST(test_amp_l1_unscaled)
{
    struct adapt_net *net = small_lenet(1);
    static struct adapt_config cfg;
    adapt_config_init(&cfg);
    ck_assert_int_eq(adapt_config_set(&cfg, "policy.name=amp"), ADAPT_OK);
    struct adapt_policy *p;
    ck_assert_int_eq(adapt_policy_alloc(&p, &cfg, net, 1), ADAPT_OK);
    struct adapt_sgd opt;
    ck_assert_int_eq(adapt_sgd_init(&opt, net, 0.0625, 0.0, 0.0, 0x1p-10, 0), ADAPT_OK);
    set_grads(net, 0.0f);
    const struct adapt_param *w = net->param[0];
    float *w0 = malloc(sizeof(float) * w->value.numel);
    for (size_t i = 0; i < w->value.numel; i++) w0[i] = w->value.data[i];
    int skipped = -1;
    ck_assert_int_eq(adapt_policy_step(p, &opt, 1, 2.3, 1, 0, &skipped), ADAPT_OK);
    ck_assert_int_eq(skipped, 0);
    for (size_t i = 0; i < w->value.numel; i++) {
        float sg = (float)((w0[i] > 0.0f) - (w0[i] < 0.0f));
        ck_assert_msg(fabsf(w->value.data[i] - (w0[i] - 0x1p-14f * sg)) <= 1e-7f,
                      "weight %zu: %.9g -> %.9g, want a step of %g", i, w0[i], w->value.data[i],
                      -0x1p-14 * sg);
    }
    free(w0);
    adapt_sgd_free(&opt);
    adapt_policy_free(p);
    adapt_net_free(net);
}
END_TEST

/* compat = reference: batch-norm gamma / beta and their gradients take the
 * format of the conv before them (<8,4> at the start: grid 1/16); the L1
 * term reads the quantized copies (sign(w_q), 0 where w_q = 0). Corrected
 * leaves batch-norm in float32. Master gamma 1.03 is off the grid; after a
 * refresh the layers compute with a copy on it (1.0 or 1.0625). */
START_TEST(test_adapt_reference_bn_l1)
{
    for (int ref = 0; ref <= 1; ref++) {
        struct adapt_net *net = adapt_model_build("resnet20", 10);
        ck_assert_ptr_nonnull(net);
        ck_assert_int_eq(adapt_net_finalize(net, 1), ADAPT_OK);
        adapt_net_init_params(net, 5, 0.5);
        static struct adapt_config cfg;
        adapt_config_init(&cfg);
        ck_assert_int_eq(adapt_config_set(&cfg, "policy.name=adapt"), ADAPT_OK);
        ck_assert_int_eq(adapt_config_set(&cfg, ref ? "quantization.compat=reference"
                                                    : "quantization.compat=corrected"), ADAPT_OK);
        struct adapt_policy *p;
        ck_assert_int_eq(adapt_policy_alloc(&p, &cfg, net, 1), ADAPT_OK);
        int nbn = 0;
        for (int k = 0; k < net->nparam; k++) {
            struct adapt_param *pp = net->param[k];
            if (pp->role == ADAPT_PARAM_BUFFER || pp == &p->prec->u[0].layer->param[0]) continue;
            int own = 0;
            for (int u = 0; u < p->prec->nunits; u++)
                for (int q = 0; q < p->prec->u[u].layer->nparam; q++)
                    own |= pp == &p->prec->u[u].layer->param[q];
            if (own) continue;
            ck_assert_int_ge(p->prec->param_unit[k], 0);
            nbn++;
            for (size_t i = 0; i < pp->value.numel; i++) {
                pp->value.data[i] = 1.03f;
                pp->grad.data[i] = 0.03f;
            }
        }
        ck_assert_int_gt(nbn, 0);
        adapt_precision_refresh_weights(p->prec, 1);
        adapt_precision_quantize_grads(p->prec, 1);
        for (int k = 0; k < net->nparam; k++) {
            struct adapt_param *pp = net->param[k];
            if (pp->role == ADAPT_PARAM_BUFFER || pp->value.data[0] != 1.03f) continue;
            for (size_t i = 0; i < pp->value.numel; i++) {
                float v = pp->use[i], g = pp->grad.data[i];
                if (ref)
                    ck_assert_msg((v == 1.0f || v == 1.0625f) && (g == 0.0f || g == 0.0625f),
                                  "%s[%zu]: value %g, gradient %g: not on the <8,4> grid",
                                  pp->name, i, v, g);
                else
                    ck_assert(v == 1.03f && g == 0.03f);
            }
        }
        ck_assert_int_eq(p->l1_quantized, ref);
        struct adapt_sgd opt;
        ck_assert_int_eq(adapt_sgd_init(&opt, net, 0.01, 0.0, 0.0, 0.5, 0), ADAPT_OK);
        opt.l1_quantized = p->l1_quantized;
        struct adapt_param *w = &p->prec->u[0].layer->param[0];
        for (size_t i = 0; i < w->value.numel; i++) {
            w->value.data[i] = 0.01f; /* rounds to 0 or 1/16 */
            w->grad.data[i] = 0.0f;
        }
        adapt_precision_refresh_weights(p->prec, 2);
        adapt_sgd_prepare(&opt, 1.0, 1.0);
        size_t zeros = 0;
        for (size_t i = 0; i < w->value.numel; i++) {
            float want = ref ? (w->use[i] > 0.0f ? 0.5f : 0.0f) : 0.5f;
            ck_assert_float_eq(w->grad.data[i], want);
            zeros += w->use[i] == 0.0f;
        }
        ck_assert_int_gt(zeros, 0);
        adapt_sgd_free(&opt);
        adapt_policy_free(p);
        adapt_net_free(net);
    }
}
END_TEST

/* The corrected push-down on real weights: LeNet-5's conv at node 6 (48,000
 * weights, initialisation seed 2385, gain 0.5) from <32,28>, r = 50, lb 1 so
 * that the first step pushes down. adapt-bench kl --model lenet5 --seed 2385
 * measures the KL of nearest rounding per FL and the noise level
 * (r - 1) / (2 m): with the default test (m = 4096 sampled weights, KL <=
 * (r - 1) / (2 m) = 0.006) the first lossless FL is 11 (FL 10: KL 0.02);
 * with the strict test (whole tensor, KL = 0) it is 23 or more. */
static int pd_fl_of_unit(const char *sets[], int nsets, int unit)
{
    struct adapt_net *net = small_lenet(1);
    static struct adapt_config cfg;
    adapt_config_init(&cfg);
    ck_assert_int_eq(adapt_config_set(&cfg, "policy.name=adapt"), ADAPT_OK);
    ck_assert_int_eq(adapt_config_set(&cfg, "quantization.start_wl=32"), ADAPT_OK);
    ck_assert_int_eq(adapt_config_set(&cfg, "quantization.start_fl=28"), ADAPT_OK);
    ck_assert_int_eq(adapt_config_set(&cfg, "quantization.lb_lwr=1"), ADAPT_OK);
    ck_assert_int_eq(adapt_config_set(&cfg, "quantization.lb_upr=1"), ADAPT_OK);
    for (int i = 0; i < nsets; i++) ck_assert_int_eq(adapt_config_set(&cfg, sets[i]), ADAPT_OK);
    struct adapt_policy *p;
    ck_assert_int_eq(adapt_policy_alloc(&p, &cfg, net, 1), ADAPT_OK);
    set_grads(net, 0.25f);
    p->type->observe(p, 1, 2.3, 0);
    ck_assert_int_eq(p->type->decide(p, 1), ADAPT_OK);
    int fl = -1;
    for (int i = 0; i < p->n_events; i++)
        if (p->events[i].kind == ADAPT_TRACE_EVENT_PD && p->events[i].unit == unit)
            fl = p->events[i].after[1];
    adapt_policy_free(p);
    adapt_net_free(net);
    return fl;
}

START_TEST(test_pd_noise_threshold)
{
    int fl = pd_fl_of_unit(NULL, 0, 2);
    ck_assert_msg(fl >= 10 && fl <= 12, "default push-down: FL %d, want 10-12", fl);
    const char *strict[] = {"quantization.kl_noise=0", "quantization.pd_sample=0"};
    int fs = pd_fl_of_unit(strict, 2, 2);
    ck_assert_msg(fs >= 22, "strict push-down: FL %d, want >= 22", fs);
}
END_TEST

/* MuPPET's gradient diversity over every trainable tensor, with the weight
 * decay term on the quantized weights (grad = Q(g) + l2 * w_q). LeNet-5, r
 * = 3, level 8; three epochs end with these last-batch gradients (all exact
 * on the muppet(8) grids):
 *  A (l2 = 0): every weight gradient 0.25 in all three epochs: GD = 3 *
 *    0.0625 n / (0.75^2 n) = 1/3; every bias gradient at epoch k is 1 at
 *    positions i % 3 == k, else 0: the three sum to all-ones, GD = n / n = 1.
 *    S = mean over the 10 tensors = (5 / 3 + 5) / 10 = 2/3 (weights only: 1/3).
 *  B (l2 = 1, weights' master 0.25 -> w_q 0.25, biases' master 0): weight
 *    gradients in the bias pattern plus 0.25: per epoch n/3 values 1.25 and
 *    2n/3 values 0.25, ||.||^2 = 0.5625 n; the sum is 1.75 everywhere: GD =
 *    1.6875 / 3.0625 = 0.5510204; biases GD 1; S = (5 * 0.5510204 + 5) / 10
 *    = 0.7755102 (without the decay term: 1). */
static void muppet_epochs(struct adapt_policy *p, struct adapt_net *net, int pattern_w)
{
    double lr = 0.01;
    int stop = -1;
    for (int e = 0; e < 3; e++) {
        for (int k = 0; k < net->nparam; k++) {
            struct adapt_param *pp = net->param[k];
            if (pp->role == ADAPT_PARAM_BUFFER) continue;
            int is_w = pp->value.ndim > 1;
            for (size_t i = 0; i < pp->grad.numel; i++)
                pp->grad.data[i] = is_w && !pattern_w ? 0.25f : (float)((int)(i % 3) == e);
        }
        p->type->observe(p, e + 1, 2.3, 1);
        ck_assert_int_eq(p->type->epoch_end(p, e, &lr, &stop), ADAPT_OK);
    }
}

START_TEST(test_muppet_gd_all_tensors)
{
    for (int b = 0; b <= 1; b++) {
        struct adapt_net *net = small_lenet(1);
        static struct adapt_config cfg;
        adapt_config_init(&cfg);
        ck_assert_int_eq(adapt_config_set(&cfg, "policy.name=muppet"), ADAPT_OK);
        if (b) ck_assert_int_eq(adapt_config_set(&cfg, "optim.l2_decay=1"), ADAPT_OK);
        struct adapt_policy *p;
        ck_assert_int_eq(adapt_policy_alloc(&p, &cfg, net, 1), ADAPT_OK);
        if (b) {
            for (int k = 0; k < net->nparam; k++) {
                struct adapt_param *pp = net->param[k];
                for (size_t i = 0; pp->role != ADAPT_PARAM_BUFFER && i < pp->value.numel; i++)
                    pp->value.data[i] = pp->value.ndim > 1 ? 0.25f : 0.0f;
            }
            adapt_precision_refresh_weights(p->prec, 1);
        }
        muppet_epochs(p, net, b);
        double want = b ? (5 * (1.6875 / 3.0625) + 5) / 10 : 2.0 / 3.0;
        ck_assert_msg(fabs(adapt_muppet_last_gd(p) - want) < 1e-6, "case %c: S = %.7f, want %.7f",
                      b ? 'B' : 'A', adapt_muppet_last_gd(p), want);
        adapt_policy_free(p);
        adapt_net_free(net);
    }
}
END_TEST

/* The largest power of two that every value is a multiple of (0 for all
 * zeros); a grid of k * 2^e. */
static double grid_step(const float *x, size_t n)
{
    for (int e = 10; e >= -60; e--) {
        double st = ldexp(1.0, e);
        int all = 1, any = 0;
        for (size_t i = 0; i < n && all; i++) {
            double q = x[i] / st;
            all = q == floor(q);
            any |= x[i] != 0.0f;
        }
        if (!any) return 0.0;
        if (all) return st;
    }
    return -1.0;
}

/* MuPPET at level 8 in a training forward / backward of two LeNet-5 images:
 * (1) each image is rounded with its own scale: image 1 is image 0 times
 *     2^-7, so its rounded copy is image 0's rounded copy times 2^-7 (both
 *     with 8-bit codes on their own grids); one scale for the batch would
 *     put image 1 on image 0's grid, where its values are mostly 0.
 * (2) the activation gradients that conv, linear and pooling layers pass
 *     back are on a muppet(8) grid: multiples of a power of two with codes
 *     |v| / step <= 128. */
START_TEST(test_muppet_activation_gradients)
{
    struct adapt_net *net = small_lenet(2);
    static struct adapt_config cfg;
    adapt_config_init(&cfg);
    ck_assert_int_eq(adapt_config_set(&cfg, "policy.name=muppet"), ADAPT_OK);
    struct adapt_policy *p;
    ck_assert_int_eq(adapt_policy_alloc(&p, &cfg, net, 1), ADAPT_OK);
    adapt_precision_refresh_weights(p->prec, 1);
    static float x[2 * 32 * 32];
    for (int i = 0; i < 32 * 32; i++) {
        x[i] = (float)sin(0.37 * i) * 2.385f;
        x[32 * 32 + i] = x[i] * 0x1p-7f;
    }
    const float *lg = adapt_net_forward(net, x, 2, 1);
    (void)lg;
    const float *q = p->prec->u[0].qin;
    ck_assert_ptr_nonnull(q);
    size_t nz = 0;
    for (int i = 0; i < 32 * 32; i++) nz += q[32 * 32 + i] != 0.0f;
    ck_assert_msg(nz > 900, "image 1: %zu of 1024 rounded values are nonzero", nz);
    double s0 = grid_step(q, 32 * 32), s1 = grid_step(q + 32 * 32, 32 * 32);
    ck_assert_msg(s1 > 0 && s0 > 0 && s1 == s0 * 0x1p-7, "grids %g and %g", s0, s1);
    float dl[2 * 10];
    for (int i = 0; i < 20; i++) dl[i] = 0.01f * (float)(i % 7) - 0.03f;
    adapt_net_backward(net, dl, 2);
    for (int nd = 1; nd < net->nnodes; nd++) {
        const struct adapt_layer *l = net->nodes[nd].layer;
        if (!l->is_unit && strcmp(l->ops->kind, "avgpool2d") && strcmp(l->ops->kind, "maxpool2d"))
            continue;
        int a = net->nodes[nd].in[0];
        size_t n = net->act_numel[a] * 2;
        double st = grid_step(net->dact[a], n), mx = 0.0;
        for (size_t i = 0; i < n; i++) mx = fmax(mx, fabs(net->dact[a][i]));
        ck_assert_msg(st > 0 && mx / st <= 128.0, "node %d (%s): gradient to activation %d: step "
                      "%g, max %g", nd, l->ops->kind, a, st, mx);
    }
    adapt_policy_free(p);
    adapt_net_free(net);
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
    tcase_add_test(e, test_precision_copies_and_outputs);
    tcase_add_test(e, test_precision_saturating_ste);
    tcase_add_test(e, test_adapt_policy_lookback);
    tcase_add_test(e, test_adapt_strategy_and_events);
    tcase_add_test(e, test_amp_policy_overflow);
    tcase_add_test(e, test_amp_l1_unscaled);
    tcase_add_test(e, test_amp_half_backward);
    tcase_add_test(e, test_pd_noise_threshold);
    tcase_add_test(e, test_adapt_reference_bn_l1);
    tcase_add_test(e, test_muppet_policy_replay);
    tcase_add_test(e, test_muppet_gd_all_tensors);
    tcase_add_test(e, test_muppet_activation_gradients);
    suite_add_tcase(s, e);
    return tu_run_suite(s, CK_FORK_GETENV);
}
