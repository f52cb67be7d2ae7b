/* src/perfmodel/model.c: layer descriptions of the four models (doc/models.md)
 * without the engine, trace-header views, and the GEMM shapes of a unit.
 *
 * The built-in descriptions follow the same construction as the engine's
 * models (src/net/models.c): PyTorch module names, output shapes by the
 * usual floor formulas, conv MACs Hout*Wout*Cout*Cin*K*K, linear in*out,
 * element-wise counts one per output element (activations, additions), per
 * input element (batch norm, global average pool) or per window element read
 * (pools). tests/test_perf.c compares them with adapt_model_build, field by
 * field, so the two cannot drift apart.
 */
#include <stdlib.h>
#include <string.h>

#include "src/perfmodel/perf.h"

struct model_store {
    struct adapt_trace_layer *layers;
    struct adapt_trace_unit *units;
    char **names; /* (n_names) owned strings */
    int n_layers, n_units, n_names, cap;
    char model_name[32];
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
                     int64_t weights, int k, int stride, int pad)
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
    if (is_unit) {
        struct adapt_trace_unit *u = &s->units[s->n_units++];
        u->name = l->name;
        u->layer = s->n_layers;
        u->weights = weights;
        u->macs = macs;
    }
    return s->n_layers++;
}

static int64_t numel(const int d[3]) { return (int64_t)d[0] * d[1] * d[2]; }

/* Each builder takes the input shape in x and leaves the output shape there. */
static void conv(struct model_store *s, const char *name, int x[3], int cout, int k, int stride,
                 int pad, int bias)
{
    int in[3] = {x[0], x[1], x[2]};
    int out[3] = {cout, (x[1] + 2 * pad - k) / stride + 1, (x[2] + 2 * pad - k) / stride + 1};
    int64_t w = (int64_t)cout * in[0] * k * k;
    add_layer(s, name, "conv2d", in, out, w + (bias ? cout : 0), (int64_t)out[1] * out[2] * w, 0,
              1, w, k, stride, pad);
    memcpy(x, out, sizeof out);
}

static void linear(struct model_store *s, const char *name, int x[3], int nout)
{
    int in[3] = {x[0], x[1], x[2]};
    int out[3] = {nout, 1, 1};
    int64_t w = numel(in) * nout;
    add_layer(s, name, "linear", in, out, w + nout, w, 0, 1, w, 0, 0, 0);
    memcpy(x, out, sizeof out);
}

/* relu, tanh, add: one operation per element, shape unchanged. */
static void pointwise(struct model_store *s, const char *name, const char *kind, const int x[3])
{
    add_layer(s, name, kind, x, x, 0, 0, numel(x), 0, 0, 0, 0, 0);
}

static void batchnorm(struct model_store *s, const char *name, const int x[3])
{
    add_layer(s, name, "batchnorm2d", x, x, 2 * (int64_t)x[0], 0, numel(x), 0, 0, 0, 0, 0);
}

/* k == 0: global average pool (window = the whole plane). */
static void pool(struct model_store *s, const char *name, const char *kind, int x[3], int k,
                 int stride)
{
    int in[3] = {x[0], x[1], x[2]};
    int out[3], gk = k, gs = stride;
    if (k == 0) {
        gk = x[1];
        gs = 1;
        out[0] = x[0];
        out[1] = out[2] = 1;
        add_layer(s, name, kind, in, out, 0, 0, numel(in), 0, 0, gk, gs, 0);
    } else {
        out[0] = x[0];
        out[1] = (x[1] - k) / stride + 1;
        out[2] = (x[2] - k) / stride + 1;
        add_layer(s, name, kind, in, out, 0, 0, numel(out) * k * k, 0, 0, gk, gs, 0);
    }
    memcpy(x, out, sizeof out);
}

static void flatten(struct model_store *s, const char *name, int x[3])
{
    int in[3] = {x[0], x[1], x[2]};
    int out[3] = {(int)numel(x), 1, 1};
    add_layer(s, name, "flatten", in, out, 0, 0, 0, 0, 0, 0, 0, 0);
    memcpy(x, out, sizeof out);
}

static void build_lenet5(struct model_store *s, int classes)
{
    int x[3] = {1, 32, 32};
    conv(s, "0", x, 6, 5, 1, 0, 1);
    pointwise(s, "1", "tanh", x);
    pool(s, "2", "avgpool2d", x, 2, 2);
    conv(s, "3", x, 16, 5, 1, 0, 1);
    pointwise(s, "4", "tanh", x);
    pool(s, "5", "avgpool2d", x, 2, 2);
    conv(s, "6", x, 120, 5, 1, 0, 1);
    pointwise(s, "7", "tanh", x);
    flatten(s, "8", x);
    linear(s, "9", x, 84);
    pointwise(s, "10", "tanh", x);
    linear(s, "11", x, classes);
}

static void build_alexnet(struct model_store *s, int cin, int classes)
{
    int x[3] = {cin, 32, 32};
    conv(s, "0", x, 64, 11, 4, 5, 1);
    pointwise(s, "1", "relu", x);
    pool(s, "2", "maxpool2d", x, 2, 2);
    conv(s, "3", x, 192, 5, 1, 2, 1);
    pointwise(s, "4", "relu", x);
    pool(s, "5", "maxpool2d", x, 2, 2);
    conv(s, "6", x, 384, 3, 1, 1, 1);
    pointwise(s, "7", "relu", x);
    conv(s, "8", x, 256, 3, 1, 1, 1);
    pointwise(s, "9", "relu", x);
    conv(s, "10", x, 256, 3, 1, 1, 1);
    pointwise(s, "11", "relu", x);
    pool(s, "12", "maxpool2d", x, 2, 2);
    flatten(s, "13", x);
    linear(s, "14", x, classes);
}

/* conv (no bias) + batch norm [+ relu], named prefix+conv, prefix+bn, prefix+relu. */
static void conv_bn(struct model_store *s, int x[3], const char *prefix, const char *cname,
                    const char *bname, int cout, int k, int stride, const char *relu)
{
    char n[96];
    snprintf(n, sizeof n, "%s%s", prefix, cname);
    conv(s, n, x, cout, k, stride, k / 2, 0);
    snprintf(n, sizeof n, "%s%s", prefix, bname);
    batchnorm(s, n, x);
    if (relu) {
        snprintf(n, sizeof n, "%s%s", prefix, relu);
        pointwise(s, n, "relu", x);
    }
}

static void basic_block(struct model_store *s, int x[3], int stage, int idx, int cout, int stride)
{
    char p[32], n[96];
    snprintf(p, sizeof p, "layer%d.%d.", stage, idx);
    int b[3] = {x[0], x[1], x[2]};
    conv_bn(s, b, p, "conv1", "bn1", cout, 3, stride, "relu1");
    conv_bn(s, b, p, "conv2", "bn2", cout, 3, 1, NULL);
    if (stride != 1 || x[0] != cout) {
        int sc[3] = {x[0], x[1], x[2]};
        conv_bn(s, sc, p, "shortcut.0", "shortcut.1", cout, 1, stride, NULL);
    }
    snprintf(n, sizeof n, "%sadd", p);
    pointwise(s, n, "add", b);
    snprintf(n, sizeof n, "%srelu2", p);
    pointwise(s, n, "relu", b);
    memcpy(x, b, sizeof b);
}

static void build_resnet20(struct model_store *s, int classes)
{
    static const int width[3] = {16, 32, 64};
    int x[3] = {3, 32, 32};
    conv_bn(s, x, "", "conv1", "bn1", 16, 3, 1, "relu");
    for (int st = 0; st < 3; st++)
        for (int b = 0; b < 3; b++)
            basic_block(s, x, st + 1, b, width[st], (st > 0 && b == 0) ? 2 : 1);
    pool(s, "avgpool", "avgpool2d", x, 0, 0);
    flatten(s, "flatten", x);
    linear(s, "linear", x, classes);
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
    if (classes < 2)
        return ADAPT_ERROR(ADAPT_EINVAL, "model %s: need at least 2 classes, got %d", name,
                           classes);
    int in_c;
    if (!strcmp(name, "lenet5") || !strcmp(name, "alexnet_mnist")) in_c = 1;
    else if (!strcmp(name, "alexnet_cifar") || !strcmp(name, "resnet20")) in_c = 3;
    else
        return ADAPT_ERROR(ADAPT_EINVAL,
                           "unknown model '%s' (expected lenet5, alexnet_cifar, alexnet_mnist "
                           "or resnet20)",
                           name);
    struct model_store *s = calloc(1, sizeof *s);
    struct perf_model *m = calloc(1, sizeof *m);
    if (!s || !m) {
        free(s);
        free(m);
        return ADAPT_ERROR(ADAPT_ENOMEM, "model %s: out of memory", name);
    }
    if (!strcmp(name, "lenet5")) build_lenet5(s, classes);
    else if (!strcmp(name, "resnet20")) build_resnet20(s, classes);
    else build_alexnet(s, in_c, classes);
    if (s->failed) {
        store_free(s);
        free(m);
        return ADAPT_ERROR(ADAPT_ENOMEM, "model %s: out of memory", name);
    }
    snprintf(s->model_name, sizeof s->model_name, "%s", name);
    m->name = s->model_name;
    m->input[0] = in_c;
    m->input[1] = m->input[2] = 32;
    m->classes = classes;
    for (int i = 0; i < s->n_layers; i++) {
        m->params += s->layers[i].params;
        m->macs += s->layers[i].macs;
    }
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

enum adapt_status perf_model_from_header(struct perf_model **out,
                                         const struct adapt_trace_header *h, const char *path)
{
    *out = NULL;
    if (h->n_units < 1)
        return ADAPT_ERROR(ADAPT_EFORMAT, "%s:1: header lists no precision units", path);
    for (int i = 0; i < h->model.n_layers; i++) {
        const struct adapt_trace_layer *l = &h->model.layers[i];
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
        if (ok && is_conv) ok = l->macs == p * un->weights && un->weights % cout == 0;
        if (ok && is_linear) ok = un->weights == in_n * out_n && l->macs == un->weights;
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
    int64_t cout = l->out[0];
    int64_t ckk = un->weights / cout;                 /* Cin*K*K, or the linear layer's inputs */
    int64_t p = dims_numel(l->out_ndim, l->out) / cout; /* Hout*Wout (1 for linear) */
    g[0].m = cout, g[0].n = batch * p, g[0].k = ckk;
    g[1].m = ckk, g[1].n = batch * p, g[1].k = cout;
    g[2].m = cout, g[2].n = ckk, g[2].k = batch * p;
    if (un->layer == 0) {
        g[1].m = g[1].n = g[1].k = 0;
        return 2;
    }
    return 3;
}
