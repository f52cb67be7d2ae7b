/* src/net/layers/act_impl.h: the tanh and GELU both engines compute, as ADAPT_HD inline
 * functions (src/base/hd.h): the CPU layer (act.c, in its vectorised loops) and the GPU engine
 * (src/net/cuda/act.cu) compile the same source. act.c's header gives the methods and their
 * error bounds. Branch-free (selects only), no libm call but fabsf and copysignf, so the loops
 * vectorise. C11 that is also valid C++ (it is included by nvcc).
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

/* e^(hi + lo) for hi <= 0 carrying the large part and lo small (|lo| < 2): k = round((hi + lo)
 * / ln 2), r = (hi - k ln2_hi) - k ln2_lo + lo (for the hi this file passes, -x^2 / 2 of a
 * 12-bit x, the first difference is within 2^-24 of exact), e^r = 1 + expm1(r) by tanh's
 * degree-7 polynomial, times 2^k. Below hi + lo = -87 (e^-87 = 1.6e-38) the result is 0 (no
 * subnormals), also for hi = -inf; otherwise NaN propagates. */
ADAPT_HD ADAPT_INLINE float adapt_act_exp_split(float hi, float lo)
{
    const float log2e = 1.44269504088896341f;
    const float ln2_hi = 0.693145751953125f;      /* 15 significant bits: k ln2_hi exact */
    const float ln2_lo = 1.42860682030941723e-6f; /* ln 2 - ln2_hi */
    const float shifter = 12582912.0f; /* 1.5 * 2^23: v + shifter rounds v to an integer */
    const float a = hi + lo;
    const float ac = a < -87.0f ? -87.0f : a; /* keeps k >= -126; NaN stays NaN */
    float v = ac * log2e + shifter;
    float kf = v - shifter;
    uint32_t k = quant_f2u(v) - quant_f2u(shifter); /* the integer kf, two's complement */
    float r = hi - kf * ln2_hi;
    r = (r - kf * ln2_lo) + lo;
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    float er = ((r * r) * p + r) + 1.0f;   /* e^r */
    float s = quant_u2f((k + 127u) << 23); /* 2^k */
    return a < -87.0f || hi < -88.0f ? 0.0f : s * er; /* hi = -inf: lo may be NaN */
}

/* x^2 / 2 = h + l with h exact: x's significand cut to 12 bits (xh) squares exactly. */
ADAPT_HD ADAPT_INLINE void adapt_act_half_square(float x, float *h, float *l)
{
    float a = fabsf(x);
    float xh = quant_u2f(quant_f2u(a) & 0xfffff000u), xl = a - xh;
    *h = 0.5f * (xh * xh);
    *l = 0.5f * (xl * (xh + xh) + xl * xl);
}

/* The standard normal distribution Phi(x) = erfc(-x / sqrt 2) / 2: with z = |x| / sqrt 2 and
 * t = 1 / (1 + |x| / 4) (|x| / 4 is exact, so t carries two roundings), erfc(z) =
 * t e^(-z^2 + P(t)), P(t) = (t - 1) Q(t) a fit of log(erfc(z) / t) + z^2 (which is 0 at t = 1,
 * so near x = 0 P keeps its relative accuracy; t - 1 is exact), Q of degree 9 in t - 1/2, for
 * |x| <= 16.2 (beyond, Phi(-|x|) < 1e-38 flushes to 0; fit and float evaluation within 2.5 u),
 * with z^2 = x^2 / 2 split exactly for the exponential. Phi(x) = erfc / 2 below 0,
 * 1 - erfc / 2 above: no cancellation on either side.
 */
ADAPT_HD ADAPT_INLINE float adapt_act_norm_cdf(float x)
{
    float t = 1.0f / (1.0f + 0.25f * fabsf(x));
    float s = t - 0.5f;
    float q = 0.145965829f;
    q = q * s - 0.271582872f;
    q = q * s - 0.160438016f;
    q = q * s + 0.281437069f;
    q = q * s + 0.279432565f;
    q = q * s - 0.156246349f;
    q = q * s - 0.446908146f;
    q = q * s - 0.157798961f;
    q = q * s + 0.675800502f;
    q = q * s + 1.94761431f;
    float p = (t - 1.0f) * q;
    float h, l;
    adapt_act_half_square(x, &h, &l);
    float ec = t * adapt_act_exp_split(-h, p - l); /* erfc(z) */
    return x < 0.0f ? 0.5f * ec : 1.0f - 0.5f * ec;
}

/* The standard normal density phi(x) = e^(-x^2 / 2) / sqrt(2 pi). */
ADAPT_HD ADAPT_INLINE float adapt_act_norm_pdf(float x)
{
    float h, l;
    adapt_act_half_square(x, &h, &l);
    return adapt_act_exp_split(-h, -l) * 0.398942280401432678f;
}

/* GELU, torch.nn.GELU(): x Phi(x); its gradient Phi(x) + x phi(x) (PyTorch's GeluBackward). */
ADAPT_HD ADAPT_INLINE float adapt_act_gelu(float x) { return x * adapt_act_norm_cdf(x); }
ADAPT_HD ADAPT_INLINE float adapt_act_gelu_grad(float x)
{
    return adapt_act_norm_cdf(x) + x * adapt_act_norm_pdf(x);
}

/* GELU's tanh approximation, torch.nn.GELU(approximate='tanh'), in PyTorch's form:
 * 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), and its gradient
 * 0.5 (1 + th) + 0.5 x (1 - th^2) sqrt(2/pi) (1 + 3 0.044715 x^2). */
ADAPT_HD ADAPT_INLINE float adapt_act_gelu_tanh(float x)
{
    const float beta = 0.797884560802865356f, kappa = 0.044715f;
    float th = adapt_act_tanh(beta * (x + kappa * (x * x * x)));
    return 0.5f * x * (1.0f + th);
}
ADAPT_HD ADAPT_INLINE float adapt_act_gelu_tanh_grad(float x)
{
    const float beta = 0.797884560802865356f, kappa = 0.044715f;
    float x2 = x * x;
    float th = adapt_act_tanh(beta * (x + kappa * (x2 * x)));
    float left = 0.5f * x, right = 1.0f + th;
    return 0.5f * right + left * (1.0f - th * th) * (beta * (1.0f + 3.0f * kappa * x2));
}

#endif
