/* tests/test_quant_sr16.c: stochastic rounding with 16 random bits per element (struct
 * quant_spec's sr_bits = 16), part of tests/test_quant: the bits themselves (every generator
 * against quant_sr_bits_at, which is defined on adapt_rng_u32_at), the fast kernels against
 * their scalar twins bit for bit at odd and even starting indices, chunks and threads, the
 * rounding rule exactly (P(up) = floor(f 2^16) / 2^16, counted over all 2^16 values of u), and
 * the mean of SR against the value it rounds. */
#include <check.h>
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

static const char *sr16_formats[] = {
    "fixed(8,4)", "fixed(32,28)", "fixed(1,0)", "fixed(5,9)", "bfp(8)", "bfp(32)",
    "muppet(8)", "fp16", "bf16", "float(4,3)", "float(8,23)", "float(2,1)", "e4m3", "e5m2",
    "float(5,2,bias=-20,nan=fn,ovf=inf)", "float(2,1,nan=none)", "float(5,3,bias=123,sub=0)",
    "mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e2m3", "mxfp6_e3m2", "mxfp4", "mxint8"};
#define N_SR16 (sizeof sr16_formats / sizeof sr16_formats[0])

static struct quant_spec sr16_spec(const char *text)
{
    struct quant_spec s = spec_of(text, QUANT_ROUND_STOCHASTIC, QUANT_TIE_EVEN);
    s.sr_bits = QUANT_SR_BITS_16;
    return s;
}

/* The split itself: element i takes the low half of Philox value i / 2 (i even) or its high
 * half (i odd), in the top 16 bits of r. */
START_TEST(test_sr16_definition)
{
    for (uint64_t i = 0; i < 4096; i++) {
        uint32_t v = adapt_rng_u32_at(5, 77, i / 2);
        uint32_t want = i % 2 ? (v >> 16) << 16 : (v & 0xffffu) << 16;
        ck_assert_uint_eq(quant_sr_bits_at(5, 77, QUANT_SR_BITS_16, i), want);
        ck_assert_uint_eq(quant_sr_bits_at(5, 77, QUANT_SR_BITS_32, i),
                          adapt_rng_u32_at(5, 77, i));
    }
}
END_TEST

/* Every generator (scalar, AVX2, AVX-512: those this CPU has) gives quant_sr_bits_at's bits,
 * for even and odd starts, odd lengths, whole pieces and across a wrap of the counter's low
 * word (value index / 2 near 4 x 2^32). */
START_TEST(test_sr16_generators)
{
    static uint32_t buf[QUANT_PIECE_BUF];
    const uint64_t seeds[2] = {0x9e3779b97f4a7c15ull, 3};
    const uint64_t starts[] = {0, 1, 2, 3, 5, 7, 8 * 0xfffffff0ull + 1, 8 * 0xfffffff0ull + 2,
                               0x123456789ull};
    const size_t lens[] = {1, 2, 3, 31, 32, 33, 1000, 1023, QUANT_PIECE};
    int tested = 0;
    for (int isa = QUANT_ISA_SCALAR; isa <= QUANT_ISA_AVX512; isa++) {
        if (!quant_sr_fill_isa(isa, QUANT_SR_BITS_16, buf, 1, 1, 0, 1)) continue;
        tested++;
        for (int si = 0; si < 2; si++)
            for (size_t st = 0; st < sizeof starts / sizeof starts[0]; st++)
                for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
                    uint64_t stream = ADAPT_STREAM_QUANT + (uint64_t)st * 0x100000001ull;
                    const uint32_t *r = quant_sr_fill_isa(isa, QUANT_SR_BITS_16, buf, seeds[si],
                                                          stream, starts[st], lens[li]);
                    ck_assert_ptr_nonnull(r);
                    for (size_t i = 0; i < lens[li]; i++)
                        if (r[i] != quant_sr_bits_at(seeds[si], stream, QUANT_SR_BITS_16,
                                                     starts[st] + i))
                            ck_abort_msg("isa %s start %llu len %zu i %zu",
                                         quant_philox_isa_name(isa),
                                         (unsigned long long)starts[st], lens[li], i);
                }
    }
    ck_assert_int_ge(tested, 1);
}
END_TEST

/* quant_rows (OpenMP over chunks, vector kernels, the vector generator) against quant_rows_ref
 * (one element at a time, quant_sr_bits_at), values, masks and counts, for every format at odd
 * and even starting indices, in place and not, rows of odd length (MX blocks restart per row). */
START_TEST(test_sr16_fast_equals_ref)
{
    const uint64_t starts[] = {0, 1, 2, 3, 1001, 65535};
    const size_t cols[] = {1, 2, 3, 33, 1025, 2 * QUANT_CHUNK + 999};
    for (size_t f = 0; f < N_SR16; f++) {
        struct quant_spec s = sr16_spec(sr16_formats[f]);
        for (size_t k = 0; k < sizeof starts / sizeof starts[0]; k++) {
            size_t rows = k % 2 ? 3 : 1, c = cols[k], n = rows * c;
            float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
            float *z = malloc(n * sizeof *z);
            uint8_t *m1 = malloc(n), *m2 = malloc(n);
            ck_assert(x && y && z && m1 && m2);
            fill_inputs(x, n, &s, 300 + f * 7 + k);
            struct quant_key key = {17 + f, ADAPT_STREAM_QUANT + 9, starts[k]};
            struct quant_stats a = {0, 0, 0}, b = {0, 0, 0};
            int inplace = (int)(k % 3 == 2);
            if (inplace) memcpy(y, x, n * sizeof *x);
            ck_assert_int_eq(quant_rows(&s, inplace ? y : x, y, rows, c, key, m1, &a), ADAPT_OK);
            ck_assert_int_eq(quant_rows_ref(&s, x, z, rows, c, key, m2, &b), ADAPT_OK);
            for (size_t i = 0; i < n; i++)
                if (!(tu_same_bits(y[i], z[i]) && m1[i] == m2[i]))
                    ck_abort_msg("%s 16 bits, start %llu, %zu x %zu: x[%zu] = %a: fast %a mask "
                                 "%d, ref %a mask %d",
                                 sr16_formats[f], (unsigned long long)starts[k], rows, c, i, x[i],
                                 y[i], m1[i], z[i], m2[i]);
            ck_assert_uint_eq(a.saturated, b.saturated);
            ck_assert_uint_eq(a.flushed, b.flushed);
            ck_assert_uint_eq(a.zeros, b.zeros);
            free(x), free(y), free(z), free(m1), free(m2);
        }
    }
}
END_TEST

/* Threads and chunks: the bits do not depend on the thread count, nor on cutting a tensor at
 * odd element indices (a chunk that starts at an odd index takes the high half of the value it
 * shares with the element before it). sr_bits 0 reads as 32; 16 bits differ from 32. */
START_TEST(test_sr16_threads_chunks)
{
    const size_t n = 3 * QUANT_CHUNK + 777;
    float *x = malloc(n * sizeof *x), *y1 = malloc(n * sizeof *y1), *y2 = malloc(n * sizeof *y2);
    ck_assert(x && y1 && y2);
    int saved = omp_get_max_threads();
    for (size_t f = 0; f < N_SR16; f++) {
        struct quant_spec s = sr16_spec(sr16_formats[f]);
        fill_inputs(x, n, &s, 900 + f);
        struct quant_key key = {9, ADAPT_STREAM_QUANT, 1001};
        omp_set_num_threads(1);
        ck_assert_int_eq(quant_array(&s, x, y1, n, key, NULL, NULL), ADAPT_OK);
        omp_set_num_threads(2);
        ck_assert_int_eq(quant_array(&s, x, y2, n, key, NULL, NULL), ADAPT_OK);
        ck_assert_int_eq(memcmp(y1, y2, n * sizeof *y1), 0);
        if (s.format == QUANT_FORMAT_BFP || s.format == QUANT_FORMAT_MUPPET) continue;
        int mx = quant_format_is_mx(s.format);
        size_t cut[5] = {0, mx ? 992 : 999, mx ? 1024 : 1000, 2 * QUANT_CHUNK + (mx ? 32 : 3), n};
        for (int k = 0; k < 4; k++) {
            struct quant_key kk = key;
            kk.index += cut[k];
            ck_assert_int_eq(
                quant_array(&s, x + cut[k], y2 + cut[k], cut[k + 1] - cut[k], kk, NULL, NULL),
                ADAPT_OK);
        }
        ck_assert_msg(memcmp(y1, y2, n * sizeof *y1) == 0, "%s: chunks differ", sr16_formats[f]);
    }
    omp_set_num_threads(saved);
    /* the setting takes effect, and 0 is 32 */
    struct quant_spec s = sr16_spec("fixed(8,4)");
    fill_inputs(x, n, &s, 5);
    struct quant_key key = {3, 4, 0};
    ck_assert_int_eq(quant_array(&s, x, y1, n, key, NULL, NULL), ADAPT_OK);
    s.sr_bits = QUANT_SR_BITS_32;
    ck_assert_int_eq(quant_array(&s, x, y2, n, key, NULL, NULL), ADAPT_OK);
    ck_assert_int_ne(memcmp(y1, y2, n * sizeof *y1), 0);
    s.sr_bits = 0;
    ck_assert_int_eq(quant_array(&s, x, y1, n, key, NULL, NULL), ADAPT_OK);
    ck_assert_int_eq(memcmp(y1, y2, n * sizeof *y1), 0);
    s.sr_bits = 24;
    ck_assert_int_eq(quant_array(&s, x, y1, n, key, NULL, NULL), ADAPT_EINVAL);
    free(x), free(y1), free(y2);
}
END_TEST

/* The rule, exactly: with r = u 2^16 for every u in [0, 2^16), a value whose fraction (in
 * steps) is f rounds up for exactly floor(f 2^16) of the u, so P(up) = floor(f 2^16) / 2^16:
 * the fraction's bits below 2^-16 are truncated and E[SR(v)] - v lies in (-2^-16 step, 0]. */
START_TEST(test_sr16_rule_exact)
{
    struct {
        const char *fmt;
        double lo, step; /* the grid point below v and the spacing there */
    } grids[] = {
        {"fixed(8,4)", 2.375, 0.0625},
        {"fixed(8,4)", -2.4375, 0.0625},
        {"fp16", 2.0, 0x1p-9},
        {"float(4,3)", 0.5, 0x1p-4},
        {"bf16", 1.0, 0x1p-7}, /* a float32's fraction below bf16 has at most 16 bits */
    };
    /* fractions: below 2^-16 (never up with 16 bits), 2^-16 exactly, a 16-bit one, one with
     * bits below 2^-16, just below 1 */
    const double fracs[] = {0x1p-17, 0x1p-16, 0.25 + 0x1p-16, 0.3, 1.0 - 0x1p-17};
    for (size_t g = 0; g < sizeof grids / sizeof grids[0]; g++) {
        struct quant_spec s = sr16_spec(grids[g].fmt);
        struct quant_plan p;
        struct quant_key key = {0, 0, 0};
        ck_assert_int_eq(quant_plan_init(&s, NULL, key, &p), ADAPT_OK);
        for (size_t k = 0; k < sizeof fracs / sizeof fracs[0]; k++) {
            double f = fracs[k];
            float v = (float)(grids[g].lo + f * grids[g].step);
            if (grids[g].lo < 0) v = (float)(grids[g].lo + grids[g].step - f * grids[g].step);
            /* the fraction the float v holds (v may round to a grid point) */
            double exact = ((double)v - grids[g].lo) / grids[g].step; /* in [0, 1] */
            double fr = exact - floor(exact);
            uint32_t ups = 0;
            for (uint32_t u = 0; u < 65536u; u++) {
                uint32_t sat;
                float q = quant_plan_round(&p, v, u << 16, &sat);
                ups += (double)q != floor((double)v / grids[g].step) * grids[g].step;
            }
            ck_assert_msg(ups == (uint32_t)floor(fr * 65536.0),
                          "%s v = %a (fraction %.9g): %u of 2^16 up, expected %u",
                          grids[g].fmt, v, fr, ups, (uint32_t)floor(fr * 65536.0));
        }
    }
}
END_TEST

/* E[SR(x)] = x within 5 binomial standard deviations plus the truncation bias: the mean of N
 * draws of SR(v) in {lo, lo + step} with P(up) = p' = floor(p 2^16) / 2^16 (p = frac(v / step))
 * has standard deviation step sqrt(p' (1 - p') / N), and its expectation lo + p' step lies in
 * (v - 2^-16 step, v]; so |mean - v| <= 5 step sqrt(p' (1 - p') / N) + 2^-16 step but for
 * 5-deviation excursions: a false failure with probability below 10^-6 per case (normal
 * approximation, N p' (1 - p') > 10^4 here); the cases' Philox streams are fixed, so the test is
 * deterministic anyway. The 16-bit halves of one Philox value are taken as independent uniform
 * values (the bound needs the two draws that share a value to be uncorrelated). */
START_TEST(test_sr16_unbiased)
{
    const size_t N = 1 << 18;
    float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
    ck_assert(x && y);
    struct {
        const char *fmt;
        float v;
        double step;
    } cases[] = {
        {"fixed(8,4)", 2.385f, 0.0625},    {"fixed(8,4)", -2.385f, 0.0625},
        {"fixed(16,13)", 0.1f, 0x1p-13},   {"fixed(32,28)", 1.0e-8f, 0x1p-28},
        {"fp16", 2.385f, 0x1p-9},          {"fp16", -1.0e-6f, 0x1p-24},
        {"bf16", 2.385f, 0x1p-6},          {"float(4,3)", 0.7f, 0x1p-4},
        {"e4m3", 0.7f, 0x1p-4},            {"float(2,1,nan=none)", 2.385f, 1.0},
        {"bfp(8)", 2.385f, 0x1p-5},        {"muppet(8)", 2.385f, 0x1p-5},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        struct quant_spec s = sr16_spec(cases[c].fmt);
        for (size_t i = 0; i < N; i++) x[i] = cases[c].v;
        struct quant_key key = {2385, ADAPT_STREAM_QUANT + c, c}; /* odd and even starts */
        ck_assert_int_eq(quant_array(&s, x, y, N, key, NULL, NULL), ADAPT_OK);
        double sum = 0.0, v = cases[c].v, step = cases[c].step;
        double lo = floor(v / step) * step, p = (v - lo) / step;
        for (size_t i = 0; i < N; i++) {
            if (!(y[i] == (float)lo || y[i] == (float)(lo + step)))
                ck_abort_msg("%s SR16(%g) = %g", cases[c].fmt, cases[c].v, y[i]);
            sum += y[i];
        }
        double mean = sum / (double)N;
        double p16 = floor(p * 65536.0) / 65536.0;
        double tol = 5.0 * step * sqrt(p16 * (1.0 - p16) / (double)N) + step * 0x1p-16;
        ck_assert_msg(fabs(mean - v) <= tol, "%s SR16(%g): mean %.10g, |diff| %.3g > tol %.3g",
                      cases[c].fmt, v, mean, fabs(mean - v), tol);
    }
    /* the bias bound is attained: a fraction below 2^-16 never rounds up (32 bits would, with
     * probability 2^-17) */
    struct quant_spec s = sr16_spec("fixed(8,4)");
    for (size_t i = 0; i < N; i++) x[i] = (float)(2.375 + 0x1p-17 * 0.0625);
    struct quant_key key = {1, 2, 3};
    ck_assert_int_eq(quant_array(&s, x, y, N, key, NULL, NULL), ADAPT_OK);
    for (size_t i = 0; i < N; i++) ck_assert_float_eq(y[i], 2.375f);
    free(x), free(y);
}
END_TEST

void test_quant_add_sr16(TCase *tc)
{
    tcase_add_test(tc, test_sr16_definition);
    tcase_add_test(tc, test_sr16_generators);
    tcase_add_test(tc, test_sr16_fast_equals_ref);
    tcase_add_test(tc, test_sr16_threads_chunks);
    tcase_add_test(tc, test_sr16_rule_exact);
    tcase_add_test(tc, test_sr16_unbiased);
}
