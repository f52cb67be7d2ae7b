/* tests/plugins/bad_simd.c: a rounding plugin whose vector variant disagrees with its scalar
 * function, which adapt-sim must refuse on load (tests/test_plugin.c). The scalar function is the
 * identity; the SSE2 variant (x86-64 Vector Function ABI name, 4 lanes, the only variant, so
 * every x86-64 CPU checks it) flips the lowest bit of lane 2 of every group of four. */
#include <stdint.h>

float bad_simd(float x, uint32_t random_bits)
{
    (void)random_bits;
    return x;
}

#if defined(__x86_64__)
typedef float bad_v4f __attribute__((vector_size(16)));
typedef uint32_t bad_v4u __attribute__((vector_size(16)));

bad_v4f _ZGVbN4vv_bad_simd(bad_v4f x, bad_v4u random_bits);
bad_v4f _ZGVbN4vv_bad_simd(bad_v4f x, bad_v4u random_bits)
{
    (void)random_bits;
    bad_v4u b = (bad_v4u)x;
    b[2] ^= 1u;
    return (bad_v4f)b;
}
#endif
