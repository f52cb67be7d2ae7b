/* tests/test_policy_amp_muppet.c: AMP and MuPPET in training, part of tests/test_policy, on
 * LeNet-5: AMP's overflow handling, its fp16 backward and its unscaled L1 term; MuPPET's replay
 * of switches, the rounding of every tensor (weights, activations, gradients) on its grid.
 * Expected values are worked out in the comment above each test. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/config/config.h"
#include "src/net/optim.h"
#include "src/policy/policy.h"
#include "src/policy/policy_core.h"
#include "src/policy/precision.h"
#include "tests/test_policy.h"
#include "tests/testutil.h"

/* AMP with injected overflow: a gradient of 1e5 is inf in fp16 -> the step
 * is skipped and the scale halves (65536 -> 32768); a finite one is divided
 * by the scale it was produced with: 3.0 (exact in fp16) / 32768. */
START_TEST(test_amp_policy_overflow)
{
    struct adapt_net *net = small_lenet(1);
    static struct adapt_config cfg;
    adapt_config_init(&cfg);
    ck_assert_int_eq(adapt_config_set(&cfg, "policy.name=amp"), ADAPT_OK);
    struct adapt_policy *p;
    ck_assert_int_eq(adapt_policy_alloc(&p, &cfg, net, 1), ADAPT_OK);
    ck_assert_double_eq(p->loss_scale, 65536.0);
    set_grads(net, 1e5f);
    ck_assert_int_eq(p->type->observe(p, 1, 2.3, 0), 1);
    ck_assert_double_eq(p->loss_scale, 32768.0);
    ck_assert(p->overflow);
    set_grads(net, 3.0f);
    ck_assert_int_eq(p->type->observe(p, 2, 2.3, 0), 0);
    ck_assert_float_eq(net->param[0]->grad.data[0], 3.0f / 32768.0f);
    ck_assert_double_eq(p->loss_scale, 32768.0);
    adapt_policy_free(p);
    adapt_net_free(net);
}
END_TEST

/* 1 when v is an IEEE 754 binary16 value: 0, or at most 65504 in magnitude with 11
 * significant bits (step 2^(e-11) for v in [2^(e-1), 2^e), e >= -13) or a multiple of 2^-24
 * (subnormals, below 2^-14). */
static int on_half_grid(float v)
{
    if (v == 0.0f) return 1;
    if (!isfinite(v) || fabsf(v) > 65504.0f) return 0;
    int e;
    frexp(v, &e);
    double q = ldexp(v, e >= -13 ? 11 - e : 24);
    return q == nearbyint(q);
}

/* AMP's backward is the one of units computing in fp16: the gradient of every unit's output
 * (rounded before the unit reads it) and the one it writes for its input are fp16 values, so
 * the products of its backward have fp16 operands, as on tensor cores. Under fp32 the same
 * backward leaves most of them off that grid (the check can fail). Loss gradients of the
 * order 1e-1 with an off-grid part of 1e-7. */
START_TEST(test_amp_half_backward)
{
    for (int amp = 0; amp <= 1; amp++) {
        struct adapt_net *net = small_lenet(2);
        static struct adapt_config cfg;
        adapt_config_init(&cfg);
        ck_assert_int_eq(adapt_config_set(&cfg, amp ? "policy.name=amp" : "policy.name=fp32"),
                         ADAPT_OK);
        struct adapt_policy *p;
        ck_assert_int_eq(adapt_policy_alloc(&p, &cfg, net, 1), ADAPT_OK);
        if (amp) ck_assert_int_eq(adapt_precision_refresh_weights(p->prec, 1), ADAPT_OK);
        float x[2 * 32 * 32], dl[2 * 10];
        for (int i = 0; i < 2 * 32 * 32; i++) x[i] = (float)sin(0.37 * i) * 2.385f;
        for (int i = 0; i < 2 * 10; i++) dl[i] = (float)(0.1 * cos(1.3 * i) + 1e-7);
        adapt_net_forward(net, x, 2, 1);
        adapt_net_backward(net, dl, 2);
        size_t off = 0, checked = 0;
        for (int i = 0; i < net->nnodes; i++) {
            const struct adapt_node *nd = &net->nodes[i];
            if (!nd->layer->is_unit) continue;
            int acts[2] = {nd->out, nd->in[0]};
            for (int k = 0; k < 2; k++) {
                if (acts[k] == 0) continue; /* the network input has no gradient */
                for (size_t j = 0; j < net->act_numel[acts[k]] * 2; j++) {
                    float g = net->dact[acts[k]][j];
                    checked++;
                    off += !on_half_grid(g);
                    ck_assert_msg(
                        !amp || on_half_grid(g),
                        "amp: gradient of activation %d [%zu] = %.9g is not an fp16 value", acts[k],
                        j, g);
                }
            }
        }
        ck_assert(checked > 1000);
        if (!amp)
            ck_assert_msg(off > checked / 2, "fp32: only %zu of %zu off the fp16 grid", off,
                          checked);
        adapt_policy_free(p);
        adapt_net_free(net);
    }
}
END_TEST

/* MuPPET schedule replay 8:2,16:1,32:1: epochs 0-1 muppet(8), epoch 2
 * muppet(16), epoch 3 float32 (the switch happens at the end of the epoch
 * before). */
START_TEST(test_muppet_policy_replay)
{
    struct adapt_net *net = small_lenet(1);
    static struct adapt_config cfg;
    adapt_config_init(&cfg);
    ck_assert_int_eq(adapt_config_set(&cfg, "policy.name=muppet"), ADAPT_OK);
    ck_assert_int_eq(adapt_config_set(&cfg, "policy.muppet_schedule=8:2,16:1,32:1"), ADAPT_OK);
    struct adapt_policy *p;
    ck_assert_int_eq(adapt_policy_alloc(&p, &cfg, net, 1), ADAPT_OK);
    double lr = 0.01;
    int stop = -1;
    ck_assert_int_eq(p->prec->u[0].spec.format, QUANT_FORMAT_MUPPET);
    ck_assert_int_eq(p->prec->u[0].spec.wl, 8);
    ck_assert_int_eq(p->type->epoch_end(p, 0, &lr, &stop), ADAPT_OK);
    ck_assert_int_eq(p->prec->u[0].spec.wl, 8);
    ck_assert_int_eq(p->type->epoch_end(p, 1, &lr, &stop), ADAPT_OK);
    ck_assert_int_eq(p->prec->u[0].spec.wl, 16);
    ck_assert(p->prec->u[0].active);
    ck_assert_int_eq(p->type->epoch_end(p, 2, &lr, &stop), ADAPT_OK);
    ck_assert(!p->prec->u[0].active);
    adapt_policy_free(p);
    adapt_net_free(net);
}
END_TEST

/* AMP with L1: the L1 term is part of the scaled loss, so unscaling leaves
 * l1 * sign(w). Zero loss gradients, l1 = 2^-10, lr = 2^-4, momentum 0:
 * scaled gradient 65536 * 2^-10 = 64 (exact in fp16), unscaled 2^-10, so
 * every weight moves by 2^-14 against its sign (dividing the L1 term by
 * the scale as well would move it by 2^-30). */
START_TEST(test_amp_l1_unscaled)
{
    struct adapt_net *net = small_lenet(1);
    static struct adapt_config cfg;
    adapt_config_init(&cfg);
    ck_assert_int_eq(adapt_config_set(&cfg, "policy.name=amp"), ADAPT_OK);
    struct adapt_policy *p;
    ck_assert_int_eq(adapt_policy_alloc(&p, &cfg, net, 1), ADAPT_OK);
    struct adapt_sgd opt;
    ck_assert_int_eq(adapt_sgd_init(&opt, net, 0.0625, 0.0, 0.0, 0x1p-10, 0), ADAPT_OK);
    set_grads(net, 0.0f);
    const struct adapt_param *w = net->param[0];
    float *w0 = malloc(sizeof(float) * w->value.numel);
    for (size_t i = 0; i < w->value.numel; i++) w0[i] = w->value.data[i];
    int skipped = -1;
    ck_assert_int_eq(adapt_policy_step(p, &opt, 1, 2.3, 1, 0, &skipped), ADAPT_OK);
    ck_assert_int_eq(skipped, 0);
    for (size_t i = 0; i < w->value.numel; i++) {
        float sg = (float)((w0[i] > 0.0f) - (w0[i] < 0.0f));
        ck_assert_msg(fabsf(w->value.data[i] - (w0[i] - 0x1p-14f * sg)) <= 1e-7f,
                      "weight %zu: %.9g -> %.9g, want a step of %g", i, w0[i], w->value.data[i],
                      -0x1p-14 * sg);
    }
    free(w0);
    adapt_sgd_free(&opt);
    adapt_policy_free(p);
    adapt_net_free(net);
}
END_TEST

/* One training step of LeNet-5 (8 samples, lr 0.01, momentum 0, l1_decay l1) under policy
 * `name`, with the loss gradient scaled by the policy's loss scale as the trainer does: the
 * drop in sum |w| it makes; *skipped says whether the policy skipped the step. */
static double l1_step_drop(const char *name, double l1, int *skipped)
{
    enum { N = 8 };
    struct adapt_net *net = small_lenet(N);
    static struct adapt_config cfg;
    adapt_config_init(&cfg);
    char set[64];
    snprintf(set, sizeof set, "policy.name=%s", name);
    ck_assert_int_eq(adapt_config_set(&cfg, set), ADAPT_OK);
    struct adapt_policy *p;
    ck_assert_int_eq(adapt_policy_alloc(&p, &cfg, net, 1), ADAPT_OK);
    if (p->prec) adapt_precision_refresh_weights(p->prec, 0);
    struct adapt_sgd opt;
    ck_assert_int_eq(adapt_sgd_init(&opt, net, 0.01, 0.0, 0.0, l1, 0), ADAPT_OK);
    static float x[N * 32 * 32], dl[N * 10];
    int y[N], correct;
    tu_fill_uniform(x, N * 32 * 32, 77, -1.0f, 1.0f);
    for (int i = 0; i < N; i++) y[i] = (i * 3) % 10;
    const float *lg = adapt_net_forward(net, x, N, 1);
    adapt_softmax_xent(lg, y, N, 10, dl, &correct);
    for (int i = 0; i < N * 10; i++) dl[i] *= (float)p->loss_scale;
    adapt_net_backward(net, dl, N);
    double before = adapt_sgd_l1_norm(&opt);
    ck_assert_int_eq(adapt_policy_step(p, &opt, 1, 2.3, 1, 0, skipped), ADAPT_OK);
    double drop = before - adapt_sgd_l1_norm(&opt);
    adapt_sgd_free(&opt);
    adapt_policy_free(p);
    adapt_net_free(net);
    return drop;
}

/* AMP with l1_decay 1 at loss scale 65536: the scaled L1 gradient l1 * S * sign(w) = 65536
 * is above fp16's largest finite value 65504, but it is a float32 term added to the float32
 * gradient after the half-precision backward (PyTorch keeps float32 .grad for float32
 * parameters), so it does not overflow: the step is taken, and sum |w| drops as under fp32
 * (482.3177 on these samples; the backward's fp16 rounding moves it by about 1e-6, the test
 * allows 1e-5 of it). */
START_TEST(test_amp_l1_no_overflow)
{
    int skipped = -1;
    double fp32 = l1_step_drop("fp32", 1.0, &skipped);
    ck_assert_int_eq(skipped, 0);
    double amp = l1_step_drop("amp", 1.0, &skipped);
    ck_assert_msg(skipped == 0, "amp skipped the step (an overflow)");
    ck_assert_msg(fp32 > 100.0 && fabs(amp - fp32) <= 1e-5 * fp32,
                  "sum |w| dropped by %.9g under amp, %.9g under fp32", amp, fp32);
}
END_TEST

/* MuPPET's gradient diversity over every trainable tensor, with the weight
 * decay term on the quantized weights (grad = Q(g) + l2 * w_q). LeNet-5, r
 * = 3, level 8; three epochs end with these last-batch gradients (all exact
 * on the muppet(8) grids):
 *  A (l2 = 0): every weight gradient 0.25 in all three epochs: GD = 3 *
 *    0.0625 n / (0.75^2 n) = 1/3; every bias gradient at epoch k is 1 at
 *    positions i % 3 == k, else 0: the three sum to all-ones, GD = n / n = 1.
 *    S = mean over the 10 tensors = (5 / 3 + 5) / 10 = 2/3 (weights only: 1/3).
 *  B (l2 = 1, weights' master 0.25 -> w_q 0.25, biases' master 0): weight
 *    gradients in the bias pattern plus 0.25: per epoch n/3 values 1.25 and
 *    2n/3 values 0.25, ||.||^2 = 0.5625 n; the sum is 1.75 everywhere: GD =
 *    1.6875 / 3.0625 = 0.5510204; biases GD 1; S = (5 * 0.5510204 + 5) / 10
 *    = 0.7755102 (without the decay term: 1). */
static void muppet_epochs(struct adapt_policy *p, struct adapt_net *net, int pattern_w)
{
    double lr = 0.01;
    int stop = -1;
    for (int e = 0; e < 3; e++) {
        for (int k = 0; k < net->nparam; k++) {
            struct adapt_param *pp = net->param[k];
            if (pp->role == ADAPT_PARAM_BUFFER) continue;
            int is_w = pp->value.ndim > 1;
            for (size_t i = 0; i < pp->grad.numel; i++)
                pp->grad.data[i] = is_w && !pattern_w ? 0.25f : (float)((int)(i % 3) == e);
        }
        p->type->observe(p, e + 1, 2.3, 1);
        ck_assert_int_eq(p->type->epoch_end(p, e, &lr, &stop), ADAPT_OK);
    }
}

START_TEST(test_muppet_gd_all_tensors)
{
    for (int b = 0; b <= 1; b++) {
        struct adapt_net *net = small_lenet(1);
        static struct adapt_config cfg;
        adapt_config_init(&cfg);
        ck_assert_int_eq(adapt_config_set(&cfg, "policy.name=muppet"), ADAPT_OK);
        if (b) ck_assert_int_eq(adapt_config_set(&cfg, "optim.l2_decay=1"), ADAPT_OK);
        struct adapt_policy *p;
        ck_assert_int_eq(adapt_policy_alloc(&p, &cfg, net, 1), ADAPT_OK);
        if (b) {
            for (int k = 0; k < net->nparam; k++) {
                struct adapt_param *pp = net->param[k];
                for (size_t i = 0; pp->role != ADAPT_PARAM_BUFFER && i < pp->value.numel; i++)
                    pp->value.data[i] = pp->value.ndim > 1 ? 0.25f : 0.0f;
            }
            adapt_precision_refresh_weights(p->prec, 1);
        }
        muppet_epochs(p, net, b);
        double want = b ? (5 * (1.6875 / 3.0625) + 5) / 10 : 2.0 / 3.0;
        ck_assert_msg(fabs(adapt_muppet_last_gd(p) - want) < 1e-6, "case %c: S = %.7f, want %.7f",
                      b ? 'B' : 'A', adapt_muppet_last_gd(p), want);
        adapt_policy_free(p);
        adapt_net_free(net);
    }
}
END_TEST

/* The largest power of two that every value is a multiple of (0 for all
 * zeros); a grid of k * 2^e. */
static double grid_step(const float *x, size_t n)
{
    for (int e = 10; e >= -60; e--) {
        double st = ldexp(1.0, e);
        int all = 1, any = 0;
        for (size_t i = 0; i < n && all; i++) {
            double q = x[i] / st;
            all = q == floor(q);
            any |= x[i] != 0.0f;
        }
        if (!any) return 0.0;
        if (all) return st;
    }
    return -1.0;
}

/* MuPPET at level 8 in a training forward / backward of two LeNet-5 images:
 * (1) each image is rounded with its own scale: image 1 is image 0 times
 *     2^-7, so its rounded copy is image 0's rounded copy times 2^-7 (both
 *     with 8-bit codes on their own grids); one scale for the batch would
 *     put image 1 on image 0's grid, where its values are mostly 0.
 * (2) the activation gradients that conv, linear and pooling layers pass
 *     back are on a muppet(8) grid: multiples of a power of two with codes
 *     |v| / step <= 128. */
START_TEST(test_muppet_activation_gradients)
{
    struct adapt_net *net = small_lenet(2);
    static struct adapt_config cfg;
    adapt_config_init(&cfg);
    ck_assert_int_eq(adapt_config_set(&cfg, "policy.name=muppet"), ADAPT_OK);
    struct adapt_policy *p;
    ck_assert_int_eq(adapt_policy_alloc(&p, &cfg, net, 1), ADAPT_OK);
    adapt_precision_refresh_weights(p->prec, 1);
    static float x[2 * 32 * 32];
    for (int i = 0; i < 32 * 32; i++) {
        x[i] = (float)sin(0.37 * i) * 2.385f;
        x[32 * 32 + i] = x[i] * 0x1p-7f;
    }
    const float *lg = adapt_net_forward(net, x, 2, 1);
    (void)lg;
    const float *q = p->prec->u[0].qin;
    ck_assert_ptr_nonnull(q);
    size_t nz = 0;
    for (int i = 0; i < 32 * 32; i++) nz += q[32 * 32 + i] != 0.0f;
    ck_assert_msg(nz > 900, "image 1: %zu of 1024 rounded values are nonzero", nz);
    double s0 = grid_step(q, 32 * 32), s1 = grid_step(q + 32 * 32, 32 * 32);
    ck_assert_msg(s1 > 0 && s0 > 0 && s1 == s0 * 0x1p-7, "grids %g and %g", s0, s1);
    float dl[2 * 10];
    for (int i = 0; i < 20; i++) dl[i] = 0.01f * (float)(i % 7) - 0.03f;
    adapt_net_backward(net, dl, 2);
    for (int nd = 1; nd < net->nnodes; nd++) {
        const struct adapt_layer *l = net->nodes[nd].layer;
        if (!l->is_unit && strcmp(l->ops->kind, "avgpool2d") && strcmp(l->ops->kind, "maxpool2d"))
            continue;
        int a = net->nodes[nd].in[0];
        size_t n = net->act_numel[a] * 2;
        double st = grid_step(net->dact[a], n), mx = 0.0;
        for (size_t i = 0; i < n; i++) mx = fmax(mx, fabs(net->dact[a][i]));
        ck_assert_msg(st > 0 && mx / st <= 128.0, "node %d (%s): gradient to activation %d: step "
                      "%g, max %g", nd, l->ops->kind, a, st, mx);
    }
    adapt_policy_free(p);
    adapt_net_free(net);
}
END_TEST

void test_policy_add_amp_muppet(TCase *engine)
{
    tcase_add_test(engine, test_amp_policy_overflow);
    tcase_add_test(engine, test_amp_l1_unscaled);
    tcase_add_test(engine, test_amp_l1_no_overflow);
    tcase_add_test(engine, test_amp_half_backward);
    tcase_add_test(engine, test_muppet_policy_replay);
    tcase_add_test(engine, test_muppet_gd_all_tensors);
    tcase_add_test(engine, test_muppet_activation_gradients);
}
