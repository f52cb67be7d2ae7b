/* src/policy/adapt.c: the AdaPT policy (Kummer et al., SDM 2023, section 3;
 * doc/algorithms.md). Per unit: fixed-point <WL, FL>, lookback lb, resolution r,
 * the accumulated normalised weight gradient G and its count n. Every step:
 * gradients rounded (quant_grads) and normalised per tensor, G += g, lookback
 * and resolution updated from D = n / ||G|| (lb_update = window, the corrected default: only
 * in the step that completes the window; step, the reference's: every step), the strategy
 * from the losses;
 * when n reaches lb: push-down (bisection with the KL test), push-up from D,
 * reset G and n. Initial state: <start_wl, start_fl>, lb = lb_lwr, r = r_lwr. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/rng.h"
#include "src/policy/policy.h"
#include "src/policy/policy_core.h"

struct adapt_state {
    enum adapt_compat compat;           /* quantization.compat (the output rules' auto) */
    enum adapt_compat ref[ADAPT_REF_N]; /* per [reference] switch: the mode of its rule */
    float *scratch;     /* (largest unit weight count) push-down sample and its rounding */
    uint64_t *pd_hist;  /* (2 * r_upr) histograms of the push-down sample */
    float **G;      /* (nunits) accumulated normalised weight gradient, weight-shaped */
    long *n;        /* (nunits) gradients in G */
    double *D;      /* (nunits) gradient diversity after the last step */
    long *win;      /* (nunits) lb_update = window: the current window's length, fixed at its
                     * start from lb */
    struct adapt_strategy_state strat;
    double *hist;
    int *slots;     /* (nunits) parameter tensors taking the unit's format (reference lb mean) */
    int nslots;
    struct adapt_arena arena;
    double *gg; /* (nunits) ||G||^2 after the last step */
    /* run.device = cuda: G and the push-down scratch on the engine; the trainable parameters'
     * gradient arrays there, their sizes and accumulators, the units' weight sizes, and
     * room for the sums of either list */
    float **dG, *d_scratch;
    uint64_t dev_arrays; /* adapt_cuda_net_id of the engine dG and d_scratch are on */
    int ntrain;
    float **tg, **tacc; /* tacc: the unit's G for a unit's weights, else NULL */
    size_t *tn, *gn;
    double *sums;
};

struct pd_ctx {
    const struct adapt_policy *p;
    const float *w;
    size_t n, sample;
    int bins;
    struct quant_key key;
    /* corrected mode: the sample, its range and its histogram Q, computed
     * once per push-down (the weights do not change between evaluations) */
    const float *xs;    /* (sample) */
    float *xq;          /* (sample) scratch for the rounded sample */
    double lo, hi;
    const uint64_t *hq; /* (bins) */
    uint64_t *hp;       /* (bins) */
    int reference;              /* reference.kl_test: the published test on w[0] */
    struct adapt_cuda_net *dev; /* w, xs and xq are device arrays there (NULL: host) */
    enum adapt_status st;       /* the first device failure */
};

static int pd_lossy(void *ctx, int wl, int fl)
{
    struct pd_ctx *c = ctx;
    const struct adapt_config *cfg = c->p->cfg;
    struct quant_spec s;
    quant_spec_init(&s, QUANT_FORMAT_FIXED);
    s.wl = wl;
    s.fl = fl;
    double d = 0.0;
    enum adapt_status st;
    if (c->reference) {
        s.rounding = QUANT_ROUND_STOCHASTIC;
        s.sr_bits = adapt_config_sr_bits(cfg);
        st = quant_kl_reference(&s, c->w, c->n, 0, c->bins, c->key, &d);
        ADAPT_ASSERT(st == ADAPT_OK);
        return d > 0.0;
    }
    /* KL(P||Q) as quant_kl computes it, with Q shared by the evaluations:
     * P = histogram of the nearest rounding of the sample, same bins,
     * edges clamped */
    s.rounding = QUANT_ROUND_NEAREST;
    if (c->dev) {
        if (c->st) return 1; /* a failed device: keep the format */
        if ((c->st = adapt_cuda_net_round(c->dev, &s, c->xs, c->xq, 1, c->sample, c->key, -1)) ||
            (c->st = adapt_cuda_net_hist(c->dev, c->xq, c->sample, c->lo, c->hi, c->bins, c->hp)))
            return 1;
    } else {
        st = quant_array(&s, c->xs, c->xq, c->sample, c->key, NULL, NULL);
        ADAPT_ASSERT(st == ADAPT_OK);
        st = quant_hist(c->xq, c->sample, 1, c->lo, c->hi, c->bins, QUANT_HIST_CLAMP, c->hp);
        ADAPT_ASSERT(st == ADAPT_OK);
    }
    d = quant_kl_counts(c->hp, c->hq, c->bins);
    /* lossless: below the sampling noise of the histogram (doc/algorithms.md) */
    double noise = (double)(c->bins - 1) / (2.0 * (double)c->sample);
    return d > cfg->quantization.kl_eps + cfg->quantization.kl_noise * noise;
}

/* pd_prepare on the GPU engine: the sample, its range and its histogram there (the counts come
 * back). */
static void pd_prepare_dev(struct adapt_state *a, struct pd_ctx *c)
{
    size_t stride = c->sample < c->n ? c->n / c->sample : 1;
    c->xs = a->d_scratch;
    c->xq = a->d_scratch + c->sample;
    c->hq = a->pd_hist;
    c->hp = a->pd_hist + c->bins;
    if ((c->st = adapt_cuda_net_gather(c->dev, c->w, stride, a->d_scratch, c->sample)) ||
        (c->st = adapt_cuda_net_range(c->dev, c->xs, c->sample, &c->lo, &c->hi)))
        return;
    if (!(c->lo <= c->hi)) c->lo = c->hi = 0.0; /* no finite value: one degenerate range */
    c->st = adapt_cuda_net_hist(c->dev, c->xs, c->sample, c->lo, c->hi, c->bins, a->pd_hist);
}

/* The corrected push-down's sample (pd_sample elements at stride n / pd_sample,
 * or all), its finite range and its histogram. */
static void pd_prepare(struct adapt_state *a, struct pd_ctx *c)
{
    size_t stride = c->sample < c->n ? c->n / c->sample : 1;
    if (stride == 1) {
        c->xs = c->w;
    } else {
        for (size_t i = 0; i < c->sample; i++) a->scratch[i] = c->w[i * stride];
        c->xs = a->scratch;
    }
    c->xq = a->scratch + (stride == 1 ? 0 : c->sample);
    struct quant_range rg;
    quant_range_compute(c->xs, c->sample, &rg);
    c->lo = rg.min;
    c->hi = rg.max;
    if (!(c->lo <= c->hi)) c->lo = c->hi = 0.0; /* no finite value: one degenerate range */
    c->hq = a->pd_hist;
    c->hp = a->pd_hist + c->bins;
    enum adapt_status st =
        quant_hist(c->xs, c->sample, 1, c->lo, c->hi, c->bins, QUANT_HIST_CLAMP, a->pd_hist);
    ADAPT_ASSERT(st == ADAPT_OK);
}

/* The steps a window of lookback lb takes: lb itself with reference.lb_ceil (an integer
 * there), rounded otherwise. */
static long window_of(const struct adapt_state *a, double lb)
{
    return a->ref[ADAPT_REF_LB_CEIL] == ADAPT_COMPAT_REFERENCE ? (long)lb : lround(lb);
}

/* The published ResNet's activation formats (models/resnet_fp.py, forward and
 * __forward_helper at 980eead): the format list has one entry per trainable parameter in
 * registration order (a conv's weight, a batch norm's gamma and beta, which take the format of
 * the conv before them, the linear's weight and bias), while the residual blocks' conv and
 * batch-norm modules are given entries by a counter of modules that starts at 0 at the first
 * block. So the block conv that is module m takes parameter m's format: the unit that parameter
 * belongs to. The stem conv and the linear take their own. act[u] gets each unit's source.
 * nfrom (NULL: not wanted) gets per node the unit whose format the published modules round a
 * batch-norm or pooling layer's input and output in (-2 for other nodes): the stem's batch norm
 * takes parameter 2's (its own beta, so the stem conv's), a block's batch norm that is module
 * m parameter m's, the average pool parameter n-3's (the last batch norm's beta, as the
 * published forward indexes it: len(qwl) - 3). */
static int resnet_act_units(const struct adapt_policy *p, int *act, int *nfrom)
{
    const struct adapt_net *net = p->net;
    const int nu = p->prec->nunits;
    int *par = malloc(sizeof *par * (3 * (size_t)net->nnodes + 1)); /* parameter -> unit */
    if (!par) return -1;
    int np = 0, m = 0, unit = -1;
    for (int i = 0; i < net->nnodes; i++) { /* the parameters in registration order */
        const struct adapt_layer *l = net->nodes[i].layer;
        if (l->is_unit) {
            unit = p->prec->node_unit[i];
            for (int q = 0; q < l->nparam; q++) par[np++] = unit;
        } else if (!strcmp(l->ops->kind, "batchnorm2d") && unit >= 0) {
            par[np++] = unit;
            par[np++] = unit;
        }
    }
    for (int u = 0; u < nu; u++) act[u] = u;
    for (int i = 0; nfrom && i < net->nnodes; i++) nfrom[i] = -2;
    for (int i = 0; i < net->nnodes; i++) { /* the blocks' modules, counted */
        const struct adapt_layer *l = net->nodes[i].layer;
        const int conv = l->is_unit && !strcmp(l->ops->kind, "conv2d");
        if (strncmp(l->name, "layer", 5) || (!conv && strcmp(l->ops->kind, "batchnorm2d")))
            continue;
        if (conv) act[p->prec->node_unit[i]] = m < np ? par[m] : -1;
        if (nfrom && !conv) nfrom[i] = m < np ? par[m] : -1;
        m++;
    }
    if (nfrom) {
        for (int i = 0, bn = 0; i < net->nnodes; i++) {
            const struct adapt_layer *l = net->nodes[i].layer;
            if (!strcmp(l->ops->kind, "batchnorm2d") && strncmp(l->name, "layer", 5))
                nfrom[i] = bn++ ? -1 : np > 2 ? par[2] : -1; /* the stem's; no other */
            else if (!strcmp(l->ops->kind, "avgpool2d"))
                nfrom[i] = np >= 3 ? par[np - 3] : -1;
        }
    }
    free(par);
    if (nfrom)
        for (int i = 0; i < net->nnodes; i++)
            if (nfrom[i] == -1) return 1;
    for (int u = 0; u < nu; u++)
        if (act[u] < 0) return 1; /* not the structure counted here */
    return 0;
}

/* reference.act_formats: each unit's activation format as the published models index them
 * (doc/algorithms.md, "Reference switches"). LeNet-5 indexes its formats by module position
 * with a counter that never moves: its convs keep the start format, its pools and linears take
 * the first entry, the first conv's; AlexNet gives module k entry k of a list with two entries
 * (weight, bias) per module: unit k takes unit k/2's format; ResNet as resnet_act_units. */
static enum adapt_status act_formats(struct adapt_policy *p, const struct quant_spec *start)
{
    const struct adapt_config *cfg = p->cfg;
    const char *name = cfg->model.file[0] ? cfg->model.file : cfg->model.name;
    const int nu = p->prec->nunits;
    enum adapt_status st = ADAPT_OK;
    if (!cfg->model.file[0] && !strcmp(name, "lenet5") && nu == 5) {
        for (int u = 0; u < nu && !st; u++)
            st = adapt_precision_act_from(p->prec, u, u < 3 ? -1 : 0, start);
        return st;
    }
    if (!cfg->model.file[0] &&
        (!strcmp(name, "alexnet_mnist") || !strcmp(name, "alexnet_cifar")) && nu == 6) {
        for (int u = 0; u < nu && !st; u++) st = adapt_precision_act_from(p->prec, u, u / 2, NULL);
        return st;
    }
    if (!cfg->model.file[0] && !strncmp(name, "resnet", 6)) {
        int *act = malloc(sizeof *act * ((size_t)nu + 1));
        if (!act) return ADAPT_ERROR(ADAPT_ENOMEM, "cannot allocate the activation formats");
        int r = resnet_act_units(p, act, NULL);
        for (int u = 0; !r && u < nu && !st; u++)
            st = adapt_precision_act_from(p->prec, u, act[u], NULL);
        free(act);
        if (r < 0) return ADAPT_ERROR(ADAPT_ENOMEM, "cannot allocate the activation formats");
        if (!r) return st;
    }
    /* auto with a network other than the one named (a program building its own): unchanged */
    if (cfg->reference.sw[ADAPT_REF_ACT_FORMATS] == ADAPT_SWITCH_AUTO) return ADAPT_OK;
    return ADAPT_ERROR(ADAPT_EUNSUPPORTED,
                       "reference.act_formats = on: the published models' activation formats "
                       "are known for model.name = lenet5, alexnet_mnist, alexnet_cifar and the "
                       "built-in resnets, not for %s (%d units); set reference.act_formats = off",
                       name, nu);
}

/* reference.pool_rounding (kinds "avgpool2d") and bn_rounding ("batchnorm2d"): the published
 * models' pooling and batch-norm modules round their input and output in the formats their
 * forward gives them (doc/algorithms.md, "Reference switches"): LeNet-5's two average pools
 * both in the first format entry, the first conv's (its counter never moves); a ResNet's as
 * resnet_act_units says. The published AlexNets' pools are not quantized modules. With
 * quant_inputs and quant_outputs off nothing is rounded, as there. */
static enum adapt_status node_formats(struct adapt_policy *p, enum adapt_reference_switch sw,
                                      const char *key, const char *kind)
{
    const struct adapt_config *cfg = p->cfg;
    const char *name = adapt_config_model(cfg);
    const struct adapt_net *net = p->net;
    if (!cfg->quantization.quant_inputs || !cfg->quantization.quant_outputs) return ADAPT_OK;
    int *from = malloc(sizeof *from * ((size_t)net->nnodes + 1));
    if (!from)
        return ADAPT_ERROR(ADAPT_ENOMEM, "cannot allocate the pooling and batch-norm formats");
    int known = 0;
    if (!cfg->model.file[0] && !strcmp(name, "lenet5") && p->prec->nunits == 5) {
        known = 1;
        for (int i = 0; i < net->nnodes; i++)
            from[i] = !strcmp(net->nodes[i].layer->ops->kind, "avgpool2d") ? 0 : -2;
    } else if (!cfg->model.file[0] && !strncmp(name, "resnet", 6)) {
        int *act = malloc(sizeof *act * ((size_t)p->prec->nunits + 1));
        const int r = act ? resnet_act_units(p, act, from) : -1;
        free(act);
        if (r < 0) {
            free(from);
            return ADAPT_ERROR(ADAPT_ENOMEM, "cannot allocate the pooling and batch-norm formats");
        }
        known = !r;
    }
    enum adapt_status st = ADAPT_OK;
    for (int i = 0; known && i < net->nnodes && !st; i++)
        if (from[i] >= 0 && !strcmp(net->nodes[i].layer->ops->kind, kind))
            st = adapt_precision_node_from(p->prec, i, from[i]);
    free(from);
    if (known || st || cfg->reference.sw[sw] == ADAPT_SWITCH_AUTO) return st;
    return ADAPT_ERROR(ADAPT_EUNSUPPORTED,
                       "reference.%s = on: the published models' %s layers are known for "
                       "model.name = lenet5 and the built-in resnets, not for %s; set "
                       "reference.%s = off",
                       key, kind, name, key);
}

static enum adapt_status adapt_init(struct adapt_policy *p)
{
    const struct adapt_config *cfg = p->cfg;
    const struct adapt_net *net = p->net;
    int nu = net->nunits;
    struct adapt_state *a = calloc(1, sizeof *a);
    if (!a) return ADAPT_ERROR(ADAPT_ENOMEM, "cannot allocate the adapt policy");
    p->state = a;
    a->compat = cfg->quantization.compat;
    for (int k = 0; k < ADAPT_REF_N; k++)
        a->ref[k] = adapt_config_reference_mode(cfg, (enum adapt_reference_switch)k);
    a->G = calloc((size_t)nu + 1, sizeof *a->G);
    a->n = calloc((size_t)nu + 1, sizeof *a->n);
    a->D = calloc((size_t)nu + 1, sizeof *a->D);
    a->win = calloc((size_t)nu + 1, sizeof *a->win);
    p->lb = calloc((size_t)nu + 1, sizeof *p->lb);
    p->r = calloc((size_t)nu + 1, sizeof *p->r);
    a->gg = calloc((size_t)nu + 1, sizeof *a->gg);
    if (!a->gg) return ADAPT_ERROR(ADAPT_ENOMEM, "cannot allocate the adapt policy");
    a->strat.cap = cfg->quantization.lb_upr + 2;
    a->slots = calloc((size_t)nu + 1, sizeof *a->slots);
    a->hist = calloc((size_t)a->strat.cap, sizeof *a->hist);
    if (!a->G || !a->n || !a->D || !a->win || !p->lb || !p->r || !a->hist || !a->slots)
        return ADAPT_ERROR(ADAPT_ENOMEM, "cannot allocate the adapt policy");
    a->strat.hist = a->hist;
    a->strat.st = cfg->quantization.strategy;
    size_t bytes = 0, wmax = 0;
    for (int u = 0; u < nu; u++) {
        size_t w = net->nodes[net->unit_node[u]].layer->param[0].value.numel;
        bytes += adapt_arena_take_size(w);
        if (w > wmax) wmax = w;
    }
    /* push-down scratch: a strided sample and its rounding (at most 2 * wmax) */
    bytes += adapt_arena_take_size(2 * wmax);
    a->pd_hist = calloc(2 * (size_t)cfg->quantization.r_upr, sizeof *a->pd_hist);
    if (!a->pd_hist) return ADAPT_ERROR(ADAPT_ENOMEM, "cannot allocate the adapt policy");
    enum adapt_status st = adapt_arena_alloc(&a->arena, bytes);
    if (st) return st;
    a->scratch = adapt_arena_take(&a->arena, 2 * wmax);
    if ((st = adapt_policy_alloc_precision(p, a->compat == ADAPT_COMPAT_CORRECTED))) return st;
    struct quant_spec s;
    quant_spec_init(&s, QUANT_FORMAT_FIXED);
    s.wl = cfg->quantization.start_wl;
    s.fl = cfg->quantization.start_fl;
    if ((st = quant_spec_check(&s)))
        return ADAPT_ERROR(st, "quantization.start_wl / start_fl: %s", adapt_error_message());
    for (int u = 0; u < nu; u++) {
        a->G[u] = adapt_arena_take(&a->arena, p->prec->u[u].layer->param[0].value.numel);
        p->lb[u] = cfg->quantization.lb_lwr;
        p->r[u] = cfg->quantization.r_lwr;
        a->win[u] = window_of(a, p->lb[u]);
        adapt_precision_set(p->prec, u, &s);
    }
    for (int k = 0; k < net->nparam; k++)
        if (p->prec->param_unit[k] >= 0) {
            a->slots[p->prec->param_unit[k]]++;
            a->nslots++;
        }
    /* reference.bn_format: batch-norm parameters take the format of the unit before them;
     * reference.l1_quantized: the L1 term reads the quantized copies (doc/algorithms.md) */
    if (adapt_config_reference(cfg, ADAPT_REF_BN_FORMAT) &&
        (st = adapt_precision_round_attached(p->prec)))
        return st;
    if (adapt_config_reference(cfg, ADAPT_REF_L1_QUANTIZED)) p->l1_quantized = 1;
    if (adapt_config_reference(cfg, ADAPT_REF_ACT_FORMATS) && (st = act_formats(p, &s)))
        return st;
    if (adapt_config_reference(cfg, ADAPT_REF_POOL_ROUNDING) &&
        (st = node_formats(p, ADAPT_REF_POOL_ROUNDING, "pool_rounding", "avgpool2d")))
        return st;
    if (adapt_config_reference(cfg, ADAPT_REF_BN_ROUNDING) &&
        (st = node_formats(p, ADAPT_REF_BN_ROUNDING, "bn_rounding", "batchnorm2d")))
        return st;
    p->strategy = a->strat.st;
    return ADAPT_OK;
}

/* sum of squares, OpenMP over chunks (each thread sums in double) */
static double sumsq(const float *x, size_t n)
{
    double s = 0.0;
    #pragma omp parallel for reduction(+ : s) schedule(static) if (n > 65536)
    for (size_t i = 0; i < n; i++) s += (double)x[i] * x[i];
    return s;
}

/* g *= inv (when inv > 0) and G += g; returns ||G||^2. One pass. */
static double scale_accumulate(float *g, float *G, size_t n, float inv)
{
    double s = 0.0;
    #pragma omp parallel for reduction(+ : s) schedule(static) if (n > 65536)
    for (size_t i = 0; i < n; i++) {
        float v = g[i] * inv;
        g[i] = v;
        float a = G[i] + v;
        G[i] = a;
        s += (double)a * a;
    }
    return s;
}

/* The unit whose weight pp is, or -1. */
static int unit_of_param(const struct adapt_policy *p, const struct adapt_param *pp)
{
    for (int u = 0; u < p->prec->nunits; u++)
        if (pp == &p->prec->u[u].layer->param[0]) return u;
    return -1;
}

/* reference.loss_penalty: the published AlexNet's and ResNet's term, the mean over trainable
 * parameters of WL/32 x the parameter's non-zero fraction, WL that of the unit whose format
 * the parameter takes (32 for none), the values those the layers compute with. */
static double loss_penalty(const struct adapt_policy *p)
{
    const struct adapt_net *net = p->net;
    double pen = 0.0;
    int ct = 0;
    for (int k = 0; k < net->nparam; k++) {
        const struct adapt_param *pp = net->param[k];
        if (pp->role == ADAPT_PARAM_BUFFER || !pp->value.numel) continue;
        const int u = p->prec->param_unit[k];
        const double wl = u >= 0 && p->prec->u[u].active ? quant_spec_bits(&p->prec->u[u].spec)
                                                         : 32.0;
        const float *v = pp->use ? pp->use : pp->value.data;
        size_t nz = 0;
        for (size_t i = 0; i < pp->value.numel; i++) nz += v[i] != 0.0f;
        pen += wl / 32.0 * (double)nz / (double)pp->value.numel;
        ct++;
    }
    return ct ? pen / ct : 0.0;
}

/* After the units' normalised gradients went into G (a->gg = ||G||^2): counts, diversity,
 * lookback, resolution and the strategy. */
static void observe_units(struct adapt_policy *p, double loss)
{
    struct adapt_state *a = p->state;
    const struct adapt_config *cfg = p->cfg;
    const int lwr = cfg->quantization.lb_lwr, upr = cfg->quantization.lb_upr;
    double lb_sum = 0.0, lb_prev = 0.0;
    for (int u = 0; u < p->prec->nunits; u++) lb_prev += a->slots[u] * p->lb[u];
    const int window = adapt_config_lb_window(cfg);
    for (int u = 0; u < p->prec->nunits; u++) {
        a->n[u]++;
        a->D[u] = adapt_gradient_diversity(a->n[u], sqrt(a->gg[u]));
        /* window: lookback and resolution move only when the window is complete, from its
         * whole D, before its push-down (which then reads the new r) */
        if (!window || a->n[u] >= a->win[u]) {
            p->lb[u] = adapt_lookback_update(p->lb[u], a->D[u], lwr, upr,
                                             cfg->quantization.gamma, a->ref[ADAPT_REF_LB_CEIL]);
            p->r[u] = adapt_resolution_update(p->r[u], p->lb[u], lwr, upr,
                                              cfg->quantization.r_lwr, cfg->quantization.r_upr);
        }
        lb_sum += p->lb[u];
    }
    /* reference.loss_penalty: the published models add it to the loss (before dividing by the
     * accumulation steps) */
    const double pen = adapt_config_reference(cfg, ADAPT_REF_LOSS_PENALTY) ? loss_penalty(p) : 0.0;
    if (a->ref[ADAPT_REF_STRATEGY] == ADAPT_COMPAT_REFERENCE)
        adapt_strategy_update_reference(&a->strat,
                                        p->micro_loss + pen / cfg->train.accumulation_steps,
                                        lb_prev / a->nslots);
    else
        adapt_strategy_update(&a->strat, loss + pen, lb_sum / p->prec->nunits);
    p->strategy = a->strat.st;
}

/* adapt_observe on the GPU engine: the per-tensor normalisation and G += g run there, from
 * norms that stay there; only G's sums of squares come back (one wait). */
static void observe_dev(struct adapt_policy *p)
{
    struct adapt_state *a = p->state;
    const int nu = p->prec->nunits;
    enum adapt_status st = adapt_cuda_net_normalize_acc(p->dev, a->tg, a->tacc, a->tn, a->ntrain);
    if (!st) st = adapt_cuda_net_sums(p->dev, a->dG, a->gn, nu, a->sums);
    for (int u = 0; !st && u < nu; u++) a->gg[u] = a->sums[2 * u];
    if (st && !p->dev_st) p->dev_st = st;
}

static int adapt_observe(struct adapt_policy *p, long step, double loss, int last)
{
    (void)last;
    struct adapt_state *a = p->state;
    const struct adapt_config *cfg = p->cfg;
    if (cfg->quantization.quant_grads) adapt_precision_quantize_grads(p->prec, step);
    if (p->dev) {
        observe_dev(p);
        if (!p->dev_st) observe_units(p, loss);
        return 0;
    }
    /* Per-tensor normalisation (eq. 3.4) of every trainable tensor; for the
     * units' weights fused with the accumulation G += g. */
    struct adapt_net *net = p->net;
    for (int k = 0; k < net->nparam; k++) {
        struct adapt_param *pp = net->param[k];
        if (pp->role == ADAPT_PARAM_BUFFER) continue;
        if (unit_of_param(p, pp) >= 0) continue; /* below, with the accumulation */
        double s = sumsq(pp->grad.data, pp->grad.numel);
        if (s > 0.0) {
            float inv = (float)(1.0 / sqrt(s));
            float *g = pp->grad.data;
            size_t n = pp->grad.numel;
            #pragma omp parallel for schedule(static) if (n > 65536)
            for (size_t i = 0; i < n; i++) g[i] *= inv;
        }
    }
    for (int u = 0; u < p->prec->nunits; u++) {
        struct adapt_param *w = &p->prec->u[u].layer->param[0];
        double s = sumsq(w->grad.data, w->grad.numel);
        float inv = s > 0.0 ? (float)(1.0 / sqrt(s)) : 1.0f;
        a->gg[u] = scale_accumulate(w->grad.data, a->G[u], w->grad.numel, inv);
    }
    observe_units(p, loss);
    return 0;
}

static enum adapt_status adapt_decide(struct adapt_policy *p, long step)
{
    struct adapt_state *a = p->state;
    const struct adapt_config *cfg = p->cfg;
    enum adapt_status st;
    for (int u = 0; u < p->prec->nunits; u++) {
        struct adapt_unit_prec *up = &p->prec->u[u];
        /* step: the lookback just updated; window: the one the window started with */
        long due = adapt_config_lb_window(cfg) ? a->win[u] : window_of(a, p->lb[u]);
        if (a->n[u] < due) continue;
        const struct adapt_param *w = &up->layer->param[0];
        struct pd_ctx c;
        memset(&c, 0, sizeof c);
        c.p = p;
        c.dev = p->dev;
        c.w = p->dev ? adapt_cuda_net_param(p->dev, up->param[0], ADAPT_CUDA_VALUE) : w->value.data;
        c.bins = p->r[u];
        c.key.seed = p->seed;
        c.key.stream = (uint64_t)ADAPT_STREAM_QUANT | (7u << 8) | ((uint64_t)u << 16) |
                       ((uint64_t)(uint32_t)step << 32);
        c.key.index = 0;
        c.reference = a->ref[ADAPT_REF_KL_TEST] == ADAPT_COMPAT_REFERENCE;
        if (c.reference) {
            c.n = w->value.numel / (size_t)w->value.dim[0]; /* the first slice w[0] */
            c.sample = c.n;
            /* on the GPU engine the slice comes to the host, where the published code's
             * stochastic KL (quant_kl_reference) reads it: the same bits as the CPU run's */
            if (p->dev) {
                if ((st = adapt_cuda_net_get(p->dev, c.w, a->scratch, c.n))) return st;
                c.w = a->scratch;
            }
        } else {
            c.n = w->value.numel;
            c.sample = cfg->quantization.pd_sample > 0 && (size_t)cfg->quantization.pd_sample < c.n
                           ? (size_t)cfg->quantization.pd_sample
                           : c.n;
            if (p->dev)
                pd_prepare_dev(a, &c);
            else
                pd_prepare(a, &c);
        }
        int wl0 = up->spec.wl, fl0 = up->spec.fl;
        struct adapt_pd_result pd;
        adapt_pd_bisect(wl0, fl0, cfg->quantization.fl_min, a->ref[ADAPT_REF_PD_BISECT], pd_lossy,
                        &c, &pd);
        if (c.st) return c.st;
        struct adapt_trace_event e;
        memset(&e, 0, sizeof e);
        e.unit = u;
        e.kind = ADAPT_TRACE_EVENT_PD;
        e.before[0] = wl0;
        e.before[1] = fl0;
        e.after[0] = pd.wl;
        e.after[1] = pd.fl;
        e.bisect_steps = pd.steps;
        e.kl_evals = pd.evals;
        e.sample = (int64_t)c.sample;
        if ((st = adapt_policy_add_event(p, &e))) return st;
        int wl = pd.wl, fl = pd.fl, s;
        adapt_pu(a->D[u], a->strat.st, cfg->quantization.buffer_bits, a->ref[ADAPT_REF_PU_S2_ZERO],
                 &wl, &fl, &s);
        memset(&e, 0, sizeof e);
        e.unit = u;
        e.kind = ADAPT_TRACE_EVENT_PU;
        e.before[0] = pd.wl;
        e.before[1] = pd.fl;
        e.after[0] = wl;
        e.after[1] = fl;
        e.s = s;
        if ((st = adapt_policy_add_event(p, &e))) return st;
        struct quant_spec ns = up->spec;
        ns.wl = wl;
        ns.fl = fl;
        adapt_precision_set(p->prec, u, &ns);
        if (p->dev) {
            if ((st = adapt_cuda_net_zero(p->dev, a->dG[u], w->value.numel))) return st;
        } else {
            memset(a->G[u], 0, sizeof(float) * w->value.numel);
        }
        a->n[u] = 0;
        a->win[u] = window_of(a, p->lb[u]);
    }
    return ADAPT_OK;
}

static json_t *adapt_save(const struct adapt_policy *p)
{
    const struct adapt_state *a = p->state;
    json_t *units = json_array(), *hist = json_array();
    for (int u = 0; u < p->prec->nunits; u++)
        json_array_append_new(units, json_pack("{s:i, s:i, s:f, s:i, s:I}", "wl",
                                               p->prec->u[u].spec.wl, "fl", p->prec->u[u].spec.fl,
                                               "lb", p->lb[u], "r", p->r[u], "n",
                                               (json_int_t)a->n[u]));
    for (int i = 0; i < a->strat.n; i++) {
        int k = (a->strat.pos - a->strat.n + i + a->strat.cap) % a->strat.cap;
        json_array_append_new(hist, json_real(a->hist[k]));
    }
    /* the checkpoint counts the strategy from 0 (min) */
    return json_pack("{s:o, s:i, s:o}", "units", units, "strategy",
                     (int)(a->strat.st - ADAPT_TRACE_STRATEGY_MIN), "losses", hist);
}

static int adapt_save_tensors(const struct adapt_policy *p, struct adapt_safetensors_tensor *t,
                              int cap, char (*names)[96])
{
    const struct adapt_state *a = p->state;
    int k = 0;
    for (int u = 0; u < p->prec->nunits && k < cap; u++, k++) {
        const struct adapt_param *w = &p->prec->u[u].layer->param[0];
        snprintf(names[k], 96, "adapt.G.%s", p->prec->u[u].layer->name);
        t[k].name = names[k];
        t[k].dtype = ADAPT_ST_F32;
        t[k].ndim = 1;
        t[k].shape[0] = (int64_t)w->value.numel;
        t[k].data = a->G[u];
    }
    return k;
}

static enum adapt_status adapt_load(struct adapt_policy *p, json_t *j,
                                    const struct adapt_safetensors *f)
{
    struct adapt_state *a = p->state;
    json_t *units = json_object_get(j, "units"), *hist = json_object_get(j, "losses");
    json_t *stj = json_object_get(j, "strategy");
    if (!json_is_array(units) || (int)json_array_size(units) != p->prec->nunits ||
        !json_is_array(hist) || !json_is_integer(stj))
        return ADAPT_ERROR(ADAPT_EFORMAT, "%s: malformed adapt policy state", f->path);
    for (int u = 0; u < p->prec->nunits; u++) {
        int wl, fl, r;
        double lb;
        json_int_t n;
        if (json_unpack(json_array_get(units, (size_t)u), "{s:i, s:i, s:F, s:i, s:I}", "wl", &wl,
                        "fl", &fl, "lb", &lb, "r", &r, "n", &n))
            return ADAPT_ERROR(ADAPT_EFORMAT, "%s: malformed adapt state of unit %d", f->path, u);
        const char *un = p->prec->u[u].layer->name;
        struct quant_spec s = p->prec->u[u].spec;
        s.wl = wl;
        s.fl = fl;
        if (quant_spec_check(&s) != ADAPT_OK) {
            char why[256];
            snprintf(why, sizeof why, "%s", adapt_error_message());
            return ADAPT_ERROR(ADAPT_ERANGE, "%s: policy_state unit %d (%s): <wl %d, fl %d>: %s",
                               f->path, u, un, wl, fl, why);
        }
        const struct adapt_config *c = p->cfg;
        if (!(lb >= c->quantization.lb_lwr && lb <= c->quantization.lb_upr))
            return ADAPT_ERROR(ADAPT_ERANGE, "%s: policy_state unit %d (%s): lookback lb = %g, "
                               "expected %d .. %d (quantization.lb_lwr .. lb_upr)", f->path, u,
                               un, lb, c->quantization.lb_lwr, c->quantization.lb_upr);
        if (r < c->quantization.r_lwr || r > c->quantization.r_upr)
            return ADAPT_ERROR(ADAPT_ERANGE, "%s: policy_state unit %d (%s): resolution r = %d, "
                               "expected %d .. %d (quantization.r_lwr .. r_upr)", f->path, u, un,
                               r, c->quantization.r_lwr, c->quantization.r_upr);
        if (n < 0 || n > c->quantization.lb_upr)
            return ADAPT_ERROR(ADAPT_ERANGE, "%s: policy_state unit %d (%s): n = %lld steps since "
                               "the last decision, expected 0 .. %d (quantization.lb_upr)",
                               f->path, u, un, (long long)n, c->quantization.lb_upr);
        adapt_precision_set(p->prec, u, &s);
        p->lb[u] = lb;
        p->r[u] = r;
        a->n[u] = (long)n;
        a->win[u] = window_of(a, lb); /* with window, lb has not moved since the window began */
        char name[96];
        snprintf(name, sizeof name, "adapt.G.%s", p->prec->u[u].layer->name);
        int64_t shape[1] = {(int64_t)p->prec->u[u].layer->param[0].value.numel};
        enum adapt_status st = adapt_safetensors_copy(f, name, ADAPT_ST_F32, 1, shape, a->G[u]);
        if (st) return st;
    }
    json_int_t stv = json_integer_value(stj);
    /* counted from 0 (min), as adapt_save writes it */
    const int st_max = ADAPT_TRACE_STRATEGY_MAX - ADAPT_TRACE_STRATEGY_MIN;
    if (stv < 0 || stv > st_max)
        return ADAPT_ERROR(ADAPT_ERANGE, "%s: policy_state strategy = %lld, expected %d .. %d",
                           f->path, (long long)stv, 0, st_max);
    for (size_t i = 0; i < json_array_size(hist); i++)
        if (!json_is_number(json_array_get(hist, i)) ||
            !isfinite(json_number_value(json_array_get(hist, i))))
            return ADAPT_ERROR(ADAPT_EFORMAT, "%s: policy_state losses[%zu] is not a finite number",
                               f->path, i);
    a->strat.st = ADAPT_TRACE_STRATEGY_MIN + (int)stv;
    a->strat.n = a->strat.pos = 0;
    for (size_t i = 0; i < json_array_size(hist) && i < (size_t)a->strat.cap; i++) {
        a->hist[a->strat.pos] = json_real_value(json_array_get(hist, i));
        a->strat.pos = (a->strat.pos + 1) % a->strat.cap;
        a->strat.n++;
    }
    p->strategy = a->strat.st;
    return ADAPT_OK;
}

static void adapt_destroy(struct adapt_policy *p)
{
    struct adapt_state *a = p->state;
    if (!a) return;
    adapt_arena_free(&a->arena);
    free(a->pd_hist);
    free(a->G);
    free(a->n);
    free(a->D);
    free(a->win);
    free(a->hist);
    free(a->slots);
    free(a->gg);
    free(a->dG); /* the arrays are the engine's */
    free(a->tacc);
    free(a->tg);
    free(a->tn);
    free(a->gn);
    free(a->sums);
    free(a);
}

/* to_device: G (from the host, a resumed run's) and the push-down scratch on the engine, the
 * trainable parameters' gradient arrays there; otherwise G back to the host. */
static enum adapt_status adapt_cuda(struct adapt_policy *p, int to_device)
{
    struct adapt_state *a = p->state;
    const struct adapt_net *net = p->net;
    const int nu = p->prec->nunits;
    enum adapt_status st = ADAPT_OK;
    if (!to_device) {
        for (int u = 0; u < nu && !st; u++)
            st = adapt_cuda_net_get(p->dev, a->dG[u], a->G[u], a->gn[u]);
        return st;
    }
    size_t wmax = 0, most = (size_t)(net->nparam > nu ? net->nparam : nu);
    /* attached to this engine before: its earlier arrays go */
    if (a->dev_arrays == adapt_cuda_net_id(p->dev)) {
        for (int u = 0; a->dG && u < nu; u++) adapt_cuda_net_release(p->dev, a->dG[u]);
        adapt_cuda_net_release(p->dev, a->d_scratch);
    }
    a->d_scratch = NULL;
    a->dev_arrays = adapt_cuda_net_id(p->dev);
    free(a->dG), free(a->gn), free(a->tacc), free(a->tg), free(a->tn), free(a->sums);
    a->dG = calloc((size_t)nu + 1, sizeof *a->dG);
    a->gn = calloc((size_t)nu + 1, sizeof *a->gn);
    a->tacc = calloc((size_t)net->nparam + 1, sizeof *a->tacc);
    a->tg = calloc((size_t)net->nparam + 1, sizeof *a->tg);
    a->tn = calloc((size_t)net->nparam + 1, sizeof *a->tn);
    a->sums = calloc(2 * most + 2, sizeof *a->sums);
    if (!a->dG || !a->gn || !a->tacc || !a->tg || !a->tn || !a->sums)
        return ADAPT_ERROR(ADAPT_ENOMEM, "cannot allocate the adapt policy's device tables");
    for (int u = 0; u < nu && !st; u++) {
        size_t w = a->gn[u] = p->prec->u[u].layer->param[0].value.numel;
        if (w > wmax) wmax = w;
        if (!(st = adapt_cuda_net_alloc(p->dev, w, &a->dG[u])))
            st = adapt_cuda_net_put(p->dev, a->dG[u], a->G[u], w);
    }
    if (!st) st = adapt_cuda_net_alloc(p->dev, 2 * wmax, &a->d_scratch);
    a->ntrain = 0;
    for (int k = 0; k < net->nparam && !st; k++) {
        if (net->param[k]->role == ADAPT_PARAM_BUFFER) continue;
        int u = unit_of_param(p, net->param[k]);
        a->tacc[a->ntrain] = u >= 0 ? a->dG[u] : NULL;
        a->tg[a->ntrain] = adapt_cuda_net_param(p->dev, k, ADAPT_CUDA_GRAD);
        a->tn[a->ntrain++] = net->param[k]->grad.numel;
    }
    return st;
}

const struct adapt_policy_type adapt_policy_adapt = {
    "adapt",    adapt_init,         adapt_observe, adapt_decide,  NULL,
    adapt_save, adapt_save_tensors, adapt_load,    adapt_destroy, adapt_cuda,
    1};
