/* tests/test_roles.c: tensor roles and their scaling (src/config/roles.c, src/policy/roles.c,
 * the role paths of src/policy/precision.c). Expected values are worked out by hand in the
 * comment above each test from doc/numerics.md ("Tensor roles and scaling"): a scaled rounding
 * is y = Q(x s) * (1/s), s = (largest finite / amax) / 2^margin; delayed scaling takes s from
 * the amax history of the earlier tensors (Transformer Engine's DelayedScaling), starting at 1. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "src/config/config.h"
#include "src/net/net.h"
#include "src/policy/precision.h"
#include "src/policy/roles.h"
#include "tests/testutil_net.h"

static struct adapt_role_fmt role_of(const char *set, enum adapt_role r)
{
    struct adapt_config cfg;
    adapt_config_init(&cfg);
    ck_assert_int_eq(adapt_config_set(&cfg, "policy.name=fixed"), ADAPT_OK);
    if (set) ck_assert_msg(adapt_config_set(&cfg, set) == ADAPT_OK, "%s", adapt_error_message());
    struct adapt_role_fmt f;
    ck_assert_msg(adapt_config_role(&cfg, r, &f) == ADAPT_OK, "%s", adapt_error_message());
    return f;
}

/* The role grammar: a format, then a rounding and a scaling in either order; auto, unit and
 * float32; the recipes fill the roles they name and leave the others float32; a role key
 * overrides its recipe. */
START_TEST(test_role_texts)
{
    char buf[128];
    struct adapt_role_fmt f = role_of("roles.weight=fixed(4,2) current stochastic",
                                      ADAPT_ROLE_WEIGHT);
    ck_assert_int_eq(f.kind, ADAPT_ROLE_FORMAT);
    ck_assert_int_eq(f.spec.wl, 4);
    ck_assert_int_eq(f.spec.fl, 2);
    ck_assert_int_eq(f.rounding, QUANT_ROUND_STOCHASTIC);
    ck_assert_int_eq(f.scaling, ADAPT_SCALING_CURRENT);
    ck_assert_str_eq(adapt_role_fmt_str(&f, buf, sizeof buf), "fixed(4,2) stochastic current");
    f = role_of("roles.input=e4m3 rowwise", ADAPT_ROLE_INPUT);
    ck_assert_int_eq(f.scaling, ADAPT_SCALING_ROWWISE);
    ck_assert_str_eq(adapt_role_fmt_str(&f, buf, sizeof buf), "e4m3 rowwise");
    f = role_of(NULL, ADAPT_ROLE_GRAD_INPUT);
    ck_assert_int_eq(f.kind, ADAPT_ROLE_AUTO);
    f = role_of("roles.output=unit nearest", ADAPT_ROLE_OUTPUT);
    ck_assert_int_eq(f.kind, ADAPT_ROLE_UNIT);
    ck_assert_int_eq(f.rounding, QUANT_ROUND_NEAREST);
    f = role_of("roles.recipe=fp8_hybrid_delayed", ADAPT_ROLE_WEIGHT);
    ck_assert_str_eq(adapt_role_fmt_str(&f, buf, sizeof buf), "e4m3 nearest delayed");
    f = role_of("roles.recipe=fp8_hybrid_delayed", ADAPT_ROLE_GRAD_OUTPUT);
    ck_assert_str_eq(adapt_role_fmt_str(&f, buf, sizeof buf), "float(5,2) nearest delayed");
    f = role_of("roles.recipe=fp8_hybrid_delayed", ADAPT_ROLE_OUTPUT);
    ck_assert_int_eq(f.kind, ADAPT_ROLE_FLOAT);
    f = role_of("roles.recipe=bf16_sr_master", ADAPT_ROLE_MASTER);
    ck_assert_str_eq(adapt_role_fmt_str(&f, buf, sizeof buf), "bf16 stochastic");

    struct adapt_config cfg;
    adapt_config_init(&cfg);
    ck_assert_int_eq(adapt_config_set(&cfg, "policy.name=fixed"), ADAPT_OK);
    ck_assert_int_eq(adapt_config_set(&cfg, "roles.recipe=fp8_current"), ADAPT_OK);
    ck_assert_int_eq(adapt_config_set(&cfg, "roles.grad_output=e5m2 stochastic"), ADAPT_OK);
    ck_assert_int_eq(adapt_config_role(&cfg, ADAPT_ROLE_GRAD_OUTPUT, &f), ADAPT_OK);
    ck_assert_str_eq(adapt_role_fmt_str(&f, buf, sizeof buf), "e5m2 stochastic");
    ck_assert_int_eq(adapt_config_check(&cfg), ADAPT_OK);
}
END_TEST

/* Each assignment of bad (under policy fixed) is refused by adapt_config_check with a message
 * holding its text. */
struct refusal {
    const char *set, *msg;
};
static void expect_refused(const struct refusal *bad, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        struct adapt_config cfg;
        adapt_config_init(&cfg);
        ck_assert_int_eq(adapt_config_set(&cfg, "policy.name=fixed"), ADAPT_OK);
        ck_assert_int_eq(adapt_config_set(&cfg, bad[i].set), ADAPT_OK);
        ck_assert_int_eq(adapt_config_check(&cfg), ADAPT_EINVAL);
        ck_assert_msg(strstr(adapt_error_message(), bad[i].msg), "%s: %s", bad[i].set,
                      adapt_error_message());
        ck_assert_msg(strstr(adapt_error_message(), "--set roles."), "%s", adapt_error_message());
    }
}

/* What is refused, each naming the key and what was expected. */
START_TEST(test_role_errors)
{
    static const struct refusal bad[] = {
        {"roles.weight=e4m3 nearst", "roles.weight = \"e4m3 nearst\": unknown word 'nearst'"},
        {"roles.input=mxfp8_e4m3 delayed", "mxfp8_e4m3 carries its own scales"},
        {"roles.bias=float32 nearest", "float32 takes no rounding or scaling"},
        {"roles.master=e4m3 nearest stochastic", "two roundings"},
        {"roles.output=int8", "'int8': "},
    };
    expect_refused(bad, sizeof bad / sizeof bad[0]);
    struct adapt_config cfg;
    adapt_config_init(&cfg); /* policy fp32 by default */
    ck_assert_int_eq(adapt_config_set(&cfg, "roles.recipe=w4a8"), ADAPT_OK);
    ck_assert_int_eq(adapt_config_check(&cfg), ADAPT_EINVAL);
    ck_assert_ptr_nonnull(strstr(adapt_error_message(), "policy.name = fp32 with [roles] set"));
}
END_TEST

/* Scales: e4m3's largest finite value is 448; amax 3.5 gives 128 exactly; amax 3 gives
 * 149.33, or 128 as a power of two; margin 1 halves it; amax 0, inf and NaN give none (0).
 * Largest finite values: e4m3 448, float(5,2) 57344, fixed(4,0) 7, fixed(8,4) 127/16. */
START_TEST(test_scale_for)
{
    struct adapt_precision p;
    memset(&p, 0, sizeof p);
    struct quant_spec s;
    ck_assert_int_eq(quant_spec_parse("e4m3", &s), ADAPT_OK);
    ck_assert_float_eq(adapt_role_format_max(&s), 448.0f);
    ck_assert_int_eq(quant_spec_parse("e5m2", &s), ADAPT_OK); /* overflow inf: still 57344 */
    ck_assert_float_eq(adapt_role_format_max(&s), 57344.0f);
    ck_assert_int_eq(quant_spec_parse("fixed(4,0)", &s), ADAPT_OK);
    ck_assert_float_eq(adapt_role_format_max(&s), 7.0f);
    ck_assert_int_eq(quant_spec_parse("fixed(8,4)", &s), ADAPT_OK);
    ck_assert_float_eq(adapt_role_format_max(&s), 127.0f / 16.0f);
    ck_assert_float_eq(adapt_role_scale_for(&p, 448.0f, 3.5f), 128.0f);
    ck_assert_float_eq(adapt_role_scale_for(&p, 448.0f, 3.0f), 448.0f / 3.0f);
    p.scale_pow2 = 1;
    ck_assert_float_eq(adapt_role_scale_for(&p, 448.0f, 3.0f), 128.0f);
    p.margin = 1;
    ck_assert_float_eq(adapt_role_scale_for(&p, 448.0f, 3.0f), 64.0f);
    ck_assert_float_eq(adapt_role_scale_for(&p, 448.0f, 0.0f), 0.0f);
    ck_assert_float_eq(adapt_role_scale_for(&p, 448.0f, INFINITY), 0.0f);
    ck_assert_float_eq(adapt_role_scale_for(&p, 448.0f, NAN), 0.0f);
}
END_TEST

static struct adapt_precision *fixed16(struct adapt_net *net, const char *const set[ADAPT_ROLE_N],
                                       const struct adapt_roles_opts *o)
{
    struct adapt_precision *p;
    ck_assert_int_eq(adapt_precision_alloc(&p, net, 1, ADAPT_QOUT_ALL, QUANT_ROUND_NEAREST, 7),
                     ADAPT_OK);
    struct quant_spec s;
    ck_assert_int_eq(quant_spec_parse("fixed(16,8)", &s), ADAPT_OK);
    for (int u = 0; u < p->nunits; u++) adapt_precision_set(p, u, &s);
    struct adapt_role_fmt roles[ADAPT_ROLE_N];
    struct adapt_config cfg;
    adapt_config_init(&cfg);
    ck_assert_int_eq(adapt_config_set(&cfg, "policy.name=fixed"), ADAPT_OK);
    for (int r = 0; r < ADAPT_ROLE_N; r++) {
        if (set && set[r]) {
            char a[300];
            snprintf(a, sizeof a, "roles.%s=%s", adapt_role_names[r], set[r]);
            ck_assert_int_eq(adapt_config_set(&cfg, a), ADAPT_OK);
        }
        ck_assert_int_eq(adapt_config_role(&cfg, (enum adapt_role)r, &roles[r]), ADAPT_OK);
    }
    struct adapt_roles_opts d = {16, 0, 0, 0};
    ck_assert_int_eq(adapt_precision_set_roles(p, roles, o ? o : &d), ADAPT_OK);
    return p;
}

static int on_grid(const float *v, size_t n, float step, float lo, float hi)
{
    for (size_t i = 0; i < n; i++)
        if (v[i] / step != nearbyintf(v[i] / step) || v[i] < lo || v[i] > hi) return 0;
    return 1;
}

/* Units in <16,8>, the weight role fixed(4,2): every weight copy on the grid k/4 in
 * [-2, 1.75] while the biases stay on <16,8>'s 1/256 grid (auto); the output role float32
 * leaves conv 0's output (activation 1) off the 1/256 grid; the error-gradient roles put the
 * gradient unit 1 (node 3) receives (activation 4) and the one it sends back (activation 3)
 * on <8,4>'s and <6,2>'s grids after a backward. */
START_TEST(test_roles_apply)
{
    struct adapt_net *net = small_lenet(2);
    const char *set[ADAPT_ROLE_N] = {0};
    set[ADAPT_ROLE_WEIGHT] = "fixed(4,2)";
    set[ADAPT_ROLE_OUTPUT] = "float32";
    set[ADAPT_ROLE_GRAD_OUTPUT] = "fixed(8,4) nearest";
    set[ADAPT_ROLE_GRAD_INPUT] = "fixed(6,2) nearest";
    struct adapt_precision *p = fixed16(net, set, NULL);
    ck_assert_int_eq(adapt_precision_refresh_weights(p, 1), ADAPT_OK);
    for (int u = 0; u < p->nunits; u++) {
        const struct adapt_layer *l = p->u[u].layer;
        ck_assert(on_grid(l->param[0].use, l->param[0].value.numel, 0.25f, -2.0f, 1.75f));
        ck_assert(on_grid(l->param[1].use, l->param[1].value.numel, 1.0f / 256, -128, 128));
    }
    float x[2 * 32 * 32];
    for (int i = 0; i < 2 * 32 * 32; i++) x[i] = (float)sin(0.37 * i) * 2.385f;
    adapt_net_forward(net, x, 2, 1);
    ck_assert(!on_grid(net->act[1], net->act_numel[1] * 2, 1.0f / 256, -128, 128));
    float dl[2 * 10];
    for (int i = 0; i < 20; i++) dl[i] = (float)cos(0.7 * i) * 0.3f;
    adapt_net_zero_grad(net);
    adapt_net_backward(net, dl, 2);
    ck_assert_int_eq(net->nodes[3].in[0], 3);
    ck_assert(on_grid(net->dact[4], net->act_numel[4] * 2, 1.0f / 16, -8, 8));
    ck_assert(on_grid(net->dact[3], net->act_numel[3] * 2, 0.25f, -8, 8));
    adapt_precision_free(p);
    adapt_net_free(net);
}
END_TEST

/* Error gradients under roles, at LeNet-5's average pool 2 (unit 0's group), which sends back
 * activation 2's gradient, and at conv 3 (unit 1), which sends back activation 3's:
 *   0: no roles, the backward hook on (as a grad_input role of another unit puts it): nothing
 *      rounded, as the fixed policy rounds no error gradient;
 *   1: grad_input float32 (as every recipe has it): nothing rounded;
 *   2: grad_input fixed(8,4) nearest: both on its 1/16 grid;
 *   3: MuPPET's rule (ADAPT_QOUT_UNITS_POOLS), no roles: both on <16,8>'s 1/256 grid. */
START_TEST(test_roles_pool_grad)
{
    for (int c = 0; c < 4; c++) {
        struct adapt_net *net = small_lenet(2);
        const char *set[ADAPT_ROLE_N] = {0};
        set[ADAPT_ROLE_GRAD_INPUT] = c == 1 ? "float32" : "fixed(8,4) nearest";
        struct adapt_precision *p;
        if (c < 3) {
            p = fixed16(net, c ? set : NULL, NULL);
        } else {
            ck_assert_int_eq(adapt_precision_alloc(&p, net, 1, ADAPT_QOUT_UNITS_POOLS,
                                                   QUANT_ROUND_NEAREST, 7),
                             ADAPT_OK);
            struct quant_spec s;
            ck_assert_int_eq(quant_spec_parse("fixed(16,8)", &s), ADAPT_OK);
            for (int u = 0; u < p->nunits; u++) adapt_precision_set(p, u, &s);
        }
        if (!c) adapt_precision_install_grad_hook(p);
        ck_assert_int_eq(adapt_precision_refresh_weights(p, 1), ADAPT_OK);
        float x[2 * 32 * 32];
        for (int i = 0; i < 2 * 32 * 32; i++) x[i] = (float)sin(0.37 * i) * 2.385f;
        adapt_net_forward(net, x, 2, 1);
        float dl[2 * 10];
        for (int i = 0; i < 20; i++) dl[i] = (float)cos(0.7 * i) * 0.3f;
        adapt_net_zero_grad(net);
        adapt_net_backward(net, dl, 2);
        ck_assert_str_eq(net->nodes[2].layer->ops->kind, "avgpool2d");
        ck_assert_int_eq(net->nodes[2].in[0], 2);
        ck_assert_int_eq(net->nodes[3].in[0], 3);
        for (int a = 2; a <= 3; a++) {
            const size_t m = net->act_numel[a] * 2;
            ck_assert_msg(on_grid(net->dact[a], m, 1.0f / 256, -128, 128) == (c >= 2),
                          "case %d, activation %d", c, a);
            if (c == 2) ck_assert(on_grid(net->dact[a], m, 1.0f / 16, -8, 8));
        }
        adapt_precision_free(p);
        adapt_net_free(net);
    }
}
END_TEST

/* Current scaling of an integer grid (w4a8's weights): fixed(4,0) holds -8..7, s = 7 / amax
 * per weight tensor, so every copy value times s is an integer in [-8, 7] and the largest
 * magnitude maps back to amax (7 (1/s) = amax within float32 rounding). */
START_TEST(test_roles_current)
{
    struct adapt_net *net = small_lenet(1);
    const char *set[ADAPT_ROLE_N] = {0};
    set[ADAPT_ROLE_WEIGHT] = "fixed(4,0) nearest current";
    struct adapt_precision *p = fixed16(net, set, NULL);
    ck_assert_int_eq(adapt_precision_refresh_weights(p, 1), ADAPT_OK);
    for (int u = 0; u < p->nunits; u++) {
        const struct adapt_param *w = &p->u[u].layer->param[0];
        float amax = 0, qmax = 0;
        for (size_t i = 0; i < w->value.numel; i++) {
            amax = fmaxf(amax, fabsf(w->value.data[i]));
            qmax = fmaxf(qmax, fabsf(w->use[i]));
        }
        const struct adapt_role_state *rs = adapt_precision_role_state(p, ADAPT_ROLE_WEIGHT, u);
        ck_assert_ptr_nonnull(rs);
        ck_assert_float_eq(rs->amax, amax);
        ck_assert_float_eq(rs->scale, 7.0f / amax);
        for (size_t i = 0; i < w->value.numel; i++) {
            float k = w->use[i] * rs->scale;
            ck_assert_msg(fabsf(k - nearbyintf(k)) < 1e-4f && k >= -8.0f && k <= 7.0f,
                          "unit %d weight %zu: %g", u, i, k);
        }
        ck_assert(fabsf(qmax - amax) <= 1e-6f * amax);
    }
    adapt_precision_free(p);
    adapt_net_free(net);
}
END_TEST

/* Rowwise scaling, fixed(4,0) (largest 7) on the weights: every output channel (dim-0 row)
 * gets its own scale 7 / amax_row, so each row's largest weight comes back exactly and every
 * copy value times its row's scale is an integer in [-8, 7]; the state keeps the tensor's amax
 * and the smallest row scale (7 / the tensor's amax). A row of zeros gets scale 1 and stays
 * zero. The activations' rowwise scale is per sample: unit 0's input with two samples, one
 * 100 times the other, rounds each on its own grid (both keep their largest value). */
START_TEST(test_roles_rowwise)
{
    struct adapt_net *net = small_lenet(2);
    const char *set[ADAPT_ROLE_N] = {0};
    set[ADAPT_ROLE_WEIGHT] = "fixed(4,0) nearest rowwise";
    set[ADAPT_ROLE_INPUT] = "fixed(4,0) nearest rowwise";
    struct adapt_precision *p = fixed16(net, set, NULL);
    struct adapt_param *w0 = &p->u[0].layer->param[0];
    size_t c0 = w0->value.numel / (size_t)w0->value.dim[0];
    for (size_t i = 0; i < c0; i++) w0->value.data[i] = 0.0f; /* row 0 of unit 0: all zero */
    ck_assert_int_eq(adapt_precision_refresh_weights(p, 1), ADAPT_OK);
    for (int u = 0; u < p->nunits; u++) {
        const struct adapt_param *w = &p->u[u].layer->param[0];
        size_t rows = (size_t)w->value.dim[0], c = w->value.numel / rows;
        float amax = 0.0f, smin = INFINITY;
        for (size_t r = 0; r < rows; r++) {
            float a = 0.0f, q = 0.0f;
            for (size_t i = r * c; i < (r + 1) * c; i++) {
                a = fmaxf(a, fabsf(w->value.data[i]));
                q = fmaxf(q, fabsf(w->use[i]));
            }
            float sc = a > 0.0f ? 7.0f / a : 1.0f;
            amax = fmaxf(amax, a);
            smin = fminf(smin, sc);
            ck_assert_msg(fabsf(q - a) <= 1e-6f * a, "unit %d row %zu: largest %g, copy %g", u, r,
                          a, q);
            for (size_t i = r * c; i < (r + 1) * c; i++) {
                float k = w->use[i] * sc;
                ck_assert_msg(fabsf(k - nearbyintf(k)) < 1e-4f && nearbyintf(k) >= -8.0f &&
                                  nearbyintf(k) <= 7.0f,
                              "unit %d row %zu weight %zu: %g", u, r, i, k);
            }
        }
        const struct adapt_role_state *rs = adapt_precision_role_state(p, ADAPT_ROLE_WEIGHT, u);
        ck_assert_float_eq(rs->amax, amax);
        ck_assert_float_eq(rs->scale, smin);
    }
    for (size_t i = 0; i < c0; i++) ck_assert(w0->use[i] == 0.0f);
    /* the input: two samples */
    size_t m = net->act_numel[0];
    float *x = malloc(2 * m * sizeof *x);
    ck_assert(x);
    for (size_t i = 0; i < 2 * m; i++) x[i] = (i < m ? 1.0f : 100.0f) * (float)((i % 13) + 1);
    const float *lg = adapt_net_forward(net, x, 2, 1);
    ck_assert_ptr_nonnull(lg);
    const struct adapt_role_state *ri = adapt_precision_role_state(p, ADAPT_ROLE_INPUT, 0);
    ck_assert_float_eq(ri->amax, 1300.0f);
    ck_assert_float_eq(ri->scale, 7.0f / 1300.0f);
    free(x);
    adapt_precision_free(p);
    adapt_net_free(net);
}
END_TEST

/* Delayed scaling, e4m3 (largest 448), history 2, on unit 0's weight tensor rounded four
 * times with amax 2, 4, 1, 1 (one weight at the amax, the others small):
 *   1st: scale 1 (nothing seen); history {2} -> max 2 -> scale 224;
 *   2nd: 4 x 224 = 896 saturates to 448 (one saturated value); history {2, 4} -> 112;
 *   3rd: scale 112; history {4, 1} -> 112;   4th: scale 112; history {1, 1} -> 448.
 * With most_recent: after the 3rd the scale is 448 (from amax 1). */
START_TEST(test_roles_delayed)
{
    for (int recent = 0; recent < 2; recent++) {
        struct adapt_net *net = small_lenet(1);
        const char *set[ADAPT_ROLE_N] = {0};
        set[ADAPT_ROLE_WEIGHT] = "e4m3 nearest delayed";
        struct adapt_roles_opts o = {2, recent, 0, 0};
        struct adapt_precision *p = fixed16(net, set, &o);
        struct adapt_param *w = &p->u[0].layer->param[0];
        static const float amax[4] = {2, 4, 1, 1};
        static const float used[2][4] = {{1, 224, 112, 112}, {1, 224, 112, 448}};
        static const float after[2][4] = {{224, 112, 112, 448}, {224, 112, 448, 448}};
        for (int t = 0; t < 4; t++) {
            for (size_t i = 0; i < w->value.numel; i++) w->value.data[i] = 0.001f * (float)(i % 7);
            w->value.data[3] = -amax[t];
            const struct adapt_role_state *rs = adapt_precision_role_state(p, ADAPT_ROLE_WEIGHT, 0);
            ck_assert_float_eq(rs->scale, used[recent][t]);
            uint64_t sat0 = rs->sat;
            ck_assert_int_eq(adapt_precision_refresh_weights(p, t + 1), ADAPT_OK);
            ck_assert_float_eq(rs->amax, amax[t]);
            ck_assert_float_eq(rs->scale, after[recent][t]);
            ck_assert_int_eq(rs->sat - sat0, t == 1 ? 1 : 0);
            /* the saturated weight comes back as 448 / 224 = 2 */
            ck_assert_float_eq(w->use[3], t == 1 ? -2.0f : -amax[t]);
        }
        /* the step record's statistics: the last amax and scale, the one saturated value once */
        struct adapt_trace_role_scale sc[ADAPT_TRACE_SCALED_ROLES];
        adapt_precision_take_scales(p, 0, sc);
        ck_assert_float_eq(sc[0].amax, 1.0);
        ck_assert_float_eq(sc[0].scale, used[recent][3]);
        ck_assert_int_eq(sc[0].sat, 1);
        ck_assert(sc[1].scale == 0 && sc[2].scale == 0); /* input, grad_output: not scaled */
        adapt_precision_take_scales(p, 0, sc);
        ck_assert_int_eq(sc[0].sat, 0);
        adapt_precision_free(p);
        adapt_net_free(net);
    }
}
END_TEST

/* The master role: bf16 stochastic rounds the float32 masters in place at every refresh, so
 * every master weight is a bf16 value (its low 16 bits zero). */
START_TEST(test_roles_master)
{
    struct adapt_net *net = small_lenet(1);
    const char *set[ADAPT_ROLE_N] = {0};
    set[ADAPT_ROLE_MASTER] = "bf16 stochastic";
    struct adapt_precision *p = fixed16(net, set, NULL);
    ck_assert_int_eq(adapt_precision_refresh_weights(p, 1), ADAPT_OK);
    for (int u = 0; u < p->nunits; u++)
        for (int q = 0; q < 2; q++) {
            const struct adapt_param *pp = &p->u[u].layer->param[q];
            for (size_t i = 0; i < pp->value.numel; i++) {
                uint32_t b;
                memcpy(&b, &pp->value.data[i], 4);
                ck_assert_msg((b & 0xffffu) == 0, "unit %d param %d [%zu] = %a", u, q, i,
                              (double)pp->value.data[i]);
            }
        }
    adapt_precision_free(p);
    adapt_net_free(net);
}
END_TEST

/* roles.units: overrides by unit name, values with commas inside parentheses kept whole,
 * several units separated by '|'; what does not parse is refused naming the unit and role. */
START_TEST(test_role_overrides)
{
    struct adapt_config cfg;
    adapt_config_init(&cfg);
    ck_assert_int_eq(adapt_config_set(&cfg, "policy.name=fixed"), ADAPT_OK);
    ck_assert_int_eq(adapt_config_set(&cfg, "roles.units= 0: weight=fixed(8,4) stochastic, "
                                            "input=float32 |11:grad_output=float(5,2) current"),
                     ADAPT_OK);
    ck_assert_int_eq(adapt_config_check(&cfg), ADAPT_OK);
    struct adapt_role_override ov[ADAPT_ROLE_OVERRIDES_MAX];
    int n;
    ck_assert_int_eq(adapt_config_role_overrides(&cfg, ov, &n), ADAPT_OK);
    ck_assert_int_eq(n, 3);
    char buf[128];
    ck_assert_str_eq(ov[0].unit, "0");
    ck_assert_int_eq(ov[0].role, ADAPT_ROLE_WEIGHT);
    ck_assert_str_eq(adapt_role_fmt_str(&ov[0].fmt, buf, sizeof buf), "fixed(8,4) stochastic");
    ck_assert_int_eq(ov[1].role, ADAPT_ROLE_INPUT);
    ck_assert_int_eq(ov[1].fmt.kind, ADAPT_ROLE_FLOAT);
    ck_assert_str_eq(ov[2].unit, "11");
    ck_assert_str_eq(adapt_role_fmt_str(&ov[2].fmt, buf, sizeof buf), "float(5,2) current");
    static const struct refusal bad[] = {
        {"roles.units=0 weight=e4m3", "expected NAME: role=value"},
        {"roles.units=0: wieght=e4m3", "unit 0: \"wieght\": expected role=value"},
        {"roles.units=3: input=e4m3 sideways", "unit 3: input = \"e4m3 sideways\": unknown word"},
        {"roles.units=: input=e4m3", "a unit without a name"},
    };
    expect_refused(bad, sizeof bad / sizeof bad[0]);
}
END_TEST

/* A unit's own role beside the others': unit 1 (conv "3") takes fixed(4,2) weights, the other
 * units keep <16,8> (auto); only unit 1's copy is on the 1/4 grid within [-2, 1.75]. */
START_TEST(test_roles_per_unit)
{
    struct adapt_net *net = small_lenet(1);
    struct adapt_precision *p = fixed16(net, NULL, NULL);
    struct adapt_role_fmt f = role_of("roles.weight=fixed(4,2) nearest", ADAPT_ROLE_WEIGHT);
    ck_assert_int_eq(adapt_precision_set_unit_role(p, 1, ADAPT_ROLE_WEIGHT, &f), ADAPT_OK);
    ck_assert_int_eq(adapt_precision_role(p, 1, ADAPT_ROLE_WEIGHT)->kind, ADAPT_ROLE_FORMAT);
    ck_assert_int_eq(adapt_precision_role(p, 0, ADAPT_ROLE_WEIGHT)->kind, ADAPT_ROLE_AUTO);
    ck_assert_int_eq(adapt_precision_refresh_weights(p, 1), ADAPT_OK);
    for (int u = 0; u < p->nunits; u++) {
        const struct adapt_param *w = &p->u[u].layer->param[0];
        int coarse = on_grid(w->use, w->value.numel, 0.25f, -2.0f, 1.75f);
        ck_assert_msg(coarse == (u == 1), "unit %d", u);
        ck_assert(on_grid(w->use, w->value.numel, 1.0f / 256, -128, 128));
    }
    adapt_precision_free(p);
    adapt_net_free(net);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("roles");
    TCase *c = tcase_create("roles");
    tcase_add_test(c, test_role_texts);
    tcase_add_test(c, test_role_errors);
    tcase_add_test(c, test_scale_for);
    tcase_add_test(c, test_roles_apply);
    tcase_add_test(c, test_roles_pool_grad);
    tcase_add_test(c, test_roles_current);
    tcase_add_test(c, test_roles_rowwise);
    tcase_add_test(c, test_roles_delayed);
    tcase_add_test(c, test_roles_master);
    tcase_add_test(c, test_role_overrides);
    tcase_add_test(c, test_roles_per_unit);
    suite_add_tcase(s, c);
    return tu_run_suite(s, CK_FORK_GETENV);
}
