/* src/base/rng.h: counter-based random numbers (Philox4x32-10).
 *
 * Every random number in adapt-sim is a pure function of (seed, stream,
 * index): results do not depend on the thread count, the CUDA launch shape or
 * the device. The mapping is the one cuRAND uses for curand_init(seed,
 * subsequence = stream, offset = index) followed by one curand():
 *
 *   key     = (seed & 0xffffffff, seed >> 32)
 *   counter = (q & 0xffffffff, q >> 32, stream & 0xffffffff, stream >> 32),  q = index / 4
 *   value   = Philox4x32_10(counter, key)[index % 4]
 *
 * so a CPU loop and a cuRAND kernel given the same (seed, stream, index)
 * produce the same 32 bits. Philox4x32-10 is from Salmon et al., "Parallel
 * random numbers: as easy as 1, 2, 3" (SC'11); known-answer vectors in
 * tests/test_base.c come from the Random123 distribution (kat_vectors).
 *
 * Sequential use (initialisation, shuffles, augmentation) goes through
 * struct adapt_rng, a cursor over the same function:
 *
 *   struct adapt_rng r;
 *   adapt_rng_init(&r, seed, ADAPT_STREAM_INIT);
 *   double u = adapt_rng_uniform(&r);     // [0, 1)
 *
 * Header-only; ISO C11 valid as C++ so nvcc compiles it too.
 */
#ifndef ADAPT_BASE_RNG_H
#define ADAPT_BASE_RNG_H

#include <stdint.h>

#include "src/base/hd.h"

/* Stream identifiers: fixed so that adding a consumer never shifts another's bits. */
enum adapt_stream_id {
    ADAPT_STREAM_INIT = 1,      /* parameter initialisation (stream + layer index) */
    ADAPT_STREAM_SHUFFLE = 2,   /* data order, one draw sequence per epoch */
    ADAPT_STREAM_AUGMENT = 3,   /* crop offsets and flips */
    ADAPT_STREAM_SPLIT = 4,     /* train/validation split */
    ADAPT_STREAM_DROPOUT = 5,   /* dropout masks; higher bits select layer and micro-batch */
    ADAPT_STREAM_QUANT = 16     /* stochastic rounding; higher bits select tensor and step */
};

typedef struct {
    uint32_t v[4];
} adapt_u32x4;

ADAPT_HD ADAPT_INLINE uint32_t adapt_mulhilo32(uint32_t a, uint32_t b, uint32_t *hi)
{
    uint64_t p = (uint64_t)a * (uint64_t)b;
    *hi = (uint32_t)(p >> 32);
    return (uint32_t)p;
}

/* One Philox4x32 block with 10 rounds. */
ADAPT_HD ADAPT_INLINE adapt_u32x4 adapt_philox4x32_10(adapt_u32x4 c, uint32_t k0, uint32_t k1)
{
    int r;
    for (r = 0; r < 10; r++) {
        uint32_t hi0, hi1;
        uint32_t lo0 = adapt_mulhilo32(0xD2511F53u, c.v[0], &hi0);
        uint32_t lo1 = adapt_mulhilo32(0xCD9E8D57u, c.v[2], &hi1);
        adapt_u32x4 o;
        o.v[0] = hi1 ^ c.v[1] ^ k0;
        o.v[1] = lo1;
        o.v[2] = hi0 ^ c.v[3] ^ k1;
        o.v[3] = lo0;
        c = o;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    return c;
}

/* The four 32-bit values for indices 4q .. 4q+3 of (seed, stream). */
ADAPT_HD ADAPT_INLINE adapt_u32x4 adapt_rng_block(uint64_t seed, uint64_t stream, uint64_t q)
{
    adapt_u32x4 c;
    c.v[0] = (uint32_t)q;
    c.v[1] = (uint32_t)(q >> 32);
    c.v[2] = (uint32_t)stream;
    c.v[3] = (uint32_t)(stream >> 32);
    return adapt_philox4x32_10(c, (uint32_t)seed, (uint32_t)(seed >> 32));
}

/* The 32-bit value number `index` of (seed, stream). */
ADAPT_HD ADAPT_INLINE uint32_t adapt_rng_u32_at(uint64_t seed, uint64_t stream, uint64_t index)
{
    return adapt_rng_block(seed, stream, index >> 2).v[index & 3];
}

/* 24-bit uniform in [0, 1), exactly representable in float. */
ADAPT_HD ADAPT_INLINE float adapt_u32_to_unit_float(uint32_t x)
{
    return (float)(x >> 8) * (1.0f / 16777216.0f);
}

/* 53-bit uniform in [0, 1) from two 32-bit values. */
ADAPT_HD ADAPT_INLINE double adapt_u32x2_to_unit_double(uint32_t a, uint32_t b)
{
    uint64_t m = ((uint64_t)(a >> 5) << 26) | (uint64_t)(b >> 6);
    return (double)m * (1.0 / 9007199254740992.0);
}

/* Sequential cursor over one (seed, stream). */
struct adapt_rng {
    uint64_t seed;
    uint64_t stream;
    uint64_t index; /* next value number */
};

ADAPT_HD ADAPT_INLINE void adapt_rng_init(struct adapt_rng *r, uint64_t seed, uint64_t stream)
{
    r->seed = seed;
    r->stream = stream;
    r->index = 0;
}

ADAPT_HD ADAPT_INLINE uint32_t adapt_rng_u32(struct adapt_rng *r)
{
    return adapt_rng_u32_at(r->seed, r->stream, r->index++);
}

/* Uniform double in [0, 1), 53 bits. */
ADAPT_HD ADAPT_INLINE double adapt_rng_uniform(struct adapt_rng *r)
{
    uint32_t a = adapt_rng_u32(r);
    uint32_t b = adapt_rng_u32(r);
    return adapt_u32x2_to_unit_double(a, b);
}

/* Uniform integer in [0, n), n >= 1, without modulo bias (Lemire's method with rejection). */
ADAPT_HD ADAPT_INLINE uint32_t adapt_rng_below(struct adapt_rng *r, uint32_t n)
{
    uint64_t m = (uint64_t)adapt_rng_u32(r) * n;
    uint32_t l = (uint32_t)m;
    if (l < n) {
        uint32_t t = (uint32_t)(-n) % n;
        while (l < t) {
            m = (uint64_t)adapt_rng_u32(r) * n;
            l = (uint32_t)m;
        }
    }
    return (uint32_t)(m >> 32);
}

#endif
