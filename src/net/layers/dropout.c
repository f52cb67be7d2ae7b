/* src/net/layers/dropout.c: torch.nn.Dropout(p) and torch.cat((x0, x1), dim=1).
 *
 * Dropout, training: each element is kept with probability 1 - p and scaled
 * by 1 / (1 - p), y = x m / (1 - p); evaluation: y = x. The keep bit of
 * element i of a call is u >= p for u the 24-bit uniform of the counter-based
 * generator (src/base/rng.h) at (run seed, stream, i), stream =
 * ADAPT_STREAM_DROPOUT + 256 node + 2^24 iteration (adapt_exec.rng_*): a
 * pure function of the run's seed, the layer and the micro-batch, so masks
 * do not depend on threads and a resumed run draws the same ones. Backward
 * recomputes the mask: dx = dy m / (1 - p). (PyTorch draws its masks from its
 * own generator, so the masks themselves differ from PyTorch's.)
 * elementwise = one multiplication per element.
 *
 * Concat: the channels of x0 then those of x1 (same H, W); backward hands each
 * input its slice of dy. elementwise = 0 (copies). */
#include <stdlib.h>
#include <string.h>

#include "src/base/rng.h"
#include "src/net/layers/layers_impl.h"

struct adapt_dropout {
    struct adapt_layer base;
    float p;
};

static uint64_t dropout_stream(const struct adapt_layer *l, const struct adapt_exec *ex)
{
    return (uint64_t)ADAPT_STREAM_DROPOUT + ((uint64_t)(l->node & 0xffff) << 8) +
           ((uint64_t)ex->rng_iter << 24);
}

static void dropout_apply(const struct adapt_layer *l, const struct adapt_exec *ex,
                          const float *in, float *out, int acc)
{
    const struct adapt_dropout *d = (const struct adapt_dropout *)l;
    size_t total = (size_t)ex->n * adapt_layer_out_numel(l);
    const uint64_t seed = ex->rng_seed, stream = dropout_stream(l, ex);
    const float scale = 1.0f / (1.0f - d->p), p = d->p;
    size_t nq = (total + 3) / 4;
#pragma omp parallel for if (total >= ADAPT_PAR_MIN) schedule(static)
    for (size_t q = 0; q < nq; q++) {
        adapt_u32x4 r = adapt_rng_block(seed, stream, q);
        for (int k = 0; k < 4 && 4 * q + k < total; k++) {
            size_t i = 4 * q + k;
            float v = adapt_u32_to_unit_float(r.v[k]) >= p ? in[i] * scale : 0.0f;
            out[i] = acc ? out[i] + v : v;
        }
    }
}

static void dropout_forward(struct adapt_layer *l, const struct adapt_exec *ex,
                            const float *const *x, float *y)
{
    const struct adapt_dropout *d = (const struct adapt_dropout *)l;
    if (!ex->training || d->p == 0.0f) {
        if (y != x[0]) memcpy(y, x[0], (size_t)ex->n * adapt_layer_out_numel(l) * sizeof *y);
        return;
    }
    dropout_apply(l, ex, x[0], y, 0);
}

static void dropout_backward(struct adapt_layer *l, const struct adapt_exec *ex,
                             const float *const *x, const float *y, const float *dy,
                             float *const *dx, unsigned acc)
{
    const struct adapt_dropout *d = (const struct adapt_dropout *)l;
    if (!dx[0]) return;
    size_t total = (size_t)ex->n * adapt_layer_out_numel(l);
    if (d->p == 0.0f) {
        if (acc & 1u)
            for (size_t i = 0; i < total; i++) dx[0][i] += dy[i];
        else if (dx[0] != dy)
            memcpy(dx[0], dy, total * sizeof *dy);
        return;
    }
    dropout_apply(l, ex, dy, dx[0], acc & 1u);
}

static const struct adapt_layer_ops dropout_ops = {
    "dropout", dropout_forward, dropout_backward, NULL, NULL, NULL,
};

struct adapt_layer *adapt_dropout_create(const char *name, const int in_chw[3], float p)
{
    if (!(p >= 0.0f && p < 1.0f)) {
        ADAPT_ERROR(ADAPT_EINVAL, "%s: dropout p = %g, expected 0 <= p < 1", name ? name : "?",
                    (double)p);
        return NULL;
    }
    struct adapt_dropout *d = calloc(1, sizeof *d);
    if (!d) {
        ADAPT_ERROR(ADAPT_ENOMEM, "%s: cannot allocate a dropout layer", name ? name : "?");
        return NULL;
    }
    if (adapt_layer_setup(&d->base, &dropout_ops, name, 1, in_chw) != ADAPT_OK) {
        free(d);
        return NULL;
    }
    d->p = d->base.p = p;
    d->base.elementwise = (int64_t)adapt_layer_out_numel(&d->base);
    return &d->base;
}

/* ------------------------------------------------------------------ concat */

static void concat_forward(struct adapt_layer *l, const struct adapt_exec *ex,
                           const float *const *x, float *y)
{
    const size_t n0 = adapt_layer_in_numel(l, 0), n1 = adapt_layer_in_numel(l, 1);
#pragma omp parallel for if ((size_t)ex->n * (n0 + n1) >= ADAPT_PAR_MIN) schedule(static)
    for (int j = 0; j < ex->n; j++) {
        float *yj = y + (size_t)j * (n0 + n1);
        memcpy(yj, x[0] + (size_t)j * n0, n0 * sizeof *y);
        memcpy(yj + n0, x[1] + (size_t)j * n1, n1 * sizeof *y);
    }
}

static void concat_backward(struct adapt_layer *l, const struct adapt_exec *ex,
                            const float *const *x, const float *y, const float *dy,
                            float *const *dx, unsigned acc)
{
    const size_t n[2] = {adapt_layer_in_numel(l, 0), adapt_layer_in_numel(l, 1)};
#pragma omp parallel for if ((size_t)ex->n * (n[0] + n[1]) >= ADAPT_PAR_MIN) schedule(static)
    for (int j = 0; j < ex->n; j++)
        for (int k = 0; k < 2; k++) {
            if (!dx[k]) continue;
            const float *src = dy + (size_t)j * (n[0] + n[1]) + (k ? n[0] : 0);
            float *dst = dx[k] + (size_t)j * n[k];
            if ((acc >> k) & 1u)
                for (size_t i = 0; i < n[k]; i++) dst[i] += src[i];
            else
                memcpy(dst, src, n[k] * sizeof *dst);
        }
}

static const struct adapt_layer_ops concat_ops = {
    "concat", concat_forward, concat_backward, NULL, NULL, NULL,
};

struct adapt_layer *adapt_concat_create(const char *name, const int in0[3], const int in1[3])
{
    if (in0[1] != in1[1] || in0[2] != in1[2]) {
        ADAPT_ERROR(ADAPT_EINVAL, "%s: concat of %dx%dx%d and %dx%dx%d: planes differ",
                    name ? name : "?", in0[0], in0[1], in0[2], in1[0], in1[1], in1[2]);
        return NULL;
    }
    struct adapt_layer *l = calloc(1, sizeof *l);
    if (!l) {
        ADAPT_ERROR(ADAPT_ENOMEM, "%s: cannot allocate a concat layer", name ? name : "?");
        return NULL;
    }
    if (adapt_layer_setup(l, &concat_ops, name, 2, in0) != ADAPT_OK) {
        free(l);
        return NULL;
    }
    memcpy(l->in_dim[1], in1, sizeof l->in_dim[1]);
    l->out_dim[0] = in0[0] + in1[0];
    return l;
}
