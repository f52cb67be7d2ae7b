/* src/net/layers/layer.c: what every layer kind shares: base-field setup,
 * parameter naming (PyTorch state_dict keys "<module>.weight", ...), freeing
 * and the fixed defaults of batch-norm parameters. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "src/net/layers/layers_impl.h"

/* Longest parameter suffix a kind uses (".running_mean"), its dot included. */
#define ADAPT_SUFFIX_MAX 13
_Static_assert(ADAPT_GRAPH_LAYER_NAME_MAX + ADAPT_SUFFIX_MAX < ADAPT_NAME_MAX,
               "a layer name with a parameter suffix fits a parameter name");

enum adapt_status adapt_layer_setup(struct adapt_layer *l, const struct adapt_layer_ops *ops,
                                    const char *name, int nin, const int in_chw[3])
{
    if (!name || strlen(name) > ADAPT_GRAPH_LAYER_NAME_MAX)
        return ADAPT_ERROR(ADAPT_EINVAL, "layer name '%s' is longer than %d characters",
                           name ? name : "(null)", ADAPT_GRAPH_LAYER_NAME_MAX);
    if (!in_chw || in_chw[0] <= 0 || in_chw[1] <= 0 || in_chw[2] <= 0)
        return ADAPT_ERROR(ADAPT_EINVAL, "%s: input shape (%d, %d, %d) must be positive", name,
                           in_chw ? in_chw[0] : 0, in_chw ? in_chw[1] : 0,
                           in_chw ? in_chw[2] : 0);
    /* kinds keep C*H*W and products of its parts in int */
    if ((int64_t)in_chw[0] * in_chw[1] * in_chw[2] > INT_MAX)
        return ADAPT_ERROR(ADAPT_EINVAL, "%s: input shape (%d, %d, %d) has more than %d elements",
                           name, in_chw[0], in_chw[1], in_chw[2], INT_MAX);
    ADAPT_ASSERT(nin >= 1 && nin <= ADAPT_LAYER_MAX_IN);
    l->ops = ops;
    strcpy(l->name, name);
    l->nin = nin;
    for (int i = 0; i < nin; i++)
        for (int d = 0; d < 3; d++) l->in_dim[i][d] = in_chw[d];
    for (int d = 0; d < 3; d++) l->out_dim[d] = in_chw[d];
    return ADAPT_OK;
}

enum adapt_status adapt_layer_param_add(struct adapt_layer *l, const char *suffix,
                                        enum adapt_param_role role, int ndim, const int *dim,
                                        int fan_in)
{
    ADAPT_ASSERT(l->nparam < ADAPT_LAYER_MAX_PARAMS);
    ADAPT_ASSERT(strlen(suffix) + 1 <= ADAPT_SUFFIX_MAX);
    struct adapt_param *p = &l->param[l->nparam++];
    memset(p, 0, sizeof *p);
    strcpy(p->name, l->name);
    strcat(p->name, ".");
    strcat(p->name, suffix);
    p->role = role;
    adapt_tensor_shape(&p->value, ndim, dim);
    adapt_tensor_shape(&p->grad, ndim, dim);
    p->fan_in = fan_in;
    return ADAPT_OK;
}

void adapt_layer_free(struct adapt_layer *l)
{
    if (!l) return;
    if (l->ops && l->ops->destroy) l->ops->destroy(l);
    free(l);
}

void adapt_layer_reset_defaults(struct adapt_layer *l)
{
    if (l->ops == &adapt_batchnorm2d_ops) adapt_batchnorm2d_reset(l);
}
