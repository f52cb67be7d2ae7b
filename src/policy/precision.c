/* src/policy/precision.c: quantized copies and activation/gradient rounding. */
#include "src/policy/precision.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/rng.h"
#include "src/policy/roles.h"

enum what {
    Q_WEIGHT = 1,
    Q_BIAS,
    Q_INPUT,
    Q_OUTPUT,
    Q_GRAD_W,
    Q_GRAD_B,
    Q_ATTACHED,
    Q_GRAD_ATT,
    Q_GRAD_X,
    Q_MASTER,
    Q_GRAD_Y,
    Q_MX, /* Q_MX + c: copy c of the MX operands a layer rounds per GEMM (src/policy/mx_gemm.c) */
    Q_NODE_IN = 64 /* adapt_precision_node_from's input rounding, clear of the Q_MX copies */
};

static struct quant_key key_of(const struct adapt_precision *p, enum what w, int tensor,
                               long counter)
{
    struct quant_key k;
    k.seed = p->seed;
    k.stream = (uint64_t)ADAPT_STREAM_QUANT | ((uint64_t)w << 8) |
               ((uint64_t)(tensor & 0xffff) << 16) | ((uint64_t)(uint32_t)counter << 32);
    k.index = 0;
    return k;
}

struct quant_key adapt_precision_mx_key(const struct adapt_precision *p, int copy, int unit,
                                        long counter)
{
    return key_of(p, (enum what)(Q_MX + copy), unit, counter);
}

static struct quant_spec with_rounding(const struct adapt_precision *p, const struct quant_spec *s,
                                       enum quant_rounding r)
{
    struct quant_spec t = *s;
    t.rounding = r;
    t.sr_bits = p->sr_bits;
    return t;
}

/* Role r of unit ui (adapt_precision_set_roles): 1 with its format in *out (rounding set) and
 * its scaling in *sc when the role rounds, 0 when the tensor stays float32. auto_spec is what
 * the tensor is rounded to without roles (NULL: nothing), with auto_round; training 0
 * (evaluation) rounds to nearest. An inactive unit computes in float32 in every role. */
/* Role r of node `node` when it is a unit's own node and that unit's role is not auto. */
static int node_role(const struct adapt_precision *p, int node, enum adapt_role r)
{
    int ui = p->node_unit[node];
    return ui >= 0 && p->u[ui].node == node &&
           adapt_precision_role(p, ui, r)->kind != ADAPT_ROLE_AUTO;
}

/* The format unit ui's activations take without a role (adapt_precision_act_from). */
static const struct quant_spec *act_spec(const struct adapt_precision *p, int ui)
{
    if (!p->act_unit || p->act_unit[ui] == ui) return &p->u[ui].spec;
    return p->act_unit[ui] < 0 ? &p->act_fixed : &p->u[p->act_unit[ui]].spec;
}

static int role_spec(const struct adapt_precision *p, int ui, enum adapt_role r,
                     const struct quant_spec *auto_spec, enum quant_rounding auto_round,
                     int training, struct quant_spec *out, enum adapt_role_scaling *sc)
{
    const struct adapt_unit_prec *u = &p->u[ui];
    const struct adapt_role_fmt *f = adapt_precision_role(p, ui, r);
    *sc = ADAPT_SCALING_NONE;
    if (!u->active) return 0;
    switch (f->kind) {
    case ADAPT_ROLE_AUTO:
        if (!auto_spec) return 0;
        *out = with_rounding(p, auto_spec, auto_round);
        return 1;
    case ADAPT_ROLE_FLOAT: return 0;
    case ADAPT_ROLE_UNIT: *out = u->spec; break;
    case ADAPT_ROLE_FORMAT: *out = f->spec; break;
    }
    out->rounding = !training ? QUANT_ROUND_NEAREST
                    : f->rounding >= 0 ? (enum quant_rounding)f->rounding : p->rounding;
    out->sr_bits = p->sr_bits;
    *sc = f->scaling;
    return 1;
}

int adapt_precision_role_spec(const struct adapt_precision *p, int ui, enum adapt_role r,
                              int training, struct quant_spec *out, enum adapt_role_scaling *sc)
{
    return role_spec(p, ui, r, NULL, p->rounding, training, out, sc);
}

int adapt_precision_role_spec_auto(const struct adapt_precision *p, int ui, enum adapt_role r,
                                   struct quant_spec *out, enum adapt_role_scaling *sc)
{
    const struct adapt_unit_prec *u = &p->u[ui];
    switch (r) {
    case ADAPT_ROLE_WEIGHT: return role_spec(p, ui, r, &u->spec, u->spec.rounding, 1, out, sc);
    case ADAPT_ROLE_INPUT:
        if (!p->round_in[u->node] && !node_role(p, u->node, r)) return 0;
        return role_spec(p, ui, r, p->round_in[u->node] ? act_spec(p, ui) : NULL, p->rounding, 1,
                         out, sc);
    case ADAPT_ROLE_GRAD_OUTPUT:
        return !adapt_mx_gemm_takes_dy(p, u->node) &&
               role_spec(p, ui, r, NULL, p->rounding, 1, out, sc);
    default: return 0;
    }
}

/* 1 when every value of fixed-point format a is exactly representable in
 * fixed-point format b (finer or equal step, at least as many integer bits):
 * rounding an a-value to b is then the identity, in either rounding mode. */
/* 1 and the format the node producing activation `act` rounded its output to in *out; 0 when
 * that output is not rounded onto a fixed grid (not rounded, scaled, or the network input). */
static int producer_spec(const struct adapt_precision *p, int act, struct quant_spec *out)
{
    int node = act - 1;
    if (node < 0 || !p->round_out[node] || p->node_unit[node] < 0) return 0;
    const struct quant_spec *as = act_spec(p, p->node_unit[node]);
    enum adapt_role_scaling sc;
    return role_spec(p, p->node_unit[node], ADAPT_ROLE_OUTPUT, as, as->rounding, 1, out, &sc) &&
           sc == ADAPT_SCALING_NONE;
}

/* quant_rows on host arrays, or with a GPU engine attached on its device arrays, queued on its
 * stream (counts into counter slot `slot` there; -1: none; st on the host, may be NULL). */
static enum adapt_status round_rows(const struct adapt_precision *p, const struct quant_spec *s,
                                    const float *x, float *y, size_t rows, size_t cols,
                                    struct quant_key key, int slot, struct quant_stats *st)
{
    if (p->dev) return adapt_cuda_net_round(p->dev, s, x, y, rows, cols, key, slot);
    return quant_rows(s, x, y, rows, cols, key, NULL, st);
}

/* Roundings gathered for one launch on a device (adapt_cuda_net_round_list): the weight copies
 * of a refresh, the gradients of a step. On the host, and for formats a list does not take,
 * gather runs each at once (round_rows). The specs must live until the flush. */
#define GATHER_MAX 64
struct gather {
    struct adapt_cuda_round r[GATHER_MAX];
    int k;
};

static enum adapt_status flush(const struct adapt_precision *p, struct gather *g)
{
    enum adapt_status st = g->k ? adapt_cuda_net_round_list(p->dev, g->r, g->k) : ADAPT_OK;
    g->k = 0;
    return st;
}

static enum adapt_status gather(const struct adapt_precision *p, struct gather *g,
                                const struct quant_spec *s, const float *x, float *y, size_t rows,
                                size_t cols, struct quant_key key, int slot, struct quant_stats *st)
{
    if (!p->dev || !quant_cuda_list_fits(s))
        return round_rows(p, s, x, y, rows, cols, key, slot, st);
    enum adapt_status e = g->k == GATHER_MAX ? flush(p, g) : ADAPT_OK;
    if (e) return e;
    g->r[g->k++] = (struct adapt_cuda_round){s, x, y, rows * cols, key, slot};
    return ADAPT_OK;
}

/* quant_rows over a batch of n samples of m values: MX blocks restart at every sample (one row
 * each); for the other formats the split makes no difference. */
static enum adapt_status round_batch(const struct adapt_precision *p, const struct quant_spec *s,
                                     const float *x, float *y, size_t m, int n,
                                     struct quant_key key, int slot, struct quant_stats *st)
{
    size_t rows = quant_format_is_mx(s->format) ? (size_t)n : 1;
    return round_rows(p, s, x, y, rows, m * (size_t)n / rows, key, slot, st);
}

/* Device counter slots: u for unit u's weight rounding (all restarted by one memset), nunits + u
 * for its rounded outputs. */
#define SLOT_WEIGHT(u) (u)
#define SLOT_OUT(u)    (p->nunits + (u))

static enum adapt_status in_run(struct adapt_precision *p, int node, const float **xs, int n,
                                int training, int backward)
{
    if (!p->round_in[node] && !node_role(p, node, ADAPT_ROLE_INPUT)) return ADAPT_OK;
    int ui = p->node_unit[node];
    if (ui < 0 || p->u[ui].node != node) return ADAPT_OK;
    struct adapt_unit_prec *u = &p->u[ui];
    struct quant_spec s, prev;
    enum adapt_role_scaling sc;
    if (!role_spec(p, ui, ADAPT_ROLE_INPUT, p->round_in[node] ? act_spec(p, ui) : NULL,
                   training ? p->rounding : QUANT_ROUND_NEAREST, training, &s, &sc))
        return ADAPT_OK;
    float *qin = p->dev ? u->d_qin : u->qin;
    if (!qin && !p->dev) { /* an input role of a unit whose input is not rounded otherwise */
        size_t m = adapt_layer_in_numel(u->layer, 0) * (size_t)p->net->n_max;
        if (!u->role_qin && !(u->role_qin = malloc(sizeof(float) * m)))
            return ADAPT_ERROR(ADAPT_ENOMEM, "cannot allocate a rounded input");
        qin = u->role_qin;
    }
    if (!qin) return ADAPT_OK;
    if (!backward) adapt_arith_set_grid(p, ui, ADAPT_ROLE_INPUT, adapt_arith_grid(&s, sc));
    if (sc == ADAPT_SCALING_NONE && producer_spec(p, p->net->nodes[node].in[0], &prev) &&
        quant_spec_within(&prev, &s))
        return ADAPT_OK; /* already on the grid */
    if (!backward) {
        size_t m = adapt_layer_in_numel(u->layer, 0);
        struct quant_key k = key_of(p, Q_INPUT, p->node_unit[node], p->iter);
        enum adapt_status st;
        if (sc != ADAPT_SCALING_NONE) {
            p->eval_round = !training;
            st = adapt_role_round_scaled(p, ADAPT_ROLE_INPUT, ui, sc, &s, xs[0], qin, 1,
                                         m * (size_t)n, (size_t)n, k, NULL);
            p->eval_round = 0;
        } else if (p->per_image_input) { /* one scale per image (MuPPET): an image per dim-0 slice */
            if (quant_type_of(s.format)->needs_range) s.block = QUANT_BLOCK_DIM0;
            st = round_rows(p, &s, xs[0], qin, (size_t)n, m, k, -1, NULL);
        } else { /* one scale per batch */
            st = round_batch(p, &s, xs[0], qin, m, n, k, -1, NULL);
        }
        if (st) return st;
    }
    xs[0] = qin;
    return ADAPT_OK;
}

static enum adapt_status out_run(struct adapt_precision *p, int node, float *y, int n, int training)
{
    int ui = p->node_unit[node];
    if (!p->round_out[node] && !node_role(p, node, ADAPT_ROLE_OUTPUT)) return ADAPT_OK;
    struct adapt_unit_prec *u = &p->u[ui];
    struct quant_spec s;
    enum adapt_role_scaling sc;
    if (!role_spec(p, ui, ADAPT_ROLE_OUTPUT, act_spec(p, ui),
                   training ? p->rounding : QUANT_ROUND_NEAREST, training, &s, &sc))
        return ADAPT_OK;
    if (p->round_out[node] == 2 &&
        (sc != ADAPT_SCALING_NONE || quant_format_keeps_subsets(s.format)))
        return ADAPT_OK;
    size_t m = adapt_layer_out_numel(p->net->nodes[node].layer) * (size_t)n;
    struct quant_stats qs = {0, 0, 0};
    struct quant_key key = key_of(p, Q_OUTPUT, node, p->iter);
    p->eval_round = !training;
    enum adapt_status st =
        sc != ADAPT_SCALING_NONE
            ? adapt_role_round_scaled(p, ADAPT_ROLE_OUTPUT, node, sc, &s, y, y, 1, m, (size_t)n,
                                      key, training ? &qs : NULL)
            : round_batch(p, &s, y, y, m / (size_t)n, n, key, training ? SLOT_OUT(ui) : -1,
                          training ? &qs : NULL);
    p->eval_round = 0;
    if (st) return st;
    if (training) {
        /* on a device the saturated count comes from its counters (adapt_precision_sync) */
        u->out_sat += qs.saturated;
        u->out_n += m;
    }
    return ADAPT_OK;
}

/* adapt_precision_half_backward: a gradient of m values per sample of active unit `node`'s
 * output (dy) or input (dx), rounded in place to nearest in the unit's format; other nodes'
 * gradients pass unchanged. */
static enum adapt_status half_grad(struct adapt_precision *p, int node, float *g, size_t m, int n)
{
    int ui = p->node_unit[node];
    if (!g || ui < 0 || p->u[ui].node != node || !p->u[ui].active) return ADAPT_OK;
    struct quant_spec s = with_rounding(p, &p->u[ui].spec, QUANT_ROUND_NEAREST);
    return round_batch(p, &s, g, g, m, n, key_of(p, Q_GRAD_X, node * 2, p->iter), -1, NULL);
}

/* ADAPT_STE_SATURATING: a fixed-point output at its upper bound takes no
 * gradient asking it to grow (dy < 0), one at its lower bound none asking it
 * to shrink (dy > 0). A value that rounded onto a bound without saturating is
 * treated alike: the forward cannot move it further out either. */
static int is_pool(const struct adapt_layer *l)
{
    return !strcmp(l->ops->kind, "maxpool2d") || !strcmp(l->ops->kind, "avgpool2d");
}

/* An error-gradient role (grad_output, grad_input) on gradient g of m values per sample of unit
 * node `node`'s output or input k, or (grad_input) of a pooling node of the unit's group: g
 * rounded in place; nothing at other nodes. */
static enum adapt_status grad_role(struct adapt_precision *p, enum adapt_role r, int node, int k,
                                   float *g, size_t m, int n)
{
    int ui = p->node_unit[node];
    if (!g || ui < 0 ||
        (p->u[ui].node != node &&
         (r != ADAPT_ROLE_GRAD_INPUT || !is_pool(p->net->nodes[node].layer))))
        return ADAPT_OK;
    struct quant_spec s;
    enum adapt_role_scaling sc;
    if (!role_spec(p, ui, r, NULL, p->rounding, 1, &s, &sc)) return ADAPT_OK;
    struct quant_key key = r == ADAPT_ROLE_GRAD_OUTPUT ? key_of(p, Q_GRAD_Y, node, p->iter)
                                                       : key_of(p, Q_GRAD_X, node * 2 + k, p->iter);
    if (r == ADAPT_ROLE_GRAD_OUTPUT) adapt_arith_set_grid(p, ui, r, adapt_arith_grid(&s, sc));
    if (sc != ADAPT_SCALING_NONE)
        return adapt_role_round_scaled(p, r, node, sc, &s, g, g, 1, m * (size_t)n, (size_t)n,
                                       key, NULL);
    return round_batch(p, &s, g, g, m, n, key, -1, NULL);
}

static enum adapt_status dout_run(struct adapt_precision *p, int node, const float *y, float *dy,
                                  int n)
{
    if (p->arith && p->node_unit[node] >= 0 && p->u[p->node_unit[node]].node == node)
        adapt_arith_set_grid(p, p->node_unit[node], ADAPT_ROLE_GRAD_OUTPUT, -1);
    if (node_role(p, node, ADAPT_ROLE_GRAD_OUTPUT)) {
        /* an MX role with roles.mx_axis = gemm: the layer rounds it per GEMM */
        enum adapt_status st =
            adapt_mx_gemm_takes_dy(p, node)
                ? ADAPT_OK
                : grad_role(p, ADAPT_ROLE_GRAD_OUTPUT, node, 0, dy,
                            adapt_layer_out_numel(p->net->nodes[node].layer), n);
        if (st) return st;
    } else if (p->half_backward) {
        enum adapt_status st =
            half_grad(p, node, dy, adapt_layer_out_numel(p->net->nodes[node].layer), n);
        if (st) return st;
    }
    if (p->ste != ADAPT_STE_SATURATING || p->round_out[node] != 1) return ADAPT_OK;
    const struct adapt_unit_prec *u = &p->u[p->node_unit[node]];
    const struct quant_spec *as = act_spec(p, p->node_unit[node]);
    if (!u->active || as->format != QUANT_FORMAT_FIXED) return ADAPT_OK;
    /* the grid's ends, (2^(WL-1) - 1) 2^-FL and -2^(WL-1) 2^-FL, as the rounding produces them */
    const float hi = (float)ldexp(ldexp(1.0, as->wl - 1) - 1.0, -as->fl);
    const float lo = (float)-ldexp(1.0, as->wl - 1 - as->fl);
    size_t m = adapt_layer_out_numel(p->net->nodes[node].layer) * (size_t)n;
    if (p->dev) return adapt_cuda_net_ste_clip(p->dev, y, dy, m, lo, hi);
    #pragma omp parallel for schedule(static) if (m > 65536)
    for (size_t i = 0; i < m; i++)
        if ((y[i] >= hi && dy[i] < 0.0f) || (y[i] <= lo && dy[i] > 0.0f)) dy[i] = 0.0f;
    return ADAPT_OK;
}

static enum adapt_status grad_run(struct adapt_precision *p, int node, float **dxs, int n)
{
    struct adapt_layer *l = p->net->nodes[node].layer;
    /* the unit's own gradient, and a pooling layer's of its group, as its grad_input role says
     * when that is set (otherwise as the policy rounds them, below) */
    const int ui = p->node_unit[node];
    if (node_role(p, node, ADAPT_ROLE_GRAD_INPUT) ||
        (ui >= 0 && is_pool(l) &&
         adapt_precision_role(p, ui, ADAPT_ROLE_GRAD_INPUT)->kind != ADAPT_ROLE_AUTO)) {
        for (int k = 0; k < l->nin; k++) {
            enum adapt_status st = grad_role(p, ADAPT_ROLE_GRAD_INPUT, node, k, dxs[k],
                                             adapt_layer_in_numel(l, k), n);
            if (st) return st;
        }
        return ADAPT_OK;
    }
    if (p->half_backward) return half_grad(p, node, dxs[0], adapt_layer_in_numel(l, 0), n);
    /* MuPPET's rule (per_image_input): units and pooling layers round what they send back in
     * their unit's format; other policies round no error gradient without roles (the hook is
     * here for a role of another unit) */
    int unit = p->node_unit[node];
    if (!p->per_image_input || unit < 0 || !p->u[unit].active || !(l->is_unit || is_pool(l)))
        return ADAPT_OK;
    struct quant_spec s = with_rounding(p, &p->u[unit].spec, p->rounding);
    for (int k = 0; k < l->nin; k++) {
        if (!dxs[k]) continue;
        size_t m = adapt_layer_in_numel(l, k);
        enum adapt_status st = round_batch(p, &s, dxs[k], dxs[k], m, n,
                                           key_of(p, Q_GRAD_X, node * 2 + k, p->iter), -1, NULL);
        if (st) return st;
    }
    return ADAPT_OK;
}

/* adapt_precision_node_from's format of node `node`, with the rounding of a training or an
 * evaluation forward; 0 when the node is not rounded this way. */
static int node_from_spec(const struct adapt_precision *p, int node, int training,
                          struct quant_spec *s)
{
    const int from = p->node_from ? p->node_from[node] : -1;
    if (from < 0 || !p->u[from].active) return 0;
    *s = with_rounding(p, &p->u[from].spec, training ? p->rounding : QUANT_ROUND_NEAREST);
    return 1;
}

/* The network's hooks (host arrays: the rounding cannot fail on valid formats) */

static void in_hook(void *ctx, int node, const float **xs, int n, int training, int backward)
{
    struct adapt_precision *p = ctx;
    struct quant_spec ns;
    if (!backward && node_from_spec(p, node, training, &ns)) {
        /* in place, as the published modules assign the rounded tensor to their input's data */
        const struct adapt_node *nd = &p->net->nodes[node];
        float *x = p->net->act[nd->in[0]];
        ADAPT_ASSERT(xs[0] == x && nd->in[0] > 0);
        enum adapt_status st = round_batch(p, &ns, x, x, p->net->act_numel[nd->in[0]], n,
                                           key_of(p, Q_NODE_IN, node, p->iter), -1, NULL);
        ADAPT_ASSERT(st == ADAPT_OK);
        return;
    }
    if (p->arith && !backward && p->node_unit[node] >= 0 && p->u[p->node_unit[node]].node == node)
        adapt_arith_set_grid(p, p->node_unit[node], ADAPT_ROLE_INPUT, -1);
    if (adapt_mx_gemm_input(ctx, node, training, backward)) return; /* the layer rounds it */
    enum adapt_status st = in_run(ctx, node, xs, n, training, backward);
    ADAPT_ASSERT(st == ADAPT_OK);
}

static void out_hook(void *ctx, int node, float *y, int n, int training)
{
    struct adapt_precision *p = ctx;
    struct quant_spec ns;
    if (node_from_spec(p, node, training, &ns)) {
        enum adapt_status st =
            round_batch(p, &ns, y, y, adapt_layer_out_numel(p->net->nodes[node].layer), n,
                        key_of(p, Q_OUTPUT, node, p->iter), -1, NULL);
        ADAPT_ASSERT(st == ADAPT_OK);
        return;
    }
    enum adapt_status st = out_run(ctx, node, y, n, training);
    ADAPT_ASSERT(st == ADAPT_OK);
}

static void dout_hook(void *ctx, int node, const float *y, float *dy, int n)
{
    enum adapt_status st = dout_run(ctx, node, y, dy, n);
    ADAPT_ASSERT(st == ADAPT_OK);
}

static void grad_hook(void *ctx, int node, float **dxs, int n)
{
    enum adapt_status st = grad_run(ctx, node, dxs, n);
    ADAPT_ASSERT(st == ADAPT_OK);
}

void adapt_precision_install_grad_hook(struct adapt_precision *p)
{
    p->net->grad_hook = grad_hook;
}

/* ... and the GPU engine's (device arrays; a failed launch stops the step) */
static enum adapt_status in_hook_dev(void *ctx, int node, const float **xs, int n, int training,
                                     int backward)
{
    return in_run(ctx, node, xs, n, training, backward);
}

static enum adapt_status out_hook_dev(void *ctx, int node, float *y, int n, int training)
{
    return out_run(ctx, node, y, n, training);
}

static enum adapt_status dout_hook_dev(void *ctx, int node, const float *y, float *dy, int n)
{
    return dout_run(ctx, node, y, dy, n);
}

static enum adapt_status grad_hook_dev(void *ctx, int node, float **dxs, int n)
{
    return grad_run(ctx, node, dxs, n);
}

/* Layers whose output values are input values (or zero), so an input on a
 * grid gives an output on the same grid: rounding it again is the identity. */
static int keeps_grid(const struct adapt_layer *l)
{
    return !strcmp(l->ops->kind, "relu") || !strcmp(l->ops->kind, "maxpool2d") ||
           !strcmp(l->ops->kind, "flatten");
}

/* The state without a plan: units, arrays (zeroed plan), parameter -> unit. */
static enum adapt_status alloc_state(struct adapt_precision **out, struct adapt_net *net,
                                     enum quant_rounding rounding, uint64_t seed)
{
    ADAPT_ASSERT(net->finalized);
    struct adapt_precision *p = calloc(1, sizeof *p);
    if (!p) return ADAPT_ERROR(ADAPT_ENOMEM, "cannot allocate precision state");
    p->net = net;
    p->nunits = net->nunits;
    p->rounding = rounding;
    p->sr_bits = QUANT_SR_BITS_32;
    p->seed = seed;
    p->u = calloc((size_t)net->nunits + 1, sizeof *p->u);
    p->node_unit = malloc(sizeof(int) * (size_t)net->nnodes);
    p->round_out = calloc((size_t)net->nnodes, 1);
    p->round_in = calloc((size_t)net->nnodes, 1);
    p->param_unit = malloc(sizeof(int) * ((size_t)net->nparam + 1));
    if (!p->u || !p->node_unit || !p->round_out || !p->round_in || !p->param_unit) {
        adapt_precision_free(p);
        return ADAPT_ERROR(ADAPT_ENOMEM, "cannot allocate precision state");
    }
    for (int i = 0, cur = -1; i < net->nnodes; i++) {
        struct adapt_layer *l = net->nodes[i].layer;
        if (!l->is_unit) continue;
        struct adapt_unit_prec *u = &p->u[++cur];
        u->node = i;
        u->layer = l;
        quant_spec_init(&u->spec, QUANT_FORMAT_FIXED);
        u->param[0] = u->param[1] = -1;
        for (int k = 0; k < net->nparam; k++)
            for (int q = 0; q < l->nparam && q < 2; q++)
                if (net->param[k] == &l->param[q]) u->param[q] = k;
    }
    /* parameter -> unit: a unit's own parameters, then what follows it */
    for (int k = 0, last = -1; k < net->nparam; k++) {
        const struct adapt_param *pp = net->param[k];
        for (int u = 0; u < net->nunits; u++)
            for (int q = 0; q < p->u[u].layer->nparam; q++)
                if (pp == &p->u[u].layer->param[q]) last = u;
        p->param_unit[k] = pp->role == ADAPT_PARAM_BUFFER ? -1 : last;
    }
    *out = p;
    return ADAPT_OK;
}

/* After the plan (node_unit, round_in, round_out) is set: marks the roundings that are the
 * identity (relu, max-pool and flatten of an output rounded in the same format, for formats that
 * keep subsets: quant_format_keeps_subsets), sizes and
 * carves the arena (weight copies, rounded inputs) and installs the hooks. */
static enum adapt_status finish_state(struct adapt_precision *p)
{
    struct adapt_net *net = p->net;
    size_t bytes = 0;
    for (int i = 0; i < net->nnodes; i++) {
        struct adapt_layer *l = net->nodes[i].layer;
        int src = net->nodes[i].in[0] - 1; /* node producing the input; -1: network input */
        if (keeps_grid(l) && p->round_out[i] && src >= 0 && p->round_out[src] &&
            p->node_unit[src] == p->node_unit[i])
            p->round_out[i] = 2; /* rounded only in a format that does not keep subsets */
        ADAPT_ASSERT(!p->round_in[i] || (l->is_unit && p->node_unit[i] >= 0 &&
                                         p->u[p->node_unit[i]].node == i));
        if (!l->is_unit) continue;
        bytes += adapt_arena_take_size(l->param[0].value.numel);
        if (l->nparam > 1) bytes += adapt_arena_take_size(l->param[1].value.numel);
        if (p->round_in[i])
            bytes += adapt_arena_take_size(adapt_layer_in_numel(l, 0) * (size_t)net->n_max);
    }
    enum adapt_status st = adapt_arena_alloc(&p->arena, bytes);
    if (st) return st;
    for (int k = 0; k < p->nunits; k++) {
        struct adapt_unit_prec *u = &p->u[k];
        struct adapt_layer *l = u->layer;
        u->wq = adapt_arena_take(&p->arena, l->param[0].value.numel);
        u->bq = l->nparam > 1 ? adapt_arena_take(&p->arena, l->param[1].value.numel) : NULL;
        if (p->round_in[u->node])
            u->qin = adapt_arena_take(&p->arena, adapt_layer_in_numel(l, 0) * (size_t)net->n_max);
    }
    net->hook_ctx = p;
    net->in_hook = in_hook;
    net->out_hook = out_hook;
    net->dout_hook = dout_hook;
    return ADAPT_OK;
}

enum adapt_status adapt_precision_alloc(struct adapt_precision **out, struct adapt_net *net,
                                        int round_inputs, enum adapt_qout qout,
                                        enum quant_rounding rounding, uint64_t seed)
{
    struct adapt_precision *p;
    enum adapt_status st = alloc_state(&p, net, rounding, seed);
    if (st) return st;
    for (int i = 0, cur = -1; i < net->nnodes; i++) {
        struct adapt_layer *l = net->nodes[i].layer;
        if (l->is_unit) {
            cur++;
            /* MuPPET rounds only the input image: the other units read
             * outputs that are already rounded */
            p->round_in[i] = round_inputs && (qout != ADAPT_QOUT_UNITS_POOLS || cur == 0);
        }
        p->node_unit[i] = cur;
        if (cur >= 0 && (qout == ADAPT_QOUT_ALL ||
                         (qout == ADAPT_QOUT_UNITS_POOLS && (l->is_unit || is_pool(l))) ||
                         (qout == ADAPT_QOUT_UNITS && l->is_unit)))
            p->round_out[i] = 1;
    }
    if ((st = finish_state(p))) {
        adapt_precision_free(p);
        return st;
    }
    if (qout == ADAPT_QOUT_UNITS_POOLS) {
        p->per_image_input = 1;
        net->grad_hook = grad_hook;
    }
    *out = p;
    return ADAPT_OK;
}

enum adapt_status adapt_precision_alloc_nodes(struct adapt_precision **out, struct adapt_net *net,
                                              const int *node_unit, const unsigned char *round_in,
                                              const unsigned char *round_out,
                                              enum quant_rounding rounding, uint64_t seed)
{
    struct adapt_precision *p;
    enum adapt_status st = alloc_state(&p, net, rounding, seed);
    if (st) return st;
    for (int i = 0; i < net->nnodes; i++) {
        ADAPT_ASSERT(node_unit[i] >= -1 && node_unit[i] < net->nunits);
        p->node_unit[i] = node_unit[i];
        p->round_out[i] = node_unit[i] >= 0 && round_out[i];
        p->round_in[i] = node_unit[i] >= 0 && round_in[i];
    }
    if ((st = finish_state(p))) {
        adapt_precision_free(p);
        return st;
    }
    *out = p;
    return ADAPT_OK;
}

void adapt_precision_free(struct adapt_precision *p)
{
    if (!p) return;
    if (p->net && p->net->hook_ctx == p) {
        p->net->hook_ctx = NULL;
        p->net->in_hook = NULL;
        p->net->out_hook = NULL;
        p->net->dout_hook = NULL;
        p->net->grad_hook = NULL;
        for (int k = 0; k < p->nunits; k++) {
            struct adapt_layer *l = p->u[k].layer;
            for (int q = 0; q < l->nparam; q++) l->param[q].use = l->param[q].value.data;
        }
        for (int k = 0; p->acopy && k < p->net->nparam; k++)
            if (p->acopy[k]) p->net->param[k]->use = p->net->param[k]->value.data;
    }
    if (p->acopy)
        for (int k = 0; k < p->net->nparam; k++) free(p->acopy[k]);
    for (int k = 0; p->u && k < p->nunits; k++) free(p->u[k].role_qin);
    if (p->rstate)
        for (size_t i = 0; i < (size_t)ADAPT_ROLE_N * (size_t)p->net->nnodes; i++)
            free(p->rstate[i].hist);
    free(p->rstate);
    adapt_mx_gemm_free(p);
    adapt_precision_arith_free(p);
    free(p->roles);
    free(p->acopy);
    free(p->d_acopy); /* the arrays are the engine's */
    free(p->dev_counts);
    free(p->param_unit);
    free(p->act_unit);
    free(p->node_from);
    adapt_arena_free(&p->arena);
    free(p->round_in);
    free(p->round_out);
    free(p->node_unit);
    free(p->u);
    free(p);
}

/* 1 when parameter k is a unit's own weight or bias. */
static int own_param(const struct adapt_precision *p, int k)
{
    int u = p->param_unit[k];
    if (u < 0) return 0;
    const struct adapt_layer *l = p->u[u].layer;
    return p->net->param[k] >= &l->param[0] && p->net->param[k] < &l->param[l->nparam];
}

enum adapt_status adapt_precision_round_attached(struct adapt_precision *p)
{
    int np = p->net->nparam;
    if (!p->acopy && !(p->acopy = calloc((size_t)np + 1, sizeof *p->acopy)))
        return ADAPT_ERROR(ADAPT_ENOMEM, "cannot allocate rounded parameter copies");
    for (int k = 0; k < np; k++) {
        if (p->param_unit[k] < 0 || own_param(p, k) || p->acopy[k]) continue;
        p->acopy[k] = malloc(sizeof(float) * (p->net->param[k]->value.numel + 1));
        if (!p->acopy[k])
            return ADAPT_ERROR(ADAPT_ENOMEM, "cannot allocate rounded parameter copies");
    }
    p->round_attached = 1;
    return ADAPT_OK;
}

void adapt_precision_set(struct adapt_precision *p, int u, const struct quant_spec *spec)
{
    ADAPT_ASSERT(u >= 0 && u < p->nunits);
    adapt_precision_sync(p); /* the counts pending are of the formats before */
    p->u[u].spec = *spec;
    p->u[u].spec.rounding = p->rounding;
    p->u[u].spec.sr_bits = p->sr_bits;
    p->u[u].active = 1;
}

void adapt_precision_set_sr_bits(struct adapt_precision *p, int bits)
{
    ADAPT_ASSERT(bits == QUANT_SR_BITS_32 || bits == QUANT_SR_BITS_16);
    p->sr_bits = bits;
    for (int u = 0; u < p->nunits; u++) p->u[u].spec.sr_bits = bits;
    p->act_fixed.sr_bits = bits;
}

enum adapt_status adapt_precision_act_from(struct adapt_precision *p, int u, int from,
                                           const struct quant_spec *fixed)
{
    ADAPT_ASSERT(u >= 0 && u < p->nunits && from >= -1 && from < p->nunits);
    if (!p->act_unit) {
        if (!(p->act_unit = malloc(sizeof *p->act_unit * (size_t)p->nunits)))
            return ADAPT_ERROR(ADAPT_ENOMEM, "cannot allocate the activation format table");
        for (int k = 0; k < p->nunits; k++) p->act_unit[k] = k;
    }
    p->act_unit[u] = from;
    if (from < 0) {
        p->act_fixed = *fixed;
        p->act_fixed.rounding = p->rounding;
        p->act_fixed.sr_bits = p->sr_bits;
    }
    return ADAPT_OK;
}

enum adapt_status adapt_precision_node_from(struct adapt_precision *p, int node, int from)
{
    ADAPT_ASSERT(node >= 0 && node < p->net->nnodes && from >= 0 && from < p->nunits);
    ADAPT_ASSERT(!p->dev && p->net->nodes[node].in[0] > 0 &&
                 (p->node_unit[node] < 0 || p->u[p->node_unit[node]].node != node));
    if (!p->node_from) {
        if (!(p->node_from = malloc(sizeof *p->node_from * (size_t)p->net->nnodes)))
            return ADAPT_ERROR(ADAPT_ENOMEM, "cannot allocate the node format table");
        for (int k = 0; k < p->net->nnodes; k++) p->node_from[k] = -1;
    }
    p->node_from[node] = from;
    return ADAPT_OK;
}

void adapt_precision_set_float(struct adapt_precision *p, int u)
{
    ADAPT_ASSERT(u >= 0 && u < p->nunits);
    adapt_precision_sync(p); /* the counts pending are of the formats before */
    p->u[u].active = 0;
}

void adapt_precision_half_backward(struct adapt_precision *p)
{
    ADAPT_ASSERT(!p->dev && !p->per_image_input);
    p->half_backward = 1;
    p->net->grad_hook = grad_hook;
}

void adapt_precision_keep_logits_float(struct adapt_precision *p)
{
    p->round_out[p->net->nnodes - 1] = 0;
}

double adapt_precision_take_act_sat(struct adapt_precision *p, int u)
{
    ADAPT_ASSERT(u >= 0 && u < p->nunits);
    adapt_precision_sync(p);
    struct adapt_unit_prec *up = &p->u[u];
    double f = up->out_n ? (double)up->out_sat / (double)up->out_n : NAN;
    up->out_sat = up->out_n = 0;
    return f;
}

/* The array parameter k computes with: its master or its rounded copy, on the host or (with an
 * engine attached) on the device. */
static void use_param(struct adapt_precision *p, int k, float *copy)
{
    struct adapt_param *pp = p->net->param[k];
    if (p->dev)
        adapt_cuda_net_use(p->dev, k, copy);
    else
        pp->use = copy ? copy : pp->value.data;
}

/* Parameter k's master values and gradient where the step runs. */
static float *param_value(const struct adapt_precision *p, int k)
{
    return p->dev ? adapt_cuda_net_param(p->dev, k, ADAPT_CUDA_VALUE)
                  : p->net->param[k]->value.data;
}

static float *param_grad(const struct adapt_precision *p, int k)
{
    return p->dev ? adapt_cuda_net_param(p->dev, k, ADAPT_CUDA_GRAD) : p->net->param[k]->grad.data;
}

/* First failure of a device rounding (the hooks' callers cannot return one). */
static enum adapt_status note(struct adapt_precision *p, enum adapt_status st)
{
    if (st && !p->dev_st) p->dev_st = st;
    return st;
}

enum adapt_status adapt_precision_refresh_weights(struct adapt_precision *p, long step)
{
    /* on a device the weight slots hold the last rounding's counts until they are taken */
    enum adapt_status s =
        p->dev ? adapt_cuda_net_zero_counters(p->dev, SLOT_WEIGHT(0), p->nunits) : ADAPT_OK;
    struct gather g = {.k = 0};
    for (int k = 0; k < p->nunits && !s; k++) {
        struct adapt_unit_prec *u = &p->u[k];
        struct adapt_layer *l = u->layer;
        if (!u->active) {
            adapt_arith_set_grid(p, k, ADAPT_ROLE_WEIGHT, -1);
            for (int q = 0; q < l->nparam && q < 2; q++) use_param(p, u->param[q], NULL);
            u->sparsity = 0.0;
            u->sat = u->flush = 0;
            continue;
        }
        struct quant_stats st = {0, 0, 0};
        const struct adapt_param *w = &l->param[0];
        const size_t rows = (size_t)w->value.dim[0], cols = w->value.numel / rows;
        enum adapt_role_scaling sc;
        struct quant_spec *rs = u->rspec;
        if (role_spec(p, k, ADAPT_ROLE_MASTER, NULL, p->rounding, 1, &rs[ADAPT_ROLE_MASTER],
                      &sc)) { /* the masters themselves, rounded in place */
            for (int q = 0; q < l->nparam && q < 2 && !s; q++) {
                float *v = param_value(p, u->param[q]);
                size_t n = l->param[q].value.numel;
                struct quant_key mk = key_of(p, Q_MASTER, 2 * k + q, step);
                s = sc != ADAPT_SCALING_NONE
                        ? adapt_role_round_scaled(p, ADAPT_ROLE_MASTER, k, sc,
                                                  &rs[ADAPT_ROLE_MASTER], v, v, 1, n,
                                                  q ? 1 : rows, mk, NULL)
                        : gather(p, &g, &rs[ADAPT_ROLE_MASTER], v, v, q ? 1 : rows,
                                 q ? n : cols, mk, -1, NULL);
            }
            if (!s && p->dev) s = flush(p, &g); /* the copies below read the rounded masters */
            if (s) break;
        }
        float *wq = p->dev ? u->d_wq : u->wq;
        if (!role_spec(p, k, ADAPT_ROLE_WEIGHT, &u->spec, u->spec.rounding, 1,
                       &rs[ADAPT_ROLE_WEIGHT], &sc)) {
            use_param(p, u->param[0], NULL); /* the weight role is float32 */
            wq = NULL;
        } else if (sc != ADAPT_SCALING_NONE) {
            s = adapt_role_round_scaled(p, ADAPT_ROLE_WEIGHT, k, sc, &rs[ADAPT_ROLE_WEIGHT],
                                        param_value(p, u->param[0]), wq, rows, cols, rows,
                                        key_of(p, Q_WEIGHT, k, step), &st);
        } else if (p->mx_channels && !p->dev && l->mx_gemm && w->value.ndim == 4 &&
                   w->value.dim[2] * w->value.dim[3] > 1 &&
                   quant_format_is_mx(rs[ADAPT_ROLE_WEIGHT].format)) {
            /* roles.mx_axis = channels: a convolution's copy in blocks along Cin */
            s = adapt_mx_channels_weight(&rs[ADAPT_ROLE_WEIGHT], param_value(p, u->param[0]), wq,
                                         w->value.dim[0], w->value.dim[1],
                                         w->value.dim[2] * w->value.dim[3],
                                         key_of(p, Q_WEIGHT, k, step), &st);
        } else {
            s = gather(p, &g, &rs[ADAPT_ROLE_WEIGHT], param_value(p, u->param[0]), wq, rows,
                       cols, key_of(p, Q_WEIGHT, k, step), SLOT_WEIGHT(k), &st);
        }
        if (s) break;
        adapt_arith_set_grid(p, k, ADAPT_ROLE_WEIGHT,
                             wq ? adapt_arith_grid(&rs[ADAPT_ROLE_WEIGHT], sc) : -1);
        if (wq) use_param(p, u->param[0], wq);
        /* on a device: from its counters, when read (adapt_precision_sync), but a scaled
         * rounding's counts are on the host already (a replay's are the first rounding's) */
        if (!p->dev || (wq && sc != ADAPT_SCALING_NONE && !p->replay)) {
            u->sparsity = wq ? (double)st.zeros / (double)w->value.numel : 0.0;
            u->sat = st.saturated;
            u->flush = st.flushed;
        }
        if (u->bq) {
            float *bq = p->dev ? u->d_bq : u->bq;
            struct quant_key bk = key_of(p, Q_BIAS, k, step);
            size_t nb = l->param[1].value.numel;
            if (!role_spec(p, k, ADAPT_ROLE_BIAS, &u->spec, u->spec.rounding, 1,
                           &rs[ADAPT_ROLE_BIAS], &sc))
                bq = NULL;
            else if (sc != ADAPT_SCALING_NONE)
                s = adapt_role_round_scaled(p, ADAPT_ROLE_BIAS, k, sc, &rs[ADAPT_ROLE_BIAS],
                                            param_value(p, u->param[1]), bq, 1, nb, 1, bk,
                                            NULL);
            else
                s = gather(p, &g, &rs[ADAPT_ROLE_BIAS], param_value(p, u->param[1]), bq, 1, nb,
                           bk, -1, NULL);
            if (s) break;
            use_param(p, u->param[1], bq);
        }
    }
    for (int k = 0; p->round_attached && !s && k < p->net->nparam; k++) {
        float *copy = p->dev ? (p->d_acopy ? p->d_acopy[k] : NULL) : p->acopy[k];
        if (!copy) continue;
        const struct adapt_unit_prec *u = &p->u[p->param_unit[k]];
        if (!u->active) {
            use_param(p, k, NULL);
            continue;
        }
        s = gather(p, &g, &u->spec, param_value(p, k), copy, 1, p->net->param[k]->value.numel,
                   key_of(p, Q_ATTACHED, k, step), -1, NULL);
        if (!s) use_param(p, k, copy);
    }
    if (!s && p->dev) s = flush(p, &g);
    if (!s && p->dev) p->counts_pending = 1;
    return note(p, s);
}

enum adapt_status adapt_precision_refresh_again(struct adapt_precision *p, long step)
{
    p->replay = 1;
    enum adapt_status st = adapt_precision_refresh_weights(p, step);
    p->replay = 0;
    return st;
}

enum adapt_status adapt_precision_quantize_grads(struct adapt_precision *p, long step)
{
    enum adapt_status s = ADAPT_OK;
    struct gather g = {.k = 0};
    for (int k = 0; k < p->nunits && !s; k++) {
        struct adapt_unit_prec *u = &p->u[k];
        if (!u->active) continue;
        struct adapt_layer *l = u->layer;
        for (int q = 0; q < l->nparam && q < 2 && !s; q++) {
            struct adapt_param *pp = &l->param[q];
            enum adapt_role r = q ? ADAPT_ROLE_GRAD_BIAS : ADAPT_ROLE_GRAD_WEIGHT;
            enum adapt_role_scaling sc;
            if (!role_spec(p, k, r, &u->spec, u->spec.rounding, 1, &u->rspec[r], &sc)) continue;
            size_t rows = !q && quant_format_is_mx(u->rspec[r].format) /* MX: blocks as in */
                              ? (size_t)pp->grad.dim[0]                    /* the weights */
                              : 1;
            float *gr = param_grad(p, u->param[q]);
            struct quant_key key = key_of(p, q ? Q_GRAD_B : Q_GRAD_W, k, step);
            s = sc != ADAPT_SCALING_NONE
                    ? adapt_role_round_scaled(p, r, k, sc, &u->rspec[r], gr, gr, rows,
                                              pp->grad.numel / rows,
                                              q ? 1 : (size_t)pp->grad.dim[0], key, NULL)
                    : gather(p, &g, &u->rspec[r], gr, gr, rows, pp->grad.numel / rows, key, -1,
                             NULL);
        }
    }
    for (int k = 0; p->round_attached && !s && k < p->net->nparam; k++) {
        if (!p->acopy[k] || !p->u[p->param_unit[k]].active) continue;
        const struct quant_spec *sp = &p->u[p->param_unit[k]].spec;
        float *gr = param_grad(p, k);
        s = gather(p, &g, sp, gr, gr, 1, p->net->param[k]->grad.numel,
                   key_of(p, Q_GRAD_ATT, k, step), -1, NULL);
    }
    if (!s && p->dev) s = flush(p, &g);
    return note(p, s);
}

enum adapt_status adapt_precision_sync(struct adapt_precision *p)
{
    if (!p->dev || !p->counts_pending) return ADAPT_OK;
    p->counts_pending = 0;
    uint64_t *c = p->dev_counts;
    memset(c, 0, 3 * 2 * (size_t)p->nunits * sizeof *c);
    enum adapt_status st = adapt_cuda_net_take_counters(p->dev, c);
    for (int k = 0; !st && k < p->nunits; k++) {
        struct adapt_unit_prec *u = &p->u[k];
        const uint64_t *w = c + 3 * SLOT_WEIGHT(k), *o = c + 3 * SLOT_OUT(k);
        if (u->active && adapt_precision_role(p, k, ADAPT_ROLE_WEIGHT)->scaling ==
                             ADAPT_SCALING_NONE) { /* scaled: counted by refresh_weights */
            u->sat = w[0];
            u->flush = w[1];
            u->sparsity = (double)w[2] / (double)u->layer->param[0].value.numel;
        }
        u->out_sat += o[0];
    }
    return note(p, st);
}

enum adapt_status adapt_precision_use_cuda(struct adapt_precision *p, struct adapt_cuda_net *d)
{
    if (!d) {
        enum adapt_status st = adapt_precision_sync(p); /* the counts of the engine left */
        p->dev = NULL;
        return st;
    }
    const struct adapt_net *net = p->net;
    if (!p->dev_counts &&
        !(p->dev_counts = calloc(3 * 2 * (size_t)p->nunits + 1, sizeof *p->dev_counts)))
        return ADAPT_ERROR(ADAPT_ENOMEM, "cannot allocate the rounding counts");
    enum adapt_status st = adapt_cuda_net_counters(d, 2 * p->nunits);
    /* attached to this engine before: its earlier arrays go (an earlier engine's are that
     * engine's to free) */
    const int same = p->dev_arrays == adapt_cuda_net_id(d);
    for (int k = 0; k < p->nunits; k++) {
        struct adapt_unit_prec *u = &p->u[k];
        if (same) {
            adapt_cuda_net_release(d, u->d_wq), adapt_cuda_net_release(d, u->d_bq);
            adapt_cuda_net_release(d, u->d_qin);
        }
        u->d_wq = u->d_bq = u->d_qin = NULL;
    }
    for (int k = 0; same && p->d_acopy && k < p->net->nparam; k++)
        adapt_cuda_net_release(d, p->d_acopy[k]);
    p->dev_arrays = adapt_cuda_net_id(d);
    for (int k = 0; k < p->nunits && !st; k++) {
        struct adapt_unit_prec *u = &p->u[k];
        const struct adapt_layer *l = u->layer;
        if ((st = adapt_cuda_net_alloc(d, l->param[0].value.numel, &u->d_wq))) break;
        if (u->bq && (st = adapt_cuda_net_alloc(d, l->param[1].value.numel, &u->d_bq))) break;
        /* a rounded input: the policy's, or an input role's */
        const enum adapt_role_kind ik = adapt_precision_role(p, k, ADAPT_ROLE_INPUT)->kind;
        if ((u->qin || (ik != ADAPT_ROLE_AUTO && ik != ADAPT_ROLE_FLOAT)) &&
            (st = adapt_cuda_net_alloc(d, adapt_layer_in_numel(l, 0) * (size_t)net->n_max,
                                       &u->d_qin)))
            break;
    }
    if (!st && p->round_attached) {
        free(p->d_acopy); /* an earlier engine's table */
        if (!(p->d_acopy = calloc((size_t)net->nparam + 1, sizeof *p->d_acopy)))
            st = ADAPT_ERROR(ADAPT_ENOMEM, "cannot allocate rounded parameter copies");
        for (int k = 0; !st && k < net->nparam; k++)
            if (p->acopy[k])
                st = adapt_cuda_net_alloc(d, net->param[k]->value.numel, &p->d_acopy[k]);
    }
    if (st) return st;
    p->dev = d;
    p->dev_st = ADAPT_OK;
    struct adapt_cuda_hooks h = {p, in_hook_dev, out_hook_dev, dout_hook_dev,
                                 net->grad_hook ? grad_hook_dev : NULL};
    adapt_cuda_net_set_hooks(d, &h);
    return ADAPT_OK;
}
