/* src/net/layers/act.c: element-wise activations, mirroring torch.nn.ReLU,
 * ReLU6, Tanh, Sigmoid and Hardswish. All but hardswish differentiate from
 * their output y (as PyTorch's threshold_backward, hardtanh_backward,
 * tanh_backward and sigmoid_backward do): relu dx = (y > 0) dy (NaN in y
 * passes dy through, like threshold_backward), relu6 dx = 0 where y <= 0 or
 * y >= 6, else dy (NaN passes too), tanh dx = (1 - y^2) dy, sigmoid
 * dx = y (1 - y) dy; hardswish, like hardswish_backward, from its input x:
 * 0 below -3, (x/3 + 1/2) dy up to 3, dy above.
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
 * (relative 1.9e-7); tests/test_layers.c test_tanh_accuracy asserts <= 3 ulp
 * on a sample of both signs. NaN propagates, tanh(+-inf) = +-1,
 * tanh(-0) = -0.
 * Every loop is branch-free and vectorises (AVX-512 / AVX2 clones).
 *
 * elementwise = one operation per output element. The layers may run in
 * place (y == x, dx == dy): every element is read before it is written
 * (hardswish's backward needs x, so not that one's forward). */
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

/* The kinds' tables (below); a layer's table says which it is. */
static const struct adapt_layer_ops relu_ops, relu6_ops, sigmoid_ops, hardswish_ops, tanh_ops;

/* 0 relu, 1 tanh, 2 relu6, 3 sigmoid, 4 hardswish */
static int act_kind(const struct adapt_layer *l)
{
    return l->ops == &tanh_ops        ? 1
           : l->ops == &relu6_ops     ? 2
           : l->ops == &sigmoid_ops   ? 3
           : l->ops == &hardswish_ops ? 4
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
