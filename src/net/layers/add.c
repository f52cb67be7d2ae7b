/* src/net/layers/add.c: residual sum y = x0 + x1 of two inputs of the same
 * shape (the "out + shortcut" of torch BasicBlock.forward); backward passes
 * dy to both inputs (dx[i] = dy, or dx[i] += dy under bit i of acc).
 * elementwise = one addition per output element. */
#include <stdlib.h>
#include <string.h>

#include "src/base/hd.h"
#include "src/net/layers/layers_impl.h"

#define ADD_CHUNK 16384

ADAPT_HOT_CLONES static void add_span(const float *a, const float *b, float *y, size_t n)
{
    for (size_t i = 0; i < n; i++) y[i] = a[i] + b[i];
}

ADAPT_HOT_CLONES static void acc_span(const float *a, float *y, size_t n)
{
    for (size_t i = 0; i < n; i++) y[i] += a[i];
}

static void add_forward(struct adapt_layer *l, const struct adapt_exec *ex, const float *const *x,
                        float *y)
{
    size_t total = (size_t)ex->n * adapt_layer_out_numel(l);
    size_t nchunk = (total + ADD_CHUNK - 1) / ADD_CHUNK;
    const float *a = x[0], *b = x[1];
#pragma omp parallel for if (total >= ADAPT_PAR_MIN) schedule(static)
    for (size_t c = 0; c < nchunk; c++) {
        size_t o = c * ADD_CHUNK, m = total - o < ADD_CHUNK ? total - o : ADD_CHUNK;
        add_span(a + o, b + o, y + o, m);
    }
}

static void add_backward(struct adapt_layer *l, const struct adapt_exec *ex, const float *const *x,
                         const float *y, const float *dy, float *const *dx, unsigned acc)
{
    size_t total = (size_t)ex->n * adapt_layer_out_numel(l);
    size_t nchunk = (total + ADD_CHUNK - 1) / ADD_CHUNK;
    float *d0 = dx[0], *d1 = dx[1];
    int a0 = acc & 1u, a1 = (acc >> 1) & 1u;
#pragma omp parallel for if (total >= ADAPT_PAR_MIN) schedule(static)
    for (size_t c = 0; c < nchunk; c++) {
        size_t o = c * ADD_CHUNK, m = total - o < ADD_CHUNK ? total - o : ADD_CHUNK;
        if (d0 && a0)
            acc_span(dy + o, d0 + o, m);
        else if (d0 && d0 != dy)
            memcpy(d0 + o, dy + o, m * sizeof(float));
        if (d1 && a1)
            acc_span(dy + o, d1 + o, m);
        else if (d1 && d1 != dy)
            memcpy(d1 + o, dy + o, m * sizeof(float));
    }
}

static const struct adapt_layer_ops add_ops = {
    "add", add_forward, add_backward, NULL, NULL, NULL,
};

struct adapt_layer *adapt_add_create(const char *name, const int in_chw[3])
{
    struct adapt_layer *l = calloc(1, sizeof *l);
    if (!l) {
        ADAPT_ERROR(ADAPT_ENOMEM, "%s: cannot allocate an add layer", name ? name : "add");
        return NULL;
    }
    if (adapt_layer_setup(l, &add_ops, name, 2, in_chw) != ADAPT_OK) {
        free(l);
        return NULL;
    }
    l->elementwise = (int64_t)adapt_layer_out_numel(l);
    return l;
}
