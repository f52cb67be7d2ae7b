/* src/quant/accum_impl.h: the arithmetic the accumulator models' reference (accum.c) and fast
 * path (accum_fast.c) share, so that both compute the models with the same operations: the grid
 * test of an operand, the two's-complement wrap, the round-to-odd sum and the one rounding of
 * an integer sum to float32. Private to src/quant; the library is built with
 * -ffp-contract=off, which odd_sum's TwoSum needs. */
#ifndef ADAPT_QUANT_ACCUM_IMPL_H
#define ADAPT_QUANT_ACCUM_IMPL_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "src/quant/quant.h"

/* v = k 2^-fl with k an integer, |k| < 2^62: 0 and k in *out; 1 when v is not on that grid. */
static inline int grid_int(float v, int fl, int64_t *out)
{
    double t = ldexp((double)v, fl); /* exact: a float times a power of two */
    if (!isfinite(t) || t != floor(t) || fabs(t) >= 0x1p62) return 1;
    *out = (int64_t)t;
    return 0;
}

/* x reduced into [-2^(bits-1), 2^(bits-1)) modulo 2^bits (two's complement wrap). */
static inline __int128 wrap_to(__int128 x, int bits)
{
    const __int128 m = (__int128)1 << bits, h = m >> 1;
    __int128 r = x % m;
    if (r < 0) r += m;
    return r >= h ? r - m : r;
}

/* The float of a + b (doubles) in round-to-odd: the exact sum truncated toward zero, its last
 * bit set when inexact. Rounding that float to a format of at most 22 significant bits (two
 * fewer than float32's 24) gives the format's nearest value to the exact sum, without a double
 * rounding. The sum's rounding error e comes from Knuth's TwoSum (exact, without FMA
 * contraction: -ffp-contract=off for this library), so a + b = s + e exactly. */
static inline float odd_sum(double a, double b)
{
    const double s = a + b, bb = s - a, e = (a - (s - bb)) + (b - bb);
    float f = (float)s;
    if (!isfinite(f)) return f;
    const double d = (double)f - s; /* exact (Sterbenz: f within a factor 2 of s) */
    if (d == e) return f;          /* f is the exact sum */
    if (s > 0 ? d > e : d < e) f = nextafterf(f, 0.0f); /* |f| above the exact sum */
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    u |= 1u;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* The float32 nearest (ties to even) to x 2^-fl, x an integer below 2^125 in magnitude: x to a
 * double in round-to-odd, then one rounding to float (53 bits >= 24 + 2). */
static inline float float_of(__int128 x, int fl)
{
    double d = (double)x;
    const __int128 di = (__int128)d; /* d is an integer here (exact below 2^53) */
    if (di != x) {
        if (x > 0 ? di > x : di < x) d = nextafter(d, 0.0); /* |d| above |x| */
        uint64_t u;
        memcpy(&u, &d, sizeof u);
        u |= 1u;
        memcpy(&d, &u, sizeof d);
    }
    return (float)ldexp(d, -fl);
}

/* One addition of an int(A) register (the models of doc/numerics.md, "Accumulators"): the
 * product prod at 2^-pfl moved to the register's binary point afl (shifted left exactly, or
 * right with the low bits dropped toward minus infinity, as an arithmetic shift drops them, or
 * with align nearest rounded: half the register's last place added first, ties up), added to
 * s, and a sum outside the register wrapped or saturated, counted in *ov. */
static inline __int128 acc_int_add(const struct quant_acc *acc, __int128 s, __int128 prod, int pfl,
                                   int afl, uint64_t *ov)
{
    if (afl >= pfl)
        prod *= (__int128)1 << (afl - pfl);
    else {
        const __int128 d = (__int128)1 << (pfl - afl);
        if (acc->align == QUANT_ACC_ALIGN_NEAREST) prod += d / 2;
        __int128 q = prod / d;
        if (prod % d != 0 && prod < 0) q -= 1;
        prod = q;
    }
    __int128 t = s + prod;
    const __int128 hi = ((__int128)1 << (acc->bits - 1)) - 1, lo = -hi - 1;
    if (t > hi || t < lo) {
        (*ov)++;
        t = acc->overflow == QUANT_ACC_WRAP ? wrap_to(t, acc->bits) : (t > hi ? hi : lo);
    }
    return t;
}

#endif
