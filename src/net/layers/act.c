/* src/net/layers/act.c: element-wise activations, mirroring torch.nn.ReLU,
 * ReLU6, Tanh, Sigmoid, Hardswish and GELU (GELU() and GELU(approximate='tanh')).
 * relu, relu6, tanh and sigmoid differentiate from their output y (as PyTorch's
 * threshold_backward, hardtanh_backward, tanh_backward and sigmoid_backward do):
 * relu dx = (y > 0) dy (NaN in y passes dy through, like threshold_backward), relu6
 * dx = 0 where y <= 0 or y >= 6, else dy (NaN passes too), tanh dx = (1 - y^2) dy, sigmoid
 * dx = y (1 - y) dy; hardswish, like hardswish_backward, from its input x:
 * 0 below -3, (x/3 + 1/2) dy up to 3, dy above; gelu from x too, as PyTorch's
 * GeluBackward: dx = (Phi(x) + x phi(x)) dy, and for the tanh form PyTorch's expression
 * (act_impl.h).
 *
 * GELU is x Phi(x) with the normal distribution Phi computed as erfc(-x / sqrt 2) / 2 without
 * libm (act_impl.h: a fitted polynomial in t = 1 / (1 + |x|/4), an exponential by tanh's
 * reduction, x^2 / 2 split exactly). Measured on every 5th float of [-14, 14] against erfc()
 * and exp() in double, in the baseline and the AVX2 clone: Phi within 7.0 ulp, phi within
 * 2.3 ulp, gelu within 7.0 ulp and its gradient within 6.2 ulp of |Phi| + |x phi| (it cancels
 * for negative x), wherever Phi is a normal float; below x = -13.09 Phi flushes to 0 (gelu -0).
 * The error comes mostly from the rounding of t, which the polynomial amplifies about twice.
 * PyTorch forms 0.5 x (1 + erf(x / sqrt 2)), which cancels for negative x (at x = -5 its value
 * is 4% off); this one keeps its relative accuracy there. tests/test_layers_act.c
 * test_gelu_accuracy asserts 8 ulp on a sample of both signs. GELU(-inf) = NaN,
 * GELU(inf) = inf, as PyTorch. The tanh form uses the tanh below.
 *
 * tanh is computed without libm (glibc's tanhf is scalar and slow): with
 * t = 2|x| clamped to 20 (tanh(10) rounds to 1 in float), k = round(t/ln 2)
 * and r = t - k ln 2 (|r| <= ln 2 / 2, Cody-Waite split of ln 2),
 *   e^t - 1 = 2^k expm1(r) + (2^k - 1),  expm1(r) = r + r^2 (1/2! + r/3! + ... + r^5/7!)
 *   tanh|x| = (e^t - 1) / (e^t - 1 + 2),
 * and the sign of x. The expm1 form has no cancellation for small |x| (the
 * result stays accurate relative to x down to subnormals). The Taylor
 * remainder of expm1 on |r| <= ln 2 / 2 is below |r|^8 / 8! <= 1.8e-8 |expm1(r)|
 * (0.3 ulp); the roundings of the remaining steps (one each for the scaling
 * sum, the denominator and the division) bring the maximum error, measured
 * over every 7th float in [0, 12] against tanh() in double, to 2.4 ulp
 * (relative 1.9e-7); tests/test_layers_act.c test_tanh_accuracy asserts <= 3 ulp
 * on a sample of both signs. NaN propagates, tanh(+-inf) = +-1,
 * tanh(-0) = -0.
 * Every loop is branch-free and vectorises (AVX-512 / AVX2 clones).
 *
 * elementwise = one operation per output element. The layers may run in
 * place (y == x, dx == dy): every element is read before it is written
 * (hardswish's and gelu's backward need x, so not those forwards). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/hd.h"
#include "src/net/layers/act_impl.h"
#include "src/net/layers/layers_impl.h"

/* Floats per task of the element-wise loops (64 KiB). */
#define ACT_CHUNK 16384

ADAPT_HOT_CLONES static void tanh_span(const float *x, float *y, size_t n)
{
    for (size_t i = 0; i < n; i++) y[i] = adapt_act_tanh(x[i]);
}

ADAPT_HOT_CLONES static void tanh_back_span(const float *y, const float *dy, float *dx, size_t n,
                                            int acc)
{
    if (acc)
        for (size_t i = 0; i < n; i++) dx[i] += (1.0f - y[i] * y[i]) * dy[i];
    else
        for (size_t i = 0; i < n; i++) dx[i] = (1.0f - y[i] * y[i]) * dy[i];
}

ADAPT_HOT_CLONES static void relu_span(const float *x, float *y, size_t n)
{
    for (size_t i = 0; i < n; i++) y[i] = x[i] < 0.0f ? 0.0f : x[i];
}

ADAPT_HOT_CLONES static void relu6_span(const float *x, float *y, size_t n)
{
    for (size_t i = 0; i < n; i++) y[i] = x[i] < 0.0f ? 0.0f : x[i] > 6.0f ? 6.0f : x[i];
}

/* PyTorch's hardtanh_backward: 0 where y <= 0 or y >= 6, else dy (NaN passes dy through) */
ADAPT_HOT_CLONES static void relu6_back_span(const float *y, const float *dy, float *dx, size_t n,
                                             int acc)
{
    if (acc)
        for (size_t i = 0; i < n; i++) dx[i] += y[i] <= 0.0f || y[i] >= 6.0f ? 0.0f : dy[i];
    else
        for (size_t i = 0; i < n; i++) dx[i] = y[i] <= 0.0f || y[i] >= 6.0f ? 0.0f : dy[i];
}

ADAPT_HOT_CLONES static void relu_back_span(const float *y, const float *dy, float *dx, size_t n,
                                            int acc)
{
    if (acc)
        for (size_t i = 0; i < n; i++) dx[i] += y[i] <= 0.0f ? 0.0f : dy[i];
    else
        for (size_t i = 0; i < n; i++) dx[i] = y[i] <= 0.0f ? 0.0f : dy[i];
}

/* sigmoid: 1 / (1 + e^-x), through e^-|x| so that neither tail cancels (libm expf) */
ADAPT_HOT_CLONES static void sigmoid_span(const float *x, float *y, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float e = expf(-fabsf(x[i]));
        float s = 1.0f / (1.0f + e);
        y[i] = x[i] >= 0.0f ? s : e * s;
    }
}

ADAPT_HOT_CLONES static void sigmoid_back_span(const float *y, const float *dy, float *dx,
                                               size_t n, int acc)
{
    if (acc)
        for (size_t i = 0; i < n; i++) dx[i] += dy[i] * y[i] * (1.0f - y[i]);
    else
        for (size_t i = 0; i < n; i++) dx[i] = dy[i] * y[i] * (1.0f - y[i]);
}

/* hardswish: x relu6(x + 3) / 6; its gradient (PyTorch's hardswish_backward) reads x */
ADAPT_HOT_CLONES static void hardswish_span(const float *x, float *y, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float t = x[i] + 3.0f;
        t = t < 0.0f ? 0.0f : t > 6.0f ? 6.0f : t;
        y[i] = x[i] * t / 6.0f;
    }
}

ADAPT_HOT_CLONES static void hardswish_back_span(const float *x, const float *dy, float *dx,
                                                 size_t n, int acc)
{
    for (size_t i = 0; i < n; i++) {
        float g = x[i] < -3.0f ? 0.0f : x[i] <= 3.0f ? dy[i] * (x[i] / 3.0f + 0.5f) : dy[i];
        dx[i] = acc ? dx[i] + g : g;
    }
}

/* gelu: x Phi(x) (act_impl.h); its gradient reads x */
ADAPT_HOT_CLONES static void gelu_span(const float *x, float *y, size_t n)
{
    for (size_t i = 0; i < n; i++) y[i] = adapt_act_gelu(x[i]);
}

ADAPT_HOT_CLONES static void gelu_back_span(const float *x, const float *dy, float *dx, size_t n,
                                            int acc)
{
    if (acc)
        for (size_t i = 0; i < n; i++) dx[i] += adapt_act_gelu_grad(x[i]) * dy[i];
    else
        for (size_t i = 0; i < n; i++) dx[i] = adapt_act_gelu_grad(x[i]) * dy[i];
}

ADAPT_HOT_CLONES static void gelu_tanh_span(const float *x, float *y, size_t n)
{
    for (size_t i = 0; i < n; i++) y[i] = adapt_act_gelu_tanh(x[i]);
}

ADAPT_HOT_CLONES static void gelu_tanh_back_span(const float *x, const float *dy, float *dx,
                                                 size_t n, int acc)
{
    if (acc)
        for (size_t i = 0; i < n; i++) dx[i] += adapt_act_gelu_tanh_grad(x[i]) * dy[i];
    else
        for (size_t i = 0; i < n; i++) dx[i] = adapt_act_gelu_tanh_grad(x[i]) * dy[i];
}

/* The kinds' tables (below); a layer's table says which it is. */
static const struct adapt_layer_ops relu_ops, relu6_ops, sigmoid_ops, hardswish_ops, tanh_ops,
    gelu_ops;

/* 0 relu, 1 tanh, 2 relu6, 3 sigmoid, 4 hardswish, 5 gelu, 6 gelu (tanh form) */
static int act_kind(const struct adapt_layer *l)
{
    return l->ops == &tanh_ops        ? 1
           : l->ops == &relu6_ops     ? 2
           : l->ops == &sigmoid_ops   ? 3
           : l->ops == &hardswish_ops ? 4
           : l->ops == &gelu_ops      ? (l->approximate ? 6 : 5)
                                      : 0;
}

static void act_forward(struct adapt_layer *l, const struct adapt_exec *ex, const float *const *x,
                        float *y)
{
    size_t total = (size_t)ex->n * adapt_layer_out_numel(l);
    size_t nchunk = (total + ACT_CHUNK - 1) / ACT_CHUNK;
    int kind = act_kind(l);
    const float *xs = x[0];
#pragma omp parallel for if (total >= ADAPT_PAR_MIN) schedule(static)
    for (size_t c = 0; c < nchunk; c++) {
        size_t o = c * ACT_CHUNK, m = total - o < ACT_CHUNK ? total - o : ACT_CHUNK;
        if (kind == 1)
            tanh_span(xs + o, y + o, m);
        else if (kind == 3)
            sigmoid_span(xs + o, y + o, m);
        else if (kind == 4)
            hardswish_span(xs + o, y + o, m);
        else if (kind == 5)
            gelu_span(xs + o, y + o, m);
        else if (kind == 6)
            gelu_tanh_span(xs + o, y + o, m);
        else if (kind == 2)
            relu6_span(xs + o, y + o, m);
        else
            relu_span(xs + o, y + o, m);
    }
}

static void act_backward(struct adapt_layer *l, const struct adapt_exec *ex, const float *const *x,
                         const float *y, const float *dy, float *const *dx, unsigned acc)
{
    float *d = dx[0];
    if (!d) return;
    size_t total = (size_t)ex->n * adapt_layer_out_numel(l);
    size_t nchunk = (total + ACT_CHUNK - 1) / ACT_CHUNK;
    int kind = act_kind(l), a = acc & 1u;
#pragma omp parallel for if (total >= ADAPT_PAR_MIN) schedule(static)
    for (size_t c = 0; c < nchunk; c++) {
        size_t o = c * ACT_CHUNK, m = total - o < ACT_CHUNK ? total - o : ACT_CHUNK;
        if (kind == 1)
            tanh_back_span(y + o, dy + o, d + o, m, a);
        else if (kind == 3)
            sigmoid_back_span(y + o, dy + o, d + o, m, a);
        else if (kind == 4)
            hardswish_back_span(x[0] + o, dy + o, d + o, m, a);
        else if (kind == 5)
            gelu_back_span(x[0] + o, dy + o, d + o, m, a);
        else if (kind == 6)
            gelu_tanh_back_span(x[0] + o, dy + o, d + o, m, a);
        else if (kind == 2)
            relu6_back_span(y + o, dy + o, d + o, m, a);
        else
            relu_back_span(y + o, dy + o, d + o, m, a);
    }
}

static const struct adapt_layer_ops relu_ops = {
    "relu", act_forward, act_backward, NULL, NULL, NULL,
};
static const struct adapt_layer_ops relu6_ops = {
    "relu6", act_forward, act_backward, NULL, NULL, NULL,
};
static const struct adapt_layer_ops sigmoid_ops = {
    "sigmoid", act_forward, act_backward, NULL, NULL, NULL,
};
static const struct adapt_layer_ops hardswish_ops = {
    "hardswish", act_forward, act_backward, NULL, NULL, NULL,
};
static const struct adapt_layer_ops tanh_ops = {
    "tanh", act_forward, act_backward, NULL, NULL, NULL,
};
static const struct adapt_layer_ops gelu_ops = {
    "gelu", act_forward, act_backward, NULL, NULL, NULL,
};

static struct adapt_layer *act_create(const struct adapt_layer_ops *ops, const char *name,
                                      const int in_chw[3])
{
    struct adapt_layer *l = calloc(1, sizeof *l);
    if (!l) {
        ADAPT_ERROR(ADAPT_ENOMEM, "%s: cannot allocate a %s layer", name ? name : "?", ops->kind);
        return NULL;
    }
    if (adapt_layer_setup(l, ops, name, 1, in_chw) != ADAPT_OK) {
        free(l);
        return NULL;
    }
    l->elementwise = (int64_t)adapt_layer_out_numel(l);
    return l;
}

struct adapt_layer *adapt_relu_create(const char *name, const int in_chw[3])
{
    return act_create(&relu_ops, name, in_chw);
}

struct adapt_layer *adapt_relu6_create(const char *name, const int in_chw[3])
{
    return act_create(&relu6_ops, name, in_chw);
}

struct adapt_layer *adapt_sigmoid_create(const char *name, const int in_chw[3])
{
    return act_create(&sigmoid_ops, name, in_chw);
}

struct adapt_layer *adapt_hardswish_create(const char *name, const int in_chw[3])
{
    return act_create(&hardswish_ops, name, in_chw);
}

struct adapt_layer *adapt_tanh_create(const char *name, const int in_chw[3])
{
    return act_create(&tanh_ops, name, in_chw);
}

struct adapt_layer *adapt_gelu_create(const char *name, const int in_chw[3], int approximate)
{
    struct adapt_layer *l = act_create(&gelu_ops, name, in_chw);
    if (l) l->approximate = approximate != 0; /* act_kind tells the forms apart by it */
    return l;
}
