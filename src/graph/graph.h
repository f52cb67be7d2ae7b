/* src/graph/graph.h: model descriptions (doc/model-format.md), parsed and resolved.
 *
 * A model description is a small text file, one layer per line, that
 * describes a CNN as a graph of named layers; `param`, `let`, `repeat` and
 * `if` give it parameters (the class count, a depth) and repetition. This
 * module reads it into a resolved graph: every layer with its inputs, its
 * per-sample input and output shapes, parameter count, forward MACs and
 * element-wise operations, in forward order. It knows nothing of training:
 * the engine (src/net) builds its layers from the graph and the performance
 * model (src/perfmodel) prices it, so both see exactly one network.
 *
 *   struct adapt_graph *g;
 *   if (adapt_graph_load(&g, "resnet56", 10, NULL) != ADAPT_OK) ... adapt_error_message() ...
 *   for (int i = 0; i < g->n_nodes; i++) ... g->nodes[i] ...
 *   adapt_graph_free(g);
 *
 * Errors name the file, the line and what was expected; shape errors name
 * both layers involved. Nothing is built from a graph that did not resolve.
 */
#ifndef ADAPT_GRAPH_H
#define ADAPT_GRAPH_H

#include <stdint.h>
#include <stdio.h>

#include "src/base/status.h"

#define ADAPT_GRAPH_NAME_MAX 64 /* bytes of a name, its NUL included */
#define ADAPT_GRAPH_MAX_IN 16   /* inputs of one layer (concat) */

/* What a description may make, checked where it is read (doc/model-format.md, "Limits"). The
 * engine (src/net) checks the same constants, so every graph that resolves can be built. */
/* Characters of a layer name: the engine appends a parameter suffix of up to 13 characters
 * (".running_mean") to make checkpoint keys of at most ADAPT_GRAPH_NAME_MAX - 1. */
#define ADAPT_GRAPH_LAYER_NAME_MAX 50
/* Elements of one tensor: a layer's output (or the input) for one sample, or a parameter
 * tensor. 2^28 (1 GiB of float32) keeps the engine's int sizes and indices, including the
 * padded planes and strided phases of its convolutions, far from INT_MAX. */
#define ADAPT_GRAPH_MAX_NUMEL (1 << 28)
/* Height and width of the input and of every layer's output. */
#define ADAPT_GRAPH_MAX_DIM 65536
#define ADAPT_GRAPH_MAX_NODES 10000  /* layers */
#define ADAPT_GRAPH_MAX_LABELS 10000 /* distinct label names */
#define ADAPT_GRAPH_MAX_REPEAT 100000 /* passes of one repeat */
/* The work of running a description: each line counts its length plus one each time it runs
 * (a line of a repeat's body once per pass), each pass of a repeat one. A ResNet at the
 * layer bound (resnet.model with depth=2852, 9985 layers) runs 536,547. */
#define ADAPT_GRAPH_MAX_WORK 10000000
#define ADAPT_GRAPH_MAX_DEPTH 32 /* repeat and if blocks inside one another */
#define ADAPT_GRAPH_MAX_LINE 1000 /* characters of a line, its comment removed */

enum adapt_graph_kind {
    ADAPT_GRAPH_CONV2D = 0,
    ADAPT_GRAPH_LINEAR,
    ADAPT_GRAPH_RELU,
    ADAPT_GRAPH_TANH,
    ADAPT_GRAPH_MAXPOOL2D,
    ADAPT_GRAPH_AVGPOOL2D, /* k = 0: global average pool */
    ADAPT_GRAPH_BATCHNORM2D,
    ADAPT_GRAPH_FLATTEN,
    ADAPT_GRAPH_ADD,
    ADAPT_GRAPH_RELU6,
    ADAPT_GRAPH_SIGMOID,
    ADAPT_GRAPH_HARDSWISH,
    ADAPT_GRAPH_DROPOUT,
    ADAPT_GRAPH_CONCAT,
    ADAPT_GRAPH_GELU,
    ADAPT_GRAPH_N_KINDS
};

/* The kind's name as written in descriptions and traces ("conv2d", ...). */
const char *adapt_graph_kind_name(enum adapt_graph_kind kind);

struct adapt_graph_node {
    char name[ADAPT_GRAPH_NAME_MAX]; /* PyTorch module path: "layer1.0.conv1" */
    enum adapt_graph_kind kind;
    int line;                        /* line of the description that made it */
    int n_in;
    int in[ADAPT_GRAPH_MAX_IN];      /* node indices read; -1 = the network input */
    int in_dim[ADAPT_GRAPH_MAX_IN][3]; /* per-sample (C, H, W) of each input */
    int out_dim[3];
    /* hyper-parameters (0 where the kind has none) */
    int out;                         /* conv2d / linear: output channels or features */
    int k, stride, pad;              /* conv2d / pools; avgpool2d k = 0: global */
    int count_include_pad;           /* avgpool2d: 1 divides by k*k, 0 by the cells inside */
    int approximate;                 /* gelu: 0 exact (erf), 1 the tanh form */
    int groups;                      /* conv2d: 1, or > 1 for a grouped (depthwise) conv */
    int dilation;                    /* conv2d: distance of the kernel taps (1: dense) */
    int bias;                        /* conv2d / linear */
    double eps, momentum;            /* batchnorm2d */
    double p;                        /* dropout */
    /* costs, per sample */
    int64_t params;                  /* trainable parameters */
    int64_t weights;                 /* elements of the weight tensor (units only) */
    int64_t macs;                    /* forward multiply-accumulates */
    int64_t elementwise;             /* forward element operations (non-MAC layers) */
    int unit;                        /* precision unit index (conv2d, linear), else -1 */
};

struct adapt_graph {
    char name[ADAPT_GRAPH_NAME_MAX]; /* the `model` line, else the file's base name */
    char *file;                      /* path the description was read from */
    char *text;                      /* the description as read */
    char *args;                      /* parameter settings applied ("depth=56"), "" if none */
    int in_chw[3];
    int classes;
    int n_nodes;
    struct adapt_graph_node *nodes;
    int n_units;
    int64_t params, macs;
};

/* Parses and resolves the description `text` read from `file` (used in
 * messages) for `classes` output classes. `args` sets declared parameters:
 * "name=value,name=value" (NULL or "" for none); setting an undeclared
 * parameter is an error. */
enum adapt_status adapt_graph_parse(struct adapt_graph **out, const char *text, const char *file,
                                    int classes, const char *args);

/* Finds and parses a model: `name` is a path (contains '/' or ends in
 * ".model") or a built-in name looked up as models/NAME.model by
 * adapt_find_file. A built-in name that ends in digits and has no file of
 * its own names the file without them with its `depth` parameter set
 * ("resnet56": models/resnet.model, depth=56). */
enum adapt_status adapt_graph_load(struct adapt_graph **out, const char *name, int classes,
                                   const char *args);

void adapt_graph_free(struct adapt_graph *g);

/* The resolved graph, one line per layer: name, kind, inputs, output shape,
 * parameters and MACs per sample, then the totals. */
void adapt_graph_print(const struct adapt_graph *g, FILE *f);

#endif
