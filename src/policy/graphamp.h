/* src/policy/graphamp.h: graph-level precision propagation (quantization.precision_propagation
 * = graph), after the GraphAMP algorithm of the SambaFlow compiler as its public description
 * states it: layer kinds in allow / infer / deny sets, and one pass over the model graph from
 * the output towards the input that decides which layers compute in the low-precision format.
 *
 * Sets. Every layer kind is in exactly one set: allow (numerically stable: the layer computes
 * in the low-precision format), infer (numerically neutral: the layer takes the precision of
 * the layers that consume its output) or deny (numerically sensitive: the layer stays
 * float32). A preset assigns the kinds (conv2d and linear are allowed in every preset):
 *
 *   kind                              conservative  default  aggressive
 *   conv2d, linear                    allow         allow    allow
 *   relu, relu6, maxpool2d, concat    infer         infer    allow
 *   flatten                           infer         infer    infer
 *   dropout                           deny          infer    infer
 *   tanh, sigmoid, hardswish, gelu,   deny          infer    allow
 *     add, avgpool2d
 *   batchnorm2d                       deny          deny     allow
 *
 * conservative lets only the layers whose outputs are their inputs' values (or 0, or the
 * clamp 6) inherit low precision; default keeps the batch statistics of batch norm in
 * float32; aggressive allows everything but the layers that only move or mask values.
 * Per-kind overrides (quantization.graph_allow / graph_infer / graph_deny) move kinds into
 * a set; per-layer overrides by name (graph_low / graph_float) put one layer in the allow
 * or deny set and win over its kind's set.
 *
 * Propagation. Layers are visited from the last (nearest the loss) to the first, so every
 * consumer is resolved before the layer it reads:
 *
 *   allow: low          deny: float32
 *   infer: low iff it has at least one consumer and every consumer is low
 *
 * The network output's consumer is the loss, which is float32: an infer layer there (or one
 * whose output nothing reads) stays float32. The description leaves open what an output read
 * by several layers takes; here a single float32 consumer keeps the producer float32 (the
 * conservative choice: no consumer reads a value rounded for another).
 *
 * Format. A low unit (conv2d, linear) computes in its own format. Any other low layer takes
 * the format of its first low consumer in network order (the upstream inheritance: an infer
 * layer's input precision is its output's); an allowed layer with no low consumer takes that
 * of the nearest low unit before it, else the nearest after it. A layer left with no low unit
 * to take a format from stays float32. fmt_unit below names that unit.
 *
 * What a low layer does in this engine (src/policy/precision.h): a low unit rounds its weights
 * and its input in the format; a low layer rounds its output for its low consumers only (the
 * allowed operator writes float32: a float32 consumer reads float32 unless a low layer without
 * weights reads the same output; src/policy/policy.c, low_reader). A float32 layer rounds
 * nothing, and a float32 unit is inactive (float32 weights, inputs and outputs). Only units
 * round their inputs, so an allowed layer without weights reads a low input only where its
 * producer is low (the engine rounds the inputs of conv2d and linear layers only).
 *
 *   struct adapt_gamp_rules r;
 *   if ((st = adapt_gamp_rules_from_config(&r, cfg))) return st;   // kind names checked
 *   struct adapt_gamp_layer *ls = calloc(net->nnodes, sizeof *ls);
 *   if ((st = adapt_gamp_layers_from_net(net, ls))) ...
 *   struct adapt_gamp *g;
 *   if ((st = adapt_gamp_resolve(&g, ls, net->nnodes, &r))) ...    // layer names checked
 *   ... g->low[i], g->fmt_unit[i] ...
 *   adapt_gamp_free(g);
 *
 * Errors name the configuration key and the bad value: an unknown kind, a kind in two
 * per-kind lists, an unknown layer name, a layer in both per-layer lists, an empty name.
 *
 * Ownership: the rules borrow the configuration's strings (the configuration must outlive
 * them); struct adapt_gamp owns its arrays.
 */
#ifndef ADAPT_GRAPHAMP_H
#define ADAPT_GRAPHAMP_H

#include "src/base/status.h"
#include "src/config/config.h"
#include "src/graph/graph.h"
#include "src/net/net.h"

enum adapt_gamp_set { ADAPT_GAMP_ALLOW = 0, ADAPT_GAMP_INFER, ADAPT_GAMP_DENY };
/* "allow", "infer", "deny", indexed by value */
extern const char *const adapt_gamp_set_names[3];

/* Where a layer's set came from. */
enum adapt_gamp_source {
    ADAPT_GAMP_FROM_PRESET = 0, /* quantization.graph_preset */
    ADAPT_GAMP_FROM_KIND,       /* graph_allow / graph_infer / graph_deny */
    ADAPT_GAMP_FROM_LAYER       /* graph_low / graph_float */
};
/* "preset", "kind", "layer", indexed by value */
extern const char *const adapt_gamp_source_names[3];

struct adapt_gamp_rules {
    enum adapt_gamp_set kind_set[ADAPT_GRAPH_N_KINDS];
    enum adapt_gamp_source kind_source[ADAPT_GRAPH_N_KINDS]; /* PRESET or KIND */
    const char *kind_key[ADAPT_GRAPH_N_KINDS]; /* the per-kind key that set it, or NULL */
    /* comma-separated layer names and the keys they came from (messages); NULL or "": none */
    const char *low, *low_key;
    const char *flt, *flt_key;
};

/* The preset's sets, no overrides. */
void adapt_gamp_rules_preset(struct adapt_gamp_rules *r, enum adapt_config_graph_preset preset);
/* Moves the comma-separated kinds of `list` (set by configuration key `key`) into `set`.
 * ADAPT_EINVAL for an unknown or empty kind name, or a kind another key already moved. */
enum adapt_status adapt_gamp_rules_kinds(struct adapt_gamp_rules *r, const char *key,
                                         const char *list, enum adapt_gamp_set set);
/* The preset and every override of the [quantization] section. */
enum adapt_status adapt_gamp_rules_from_config(struct adapt_gamp_rules *r,
                                               const struct adapt_config *cfg);

/* One layer of the graph, in forward order (producers before consumers). */
struct adapt_gamp_layer {
    const char *name;
    enum adapt_graph_kind kind;
    int n_in;
    int in[ADAPT_GRAPH_MAX_IN]; /* layer indices read; -1 = the network input */
    int unit;                   /* precision unit index, -1 if not a unit */
};

/* out (g->n_nodes entries) from a resolved graph; names are borrowed from g. */
void adapt_gamp_layers_from_graph(const struct adapt_graph *g, struct adapt_gamp_layer *out);
/* out (net->nnodes entries) from a network built from a graph; names borrowed from net.
 * ADAPT_EINVAL for a layer whose kind has no graph kind. */
enum adapt_status adapt_gamp_layers_from_net(const struct adapt_net *net,
                                             struct adapt_gamp_layer *out);

struct adapt_gamp {
    int n;
    enum adapt_gamp_set *set;       /* (n) the layer's set, its per-layer override included;
                                       NULL for a comp plan (src/policy/comp.h), which has none */
    enum adapt_gamp_source *source; /* (n) */
    unsigned char *low;             /* (n) 1: computes in low precision */
    int *fmt_unit;                  /* (n) the unit whose format a low layer takes; -1 float32 */
};

/* The propagation pass over n layers. ADAPT_EINVAL for per-layer override names that are not
 * layers (naming the key), ADAPT_ENOMEM. */
enum adapt_status adapt_gamp_resolve(struct adapt_gamp **out, const struct adapt_gamp_layer *l,
                                     int n, const struct adapt_gamp_rules *r);
void adapt_gamp_free(struct adapt_gamp *g);

#endif
