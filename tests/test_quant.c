/* tests/test_quant.c: src/quant/ (formats, rounding kernels, Philox generators, histograms, KL,
 * storage export). Expected values carry a comment saying where they come from. */
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
#include "tests/testutil.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>
#define HAVE_X86 1
#endif

static struct quant_spec spec_of(const char *text, enum quant_rounding rnd, enum quant_tie tie)
{
    struct quant_spec s;
    ck_assert_msg(quant_spec_parse(text, &s) == ADAPT_OK, "%s: %s", text, adapt_error_message());
    s.rounding = rnd;
    s.tie = tie;
    return s;
}

/* High-entropy inputs for spec s: wide random magnitudes, raw bit patterns (NaN, inf,
 * subnormals included), exact ties of the format's grid at several scales, and specials. */
static void fill_inputs(float *x, size_t n, const struct quant_spec *s, uint64_t seed)
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
}
END_TEST

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

/* ---------------- float formats ---------------- */

#ifdef HAVE_X86
__attribute__((target("f16c"))) static void f16c_round(const float *x, float *y, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT);
        _mm256_storeu_ps(y + i, _mm256_cvtph_ps(h));
    }
    for (; i < n; i++) y[i] = _cvtsh_ss(_cvtss_sh(x[i], _MM_FROUND_TO_NEAREST_INT));
}
#endif

/* Software binary16 round-to-nearest-even, written from IEEE 754: spacing 2^(max(e,-14)-10),
 * rounding in double (exact here), overflow to inf at 65520. */
static float soft_fp16(float x)
{
    if (x != x) return x;
    double a = fabs((double)x);
    if (a >= 65520.0) return copysignf(INFINITY, x);
    if (a == 0.0) return x;
    int e = ilogb(a);
    double q = ldexp(1.0, (e < -14 ? -14 : e) - 10);
    double y = nearbyint(a / q) * q;
    return copysignf((float)y, x);
}

static double seconds(void) { return omp_get_wtime(); }

/* fp16 nearest equals IEEE binary16 RNE (F16C hardware, else the software reference) on every
 * float bit pattern i * stride (stride 23: 187 M patterns, all exponents and mantissa classes);
 * QUANT_TEST_FP16_FULL=1 checks all 2^32. */
START_TEST(test_fp16_ieee)
{
    struct quant_spec s = spec_of("fp16", QUANT_ROUND_NEAREST, QUANT_TIE_EVEN);
    const char *full = getenv("QUANT_TEST_FP16_FULL");
    /* every 23rd bit pattern; every 391st (17 x 23) in quick mode */
    const uint64_t stride = full && *full == '1' ? 1 : tu_quick() ? 391 : 23;
    const size_t blk = 1 << 20;
    float *x = malloc(blk * sizeof *x), *y = malloc(blk * sizeof *y), *e = malloc(blk * sizeof *e);
    ck_assert(x && y && e);
    int hw = 0;
#ifdef HAVE_X86
    {   /* CPUID leaf 1, ECX bit 29: F16C (clang 14 has no "f16c" for __builtin_cpu_supports) */
        unsigned eax, ebx, ecx, edx;
        hw = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C);
    }
#endif
    double t0 = seconds();
    uint64_t checked = 0;
    struct quant_key key = {0, 0, 0};
    for (uint64_t u = 0; u < (1ull << 32);) {
        size_t nb = 0;
        for (; nb < blk && u < (1ull << 32); nb++, u += stride) x[nb] = quant_u2f((uint32_t)u);
        ck_assert_int_eq(quant_array(&s, x, y, nb, key, NULL, NULL), ADAPT_OK);
#ifdef HAVE_X86
        if (hw) f16c_round(x, e, nb);
#endif
        if (!hw)
            for (size_t i = 0; i < nb; i++) e[i] = soft_fp16(x[i]);
        for (size_t i = 0; i < nb; i++)
            if (!tu_same_bits(y[i], e[i])) ck_abort_msg("fp16(%a) = %a, IEEE %a", x[i], y[i], e[i]);
        checked += nb;
    }
    if (stride == 1 || getenv("QUANT_TEST_VERBOSE"))
        fprintf(stderr, "fp16: %llu patterns equal to %s in %.1f s\n", (unsigned long long)checked,
                hw ? "F16C" : "software RNE", seconds() - t0);
    /* the software reference agrees with the hardware on a sample (it is the fallback) */
    for (uint32_t i = 0; i < 200000; i++) {
        float v = quant_u2f(i * 21467u + 0x33000000u);
        x[0] = v;
        quant_array(&s, x, y, 1, key, NULL, NULL);
        if (!tu_same_bits(y[0], soft_fp16(v)))
            ck_abort_msg("fp16(%a) = %a, software %a", v, y[0], soft_fp16(v));
    }
    free(x), free(y), free(e);
}
END_TEST

/* bf16 nearest equals the usual bfloat16 RNE bit recipe u + 0x7fff + ((u >> 16) & 1), then
 * truncation (NaN kept), on every bit pattern i * 29 (i * 493 in quick mode). */
START_TEST(test_bf16_rne)
{
    struct quant_spec s = spec_of("bf16", QUANT_ROUND_NEAREST, QUANT_TIE_EVEN);
    const size_t blk = 1 << 20;
    float *x = malloc(blk * sizeof *x), *y = malloc(blk * sizeof *y);
    ck_assert(x && y);
    struct quant_key key = {0, 0, 0};
    const uint64_t stride = tu_quick() ? 493 : 29; /* 17 x 29 in quick mode */
    for (uint64_t u = 0; u < (1ull << 32);) {
        size_t nb = 0;
        for (; nb < blk && u < (1ull << 32); nb++, u += stride) x[nb] = quant_u2f((uint32_t)u);
        ck_assert_int_eq(quant_array(&s, x, y, nb, key, NULL, NULL), ADAPT_OK);
        for (size_t i = 0; i < nb; i++) {
            uint32_t b = quant_f2u(x[i]);
            float e =
                x[i] != x[i] ? x[i] : quant_u2f((b + 0x7fffu + ((b >> 16) & 1u)) & 0xffff0000u);
            if (!tu_same_bits(y[i], e)) ck_abort_msg("bf16(%a) = %a, expected %a", x[i], y[i], e);
        }
    }
    free(x), free(y);
}
END_TEST

/* The OCP 8-bit floating-point formats (OCP 8-bit Floating Point Specification (OFP8), v1.0,
 * 2023), decoded code by code from the specification's tables, independently of the rounding
 * code: E4M3 (bias 7; exponent 1111 holds normals, S.1111.111 is NaN, no infinities, max 448)
 * and E5M2 (bias 15, IEEE-like: exponent 11111 is inf / NaN, max 57344). pos[c] is the value
 * of positive code c, ascending with c; returns the number of finite positive codes. */
static int ocp_codes(int e4m3, double *pos)
{
    int eb = e4m3 ? 4 : 5, mb = 7 - eb, bias = e4m3 ? 7 : 15, n = 0;
    for (int c = 0; c < 128; c++) {
        int e = c >> mb, m = c & ((1 << mb) - 1);
        if (e4m3 && e == 15 && m == 7) break;  /* NaN */
        if (!e4m3 && e == 31) break;           /* inf, NaN */
        pos[n++] = e == 0 ? ldexp((double)m, 1 - bias - mb)
                          : ldexp((double)((1 << mb) + m), e - bias - mb);
    }
    return n;
}

/* Round-to-nearest-even onto the codes, from the table alone: the nearer neighbour, the even
 * code on a tie. E4M3 saturates (OCP satfinite) or gives NaN; E5M2 overflows to inf when the
 * rounded value would pass the largest (its virtual next code is even). The sign, also of a
 * zero, is kept; a NaN input comes back itself. */
static float ocp_round(float x, int e4m3, int ovf_special, const double *pos, int n)
{
    if (x != x) return x;
    double a = fabs((double)x), maxv = pos[n - 1], y;
    double next = maxv + (pos[n - 1] - pos[n - 2]); /* the code after the largest, virtually */
    if (a > maxv) {
        /* past the largest: the virtual next code n wins above the midpoint, and on it when n
         * is even (E5M2: 124, so the tie overflows; E4M3: 127, so it stays at 448) */
        double mid = maxv + (next - maxv) / 2;
        int up = a > mid || (a == mid && n % 2 == 0);
        y = up && ovf_special ? (e4m3 ? NAN : INFINITY) : maxv;
    } else {
        int lo = 0, hi = n - 1; /* pos[lo] <= a <= pos[hi] */
        while (hi - lo > 1) {
            int mid = (lo + hi) / 2;
            if (pos[mid] <= a) lo = mid;
            else hi = mid;
        }
        double dl = a - pos[lo], dh = pos[hi] - a;
        y = dl < dh ? pos[lo] : dh < dl ? pos[hi] : (lo % 2 == 0 ? pos[lo] : pos[hi]);
    }
    return (float)copysign(y, (double)x);
}

/* e4m3 and e5m2 nearest equal the code-table reference on every 23rd float bit pattern (every
 * 391st in quick mode, all with QUANT_TEST_FP8_FULL=1), for both overflow settings; the
 * specification's landmarks by hand. */
START_TEST(test_fp8_ocp)
{
    const char *full = getenv("QUANT_TEST_FP8_FULL");
    const uint64_t stride = full && *full == '1' ? 1 : tu_quick() ? 391 : 23;
    const size_t blk = 1 << 20;
    float *x = malloc(blk * sizeof *x), *y = malloc(blk * sizeof *y);
    ck_assert(x && y);
    struct quant_key key = {0, 0, 0};
    for (int e4m3 = 0; e4m3 < 2; e4m3++) {
        double pos[128];
        int n = ocp_codes(e4m3, pos);
        ck_assert_int_eq(n, e4m3 ? 127 : 124);
        ck_assert(pos[n - 1] == (e4m3 ? 448.0 : 57344.0));
        ck_assert(pos[1] == (e4m3 ? 0x1p-9 : 0x1p-16)); /* the smallest subnormal */
        for (int special = 0; special < 2; special++) {
            struct quant_spec s =
                spec_of(e4m3 ? "e4m3" : "e5m2", QUANT_ROUND_NEAREST, QUANT_TIE_EVEN);
            s.overflow = special ? QUANT_OVERFLOW_INF : QUANT_OVERFLOW_SATURATE;
            for (uint64_t u = 0; u < (1ull << 32);) {
                size_t nb = 0;
                for (; nb < blk && u < (1ull << 32); nb++, u += stride)
                    x[nb] = quant_u2f((uint32_t)u);
                ck_assert_int_eq(quant_array(&s, x, y, nb, key, NULL, NULL), ADAPT_OK);
                for (size_t i = 0; i < nb; i++) {
                    float e = ocp_round(x[i], e4m3, special, pos, n);
                    if (!tu_same_bits(y[i], e) && !(y[i] != y[i] && e != e))
                        ck_abort_msg("%s overflow %s: %a -> %a, table %a", e4m3 ? "e4m3" : "e5m2",
                                     special ? "special" : "saturate", x[i], y[i], e);
                }
            }
        }
    }
    /* landmarks: {format, overflow special, input, output} */
    static const struct {
        const char *f;
        int special;
        float in, out;
    } c[] = {
        {"e4m3", 0, 448.0f, 448.0f},    {"e4m3", 0, 464.0f, 448.0f}, /* tie with 480: even */
        {"e4m3", 1, 464.0f, 448.0f},    {"e4m3", 0, 470.0f, 448.0f}, /* satfinite */
        {"e4m3", 1, 470.0f, NAN},       {"e4m3", 0, INFINITY, 448.0f},
        {"e4m3", 1, -INFINITY, NAN},    {"e4m3", 0, 0x1p-10f, 0.0f}, /* half the least: even */
        {"e4m3", 0, 0x1.8p-10f, 0x1p-9f}, {"e4m3", 0, 1.0625f, 1.0f}, /* 1 + 1/16: tie, even */
        {"e4m3", 0, 1.1875f, 1.25f},    {"e5m2", 1, 57344.0f, 57344.0f},
        {"e5m2", 1, 61439.0f, 57344.0f}, {"e5m2", 1, 61440.0f, INFINITY}, /* tie: even -> inf */
        {"e5m2", 0, 61440.0f, 57344.0f}, {"e5m2", 1, 0x1p-17f, 0.0f},
        {"e5m2", 1, 1.125f, 1.0f},      {"e5m2", 1, 1.375f, 1.5f},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        struct quant_spec s = spec_of(c[i].f, QUANT_ROUND_NEAREST, QUANT_TIE_EVEN);
        s.overflow = c[i].special ? QUANT_OVERFLOW_INF : QUANT_OVERFLOW_SATURATE;
        x[0] = c[i].in;
        ck_assert_int_eq(quant_array(&s, x, y, 1, key, NULL, NULL), ADAPT_OK);
        ck_assert_msg(tu_same_bits(y[0], c[i].out) || (y[0] != y[0] && c[i].out != c[i].out),
                      "%s(%a) = %a, expected %a", c[i].f, c[i].in, y[0], c[i].out);
    }
    char buf[32];
    struct quant_spec s = spec_of("e4m3", QUANT_ROUND_NEAREST, QUANT_TIE_EVEN);
    ck_assert_str_eq(quant_spec_str(&s, buf, sizeof buf), "e4m3");
    ck_assert_int_eq(quant_spec_bits(&s), 8);
    ck_assert_int_eq(quant_spec_parse("e5m2(5,2)", &s), ADAPT_EINVAL);
    free(x), free(y);
}
END_TEST

/* The OCP Microscaling formats (OCP Microscaling Formats (MX) Specification v1.0, 2023),
 * against an oracle written from the specification alone: element codes decoded from its tables
 * (FP8 E4M3/E5M2 as above; FP6 E2M3 bias 1 and E3M2 bias 3, FP4 E2M1 bias 1, all codes finite;
 * INT8 k 2^-6 with k in [-127, 127]), the shared scale X = 2^s with
 * s = floor(log2 max|v|) - emax (emax: the exponent of the largest element), at least -127
 * (E8M0), every element v / X rounded onto the codes (nearest, even code on a tie; or
 * stochastic, up iff r + floor(frac 2^32) >= 2^32, on |v| for the float elements and on v for
 * INT8, as the integer grids of this project round) and clamped at the largest code; a block
 * with inf or NaN all NaN. In double: v / X, the fraction and q X are exact there. */
struct mx_table {
    double pos[128]; /* positive finite codes, ascending */
    int n, emax, integer;
};

static void mx_table_make(const char *fmt, struct mx_table *t)
{
    static const struct {
        const char *name;
        int eb, mb, bias;
    } f[] = {{"mxfp8_e4m3", 4, 3, 7}, {"mxfp8_e5m2", 5, 2, 15}, {"mxfp6_e2m3", 2, 3, 1},
             {"mxfp6_e3m2", 3, 2, 3}, {"mxfp4", 2, 1, 1},       {"mxint8", 0, 0, 0}};
    memset(t, 0, sizeof *t);
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        if (strcmp(f[i].name, fmt)) continue;
        if (!f[i].eb) { /* INT8 */
            for (int k = 0; k < 128; k++) t->pos[k] = ldexp((double)k, -6);
            t->n = 128;
            t->integer = 1;
        } else {
            int mb = f[i].mb, eb = f[i].eb;
            for (int c = 0; c < (1 << (eb + mb)); c++) {
                int e = c >> mb, m = c & ((1 << mb) - 1);
                if (eb == 4 && e == 15 && m == 7) break; /* E4M3 NaN */
                if (eb == 5 && e == 31) break;           /* E5M2 inf, NaN */
                t->pos[t->n++] = e == 0 ? ldexp((double)m, 1 - f[i].bias - mb)
                                        : ldexp((double)((1 << mb) + m), e - f[i].bias - mb);
            }
        }
        t->emax = ilogb(t->pos[t->n - 1]);
        return;
    }
    ck_abort_msg("no MX table for %s", fmt);
}

static void mx_oracle(const struct mx_table *t, const float *x, size_t len, int stochastic,
                      const uint32_t *r, float *y, uint8_t *sat)
{
    double amax = 0.0;
    int finite = 1;
    for (size_t j = 0; j < len; j++) {
        if (!isfinite(x[j])) finite = 0;
        else amax = fmax(amax, fabs((double)x[j]));
    }
    for (size_t j = 0; j < len; j++) {
        if (!finite) {
            y[j] = x[j] != x[j] ? x[j] : NAN;
            sat[j] = x[j] == x[j];
            continue;
        }
        int s = amax > 0.0 ? ilogb(amax) - t->emax : -127;
        if (s < -127) s = -127;
        if (t->integer && stochastic) { /* the integer grids' floor(v / step + u), signed */
            double tv = ldexp((double)x[j], 6 - s), f = floor(tv);
            uint64_t F = (uint64_t)ldexp(tv - f, 32);
            double k = f + (((uint64_t)r[j] + F) >> 32 ? 1.0 : 0.0);
            sat[j] = k > 127.0 || k < -127.0;
            k = k > 127.0 ? 127.0 : k < -127.0 ? -127.0 : k;
            y[j] = (float)ldexp(k, s - 6) + 0.0f;
            continue;
        }
        double a = ldexp(fabs((double)x[j]), -s), top = t->pos[t->n - 1];
        double step = top - t->pos[t->n - 2], lo, hi;
        int lo_even;
        if (a >= top) { /* virtual codes above the largest continue its spacing */
            double k = floor((a - top) / step);
            lo = top + k * step;
            hi = lo + step;
            lo_even = ((t->n - 1 + (long)k) % 2) == 0;
        } else {
            int i = 0;
            while (t->pos[i + 1] <= a) i++;
            lo = t->pos[i];
            hi = t->pos[i + 1];
            lo_even = i % 2 == 0;
        }
        double q;
        if (stochastic) {
            uint64_t F = (uint64_t)ldexp((a - lo) / (hi - lo), 32);
            q = ((uint64_t)r[j] + F) >> 32 ? hi : lo;
        } else {
            double dl = a - lo, dh = hi - a;
            q = dl < dh ? lo : dh < dl ? hi : lo_even ? lo : hi;
        }
        sat[j] = q > top;
        if (q > top) q = top;
        double v = ldexp(q, s);
        y[j] = t->integer && q == 0.0 ? 0.0f : (float)copysign(v, (double)x[j]);
    }
}

/* Blocks of several kinds for table t: wide random magnitudes, exact ties of the element grid,
 * values past the largest element, all zeros, inf or NaN, and scales at the E8M0 floor. */
static void mx_fill(const struct mx_table *t, float *x, size_t rows, size_t cols, uint64_t seed)
{
    struct adapt_rng g;
    adapt_rng_init(&g, seed, 5);
    for (size_t r = 0; r < rows; r++)
        for (size_t b = 0; b < cols; b += QUANT_MX_BLOCK) {
            float *xb = x + r * cols + b;
            size_t len = cols - b < QUANT_MX_BLOCK ? cols - b : QUANT_MX_BLOCK;
            uint32_t kind = adapt_rng_u32(&g) % 7;
            int s = (int)(adapt_rng_u32(&g) % 250) - 125 - t->emax; /* block scale 2^s */
            if (s + t->emax > 127) s = 127 - t->emax;
            for (size_t j = 0; j < len; j++) {
                uint32_t u = adapt_rng_u32(&g), w = adapt_rng_u32(&g);
                double v;
                if (kind == 0 || kind == 5) { /* magnitudes over 2^-30 of the block's largest */
                    v = ldexp(1.0 + (double)(u & 0x7fffff) * 0x1p-23,
                              s + t->emax - (int)(w % 31));
                    if (kind == 5) v = ldexp(v, -100); /* near or below the E8M0 floor */
                } else if (kind == 1) {               /* ties between neighbouring codes */
                    int i = (int)(w % (uint32_t)(t->n - 1));
                    v = ldexp((t->pos[i] + t->pos[i + 1]) / 2.0, s);
                } else if (kind == 2) { /* between the largest code and 2^(emax+1) */
                    double top = t->pos[t->n - 1], lim = ldexp(1.0, t->emax + 1);
                    v = ldexp(top + (lim - top) * (double)(u >> 8) * 0x1p-24, s);
                } else if (kind == 3) {
                    v = (u & 1) ? 0.0 : -0.0;
                } else if (kind == 4) {
                    v = ldexp((double)(u % 1000), s - 5);
                } else { /* one special in an ordinary block */
                    v = ldexp((double)(u % 1000) + 1.0, s - 5);
                    if (j == w % len) v = (w & 1) ? (double)INFINITY : (double)NAN;
                }
                float f = (float)v;
                xb[j] = (u >> 31) ? -f : f;
            }
            if (kind == 1) xb[0] = (float)ldexp(t->pos[t->n - 1], s); /* pins the scale */
        }
}

START_TEST(test_mx_ocp)
{
    static const char *fmts[] = {"mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e2m3",
                                 "mxfp6_e3m2", "mxfp4",      "mxint8"};
    static const double top[] = {448.0, 57344.0, 7.5, 28.0, 6.0, 127.0 / 64.0};
    static const int bits[] = {8, 8, 6, 6, 4, 8};
    const size_t rows = 9, cols = tu_quick() ? 500 : 4000; /* rows end in a partial block */
    const size_t n = rows * cols;
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y), *z = malloc(n * sizeof *z);
    float *e = malloc(n * sizeof *e);
    uint8_t *m = malloc(n), *mr = malloc(n), *me = malloc(n);
    uint32_t *r = malloc(n * sizeof *r);
    ck_assert(x && y && z && e && m && mr && me && r);
    for (size_t f = 0; f < sizeof fmts / sizeof fmts[0]; f++) {
        struct mx_table t;
        mx_table_make(fmts[f], &t);
        ck_assert(t.pos[t.n - 1] == top[f]); /* the specification's largest element */
        for (int stochastic = 0; stochastic < 2; stochastic++) {
            struct quant_spec s = spec_of(fmts[f], stochastic ? QUANT_ROUND_STOCHASTIC
                                                              : QUANT_ROUND_NEAREST,
                                          QUANT_TIE_EVEN);
            ck_assert_int_eq(quant_spec_bits(&s), bits[f]);
            mx_fill(&t, x, rows, cols, 300 + f);
            struct quant_key key = {31, ADAPT_STREAM_QUANT + 9, 77};
            struct quant_stats a = {0, 0, 0}, b = {0, 0, 0};
            ck_assert_int_eq(quant_rows(&s, x, y, rows, cols, key, m, &a), ADAPT_OK);
            ck_assert_int_eq(quant_rows_ref(&s, x, z, rows, cols, key, mr, &b), ADAPT_OK);
            for (size_t i = 0; i < n; i++) r[i] = adapt_rng_u32_at(31, key.stream, 77 + i);
            uint64_t sat = 0, zeros = 0;
            for (size_t row = 0; row < rows; row++)
                for (size_t c = 0; c < cols; c += QUANT_MX_BLOCK) {
                    size_t o = row * cols + c;
                    mx_oracle(&t, x + o, cols - c < QUANT_MX_BLOCK ? cols - c : QUANT_MX_BLOCK,
                              stochastic, r + o, e + o, me + o);
                }
            for (size_t i = 0; i < n; i++) {
                int same = tu_same_bits(y[i], e[i]) || (y[i] != y[i] && e[i] != e[i]);
                if (!same || m[i] != me[i] || !tu_same_bits(y[i], z[i]) || m[i] != mr[i])
                    ck_abort_msg("%s %s x[%zu] = %a: got %a (mask %d), ref %a, oracle %a "
                                 "(mask %d)",
                                 fmts[f], stochastic ? "SR" : "RN", i, x[i], y[i], m[i], z[i],
                                 e[i], me[i]);
                sat += me[i];
                zeros += e[i] == 0.0f;
            }
            ck_assert_uint_eq(a.saturated, sat);
            ck_assert_uint_eq(b.saturated, sat);
            ck_assert_uint_eq(a.zeros, zeros);
            ck_assert_uint_eq(a.flushed, b.flushed);
        }
    }
    /* by hand: {format, block, expected} */
    static const struct {
        const char *f;
        int n;
        float in[5], out[5];
        uint8_t mask[5];
    } c[] = {
        /* max 7: s = floor(log2 7) - 2 = 0; 0.25 ties 0 / 0.5 -> 0 (even code), 0.75 ties
         * 0.5 / 1 -> 1, -5 ties 4 / 6 -> 4, 7 ties 6 / 8 (virtual code 8, even) -> clamped 6 */
        {"mxfp4", 5, {6.0f, 0.25f, 0.75f, -5.0f, 7.0f}, {6.0f, 0.0f, 1.0f, -4.0f, 6.0f},
         {0, 0, 0, 0, 1}},
        /* max 1.99: s = 0, step 2^-6; 2^-7 is half a step -> 0; 3 2^-7 -> 2 2^-6;
         * -1.99 = -127.36 steps -> -127/64 */
        {"mxint8", 4, {1.0f, 0x1p-7f, 0x1.8p-6f, -1.99f}, {1.0f, 0.0f, 0x1p-5f, -1.984375f},
         {0, 0, 0, 0}},
        /* max 1000: s = 9 - 8 = 1; 500 is nearer 512 than 480 -> past 448: clamped, 896 */
        {"mxfp8_e4m3", 2, {1000.0f, 1.0f}, {896.0f, 1.0f}, {1, 0}},
        /* max 2^-140: s = -144 -> -127; 2^-140 / 2^-127 = 2^-13 < 2^-5 (half the least
         * subnormal 2^-4): flushed */
        {"mxfp6_e3m2", 2, {0x1p-140f, 0.0f}, {0.0f, 0.0f}, {0, 0}},
        /* an inf makes the scale NaN: every element NaN */
        {"mxfp6_e2m3", 3, {1.0f, INFINITY, -2.0f}, {NAN, NAN, NAN}, {1, 1, 1}},
    };
    struct quant_key key = {0, 0, 0};
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        struct quant_spec s = spec_of(c[i].f, QUANT_ROUND_NEAREST, QUANT_TIE_EVEN);
        float out[5];
        uint8_t mk[5];
        ck_assert_int_eq(quant_array(&s, c[i].in, out, (size_t)c[i].n, key, mk, NULL), ADAPT_OK);
        for (int j = 0; j < c[i].n; j++)
            ck_assert_msg((tu_same_bits(out[j], c[i].out[j]) ||
                           (out[j] != out[j] && c[i].out[j] != c[i].out[j])) &&
                              mk[j] == c[i].mask[j],
                          "%s case %zu element %d: %a -> %a (mask %d), expected %a", c[i].f, i, j,
                          c[i].in[j], out[j], mk[j], c[i].out[j]);
    }
    char buf[32];
    struct quant_spec s = spec_of("mxfp6_e3m2", QUANT_ROUND_NEAREST, QUANT_TIE_EVEN);
    ck_assert_str_eq(quant_spec_str(&s, buf, sizeof buf), "mxfp6_e3m2");
    ck_assert_int_eq(quant_spec_parse("mxfp4(4)", &s), ADAPT_EINVAL);
    ck_assert_int_eq(quant_spec_parse("mxfp9", &s), ADAPT_EINVAL);
    double kl;
    ck_assert_int_eq(quant_kl(&s, x, 64, 0, 16, key, &kl), ADAPT_EUNSUPPORTED);
    free(x), free(y), free(z), free(e), free(m), free(mr), free(me), free(r);
}
END_TEST

/* quant_spec_within: the pairs worked out by hand, then the property it promises: for every
 * pair it accepts, values rounded to a (wide random values, ties, specials, both overflow rules
 * of a) come back unchanged from b, in nearest and stochastic mode. */
START_TEST(test_spec_within)
{
    static const struct {
        const char *a, *b;
        int within;
    } c[] = {
        {"fixed(8,4)", "fixed(10,5)", 1}, /* FL 4 <= 5, integer bits 4 <= 5 */
        {"fixed(8,4)", "fixed(8,3)", 0},  /* a finer step */
        {"fixed(8,4)", "fixed(8,5)", 0},  /* a wider range */
        {"e4m3", "fp16", 1},              /* 3 <= 10 mantissa bits, 448 <= 65504, 2^-9 step */
        {"e5m2", "fp16", 1},              /* 57344 <= 65504, least step 2^-16 >= 2^-24, inf */
        {"e5m2", "e4m3", 0},              /* range */
        {"fp16", "bf16", 0},              /* 10 > 7 mantissa bits */
        {"bf16", "fp16", 0},              /* range */
        {"fp16", "float(8,23)", 0},       /* fp16 overflows to inf, float(8,23) saturates */
        {"float(5,10)", "float(8,23)", 1},
        {"bf16", "float(8,23)", 0},       /* inf again */
        {"float(4,3)", "e4m3", 1},        /* same bias and step, saturates at 240 <= 448 */
        {"float(4,3,nan=fn)", "e4m3", 1}, /* the same format */
        {"e4m3", "float(4,3,nan=fn)", 1},
        {"float(4,3,bias=8)", "float(4,3)", 0}, /* least step 2^-10 < 2^-9 */
        {"float(4,3,bias=6)", "float(4,3)", 0}, /* largest 480 > 240 */
        {"float(2,1,nan=none)", "e4m3", 1},     /* 0.5..6, step >= 0.5 */
        {"mxfp4", "mxfp4", 1},
        {"mxfp4", "mxfp6_e2m3", 0},       /* blocks: not worked out */
        {"bfp(8)", "bfp(8)", 0},          /* data-dependent scale */
        {"fixed(8,4)", "fp16", 0},        /* holds, but is not worked out */
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        struct quant_spec a = spec_of(c[i].a, QUANT_ROUND_NEAREST, QUANT_TIE_EVEN);
        struct quant_spec b = spec_of(c[i].b, QUANT_ROUND_NEAREST, QUANT_TIE_EVEN);
        ck_assert_msg(quant_spec_within(&a, &b) == c[i].within, "%s within %s", c[i].a, c[i].b);
    }
    static const char *f[] = {"fixed(8,4)", "fixed(12,6)", "fixed(16,8)", "fp16", "bf16",
                              "float(4,3)", "float(5,2)", "float(3,2)", "float(8,23)",
                              "float(6,9)", "e4m3", "e5m2", "mxfp4", "mxint8",
                              "float(4,3,bias=11)", "float(5,2,bias=-20,nan=fn)",
                              "float(2,1,nan=none)", "float(6,4,bias=127)"};
    const size_t nf = sizeof f / sizeof f[0], n = tu_quick() ? 4096 : 65536;
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y), *z = malloc(n * sizeof *z);
    ck_assert(x && y && z);
    int accepted = 0;
    for (size_t i = 0; i < nf; i++)
        for (size_t j = 0; j < nf; j++)
            for (int v = 0; v < 4; v++) { /* a's overflow rule and subnormals varied */
                struct quant_spec a = spec_of(f[i], QUANT_ROUND_NEAREST, QUANT_TIE_EVEN);
                struct quant_spec b = spec_of(f[j], QUANT_ROUND_NEAREST, QUANT_TIE_EVEN);
                int is_float = a.format >= QUANT_FORMAT_FP16 && a.format <= QUANT_FORMAT_E5M2;
                if (v && !is_float) continue;
                if (v & 1) a.overflow = a.overflow ? QUANT_OVERFLOW_SATURATE : QUANT_OVERFLOW_INF;
                if (v & 2) a.subnormals = 0;
                if (!quant_spec_within(&a, &b)) continue;
                accepted++;
                fill_inputs(x, n, &a, 7 + i * nf + j);
                struct quant_key key = {3, 4, 0};
                ck_assert_int_eq(quant_array(&a, x, y, n, key, NULL, NULL), ADAPT_OK);
                for (int mode = 0; mode < 2; mode++) {
                    b.rounding = mode ? QUANT_ROUND_STOCHASTIC : QUANT_ROUND_NEAREST;
                    ck_assert_int_eq(quant_array(&b, y, z, n, key, NULL, NULL), ADAPT_OK);
                    for (size_t k = 0; k < n; k++)
                        if (!tu_same_bits(y[k], z[k]) && !(y[k] != y[k] && z[k] != z[k]))
                            ck_abort_msg("%s (variant %d) within %s: %a -> %a -> %a", f[i], v,
                                         f[j], x[k], y[k], z[k]);
                }
            }
    ck_assert_int_ge(accepted, 30);
    free(x), free(y), free(z);
}
END_TEST

/* float(e,m) against an oracle in double written from the definition: bias 2^(e-1)-1,
 * spacing 2^(max(ex, emin) - m) (2^emin below the normal range without subnormals), ties to
 * even, overflow when the rounded magnitude exceeds (2 - 2^-m) 2^bias. */
static float float_oracle(float x, int e, int m, int subnormals, int ovf_inf, int *sat)
{
    *sat = 0;
    if (x != x) return x;
    int bias = (1 << (e - 1)) - 1, emin = 1 - bias;
    double maxv = (2.0 - ldexp(1.0, -m)) * ldexp(1.0, bias);
    double a = fabs((double)x), y;
    if (isinf(a)) {
        y = a;
    } else if (a == 0.0) {
        y = 0.0;
    } else {
        int ex = ilogb(a);
        double q = ex >= emin ? ldexp(1.0, ex - m) : ldexp(1.0, subnormals ? emin - m : emin);
        y = nearbyint(a / q) * q;
    }
    if (y > maxv) {
        *sat = 1;
        y = ovf_inf ? INFINITY : maxv;
    }
    return copysignf((float)y, x);
}

START_TEST(test_float_formats)
{
    const int em[][2] = {{4, 3}, {5, 2},  {2, 1},  {3, 5},  {8, 7},
                         {8, 1}, {6, 12}, {5, 10}, {7, 22}, {8, 23}};
    const size_t n = 120000;
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    uint8_t *mk = malloc(n);
    ck_assert(x && y && mk);
    for (size_t c = 0; c < sizeof em / sizeof em[0]; c++)
        for (int variant = 0; variant < 4; variant++) {
            struct quant_spec s;
            quant_spec_init(&s, QUANT_FORMAT_FLOAT);
            s.exp_bits = em[c][0];
            s.man_bits = em[c][1];
            s.subnormals = variant & 1;
            s.overflow = variant & 2 ? QUANT_OVERFLOW_INF : QUANT_OVERFLOW_SATURATE;
            fill_inputs(x, n, &s, 500 + c);
            struct quant_key key = {0, 0, 0};
            ck_assert_int_eq(quant_array(&s, x, y, n, key, mk, NULL), ADAPT_OK);
            for (size_t i = 0; i < n; i++) {
                int sat;
                float e =
                    float_oracle(x[i], s.exp_bits, s.man_bits, s.subnormals, variant & 2, &sat);
                if (!(tu_same_bits(y[i], e) && mk[i] == sat))
                    ck_abort_msg("float(%d,%d) sub %d inf %d: x = %a: got %a (mask %d), expected "
                                 "%a (mask %d)",
                                 s.exp_bits, s.man_bits, s.subnormals, variant >> 1, x[i], y[i],
                                 mk[i], e, sat);
            }
        }
    free(x), free(y), free(mk);
}
END_TEST

/* ---------------- float(E,M) with a bias and an all-ones exponent rule ---------------- */

/* An independent reference for float(E,M,bias=B,nan=...,sub=...,ovf=...), written from the
 * definition alone (doc/numerics.md, "Formats defined in the configuration"): every positive code
 * c = (e, m) of the format decoded in double, e = 0: m 2^(1-B-M) (absent without subnormals,
 * except 0), e > 0: (2^M + m) 2^(e-B-M); the finite codes stop at the all-ones exponent (ieee),
 * at the all-ones code (fn) or run through every code (none). */
struct fcodes {
    double v[1 << 13]; /* value of code c, c <= last + 1 (the virtual code after the largest) */
    int present[1 << 13];
    int last;          /* the largest finite code */
    int nan, ovf_inf;
    double pv[1 << 13]; /* the present codes' values, ascending, and their codes (np of them) */
    int pc[1 << 13], np;
};

static double fcode_value(int c, int m_bits, int bias)
{
    int e = c >> m_bits, m = c & ((1 << m_bits) - 1);
    return e == 0 ? ldexp((double)m, 1 - bias - m_bits)
                  : ldexp((double)((1 << m_bits) + m), e - bias - m_bits);
}

static void fcodes_make(struct fcodes *t, int e_bits, int m_bits, int bias, int nan, int sub,
                        int ovf_inf)
{
    int n = 1 << (e_bits + m_bits), top = (1 << e_bits) - 1, c;
    ck_assert_int_le(n, (1 << 13) - 1);
    for (c = 0; c < n; c++) {
        int e = c >> m_bits, m = c & ((1 << m_bits) - 1);
        if (nan == QUANT_NAN_IEEE && e == top) break;                         /* inf, NaN */
        if (nan == QUANT_NAN_FN && e == top && m == (1 << m_bits) - 1) break; /* NaN */
        t->v[c] = fcode_value(c, m_bits, bias);
        t->present[c] = sub || e > 0 || m == 0;
    }
    t->last = c - 1;
    t->v[c] = fcode_value(c, m_bits, bias); /* as if the exponent field went on */
    t->present[c] = 1;
    t->nan = nan;
    t->ovf_inf = ovf_inf;
    t->np = 0;
    for (c = 0; c <= t->last + 1; c++)
        if (t->present[c]) {
            t->pv[t->np] = t->v[c];
            t->pc[t->np++] = c;
        }
}

/* Round to nearest on the codes, ties to the even code (between 0 and the least normal, both
 * even codes without subnormals: to 0); past the largest the virtual next code takes part (as
 * IEEE's unbounded exponent does), and a result on it overflows: to inf (ieee), NaN (fn) or,
 * saturating, the largest. The sign, also of zero, is kept; NaN comes back itself. */
static float fcodes_round(const struct fcodes *t, float x, int *sat)
{
    *sat = 0;
    if (x != x) return x;
    double a = fabs((double)x), y;
    int lo = 0, hi = t->np - 1; /* pv[lo] <= a < pv[hi], or a beyond the virtual code */
    if (a >= t->pv[hi]) {
        lo = hi;
    } else {
        while (hi - lo > 1) {
            int mid = (lo + hi) / 2;
            if (t->pv[mid] <= a) lo = mid;
            else hi = mid;
        }
        double dl = a - t->pv[lo], dh = t->pv[hi] - a;
        int hi_wins = !(t->pc[hi] & 1) && (t->pc[lo] & 1); /* the even code; both even: 0 */
        if (dh < dl || (dh == dl && hi_wins)) lo = hi;
    }
    if (t->pc[lo] > t->last) {
        *sat = 1;
        y = !t->ovf_inf ? t->v[t->last] : t->nan == QUANT_NAN_IEEE ? INFINITY : NAN;
    } else {
        y = t->pv[lo];
    }
    return (float)copysign(y, (double)x);
}

/* quant rounding (nearest, ties to even) of float(E,M,...) equals the reference on every k-th
 * float32 bit pattern (k = 1009; 10007 in quick mode; 1 with QUANT_TEST_FLOAT_FULL=1) and on the
 * midpoints of neighbouring codes and their float neighbours, masks included, for definitions
 * that cover each rule and the ends of the accepted range; the reference's landmarks by hand. */
START_TEST(test_custom_float)
{
    static const struct {
        const char *text;
        int e, m, bias, nan, sub;
        double max; /* the largest finite value, by hand */
    } defs[] = {
        {"float(4,3,nan=fn)", 4, 3, 7, QUANT_NAN_FN, 1, 448.0},        /* OCP E4M3 */
        {"float(5,2)", 5, 2, 15, QUANT_NAN_IEEE, 1, 57344.0},          /* OCP E5M2 */
        {"float(4,3,bias=11)", 4, 3, 11, QUANT_NAN_IEEE, 1, 15.0},     /* 1.875 2^(14-11) */
        {"float(5,2,bias=-20,nan=fn)", 5, 2, -20, QUANT_NAN_FN, 1, 0x1.8p51},
        {"float(2,1,nan=none)", 2, 1, 1, QUANT_NAN_NONE, 1, 6.0},      /* MX FP4 E2M1 */
        {"float(3,2,nan=none)", 3, 2, 3, QUANT_NAN_NONE, 1, 28.0},     /* MX FP6 E3M2 */
        {"float(5,2,sub=0)", 5, 2, 15, QUANT_NAN_IEEE, 0, 57344.0},
        {"float(4,3,bias=-112,nan=fn)", 4, 3, -112, QUANT_NAN_FN, 1, 0x1.cp127}, /* top end */
        {"float(3,4,bias=-121,sub=0)", 3, 4, -121, QUANT_NAN_IEEE, 0, 0x1.fp127},
        {"float(6,4,bias=127)", 6, 4, 127, QUANT_NAN_IEEE, 1, 0x1.fp-65}, /* emin -126: wide */
        {"float(6,4,bias=127,sub=0)", 6, 4, 127, QUANT_NAN_IEEE, 0, 0x1.fp-65},
        {"float(5,3,bias=123)", 5, 3, 123, QUANT_NAN_IEEE, 1, 0x1.ep-93}, /* least step 2^-125 */
        {"float(7,5,bias=63,nan=fn)", 7, 5, 63, QUANT_NAN_FN, 1, 0x1.fp64},
    };
    const char *full = getenv("QUANT_TEST_FLOAT_FULL");
    const uint64_t stride = full && *full == '1' ? 1 : tu_quick() ? 10007 : 1009;
    const size_t blk = 1 << 20;
    float *x = malloc(blk * sizeof *x), *y = malloc(blk * sizeof *y);
    uint8_t *mk = malloc(blk);
    struct fcodes *t = malloc(sizeof *t);
    ck_assert(x && y && mk && t);
    struct quant_key key = {0, 0, 0};
    char buf[QUANT_SPEC_STR_MAX];
    for (size_t d = 0; d < sizeof defs / sizeof defs[0]; d++)
        for (int ovf = 0; ovf < 2; ovf++) {
            if (ovf && defs[d].nan == QUANT_NAN_NONE) continue; /* saturates only */
            struct quant_spec s = spec_of(defs[d].text, QUANT_ROUND_NEAREST, QUANT_TIE_EVEN);
            s.overflow = ovf ? QUANT_OVERFLOW_INF : QUANT_OVERFLOW_SATURATE;
            ck_assert_int_eq(quant_spec_bias(&s), defs[d].bias);
            quant_spec_str(&s, buf, sizeof buf);
            fcodes_make(t, defs[d].e, defs[d].m, defs[d].bias, defs[d].nan, defs[d].sub, ovf);
            ck_assert_msg(t->v[t->last] == defs[d].max, "%s: largest %a, by hand %a", buf,
                          t->v[t->last], defs[d].max);
            /* midpoints of neighbouring present codes (ties), and the floats either side */
            size_t nb = 0;
            for (int c = 0, prev = 0; c <= t->last + 1; c++) {
                if (!t->present[c] || c == 0) continue;
                float mid = (float)((t->v[prev] + t->v[c]) / 2);
                x[nb++] = mid;
                x[nb++] = nextafterf(mid, 0.0f);
                x[nb++] = nextafterf(mid, INFINITY);
                x[nb++] = -(float)t->v[c];
                prev = c;
            }
            for (uint64_t u = 0; u < (1ull << 32);) {
                for (; nb < blk && u < (1ull << 32); nb++, u += stride)
                    x[nb] = quant_u2f((uint32_t)u);
                ck_assert_int_eq(quant_array(&s, x, y, nb, key, mk, NULL), ADAPT_OK);
                for (size_t i = 0; i < nb; i++) {
                    int sat;
                    float e = fcodes_round(t, x[i], &sat);
                    if (!((tu_same_bits(y[i], e) || (y[i] != y[i] && e != e)) && mk[i] == sat))
                        ck_abort_msg("%s: %a -> %a (mask %d), reference %a (mask %d)", buf, x[i],
                                     y[i], mk[i], e, sat);
                }
                nb = 0;
            }
        }
    /* landmarks: {definition, input, output}, each value worked out from the definition */
    static const struct {
        const char *f;
        float in, out;
    } c[] = {
        {"float(2,1,nan=none)", 5.0f, 4.0f},  /* tie between 4 (code 6) and 6 (code 7): even */
        {"float(2,1,nan=none)", 7.0f, 6.0f},  /* past the largest: saturates */
        {"float(2,1,nan=none)", 0.25f, 0.0f}, /* tie between 0 and the subnormal 0.5 */
        {"float(4,3,bias=11)", 15.5f, 15.0f}, /* max 15, next 16: 15.5 is the tie, 15 is odd */
        {"float(4,3,bias=11,ovf=inf)", 15.5f, INFINITY}, /* ... so it overflows */
        {"float(4,3,bias=11)", 0x1p-13f, 0x1p-13f},      /* least subnormal 2^(1-11-3) */
        {"float(4,3,bias=11)", 0x1p-14f, 0.0f},          /* half of it: tie to 0 */
        {"float(4,3,bias=8,nan=fn)", 224.0f, 224.0f},    /* max 1.75 2^(15-8) */
        {"float(4,3,bias=8,nan=fn,ovf=inf)", 240.0f, NAN}, /* the NaN code's value: overflow */
        {"float(5,2,sub=0)", 0x1p-15f, 0.0f},            /* half the least normal 2^-14: 0 */
        {"float(5,2,sub=0)", 0x1.000002p-15f, 0x1p-14f},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        struct quant_spec s = spec_of(c[i].f, QUANT_ROUND_NEAREST, QUANT_TIE_EVEN);
        ck_assert_int_eq(quant_array(&s, &c[i].in, y, 1, key, NULL, NULL), ADAPT_OK);
        ck_assert_msg(tu_same_bits(y[0], c[i].out) || (y[0] != y[0] && c[i].out != c[i].out),
                      "%s(%a) = %a, expected %a", c[i].f, c[i].in, y[0], c[i].out);
    }
    free(x), free(y), free(mk), free(t);
}
END_TEST

/* A definition equal to a built-in rounds as the built-in, bit for bit, masks and counters
 * included, in every mode (stochastic with the same Philox keys): float(4,3,nan=fn) and e4m3,
 * float(5,2,ovf=inf) and e5m2, float(5,10,ovf=inf) and fp16, float(8,7,ovf=inf) and bf16, each
 * with both overflow rules and subnormals on and off. */
START_TEST(test_custom_equals_builtin)
{
    static const char *const pairs[][2] = {{"float(4,3,nan=fn)", "e4m3"},
                                           {"float(5,2,ovf=inf)", "e5m2"},
                                           {"float(5,10,ovf=inf)", "fp16"},
                                           {"float(8,7,ovf=inf)", "bf16"},
                                           {"float(4,3,bias=7,nan=fn,sub=1,ovf=sat)", "e4m3"}};
    const size_t n = tu_quick() ? 50000 : 400000;
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y), *z = malloc(n * sizeof *z);
    uint8_t *m1 = malloc(n), *m2 = malloc(n);
    ck_assert(x && y && z && m1 && m2);
    for (size_t p = 0; p < sizeof pairs / sizeof pairs[0]; p++)
        for (int v = 0; v < 12; v++) {
            int mode = v % 3;
            struct quant_spec a = spec_of(pairs[p][0], mode == 2 ? QUANT_ROUND_STOCHASTIC
                                                                 : QUANT_ROUND_NEAREST,
                                          mode == 1 ? QUANT_TIE_AWAY : QUANT_TIE_EVEN);
            struct quant_spec b = spec_of(pairs[p][1], a.rounding, a.tie);
            ck_assert_int_eq(a.overflow, b.overflow); /* the definitions carry the defaults */
            if (v / 3 & 1) a.overflow = b.overflow = !a.overflow;
            if (v / 6) a.subnormals = b.subnormals = 0;
            fill_inputs(x, n, &b, 900 + p);
            struct quant_key key = {2385, ADAPT_STREAM_QUANT + 3, 17};
            struct quant_stats sa = {0, 0, 0}, sb = {0, 0, 0};
            ck_assert_int_eq(quant_array(&a, x, y, n, key, m1, &sa), ADAPT_OK);
            ck_assert_int_eq(quant_array(&b, x, z, n, key, m2, &sb), ADAPT_OK);
            for (size_t i = 0; i < n; i++)
                if (!tu_same_bits(y[i], z[i]) || m1[i] != m2[i])
                    ck_abort_msg("%s vs %s (variant %d): %a -> %a, built-in %a", pairs[p][0],
                                 pairs[p][1], v, x[i], y[i], z[i]);
            ck_assert(sa.saturated == sb.saturated && sa.flushed == sb.flushed &&
                      sa.zeros == sb.zeros);
            ck_assert_int_eq(quant_spec_within(&a, &b), quant_spec_within(&b, &a));
        }
    free(x), free(y), free(z), free(m1), free(m2);
}
END_TEST

/* Named formats: defined, parsed by name (to the definition, printed canonically), redefined,
 * refused for bad and reserved names, a full table and invalid specs. */
START_TEST(test_named_formats)
{
    struct quant_spec s, t;
    char buf[QUANT_SPEC_STR_MAX];
    ck_assert_int_eq(quant_spec_parse("myfp8", &s), ADAPT_EINVAL); /* not yet defined */
    ck_assert_ptr_nonnull(strstr(adapt_error_message(), "a defined format's name"));
    ck_assert_int_eq(quant_format_lookup("myfp8", &s), ADAPT_ENOENT);
    s = spec_of("float(4,3,bias=8,nan=fn)", QUANT_ROUND_STOCHASTIC, QUANT_TIE_AWAY);
    ck_assert_int_eq(quant_format_define("myfp8", &s), ADAPT_OK);
    ck_assert_int_eq(quant_spec_parse("  myfp8 ", &t), ADAPT_OK);
    ck_assert_str_eq(quant_spec_str(&t, buf, sizeof buf), "float(4,3,bias=8,nan=fn)");
    ck_assert_int_eq(t.rounding, QUANT_ROUND_NEAREST); /* the table holds the format only */
    ck_assert_int_eq(t.tie, QUANT_TIE_EVEN);
    ck_assert_int_eq(quant_spec_parse("myfp8(3)", &t), ADAPT_EINVAL);
    ck_assert_ptr_nonnull(strstr(adapt_error_message(), "takes no parameters"));
    ck_assert_int_eq(quant_spec_parse("MyFp8", &t), ADAPT_EINVAL); /* names are case-sensitive */
    s = spec_of("fixed(8,5)", QUANT_ROUND_NEAREST, QUANT_TIE_EVEN);
    ck_assert_int_eq(quant_format_define("myfp8", &s), ADAPT_OK); /* replaced */
    ck_assert_int_eq(quant_spec_parse("myfp8", &t), ADAPT_OK);
    ck_assert_str_eq(quant_spec_str(&t, buf, sizeof buf), "fixed(8,5)");
    ck_assert_int_eq(quant_format_define("_q8_2", &s), ADAPT_OK);
    ck_assert_int_eq(quant_format_lookup("_q8_2", &t), ADAPT_OK);
    ck_assert_int_eq(t.wl, 8);

    static const char *const bad[][2] = {
        {"e4m3", "taken by a built-in format"}, {"fixed", "taken by a built-in format"},
        {"float", "taken by a built-in format"}, {"mxfp4", "taken by a built-in format"},
        {"plugin", "taken by a built-in format"}, {"float32", "taken by a built-in format"},
        {"fp32", "taken by a built-in format"},  {"8bit", "expected a letter or '_'"},
        {"my-fp8", "expected a letter or '_'"},   {"", "expected a letter or '_'"},
        {"a23456789b123456789c123456789d12", "at most 31 characters"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_int_eq(quant_format_define(bad[i][0], &s), ADAPT_EINVAL);
        ck_assert_msg(strstr(adapt_error_message(), bad[i][1]), "%s: %s", bad[i][0],
                      adapt_error_message());
    }
    ck_assert(quant_format_name_valid("a23456789b123456789c123456789d1")); /* 31 characters */
    quant_spec_init(&s, QUANT_FORMAT_FLOAT);
    s.bias = 300;
    ck_assert_int_eq(quant_format_define("wide", &s), ADAPT_ERANGE);
    ck_assert_int_eq(quant_format_lookup("wide", &t), ADAPT_ENOENT);
    /* the table holds QUANT_FORMAT_NAMED_MAX names; redefining one needs no new entry */
    s = spec_of("fp16", QUANT_ROUND_NEAREST, QUANT_TIE_EVEN);
    for (int i = 2; i < QUANT_FORMAT_NAMED_MAX; i++) {
        snprintf(buf, sizeof buf, "f%d", i);
        ck_assert_int_eq(quant_format_define(buf, &s), ADAPT_OK);
    }
    ck_assert_int_eq(quant_format_define("one_more", &s), ADAPT_ERANGE);
    ck_assert_int_eq(quant_format_define("f2", &s), ADAPT_OK);
}
END_TEST

/* Special values, one by one (the contract in src/quant/quant_impl.h). */
START_TEST(test_special_values)
{
    struct quant_key key = {5, 16, 0};
    struct {
        const char *fmt;
        int saturate; /* float formats: overflow rule */
        float x, y;
        int mask;
    } cases[] = {
        {"fixed(8,4)", 0, NAN, NAN, 0},          /* NaN stays NaN */
        {"fixed(8,4)", 0, INFINITY, 7.9375f, 1}, /* +inf -> range top */
        {"fixed(8,4)", 0, -INFINITY, -8.0f, 1},  /* -inf -> range bottom */
        {"fixed(8,4)", 0, -0.0f, 0.0f, 0},       /* -0 -> +0 */
        {"fixed(8,4)", 0, 1e-40f, 0.0f, 0},      /* subnormal input -> 0 */
        {"fixed(32,31)", 0, 1.0f, 0x1.fffffep-1f,
         1},                                 /* top (2^31-1) 2^-31 is no float: largest below */
        {"fp16", 0, INFINITY, INFINITY, 1},  /* IEEE: inf stays inf, counted */
        {"fp16", 0, 65519.99f, 65504.0f, 0}, /* below max + half ulp */
        {"fp16", 0, 65520.0f, INFINITY, 1},  /* tie at max + half ulp -> even -> inf */
        {"fp16", 1, 65520.0f, 65504.0f, 1},  /* saturate option */
        {"fp16", 1, -INFINITY, -65504.0f, 1},
        {"fp16", 0, -0.0f, -0.0f, 0},         /* float formats keep the sign of zero */
        {"fp16", 0, 0x1p-25f, 0.0f, 0},       /* half the smallest subnormal: tie -> 0 */
        {"fp16", 0, 0x1.8p-25f, 0x1p-24f, 0}, /* above the tie -> 2^-24 */
        {"fp16", 0, 0x1.8p-24f, 0x1p-23f, 0}, /* 1.5 quanta: tie -> 2 (even) */
        {"bf16", 0, NAN, NAN, 0},
        {"bf16", 0, 0x1.ff8p127f, INFINITY, 1}, /* above max bf16 (0x1.fep127) by half ulp */
        {"float(4,3)", 1, 1000.0f, 240.0f, 1},  /* max (2 - 2^-3) 2^7 = 240 */
        {"float(4,3)", 1, INFINITY, 240.0f, 1},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        struct quant_spec s = spec_of(cases[c].fmt, QUANT_ROUND_NEAREST, QUANT_TIE_EVEN);
        if (s.format >= QUANT_FORMAT_FP16)
            s.overflow = cases[c].saturate ? QUANT_OVERFLOW_SATURATE : QUANT_OVERFLOW_INF;
        for (int mode = 0; mode < 2; mode++) {
            float y;
            uint8_t m;
            s.rounding = mode ? QUANT_ROUND_STOCHASTIC : QUANT_ROUND_NEAREST;
            /* stochastic agrees on these: they are on the grid, beyond the range or special
             * (the tie cases are skipped in stochastic mode) */
            if (mode && (c == 7 || c == 8 || c == 9 || c == 12 || c == 13 || c == 14 || c == 16))
                continue;
            ck_assert_int_eq(quant_array(&s, &cases[c].x, &y, 1, key, &m, NULL), ADAPT_OK);
            ck_assert_msg(tu_same_bits(y, cases[c].y) && m == cases[c].mask,
                          "case %zu (%s, %a, mode %d): got %a mask %d", c, cases[c].fmt,
                          cases[c].x, mode, y, m);
        }
    }
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

int main(void)
{
    Suite *su = suite_create("quant");
    TCase *tc = tcase_create("formats");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_spec_parse);
    tcase_add_test(tc, test_philox_generators);
    tcase_add_test(tc, test_fast_equals_ref);
    tcase_add_test(tc, test_fixed_exact);
    tcase_add_test(tc, test_fixed_qpytorch);
    tcase_add_test(tc, test_fp16_ieee);
    tcase_add_test(tc, test_bf16_rne);
    tcase_add_test(tc, test_fp8_ocp);
    tcase_add_test(tc, test_mx_ocp);
    tcase_add_test(tc, test_spec_within);
    tcase_add_test(tc, test_float_formats);
    tcase_add_test(tc, test_custom_float);
    tcase_add_test(tc, test_custom_equals_builtin);
    tcase_add_test(tc, test_named_formats);
    tcase_add_test(tc, test_special_values);
    tcase_add_test(tc, test_sr_unbiased);
    tcase_add_test(tc, test_threads_and_chunks);
    tcase_add_test(tc, test_bfp_hand);
    tcase_add_test(tc, test_muppet_hand);
    tcase_add_test(tc, test_mask_stats);
    tcase_add_test(tc, test_hist_kl);
    tcase_add_test(tc, test_pack);
    tcase_add_test(tc, test_errors);
    tcase_add_test(tc, test_range);
    suite_add_tcase(su, tc);
    return tu_run_suite(su, CK_FORK_GETENV);
}
