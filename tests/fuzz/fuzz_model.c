/* tests/fuzz/fuzz_model.c: libFuzzer harness for model descriptions (src/graph), read from
 * memory (no file: tests/fuzz/fuzz.h is not needed). The input is a description, optionally
 * followed by a NUL byte and model arguments ("depth=56"). What resolves is printed and priced
 * by the performance model; a small graph is built by the engine, which must accept it and
 * agree with it layer by layer (shapes, MACs, element-wise operations, trainable parameters),
 * and a tiny one runs a forward and a backward pass. Every disagreement aborts, as does a
 * negative size or a string the trace could not hold. */
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/log.h"
#include "src/graph/graph.h"
#include "src/net/net.h"
#include "src/perfmodel/perf.h"

/* Builds graphs whose parameters, input and activations hold at most this many floats ... */
#define BUILD_FLOATS (1 << 20)
/* ... and trains a step of those whose arenas and workspace hold at most this many. */
#define RUN_FLOATS (1 << 18)
#define RUN_BATCH  2

static void fail(const char *what, const struct adapt_graph *g, int node)
{
    fprintf(stderr, "fuzz_model: %s (model %s, layer %d %s)\n", what, g->name, node,
            node >= 0 && node < g->n_nodes ? g->nodes[node].name : "");
    abort();
}

/* The trace header holds these strings as JSON: they must be UTF-8. */
static void encodable(const char *s, const struct adapt_graph *g, int node)
{
    json_t *j = json_string(s);
    if (!j) fail("a string that JSON cannot hold", g, node);
    json_decref(j);
}

static int64_t numel3(const int d[3])
{
    return (int64_t)d[0] * d[1] * d[2];
}

static void check_graph(const struct adapt_graph *g)
{
    int64_t params = 0, macs = 0;
    encodable(g->name, g, -1);
    encodable(g->file, g, -1);
    encodable(g->args, g, -1);
    encodable(g->text, g, -1);
    for (int i = 0; i < g->n_nodes; i++) {
        const struct adapt_graph_node *n = &g->nodes[i];
        encodable(n->name, g, i);
        if (strlen(n->name) > ADAPT_GRAPH_LAYER_NAME_MAX) fail("a long name", g, i);
        if (n->params < 0 || n->weights < 0 || n->macs < 0 || n->elementwise < 0)
            fail("a negative count", g, i);
        for (int d = 0; d < 3; d++)
            if (n->out_dim[d] < 1) fail("an empty output", g, i);
        if (n->out_dim[1] > ADAPT_GRAPH_MAX_DIM || n->out_dim[2] > ADAPT_GRAPH_MAX_DIM ||
            numel3(n->out_dim) > ADAPT_GRAPH_MAX_NUMEL || n->weights > ADAPT_GRAPH_MAX_NUMEL)
            fail("a tensor beyond the bounds", g, i);
        params += n->params;
        macs += n->macs;
    }
    if (params != g->params || macs != g->macs || g->params < 0 || g->macs < 0)
        fail("totals that are not the sums", g, -1);
}

static void price(const struct adapt_graph *g)
{
    struct perf_model *m = NULL;
    if (perf_model_from_graph(&m, g) != ADAPT_OK) fail("the performance model refused", g, -1);
    for (int u = 0; u < m->n_units; u++) {
        struct perf_gemm gm[3];
        int k = perf_model_unit_gemms(m, u, 32, gm);
        for (int i = 0; i < k; i++)
            if (gm[i].m < 0 || gm[i].n < 0 || gm[i].k < 0 || gm[i].count < 0)
                fail("a negative GEMM", g, u);
    }
    struct perf_params p;
    perf_params_init(&p);
    struct perf_run *run = NULL;
    if (perf_schedule_price(&run, "8:1,32:1", m, 32, 1000, &p, NULL) != ADAPT_OK)
        fail("a schedule could not be priced", g, -1);
    if (!(run->c32 >= 0 && run->cq >= 0) || !isfinite(run->c32) || !isfinite(run->cq))
        fail("a negative or infinite cost", g, -1);
    perf_run_free(run);
    perf_model_free(m);
}

static int64_t trainable(const struct adapt_layer *l)
{
    int64_t n = 0;
    for (int p = 0; p < l->nparam; p++)
        if (l->param[p].role != ADAPT_PARAM_BUFFER) n += (int64_t)l->param[p].value.numel;
    return n;
}

static void build(const struct adapt_graph *g)
{
    int64_t floats = g->params + numel3(g->in_chw);
    for (int i = 0; i < g->n_nodes; i++) floats += numel3(g->nodes[i].out_dim);
    if (floats > BUILD_FLOATS) return;
    struct adapt_net *net = adapt_net_from_graph(g);
    if (!net) {
        fprintf(stderr, "fuzz_model: %s\n", adapt_error_message());
        fail("the engine refused a graph that resolved", g, -1);
    }
    size_t run = RUN_BATCH * (size_t)numel3(g->in_chw), ws = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const struct adapt_graph_node *n = &g->nodes[i];
        const struct adapt_layer *l = net->nodes[i].layer;
        if (memcmp(l->out_dim, n->out_dim, sizeof l->out_dim)) fail("output shapes differ", g, i);
        if (l->macs != n->macs) fail("MACs differ", g, i);
        if (l->elementwise != n->elementwise) fail("element-wise counts differ", g, i);
        if (trainable(l) != n->params) fail("parameter counts differ", g, i);
        if (l->is_unit != (n->unit >= 0)) fail("units differ", g, i);
        for (int p = 0; p < l->nparam; p++) run += 2 * l->param[p].value.numel;
        run += 2 * RUN_BATCH * (size_t)numel3(n->out_dim);
        if (l->ops->saved) run += l->ops->saved(l, RUN_BATCH);
        size_t w = l->ops->workspace ? l->ops->workspace(l, RUN_BATCH) : 0;
        if (w > ws) ws = w;
    }
    if (run + ws <= RUN_FLOATS) {
        if (adapt_net_finalize(net, RUN_BATCH) != ADAPT_OK) fail("finalize failed", g, -1);
        if (net->nparams_trainable != g->params || net->macs != g->macs)
            fail("network totals differ", g, -1);
        adapt_net_init_params(net, 1, 2.0);
        size_t nx = RUN_BATCH * (size_t)numel3(g->in_chw), ny = RUN_BATCH * (size_t)g->classes;
        float *x = malloc(nx * sizeof *x), *dy = malloc(ny * sizeof *dy);
        if (!x || !dy) abort();
        for (size_t i = 0; i < nx; i++) x[i] = (float)(i % 7) - 3.0f;
        for (size_t i = 0; i < ny; i++) dy[i] = 0.01f * (float)(i % 3);
        adapt_net_forward(net, x, RUN_BATCH, 1);
        adapt_net_backward(net, dy, RUN_BATCH);
        free(x);
        free(dy);
    }
    adapt_net_free(net);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    /* one thread: each input is small, and the sanitizers follow one thread best */
    setenv("OMP_NUM_THREADS", "1", 1);
    setenv("OPENBLAS_NUM_THREADS", "1", 1);
    adapt_log_set_level(ADAPT_LOG_ERROR);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 2);
    if (!text) abort();
    memcpy(text, data, size);
    text[size] = text[size + 1] = 0;
    size_t len = strlen(text);
    const char *args = len < size ? text + len + 1 : NULL;
    struct adapt_graph *g = NULL;
    if (adapt_graph_parse(&g, text, "fuzz.model", 10, args) == ADAPT_OK) {
        check_graph(g);
        FILE *f = fopen("/dev/null", "w");
        if (!f) abort();
        adapt_graph_print(g, f);
        fclose(f);
        price(g);
        build(g);
        adapt_graph_free(g);
    }
    free(text);
    return 0;
}
