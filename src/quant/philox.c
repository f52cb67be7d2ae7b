/* src/quant/philox.c: Philox4x32-10 values for runs of consecutive element indices.
 *
 * The bits are those of src/base/rng.h (adapt_rng_block): value number i of (seed, stream) is
 * lane i % 4 of the block with counter (i / 4, stream). The vector generators keep one block per
 * 64-bit lane (its 32-bit words in the low halves), so each Philox multiply is one vpmuludq and
 * the high word one shift; four independent groups hide the multiply latency. gcc cannot form
 * vpmuludq from generic vector code in its AVX2 clone, hence explicit target functions with
 * intrinsics and a run-time choice instead of ADAPT_HOT_CLONES here. tests/test_quant.c checks
 * every generator against adapt_rng_block.
 *
 * 16 random bits per element (quant_sr_fill with a plan's sr_bits = 16): the Philox values
 * index / 2 .. (index + n - 1) / 2, half as many, are generated as above and each is spread over
 * two elements (quant_sr16_bits: low half, then high half, each as the top 16 bits of r) by an
 * expansion pass in the same instruction set.
 */
#include <string.h>

#include "src/quant/quant_cpu.h"
#include "src/base/rng.h"
#include "src/base/status.h"

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

typedef void (*philox_blocks_fn)(uint32_t *out, size_t nblocks, uint64_t q0, uint64_t stream,
                                 uint64_t seed);

/* Scalar: blocks q0 .. q0 + nblocks - 1, written as 4 values each. */
static void philox_blocks_scalar(uint32_t *out, size_t nblocks, uint64_t q0, uint64_t stream,
                                 uint64_t seed)
{
    for (size_t b = 0; b < nblocks; b++) {
        adapt_u32x4 v = adapt_rng_block(seed, stream, q0 + b);
        out[4 * b + 0] = v.v[0];
        out[4 * b + 1] = v.v[1];
        out[4 * b + 2] = v.v[2];
        out[4 * b + 3] = v.v[3];
    }
}

#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__) && !defined(ADAPT_NO_CLONES)
#define QUANT_PHILOX_X86 1
#include <immintrin.h>

/* The block-independent parts of rounds 1 and 2. With counter (c0, c1, c2, c3) where only c0
 * varies, round 1 gives x0 = hi(M1 c2) ^ c1 ^ k0 and x1 = lo(M1 c2) (constants), x2 = hi(M0 c0)
 * ^ c3 ^ k1, x3 = lo(M0 c0); round 2 then multiplies the constant x0, so its x2 and x3 are
 * x3(round 1) ^ (hi(M0 x0) ^ k1') and lo(M0 x0). Values are kept in the low halves of 64-bit
 * lanes (garbage above, ignored by vpmuludq). */
struct philox_head {
    uint64_t r1_x3; /* c3 ^ k1: xored into hi(M0 c0) */
    uint64_t r2_x0; /* lo(M1 c2) ^ k0': xored into hi(M1 x2) */
    uint64_t r2_x2; /* hi(M0 x0(round 1)) ^ k1': xored into x3(round 1) = lo(M0 c0) */
    uint64_t r2_x3; /* lo(M0 x0(round 1)) */
};

static struct philox_head philox_head_make(uint64_t q0, uint64_t stream, uint64_t seed)
{
    uint32_t c1 = (uint32_t)(q0 >> 32), c2 = (uint32_t)stream, c3 = (uint32_t)(stream >> 32);
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
    uint64_t p1 = (uint64_t)PHILOX_M1 * c2;
    uint32_t x0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, x1 = (uint32_t)p1; /* after round 1 */
    uint64_t p0 = (uint64_t)PHILOX_M0 * x0;                               /* round 2 */
    struct philox_head h;
    h.r1_x3 = c3 ^ k1;
    h.r2_x0 = x1 ^ (k0 + PHILOX_W0);
    h.r2_x2 = (uint32_t)(p0 >> 32) ^ (k1 + PHILOX_W1);
    h.r2_x3 = (uint32_t)p0;
    return h;
}

/* AVX-512: 4 groups x 8 blocks per iteration; nblocks is rounded up to a multiple of 32 (the
 * caller's buffer has room). The low word of the counter must not wrap inside the call. */
__attribute__((target("avx512f"))) static void philox_blocks_avx512(uint32_t *out, size_t nblocks,
                                                                    uint64_t q0, uint64_t stream,
                                                                    uint64_t seed)
{
    const __m512i m0 = _mm512_set1_epi64(PHILOX_M0);
    const __m512i m1 = _mm512_set1_epi64(PHILOX_M1);
    const __m512i iota = _mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0);
    const __m512i ilo = _mm512_set_epi64(11, 3, 10, 2, 9, 1, 8, 0);
    const __m512i ihi = _mm512_set_epi64(15, 7, 14, 6, 13, 5, 12, 4);
    /* low dwords of two vectors, interleaved: qword i = (a_i, b_i) */
    const __m512i ipair =
        _mm512_set_epi32(30, 14, 28, 12, 26, 10, 24, 8, 22, 6, 20, 4, 18, 2, 16, 0);
    struct philox_head h = philox_head_make(q0, stream, seed);
    const __m512i r1x3 = _mm512_set1_epi64(h.r1_x3), r2x0 = _mm512_set1_epi64(h.r2_x0);
    const __m512i r2x2 = _mm512_set1_epi64(h.r2_x2), r2x3 = _mm512_set1_epi64(h.r2_x3);
    for (size_t b = 0; b < nblocks; b += 32) {
        __m512i x0[4], x1[4], x2[4], x3[4];
        /* rounds 1 and 2 with the parts that do not depend on the block folded into constants */
        for (int g = 0; g < 4; g++) {
            __m512i c0 =
                _mm512_add_epi64(iota, _mm512_set1_epi64((uint32_t)q0 + (uint32_t)(b + 8 * g)));
            __m512i p0 = _mm512_mul_epu32(c0, m0);                    /* round 1 */
            __m512i y2 = _mm512_xor_si512(_mm512_srli_epi64(p0, 32), r1x3);
            __m512i p1 = _mm512_mul_epu32(y2, m1);                    /* round 2 */
            x0[g] = _mm512_xor_si512(_mm512_srli_epi64(p1, 32), r2x0);
            x1[g] = p1;
            x2[g] = _mm512_xor_si512(p0, r2x2);
            x3[g] = r2x3;
        }
        uint32_t k0 = (uint32_t)seed + 2 * PHILOX_W0, k1 = (uint32_t)(seed >> 32) + 2 * PHILOX_W1;
        for (int r = 2; r < 10; r++) {
            const __m512i ka = _mm512_set1_epi64(k0), kb = _mm512_set1_epi64(k1);
            for (int g = 0; g < 4; g++) {
                __m512i p0 = _mm512_mul_epu32(x0[g], m0);
                __m512i p1 = _mm512_mul_epu32(x2[g], m1);
                __m512i y0 = _mm512_ternarylogic_epi64(_mm512_srli_epi64(p1, 32), x1[g], ka, 0x96);
                __m512i y2 = _mm512_ternarylogic_epi64(_mm512_srli_epi64(p0, 32), x3[g], kb, 0x96);
                x0[g] = y0;
                x1[g] = p1;
                x2[g] = y2;
                x3[g] = p0;
            }
            k0 += PHILOX_W0;
            k1 += PHILOX_W1;
        }
        for (int g = 0; g < 4; g++) {
            __m512i a = _mm512_permutex2var_epi32(x0[g], ipair, x1[g]);
            __m512i c = _mm512_permutex2var_epi32(x2[g], ipair, x3[g]);
            _mm512_storeu_si512((void *)(out + 4 * (b + 8 * g)),
                                _mm512_permutex2var_epi64(a, ilo, c));
            _mm512_storeu_si512((void *)(out + 4 * (b + 8 * g) + 16),
                                _mm512_permutex2var_epi64(a, ihi, c));
        }
    }
}

/* AVX2: 4 groups x 4 blocks per iteration; nblocks rounded up to a multiple of 16. */
__attribute__((target("avx2"))) static void philox_blocks_avx2(uint32_t *out, size_t nblocks,
                                                               uint64_t q0, uint64_t stream,
                                                               uint64_t seed)
{
    const __m256i m0 = _mm256_set1_epi64x(PHILOX_M0);
    const __m256i m1 = _mm256_set1_epi64x(PHILOX_M1);
    const __m256i iota = _mm256_set_epi64x(3, 2, 1, 0);
    struct philox_head h = philox_head_make(q0, stream, seed);
    const __m256i r1x3 = _mm256_set1_epi64x(h.r1_x3), r2x0 = _mm256_set1_epi64x(h.r2_x0);
    const __m256i r2x2 = _mm256_set1_epi64x(h.r2_x2), r2x3 = _mm256_set1_epi64x(h.r2_x3);
    for (size_t b = 0; b < nblocks; b += 16) {
        __m256i x0[4], x1[4], x2[4], x3[4];
        for (int g = 0; g < 4; g++) {
            __m256i c0 =
                _mm256_add_epi64(iota, _mm256_set1_epi64x((uint32_t)q0 + (uint32_t)(b + 4 * g)));
            __m256i p0 = _mm256_mul_epu32(c0, m0);
            __m256i y2 = _mm256_xor_si256(_mm256_srli_epi64(p0, 32), r1x3);
            __m256i p1 = _mm256_mul_epu32(y2, m1);
            x0[g] = _mm256_xor_si256(_mm256_srli_epi64(p1, 32), r2x0);
            x1[g] = p1;
            x2[g] = _mm256_xor_si256(p0, r2x2);
            x3[g] = r2x3;
        }
        uint32_t k0 = (uint32_t)seed + 2 * PHILOX_W0, k1 = (uint32_t)(seed >> 32) + 2 * PHILOX_W1;
        for (int r = 2; r < 10; r++) {
            const __m256i ka = _mm256_set1_epi64x(k0), kb = _mm256_set1_epi64x(k1);
            for (int g = 0; g < 4; g++) {
                __m256i p0 = _mm256_mul_epu32(x0[g], m0);
                __m256i p1 = _mm256_mul_epu32(x2[g], m1);
                __m256i y0 =
                    _mm256_xor_si256(_mm256_xor_si256(_mm256_srli_epi64(p1, 32), x1[g]), ka);
                __m256i y2 =
                    _mm256_xor_si256(_mm256_xor_si256(_mm256_srli_epi64(p0, 32), x3[g]), kb);
                x0[g] = y0;
                x1[g] = p1;
                x2[g] = y2;
                x3[g] = p0;
            }
            k0 += PHILOX_W0;
            k1 += PHILOX_W1;
        }
        for (int g = 0; g < 4; g++) {
            __m256i a = _mm256_blend_epi32(x0[g], _mm256_slli_epi64(x1[g], 32), 0xAA);
            __m256i c = _mm256_blend_epi32(x2[g], _mm256_slli_epi64(x3[g], 32), 0xAA);
            __m256i lo = _mm256_unpacklo_epi64(a, c); /* blocks 0, 2 */
            __m256i hi = _mm256_unpackhi_epi64(a, c); /* blocks 1, 3 */
            _mm256_storeu_si256((__m256i *)(out + 4 * (b + 4 * g)),
                                _mm256_permute2x128_si256(lo, hi, 0x20));
            _mm256_storeu_si256((__m256i *)(out + 4 * (b + 4 * g) + 8),
                                _mm256_permute2x128_si256(lo, hi, 0x31));
        }
    }
}

/* 16-bit expansion: out[2k] = v[k] << 16, out[2k + 1] = v[k] & 0xffff0000 for k < m (whole
 * vectors: out has room for the rounding up, v is read up to it; both are piece buffers). */
__attribute__((target("avx512f"))) static void sr16_expand_avx512(uint32_t *out,
                                                                  const uint32_t *v, size_t m)
{
    const __m512i hi = _mm512_set1_epi32((int)0xffff0000u);
    const __m512i ilo = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    const __m512i ihi =
        _mm512_set_epi32(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8);
    for (size_t k = 0; k < m; k += 16) {
        __m512i x = _mm512_loadu_si512((const void *)(v + k));
        __m512i a = _mm512_slli_epi32(x, 16), b = _mm512_and_si512(x, hi);
        _mm512_storeu_si512((void *)(out + 2 * k), _mm512_permutex2var_epi32(a, ilo, b));
        _mm512_storeu_si512((void *)(out + 2 * k + 16), _mm512_permutex2var_epi32(a, ihi, b));
    }
}

__attribute__((target("avx2"))) static void sr16_expand_avx2(uint32_t *out, const uint32_t *v,
                                                             size_t m)
{
    const __m256i hi = _mm256_set1_epi32((int)0xffff0000u);
    for (size_t k = 0; k < m; k += 8) {
        __m256i x = _mm256_loadu_si256((const __m256i *)(v + k));
        __m256i a = _mm256_slli_epi32(x, 16), b = _mm256_and_si256(x, hi);
        __m256i lo = _mm256_unpacklo_epi32(a, b); /* values 0, 1 | 4, 5 */
        __m256i up = _mm256_unpackhi_epi32(a, b); /* values 2, 3 | 6, 7 */
        _mm256_storeu_si256((__m256i *)(out + 2 * k), _mm256_permute2x128_si256(lo, up, 0x20));
        _mm256_storeu_si256((__m256i *)(out + 2 * k + 8),
                            _mm256_permute2x128_si256(lo, up, 0x31));
    }
}
#endif

static void sr16_expand_scalar(uint32_t *out, const uint32_t *v, size_t m)
{
    for (size_t k = 0; k < m; k++) {
        out[2 * k] = quant_sr16_bits(v[k], 0);
        out[2 * k + 1] = quant_sr16_bits(v[k], 1);
    }
}

/* Generator by number: 0 scalar, 1 AVX2, 2 AVX-512; NULL when this CPU lacks it. */
static philox_blocks_fn philox_impl(int isa, size_t *group)
{
    *group = 1;
    if (isa == QUANT_ISA_SCALAR) return philox_blocks_scalar;
#ifdef QUANT_PHILOX_X86
    __builtin_cpu_init();
    if (isa == QUANT_ISA_AVX2 && __builtin_cpu_supports("avx2")) {
        *group = 16;
        return philox_blocks_avx2;
    }
    if (isa == QUANT_ISA_AVX512 && __builtin_cpu_supports("avx512f")) {
        *group = 32;
        return philox_blocks_avx512;
    }
#endif
    return NULL;
}

int quant_philox_best_isa(void)
{
    size_t g;
    if (philox_impl(QUANT_ISA_AVX512, &g)) return QUANT_ISA_AVX512;
    if (philox_impl(QUANT_ISA_AVX2, &g)) return QUANT_ISA_AVX2;
    return QUANT_ISA_SCALAR;
}

const char *quant_philox_isa_name(int isa)
{
    return isa == QUANT_ISA_AVX512 ? "avx512" : isa == QUANT_ISA_AVX2 ? "avx2" : "scalar";
}

const uint32_t *quant_philox_fill_isa(int isa, uint32_t *buf, uint64_t seed, uint64_t stream,
                                      uint64_t index, size_t n)
{
    size_t group;
    philox_blocks_fn fn = philox_impl(isa, &group);
    if (!fn || n == 0) return fn ? buf : NULL;
    ADAPT_ASSERT(n <= QUANT_PIECE);
    uint64_t q0 = index >> 2;
    size_t nb = (size_t)(((index + n - 1) >> 2) - q0 + 1);
    size_t nbr = (nb + group - 1) / group * group;
    /* the vector generators keep the counter's high word fixed: no wrap of the low word */
    if ((uint64_t)(uint32_t)q0 + nbr > 0x100000000ull) {
        fn = philox_blocks_scalar;
        nbr = nb;
    }
    fn(buf, nbr, q0, stream, seed);
    return buf + (index & 3);
}

const uint32_t *quant_philox_fill(uint32_t *buf, uint64_t seed, uint64_t stream, uint64_t index,
                                  size_t n)
{
    return quant_philox_fill_isa(quant_philox_best_isa(), buf, seed, stream, index, n);
}

const uint32_t *quant_sr_fill_isa(int isa, int bits, uint32_t *buf, uint64_t seed,
                                  uint64_t stream, uint64_t index, size_t n)
{
    if (bits != QUANT_SR_BITS_16) return quant_philox_fill_isa(isa, buf, seed, stream, index, n);
    size_t group;
    if (!philox_impl(isa, &group)) return NULL;
    if (n == 0) return buf;
    ADAPT_ASSERT(n <= QUANT_PIECE);
    /* values index / 2 .. (index + n - 1) / 2: m <= QUANT_PIECE / 2 + 1 of them */
    uint64_t h0 = index >> 1;
    size_t m = (size_t)(((index + n - 1) >> 1) - h0 + 1);
    uint32_t half[QUANT_PIECE_BUF] __attribute__((aligned(64)));
    const uint32_t *v = quant_philox_fill_isa(isa, half, seed, stream, h0, m);
    /* the expansion rounds m up to 16 values: 2 m + 31 <= QUANT_PIECE + 33 outputs, read from
     * v + 15 at most past m, inside half (the generator wrote whole groups there) */
    switch (isa) {
#ifdef QUANT_PHILOX_X86
    case QUANT_ISA_AVX512: sr16_expand_avx512(buf, v, m); break;
    case QUANT_ISA_AVX2: sr16_expand_avx2(buf, v, m); break;
#endif
    default: sr16_expand_scalar(buf, v, m); break;
    }
    return buf + (index & 1);
}

static const uint32_t *sr_reused; /* quant_sr_bits_reuse: NULL but in adapt-bench quant */

void quant_sr_bits_reuse(const uint32_t *bits)
{
    sr_reused = bits;
}

const uint32_t *quant_sr_fill(uint32_t *buf, const struct quant_plan *p, uint64_t index, size_t n)
{
    if (ADAPT_UNLIKELY(sr_reused != NULL)) return sr_reused;
    return quant_sr_fill_isa(quant_philox_best_isa(), p->sr_bits, buf, p->seed, p->stream, index,
                             n);
}
