/* tests/test_quant.c: src/quant/ (formats, rounding kernels, Philox generators, histograms, KL,
 * storage export). Expected values carry a comment saying where they come from.
 *
 * This file: the shared helpers (tests/test_quant.h), spec parsing, the Philox generators, error
 * paths and ranges, and main. The kernels are checked in test_quant_kernels.c (fast against
 * scalar, threads and chunks, stochastic rounding), test_quant_fixed.c (fixed point, bfp,
 * MuPPET), test_quant_float.c (IEEE and OCP formats, MX), test_quant_custom.c (float(E,M) with
 * its options, spec_within) and test_quant_stats.c (masks, counters, histograms, KL, export). */
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
#include "src/cuda/device.h"
#include "tests/test_quant.h"
#include "tests/testutil.h"

/* tests/test_quant.h */
struct quant_spec spec_of(const char *text, enum quant_rounding rnd, enum quant_tie tie)
{
    struct quant_spec s;
    ck_assert_msg(quant_spec_parse(text, &s) == ADAPT_OK, "%s: %s", text, adapt_error_message());
    s.rounding = rnd;
    s.tie = tie;
    return s;
}

/* tests/test_quant.h */
void fill_inputs(float *x, size_t n, const struct quant_spec *s, uint64_t seed)
{
    static const float specials[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, FLT_MAX, -FLT_MAX,
                                     FLT_MIN, -FLT_MIN, 1e-45f, -1e-45f, 2.385f, -2.385f, 65504.0f,
                                     65520.0f, -65520.0f, 3.0e38f, 5.96e-8f, 2.98e-8f};
    struct adapt_rng r;
    adapt_rng_init(&r, seed, 99);
    size_t ns = sizeof specials / sizeof specials[0];
    for (size_t i = 0; i < n; i++) {
        uint32_t u = adapt_rng_u32(&r), w = adapt_rng_u32(&r);
        uint32_t kind = w % 10;
        float v;
        if (i < ns) {
            v = specials[i];
        } else if (kind < 4) { /* sign, exponent in [-40, 40], 23 random mantissa bits */
            int e = (int)(w >> 8) % 81 - 40;
            v = ldexpf(1.0f + (float)(u & 0x7fffff) * 0x1p-23f, e);
            if (u >> 31) v = -v;
        } else if (kind < 6) { /* any bit pattern */
            v = quant_u2f(u);
        } else if (kind < 8 && s->format <= QUANT_FORMAT_MUPPET) { /* grid ties (k + 1/2) 2^-j */
            int j = s->format == QUANT_FORMAT_FIXED ? s->fl : (int)(w >> 8) % 40 - 8;
            int32_t k = (int32_t)(u >> (u & 7)) >> 1;
            v = ldexpf((float)k + 0.5f, -j);
        } else if (kind < 8 && s->man_bits < 23) { /* float ties: m mantissa bits, the half bit */
            int m = s->man_bits;
            uint32_t b = u & ~((1u << (23 - m)) - 1u);
            v = quant_u2f(b | (1u << (22 - m)));
        } else if (kind < 8) { /* 23 mantissa bits: float32 values are on the grid, no ties */
            v = quant_u2f(u);
        } else { /* moderate values around the ranges used in training */
            v = (float)((int32_t)u) * 0x1p-29f;
        }
        x[i] = v;
    }
}

/* ---------------- specs ---------------- */

START_TEST(test_spec_parse)
{
    struct quant_spec s;
    char buf[64];
    ck_assert_int_eq(quant_spec_parse("fixed(8,4)", &s), ADAPT_OK);
    ck_assert_int_eq(s.format, QUANT_FORMAT_FIXED);
    ck_assert_int_eq(s.wl, 8);
    ck_assert_int_eq(s.fl, 4);
    ck_assert_int_eq(quant_spec_parse("  float( 5 , 10 ) ", &s), ADAPT_OK);
    ck_assert_str_eq(quant_spec_str(&s, buf, sizeof buf), "float(5,10)");
    ck_assert_int_eq(s.overflow, QUANT_OVERFLOW_SATURATE); /* QPyTorch float_quantize saturates */
    ck_assert_int_eq(quant_spec_bits(&s), 16);             /* 1 + 5 + 10 */
    ck_assert_int_eq(quant_spec_parse("fp16", &s), ADAPT_OK);
    ck_assert_int_eq(s.overflow, QUANT_OVERFLOW_INF); /* IEEE binary16 */
    ck_assert_int_eq(quant_spec_parse("bfp(12)", &s), ADAPT_OK);
    ck_assert_str_eq(quant_spec_str(&s, buf, sizeof buf), "bfp(12)");
    ck_assert_int_eq(quant_spec_parse("muppet", &s), ADAPT_OK);
    ck_assert_int_eq(s.wl, 8); /* default word length */
    ck_assert_int_eq(quant_spec_parse("fixed(32,32)", &s), ADAPT_OK); /* FL may exceed WL - 1 */
    ck_assert_ptr_eq(quant_type_find("bf16"), quant_type_of(QUANT_FORMAT_BF16));
    ck_assert_ptr_null(quant_type_find("posit"));

    /* errors: unknown names, bad syntax, out-of-range parameters; *s untouched */
    s.wl = 77;
    ck_assert_int_eq(quant_spec_parse("fixedd", &s), ADAPT_EINVAL);
    ck_assert_ptr_nonnull(strstr(adapt_error_message(), "unknown"));
    ck_assert_int_eq(s.wl, 77);
    ck_assert_int_eq(quant_spec_parse("fixed(33,4)", &s), ADAPT_ERANGE);
    ck_assert_ptr_nonnull(strstr(adapt_error_message(), "WL 33"));
    ck_assert_int_eq(quant_spec_parse("fixed(8,-1)", &s), ADAPT_ERANGE);
    ck_assert_int_eq(quant_spec_parse("fixed(8,33)", &s), ADAPT_ERANGE);
    ck_assert_int_eq(quant_spec_parse("fixed(0,0)", &s), ADAPT_ERANGE);
    ck_assert_int_eq(quant_spec_parse("bfp(1)", &s), ADAPT_ERANGE);
    ck_assert_int_eq(quant_spec_parse("float(9,3)", &s), ADAPT_ERANGE);
    ck_assert_int_eq(quant_spec_parse("float(4,0)", &s), ADAPT_ERANGE);
    ck_assert_int_eq(quant_spec_parse("float(5)", &s), ADAPT_EINVAL);
    ck_assert_int_eq(quant_spec_parse("float", &s), ADAPT_EINVAL);
    ck_assert_int_eq(quant_spec_parse("fp16(5,10)", &s), ADAPT_EINVAL);
    ck_assert_int_eq(quant_spec_parse("fixed(8,4", &s), ADAPT_EINVAL);
    ck_assert_int_eq(quant_spec_parse("fixed(8,4,2)", &s), ADAPT_EINVAL);
    ck_assert_int_eq(quant_spec_parse("fixed(8;4)", &s), ADAPT_EINVAL);
    ck_assert_int_eq(quant_spec_parse("", &s), ADAPT_EINVAL);
    ck_assert_int_eq(quant_spec_parse(NULL, &s), ADAPT_EINVAL);
    ck_assert_int_eq(s.wl, 77);

    enum quant_rounding r;
    enum quant_tie t;
    ck_assert_int_eq(quant_rounding_parse("stochastic", &r), ADAPT_OK);
    ck_assert_int_eq(r, QUANT_ROUND_STOCHASTIC);
    ck_assert_int_eq(quant_rounding_parse("random", &r), ADAPT_EINVAL);
    ck_assert_int_eq(quant_tie_parse("away", &t), ADAPT_OK);
    ck_assert_int_eq(t, QUANT_TIE_AWAY);
    ck_assert_int_eq(quant_tie_parse("odd", &t), ADAPT_EINVAL);

    /* float(E,M) options: read in any order, printed canonically (defaults left out, then
     * bias, nan, sub, ovf), and the canonical text reads back to the same spec */
    static const char *const canon[][2] = {
        {"float(5,10,bias=15,nan=ieee,sub=1,ovf=sat)", "float(5,10)"}, /* all defaults */
        {"float( 4 , 3 , nan = fn )", "float(4,3,nan=fn)"},
        {"float(4,3,ovf=inf,sub=0,nan=fn,bias=8)", "float(4,3,bias=8,nan=fn,sub=0,ovf=inf)"},
        {"float(2,1,nan=none)", "float(2,1,nan=none)"},
        {"float(5,2,bias=-97)", "float(5,2,bias=-97)"}, /* largest 2^127 x 1.75 */
        {"float(5,2,bias=125)", "float(5,2,bias=125)"}, /* least step 2^(1-125-2) = 2^-126 */
        {"float(5,2,bias=127)", "float(5,2,bias=127)"}, /* smallest normal 2^-126 */
        {"float(8,7,bias=127)", "float(8,7)"},
    };
    for (size_t i = 0; i < sizeof canon / sizeof canon[0]; i++) {
        struct quant_spec t;
        ck_assert_msg(quant_spec_parse(canon[i][0], &s) == ADAPT_OK, "%s: %s", canon[i][0],
                      adapt_error_message());
        ck_assert_str_eq(quant_spec_str(&s, buf, sizeof buf), canon[i][1]);
        ck_assert_int_eq(quant_spec_parse(buf, &t), ADAPT_OK);
        ck_assert_int_eq(quant_spec_bias(&t), quant_spec_bias(&s));
        ck_assert(t.nan == s.nan && t.subnormals == s.subnormals && t.overflow == s.overflow &&
                  t.exp_bits == s.exp_bits && t.man_bits == s.man_bits);
        ck_assert_int_eq(quant_spec_bits(&s), 1 + s.exp_bits + s.man_bits); /* the trace's wl */
    }
    ck_assert_int_eq(quant_spec_parse("float(4,3,bias=8,nan=fn,sub=0)", &s), ADAPT_OK);
    ck_assert_int_eq(quant_spec_bias(&s), 8);
    ck_assert_int_eq(s.nan, QUANT_NAN_FN);
    ck_assert_int_eq(s.subnormals, 0);
    ck_assert_int_eq(s.overflow, QUANT_OVERFLOW_SATURATE);
    ck_assert_int_eq(quant_spec_parse("e4m3", &s), ADAPT_OK);
    ck_assert_int_eq(quant_spec_bias(&s), 7);
    s.bias = 8; /* the built-ins have their own bias and all-ones exponent */
    ck_assert_int_eq(quant_spec_check(&s), ADAPT_EINVAL);
    ck_assert_ptr_nonnull(strstr(adapt_error_message(), "float(E,M,bias=B"));
    static const struct {
        const char *text;
        enum adapt_status st;
        const char *needle;
    } bad[] = {
        {"float(4,3,bias=7,bias=7)", ADAPT_EINVAL, "option bias given twice"},
        {"float(4,3,exp=7)", ADAPT_EINVAL, "unknown option 'exp'"},
        {"float(4,3,nan=yes)", ADAPT_EINVAL, "nan must be ieee, fn or none, not 'yes'"},
        {"float(4,3,sub=2)", ADAPT_EINVAL, "sub must be 1 or 0"},
        {"float(4,3,ovf=nan)", ADAPT_EINVAL, "ovf must be sat or inf"},
        {"float(4,3,bias)", ADAPT_EINVAL, "without '=VALUE'"},
        {"float(4,3,bias=x)", ADAPT_EINVAL, "bias must be an integer"},
        {"float(4,3,)", ADAPT_EINVAL, "unknown option"},
        {"float(4,3,nan=fn", ADAPT_EINVAL, "bad parameters"},
        {"float(2,1,nan=none,ovf=inf)", ADAPT_EINVAL, "every code is finite"},
        /* the float32 limits (quant_spec_check): largest below 2^128, least step >= 2^-126 */
        {"float(5,2,bias=-98)", ADAPT_ERANGE, "a bias in -97..125 or 127 fits"},
        {"float(5,2,bias=126)", ADAPT_ERANGE, "2^-127 (least step) to 2^-96"},
        {"float(5,2,bias=128)", ADAPT_ERANGE, "2^-129 (least step)"},
        {"float(8,7,bias=126)", ADAPT_ERANGE, "bias 127 only"},
        {"float(8,7,nan=fn)", ADAPT_ERANGE, "no bias at all"},
        {"float(4,3,bias=2000)", ADAPT_ERANGE, "out of range -1000..1000"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        s.wl = 77;
        ck_assert_msg(quant_spec_parse(bad[i].text, &s) == bad[i].st, "%s: %s", bad[i].text,
                      adapt_error_message());
        ck_assert_msg(strstr(adapt_error_message(), bad[i].needle), "%s: '%s' lacks '%s'",
                      bad[i].text, adapt_error_message(), bad[i].needle);
        ck_assert_int_eq(s.wl, 77);
    }

    /* specs edited by hand are checked by every call */
    quant_spec_init(&s, QUANT_FORMAT_FIXED);
    s.wl = 40;
    float v = 1.0f;
    struct quant_key key = {1, 2, 0};
    ck_assert_int_eq(quant_array(&s, &v, &v, 1, key, NULL, NULL), ADAPT_ERANGE);
    quant_spec_init(&s, QUANT_FORMAT_MUPPET);
    s.block = QUANT_BLOCK_DIM0;
    ck_assert_int_eq(quant_spec_check(&s), ADAPT_OK); /* one scale per dim-0 slice */
    s.block = (enum quant_block)2;
    ck_assert_int_eq(quant_spec_check(&s), ADAPT_EINVAL);

    /* the formats the GPU rounds several tensors of in one launch: a grid or float format known
     * before the data (not bfp, muppet, MX or a plugin) */
    static const struct {
        const char *text;
        int fits;
    } lists[] = {{"fixed(8,4)", 1}, {"fp16", 1},   {"bf16", 1},   {"float(4,3)", 1},
                 {"e4m3", 1},       {"e5m2", 1},   {"bfp(8)", 0}, {"muppet(8)", 0},
                 {"mxfp8_e4m3", 0}, {"mxint8", 0}, {"mxfp4", 0}};
    for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++) {
        ck_assert_int_eq(quant_spec_parse(lists[i].text, &s), ADAPT_OK);
        ck_assert_msg(quant_cuda_list_fits(&s) == lists[i].fits, "%s", lists[i].text);
    }
    quant_spec_init(&s, QUANT_FORMAT_PLUGIN);
    ck_assert_int_eq(quant_cuda_list_fits(&s), 0);
    quant_spec_init(&s, QUANT_FORMAT_FIXED);
    s.wl = 40; /* not a valid spec */
    ck_assert_int_eq(quant_cuda_list_fits(&s), 0);
}
END_TEST

/* ---------------- Philox generators ---------------- */

/* Every vector generator returns adapt_rng_block's values (src/base/rng.h, checked there against
 * Random123's known answers), for misaligned starts, odd lengths and across a wrap of the
 * counter's low word (which the vector code hands to the scalar one). */
START_TEST(test_philox_generators)
{
    static uint32_t buf[QUANT_PIECE_BUF];
    const uint64_t seeds[2] = {0x9e3779b97f4a7c15ull, 3};
    const uint64_t starts[4] = {0, 3, 4 * 0xfffffff0ull + 1, 0x123456789ull};
    const size_t lens[4] = {1, 7, 1000, QUANT_PIECE};
    int tested = 0;
    for (int isa = QUANT_ISA_SCALAR; isa <= QUANT_ISA_AVX512; isa++) {
        if (!quant_philox_fill_isa(isa, buf, 1, 1, 0, 1)) continue;
        tested++;
        for (int si = 0; si < 2; si++)
            for (int st = 0; st < 4; st++)
                for (int li = 0; li < 4; li++) {
                    uint64_t stream = ADAPT_STREAM_QUANT + (uint64_t)st * 0x100000001ull;
                    const uint32_t *r =
                        quant_philox_fill_isa(isa, buf, seeds[si], stream, starts[st], lens[li]);
                    for (size_t i = 0; i < lens[li]; i++)
                        if (r[i] != adapt_rng_u32_at(seeds[si], stream, starts[st] + i))
                            ck_abort_msg("isa %s start %llu i %zu", quant_philox_isa_name(isa),
                                      (unsigned long long)starts[st], i);
                }
    }
    ck_assert_int_ge(tested, 1);
}
END_TEST

/* ---------------- error paths ---------------- */

START_TEST(test_errors)
{
    struct quant_spec s = spec_of("fixed(8,4)", QUANT_ROUND_NEAREST, QUANT_TIE_EVEN);
    struct quant_key key = {0, 0, 0};
    float buf[16] = {0};
    /* partial overlap of input and output */
    ck_assert_int_eq(quant_array(&s, buf, buf + 1, 8, key, NULL, NULL), ADAPT_EINVAL);
    ck_assert_ptr_nonnull(strstr(adapt_error_message(), "overlap"));
    ck_assert_int_eq(quant_array(&s, NULL, buf, 8, key, NULL, NULL), ADAPT_EINVAL);
    ck_assert_int_eq(quant_array(&s, buf, buf, 0, key, NULL, NULL), ADAPT_OK); /* empty is fine */
    /* a plan for bfp needs the data range */
    struct quant_plan p;
    s = spec_of("bfp(8)", QUANT_ROUND_NEAREST, QUANT_TIE_EVEN);
    ck_assert_int_eq(quant_plan_init(&s, NULL, key, &p), ADAPT_EINVAL);
    s.rounding = (enum quant_rounding)7;
    ck_assert_int_eq(quant_spec_check(&s), ADAPT_EINVAL);
    /* CUDA entry points report ADAPT_EUNSUPPORTED without a build or a device */
    char desc[256];
    if (!quant_cuda_built() || adapt_cuda_device_count(desc, sizeof desc) == 0) {
        s = spec_of("fixed(8,4)", QUANT_ROUND_NEAREST, QUANT_TIE_EVEN);
        ck_assert_int_eq(quant_cuda_rows_host(&s, buf, buf, 1, 16, key, NULL, NULL),
                         ADAPT_EUNSUPPORTED);
    }
}
END_TEST

/* ---------------- ranges ---------------- */

START_TEST(test_range)
{
    float x[] = {NAN, -3.5f, INFINITY, 2.0f, -INFINITY, 1e-45f};
    struct quant_range a, b;
    quant_range_compute(x, 6, &a);
    quant_range_compute_ref(x, 6, &b);
    ck_assert(a.max == 2.0f && a.min == -3.5f && a.maxabs == 3.5f); /* non-finite ignored */
    ck_assert(memcmp(&a, &b, sizeof a) == 0);
    quant_range_compute(x, 1, &a); /* NaN only: empty */
    ck_assert(a.max == -INFINITY && a.min == INFINITY && a.maxabs == 0.0f);
    const size_t n = 3 * QUANT_CHUNK + 17;
    float *w = malloc(n * sizeof *w);
    ck_assert(w);
    struct quant_spec s;
    quant_spec_init(&s, QUANT_FORMAT_FIXED);
    fill_inputs(w, n, &s, 4);
    quant_range_compute(w, n, &a);
    quant_range_compute_ref(w, n, &b);
    ck_assert(memcmp(&a, &b, sizeof a) == 0);
    free(w);
}
END_TEST

/* quant_rows_scaled against its definition, the three steps apart through the scalar
 * reference (x * scale, quant_rows_ref, times inv): the same bits and the same counts, for
 * formats rounded in one pass (fixed, e4m3, e5m2, bf16 nearest and stochastic) and for those
 * that keep the three passes (bfp per row, mxfp8), at an odd starting index, over several
 * chunks with a tail; and quant_amax_compute against a plain loop. */
START_TEST(test_scaled_rows)
{
    static const char *const fmts[] = {"fixed(8,4)", "float(4,3)", "float(5,2)", "bf16",
                                       "bfp(8)", "mxfp8_e4m3"};
    const size_t rows = 3, cols = QUANT_CHUNK + 4133, n = rows * cols;
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y), *r = malloc(n * sizeof *r);
    ck_assert(x && y && r);
    for (size_t f = 0; f < sizeof fmts / sizeof fmts[0]; f++)
        for (int mode = 0; mode < 2; mode++) {
            struct quant_spec s;
            ck_assert_int_eq(quant_spec_parse(fmts[f], &s), ADAPT_OK);
            s.rounding = mode ? QUANT_ROUND_STOCHASTIC : QUANT_ROUND_NEAREST;
            if (s.format == QUANT_FORMAT_BFP) s.block = QUANT_BLOCK_DIM0;
            fill_inputs(x, n, &s, 11 + f);
            for (size_t i = 0; i < n; i += 7) x[i] *= 3e-3f; /* scales that matter */
            const float scale = mode ? 0.3f : 64.0f, inv = 1.0f / scale;
            struct quant_key key = {5, 9, 1001};
            struct quant_stats a = {0, 0, 0}, b = {0, 0, 0};
            ck_assert_int_eq(quant_rows_scaled(&s, x, y, rows, cols, key, scale, inv, &a),
                             ADAPT_OK);
            for (size_t i = 0; i < n; i++) r[i] = x[i] * scale;
            ck_assert_int_eq(quant_rows_ref(&s, r, r, rows, cols, key, NULL, &b), ADAPT_OK);
            for (size_t i = 0; i < n; i++) r[i] *= inv;
            char label[96];
            snprintf(label, sizeof label, "%s %s scaled", fmts[f], mode ? "stochastic" : "nearest");
            tu_expect_same_bits(label, y, r, n);
            ck_assert_msg(a.saturated == b.saturated && a.flushed == b.flushed &&
                              a.zeros == b.zeros,
                          "%s: counts %llu %llu %llu, reference %llu %llu %llu", label,
                          (unsigned long long)a.saturated, (unsigned long long)a.flushed,
                          (unsigned long long)a.zeros, (unsigned long long)b.saturated,
                          (unsigned long long)b.flushed, (unsigned long long)b.zeros);
            memcpy(r, x, n * sizeof *r); /* in place */
            ck_assert_int_eq(quant_rows_scaled(&s, r, r, rows, cols, key, scale, inv, NULL),
                             ADAPT_OK);
            tu_expect_same_bits(label, r, y, n);
        }
    /* amax: finite data, then one inf, then one NaN far into the array */
    struct quant_spec s;
    quant_spec_init(&s, QUANT_FORMAT_FIXED);
    fill_inputs(x, n, &s, 3);
    float m = 0.0f;
    for (size_t i = 0; i < n; i++)
        if (isfinite(x[i]) && fabsf(x[i]) > m) m = fabsf(x[i]);
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i])) x[i] = 0.5f;
    int nf = 1;
    ck_assert(quant_amax_compute(x, n, &nf) == m && nf == 0);
    x[n - 5] = -INFINITY;
    ck_assert(quant_amax_compute(x, n, &nf) == INFINITY && nf == 1);
    x[n - 5] = NAN;
    ck_assert(quant_amax_compute(x, n, &nf) == INFINITY && nf == 1);
    ck_assert(quant_amax_compute(x, 0, &nf) == 0.0f && nf == 0);
    free(x), free(y), free(r);
}
END_TEST

int main(void)
{
    Suite *su = suite_create("quant");
    TCase *tc = tcase_create("formats");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_spec_parse);
    tcase_add_test(tc, test_philox_generators);
    test_quant_add_kernels(tc);
    test_quant_add_fixed(tc);
    test_quant_add_float(tc);
    test_quant_add_custom(tc);
    test_quant_add_stats(tc);
    test_quant_add_accum(tc);
    test_quant_add_sr16(tc);
    tcase_add_test(tc, test_errors);
    tcase_add_test(tc, test_range);
    tcase_add_test(tc, test_scaled_rows);
    suite_add_tcase(su, tc);
    return tu_run_suite(su, CK_FORK_GETENV);
}
