/* src/policy/muppet.c: the MuPPET policy (Rajagopal et al., FPL 2020, as the
 * spec describes it): a global precision level (policy.muppet_levels, then
 * float32) with the muppet quantizer on conv/linear/pool outputs, the input
 * image (one scale per image), weights, weight gradients and the activation
 * gradients conv, linear and pooling layers pass back (not batch-norm). The
 * gradient is Q(g) + l2 * w_q (weight decay on the quantized weights, in
 * the update as well). At the end of each epoch the last mini-batch's
 * gradient of every trainable tensor (weights, biases, batch-norm) is kept;
 * every r epochs the mean over those tensors of GD = sum ||g||^2 /
 * ||sum g||^2 over the last r epochs feeds the switching rule
 * (src/policy/policy_core.h; doc/algorithms.md). The learning rate is
 * constant while quantized; in float32 it is multiplied by 0.1 every
 * muppet_decay_every epochs until it falls below muppet_min_lr, which ends
 * training. With policy.muppet_schedule = WL:EPOCHS,... the levels are
 * replayed epoch by epoch instead (WL 32 = float32) and the learning rate
 * follows [schedule].
 *
 * On the GPU engine (run.device = cuda) the gradient copies live on the device, one array of r
 * copies per tensor, and the check reads back the two sums of GD per tensor
 * (adapt_cuda_net_gd); they come to the host only for a checkpoint. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "src/policy/policy.h"
#include "src/policy/policy_core.h"

#define MUPPET_MAX_R 64

struct muppet_state {
    uint64_t dev_arrays;         /* adapt_cuda_net_id of the engine d_ring is on */
    int nlevels, level;          /* level == nlevels: float32 */
    int levels[ADAPT_SCHEMA_LIST_MAX];
    int replay;                  /* schedule given */
    struct adapt_muppet_rule rule;
    int r, ring_n;               /* epochs kept, epochs stored so far */
    int nt;                      /* trainable tensors */
    struct adapt_param **tp;     /* (nt) those tensors, in parameter order */
    int *tk;                     /* (nt) their net->param indices */
    float **ring;                /* (r * nt) gradient copies */
    /* run.device = cuda: per tensor its r copies on the engine (copy k at d_ring[t] + k * n),
     * the tensors' sizes and room for their sums */
    float **d_ring;
    size_t *tn;
    double *sums;
    double last_gd;              /* S of the last check, NAN before */
    int fp32_epochs;
    struct adapt_arena arena;
};

static int schedule_wl(const struct adapt_config *cfg, int epoch)
{
    const struct adapt_schema_pairs *s = &cfg->policy.muppet_schedule;
    int e = 0;
    for (int i = 0; i < s->n; i++) {
        e += s->b[i];
        if (epoch < e) return s->a[i];
    }
    return s->n ? s->a[s->n - 1] : 32;
}

static void apply_level(struct adapt_policy *p, int wl)
{
    for (int u = 0; u < p->prec->nunits; u++) {
        if (wl >= 32) {
            adapt_precision_set_float(p->prec, u);
            continue;
        }
        struct quant_spec s;
        quant_spec_init(&s, QUANT_FORMAT_MUPPET);
        s.wl = wl;
        adapt_precision_set(p->prec, u, &s);
    }
}

static int current_wl(const struct muppet_state *m)
{
    return m->level < m->nlevels ? m->levels[m->level] : 32;
}

static enum adapt_status muppet_init(struct adapt_policy *p)
{
    const struct adapt_config *cfg = p->cfg;
    struct muppet_state *m = calloc(1, sizeof *m);
    if (!m) return ADAPT_ERROR(ADAPT_ENOMEM, "cannot allocate the muppet policy");
    p->state = m;
    m->nlevels = cfg->policy.muppet_levels.n;
    memcpy(m->levels, cfg->policy.muppet_levels.v, sizeof(int) * (size_t)m->nlevels);
    m->replay = cfg->policy.muppet_schedule.n > 0;
    m->rule.patience = cfg->policy.muppet_patience;
    m->r = cfg->policy.muppet_r;
    if (m->r > MUPPET_MAX_R)
        return ADAPT_ERROR(ADAPT_EINVAL, "policy.muppet_r = %d: at most %d", m->r, MUPPET_MAX_R);
    enum adapt_status st = adapt_precision_alloc(&p->prec, p->net, 1, ADAPT_QOUT_UNITS_POOLS,
                                                 QUANT_ROUND_STOCHASTIC, p->seed);
    if (st) return st;
    adapt_policy_apply_output_rules(p, 0);
    m->last_gd = NAN;
    p->l2_quantized = 1;
    if (!m->replay) {
        struct adapt_net *net = p->net;
        m->tp = calloc((size_t)net->nparam + 1, sizeof *m->tp);
        m->tk = calloc((size_t)net->nparam + 1, sizeof *m->tk);
        if (!m->tp || !m->tk) return ADAPT_ERROR(ADAPT_ENOMEM, "cannot allocate the muppet policy");
        size_t bytes = 0;
        for (int k = 0; k < net->nparam; k++)
            if (net->param[k]->role != ADAPT_PARAM_BUFFER) {
                m->tk[m->nt] = k;
                m->tp[m->nt++] = net->param[k];
                bytes += (size_t)m->r * adapt_arena_take_size(net->param[k]->value.numel);
            }
        m->ring = calloc((size_t)m->r * (size_t)m->nt + 1, sizeof *m->ring);
        if (!m->ring) return ADAPT_ERROR(ADAPT_ENOMEM, "cannot allocate the muppet policy");
        if ((st = adapt_arena_alloc(&m->arena, bytes))) return st;
        for (int k = 0; k < m->r; k++)
            for (int t = 0; t < m->nt; t++)
                m->ring[k * m->nt + t] = adapt_arena_take(&m->arena, m->tp[t]->value.numel);
    }
    apply_level(p, m->replay ? schedule_wl(cfg, 0) : current_wl(m));
    return ADAPT_OK;
}

static int muppet_observe(struct adapt_policy *p, long step, double loss, int last)
{
    (void)loss;
    struct muppet_state *m = p->state;
    adapt_precision_quantize_grads(p->prec, step);
    if (last && !m->replay && m->level < m->nlevels) {
        const float l2 = (float)p->cfg->optim.l2_decay;
        int slot = m->ring_n % m->r;
        for (int t = 0; p->dev && t < m->nt && !p->dev_st; t++) {
            const int k = m->tk[t];
            p->dev_st = adapt_cuda_net_add_scaled(p->dev, m->d_ring[t] + (size_t)slot * m->tn[t],
                                                  adapt_cuda_net_param(p->dev, k, ADAPT_CUDA_GRAD),
                                                  adapt_cuda_net_param(p->dev, k, ADAPT_CUDA_USE),
                                                  l2, m->tn[t]);
        }
        for (int t = 0; !p->dev && t < m->nt; t++) {
            const struct adapt_param *pp = m->tp[t];
            const float *wq = pp->use ? pp->use : pp->value.data;
            float *dst = m->ring[slot * m->nt + t];
            for (size_t i = 0; i < pp->grad.numel; i++) dst[i] = pp->grad.data[i] + l2 * wq[i];
        }
        m->ring_n++;
    }
    return 0;
}

static enum adapt_status muppet_epoch_end(struct adapt_policy *p, int epoch, double *lr,
                                          int *stop)
{
    struct muppet_state *m = p->state;
    const struct adapt_config *cfg = p->cfg;
    enum adapt_status st;
    *stop = 0;
    if (m->replay) {
        int before = schedule_wl(cfg, epoch), after = schedule_wl(cfg, epoch + 1);
        if (after != before) apply_level(p, after);
        return ADAPT_OK;
    }
    if (m->level >= m->nlevels) {
        /* float32 phase: decay, then stop */
        *lr = p->cfg->optim.lr *
              pow(0.1, (double)(++m->fp32_epochs / cfg->policy.muppet_decay_every));
        *stop = *lr < cfg->policy.muppet_min_lr;
        return ADAPT_OK;
    }
    *lr = cfg->optim.lr; /* constant while quantized */
    if (m->ring_n >= m->r && (epoch + 1) % m->r == 0) {
        int nu = p->prec->nunits;
        double S = 0.0;
        const float *g[MUPPET_MAX_R];
        if (p->dev) {
            if ((st = adapt_cuda_net_gd(p->dev, m->d_ring, m->tn, m->nt, m->r, m->sums))) return st;
            for (int t = 0; t < m->nt; t++)
                S += adapt_muppet_gd_of(m->sums[2 * t], m->sums[2 * t + 1]);
        }
        for (int t = 0; !p->dev && t < m->nt; t++) {
            for (int k = 0; k < m->r; k++) g[k] = m->ring[k * m->nt + t];
            S += adapt_muppet_gd(g, m->r, m->tp[t]->value.numel);
        }
        S /= m->nt;
        m->last_gd = S;
        if (adapt_muppet_observe(&m->rule, S, epoch)) {
            struct adapt_trace_event e;
            memset(&e, 0, sizeof e);
            e.kind = ADAPT_TRACE_EVENT_PU;
            e.before[0] = current_wl(m);
            m->level++;
            m->ring_n = 0;
            e.after[0] = current_wl(m);
            e.s = e.after[0] - e.before[0];
            for (int u = 0; u < nu; u++) {
                e.unit = u;
                if ((st = adapt_policy_add_event(p, &e))) return st;
            }
            apply_level(p, current_wl(m));
        }
    }
    return ADAPT_OK;
}

static json_t *muppet_save(const struct adapt_policy *p)
{
    const struct muppet_state *m = p->state;
    return json_pack("{s:i, s:f, s:i, s:i, s:i}", "level", m->level, "max_gd", m->rule.max_gd,
                     "violations", m->rule.violations, "ring_n", m->ring_n, "fp32_epochs",
                     m->fp32_epochs);
}

static int muppet_save_tensors(const struct adapt_policy *p, struct adapt_safetensors_tensor *t,
                               int cap, char (*names)[96])
{
    const struct muppet_state *m = p->state;
    if (m->replay) return 0;
    int k = 0;
    for (int s = 0; s < m->r; s++)
        for (int j = 0; j < m->nt && k < cap; j++, k++) {
            snprintf(names[k], 96, "muppet.grad%d.%s", s, m->tp[j]->name);
            t[k].name = names[k];
            t[k].dtype = ADAPT_ST_F32;
            t[k].ndim = 1;
            t[k].shape[0] = (int64_t)m->tp[j]->value.numel;
            t[k].data = m->ring[s * m->nt + j];
        }
    return k;
}

static enum adapt_status muppet_load(struct adapt_policy *p, json_t *j,
                                     const struct adapt_safetensors *f)
{
    struct muppet_state *m = p->state;
    int level, violations, ring_n, fp32_epochs;
    double max_gd;
    if (json_unpack(j, "{s:i, s:F, s:i, s:i, s:i}", "level", &level, "max_gd", &max_gd,
                    "violations", &violations, "ring_n", &ring_n, "fp32_epochs", &fp32_epochs))
        return ADAPT_ERROR(ADAPT_EFORMAT, "%s: malformed muppet policy state", f->path);
    /* every field against its range; epoch counts against the checkpoint's epoch */
    if (level < 0 || level > m->nlevels)
        return ADAPT_ERROR(ADAPT_ERANGE, "%s: policy_state level = %d, expected 0 .. %d (the "
                           "%d entries of policy.muppet_levels, then float32)", f->path, level,
                           m->nlevels, m->nlevels);
    if (!(max_gd >= 0.0) || isnan(max_gd))
        return ADAPT_ERROR(ADAPT_ERANGE, "%s: policy_state max_gd = %g, expected >= 0", f->path,
                           max_gd);
    if (violations < 0 || violations > p->cfg->policy.muppet_patience)
        return ADAPT_ERROR(ADAPT_ERANGE, "%s: policy_state violations = %d, expected 0 .. %d "
                           "(policy.muppet_patience)", f->path, violations,
                           p->cfg->policy.muppet_patience);
    if (ring_n < 0 || ring_n > p->epoch)
        return ADAPT_ERROR(ADAPT_ERANGE, "%s: policy_state ring_n = %d, expected 0 .. %d (epochs "
                           "done)", f->path, ring_n, p->epoch);
    if (fp32_epochs < 0 || fp32_epochs > p->epoch)
        return ADAPT_ERROR(ADAPT_ERANGE, "%s: policy_state fp32_epochs = %d, expected 0 .. %d "
                           "(epochs done)", f->path, fp32_epochs, p->epoch);
    m->level = level;
    m->rule.max_gd = max_gd;
    m->rule.violations = violations;
    m->ring_n = ring_n;
    m->fp32_epochs = fp32_epochs;
    if (!m->replay) {
        for (int s = 0; s < m->r; s++)
            for (int j = 0; j < m->nt; j++) {
                char name[96];
                snprintf(name, sizeof name, "muppet.grad%d.%s", s, m->tp[j]->name);
                int64_t shape[1] = {(int64_t)m->tp[j]->value.numel};
                enum adapt_status st =
                    adapt_safetensors_copy(f, name, ADAPT_ST_F32, 1, shape, m->ring[s * m->nt + j]);
                if (st) return st;
            }
        apply_level(p, current_wl(m));
    } else {
        apply_level(p, schedule_wl(p->cfg, p->epoch));
    }
    return ADAPT_OK;
}

static void muppet_destroy(struct adapt_policy *p)
{
    struct muppet_state *m = p->state;
    if (!m) return;
    adapt_arena_free(&m->arena);
    free(m->ring);
    free(m->tp);
    free(m->tk);
    free(m->d_ring); /* the arrays are the engine's */
    free(m->tn);
    free(m->sums);
    free(m);
}

/* Copy k of tensor t between the host ring and the device's (to_device: host -> device). */
static enum adapt_status ring_copy(struct adapt_policy *p, int t, int k, int to_device)
{
    struct muppet_state *m = p->state;
    float *dev = m->d_ring[t] + (size_t)k * m->tn[t], *host = m->ring[k * m->nt + t];
    return to_device ? adapt_cuda_net_put(p->dev, dev, host, m->tn[t])
                     : adapt_cuda_net_get(p->dev, dev, host, m->tn[t]);
}

/* to_device: the gradient copies (a resumed run's) to arrays on the engine; otherwise back to
 * the host ring (a checkpoint). A replayed schedule keeps none. */
static enum adapt_status muppet_cuda(struct adapt_policy *p, int to_device)
{
    struct muppet_state *m = p->state;
    enum adapt_status st = ADAPT_OK;
    if (m->replay) return ADAPT_OK;
    if (to_device) { /* tables for this engine (its arrays are freed with it) */
        for (int t = 0; m->dev_arrays == adapt_cuda_net_id(p->dev) && m->d_ring && t < m->nt; t++)
            adapt_cuda_net_release(p->dev, m->d_ring[t]); /* attached to this engine before */
        m->dev_arrays = adapt_cuda_net_id(p->dev);
        free(m->d_ring);
        free(m->tn);
        free(m->sums);
        m->d_ring = calloc((size_t)m->nt + 1, sizeof *m->d_ring);
        m->tn = calloc((size_t)m->nt + 1, sizeof *m->tn);
        m->sums = calloc(2 * (size_t)m->nt + 2, sizeof *m->sums);
        if (!m->d_ring || !m->tn || !m->sums)
            return ADAPT_ERROR(ADAPT_ENOMEM, "cannot allocate the muppet policy's device tables");
        for (int t = 0; t < m->nt && !st; t++) {
            m->tn[t] = m->tp[t]->value.numel;
            st = adapt_cuda_net_alloc(p->dev, (size_t)m->r * m->tn[t], &m->d_ring[t]);
        }
    }
    for (int t = 0; t < m->nt && !st; t++)
        for (int k = 0; k < m->r && !st; k++) st = ring_copy(p, t, k, to_device);
    return st;
}

const struct adapt_policy_type adapt_policy_muppet = {
    "muppet", muppet_init, muppet_observe, NULL, muppet_epoch_end, muppet_save,
    muppet_save_tensors, muppet_load, muppet_destroy, muppet_cuda, 0};

double adapt_muppet_last_gd(const struct adapt_policy *p)
{
    if (p->type != &adapt_policy_muppet) return NAN;
    return ((const struct muppet_state *)p->state)->last_gd;
}
