/* tests/test_graphamp.c: graph precision propagation (src/policy/graphamp.h) on the built-in
 * LeNet-5 and ResNet-20 graphs and a small graph with a branch, the presets and both kinds
 * of override, the errors naming their key, and the amp and fixed policies' precision state
 * under it. Every expected result is derived in the comment above it from the rules in
 * graphamp.h: allow low, deny float32, infer low iff every consumer is low (the last layer's
 * consumer is the loss, float32); a low non-unit takes the format of its first low consumer,
 * else of the nearest low unit before it. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/config/config.h"
#include "src/graph/graph.h"
#include "src/net/net.h"
#include "src/policy/graphamp.h"
#include "src/policy/policy.h"
#include "tests/testutil.h"

/* The resolved graph of g under rules r; fails the test on error. */
static struct adapt_gamp *resolve(const struct adapt_graph *g, const struct adapt_gamp_rules *r)
{
    struct adapt_gamp_layer *l = calloc((size_t)g->n_nodes, sizeof *l);
    ck_assert_ptr_nonnull(l);
    adapt_gamp_layers_from_graph(g, l);
    struct adapt_gamp *out = NULL;
    enum adapt_status st = adapt_gamp_resolve(&out, l, g->n_nodes, r);
    ck_assert_msg(st == ADAPT_OK, "%s", adapt_error_message());
    free(l);
    return out;
}

/* The status of resolving g under r (ADAPT_OK frees the result). */
static enum adapt_status resolve_status(const struct adapt_graph *g,
                                        const struct adapt_gamp_rules *r)
{
    struct adapt_gamp_layer l[64];
    ck_assert_int_le(g->n_nodes, 64);
    adapt_gamp_layers_from_graph(g, l);
    struct adapt_gamp *out = NULL;
    enum adapt_status st = adapt_gamp_resolve(&out, l, g->n_nodes, r);
    adapt_gamp_free(out);
    return st;
}

static int node_of(const struct adapt_graph *g, const char *name)
{
    for (int i = 0; i < g->n_nodes; i++)
        if (!strcmp(g->nodes[i].name, name)) return i;
    ck_abort_msg("no layer %s", name);
    return -1;
}

/* Layer `name` is low in unit fmt's format (fmt >= 0) or float32 (fmt = -1). */
static void expect(const struct adapt_graph *g, const struct adapt_gamp *a, const char *name,
                   int fmt)
{
    int i = node_of(g, name);
    ck_assert_msg(a->low[i] == (fmt >= 0), "%s: low %d, expected %d", name, a->low[i], fmt >= 0);
    ck_assert_msg(a->fmt_unit[i] == fmt, "%s: format of unit %d, expected %d", name, a->fmt_unit[i],
                  fmt);
}

static void expect_set(const struct adapt_graph *g, const struct adapt_gamp *a, const char *name,
                       enum adapt_gamp_set set, enum adapt_gamp_source src)
{
    int i = node_of(g, name);
    ck_assert_msg(a->set[i] == set && a->source[i] == src, "%s: set %s from %s", name,
                  adapt_gamp_set_names[a->set[i]], adapt_gamp_source_names[a->source[i]]);
}

static struct adapt_graph *load(const char *name)
{
    struct adapt_graph *g = NULL;
    enum adapt_status st = adapt_graph_load(&g, name, 10, NULL);
    ck_assert_msg(st == ADAPT_OK, "%s", adapt_error_message());
    return g;
}

/* LeNet-5: 0 conv, 1 tanh, 2 avgpool, 3 conv, 4 tanh, 5 avgpool, 6 conv, 7 tanh, 8 flatten,
 * 9 linear, 10 tanh, 11 linear; units 0, 3, 6, 9, 11 are units 0..4; every layer has one
 * consumer, the next.
 * default: tanh, avgpool and flatten infer. Upstream: 11 allow (unit 4); 10 -> 11 low, format
 * of unit 4; 9 unit 3; 8 -> 9: unit 3; 7 -> 8: unit 3; 6 unit 2; 5 -> 6: unit 2; 4: unit 2;
 * 3 unit 1; 2, 1: unit 1; 0 unit 0. Every layer low.
 * conservative: tanh and avgpool denied (float32); flatten infers from linear 9: unit 3.
 * aggressive: tanh and avgpool allowed, flatten infers: every layer low, the same formats as
 * default (each allowed non-unit has its low consumer). */
START_TEST(test_lenet5_presets)
{
    struct adapt_graph *g = load("lenet5");
    struct adapt_gamp_rules r;
    static const char *const names[12] = {"0", "1", "2", "3", "4",  "5",
                                          "6", "7", "8", "9", "10", "11"};
    static const int def[12] = {0, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4};
    static const int cons[12] = {0, -1, -1, 1, -1, -1, 2, -1, 3, 3, -1, 4};
    adapt_gamp_rules_preset(&r, ADAPT_CONFIG_GRAPH_DEFAULT);
    struct adapt_gamp *a = resolve(g, &r);
    for (int i = 0; i < 12; i++) expect(g, a, names[i], def[i]);
    expect_set(g, a, "1", ADAPT_GAMP_INFER, ADAPT_GAMP_FROM_PRESET);
    adapt_gamp_free(a);
    adapt_gamp_rules_preset(&r, ADAPT_CONFIG_GRAPH_CONSERVATIVE);
    a = resolve(g, &r);
    for (int i = 0; i < 12; i++) expect(g, a, names[i], cons[i]);
    expect_set(g, a, "2", ADAPT_GAMP_DENY, ADAPT_GAMP_FROM_PRESET);
    expect_set(g, a, "8", ADAPT_GAMP_INFER, ADAPT_GAMP_FROM_PRESET);
    adapt_gamp_free(a);
    adapt_gamp_rules_preset(&r, ADAPT_CONFIG_GRAPH_AGGRESSIVE);
    a = resolve(g, &r);
    for (int i = 0; i < 12; i++) expect(g, a, names[i], def[i]);
    expect_set(g, a, "10", ADAPT_GAMP_ALLOW, ADAPT_GAMP_FROM_PRESET);
    adapt_gamp_free(a);
    adapt_graph_free(g);
}
END_TEST

/* LeNet-5, per-layer overrides win over the preset: default with graph_float = 11 denies the
 * classifier: 11 float32; 10 (tanh, infer) now has a float32 consumer: float32; 9 stays
 * allowed (unit 3); the rest as default. graph_low = 1 under conservative puts tanh 1 in the
 * allow set: low; its only consumer, avgpool 2, is denied (float32), so it takes the format
 * of the nearest low unit before it, conv 0 (unit 0). */
START_TEST(test_lenet5_layer_overrides)
{
    struct adapt_graph *g = load("lenet5");
    struct adapt_gamp_rules r;
    adapt_gamp_rules_preset(&r, ADAPT_CONFIG_GRAPH_DEFAULT);
    r.flt = "11";
    r.flt_key = "quantization.graph_float";
    struct adapt_gamp *a = resolve(g, &r);
    expect(g, a, "11", -1);
    expect(g, a, "10", -1);
    expect(g, a, "9", 3);
    expect(g, a, "8", 3);
    expect(g, a, "0", 0);
    expect_set(g, a, "11", ADAPT_GAMP_DENY, ADAPT_GAMP_FROM_LAYER);
    adapt_gamp_free(a);
    adapt_gamp_rules_preset(&r, ADAPT_CONFIG_GRAPH_CONSERVATIVE);
    r.low = " 1 ";
    r.low_key = "quantization.graph_low";
    a = resolve(g, &r);
    expect(g, a, "1", 0);
    expect(g, a, "2", -1);
    expect(g, a, "4", -1);
    expect_set(g, a, "1", ADAPT_GAMP_ALLOW, ADAPT_GAMP_FROM_LAYER);
    adapt_gamp_free(a);
    adapt_graph_free(g);
}
END_TEST

/* ResNet-20 (models/resnet.model): units are conv1 (0), then per block conv1, conv2 and, in
 * the first block of stages 2 and 3, the shortcut conv after them (layer1.0: 1, 2; layer1.1:
 * 3, 4; layer1.2: 5, 6; layer2.0: 7, 8, shortcut 9; layer2.1: 10, 11; layer2.2: 12, 13;
 * layer3.0: 14, 15, shortcut 16; layer3.1: 17, 18; layer3.2: 19, 20), linear 21.
 * default (batch norm denied, everything else but the units infers):
 *   every bn float32; the chain avgpool -> flatten -> linear is low (unit 21), so is the last
 *   relu2; each add's consumer is its relu2, each relu2's consumers are the next block's
 *   conv1 and add (or conv1 and shortcut conv): all low, so every add and relu is low. The
 *   stem relu reads into layer1.0.conv1 (unit 1) and layer1.0.add; the first, conv1, gives
 *   the format: unit 1. layer1.0.add -> relu2 -> layer1.1.conv1 first: unit 3. layer1.2.relu2
 *   feeds layer2.0.conv1 (unit 7) and layer2.0.shortcut.0 (unit 9): unit 7.
 * conservative (add, avgpool and batch norm denied):
 *   every add and bn float32; a relu2 that feeds the next block's add is float32 (one float32
 *   consumer), but layer1.2.relu2 and layer2.2.relu2 feed two convs (the projection
 *   shortcut): low; layer3.2.relu2 feeds the denied avgpool: float32; flatten -> linear:
 *   low (unit 21); each relu1 feeds its conv2: low; the stem relu feeds layer1.0.add: float32.
 * aggressive: everything allowed but flatten (infers from linear): every layer low, bn in
 *   the format of its consumer (layer1.0.bn1 -> relu1 -> conv2: unit 2). */
START_TEST(test_resnet20_residual)
{
    struct adapt_graph *g = load("resnet20");
    ck_assert_int_eq(g->n_units, 22);
    struct adapt_gamp_rules r;
    adapt_gamp_rules_preset(&r, ADAPT_CONFIG_GRAPH_DEFAULT);
    struct adapt_gamp *a = resolve(g, &r);
    int nlow = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        int bn = g->nodes[i].kind == ADAPT_GRAPH_BATCHNORM2D;
        ck_assert_msg(a->low[i] == !bn, "%s", g->nodes[i].name);
        nlow += a->low[i];
    }
    ck_assert_int_eq(nlow, g->n_nodes - 21); /* 21 batch norms */
    expect(g, a, "relu", 1);
    expect(g, a, "layer1.0.add", 3);
    expect(g, a, "layer1.0.relu2", 3);
    expect(g, a, "layer1.2.relu2", 7);
    expect(g, a, "layer3.2.relu2", 21);
    expect(g, a, "avgpool", 21);
    expect(g, a, "flatten", 21);
    expect(g, a, "linear", 21);
    expect(g, a, "layer2.0.shortcut.0", 9);
    expect(g, a, "layer2.0.shortcut.1", -1);
    adapt_gamp_free(a);

    adapt_gamp_rules_preset(&r, ADAPT_CONFIG_GRAPH_CONSERVATIVE);
    a = resolve(g, &r);
    expect(g, a, "relu", -1);
    expect(g, a, "layer1.0.relu1", 2);
    expect(g, a, "layer1.0.add", -1);
    expect(g, a, "layer1.0.relu2", -1);
    expect(g, a, "layer1.1.relu2", -1);
    expect(g, a, "layer1.2.relu2", 7);
    expect(g, a, "layer2.2.relu2", 14);
    expect(g, a, "layer3.2.relu2", -1);
    expect(g, a, "avgpool", -1);
    expect(g, a, "flatten", 21);
    expect(g, a, "layer3.1.conv2", 18);
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].unit >= 0) ck_assert(a->low[i]);
    adapt_gamp_free(a);

    adapt_gamp_rules_preset(&r, ADAPT_CONFIG_GRAPH_AGGRESSIVE);
    a = resolve(g, &r);
    for (int i = 0; i < g->n_nodes; i++) ck_assert_msg(a->low[i], "%s", g->nodes[i].name);
    expect(g, a, "layer1.0.bn1", 2);
    expect(g, a, "bn1", 1);
    adapt_gamp_free(a);
    adapt_graph_free(g);
}
END_TEST

/* A branch: c1 -> r1 -> c2 -> a(c2, s) -> f -> fc, and r1 -> s (sigmoid) -> a.
 * Nodes 0 c1 (unit 0), 1 r1, 2 c2 (unit 1), 3 s, 4 a, 5 f, 6 fc (unit 2). r1 has two
 * consumers, c2 and s. */
static const char branch_model[] = "input 1 8 8\n"
                                   "conv2d  c1 out=4 k=3 pad=1\n"
                                   "relu    r1\n"
                                   "conv2d  c2 out=4 k=3 pad=1\n"
                                   "sigmoid s in=r1\n"
                                   "add     a in=c2,s\n"
                                   "flatten f\n"
                                   "linear  fc out=classes\n";

/* default: fc low (unit 2); f, a, s infer from their single consumer: unit 2; c2 low; r1's
 * consumers c2 and s are both low: low, in the format of the first, c2 (unit 1).
 * conservative: s and a denied; f infers from fc (unit 2); r1 has a float32 consumer (s):
 * float32 (every consumer must be low), although c2 is low. */
START_TEST(test_branch_presets)
{
    struct adapt_graph *g = NULL;
    ck_assert_int_eq(adapt_graph_parse(&g, branch_model, "branch.model", 10, NULL), ADAPT_OK);
    struct adapt_gamp_rules r;
    adapt_gamp_rules_preset(&r, ADAPT_CONFIG_GRAPH_DEFAULT);
    struct adapt_gamp *a = resolve(g, &r);
    static const char *const names[7] = {"c1", "r1", "c2", "s", "a", "f", "fc"};
    static const int def[7] = {0, 1, 1, 2, 2, 2, 2}, cons[7] = {0, -1, 1, -1, -1, 2, 2};
    for (int i = 0; i < 7; i++) expect(g, a, names[i], def[i]);
    adapt_gamp_free(a);
    adapt_gamp_rules_preset(&r, ADAPT_CONFIG_GRAPH_CONSERVATIVE);
    a = resolve(g, &r);
    for (int i = 0; i < 7; i++) expect(g, a, names[i], cons[i]);
    adapt_gamp_free(a);
    adapt_graph_free(g);
}
END_TEST

/* Overrides on the branch, each against the conservative preset:
 * - graph_infer = sigmoid,add (per kind): s and a infer, so the result is default's.
 * - graph_low = s (per layer): s allowed; its consumer a is float32, so it takes the nearest
 *   low unit before it, c2 (unit 1); r1's consumers c2 and s are now low: low (unit 1).
 * - graph_deny = conv2d (per kind): c1 and c2 float32; r1 (consumer c2 float32) float32;
 *   fc still low, f (unit 2); with graph_low = c1 as well, the layer override wins: c1 low.
 * - graph_float = c2 under default: c2 float32, so r1 float32; s, a, f low (unit 2). */
START_TEST(test_branch_overrides)
{
    struct adapt_graph *g = NULL;
    ck_assert_int_eq(adapt_graph_parse(&g, branch_model, "branch.model", 10, NULL), ADAPT_OK);
    static const char *const names[7] = {"c1", "r1", "c2", "s", "a", "f", "fc"};
    struct adapt_gamp_rules r;
    adapt_gamp_rules_preset(&r, ADAPT_CONFIG_GRAPH_CONSERVATIVE);
    ck_assert_int_eq(
        adapt_gamp_rules_kinds(&r, "quantization.graph_infer", "sigmoid, add", ADAPT_GAMP_INFER),
        ADAPT_OK);
    struct adapt_gamp *a = resolve(g, &r);
    static const int inf[7] = {0, 1, 1, 2, 2, 2, 2};
    for (int i = 0; i < 7; i++) expect(g, a, names[i], inf[i]);
    expect_set(g, a, "s", ADAPT_GAMP_INFER, ADAPT_GAMP_FROM_KIND);
    adapt_gamp_free(a);

    adapt_gamp_rules_preset(&r, ADAPT_CONFIG_GRAPH_CONSERVATIVE);
    r.low = "s";
    r.low_key = "quantization.graph_low";
    a = resolve(g, &r);
    static const int low_s[7] = {0, 1, 1, 1, -1, 2, 2};
    for (int i = 0; i < 7; i++) expect(g, a, names[i], low_s[i]);
    adapt_gamp_free(a);

    adapt_gamp_rules_preset(&r, ADAPT_CONFIG_GRAPH_CONSERVATIVE);
    ck_assert_int_eq(
        adapt_gamp_rules_kinds(&r, "quantization.graph_deny", "conv2d", ADAPT_GAMP_DENY), ADAPT_OK);
    a = resolve(g, &r);
    static const int deny_conv[7] = {-1, -1, -1, -1, -1, 2, 2};
    for (int i = 0; i < 7; i++) expect(g, a, names[i], deny_conv[i]);
    adapt_gamp_free(a);
    r.low = "c1";
    r.low_key = "quantization.graph_low";
    a = resolve(g, &r);
    expect(g, a, "c1", 0);
    expect(g, a, "c2", -1);
    expect_set(g, a, "c1", ADAPT_GAMP_ALLOW, ADAPT_GAMP_FROM_LAYER);
    adapt_gamp_free(a);

    adapt_gamp_rules_preset(&r, ADAPT_CONFIG_GRAPH_DEFAULT);
    r.flt = "c2";
    r.flt_key = "quantization.graph_float";
    a = resolve(g, &r);
    static const int flt_c2[7] = {0, -1, -1, 2, 2, 2, 2};
    for (int i = 0; i < 7; i++) expect(g, a, names[i], flt_c2[i]);
    adapt_gamp_free(a);
    adapt_graph_free(g);
}
END_TEST

static void expect_error(enum adapt_status st, const char *a, const char *b)
{
    ck_assert_int_eq(st, ADAPT_EINVAL);
    const char *m = adapt_error_message();
    ck_assert_msg(strstr(m, a) && strstr(m, b), "message \"%s\" lacks \"%s\" or \"%s\"", m, a, b);
}

/* Bad names: an unknown kind or an empty one, a kind in two per-kind keys, an unknown layer,
 * a layer in both per-layer keys, an empty layer name; each message names the key and the
 * bad value. The same through the configuration and the amp policy. */
START_TEST(test_bad_names)
{
    struct adapt_gamp_rules r;
    adapt_gamp_rules_preset(&r, ADAPT_CONFIG_GRAPH_DEFAULT);
    expect_error(
        adapt_gamp_rules_kinds(&r, "quantization.graph_deny", "tanh,conv3d", ADAPT_GAMP_DENY),
        "quantization.graph_deny", "\"conv3d\" is not a layer kind");
    expect_error(
        adapt_gamp_rules_kinds(&r, "quantization.graph_allow", "add,,relu", ADAPT_GAMP_ALLOW),
        "quantization.graph_allow", "an empty name");
    adapt_gamp_rules_preset(&r, ADAPT_CONFIG_GRAPH_DEFAULT);
    ck_assert_int_eq(
        adapt_gamp_rules_kinds(&r, "quantization.graph_allow", "tanh", ADAPT_GAMP_ALLOW), ADAPT_OK);
    expect_error(
        adapt_gamp_rules_kinds(&r, "quantization.graph_deny", "relu,tanh", ADAPT_GAMP_DENY),
        "quantization.graph_deny = relu,tanh", "tanh is already in quantization.graph_allow");

    struct adapt_graph *g = load("lenet5");
    adapt_gamp_rules_preset(&r, ADAPT_CONFIG_GRAPH_DEFAULT);
    r.flt = "11,fc3";
    r.flt_key = "quantization.graph_float";
    expect_error(resolve_status(g, &r), "quantization.graph_float", "no layer named \"fc3\"");
    r.flt = "9";
    r.low = "3,9";
    r.low_key = "quantization.graph_low";
    expect_error(resolve_status(g, &r), "quantization.graph_float",
                 "layer 9 is also in quantization.graph_low");
    r.flt = "";
    r.low = "3,";
    ck_assert_int_eq(resolve_status(g, &r), ADAPT_OK); /* a trailing comma ends the list */
    r.low = ",3";
    expect_error(resolve_status(g, &r), "quantization.graph_low", "an empty layer name");
    adapt_graph_free(g);

    static struct adapt_config cfg;
    adapt_config_init(&cfg);
    ck_assert_int_eq(adapt_config_set(&cfg, "quantization.graph_infer=sigmoid,Tanh"), ADAPT_OK);
    expect_error(adapt_gamp_rules_from_config(&r, &cfg), "quantization.graph_infer",
                 "\"Tanh\" is not a layer kind");
    struct adapt_net *net = adapt_model_build("lenet5", 10);
    ck_assert_ptr_nonnull(net);
    ck_assert_int_eq(adapt_net_finalize(net, 1), ADAPT_OK);
    adapt_config_init(&cfg);
    ck_assert_int_eq(adapt_config_set(&cfg, "policy.name=amp"), ADAPT_OK);
    ck_assert_int_eq(adapt_config_set(&cfg, "quantization.precision_propagation=graph"), ADAPT_OK);
    ck_assert_int_eq(adapt_config_set(&cfg, "quantization.graph_low=conv1"), ADAPT_OK);
    struct adapt_policy *p = NULL;
    expect_error(adapt_policy_alloc(&p, &cfg, net, 1), "quantization.graph_low",
                 "no layer named \"conv1\"");
    adapt_net_free(net);
}
END_TEST

/* precision_propagation = graph is refused with the adapt and muppet policies, naming both
 * keys; amp, fixed and fp32 take it. */
START_TEST(test_config_check)
{
    static struct adapt_config cfg;
    static const char *const ok[] = {"amp", "fixed", "fp32"}, *const bad[] = {"adapt", "muppet"};
    for (int i = 0; i < 3; i++) {
        char set[64];
        adapt_config_init(&cfg);
        snprintf(set, sizeof set, "policy.name=%s", ok[i]);
        ck_assert_int_eq(adapt_config_set(&cfg, set), ADAPT_OK);
        ck_assert_int_eq(adapt_config_set(&cfg, "quantization.precision_propagation=graph"),
                         ADAPT_OK);
        ck_assert_int_eq(adapt_config_check(&cfg), ADAPT_OK);
    }
    for (int i = 0; i < 2; i++) {
        char set[64];
        adapt_config_init(&cfg);
        snprintf(set, sizeof set, "policy.name=%s", bad[i]);
        ck_assert_int_eq(adapt_config_set(&cfg, set), ADAPT_OK);
        ck_assert_int_eq(adapt_config_set(&cfg, "quantization.precision_propagation=graph"),
                         ADAPT_OK);
        expect_error(adapt_config_check(&cfg), "quantization.precision_propagation = graph",
                     bad[i]);
    }
}
END_TEST

static struct adapt_net *lenet(void)
{
    struct adapt_net *net = adapt_model_build("lenet5", 10);
    ck_assert_ptr_nonnull(net);
    ck_assert_int_eq(adapt_net_finalize(net, 2), ADAPT_OK);
    adapt_net_init_params(net, 2385, 0.5);
    return net;
}

static struct adapt_policy *policy(struct adapt_config *cfg, struct adapt_net *net,
                                   const char *const *sets, int n)
{
    adapt_config_init(cfg);
    for (int i = 0; i < n; i++) ck_assert_int_eq(adapt_config_set(cfg, sets[i]), ADAPT_OK);
    ck_assert_int_eq(adapt_config_check(cfg), ADAPT_OK);
    struct adapt_policy *p = NULL;
    enum adapt_status st = adapt_policy_alloc(&p, cfg, net, 1);
    ck_assert_msg(st == ADAPT_OK, "%s", adapt_error_message());
    return p;
}

/* The amp policy under graph propagation on LeNet-5 (default preset, graph_float = 11):
 * units 0-3 fp16 and active, unit 4 (layer 11) inactive: float32 weights (the master), no
 * input or output rounding. Layers 0-9 are low: rounded outputs, except flatten 8, whose
 * input (tanh 7) is already rounded in the same format (2: rounded again only in a format
 * that does not keep subsets, MX or a plugin), and linear 9, whose only consumer (tanh 10,
 * feeding 11) is float32: it reads 9's float32 output. Units 0-3 round
 * their inputs; conv 3, 6 and linear 9 read outputs rounded in fp16 already, which the in-hook
 * skips when it runs (fp16 within fp16), so the flags are still set. With unit
 * propagation the same policy rounds the outputs of the units only (the rules). */
START_TEST(test_amp_policy_state)
{
    static struct adapt_config cfg;
    struct adapt_net *net = lenet();
    static const char *const sets[] = {"policy.name=amp",
                                       "quantization.precision_propagation=graph",
                                       "quantization.graph_float=11"};
    struct adapt_policy *p = policy(&cfg, net, sets, 3);
    struct adapt_precision *pr = p->prec;
    for (int u = 0; u < 4; u++) ck_assert(pr->u[u].active);
    ck_assert(!pr->u[4].active);
    static const unsigned char rout[12] = {1, 1, 1, 1, 1, 1, 1, 1, 2, 0, 0, 0};
    static const unsigned char rin[12] = {1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0};
    for (int i = 0; i < 12; i++) {
        ck_assert_msg(pr->round_out[i] == rout[i], "layer %d: round_out %d", i, pr->round_out[i]);
        ck_assert_msg(pr->round_in[i] == rin[i], "layer %d: round_in %d", i, pr->round_in[i]);
    }
    char txt[64];
    ck_assert_str_eq(adapt_policy_layer_precision(p, 10, txt, sizeof txt), "float32");
    ck_assert_str_eq(adapt_policy_layer_precision(p, 8, txt, sizeof txt), "fp16");
    adapt_precision_refresh_weights(pr, 1);
    const struct adapt_param *w4 = &pr->u[4].layer->param[0], *w0 = &pr->u[0].layer->param[0];
    ck_assert_ptr_eq(w4->use, w4->value.data);
    ck_assert_ptr_eq(w0->use, pr->u[0].wq);
    /* the trace's view: an inactive unit is 32 bits */
    struct adapt_trace_unit_state us;
    adapt_policy_unit_state(p, 4, &us);
    ck_assert_int_eq(us.wl, 32);
    adapt_policy_unit_state(p, 0, &us);
    ck_assert_int_eq(us.wl, 16);
    adapt_policy_free(p);

    static const char *const unit_sets[] = {"policy.name=amp"};
    p = policy(&cfg, net, unit_sets, 1);
    ck_assert_ptr_null(p->gamp);
    ck_assert_ptr_null(adapt_policy_layer_precision(p, 0, txt, sizeof txt));
    for (int i = 0; i < 12; i++) {
        int unit = net->nodes[i].layer->is_unit;
        ck_assert_int_eq(p->prec->round_out[i], unit);
        ck_assert_int_eq(p->prec->round_in[i], unit);
    }
    for (int u = 0; u < 5; u++) ck_assert(p->prec->u[u].active);
    adapt_policy_free(p);
    adapt_net_free(net);
}
END_TEST

/* A training forward of LeNet-5 (2 samples) under the fixed policy, <8,4> nearest, with graph
 * propagation and the given preset. */
static struct adapt_policy *fixed_forward(struct adapt_config *cfg, struct adapt_net *net,
                                          const char *preset, int quant_outputs)
{
    char pre[64], qo[64];
    snprintf(pre, sizeof pre, "quantization.graph_preset=%s", preset);
    snprintf(qo, sizeof qo, "quantization.quant_outputs=%s", quant_outputs ? "true" : "false");
    const char *const sets[] = {
        "policy.name=fixed",
        "policy.format=fixed(8,4)",
        "quantization.rounding=nearest",
        "quantization.precision_propagation=graph",
        pre,
        qo,
    };
    struct adapt_policy *p = policy(cfg, net, sets, 6);
    adapt_precision_refresh_weights(p->prec, 1);
    static float x[2 * 32 * 32];
    for (int i = 0; i < 2 * 32 * 32; i++) x[i] = (float)((i * 37 % 101) - 50) * 0.031f;
    adapt_net_forward(net, x, 2, 1);
    return p;
}

/* How many of layer `node`'s outputs (2 samples) are off the grid k/16. */
static size_t off_grid(const struct adapt_net *net, int node)
{
    size_t off = 0;
    for (size_t i = 0; i < net->act_numel[node + 1] * 2; i++) {
        float v = net->act[node + 1][i] * 16.0f;
        off += v != nearbyintf(v);
    }
    return off;
}

/* The fixed policy under graph propagation, conservative preset, <8,4> nearest: after a
 * training forward the outputs read by low layers are on the grid k/16: flatten 8 (read by
 * linear 9; its input, tanh 7, is float32, so it rounds itself: 1) and the logits 11
 * (round_logits). The convolutions 0, 3, 6 and linear 9 are low but their only consumers are
 * tanh layers (denied, float32): GraphAMP's allowed operator writes float32, and only an edge
 * into a low consumer is cast, so their outputs stay float32, as does tanh 1's. Almost none of
 * those values are multiples of 1/16. quant_outputs = false keeps every output float32. */
START_TEST(test_fixed_policy_outputs)
{
    static struct adapt_config cfg;
    struct adapt_net *net = lenet();
    struct adapt_policy *p = fixed_forward(&cfg, net, "conservative", 1);
    static const int low_read[] = {8, 11}, float_read[] = {0, 1, 3, 6, 9};
    for (int k = 0; k < 2; k++)
        ck_assert_msg(off_grid(net, low_read[k]) == 0, "layer %d: %zu values off the grid",
                      low_read[k], off_grid(net, low_read[k]));
    for (int k = 0; k < 5; k++)
        ck_assert_msg(off_grid(net, float_read[k]) > net->act_numel[float_read[k] + 1],
                      "layer %d: %zu of %zu values off the grid", float_read[k],
                      off_grid(net, float_read[k]), 2 * net->act_numel[float_read[k] + 1]);
    static const unsigned char rout[12] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 1};
    for (int i = 0; i < 12; i++) ck_assert_int_eq(p->prec->round_out[i], rout[i]);
    adapt_policy_free(p);

    p = fixed_forward(&cfg, net, "default", 0);
    for (int i = 0; i < 12; i++) ck_assert_int_eq(p->prec->round_out[i], 0);
    ck_assert_int_eq(p->prec->round_in[0], 1);
    adapt_policy_free(p);
    adapt_net_free(net);
}
END_TEST

/* conv 0 (allow) -> tanh 1 (deny) under conservative: tanh reads the convolution's float32
 * output bit for bit, the one the same layer computes from the same rounded input and weights
 * in a network with no rounding at all. Under default tanh 1 is low (infer, low consumer):
 * conv 0 rounds its output for it, and tanh reads values on the grid. */
START_TEST(test_deny_consumer_reads_float32)
{
    static struct adapt_config cfg;
    struct adapt_net *net = lenet(), *ref = lenet();
    struct adapt_policy *p = fixed_forward(&cfg, net, "conservative", 1);
    const struct adapt_unit_prec *u = &p->prec->u[0];
    struct adapt_layer *l = ref->nodes[0].layer;
    memcpy(l->param[0].value.data, u->wq, sizeof(float) * l->param[0].value.numel);
    memcpy(l->param[1].value.data, u->bq, sizeof(float) * l->param[1].value.numel);
    adapt_net_forward(ref, u->qin, 2, 1);
    ck_assert_uint_gt(off_grid(net, 0), 0);
    tu_expect_same_bits("tanh 1's input", net->act[1], ref->act[1], 2 * net->act_numel[1]);
    adapt_policy_free(p);

    p = fixed_forward(&cfg, net, "default", 1);
    ck_assert_int_eq(p->prec->round_out[0], 1);
    ck_assert_uint_eq(off_grid(net, 0), 0);
    adapt_policy_free(p);
    adapt_net_free(ref);
    adapt_net_free(net);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("graphamp");
    TCase *tc = tcase_create("graphamp");
    tcase_add_test(tc, test_lenet5_presets);
    tcase_add_test(tc, test_lenet5_layer_overrides);
    tcase_add_test(tc, test_resnet20_residual);
    tcase_add_test(tc, test_branch_presets);
    tcase_add_test(tc, test_branch_overrides);
    tcase_add_test(tc, test_bad_names);
    tcase_add_test(tc, test_config_check);
    tcase_add_test(tc, test_amp_policy_state);
    tcase_add_test(tc, test_fixed_policy_outputs);
    tcase_add_test(tc, test_deny_consumer_reads_float32);
    suite_add_tcase(s, tc);
    return tu_run_suite(s, CK_FORK);
}
