/* src/policy/graphamp.c: graph-level precision propagation (the allow / infer / deny sets and
 * the upstream pass of src/policy/graphamp.h). */
#include "src/policy/graphamp.h"

#include <stdlib.h>
#include <string.h>

const char *const adapt_gamp_set_names[3] = {"allow", "infer", "deny"};
const char *const adapt_gamp_source_names[3] = {"preset", "kind", "layer"};

#define A ADAPT_GAMP_ALLOW
#define I ADAPT_GAMP_INFER
#define D ADAPT_GAMP_DENY
/* The presets' table, one column per preset (graphamp.h shows the same table). A new layer kind
 * gets its set in every preset here (the assertion below counts the kinds). */
_Static_assert(ADAPT_GRAPH_N_KINDS == 15, "a new layer kind needs its sets in preset_sets");
static const enum adapt_gamp_set preset_sets[3][ADAPT_GRAPH_N_KINDS] = {
    [ADAPT_CONFIG_GRAPH_CONSERVATIVE] =
        {
            [ADAPT_GRAPH_CONV2D] = A,
            [ADAPT_GRAPH_LINEAR] = A,
            [ADAPT_GRAPH_RELU] = I,
            [ADAPT_GRAPH_RELU6] = I,
            [ADAPT_GRAPH_MAXPOOL2D] = I,
            [ADAPT_GRAPH_CONCAT] = I,
            [ADAPT_GRAPH_FLATTEN] = I,
            [ADAPT_GRAPH_DROPOUT] = D,
            [ADAPT_GRAPH_TANH] = D,
            [ADAPT_GRAPH_SIGMOID] = D,
            [ADAPT_GRAPH_HARDSWISH] = D,
            [ADAPT_GRAPH_GELU] = D,
            [ADAPT_GRAPH_ADD] = D,
            [ADAPT_GRAPH_AVGPOOL2D] = D,
            [ADAPT_GRAPH_BATCHNORM2D] = D,
        },
    [ADAPT_CONFIG_GRAPH_DEFAULT] =
        {
            [ADAPT_GRAPH_CONV2D] = A,
            [ADAPT_GRAPH_LINEAR] = A,
            [ADAPT_GRAPH_RELU] = I,
            [ADAPT_GRAPH_RELU6] = I,
            [ADAPT_GRAPH_MAXPOOL2D] = I,
            [ADAPT_GRAPH_CONCAT] = I,
            [ADAPT_GRAPH_FLATTEN] = I,
            [ADAPT_GRAPH_DROPOUT] = I,
            [ADAPT_GRAPH_TANH] = I,
            [ADAPT_GRAPH_SIGMOID] = I,
            [ADAPT_GRAPH_HARDSWISH] = I,
            [ADAPT_GRAPH_GELU] = I,
            [ADAPT_GRAPH_ADD] = I,
            [ADAPT_GRAPH_AVGPOOL2D] = I,
            [ADAPT_GRAPH_BATCHNORM2D] = D,
        },
    [ADAPT_CONFIG_GRAPH_AGGRESSIVE] =
        {
            [ADAPT_GRAPH_CONV2D] = A,
            [ADAPT_GRAPH_LINEAR] = A,
            [ADAPT_GRAPH_RELU] = A,
            [ADAPT_GRAPH_RELU6] = A,
            [ADAPT_GRAPH_MAXPOOL2D] = A,
            [ADAPT_GRAPH_CONCAT] = A,
            [ADAPT_GRAPH_FLATTEN] = I,
            [ADAPT_GRAPH_DROPOUT] = I,
            [ADAPT_GRAPH_TANH] = A,
            [ADAPT_GRAPH_SIGMOID] = A,
            [ADAPT_GRAPH_HARDSWISH] = A,
            [ADAPT_GRAPH_GELU] = A,
            [ADAPT_GRAPH_ADD] = A,
            [ADAPT_GRAPH_AVGPOOL2D] = A,
            [ADAPT_GRAPH_BATCHNORM2D] = A,
        },
};
#undef A
#undef I
#undef D

void adapt_gamp_rules_preset(struct adapt_gamp_rules *r, enum adapt_config_graph_preset preset)
{
    ADAPT_ASSERT(preset >= 0 && preset < 3);
    memset(r, 0, sizeof *r);
    for (int k = 0; k < ADAPT_GRAPH_N_KINDS; k++) {
        r->kind_set[k] = preset_sets[preset][k];
        r->kind_source[k] = ADAPT_GAMP_FROM_PRESET;
    }
}

/* The next comma-separated item of *s, blanks around it removed, into buf; 0 at the end. */
static int next_item(const char **s, char *buf, size_t size)
{
    const char *p = *s;
    if (!*p) return 0;
    const char *e = strchr(p, ',');
    if (!e) e = p + strlen(p);
    *s = *e ? e + 1 : e;
    while (p < e && (*p == ' ' || *p == '\t')) p++;
    while (e > p && (e[-1] == ' ' || e[-1] == '\t')) e--;
    size_t n = (size_t)(e - p);
    if (n >= size) n = size - 1;
    memcpy(buf, p, n);
    buf[n] = '\0';
    return 1;
}

enum adapt_status adapt_gamp_rules_kinds(struct adapt_gamp_rules *r, const char *key,
                                         const char *list, enum adapt_gamp_set set)
{
    char item[ADAPT_GRAPH_NAME_MAX];
    const char *s = list ? list : "";
    while (next_item(&s, item, sizeof item)) {
        int kind = -1;
        for (int k = 0; k < ADAPT_GRAPH_N_KINDS && kind < 0; k++)
            if (!strcmp(item, adapt_graph_kind_name((enum adapt_graph_kind)k))) kind = k;
        if (kind < 0) {
            char names[256] = "";
            for (int k = 0; k < ADAPT_GRAPH_N_KINDS; k++) {
                if (k) strncat(names, ", ", sizeof names - strlen(names) - 1);
                strncat(names, adapt_graph_kind_name((enum adapt_graph_kind)k),
                        sizeof names - strlen(names) - 1);
            }
            return ADAPT_ERROR(ADAPT_EINVAL, "%s = %s: %s%s%s is not a layer kind (kinds: %s)", key,
                               list, item[0] ? "\"" : "an empty name", item, item[0] ? "\"" : "",
                               names);
        }
        if (r->kind_key[kind] && strcmp(r->kind_key[kind], key))
            return ADAPT_ERROR(ADAPT_EINVAL, "%s = %s: kind %s is already in %s", key, list, item,
                               r->kind_key[kind]);
        r->kind_set[kind] = set;
        r->kind_source[kind] = ADAPT_GAMP_FROM_KIND;
        r->kind_key[kind] = key;
    }
    return ADAPT_OK;
}

enum adapt_status adapt_gamp_rules_from_config(struct adapt_gamp_rules *r,
                                               const struct adapt_config *cfg)
{
    enum adapt_status st;
    adapt_gamp_rules_preset(r, cfg->quantization.graph_preset);
    if ((st = adapt_gamp_rules_kinds(r, "quantization.graph_allow", cfg->quantization.graph_allow,
                                     ADAPT_GAMP_ALLOW)) ||
        (st = adapt_gamp_rules_kinds(r, "quantization.graph_infer", cfg->quantization.graph_infer,
                                     ADAPT_GAMP_INFER)) ||
        (st = adapt_gamp_rules_kinds(r, "quantization.graph_deny", cfg->quantization.graph_deny,
                                     ADAPT_GAMP_DENY)))
        return st;
    r->low = cfg->quantization.graph_low;
    r->low_key = "quantization.graph_low";
    r->flt = cfg->quantization.graph_float;
    r->flt_key = "quantization.graph_float";
    return ADAPT_OK;
}

void adapt_gamp_layers_from_graph(const struct adapt_graph *g, struct adapt_gamp_layer *out)
{
    for (int i = 0; i < g->n_nodes; i++) {
        const struct adapt_graph_node *n = &g->nodes[i];
        out[i].name = n->name;
        out[i].kind = n->kind;
        out[i].n_in = n->n_in;
        for (int k = 0; k < ADAPT_GRAPH_MAX_IN; k++) out[i].in[k] = k < n->n_in ? n->in[k] : -1;
        out[i].unit = n->unit;
    }
}

enum adapt_status adapt_gamp_layers_from_net(const struct adapt_net *net,
                                             struct adapt_gamp_layer *out)
{
    for (int i = 0, u = 0; i < net->nnodes; i++) {
        const struct adapt_layer *l = net->nodes[i].layer;
        int kind = -1;
        for (int k = 0; k < ADAPT_GRAPH_N_KINDS && kind < 0; k++)
            if (!strcmp(l->ops->kind, adapt_graph_kind_name((enum adapt_graph_kind)k))) kind = k;
        if (kind < 0)
            return ADAPT_ERROR(ADAPT_EINVAL, "layer %s: kind %s has no graph kind", l->name,
                               l->ops->kind);
        out[i].name = l->name;
        out[i].kind = (enum adapt_graph_kind)kind;
        out[i].n_in = l->nin;
        for (int k = 0; k < ADAPT_GRAPH_MAX_IN; k++)
            out[i].in[k] = k < l->nin ? net->nodes[i].in[k] - 1 : -1; /* activation a: node a-1 */
        out[i].unit = l->is_unit ? u++ : -1;
    }
    return ADAPT_OK;
}

void adapt_gamp_free(struct adapt_gamp *g)
{
    if (!g) return;
    free(g->set);
    free(g->source);
    free(g->low);
    free(g->fmt_unit);
    free(g);
}

/* Applies the names of `list` (key `key`) as per-layer overrides into `set`; `other` is the
 * other list's key, for a name in both. mark[i] records which list named layer i. */
static enum adapt_status layer_overrides(struct adapt_gamp *g, const struct adapt_gamp_layer *l,
                                         const char *key, const char *list, enum adapt_gamp_set set,
                                         unsigned char *mark, int bit, const char *other)
{
    char item[ADAPT_GRAPH_NAME_MAX + 1];
    const char *s = list ? list : "";
    while (next_item(&s, item, sizeof item)) {
        int found = -1;
        for (int i = 0; i < g->n && found < 0; i++)
            if (!strcmp(l[i].name, item)) found = i;
        if (!item[0]) return ADAPT_ERROR(ADAPT_EINVAL, "%s = %s: an empty layer name", key, list);
        if (found < 0)
            return ADAPT_ERROR(ADAPT_EINVAL,
                               "%s = %s: the model has no layer named \"%s\" (adapt-train "
                               "--dry-run lists its layers)",
                               key, list, item);
        if (mark[found] & ~bit)
            return ADAPT_ERROR(ADAPT_EINVAL, "%s = %s: layer %s is also in %s", key, list, item,
                               other);
        mark[found] |= (unsigned char)bit;
        g->set[found] = set;
        g->source[found] = ADAPT_GAMP_FROM_LAYER;
    }
    return ADAPT_OK;
}

enum adapt_status adapt_gamp_resolve(struct adapt_gamp **out, const struct adapt_gamp_layer *l,
                                     int n, const struct adapt_gamp_rules *r)
{
    enum adapt_status st = ADAPT_OK;
    struct adapt_gamp *g = calloc(1, sizeof *g);
    int *first = NULL, *count = NULL, *list = NULL; /* consumers of each layer */
    unsigned char *mark = NULL;
    size_t m = (size_t)n + 1;
    if (!g || !(g->set = calloc(m, sizeof *g->set)) ||
        !(g->source = calloc(m, sizeof *g->source)) || !(g->low = calloc(m, 1)) ||
        !(g->fmt_unit = calloc(m, sizeof *g->fmt_unit)) || !(first = calloc(m, sizeof *first)) ||
        !(count = calloc(m, sizeof *count)) ||
        !(list = calloc(m * ADAPT_GRAPH_MAX_IN, sizeof *list)) || !(mark = calloc(m, 1))) {
        st = ADAPT_ERROR(ADAPT_ENOMEM, "cannot allocate the precision propagation");
        goto free_pass;
    }
    g->n = n;
    for (int i = 0; i < n; i++) {
        g->set[i] = r->kind_set[l[i].kind];
        g->source[i] = r->kind_source[l[i].kind];
    }
    if ((st = layer_overrides(g, l, r->low_key, r->low, ADAPT_GAMP_ALLOW, mark, 1, r->flt_key)) ||
        (st = layer_overrides(g, l, r->flt_key, r->flt, ADAPT_GAMP_DENY, mark, 2, r->low_key)))
        goto free_pass;
    /* consumer lists in network order: count, offsets, fill */
    for (int j = 0; j < n; j++)
        for (int k = 0; k < l[j].n_in; k++)
            if (l[j].in[k] >= 0) count[l[j].in[k]]++;
    for (int i = 0, off = 0; i < n; i++) {
        first[i] = off;
        off += count[i];
        count[i] = 0;
    }
    for (int j = 0; j < n; j++)
        for (int k = 0; k < l[j].n_in; k++) {
            int i = l[j].in[k];
            if (i >= 0 && (count[i] == 0 || list[first[i] + count[i] - 1] != j))
                list[first[i] + count[i]++] = j; /* a layer reading i twice counts once */
        }
    /* the upstream pass: consumers (later layers) are resolved first */
    for (int i = n - 1; i >= 0; i--) {
        int low = g->set[i] == ADAPT_GAMP_ALLOW;
        if (g->set[i] == ADAPT_GAMP_INFER) {
            /* the last layer feeds the loss, which is float32 */
            low = i < n - 1 && count[i] > 0;
            for (int c = 0; c < count[i] && low; c++) low = g->low[list[first[i] + c]];
        }
        g->low[i] = (unsigned char)low;
    }
    /* formats, again consumers first: a unit's own; else the first low consumer's; else
     * (an allowed layer feeding float32 layers) the nearest low unit before, else after */
    for (int i = n - 1; i >= 0; i--) {
        g->fmt_unit[i] = -1;
        if (!g->low[i]) continue;
        if (l[i].unit >= 0) {
            g->fmt_unit[i] = l[i].unit;
            continue;
        }
        for (int c = 0; c < count[i] && g->fmt_unit[i] < 0; c++)
            if (g->low[list[first[i] + c]]) g->fmt_unit[i] = g->fmt_unit[list[first[i] + c]];
        for (int j = i - 1; j >= 0 && g->fmt_unit[i] < 0; j--)
            if (g->low[j] && l[j].unit >= 0) g->fmt_unit[i] = l[j].unit;
        for (int j = i + 1; j < n && g->fmt_unit[i] < 0; j++)
            if (g->low[j] && l[j].unit >= 0) g->fmt_unit[i] = l[j].unit;
        if (g->fmt_unit[i] < 0) g->low[i] = 0; /* no low unit anywhere to take a format from */
    }
    *out = g;
    g = NULL;
free_pass:
    free(mark);
    free(list);
    free(count);
    free(first);
    adapt_gamp_free(g);
    return st;
}
