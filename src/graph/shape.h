/* src/graph/shape.h: the layer kinds of model descriptions, their keys, shapes and costs. */
#ifndef ADAPT_GRAPH_SHAPE_H
#define ADAPT_GRAPH_SHAPE_H

#include "src/graph/graph.h"

enum graph_key {
    GK_OUT = 0,
    GK_K,
    GK_STRIDE,
    GK_PAD,
    GK_BIAS,
    GK_GLOBAL,
    GK_IN_CHANNELS,
    GK_IN_FEATURES,
    GK_EPS,
    GK_MOMENTUM,
    GK_GROUPS,
    GK_P,
    GK_DILATION,
    GK_COUNT_INCLUDE_PAD,
    GK_APPROXIMATE,
    GK_N
};

/* The keys of one layer line, as written. */
struct graph_layer_args {
    int set[GK_N];
    int64_t val[GK_N];
    double real[GK_N];
    int n_in;
    int in[ADAPT_GRAPH_MAX_IN]; /* node indices, -1 = network input */
    int default_in;             /* the previous layer, read when no in= is given */
};

void graph_layer_args_init(struct graph_layer_args *a);
/* Index of a key name, or -1. */
int graph_layer_key(const char *name);
/* 1 for keys with real values (eps, momentum). */
int graph_key_is_real(int key);
/* Keys whose values are words (approximate=none|tanh): the index of val among the key's words,
 * or -1 with *expected set to them ("none or tanh"); -2 for a key with a numeric value. */
int graph_key_word(int key, const char *val, const char **expected);

/* Checks the keys of node n (kind, name and line set) against its kind, resolves its inputs,
 * shapes and costs, and numbers it as a unit when it is one. The graph's nodes before n are
 * resolved. Errors name the file, the line and, for shape mismatches, both layers. */
enum adapt_status graph_resolve_node(struct adapt_graph *g, struct adapt_graph_node *n,
                                     const struct graph_layer_args *a, const char *file);

/* After the last line: the graph has a layer, its last layer gives (classes) features, and
 * the totals are summed. */
enum adapt_status graph_check_output(struct adapt_graph *g, const char *file);

#endif
