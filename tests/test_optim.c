/* tests/test_optim.c: SGD and learning-rate schedules (src/net/optim.c). Expected
 * values are hand-computed from PyTorch's torch.optim.SGD and lr_scheduler
 * update rules (worked out in double precision in the comments). */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "src/net/optim.h"
#include "tests/testutil.h"

/* A one-parameter "network" (no layers) is enough for the optimizer. */
struct one_param {
    struct adapt_net net;
    struct adapt_param p;
    struct adapt_param *list[1];
    float w, g;
};

static void one_param_init(struct one_param *o, float w)
{
    memset(o, 0, sizeof *o);
    int d[1] = {1};
    snprintf(o->p.name, sizeof o->p.name, "w");
    o->p.role = ADAPT_PARAM_WEIGHT;
    adapt_tensor_shape(&o->p.value, 1, d);
    o->p.grad = o->p.value;
    o->w = w;
    o->p.value.data = &o->w;
    o->p.grad.data = &o->g;
    o->p.use = &o->w;
    o->list[0] = &o->p;
    o->net.param = o->list;
    o->net.nparam = 1;
}

/* w0 = 2.385, g = 0.5 every step, lr 0.1, momentum 0.9, l2 0.01:
 * step 1: d = 0.5 + 0.01*2.385 = 0.52385, b = d, w = 2.3326150
 * step 2: d = 0.52332615, b = 0.9*0.52385 + d = 0.99479115, w = 2.2331359
 * step 3: d = 0.52233136, b = 1.41764339, w = 2.0913715 */
START_TEST(test_sgd_momentum_l2)
{
    struct one_param o;
    one_param_init(&o, 2.385f);
    struct adapt_sgd opt;
    ck_assert_int_eq(adapt_sgd_init(&opt, &o.net, 0.1, 0.9, 0.01, 0.0, 0), ADAPT_OK);
    static const double want[3] = {2.332615, 2.233135885, 2.091371545615};
    for (int k = 0; k < 3; k++) {
        o.g = 0.5f;
        adapt_sgd_step(&opt, 1.0);
        ck_assert_double_eq_tol(o.w, want[k], 2e-6);
        ck_assert(o.g == 0.0f); /* gradients are zeroed by the update */
    }
    adapt_sgd_free(&opt);
}
END_TEST

/* Nesterov: w -= lr (d + m b). step 1: w = 2.385 - 0.1 (0.52385 + 0.9*0.52385)
 * = 2.2854685; step 2: 2.14369426. */
START_TEST(test_sgd_nesterov)
{
    struct one_param o;
    one_param_init(&o, 2.385f);
    struct adapt_sgd opt;
    ck_assert_int_eq(adapt_sgd_init(&opt, &o.net, 0.1, 0.9, 0.01, 0.0, 1), ADAPT_OK);
    o.g = 0.5f;
    adapt_sgd_step(&opt, 1.0);
    ck_assert_double_eq_tol(o.w, 2.2854685, 2e-6);
    o.g = 0.5f;
    adapt_sgd_step(&opt, 1.0);
    ck_assert_double_eq_tol(o.w, 2.14369426, 2e-6);
    adapt_sgd_free(&opt);
}
END_TEST

/* Gradient scale (accumulation 1/4) and L1: g = 0.25*1.3 + 0.2*sign(w).
 * w = -1.5: g = 0.325 - 0.2 = 0.125; no momentum, lr 0.5: w = -1.5625.
 * w = 0 exactly: sign 0, g = 0.325, w = -0.1625. */
START_TEST(test_sgd_scale_l1)
{
    struct one_param o;
    one_param_init(&o, -1.5f);
    struct adapt_sgd opt;
    ck_assert_int_eq(adapt_sgd_init(&opt, &o.net, 0.5, 0.0, 0.0, 0.2, 0), ADAPT_OK);
    o.g = 1.3f;
    adapt_sgd_step(&opt, 0.25);
    ck_assert_double_eq_tol(o.w, -1.5625, 1e-6);
    o.w = 0.0f;
    o.g = 1.3f;
    adapt_sgd_step(&opt, 0.25);
    ck_assert_double_eq_tol(o.w, -0.1625, 1e-6);
    ck_assert_double_eq_tol(adapt_sgd_l1_norm(&opt), 0.1625, 1e-6);
    adapt_sgd_free(&opt);
}
END_TEST

/* MultiStepLR(milestones=[2, 4], gamma=0.1), base 0.1: the lr used in epochs
 * 0..5 is 0.1, 0.1, 0.01, 0.01, 0.001, 0.001; step() returns the next. */
START_TEST(test_sched_multistep)
{
    struct adapt_sched s;
    adapt_sched_init(&s, ADAPT_SCHED_MULTISTEP, 0.1);
    s.nmilestones = 2;
    s.milestones[0] = 2;
    s.milestones[1] = 4;
    s.gamma = 0.1;
    static const double want[6] = {0.1, 0.01, 0.01, 0.001, 0.001, 0.001};
    ck_assert_double_eq(s.lr, 0.1);
    for (int e = 0; e < 6; e++) ck_assert_double_eq_tol(adapt_sched_step(&s, 0.0), want[e], 1e-15);
}
END_TEST

/* ReduceLROnPlateau(mode min, factor 0.5, patience 2, threshold 0.1 rel):
 * losses 1.0 .95 .95 .95 .5 .5 .5 .5: epoch 1 sets best 1.0; .95 is not
 * < 1.0*0.9, so bad epochs 1, 2, 3 > patience -> lr 0.5 after epoch 4; .5 is
 * a new best; bad 1, 2, 3 -> lr 0.25 after epoch 8. With cooldown 2 the two
 * epochs after the first reduction do not count, so no second reduction. */
START_TEST(test_sched_plateau)
{
    static const double loss[8] = {1.0, 0.95, 0.95, 0.95, 0.5, 0.5, 0.5, 0.5};
    static const double want[8] = {1, 1, 1, 0.5, 0.5, 0.5, 0.5, 0.25};
    static const double want_cd[8] = {1, 1, 1, 0.5, 0.5, 0.5, 0.5, 0.5};
    struct adapt_sched s, c;
    adapt_sched_init(&s, ADAPT_SCHED_PLATEAU, 1.0);
    s.factor = 0.5;
    s.patience = 2;
    s.threshold = 0.1;
    c = s;
    c.cooldown = 2;
    for (int e = 0; e < 8; e++) {
        ck_assert_double_eq_tol(adapt_sched_step(&s, loss[e]), want[e], 1e-15);
        ck_assert_double_eq_tol(adapt_sched_step(&c, loss[e]), want_cd[e], 1e-15);
    }
    /* min_lr bounds the reduction */
    struct adapt_sched m;
    adapt_sched_init(&m, ADAPT_SCHED_PLATEAU, 1.0);
    m.factor = 0.1;
    m.patience = 0;
    m.min_lr = 0.05;
    adapt_sched_step(&m, 1.0);
    ck_assert_double_eq_tol(adapt_sched_step(&m, 1.0), 0.1, 1e-15);
    ck_assert_double_eq_tol(adapt_sched_step(&m, 1.0), 0.05, 1e-15);
    ck_assert_double_eq_tol(adapt_sched_step(&m, 1.0), 0.05, 1e-15);
}
END_TEST

START_TEST(test_sched_constant)
{
    struct adapt_sched s;
    adapt_sched_init(&s, ADAPT_SCHED_CONSTANT, 0.0123);
    for (int e = 0; e < 5; e++) ck_assert_double_eq(adapt_sched_step(&s, 1.0 / (e + 1)), 0.0123);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("optim");
    TCase *tc = tcase_create("sgd");
    tcase_add_test(tc, test_sgd_momentum_l2);
    tcase_add_test(tc, test_sgd_nesterov);
    tcase_add_test(tc, test_sgd_scale_l1);
    suite_add_tcase(s, tc);
    TCase *ts = tcase_create("schedules");
    tcase_add_test(ts, test_sched_multistep);
    tcase_add_test(ts, test_sched_plateau);
    tcase_add_test(ts, test_sched_constant);
    suite_add_tcase(s, ts);
    return tu_run_suite(s, CK_FORK_GETENV);
}
