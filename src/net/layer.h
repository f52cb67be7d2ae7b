/* src/net/layer.h: the layer interface of the training engine.
 *
 * Each layer kind is a small struct whose first member is struct adapt_layer,
 * plus a const ops table (forward, backward, workspace and saved-state sizes,
 * free). A network (src/net/net.h) owns the layers, binds their parameters into
 * its arenas and calls the ops; layers never allocate in forward/backward.
 *
 * Shapes: activations are NCHW, float32, contiguous; a layer sees its
 * per-sample input shape(s) in in_dim[i] = (C, H, W) and produces out_dim.
 * A linear layer reads its input as flat C*H*W features (PyTorch's Flatten).
 *
 * Gradients: backward *adds* into parameter gradients (PyTorch semantics:
 * gradients accumulate until the optimizer zeroes them). Input gradients are
 * written to dx[i]; when bit i of `acc` is set the layer adds into dx[i]
 * instead (an activation read by two layers, as in a residual block).
 * dx[i] == NULL means that input needs no gradient (the network input).
 *
 * Parameters: forward and backward compute with param->use, which the
 * network points either at the FP32 master value or at a quantized copy; the
 * optimizer updates param->value.
 *
 * Threads: layer kernels parallelise with OpenMP over batch or channels and
 * call BLAS from serial code (OpenBLAS runs its own threads).
 *
 *   struct adapt_layer *c = adapt_conv2d_create("features.0", in_chw, 64, 11, 4, 5, 1);
 *   ... network binds c->param[i] and c->saved ...
 *   c->ops->forward(c, &ex, xs, y);
 *   c->ops->backward(c, &ex, xs, y, dy, dxs, 0);
 *   adapt_layer_free(c);
 */
#ifndef ADAPT_LAYER_H
#define ADAPT_LAYER_H

#include <stddef.h>
#include <stdint.h>

#include "src/graph/graph.h"
#include "src/net/tensor.h"
#include "src/quant/quant.h"

/* A parameter name: the layer's (at most ADAPT_GRAPH_LAYER_NAME_MAX characters), a dot and a
 * suffix, with its NUL. */
#define ADAPT_NAME_MAX 64
#define ADAPT_LAYER_MAX_IN 16 /* inputs of one layer (concat); the others read 1 or 2 */
#define ADAPT_LAYER_MAX_PARAMS 4

enum adapt_param_role {
    ADAPT_PARAM_WEIGHT = 0, /* conv/linear weight, batch-norm gamma */
    ADAPT_PARAM_BIAS,       /* conv/linear bias, batch-norm beta */
    ADAPT_PARAM_BUFFER      /* running statistics: saved, never trained */
};

struct adapt_param {
    char name[ADAPT_NAME_MAX]; /* state_dict key, e.g. "features.0.weight" */
    enum adapt_param_role role;
    struct adapt_tensor value; /* FP32 master copy */
    struct adapt_tensor grad;  /* same shape; NULL data for buffers */
    float *use;                /* what the layer computes with (value.data or a quantized copy) */
    int fan_in;                /* for initialisation; 0 when not applicable */
};

struct adapt_exec {
    int n;        /* samples in this call (<= the network's batch capacity) */
    int training; /* 1: batch-norm uses batch statistics and saves for backward */
    float *ws;    /* scratch of ops->workspace(l, n) floats, 64-byte aligned */
    uint64_t rng_seed; /* random layers (dropout): the run's seed ... */
    int64_t rng_iter;  /* ... and the micro-batch (the same in forward and backward) */
};

struct adapt_layer;

struct adapt_layer_ops {
    const char *kind; /* "conv2d", "linear", "relu", ... */
    void (*forward)(struct adapt_layer *l, const struct adapt_exec *ex, const float *const *x,
                    float *y);
    void (*backward)(struct adapt_layer *l, const struct adapt_exec *ex, const float *const *x,
                     const float *y, const float *dy, float *const *dx, unsigned acc);
    size_t (*workspace)(const struct adapt_layer *l, int n); /* scratch floats; may be NULL */
    size_t (*saved)(const struct adapt_layer *l, int n);     /* floats kept fwd->bwd; may be NULL */
    void (*destroy)(struct adapt_layer *l); /* frees the kind's own extras; may be NULL */
};

/* MX blocks along the reduction dimension of each of a unit's three GEMMs (roles.mx_axis =
 * gemm, doc/numerics.md "Block formats: OCP Microscaling (MX)"): set by the precision state
 * (src/policy/mx_gemm.c) before a conv2d or linear layer's forward, read by its forward and
 * backward (src/net/layers/mx_gemm.c). Each operand flagged is rounded by the layer, once per
 * GEMM that reads it, along that GEMM's reduction dimension; the others are used as given. */
enum adapt_mx_copy {
    ADAPT_MX_X_FWD = 0, /* lowered input (N*P, K), blocks along K: forward */
    ADAPT_MX_X_WGRAD,   /* lowered input (K, N*P), blocks along N*P: weight gradient */
    ADAPT_MX_W_DGRAD,   /* weight^T (K, Cout), blocks along Cout: input gradient */
    ADAPT_MX_DY_DGRAD,  /* output gradient (N*P, Cout), blocks along Cout: input gradient */
    ADAPT_MX_DY_WGRAD,  /* output gradient (Cout, N*P), blocks along N*P: weight gradient */
    ADAPT_MX_COPIES
};
struct adapt_mx_scratch {
    float *buf; /* n floats, 64-byte aligned, grown as needed */
    size_t n;
};
struct adapt_mx_gemm {
    int w, x, dy;                         /* 1: the layer rounds that operand per GEMM */
    int channels; /* roles.mx_axis = channels: a convolution's X_FWD copy is its unlowered input
                     in blocks along Cin at each input pixel, X_WGRAD and DY_WGRAD its input and
                     output gradient in blocks along the batch at each element of a sample (as
                     microxcaling's MX convolution); linear layers as gemm */
    struct quant_spec ws, xs, dys;        /* their formats, rounding set */
    struct quant_key key[ADAPT_MX_COPIES]; /* each copy's stream; index = element in the copy */
    struct adapt_mx_scratch *scratch; /* the layers' scratch, kept between calls; one for the
                                         units of a network (they run one at a time), freed by
                                         the owner of this struct */
};

/* The accumulator model of a unit's three GEMMs (arithmetic.accumulator, doc/numerics.md
 * "Accumulators"): set by the precision state (src/policy/arith.c) on a conv2d or linear layer,
 * read by its forward and backward (src/net/layers/arith_gemm.c). fl_w, fl_x and fl_dy are the
 * fixed-point grids (fractional bits) the weight copy, the input and the output gradient were
 * rounded onto, -1 when not on one; the hooks set them before each forward and backward. An
 * exact or int model applies to a GEMM whose two operands are on grids, a float model to every
 * GEMM; the others run in float32 as without it. */
enum adapt_arith_gemm { ADAPT_ARITH_FWD = 0, ADAPT_ARITH_DGRAD, ADAPT_ARITH_WGRAD, ADAPT_ARITH_N };
struct adapt_arith {
    struct quant_acc acc;
    int fl_w, fl_x, fl_dy;
    uint64_t overflows[ADAPT_ARITH_N]; /* int: additions that left the register, per GEMM */
    uint64_t gemms[ADAPT_ARITH_N];     /* GEMM calls that ran under acc (not float32) */
    uint64_t offgrid;                  /* GEMM calls run in float32 instead: an operand was
                                        * off its grid (an engine fault, warned once) */
    struct adapt_mx_scratch *scratch;  /* shared by the units, freed by the owner */
};

struct adapt_layer {
    const struct adapt_layer_ops *ops;
    char name[ADAPT_NAME_MAX];      /* module path, e.g. "layer1.0.conv1" */
    int nin;                        /* number of inputs */
    int in_dim[ADAPT_LAYER_MAX_IN][3]; /* per-sample (C, H, W) of each input */
    int out_dim[3];                 /* per-sample (C, H, W) */
    int nparam;
    struct adapt_param param[ADAPT_LAYER_MAX_PARAMS];
    int64_t macs;                   /* forward multiply-accumulates per sample */
    int64_t elementwise;            /* forward element operations per sample (non-MAC layers) */
    int is_unit;                    /* conv or linear: a precision unit */
    int k, stride, pad;             /* conv / pool window geometry; 0 for other kinds */
    float *saved;                   /* bound by the network: ops->saved(l, n_max) floats */
    int64_t *counter;               /* batch-norm num_batches_tracked; NULL otherwise */
    int node;                       /* index in its network (set by adapt_net_add) */
    /* what another implementation of the kind (the GPU engine, src/net/cuda) needs beyond the
     * shapes, set by the constructors (0 elsewhere): conv groups and dilation (1 for a plain
     * conv2d), global = 1 for a global average pool, count_include_pad of an average pool,
     * approximate = 1 for gelu's tanh form, batch-norm eps and momentum, dropout p */
    int groups, dilation, global, count_include_pad, approximate;
    float eps, momentum, p;
    int mx_gemm;                    /* 1: forward and backward honour mx (conv2d, linear) */
    struct adapt_mx_gemm *mx;       /* NULL: compute with the operands given */
    struct adapt_arith *arith;      /* NULL: float32 products and sums */
};

/* Constructors. in_chw is the per-sample input shape. Return NULL on bad
 * arguments (with ADAPT_ERROR set) or out of memory. */
struct adapt_layer *adapt_conv2d_create(const char *name, const int in_chw[3], int cout, int k,
                                        int stride, int pad, int bias);
struct adapt_layer *adapt_linear_create(const char *name, const int in_chw[3], int out, int bias);
struct adapt_layer *adapt_relu_create(const char *name, const int in_chw[3]);
struct adapt_layer *adapt_relu6_create(const char *name, const int in_chw[3]);
struct adapt_layer *adapt_tanh_create(const char *name, const int in_chw[3]);
struct adapt_layer *adapt_sigmoid_create(const char *name, const int in_chw[3]);
struct adapt_layer *adapt_hardswish_create(const char *name, const int in_chw[3]);
/* torch.nn.GELU(): x Phi(x) (approximate 0), or GELU(approximate='tanh') (approximate 1);
 * kind "gelu" for both. */
struct adapt_layer *adapt_gelu_create(const char *name, const int in_chw[3], int approximate);
/* torch.nn.Dropout(p), 0 <= p < 1; masks from (run seed, layer, micro-batch). */
struct adapt_layer *adapt_dropout_create(const char *name, const int in_chw[3], float p);
/* torch.cat((x0, x1, ...), dim=1) of 2 <= nin <= ADAPT_LAYER_MAX_IN inputs with the same plane
 * (in_chw[i] the shape of input i); adapt_concat_create: two. */
struct adapt_layer *adapt_concat_n_create(const char *name, int nin, const int (*in_chw)[3]);
struct adapt_layer *adapt_concat_create(const char *name, const int in0[3], const int in1[3]);
/* Grouped (groups > 1 divides cin and cout; depthwise when groups = cin) or dilated
 * convolution: weight (cout, cin/groups, k, k); kind "conv2d", a precision unit. */
struct adapt_layer *adapt_gconv2d_create(const char *name, const int in_chw[3], int cout, int k,
                                         int stride, int pad, int groups, int dilation, int bias);
struct adapt_layer *adapt_maxpool2d_create(const char *name, const int in_chw[3], int k,
                                           int stride);
/* k == 0: global average pool (output C x 1 x 1). */
struct adapt_layer *adapt_avgpool2d_create(const char *name, const int in_chw[3], int k,
                                           int stride);
/* Pools with padding 0 <= pad <= k / 2 (PyTorch's limit): max pooling never picks a padded
 * cell; average pooling divides by k*k when count_include_pad (PyTorch's default), else by the
 * number of the window's cells inside the input. */
struct adapt_layer *adapt_maxpool2d_pad_create(const char *name, const int in_chw[3], int k,
                                               int stride, int pad);
struct adapt_layer *adapt_avgpool2d_pad_create(const char *name, const int in_chw[3], int k,
                                               int stride, int pad, int count_include_pad);
struct adapt_layer *adapt_batchnorm2d_create(const char *name, const int in_chw[3], float eps,
                                             float momentum);
/* Two inputs of the same shape, y = x0 + x1. */
struct adapt_layer *adapt_add_create(const char *name, const int in_chw[3]);
/* (C, H, W) -> (C*H*W, 1, 1); data unchanged. */
struct adapt_layer *adapt_flatten_create(const char *name, const int in_chw[3]);

void adapt_layer_free(struct adapt_layer *l);

/* Sets the parameters that PyTorch initialises to constants rather than at
 * random: batch-norm gamma = 1, beta = 0, running_mean = 0, running_var = 1
 * and *counter = 0. Call after binding value.data (and counter); other kinds
 * are left untouched, so a network may call it for every layer after its own
 * random initialisation of conv/linear WEIGHT and BIAS tensors. */
void adapt_layer_reset_defaults(struct adapt_layer *l);

static inline size_t adapt_layer_in_numel(const struct adapt_layer *l, int i)
{
    return (size_t)l->in_dim[i][0] * (size_t)l->in_dim[i][1] * (size_t)l->in_dim[i][2];
}
static inline size_t adapt_layer_out_numel(const struct adapt_layer *l)
{
    return (size_t)l->out_dim[0] * (size_t)l->out_dim[1] * (size_t)l->out_dim[2];
}

/* Softmax cross-entropy over n rows of c logits (PyTorch CrossEntropyLoss,
 * reduction mean). Returns the mean loss; when dlogits != NULL writes
 * d(mean loss)/d(logits) = (softmax - onehot) / n; when correct != NULL stores
 * the number of rows whose arg-max equals the label. */
double adapt_softmax_xent(const float *logits, const int *labels, int n, int c, float *dlogits,
                          int *correct);
/* The same over softmax(logits) taken as logits, the loss of a network that ends in a softmax
 * (torch: cross_entropy(softmax(z), y)); dlogits through both softmaxes. */
double adapt_softmax2_xent(const float *logits, const int *labels, int n, int c, float *dlogits,
                           int *correct);

#endif
