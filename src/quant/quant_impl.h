/* src/quant/quant_impl.h: the scalar rounding routines, shared by the CPU loops and the CUDA
 * kernels.
 *
 * Purpose: one definition of every rounding rule, shared by the CPU and CUDA code. Each
 * rounder is a pure function of the input value, a prepared parameter block and one 32-bit
 * random value r (ignored by the nearest modes), so CPU and GPU agree bit for bit and results do
 * not depend on threads.
 *
 * Stochastic rounding everywhere means SR(v) = floor(v/step + u) * step with u = r * 2^-32,
 * evaluated exactly: with f = frac(v/step), it rounds up iff r + floor(f * 2^32) >= 2^32 (a
 * 32-bit carry). So P(up) = floor(f * 2^32) / 2^32 and |E[SR(v)] - v| < 2^-32 step.
 *
 * With 16 random bits (QUANT_SR_BITS_16) r has its low 16 bits zero, r = u 2^16 with u in
 * [0, 2^16): it rounds up iff u 2^16 + floor(f 2^32) >= 2^32, iff u >= 2^16 - floor(f 2^16),
 * so SR(v) = floor(v/step + u 2^-16) * step with the fraction f truncated to 16 bits:
 * P(up) = floor(f 2^16) / 2^16 and E[SR(v)] - v lies in (-2^-16 step, 0] (grids: toward -inf;
 * float formats round |v|: toward zero). A fraction of at most 16 bits (bf16 from float32) is
 * rounded without bias. quant_sr_bits_at gives every element's r.
 *
 * Grid formats (fixed, bfp, muppet) are k = round(v * 2^e), k clamped to [kmin, kmax], value
 * k * 2^-e. All of it is done in float with operations that are exact: scaling by powers of two
 * (split into two factors so any e in [-250, 250] works), floorf/rintf, the subtraction
 * t - floorf(t), and the final k * 2^-e (k has at most 24 significant bits unless it is clamped).
 * The bounds are compared as powers of two, so WL up to 32 and FL up to 32 are exact; when
 * 2^(WL-1) - 1 is not a float (WL > 25) the top of the range is the largest float below it,
 * which is itself a grid point.
 *
 * Float formats (fp16, bf16, float(e,m) with any bias and all-ones exponent rule) round |v| to
 * the grid spacing 2^(max(exp(v), emin) - m) (2^emin below the normal range when subnormals are
 * off), then compare with the largest finite value: on the bit pattern when emin is float32's
 * (-126), by exact power-of-two scaling otherwise.
 *
 * Special values (documented contract, tested in tests/test_quant_custom.c):
 *   NaN  -> the same NaN, never counted as saturated.
 *   +-inf-> grid formats: the range end, counted as saturated;
 *           float formats: +-inf when overflow = inf, else the largest finite, counted as
 *           saturated.
 *   grid formats return +0 for a zero result; float formats keep the sign of zero (IEEE).
 *
 *   struct quant_grid g = quant_grid_fixed(8, 4);
 *   uint32_t sat;
 *   float y = quant_grid_round(g, QUANT_MODE_STOCHASTIC, 0, 2.385f, r, &sat);  // 2.375 or 2.4375
 *
 * Non-goals: no loops, no threading, no memory allocation here. ISO C11 that is also valid C++
 * (nvcc compiles it): no designated initialisers, no VLAs, no statement expressions.
 * Ownership: src/quant/ module.
 */
#ifndef QUANT_QUANT_IMPL_H
#define QUANT_QUANT_IMPL_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "src/base/hd.h"
#include "src/base/rng.h"

/* How a value is rounded: chosen once per call, a compile-time constant inside the kernels. */
enum quant_mode {
    QUANT_MODE_NEAREST_EVEN = 0, /* round to nearest, ties to even */
    QUANT_MODE_NEAREST_AWAY = 1, /* round to nearest, ties away from zero */
    QUANT_MODE_STOCHASTIC = 2    /* floor(v/step + u), u = r * 2^-32 */
};

/* Random bits per stochastic rounding: 32 (one Philox value per element) or 16. */
#define QUANT_SR_BITS_32 32
#define QUANT_SR_BITS_16 16

/* 16 random bits for element number i from the 32-bit value v = Philox value number i >> 1:
 * the low half of v for even i, the high half for odd i, as the top 16 bits of r. */
ADAPT_HD ADAPT_INLINE uint32_t quant_sr16_bits(uint32_t v, uint64_t i)
{
    return (i & 1u) ? (v & 0xffff0000u) : (v << 16);
}

/* The random bits r that element number i of (seed, stream) rounds with: Philox value number i
 * (32 bits), or quant_sr16_bits of value number i >> 1 (bits = 16). Every device and kernel
 * gives these bits. */
ADAPT_HD ADAPT_INLINE uint32_t quant_sr_bits_at(uint64_t seed, uint64_t stream, int bits,
                                                uint64_t i)
{
    if (bits == QUANT_SR_BITS_16) return quant_sr16_bits(adapt_rng_u32_at(seed, stream, i >> 1), i);
    return adapt_rng_u32_at(seed, stream, i);
}

/* Grid format parameters: k = round(v * s1 * s2), clamp k to [kmin, kmax], y = k * r1 * r2. */
struct quant_grid {
    float s1, s2;     /* 2^e = s1 * s2, both normal floats */
    float r1, r2;     /* 2^-e = r1 * r2, r1 >= 2^-126 so k * r1 is exact */
    float kmin, kmax; /* integer range as floats: kmax = largest float <= 2^(WL-1) - 1 */
};

/* Float format parameters. Formats whose smallest normal is float32's, 2^-126 ("wide": bf16,
 * float(8,m), any format with bias 127) share float32's grid below it and are rounded on the
 * bit pattern; the others scale |v| by the power of two of its grid spacing (exact, no split
 * needed since every spacing is a normal float: the least, 2^(emin - m), is at least 2^-126)
 * and round in float, except to nearest-even, which rounds the bit pattern from the smallest
 * normal up and scales only below it. */
struct quant_fmt {
    int32_t wide;       /* 1: smallest normal 2^-126 (emin_b == 1), rounded on the bit pattern */
    int32_t man;        /* m */
    int32_t emin_b;     /* float32 biased exponent of the smallest normal of the format */
    int32_t subnormals; /* 1: gradual underflow; 0: the grid below emin is {0, 2^emin} */
    uint32_t maxbits;   /* |bits| of the largest finite value */
    uint32_t ovfbits;   /* |bits| returned on overflow: maxbits or 0x7f800000 (inf) */
};

ADAPT_HD ADAPT_INLINE uint32_t quant_f2u(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

ADAPT_HD ADAPT_INLINE float quant_u2f(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Order-preserving key of a float's bits (larger float, larger key; -0 before +0) and back:
 * atomicMax / atomicMin on keys give exact extremes on a GPU, the CPU reduces them with SIMD. */
ADAPT_HD ADAPT_INLINE uint32_t quant_order_key(uint32_t b)
{
    return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

ADAPT_HD ADAPT_INLINE uint32_t quant_order_unkey(uint32_t k)
{
    return (k & 0x80000000u) ? (k & 0x7fffffffu) : ~k;
}

/* 2^e as a float, e in [-149, 127] (subnormal below -126). */
ADAPT_HD ADAPT_INLINE float quant_pow2f(int e)
{
    /* both forms, then a select (no branch: loops over it vectorise) */
    uint32_t normal = (uint32_t)(e + 127) << 23, sub = 1u << ((e + 149) & 31);
    return quant_u2f(e >= -126 ? normal : sub);
}

/* 2^e as a double, e in [-1022, 1023]. */
ADAPT_HD ADAPT_INLINE double quant_pow2d(int e)
{
    uint64_t u = (uint64_t)(e + 1023) << 52;
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

/* floor(log2 |f|) for finite nonzero f, exact (also for subnormals). */
ADAPT_HD ADAPT_INLINE int quant_ilog2f(float f)
{
    uint32_t a = quant_f2u(f) & 0x7fffffffu;
    int e = (int)(a >> 23);
    /* subnormal: the highest set bit of the mantissa, from the exponent of the mantissa
     * converted exactly (a < 2^23); branch-free, so loops over it vectorise */
    int sub = (int)(quant_f2u((float)a) >> 23) - 127 - 149;
    return e ? e - 127 : sub;
}

/* The largest float whose magnitude does not exceed |d| (rounding toward zero). */
ADAPT_HD ADAPT_INLINE float quant_double_to_float_rz(double d)
{
    float f = (float)d;
    if (fabs((double)f) > fabs(d)) f = quant_u2f(quant_f2u(f) - 1u);
    return f;
}

/* Set up a grid with k = round(v * 2^e) in [-2^(WL-1), 2^(WL-1) - 1] (symmetric: the lower
 * end is -(2^(WL-1) - 1)). wl in [1, 32], e in [-250, 250]. */
ADAPT_HD ADAPT_INLINE struct quant_grid quant_grid_make(int wl, int e, int symmetric)
{
    struct quant_grid g; /* kmin, kmax are nonzero integers for wl >= 2 (fixed wl 1: 0 and -1) */
    int e1 = e > 127 ? 127 : (e < -126 ? -126 : e);
    int e2 = e - e1;
    int n1 = -e > 127 ? 127 : (-e < -126 ? -126 : -e);
    int n2 = -e - n1;
    double top = quant_pow2d(wl - 1) - 1.0; /* exact in double */
    g.s1 = quant_pow2f(e1);
    g.s2 = quant_pow2f(e2);
    g.r1 = quant_pow2f(n1);
    g.r2 = quant_pow2f(n2);
    g.kmax = quant_double_to_float_rz(top);
    g.kmin = symmetric ? -g.kmax : -quant_pow2f(wl - 1);
    return g;
}

/* Grid for `fixed` <WL, FL>: step 2^-FL, range [-2^(WL-FL-1), 2^(WL-FL-1) - 2^-FL]. */
ADAPT_HD ADAPT_INLINE struct quant_grid quant_grid_fixed(int wl, int fl)
{
    return quant_grid_make(wl, fl, 0);
}

/* Grid for `bfp` with word length wl over a block whose largest finite |v| is maxabs:
 * E = floor(log2 maxabs), step 2^(E + 2 - WL), symmetric range +-(2^(WL-1) - 1) steps.
 * An all-zero block uses E = 0 (every value stays 0). */
ADAPT_HD ADAPT_INLINE struct quant_grid quant_grid_bfp(int wl, float maxabs)
{
    int E = maxabs > 0.0f ? quant_ilog2f(maxabs) : 0;
    return quant_grid_make(wl, wl - 2 - E, 1);
}

/* floor(log2(c / m)) for double c > 0 (exact power-of-two scalings only) and float m > 0. */
ADAPT_HD ADAPT_INLINE int quant_floor_log2_ratio(double c, float m)
{
    int ec = 0;
    double mc = c;
    while (mc >= 2.0) { mc *= 0.5; ec++; }
    while (mc < 1.0) { mc *= 2.0; ec--; }
    int em = quant_ilog2f(m);
    double mm = (double)m * quant_pow2d(-em); /* in [1, 2), exact */
    return ec - em - (mc >= mm ? 0 : 1);
}

/* MuPPET scale for word length wl over a tensor with finite max vmax and min vmin:
 * sf = floor(log2 min((2^(WL-1) - 0.5) / max, |(-2^(WL-1) - 0.5) / min|)), each side used only
 * when it has values of that sign (max > 0, min < 0); q = round(v * 2^sf) * 2^-sf with the
 * integer range [-2^(WL-1), 2^(WL-1) - 1]. An all-zero tensor uses sf = 0. */
ADAPT_HD ADAPT_INLINE int quant_muppet_sf(int wl, float vmax, float vmin)
{
    double half = quant_pow2d(wl - 1);
    int have = 0, sf = 0;
    if (vmax > 0.0f) {
        sf = quant_floor_log2_ratio(half - 0.5, vmax);
        have = 1;
    }
    if (vmin < 0.0f) {
        int sb = quant_floor_log2_ratio(half + 0.5, -vmin);
        sf = (!have || sb < sf) ? sb : sf;
    }
    return sf;
}

ADAPT_HD ADAPT_INLINE struct quant_grid quant_grid_muppet(int wl, float vmax, float vmin)
{
    return quant_grid_make(wl, quant_muppet_sf(wl, vmax, vmin), 0);
}

/* 1 when the scale needs two factors (|e| large: bfp and muppet of extreme data). */
ADAPT_HD ADAPT_INLINE int quant_grid_split(struct quant_grid g)
{
    return g.s2 != 1.0f || g.r2 != 1.0f;
}

/* Round one value to a grid. r: random bits (stochastic mode only). split: 0 is allowed when
 * quant_grid_split(g) is 0 (it only skips multiplications by 1). *sat = 1 when the rounded value
 * was outside [kmin, kmax] (never for NaN). No clamping is needed before rounding: +-inf and huge
 * values give integral t (frac 0) and are clamped after; the fraction of a non-finite t is NaN
 * and is limited before its conversion to an integer. The clamp lets NaN through and sat is
 * computed with integer operations, which keeps the vector loops free of extra compares. */
ADAPT_HD ADAPT_INLINE float quant_grid_round(struct quant_grid g, int mode, int split, float v,
                                             uint32_t r, uint32_t *sat)
{
    float t = split ? (v * g.s1) * g.s2 : v * g.s1;
    float k;
    if (mode == QUANT_MODE_STOCHASTIC) {
        float fl = floorf(t);
        float fr = t - fl;
        fr = fr < 0x1.fffffep-1f ? fr : 0x1.fffffep-1f; /* NaN (t = +-inf or NaN) -> below 1 */
        uint32_t f32 = (uint32_t)(fr * 4294967296.0f);  /* floor(frac * 2^32), exact */
        k = r > ~f32 ? fl + 1.0f : fl + 0.0f; /* r + f32 >= 2^32; never -0 */
    } else if (mode == QUANT_MODE_NEAREST_AWAY) {
        float a = fabsf(t);
        float fa = floorf(a);
        k = copysignf(fa + (a - fa >= 0.5f ? 1.0f : 0.0f), t) + 0.0f; /* + 0: -0 -> +0 */
    } else {
        k = rintf(t) + 0.0f; /* default rounding mode: ties to even; + 0: -0 -> +0 */
    }
    float kc = k < g.kmin ? g.kmin : k; /* NaN stays NaN */
    kc = kc > g.kmax ? g.kmax : kc;
    uint32_t d = quant_f2u(k) ^ quant_f2u(kc); /* nonzero iff clamped */
    *sat = d != 0u;
    float y = split ? (kc * g.r1) * g.r2 : kc * g.r1;
    return v != v ? v : y; /* the input NaN itself, on every device */
}

/* 1 for a nonzero (or NaN) value, 0 for +-0, with integer operations. */
ADAPT_HD ADAPT_INLINE uint32_t quant_nonzero(float v)
{
    return (quant_f2u(v) & 0x7fffffffu) != 0u;
}

/* What the all-ones exponent field of a float format holds (struct quant_spec's nan). */
enum quant_nan {
    QUANT_NAN_IEEE = 0, /* reserved: infinities (mantissa 0) and NaN, as IEEE 754 */
    QUANT_NAN_FN,       /* normal numbers, but S.1..1.1..1 is NaN; no infinities (OCP E4M3) */
    QUANT_NAN_NONE      /* normal numbers: every code is finite (MX FP6 / FP4 elements) */
};

/* Set up a float format with e exponent bits, m mantissa bits (1..23) and exponent bias, the
 * all-ones exponent used as `nan` says (enum quant_nan): the smallest normal is 2^(1 - bias);
 * the largest finite value is (2 - 2^-m) 2^(2^e - 2 - bias) (ieee), (2 - 2^(1-m))
 * 2^(2^e - 1 - bias) (fn) or (2 - 2^-m) 2^(2^e - 1 - bias) (none). Overflow gives +-inf (ieee),
 * NaN (fn) or, with overflow_inf = 0 (and always for none), the largest finite value.
 * Precondition (quant_spec_check): the largest value is below 2^128 and either the smallest
 * normal is 2^-126 (rounded on the bit pattern, "wide") or the least subnormal step
 * 2^(1 - bias - m) is at least 2^-126 (the scaled path needs normal float32 spacings). */
ADAPT_HD ADAPT_INLINE struct quant_fmt quant_fmt_make_custom(int e, int m, int bias, int nan,
                                                             int subnormals, int overflow_inf)
{
    struct quant_fmt f;
    int top = (1 << e) - (nan == QUANT_NAN_IEEE ? 2 : 1) - bias; /* exponent of the largest */
    uint32_t mant = (0x7fffffu >> (23 - m)) << (23 - m);          /* m ones */
    if (nan == QUANT_NAN_FN) mant -= 1u << (23 - m);              /* 1..1 is NaN */
    f.emin_b = 128 - bias;
    f.wide = f.emin_b == 1;
    f.man = m;
    f.subnormals = subnormals ? 1 : 0;
    f.maxbits = ((uint32_t)(top + 127) << 23) | mant;
    f.ovfbits = !overflow_inf || nan == QUANT_NAN_NONE ? f.maxbits
                : nan == QUANT_NAN_FN                  ? 0x7fc00000u
                                                       : 0x7f800000u;
    return f;
}

/* Set up a float format with e exponent bits (2..8) and m mantissa bits (1..23); IEEE-style
 * bias 2^(e-1) - 1, the all-ones exponent reserved, so max = (2 - 2^-m) 2^bias. */
ADAPT_HD ADAPT_INLINE struct quant_fmt quant_fmt_make(int e, int m, int subnormals,
                                                      int overflow_inf)
{
    return quant_fmt_make_custom(e, m, (1 << (e - 1)) - 1, QUANT_NAN_IEEE, subnormals,
                                 overflow_inf);
}

/* OCP E4M3 (OCP 8-bit Floating Point Specification, v1.0): bias 7 like float(4,3), but the
 * all-ones exponent holds normal numbers too (mantissa 000..110, up to 1.75 x 2^8 = 448) and
 * S.1111.111 is the only NaN: no infinities. Overflow (after rounding) saturates to +-448, or
 * with overflow_nan gives NaN (the specification's non-saturating mode); +-inf inputs likewise. */
ADAPT_HD ADAPT_INLINE struct quant_fmt quant_fmt_make_e4m3(int subnormals, int overflow_nan)
{
    struct quant_fmt f = quant_fmt_make(4, 3, subnormals, 0);
    f.maxbits = 0x43e00000u; /* 448.0f */
    f.ovfbits = overflow_nan ? 0x7fc00000u : f.maxbits;
    return f;
}

/* ---- OCP Microscaling (MX) block formats (OCP Microscaling Formats Specification v1.0) ----
 * QUANT_MX_BLOCK elements share a scale X = 2^s stored as E8M0 (s in [-127, 127]). Conversion
 * as the specification describes it: s = floor(log2 max|v|) - emax, emax the exponent of the
 * element type's largest normal, raised to -127 when lower; each element is v / X rounded to
 * the element type, normal values clamped at its largest magnitude. A block holding inf or NaN
 * has a NaN scale, so every element reads NaN (as the specification's NaN scale and the
 * reference library, microxcaling, give). The division is exact: v 2^-s never overflows, and
 * where it underflows float32 the exact quotient is below 2^-110 of the element type's least
 * subnormal, which rounds the same (to zero; the stochastic carry is floor(frac 2^32) = 0); the
 * product back, q 2^s, has at most 4 significant bits above 2^-149, so it is exact too. */
#define QUANT_MX_BLOCK 32

struct quant_mx {
    int32_t integer; /* 1: INT8 elements (k 2^-6, k in [-127, 127]) */
    int32_t emax;    /* exponent of the element type's largest normal */
};

/* Element float type with e exponent and m mantissa bits as MX uses it: subnormals, normals
 * clamped. E4M3 (max 448) and E5M2 (max 57344) as in the OCP 8-bit specification; the FP6 and
 * FP4 types have no inf or NaN, their all-ones exponent holds normals: E2M3 max 7.5, E3M2 max
 * 28, E2M1 max 6. */
ADAPT_HD ADAPT_INLINE struct quant_fmt quant_fmt_make_mx(int e, int m)
{
    if (e == 4 && m == 3) return quant_fmt_make_e4m3(1, 0);
    struct quant_fmt f = quant_fmt_make(e, m, 1, 0);
    if (e < 4) { /* exponent field 2^e - 1 is a normal binade: 2^(2^e - 1 - bias) (2 - 2^-m) */
        int bias = (1 << (e - 1)) - 1, top = (1 << e) - 1 - bias;
        f.maxbits = ((uint32_t)(top + 127) << 23) | ((0x7fffffu >> (23 - m)) << (23 - m));
        f.ovfbits = f.maxbits;
    }
    return f;
}

/* The scale exponent s of a block whose largest magnitude has the bits amax (finite; 0 for an
 * all-zero block, which any scale keeps at zero: -127). */
ADAPT_HD ADAPT_INLINE int quant_mx_scale(uint32_t amax, int emax)
{
    int s = amax ? quant_ilog2f(quant_u2f(amax)) - emax : -127;
    return s < -127 ? -127 : s;
}

/* An element of a block with a NaN scale: NaN (the input NaN itself); *sat = 1 for an input that
 * was not NaN. */
ADAPT_HD ADAPT_INLINE float quant_mx_poison(float v, uint32_t *sat)
{
    *sat = v == v;
    return v != v ? v : quant_u2f(0x7fc00000u);
}

/* The INT8 element grid of a block with scale exponent s: step 2^(s - 6), symmetric range. */
ADAPT_HD ADAPT_INLINE struct quant_grid quant_mx_int_grid(int s)
{
    return quant_grid_make(8, 6 - s, 1);
}

/* Round one value to a float format; wide must be f.wide (a compile-time constant in the
 * kernels). Rounds |v| (sign-magnitude, so SR stays unbiased); same contract as
 * quant_grid_round. Ties to even: between 0 and the smallest positive value (no subnormals),
 * 0 wins. */
ADAPT_HD ADAPT_INLINE float quant_fmt_round(struct quant_fmt f, int mode, int wide, float v,
                                            uint32_t r, uint32_t *sat)
{
    uint32_t b = quant_f2u(v);
    uint32_t sign = b & 0x80000000u;
    uint32_t a = b & 0x7fffffffu;
    uint32_t rb;
    if (wide) {
        /* drop the low sh bits of the pattern; a carry moves into the exponent correctly */
        int32_t sh = (a < 0x00800000u && !f.subnormals) ? 23 : 23 - f.man;
        uint32_t lmask = (1u << sh) - 1u;
        uint32_t low = a & lmask;
        uint32_t up;
        if (mode == QUANT_MODE_STOCHASTIC) {
            uint32_t f32 = (low << 8) << (24 - sh); /* floor(frac * 2^32), frac = low / 2^sh */
            up = (uint32_t)(r + f32) < r;
        } else {
            uint32_t half = (1u << sh) >> 1;
            uint32_t tie = mode == QUANT_MODE_NEAREST_AWAY ? 1u : ((a >> sh) & 1u);
            up = (low > half) | ((low == half) & (low != 0u) & tie);
        }
        rb = (a & ~lmask) + (up << sh);
    } else if (mode == QUANT_MODE_NEAREST_EVEN) {
        /* the grid of the branch below without its per-element spacing: from the smallest
         * normal up, ties to even on the bit pattern (a carry moves into the exponent); below
         * it the one spacing 2^(qs - 127) of that range */
        int32_t sh = 23 - f.man;
        uint32_t rn = (a + ((1u << sh) >> 1) - 1u + ((a >> sh) & 1u)) & ~((1u << sh) - 1u);
        int32_t qs = f.emin_b - (f.subnormals ? f.man : 0);
        float ts = quant_u2f(a) * quant_u2f((uint32_t)(254 - qs) << 23);
        uint32_t rs = quant_f2u(rintf(ts) * quant_u2f((uint32_t)qs << 23));
        rb = (int32_t)(a >> 23) >= f.emin_b ? rn : rs;
    } else {
        /* grid spacing 2^(qb - 127): qb = max(E, emin_b) - m (- 0 below emin without subnormals) */
        int32_t E = (int32_t)(a >> 23);
        int32_t Eq = E > f.emin_b ? E : f.emin_b;
        int32_t qb = Eq - ((E >= f.emin_b || f.subnormals) ? f.man : 0);
        float t = quant_u2f(a) * quant_u2f((uint32_t)(254 - qb) << 23); /* |v| / spacing, exact */
        float k;
        if (mode == QUANT_MODE_STOCHASTIC) {
            float fl = floorf(t);
            float fr = t - fl;
            fr = fr < 0x1.fffffep-1f ? fr : 0x1.fffffep-1f; /* NaN (inf input) -> below 1 */
            uint32_t f32 = (uint32_t)(fr * 4294967296.0f);
            k = fl + ((uint32_t)(r + f32) < r ? 1.0f : 0.0f);
        } else if (mode == QUANT_MODE_NEAREST_AWAY) {
            float fl = floorf(t);
            k = fl + (t - fl >= 0.5f ? 1.0f : 0.0f);
        } else {
            k = rintf(t);
        }
        rb = quant_f2u(k * quant_u2f((uint32_t)qb << 23)); /* exact; +inf or NaN for inf input */
    }
    int ovf =
        rb > f.maxbits; /* also the NaN of inf * 0 (m = 1 narrow formats), whatever its sign */
    int nan = a > 0x7f800000u;
    rb = ovf ? f.ovfbits : rb;
    *sat = (uint32_t)(ovf & !nan);
    return nan ? v : quant_u2f(sign | rb);
}

#endif
