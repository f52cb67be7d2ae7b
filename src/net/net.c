/* src/net/net.c: network container, arenas, forward and backward passes. */
#include "src/net/net.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_cdf.h>

#include "src/base/rng.h"

struct adapt_net *adapt_net_alloc(const char *name, const int in_chw[3], int classes)
{
    struct adapt_net *net = calloc(1, sizeof *net);
    if (!net) {
        ADAPT_ERROR(ADAPT_ENOMEM, "cannot allocate network");
        return NULL;
    }
    snprintf(net->name, sizeof net->name, "%s", name);
    memcpy(net->in_chw, in_chw, sizeof net->in_chw);
    net->classes = classes;
    net->nact = 1;
    net->act_numel = malloc(sizeof(size_t));
    if (!net->act_numel) {
        free(net);
        ADAPT_ERROR(ADAPT_ENOMEM, "cannot allocate network");
        return NULL;
    }
    net->act_numel[0] = (size_t)in_chw[0] * in_chw[1] * in_chw[2];
    return net;
}

void adapt_net_free(struct adapt_net *net)
{
    if (!net) return;
    free(net->desc_file);
    free(net->desc_args);
    free(net->desc_text);
    for (int i = 0; i < net->nnodes; i++) adapt_layer_free(net->nodes[i].layer);
    free(net->nodes);
    free(net->act_numel);
    free(net->act);
    free(net->dact);
    free(net->dact_written);
    free(net->param);
    free(net->unit_node);
    adapt_arena_free(&net->a_param);
    adapt_arena_free(&net->a_grad);
    adapt_arena_free(&net->a_act);
    free(net);
}

const int *adapt_net_act_dim(const struct adapt_net *net, int a)
{
    ADAPT_ASSERT(a >= 0 && a < net->nact);
    return a == 0 ? net->in_chw : net->nodes[a - 1].layer->out_dim;
}

int adapt_net_add(struct adapt_net *net, struct adapt_layer *layer, int in0, int in1)
{
    const int ins[2] = {in0, in1};
    if (layer && layer->nin > 2) {
        ADAPT_ERROR(ADAPT_EINVAL, "layer %s reads %d inputs (adapt_net_add_n)", layer->name,
                    layer->nin);
        adapt_layer_free(layer);
        return -1;
    }
    return adapt_net_add_n(net, layer, ins);
}

int adapt_net_add_n(struct adapt_net *net, struct adapt_layer *layer, const int *ins)
{
    if (!layer) return -1;
    ADAPT_ASSERT(!net->finalized);
    for (int i = 0; i < layer->nin; i++) {
        if (ins[i] < 0 || ins[i] >= net->nact) {
            adapt_layer_free(layer);
            ADAPT_ERROR(ADAPT_EINVAL, "layer %s: input activation %d does not exist", layer->name,
                        ins[i]);
            return -1;
        }
        const int *d = adapt_net_act_dim(net, ins[i]);
        if (memcmp(d, layer->in_dim[i], sizeof(int) * 3) != 0) {
            ADAPT_ERROR(ADAPT_EINVAL,
                        "layer %s: input %d has shape (%d, %d, %d), layer expects (%d, %d, %d)",
                        layer->name, i, d[0], d[1], d[2], layer->in_dim[i][0],
                        layer->in_dim[i][1], layer->in_dim[i][2]);
            adapt_layer_free(layer);
            return -1;
        }
    }
    if (net->nnodes == net->cap_nodes) {
        int cap = net->cap_nodes ? 2 * net->cap_nodes : 16;
        struct adapt_node *nn = realloc(net->nodes, sizeof *nn * (size_t)cap);
        size_t *an = realloc(net->act_numel, sizeof *an * (size_t)(cap + 1));
        if (nn) net->nodes = nn;
        if (an) net->act_numel = an;
        if (!nn || !an) {
            adapt_layer_free(layer);
            ADAPT_ERROR(ADAPT_ENOMEM, "cannot grow network");
            return -1;
        }
        net->cap_nodes = cap;
    }
    layer->node = net->nnodes;
    struct adapt_node *nd = &net->nodes[net->nnodes++];
    nd->layer = layer;
    for (int i = 0; i < ADAPT_LAYER_MAX_IN; i++) nd->in[i] = i < layer->nin ? ins[i] : -1;
    nd->out = net->nact++;
    net->act_numel[nd->out] = adapt_layer_out_numel(layer);
    return nd->out;
}

enum adapt_status adapt_net_finalize(struct adapt_net *net, int n_max)
{
    ADAPT_ASSERT(!net->finalized && net->nnodes > 0 && n_max > 0);
    const struct adapt_layer *last = net->nodes[net->nnodes - 1].layer;
    if (adapt_layer_out_numel(last) != (size_t)net->classes)
        return ADAPT_ERROR(ADAPT_EINVAL, "network %s: last layer has %zu outputs, expected %d",
                           net->name, adapt_layer_out_numel(last), net->classes);
    net->n_max = n_max;

    /* Parameters: count, then bind in state_dict order. */
    size_t pbytes = 0, gbytes = 0;
    int np = 0, nu = 0;
    for (int i = 0; i < net->nnodes; i++) {
        struct adapt_layer *l = net->nodes[i].layer;
        np += l->nparam;
        nu += l->is_unit;
        for (int p = 0; p < l->nparam; p++) {
            pbytes += adapt_arena_take_size(l->param[p].value.numel);
            if (l->param[p].role != ADAPT_PARAM_BUFFER)
                gbytes += adapt_arena_take_size(l->param[p].value.numel);
        }
    }
    net->param = calloc((size_t)np + 1, sizeof *net->param);
    net->unit_node = calloc((size_t)nu + 1, sizeof *net->unit_node);
    net->act = calloc((size_t)net->nact, sizeof *net->act);
    net->dact = calloc((size_t)net->nact, sizeof *net->dact);
    net->dact_written = calloc((size_t)net->nact, 1);
    if (!net->param || !net->unit_node || !net->act || !net->dact || !net->dact_written)
        return ADAPT_ERROR(ADAPT_ENOMEM, "cannot allocate network tables");
    enum adapt_status st;
    if ((st = adapt_arena_alloc(&net->a_param, pbytes)) != ADAPT_OK) return st;
    if ((st = adapt_arena_alloc(&net->a_grad, gbytes)) != ADAPT_OK) return st;
    net->nparam = 0;
    net->nunits = 0;
    net->nparams_trainable = 0;
    net->macs = 0;
    for (int i = 0; i < net->nnodes; i++) {
        struct adapt_layer *l = net->nodes[i].layer;
        net->macs += l->macs;
        if (l->is_unit) net->unit_node[net->nunits++] = i;
        for (int p = 0; p < l->nparam; p++) {
            struct adapt_param *pp = &l->param[p];
            pp->value.data = adapt_arena_take(&net->a_param, pp->value.numel);
            pp->use = pp->value.data;
            if (pp->role != ADAPT_PARAM_BUFFER) {
                pp->grad = pp->value;
                pp->grad.data = adapt_arena_take(&net->a_grad, pp->value.numel);
                net->nparams_trainable += (int64_t)pp->value.numel;
            } else {
                pp->grad.data = NULL;
            }
            net->param[net->nparam++] = pp;
        }
    }

    /* Activations, their gradients, saved state and one shared workspace. */
    size_t abytes = 0;
    size_t ws = 0;
    for (int a = 0; a < net->nact; a++) {
        abytes += adapt_arena_take_size(net->act_numel[a] * (size_t)n_max);
        if (a > 0) abytes += adapt_arena_take_size(net->act_numel[a] * (size_t)n_max);
    }
    for (int i = 0; i < net->nnodes; i++) {
        struct adapt_layer *l = net->nodes[i].layer;
        if (l->ops->saved) abytes += adapt_arena_take_size(l->ops->saved(l, n_max));
        if (l->ops->workspace) {
            size_t w = l->ops->workspace(l, n_max);
            if (w > ws) ws = w;
        }
    }
    abytes += adapt_arena_take_size(ws);
    if ((st = adapt_arena_alloc(&net->a_act, abytes)) != ADAPT_OK) return st;
    for (int a = 0; a < net->nact; a++) {
        net->act[a] = adapt_arena_take(&net->a_act, net->act_numel[a] * (size_t)n_max);
        net->dact[a] = a > 0 ? adapt_arena_take(&net->a_act, net->act_numel[a] * (size_t)n_max)
                             : NULL;
    }
    for (int i = 0; i < net->nnodes; i++) {
        struct adapt_layer *l = net->nodes[i].layer;
        l->saved = l->ops->saved ? adapt_arena_take(&net->a_act, l->ops->saved(l, n_max)) : NULL;
    }
    net->ws = adapt_arena_take(&net->a_act, ws);
    net->ws_floats = ws;
    net->finalized = 1;
    return ADAPT_OK;
}

/* Truncated normal by the inverse CDF: u uniform between Phi(-sqrt 3) and
 * Phi(sqrt 3), x = std * Phi^-1(u). */
static void init_truncnormal(float *w, size_t n, double sd, uint64_t seed, uint64_t stream)
{
    struct adapt_rng r;
    adapt_rng_init(&r, seed, stream);
    const double cut = sqrt(3.0);
    const double plo = gsl_cdf_ugaussian_P(-cut), phi = gsl_cdf_ugaussian_P(cut);
    for (size_t i = 0; i < n; i++) {
        double u = plo + (phi - plo) * adapt_rng_uniform(&r);
        double z = gsl_cdf_ugaussian_Pinv(u);
        if (z > cut) z = cut;
        if (z < -cut) z = -cut;
        w[i] = (float)(sd * z);
    }
}

static void init_uniform(float *w, size_t n, double bound, uint64_t seed, uint64_t stream)
{
    struct adapt_rng r;
    adapt_rng_init(&r, seed, stream);
    for (size_t i = 0; i < n; i++) w[i] = (float)(bound * (2.0 * adapt_rng_uniform(&r) - 1.0));
}

void adapt_net_init_params(struct adapt_net *net, uint64_t seed, double gain)
{
    ADAPT_ASSERT(net->finalized);
    net->rng_seed = seed;
    for (int p = 0; p < net->nparam; p++) {
        struct adapt_param *pp = net->param[p];
        /* Stream per parameter: adding a layer never shifts another's bits. */
        uint64_t stream = ((uint64_t)ADAPT_STREAM_INIT << 32) | (uint64_t)p;
        float *w = pp->value.data;
        size_t n = pp->value.numel;
        if (pp->fan_in > 0 && pp->role == ADAPT_PARAM_WEIGHT)
            init_truncnormal(w, n, sqrt(gain / pp->fan_in), seed, stream);
        else if (pp->fan_in > 0 && pp->role == ADAPT_PARAM_BIAS)
            init_uniform(w, n, 1.0 / sqrt((double)pp->fan_in), seed, stream);
    }
    /* batch-norm: gamma 1, beta 0, running mean 0, running var 1, counter 0 */
    for (int i = 0; i < net->nnodes; i++) adapt_layer_reset_defaults(net->nodes[i].layer);
}

const float *adapt_net_forward(struct adapt_net *net, const float *x, int n, int training)
{
    ADAPT_ASSERT(net->finalized && n > 0 && n <= net->n_max);
    if (x != net->act[0]) memcpy(net->act[0], x, sizeof(float) * net->act_numel[0] * (size_t)n);
    struct adapt_exec ex = {n, training, net->ws, net->rng_seed, net->rng_iter};
    for (int i = 0; i < net->nnodes; i++) {
        struct adapt_node *nd = &net->nodes[i];
        const float *xs[ADAPT_LAYER_MAX_IN] = {NULL};
        for (int k = 0; k < nd->layer->nin; k++) xs[k] = net->act[nd->in[k]];
        if (net->in_hook) net->in_hook(net->hook_ctx, i, xs, n, training, 0);
        nd->layer->ops->forward(nd->layer, &ex, xs, net->act[nd->out]);
        if (net->out_hook) net->out_hook(net->hook_ctx, i, net->act[nd->out], n, training);
    }
    return net->act[net->nact - 1];
}

void adapt_net_backward(struct adapt_net *net, const float *dlogits, int n)
{
    ADAPT_ASSERT(net->finalized && n > 0 && n <= net->n_max);
    int last = net->nact - 1;
    memcpy(net->dact[last], dlogits, sizeof(float) * net->act_numel[last] * (size_t)n);
    memset(net->dact_written, 0, (size_t)net->nact);
    net->dact_written[last] = 1;
    struct adapt_exec ex = {n, 1, net->ws, net->rng_seed, net->rng_iter};
    for (int i = net->nnodes - 1; i >= 0; i--) {
        struct adapt_node *nd = &net->nodes[i];
        struct adapt_layer *l = nd->layer;
        const float *xs[ADAPT_LAYER_MAX_IN] = {NULL};
        float *dxs[ADAPT_LAYER_MAX_IN] = {NULL};
        unsigned acc = 0;
        for (int k = 0; k < l->nin; k++) {
            int a = nd->in[k];
            xs[k] = net->act[a];
            if (a == 0) continue; /* the input needs no gradient */
            dxs[k] = net->dact[a];
            if (net->dact_written[a]) acc |= 1u << k;
            net->dact_written[a] = 1;
        }
        /* straight-through: the gradient of a rounded input goes to the
         * activation unchanged, but the layer sees what it computed with */
        if (net->in_hook) net->in_hook(net->hook_ctx, i, xs, n, 1, 1);
        if (net->dout_hook)
            net->dout_hook(net->hook_ctx, i, net->act[nd->out], net->dact[nd->out], n);
        l->ops->backward(l, &ex, xs, net->act[nd->out], net->dact[nd->out], dxs, acc);
        if (net->grad_hook) net->grad_hook(net->hook_ctx, i, dxs, n);
    }
}

void adapt_net_zero_grad(struct adapt_net *net)
{
    if (net->a_grad.base) memset(net->a_grad.base, 0, net->a_grad.used);
}

void adapt_net_print_summary(const struct adapt_net *net, FILE *f)
{
    fprintf(f, "model %s: input (%d, %d, %d), %d classes\n", net->name, net->in_chw[0],
            net->in_chw[1], net->in_chw[2], net->classes);
    fprintf(f, "  %-22s %-10s %-16s %12s %14s\n", "layer", "kind", "output", "params",
            "MACs/sample");
    int64_t tp = 0, tm = 0;
    for (int i = 0; i < net->nnodes; i++) {
        const struct adapt_layer *l = net->nodes[i].layer;
        int64_t p = 0;
        for (int k = 0; k < l->nparam; k++)
            if (l->param[k].role != ADAPT_PARAM_BUFFER) p += (int64_t)l->param[k].value.numel;
        char shape[48];
        snprintf(shape, sizeof shape, "(%d, %d, %d)", l->out_dim[0], l->out_dim[1], l->out_dim[2]);
        fprintf(f, "  %-22s %-10s %-16s %12lld %14lld\n", l->name, l->ops->kind, shape,
                (long long)p, (long long)l->macs);
        tp += p;
        tm += l->macs;
    }
    fprintf(f, "  total: %lld trainable parameters, %lld MACs per sample (%.2f M)\n",
            (long long)tp, (long long)tm, (double)tm / 1e6);
}
