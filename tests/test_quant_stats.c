/* tests/test_quant_stats.c: what rounding reports besides the values, part of
 * tests/test_quant: the masks and saturation counters, histograms and the KL divergence, and
 * the storage export (quant_pack) of rounded tensors. */
#include <check.h>
#include <float.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/quant/quant.h"
#include "src/quant/quant_cpu.h"
#include "src/base/rng.h"
#include "src/base/status.h"
#include "tests/test_quant.h"
#include "tests/testutil.h"

/* ---------------- masks and counters ---------------- */

START_TEST(test_mask_stats)
{
    /* fixed(4,1): step 0.5, range [-4, 3.5] */
    struct quant_spec s = spec_of("fixed(4,1)", QUANT_ROUND_NEAREST, QUANT_TIE_EVEN);
    float x[] = {10.0f, -10.0f, 0.2f, 0.0f, NAN, INFINITY, 3.6f, -4.2f}, y[8];
    uint8_t m[8];
    const uint8_t em[] = {1, 1, 0, 0, 0, 1, 0, 0}; /* 3.6 -> 3.5 and -4.2 -> -4 round in range */
    struct quant_stats st = {1, 1, 1};              /* counters accumulate */
    struct quant_key key = {0, 0, 0};
    ck_assert_int_eq(quant_array(&s, x, y, 8, key, m, &st), ADAPT_OK);
    for (int i = 0; i < 8; i++) ck_assert_int_eq(m[i], em[i]);
    ck_assert_uint_eq(st.saturated, 1 + 3); /* 10, -10, inf */
    ck_assert_uint_eq(st.flushed, 1 + 1);   /* 0.2 */
    ck_assert_uint_eq(st.zeros, 1 + 2);     /* 0.2 and 0 */
    ck_assert(y[6] == 3.5f && y[7] == -4.0f);
}
END_TEST

/* ---------------- histograms and KL ---------------- */

START_TEST(test_hist_kl)
{
    uint64_t h[4];
    /* [0, 4) in 4 bins: 0.5 -> 0, 1.0 -> 1, 3.99 -> 3, 4.0 (= hi) -> 3; -1 and 7 clamped to the
     * edges or dropped; NaN ignored */
    float x[] = {0.5f, 1.0f, 3.99f, 4.0f, -1.0f, 7.0f, NAN};
    ck_assert_int_eq(quant_hist(x, 7, 1, 0.0, 4.0, 4, QUANT_HIST_CLAMP, h), ADAPT_OK);
    ck_assert_uint_eq(h[0], 2);
    ck_assert_uint_eq(h[1], 1);
    ck_assert_uint_eq(h[2], 0);
    ck_assert_uint_eq(h[3], 3);
    ck_assert_int_eq(quant_hist(x, 7, 1, 0.0, 4.0, 4, QUANT_HIST_DROP, h), ADAPT_OK);
    ck_assert_uint_eq(h[0] + h[1] + h[2] + h[3], 4);
    ck_assert_int_eq(quant_hist(x, 4, 2, 0.0, 4.0, 4, QUANT_HIST_CLAMP, h),
                     ADAPT_OK); /* 0.5, 3.99, -1, NaN */
    ck_assert_uint_eq(h[0], 2);
    ck_assert_uint_eq(h[3], 1);
    /* lo == hi widens to [lo - 1, hi + 1] (torch.histc): 2.0 lands in the middle of 2 bins */
    ck_assert_int_eq(quant_hist(x + 1, 1, 1, 1.0, 1.0, 2, QUANT_HIST_CLAMP, h), ADAPT_OK);
    ck_assert_uint_eq(h[1], 1);
    ck_assert_int_eq(quant_hist(x, 7, 1, 0.0, 4.0, 0, QUANT_HIST_CLAMP, h), ADAPT_EINVAL);
    ck_assert_int_eq(quant_hist(x, 7, 0, 0.0, 4.0, 4, QUANT_HIST_CLAMP, h), ADAPT_EINVAL);
    ck_assert_int_eq(quant_hist(x, 7, 1, 4.0, 0.0, 4, QUANT_HIST_CLAMP, h), ADAPT_EINVAL);

    /* P = (1/2, 1/2, 0), Q = (1/4, 1/2, 1/4): KL = 1/2 ln 2 */
    uint64_t p[3] = {2, 2, 0}, q[3] = {1, 2, 1};
    ck_assert_double_eq_tol(quant_kl_counts(p, q, 3), 0.5 * log(2.0), 1e-15);
    ck_assert_double_eq(quant_kl_counts(q, q, 3), 0.0);
    ck_assert(isinf(quant_kl_counts(q, p, 3))); /* P_3 > 0, Q_3 = 0 counts as loss */
    /* reference: (1/3) sum exp(wq_b)(wq_b - w_b) with w = Q, wq = P:
     * (e^0.5 (0.25) + e^0.5 (0) + e^0 (-0.25)) / 3 */
    double ref = (exp(0.5) * 0.25 - 0.25) / 3.0;
    ck_assert_double_eq_tol(quant_kl_reference_counts(q, p, 3), ref, 1e-15);

    /* weights on a 2^-8 grid: fixed(16,8) is lossless (KL 0), fixed(4,1) is not */
    const size_t n = 10000;
    float *w = malloc(n * sizeof *w);
    ck_assert(w);
    struct adapt_rng r;
    adapt_rng_init(&r, 3, 1);
    for (size_t i = 0; i < n; i++) w[i] = (float)((int)adapt_rng_below(&r, 1024) - 512) * 0x1p-8f;
    struct quant_key key = {1, ADAPT_STREAM_QUANT, 0};
    double kl;
    struct quant_spec s = spec_of("fixed(16,8)", QUANT_ROUND_NEAREST, QUANT_TIE_EVEN);
    ck_assert_int_eq(quant_kl(&s, w, n, 0, 100, key, &kl), ADAPT_OK);
    ck_assert_double_eq(kl, 0.0);
    ck_assert_int_eq(quant_kl(&s, w, n, 1000, 100, key, &kl), ADAPT_OK); /* strided sample */
    ck_assert_double_eq(kl, 0.0);
    s = spec_of("fixed(4,1)", QUANT_ROUND_NEAREST, QUANT_TIE_EVEN);
    ck_assert_int_eq(quant_kl(&s, w, n, 0, 100, key, &kl), ADAPT_OK);
    ck_assert(kl > 0.1); /* 100 bins collapse onto 5 grid values */
    double dv;
    s.rounding = QUANT_ROUND_STOCHASTIC;
    ck_assert_int_eq(quant_kl_reference(&s, w, n, 0, 100, key, &dv), ADAPT_OK);
    ck_assert(isfinite(dv));
    /* the pipeline by hand: same histograms through the public pieces */
    uint64_t hq[8], hp[8];
    float wq[16], ws[16];
    for (int i = 0; i < 16; i++) ws[i] = w[i];
    s = spec_of("fixed(4,2)", QUANT_ROUND_NEAREST, QUANT_TIE_EVEN);
    float lo = ws[0], hi = ws[0];
    for (int i = 1; i < 16; i++) lo = ws[i] < lo ? ws[i] : lo, hi = ws[i] > hi ? ws[i] : hi;
    ck_assert_int_eq(quant_array(&s, ws, wq, 16, key, NULL, NULL), ADAPT_OK);
    ck_assert_int_eq(quant_hist(ws, 16, 1, lo, hi, 8, QUANT_HIST_CLAMP, hq), ADAPT_OK);
    ck_assert_int_eq(quant_hist(wq, 16, 1, lo, hi, 8, QUANT_HIST_CLAMP, hp), ADAPT_OK);
    ck_assert_int_eq(quant_kl(&s, ws, 16, 0, 8, key, &kl), ADAPT_OK);
    ck_assert_double_eq(kl, quant_kl_counts(hp, hq, 8));
    /* errors */
    ck_assert_int_eq(quant_kl(&s, w, 0, 0, 100, key, &kl), ADAPT_EINVAL);
    ck_assert_int_eq(quant_kl(&s, w, n, 0, 0, key, &kl), ADAPT_EINVAL);
    float nan1 = NAN;
    ck_assert_int_eq(quant_kl(&s, &nan1, 1, 0, 10, key, &kl), ADAPT_EINVAL);
    free(w);
}
END_TEST

/* ---------------- storage export ---------------- */

START_TEST(test_pack)
{
    ck_assert_int_eq(quant_pack_type_for(8), QUANT_PACK_INT8);
    ck_assert_int_eq(quant_pack_type_for(9), QUANT_PACK_INT16);
    ck_assert_int_eq(quant_pack_type_for(16), QUANT_PACK_INT16);
    ck_assert_int_eq(quant_pack_type_for(17), QUANT_PACK_INT32);
    const int cases[][2] = {{8, 4}, {12, 10}, {16, 0}, {32, 31}, {32, 28}, {3, 5}};
    const size_t n = 5000;
    float *x = malloc(n * sizeof *x), *q = malloc(n * sizeof *q), *u = malloc(n * sizeof *u);
    int32_t *codes = malloc(n * sizeof *codes);
    ck_assert(x && q && u && codes);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        struct quant_spec s;
        quant_spec_init(&s, QUANT_FORMAT_FIXED);
        s.wl = cases[c][0];
        s.fl = cases[c][1];
        fill_inputs(x, n, &s, 300 + c);
        x[0] = NAN; /* no code: stored as 0 */
        struct quant_key key = {0, 0, 0};
        enum quant_pack_type t = quant_pack_type_for(s.wl);
        ck_assert_int_eq(quant_array(&s, x, q, n, key, NULL, NULL), ADAPT_OK);
        /* packing the quantized tensor and the raw one gives the same codes */
        ck_assert_int_eq(quant_pack(&s, q, n, t, codes), ADAPT_OK);
        ck_assert_int_eq(quant_unpack(t, codes, n, s.fl, u), ADAPT_OK);
        for (size_t i = 0; i < n; i++) /* NaN has no code: stored as 0 */
            if (!tu_same_bits(u[i], q[i] != q[i] ? 0.0f : q[i]))
                ck_abort_msg("fixed(%d,%d): %a -> %a", s.wl, s.fl, q[i], u[i]);
        int32_t *c2 = malloc(n * sizeof *c2);
        ck_assert(c2);
        ck_assert_int_eq(quant_pack(&s, x, n, t, c2), ADAPT_OK);
        ck_assert_int_eq(memcmp(codes, c2, n * (size_t)t), 0);
        /* codes within [-2^(WL-1), 2^(WL-1) - 1] */
        for (size_t i = 0; i < n; i++) {
            int64_t k = t == QUANT_PACK_INT8    ? ((int8_t *)codes)[i]
                        : t == QUANT_PACK_INT16 ? ((int16_t *)codes)[i]
                                                : codes[i];
            if (!(k >= -(1ll << (s.wl - 1)) && k <= (1ll << (s.wl - 1)) - 1))
                ck_abort_msg("code %lld", (long long)k);
        }
        free(c2);
    }
    /* <8,4>: 2.385 -> code 38; -8.5 -> -128 (clamped); 7.97 -> 127 */
    struct quant_spec s = spec_of("fixed(8,4)", QUANT_ROUND_NEAREST, QUANT_TIE_EVEN);
    float v[3] = {2.385f, -8.5f, 7.97f};
    int8_t c8[3];
    ck_assert_int_eq(quant_pack(&s, v, 3, QUANT_PACK_INT8, c8), ADAPT_OK);
    ck_assert_int_eq(c8[0], 38);
    ck_assert_int_eq(c8[1], -128);
    ck_assert_int_eq(c8[2], 127);
    /* errors: WL does not fit, not fixed point, bad type, bad FL */
    s.wl = 12;
    ck_assert_int_eq(quant_pack(&s, v, 3, QUANT_PACK_INT8, c8), ADAPT_ERANGE);
    s = spec_of("fp16", QUANT_ROUND_NEAREST, QUANT_TIE_EVEN);
    ck_assert_int_eq(quant_pack(&s, v, 3, QUANT_PACK_INT16, codes), ADAPT_EINVAL);
    ck_assert_int_eq(quant_unpack((enum quant_pack_type)3, codes, 3, 4, u), ADAPT_EINVAL);
    ck_assert_int_eq(quant_unpack(QUANT_PACK_INT8, codes, 3, 40, u), ADAPT_ERANGE);
    free(x), free(q), free(u), free(codes);
}
END_TEST

void test_quant_add_stats(TCase *tc)
{
    tcase_add_test(tc, test_mask_stats);
    tcase_add_test(tc, test_hist_kl);
    tcase_add_test(tc, test_pack);
}
