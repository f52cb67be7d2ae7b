/* src/net/layers/act_impl.h: the tanh both engines compute, as one ADAPT_HD inline function
 * (src/base/hd.h): the CPU layer (act.c, in its vectorised loop) and the GPU engine
 * (src/net/cuda/kernels.cu) compile the same source. act.c's header gives the method and its
 * error bound (2.4 ulp measured). C11 that is also valid C++ (it is included by nvcc).
 */
#ifndef ADAPT_NET_ACT_IMPL_H
#define ADAPT_NET_ACT_IMPL_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "src/base/hd.h"
#include "src/quant/quant_impl.h" /* quant_f2u, quant_u2f: bit casts on both devices */

/* tanh|x| = (e^t - 1) / (e^t - 1 + 2), t = 2|x| clamped to 20, e^t - 1 = 2^k expm1(r) +
 * (2^k - 1) with k = round(t / ln 2), r = t - k ln 2 (Cody-Waite) and a degree-7 expm1
 * polynomial; the sign of x; NaN propagates. */
ADAPT_HD ADAPT_INLINE float adapt_act_tanh(float xi)
{
    const float log2e = 1.44269504088896341f;
    const float ln2_hi = 0.693145751953125f;      /* 15 significant bits: k ln2_hi exact */
    const float ln2_lo = 1.42860682030941723e-6f; /* ln 2 - ln2_hi */
    const float shifter = 12582912.0f; /* 1.5 * 2^23: v + shifter rounds v to an integer */
    float a = fabsf(xi);
    float t = a + a;
    t = t > 20.0f ? 20.0f : t; /* NaN stays NaN */
    float v = t * log2e + shifter;
    float kf = v - shifter;
    uint32_t k = quant_f2u(v) - quant_f2u(shifter); /* the integer kf, 0..29 */
    float r = t - kf * ln2_hi;
    r = r - kf * ln2_lo;
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    float em1r = (r * r) * p + r;                 /* expm1(r) */
    float s = quant_u2f((k + 127u) << 23);    /* 2^k */
    float em1 = s * em1r + (s - 1.0f);
    float th = em1 / (em1 + 2.0f);
    return copysignf(th, xi);
}

#endif
