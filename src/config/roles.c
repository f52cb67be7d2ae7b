/* src/config/roles.c: the [roles] section (src/config/config.h): a format, rounding and scaling
 * per tensor role, from a named recipe and the role keys. doc/numerics.md ("Tensor roles and
 * scaling", "Recipes") says what each recipe sets and where it comes from. */
#include <stdio.h>
#include <string.h>

#include "src/config/config.h"

const char *const adapt_role_names[ADAPT_ROLE_N] = {
    [ADAPT_ROLE_WEIGHT] = "weight",           [ADAPT_ROLE_BIAS] = "bias",
    [ADAPT_ROLE_INPUT] = "input",             [ADAPT_ROLE_OUTPUT] = "output",
    [ADAPT_ROLE_GRAD_WEIGHT] = "grad_weight", [ADAPT_ROLE_GRAD_BIAS] = "grad_bias",
    [ADAPT_ROLE_GRAD_OUTPUT] = "grad_output", [ADAPT_ROLE_GRAD_INPUT] = "grad_input",
    [ADAPT_ROLE_MASTER] = "master"};

/* The recipes' role texts, every role a recipe does not name float32. */
struct recipe_role {
    enum adapt_role role;
    const char *text;
};
static const struct recipe_role fp8_hybrid_delayed[] = {
    {ADAPT_ROLE_WEIGHT, "e4m3 nearest delayed"},
    {ADAPT_ROLE_INPUT, "e4m3 nearest delayed"},
    {ADAPT_ROLE_GRAD_OUTPUT, "float(5,2) nearest delayed"},
    {ADAPT_ROLE_N, NULL}};
static const struct recipe_role fp8_current[] = {
    {ADAPT_ROLE_WEIGHT, "e4m3 nearest current"},
    {ADAPT_ROLE_INPUT, "e4m3 nearest current"},
    {ADAPT_ROLE_GRAD_OUTPUT, "float(5,2) nearest current"},
    {ADAPT_ROLE_N, NULL}};
static const struct recipe_role mxfp8[] = {
    {ADAPT_ROLE_WEIGHT, "mxfp8_e4m3 nearest"},
    {ADAPT_ROLE_INPUT, "mxfp8_e4m3 nearest"},
    {ADAPT_ROLE_GRAD_OUTPUT, "mxfp8_e4m3 nearest"},
    {ADAPT_ROLE_N, NULL}};
static const struct recipe_role bf16_sr_master[] = {
    {ADAPT_ROLE_MASTER, "bf16 stochastic"},
    {ADAPT_ROLE_WEIGHT, "bf16 nearest"},
    {ADAPT_ROLE_BIAS, "bf16 nearest"},
    {ADAPT_ROLE_INPUT, "bf16 nearest"},
    {ADAPT_ROLE_OUTPUT, "bf16 nearest"},
    {ADAPT_ROLE_GRAD_OUTPUT, "bf16 nearest"},
    {ADAPT_ROLE_GRAD_WEIGHT, "bf16 nearest"},
    {ADAPT_ROLE_GRAD_BIAS, "bf16 nearest"},
    {ADAPT_ROLE_N, NULL}};
static const struct recipe_role w4a8[] = {
    {ADAPT_ROLE_WEIGHT, "fixed(4,0) nearest current"},
    {ADAPT_ROLE_INPUT, "fixed(8,0) nearest current"},
    {ADAPT_ROLE_N, NULL}};

static const struct recipe_role *recipe_table(enum adapt_config_recipe r)
{
    switch (r) {
    case ADAPT_RECIPE_FP8_HYBRID_DELAYED: return fp8_hybrid_delayed;
    case ADAPT_RECIPE_FP8_CURRENT: return fp8_current;
    case ADAPT_RECIPE_MXFP8:
    case ADAPT_RECIPE_MXFP8_GEMM: return mxfp8;
    case ADAPT_RECIPE_BF16_SR_MASTER: return bf16_sr_master;
    case ADAPT_RECIPE_W4A8: return w4a8;
    default: return NULL;
    }
}

enum adapt_config_mx_axis adapt_config_mx_axis(const struct adapt_config *cfg)
{
    if (cfg->roles.mx_axis != ADAPT_MX_AXIS_ROWS) return cfg->roles.mx_axis;
    return cfg->roles.recipe == ADAPT_RECIPE_MXFP8_GEMM ? ADAPT_MX_AXIS_GEMM : ADAPT_MX_AXIS_ROWS;
}

int adapt_config_roles_set(const struct adapt_config *cfg)
{
    if (cfg->roles.recipe != ADAPT_RECIPE_NONE || cfg->roles.units[0]) return 1;
    for (int r = 0; r < ADAPT_ROLE_N; r++)
        if (cfg->roles.role[r][0] && strcmp(cfg->roles.role[r], "auto")) return 1;
    return 0;
}

/* text into f; on error a message (without the key) in msg. */
static int parse_role(const char *text, struct adapt_role_fmt *f, char *msg, size_t n)
{
    char buf[ADAPT_CONFIG_STR_MAX];
    snprintf(buf, sizeof buf, "%s", text);
    f->kind = ADAPT_ROLE_AUTO;
    f->rounding = -1;
    f->scaling = ADAPT_SCALING_NONE;
    quant_spec_init(&f->spec, QUANT_FORMAT_FIXED);
    int words = 0, have_round = 0, have_scale = 0;
    for (char *save = NULL, *w = strtok_r(buf, " \t", &save); w; w = strtok_r(NULL, " \t", &save)) {
        if (words++ == 0) {
            if (!strcmp(w, "auto")) f->kind = ADAPT_ROLE_AUTO;
            else if (!strcmp(w, "unit")) f->kind = ADAPT_ROLE_UNIT;
            else if (!strcmp(w, "float32")) f->kind = ADAPT_ROLE_FLOAT;
            else if (quant_spec_parse(w, &f->spec) == ADAPT_OK) f->kind = ADAPT_ROLE_FORMAT;
            else {
                snprintf(msg, n, "'%s': %s (expected auto, unit, float32 or a format)", w,
                         adapt_error_message());
                return -1;
            }
            continue;
        }
        if (!strcmp(w, "nearest") || !strcmp(w, "stochastic")) {
            if (have_round++) {
                snprintf(msg, n, "two roundings (expected at most one of nearest, stochastic)");
                return -1;
            }
            f->rounding = !strcmp(w, "nearest") ? QUANT_ROUND_NEAREST : QUANT_ROUND_STOCHASTIC;
        } else if (!strcmp(w, "unscaled") || !strcmp(w, "current") || !strcmp(w, "delayed") ||
                   !strcmp(w, "rowwise")) {
            if (have_scale++) {
                snprintf(msg, n, "two scalings (expected at most one of unscaled, current, "
                                 "delayed, rowwise)");
                return -1;
            }
            f->scaling = !strcmp(w, "current")   ? ADAPT_SCALING_CURRENT
                         : !strcmp(w, "delayed") ? ADAPT_SCALING_DELAYED
                         : !strcmp(w, "rowwise") ? ADAPT_SCALING_ROWWISE
                                                 : ADAPT_SCALING_NONE;
        } else {
            snprintf(msg, n, "unknown word '%s' after the format (expected nearest or "
                             "stochastic, and unscaled, current, delayed or rowwise)", w);
            return -1;
        }
    }
    if (!words) return 0; /* "": auto */
    if ((f->kind == ADAPT_ROLE_AUTO || f->kind == ADAPT_ROLE_FLOAT) && (have_round || have_scale)) {
        snprintf(msg, n, "%s takes no rounding or scaling", f->kind ? "float32" : "auto");
        return -1;
    }
    if (f->scaling != ADAPT_SCALING_NONE && f->kind == ADAPT_ROLE_FORMAT &&
        (quant_type_of(f->spec.format)->needs_range || quant_format_is_mx(f->spec.format) ||
         f->spec.format == QUANT_FORMAT_PLUGIN)) {
        snprintf(msg, n, "%s carries its own scales (or is a plugin): it takes no scaling",
                 quant_type_of(f->spec.format)->name);
        return -1;
    }
    return 0;
}

enum adapt_status adapt_config_role(const struct adapt_config *cfg, enum adapt_role r,
                                    struct adapt_role_fmt *out)
{
    ADAPT_ASSERT(r >= 0 && r < ADAPT_ROLE_N);
    const char *text = cfg->roles.role[r];
    const char *from_recipe = NULL;
    const struct recipe_role *t = recipe_table(cfg->roles.recipe);
    if (t && (!text[0] || !strcmp(text, "auto"))) {
        from_recipe = "float32";
        for (; t->text; t++)
            if (t->role == r) from_recipe = t->text;
        text = from_recipe;
    }
    char msg[ADAPT_CONFIG_STR_MAX + 160];
    if (parse_role(text, out, msg, sizeof msg) == 0) return ADAPT_OK;
    char o[ADAPT_CONFIG_OVERRIDE_LEN + 32];
    adapt_config_origin_str(cfg, "roles", from_recipe ? "recipe" : adapt_role_names[r], o,
                            sizeof o);
    return ADAPT_ERROR(ADAPT_EINVAL, "%s: roles.%s = \"%s\": %s", o, adapt_role_names[r], text,
                       msg);
}

const char *adapt_role_fmt_str(const struct adapt_role_fmt *f, char *buf, size_t n)
{
    char spec[QUANT_SPEC_STR_MAX];
    const char *what = f->kind == ADAPT_ROLE_AUTO    ? "auto"
                       : f->kind == ADAPT_ROLE_UNIT  ? "unit"
                       : f->kind == ADAPT_ROLE_FLOAT ? "float32"
                                                     : quant_spec_str(&f->spec, spec, sizeof spec);
    snprintf(buf, n, "%s%s%s", what,
             f->rounding < 0 ? "" : f->rounding == QUANT_ROUND_NEAREST ? " nearest" : " stochastic",
             f->scaling == ADAPT_SCALING_CURRENT   ? " current"
             : f->scaling == ADAPT_SCALING_DELAYED ? " delayed"
             : f->scaling == ADAPT_SCALING_ROWWISE ? " rowwise"
                                                   : "");
    return buf;
}

/* the next piece of s up to sep at parenthesis depth 0 ("fixed(4,2)" stays whole): its length */
static size_t piece(const char *s, char sep)
{
    int depth = 0;
    size_t i = 0;
    for (; s[i] && !(s[i] == sep && depth == 0); i++)
        depth += s[i] == '(' ? 1 : s[i] == ')' ? -1 : 0;
    return i;
}

static void trim(char *s)
{
    size_t n = strlen(s), a = 0;
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t')) s[--n] = '\0';
    while (s[a] == ' ' || s[a] == '\t') a++;
    memmove(s, s + a, n - a + 1);
}

enum adapt_status adapt_config_role_overrides(const struct adapt_config *cfg,
                                              struct adapt_role_override *out, int *n)
{
    char o[ADAPT_CONFIG_OVERRIDE_LEN + 32];
    char msg[ADAPT_CONFIG_STR_MAX + 160];
    *n = 0;
    for (const char *s = cfg->roles.units; *s;) {
        size_t len = piece(s, '|');
        char unit[ADAPT_CONFIG_PATH_MAX];
        snprintf(unit, sizeof unit, "%.*s", (int)len, s);
        s += len + (s[len] == '|');
        char *colon = strchr(unit, ':');
        trim(unit);
        if (!unit[0]) continue;
        adapt_config_origin_str(cfg, "roles", "units", o, sizeof o);
        if (!colon)
            return ADAPT_ERROR(ADAPT_EINVAL, "%s: roles.units: \"%s\": expected NAME: "
                                             "role=value, role=value", o, unit);
        colon = strchr(unit, ':');
        *colon = '\0';
        char name[64];
        snprintf(name, sizeof name, "%s", unit);
        trim(name);
        if (!name[0])
            return ADAPT_ERROR(ADAPT_EINVAL, "%s: roles.units: a unit without a name before "
                                             "':'", o);
        for (const char *a = colon + 1; *a;) {
            size_t al = piece(a, ',');
            char as[ADAPT_CONFIG_PATH_MAX];
            snprintf(as, sizeof as, "%.*s", (int)al, a);
            a += al + (a[al] == ',');
            trim(as);
            if (!as[0]) continue;
            char *eq = strchr(as, '=');
            if (eq) *eq = '\0';
            trim(as);
            int r = -1;
            for (int k = 0; eq && k < ADAPT_ROLE_N; k++)
                if (!strcmp(as, adapt_role_names[k])) r = k;
            if (r < 0)
                return ADAPT_ERROR(ADAPT_EINVAL, "%s: roles.units: unit %s: \"%s\": expected "
                                                 "role=value with a role of weight, bias, input, "
                                                 "output, grad_weight, grad_bias, grad_output, "
                                                 "grad_input, master", o, name, as);
            if (*n == ADAPT_ROLE_OVERRIDES_MAX)
                return ADAPT_ERROR(ADAPT_EINVAL, "%s: roles.units: more than %d overrides", o,
                                   ADAPT_ROLE_OVERRIDES_MAX);
            struct adapt_role_override *ov = &out[*n];
            snprintf(ov->unit, sizeof ov->unit, "%s", name);
            ov->role = (enum adapt_role)r;
            char *val = eq + 1;
            trim(val);
            if (parse_role(val, &ov->fmt, msg, sizeof msg))
                return ADAPT_ERROR(ADAPT_EINVAL, "%s: roles.units: unit %s: %s = \"%s\": %s", o,
                                   name, adapt_role_names[r], val, msg);
            (*n)++;
        }
    }
    return ADAPT_OK;
}
