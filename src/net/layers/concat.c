/* src/net/layers/concat.c: torch.cat((x0, x1, ...), dim=1), the channels of 2 to
 * ADAPT_LAYER_MAX_IN inputs of the same plane (H, W), in input order.
 *
 * Per sample the output is the inputs' (C_i, H, W) blocks one after the other; backward hands
 * each input its block of dy, adding where bit i of acc is set and skipping inputs whose dx is
 * NULL. Parallel over samples (each thread owns the samples it copies). elementwise = 0
 * (copies). */
#include <stdlib.h>
#include <string.h>

#include "src/net/layers/layers_impl.h"

static void concat_forward(struct adapt_layer *l, const struct adapt_exec *ex,
                           const float *const *x, float *y)
{
    const size_t out = adapt_layer_out_numel(l);
#pragma omp parallel for if ((size_t)ex->n * out >= ADAPT_PAR_MIN) schedule(static)
    for (int j = 0; j < ex->n; j++) {
        float *yj = y + (size_t)j * out;
        for (int k = 0; k < l->nin; k++) {
            const size_t m = adapt_layer_in_numel(l, k);
            memcpy(yj, x[k] + (size_t)j * m, m * sizeof *y);
            yj += m;
        }
    }
}

static void concat_backward(struct adapt_layer *l, const struct adapt_exec *ex,
                            const float *const *x, const float *y, const float *dy,
                            float *const *dx, unsigned acc)
{
    const size_t out = adapt_layer_out_numel(l);
#pragma omp parallel for if ((size_t)ex->n * out >= ADAPT_PAR_MIN) schedule(static)
    for (int j = 0; j < ex->n; j++) {
        const float *src = dy + (size_t)j * out;
        for (int k = 0; k < l->nin; k++) {
            const size_t m = adapt_layer_in_numel(l, k);
            if (dx[k]) {
                float *dst = dx[k] + (size_t)j * m;
                if ((acc >> k) & 1u)
                    for (size_t i = 0; i < m; i++) dst[i] += src[i];
                else
                    memcpy(dst, src, m * sizeof *dst);
            }
            src += m;
        }
    }
}

static const struct adapt_layer_ops concat_ops = {
    "concat", concat_forward, concat_backward, NULL, NULL, NULL,
};

struct adapt_layer *adapt_concat_n_create(const char *name, int nin, const int (*in_chw)[3])
{
    if (nin < 2 || nin > ADAPT_LAYER_MAX_IN) {
        ADAPT_ERROR(ADAPT_EINVAL, "%s: concat of %d inputs (2 to %d)", name ? name : "?", nin,
                    ADAPT_LAYER_MAX_IN);
        return NULL;
    }
    int c = 0;
    for (int k = 0; k < nin; k++) {
        const int *d = in_chw[k];
        if (d[1] != in_chw[0][1] || d[2] != in_chw[0][2]) {
            ADAPT_ERROR(ADAPT_EINVAL, "%s: concat of %dx%dx%d (input 0) and %dx%dx%d (input %d): "
                        "planes differ",
                        name ? name : "?", in_chw[0][0], in_chw[0][1], in_chw[0][2], d[0], d[1],
                        d[2], k);
            return NULL;
        }
        if (d[0] <= 0 || c > (1 << 30) - d[0]) {
            ADAPT_ERROR(ADAPT_EINVAL, "%s: concat input %d has %d channels", name ? name : "?",
                        k, d[0]);
            return NULL;
        }
        c += d[0];
    }
    struct adapt_layer *l = calloc(1, sizeof *l);
    if (!l) {
        ADAPT_ERROR(ADAPT_ENOMEM, "%s: cannot allocate a concat layer", name ? name : "?");
        return NULL;
    }
    if (adapt_layer_setup(l, &concat_ops, name, nin, in_chw[0]) != ADAPT_OK) {
        free(l);
        return NULL;
    }
    for (int k = 1; k < nin; k++) memcpy(l->in_dim[k], in_chw[k], sizeof l->in_dim[k]);
    l->out_dim[0] = c;
    return l;
}

struct adapt_layer *adapt_concat_create(const char *name, const int in0[3], const int in1[3])
{
    const int in[2][3] = {{in0[0], in0[1], in0[2]}, {in1[0], in1[1], in1[2]}};
    return adapt_concat_n_create(name, 2, in);
}
