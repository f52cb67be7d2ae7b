/* src/policy/arith.c: arithmetic.accumulator on the precision state: each unit's accumulator
 * model, set on its layer (struct adapt_arith in src/net/layer.h, computed by
 * src/net/layers/arith_gemm.c), and the fixed-point grids of its GEMM operands, which the hooks
 * of precision.c record as they round them: the weight copy at each refresh, the input before
 * each forward, the output gradient before each backward (-1 where a tensor is not rounded onto
 * a fixed-point grid: float32, a float format, a scaled role, a block format). */
#include <stdlib.h>
#include <string.h>

#include "src/policy/roles.h"

enum adapt_status adapt_precision_set_arith(struct adapt_precision *p, const struct quant_acc *acc,
                                            int *skipped)
{
    if (skipped) *skipped = 0;
    if (p->arith) return ADAPT_ERROR(ADAPT_EINVAL, "the accumulator models are set already");
    int any = 0;
    for (int u = 0; u < p->nunits; u++) {
        enum adapt_status st = quant_acc_check(&acc[u]);
        if (st) return st;
        any |= acc[u].kind != QUANT_ACC_FLOAT32;
    }
    if (!any) return ADAPT_OK;
    struct adapt_mx_scratch *s = calloc(1, sizeof *s);
    if (!s || !(p->arith = calloc((size_t)p->nunits, sizeof *p->arith))) {
        free(s);
        return ADAPT_ERROR(ADAPT_ENOMEM, "cannot allocate the accumulator models");
    }
    for (int u = 0; u < p->nunits; u++) {
        struct adapt_arith *a = &p->arith[u];
        struct adapt_layer *l = p->u[u].layer;
        a->acc = acc[u];
        a->fl_w = a->fl_x = a->fl_dy = -1;
        a->scratch = s; /* the units run one at a time */
        if (acc[u].kind == QUANT_ACC_FLOAT32) continue;
        if (!l->mx_gemm) { /* no explicit GEMMs: float32 */
            a->acc.kind = QUANT_ACC_FLOAT32;
            if (skipped) (*skipped)++;
            continue;
        }
        l->arith = a;
    }
    return ADAPT_OK;
}

void adapt_precision_arith_free(struct adapt_precision *p)
{
    if (!p->arith) return;
    for (int u = 0; u < p->nunits; u++)
        if (p->u[u].layer->arith == &p->arith[u]) p->u[u].layer->arith = NULL;
    free(p->arith[0].scratch->buf);
    free(p->arith[0].scratch);
    free(p->arith);
    p->arith = NULL;
}

int adapt_arith_grid(const struct quant_spec *s, enum adapt_role_scaling sc)
{
    return s->format == QUANT_FORMAT_FIXED && sc == ADAPT_SCALING_NONE ? s->fl : -1;
}

void adapt_arith_set_grid(struct adapt_precision *p, int ui, enum adapt_role r, int fl)
{
    if (!p->arith || ui < 0) return;
    struct adapt_arith *a = &p->arith[ui];
    if (r == ADAPT_ROLE_WEIGHT) a->fl_w = fl;
    if (r == ADAPT_ROLE_INPUT) a->fl_x = fl;
    if (r == ADAPT_ROLE_GRAD_OUTPUT) a->fl_dy = fl;
}

const struct quant_acc *adapt_precision_arith(const struct adapt_precision *p, int u,
                                              int gemm_on[3])
{
    if (!p->arith || p->u[u].layer->arith != &p->arith[u]) return NULL;
    const struct adapt_arith *a = &p->arith[u];
    const struct adapt_unit_prec *up = &p->u[u];
    const int node = up->node;
    int fl[3] = {-1, -1, -1}; /* weight, input, grad_output */
    struct quant_spec s;
    enum adapt_role_scaling sc;
    if (adapt_precision_role_spec_auto(p, u, ADAPT_ROLE_WEIGHT, &s, &sc))
        fl[0] = adapt_arith_grid(&s, sc);
    if (adapt_precision_role_spec_auto(p, u, ADAPT_ROLE_INPUT, &s, &sc))
        fl[1] = adapt_arith_grid(&s, sc);
    if (adapt_precision_role_spec_auto(p, u, ADAPT_ROLE_GRAD_OUTPUT, &s, &sc))
        fl[2] = adapt_arith_grid(&s, sc);
    (void)node;
    const int fl_of[3][2] = {{1, 0}, {0, 2}, {2, 1}}; /* forward, input grad, weight grad */
    for (int g = 0; g < 3; g++)
        gemm_on[g] =
            a->acc.kind == QUANT_ACC_FLOAT || (fl[fl_of[g][0]] >= 0 && fl[fl_of[g][1]] >= 0);
    return &a->acc;
}
