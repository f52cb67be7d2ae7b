/* src/trace/read_records.c: the trace reader's typed fields and records (schema 1): the
 * header with its model and units, steps with their events, epochs, samples, test and end
 * records, each checked as it is read; and adapt_trace_free. See trace.h. */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/fileio.h"
#include "src/trace/internal.h"
#include "src/trace/trace.h"

/* ----------------------------------------------------------------- fields */

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void rd_fail(struct adapt_trace_rd *r, const char *fmt, ...)
{
    if (r->bad) return;
    r->bad = 1;
    r->st = ADAPT_EFORMAT;
    int n = snprintf(r->msg, sizeof r->msg, "%s:%lld: %s record: ", r->path, (long long)r->line,
                     r->rec);
    va_list ap;
    va_start(ap, fmt);
    if (n > 0 && (size_t)n < sizeof r->msg)
        vsnprintf(r->msg + n, sizeof r->msg - (size_t)n, fmt, ap);
    va_end(ap);
}

static void rd_nomem(struct adapt_trace_rd *r)
{
    if (r->bad) return;
    r->bad = 1;
    r->st = ADAPT_ENOMEM;
    snprintf(r->msg, sizeof r->msg, "%s:%lld: out of memory", r->path, (long long)r->line);
}

static json_t *rd_get(struct adapt_trace_rd *r, json_t *o, const char *key, int optional)
{
    json_t *v = json_object_get(o, key);
    if (!v && !optional) rd_fail(r, "field \"%s\" is missing", key);
    return v;
}

/* An integer field in [lo, hi]; `absent` when optional and missing. */
static int64_t rd_int(struct adapt_trace_rd *r, json_t *o, const char *key, int optional,
                      int64_t absent, int64_t lo, int64_t hi)
{
    json_t *v = rd_get(r, o, key, optional);
    if (!v) return absent;
    if (!json_is_integer(v)) {
        rd_fail(r, "field \"%s\" must be an integer", key);
        return absent;
    }
    int64_t x = json_integer_value(v);
    if (x < lo || x > hi) {
        rd_fail(r, "field \"%s\" = %lld is out of range [%lld, %lld]", key, (long long)x,
                (long long)lo, (long long)hi);
        return absent;
    }
    return x;
}

#define INT_RANGE -2147483647 - 1, 2147483647
#define I64_RANGE INT64_MIN, INT64_MAX
#define STEP_RANGE  1, ADAPT_TRACE_STEP_MAX
#define EPOCH_RANGE 0, ADAPT_TRACE_EPOCH_MAX - 1

/* A number field; null reads as NaN. */
static double rd_num(struct adapt_trace_rd *r, json_t *o, const char *key, int optional)
{
    json_t *v = rd_get(r, o, key, optional);
    if (!v || json_is_null(v)) return NAN;
    if (!json_is_number(v)) {
        rd_fail(r, "field \"%s\" must be a number or null", key);
        return NAN;
    }
    return json_number_value(v);
}

/* A number field in [lo, hi]; with nullable, null reads as NaN (as does a missing optional
 * field). */
static double rd_num_in(struct adapt_trace_rd *r, json_t *o, const char *key, int optional,
                        int nullable, double lo, double hi)
{
    json_t *v = rd_get(r, o, key, optional);
    if (!v || (nullable && json_is_null(v))) return NAN;
    if (!json_is_number(v)) {
        rd_fail(r, "field \"%s\" must be a number%s", key, nullable ? " or null" : "");
        return NAN;
    }
    double x = json_number_value(v);
    if (!(x >= lo && x <= hi)) {
        if (isinf(hi))
            rd_fail(r, "field \"%s\" = %g is out of range: expected >= %g", key, x, lo);
        else
            rd_fail(r, "field \"%s\" = %g is out of range [%g, %g]", key, x, lo, hi);
        return NAN;
    }
    return x;
}

/* A string field, copied; NULL when optional and missing or null. */
static char *rd_str(struct adapt_trace_rd *r, json_t *o, const char *key, int nullable)
{
    json_t *v = rd_get(r, o, key, nullable);
    if (!v || (nullable && json_is_null(v))) return NULL;
    if (!json_is_string(v)) {
        rd_fail(r, "field \"%s\" must be a string%s", key, nullable ? " or null" : "");
        return NULL;
    }
    char *s = adapt_strdup(json_string_value(v));
    if (!s) rd_nomem(r);
    return s;
}

static json_t *rd_typed(struct adapt_trace_rd *r, json_t *o, const char *key, int optional,
                        json_type type)
{
    json_t *v = rd_get(r, o, key, optional);
    if (v && json_typeof(v) != type) {
        rd_fail(r, "field \"%s\" must be %s", key, type == JSON_ARRAY ? "an array" : "an object");
        return NULL;
    }
    return v;
}

/* An array of 1..max integers in [lo, hi] (a shape), or of exactly `max` when exact. */
static int rd_ints(struct adapt_trace_rd *r, json_t *o, const char *key, int max, int exact,
                   int64_t lo, int64_t hi, int64_t *out)
{
    json_t *a = rd_typed(r, o, key, 0, JSON_ARRAY);
    if (!a) return 0;
    size_t n = json_array_size(a);
    if (n == 0 || n > (size_t)max || (exact && n != (size_t)max)) {
        rd_fail(r, "field \"%s\" must hold %s%d integers", key, exact ? "" : "1 to ", max);
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_array_get(a, i);
        if (!json_is_integer(v)) {
            rd_fail(r, "field \"%s\" must hold integers", key);
            return 0;
        }
        out[i] = json_integer_value(v);
        if (out[i] < lo || out[i] > hi) {
            rd_fail(r, "field \"%s\"[%zu] = %lld is out of range [%lld, %lld]", key, i,
                    (long long)out[i], (long long)lo, (long long)hi);
            return 0;
        }
    }
    return (int)n;
}

/* Matches a string field against names[0..n); -1 on error. */
static int rd_enum(struct adapt_trace_rd *r, json_t *o, const char *key, const char *const *names,
                   int n, int nullable)
{
    json_t *v = rd_get(r, o, key, 0);
    if (!v) return -1;
    if (nullable && json_is_null(v)) return 0;
    const char *s = json_string_value(v);
    for (int i = 0; s && i < n; i++)
        if (names[i] && !strcmp(s, names[i])) return i;
    rd_fail(r, "field \"%s\" has an unknown value", key);
    return -1;
}

/* ----------------------------------------------------------------- header */

static void header_free(struct adapt_trace_header *h)
{
    free((char *)h->program);
    free((char *)h->version);
    free((char *)h->created);
    free((char *)h->policy);
    free((char *)h->build.commit);
    free((char *)h->build.compiler);
    free((char *)h->build.cpu);
    free((char *)h->build.isa);
    free((char *)h->build.blas);
    free((char *)h->build.device);
    free((char *)h->config_file);
    json_decref(h->config);
    free((char *)h->cfg.compat);
    free((char *)h->cfg.name);
    for (int k = 0; k < ADAPT_TRACE_ROLES; k++) free((char *)h->role_text[k]);
    for (int i = 0; i < h->n_overrides; i++) free((char *)h->overrides[i]);
    free((void *)h->overrides);
    free((char *)h->dataset.name);
    free((char *)h->model.name);
    free((char *)h->model.description_file);
    free((char *)h->model.description_args);
    free((char *)h->model.description_text);
    for (int i = 0; i < h->model.n_layers; i++) {
        free((char *)h->model.layers[i].name);
        free((char *)h->model.layers[i].kind);
        free((char *)h->model.layers[i].graph_set);
        free((char *)h->model.layers[i].graph_source);
        free((char *)h->model.layers[i].precision);
    }
    free((void *)h->model.layers);
    for (int i = 0; i < h->n_units; i++) free((char *)h->units[i].name);
    free((void *)h->units);
}

static void read_layer(struct adapt_trace_rd *r, json_t *o, struct adapt_trace_layer *l)
{
    if (!json_is_object(o)) {
        rd_fail(r, "model.layers entries must be objects");
        return;
    }
    l->name = rd_str(r, o, "name", 0);
    l->kind = rd_str(r, o, "kind", 0);
    l->in_ndim = rd_ints(r, o, "in", ADAPT_TRACE_MAX_DIMS, 0, 0, INT64_MAX, l->in);
    l->out_ndim = rd_ints(r, o, "out", ADAPT_TRACE_MAX_DIMS, 0, 0, INT64_MAX, l->out);
    l->params = rd_int(r, o, "params", 0, 0, 0, INT64_MAX);
    l->macs = rd_int(r, o, "macs", 0, 0, 0, INT64_MAX);
    l->elementwise = rd_int(r, o, "elementwise", 0, 0, 0, INT64_MAX);
    l->unit = (int)rd_int(r, o, "unit", 0, -1, -1, 2147483647);
    l->k = (int)rd_int(r, o, "k", 1, 0, 0, 2147483647);
    l->stride = (int)rd_int(r, o, "stride", 1, 0, 0, 2147483647);
    l->pad = (int)rd_int(r, o, "pad", 1, 0, 0, 2147483647);
    l->groups = (int)rd_int(r, o, "groups", 1, 1, 1, 2147483647);
    l->dilation = (int)rd_int(r, o, "dilation", 1, 1, 1, 2147483647);
    if (!r->bad && l->groups > 1 &&
        (l->in_ndim < 1 || l->out_ndim < 1 || l->in[0] % l->groups || l->out[0] % l->groups))
        rd_fail(r, "model.layers[\"%s\"]: groups %d does not divide its %lld input and %lld "
                   "output channels", l->name, l->groups, (long long)l->in[0],
                (long long)l->out[0]);
    /* graph precision propagation (optional): the set, its source, the precision */
    static const char *const sets[] = {"allow", "infer", "deny"};
    static const char *const sources[] = {"preset", "kind", "layer"};
    if (json_object_get(o, "graph_set") && rd_enum(r, o, "graph_set", sets, 3, 0) >= 0)
        l->graph_set = rd_str(r, o, "graph_set", 0);
    if (json_object_get(o, "graph_source") && rd_enum(r, o, "graph_source", sources, 3, 0) >= 0)
        l->graph_source = rd_str(r, o, "graph_source", 0);
    if (json_object_get(o, "precision") || json_object_get(o, "precision_unit")) {
        l->precision = rd_str(r, o, "precision", 0);
        l->precision_unit = (int)rd_int(r, o, "precision_unit", 0, -1, -1, 2147483647);
        if (!r->bad && l->precision &&
            (l->precision_unit < 0) != !strcmp(l->precision, "float32"))
            rd_fail(r, "model.layers[\"%s\"]: precision %s with precision_unit %d (-1 is "
                       "float32, and only it)", l->name, l->precision, l->precision_unit);
    }
}

/* A value of config.SECTION (NULL when absent); a section must be an object. */
static json_t *rd_config(struct adapt_trace_rd *r, json_t *cfg, const char *sec, const char *key)
{
    json_t *s = json_object_get(cfg, sec);
    if (s && !json_is_object(s)) {
        rd_fail(r, "field \"config.%s\" must be an object", sec);
        return NULL;
    }
    return json_object_get(s, key);
}

/* An integer config.SECTION.KEY in [1, INT_MAX]; `absent` when missing. */
static int rd_config_count(struct adapt_trace_rd *r, json_t *cfg, const char *sec, const char *key,
                           int absent)
{
    json_t *v = rd_config(r, cfg, sec, key);
    if (!v) return absent;
    json_int_t x = json_is_integer(v) ? json_integer_value(v) : 0;
    if (x < 1 || x > 2147483647) {
        rd_fail(r, "field \"config.%s.%s\" must be an integer in [1, 2147483647]", sec, key);
        return absent;
    }
    return (int)x;
}

/* A string config.SECTION.KEY (a copy); NULL when missing. */
static const char *rd_config_string(struct adapt_trace_rd *r, json_t *cfg, const char *sec,
                                    const char *key)
{
    json_t *v = rd_config(r, cfg, sec, key);
    if (!v) return NULL;
    if (!json_is_string(v)) {
        rd_fail(r, "field \"config.%s.%s\" must be a string", sec, key);
        return NULL;
    }
    const char *s = adapt_strdup(json_string_value(v));
    if (!s) rd_nomem(r);
    return s;
}

/* The typed view of config (struct adapt_trace_header.cfg). */
static void read_config_values(struct adapt_trace_rd *r, json_t *cfg, struct adapt_trace_header *h)
{
    h->cfg.batch = rd_config_count(r, cfg, "train", "batch", 0);
    h->cfg.accumulation = rd_config_count(r, cfg, "train", "accumulation_steps", 1);
    h->cfg.muppet_r = rd_config_count(r, cfg, "policy", "muppet_r", 0);
    h->cfg.compat = rd_config_string(r, cfg, "quantization", "compat");
    h->cfg.name = rd_config_string(r, cfg, "run", "name");
}

static void read_overrides(struct adapt_trace_rd *r, json_t *o, struct adapt_trace_header *h)
{
    json_t *ov = rd_typed(r, o, "overrides", 1, JSON_ARRAY);
    size_t n = json_array_size(ov);
    if (!n) return;
    const char **s = calloc(n, sizeof *s);
    if (!s) {
        rd_nomem(r);
        return;
    }
    h->overrides = s;
    for (size_t i = 0; i < n && !r->bad; i++) {
        const char *v = json_string_value(json_array_get(ov, i));
        if (!v) rd_fail(r, "field \"overrides\" must hold strings");
        else if (!(s[i] = adapt_strdup(v))) rd_nomem(r);
        else h->n_overrides = (int)i + 1;
    }
}

/* "roles" (optional): per role its format text and operand bits (-1: the unit's format). */
static void read_roles(struct adapt_trace_rd *r, json_t *o, struct adapt_trace_header *h)
{
    for (int k = 0; k < ADAPT_TRACE_ROLES; k++) h->role_bits[k] = -1;
    json_t *ro = rd_typed(r, o, "roles", 1, JSON_OBJECT);
    if (!ro) return;
    h->has_roles = 1;
    for (int k = 0; k < ADAPT_TRACE_ROLES && !r->bad; k++) {
        json_t *e = rd_typed(r, ro, adapt_trace_role_names[k], 1, JSON_OBJECT);
        if (!e) continue;
        int64_t b = rd_int(r, e, "bits", 0, -1, -1, 64);
        if (b == 0) rd_fail(r, "roles.%s.bits = 0, expected -1 (the unit's format) or 1 .. 64",
                            adapt_trace_role_names[k]);
        h->role_bits[k] = (int)b;
        h->role_text[k] = rd_str(r, e, "format", 1);
    }
}

static void read_dataset(struct adapt_trace_rd *r, json_t *o, struct adapt_trace_header *h)
{
    json_t *ds = rd_typed(r, o, "dataset", 0, JSON_OBJECT);
    if (!ds) return;
    h->dataset.name = rd_str(r, ds, "name", 0);
    h->dataset.train = rd_int(r, ds, "train", 0, 0, 0, INT64_MAX);
    h->dataset.val = rd_int(r, ds, "val", 0, 0, 0, INT64_MAX);
    h->dataset.test = rd_int(r, ds, "test", 0, 0, 0, INT64_MAX);
    h->dataset.classes = (int)rd_int(r, ds, "classes", 0, 0, 0, 2147483647);
}

static void read_model(struct adapt_trace_rd *r, json_t *o, struct adapt_trace_header *h)
{
    json_t *m = rd_typed(r, o, "model", 0, JSON_OBJECT);
    if (!m) return;
    int64_t in[3] = {0, 0, 0};
    h->model.name = rd_str(r, m, "name", 0);
    rd_ints(r, m, "input", 3, 1, 1, 2147483647, in);
    for (int i = 0; i < 3; i++) h->model.input[i] = (int)in[i];
    h->model.classes = (int)rd_int(r, m, "classes", 0, 0, 0, 2147483647);
    h->model.params = rd_int(r, m, "params", 0, 0, 0, INT64_MAX);
    h->model.macs = rd_int(r, m, "macs", 0, 0, 0, INT64_MAX);
    json_t *d = rd_typed(r, m, "description", 1, JSON_OBJECT);
    if (d) {
        h->model.description_file = rd_str(r, d, "file", 0);
        h->model.description_args = rd_str(r, d, "args", 0);
        h->model.description_text = rd_str(r, d, "text", 0);
    }
    json_t *layers = rd_typed(r, m, "layers", 0, JSON_ARRAY);
    size_t n = json_array_size(layers);
    if (!n) return;
    struct adapt_trace_layer *l = calloc(n, sizeof *l);
    if (!l) {
        rd_nomem(r);
        return;
    }
    h->model.layers = l;
    h->model.n_layers = (int)n;
    for (size_t i = 0; i < n && !r->bad; i++) read_layer(r, json_array_get(layers, i), &l[i]);
}

static void read_units(struct adapt_trace_rd *r, json_t *o, struct adapt_trace_header *h)
{
    json_t *units = rd_typed(r, o, "units", 0, JSON_ARRAY);
    size_t n = json_array_size(units);
    if (!n || r->bad) return;
    struct adapt_trace_unit *u = calloc(n, sizeof *u);
    if (!u) {
        rd_nomem(r);
        return;
    }
    h->units = u;
    h->n_units = (int)n;
    for (size_t i = 0; i < n && !r->bad; i++) {
        json_t *uo = json_array_get(units, i);
        if (!json_is_object(uo)) {
            rd_fail(r, "units entries must be objects");
            break;
        }
        u[i].name = rd_str(r, uo, "name", 0);
        u[i].layer = (int)rd_int(r, uo, "layer", 0, -1, 0, h->model.n_layers - 1);
        u[i].weights = rd_int(r, uo, "weights", 0, 0, 0, INT64_MAX);
        u[i].macs = rd_int(r, uo, "macs", 0, 0, 0, INT64_MAX);
    }
    for (int i = 0; i < h->model.n_layers && !r->bad; i++) {
        const struct adapt_trace_layer *l = &h->model.layers[i];
        if (l->precision && l->precision_unit >= h->n_units)
            rd_fail(r, "model.layers[\"%s\"]: precision_unit %d is not a unit (%d units)",
                    l->name, l->precision_unit, h->n_units);
    }
}

static void read_header(struct adapt_trace_rd *r, json_t *o, struct adapt_trace_header *h)
{
    h->schema = (int)rd_int(r, o, "schema", 0, 0, INT_RANGE);
    if (r->bad) return;
    if (h->schema != ADAPT_TRACE_SCHEMA) {
        rd_fail(r, "unknown schema version %d (this reader knows version %d)", h->schema,
                ADAPT_TRACE_SCHEMA);
        return;
    }
    h->program = rd_str(r, o, "program", 0);
    h->version = rd_str(r, o, "version", 0);
    h->created = rd_str(r, o, "created", 0);
    h->seed = rd_int(r, o, "seed", 0, 0, I64_RANGE);
    h->threads = (int)rd_int(r, o, "threads", 0, 0, INT_RANGE);
    h->sr_bits = (int)rd_int(r, o, "sr_bits", 1, 32, 16, 32);
    if (!r->bad && h->sr_bits != 16 && h->sr_bits != 32)
        rd_fail(r, "field \"sr_bits\" is %d: 16 or 32", h->sr_bits);
    json_t *b = rd_typed(r, o, "build", 1, JSON_OBJECT);
    if (b) {
        h->build.commit = rd_str(r, b, "commit", 0);
        h->build.compiler = rd_str(r, b, "compiler", 0);
        h->build.cpu = rd_str(r, b, "cpu", 0);
        h->build.isa = rd_str(r, b, "isa", 0);
        h->build.blas = rd_str(r, b, "blas", 0);
        h->build.device = rd_str(r, b, "device", 0);
    }
    h->policy = rd_str(r, o, "policy", 0);
    h->cfg.accumulation = 1;
    json_t *cfg = rd_typed(r, o, "config", 0, JSON_OBJECT);
    if (cfg) {
        h->config = json_incref(cfg);
        read_config_values(r, cfg, h);
    }
    h->config_file = rd_str(r, o, "config_file", 1);
    read_overrides(r, o, h);
    read_roles(r, o, h);
    read_dataset(r, o, h);
    read_model(r, o, h);
    read_units(r, o, h);
}

/* ------------------------------------------------------- steps and epochs */

static void step_free(struct adapt_trace_step *s)
{
    free(s->units);
    free(s->events);
}

static void read_unit_state(struct adapt_trace_rd *r, json_t *uo, struct adapt_trace_unit_state *u)
{
    u->wl = (int)rd_int(r, uo, "wl", 0, 0, 1, 32);
    u->fl = (int)rd_int(r, uo, "fl", 0, 0, 0, 32);
    u->lb = rd_num(r, uo, "lb", 1);
    u->r = (int)rd_int(r, uo, "r", 1, -1, 0, 2147483647);
    u->sparsity = rd_num_in(r, uo, "sparsity", 1, 1, 0, 1);
    u->sat = rd_int(r, uo, "sat", 1, -1, 0, INT64_MAX);
    u->flush = rd_int(r, uo, "flush", 1, -1, 0, INT64_MAX);
    u->act_sat = rd_num_in(r, uo, "act_sat", 1, 1, 0, 1);
    json_t *acc = rd_typed(r, uo, "acc", 1, JSON_OBJECT);
    if (acc) {
        int64_t v[3];
        u->acc_set = 1;
        if (rd_ints(r, acc, "gemms", 3, 0, 0, INT64_MAX, v) == 3) memcpy(u->acc_gemms, v, sizeof v);
        if (rd_ints(r, acc, "overflows", 3, 0, 0, INT64_MAX, v) == 3)
            memcpy(u->acc_overflows, v, sizeof v);
    }
    json_t *sc = rd_typed(r, uo, "scaled", 1, JSON_OBJECT);
    for (int k = 0; sc && k < ADAPT_TRACE_SCALED_ROLES && !r->bad; k++) {
        json_t *e = rd_typed(r, sc, adapt_trace_scaled_role_names[k], 1, JSON_OBJECT);
        if (!e) continue;
        struct adapt_trace_role_scale *rs = &u->scaled[k];
        rs->amax = rd_num(r, e, "amax", 1); /* null: inf or NaN in the tensor */
        rs->scale = rd_num(r, e, "scale", 0);
        rs->sat = rd_int(r, e, "sat", 0, 0, 0, INT64_MAX);
        rs->flush = rd_int(r, e, "flush", 0, 0, 0, INT64_MAX);
        if (!r->bad && !(rs->scale > 0) )
            rd_fail(r, "scaled.%s.scale = %g, expected > 0", adapt_trace_scaled_role_names[k],
                    rs->scale);
    }
}

/* A [WL, FL] pair: WL 1..32, FL 0..32 (quant's fixed(WL,FL)). */
static void rd_format(struct adapt_trace_rd *r, json_t *o, const char *key, int64_t pair[2])
{
    if (rd_ints(r, o, key, 2, 1, 0, 32, pair) == 2 && pair[0] < 1)
        rd_fail(r, "field \"%s\" = [%lld, %lld]: the word length must be in [1, 32]", key,
                (long long)pair[0], (long long)pair[1]);
}

static void read_event(struct adapt_trace_rd *r, json_t *eo, int n_units,
                       struct adapt_trace_event *e)
{
    int64_t pair[2] = {0, 0};
    e->unit = (int)rd_int(r, eo, "unit", 0, 0, 0, n_units - 1);
    int kind = rd_enum(r, eo, "kind", adapt_trace_event_names, 2, 0);
    e->kind = kind == 1 ? ADAPT_TRACE_EVENT_PU : ADAPT_TRACE_EVENT_PD;
    rd_format(r, eo, "before", pair);
    e->before[0] = (int)pair[0];
    e->before[1] = (int)pair[1];
    rd_format(r, eo, "after", pair);
    e->after[0] = (int)pair[0];
    e->after[1] = (int)pair[1];
    e->bisect_steps = (int)rd_int(r, eo, "bisect_steps", 1, 0, 0, 2147483647);
    e->kl_evals = (int)rd_int(r, eo, "kl_evals", 1, 0, 0, 2147483647);
    e->sample = rd_int(r, eo, "sample", 1, 0, 0, INT64_MAX);
    e->s = (int)rd_int(r, eo, "s", 1, 0, INT_RANGE);
}

static void read_events(struct adapt_trace_rd *r, json_t *o, int n_units,
                        struct adapt_trace_step *s)
{
    json_t *events = rd_typed(r, o, "events", 1, JSON_ARRAY);
    size_t ne = json_array_size(events);
    if (!ne || r->bad) return;
    if (!(s->events = calloc(ne, sizeof *s->events))) {
        rd_nomem(r);
        return;
    }
    s->n_events = (int)ne;
    for (size_t i = 0; i < ne && !r->bad; i++) {
        json_t *eo = json_array_get(events, i);
        if (!json_is_object(eo)) {
            rd_fail(r, "events entries must be objects");
            break;
        }
        read_event(r, eo, n_units, &s->events[i]);
    }
}

static void read_step(struct adapt_trace_rd *r, json_t *o, int n_units, struct adapt_trace_step *s)
{
    s->step = rd_int(r, o, "step", 0, 0, STEP_RANGE);
    s->epoch = (int)rd_int(r, o, "epoch", 0, 0, EPOCH_RANGE);
    s->lr = rd_num_in(r, o, "lr", 0, 1, 0, INFINITY);
    s->loss = rd_num(r, o, "loss", 0);
    int strat = rd_enum(r, o, "strategy", adapt_trace_strategy_names, 4, 1);
    s->strategy = strat < 0 ? ADAPT_TRACE_STRATEGY_NONE : (enum adapt_trace_strategy)strat;
    s->accum = (int)rd_int(r, o, "accum", 1, 0, 0, 2147483647);
    json_t *ov = rd_get(r, o, "overflow", 1);
    if (ov && !json_is_boolean(ov)) rd_fail(r, "field \"overflow\" must be true or false");
    s->overflow = json_is_true(ov);
    json_t *units = rd_typed(r, o, "units", 0, JSON_ARRAY);
    if (r->bad) return;
    if (json_array_size(units) != (size_t)n_units) {
        rd_fail(r, "%zu units, but the header lists %d", json_array_size(units), n_units);
        return;
    }
    if (n_units && !(s->units = calloc((size_t)n_units, sizeof *s->units))) {
        rd_nomem(r);
        return;
    }
    s->n_units = n_units;
    for (int i = 0; i < n_units && !r->bad; i++) {
        json_t *uo = json_array_get(units, (size_t)i);
        if (!json_is_object(uo)) {
            rd_fail(r, "units entries must be objects");
            break;
        }
        read_unit_state(r, uo, &s->units[i]);
    }
    read_events(r, o, n_units, s);
}

static void read_epoch(struct adapt_trace_rd *r, json_t *o, struct adapt_trace_epoch *e)
{
    e->epoch = (int)rd_int(r, o, "epoch", 0, 0, EPOCH_RANGE);
    e->step = rd_int(r, o, "step", 0, 0, STEP_RANGE);
    e->lr = rd_num_in(r, o, "lr", 0, 1, 0, INFINITY);
    e->train_loss = rd_num(r, o, "train_loss", 0);
    e->train_acc = rd_num_in(r, o, "train_acc", 0, 1, 0, 1);
    e->val_loss = rd_num(r, o, "val_loss", 0);
    e->val_acc = rd_num_in(r, o, "val_acc", 0, 1, 0, 1);
    e->wall_s = rd_num_in(r, o, "wall_s", 0, 0, 0, INFINITY);
    e->images_per_s = rd_num_in(r, o, "images_per_s", 0, 1, 0, INFINITY);
}

/* ---------------------------------------------------------------- records */

/* Appends one zeroed element to a growing array; NULL when out of memory. */
static void *grow(void **arr, int64_t n, int64_t *cap, size_t size)
{
    if (n == *cap) {
        int64_t nc = *cap ? 2 * *cap : 64;
        void *p = realloc(*arr, (size_t)nc * size);
        if (!p) return NULL;
        *arr = p;
        *cap = nc;
    }
    void *e = (char *)*arr + (size_t)n * size;
    memset(e, 0, size);
    return e;
}

/* Reads a step or epoch record into a new element of its array, with its line number. */
static void read_step_record(struct adapt_trace_loader *ld, json_t *o)
{
    struct adapt_trace *t = ld->t;
    struct adapt_trace_step *s = grow((void **)&t->steps, t->n_steps, &ld->step_cap, sizeof *s);
    int64_t *line =
        s ? grow((void **)&t->step_line, t->n_steps, &ld->step_line_cap, sizeof *line) : NULL;
    if (!line) {
        rd_nomem(&ld->r);
        return;
    }
    *line = ld->r.line;
    t->n_steps++;
    read_step(&ld->r, o, t->header.n_units, s);
    if (ld->r.bad || t->n_steps < 2) return;
    const struct adapt_trace_step *p = &t->steps[t->n_steps - 2];
    long long pl = (long long)t->step_line[t->n_steps - 2];
    if (s->step <= p->step)
        rd_fail(&ld->r, "step %lld does not follow step %lld (line %lld): step numbers increase",
                (long long)s->step, (long long)p->step, pl);
    else if (s->epoch < p->epoch)
        rd_fail(&ld->r,
                "epoch %d is before epoch %d of step %lld (line %lld): epoch numbers do "
                "not decrease",
                s->epoch, p->epoch, (long long)p->step, pl);
}

static void read_epoch_record(struct adapt_trace_loader *ld, json_t *o)
{
    struct adapt_trace *t = ld->t;
    struct adapt_trace_epoch *e = grow((void **)&t->epochs, t->n_epochs, &ld->epoch_cap, sizeof *e);
    int64_t *line =
        e ? grow((void **)&t->epoch_line, t->n_epochs, &ld->epoch_line_cap, sizeof *line) : NULL;
    if (!line) {
        rd_nomem(&ld->r);
        return;
    }
    *line = ld->r.line;
    t->n_epochs++;
    read_epoch(&ld->r, o, e);
    if (ld->r.bad || t->n_epochs < 2) return;
    const struct adapt_trace_epoch *p = &t->epochs[t->n_epochs - 2];
    long long pl = (long long)t->epoch_line[t->n_epochs - 2];
    if (e->epoch <= p->epoch)
        rd_fail(&ld->r, "epoch %d does not follow epoch %d (line %lld): epoch numbers increase",
                e->epoch, p->epoch, pl);
    else if (e->step <= p->step)
        rd_fail(&ld->r,
                "step %lld does not follow step %lld of epoch %d (line %lld): each epoch "
                "trains at least one step",
                (long long)e->step, (long long)p->step, p->epoch, pl);
}

/* An array of exactly n integers in [lo, hi] into a new int array (NULL on failure). */
static int *rd_int_array(struct adapt_trace_rd *r, json_t *o, const char *key, int n, int lo,
                         int hi)
{
    json_t *a = rd_typed(r, o, key, 0, JSON_ARRAY);
    if (!a) return NULL;
    if (json_array_size(a) != (size_t)n) {
        rd_fail(r, "field \"%s\" must hold %d integers (one per %s)", key, n,
                !strcmp(key, "wl") ? "unit" : "layer");
        return NULL;
    }
    int *v = malloc(sizeof(int) * (size_t)(n ? n : 1));
    if (!v) {
        rd_nomem(r);
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        json_t *x = json_array_get(a, (size_t)i);
        if (!json_is_integer(x) || json_integer_value(x) < lo || json_integer_value(x) > hi) {
            rd_fail(r, "field \"%s\"[%d] must be an integer in [%d, %d]", key, i, lo, hi);
            free(v);
            return NULL;
        }
        v[i] = (int)json_integer_value(x);
    }
    return v;
}

/* A comp search record: only before the first step record. */
static void read_sample_record(struct adapt_trace_loader *ld, json_t *o)
{
    struct adapt_trace_rd *r = &ld->r;
    struct adapt_trace *t = ld->t;
    if (t->n_steps > 0 || t->n_epochs > 0) {
        rd_fail(r, "a sample record after the first step or epoch record");
        return;
    }
    int64_t cap = ld->sample_cap;
    struct adapt_trace_sample *s = grow((void **)&t->samples, t->n_samples, &cap, sizeof *s);
    ld->sample_cap = cap;
    if (!s) {
        rd_nomem(r);
        return;
    }
    t->n_samples++;
    const struct adapt_trace_header *h = &t->header;
    s->stage = (int)rd_int(r, o, "stage", 0, 1, 1, 2);
    s->plan = rd_str(r, o, "plan", 0);
    s->steps = rd_int(r, o, "steps", 0, 0, 0, ADAPT_TRACE_STEP_MAX);
    s->samples = rd_int(r, o, "samples", 0, 0, 0, INT64_MAX);
    s->loss = rd_num(r, o, "loss", 0);
    s->cost = rd_num(r, o, "cost", 0);
    json_t *b = rd_get(r, o, "safe", 0), *c = rd_get(r, o, "chosen", 0);
    if ((b && !json_is_boolean(b)) || (c && !json_is_boolean(c)))
        rd_fail(r, "fields \"safe\" and \"chosen\" must be true or false");
    s->safe = json_is_true(b);
    s->chosen = json_is_true(c);
    if (r->bad) return;
    if (s->plan && strlen(s->plan) != (size_t)h->model.n_layers) {
        rd_fail(r, "plan \"%s\" has %zu digits, the model %d layers", s->plan, strlen(s->plan),
                h->model.n_layers);
        return;
    }
    s->n_units = h->n_units;
    s->n_layers = h->model.n_layers;
    s->wl = rd_int_array(r, o, "wl", h->n_units, 1, 32);
    if (s->wl) s->gov = rd_int_array(r, o, "gov", h->model.n_layers, -1, h->n_units - 1);
}

/* Reads one record of a known type; problems are left in ld->r. */
void adapt_trace_read_record(struct adapt_trace_loader *ld, json_t *o, const char *type)
{
    struct adapt_trace_rd *r = &ld->r;
    struct adapt_trace *t = ld->t;
    if (!strcmp(type, "header")) {
        if (r->line != 1) rd_fail(r, "a second header");
        else read_header(r, o, &t->header);
    } else if (!strcmp(type, "step")) {
        read_step_record(ld, o);
    } else if (!strcmp(type, "epoch")) {
        read_epoch_record(ld, o);
    } else if (!strcmp(type, "sample")) {
        read_sample_record(ld, o);
    } else if (!strcmp(type, "test")) {
        if (t->has_test) rd_fail(r, "a second test record");
        t->has_test = 1;
        t->test.epoch = (int)rd_int(r, o, "epoch", 0, 0, 0, ADAPT_TRACE_EPOCH_MAX);
        t->test.test_loss = rd_num(r, o, "test_loss", 0);
        t->test.test_acc = rd_num_in(r, o, "test_acc", 0, 1, 0, 1);
    } else if (!strcmp(type, "end")) {
        int s = rd_enum(r, o, "status", adapt_trace_end_names, 2, 0);
        t->end.status = s == 1 ? ADAPT_TRACE_END_STOPPED : ADAPT_TRACE_END_OK;
        t->end.wall_s = rd_num_in(r, o, "wall_s", 0, 0, 0, INFINITY);
        t->has_end = 1;
    } else {
        rd_fail(r, "unknown record type");
    }
}

void adapt_trace_free(struct adapt_trace *t)
{
    if (!t) return;
    header_free(&t->header);
    for (int64_t i = 0; i < t->n_steps; i++) step_free(&t->steps[i]);
    free(t->steps);
    free(t->epochs);
    for (int i = 0; i < t->n_samples; i++) {
        free((char *)t->samples[i].plan);
        free((int *)t->samples[i].wl);
        free((int *)t->samples[i].gov);
    }
    free(t->samples);
    free(t->step_line);
    free(t->epoch_line);
    free(t->path);
    free(t);
}
