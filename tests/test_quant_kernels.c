/* tests/test_quant_kernels.c: the row kernels, part of tests/test_quant: the fast (vector)
 * kernels against their scalar twins bit for bit for every format, the mean of stochastic
 * rounding against the value it rounds (binomial bounds), and bits that do not depend on the
 * thread count or on splitting a tensor into chunks. */
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

/* ---------------- fast kernels against their scalar twins ---------------- */

static const char *all_formats[] = {"fixed(8,4)", "fixed(32,28)", "fixed(32,31)", "fixed(1,0)",
                                    "fixed(5,9)", "fixed(16,0)", "bfp(8)", "bfp(32)", "bfp(2)",
                                    "muppet(8)", "muppet(16)", "fp16", "bf16", "float(4,3)",
                                    "float(8,23)", "float(2,1)", "float(5,2)", "float(8,1)",
                                    "float(4,3,nan=fn)", "float(5,2,bias=-20,nan=fn,ovf=inf)",
                                    "float(2,1,nan=none)", "float(6,4,bias=127)",
                                    "float(5,3,bias=123,sub=0)", "float(7,20,bias=40,ovf=inf)",
                                    "mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e2m3", "mxfp6_e3m2",
                                    "mxfp4", "mxint8"};
#define N_FORMATS (sizeof all_formats / sizeof all_formats[0])

static void compare_fast_ref(const struct quant_spec *s, size_t rows, size_t cols, uint64_t index,
                             int inplace, uint64_t seed)
{
    size_t n = rows * cols;
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y), *z = malloc(n * sizeof *z);
    uint8_t *m1 = malloc(n), *m2 = malloc(n);
    ck_assert(x && y && z && m1 && m2);
    fill_inputs(x, n, s, seed);
    struct quant_key key = {seed, ADAPT_STREAM_QUANT + 5, index};
    struct quant_stats a = {0, 0, 0}, b = {0, 0, 0};
    if (inplace) memcpy(y, x, n * sizeof *x);
    ck_assert_int_eq(quant_rows(s, inplace ? y : x, y, rows, cols, key, m1, &a), ADAPT_OK);
    ck_assert_int_eq(quant_rows_ref(s, x, z, rows, cols, key, m2, &b), ADAPT_OK);
    char buf[QUANT_SPEC_STR_MAX];
    for (size_t i = 0; i < n; i++)
        if (!(tu_same_bits(y[i], z[i]) && m1[i] == m2[i]))
            ck_abort_msg("%s mode %d tie %d: x[%zu] = %a: fast %a mask %d, ref %a mask %d",
                         quant_spec_str(s, buf, sizeof buf), (int)s->rounding, (int)s->tie, i, x[i],
                         y[i], m1[i], z[i], m2[i]);
    ck_assert_uint_eq(a.saturated, b.saturated);
    ck_assert_uint_eq(a.flushed, b.flushed);
    ck_assert_uint_eq(a.zeros, b.zeros);
    /* without mask and stats the values are the same */
    ck_assert_int_eq(quant_rows(s, x, y, rows, cols, key, NULL, NULL), ADAPT_OK);
    for (size_t i = 0; i < n; i++)
        if (!tu_same_bits(y[i], z[i]))
            ck_abort_msg("without mask: x[%zu] = %a: %a, ref %a", i, x[i], y[i], z[i]);
    free(x), free(y), free(z), free(m1), free(m2);
}

START_TEST(test_fast_equals_ref)
{
    /* 3 chunks plus a tail, started at a misaligned element index */
    for (size_t f = 0; f < N_FORMATS; f++)
        for (int mode = 0; mode < 3; mode++) {
            struct quant_spec s =
                spec_of(all_formats[f], mode == 2 ? QUANT_ROUND_STOCHASTIC : QUANT_ROUND_NEAREST,
                        mode == 1 ? QUANT_TIE_AWAY : QUANT_TIE_EVEN);
            compare_fast_ref(&s, 1, 3 * QUANT_CHUNK + 1001, 3 + 7 * (uint64_t)f, mode >= 1,
                             11 + f); /* in place */
        }
    /* float formats without subnormals and with the other overflow rule */
    const char *fl[] = {"fp16", "bf16", "float(4,3)"};
    for (int f = 0; f < 3; f++)
        for (int mode = 0; mode < 2; mode++) {
            struct quant_spec s =
                spec_of(fl[f], mode ? QUANT_ROUND_STOCHASTIC : QUANT_ROUND_NEAREST, QUANT_TIE_EVEN);
            s.subnormals = 0;
            s.overflow =
                s.overflow == QUANT_OVERFLOW_INF ? QUANT_OVERFLOW_SATURATE : QUANT_OVERFLOW_INF;
            compare_fast_ref(&s, 1, 70001, 1, 0, 100 + f);
        }
    /* bfp and muppet with one scale per dim-0 slice */
    for (int mode = 0; mode < 4; mode++) {
        struct quant_spec s =
            spec_of(mode < 2 ? "bfp(6)" : "muppet(6)",
                    mode & 1 ? QUANT_ROUND_STOCHASTIC : QUANT_ROUND_NEAREST, QUANT_TIE_EVEN);
        s.block = QUANT_BLOCK_DIM0;
        compare_fast_ref(&s, 37, 1153, 2, mode & 1, 7);
    }
    /* MX rows shorter than a block (one block each, many rows a call): 1, 6 and 31 columns,
     * over more than a chunk's elements (several work items), and 33 (a block and one) */
    static const size_t mx_cols[] = {1, 6, 31, 33};
    for (int f = 0; f < 3; f++)
        for (size_t c = 0; c < sizeof mx_cols / sizeof mx_cols[0]; c++)
            for (int mode = 0; mode < 2; mode++) {
                struct quant_spec s =
                    spec_of(f == 0   ? "mxfp8_e4m3"
                            : f == 1 ? "mxint8"
                                     : "mxfp4",
                            mode ? QUANT_ROUND_STOCHASTIC : QUANT_ROUND_NEAREST, QUANT_TIE_EVEN);
                compare_fast_ref(&s, QUANT_CHUNK / mx_cols[c] + 300, mx_cols[c], 5 + c, mode,
                                 21 + c);
            }
}
END_TEST

/* quant_cols (MX blocks down the columns, the columns in SIMD lanes) against quant_rows_ref over
 * each matrix's transpose: the same values bit for bit, the same counts, in place or not, with
 * 32 and 16 random bits, for panels of fewer and more columns than the lanes, column lengths
 * of less, exactly and more than a block, and columns split over several work items; with and
 * without counts. */
START_TEST(test_mx_cols_equals_rows_of_transpose)
{
    /* the last two: columns split into more than one work item (QUANT_CHUNK / R columns) */
    static const size_t shapes[][3] = {{1, 1, 1},   {3, 33, 17}, {2, 64, 40},   {1, 5, 1000},
                                       {4, 100, 3}, {2, 32, 16}, {1, 1, 70001}, {2, 3, 30000}};
    static const char *fmts[] = {"mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e2m3", "mxfp4", "mxint8"};
    for (size_t f = 0; f < 5; f++)
        for (int mode = 0; mode < 4; mode++)
            for (size_t h = 0; h < sizeof shapes / sizeof shapes[0]; h++) {
                const size_t M = shapes[h][0], R = shapes[h][1], C = shapes[h][2], n = M * R * C;
                struct quant_spec s =
                    spec_of(fmts[f], mode >= 2 ? QUANT_ROUND_STOCHASTIC : QUANT_ROUND_NEAREST,
                            mode == 1 ? QUANT_TIE_AWAY : QUANT_TIE_EVEN);
                if (mode == 3) s.sr_bits = 16;
                float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
                float *t = malloc(n * sizeof *t), *z = malloc(n * sizeof *z);
                fill_inputs(x, n, &s, 40 + h);
                struct quant_key key = {9, ADAPT_STREAM_QUANT + 3, 1000 + 7 * h};
                struct quant_stats a = {0, 0, 0}, b = {0, 0, 0};
                const int inplace = (int)(h & 1);
                if (inplace) memcpy(y, x, n * sizeof *x);
                ck_assert_int_eq(quant_cols(&s, inplace ? y : x, y, M, R, C, key, &a), ADAPT_OK);
                for (size_t m = 0; m < M; m++)
                    for (size_t r = 0; r < R; r++)
                        for (size_t c = 0; c < C; c++)
                            t[m * R * C + c * R + r] = x[m * R * C + r * C + c];
                ck_assert_int_eq(quant_rows_ref(&s, t, t, M * C, R, key, NULL, &b), ADAPT_OK);
                for (size_t m = 0; m < M; m++)
                    for (size_t r = 0; r < R; r++)
                        for (size_t c = 0; c < C; c++)
                            z[m * R * C + r * C + c] = t[m * R * C + c * R + r];
                for (size_t i = 0; i < n; i++)
                    if (!tu_same_bits(y[i], z[i]))
                        ck_abort_msg("%s mode %d, %zu x %zu x %zu: x[%zu] = %a: cols %a, rows of "
                                     "the transpose %a",
                                     fmts[f], mode, M, R, C, i, x[i], y[i], z[i]);
                ck_assert_uint_eq(a.saturated, b.saturated);
                ck_assert_uint_eq(a.flushed, b.flushed);
                ck_assert_uint_eq(a.zeros, b.zeros);
                /* without counts (another instance of the kernel): the same values */
                memcpy(t, x, n * sizeof *x);
                ck_assert_int_eq(quant_cols(&s, t, t, M, R, C, key, NULL), ADAPT_OK);
                for (size_t i = 0; i < n; i++)
                    if (!tu_same_bits(t[i], y[i]))
                        ck_abort_msg("%s mode %d, %zu x %zu x %zu: x[%zu] = %a: %a without "
                                     "counts, %a with",
                                     fmts[f], mode, M, R, C, i, x[i], t[i], y[i]);
                free(x), free(y), free(t), free(z);
            }
    /* not an MX format: refused */
    struct quant_spec s = spec_of("fixed(8,4)", QUANT_ROUND_NEAREST, QUANT_TIE_EVEN);
    float v = 1.0f;
    ck_assert_int_eq(quant_cols(&s, &v, &v, 1, 1, 1, (struct quant_key){1, 2, 0}, NULL),
                     ADAPT_EINVAL);
}
END_TEST

/* ---------------- stochastic rounding ---------------- */

/* E[SR(x)] = x: N draws of SR(x) have mean x within 5 binomial standard deviations,
 * step sqrt(p (1 - p) / N) with p = frac(x / step), plus the 2^-32 step bias of 32-bit u. */
START_TEST(test_sr_unbiased)
{
    const size_t N = 1 << 18;
    float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
    ck_assert(x && y);
    struct {
        const char *fmt;
        float v;
        double step; /* grid spacing around v */
    } cases[] = {
        {"fixed(8,4)", 2.385f, 0.0625},            /* 2.385 = 38.16 steps */
        {"fixed(8,4)", -2.385f, 0.0625},
        {"fixed(16,13)", 0.1f, 0x1p-13},
        {"fixed(32,28)", 1.0e-8f, 0x1p-28},         /* 2.68 steps */
        {"fp16", 2.385f, 0x1p-9},                   /* binade [2, 4): 2^(1-10) */
        {"fp16", -1.0e-6f, 0x1p-24},                /* subnormal range */
        {"bf16", 2.385f, 0x1p-6},
        {"float(4,3)", 0.7f, 0x1p-4},               /* binade [0.5, 1): 2^(-1-3) */
        {"float(4,3,bias=11)", 3.0e-4f, 0x1p-13},   /* subnormal: 2^(1-11-3) */
        {"float(5,2,bias=-20,nan=fn)", 3.0e9f, 0x1p29}, /* binade [2^31, 2^32): 2^(31-2) */
        {"float(2,1,nan=none)", 2.385f, 1.0},       /* binade [2, 4): 2^(1-1) */
        {"bfp(8)", 2.385f, 0x1p-5},                 /* max 2.385: E = 1, step 2^(1+2-8) */
        {"muppet(8)", 2.385f, 0x1p-5},              /* sf = floor(log2(127.5 / 2.385)) = 5 */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        struct quant_spec s = spec_of(cases[c].fmt, QUANT_ROUND_STOCHASTIC, QUANT_TIE_EVEN);
        for (size_t i = 0; i < N; i++) x[i] = cases[c].v;
        struct quant_key key = {2385, ADAPT_STREAM_QUANT + c, 0};
        ck_assert_int_eq(quant_array(&s, x, y, N, key, NULL, NULL), ADAPT_OK);
        double sum = 0.0, v = cases[c].v, step = cases[c].step;
        double lo = floor(v / step) * step, p = (v - lo) / step;
        for (size_t i = 0; i < N; i++) {
            if (!(y[i] == (float)lo || y[i] == (float)(lo + step))) /* only the two neighbours */
                ck_abort_msg("%s SR(%g) = %g", cases[c].fmt, cases[c].v, y[i]);
            sum += y[i];
        }
        double mean = sum / (double)N;
        double tol = 5.0 * step * sqrt(p * (1.0 - p) / (double)N) + step * 0x1p-32;
        ck_assert_msg(fabs(mean - v) <= tol, "%s SR(%g): mean %.10g, |diff| %.3g > tol %.3g",
                      cases[c].fmt, v, mean, fabs(mean - v), tol);
    }
    free(x), free(y);
}
END_TEST

/* ---------------- determinism ---------------- */

/* The bits do not depend on the thread count, nor on splitting a tensor in chunks with the
 * matching key.index. */
START_TEST(test_threads_and_chunks)
{
    const size_t n = 5 * QUANT_CHUNK + 12345;
    float *x = malloc(n * sizeof *x), *y1 = malloc(n * sizeof *y1), *y2 = malloc(n * sizeof *y2);
    uint8_t *m1 = malloc(n), *m2 = malloc(n);
    ck_assert(x && y1 && y2 && m1 && m2);
    int saved = omp_get_max_threads();
    for (size_t f = 0; f < N_FORMATS; f++) {
        struct quant_spec s = spec_of(all_formats[f], QUANT_ROUND_STOCHASTIC, QUANT_TIE_EVEN);
        fill_inputs(x, n, &s, 42 + f);
        struct quant_key key = {9, ADAPT_STREAM_QUANT, 1001};
        struct quant_stats a = {0, 0, 0}, b = {0, 0, 0};
        omp_set_num_threads(1);
        ck_assert_int_eq(quant_array(&s, x, y1, n, key, m1, &a), ADAPT_OK);
        omp_set_num_threads(2);
        ck_assert_int_eq(quant_array(&s, x, y2, n, key, m2, &b), ADAPT_OK);
        ck_assert_int_eq(memcmp(y1, y2, n * sizeof *y1), 0);
        ck_assert_int_eq(memcmp(m1, m2, n), 0);
        ck_assert_uint_eq(a.saturated, b.saturated);
        ck_assert_uint_eq(a.zeros, b.zeros);
        if (s.format == QUANT_FORMAT_BFP || s.format == QUANT_FORMAT_MUPPET) continue;
        /* three chunks at odd offsets give the same bits (MX: at block boundaries, where a
         * row may start) */
        int mx = quant_format_is_mx(s.format);
        size_t cut[4] = {0, mx ? 992 : 999, 2 * QUANT_CHUNK + (mx ? 32 : 3), n};
        for (int k = 0; k < 3; k++) {
            struct quant_key kk = key;
            kk.index += cut[k];
            ck_assert_int_eq(
                quant_array(&s, x + cut[k], y2 + cut[k], cut[k + 1] - cut[k], kk, NULL, NULL),
                ADAPT_OK);
        }
        ck_assert_int_eq(memcmp(y1, y2, n * sizeof *y1), 0);
    }
    omp_set_num_threads(saved);
    free(x), free(y1), free(y2), free(m1), free(m2);
}
END_TEST

void test_quant_add_kernels(TCase *tc)
{
    tcase_add_test(tc, test_fast_equals_ref);
    tcase_add_test(tc, test_mx_cols_equals_rows_of_transpose);
    tcase_add_test(tc, test_sr_unbiased);
    tcase_add_test(tc, test_threads_and_chunks);
}
