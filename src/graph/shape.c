/* src/graph/shape.c: keys, shapes and costs of each layer kind (doc/model-format.md).
 *
 * Shapes follow PyTorch: conv2d and pools Hout = floor((H + 2 pad - k) / stride) + 1 (pools pad
 * by at most k / 2, PyTorch's limit); linear reads (features, 1, 1), so a flatten must come
 * before it. Costs per sample, as the engine's layers count them (src/net/layers): conv MACs
 * Hout*Wout*Cout*Cin*k*k, linear in*out; element-wise operations one per output element
 * (activations, add), per input element (batch norm, global average pool) or per input
 * element a window reads (pools: padding is not read); flatten and concat none (copies).
 */
#include <float.h>
#include <stdio.h>
#include <string.h>

#include "src/graph/shape.h"

static const char *const kind_names[ADAPT_GRAPH_N_KINDS] = {
    [ADAPT_GRAPH_CONV2D] = "conv2d",       [ADAPT_GRAPH_LINEAR] = "linear",
    [ADAPT_GRAPH_RELU] = "relu",           [ADAPT_GRAPH_TANH] = "tanh",
    [ADAPT_GRAPH_MAXPOOL2D] = "maxpool2d", [ADAPT_GRAPH_AVGPOOL2D] = "avgpool2d",
    [ADAPT_GRAPH_BATCHNORM2D] = "batchnorm2d", [ADAPT_GRAPH_FLATTEN] = "flatten",
    [ADAPT_GRAPH_ADD] = "add",             [ADAPT_GRAPH_RELU6] = "relu6",
    [ADAPT_GRAPH_SIGMOID] = "sigmoid",     [ADAPT_GRAPH_HARDSWISH] = "hardswish",
    [ADAPT_GRAPH_DROPOUT] = "dropout",     [ADAPT_GRAPH_CONCAT] = "concat",
    [ADAPT_GRAPH_GELU] = "gelu",
};

static const char *const key_names[GK_N] = {
    [GK_OUT] = "out",       [GK_K] = "k",           [GK_STRIDE] = "stride",
    [GK_PAD] = "pad",       [GK_BIAS] = "bias",     [GK_GLOBAL] = "global",
    [GK_IN_CHANNELS] = "in_channels", [GK_IN_FEATURES] = "in_features",
    [GK_EPS] = "eps",       [GK_MOMENTUM] = "momentum", [GK_GROUPS] = "groups",
    [GK_P] = "p",           [GK_DILATION] = "dilation",
    [GK_COUNT_INCLUDE_PAD] = "count_include_pad", [GK_APPROXIMATE] = "approximate",
};

/* The keys each kind accepts (bit per key) and the inputs it reads (0: 2 to ADAPT_GRAPH_MAX_IN). */
#define B(k) (1u << (k))
static const struct {
    unsigned keys;
    int n_in;
} kind_spec[ADAPT_GRAPH_N_KINDS] = {
    [ADAPT_GRAPH_CONV2D] = {B(GK_OUT) | B(GK_K) | B(GK_STRIDE) | B(GK_PAD) | B(GK_BIAS) |
                                B(GK_IN_CHANNELS) | B(GK_GROUPS) | B(GK_DILATION), 1},
    [ADAPT_GRAPH_LINEAR] = {B(GK_OUT) | B(GK_BIAS) | B(GK_IN_FEATURES), 1},
    [ADAPT_GRAPH_RELU] = {0, 1},
    [ADAPT_GRAPH_TANH] = {0, 1},
    [ADAPT_GRAPH_MAXPOOL2D] = {B(GK_K) | B(GK_STRIDE) | B(GK_PAD), 1},
    [ADAPT_GRAPH_AVGPOOL2D] = {B(GK_K) | B(GK_STRIDE) | B(GK_PAD) | B(GK_GLOBAL) |
                                   B(GK_COUNT_INCLUDE_PAD), 1},
    [ADAPT_GRAPH_BATCHNORM2D] = {B(GK_EPS) | B(GK_MOMENTUM), 1},
    [ADAPT_GRAPH_FLATTEN] = {0, 1},
    [ADAPT_GRAPH_ADD] = {0, 2},
    [ADAPT_GRAPH_RELU6] = {0, 1},
    [ADAPT_GRAPH_SIGMOID] = {0, 1},
    [ADAPT_GRAPH_HARDSWISH] = {0, 1},
    [ADAPT_GRAPH_DROPOUT] = {B(GK_P), 1},
    [ADAPT_GRAPH_CONCAT] = {0, 0},
    [ADAPT_GRAPH_GELU] = {B(GK_APPROXIMATE), 1},
};

const char *adapt_graph_kind_name(enum adapt_graph_kind kind)
{
    return kind >= 0 && kind < ADAPT_GRAPH_N_KINDS ? kind_names[kind] : "?";
}

void graph_layer_args_init(struct graph_layer_args *a) { memset(a, 0, sizeof *a); }

int graph_layer_key(const char *name)
{
    for (int k = 0; k < GK_N; k++)
        if (!strcmp(key_names[k], name)) return k;
    return -1;
}

int graph_key_is_real(int key) { return key == GK_EPS || key == GK_MOMENTUM || key == GK_P; }

int graph_key_word(int key, const char *val, const char **expected)
{
    static const char *const approximate[] = {"none", "tanh"}; /* torch.nn.GELU's */
    if (key != GK_APPROXIMATE) return -2;
    for (int i = 0; i < 2; i++)
        if (!strcmp(val, approximate[i])) return i;
    *expected = "none or tanh";
    return -1;
}

/* a * b; a product that leaves int64 sets *ovf (and gives INT64_MAX) */
static int64_t mul(int64_t a, int64_t b, int *ovf)
{
    int64_t r;
    if (__builtin_mul_overflow(a, b, &r)) {
        *ovf = 1;
        return INT64_MAX;
    }
    return r;
}

/* Dimensions are positive ints, so the product of three fits int64 only with care. */
static int64_t numel(const int d[3])
{
    int ovf = 0;
    int64_t n = mul(mul(d[0], d[1], &ovf), d[2], &ovf);
    return ovf ? INT64_MAX : n;
}

static void dims(char *buf, size_t cap, const int d[3])
{
    snprintf(buf, cap, "%dx%dx%d", d[0], d[1], d[2]);
}

/* "layer NAME (line N)" or "the network input" */
static void who(const struct adapt_graph *g, int id, char *buf, size_t cap)
{
    if (id < 0) snprintf(buf, cap, "the network input");
    else snprintf(buf, cap, "%s (line %d)", g->nodes[id].name, g->nodes[id].line);
}

#define FAIL(...) ADAPT_ERROR(ADAPT_EFORMAT, __VA_ARGS__)

/* Integer key in [lo, hi] with default def when absent (required when def < lo). */
static enum adapt_status int_key(const struct adapt_graph_node *n, const struct graph_layer_args *a,
                                 int key, int64_t lo, int64_t hi, int64_t def, int *out,
                                 const char *file)
{
    if (!a->set[key]) {
        if (def < lo)
            return FAIL("%s:%d: %s %s: key '%s' is required", file, n->line,
                        kind_names[n->kind], n->name, key_names[key]);
        *out = (int)def;
        return ADAPT_OK;
    }
    if (a->val[key] < lo || a->val[key] > hi)
        return FAIL("%s:%d: %s %s: %s=%lld, expected %lld..%lld", file, n->line,
                    kind_names[n->kind], n->name, key_names[key], (long long)a->val[key],
                    (long long)lo, (long long)hi);
    *out = (int)a->val[key];
    return ADAPT_OK;
}

/* Window of a conv or pool: output size, or an error naming the input layer. */
static enum adapt_status window(const struct adapt_graph *g, struct adapt_graph_node *n, int in_id,
                                const char *file)
{
    const int *x = n->in_dim[0];
    int64_t ph = (int64_t)x[1] + 2 * n->pad, pw = (int64_t)x[2] + 2 * n->pad;
    int64_t span = (int64_t)(n->k - 1) * (n->dilation > 1 ? n->dilation : 1) + 1;
    if (span > ph || span > pw) {
        char w[96], d[32];
        who(g, in_id, w, sizeof w);
        dims(d, sizeof d, x);
        return FAIL("%s:%d: %s %s: kernel %d (spanning %lld) is larger than its padded input "
                    "(%s from %s, padding %d)",
                    file, n->line, kind_names[n->kind], n->name, n->k, (long long)span, d, w,
                    n->pad);
    }
    int64_t oh = (ph - span) / n->stride + 1, ow = (pw - span) / n->stride + 1;
    if (oh > ADAPT_GRAPH_MAX_DIM || ow > ADAPT_GRAPH_MAX_DIM)
        return FAIL("%s:%d: %s %s: its output plane %lldx%lld is larger than %d in a dimension",
                    file, n->line, kind_names[n->kind], n->name, (long long)oh, (long long)ow,
                    ADAPT_GRAPH_MAX_DIM);
    n->out_dim[1] = (int)oh;
    n->out_dim[2] = (int)ow;
    return ADAPT_OK;
}

/* Input cells the windows of one axis read: the sum over outputs o < no of the length of
 * [o s - p, o s - p + k) within [0, n). The windows from o0 = ceil(p / s) to
 * o1 = floor((n - k + p) / s) lie inside and read k each; only those before and after them,
 * at most about (p + k) / s + 2, are summed one by one. */
static int64_t axis_reads(int n, int no, int k, int s, int p)
{
    int64_t o0 = ((int64_t)p + s - 1) / s, o1 = n - k + p >= 0 ? ((int64_t)n - k + p) / s : -1;
    if (o0 > no) o0 = no;
    if (o1 > (int64_t)no - 1) o1 = (int64_t)no - 1;
    int64_t r = o1 >= o0 ? (o1 - o0 + 1) * k : 0;
    for (int64_t o = 0; o < no; o++) {
        if (o >= o0 && o <= o1) o = o1 + 1;
        if (o >= no) break;
        int64_t a = o * s - p, b = a + k;
        r += (b < n ? b : n) - (a > 0 ? a : 0);
    }
    return r;
}

enum adapt_status graph_resolve_node(struct adapt_graph *g, struct adapt_graph_node *n,
                                     const struct graph_layer_args *a, const char *file)
{
    const char *kn = kind_names[n->kind];
    for (int k = 0; k < GK_N; k++)
        if (a->set[k] && !(kind_spec[n->kind].keys & B(k)))
            return FAIL("%s:%d: %s %s: key '%s' does not apply to %s layers", file, n->line, kn,
                        n->name, key_names[k], kn);
    int want = kind_spec[n->kind].n_in;
    n->n_in = a->n_in ? a->n_in : 1;
    if (a->n_in) memcpy(n->in, a->in, sizeof n->in);
    else n->in[0] = a->default_in;
    if (!want && (n->n_in < 2 || n->n_in > ADAPT_GRAPH_MAX_IN))
        return FAIL("%s:%d: %s %s reads 2 to %d inputs, in= names %d", file, n->line, kn,
                    n->name, ADAPT_GRAPH_MAX_IN, n->n_in);
    if (want && n->n_in != want)
        return FAIL("%s:%d: %s %s reads %d input%s, in= names %d", file, n->line, kn, n->name,
                    want, want == 1 ? "" : "s", n->n_in);
    for (int i = 0; i < n->n_in; i++) {
        const int *d = n->in[i] < 0 ? g->in_chw : g->nodes[n->in[i]].out_dim;
        memcpy(n->in_dim[i], d, sizeof n->in_dim[i]);
    }
    const int *x = n->in_dim[0];
    memcpy(n->out_dim, x, sizeof n->out_dim);
    char w[96], d[32], e[32];
    enum adapt_status st = ADAPT_OK;
    int ovf = 0; /* set by mul() */
    switch (n->kind) {
    case ADAPT_GRAPH_CONV2D: {
        int in_c = x[0];
        if ((st = int_key(n, a, GK_OUT, 1, 1 << 20, 0, &n->out, file)) ||
            (st = int_key(n, a, GK_K, 1, 1024, 0, &n->k, file)) ||
            (st = int_key(n, a, GK_STRIDE, 1, 1024, 1, &n->stride, file)) ||
            (st = int_key(n, a, GK_PAD, 0, 1024, 0, &n->pad, file)) ||
            (st = int_key(n, a, GK_BIAS, 0, 1, 1, &n->bias, file)) ||
            (st = int_key(n, a, GK_IN_CHANNELS, 1, 1 << 20, in_c, &in_c, file)) ||
            (st = int_key(n, a, GK_GROUPS, 1, 1 << 20, 1, &n->groups, file)) ||
            (st = int_key(n, a, GK_DILATION, 1, 1024, 1, &n->dilation, file)))
            return st;
        if (in_c != x[0]) {
            who(g, n->in[0], w, sizeof w);
            return FAIL("%s:%d: conv2d %s expects %d input channels, but %s gives %d", file,
                        n->line, n->name, in_c, w, x[0]);
        }
        if (x[0] % n->groups || n->out % n->groups)
            return FAIL("%s:%d: conv2d %s: groups=%d must divide its %d input and %d output "
                        "channels",
                        file, n->line, n->name, n->groups, x[0], n->out);
        if ((st = window(g, n, n->in[0], file))) return st;
        n->out_dim[0] = n->out;
        n->weights = mul(mul(mul(n->out, x[0] / n->groups, &ovf), n->k, &ovf), n->k, &ovf);
        if (ovf || n->weights > ADAPT_GRAPH_MAX_NUMEL)
            return FAIL("%s:%d: conv2d %s: its weight tensor %dx%dx%dx%d has more than %d "
                        "elements (the engine's bound on one tensor)",
                        file, n->line, n->name, n->out, x[0] / n->groups, n->k, n->k,
                        ADAPT_GRAPH_MAX_NUMEL);
        n->params = n->weights + (n->bias ? n->out : 0);
        n->macs = mul(mul(n->out_dim[1], n->out_dim[2], &ovf), n->weights, &ovf);
        n->unit = g->n_units++;
        break;
    }
    case ADAPT_GRAPH_LINEAR: {
        int64_t f = numel(x);
        int in_f = 0;
        if (x[1] != 1 || x[2] != 1) {
            who(g, n->in[0], w, sizeof w);
            dims(d, sizeof d, x);
            return FAIL("%s:%d: linear %s reads features, but %s gives %s (put a flatten "
                        "before it)",
                        file, n->line, n->name, w, d);
        }
        if ((st = int_key(n, a, GK_OUT, 1, 1 << 24, 0, &n->out, file)) ||
            (st = int_key(n, a, GK_BIAS, 0, 1, 1, &n->bias, file)) ||
            (st = int_key(n, a, GK_IN_FEATURES, 1, INT32_MAX, f, &in_f, file)))
            return st;
        if (in_f != f) {
            who(g, n->in[0], w, sizeof w);
            return FAIL("%s:%d: linear %s expects %d input features, but %s gives %lld", file,
                        n->line, n->name, in_f, w, (long long)f);
        }
        n->out_dim[0] = n->out;
        n->out_dim[1] = n->out_dim[2] = 1;
        n->weights = mul(f, n->out, &ovf);
        if (ovf || n->weights > ADAPT_GRAPH_MAX_NUMEL)
            return FAIL("%s:%d: linear %s: its weight tensor %dx%lld has more than %d elements "
                        "(the engine's bound on one tensor)",
                        file, n->line, n->name, n->out, (long long)f, ADAPT_GRAPH_MAX_NUMEL);
        n->params = n->weights + (n->bias ? n->out : 0);
        n->macs = n->weights;
        n->unit = g->n_units++;
        break;
    }
    case ADAPT_GRAPH_GELU:
        n->approximate = a->set[GK_APPROXIMATE] ? (int)a->val[GK_APPROXIMATE] : 0;
        n->elementwise = numel(n->out_dim);
        break;
    case ADAPT_GRAPH_RELU:
    case ADAPT_GRAPH_RELU6:
    case ADAPT_GRAPH_SIGMOID:
    case ADAPT_GRAPH_HARDSWISH:
    case ADAPT_GRAPH_TANH:
        n->elementwise = numel(n->out_dim);
        break;
    case ADAPT_GRAPH_MAXPOOL2D:
    case ADAPT_GRAPH_AVGPOOL2D: {
        int global = 0;
        if (n->kind == ADAPT_GRAPH_AVGPOOL2D &&
            ((st = int_key(n, a, GK_GLOBAL, 0, 1, 0, &global, file)) ||
             (st = int_key(n, a, GK_COUNT_INCLUDE_PAD, 0, 1, 1, &n->count_include_pad, file))))
            return st;
        if (global) {
            if (a->set[GK_K] || a->set[GK_STRIDE] || a->set[GK_PAD] ||
                a->set[GK_COUNT_INCLUDE_PAD])
                return FAIL("%s:%d: avgpool2d %s: global=1 takes no k, stride, pad or "
                            "count_include_pad",
                            file, n->line, n->name);
            n->k = 0;
            n->out_dim[1] = n->out_dim[2] = 1;
            n->elementwise = numel(x);
            break;
        }
        if ((st = int_key(n, a, GK_K, 1, 1024, 0, &n->k, file)) ||
            (st = int_key(n, a, GK_STRIDE, 1, 1024, n->k, &n->stride, file)) ||
            (st = int_key(n, a, GK_PAD, 0, 1024, 0, &n->pad, file)))
            return st;
        if (n->pad > n->k / 2)
            return FAIL("%s:%d: %s %s: pad=%d is more than half the kernel (k=%d): pools pad by "
                        "at most k/2 = %d, as PyTorch",
                        file, n->line, kn, n->name, n->pad, n->k, n->k / 2);
        if ((st = window(g, n, n->in[0], file))) return st;
        n->elementwise =
            mul(mul(x[0], axis_reads(x[1], n->out_dim[1], n->k, n->stride, n->pad), &ovf),
                axis_reads(x[2], n->out_dim[2], n->k, n->stride, n->pad), &ovf);
        break;
    }
    case ADAPT_GRAPH_BATCHNORM2D:
        /* the engine computes in single precision: its eps, (float)eps, must be a normal
         * float (a smaller one rounds to 0 or loses precision as a denormal) */
        n->eps = a->set[GK_EPS] ? a->real[GK_EPS] : 1e-5;
        n->momentum = a->set[GK_MOMENTUM] ? a->real[GK_MOMENTUM] : 0.1;
        if (!(n->eps > 0 && n->eps < 1) || (float)n->eps < FLT_MIN || (float)n->eps >= 1.0f)
            return FAIL("%s:%d: batchnorm2d %s: eps=%g, expected %g <= eps < 1 in single "
                        "precision (the engine's)",
                        file, n->line, n->name, n->eps, (double)FLT_MIN);
        if (!(n->momentum >= 0 && n->momentum <= 1))
            return FAIL("%s:%d: batchnorm2d %s: momentum=%g, expected 0 <= momentum <= 1", file,
                        n->line, n->name, n->momentum);
        n->params = 2 * (int64_t)x[0];
        n->elementwise = numel(x);
        break;
    case ADAPT_GRAPH_DROPOUT:
        /* the engine's p is (float)p */
        n->p = a->set[GK_P] ? a->real[GK_P] : 0.5;
        if (!(n->p >= 0 && n->p < 1))
            return FAIL("%s:%d: dropout %s: p=%g, expected 0 <= p < 1", file, n->line, n->name,
                        n->p);
        if ((float)n->p >= 1.0f)
            return FAIL("%s:%d: dropout %s: p=%.17g rounds to 1 in single precision (the "
                        "engine's), expected 0 <= p <= %.9g (the float below 1)",
                        file, n->line, n->name, n->p, (double)(1.0f - FLT_EPSILON / 2));
        n->elementwise = numel(x);
        break;
    case ADAPT_GRAPH_CONCAT: {
        int64_t c = 0;
        for (int i = 0; i < n->n_in; i++) {
            if (n->in_dim[i][1] != x[1] || n->in_dim[i][2] != x[2]) {
                char w2[96];
                who(g, n->in[0], w, sizeof w);
                who(g, n->in[i], w2, sizeof w2);
                dims(d, sizeof d, x);
                dims(e, sizeof e, n->in_dim[i]);
                return FAIL("%s:%d: concat %s: %s gives %s but %s gives %s (the planes must be "
                            "equal)",
                            file, n->line, n->name, w, d, w2, e);
            }
            c += n->in_dim[i][0];
        }
        if (c > (1 << 30))
            return FAIL("%s:%d: concat %s: %lld channels", file, n->line, n->name, (long long)c);
        n->out_dim[0] = (int)c;
        break;
    }
    case ADAPT_GRAPH_FLATTEN:
        n->out_dim[0] = (int)numel(x);
        n->out_dim[1] = n->out_dim[2] = 1;
        break;
    case ADAPT_GRAPH_ADD:
        if (memcmp(n->in_dim[0], n->in_dim[1], sizeof n->in_dim[0])) {
            char w2[96];
            who(g, n->in[0], w, sizeof w);
            who(g, n->in[1], w2, sizeof w2);
            dims(d, sizeof d, n->in_dim[0]);
            dims(e, sizeof e, n->in_dim[1]);
            return FAIL("%s:%d: add %s: %s gives %s but %s gives %s (the shapes must be equal)",
                        file, n->line, n->name, w, d, w2, e);
        }
        n->elementwise = numel(n->out_dim);
        break;
    default:
        return FAIL("%s:%d: unknown layer kind", file, n->line);
    }
    if (ovf)
        return FAIL("%s:%d: %s %s: its operation count overflows 64 bits", file, n->line, kn,
                    n->name);
    if (n->out_dim[1] > ADAPT_GRAPH_MAX_DIM || n->out_dim[2] > ADAPT_GRAPH_MAX_DIM)
        return FAIL("%s:%d: %s %s: its output plane %dx%d is larger than %d in a dimension",
                    file, n->line, kn, n->name, n->out_dim[1], n->out_dim[2],
                    ADAPT_GRAPH_MAX_DIM);
    if (numel(n->out_dim) > ADAPT_GRAPH_MAX_NUMEL) {
        dims(d, sizeof d, n->out_dim);
        return FAIL("%s:%d: %s %s: its output %s has %lld elements per sample, more than %d "
                    "(the engine's bound on one tensor)",
                    file, n->line, kn, n->name, d, (long long)numel(n->out_dim),
                    ADAPT_GRAPH_MAX_NUMEL);
    }
    return ADAPT_OK;
}

enum adapt_status graph_check_output(struct adapt_graph *g, const char *file)
{
    if (!g->n_nodes) return FAIL("%s: describes no layer", file);
    const struct adapt_graph_node *last = &g->nodes[g->n_nodes - 1];
    if (last->out_dim[0] != g->classes || last->out_dim[1] != 1 || last->out_dim[2] != 1) {
        char d[32];
        dims(d, sizeof d, last->out_dim);
        return FAIL("%s:%d: the last layer, %s, gives %s, but the network must end in %d "
                    "class scores (out=classes)",
                    file, last->line, last->name, d, g->classes);
    }
    if (!g->n_units) return FAIL("%s: has no conv2d or linear layer (no precision unit)", file);
    g->params = g->macs = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const struct adapt_graph_node *n = &g->nodes[i];
        if (__builtin_add_overflow(g->params, n->params, &g->params) ||
            __builtin_add_overflow(g->macs, n->macs, &g->macs))
            return FAIL("%s:%d: %s %s: the network's total parameters or MACs overflow 64 bits",
                        file, n->line, kind_names[n->kind], n->name);
    }
    return ADAPT_OK;
}

void adapt_graph_print(const struct adapt_graph *g, FILE *f)
{
    fprintf(f, "model %s (%s%s%s), input %dx%dx%d, %d classes\n", g->name, g->file,
            g->args[0] ? ", " : "", g->args, g->in_chw[0], g->in_chw[1], g->in_chw[2],
            g->classes);
    fprintf(f, "  %-26s %-12s %-26s %-12s %12s %14s\n", "layer", "kind", "input", "output",
            "params", "MACs/sample");
    for (int i = 0; i < g->n_nodes; i++) {
        const struct adapt_graph_node *n = &g->nodes[i];
        char in[ADAPT_GRAPH_MAX_IN * (ADAPT_GRAPH_NAME_MAX + 1)] = "", d[32];
        for (int k = 0; k < n->n_in; k++) {
            size_t len = strlen(in);
            snprintf(in + len, sizeof in - len, "%s%s", k ? "," : "",
                     n->in[k] < 0 ? "input" : g->nodes[n->in[k]].name);
        }
        dims(d, sizeof d, n->out_dim);
        fprintf(f, "  %-26s %-12s %-26s %-12s %12lld %14lld%s\n", n->name, kind_names[n->kind],
                in, d, (long long)n->params, (long long)n->macs, n->unit >= 0 ? "  unit" : "");
    }
    fprintf(f, "  total: %d layers, %d precision units, %lld parameters, %lld MACs per sample\n",
            g->n_nodes, g->n_units, (long long)g->params, (long long)g->macs);
}
