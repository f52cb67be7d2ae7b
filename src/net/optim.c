/* src/net/optim.c: SGD with momentum and learning-rate schedules. */
#include "src/net/optim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum adapt_status adapt_sgd_init(struct adapt_sgd *o, struct adapt_net *net, double lr,
                                 double momentum, double l2, double l1, int nesterov)
{
    memset(o, 0, sizeof *o);
    o->lr = lr;
    o->momentum = momentum;
    o->l2 = l2;
    o->l1 = l1;
    o->nesterov = nesterov;
    int n = 0;
    size_t bytes = 0;
    for (int p = 0; p < net->nparam; p++)
        if (net->param[p]->role != ADAPT_PARAM_BUFFER) {
            n++;
            bytes += adapt_arena_take_size(net->param[p]->value.numel);
        }
    o->buf = calloc((size_t)n + 1, sizeof *o->buf);
    o->par = calloc((size_t)n + 1, sizeof *o->par);
    if (!o->buf || !o->par) {
        adapt_sgd_free(o);
        return ADAPT_ERROR(ADAPT_ENOMEM, "cannot allocate optimizer");
    }
    enum adapt_status st = adapt_arena_alloc(&o->a_buf, bytes);
    if (st != ADAPT_OK) {
        adapt_sgd_free(o);
        return st;
    }
    for (int p = 0; p < net->nparam; p++) {
        struct adapt_param *pp = net->param[p];
        if (pp->role == ADAPT_PARAM_BUFFER) continue;
        o->par[o->nbuf] = pp;
        o->buf[o->nbuf++] = adapt_arena_take(&o->a_buf, pp->value.numel);
    }
    return ADAPT_OK;
}

void adapt_sgd_free(struct adapt_sgd *o)
{
    free(o->buf);
    free(o->par);
    adapt_arena_free(&o->a_buf);
    memset(o, 0, sizeof *o);
}

void adapt_sgd_scale_grads(struct adapt_sgd *o, double grad_scale)
{
    const float s = (float)grad_scale;
    if (s == 1.0f) return;
    for (int k = 0; k < o->nbuf; k++) {
        struct adapt_param *pp = o->par[k];
        float *g = pp->grad.data;
        for (size_t i = 0; i < pp->value.numel; i++) g[i] *= s;
    }
}

void adapt_sgd_add_l1(struct adapt_sgd *o, double loss_scale)
{
    const float l1 = (float)(o->l1 * loss_scale);
    if (l1 == 0.0f) return;
    for (int k = 0; k < o->nbuf; k++) {
        struct adapt_param *pp = o->par[k];
        float *g = pp->grad.data;
        const float *w = o->l1_quantized && pp->use ? pp->use : pp->value.data;
        for (size_t i = 0; i < pp->value.numel; i++)
            g[i] += l1 * (float)((w[i] > 0.0f) - (w[i] < 0.0f));
    }
}

void adapt_sgd_prepare(struct adapt_sgd *o, double grad_scale, double loss_scale)
{
    adapt_sgd_scale_grads(o, grad_scale);
    adapt_sgd_add_l1(o, loss_scale);
}

void adapt_sgd_update(struct adapt_sgd *o)
{
    const float lr = (float)o->lr, m = (float)o->momentum, l2 = (float)o->l2;
    const int first = o->steps == 0;
    for (int k = 0; k < o->nbuf; k++) {
        struct adapt_param *pp = o->par[k];
        float *w = pp->value.data, *g = pp->grad.data, *b = o->buf[k];
        const float *wd = o->l2_quantized && pp->use ? pp->use : w;
        size_t n = pp->value.numel;
        #pragma omp parallel for schedule(static) if (n > 65536)
        for (size_t i = 0; i < n; i++) {
            float d = g[i] + l2 * wd[i];
            /* PyTorch starts the buffer at d on the first step (dampening 0). */
            float bi = (m != 0.0f) ? (first ? d : m * b[i] + d) : d;
            b[i] = bi;
            float u = (o->nesterov && m != 0.0f) ? d + m * bi : bi;
            w[i] -= lr * u;
            g[i] = 0.0f;
        }
    }
    o->steps++;
}

void adapt_sgd_step(struct adapt_sgd *o, double grad_scale)
{
    adapt_sgd_prepare(o, grad_scale, 1.0);
    adapt_sgd_update(o);
}

double adapt_sgd_l1_norm(const struct adapt_sgd *o)
{
    double s = 0.0;
    for (int k = 0; k < o->nbuf; k++) {
        const struct adapt_param *pp = o->par[k];
        const float *w = o->l1_quantized && pp->use ? pp->use : pp->value.data;
        for (size_t i = 0; i < o->par[k]->value.numel; i++) s += fabs((double)w[i]);
    }
    return s;
}

void adapt_sched_init(struct adapt_sched *s, enum adapt_sched_kind kind, double base_lr)
{
    memset(s, 0, sizeof *s);
    s->kind = kind;
    s->base_lr = s->lr = base_lr;
    s->gamma = 0.1;
    s->factor = 0.1;
    s->threshold = 1e-4;
    s->patience = 10;
    s->best = INFINITY;
}

double adapt_sched_step(struct adapt_sched *s, double val_loss)
{
    s->last_epoch++;
    switch (s->kind) {
    case ADAPT_SCHED_CONSTANT:
        break;
    case ADAPT_SCHED_MULTISTEP: {
        /* MultiStepLR: lr = base * gamma^(number of milestones <= last_epoch). */
        int k = 0;
        for (int i = 0; i < s->nmilestones; i++)
            if (s->milestones[i] <= s->last_epoch) k++;
        s->lr = s->base_lr * pow(s->gamma, k);
        break;
    }
    case ADAPT_SCHED_PLATEAU:
        /* ReduceLROnPlateau(mode="min", threshold_mode="rel"). */
        if (val_loss < s->best * (1.0 - s->threshold)) {
            s->best = val_loss;
            s->num_bad = 0;
        } else {
            s->num_bad++;
        }
        if (s->cooldown_counter > 0) {
            s->cooldown_counter--;
            s->num_bad = 0;
        }
        if (s->num_bad > s->patience) {
            double nl = fmax(s->lr * s->factor, s->min_lr);
            if (s->lr - nl > 1e-8) s->lr = nl;
            s->cooldown_counter = s->cooldown;
            s->num_bad = 0;
        }
        break;
    }
    return s->lr;
}
