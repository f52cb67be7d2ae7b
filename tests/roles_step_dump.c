/* tests/roles_step_dump.c: forward, loss and backward of a model under a [roles] recipe on the
 * CPU engine, written to a safetensors file for python/tests/test_roles_reference.py, which
 * recomputes the same passes in float64 PyTorch from the formats' specifications (OCP FP8,
 * OCP MX v1.0, Transformer Engine's delayed scaling) and compares.
 *
 *   tests/roles_step_dump MODEL BATCH SEED PASSES OUT [SECTION.KEY=VALUE]...
 *
 * The model is built with 10 classes and initialised with SEED (gain 2); the batch (inputs
 * uniform in [-1, 2), LeNet-5's 28x28 images centred in its 32x32 input with a zero border as
 * the Fashion-MNIST loader pads them; labels uniform) comes from SEED too. The policy is
 * `fixed` under the given assignments (e.g. roles.recipe=fp8_hybrid_delayed). PASSES forward
 * and backward passes run on the same batch and master weights, as the trainer takes them
 * (iteration p - 1, the policy's observe, which rounds the parameter gradients) with the weight
 * copies made again between them (as the policy's step does after its update; no update here),
 * so the second pass rounds with the scales delayed scaling took from the first.
 *
 * OUT holds: input (N, C, H, W), labels (I32, N), param.NAME (every parameter and buffer before
 * the passes), and per pass P (1-based): passP.loss (F64), passP.logits, passP.grad.NAME (each
 * trainable parameter's gradient as the policy's observe leaves it) and passP.amax,
 * passP.scale, passP.next_scale (F32, units x 3: the weight, input and grad_output roles'
 * last amax, the scale their last rounding used, and the scale the next rounding will use;
 * 0 where the role is not scaled). With ROLES_DUMP_ACTS set in the environment also
 * passP.act.A and passP.dact.A (N, values per sample) for every activation A >= 1 (the output
 * of node A - 1) and its error gradient after the backward (a unit's output's as its
 * grad_output role rounded it). Metadata: model, units (the unit layer names, comma
 * separated), nodes (each unit's node index). Exit 1 on any error. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/rng.h"
#include "src/base/safetensors.h"
#include "src/config/config.h"
#include "src/net/net.h"
#include "src/policy/policy.h"
#include "src/policy/precision.h"

static int die(const char *what)
{
    fprintf(stderr, "roles_step_dump: %s: %s\n", what, adapt_error_message());
    return 1;
}

#define MAXT 2048

int main(int argc, char **argv)
{
    if (argc < 6) {
        fprintf(stderr, "usage: roles_step_dump MODEL BATCH SEED PASSES OUT "
                        "[SECTION.KEY=VALUE]...\n");
        return 2;
    }
    const char *model = argv[1], *out = argv[5];
    const int n = atoi(argv[2]), passes = atoi(argv[4]);
    const uint64_t seed = strtoull(argv[3], NULL, 0);
    if (n < 1 || passes < 1 || passes > 9) {
        fprintf(stderr, "roles_step_dump: BATCH >= 1 and 1 <= PASSES <= 9\n");
        return 2;
    }
    struct adapt_config cfg;
    adapt_config_init(&cfg);
    if (adapt_config_set(&cfg, "policy.name=fixed")) return die("policy.name=fixed");
    for (int a = 6; a < argc; a++)
        if (adapt_config_set(&cfg, argv[a])) return die(argv[a]);
    if (adapt_config_check(&cfg)) return die("configuration");

    struct adapt_net *net = adapt_model_build(model, 10);
    if (!net) return die(model);
    if (adapt_net_finalize(net, n)) return die("finalize");
    adapt_net_init_params(net, seed, 2.0);
    struct adapt_policy *pol;
    if (adapt_policy_alloc(&pol, &cfg, net, seed)) return die("policy");
    struct adapt_precision *prec = pol->prec;
    if (!prec) {
        fprintf(stderr, "roles_step_dump: the policy keeps no precision state\n");
        return 1;
    }

    /* the batch */
    const int C = net->in_chw[0], H = net->in_chw[1], W = net->in_chw[2];
    const size_t per = (size_t)C * H * W;
    float *x = calloc(per * (size_t)n, sizeof *x);
    int32_t *y = calloc((size_t)n, sizeof *y);
    float *dl = calloc((size_t)n * 10, sizeof *dl);
    if (!x || !y || !dl) return 1;
    const int border = !strcmp(model, "lenet5") ? 2 : 0; /* 28x28 in 32x32 */
    struct adapt_rng r;
    adapt_rng_init(&r, seed, 77);
    for (int i = 0; i < n; i++)
        for (int c = 0; c < C; c++)
            for (int h = border; h < H - border; h++)
                for (int w = border; w < W - border; w++)
                    x[(size_t)i * per + ((size_t)c * H + h) * W + w] =
                        (float)(3.0 * adapt_rng_uniform(&r) - 1.0);
    int labels[1024];
    if (n > 1024) return 2;
    for (int i = 0; i < n; i++) labels[i] = (int)adapt_rng_below(&r, 10), y[i] = labels[i];

    static struct adapt_safetensors_tensor t[MAXT];
    static char names[MAXT][96];
    int nt = 0;
#define ADD(NAME, DT, ND, DATA, ...)                                                              \
    do {                                                                                          \
        if (nt == MAXT) return 1;                                                                 \
        snprintf(names[nt], sizeof names[nt], "%s", NAME);                                        \
        t[nt] = (struct adapt_safetensors_tensor){names[nt], DT, ND, __VA_ARGS__, DATA};          \
        nt++;                                                                                     \
    } while (0)
    ADD("input", ADAPT_ST_F32, 4, x, {n, C, H, W});
    ADD("labels", ADAPT_ST_I32, 1, y, {n});
    for (int k = 0; k < net->nparam; k++) {
        const struct adapt_param *pp = net->param[k];
        char nm[96];
        snprintf(nm, sizeof nm, "param.%s", pp->name);
        float *copy = malloc(pp->value.numel * sizeof *copy);
        if (!copy) return 1;
        memcpy(copy, pp->value.data, pp->value.numel * sizeof *copy);
        struct adapt_safetensors_tensor e = {NULL, ADAPT_ST_F32, pp->value.ndim, {0}, copy};
        for (int d = 0; d < pp->value.ndim; d++) e.shape[d] = pp->value.dim[d];
        ADD(nm, ADAPT_ST_F32, e.ndim, copy, {0});
        memcpy(t[nt - 1].shape, e.shape, sizeof e.shape);
    }

    static double loss[10];
    const int nu = net->nunits;
    static const enum adapt_role roles[3] = {ADAPT_ROLE_WEIGHT, ADAPT_ROLE_INPUT,
                                             ADAPT_ROLE_GRAD_OUTPUT};
    /* the weight copies before the first step, as the trainer makes them */
    if (adapt_precision_refresh_weights(prec, 0)) return die("weight copies");
    for (int ps = 1; ps <= passes; ps++) {
        if (ps > 1 && adapt_precision_refresh_weights(prec, ps - 1)) return die("weight copies");
        prec->iter = ps - 1;
        net->rng_iter = ps - 1;
        adapt_net_zero_grad(net);
        const float *lg = adapt_net_forward(net, x, n, 1);
        loss[ps] = adapt_softmax_xent(lg, labels, n, 10, dl, NULL);
        float *logits = malloc((size_t)n * 10 * sizeof *logits);
        if (!logits) return 1;
        memcpy(logits, lg, (size_t)n * 10 * sizeof *logits);
        for (int i = 0; i < n * 10; i++) dl[i] *= (float)pol->loss_scale;
        adapt_net_backward(net, dl, n);
        pol->type->observe(pol, ps, loss[ps], 1); /* fixed: the parameter-gradient roles */
        char nm[96];
        snprintf(nm, sizeof nm, "pass%d.loss", ps);
        ADD(nm, ADAPT_ST_F64, 0, &loss[ps], {0});
        snprintf(nm, sizeof nm, "pass%d.logits", ps);
        ADD(nm, ADAPT_ST_F32, 2, logits, {n, 10});
        for (int a = 1; getenv("ROLES_DUMP_ACTS") && a < net->nact; a++) {
            float *v = malloc(net->act_numel[a] * (size_t)n * sizeof *v);
            if (!v) return 1;
            memcpy(v, net->act[a], net->act_numel[a] * (size_t)n * sizeof *v);
            snprintf(nm, sizeof nm, "pass%d.act.%d", ps, a);
            ADD(nm, ADAPT_ST_F32, 2, v, {n, (int64_t)net->act_numel[a]});
            if (!(v = malloc(net->act_numel[a] * (size_t)n * sizeof *v))) return 1;
            memcpy(v, net->dact[a], net->act_numel[a] * (size_t)n * sizeof *v);
            snprintf(nm, sizeof nm, "pass%d.dact.%d", ps, a);
            ADD(nm, ADAPT_ST_F32, 2, v, {n, (int64_t)net->act_numel[a]});
        }
        for (int k = 0; k < net->nparam; k++) {
            const struct adapt_param *pp = net->param[k];
            if (!pp->grad.data) continue;
            float *g = malloc(pp->grad.numel * sizeof *g);
            if (!g) return 1;
            memcpy(g, pp->grad.data, pp->grad.numel * sizeof *g);
            snprintf(nm, sizeof nm, "pass%d.grad.%s", ps, pp->name);
            ADD(nm, ADAPT_ST_F32, 1, g, {(int64_t)pp->grad.numel});
            t[nt - 1].ndim = pp->grad.ndim;
            for (int d = 0; d < pp->grad.ndim; d++) t[nt - 1].shape[d] = pp->grad.dim[d];
        }
        float *sc[3];
        for (int q = 0; q < 3; q++)
            if (!(sc[q] = calloc((size_t)nu * 3, sizeof(float)))) return 1;
        for (int u = 0; u < nu; u++)
            for (int q = 0; q < 3; q++) {
                int id = roles[q] == ADAPT_ROLE_GRAD_OUTPUT ? net->unit_node[u] : u;
                const struct adapt_role_state *rs = adapt_precision_role_state(prec, roles[q], id);
                if (!rs || !rs->n ||
                    adapt_precision_role(prec, u, roles[q])->scaling == ADAPT_SCALING_NONE)
                    continue;
                sc[0][u * 3 + q] = rs->amax;
                sc[1][u * 3 + q] = rs->last_scale;
                sc[2][u * 3 + q] = rs->scale;
            }
        static const char *const what[3] = {"amax", "scale", "next_scale"};
        for (int q = 0; q < 3; q++) {
            snprintf(nm, sizeof nm, "pass%d.%s", ps, what[q]);
            ADD(nm, ADAPT_ST_F32, 2, sc[q], {nu, 3});
        }
    }

    char units[4096] = "", nodes[1024] = "";
    for (int u = 0; u < nu; u++) {
        const struct adapt_layer *l = net->nodes[net->unit_node[u]].layer;
        size_t a = strlen(units), b = strlen(nodes);
        snprintf(units + a, sizeof units - a, "%s%s", u ? "," : "", l->name);
        snprintf(nodes + b, sizeof nodes - b, "%s%d", u ? "," : "", net->unit_node[u]);
    }
    struct adapt_safetensors_meta meta[3] = {{"model", model}, {"units", units}, {"nodes", nodes}};
    if (adapt_safetensors_write(out, t, nt, meta, 3)) return die(out);
    adapt_policy_free(pol);
    adapt_net_free(net);
    free(x), free(y), free(dl);
    return 0;
}
