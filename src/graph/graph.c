/* src/graph/graph.c: reading a model description (doc/model-format.md) into a resolved graph.
 *
 * Two passes over the lines: the first strips comments and pairs every
 * `repeat` and `if` with its `else` and `end`; the second runs the lines,
 * repeating and skipping blocks, and appends one node per layer line with
 * its shapes and costs resolved from its inputs (src/graph/shape.c). Any
 * error stops the run with the file, the line and what was expected.
 */
#include <ctype.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/fileio.h"
#include "src/graph/internal.h"
#include "src/graph/shape.h"

struct line {
    int no;      /* 1-based line number */
    char *text;  /* comment and surrounding blanks stripped; "" for a blank line */
    int els;     /* if: index of its else, or -1 */
    int end;     /* repeat / if / else: index of the matching end */
    int block;   /* 1: a repeat or if line */
};

/* A layer or a label: one name space, so that in= never has to choose between them. */
struct name {
    char name[ADAPT_GRAPH_NAME_MAX];
    int label; /* 1: a label, 0: a layer */
    int node;  /* the layer, or the node the label names (-1: the network input) */
    int line;  /* where it was made (a label: where it was last set) */
};

struct ctx {
    const char *file;
    struct line *lines;
    int n_lines;
    struct graph_vars vars;
    struct adapt_graph *g;
    int cap_nodes;
    /* layers and labels by name: the names in order, and an open-addressing table of indices
     * into them (-1: a free slot; at most half full) */
    struct name *names;
    int n_names, cap_names, n_labels;
    int *slots;
    unsigned n_slots; /* a power of two, or 0 */
    int cur;          /* the node the next layer reads by default; -1: the network input */
    int have_input, have_loss, n_layers_seen;
    int line;         /* the line being run, for messages */
    long work;        /* of the lines run so far (ADAPT_GRAPH_MAX_WORK) */
    /* parameter settings given by the caller */
    int n_args;
    char arg_name[GRAPH_MAX_VARS][ADAPT_GRAPH_NAME_MAX];
    int64_t arg_value[GRAPH_MAX_VARS];
    int arg_used[GRAPH_MAX_VARS];
};

int graph_vars_get(const struct graph_vars *vars, const char *name, int64_t *v)
{
    for (int i = vars->n - 1; i >= 0; i--)
        if (!strcmp(vars->name[i], name)) {
            *v = vars->value[i];
            return 1;
        }
    return 0;
}

__attribute__((format(printf, 2, 3))) static enum adapt_status err_at(struct ctx *c,
                                                                      const char *fmt, ...)
{
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return ADAPT_ERROR(ADAPT_EFORMAT, "%s:%d: %s", c->file, c->line, msg);
}

static enum adapt_status vars_set(struct ctx *c, const char *name, int64_t v)
{
    struct graph_vars *vs = &c->vars;
    for (int i = 0; i < vs->n; i++)
        if (!strcmp(vs->name[i], name)) {
            vs->value[i] = v;
            return ADAPT_OK;
        }
    if (vs->n == GRAPH_MAX_VARS) return err_at(c, "more than %d names defined", GRAPH_MAX_VARS);
    snprintf(vs->name[vs->n], sizeof vs->name[0], "%s", name);
    vs->value[vs->n++] = v;
    return ADAPT_OK;
}

static int is_ident(const char *s)
{
    if (!(isalpha((unsigned char)*s) || *s == '_')) return 0;
    for (s++; *s; s++)
        if (!(isalnum((unsigned char)*s) || *s == '_')) return 0;
    return 1;
}

static enum adapt_status eval(struct ctx *c, const char *s, int64_t *v)
{
    char err[300];
    if (!graph_eval(s, &c->vars, v, err, sizeof err)) return err_at(c, "%s", err);
    return ADAPT_OK;
}

/* Copies src into dst (cap bytes) with every {expr} replaced by its value. */
static enum adapt_status interpolate(struct ctx *c, const char *src, char *dst, size_t cap,
                                     const char *what)
{
    size_t n = 0;
    for (const char *p = src; *p;) {
        char piece[32];
        const char *add = piece;
        size_t len;
        if (*p == '{') {
            const char *q = strchr(p, '}');
            if (!q) return err_at(c, "%s '%s': '{' without its '}'", what, src);
            char expr[128];
            if ((size_t)(q - p - 1) >= sizeof expr)
                return err_at(c, "%s '%s': expression in {} too long", what, src);
            memcpy(expr, p + 1, (size_t)(q - p - 1));
            expr[q - p - 1] = 0;
            int64_t v;
            enum adapt_status st = eval(c, expr, &v);
            if (st) return st;
            snprintf(piece, sizeof piece, "%lld", (long long)v);
            len = strlen(piece);
            p = q + 1;
        } else if (*p == '}') {
            return err_at(c, "%s '%s': '}' without its '{'", what, src);
        } else {
            add = p;
            len = 1;
            p++;
        }
        if (n + len >= cap)
            return err_at(c, "%s '%.200s' is too long (at most %zu characters)", what, src,
                          cap - 1);
        memcpy(dst + n, add, len);
        n += len;
    }
    dst[n] = 0;
    if (!n) return err_at(c, "%s is empty", what);
    return ADAPT_OK;
}

/* FNV-1a */
static unsigned name_hash(const char *s)
{
    unsigned h = 2166136261u;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

/* The layer or label called name, or NULL. */
static struct name *name_find(const struct ctx *c, const char *name)
{
    if (!c->n_slots) return NULL;
    for (unsigned i = name_hash(name) & (c->n_slots - 1);; i = (i + 1) & (c->n_slots - 1)) {
        int e = c->slots[i];
        if (e < 0) return NULL;
        if (!strcmp(c->names[e].name, name)) return &c->names[e];
    }
}

/* Adds a name that name_find does not know. */
static enum adapt_status name_add(struct ctx *c, const char *name, int label, int node)
{
    if (c->n_names == c->cap_names) {
        int nc = c->cap_names ? 2 * c->cap_names : 64;
        struct name *e = realloc(c->names, (size_t)nc * sizeof *e);
        if (!e) return ADAPT_ERROR(ADAPT_ENOMEM, "%s: out of memory", c->file);
        c->names = e;
        c->cap_names = nc;
    }
    if (2 * ((unsigned)c->n_names + 1) > c->n_slots) {
        unsigned ns = c->n_slots ? 2 * c->n_slots : 128;
        int *s = malloc(ns * sizeof *s);
        if (!s) return ADAPT_ERROR(ADAPT_ENOMEM, "%s: out of memory", c->file);
        free(c->slots);
        c->slots = s;
        c->n_slots = ns;
        for (unsigned i = 0; i < ns; i++) s[i] = -1;
        for (int e = 0; e < c->n_names; e++) {
            unsigned i = name_hash(c->names[e].name) & (ns - 1);
            while (s[i] >= 0) i = (i + 1) & (ns - 1);
            s[i] = e;
        }
    }
    struct name *e = &c->names[c->n_names];
    snprintf(e->name, sizeof e->name, "%s", name);
    e->label = label;
    e->node = node;
    e->line = c->line;
    unsigned i = name_hash(name) & (c->n_slots - 1);
    while (c->slots[i] >= 0) i = (i + 1) & (c->n_slots - 1);
    c->slots[i] = c->n_names++;
    return ADAPT_OK;
}

/* -1 for "input", else the node a layer or label of that name reads; -2 when unknown. */
static int lookup(const struct ctx *c, const char *name)
{
    if (!strcmp(name, "input")) return -1;
    const struct name *e = name_find(c, name);
    return e ? e->node : -2;
}

static enum adapt_status set_label(struct ctx *c, const char *name, int node)
{
    struct name *e = name_find(c, name);
    if (e && !e->label)
        return err_at(c, "label '%s': a layer has that name (line %d); a label and a layer "
                         "cannot share a name",
                      name, e->line);
    if (e) {
        e->node = node;
        e->line = c->line;
        return ADAPT_OK;
    }
    if (c->n_labels == ADAPT_GRAPH_MAX_LABELS)
        return err_at(c, "label '%s': more than %d label names", name, ADAPT_GRAPH_MAX_LABELS);
    c->n_labels++;
    return name_add(c, name, 1, node);
}

/* Splits s at blanks outside {} in place; returns the number of words (at most cap). */
static int split(char *s, char **w, int cap)
{
    int n = 0;
    for (char *p = s; *p;) {
        while (*p == ' ' || *p == '\t') *p++ = 0;
        if (!*p) break;
        if (n == cap) return cap + 1;
        w[n++] = p;
        for (int depth = 0; *p && (depth || (*p != ' ' && *p != '\t')); p++)
            depth += *p == '{' ? 1 : *p == '}' && depth ? -1 : 0;
    }
    return n;
}

/* "NAME = EXPR" after a keyword: the name and the expression text. */
static enum adapt_status name_eq_expr(struct ctx *c, const char *rest, const char *kw,
                                      char *name, const char **expr)
{
    const char *eq = strchr(rest, '=');
    size_t n = eq ? (size_t)(eq - rest) : 0;
    while (n && (rest[n - 1] == ' ' || rest[n - 1] == '\t')) n--;
    if (!eq || !n || n >= ADAPT_GRAPH_NAME_MAX)
        return err_at(c, "expected '%s NAME = EXPRESSION'", kw);
    memcpy(name, rest, n);
    name[n] = 0;
    if (!is_ident(name))
        return err_at(c, "'%s' is not a name (letters, digits and '_', not first a digit)", name);
    if (!strcmp(name, "classes") || !strcmp(name, "input"))
        return err_at(c, "'%s' is predefined and cannot be set", name);
    *expr = eq + 1;
    return ADAPT_OK;
}

static enum adapt_status run_block(struct ctx *c, int from, int to);

/* Counts the work of running a line (its length plus one) or a repeat pass (1) against
 * ADAPT_GRAPH_MAX_WORK. */
static enum adapt_status work(struct ctx *c, size_t n)
{
    c->work += (long)n;
    if (c->work > ADAPT_GRAPH_MAX_WORK)
        return err_at(c, "the description runs more than %d characters of lines (each line "
                         "counts its length plus one each time it runs, each repeat pass one): "
                         "is a repeat's range too large?",
                      ADAPT_GRAPH_MAX_WORK);
    return ADAPT_OK;
}

static enum adapt_status run_repeat(struct ctx *c, int i, const char *rest)
{
    char var[ADAPT_GRAPH_NAME_MAX];
    const char *range;
    enum adapt_status st = name_eq_expr(c, rest, "repeat", var, &range);
    if (st) return st;
    const char *dots = strstr(range, "..");
    if (!dots) return err_at(c, "expected 'repeat %s = FIRST..LAST'", var);
    char a[128];
    if ((size_t)(dots - range) >= sizeof a) return err_at(c, "range too long");
    memcpy(a, range, (size_t)(dots - range));
    a[dots - range] = 0;
    int64_t lo, hi;
    if ((st = eval(c, a, &lo)) || (st = eval(c, dots + 2, &hi))) return st;
    if (hi >= lo && (uint64_t)hi - (uint64_t)lo >= ADAPT_GRAPH_MAX_REPEAT)
        return err_at(c, "repeat %s = %lld..%lld makes more than %d passes (the bound of one "
                         "repeat)",
                      var, (long long)lo, (long long)hi, ADAPT_GRAPH_MAX_REPEAT);
    int64_t passes = hi >= lo ? hi - lo + 1 : 0;
    for (int64_t k = 0; k < passes; k++) {
        c->line = c->lines[i].no;
        if ((st = work(c, 1)) || (st = vars_set(c, var, lo + k))) return st;
        if ((st = run_block(c, i + 1, c->lines[i].end))) return st;
    }
    return ADAPT_OK;
}

static enum adapt_status run_if(struct ctx *c, int i, const char *rest)
{
    int64_t v;
    enum adapt_status st = eval(c, rest, &v);
    if (st) return st;
    const struct line *l = &c->lines[i];
    if (v) return run_block(c, i + 1, l->els >= 0 ? l->els : l->end);
    if (l->els >= 0) return run_block(c, l->els + 1, l->end);
    return ADAPT_OK;
}

static enum adapt_status run_require(struct ctx *c, const char *rest)
{
    const char *q = strchr(rest, '"');
    size_t len = strlen(rest);
    if (!q || len < 2 || rest[len - 1] != '"' || q == rest + len - 1)
        return err_at(c, "expected 'require EXPRESSION \"message\"'");
    char expr[256], msg[200];
    if ((size_t)(q - rest) >= sizeof expr || (size_t)(rest + len - 1 - q) >= sizeof msg)
        return err_at(c, "require line too long");
    memcpy(expr, rest, (size_t)(q - rest));
    expr[q - rest] = 0;
    memcpy(msg, q + 1, (size_t)(rest + len - 2 - q));
    msg[rest + len - 2 - q] = 0;
    int64_t v;
    enum adapt_status st = eval(c, expr, &v);
    if (st) return st;
    if (!v) return err_at(c, "requirement failed: %s", msg);
    return ADAPT_OK;
}

static enum adapt_status run_param(struct ctx *c, const char *rest)
{
    char name[ADAPT_GRAPH_NAME_MAX];
    const char *expr;
    enum adapt_status st = name_eq_expr(c, rest, "param", name, &expr);
    if (st) return st;
    int64_t v;
    if (graph_vars_get(&c->vars, name, &v))
        return err_at(c, "'%s' is already defined", name);
    if ((st = eval(c, expr, &v))) return st;
    for (int a = 0; a < c->n_args; a++)
        if (!strcmp(c->arg_name[a], name)) {
            v = c->arg_value[a];
            c->arg_used[a] = 1;
        }
    return vars_set(c, name, v);
}

static enum adapt_status run_input(struct ctx *c, char *rest)
{
    char *w[4];
    if (c->have_input) return err_at(c, "a second 'input' line");
    if (c->n_layers_seen) return err_at(c, "'input' must come before the first layer");
    if (split(rest, w, 4) != 3) return err_at(c, "expected 'input CHANNELS HEIGHT WIDTH'");
    int *chw = c->g->in_chw;
    for (int d = 0; d < 3; d++) {
        int64_t v;
        enum adapt_status st = eval(c, w[d], &v);
        if (st) return st;
        if (v < 1 || v > ADAPT_GRAPH_MAX_DIM)
            return err_at(c, "input size '%s' must be between 1 and %d", w[d], ADAPT_GRAPH_MAX_DIM);
        chw[d] = (int)v;
    }
    int64_t numel = (int64_t)chw[0] * chw[1] * chw[2];
    if (numel > ADAPT_GRAPH_MAX_NUMEL)
        return err_at(c, "input %dx%dx%d has %lld elements per sample, more than %d (the "
                         "engine's bound on one tensor)",
                      chw[0], chw[1], chw[2], (long long)numel, ADAPT_GRAPH_MAX_NUMEL);
    c->have_input = 1;
    return ADAPT_OK;
}

static enum adapt_status new_node(struct ctx *c, struct adapt_graph_node **out)
{
    struct adapt_graph *g = c->g;
    if (g->n_nodes == ADAPT_GRAPH_MAX_NODES)
        return err_at(c, "more than %d layers", ADAPT_GRAPH_MAX_NODES);
    if (g->n_nodes == c->cap_nodes) {
        int nc = c->cap_nodes ? 2 * c->cap_nodes : 32;
        struct adapt_graph_node *n = realloc(g->nodes, (size_t)nc * sizeof *n);
        if (!n) return ADAPT_ERROR(ADAPT_ENOMEM, "%s: out of memory", c->file);
        g->nodes = n;
        c->cap_nodes = nc;
    }
    *out = &g->nodes[g->n_nodes];
    memset(*out, 0, sizeof **out);
    return ADAPT_OK;
}

/* KIND NAME key=value ... */
static enum adapt_status run_layer(struct ctx *c, enum adapt_graph_kind kind, char **w, int nw)
{
    enum adapt_status st;
    if (!c->have_input) return err_at(c, "the 'input' line must come before the first layer");
    if (nw < 2) return err_at(c, "expected '%s NAME [key=value ...]'", w[0]);
    c->n_layers_seen++;
    struct adapt_graph_node *n = NULL;
    if ((st = new_node(c, &n))) return st;
    n->line = c->line;
    n->kind = kind;
    n->unit = -1;
    _Static_assert(ADAPT_GRAPH_LAYER_NAME_MAX < sizeof n->name, "a layer name fits a node");
    if ((st = interpolate(c, w[1], n->name, ADAPT_GRAPH_LAYER_NAME_MAX + 1, "layer name")))
        return st;
    if (!strcmp(n->name, "input")) return err_at(c, "'input' is the network input's name");
    const struct name *prev = name_find(c, n->name);
    if (prev && !prev->label)
        return err_at(c, "layer name '%s' is already used (line %d)", n->name, prev->line);
    if (prev)
        return err_at(c, "layer name '%s' is a label's (line %d); a layer and a label cannot "
                         "share a name",
                      n->name, prev->line);
    struct graph_layer_args la;
    graph_layer_args_init(&la);
    la.default_in = c->cur;
    for (int i = 2; i < nw; i++) {
        char *eq = strchr(w[i], '=');
        if (!eq || eq == w[i] || !eq[1])
            return err_at(c, "expected key=value, got '%s'", w[i]);
        *eq = 0;
        const char *key = w[i], *val = eq + 1;
        if (!strcmp(key, "in")) {
            if (la.n_in) return err_at(c, "key 'in' given twice");
            char list[1024]; /* a line has at most 1000 characters */
            snprintf(list, sizeof list, "%s", val);
            for (char *save = NULL, *t = strtok_r(list, ",", &save); t;
                 t = strtok_r(NULL, ",", &save)) {
                char name[ADAPT_GRAPH_NAME_MAX];
                if ((st = interpolate(c, t, name, sizeof name, "input name"))) return st;
                int id = lookup(c, name);
                if (id == -2)
                    return err_at(c, "in=%s: no earlier layer or label is called '%s'", val, name);
                if (la.n_in == ADAPT_GRAPH_MAX_IN) {
                    char most[16];
                    snprintf(most, sizeof most, "%d", ADAPT_GRAPH_MAX_IN);
                    return err_at(c, "in=%.200s: at most %s inputs", val, most);
                }
                la.in[la.n_in++] = id;
            }
            if (!la.n_in) return err_at(c, "in= names no layer");
            continue;
        }
        int k = graph_layer_key(key);
        if (k < 0) return err_at(c, "unknown key '%s' (see doc/model-format.md)", key);
        if (la.set[k]) return err_at(c, "key '%s' given twice", key);
        const char *words = NULL;
        int word = graph_key_word(k, val, &words);
        if (word == -1) {
            char kv[128];
            snprintf(kv, sizeof kv, "%.60s=%.60s", key, val);
            return err_at(c, "%s: expected %s", kv, words);
        }
        if (word >= 0) {
            la.val[k] = word;
        } else if (graph_key_is_real(k)) {
            /* as strtod reads it (hexadecimal too); a value outside double's range reads as 0, a
             * denormal or an infinity, which the kind's range check refuses with the range */
            char *end;
            double d = strtod(val, &end);
            if (end == val || *end || !(d == d))
                return err_at(c, "%s=%s: expected a number", key, val);
            la.real[k] = d;
        } else {
            if ((st = eval(c, val, &la.val[k]))) return st;
        }
        la.set[k] = 1;
    }
    if ((st = graph_resolve_node(c->g, n, &la, c->file))) return st;
    c->g->n_nodes++;
    c->cur = c->g->n_nodes - 1;
    return name_add(c, n->name, 0, c->cur);
}

static enum adapt_status run_line(struct ctx *c, int i)
{
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", c->lines[i].text);
    char *rest = buf;
    while (*rest && *rest != ' ' && *rest != '\t') rest++;
    if (*rest) *rest++ = 0;
    while (*rest == ' ' || *rest == '\t') rest++;
    const char *kw = buf;
    if (c->have_loss) return err_at(c, "nothing may follow the 'loss' line");
    if (!strcmp(kw, "param")) {
        if (c->n_layers_seen) return err_at(c, "'param' must come before the first layer");
        return run_param(c, rest);
    }
    if (!strcmp(kw, "let")) {
        char name[ADAPT_GRAPH_NAME_MAX];
        const char *expr;
        int64_t v;
        enum adapt_status st = name_eq_expr(c, rest, "let", name, &expr);
        if (!st) st = eval(c, expr, &v);
        return st ? st : vars_set(c, name, v);
    }
    if (!strcmp(kw, "model")) {
        if (!is_ident(rest) || strlen(rest) >= sizeof c->g->name)
            return err_at(c, "expected 'model NAME' (letters, digits, '_')");
        snprintf(c->g->name, sizeof c->g->name, "%s", rest);
        return ADAPT_OK;
    }
    if (!strcmp(kw, "input")) return run_input(c, rest);
    if (!strcmp(kw, "require")) return run_require(c, rest);
    if (!strcmp(kw, "label")) {
        char name[ADAPT_GRAPH_NAME_MAX];
        enum adapt_status st = interpolate(c, rest, name, sizeof name, "label");
        if (st) return st;
        if (strchr(name, ' ') || !strcmp(name, "input"))
            return err_at(c, "expected 'label NAME'");
        return set_label(c, name, c->cur);
    }
    if (!strcmp(kw, "loss")) {
        if (strcmp(rest, "softmax_xent"))
            return err_at(c, "expected 'loss softmax_xent' (the only loss), got '%.80s'", rest);
        c->have_loss = 1;
        return ADAPT_OK;
    }
    if (!strcmp(kw, "repeat")) return run_repeat(c, i, rest);
    if (!strcmp(kw, "if")) return run_if(c, i, rest);
    for (int k = 0; k < ADAPT_GRAPH_N_KINDS; k++)
        if (!strcmp(kw, adapt_graph_kind_name((enum adapt_graph_kind)k))) {
            char *w[40];
            snprintf(buf, sizeof buf, "%s", c->lines[i].text);
            int nw = split(buf, w, 40);
            if (nw > 40) return err_at(c, "too many words");
            return run_layer(c, (enum adapt_graph_kind)k, w, nw);
        }
    return err_at(c, "unknown line '%.80s' (expected a layer kind or a keyword; see "
                     "doc/model-format.md)",
                  kw);
}

static enum adapt_status run_block(struct ctx *c, int from, int to)
{
    for (int i = from; i < to; i++) {
        if (!c->lines[i].text[0]) continue;
        c->line = c->lines[i].no;
        enum adapt_status st = work(c, strlen(c->lines[i].text) + 1);
        if (st || (st = run_line(c, i))) return st;
        if (c->lines[i].block) i = c->lines[i].end;
    }
    return ADAPT_OK;
}

/* Strips comments and blanks, pairs repeat/if/else with end. */
static enum adapt_status scan(struct ctx *c, char *text)
{
    /* UTF-8 everywhere, comments included: the text goes into the trace, a JSON file */
    long bad = adapt_utf8_invalid_at(text, strlen(text));
    if (bad >= 0) {
        const char *line_start = text;
        c->line = 1;
        for (const char *q = text; q < text + bad; q++)
            if (*q == '\n') {
                c->line++;
                line_start = q + 1;
            }
        return err_at(c, "byte %ld of the line (0x%02x) is not UTF-8 (a description is UTF-8 "
                         "text)",
                      (long)(text + bad - line_start) + 1, (unsigned char)text[bad]);
    }
    int cap = 64, stack[ADAPT_GRAPH_MAX_DEPTH], depth = 0;
    c->lines = malloc((size_t)cap * sizeof *c->lines);
    if (!c->lines) return ADAPT_ERROR(ADAPT_ENOMEM, "%s: out of memory", c->file);
    int no = 0;
    for (char *p = text; *p || no == 0;) {
        char *nl = strchr(p, '\n');
        if (nl) *nl = 0;
        no++;
        char *hash = strchr(p, '#');
        if (hash) *hash = 0;
        size_t n = strlen(p);
        while (n && isspace((unsigned char)p[n - 1])) p[--n] = 0;
        while (*p == ' ' || *p == '\t') p++;
        for (char *q = p; *q; q++)
            if ((unsigned char)*q < 0x20 && *q != '\t') {
                c->line = no;
                return err_at(c, "control character in the line (a text file expected)");
            }
        if (strlen(p) > ADAPT_GRAPH_MAX_LINE) {
            c->line = no;
            return err_at(c, "line longer than %d characters", ADAPT_GRAPH_MAX_LINE);
        }
        if (c->n_lines == cap) {
            cap *= 2;
            struct line *l = realloc(c->lines, (size_t)cap * sizeof *l);
            if (!l) return ADAPT_ERROR(ADAPT_ENOMEM, "%s: out of memory", c->file);
            c->lines = l;
        }
        struct line *l = &c->lines[c->n_lines];
        l->no = no;
        l->text = p;
        l->els = l->end = -1;
        l->block = 0;
        c->line = no;
        char kw[8] = "";
        sscanf(p, "%7s", kw);
        if (!strcmp(kw, "repeat") || !strcmp(kw, "if")) {
            if (depth == ADAPT_GRAPH_MAX_DEPTH)
                return err_at(c, "blocks nested deeper than %d", ADAPT_GRAPH_MAX_DEPTH);
            stack[depth++] = c->n_lines;
            l->block = 1;
        } else if (!strcmp(kw, "else")) {
            if (strcmp(p, "else")) return err_at(c, "nothing may follow 'else' on its line");
            if (!depth || strncmp(c->lines[stack[depth - 1]].text, "if", 2) ||
                c->lines[stack[depth - 1]].els >= 0)
                return err_at(c, "'else' without an open 'if'");
            c->lines[stack[depth - 1]].els = c->n_lines;
        } else if (!strcmp(kw, "end")) {
            if (strcmp(p, "end")) return err_at(c, "nothing may follow 'end' on its line");
            if (!depth) return err_at(c, "'end' without an open 'repeat' or 'if'");
            struct line *open = &c->lines[stack[--depth]];
            open->end = c->n_lines;
            if (open->els >= 0) c->lines[open->els].end = c->n_lines;
            l->text = ""; /* run_block skips it */
        }
        c->n_lines++;
        if (!nl) break;
        p = nl + 1;
    }
    if (depth) {
        c->line = c->lines[stack[depth - 1]].no;
        return err_at(c, "this block has no 'end'");
    }
    /* else lines end the if-branch: run_block stops at them through els */
    for (int i = 0; i < c->n_lines; i++)
        if (!strcmp(c->lines[i].text, "else")) c->lines[i].text = "";
    return ADAPT_OK;
}

static enum adapt_status parse_args(struct ctx *c, const char *args)
{
    if (!args || !args[0]) return ADAPT_OK;
    char buf[512];
    if (strlen(args) >= sizeof buf)
        return ADAPT_ERROR(ADAPT_EINVAL, "%s: model arguments too long", c->file);
    snprintf(buf, sizeof buf, "%s", args);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(t, '=');
        while (*t == ' ') t++;
        if (!eq || eq == t || c->n_args == GRAPH_MAX_VARS)
            return ADAPT_ERROR(ADAPT_EINVAL, "%s: model arguments '%s': expected name=value[,...]",
                               c->file, args);
        *eq = 0;
        size_t n = strlen(t);
        while (n && t[n - 1] == ' ') t[--n] = 0;
        if (!is_ident(t) || n >= ADAPT_GRAPH_NAME_MAX)
            return ADAPT_ERROR(ADAPT_EINVAL, "%s: model arguments '%s': '%s' is not a name",
                               c->file, args, t);
        char err[300];
        struct graph_vars none = {0};
        if (!graph_eval(eq + 1, &none, &c->arg_value[c->n_args], err, sizeof err))
            return ADAPT_ERROR(ADAPT_EINVAL, "%s: model argument %s: %s", c->file, t, err);
        for (int a = 0; a < c->n_args; a++)
            if (!strcmp(c->arg_name[a], t))
                return ADAPT_ERROR(ADAPT_EINVAL, "%s: model arguments '%s': '%s' is set twice",
                                   c->file, args, t);
        snprintf(c->arg_name[c->n_args], ADAPT_GRAPH_NAME_MAX, "%s", t);
        c->arg_used[c->n_args++] = 0;
    }
    return ADAPT_OK;
}

void adapt_graph_free(struct adapt_graph *g)
{
    if (!g) return;
    free(g->nodes);
    free(g->file);
    free(g->text);
    free(g->args);
    free(g);
}

enum adapt_status adapt_graph_parse(struct adapt_graph **out, const char *text, const char *file,
                                    int classes, const char *args)
{
    *out = NULL;
    if (classes < 2)
        return ADAPT_ERROR(ADAPT_EINVAL, "%s: need at least 2 classes, got %d", file, classes);
    if (adapt_utf8_invalid_at(file, strlen(file)) >= 0)
        return ADAPT_ERROR(ADAPT_EINVAL, "model file name '%s' is not UTF-8 (the trace records "
                                         "it)",
                           file);
    struct ctx c = {.file = file, .cur = -1};
    struct adapt_graph *g = c.g = calloc(1, sizeof *g);
    char *work = adapt_strdup(text);
    enum adapt_status st = ADAPT_OK;
    if (!g || !work || !(g->file = adapt_strdup(file)) || !(g->text = adapt_strdup(text)) ||
        !(g->args = adapt_strdup(args ? args : ""))) {
        st = ADAPT_ERROR(ADAPT_ENOMEM, "%s: out of memory", file);
        goto done;
    }
    g->classes = classes;
    if ((st = parse_args(&c, args))) goto done;
    if ((st = vars_set(&c, "classes", classes))) goto done;
    if ((st = scan(&c, work))) goto done;
    if ((st = run_block(&c, 0, c.n_lines))) goto done;
    c.line = c.n_lines ? c.lines[c.n_lines - 1].no : 1;
    for (int a = 0; a < c.n_args; a++)
        if (!c.arg_used[a]) {
            st = ADAPT_ERROR(ADAPT_EINVAL, "%s: model argument '%s' is not a parameter of the "
                                           "description (declare it with 'param %s = ...')",
                             file, c.arg_name[a], c.arg_name[a]);
            goto done;
        }
    if (!c.have_input) {
        st = err_at(&c, "no 'input CHANNELS HEIGHT WIDTH' line");
        goto done;
    }
    if ((st = graph_check_output(g, file))) goto done;
    if (!g->name[0]) {
        const char *b = strrchr(file, '/');
        b = b ? b + 1 : file;
        size_t n = strcspn(b, ".");
        while (n >= sizeof g->name || (n && (b[n] & 0xc0) == 0x80)) n--; /* whole characters */
        memcpy(g->name, b, n);
        g->name[n] = 0;
        if (!n) snprintf(g->name, sizeof g->name, "model");
    }
done:
    free(c.lines);
    free(c.names);
    free(c.slots);
    free(work);
    if (st) {
        adapt_graph_free(g);
        return st;
    }
    *out = g;
    return ADAPT_OK;
}

enum adapt_status adapt_graph_load(struct adapt_graph **out, const char *name, int classes,
                                   const char *args)
{
    *out = NULL;
    size_t len = strlen(name);
    int is_path = strchr(name, '/') || (len > 6 && !strcmp(name + len - 6, ".model"));
    char *path = NULL, *text = NULL, depth_arg[96] = "";
    enum adapt_status st;
    static const char *const subs[] = {"models", NULL};
    if (is_path) {
        if (!(path = adapt_strdup(name))) return ADAPT_ERROR(ADAPT_ENOMEM, "out of memory");
    } else {
        if (!len || len > 48 || !is_ident(name))
            return ADAPT_ERROR(ADAPT_EINVAL, "unknown model '%s' (expected a built-in name "
                                             "such as lenet5 or resnet56, or a .model file)",
                               name);
        char file[64];
        snprintf(file, sizeof file, "%s.model", name);
        st = adapt_find_file(file, "model description", subs, &path);
        size_t d = len;
        while (d && isdigit((unsigned char)name[d - 1])) d--;
        if (st == ADAPT_ENOENT && d < len && d > 0) {
            /* "resnet56": resnet.model with depth=56 */
            char base[64];
            snprintf(base, sizeof base, "%.*s.model", (int)d, name);
            if (adapt_find_file(base, "model description", subs, &path) == ADAPT_OK) {
                snprintf(depth_arg, sizeof depth_arg, "depth=%s", name + d);
                st = ADAPT_OK;
            }
        }
        if (st)
            return ADAPT_ERROR(st, "unknown model '%s': %s", name, adapt_error_message());
    }
    /* "resnet20" sets depth=20: the model arguments may say it again, not contradict it */
    if (depth_arg[0] && args && args[0]) {
        size_t d = strlen(name) - (strlen(depth_arg) - 6);
        char list[600], err[300];
        snprintf(list, sizeof list, "%s", args);
        struct graph_vars none = {0};
        int64_t want, got;
        for (char *save = NULL, *t = strtok_r(list, ",", &save); t;
             t = strtok_r(NULL, ",", &save)) {
            char *eq = strchr(t, '=');
            if (!eq) continue;
            *eq = 0;
            t += strspn(t, " ");
            size_t n = strlen(t);
            while (n && t[n - 1] == ' ') t[--n] = 0;
            if (strcmp(t, "depth") || !graph_eval(depth_arg + 6, &none, &want, err, sizeof err) ||
                !graph_eval(eq + 1, &none, &got, err, sizeof err))
                continue; /* what does not read is parse_args's to refuse */
            if (got != want) {
                free(path);
                return ADAPT_ERROR(ADAPT_EINVAL,
                                   "model %s sets depth=%lld, but the model arguments set "
                                   "depth=%lld: name the model %.*s%lld or %.*s, or drop depth "
                                   "from the arguments",
                                   name, (long long)want, (long long)got, (int)d, name,
                                   (long long)got, (int)d, name);
            }
            depth_arg[0] = 0; /* the arguments set it */
        }
    }
    st = adapt_read_text(path, 1 << 20, &text);
    if (st) {
        free(path);
        return st;
    }
    {
        char all[600];
        snprintf(all, sizeof all, "%s%s%s", depth_arg, depth_arg[0] && args && args[0] ? "," : "",
                 args ? args : "");
        st = adapt_graph_parse(out, text, path, classes, all);
        if (!st && !is_path) snprintf((*out)->name, sizeof (*out)->name, "%s", name);
    }
    free(text);
    free(path);
    return st;
}
