/* tests/test_models.c: network container and the four models (src/net/net.c,
 * src/net/models.c): parameter counts, MACs, state_dict names,
 * initialisation, and finite-difference gradient checks of whole models. */
#define _GNU_SOURCE
#include <cblas.h>
#include <check.h>
#include <dlfcn.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/rng.h"
#include "src/net/net.h"
#include "tests/testutil.h"

static int64_t count_params(const struct adapt_net *net)
{
    int64_t n = 0;
    for (int p = 0; p < net->nparam; p++)
        if (net->param[p]->role != ADAPT_PARAM_BUFFER) n += (int64_t)net->param[p]->value.numel;
    return n;
}

/* Parameter counts and MACs per sample from doc/models.md (C = 10):
 * LeNet-5 61,706 params; conv1 28*28*6*25 + conv2 10*10*16*6*25 + conv3
 * 120*400 + fc 120*84 + 84*10 = 416,520 MACs. AlexNet-CIFAR 2,472,266
 * params; 1,486,848 + 4,915,200 + 2,654,208 + 3,538,944 + 2,359,296 + 2,560 =
 * 14,957,056 MACs (spatial 32 -> 8 -> 4 -> 2 -> 1). ResNet-20 (projection
 * shortcuts, convs without bias) 272,474 params; 40,813,184 MACs summed
 * layer by layer (the AdaPT paper: "about 40.8 M"). AlexNet-MNIST: conv1 has 1 input
 * channel, 2*64*121 = 15,488 fewer weights. */
START_TEST(test_param_counts)
{
    static const struct {
        const char *name;
        int64_t params, macs;
    } want[] = {{"lenet5", 61706, 416520},
                {"alexnet_cifar", 2472266, 14957056},
                {"alexnet_mnist", 2472266 - 2 * 64 * 121, 14957056 - 2 * 64 * 121 * 64},
                {"resnet20", 272474, 40813184}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        struct adapt_net *net = adapt_model_build(want[i].name, 10);
        ck_assert_ptr_nonnull(net);
        ck_assert_int_eq(adapt_net_finalize(net, 2), ADAPT_OK);
        ck_assert_int_eq(count_params(net), want[i].params);
        ck_assert_int_eq(net->nparams_trainable, want[i].params);
        ck_assert_int_eq(net->macs, want[i].macs);
        adapt_net_free(net);
    }
}
END_TEST

/* CIFAR-100 heads: AlexNet fc 256*100+100, ResNet-20 fc 64*100+100. */
START_TEST(test_param_counts_c100)
{
    struct adapt_net *a = adapt_model_build("alexnet_cifar", 100);
    struct adapt_net *r = adapt_model_build("resnet20", 100);
    ck_assert_int_eq(adapt_net_finalize(a, 1), ADAPT_OK);
    ck_assert_int_eq(adapt_net_finalize(r, 1), ADAPT_OK);
    ck_assert_int_eq(count_params(a), 2472266 - 2570 + 25700);
    ck_assert_int_eq(count_params(r), 272474 - 650 + 6500);
    adapt_net_free(a);
    adapt_net_free(r);
}
END_TEST

/* state_dict keys follow PyTorch: nn.Sequential indices for LeNet-5/AlexNet,
 * CIFAR ResNet names for ResNet-20 (batch-norm buffers included). */
START_TEST(test_state_dict_names)
{
    struct adapt_net *l = adapt_model_build("lenet5", 10);
    ck_assert_int_eq(adapt_net_finalize(l, 1), ADAPT_OK);
    static const char *lenet[] = {"0.weight", "0.bias", "3.weight", "3.bias", "6.weight",
                                  "6.bias", "9.weight", "9.bias", "11.weight", "11.bias"};
    ck_assert_int_eq(l->nparam, 10);
    for (int i = 0; i < 10; i++) ck_assert_str_eq(l->param[i]->name, lenet[i]);
    ck_assert_int_eq(l->nunits, 5);
    adapt_net_free(l);

    struct adapt_net *a = adapt_model_build("alexnet_cifar", 10);
    ck_assert_int_eq(adapt_net_finalize(a, 1), ADAPT_OK);
    ck_assert_str_eq(a->param[a->nparam - 2]->name, "14.weight");
    ck_assert_int_eq(a->nunits, 6);
    adapt_net_free(a);

    struct adapt_net *r = adapt_model_build("resnet20", 10);
    ck_assert_int_eq(adapt_net_finalize(r, 1), ADAPT_OK);
    ck_assert_str_eq(r->param[0]->name, "conv1.weight");
    ck_assert_str_eq(r->param[1]->name, "bn1.weight");
    ck_assert_str_eq(r->param[2]->name, "bn1.bias");
    ck_assert_str_eq(r->param[3]->name, "bn1.running_mean");
    ck_assert_str_eq(r->param[4]->name, "bn1.running_var");
    ck_assert_str_eq(r->param[5]->name, "layer1.0.conv1.weight");
    int found_shortcut = 0;
    for (int p = 0; p < r->nparam; p++)
        if (!strcmp(r->param[p]->name, "layer2.0.shortcut.0.weight")) {
            found_shortcut = 1;
            ck_assert_int_eq(r->param[p]->value.dim[0], 32);
            ck_assert_int_eq(r->param[p]->value.dim[1], 16);
            ck_assert_int_eq(r->param[p]->value.dim[2], 1);
        }
    ck_assert(found_shortcut);
    ck_assert_str_eq(r->param[r->nparam - 1]->name, "linear.bias");
    /* 19 convs + 2 shortcut convs + fc = 22 precision units */
    ck_assert_int_eq(r->nunits, 22);
    adapt_net_free(r);
}
END_TEST

/* Truncated-normal initialisation: variance of N(0, s^2) cut at +-c s,
 * c = sqrt(3), is s^2 (1 - 2 c phi(c) / (2 Phi(c) - 1)); phi(c) = 0.0890161,
 * Phi(c) = 0.9583677, factor 0.6636318. conv3 of LeNet-5 (48,000 weights,
 * fan_in 400, gain 0.5): s^2 = 1.25e-3, expected variance 8.29540e-4. The
 * sampling sd of the variance estimate is s^2 sqrt((E z^4 - f^2) / n) with
 * E z^4 = 3 - 2 (c^3 + 3c) phi / (2 Phi - 1) = 0.98178: 4.2e-6; we allow 5 sd
 * = 2.1e-5. Biases uniform(+-1/sqrt(400)): |b| < 0.05. Same seed, same bits. */
START_TEST(test_init)
{
    struct adapt_net *a = adapt_model_build("lenet5", 10);
    struct adapt_net *b = adapt_model_build("lenet5", 10);
    ck_assert_int_eq(adapt_net_finalize(a, 1), ADAPT_OK);
    ck_assert_int_eq(adapt_net_finalize(b, 1), ADAPT_OK);
    adapt_net_init_params(a, 2385, 0.5);
    adapt_net_init_params(b, 2385, 0.5);
    ck_assert_int_eq(memcmp(a->a_param.base, b->a_param.base, a->a_param.used), 0);
    const struct adapt_param *w = a->param[4], *bias = a->param[5];
    ck_assert_str_eq(w->name, "6.weight");
    ck_assert_int_eq(w->fan_in, 400);
    double s = 0, s2 = 0, lim = sqrt(3.0) * sqrt(0.5 / 400.0);
    for (size_t i = 0; i < w->value.numel; i++) {
        double v = w->value.data[i];
        ck_assert(fabs(v) <= lim + 1e-7);
        s += v;
        s2 += v * v;
    }
    double n = (double)w->value.numel, mean = s / n, var = s2 / n - mean * mean;
    ck_assert_double_eq_tol(var, 8.29540e-4, 2.1e-5);
    for (size_t i = 0; i < bias->value.numel; i++) ck_assert(fabs(bias->value.data[i]) < 0.05);
    adapt_net_init_params(b, 2386, 0.5);
    ck_assert_int_ne(memcmp(a->a_param.base, b->a_param.base, a->a_param.used), 0);
    adapt_net_free(a);
    adapt_net_free(b);
}
END_TEST

static double model_loss(struct adapt_net *net, const float *x, const int *y, int n)
{
    const float *lg = adapt_net_forward(net, x, n, 1);
    return adapt_softmax_xent(lg, y, n, net->classes, NULL, NULL);
}

/* Whole-model gradient check: central differences of the mean cross-entropy
 * (training mode, so batch-norm uses batch statistics) against backward, at
 * `per_tensor` random coordinates of every trainable tensor. The loss is
 * computed in float32 (relative rounding ~1e-7 per operation, accumulated
 * into ~1e-6 absolute on a loss of ~2.3), so with step h the quotient carries
 * ~1e-6/h noise plus O(h^2) truncation: at h = 1e-3 about 1e-3, hence the
 * bound |fd - an| <= 3e-3 + 5e-2 |an|. ReLU and max-pool are not
 * differentiable everywhere: a step can cross a kink and the quotient then
 * measures a different slope. For those models a coordinate also passes when
 * the quotient at h = 3.3e-3 agrees (a kink inside both intervals is
 * rarer), and at most `max_kinks` coordinates may disagree at both. A wrong
 * gradient (sign, missing term, wrong index or accumulation) is off by
 * O(|an|) at every coordinate of the affected tensor and fails. */
static double fd_at(struct adapt_net *net, struct adapt_param *pp, size_t i, const float *x,
                    const int *y, int n, double h)
{
    float w0 = pp->value.data[i];
    pp->value.data[i] = (float)(w0 + h);
    double lp = model_loss(net, x, y, n);
    pp->value.data[i] = (float)(w0 - h);
    double lm = model_loss(net, x, y, n);
    pp->value.data[i] = w0;
    return (lp - lm) / (2 * h);
}

static void gradcheck_model(const char *name, int n, int classes, uint64_t seed, int per_tensor,
                            int max_kinks)
{
    struct adapt_net *net = adapt_model_build(name, classes);
    ck_assert_ptr_nonnull(net);
    ck_assert_int_eq(adapt_net_finalize(net, n), ADAPT_OK);
    adapt_net_init_params(net, seed, 2.0);
    size_t in = net->act_numel[0] * (size_t)n;
    float *x = malloc(in * sizeof(float));
    int *y = malloc((size_t)n * sizeof(int));
    float *dl = malloc((size_t)n * (size_t)classes * sizeof(float));
    struct adapt_rng r;
    adapt_rng_init(&r, seed, 1234);
    for (size_t i = 0; i < in; i++) x[i] = (float)(2.0 * adapt_rng_uniform(&r) - 1.0);
    for (int i = 0; i < n; i++) y[i] = (int)adapt_rng_below(&r, (uint32_t)classes);
    adapt_net_zero_grad(net);
    const float *lg = adapt_net_forward(net, x, n, 1);
    adapt_softmax_xent(lg, y, n, classes, dl, NULL);
    adapt_net_backward(net, dl, n);
    int checked = 0, kinks = 0;
    for (int p = 0; p < net->nparam; p++) {
        struct adapt_param *pp = net->param[p];
        if (pp->role == ADAPT_PARAM_BUFFER) continue;
        for (int k = 0; k < per_tensor; k++) {
            size_t i = adapt_rng_below(&r, (uint32_t)pp->value.numel);
            double an = pp->grad.data[i], tol = 3e-3 + 5e-2 * fabs(an);
            double fd = fd_at(net, pp, i, x, y, n, 1e-3);
            checked++;
            if (fabs(fd - an) <= tol) continue;
            double fd2 = fd_at(net, pp, i, x, y, n, 3.3e-3);
            if (max_kinks > 0 && fabs(fd2 - an) <= tol) continue;
            if (++kinks > max_kinks)
                ck_abort_msg("%s: %s[%zu]: finite differences %.6g (h 1e-3), %.6g (h 3.3e-3), "
                             "backward %.6g",
                             name, pp->name, i, fd, fd2, an);
        }
    }
    ck_assert_int_gt(checked, 0);
    free(x);
    free(y);
    free(dl);
    adapt_net_free(net);
}

/* LeNet-5 is smooth (tanh, average pooling): no kinks allowed. */
START_TEST(test_gradcheck_lenet5) { gradcheck_model("lenet5", 3, 10, 11, 12, 0); }
END_TEST
START_TEST(test_gradcheck_alexnet) { gradcheck_model("alexnet_cifar", 2, 10, 12, 8, 1); }
END_TEST
/* ResNet-20: 3 sampled entries per tensor (1 in quick mode, which still visits every tensor) */
START_TEST(test_gradcheck_resnet20)
{
    gradcheck_model("resnet20", 4, 10, 13, tu_quick() ? 1 : 3, 2);
}
END_TEST

/* A described network of the newer kinds, smooth and with kinks: gelu (both forms), hardswish,
 * a concat of three branches, max and average pools with padding (one not counting the padding).
 * The kinks (max pooling, hardswish at +-3) allow 2 coordinates to cross one. */
START_TEST(test_gradcheck_described_kinds)
{
    char dir[256], path[300];
    tu_tmpdir_make(dir, sizeof dir, "models");
    snprintf(path, sizeof path, "%s/kinds.model", dir);
    tu_write_text(path, "input 3 12 12\n"
                        "conv2d stem out=8 k=3 pad=1\n"
                        "gelu act0\n"
                        "maxpool2d pool0 k=3 stride=2 pad=1\n"
                        "conv2d b1 out=4 k=1\n"
                        "hardswish h1\n"
                        "conv2d b2 in=pool0 out=4 k=3 pad=1\n"
                        "gelu g2 approximate=tanh\n"
                        "avgpool2d b3 in=pool0 k=3 stride=1 pad=1 count_include_pad=0\n"
                        "concat mix in=h1,g2,b3\n"
                        "avgpool2d pool1 k=2 stride=2 pad=1\n"
                        "maxpool2d pool2 k=2\n"
                        "flatten f\n"
                        "linear fc out=classes\n");
    struct adapt_net *net = adapt_model_build(path, 10);
    ck_assert_msg(net, "%s", adapt_error_message());
    const int *mix = net->nodes[8].layer->out_dim;
    ck_assert_int_eq(net->nodes[8].layer->nin, 3);
    ck_assert(mix[0] == 16 && mix[1] == 6 && mix[2] == 6);
    ck_assert_int_eq(net->nodes[12].layer->in_dim[0][0], 16 * 2 * 2);
    adapt_net_free(net);
    gradcheck_model(path, 3, 10, 14, 8, 2);
    tu_tmpdir_remove(dir);
}
END_TEST

/* Errors: unknown model, too few classes, shape mismatch on add. */
START_TEST(test_errors)
{
    ck_assert_ptr_null(adapt_model_build("nosuchnet", 10));
    ck_assert_ptr_nonnull(strstr(adapt_error_message(), "nosuchnet"));
    ck_assert_ptr_null(adapt_model_build("lenet5", 1));
    int in[3] = {1, 8, 8};
    struct adapt_net *net = adapt_net_alloc("t", in, 10);
    int wrong[3] = {2, 8, 8};
    ck_assert_int_eq(adapt_net_add(net, adapt_relu_create("r", wrong), 0, -1), -1);
    ck_assert_ptr_nonnull(strstr(adapt_error_message(), "expects"));
    adapt_net_free(net);
}
END_TEST

/* The limits the description reader checks are the engine's (src/graph/graph.h): a name of
 * ADAPT_GRAPH_LAYER_NAME_MAX = 50 characters builds, with checkpoint keys up to
 * NAME.running_mean (63 characters), and the engine refuses 51 with that number; the floats
 * the reader accepts at the edges build. */
START_TEST(test_limits_shared_with_graph)
{
    static const char name50[] = "a23456789b23456789c23456789d23456789e23456789f2345";
    char text[512], name51[64];
    snprintf(text, sizeof text,
             "input 1 4 4\nbatchnorm2d %s eps=1.1754944e-38\ndropout d p=0.99999994\nflatten f\n"
             "linear %.49sZ out=classes\n",
             name50, name50);
    struct adapt_graph *g = NULL;
    ck_assert_int_eq(adapt_graph_parse(&g, text, "t.model", 10, NULL), ADAPT_OK);
    struct adapt_net *net = adapt_net_from_graph(g);
    ck_assert_msg(net, "%s", adapt_error_message());
    ck_assert_int_eq(adapt_net_finalize(net, 1), ADAPT_OK);
    ck_assert_uint_eq(strlen(net->param[2]->name), 63);
    ck_assert_ptr_nonnull(strstr(net->param[2]->name, "f2345.running_mean"));
    ck_assert(net->nodes[1].layer->p < 1.0f);
    adapt_net_free(net);
    adapt_graph_free(g);
    int in[3] = {1, 4, 4};
    snprintf(name51, sizeof name51, "%sX", name50);
    ck_assert_ptr_null(adapt_relu_create(name51, in));
    ck_assert_ptr_nonnull(strstr(adapt_error_message(), "is longer than 50 characters"));
}
END_TEST

/* Constructors check the products they keep in int: before, flatten of 2^32 + 4 elements gave
 * 4 features, and the convolutions' Cin*k*k of 2^36 wrapped. */
START_TEST(test_int_products)
{
    const int big[3] = {2, 33025, 65026}, deep[3] = {65536, 1, 1};
    ck_assert_ptr_null(adapt_flatten_create("f", big));
    ck_assert_ptr_nonnull(strstr(adapt_error_message(), "has more than 2147483647 elements"));
    ck_assert_ptr_null(adapt_conv2d_create("c", deep, 1, 1024, 1, 512, 0));
    ck_assert_ptr_nonnull(strstr(adapt_error_message(), "more than 2147483647 elements"));
    ck_assert_ptr_null(adapt_gconv2d_create("g", deep, 65536, 1024, 1, 512, 2, 1, 0));
    ck_assert_ptr_nonnull(strstr(adapt_error_message(), "more than 2147483647 elements"));
    const int wide[3] = {1, 1, 1 << 20};
    ck_assert_ptr_null(adapt_linear_create("l", wide, 4096, 1));
    ck_assert_ptr_nonnull(strstr(adapt_error_message(), "more than 2147483647"));
}
END_TEST

/* The GEMMs go to OpenBLAS (not GSL's reference CBLAS, which a wrong link
 * order would silently pick up): the library that defines cblas_sgemm in
 * this process is libopenblas, and it is the OpenMP build. */
START_TEST(test_links_openblas)
{
    Dl_info info;
    ck_assert(dladdr((void *)cblas_sgemm, &info) != 0);
    ck_assert_ptr_nonnull(info.dli_fname);
    ck_assert_msg(strstr(info.dli_fname, "openblas") != NULL, "cblas_sgemm comes from %s",
                  info.dli_fname);
    /* openblas_get_parallel(): 0 sequential, 1 pthreads, 2 OpenMP */
    ck_assert_int_eq(openblas_get_parallel(), 2);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("models");
    TCase *tc = tcase_create("structure");
    tcase_add_test(tc, test_links_openblas);
    tcase_add_test(tc, test_param_counts);
    tcase_add_test(tc, test_param_counts_c100);
    tcase_add_test(tc, test_state_dict_names);
    tcase_add_test(tc, test_init);
    tcase_add_test(tc, test_errors);
    tcase_add_test(tc, test_limits_shared_with_graph);
    tcase_add_test(tc, test_int_products);
    suite_add_tcase(s, tc);
    TCase *tg = tcase_create("gradcheck");
    tcase_set_timeout(tg, 300); /* about 25 s on an idle 2-core machine */
    tcase_add_test(tg, test_gradcheck_lenet5);
    tcase_add_test(tg, test_gradcheck_alexnet);
    tcase_add_test(tg, test_gradcheck_resnet20);
    tcase_add_test(tg, test_gradcheck_described_kinds);
    suite_add_tcase(s, tg);
    return tu_run_suite(s, CK_FORK_GETENV);
}
