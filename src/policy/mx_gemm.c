/* src/policy/mx_gemm.c: roles.mx_axis = gemm or channels on the precision state: the MX roles weight,
 * input and grad_output of conv2d and linear units are rounded by the layer itself, once per
 * GEMM that reads them, with blocks along that GEMM's reduction dimension (struct
 * adapt_mx_gemm in src/net/layer.h, src/net/layers/mx_gemm.c; doc/numerics.md, "Block
 * formats: OCP Microscaling (MX)"). The weight copy of the forward GEMM is the one
 * adapt_precision_refresh_weights makes (rows of W run along the forward reduction), so only
 * the input and the output gradient are left unrounded by the hooks. A role rounded per GEMM
 * is one whose resolved format (not auto) is an MX format. Under channels the weight copy is
 * the one adapt_mx_channels_weight makes for a convolution with a kernel wider than 1. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/policy/roles.h"

static int mx_role(const struct adapt_precision *p, int ui, enum adapt_role r, int training,
                   struct quant_spec *s)
{
    enum adapt_role_scaling sc;
    return adapt_precision_role_spec(p, ui, r, training, s, &sc) && quant_format_is_mx(s->format) &&
           sc == ADAPT_SCALING_NONE;
}

/* 1 when role r of unit u is fixed to an MX format by the configuration */
static int static_mx(const struct adapt_precision *p, int u, enum adapt_role r)
{
    const struct adapt_role_fmt *f = adapt_precision_role(p, u, r);
    return f->kind == ADAPT_ROLE_FORMAT && quant_format_is_mx(f->spec.format);
}

enum adapt_status adapt_mx_channels_weight(const struct quant_spec *s, const float *w, float *wq,
                                           int cout, int cin, int kk, struct quant_key key,
                                           struct quant_stats *st)
{
    /* each output channel's (Cin, k k) down its columns: tap t's Cin values */
    return quant_cols(s, w, wq, (size_t)cout, (size_t)cin, (size_t)kk, key, st);
}

enum adapt_status adapt_precision_set_mx_gemm(struct adapt_precision *p, const char *origin,
                                              int channels)
{
    static const enum adapt_role ops[3] = {ADAPT_ROLE_WEIGHT, ADAPT_ROLE_INPUT,
                                           ADAPT_ROLE_GRAD_OUTPUT};
    for (int u = 0; u < p->nunits; u++) {
        const struct adapt_layer *l = p->u[u].layer;
        for (int k = 0; k < 3; k++)
            if (!l->mx_gemm && static_mx(p, u, ops[k]))
                return ADAPT_ERROR(ADAPT_EINVAL,
                                   "%s: roles.mx_axis = %s: unit %s is a grouped or dilated "
                                   "convolution (groups %d, dilation %d), whose GEMMs are not "
                                   "rounded per reduction dimension; expected roles.mx_axis = "
                                   "rows, or a format that is not MX for its %s role "
                                   "(roles.units)",
                                   origin, channels ? "channels" : "gemm", l->name, l->groups,
                                   l->dilation, adapt_role_names[ops[k]]);
    }
    p->mx_channels = channels;
    if (p->mxg) return ADAPT_OK;
    struct adapt_mx_scratch *s = calloc(1, sizeof *s);
    if (!s || !(p->mxg = calloc((size_t)p->nunits + 1, sizeof *p->mxg))) {
        free(s);
        return ADAPT_ERROR(ADAPT_ENOMEM, "cannot allocate the MX GEMM operands");
    }
    for (int u = 0; u <= p->nunits; u++) p->mxg[u].scratch = s; /* the units run one at a time */
    return ADAPT_OK;
}

int adapt_mx_gemm_input(struct adapt_precision *p, int node, int training, int backward)
{
    if (!p->mxg) return 0;
    int ui = p->node_unit[node];
    if (ui < 0 || p->u[ui].node != node) return 0;
    struct adapt_layer *l = p->u[ui].layer;
    if (!backward) {
        struct adapt_mx_gemm *m = &p->mxg[ui];
        m->w = m->x = m->dy = 0; /* the scratch stays */
        m->channels = p->mx_channels;
        if (l->mx_gemm && !p->dev) {
            m->w = mx_role(p, ui, ADAPT_ROLE_WEIGHT, 1, &m->ws);
            m->x = mx_role(p, ui, ADAPT_ROLE_INPUT, training, &m->xs);
            m->dy = mx_role(p, ui, ADAPT_ROLE_GRAD_OUTPUT, 1, &m->dys);
        }
        for (int c = 0; c < ADAPT_MX_COPIES; c++)
            m->key[c] = adapt_precision_mx_key(p, c, ui, p->iter);
        l->mx = m->w || m->x || m->dy ? m : NULL;
    }
    return l->mx && l->mx->x;
}

int adapt_mx_gemm_takes_dy(const struct adapt_precision *p, int node)
{
    if (!p->mxg) return 0;
    int ui = p->node_unit[node];
    if (ui < 0 || p->u[ui].node != node) return 0;
    const struct adapt_layer *l = p->u[ui].layer;
    return l->mx && l->mx->dy;
}

void adapt_mx_gemm_free(struct adapt_precision *p)
{
    if (!p->mxg) return;
    for (int u = 0; u < p->nunits; u++)
        if (p->u[u].layer->mx == &p->mxg[u]) p->u[u].layer->mx = NULL;
    free(p->mxg[0].scratch->buf);
    free(p->mxg[0].scratch);
    free(p->mxg);
    p->mxg = NULL;
}
