/* tests/test_quant_float.c: the standard float formats, part of tests/test_quant: fp16
 * against IEEE 754 (software binary16 and, where the CPU has it, F16C), bf16 round to nearest
 * even, the OCP 8-bit formats (E4M3, E5M2) against their code tables, and the OCP MX formats
 * (shared scale per block) against an oracle. */
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

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>
#define HAVE_X86 1
#endif

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

void test_quant_add_float(TCase *tc)
{
    tcase_add_test(tc, test_fp16_ieee);
    tcase_add_test(tc, test_bf16_rne);
    tcase_add_test(tc, test_fp8_ocp);
    tcase_add_test(tc, test_mx_ocp);
}
