/* tests/test_net_cuda_reductions.c: the policies' reductions on the GPU against the CPU's
 * arithmetic, part of tests/test_net_cuda (the tolerances are explained below). */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/rng.h"
#include "src/cuda/device.h"
#include "src/net/net.h"
#include "src/net/net_cuda.h"
#include "src/net/optim.h"
#include "src/quant/quant.h"
#include "tests/test_net_cuda.h"
#include "tests/testutil.h"

/* ---- the policies' reductions (adapt_cuda_net_sums, _normalize_acc, _gd, _gather, _range,
 * _hist) against the CPU's arithmetic ----
 *
 * Tensors at odd offsets (the kernels' scalar walk) and at 16-byte aligned ones (their float4
 * walk with a tail), with g and acc aligned differently, entries of zero length first, in the
 * middle and last, an all-zero tensor (no normalisation) and an entry whose acc is NULL. The
 * whole device arrays are compared, so a write outside an entry shows too.
 *
 * Sums: the device sums in double, each thread a few terms, then a tree over the block's 256
 * threads and one atomicAdd per block (at most 1024): for terms of one sign (x^2, |x|,
 * (sum over slices)^2) the relative error is at most (terms per thread + 8 + blocks) 2^-53,
 * under 2.5e-13 here; the reference is summed in long double, so 1e-12 relative holds.
 * Normalisation: the scale is (float)(1 / sqrt(s)) of that double sum (the CPU's adapt.c
 * arithmetic), then float products and sums, so the tensors are bit for bit the CPU's; only
 * where 1 / sqrt(s) lies within 1e-12 of a float rounding boundary may the two engines' sums
 * round it to neighbouring floats, and then the other neighbour's result is accepted too.
 * Range, gather and histogram counts: exact (quant_range_compute, indexing, quant_hist with
 * QUANT_HIST_CLAMP, the CPU push-down's statistics in src/policy/adapt.c). */

enum { NT = 7, RED_TOT = 306400 };
static const size_t red_off[NT] = {1, 1024, 5200, 6001, 6100, 306113, 306200};
static const size_t red_n[NT] = {1001, 4099, 0, 3, 300007, 17, 0};
/* acc offsets in the second array (-1: no acc for that entry) */
static const long red_acc[NT] = {4, 1027, 5200, -1, 6100, 306114, 306200};

static void expect_rel(const char *what, int i, double gpu, long double ref, double rtol)
{
    double r = (double)ref;
    ck_assert_msg(fabs(gpu - r) <= rtol * fabs(r) && !isnan(gpu),
                  "%s of entry %d: GPU %.17g reference %.17g (allowed %g relative)", what, i, gpu,
                  r, rtol);
}

/* The CPU's normalisation (and accumulation into acc when acc is not NULL) of entry i with
 * scale inv, into exp and expacc. */
static void normalize_ref(const float *x, const float *acc, float *exp, float *expacc, size_t n,
                          float inv)
{
    for (size_t j = 0; j < n; j++) {
        volatile float g = x[j] * inv; /* rounded before the sum, as the kernels (no FMA) */
        exp[j] = g;
        if (acc) expacc[j] = acc[j] + g;
    }
}

START_TEST(test_reductions)
{
    const int in[3] = {3, 10, 10};
    struct one o = one_layer(adapt_relu_create("act", in), in, 0, 2);
    ck_assert_msg(adapt_cuda_net_create(o.net, 0, &live_d) == ADAPT_OK, "%s",
                  adapt_error_message());
    struct adapt_cuda_net *d = live_d;
    float *A = NULL, *B = NULL;
    ck_assert_int_eq(adapt_cuda_net_alloc(d, RED_TOT, &A), ADAPT_OK);
    ck_assert_int_eq(adapt_cuda_net_alloc(d, RED_TOT, &B), ADAPT_OK);
    float *hx = malloc(RED_TOT * sizeof *hx), *hacc = malloc(RED_TOT * sizeof *hacc);
    float *ga = malloc(RED_TOT * sizeof *ga), *gb = malloc(RED_TOT * sizeof *gb);
    float *exp = malloc(RED_TOT * sizeof *exp), *expacc = malloc(RED_TOT * sizeof *expacc);
    ck_assert(hx && hacc && ga && gb && exp && expacc);
    fill_uniform(hx, RED_TOT, 61, -2.0, 2.0);
    for (size_t j = 0; j < red_n[5]; j++) hx[red_off[5] + j] = 0.0f; /* the all-zero entry */
    fill_uniform(hacc, RED_TOT, 62, -1.0, 1.0);
    ck_assert_int_eq(adapt_cuda_net_put(d, A, hx, RED_TOT), ADAPT_OK);
    ck_assert_int_eq(adapt_cuda_net_put(d, B, hacc, RED_TOT), ADAPT_OK);
    float *xs[NT], *accs[NT];
    long double sq[NT], ab[NT];
    for (int i = 0; i < NT; i++) {
        xs[i] = A + red_off[i];
        accs[i] = red_acc[i] < 0 ? NULL : B + red_acc[i];
        sq[i] = ab[i] = 0.0L;
        for (size_t j = 0; j < red_n[i]; j++) {
            long double v = hx[red_off[i] + j];
            sq[i] += v * v;
            ab[i] += fabsl(v);
        }
    }
    /* sums of squares and of absolute values */
    double out[2 * NT];
    ck_assert_int_eq(adapt_cuda_net_sums(d, xs, red_n, NT, out), ADAPT_OK);
    for (int i = 0; i < NT; i++) {
        expect_rel("sum of squares", i, out[2 * i], sq[i], 1e-12);
        expect_rel("sum of |x|", i, out[2 * i + 1], ab[i], 1e-12);
    }
    /* normalisation with accumulation, then without (acc NULL): the same scales; the scale
     * each entry took (one of the two floats around the reference) is found from the first
     * call's result and must be the same in the second */
    float inv[NT];
    ck_assert_int_eq(adapt_cuda_net_normalize_acc(d, xs, accs, red_n, NT), ADAPT_OK);
    ck_assert_int_eq(adapt_cuda_net_get(d, A, ga, RED_TOT), ADAPT_OK);
    ck_assert_int_eq(adapt_cuda_net_get(d, B, gb, RED_TOT), ADAPT_OK);
    memcpy(exp, hx, RED_TOT * sizeof *exp);
    memcpy(expacc, hacc, RED_TOT * sizeof *expacc);
    for (int i = 0; i < NT; i++) {
        size_t n = red_n[i];
        const float *acc = red_acc[i] < 0 ? NULL : hacc + red_acc[i];
        float *ea = red_acc[i] < 0 ? NULL : expacc + red_acc[i];
        if (sq[i] > 0.0L) {
            double s = (double)sq[i];
            float c0 = (float)(1.0 / sqrt(s)), c1 = (float)(1.0 / sqrt(s * (1.0 - 1e-12))),
                  c2 = (float)(1.0 / sqrt(s * (1.0 + 1e-12)));
            inv[i] = c0;
            normalize_ref(hx + red_off[i], acc, exp + red_off[i], ea, n, c0);
            for (int t = 0; t < 2; t++) {
                float c = t ? c2 : c1;
                if (c == inv[i] || tu_first_bit_diff(ga + red_off[i], exp + red_off[i], n) < 0)
                    continue;
                inv[i] = c;
                normalize_ref(hx + red_off[i], acc, exp + red_off[i], ea, n, c);
            }
        } else {
            inv[i] = 1.0f; /* g unchanged, acc += g */
            normalize_ref(hx + red_off[i], acc, exp + red_off[i], ea, n, 1.0f);
        }
    }
    tu_expect_same_bits("normalize_acc: g", ga, exp, RED_TOT);
    tu_expect_same_bits("normalize_acc: acc", gb, expacc, RED_TOT);
    ck_assert_int_eq(adapt_cuda_net_put(d, A, hx, RED_TOT), ADAPT_OK);
    ck_assert_int_eq(adapt_cuda_net_normalize_acc(d, xs, NULL, red_n, NT), ADAPT_OK);
    ck_assert_int_eq(adapt_cuda_net_get(d, A, ga, RED_TOT), ADAPT_OK);
    float *gb2 = malloc(RED_TOT * sizeof *gb2);
    ck_assert(gb2);
    ck_assert_int_eq(adapt_cuda_net_get(d, B, gb2, RED_TOT), ADAPT_OK);
    tu_expect_same_bits("normalize_acc without acc: g", ga, exp, RED_TOT);
    tu_expect_same_bits("normalize_acc without acc: acc untouched", gb2, gb, RED_TOT);
    free(gb2);

    /* MuPPET's two sums over rings of r = 3 slices */
    ck_assert_int_eq(adapt_cuda_net_put(d, A, hx, RED_TOT), ADAPT_OK);
    {
        const int r = 3;
        const size_t goff[3] = {1, 6001, 6100}, gn[3] = {331, 0, 4099};
        float *ring[3] = {A + goff[0], A + goff[1], A + goff[2]};
        double gout[6];
        ck_assert_int_eq(adapt_cuda_net_gd(d, ring, gn, 3, r, gout), ADAPT_OK);
        for (int i = 0; i < 3; i++) {
            long double gsq = 0.0L, gss = 0.0L;
            for (size_t j = 0; j < gn[i]; j++) {
                long double sum = 0.0L;
                for (int k = 0; k < r; k++) {
                    long double v = hx[goff[i] + (size_t)k * gn[i] + j];
                    gsq += v * v;
                    sum += v;
                }
                gss += sum * sum;
            }
            expect_rel("gd: sum of g^2", i, gout[2 * i], gsq, 1e-12);
            expect_rel("gd: sum of (sum over slices)^2", i, gout[2 * i + 1], gss, 1e-12);
        }
    }

    /* the push-down's statistics on data with NaN and infinities */
    float *hr = malloc(RED_TOT * sizeof *hr);
    ck_assert(hr);
    memcpy(hr, hx, RED_TOT * sizeof *hr);
    hr[5] = NAN, hr[17] = INFINITY, hr[400] = -INFINITY;         /* in entry 0 */
    hr[2000] = NAN, hr[2001] = INFINITY, hr[2002] = -INFINITY;   /* in entry 1 */
    hr[100000] = NAN, hr[200001] = -INFINITY;                    /* in entry 4 */
    ck_assert_int_eq(adapt_cuda_net_put(d, A, hr, RED_TOT), ADAPT_OK);
    /* (offset, count): the entries above, nothing, only non-finite values, one NaN */
    static const size_t roff[7] = {1, 1024, 6100, 6001, 2000, 5, 306113};
    static const size_t rn[7] = {1001, 4099, 300007, 0, 3, 1, 17};
    uint64_t hc[2048], hg[2048];
    for (int i = 0; i < 7; i++) {
        double lo = 0.0, hi = 0.0;
        ck_assert_int_eq(adapt_cuda_net_range(d, A + roff[i], rn[i], &lo, &hi), ADAPT_OK);
        struct quant_range rg;
        quant_range_compute(hr + roff[i], rn[i], &rg);
        if (rg.min > rg.max) {
            ck_assert_msg(lo > hi, "range %d: no finite value, GPU [%g, %g]", i, lo, hi);
            continue;
        }
        ck_assert_msg(lo == (double)rg.min && hi == (double)rg.max,
                      "range %d: GPU [%a, %a] CPU [%a, %a]", i, lo, hi, (double)rg.min,
                      (double)rg.max);
        /* the histogram over that range (37 bins: counted in shared memory), over a narrower
         * one that clamps (2048 bins: global counters) and over a point (widened by 1) */
        const struct {
            double lo, hi;
            int bins;
        } h[3] = {{lo, hi, 37}, {-1.0, 0.5, 2048}, {0.25, 0.25, 5}};
        for (int t = 0; t < 3; t++) {
            ck_assert_int_eq(
                adapt_cuda_net_hist(d, A + roff[i], rn[i], h[t].lo, h[t].hi, h[t].bins, hg),
                ADAPT_OK);
            ck_assert_int_eq(quant_hist(hr + roff[i], rn[i], 1, h[t].lo, h[t].hi, h[t].bins,
                                        QUANT_HIST_CLAMP, hc),
                             ADAPT_OK);
            int bad = -1, nbad = 0;
            for (int b = 0; b < h[t].bins; b++)
                if (hg[b] != hc[b] && nbad++ == 0) bad = b;
            ck_assert_msg(nbad == 0,
                          "histogram of range case %d over [%g, %g], %d bins: %d bins differ; "
                          "first %d: CPU %llu GPU %llu",
                          i, h[t].lo, h[t].hi, h[t].bins, nbad, bad,
                          (unsigned long long)hc[bad], (unsigned long long)hg[bad]);
        }
    }
    /* an empty histogram: every count 0 */
    for (int b = 0; b < 7; b++) hg[b] = 99;
    ck_assert_int_eq(adapt_cuda_net_hist(d, A + 6001, 0, -1.0, 1.0, 7, hg), ADAPT_OK);
    for (int b = 0; b < 7; b++) ck_assert_msg(hg[b] == 0, "empty histogram: bin %d holds %llu", b,
                                              (unsigned long long)hg[b]);

    /* gathers into B: stride 3 from an odd offset, stride 1 (a copy), nothing */
    ck_assert_int_eq(adapt_cuda_net_put(d, B, hacc, RED_TOT), ADAPT_OK);
    ck_assert_int_eq(adapt_cuda_net_gather(d, A + 1, 3, B + 5, 333), ADAPT_OK);
    ck_assert_int_eq(adapt_cuda_net_gather(d, A + 1024, 1, B + 1001, 7), ADAPT_OK);
    ck_assert_int_eq(adapt_cuda_net_gather(d, A + 1, 5, B + 2000, 0), ADAPT_OK);
    ck_assert_int_eq(adapt_cuda_net_get(d, B, gb, RED_TOT), ADAPT_OK);
    memcpy(expacc, hacc, RED_TOT * sizeof *expacc);
    for (size_t j = 0; j < 333; j++) expacc[5 + j] = hr[1 + 3 * j];
    for (size_t j = 0; j < 7; j++) expacc[1001 + j] = hr[1024 + j];
    tu_expect_same_bits("gather", gb, expacc, RED_TOT);

    free(hr), free(hx), free(hacc), free(ga), free(gb), free(exp), free(expacc);
    release_live(); /* A and B go with the engine */
}
END_TEST

void test_net_cuda_add_reductions(TCase *reductions)
{
    tcase_add_test(reductions, test_reductions);
}
