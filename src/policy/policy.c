/* src/policy/policy.c: the policy table, shared helpers, and the fp32,
 * fixed and amp policies. */
#include "src/policy/policy.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/log.h"
#include "src/policy/comp.h"
#include "src/policy/policy_core.h"

extern const struct adapt_policy_type adapt_policy_adapt;
extern const struct adapt_policy_type adapt_policy_muppet;
extern const struct adapt_policy_type adapt_policy_comp;
static const struct adapt_policy_type policy_fp32, policy_fixed, policy_amp;

static const struct adapt_policy_type *const policy_table[] = {
    &policy_fp32,        &policy_fixed, &adapt_policy_adapt,
    &adapt_policy_muppet, &policy_amp,  &adapt_policy_comp, NULL};

const struct adapt_policy_type *adapt_policy_find(const char *name)
{
    for (int i = 0; policy_table[i]; i++)
        if (!strcmp(policy_table[i]->name, name)) return policy_table[i];
    return NULL;
}

/* The [roles] of the configuration on the precision state. */
static enum adapt_status apply_roles(struct adapt_policy *p, const struct adapt_config *cfg)
{
    struct adapt_role_fmt roles[ADAPT_ROLE_N];
    for (int r = 0; r < ADAPT_ROLE_N; r++) {
        enum adapt_status st = adapt_config_role(cfg, (enum adapt_role)r, &roles[r]);
        if (st) return st;
    }
    struct adapt_roles_opts o = {cfg->roles.amax_history,
                                 cfg->roles.amax_compute == ADAPT_AMAX_MOST_RECENT,
                                 cfg->roles.margin, cfg->roles.scale == ADAPT_SCALE_POW2};
    enum adapt_status st = adapt_precision_set_roles(p->prec, roles, &o);
    struct adapt_role_override ov[ADAPT_ROLE_OVERRIDES_MAX];
    int n = 0;
    if (!st) st = adapt_config_role_overrides(cfg, ov, &n);
    for (int i = 0; !st && i < n; i++) {
        int u = -1;
        for (int k = 0; k < p->prec->nunits; k++)
            if (!strcmp(p->prec->u[k].layer->name, ov[i].unit)) u = k;
        if (u < 0) {
            char names[512] = "";
            for (int k = 0; k < p->prec->nunits; k++)
                snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s",
                         k ? ", " : "", p->prec->u[k].layer->name);
            char o[ADAPT_CONFIG_OVERRIDE_LEN + 32];
            adapt_config_origin_str(cfg, "roles", "units", o, sizeof o);
            return ADAPT_ERROR(ADAPT_EINVAL, "%s: roles.units: no precision unit named '%s' (the "
                                             "units: %s)", o, ov[i].unit, names);
        }
        st = adapt_precision_set_unit_role(p->prec, u, ov[i].role, &ov[i].fmt);
    }
    const enum adapt_config_mx_axis ax = adapt_config_mx_axis(cfg);
    if (!st && ax != ADAPT_MX_AXIS_ROWS) {
        char o[ADAPT_CONFIG_OVERRIDE_LEN + 32];
        adapt_config_origin_str(cfg, "roles",
                                cfg->roles.mx_axis != ADAPT_MX_AXIS_ROWS ? "mx_axis" : "recipe", o,
                                sizeof o);
        st = adapt_precision_set_mx_gemm(p->prec, o, ax == ADAPT_MX_AXIS_CHANNELS);
    }
    return st;
}

/* The [arithmetic] of the configuration on the precision state. */
static enum adapt_status apply_arith(struct adapt_policy *p, const struct adapt_config *cfg)
{
    struct quant_acc def;
    struct adapt_arith_override ov[ADAPT_ARITH_OVERRIDES_MAX];
    int n = 0;
    enum adapt_status st = adapt_config_arith(cfg, &def, ov, &n);
    if (st) return st;
    const int nu = p->prec->nunits;
    struct quant_acc *acc = malloc(sizeof *acc * (size_t)(nu > 0 ? nu : 1));
    if (!acc) return ADAPT_ERROR(ADAPT_ENOMEM, "cannot allocate the accumulator models");
    for (int u = 0; u < nu; u++) acc[u] = def;
    char o[ADAPT_CONFIG_OVERRIDE_LEN + 32];
    adapt_config_origin_str(cfg, "arithmetic", "units", o, sizeof o);
    for (int i = 0; i < n && !st; i++) {
        int u = -1;
        for (int k = 0; k < nu; k++)
            if (!strcmp(p->prec->u[k].layer->name, ov[i].unit)) u = k;
        if (u < 0) {
            char names[512] = "";
            for (int k = 0; k < nu; k++)
                snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", k ? ", " : "",
                         p->prec->u[k].layer->name);
            st = ADAPT_ERROR(ADAPT_EINVAL,
                             "%s: arithmetic.units: no precision unit named '%s' "
                             "(the units: %s)",
                             o, ov[i].unit, names);
        } else if (!p->prec->u[u].layer->mx_gemm && ov[i].acc.kind != QUANT_ACC_FLOAT32) {
            const struct adapt_layer *l = p->prec->u[u].layer;
            st = ADAPT_ERROR(ADAPT_EINVAL,
                             "%s: arithmetic.units: unit %s is a grouped or dilated "
                             "convolution (groups %d, dilation %d), whose GEMMs run "
                             "in float32 only; expected float32 for it",
                             o, l->name, l->groups, l->dilation);
        } else {
            acc[u] = ov[i].acc;
        }
    }
    int skipped = 0;
    if (!st) st = adapt_precision_set_arith(p->prec, acc, &skipped);
    if (!st && skipped)
        adapt_log(ADAPT_LOG_WARN,
                  "arithmetic.accumulator = %s: %d grouped or dilated "
                  "convolution unit(s) keep float32 arithmetic (adapt-train "
                  "--dry-run lists them)",
                  cfg->arithmetic.accumulator, skipped);
    free(acc);
    return st;
}

enum adapt_status adapt_policy_alloc(struct adapt_policy **out, const struct adapt_config *cfg,
                                     struct adapt_net *net, uint64_t seed)
{
    const char *name = adapt_config_enum_str(cfg, "policy", "name");
    const struct adapt_policy_type *t = adapt_policy_find(name);
    if (!t) return ADAPT_ERROR(ADAPT_EINVAL, "policy.name = %s: no such policy", name);
    struct adapt_policy *p = calloc(1, sizeof *p);
    if (!p) return ADAPT_ERROR(ADAPT_ENOMEM, "cannot allocate the policy");
    p->type = t;
    p->cfg = cfg;
    p->net = net;
    p->seed = seed;
    p->loss_scale = 1.0;
    enum adapt_status st = t->init(p);
    if (!st && p->prec && adapt_config_roles_set(cfg)) st = apply_roles(p, cfg);
    if (!st && p->prec && adapt_config_arith_set(cfg)) st = apply_arith(p, cfg);
    if (st) {
        adapt_policy_free(p);
        return st;
    }
    *out = p;
    return ADAPT_OK;
}

void adapt_policy_free(struct adapt_policy *p)
{
    if (!p) return;
    if (p->type->destroy) p->type->destroy(p);
    adapt_precision_free(p->prec);
    adapt_gamp_free(p->gamp);
    free(p->events);
    free(p->lb);
    free(p->r);
    free(p);
}

enum adapt_status adapt_policy_add_event(struct adapt_policy *p, const struct adapt_trace_event *e)
{
    if (p->n_events == p->cap_events) {
        int cap = p->cap_events ? 2 * p->cap_events : 16;
        struct adapt_trace_event *n = realloc(p->events, sizeof *n * (size_t)cap);
        if (!n) return ADAPT_ERROR(ADAPT_ENOMEM, "cannot record a precision event for the trace");
        p->events = n;
        p->cap_events = cap;
    }
    p->events[p->n_events++] = *e;
    return ADAPT_OK;
}

void adapt_policy_clear_events(struct adapt_policy *p) { p->n_events = 0; }

void adapt_policy_unit_state(const struct adapt_policy *p, int u,
                             struct adapt_trace_unit_state *s)
{
    s->wl = 32;
    s->fl = 0;
    s->lb = p->lb ? p->lb[u] : NAN;
    s->r = p->r ? p->r[u] : -1;
    s->sparsity = NAN;
    s->sat = s->flush = -1;
    s->act_sat = NAN;
    memset(s->scaled, 0, sizeof s->scaled);
    s->acc_set = 0;
    if (!p->prec) return;
    if (p->prec->arith && p->prec->u[u].layer->arith == &p->prec->arith[u]) {
        struct adapt_arith *a = &p->prec->arith[u];
        s->acc_set = 1;
        for (int g = 0; g < 3; g++) {
            s->acc_gemms[g] = (int64_t)a->gemms[g];
            s->acc_overflows[g] = (int64_t)a->overflows[g];
            a->gemms[g] = a->overflows[g] = 0;
        }
    }
    adapt_precision_take_scales(p->prec, u, s->scaled);
    adapt_precision_sync(p->prec); /* a failure is kept in the precision state's dev_st */
    const struct adapt_unit_prec *up = &p->prec->u[u];
    s->sparsity = up->sparsity;
    s->sat = (int64_t)up->sat;
    s->flush = (int64_t)up->flush;
    s->act_sat = adapt_precision_take_act_sat(p->prec, u);
    if (!up->active) return;
    s->wl = quant_spec_bits(&up->spec);
    s->fl = up->spec.format == QUANT_FORMAT_FIXED ? up->spec.fl : 0;
}

/* adapt_policy_step on the GPU engine: the same sequence on the device's arrays; observe and
 * decide queue their work there (a failure is kept in dev_st, as observe returns no status). */
static enum adapt_status device_step(struct adapt_policy *p, struct adapt_sgd *opt, long step,
                                     double loss, int micro, int last_in_epoch, int *skipped)
{
    enum adapt_status st;
    const double l1 = p->l1_after_rounding ? 0.0 : opt->l1 * p->loss_scale;
    if ((st = adapt_cuda_net_sgd_prepare(p->dev, 1.0 / micro, l1, opt->l1_quantized))) return st;
    int skip = p->type->observe(p, step, loss, last_in_epoch);
    if (p->dev_st) return p->dev_st;
    if (p->prec && p->prec->dev_st) return p->prec->dev_st;
    if (p->type->decide && (st = p->type->decide(p, step))) return st;
    if (skip) {
        st = adapt_cuda_net_zero_grads(p->dev);
    } else if (!(st = adapt_cuda_net_sgd_update(p->dev, opt))) {
        opt->steps++;
    }
    if (!st && p->prec) st = adapt_precision_refresh_weights(p->prec, step);
    if (skipped) *skipped = skip;
    return st;
}

/* fp32 and fixed keep nothing of their own on the device */
static enum adapt_status no_device_state(struct adapt_policy *p, int to_device)
{
    (void)p, (void)to_device;
    return ADAPT_OK;
}

enum adapt_status adapt_policy_step(struct adapt_policy *p, struct adapt_sgd *opt, long step,
                                    double loss, int micro, int last_in_epoch, int *skipped)
{
    enum adapt_status st;
    opt->l1_quantized = p->l1_quantized;
    opt->l2_quantized = p->l2_quantized;
    p->opt = opt;
    if (p->dev) {
        st = device_step(p, opt, step, loss, micro, last_in_epoch, skipped);
        p->opt = NULL;
        return st;
    }
    adapt_sgd_scale_grads(opt, 1.0 / micro);
    if (!p->l1_after_rounding) adapt_sgd_add_l1(opt, p->loss_scale);
    int skip = p->type->observe(p, step, loss, last_in_epoch);
    p->opt = NULL;
    if (p->type->decide && (st = p->type->decide(p, step))) return st;
    if (skip) adapt_net_zero_grad(p->net);
    else adapt_sgd_update(opt);
    if (p->prec) adapt_precision_refresh_weights(p->prec, step);
    if (skipped) *skipped = skip;
    return ADAPT_OK;
}

enum adapt_status adapt_policy_cuda_check(const struct adapt_config *cfg)
{
    const char *name = adapt_config_enum_str(cfg, "policy", "name");
    const struct adapt_policy_type *t = adapt_policy_find(name);
    if (t && !t->cuda)
        return ADAPT_ERROR(ADAPT_EUNSUPPORTED,
                           "run.device = cuda: policy.name = %s does not run on the GPU engine "
                           "(fp32, fixed, adapt, muppet and amp do); use run.device = cpu",
                           name);
    if (adapt_config_mx_axis(cfg) != ADAPT_MX_AXIS_ROWS)
        return ADAPT_ERROR(ADAPT_EUNSUPPORTED,
                           "run.device = cuda: MX blocks along each GEMM's reduction dimension "
                           "(roles.mx_axis = gemm or channels, roles.recipe = mxfp8_gemm) run on "
                           "the CPU "
                           "engine only; use run.device = cpu or roles.mx_axis = rows");
    static const struct {
        enum adapt_reference_switch sw;
        const char *key;
    } cpu_only[] = {
        {ADAPT_REF_LOSS_PENALTY, "loss_penalty"},
        {ADAPT_REF_POOL_ROUNDING, "pool_rounding"},
        {ADAPT_REF_BN_ROUNDING, "bn_rounding"}}; /* AdaPT's switches of the CPU engine */
    for (size_t k = 0; k < sizeof cpu_only / sizeof cpu_only[0]; k++)
        if (cfg->policy.name == ADAPT_CONFIG_POLICY_ADAPT &&
            adapt_config_reference(cfg, cpu_only[k].sw))
            return ADAPT_ERROR(ADAPT_EUNSUPPORTED,
                               "run.device = cuda: reference.%s (%s) runs on the CPU engine only; "
                               "set reference.%s = off or run.device = cpu",
                               cpu_only[k].key,
                               cfg->reference.sw[cpu_only[k].sw] == ADAPT_SWITCH_ON
                                   ? "on"
                                   : "auto: on with quantization.compat = reference on this model",
                               cpu_only[k].key);
    return ADAPT_OK;
}

enum adapt_status adapt_policy_use_cuda(struct adapt_policy *p, struct adapt_cuda_net *d, long step)
{
    if (!d) {
        if (p->prec) adapt_precision_use_cuda(p->prec, NULL);
        p->dev = NULL;
        return ADAPT_OK;
    }
    enum adapt_status st;
    if ((st = adapt_policy_cuda_check(p->cfg))) return st;
    if (p->prec && (st = adapt_precision_use_cuda(p->prec, d))) return st;
    p->dev = d;
    p->dev_st = ADAPT_OK;
    if ((st = p->type->cuda(p, 1))) return st;
    /* the copies the host made for this step, made again where the step runs, with the scales
     * they had (the scale states took that rounding already) */
    return p->prec ? adapt_precision_refresh_again(p->prec, step) : ADAPT_OK;
}

enum adapt_status adapt_policy_pull_cuda(struct adapt_policy *p)
{
    return p->dev ? p->type->cuda(p, 0) : ADAPT_OK;
}

/* ------------------------------------------------------------------ fp32 */

static enum adapt_status fp32_init(struct adapt_policy *p)
{
    (void)p;
    return ADAPT_OK;
}

static int fp32_observe(struct adapt_policy *p, long step, double loss, int last)
{
    (void)p, (void)step, (void)loss, (void)last;
    return 0;
}

static const struct adapt_policy_type policy_fp32 = {
    "fp32", fp32_init, fp32_observe, NULL, NULL, NULL, NULL, NULL, NULL, no_device_state, 0};

void adapt_policy_apply_output_rules(struct adapt_policy *p, int adapt_corrected)
{
    const struct adapt_config *cfg = p->cfg;
    adapt_precision_set_sr_bits(p->prec, adapt_config_sr_bits(cfg));
    enum adapt_config_ste ste = cfg->quantization.ste;
    p->prec->ste = ste == ADAPT_CONFIG_STE_SATURATING ||
                           (ste == ADAPT_CONFIG_STE_AUTO && adapt_corrected)
                       ? ADAPT_STE_SATURATING
                       : ADAPT_STE_PLAIN;
    enum adapt_config_auto_bool r = cfg->quantization.round_logits;
    if (r == ADAPT_CONFIG_FALSE || (r == ADAPT_CONFIG_AUTO && adapt_corrected))
        adapt_precision_keep_logits_float(p->prec);
}

/* p->prec with the given settings, then the output rules. */
static enum adapt_status alloc_prec(struct adapt_policy *p, int round_inputs, enum adapt_qout qout,
                                    enum quant_rounding r, int adapt_corrected)
{
    enum adapt_status st = adapt_precision_alloc(&p->prec, p->net, round_inputs, qout, r, p->seed);
    if (!st) adapt_policy_apply_output_rules(p, adapt_corrected);
    return st;
}

/* 1 when low layer i's output is rounded at i, for a consumer that computes in low
 * precision (GraphAMP downcasts an edge for its consumer only: an allowed operator itself
 * writes float32). Units that round their own inputs (rin) need no rounding at the producer;
 * a float32 consumer must read the float32 value. So i rounds when it has a low consumer and
 * either no float32 one (the values are the same as the consumers' own rounding would give)
 * or a low consumer without input rounding (a layer without weights: it reads i's array, so a
 * float32 consumer beside it reads the rounded value too). The network output is rounded as
 * quantization.round_logits says (adapt_policy_apply_output_rules). */
static int low_reader(const struct adapt_gamp *g, const struct adapt_gamp_layer *layers,
                      const unsigned char *rin, int n, int i)
{
    if (i == n - 1) return 1;
    int low = 0, flt = 0, bare = 0;
    for (int j = i + 1; j < n; j++)
        for (int k = 0; k < layers[j].n_in; k++) {
            if (layers[j].in[k] != i) continue;
            low |= g->low[j];
            flt |= !g->low[j];
            bare |= g->low[j] && !rin[j];
        }
    return flt ? bare : low;
}

/* precision_propagation = graph: p->gamp from the configuration's sets and the network's
 * graph, then p->prec with its per-node plan (low units round their inputs when
 * round_inputs; low layers their outputs when round_outputs, for their low consumers only:
 * low_reader), then the output rules. */
static enum adapt_status alloc_graph_prec(struct adapt_policy *p, int round_inputs,
                                          int round_outputs, enum quant_rounding r)
{
    struct adapt_net *net = p->net;
    struct adapt_gamp_rules rules;
    enum adapt_status st = adapt_gamp_rules_from_config(&rules, p->cfg);
    if (st) return st;
    size_t n = (size_t)net->nnodes + 1;
    struct adapt_gamp_layer *layers = calloc(n, sizeof *layers);
    unsigned char *rin = calloc(n, 1), *rout = calloc(n, 1);
    if (!layers || !rin || !rout) {
        st = ADAPT_ERROR(ADAPT_ENOMEM, "cannot allocate the precision propagation");
        goto free_plan;
    }
    if ((st = adapt_gamp_layers_from_net(net, layers)) ||
        (st = adapt_gamp_resolve(&p->gamp, layers, net->nnodes, &rules)))
        goto free_plan;
    for (int i = 0; i < net->nnodes; i++)
        rin[i] = (unsigned char)(round_inputs && p->gamp->low[i] && layers[i].unit >= 0);
    for (int i = 0; i < net->nnodes; i++)
        rout[i] = (unsigned char)(round_outputs && p->gamp->low[i] &&
                                  low_reader(p->gamp, layers, rin, net->nnodes, i));
    if (!(st = adapt_precision_alloc_nodes(&p->prec, net, p->gamp->fmt_unit, rin, rout, r,
                                           p->seed)))
        adapt_policy_apply_output_rules(p, 0);
free_plan:
    free(rout);
    free(rin);
    free(layers);
    return st;
}

/* Unit u computes in s, or in float32 where graph propagation left it float32. */
static void set_unit(struct adapt_policy *p, int u, const struct quant_spec *s)
{
    if (p->gamp && !p->gamp->low[p->prec->u[u].node]) adapt_precision_set_float(p->prec, u);
    else adapt_precision_set(p->prec, u, s);
}

static int graph_propagation(const struct adapt_policy *p)
{
    return p->cfg->quantization.precision_propagation == ADAPT_CONFIG_PROPAGATION_GRAPH;
}

const char *adapt_policy_layer_precision(const struct adapt_policy *p, int node, char *buf,
                                         size_t size)
{
    if (!p->gamp || !p->prec) return NULL;
    ADAPT_ASSERT(node >= 0 && node < p->gamp->n);
    int u = p->gamp->fmt_unit[node];
    if (!p->gamp->low[node] || u < 0 || !p->prec->u[u].active) {
        snprintf(buf, size, "float32");
        return buf;
    }
    return quant_spec_str(&p->prec->u[u].spec, buf, size);
}

void adapt_policy_print_layers(const struct adapt_policy *p, FILE *f)
{
    if (!p->gamp || !p->prec) return;
    const struct adapt_gamp *g = p->gamp;
    const struct adapt_config *cfg = p->cfg;
    if (!g->set)
        fprintf(f, "precision plan: %s\n", adapt_policy_comp_plan(p));
    else
    fprintf(f, "precision propagation: graph, preset %s%s%s%s%s%s%s%s%s%s%s\n",
            adapt_config_enum_str(cfg, "quantization", "graph_preset"),
            cfg->quantization.graph_allow[0] ? ", allow " : "", cfg->quantization.graph_allow,
            cfg->quantization.graph_infer[0] ? ", infer " : "", cfg->quantization.graph_infer,
            cfg->quantization.graph_deny[0] ? ", deny " : "", cfg->quantization.graph_deny,
            cfg->quantization.graph_low[0] ? ", low " : "", cfg->quantization.graph_low,
            cfg->quantization.graph_float[0] ? ", float " : "", cfg->quantization.graph_float);
    fprintf(f, "  %-26s %-12s %-6s %-7s %s\n", "layer", "kind", "set", "from", "precision");
    int nlow = 0, ulow = 0;
    for (int i = 0; i < g->n; i++) {
        const struct adapt_layer *l = p->net->nodes[i].layer;
        char txt[64];
        const char *prec = adapt_policy_layer_precision(p, i, txt, sizeof txt);
        int low = strcmp(prec, "float32") != 0;
        nlow += low;
        ulow += low && l->is_unit;
        fprintf(f, "  %-26s %-12s %-6s %-7s %s\n", l->name, l->ops->kind,
                g->set ? adapt_gamp_set_names[g->set[i]] : "-",
                g->source ? adapt_gamp_source_names[g->source[i]] : "plan", prec);
    }
    fprintf(f, "  low precision: %d of %d layers, %d of %d units\n", nlow, g->n, ulow,
            p->net->nunits);
}

enum adapt_status adapt_policy_alloc_precision(struct adapt_policy *p, int adapt_corrected)
{
    const struct adapt_config *cfg = p->cfg;
    enum adapt_qout qout = !cfg->quantization.quant_outputs ? ADAPT_QOUT_NONE
                           : cfg->quantization.round_layers == ADAPT_CONFIG_ROUND_LAYERS_ALL
                               ? ADAPT_QOUT_ALL
                               : ADAPT_QOUT_UNITS;
    return alloc_prec(p, cfg->quantization.quant_inputs, qout, cfg->quantization.rounding,
                      adapt_corrected);
}

/* ----------------------------------------------------------------- fixed */

/* 1 when text is name, blanks around it aside. */
static int bare_name(const char *text, const char *name)
{
    while (*text == ' ' || *text == '\t') text++;
    size_t n = strlen(name);
    if (strncmp(text, name, n)) return 0;
    for (text += n; *text == ' ' || *text == '\t'; text++) continue;
    return *text == '\0';
}

static enum adapt_status fixed_init(struct adapt_policy *p)
{
    const struct adapt_config *cfg = p->cfg;
    const struct adapt_schema_pairs *pu = &cfg->policy.per_unit;
    enum adapt_status st;
    struct quant_spec base;
    if ((st = quant_spec_parse(cfg->policy.format, &base)))
        return ADAPT_ERROR(st, "policy.format = %s: %s", cfg->policy.format, adapt_error_message());
    /* the bare names fixed, bfp and muppet take their word length (and fraction) from
     * policy.wl and policy.fl; "fixed(8,4)" and a [format NAME] carry their own */
    if (bare_name(cfg->policy.format, quant_type_of(base.format)->name)) {
        if (base.format == QUANT_FORMAT_FIXED) {
            base.wl = cfg->policy.wl;
            base.fl = cfg->policy.fl;
        } else if (base.format == QUANT_FORMAT_BFP || base.format == QUANT_FORMAT_MUPPET) {
            base.wl = cfg->policy.wl;
        }
    }
    if (pu->n && pu->n != p->net->nunits)
        return ADAPT_ERROR(ADAPT_EINVAL,
                           "policy.per_unit lists %d formats, but %s has %d precision units", pu->n,
                           p->net->name, p->net->nunits);
    st = graph_propagation(p) ? alloc_graph_prec(p, cfg->quantization.quant_inputs,
                                                 cfg->quantization.quant_outputs,
                                                 cfg->quantization.rounding)
                              : adapt_policy_alloc_precision(p, 0);
    if (st) return st;
    for (int u = 0; u < p->net->nunits; u++) {
        struct quant_spec s = base;
        if (pu->n) {
            s.format = QUANT_FORMAT_FIXED;
            s.wl = pu->a[u];
            s.fl = pu->b[u];
        }
        if ((st = quant_spec_check(&s)))
            return ADAPT_ERROR(st, "policy: unit %d (%s): %s", u, p->prec->u[u].layer->name,
                               adapt_error_message());
        set_unit(p, u, &s);
    }
    return ADAPT_OK;
}

static int fixed_observe(struct adapt_policy *p, long step, double loss, int last)
{
    (void)loss, (void)last;
    if (p->cfg->quantization.quant_grads) adapt_precision_quantize_grads(p->prec, step);
    return 0;
}

static const struct adapt_policy_type policy_fixed = {
    "fixed", fixed_init, fixed_observe, NULL, NULL, NULL, NULL, NULL, NULL, no_device_state, 0};

/* ------------------------------------------------------------------- amp */

struct amp_state {
    struct adapt_amp_scaler scaler;
};

static enum adapt_status amp_init(struct adapt_policy *p)
{
    const struct adapt_config *cfg = p->cfg;
    struct amp_state *a = calloc(1, sizeof *a);
    if (!a) return ADAPT_ERROR(ADAPT_ENOMEM, "cannot allocate the amp policy");
    p->state = a;
    a->scaler.scale = cfg->policy.amp_init_scale;
    a->scaler.growth_interval = cfg->policy.amp_growth_interval;
    p->loss_scale = a->scaler.scale;
    p->l1_after_rounding = 1; /* adapt_policy_amp_observe adds it */
    enum adapt_status st = graph_propagation(p)
                               ? alloc_graph_prec(p, 1, 1, QUANT_ROUND_NEAREST)
                               : alloc_prec(p, 1, ADAPT_QOUT_UNITS, QUANT_ROUND_NEAREST, 0);
    if (st) return st;
    adapt_precision_half_backward(p->prec);
    struct quant_spec s;
    quant_spec_init(&s, cfg->policy.amp_type == ADAPT_CONFIG_AMP_BF16 ? QUANT_FORMAT_BF16
                                                                      : QUANT_FORMAT_FP16);
    for (int u = 0; u < p->net->nunits; u++) set_unit(p, u, &s);
    return ADAPT_OK;
}

/* Unit gradients are stored in their unit's format (fp16/bf16 overflow to inf), as a half
 * precision backward would produce them; the L1 term, scaled as the loss, is added after in
 * float32 (PyTorch's float32 .grad of a float32 parameter: only the backward's part is half
 * precision); any inf/NaN skips the step and halves the scale; otherwise all gradients are
 * unscaled. */
int adapt_policy_amp_observe(struct adapt_policy *p, struct adapt_amp_scaler *scaler, long step)
{
    adapt_precision_quantize_grads(p->prec, step);
    struct adapt_sgd *opt = p->opt;
    if (opt && opt->l1 != 0.0 && !p->dev) adapt_sgd_add_l1(opt, scaler->scale);
    if (opt && opt->l1 != 0.0 && p->dev && !p->dev_st)
        p->dev_st =
            adapt_cuda_net_sgd_prepare(p->dev, 1.0, opt->l1 * scaler->scale, opt->l1_quantized);
    int overflow = 0;
    struct adapt_net *net = p->net;
    if (p->dev) { /* the check on the device; one flag comes back */
        int finite = 1;
        if (!p->dev_st) p->dev_st = adapt_cuda_net_grads_finite(p->dev, &finite);
        overflow = !finite;
    }
    for (int k = 0; !p->dev && k < net->nparam && !overflow; k++) {
        const struct adapt_param *pp = net->param[k];
        if (pp->role == ADAPT_PARAM_BUFFER) continue;
        for (size_t i = 0; i < pp->grad.numel; i++)
            if (!isfinite(pp->grad.data[i])) {
                overflow = 1;
                break;
            }
    }
    double scale = scaler->scale;
    int skip = adapt_amp_scaler_update(scaler, overflow);
    p->overflow = skip;
    p->loss_scale = scaler->scale;
    if (p->dev) {
        if (!skip && !p->dev_st)
            p->dev_st = adapt_cuda_net_scale_grads(p->dev, (float)(1.0 / scale));
        adapt_cuda_net_loss_scale(p->dev, p->loss_scale);
    } else if (!skip) {
        float inv = (float)(1.0 / scale);
        for (int k = 0; k < net->nparam; k++) {
            struct adapt_param *pp = net->param[k];
            if (pp->role == ADAPT_PARAM_BUFFER) continue;
            for (size_t i = 0; i < pp->grad.numel; i++) pp->grad.data[i] *= inv;
        }
    }
    return skip;
}

static int amp_observe(struct adapt_policy *p, long step, double loss, int last)
{
    (void)loss, (void)last;
    struct amp_state *a = p->state;
    return adapt_policy_amp_observe(p, &a->scaler, step);
}

static json_t *amp_save(const struct adapt_policy *p)
{
    const struct amp_state *a = p->state;
    return json_pack("{s:f, s:i}", "scale", a->scaler.scale, "good_steps", a->scaler.good_steps);
}

static enum adapt_status amp_load(struct adapt_policy *p, json_t *j,
                                  const struct adapt_safetensors *f)
{
    (void)f;
    struct amp_state *a = p->state;
    double scale;
    int good;
    if (json_unpack(j, "{s:F, s:i}", "scale", &scale, "good_steps", &good))
        return ADAPT_ERROR(ADAPT_EFORMAT, "checkpoint: malformed amp policy state");
    a->scaler.scale = p->loss_scale = scale;
    a->scaler.good_steps = good;
    return ADAPT_OK;
}

static void amp_destroy(struct adapt_policy *p) { free(p->state); }

/* the scaler stays on the host (one flag per step comes back); the engine scales the loss
 * gradient by the policy's loss scale, and the half-precision units multiply on tensor cores
 * (their operands are in their format: adapt_precision_half_backward) */
static enum adapt_status amp_cuda(struct adapt_policy *p, int to_device)
{
    if (!to_device) return ADAPT_OK;
    adapt_cuda_net_loss_scale(p->dev, p->loss_scale);
    for (int u = 0; u < p->prec->nunits; u++) {
        const struct adapt_unit_prec *up = &p->prec->u[u];
        if (!up->active) continue;
        enum adapt_status st = adapt_cuda_net_half(
            p->dev, up->node,
            up->spec.format == QUANT_FORMAT_BF16 ? ADAPT_CUDA_BF16 : ADAPT_CUDA_FP16);
        if (st) return st;
    }
    return ADAPT_OK;
}

static const struct adapt_policy_type policy_amp = {
    "amp", amp_init, amp_observe, NULL, NULL, amp_save, NULL, amp_load, amp_destroy, amp_cuda, 0};
