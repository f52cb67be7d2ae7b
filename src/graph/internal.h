/* src/graph/internal.h: what the parts of src/graph share. */
#ifndef ADAPT_GRAPH_INTERNAL_H
#define ADAPT_GRAPH_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "src/graph/graph.h"

#define GRAPH_MAX_VARS 64

/* Integer variables of a description: parameters, `let` values, loop variables. */
struct graph_vars {
    int n;
    char name[GRAPH_MAX_VARS][ADAPT_GRAPH_NAME_MAX];
    int64_t value[GRAPH_MAX_VARS];
};

/* 1 and *v when defined, else 0. */
int graph_vars_get(const struct graph_vars *vars, const char *name, int64_t *v);

/* Evaluates the integer expression s (src/graph/expr.c). Returns 1, or 0 with a message
 * quoting s in err. */
int graph_eval(const char *s, const struct graph_vars *vars, int64_t *v, char *err, size_t cap);

#endif
