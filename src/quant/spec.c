/* src/quant/spec.c: the format table, spec defaults, parsing and validation. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/quant/quant.h"

/* Types in enum quant_format order. */
static const struct quant_type quant_types[QUANT_FORMAT_COUNT] = {
    {"fixed", QUANT_FORMAT_FIXED, "fixed(WL,FL)", 0, quant_grid_row, quant_grid_row_ref,
     quant_cuda_rows},
    {"bfp", QUANT_FORMAT_BFP, "bfp(WL)", 1, quant_grid_row, quant_grid_row_ref, quant_cuda_rows},
    {"muppet", QUANT_FORMAT_MUPPET, "muppet(WL)", 1, quant_grid_row, quant_grid_row_ref,
     quant_cuda_rows},
    {"fp16", QUANT_FORMAT_FP16, "fp16", 0, quant_float_row, quant_float_row_ref, quant_cuda_rows},
    {"bf16", QUANT_FORMAT_BF16, "bf16", 0, quant_float_row, quant_float_row_ref, quant_cuda_rows},
    {"float", QUANT_FORMAT_FLOAT, "float(E,M)", 0, quant_float_row, quant_float_row_ref,
     quant_cuda_rows},
    {"e4m3", QUANT_FORMAT_E4M3, "e4m3", 0, quant_float_row, quant_float_row_ref, quant_cuda_rows},
    {"e5m2", QUANT_FORMAT_E5M2, "e5m2", 0, quant_float_row, quant_float_row_ref, quant_cuda_rows},
    {"mxfp8_e4m3", QUANT_FORMAT_MXFP8_E4M3, "mxfp8_e4m3", 0, quant_mx_row, quant_mx_row_ref,
     quant_cuda_rows},
    {"mxfp8_e5m2", QUANT_FORMAT_MXFP8_E5M2, "mxfp8_e5m2", 0, quant_mx_row, quant_mx_row_ref,
     quant_cuda_rows},
    {"mxfp6_e2m3", QUANT_FORMAT_MXFP6_E2M3, "mxfp6_e2m3", 0, quant_mx_row, quant_mx_row_ref,
     quant_cuda_rows},
    {"mxfp6_e3m2", QUANT_FORMAT_MXFP6_E3M2, "mxfp6_e3m2", 0, quant_mx_row, quant_mx_row_ref,
     quant_cuda_rows},
    {"mxfp4", QUANT_FORMAT_MXFP4, "mxfp4", 0, quant_mx_row, quant_mx_row_ref, quant_cuda_rows},
    {"mxint8", QUANT_FORMAT_MXINT8, "mxint8", 0, quant_mx_row, quant_mx_row_ref, quant_cuda_rows},
    {"plugin", QUANT_FORMAT_PLUGIN, "plugin(PATH) or plugin(PATH:NAME)", 0, quant_plugin_row,
     quant_plugin_row_ref, quant_cuda_rows},
};

/* enum quant_nan's names in float(E,M,nan=...) */
static const char *const quant_nan_names[] = {"ieee", "fn", "none"};

/* Element exponent and mantissa bits of the MX formats, in enum order from MXFP8_E4M3. */
static const int mx_bits[6][2] = {{4, 3}, {5, 2}, {2, 3}, {3, 2}, {2, 1}, {0, 7}};

int quant_format_is_mx(enum quant_format f)
{
    return f >= QUANT_FORMAT_MXFP8_E4M3 && f <= QUANT_FORMAT_MXINT8;
}

int quant_cuda_list_fits(const struct quant_spec *s)
{
    return quant_spec_check(s) == ADAPT_OK && !quant_type_of(s->format)->needs_range &&
           !quant_format_is_mx(s->format) && s->format != QUANT_FORMAT_PLUGIN;
}

int quant_format_keeps_subsets(enum quant_format f)
{
    return !quant_format_is_mx(f) && f != QUANT_FORMAT_PLUGIN;
}

static int is_float_format(enum quant_format f)
{
    return f == QUANT_FORMAT_FP16 || f == QUANT_FORMAT_BF16 || f == QUANT_FORMAT_FLOAT ||
           f == QUANT_FORMAT_E4M3 || f == QUANT_FORMAT_E5M2;
}

int quant_spec_within(const struct quant_spec *a, const struct quant_spec *b)
{
    if (quant_spec_check(a) != ADAPT_OK || quant_spec_check(b) != ADAPT_OK) return 0;
    if (a->format == QUANT_FORMAT_FIXED && b->format == QUANT_FORMAT_FIXED)
        return a->fl <= b->fl && a->wl - a->fl <= b->wl - b->fl;
    if (quant_format_is_mx(a->format)) return a->format == b->format;
    if (!is_float_format(a->format) || !is_float_format(b->format)) return 0;
    struct quant_plan pa, pb;
    struct quant_key key = {0, 0, 0};
    if (quant_plan_init(a, NULL, key, &pa) != ADAPT_OK ||
        quant_plan_init(b, NULL, key, &pb) != ADAPT_OK)
        return 0;
    const struct quant_fmt *fa = &pa.fmt, *fb = &pb.fmt;
    /* float32 exponents: a's finest step (at its least normal binade, where its subnormals have
     * it too) and its least nonzero value. b holds a's small values as subnormals when it has
     * them, else a's least value must be one of b's normals. */
    int step_a = fa->emin_b - fa->man;
    int least_a = fa->subnormals ? step_a : fa->emin_b;
    int low_ok = fb->subnormals ? step_a >= fb->emin_b - fb->man : least_a >= fb->emin_b;
    int inf_a = fa->ovfbits == 0x7f800000u, inf_b = fb->ovfbits == 0x7f800000u;
    return fa->man <= fb->man && fa->maxbits <= fb->maxbits && low_ok && (!inf_a || inf_b);
}

const struct quant_type *quant_type_of(enum quant_format f)
{
    ADAPT_ASSERT((int)f >= 0 && f < QUANT_FORMAT_COUNT);
    return &quant_types[f];
}

const struct quant_type *quant_type_find(const char *name)
{
    for (int i = 0; i < QUANT_FORMAT_COUNT; i++)
        if (!strcmp(quant_types[i].name, name)) return &quant_types[i];
    return NULL;
}

void quant_spec_init(struct quant_spec *s, enum quant_format f)
{
    memset(s, 0, sizeof *s);
    s->format = f;
    s->wl = 8;
    s->fl = 4;
    s->block = QUANT_BLOCK_TENSOR;
    s->rounding = QUANT_ROUND_NEAREST;
    s->tie = QUANT_TIE_EVEN;
    s->subnormals = 1;
    s->bias = QUANT_BIAS_IEEE;
    s->nan = QUANT_NAN_IEEE;
    s->sr_bits = QUANT_SR_BITS_32;
    switch (f) {
    case QUANT_FORMAT_FP16:
        s->exp_bits = 5;
        s->man_bits = 10;
        s->overflow = QUANT_OVERFLOW_INF;
        break;
    case QUANT_FORMAT_BF16:
        s->exp_bits = 8;
        s->man_bits = 7;
        s->overflow = QUANT_OVERFLOW_INF;
        break;
    case QUANT_FORMAT_E4M3: /* OCP's saturating conversion (satfinite), the usual choice */
        s->exp_bits = 4;
        s->man_bits = 3;
        s->overflow = QUANT_OVERFLOW_SATURATE;
        break;
    case QUANT_FORMAT_E5M2:
        s->exp_bits = 5;
        s->man_bits = 2;
        s->overflow = QUANT_OVERFLOW_INF;
        break;
    default:
        s->exp_bits = 5;
        s->man_bits = 10;
        s->overflow = QUANT_OVERFLOW_SATURATE;
        if (quant_format_is_mx(f)) { /* the element type's; MX clamps normals */
            s->exp_bits = mx_bits[f - QUANT_FORMAT_MXFP8_E4M3][0];
            s->man_bits = mx_bits[f - QUANT_FORMAT_MXFP8_E4M3][1];
        }
        break;
    }
}

int quant_spec_bias(const struct quant_spec *s)
{
    switch (s->format) {
    case QUANT_FORMAT_FIXED:
    case QUANT_FORMAT_BFP:
    case QUANT_FORMAT_MUPPET:
    case QUANT_FORMAT_MXINT8:
    case QUANT_FORMAT_PLUGIN: return 0;
    case QUANT_FORMAT_FLOAT:
        if (s->bias != QUANT_BIAS_IEEE) return s->bias;
        break;
    default: break;
    }
    return s->exp_bits >= 1 && s->exp_bits <= 30 ? (1 << (s->exp_bits - 1)) - 1 : 0;
}

/* float(E,M)'s bias and all-ones exponent rule: the values must fit the float32 arithmetic of
 * the kernels (src/quant/quant_impl.h, quant_fmt_make_custom). */
static enum adapt_status check_float_range(const struct quant_spec *s)
{
    int e = s->exp_bits, m = s->man_bits;
    if (s->nan != QUANT_NAN_IEEE && s->nan != QUANT_NAN_FN && s->nan != QUANT_NAN_NONE)
        return ADAPT_ERROR(ADAPT_EINVAL, "quant float(%d,%d): nan rule %d is not ieee, fn or none",
                           e, m, (int)s->nan);
    if (s->nan == QUANT_NAN_NONE && s->overflow == QUANT_OVERFLOW_INF)
        return ADAPT_ERROR(ADAPT_EINVAL,
                           "quant float(%d,%d): with nan = none every code is finite, so overflow "
                           "cannot give inf or NaN (use overflow saturate)",
                           e, m);
    if (s->bias != QUANT_BIAS_IEEE && (s->bias < -1000 || s->bias > 1000))
        return ADAPT_ERROR(ADAPT_ERANGE, "quant float(%d,%d): bias %d out of range -1000..1000", e,
                           m, s->bias);
    int bias = quant_spec_bias(s);
    int ones = s->nan == QUANT_NAN_IEEE ? 2 : 1; /* the largest exponent field is 2^e - ones */
    int emax = (1 << e) - ones - bias, emin = 1 - bias;
    int lo = (1 << e) - ones - 127, hi = 127 - m; /* emax <= 127, emin - m >= -126 */
    if (emax <= 127 && (emin == -126 || emin - m >= -126)) return ADAPT_OK;
    char allowed[96];
    if (lo <= hi)
        snprintf(allowed, sizeof allowed, "a bias in %d..%d%s", lo, hi, lo <= 127 ? " or 127" : "");
    else if (lo <= 127)
        snprintf(allowed, sizeof allowed, "bias 127 only");
    else
        snprintf(allowed, sizeof allowed, "no bias at all with these bits and nan rule");
    return ADAPT_ERROR(ADAPT_ERANGE,
                       "quant float(%d,%d) with bias %d and nan = %s: values from 2^%d (least "
                       "step) to 2^%d x (2 - ...) do not fit float32 arithmetic, which needs "
                       "the largest value below 2^128 and the least step at least 2^-126 (or "
                       "the smallest normal exactly 2^-126); %s fits",
                       e, m, bias, quant_nan_names[s->nan], emin - m, emax, allowed);
}

enum adapt_status quant_spec_check(const struct quant_spec *s)
{
    if (!s) return ADAPT_ERROR(ADAPT_EINVAL, "quant: NULL spec");
    if ((int)s->format < 0 || s->format >= QUANT_FORMAT_COUNT)
        return ADAPT_ERROR(ADAPT_EINVAL, "quant: unknown format number %d", (int)s->format);
    const char *name = quant_types[s->format].name;
    enum adapt_status st;
    if (s->rounding != QUANT_ROUND_NEAREST && s->rounding != QUANT_ROUND_STOCHASTIC)
        return ADAPT_ERROR(ADAPT_EINVAL, "quant %s: rounding %d is neither nearest nor stochastic",
                           name, (int)s->rounding);
    if (s->sr_bits != 0 && s->sr_bits != QUANT_SR_BITS_32 && s->sr_bits != QUANT_SR_BITS_16)
        return ADAPT_ERROR(ADAPT_EINVAL,
                           "quant %s: %d random bits per stochastic rounding: 32 or 16", name,
                           s->sr_bits);
    if (s->tie != QUANT_TIE_EVEN && s->tie != QUANT_TIE_AWAY)
        return ADAPT_ERROR(ADAPT_EINVAL, "quant %s: tie rule %d is neither even nor away", name,
                           (int)s->tie);
    if (s->format >= QUANT_FORMAT_FP16 && s->format != QUANT_FORMAT_FLOAT &&
        s->format != QUANT_FORMAT_PLUGIN &&
        (s->bias != QUANT_BIAS_IEEE || s->nan != QUANT_NAN_IEEE))
        return ADAPT_ERROR(ADAPT_EINVAL,
                           "quant %s: the exponent bias and the all-ones exponent rule are the "
                           "format's own (float(E,M,bias=B,nan=...) sets them)",
                           name);
    switch (s->format) {
    case QUANT_FORMAT_FIXED:
        if (s->wl < 1 || s->wl > 32)
            return ADAPT_ERROR(ADAPT_ERANGE, "quant fixed: WL %d out of range 1..32", s->wl);
        if (s->fl < 0 || s->fl > 32)
            return ADAPT_ERROR(ADAPT_ERANGE, "quant fixed: FL %d out of range 0..32", s->fl);
        break;
    case QUANT_FORMAT_BFP:
    case QUANT_FORMAT_MUPPET:
        if (s->wl < 2 || s->wl > 32)
            return ADAPT_ERROR(ADAPT_ERANGE, "quant %s: WL %d out of range 2..32", name, s->wl);
        if (s->block != QUANT_BLOCK_TENSOR && s->block != QUANT_BLOCK_DIM0)
            return ADAPT_ERROR(ADAPT_EINVAL, "quant %s: block %d is neither tensor nor dim0", name,
                               (int)s->block);
        break;
    case QUANT_FORMAT_FP16:
        if (s->exp_bits != 5 || s->man_bits != 10)
            return ADAPT_ERROR(ADAPT_EINVAL,
                               "quant fp16: exponent/mantissa bits must be 5/10, not %d/%d",
                               s->exp_bits, s->man_bits);
        break;
    case QUANT_FORMAT_BF16:
        if (s->exp_bits != 8 || s->man_bits != 7)
            return ADAPT_ERROR(ADAPT_EINVAL,
                               "quant bf16: exponent/mantissa bits must be 8/7, not %d/%d",
                               s->exp_bits, s->man_bits);
        break;
    case QUANT_FORMAT_E4M3:
    case QUANT_FORMAT_E5M2: {
        int e = s->format == QUANT_FORMAT_E4M3 ? 4 : 5;
        if (s->exp_bits != e || s->man_bits != 7 - e)
            return ADAPT_ERROR(ADAPT_EINVAL,
                               "quant %s: exponent/mantissa bits must be %d/%d, not %d/%d", name, e,
                               7 - e, s->exp_bits, s->man_bits);
        break;
    }
    case QUANT_FORMAT_MXFP8_E4M3:
    case QUANT_FORMAT_MXFP8_E5M2:
    case QUANT_FORMAT_MXFP6_E2M3:
    case QUANT_FORMAT_MXFP6_E3M2:
    case QUANT_FORMAT_MXFP4:
    case QUANT_FORMAT_MXINT8: {
        const int *b = mx_bits[s->format - QUANT_FORMAT_MXFP8_E4M3];
        if (s->exp_bits != b[0] || s->man_bits != b[1])
            return ADAPT_ERROR(ADAPT_EINVAL,
                               "quant %s: element exponent/mantissa bits must be %d/%d, not %d/%d",
                               name, b[0], b[1], s->exp_bits, s->man_bits);
        return ADAPT_OK; /* one scale per block, normals clamped, subnormals: nothing to set */
    }
    case QUANT_FORMAT_PLUGIN:
        if (!quant_plugin_valid(s->plugin))
            return ADAPT_ERROR(ADAPT_EINVAL,
                               "quant plugin: number %d is not a loaded plugin (name it "
                               "plugin(PATH) to load it)",
                               s->plugin);
        return ADAPT_OK; /* the rule is the plugin's: no other field applies */
    default:
        if (s->exp_bits < 2 || s->exp_bits > 8)
            return ADAPT_ERROR(ADAPT_ERANGE, "quant float: exponent bits %d out of range 2..8",
                               s->exp_bits);
        if (s->man_bits < 1 || s->man_bits > 23)
            return ADAPT_ERROR(ADAPT_ERANGE, "quant float: mantissa bits %d out of range 1..23",
                               s->man_bits);
        if ((st = check_float_range(s)) != ADAPT_OK) return st;
        break;
    }
    if (s->format >= QUANT_FORMAT_FP16) {
        if (s->overflow != QUANT_OVERFLOW_SATURATE && s->overflow != QUANT_OVERFLOW_INF)
            return ADAPT_ERROR(ADAPT_EINVAL, "quant %s: overflow %d is neither saturate nor inf",
                               name, (int)s->overflow);
        if (s->subnormals != 0 && s->subnormals != 1)
            return ADAPT_ERROR(ADAPT_EINVAL, "quant %s: subnormals must be 0 or 1, not %d", name,
                               s->subnormals);
    }
    return ADAPT_OK;
}

/* Parse "(a)" or "(a,b)" into want integers; returns the number read or -1 on bad syntax. */
static int parse_args(const char *p, int want, int *v)
{
    int n = 0;
    if (*p != '(') return -1;
    p++;
    for (;;) {
        while (isspace((unsigned char)*p)) p++;
        char *end;
        errno = 0;
        long x = strtol(p, &end, 10);
        if (end == p || errno || x < -1000000 || x > 1000000) return -1;
        if (n >= want) return -1;
        v[n++] = (int)x;
        p = end;
        while (isspace((unsigned char)*p)) p++;
        if (*p == ',') {
            p++;
            continue;
        }
        if (*p != ')') return -1;
        p++;
        break;
    }
    while (isspace((unsigned char)*p)) p++;
    return *p ? -1 : n;
}

/* The inside of "(PATH)" or "(PATH:NAME)" after "plugin" (a points at the parenthesis) into inner
 * (QUANT_PLUGIN_TEXT_MAX + 1 bytes): the path runs to the last ')' and loses its surrounding
 * blanks. ADAPT_EINVAL / ADAPT_ERANGE with a message when the syntax is bad. */
static enum adapt_status plugin_inner(const char *text, const char *a, char *inner)
{
    const char *close = strrchr(a, ')');
    const char *rest = close ? close + 1 : a;
    while (isspace((unsigned char)*rest)) rest++;
    if (*a != '(' || !close || *rest)
        return ADAPT_ERROR(ADAPT_EINVAL,
                           "quant format '%s': bad parameters (expected plugin(PATH) or "
                           "plugin(PATH:NAME))",
                           text);
    const char *b = a + 1, *e = close;
    while (b < e && isspace((unsigned char)*b)) b++;
    while (e > b && isspace((unsigned char)e[-1])) e--;
    if ((size_t)(e - b) > QUANT_PLUGIN_TEXT_MAX)
        return ADAPT_ERROR(ADAPT_ERANGE, "quant format '%.60s...': path longer than %d characters",
                           text, QUANT_PLUGIN_TEXT_MAX);
    memcpy(inner, b, (size_t)(e - b));
    inner[e - b] = '\0';
    return ADAPT_OK;
}

/* After "plugin": loads the plugin. */
static enum adapt_status parse_plugin(const char *text, const char *a, struct quant_spec *out)
{
    char inner[QUANT_PLUGIN_TEXT_MAX + 1];
    int id;
    enum adapt_status st = plugin_inner(text, a, inner);
    if (st != ADAPT_OK) return st;
    if ((st = quant_plugin_load(inner, &id)) != ADAPT_OK) return st;
    struct quant_spec s;
    quant_spec_init(&s, QUANT_FORMAT_PLUGIN);
    s.plugin = id;
    *out = s;
    return ADAPT_OK;
}

#define UNKNOWN_FORMAT                                                                           \
    "quant format '%s': unknown (expected fixed(WL,FL), bfp(WL), muppet(WL), fp16, bf16, e4m3, "   \
    "e5m2, float(E,M[,bias=B,nan=ieee|fn|none,sub=1|0,ovf=sat|inf]), mxfp8_e4m3, mxfp8_e5m2, "     \
    "mxfp6_e2m3, mxfp6_e3m2, mxfp4, mxint8, plugin(PATH) or a defined format's name)"

/* One decimal integer at *p (blanks before it skipped); 0 on bad syntax. */
static int parse_int(const char **p, int *v)
{
    while (isspace((unsigned char)**p)) (*p)++;
    char *end;
    errno = 0;
    long x = strtol(*p, &end, 10);
    if (end == *p || errno || x < -1000000 || x > 1000000) return 0;
    *v = (int)x;
    *p = end;
    while (isspace((unsigned char)**p)) (*p)++;
    return 1;
}

/* "(E,M[,OPTION=VALUE]...)" after "float" into s; 0 on success, else writes why. */
static int parse_float_args(const char *p, struct quant_spec *s, char *why, size_t size)
{
    int seen[4] = {0, 0, 0, 0};
    static const char *const keys[4] = {"bias", "nan", "sub", "ovf"};
    snprintf(why, size, "expected float(E,M) or float(E,M,OPTION=VALUE,...) with options bias, "
                        "nan, sub, ovf");
    if (*p++ != '(' || !parse_int(&p, &s->exp_bits) || *p++ != ',' ||
        !parse_int(&p, &s->man_bits))
        return 1;
    while (*p == ',') {
        p++;
        while (isspace((unsigned char)*p)) p++;
        size_t n = 0;
        while (isalpha((unsigned char)p[n])) n++;
        int k = 0;
        while (k < 4 && !(strlen(keys[k]) == n && !strncmp(p, keys[k], n))) k++;
        if (k == 4) {
            snprintf(why, size, "unknown option '%.*s' (options: bias, nan, sub, ovf)",
                     (int)(n ? n : 1), p);
            return 1;
        }
        if (seen[k]++) {
            snprintf(why, size, "option %s given twice", keys[k]);
            return 1;
        }
        p += n;
        while (isspace((unsigned char)*p)) p++;
        if (*p++ != '=') {
            snprintf(why, size, "option %s without '=VALUE'", keys[k]);
            return 1;
        }
        if (k == 0) {
            if (!parse_int(&p, &s->bias)) {
                snprintf(why, size, "bias must be an integer");
                return 1;
            }
            continue;
        }
        while (isspace((unsigned char)*p)) p++;
        size_t m = 0;
        while (isalnum((unsigned char)p[m])) m++;
        int v = -1;
        for (int i = 0; i < 3; i++) {
            const char *word = k == 1   ? quant_nan_names[i]
                               : k == 2 ? (i == 0 ? "0" : i == 1 ? "1" : NULL)
                                        : (i == 0 ? "sat" : i == 1 ? "inf" : NULL);
            if (word && strlen(word) == m && !strncmp(p, word, m)) v = i;
        }
        if (v < 0) {
            snprintf(why, size, "%s must be %s, not '%.*s'", keys[k],
                     k == 1 ? "ieee, fn or none" : k == 2 ? "1 or 0" : "sat or inf", (int)m, p);
            return 1;
        }
        if (k == 1) s->nan = (enum quant_nan)v;
        else if (k == 2) s->subnormals = v;
        else s->overflow = v ? QUANT_OVERFLOW_INF : QUANT_OVERFLOW_SATURATE;
        p += m;
        while (isspace((unsigned char)*p)) p++;
    }
    if (*p++ != ')') return 1;
    while (isspace((unsigned char)*p)) p++;
    return *p != '\0';
}

/* The format name at the start of text (blanks skipped) into name; returns where its parameters
 * start (blanks skipped), or NULL when there is no name or it is too long. */
static const char *format_name(const char *text, char name[QUANT_FORMAT_NAME_MAX])
{
    const char *p = text;
    while (isspace((unsigned char)*p)) p++;
    size_t len = 0;
    while (isalnum((unsigned char)p[len]) || p[len] == '_') len++;
    if (len == 0 || len >= QUANT_FORMAT_NAME_MAX) return NULL;
    memcpy(name, p, len);
    name[len] = '\0';
    const char *a = p + len;
    while (isspace((unsigned char)*a)) a++;
    return a;
}

int quant_spec_plugin_text(const char *text, char *inner)
{
    char name[QUANT_FORMAT_NAME_MAX];
    const char *a = text ? format_name(text, name) : NULL;
    inner[0] = '\0';
    if (!a || strcmp(name, quant_type_of(QUANT_FORMAT_PLUGIN)->name)) return 0;
    if (plugin_inner(text, a, inner) != ADAPT_OK) inner[0] = '\0'; /* parsing refuses it */
    return 1;
}

enum adapt_status quant_spec_parse(const char *text, struct quant_spec *out)
{
    if (!text) return ADAPT_ERROR(ADAPT_EINVAL, "quant format: NULL text");
    char name[QUANT_FORMAT_NAME_MAX];
    const char *a = format_name(text, name);
    if (!a) return ADAPT_ERROR(ADAPT_EINVAL, UNKNOWN_FORMAT, text);
    const struct quant_type *t = quant_type_find(name);
    struct quant_spec s;
    if (!t) {
        if (quant_format_lookup(name, &s) != ADAPT_OK)
            return ADAPT_ERROR(ADAPT_EINVAL, UNKNOWN_FORMAT, text);
        if (*a)
            return ADAPT_ERROR(ADAPT_EINVAL,
                               "quant format '%s': %s is a defined format, which takes no "
                               "parameters",
                               text, name);
        *out = s;
        return ADAPT_OK;
    }
    quant_spec_init(&s, t->format);
    if (t->format == QUANT_FORMAT_PLUGIN) return parse_plugin(text, a, out);
    if (t->format == QUANT_FORMAT_FLOAT) {
        char why[160];
        if (!*a)
            return ADAPT_ERROR(ADAPT_EINVAL,
                               "quant format '%s': float needs its bits, e.g. float(5,10)", text);
        if (parse_float_args(a, &s, why, sizeof why))
            return ADAPT_ERROR(ADAPT_EINVAL, "quant format '%s': bad parameters (%s)", text, why);
    } else if (*a) {
        int v[2], want = t->format == QUANT_FORMAT_FIXED ? 2
                         : t->format == QUANT_FORMAT_BFP || t->format == QUANT_FORMAT_MUPPET ? 1
                                                                                            : 0;
        int got = want ? parse_args(a, want, v) : -1;
        if (got != want)
            return ADAPT_ERROR(ADAPT_EINVAL, "quant format '%s': bad parameters (expected %s)",
                               text, t->syntax);
        s.wl = v[0];
        if (want == 2) s.fl = v[1];
    }
    enum adapt_status st = quant_spec_check(&s);
    if (st != ADAPT_OK) return st;
    *out = s;
    return ADAPT_OK;
}

/* float(E,M) with the options that differ from the defaults. */
static void float_str(const struct quant_spec *s, char *buf, size_t len)
{
    int n = snprintf(buf, len, "float(%d,%d", s->exp_bits, s->man_bits);
    int ieee = s->exp_bits >= 1 && s->exp_bits <= 30 ? (1 << (s->exp_bits - 1)) - 1 : 0;
    size_t at = n < 0 ? 0 : (size_t)n < len ? (size_t)n : len;
    if (s->bias != QUANT_BIAS_IEEE && s->bias != ieee)
        at += (size_t)snprintf(buf + at, len - at, ",bias=%d", s->bias);
    if (at < len && (int)s->nan > 0 && (int)s->nan < 3)
        at += (size_t)snprintf(buf + at, len - at, ",nan=%s", quant_nan_names[s->nan]);
    if (at < len && !s->subnormals) at += (size_t)snprintf(buf + at, len - at, ",sub=0");
    if (at < len && s->overflow == QUANT_OVERFLOW_INF)
        at += (size_t)snprintf(buf + at, len - at, ",ovf=inf");
    if (at < len) snprintf(buf + at, len - at, ")");
}

const char *quant_spec_str(const struct quant_spec *s, char *buf, size_t len)
{
    switch (s->format) {
    case QUANT_FORMAT_FIXED: snprintf(buf, len, "fixed(%d,%d)", s->wl, s->fl); break;
    case QUANT_FORMAT_BFP: snprintf(buf, len, "bfp(%d)", s->wl); break;
    case QUANT_FORMAT_MUPPET: snprintf(buf, len, "muppet(%d)", s->wl); break;
    case QUANT_FORMAT_FP16: snprintf(buf, len, "fp16"); break;
    case QUANT_FORMAT_BF16: snprintf(buf, len, "bf16"); break;
    case QUANT_FORMAT_E4M3: snprintf(buf, len, "e4m3"); break;
    case QUANT_FORMAT_E5M2: snprintf(buf, len, "e5m2"); break;
    case QUANT_FORMAT_MXFP8_E4M3:
    case QUANT_FORMAT_MXFP8_E5M2:
    case QUANT_FORMAT_MXFP6_E2M3:
    case QUANT_FORMAT_MXFP6_E3M2:
    case QUANT_FORMAT_MXFP4:
    case QUANT_FORMAT_MXINT8: snprintf(buf, len, "%s", quant_types[s->format].name); break;
    case QUANT_FORMAT_PLUGIN:
        snprintf(buf, len, "plugin(%s)", quant_plugin_text(s->plugin));
        break;
    default: float_str(s, buf, len); break;
    }
    return buf;
}

int quant_spec_bits(const struct quant_spec *s)
{
    if (s->format <= QUANT_FORMAT_MUPPET) return s->wl;
    if (s->format == QUANT_FORMAT_MXINT8) return 8;
    if (s->format == QUANT_FORMAT_PLUGIN) return quant_plugin_bits(s->plugin);
    return 1 + s->exp_bits + s->man_bits;
}

enum adapt_status quant_rounding_parse(const char *text, enum quant_rounding *r)
{
    if (text && !strcmp(text, "nearest")) *r = QUANT_ROUND_NEAREST;
    else if (text && !strcmp(text, "stochastic")) *r = QUANT_ROUND_STOCHASTIC;
    else
        return ADAPT_ERROR(ADAPT_EINVAL, "quant rounding '%s': expected nearest or stochastic",
                           text ? text : "(null)");
    return ADAPT_OK;
}

enum adapt_status quant_tie_parse(const char *text, enum quant_tie *t)
{
    if (text && !strcmp(text, "even")) *t = QUANT_TIE_EVEN;
    else if (text && !strcmp(text, "away")) *t = QUANT_TIE_AWAY;
    else
        return ADAPT_ERROR(ADAPT_EINVAL, "quant tie rule '%s': expected even or away",
                           text ? text : "(null)");
    return ADAPT_OK;
}
