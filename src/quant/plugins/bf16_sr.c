/* src/quant/plugins/bf16_sr.c: an example rounding plugin (doc/policies.md, "Writing a rounding plugin"):
 * bfloat16 (8 exponent bits, 7 mantissa bits, IEEE-like with subnormals and infinities).
 *
 * The magnitude's bit pattern keeps its top 16 bits after adding the top 16 random bits to the
 * dropped 16: with random bits r it rounds up with probability (dropped part) / 2^16, the
 * stochastic rounding of the built-in bf16 format; with r = 2^31, which adapt-sim passes when
 * the rounding is nearest, it rounds to nearest with ties away from zero. A carry out of the
 * largest finite value gives infinity; NaN comes back unchanged.
 *
 * Build: cc -shared -fPIC -fopenmp-simd -O2 -o bf16_sr.so bf16_sr.c
 * Use:   policy.format = plugin(/path/to/bf16_sr.so)
 */
#include <stdint.h>
#include <string.h>

#pragma omp declare simd
float bf16_sr(float x, uint32_t random_bits)
{
    uint32_t b;
    memcpy(&b, &x, sizeof b);
    uint32_t a = b & 0x7fffffffu;
    uint32_t q = (a + (random_bits >> 16)) & 0xffff0000u;
    q = a > 0x7f800000u ? a : q; /* NaN: unchanged */
    uint32_t o = (b & 0x80000000u) | q;
    float y;
    memcpy(&y, &o, sizeof y);
    return y;
}

/* Storage bits per element, for traces and the performance model. */
int bf16_sr_bits(void) { return 16; }
