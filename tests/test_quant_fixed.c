/* tests/test_quant_fixed.c: fixed point and the block formats built on it, part of
 * tests/test_quant: fixed(WL,FL) exact against an oracle written from the definition and
 * against QPyTorch's fixed_point_quantize, and bfp and MuPPET on values worked out by hand. */
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

/* ---------------- fixed point: exactness and QPyTorch parity ---------------- */

/* Independent oracle in double and int64: k = round(x 2^FL) (ties to even or stochastic with
 * u = r 2^-32, evaluated exactly), clamp to [-2^(WL-1), 2^(WL-1) - 1]; y = k 2^-FL, or for a
 * clamped-high k the largest float not above the top of the range. */
static float fixed_oracle(float x, int wl, int fl, int stochastic, uint32_t r, int *sat)
{
    if (x != x) {
        *sat = 0;
        return x;
    }
    double lo = -ldexp(1.0, wl - 1), hi = ldexp(1.0, wl - 1) - 1.0;
    double t = ldexp((double)x, fl), k; /* exact: 24-bit significand */
    if (isinf(t)) {
        k = t;
    } else if (stochastic) {
        double f = floor(t);
        uint64_t F = (uint64_t)ldexp(t - f, 32); /* t - f and the scaling are exact */
        k = f + (((uint64_t)r + F) >> 32 ? 1.0 : 0.0);
    } else {
        k = nearbyint(t); /* default mode: ties to even */
    }
    *sat = k > hi || k < lo;
    if (k > hi) {
        float y = (float)ldexp(hi, -fl);
        if ((double)y > ldexp(hi, -fl)) y = nextafterf(y, 0.0f);
        return y;
    }
    if (k < lo) k = lo;
    return (float)ldexp(k, -fl) + 0.0f;
}

START_TEST(test_fixed_exact)
{
    const size_t n = 60000;
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    uint8_t *m = malloc(n);
    ck_assert(x && y && m);
    /* the long formats of doc/numerics.md, then a sweep of every WL with a spread of FL */
    int cases[][2] = {{32, 28}, {32, 31}, {32, 0}, {32, 32}, {31, 16}, {25, 24}, {26, 3}};
    int nc = sizeof cases / sizeof cases[0];
    for (int c = 0; c < nc + 32 * 5; c++) {
        int wl = c < nc ? cases[c][0] : 1 + (c - nc) / 5;
        int fl = c < nc ? cases[c][1] : ((c - nc) % 5) * 8;
        for (int stochastic = 0; stochastic < 2; stochastic++) {
            struct quant_spec s;
            quant_spec_init(&s, QUANT_FORMAT_FIXED);
            s.wl = wl;
            s.fl = fl;
            s.rounding = stochastic ? QUANT_ROUND_STOCHASTIC : QUANT_ROUND_NEAREST;
            size_t nn = c < nc ? n : n / 10;
            fill_inputs(x, nn, &s, 1000 + c);
            /* values at and next to the range ends: +-2^(WL-FL-1) and one step inside */
            x[20] = (float)ldexp(1.0, wl - fl - 1);
            x[21] = -x[20];
            x[22] = (float)(ldexp(1.0, wl - fl - 1) - ldexp(1.0, -fl));
            x[23] = nextafterf(x[21], 0.0f);
            struct quant_key key = {77, 16, 5};
            ck_assert_int_eq(quant_array(&s, x, y, nn, key, m, NULL), ADAPT_OK);
            for (size_t i = 0; i < nn; i++) {
                int sat;
                uint32_t r = adapt_rng_u32_at(77, 16, 5 + i);
                float e = fixed_oracle(x[i], wl, fl, stochastic, r, &sat);
                if (!(tu_same_bits(y[i], e) && m[i] == sat))
                    ck_abort_msg("fixed(%d,%d) %s x = %a: got %a (mask %d), expected %a (mask %d)",
                                 wl, fl, stochastic ? "SR" : "RN", x[i], y[i], m[i], e, sat);
            }
        }
    }
    free(x), free(y), free(m);
}
END_TEST

/* QPyTorch's CPU fixed_point_quantize (quant_cpu.cpp, sim_helper.cpp): range
 * [-2^(WL-FL-1), 2^(WL-FL-1) - 2^-FL], nearest = nearbyint(x 2^FL) (ties to even), clamp after
 * rounding with mask = clamped, +-inf clamped, NaN passed through. Values worked by hand. */
START_TEST(test_fixed_qpytorch)
{
    struct quant_spec s = spec_of("fixed(8,4)", QUANT_ROUND_NEAREST, QUANT_TIE_EVEN);
    const float x[] = {2.53125f, 2.59375f, -2.53125f, 7.97f, 7.90625f, 7.96875f, -8.03125f,
                       -8.0625f, 2.385f, INFINITY, -INFINITY, NAN, 0.03125f, -0.03125f};
    const float e[] = {
        2.5f,     /* 40.5 steps: tie -> 40 (even) */
        2.625f,   /* 41.5 -> 42 (even) */
        -2.5f,    /* -40.5 -> -40 */
        7.9375f,  /* 127.52 -> 128 -> clamped to 127/16 */
        7.875f,   /* 126.5 -> 126 (even) */
        7.9375f,  /* 127.5 -> 128 (even) -> clamped: saturate after rounding */
        -8.0f,    /* -128.5 -> -128 (even), in range */
        -8.0f,    /* -129 -> clamped to -128/16 */
        2.375f,   /* 38.16 -> 38 */
        7.9375f,  /* +inf -> t_max */
        -8.0f,    /* -inf -> t_min */
        NAN,      /* passed through */
        0.0f,     /* 0.5 -> 0 (even) */
        0.0f,     /* -0.5 -> -0 -> +0 (one zero in fixed point) */
    };
    const uint8_t em[] = {0, 0, 0, 1, 0, 1, 0, 1, 0, 1, 1, 0, 0, 0};
    size_t n = sizeof x / sizeof x[0];
    float y[sizeof x / sizeof x[0]];
    uint8_t m[sizeof x / sizeof x[0]];
    struct quant_stats st = {0, 0, 0};
    struct quant_key key = {1, 16, 0};
    ck_assert_int_eq(quant_array(&s, x, y, n, key, m, &st), ADAPT_OK);
    for (size_t i = 0; i < n; i++) {
        ck_assert_msg(tu_same_bits(y[i], e[i]), "x = %a: got %a, expected %a", x[i], y[i], e[i]);
        ck_assert_int_eq(m[i], em[i]);
    }
    ck_assert_uint_eq(st.saturated, 5); /* the five mask bits above */
    ck_assert_uint_eq(st.flushed, 2);   /* +-0.03125 */
    ck_assert_uint_eq(st.zeros, 2);
    /* the tie rule is an option: away from zero (QPyTorch's CUDA kernels use round()) */
    s.tie = QUANT_TIE_AWAY;
    ck_assert_int_eq(quant_array(&s, x, y, 3, key, NULL, NULL), ADAPT_OK);
    ck_assert(y[0] == 2.5625f);  /* 40.5 -> 41 */
    ck_assert(y[1] == 2.625f);   /* 41.5 -> 42 */
    ck_assert(y[2] == -2.5625f); /* -40.5 -> -41 */
}
END_TEST

/* ---------------- bfp and MuPPET by hand ---------------- */

START_TEST(test_bfp_hand)
{
    struct quant_key key = {0, 0, 0};
    struct quant_spec s = spec_of("bfp(4)", QUANT_ROUND_NEAREST, QUANT_TIE_EVEN);
    /* max |x| = 0.75: E = floor(log2 0.75) = -1, step 2^(E+2-WL) = 2^-3, range +-7 steps */
    float x1[] = {0.75f, -0.3f, 0.1f, 0.05f, -0.9f}, y1[5];
    float e1[] = {0.75f,   /* 6 steps */
                  -0.25f,  /* -2.4 -> -2 */
                  0.125f,  /* 0.8 -> 1 */
                  0.0f,    /* 0.4 -> 0 */
                  -0.875f}; /* -0.9 is the max: E = -1 still; -7.2 -> -7 */
    uint8_t m1[5];
    ck_assert_int_eq(quant_array(&s, x1, y1, 5, key, m1, NULL), ADAPT_OK);
    for (int i = 0; i < 5; i++)
        ck_assert_msg(y1[i] == e1[i], "bfp x %g: %g, expected %g", x1[i], y1[i], e1[i]);
    /* bfp(3), max 0.96875: E = -1, step 2^-2, range +-3 steps = +-0.75; 3.875 -> 4 -> clamped */
    s.wl = 3;
    float x2[] = {0.96875f, -0.96875f, 0.5f}, y2[3];
    uint8_t m2[3];
    ck_assert_int_eq(quant_array(&s, x2, y2, 3, key, m2, NULL), ADAPT_OK);
    ck_assert(y2[0] == 0.75f && m2[0] == 1);
    ck_assert(y2[1] == -0.75f && m2[1] == 1); /* symmetric range */
    ck_assert(y2[2] == 0.5f && m2[2] == 0);
    /* block dim0: one exponent per row */
    s.wl = 4;
    s.block = QUANT_BLOCK_DIM0;
    float x3[] = {1.5f, 0.2f, 0.01f, 0.003f}, y3[4];
    ck_assert_int_eq(quant_rows(&s, x3, y3, 2, 2, key, NULL, NULL), ADAPT_OK);
    ck_assert(y3[0] == 1.5f);         /* row 0: E = 0, step 2^-2: 6 steps */
    ck_assert(y3[1] == 0.25f);        /* 0.8 -> 1 step */
    ck_assert(y3[2] == 0.009765625f); /* row 1: E = floor(log2 0.01) = -7, step 2^-9: 5.12 -> 5 */
    ck_assert(y3[3] == 0.00390625f);  /* 1.536 -> 2 steps */
    /* the same as one tensor block: E = 0 for all, step 2^-2 */
    s.block = QUANT_BLOCK_TENSOR;
    ck_assert_int_eq(quant_rows(&s, x3, y3, 2, 2, key, NULL, NULL), ADAPT_OK);
    ck_assert(y3[2] == 0.0f && y3[3] == 0.0f);
    /* all zeros and non-finite only: no scale from the data, values kept */
    float x4[] = {0.0f, NAN, INFINITY}, y4[3];
    ck_assert_int_eq(quant_array(&s, x4, y4, 3, key, NULL, NULL), ADAPT_OK);
    ck_assert(y4[0] == 0.0f && y4[1] != y4[1] && y4[2] == 1.75f); /* E = 0: top 7 steps of 2^-2 */
}
END_TEST

START_TEST(test_muppet_hand)
{
    struct quant_key key = {0, 0, 0};
    struct quant_spec s = spec_of("muppet(8)", QUANT_ROUND_NEAREST, QUANT_TIE_EVEN);
    /* max 1.7: 127.5 / 1.7 = 75 -> floor(log2) = 6; min -0.45: 128.5 / 0.45 = 285.6 -> 8;
     * sf = 6, scale 64 */
    float x1[] = {1.7f, -0.45f, 0.3f}, y1[3];
    ck_assert_int_eq(quant_array(&s, x1, y1, 3, key, NULL, NULL), ADAPT_OK);
    ck_assert(y1[0] == 1.703125f);  /* 108.8 -> 109 */
    ck_assert(y1[1] == -0.453125f); /* -28.8 -> -29 */
    ck_assert(y1[2] == 0.296875f);  /* 19.2 -> 19 */
    /* negative side decides: 127.5 / 0.1 = 1275 -> 10; 128.5 / 3 = 42.8 -> 5; sf = 5 */
    float x2[] = {0.1f, -3.0f}, y2[2];
    ck_assert_int_eq(quant_array(&s, x2, y2, 2, key, NULL, NULL), ADAPT_OK);
    ck_assert(y2[0] == 0.09375f); /* 3.2 -> 3 */
    ck_assert(y2[1] == -3.0f);    /* -96 */
    /* exact boundary: max = 127.5 / 64 gives ratio 64, sf = 6; 127.5 -> 128 (even) -> clamped to
     * 127: saturation after rounding */
    float x3[] = {1.9921875f, -1.0f}, y3[2];
    uint8_t m3[2];
    ck_assert_int_eq(quant_array(&s, x3, y3, 2, key, m3, NULL), ADAPT_OK);
    ck_assert(y3[0] == 1.984375f && m3[0] == 1);
    ck_assert(y3[1] == -1.0f && m3[1] == 0);
    /* only positive values: the min side is not used (ratio 127.5 / 0.5 = 255 -> sf = 7) */
    float x4[] = {0.5f, 0.25f, 0.0078125f}, y4[3];
    ck_assert_int_eq(quant_array(&s, x4, y4, 3, key, NULL, NULL), ADAPT_OK);
    ck_assert(y4[0] == 0.5f && y4[1] == 0.25f && y4[2] == 0.0078125f); /* 64, 32, 1 at scale 128 */
    /* block dim0: one scale per row, each row as its own tensor above. Row 0 = x1's first two
     * values (sf 6), row 1 = x2 (sf 5). As one tensor the -3.0 gives sf 5 for both rows. */
    float x5[] = {1.7f, -0.45f, 0.1f, -3.0f}, y5[4];
    struct quant_stats st5 = {0, 0, 0};
    s.block = QUANT_BLOCK_DIM0;
    ck_assert_int_eq(quant_rows(&s, x5, y5, 2, 2, key, NULL, &st5), ADAPT_OK);
    ck_assert(y5[0] == 1.703125f && y5[1] == -0.453125f); /* 108.8 -> 109, -28.8 -> -29 at 64 */
    ck_assert(y5[2] == 0.09375f && y5[3] == -3.0f);       /* 3.2 -> 3, -96 at 32 */
    ck_assert_uint_eq(st5.saturated + st5.flushed + st5.zeros, 0);
    ck_assert_int_eq(quant_rows_ref(&s, x5, y5, 2, 2, key, NULL, NULL), ADAPT_OK);
    ck_assert(y5[0] == 1.703125f && y5[2] == 0.09375f);
    s.block = QUANT_BLOCK_TENSOR;
    ck_assert_int_eq(quant_rows(&s, x5, y5, 2, 2, key, NULL, NULL), ADAPT_OK);
    ck_assert(y5[0] == 1.6875f); /* 54.4 -> 54 at 32 */
}
END_TEST

void test_quant_add_fixed(TCase *tc)
{
    tcase_add_test(tc, test_fixed_exact);
    tcase_add_test(tc, test_fixed_qpytorch);
    tcase_add_test(tc, test_bfp_hand);
    tcase_add_test(tc, test_muppet_hand);
}
