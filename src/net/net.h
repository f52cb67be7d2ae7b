/* src/net/net.h: a network as a list of layer nodes over numbered activations.
 *
 * Activation 0 is the network input (N, C, H, W); node i reads one or more
 * (a concat: up to ADAPT_LAYER_MAX_IN) earlier activations and writes
 * activation i + 1. The last activation is the
 * logits (N, classes). This covers the sequential models and residual blocks
 * (an add node reads two activations). The network owns its layers and four
 * arenas: parameters, gradients, optimizer state (sized by the optimizer) and
 * activations (forward values, their gradients, layers' saved state,
 * workspace). Nothing is allocated after adapt_net_finalize.
 *
 * Non-goals: general graphs, in-place layer fusion, devices.
 *
 *   struct adapt_net *net = adapt_net_alloc("lenet5", in_chw, 10);
 *   int a = adapt_net_add(net, adapt_conv2d_create("0", in_chw, 6, 5, 1, 0, 1), 0, -1);
 *   ...
 *   adapt_net_finalize(net, 256);                      // batch capacity
 *   adapt_net_init_params(net, seed, 0.5);
 *   const float *logits = adapt_net_forward(net, x, n, 1);
 *   ... loss and dlogits ...
 *   adapt_net_backward(net, dlogits, n);
 *   adapt_net_free(net);
 *
 * Parameter order (adapt_net_param) is the PyTorch state_dict order: layers
 * in network order, each layer's weight, bias, then buffers.
 */
#ifndef ADAPT_NET_H
#define ADAPT_NET_H

#include <stdint.h>
#include <stdio.h>

#include "src/graph/graph.h"
#include "src/net/layer.h"

struct adapt_node {
    struct adapt_layer *layer;
    int in[ADAPT_LAYER_MAX_IN]; /* activation ids read */
    int out;                    /* activation id written (node index + 1) */
};

struct adapt_net {
    char name[ADAPT_GRAPH_NAME_MAX];
    /* the model description it was built from (owned; NULL for networks built by hand) */
    char *desc_file, *desc_args, *desc_text;
    int in_chw[3];
    int classes;
    int n_max; /* batch capacity, set by finalize */
    /* random layers (dropout): the seed (adapt_net_init_params sets it) and the micro-batch
     * counter the training loop sets before each forward */
    uint64_t rng_seed;
    int64_t rng_iter;

    int nnodes, cap_nodes;
    struct adapt_node *nodes;

    int nact;            /* nnodes + 1 */
    size_t *act_numel;   /* per-sample floats of each activation */
    float **act;         /* act[a]: (n_max, act_numel[a]); act[0] is the input */
    float **dact;        /* gradients; dact[0] is NULL */

    int nparam;          /* all parameters and buffers, state_dict order */
    struct adapt_param **param;
    int nunits;          /* conv/linear precision units in network order */
    int *unit_node;      /* node index of each unit */

    int64_t nparams_trainable;
    int64_t macs;        /* forward MACs per sample */

    struct adapt_arena a_param, a_grad, a_act;
    float *ws;           /* largest workspace of any layer at n_max */
    size_t ws_floats;
    int finalized;
    /* gradients received so far by each activation during backward */
    unsigned char *dact_written;
    /* Optional quantization hooks (src/policy/precision.h installs them):
     * in_hook may replace a node's input pointers (forward and backward:
     * the backward must see the inputs the forward computed with);
     * out_hook may round a node's output in place after its forward;
     * dout_hook may change the gradient of a node's output (dy) before the
     * node's backward, given the output values y the forward produced. */
    void *hook_ctx;
    void (*in_hook)(void *ctx, int node, const float **xs, int n, int training, int backward);
    void (*out_hook)(void *ctx, int node, float *y, int n, int training);
    void (*dout_hook)(void *ctx, int node, const float *y, float *dy, int n);
    /* grad_hook may round, after a node's backward, the gradients it wrote
     * for its inputs (dxs[k], NULL for the network input); where an
     * activation feeds two nodes it sees the sum so far. */
    void (*grad_hook)(void *ctx, int node, float **dxs, int n);
};

struct adapt_net *adapt_net_alloc(const char *name, const int in_chw[3], int classes);
void adapt_net_free(struct adapt_net *net);

/* Appends a layer reading activations in0 (and in1 >= 0 for two-input
 * layers); returns the new activation id, or -1 after recording an error
 * (NULL layer, shape mismatch). The network takes ownership of the layer
 * (also on failure). */
int adapt_net_add(struct adapt_net *net, struct adapt_layer *layer, int in0, int in1);
/* The same for a layer of any number of inputs: ins[0 .. layer->nin - 1]. */
int adapt_net_add_n(struct adapt_net *net, struct adapt_layer *layer, const int *ins);
/* Per-sample (C, H, W) of activation a. */
const int *adapt_net_act_dim(const struct adapt_net *net, int a);

/* Allocates arenas for batch capacity n_max and binds every parameter. */
enum adapt_status adapt_net_finalize(struct adapt_net *net, int n_max);

/* Initialisation (doc/models.md): conv/linear weights truncated normal,
 * variance gain / fan_in, cut at +-sqrt(3) std by the inverse CDF; biases
 * uniform(+-1/sqrt(fan_in)); batch-norm gamma 1, beta 0, running mean 0,
 * running var 1. Random bits keyed by (seed, ADAPT_STREAM_INIT, parameter). */
void adapt_net_init_params(struct adapt_net *net, uint64_t seed, double gain);

/* Forward pass of n <= n_max samples from x (n, C, H, W); copies x into
 * act[0] unless x == act[0]. Returns the logits (n, classes). */
const float *adapt_net_forward(struct adapt_net *net, const float *x, int n, int training);
/* Backward pass from d(loss)/d(logits) (n, classes); adds into parameter
 * gradients. Must follow a training forward of the same n. */
void adapt_net_backward(struct adapt_net *net, const float *dlogits, int n);

void adapt_net_zero_grad(struct adapt_net *net);

/* Layer summary: one line per layer (name, kind, output shape, parameters,
 * MACs per sample) and totals. */
void adapt_net_print_summary(const struct adapt_net *net, FILE *f);

/* The network of a resolved model description (src/graph/graph.h), layer for
 * layer in the graph's order. NULL with ADAPT_ERROR set on failure. Not
 * finalized. */
struct adapt_net *adapt_net_from_graph(const struct adapt_graph *g);
/* adapt_graph_load(name, classes) and adapt_net_from_graph: a built-in model
 * ("lenet5", "alexnet_cifar", "alexnet_mnist", "resnet20", ...; doc/models.md)
 * or a description file. NULL with ADAPT_ERROR set for an unknown name or a
 * bad description. Not finalized. */
struct adapt_net *adapt_model_build(const char *name, int classes);

#endif
