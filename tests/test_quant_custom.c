/* tests/test_quant_custom.c: the formats a configuration defines, part of tests/test_quant:
 * quant_spec_within by hand and by its promise, float(e,m) against an oracle in double,
 * float(E,M,bias=,nan=,sub=,ovf=) against every code of the format decoded from the definition
 * (doc/numerics.md), the named formats as their float(E,M) equivalents, and special values. */
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

void test_quant_add_custom(TCase *tc)
{
    tcase_add_test(tc, test_spec_within);
    tcase_add_test(tc, test_float_formats);
    tcase_add_test(tc, test_custom_float);
    tcase_add_test(tc, test_custom_equals_builtin);
    tcase_add_test(tc, test_named_formats);
    tcase_add_test(tc, test_special_values);
}
