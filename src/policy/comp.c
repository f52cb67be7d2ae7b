/* src/policy/comp.c: the CoMP plan search (two stages over per-layer plan strings) and the
 * comp policy that trains with the chosen plan (src/policy/comp.h). */
#include "src/policy/comp.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/policy/policy.h"
#include "src/policy/policy_core.h"

/* ------------------------------------------------------------ search space */

enum adapt_status adapt_comp_space_init(struct adapt_comp_space *sp, int n, int k,
                                        const int *unit)
{
    memset(sp, 0, sizeof *sp);
    ADAPT_ASSERT(n >= 0 && k >= 1 && k <= ADAPT_COMP_MAX_FORMATS);
    sp->n = n;
    sp->k = k;
    sp->unit = malloc(sizeof(int) * (size_t)(n ? n : 1));
    sp->tried = calloc((size_t)(n ? n : 1), 1);
    if (!sp->unit || !sp->tried) {
        adapt_comp_space_free(sp);
        return ADAPT_ERROR(ADAPT_ENOMEM, "cannot allocate the comp search space");
    }
    for (int i = 0; i < n; i++) {
        sp->unit[i] = unit[i];
        sp->tried[i] = unit[i] >= 0;
    }
    return ADAPT_OK;
}

void adapt_comp_space_free(struct adapt_comp_space *sp)
{
    free(sp->unit);
    free(sp->tried);
    memset(sp, 0, sizeof *sp);
}

static char fp32_digit(const struct adapt_comp_space *sp) { return (char)('0' + sp->k); }

/* The digit of boundary b: a unit layer's, or float32 for the network input (-1) and the
 * loss (n). */
static char boundary_digit(const struct adapt_comp_space *sp, const char *plan, int b)
{
    return b < 0 || b >= sp->n ? fp32_digit(sp) : plan[b];
}

/* The next boundary after b: the next unit layer, or n. */
static int next_boundary(const struct adapt_comp_space *sp, int b)
{
    int i = b + 1;
    while (i < sp->n && sp->unit[i] < 0) i++;
    return i;
}

void adapt_comp_fill_context(const struct adapt_comp_space *sp, char *plan)
{
    for (int s = -1; s < sp->n;) {
        int e = next_boundary(sp, s);
        char ds = boundary_digit(sp, plan, s), de = boundary_digit(sp, plan, e);
        for (int i = s + 1; i < e; i++) plan[i] = ds == de ? ds : fp32_digit(sp);
        s = e;
    }
}

/* A block of `count` strings of n + 1 bytes. */
static char *plan_block(const struct adapt_comp_space *sp, size_t count)
{
    return calloc(count ? count : 1, (size_t)sp->n + 1);
}

enum adapt_status adapt_comp_stage1_plans(const struct adapt_comp_space *sp, int max_plans,
                                          char **plans, int *count)
{
    int t = 0, fixed = 0;
    for (int i = 0; i < sp->n; i++)
        if (sp->unit[i] >= 0) {
            t += sp->tried[i];
            fixed += !sp->tried[i];
        }
    /* 1 (the basis) + (k+1)^t combinations, less the one equal to the basis without fixed
     * units */
    double combos = pow(sp->k + 1, t);
    double total = 1 + combos - (fixed ? 0 : 1);
    if (total > max_plans)
        return ADAPT_ERROR(ADAPT_EINVAL,
                           "policy = comp: stage 1 would train %.0f plans (%d tried units, %d "
                           "formats and float32), more than policy.comp_max_plans = %d; name "
                           "fewer units in policy.comp_try or raise comp_max_plans",
                           total, t, sp->k, max_plans);
    int n = (int)total;
    /* one spare slot: a combination is written before it is compared with the basis */
    char *b = plan_block(sp, (size_t)n + 1);
    if (!b) return ADAPT_ERROR(ADAPT_ENOMEM, "cannot allocate the stage-1 plans");
    size_t w = (size_t)sp->n + 1;
    memset(b, fp32_digit(sp), (size_t)sp->n); /* the basis: all float32 */
    b[sp->n] = 0;
    int m = 1;
    for (long c = 0; c < (long)combos; c++) {
        ADAPT_ASSERT(m <= n);
        char *p = b + (size_t)m * w;
        long rest = c;
        /* the first tried unit is the most significant digit: c = 0 is all format 0 */
        for (int i = sp->n - 1; i >= 0; i--) {
            if (sp->unit[i] < 0) p[i] = fp32_digit(sp);
            else if (!sp->tried[i]) p[i] = '0';
            else {
                p[i] = (char)('0' + rest % (sp->k + 1));
                rest /= sp->k + 1;
            }
        }
        p[sp->n] = 0;
        adapt_comp_fill_context(sp, p);
        if (!strcmp(p, b)) continue; /* the basis again */
        m++;
    }
    ADAPT_ASSERT(m == n);
    memset(b + (size_t)n * w, 0, w);
    *plans = b;
    *count = n;
    return ADAPT_OK;
}

enum adapt_status adapt_comp_stage2_plans(const struct adapt_comp_space *sp, const char *ps1,
                                          int max_plans, char **plans, int *count)
{
    size_t w = (size_t)sp->n + 1;
    int n = 1;
    for (int s = -1; s < sp->n;) { /* count first */
        int e = next_boundary(sp, s), m = e - s - 1;
        char ds = boundary_digit(sp, ps1, s), de = boundary_digit(sp, ps1, e);
        if (ds != de && m > 0) {
            if (m > 30 || n + (1L << m) - 1 > max_plans + 1L)
                return ADAPT_ERROR(ADAPT_EINVAL,
                                   "policy = comp: stage 2 would price more than "
                                   "policy.comp_max_plans = %d plans (%d layers between two "
                                   "units of different formats)",
                                   max_plans, m);
            n += (int)(1L << m) - (ds == fp32_digit(sp) || de == fp32_digit(sp) ? 1 : 0);
        }
        s = e;
    }
    if (n > max_plans)
        return ADAPT_ERROR(ADAPT_EINVAL,
                           "policy = comp: stage 2 would price %d plans, more than "
                           "policy.comp_max_plans = %d",
                           n, max_plans);
    /* one spare slot: a plan is written before it is compared with ps1 */
    char *b = plan_block(sp, (size_t)n + 1);
    if (!b) return ADAPT_ERROR(ADAPT_ENOMEM, "cannot allocate the stage-2 plans");
    memcpy(b, ps1, (size_t)sp->n);
    int c = 1;
    for (int s = -1; s < sp->n;) {
        int e = next_boundary(sp, s), m = e - s - 1;
        char ds = boundary_digit(sp, ps1, s), de = boundary_digit(sp, ps1, e);
        for (long mask = 0; ds != de && m > 0 && mask < (1L << m); mask++) {
            ADAPT_ASSERT(c <= n);
            char *p = b + (size_t)c * w;
            memcpy(p, ps1, (size_t)sp->n);
            for (int j = 0; j < m; j++) p[s + 1 + j] = (mask >> j) & 1 ? de : ds;
            if (!memcmp(p, ps1, (size_t)sp->n)) continue;
            c++;
        }
        s = e;
    }
    ADAPT_ASSERT(c == n);
    memset(b + (size_t)n * w, 0, w);
    *plans = b;
    *count = n;
    return ADAPT_OK;
}

enum adapt_status adapt_comp_check_plan(const struct adapt_comp_space *sp, const char *plan,
                                        const char *const *names)
{
    size_t len = strlen(plan);
    if (len != (size_t)sp->n)
        return ADAPT_ERROR(ADAPT_EINVAL,
                           "comp plan \"%s\": %zu digits, expected one per layer (%d)", plan, len,
                           sp->n);
    for (int i = 0; i < sp->n; i++)
        if (plan[i] < '0' || plan[i] > fp32_digit(sp))
            return ADAPT_ERROR(ADAPT_EINVAL,
                               "comp plan \"%s\": layer %d (%s) has '%c', expected a digit 0..%d "
                               "(%d = float32)",
                               plan, i, names ? names[i] : "?", plan[i], sp->k, sp->k);
    for (int s = -1; s < sp->n;) {
        int e = next_boundary(sp, s);
        char ds = boundary_digit(sp, plan, s), de = boundary_digit(sp, plan, e);
        for (int i = s + 1; i < e; i++)
            if (plan[i] != fp32_digit(sp) && plan[i] != ds && plan[i] != de)
                return ADAPT_ERROR(ADAPT_EINVAL,
                                   "comp plan \"%s\": layer %d (%s) has '%c', expected float32 "
                                   "('%c') or the digit of the unit before it ('%c') or after "
                                   "it ('%c')",
                                   plan, i, names ? names[i] : "?", plan[i], fp32_digit(sp), ds,
                                   de);
        s = e;
    }
    return ADAPT_OK;
}

void adapt_comp_plan_layers(const struct adapt_comp_space *sp, const char *plan, int *gov,
                            int *digit)
{
    for (int s = -1; s < sp->n;) {
        int e = next_boundary(sp, s);
        if (e < sp->n) {
            int u = sp->unit[e];
            if (digit) digit[u] = plan[e] - '0';
            gov[e] = plan[e] == fp32_digit(sp) ? -1 : u;
        }
        char ds = boundary_digit(sp, plan, s);
        for (int i = s + 1; i < e; i++)
            gov[i] = plan[i] == fp32_digit(sp) ? -1 : plan[i] == ds ? sp->unit[s] : sp->unit[e];
        s = e;
    }
}

void adapt_comp_plan_formats(const struct adapt_comp_space *sp, const char *plan, int *fmt)
{
    for (int i = 0; i < sp->n; i++) fmt[i] = plan[i] == fp32_digit(sp) ? -1 : plan[i] - '0';
}

/* ------------------------------------------------------------------ search */

void adapt_comp_result_free(struct adapt_comp_result *res)
{
    free(res->samples);
    free(res->storage);
    free(res->plan);
    memset(res, 0, sizeof *res);
}

/* Index of the cheapest eligible sample among s[0..n) (the first on a tie); -1 none. */
static int cheapest(const struct adapt_comp_sample *s, int n)
{
    int best = -1;
    for (int i = 0; i < n; i++)
        if (s[i].safe && (best < 0 || s[i].cost < s[best].cost)) best = i;
    return best;
}

enum adapt_status adapt_comp_search(const struct adapt_comp_space *sp,
                                    const struct adapt_comp_hooks *h, double tolerance,
                                    int max_plans, struct adapt_comp_result *res)
{
    memset(res, 0, sizeof *res);
    char *p1 = NULL, *p2 = NULL;
    int n1 = 0, n2 = 0;
    size_t w = (size_t)sp->n + 1;
    enum adapt_status st = adapt_comp_stage1_plans(sp, max_plans, &p1, &n1);
    if (st) return st;
    res->samples = calloc((size_t)n1 + (size_t)max_plans, sizeof *res->samples);
    res->plan = malloc(w);
    if (!res->samples || !res->plan) {
        st = ADAPT_ERROR(ADAPT_ENOMEM, "cannot allocate the comp search");
        goto free_plans;
    }
    /* stage 1: an epoch per plan from the same state */
    double loss0 = NAN;
    for (int i = 0; i < n1; i++) {
        struct adapt_comp_sample *s = &res->samples[i];
        s->stage = 1;
        s->plan = p1 + (size_t)i * w;
        if ((st = h->epoch(h->ctx, s->plan, &s->loss, &s->steps, &s->samples)) ||
            (st = h->cost(h->ctx, s->plan, &s->cost)))
            goto free_plans;
        if (i == 0) loss0 = s->loss;
        s->safe = i == 0 || (isfinite(s->loss) && isfinite(loss0) && s->loss < loss0 * tolerance);
        res->n_samples++;
    }
    int b1 = cheapest(res->samples, n1);
    res->samples[b1].chosen = 1;
    /* stage 2: one batch per plan between the stage-1 split points */
    if ((st = adapt_comp_stage2_plans(sp, res->samples[b1].plan, max_plans, &p2, &n2)))
        goto free_plans;
    for (int i = 0; i < n2; i++) {
        struct adapt_comp_sample *s = &res->samples[n1 + i];
        s->stage = 2;
        s->plan = p2 + (size_t)i * w;
        s->steps = 0;
        if ((st = h->batch(h->ctx, s->plan, &s->loss, &s->samples)) ||
            (st = h->cost(h->ctx, s->plan, &s->cost)))
            goto free_plans;
        s->safe = i == 0 || isfinite(s->loss); /* P_s1 passed stage 1 */
        res->n_samples++;
    }
    int b2 = cheapest(res->samples + n1, n2);
    res->samples[n1 + b2].chosen = 1;
    memcpy(res->plan, res->samples[n1 + b2].plan, w);
    /* one block for the plan strings the samples point into */
    res->storage = malloc(w * (size_t)(n1 + n2));
    if (!res->storage) {
        st = ADAPT_ERROR(ADAPT_ENOMEM, "cannot allocate the comp search");
        goto free_plans;
    }
    memcpy(res->storage, p1, w * (size_t)n1);
    memcpy(res->storage + w * (size_t)n1, p2, w * (size_t)n2);
    for (int i = 0; i < n1 + n2; i++) res->samples[i].plan = res->storage + w * (size_t)i;
free_plans:
    free(p1);
    free(p2);
    if (st) adapt_comp_result_free(res);
    return st;
}

/* ------------------------------------------------------------------ policy */

struct comp_state {
    struct adapt_comp_space sp;
    struct quant_spec fmt[ADAPT_COMP_MAX_FORMATS];
    int scaled;                     /* loss scaling (every candidate overflows to inf) */
    struct adapt_amp_scaler scaler;
    char *plan;                     /* (n + 1) */
    int have_plan;                  /* from comp_plan, a search or a checkpoint */
    const char **names;             /* (n) layer names, borrowed from the network */
};

static struct comp_state *comp_of(const struct adapt_policy *p)
{
    ADAPT_ASSERT(!strcmp(p->type->name, "comp"));
    return p->state;
}

/* The tensor-core rule: input and output channels per group multiples of m. */
static int tc_eligible(const struct adapt_layer *l, int m)
{
    int g = l->groups > 0 ? l->groups : 1;
    long cin, cout = l->out_dim[0] / g;
    if (!strcmp(l->ops->kind, "conv2d")) cin = l->in_dim[0][0] / g;
    else cin = (long)l->in_dim[0][0] * l->in_dim[0][1] * l->in_dim[0][2];
    return cin % m == 0 && cout % m == 0;
}

/* Splits the comma-separated list s into at most max trimmed items of size len. */
static int split_list(const char *s, char (*items)[QUANT_SPEC_STR_MAX], int max, int *n)
{
    *n = 0;
    int depth = 0;
    size_t j = 0;
    char cur[QUANT_SPEC_STR_MAX];
    for (const char *c = s;; c++) {
        if (*c == '(') depth++;
        if (*c == ')') depth--;
        if (!*c || (*c == ',' && depth == 0)) {
            cur[j] = 0;
            char *a = cur, *e = cur + j;
            while (*a && isspace((unsigned char)*a)) a++;
            while (e > a && isspace((unsigned char)e[-1])) *--e = 0;
            if (*a) {
                if (*n == max) return -1;
                snprintf(items[(*n)++], QUANT_SPEC_STR_MAX, "%s", a);
            }
            j = 0;
            if (!*c) break;
            continue;
        }
        if (j + 1 < sizeof cur) cur[j++] = *c;
    }
    return 0;
}

static int overflows_to_inf(const struct quant_spec *s)
{
    switch (s->format) {
    case QUANT_FORMAT_FP16:
    case QUANT_FORMAT_BF16:
    case QUANT_FORMAT_FLOAT:
    case QUANT_FORMAT_E5M2: return s->overflow == QUANT_OVERFLOW_INF;
    default: return 0;
    }
}

static enum adapt_status comp_tried_from_config(struct adapt_policy *p, struct comp_state *c)
{
    const struct adapt_config *cfg = p->cfg;
    struct adapt_net *net = p->net;
    if (!cfg->policy.comp_try[0]) {
        for (int i = 0; i < net->nnodes; i++)
            if (c->sp.unit[i] >= 0)
                c->sp.tried[i] =
                    !tc_eligible(net->nodes[i].layer, cfg->policy.comp_tc_multiple);
        return ADAPT_OK;
    }
    enum { MAX_NAMES = 128 };
    char(*items)[QUANT_SPEC_STR_MAX] = malloc(sizeof *items * MAX_NAMES);
    if (!items) return ADAPT_ERROR(ADAPT_ENOMEM, "cannot allocate the comp policy");
    int n;
    enum adapt_status st = ADAPT_OK;
    if (split_list(cfg->policy.comp_try, items, MAX_NAMES, &n)) {
        st = ADAPT_ERROR(ADAPT_EINVAL, "policy.comp_try: more than %d names", MAX_NAMES);
        goto free_items;
    }
    memset(c->sp.tried, 0, (size_t)c->sp.n);
    for (int j = 0; j < n && !st; j++) {
        int found = -1;
        for (int i = 0; i < net->nnodes && found < 0; i++)
            if (!strcmp(net->nodes[i].layer->name, items[j])) found = i;
        if (found < 0)
            st = ADAPT_ERROR(ADAPT_EINVAL, "policy.comp_try = %s: %s has no layer %s",
                             cfg->policy.comp_try, net->name, items[j]);
        else if (c->sp.unit[found] < 0)
            st = ADAPT_ERROR(ADAPT_EINVAL,
                             "policy.comp_try = %s: layer %s is a %s, not a unit (conv2d, "
                             "linear)",
                             cfg->policy.comp_try, items[j], net->nodes[found].layer->ops->kind);
        else c->sp.tried[found] = 1;
    }
free_items:
    free(items);
    return st;
}

void adapt_policy_comp_cost_view(const struct adapt_policy *p, const char *plan, int *wl,
                                 int *gov)
{
    const struct comp_state *c = comp_of(p);
    int *digit = malloc(sizeof(int) * (size_t)(p->net->nunits ? p->net->nunits : 1));
    ADAPT_ASSERT(digit);
    adapt_comp_plan_layers(&c->sp, plan, gov, digit);
    for (int u = 0; u < p->net->nunits; u++)
        wl[u] = digit[u] == c->sp.k ? 32 : quant_spec_bits(&c->fmt[digit[u]]);
    free(digit);
}

enum adapt_status adapt_policy_comp_apply(struct adapt_policy *p, const char *plan, long step)
{
    struct comp_state *c = comp_of(p);
    const struct adapt_config *cfg = p->cfg;
    struct adapt_net *net = p->net;
    enum adapt_status st = adapt_comp_check_plan(&c->sp, plan, c->names);
    if (st) return st;
    size_t n = (size_t)net->nnodes;
    int *gov = malloc(sizeof(int) * (n + 1));
    int *digit = malloc(sizeof(int) * (size_t)(net->nunits + 1));
    unsigned char *rin = calloc(n + 1, 1), *rout = calloc(n + 1, 1);
    struct adapt_gamp *g = calloc(1, sizeof *g);
    if (g) {
        g->n = (int)n;
        g->low = calloc(n + 1, 1);
        g->fmt_unit = malloc(sizeof(int) * (n + 1));
    }
    if (!gov || !digit || !rin || !rout || !g || !g->low || !g->fmt_unit) {
        st = ADAPT_ERROR(ADAPT_ENOMEM, "cannot allocate the comp plan");
        goto free_arrays;
    }
    adapt_comp_plan_layers(&c->sp, plan, gov, digit);
    for (size_t i = 0; i < n; i++) {
        int low = gov[i] >= 0, unit = c->sp.unit[i] >= 0;
        rout[i] = (unsigned char)(low && cfg->quantization.quant_outputs);
        rin[i] = (unsigned char)(low && unit && cfg->quantization.quant_inputs);
        g->low[i] = (unsigned char)low;
        g->fmt_unit[i] = gov[i];
    }
    adapt_precision_free(p->prec);
    p->prec = NULL;
    adapt_gamp_free(p->gamp);
    p->gamp = g;
    g = NULL;
    if ((st = adapt_precision_alloc_nodes(&p->prec, net, gov, rin, rout,
                                          cfg->quantization.rounding, p->seed)))
        goto free_arrays;
    adapt_policy_apply_output_rules(p, 0);
    if (c->scaled) adapt_precision_half_backward(p->prec); /* as AMP's units */
    for (int u = 0; u < net->nunits; u++) {
        if (digit[u] == c->sp.k) adapt_precision_set_float(p->prec, u);
        else adapt_precision_set(p->prec, u, &c->fmt[digit[u]]);
    }
    adapt_precision_refresh_weights(p->prec, step);
    memcpy(c->plan, plan, n + 1);
    c->scaler.scale = cfg->policy.amp_init_scale; /* a plan starts with a fresh loss scale */
    c->scaler.good_steps = 0;
    p->loss_scale = c->scaled ? c->scaler.scale : 1.0;
free_arrays:
    if (g) adapt_gamp_free(g);
    free(rout);
    free(rin);
    free(digit);
    free(gov);
    return st;
}

static enum adapt_status comp_init(struct adapt_policy *p)
{
    const struct adapt_config *cfg = p->cfg;
    struct adapt_net *net = p->net;
    struct comp_state *c = calloc(1, sizeof *c);
    if (!c) return ADAPT_ERROR(ADAPT_ENOMEM, "cannot allocate the comp policy");
    p->state = c;
    char items[ADAPT_COMP_MAX_FORMATS + 1][QUANT_SPEC_STR_MAX];
    int k;
    if (split_list(cfg->policy.comp_formats, items, ADAPT_COMP_MAX_FORMATS, &k) || k == 0)
        return ADAPT_ERROR(ADAPT_EINVAL,
                           "policy.comp_formats = %s: expected 1 to %d format names, "
                           "comma-separated",
                           cfg->policy.comp_formats, ADAPT_COMP_MAX_FORMATS);
    c->scaled = 1;
    enum adapt_status st;
    for (int f = 0; f < k; f++) {
        if ((st = quant_spec_parse(items[f], &c->fmt[f])))
            return ADAPT_ERROR(st, "policy.comp_formats: %s: %s", items[f],
                               adapt_error_message());
        c->scaled &= overflows_to_inf(&c->fmt[f]);
    }
    c->scaler.growth_interval = cfg->policy.amp_growth_interval;
    p->l1_after_rounding = c->scaled; /* adapt_policy_amp_observe adds it */
    int n = net->nnodes;
    int *unit = malloc(sizeof(int) * (size_t)(n + 1));
    c->names = malloc(sizeof(char *) * (size_t)(n + 1));
    c->plan = calloc((size_t)n + 1, 1);
    if (!unit || !c->names || !c->plan) {
        free(unit);
        return ADAPT_ERROR(ADAPT_ENOMEM, "cannot allocate the comp policy");
    }
    for (int i = 0, u = 0; i < n; i++) {
        const struct adapt_layer *l = net->nodes[i].layer;
        unit[i] = l->is_unit ? u++ : -1;
        c->names[i] = l->name;
    }
    st = adapt_comp_space_init(&c->sp, n, k, unit);
    free(unit);
    if (st || (st = comp_tried_from_config(p, c))) return st;
    char *start = malloc((size_t)n + 1);
    if (!start) return ADAPT_ERROR(ADAPT_ENOMEM, "cannot allocate the comp policy");
    if (cfg->policy.comp_plan[0]) {
        snprintf(start, (size_t)n + 1, "%s", cfg->policy.comp_plan);
        if (strlen(cfg->policy.comp_plan) != (size_t)n) {
            free(start);
            return ADAPT_ERROR(ADAPT_EINVAL,
                               "policy.comp_plan = %s: %zu digits, but %s has %d layers (one "
                               "digit each)",
                               cfg->policy.comp_plan, strlen(cfg->policy.comp_plan), net->name, n);
        }
        c->have_plan = 1;
    } else {
        memset(start, '0' + k, (size_t)n); /* float32 until the search chooses */
        start[n] = 0;
    }
    st = adapt_policy_comp_apply(p, start, 0);
    if (st && cfg->policy.comp_plan[0])
        st = ADAPT_ERROR(st, "policy.comp_plan: %s", adapt_error_message());
    free(start);
    return st;
}

static int comp_observe(struct adapt_policy *p, long step, double loss, int last)
{
    (void)loss, (void)last;
    struct comp_state *c = p->state;
    if (c->scaled) return adapt_policy_amp_observe(p, &c->scaler, step);
    if (p->cfg->quantization.quant_grads) adapt_precision_quantize_grads(p->prec, step);
    return 0;
}

static json_t *comp_save(const struct adapt_policy *p)
{
    const struct comp_state *c = p->state;
    return json_pack("{s:s, s:f, s:i}", "plan", c->plan, "scale", c->scaler.scale,
                     "good_steps", c->scaler.good_steps);
}

static enum adapt_status comp_load(struct adapt_policy *p, json_t *j,
                                   const struct adapt_safetensors *f)
{
    (void)f;
    struct comp_state *c = p->state;
    const char *plan;
    double scale;
    int good;
    if (json_unpack(j, "{s:s, s:F, s:i}", "plan", &plan, "scale", &scale, "good_steps", &good))
        return ADAPT_ERROR(ADAPT_EFORMAT, "checkpoint: malformed comp policy state");
    enum adapt_status st = adapt_policy_comp_apply(p, plan, 0);
    if (st) return ADAPT_ERROR(st, "checkpoint: comp policy: %s", adapt_error_message());
    c->have_plan = 1;
    c->scaler.scale = scale;
    c->scaler.good_steps = good;
    p->loss_scale = c->scaled ? scale : 1.0;
    return ADAPT_OK;
}

static void comp_destroy(struct adapt_policy *p)
{
    struct comp_state *c = p->state;
    if (!c) return;
    adapt_comp_space_free(&c->sp);
    free(c->plan);
    free(c->names);
    free(c);
}

int adapt_policy_comp_needs_search(const struct adapt_policy *p)
{
    return !strcmp(p->type->name, "comp") && !((const struct comp_state *)p->state)->have_plan;
}

const struct adapt_comp_space *adapt_policy_comp_space(const struct adapt_policy *p)
{
    return &comp_of(p)->sp;
}

const char *adapt_policy_comp_plan(const struct adapt_policy *p) { return comp_of(p)->plan; }

void adapt_policy_comp_searched(struct adapt_policy *p)
{
    struct comp_state *c = comp_of(p);
    c->have_plan = 1;
}

const struct adapt_policy_type adapt_policy_comp = {
    "comp", comp_init, comp_observe, NULL, NULL, comp_save, NULL, comp_load, comp_destroy, NULL, 0};
