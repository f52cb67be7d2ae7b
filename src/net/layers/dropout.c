/* src/net/layers/dropout.c: torch.nn.Dropout(p).
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
 * elementwise = one multiplication per element. */
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
