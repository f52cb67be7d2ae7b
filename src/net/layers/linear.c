/* src/net/layers/linear.c: fully connected layer, mirroring torch.nn.Linear
 * (y = x W^T + b, weight (out, in), bias (out)). The input is read as flat
 * C*H*W features per sample, as after torch.nn.Flatten. */
#include <limits.h>
#include <stdlib.h>

#include "src/net/layers/layers_impl.h"

struct adapt_linear {
    struct adapt_layer base;
    int in, out;
    int bias;
};

static void linear_forward(struct adapt_layer *l, const struct adapt_exec *ex,
                           const float *const *x, float *y)
{
    struct adapt_linear *f = (struct adapt_linear *)l;
    if (l->arith && adapt_arith_forward(l->arith, NULL, ex->n, f->in, f->out, x[0],
                                        adapt_param_in_use(&l->param[0]),
                                        f->bias ? adapt_param_in_use(&l->param[1]) : NULL, y))
        return;
    if (l->mx) {
        adapt_mx_gemm_forward(l->mx, NULL, ex->n, f->in, f->out, x[0],
                              adapt_param_in_use(&l->param[0]),
                              f->bias ? adapt_param_in_use(&l->param[1]) : NULL, y);
        return;
    }
    adapt_fc_forward(ex->n, f->in, f->out, x[0], adapt_param_in_use(&l->param[0]),
                     f->bias ? adapt_param_in_use(&l->param[1]) : NULL, y);
}

static void linear_backward(struct adapt_layer *l, const struct adapt_exec *ex,
                            const float *const *x, const float *y, const float *dy,
                            float *const *dx, unsigned acc)
{
    struct adapt_linear *f = (struct adapt_linear *)l;
    if (l->arith &&
        adapt_arith_backward(l->arith, NULL, ex->n, f->in, f->out, x[0],
                             adapt_param_in_use(&l->param[0]), dy, l->param[0].grad.data,
                             f->bias ? l->param[1].grad.data : NULL, dx[0], acc & 1u))
        return;
    if (l->mx) {
        adapt_mx_gemm_backward(l->mx, NULL, ex->n, f->in, f->out, x[0], l->param[0].value.data,
                               adapt_param_in_use(&l->param[0]), dy, l->param[0].grad.data,
                               f->bias ? l->param[1].grad.data : NULL, dx[0], acc & 1u);
        return;
    }
    adapt_fc_backward(ex->n, f->in, f->out, x[0], adapt_param_in_use(&l->param[0]), dy,
                      l->param[0].grad.data, f->bias ? l->param[1].grad.data : NULL, dx[0],
                      acc & 1u);
}

static const struct adapt_layer_ops linear_ops = {
    "linear", linear_forward, linear_backward, NULL, NULL, NULL,
};

struct adapt_layer *adapt_linear_create(const char *name, const int in_chw[3], int out, int bias)
{
    struct adapt_linear *f = calloc(1, sizeof *f);
    if (!f) {
        ADAPT_ERROR(ADAPT_ENOMEM, "%s: cannot allocate a linear layer", name ? name : "linear");
        return NULL;
    }
    struct adapt_layer *l = &f->base;
    if (adapt_layer_setup(l, &linear_ops, name, 1, in_chw) != ADAPT_OK) goto free_layer;
    if (out <= 0) {
        ADAPT_ERROR(ADAPT_EINVAL, "%s: output features %d must be positive", name, out);
        goto free_layer;
    }
    if ((int64_t)out * adapt_layer_in_numel(l, 0) > INT_MAX) {
        ADAPT_ERROR(ADAPT_EINVAL, "%s: a weight tensor of %d x %zu elements is more than %d",
                    name, out, adapt_layer_in_numel(l, 0), INT_MAX);
        goto free_layer;
    }
    f->in = (int)adapt_layer_in_numel(l, 0);
    f->out = out;
    f->bias = bias != 0;
    l->out_dim[0] = out;
    l->out_dim[1] = 1;
    l->out_dim[2] = 1;
    int wdim[2] = {out, f->in};
    adapt_layer_param_add(l, "weight", ADAPT_PARAM_WEIGHT, 2, wdim, f->in);
    if (f->bias) adapt_layer_param_add(l, "bias", ADAPT_PARAM_BIAS, 1, &out, f->in);
    l->macs = (int64_t)f->in * out;
    l->is_unit = 1;
    l->mx_gemm = 1;
    return l;
free_layer:
    free(f);
    return NULL;
}
