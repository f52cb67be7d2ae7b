/* src/perfmodel/model.c: the performance model's view of a network, built
 * from a model description (src/graph: the graph the engine trains) or from a
 * trace header, and the GEMM shapes of a unit. tests/test_perf_models.c compares the
 * description's layers with the engine's, field by field.
 */
#include <stdlib.h>
#include <string.h>

#include "src/perfmodel/perf.h"

struct model_store {
    struct adapt_trace_layer *layers;
    struct adapt_trace_unit *units;
    char **names; /* (n_names) owned strings */
    int n_layers, n_units, n_names, cap;
    char model_name[ADAPT_GRAPH_NAME_MAX];
    int failed;
};

static const char *store_name(struct model_store *s, const char *name)
{
    char *c = malloc(strlen(name) + 1);
    if (!c) {
        s->failed = 1;
        return "";
    }
    strcpy(c, name);
    s->names[s->n_names++] = c;
    return c;
}

/* Appends a layer reading an input of shape in (C, H, W); returns its index
 * or -1 (out of memory). */
static int add_layer(struct model_store *s, const char *name, const char *kind, const int in[3],
                     const int out[3], int64_t params, int64_t macs, int64_t ew, int is_unit,
                     int64_t weights, int k, int stride, int pad, int groups, int dilation)
{
    if (s->failed) return -1;
    if (s->n_layers == s->cap) {
        int nc = s->cap ? 2 * s->cap : 32;
        struct adapt_trace_layer *l = realloc(s->layers, (size_t)nc * sizeof *l);
        if (l) s->layers = l;
        struct adapt_trace_unit *u = realloc(s->units, (size_t)nc * sizeof *u);
        if (u) s->units = u;
        char **n = realloc(s->names, (size_t)nc * sizeof *n);
        if (n) s->names = n;
        if (!l || !u || !n) {
            s->failed = 1;
            return -1;
        }
        s->cap = nc;
    }
    struct adapt_trace_layer *l = &s->layers[s->n_layers];
    memset(l, 0, sizeof *l);
    l->name = store_name(s, name);
    l->kind = kind;
    l->in_ndim = l->out_ndim = 3;
    for (int d = 0; d < 3; d++) {
        l->in[d] = in[d];
        l->out[d] = out[d];
    }
    l->params = params;
    l->macs = macs;
    l->elementwise = ew;
    l->unit = is_unit ? s->n_units : -1;
    l->k = k;
    l->stride = stride;
    l->pad = pad;
    l->groups = groups > 0 ? groups : 1;
    l->dilation = dilation > 0 ? dilation : 1;
    if (is_unit) {
        struct adapt_trace_unit *u = &s->units[s->n_units++];
        u->name = l->name;
        u->layer = s->n_layers;
        u->weights = weights;
        u->macs = macs;
    }
    return s->n_layers++;
}

static void store_free(struct model_store *s)
{
    if (!s) return;
    for (int i = 0; i < s->n_names; i++) free(s->names[i]);
    free(s->names);
    free(s->layers);
    free(s->units);
    free(s);
}

enum adapt_status perf_model_alloc(struct perf_model **out, const char *name, int classes)
{
    *out = NULL;
    struct adapt_graph *g;
    enum adapt_status st = adapt_graph_load(&g, name, classes, NULL);
    if (st) return st;
    st = perf_model_from_graph(out, g);
    adapt_graph_free(g);
    return st;
}

enum adapt_status perf_model_from_graph(struct perf_model **out, const struct adapt_graph *g)
{
    *out = NULL;
    struct model_store *s = calloc(1, sizeof *s);
    struct perf_model *m = calloc(1, sizeof *m);
    if (!s || !m) {
        free(s);
        free(m);
        return ADAPT_ERROR(ADAPT_ENOMEM, "model %s: out of memory", g->name);
    }
    for (int i = 0; i < g->n_nodes; i++) {
        const struct adapt_graph_node *n = &g->nodes[i];
        /* a global average pool's window is its whole input plane, stride 1 */
        int global = n->kind == ADAPT_GRAPH_AVGPOOL2D && n->k == 0;
        add_layer(s, n->name, adapt_graph_kind_name(n->kind), n->in_dim[0], n->out_dim, n->params,
                  n->macs, n->elementwise, n->unit >= 0, n->weights,
                  global ? n->in_dim[0][1] : n->k, global ? 1 : n->stride, n->pad, n->groups,
                  n->dilation);
    }
    if (s->failed) {
        store_free(s);
        free(m);
        return ADAPT_ERROR(ADAPT_ENOMEM, "model %s: out of memory", g->name);
    }
    snprintf(s->model_name, sizeof s->model_name, "%s", g->name);
    m->name = s->model_name;
    memcpy(m->input, g->in_chw, sizeof m->input);
    m->classes = g->classes;
    m->params = g->params;
    m->macs = g->macs;
    m->n_layers = s->n_layers;
    m->layers = s->layers;
    m->n_units = s->n_units;
    m->units = s->units;
    m->storage = s;
    *out = m;
    return ADAPT_OK;
}

static int64_t dims_numel(int nd, const int64_t *d)
{
    int64_t n = 1;
    for (int i = 0; i < nd; i++) n *= d[i];
    return n;
}

/* Whether a * b == c, for a, b >= 0, without overflow. */
static int mul_eq(int64_t a, int64_t b, int64_t c)
{
    if (a == 0 || b == 0) return c == 0;
    return a <= INT64_MAX / b && a * b == c;
}

/* Adds x >= 0 to *sum >= 0; 0 when the sum would not fit an int64. */
static int sum_fits(int64_t *sum, int64_t x)
{
    if (x > INT64_MAX - *sum) return 0;
    *sum += x;
    return 1;
}

/* Whether the product of the nd sizes (each >= 0, as the trace reader checks) fits an int64. */
static int dims_fit(int nd, const int64_t *d)
{
    int64_t n = 1;
    for (int i = 0; i < nd; i++) {
        if (d[i] == 0) return 1;
        if (n > INT64_MAX / d[i]) return 0;
        n *= d[i];
    }
    return 1;
}

enum adapt_status perf_model_from_header(struct perf_model **out,
                                         const struct adapt_trace_header *h, const char *path)
{
    *out = NULL;
    if (h->n_units < 1)
        return ADAPT_ERROR(ADAPT_EFORMAT, "%s:1: header lists no precision units", path);
    const int64_t input[3] = {h->model.input[0], h->model.input[1], h->model.input[2]};
    if (!dims_fit(3, input))
        return ADAPT_ERROR(ADAPT_EFORMAT,
                           "%s:1: model.input [%d, %d, %d] holds more elements "
                           "than a 64-bit count",
                           path, h->model.input[0], h->model.input[1], h->model.input[2]);
    int64_t params = 0, weights = 0; /* the sums the pricing takes (src/perfmodel/price.c) */
    int fits = 1;
    for (int i = 0; i < h->model.n_layers; i++)
        fits &= sum_fits(&params, h->model.layers[i].params);
    for (int u = 0; u < h->n_units; u++) fits &= sum_fits(&weights, h->units[u].weights);
    if (!fits)
        return ADAPT_ERROR(ADAPT_EFORMAT,
                           "%s:1: the layers' params or the units' weights add up "
                           "to more than a 64-bit count",
                           path);
    for (int i = 0; i < h->model.n_layers; i++) {
        const struct adapt_trace_layer *l = &h->model.layers[i];
        if (!dims_fit(l->in_ndim, l->in) || !dims_fit(l->out_ndim, l->out))
            return ADAPT_ERROR(ADAPT_EFORMAT,
                               "%s:1: model.layers[%d] (\"%s\"): its in or out shape holds more "
                               "elements than a 64-bit count",
                               path, i, l->name);
        if (l->unit >= h->n_units || (l->unit >= 0 && h->units[l->unit].layer != i))
            return ADAPT_ERROR(ADAPT_EFORMAT,
                               "%s:1: model.layers[%d] (\"%s\") names unit %d, which does not "
                               "point back at it",
                               path, i, l->name, l->unit);
    }
    for (int u = 0; u < h->n_units; u++) {
        const struct adapt_trace_unit *un = &h->units[u];
        const struct adapt_trace_layer *l = &h->model.layers[un->layer];
        int is_conv = !strcmp(l->kind, "conv2d"), is_linear = !strcmp(l->kind, "linear");
        if (l->unit != u || (!is_conv && !is_linear))
            return ADAPT_ERROR(ADAPT_EFORMAT,
                               "%s:1: units[%d] (\"%s\") points at model.layers[%d], which is a "
                               "%s layer of unit %d (expected a conv2d or linear layer of unit %d)",
                               path, u, un->name, un->layer, l->kind, l->unit, u);
        int64_t out_n = dims_numel(l->out_ndim, l->out), in_n = dims_numel(l->in_ndim, l->in);
        int64_t cout = l->out[0], p = out_n / (cout > 0 ? cout : 1);
        /* conv: macs = P * Cout * (Cin K K) and weights = Cout * (Cin K K); linear: in * out */
        int ok = un->macs == l->macs && un->weights > 0 && out_n > 0 && in_n > 0;
        if (ok && is_conv) ok = mul_eq(p, un->weights, l->macs) && un->weights % cout == 0;
        if (ok && is_linear) ok = mul_eq(in_n, out_n, un->weights) && l->macs == un->weights;
        if (!ok)
            return ADAPT_ERROR(ADAPT_EFORMAT,
                               "%s:1: units[%d] (\"%s\"): %lld MACs and %lld weights do not match "
                               "the %s layer's shapes and %lld MACs",
                               path, u, un->name, (long long)un->macs, (long long)un->weights,
                               l->kind, (long long)l->macs);
    }
    struct perf_model *m = calloc(1, sizeof *m);
    if (!m) return ADAPT_ERROR(ADAPT_ENOMEM, "%s: out of memory", path);
    m->name = h->model.name;
    memcpy(m->input, h->model.input, sizeof m->input);
    m->classes = h->model.classes;
    m->params = h->model.params;
    m->macs = h->model.macs;
    m->n_layers = h->model.n_layers;
    m->layers = h->model.layers;
    m->n_units = h->n_units;
    m->units = h->units;
    *out = m;
    return ADAPT_OK;
}

void perf_model_free(struct perf_model *m)
{
    if (!m) return;
    store_free(m->storage);
    free(m);
}

int perf_model_unit_gemms(const struct perf_model *m, int u, int64_t batch, struct perf_gemm g[3])
{
    ADAPT_ASSERT(u >= 0 && u < m->n_units);
    const struct adapt_trace_unit *un = &m->units[u];
    const struct adapt_trace_layer *l = &m->layers[un->layer];
    int64_t cout = l->out[0], groups = l->groups > 1 ? l->groups : 1;
    int64_t ckk = un->weights / cout; /* (Cin/G)*K*K, or the linear layer's inputs */
    int64_t p = dims_numel(l->out_ndim, l->out) / cout; /* Hout*Wout (1 for linear) */
    int64_t cog = cout / groups;                        /* output channels of one group */
    /* batch * p, saturated: a trace header's shapes are only checked to fit one sample */
    int64_t bp = batch > 0 && p > INT64_MAX / batch ? INT64_MAX : batch * p;
    g[0].m = cog, g[0].n = bp, g[0].k = ckk;
    g[1].m = ckk, g[1].n = bp, g[1].k = cog;
    g[2].m = cog, g[2].n = ckk, g[2].k = bp;
    g[0].count = g[1].count = g[2].count = groups;
    if (un->layer == 0) {
        g[1].m = g[1].n = g[1].k = 0;
        return 2;
    }
    return 3;
}
