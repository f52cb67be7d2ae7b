/* src/net/layers/flatten.c: torch.nn.Flatten (start_dim 1): (C, H, W) ->
 * (C*H*W, 1, 1) per sample. The data layout is unchanged, so forward and
 * backward are copies (skipped when the network runs the layer in place,
 * y == x or dx == dy). elementwise = 0: no arithmetic. */
#include <stdlib.h>
#include <string.h>

#include "src/net/layers/layers_impl.h"

static void flatten_forward(struct adapt_layer *l, const struct adapt_exec *ex,
                            const float *const *x, float *y)
{
    if (y != x[0]) memcpy(y, x[0], (size_t)ex->n * adapt_layer_out_numel(l) * sizeof(float));
}

static void flatten_backward(struct adapt_layer *l, const struct adapt_exec *ex,
                             const float *const *x, const float *y, const float *dy,
                             float *const *dx, unsigned acc)
{
    float *d = dx[0];
    if (!d) return;
    size_t total = (size_t)ex->n * adapt_layer_out_numel(l);
    if (acc & 1u) {
        ADAPT_ASSERT(d != dy);
        for (size_t i = 0; i < total; i++) d[i] += dy[i];
    } else if (d != dy) {
        memcpy(d, dy, total * sizeof(float));
    }
}

static const struct adapt_layer_ops flatten_ops = {
    "flatten", flatten_forward, flatten_backward, NULL, NULL, NULL,
};

struct adapt_layer *adapt_flatten_create(const char *name, const int in_chw[3])
{
    struct adapt_layer *l = calloc(1, sizeof *l);
    if (!l) {
        ADAPT_ERROR(ADAPT_ENOMEM, "%s: cannot allocate a flatten layer", name ? name : "flatten");
        return NULL;
    }
    if (adapt_layer_setup(l, &flatten_ops, name, 1, in_chw) != ADAPT_OK) {
        free(l);
        return NULL;
    }
    l->out_dim[0] = in_chw[0] * in_chw[1] * in_chw[2];
    l->out_dim[1] = 1;
    l->out_dim[2] = 1;
    return l;
}
