/* src/net/models.c: networks built from model descriptions (src/graph, doc/model-format.md).
 *
 * Each node of the resolved graph becomes one layer of the engine, in the same order, with
 * the node's name (the PyTorch module path, so state_dict keys follow), reading activation 0
 * for the network input and activation j + 1 for node j.
 */
#include <stdio.h>
#include <string.h>

#include "src/base/fileio.h"
#include "src/net/net.h"

_Static_assert(ADAPT_GRAPH_MAX_IN <= ADAPT_LAYER_MAX_IN, "a graph node's inputs fit a layer");

static struct adapt_layer *make_layer(const struct adapt_graph_node *n)
{
    const int *x = n->in_dim[0];
    switch (n->kind) {
    case ADAPT_GRAPH_CONV2D:
        if (n->groups > 1 || n->dilation > 1)
            return adapt_gconv2d_create(n->name, x, n->out, n->k, n->stride, n->pad, n->groups,
                                        n->dilation, n->bias);
        return adapt_conv2d_create(n->name, x, n->out, n->k, n->stride, n->pad, n->bias);
    case ADAPT_GRAPH_LINEAR: return adapt_linear_create(n->name, x, n->out, n->bias);
    case ADAPT_GRAPH_RELU: return adapt_relu_create(n->name, x);
    case ADAPT_GRAPH_RELU6: return adapt_relu6_create(n->name, x);
    case ADAPT_GRAPH_TANH: return adapt_tanh_create(n->name, x);
    case ADAPT_GRAPH_SIGMOID: return adapt_sigmoid_create(n->name, x);
    case ADAPT_GRAPH_HARDSWISH: return adapt_hardswish_create(n->name, x);
    case ADAPT_GRAPH_GELU: return adapt_gelu_create(n->name, x, n->approximate);
    case ADAPT_GRAPH_DROPOUT: return adapt_dropout_create(n->name, x, (float)n->p);
    case ADAPT_GRAPH_CONCAT: return adapt_concat_n_create(n->name, n->n_in, n->in_dim);
    case ADAPT_GRAPH_MAXPOOL2D:
        return adapt_maxpool2d_pad_create(n->name, x, n->k, n->stride, n->pad);
    case ADAPT_GRAPH_AVGPOOL2D:
        return adapt_avgpool2d_pad_create(n->name, x, n->k, n->stride, n->pad,
                                          n->count_include_pad);
    case ADAPT_GRAPH_BATCHNORM2D:
        return adapt_batchnorm2d_create(n->name, x, (float)n->eps, (float)n->momentum);
    case ADAPT_GRAPH_FLATTEN: return adapt_flatten_create(n->name, x);
    case ADAPT_GRAPH_ADD: return adapt_add_create(n->name, x);
    default: break;
    }
    ADAPT_ERROR(ADAPT_EINVAL, "%s: layer kind %s has no engine layer", n->name,
                adapt_graph_kind_name(n->kind));
    return NULL;
}

struct adapt_net *adapt_net_from_graph(const struct adapt_graph *g)
{
    struct adapt_net *net = adapt_net_alloc(g->name, g->in_chw, g->classes);
    if (!net) return NULL;
    if (!(net->desc_file = adapt_strdup(g->file)) || !(net->desc_args = adapt_strdup(g->args)) ||
        !(net->desc_text = adapt_strdup(g->text))) {
        adapt_net_free(net);
        ADAPT_ERROR(ADAPT_ENOMEM, "cannot allocate network");
        return NULL;
    }
    for (int i = 0; i < g->n_nodes; i++) {
        const struct adapt_graph_node *n = &g->nodes[i];
        int ins[ADAPT_GRAPH_MAX_IN];
        for (int k = 0; k < n->n_in; k++) ins[k] = n->in[k] + 1;
        int a = adapt_net_add_n(net, make_layer(n), ins);
        if (a != i + 1) {
            adapt_net_free(net);
            return NULL;
        }
    }
    return net;
}

struct adapt_net *adapt_model_build(const char *name, int classes)
{
    struct adapt_graph *g;
    if (adapt_graph_load(&g, name, classes, NULL) != ADAPT_OK) return NULL;
    struct adapt_net *net = adapt_net_from_graph(g);
    adapt_graph_free(g);
    return net;
}
