/* tests/test_graph.c: model descriptions (src/graph, doc/model-format.md): expressions,
 * repetition, labels, shapes and costs of the built-in files, and the refusal of bad
 * descriptions with the file, the line and what was expected. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "src/graph/graph.h"
#include "src/graph/internal.h"
#include "tests/testutil.h"

static int64_t ev(const char *s)
{
    struct graph_vars v = {0};
    snprintf(v.name[0], sizeof v.name[0], "depth");
    v.value[0] = 56;
    v.n = 1;
    int64_t x = 0;
    char err[200];
    ck_assert_msg(graph_eval(s, &v, &x, err, sizeof err), "%s: %s", s, err);
    return x;
}

static void ev_fails(const char *s, const char *want)
{
    struct graph_vars v = {0};
    int64_t x;
    char err[200] = "";
    ck_assert_msg(!graph_eval(s, &v, &x, err, sizeof err), "%s evaluated", s);
    ck_assert_msg(strstr(err, want), "%s: message '%s' lacks '%s'", s, err, want);
}

/* C's precedence and integer semantics (values worked out by hand, as C computes them). */
START_TEST(test_expressions)
{
    ck_assert_int_eq(ev("1 + 2 * 3"), 7);
    ck_assert_int_eq(ev("(1 + 2) * 3"), 9);
    ck_assert_int_eq(ev("(depth - 2) / 6"), 9);
    ck_assert_int_eq(ev("(depth - 2) % 6 == 0"), 1);
    ck_assert_int_eq(ev("16 << 2 - 1"), 32); /* + binds tighter than << */
    ck_assert_int_eq(ev("-7 / 2"), -3);     /* C truncates toward zero */
    ck_assert_int_eq(ev("-7 % 2"), -1);
    ck_assert_int_eq(ev("1 < 2 && 2 <= 2 || 0"), 1);
    ck_assert_int_eq(ev("3 > 1 ? 10 : 20"), 10);
    ck_assert_int_eq(ev("0 ? 1 : 0 ? 2 : 3"), 3);
    ck_assert_int_eq(ev("!0 + !5"), 1);
    ck_assert_int_eq(ev("256 >> 4 != 16"), 0);
    ev_fails("1 / 0", "division by zero");
    ev_fails("5 % (2 - 2)", "division by zero");
    ev_fails("width * 2", "unknown name 'width'");
    ev_fails("(1 + 2", "expected ')'");
    ev_fails("1 +", "ends too early");
    ev_fails("1 2", "unexpected text");
    ev_fails("4611686018427387904 * 2", "overflow");
    ev_fails("1 << 63", "shift count");
    ev_fails("1.5", "no fractions");
}
END_TEST

static struct adapt_graph *parse_ok(const char *text, int classes, const char *args)
{
    struct adapt_graph *g = NULL;
    enum adapt_status st = adapt_graph_parse(&g, text, "t.model", classes, args);
    ck_assert_msg(st == ADAPT_OK, "%s", adapt_error_message());
    return g;
}

/* repeat, if/else, label, {} names, in=, and the shapes and costs of each kind. */
START_TEST(test_repeat_labels_shapes)
{
    const char *text = "# two residual blocks\n"
                       "param blocks = 1\n"
                       "input 3 8 8\n"
                       "conv2d stem out=4 k=3 pad=1 bias=0\n"
                       "repeat b = 0..blocks\n"
                       "  label x\n"
                       "  let s = b == 1 ? 2 : 1\n"
                       "  conv2d blk{b}.c out=4<<b k=3 stride=s pad=1 bias=0\n"
                       "  batchnorm2d blk{b}.bn eps=1e-3\n"
                       "  if s != 1\n"
                       "    conv2d blk{b}.sc in=x out=8 k=1 stride=2 bias=0\n"
                       "    add blk{b}.add in=blk{b}.bn,blk{b}.sc\n"
                       "  else\n"
                       "    add blk{b}.add in=blk{b}.bn,x\n"
                       "  end\n"
                       "  relu blk{b}.relu\n"
                       "end\n"
                       "maxpool2d pool k=2\n"
                       "avgpool2d gap global=1\n"
                       "flatten f\n"
                       "linear fc out=classes\n"
                       "loss softmax_xent\n";
    struct adapt_graph *g = parse_ok(text, 5, NULL);
    static const char *const names[] = {"stem",     "blk0.c",  "blk0.bn", "blk0.add",
                                        "blk0.relu", "blk1.c",  "blk1.bn", "blk1.sc",
                                        "blk1.add", "blk1.relu", "pool",   "gap",
                                        "f",        "fc"};
    ck_assert_int_eq(g->n_nodes, 14);
    for (int i = 0; i < 14; i++) ck_assert_str_eq(g->nodes[i].name, names[i]);
    /* blk0.add reads blk0.bn (node 2) and the label x = stem (node 0) */
    ck_assert_int_eq(g->nodes[3].in[0], 2);
    ck_assert_int_eq(g->nodes[3].in[1], 0);
    /* blk1.sc reads x = blk0.relu (node 4), 4x8x8 -> 8x4x4 */
    ck_assert_int_eq(g->nodes[7].in[0], 4);
    ck_assert_int_eq(g->nodes[7].out_dim[0], 8);
    ck_assert_int_eq(g->nodes[7].out_dim[1], 4);
    ck_assert(g->nodes[2].eps == 1e-3 && g->nodes[2].momentum == 0.1);
    /* costs: stem 3*3*3*4 = 108 weights, 64 positions; pool 8x4x4 -> 8x2x2 reads 32*4 */
    ck_assert_int_eq(g->nodes[0].weights, 108);
    ck_assert_int_eq(g->nodes[0].macs, 108 * 64);
    ck_assert_int_eq(g->nodes[10].elementwise, 8 * 2 * 2 * 4);
    ck_assert_int_eq(g->nodes[11].k, 0);
    ck_assert_int_eq(g->nodes[11].elementwise, 8 * 2 * 2);
    ck_assert_int_eq(g->nodes[13].params, 8 * 5 + 5);
    ck_assert_int_eq(g->n_units, 5); /* stem, blk0.c, blk1.c, blk1.sc, fc */
    ck_assert_int_eq(g->nodes[7].unit, 3);
    adapt_graph_free(g);
    /* blocks = 0: the repeat runs once (b = 0) */
    g = parse_ok(text, 5, "blocks=0");
    ck_assert_int_eq(g->n_nodes, 5 + 4);
    ck_assert_str_eq(g->args, "blocks=0");
    adapt_graph_free(g);
}
END_TEST

/* The built-in files: the totals of doc/models.md (those of the engine's layers, asserted
 * layer by layer in test_models and test_perf), and ResNet's depth parameter. ResNet-32,
 * -56 and -110: the counts of the option-A CIFAR ResNets (464,154, 853,018 and 1,727,962 in
 * the widely used PyTorch CIFAR ResNet implementations) plus the two projection shortcuts
 * of option B, 16*32 + 2*32 + 32*64 + 2*64 = 2,752 parameters. */
START_TEST(test_builtin_files)
{
    static const struct {
        const char *name;
        int64_t params, macs;
        int units, c;
    } want[] = {{"lenet5", 61706, 416520, 5, 1},
                {"alexnet_cifar", 2472266, 14957056, 6, 3},
                {"alexnet_mnist", 2456778, 13965824, 6, 1},
                {"resnet20", 272474, 40813184, 22, 3},
                {"resnet32", 464154 + 2752, -1, 34, 3},
                {"resnet56", 853018 + 2752, -1, 58, 3},
                {"resnet110", 1727962 + 2752, -1, 112, 3},
                /* the usual PyTorch CIFAR VGG with batch norm (python/tests/test_model.py
                 * builds it in PyTorch and compares) */
                {"vgg11", 9231114, -1, 9, 3},
                {"vgg16", 14728266, -1, 14, 3},
                /* the usual PyTorch CIFAR MobileNet-v2 (python/tests/test_model.py) */
                {"mobilenetv2", 2296922, 91154944, 58, 3},
                /* 1024*512 + 512 + 512*512 + 512 + 512*10 + 10 */
                {"mlp", 792586, 791552, 3, 1}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        struct adapt_graph *g = NULL;
        ck_assert_msg(adapt_graph_load(&g, want[i].name, 10, NULL) == ADAPT_OK, "%s: %s",
                      want[i].name, adapt_error_message());
        ck_assert_str_eq(g->name, want[i].name);
        ck_assert_int_eq(g->params, want[i].params);
        if (want[i].macs > 0) ck_assert_int_eq(g->macs, want[i].macs);
        ck_assert_int_eq(g->n_units, want[i].units);
        ck_assert_int_eq(g->in_chw[0], want[i].c);
        adapt_graph_free(g);
    }
    struct adapt_graph *g = NULL;
    /* resnet with depth=32 through model args equals resnet32 */
    ck_assert_int_eq(adapt_graph_load(&g, "resnet", 100, "depth=32"), ADAPT_OK);
    ck_assert_int_eq(g->params, 464154 + 2752 + 90 * 65);
    adapt_graph_free(g);
    ck_assert_int_eq(adapt_graph_load(&g, "resnet21", 10, NULL), ADAPT_EFORMAT);
    ck_assert_ptr_nonnull(strstr(adapt_error_message(), "depth must be 6n + 2"));
    ck_assert_int_eq(adapt_graph_load(&g, "nosuchnet", 10, NULL), ADAPT_ENOENT);
    ck_assert_int_eq(adapt_graph_load(&g, "lenet5", 10, "depth=3"), ADAPT_EINVAL);
    ck_assert_ptr_nonnull(strstr(adapt_error_message(), "'depth' is not a parameter"));
}
END_TEST

/* Bad descriptions: each refused with t.model:LINE and what was wrong. */
START_TEST(test_bad_descriptions)
{
    static const struct {
        const char *text;
        const char *where, *want;
    } bad[] = {
        {"input 1 8 8\nconv3d c out=4 k=3\n", ":2:", "unknown line 'conv3d'"},
        {"input 1 8 8\nconv2d c out=4\n", ":2:", "key 'k' is required"},
        {"input 1 8 8\nconv2d c out=4 k=3 size=2\n", ":2:", "unknown key 'size'"},
        {"input 1 8 8\nconv2d c out=4 k=3\nrelu r k=3\n", ":3:", "'k' does not apply to relu"},
        {"input 1 8 8\nconv2d c out=w k=3\n", ":2:", "unknown name 'w'"},
        {"input 1 8 8\nconv2d c out=0 k=3\n", ":2:", "out=0, expected 1.."},
        {"input 1 8 8\nconv2d c out=2 k=3\nconv2d c out=2 k=3\n", ":3:",
         "'c' is already used (line 2)"},
        /* a label cannot take a layer's name, nor a layer a label's */
        {"input 1 8 8\nrelu x\nrelu y\nlabel x\nrelu z in=x\n", ":4:",
         "label 'x': a layer has that name (line 2)"},
        {"input 1 8 8\nrelu y\nlabel x\nrelu z\nrelu x\n", ":5:",
         "layer name 'x' is a label's (line 3)"},
        {"input 1 8 8\nconv2d c out=2 k=3\nadd a in=c,d\n", ":3:",
         "no earlier layer or label is called 'd'"},
        {"input 1 8 8\nconv2d c out=2 k=3\nlinear fc out=classes\n", ":3:",
         "put a flatten before it"},
        {"input 1 8 8\nflatten f\nlinear fc out=classes in_features=60\n", ":3:",
         "expects 60 input features, but f (line 2) gives 64"},
        {"input 1 8 8\nconv2d a out=2 k=3\nconv2d b in=input out=2 k=1\nadd s in=a,b\n", ":4:",
         "a (line 2) gives 2x6x6 but b (line 3) gives 2x8x8"},
        {"input 1 4 4\nconv2d c out=2 k=5 pad=0\n", ":2:",
         "kernel 5 (spanning 5) is larger than its padded input (1x4x4 from the network input"},
        {"input 1 8 8\nrepeat i = 0..2\nrelu r{i}\n", ":2:", "this block has no 'end'"},
        {"input 1 8 8\nend\n", ":2:", "'end' without an open"},
        {"input 1 8 8\nelse\n", ":2:", "'else' without an open 'if'"},
        {"input 1 8 8\nflatten f\nlinear fc out=7\n", ":3:", "must end in 10 class scores"},
        {"conv2d c out=2 k=3\n", ":1:", "'input' line must come before the first layer"},
        {"param d = 3\nrequire d % 2 == 0 \"d must be even\"\ninput 1 8 8\n", ":2:",
         "requirement failed: d must be even"},
        {"input 1 8 8\nlet z = 4 / (2 - 2)\n", ":2:", "division by zero"},
        {"input 1 8 8\nflatten f\nlinear fc out=classes\nloss softmax_xent\nrelu r\n", ":5:",
         "nothing may follow the 'loss' line"},
        {"input 1 8 8\nflatten f\nlinear fc out=classes\nloss mse\n", ":4:",
         "'loss softmax_xent' (the only loss)"},
        {"input 1 8 8\nconv2d c out=2 k=3 in_channels=3\n", ":2:",
         "expects 3 input channels, but the network input gives 1"},
        {"input 1 8 8\nrepeat i = 0..20000\nrelu r{i}\nend\n", ":3:", "more than 10000 layers"},
        {"input 1 8\n", ":1:", "expected 'input CHANNELS HEIGHT WIDTH'"},
        {"input 1 8 8\nflatten f\nlinear fc out=classes bias=2\n", ":3:", "bias=2, expected 0..1"},
        {"input 1 8 8\nbatchnorm2d bn eps=small\n", ":2:", "eps=small: expected a number"},
        {"input 1 8 8\nrelu r{1\n", ":2:", "'{' without its '}'"},
        {"input 1 8 8\nrelu r\x01\n", ":2:", "control character"},
        {"input 1 8 8\nflatten f\nparam p = 1\n", ":3:", "'param' must come before the first layer"},
        {"input 1 8 8\nrelu relu\nadd a\n", ":3:", "add a reads 2 inputs, in= names 1"},
        {"input 1 8 8\nconv2d a out=2 k=3\nconcat c in=a,input\n", ":3:",
         "a (line 2) gives 2x6x6 but the network input gives 1x8x8 (the planes must be equal)"},
        {"input 1 8 8\ndropout d p=1\n", ":2:", "p=1, expected 0 <= p < 1"},
        {"input 1 8 8\nconv2d c out=2 k=3 dilation=4\n", ":2:",
         "kernel 3 (spanning 9) is larger than its padded input"},
        {"input 4 8 8\nconv2d g out=6 k=3 groups=4\n", ":2:",
         "groups=4 must divide its 4 input and 6 output channels"},
        {"input 1 8 8\nconv2d a out=2 k=1\nconv2d b out=3 k=1\nconv2d c out=2 k=3\n"
         "concat cat in=a,b,c\n",
         ":5:", "concat cat: a (line 2) gives 2x8x8 but c (line 4) gives 2x6x6 (the planes must "
                "be equal)"},
        {"input 1 8 8\nrelu r\nconcat cat in=r\n", ":3:",
         "concat cat reads 2 to 16 inputs, in= names 1"},
        {"input 1 8 8\nrelu r\nconcat cat in=r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r\n", ":3:",
         "at most 16 inputs"},
        {"input 1 8 8\ngelu g approximate=fast\n", ":2:",
         "approximate=fast: expected none or tanh"},
        {"input 1 8 8\nrelu r approximate=tanh\n", ":2:",
         "key 'approximate' does not apply to relu layers"},
        {"input 1 8 8\nconv2d c out=2 k=1\nmaxpool2d pool1 k=3 stride=2 pad=2\n", ":3:",
         "maxpool2d pool1: pad=2 is more than half the kernel (k=3)"},
        {"input 1 8 8\navgpool2d a k=2 pad=2\n", ":2:",
         "avgpool2d a: pad=2 is more than half the kernel (k=2)"},
        {"input 1 8 8\navgpool2d gap global=1 pad=1\n", ":2:",
         "global=1 takes no k, stride, pad or count_include_pad"},
        {"input 1 8 8\nmaxpool2d p k=2 count_include_pad=0\n", ":2:",
         "key 'count_include_pad' does not apply to maxpool2d layers"},
        {"input 1 8 8\navgpool2d p k=2 count_include_pad=2\n", ":2:",
         "count_include_pad=2, expected 0..1"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct adapt_graph *g = (struct adapt_graph *)1;
        enum adapt_status st = adapt_graph_parse(&g, bad[i].text, "t.model", 10, NULL);
        const char *msg = adapt_error_message();
        ck_assert_msg(st != ADAPT_OK && g == NULL, "case %zu was accepted", i);
        ck_assert_msg(!strncmp(msg, "t.model", 7) && strstr(msg, bad[i].where),
                      "case %zu: message '%s' lacks t.model%s", i, msg, bad[i].where);
        ck_assert_msg(strstr(msg, bad[i].want), "case %zu: message '%s' lacks '%s'", i, msg,
                      bad[i].want);
    }
}
END_TEST

/* Refusal of t.model (10 classes, args) with t.model:LINE and what was wrong. */
static void refused(const char *text, const char *args, const char *where, const char *want)
{
    struct adapt_graph *g = (struct adapt_graph *)1;
    enum adapt_status st = adapt_graph_parse(&g, text, "t.model", 10, args);
    const char *msg = adapt_error_message();
    ck_assert_msg(st != ADAPT_OK && g == NULL, "accepted: %.200s", text);
    ck_assert_msg(!strncmp(msg, "t.model", 7) && strstr(msg, where), "message '%s' lacks t.model%s",
                  msg, where);
    ck_assert_msg(strstr(msg, want), "message '%s' lacks '%s'", msg, want);
}

#define TAIL "flatten f\nlinear fc out=classes\n"

/* What running a description may cost is bounded (doc/model-format.md, "Limits"): passes of
 * one repeat, the work of all lines run (a loop without layers, nested loops), nesting and
 * label names, each refused at its line. Every case here ran without end before. */
START_TEST(test_run_bounds)
{
    refused("input 1 8 8\nrepeat i = 0..9223372036854775807\nend\n" TAIL, NULL, ":2:",
            "repeat i = 0..9223372036854775807 makes more than 100000 passes");
    refused("input 1 8 8\nrepeat i = 1..10000000000\n  let x = i\nend\n" TAIL, NULL, ":2:",
            "more than 100000 passes (the bound of one repeat)");
    /* a parameter set by the caller makes the loop long */
    refused("param n = 1\ninput 1 8 8\nrepeat i = 1..n\nend\n" TAIL, "n=100001", ":3:",
            "more than 100000 passes");
    refused("input 1 8 8\nrepeat i = -9223372036854775807-1..9223372036854775807\nend\n" TAIL,
            NULL, ":2:", "more than 100000 passes");
    /* 2^31 passes of the innermost loop; each pass counts one, so the work bound stops it
     * after 10^7 */
    char text[4096] = "input 1 8 8\n";
    for (int i = 0; i < 31; i++)
        snprintf(text + strlen(text), sizeof text - strlen(text), "repeat i%d = 0..1\n", i);
    for (int i = 0; i < 31; i++) strcat(text, "end\n");
    strcat(text, TAIL);
    refused(text, NULL, ":", "runs more than 10000000 characters of lines");
    /* 100000 passes of a body of 100 characters: 10.1 million */
    refused("input 1 8 8\nrepeat i = 0..99999\n  let x = i + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 "
            "+ 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1\nend\n" TAIL,
            NULL, ":3:", "runs more than 10000000 characters of lines");
    /* nesting: 32 blocks are fine, the 33rd is refused */
    snprintf(text, sizeof text, "input 1 8 8\n");
    for (int i = 0; i < 32; i++)
        snprintf(text + strlen(text), sizeof text - strlen(text), "if %d\n", i + 1);
    for (int i = 0; i < 32; i++) strcat(text, "end\n");
    strcat(text, TAIL);
    struct adapt_graph *g = parse_ok(text, 10, NULL);
    adapt_graph_free(g);
    snprintf(text, sizeof text, "input 1 8 8\n");
    for (int i = 0; i < 33; i++) strcat(text, "repeat i = 0..0\n");
    for (int i = 0; i < 33; i++) strcat(text, "end\n");
    strcat(text, TAIL);
    refused(text, NULL, ":34:", "blocks nested deeper than 32");
    /* labels: 10000 names, looked up by hash (the last one by a layer), then one more */
    g = parse_ok("input 1 8 8\nrepeat i = 0..9999\n  label L{i}\nend\nrelu r in=L9999\n" TAIL,
                 10, NULL);
    ck_assert_int_eq(g->nodes[0].in[0], -1);
    adapt_graph_free(g);
    refused("input 1 8 8\nrepeat i = 0..99999999\n  label L{i}\nend\n" TAIL, NULL, ":2:",
            "more than 100000 passes");
    refused("input 1 8 8\nrepeat i = 0..10000\n  label L{i}\nend\n" TAIL, NULL, ":3:",
            "label 'L10000': more than 10000 label names");
    /* ResNet at the layer bound: depth 6n + 2 with n = 475 makes 3 + 3 * 475 * 7 + 2 * 2 + 3 =
     * 9985 layers */
    ck_assert_int_eq(adapt_graph_load(&g, "resnet", 10, "depth=2852"), ADAPT_OK);
    ck_assert_int_eq(g->n_nodes, 9985);
    adapt_graph_free(g);
    ck_assert_int_eq(adapt_graph_load(&g, "resnet", 10, "depth=2858"), ADAPT_EFORMAT);
    ck_assert_ptr_nonnull(strstr(adapt_error_message(), "more than 10000 layers"));
}
END_TEST

/* Sizes and costs in checked 64-bit arithmetic, tensors within the engine's bound
 * (ADAPT_GRAPH_MAX_NUMEL = 2^28 elements): before, these resolved with wrapped products. */
START_TEST(test_size_bounds)
{
    /* 2 x 33025 x 65026 = 2^32 + 4 elements: flatten gave 4 features */
    refused("input 2 33025 65026\n" TAIL, NULL, ":1:",
            "input 2x33025x65026 has 4294967300 elements per sample, more than 268435456");
    /* a weight tensor of 2^20 x 2^20 x 1024 x 1024 = 2^60 elements */
    refused("input 1 1 1\nconv2d a out=1048576 k=1\nconv2d b out=1048576 k=1024 pad=512\n"
            "avgpool2d g global=1\n" TAIL,
            NULL, ":3:", "conv2d b: its weight tensor 1048576x1048576x1024x1024 has more than "
                         "268435456 elements");
    /* 2^28 weights are fine, 16385 x 16384 are not */
    struct adapt_graph *g = parse_ok("input 16384 1 1\nconv2d c out=16384 k=1 bias=0\n" TAIL, 10,
                                     NULL);
    ck_assert_int_eq(g->nodes[0].params, 1 << 28);
    adapt_graph_free(g);
    refused("input 16384 1 1\nconv2d c out=16385 k=1\n" TAIL, NULL, ":2:", "more than 268435456");
    refused("input 1 1 1\nflatten f\nlinear a out=16777216\nlinear b out=16777216\n", NULL, ":4:",
            "linear b: its weight tensor 16777216x16777216 has more than 268435456 elements");
    /* outputs: 2^14 x 2^14 x 2 channels, and a plane wider than 65536 */
    refused("input 1 16384 16384\nconv2d c out=2 k=1\n" TAIL, NULL, ":2:",
            "its output 2x16384x16384 has 536870912 elements per sample, more than 268435456");
    refused("input 1 1 65536\nconv2d c out=1 k=1 pad=1\n" TAIL, NULL, ":2:",
            "its output plane 3x65538 is larger than 65536 in a dimension");
    /* 9000 convolutions of 2049^2 x 2^28 MACs (about 2^50) each: the total passes 2^63 */
    refused("input 256 1024 1024\nrepeat i = 0..8999\n  conv2d c{i} in=input out=1 k=1024 "
            "pad=1024 bias=0\nend\n" TAIL,
            NULL, ":3:", "the network's total parameters or MACs overflow 64 bits");
}
END_TEST

/* Descriptions are UTF-8, comments included (the text goes into the trace header, JSON): a
 * byte that is not is refused with its line and its place in the line. */
START_TEST(test_utf8)
{
    refused("input 1 8 8 # caf\xe9\n" TAIL, NULL, ":1:", "byte 18 of the line (0xe9) is not UTF-8");
    refused("input 1 8 8\n# \xc0\xaf overlong\n" TAIL, NULL, ":2:", "byte 3 of the line (0xc0)");
    refused("input 1 8 8\n" TAIL "# \xed\xa0\x80 a surrogate\n", NULL, ":4:",
            "byte 3 of the line (0xed)");
    refused("input 1 8 8\nrelu r\xf4\x90\x80\x80\n" TAIL, NULL, ":2:", "byte 7 of the line (0xf4)");
    refused("input 1 8 8\nrelu r\xe2\x82\n" TAIL, NULL, ":2:", "byte 7 of the line (0xe2)");
    /* well-formed characters are text like any other */
    struct adapt_graph *g = parse_ok("# caf\xc3\xa9, 20 \xe2\x82\xac, \xf0\x9f\x98\x80\n"
                                     "input 1 8 8\nrelu r\xc3\xa9lu\n" TAIL, 10, NULL);
    ck_assert_str_eq(g->nodes[0].name, "r\xc3\xa9lu");
    adapt_graph_free(g);
    /* the file name goes into the trace too */
    ck_assert_int_eq(adapt_graph_parse(&g, "input 1 8 8\n" TAIL, "caf\xe9.model", 10, NULL),
                     ADAPT_EINVAL);
    ck_assert_ptr_nonnull(strstr(adapt_error_message(), "is not UTF-8"));
}
END_TEST

/* The engine's limits, checked where the description says them: layer names of at most 50
 * characters (checkpoint keys NAME.running_mean fit 63), dropout p and batch-norm eps as the
 * engine's floats see them, eps written as strtod reads it. */
START_TEST(test_engine_limits)
{
    static const char name50[] = "a23456789b23456789c23456789d23456789e23456789f2345";
    char text[512];
    snprintf(text, sizeof text, "input 1 8 8\nbatchnorm2d %s\n" TAIL, name50);
    struct adapt_graph *g = parse_ok(text, 10, NULL);
    ck_assert_uint_eq(strlen(g->nodes[0].name), 50);
    adapt_graph_free(g);
    snprintf(text, sizeof text, "input 1 8 8\nbatchnorm2d %sX\n" TAIL, name50);
    refused(text, NULL, ":2:", "is too long (at most 50 characters)");
    snprintf(text, sizeof text, "input 1 8 8\nlet i = 1\nrelu %.49s{i}0\n" TAIL, name50);
    refused(text, NULL, ":3:", "is too long (at most 50 characters)");
    /* p < 1 as a double but 1 as a float; the float below 1 is fine */
    refused("input 1 8 8\ndropout d p=0.99999999999\n" TAIL, NULL, ":2:",
            "p=0.99999999999 rounds to 1 in single precision");
    g = parse_ok("input 1 8 8\ndropout d p=0.99999994\n" TAIL, 10, NULL);
    ck_assert((float)g->nodes[0].p < 1.0f);
    adapt_graph_free(g);
    /* eps: below FLT_MIN (2^-126) a float is 0 or denormal; strtod's ERANGE no longer reads
     * as "not a number" */
    refused("input 1 8 8\nbatchnorm2d b eps=4.9e-324\n" TAIL, NULL, ":2:",
            "eps=4.94066e-324, expected 1.17549e-38 <= eps < 1 in single precision");
    refused("input 1 8 8\nbatchnorm2d b eps=1e-39\n" TAIL, NULL, ":2:", "expected 1.17549e-38");
    refused("input 1 8 8\nbatchnorm2d b eps=1e999\n" TAIL, NULL, ":2:", "eps=inf, expected");
    refused("input 1 8 8\nbatchnorm2d b eps=0.99999999999\n" TAIL, NULL, ":2:", "eps < 1");
    refused("input 1 8 8\nbatchnorm2d b eps=nan\n" TAIL, NULL, ":2:", "eps=nan: expected a number");
    refused("input 1 8 8\nbatchnorm2d b momentum=1.5\n" TAIL, NULL, ":2:",
            "momentum=1.5, expected 0 <= momentum <= 1");
    g = parse_ok("input 1 8 8\nbatchnorm2d b eps=0x1p-3 momentum=1e-320\nbatchnorm2d c "
                 "eps=1.1754944e-38\n" TAIL, 10, NULL);
    ck_assert(g->nodes[0].eps == 0.125);
    ck_assert(g->nodes[1].eps > 0);
    adapt_graph_free(g);
}
END_TEST

/* "resnet20" sets depth=20: arguments that say the same are fine, others are refused with
 * both values (before, depth=56 built ResNet-56 called resnet20). */
START_TEST(test_name_depth)
{
    struct adapt_graph *g = NULL;
    ck_assert_int_eq(adapt_graph_load(&g, "resnet20", 10, "depth=56"), ADAPT_EINVAL);
    const char *msg = adapt_error_message();
    ck_assert_msg(strstr(msg, "model resnet20 sets depth=20, but the model arguments set "
                              "depth=56: name the model resnet56 or resnet"),
                  "%s", msg);
    ck_assert_int_eq(adapt_graph_load(&g, "resnet20", 10, " depth = 20 "), ADAPT_OK);
    ck_assert_str_eq(g->name, "resnet20");
    ck_assert_int_eq(g->n_units, 22);
    adapt_graph_free(g);
    ck_assert_int_eq(adapt_graph_load(&g, "resnet", 10, "depth=56"), ADAPT_OK);
    ck_assert_int_eq(g->n_units, 58);
    adapt_graph_free(g);
    /* a parameter set twice is refused too */
    ck_assert_int_eq(adapt_graph_load(&g, "resnet", 10, "depth=56,depth=20"), ADAPT_EINVAL);
    ck_assert_ptr_nonnull(strstr(adapt_error_message(), "'depth' is set twice"));
}
END_TEST

/* The other kinds: sigmoid, hardswish, relu6, dropout, concat, grouped conv. */
START_TEST(test_more_kinds)
{
    const char *text = "input 4 8 8\n"
                       "conv2d dw out=8 k=3 pad=1 groups=4 bias=0\n"
                       "hardswish h\n"
                       "conv2d pw in=input out=3 k=1\n"
                       "sigmoid s\n"
                       "concat cat in=h,s\n"
                       "relu6 r\n"
                       "dropout drop p=0.2\n"
                       "avgpool2d gap global=1\n"
                       "flatten f\n"
                       "linear fc out=classes\n";
    struct adapt_graph *g = parse_ok(text, 10, NULL);
    ck_assert_int_eq(g->nodes[0].weights, 8 * 1 * 9); /* (cout, cin/groups, k, k) */
    ck_assert_int_eq(g->nodes[0].macs, 64 * 8 * 9);
    ck_assert_int_eq(g->nodes[4].out_dim[0], 11); /* concat of h (node 1) and s (node 3) */
    ck_assert_int_eq(g->nodes[4].in[0], 1);
    ck_assert_int_eq(g->nodes[4].in[1], 3);
    ck_assert(g->nodes[6].p == 0.2);
    ck_assert_int_eq(g->nodes[6].elementwise, 11 * 64);
    ck_assert_int_eq(g->n_units, 3);
    adapt_graph_free(g);
}
END_TEST

/* gelu: exact (erf) by default, approximate=tanh the tanh form; one operation per element */
START_TEST(test_gelu_kind)
{
    const char *text = "input 2 4 4\n"
                       "gelu g0\n"
                       "gelu g1 approximate=tanh\n"
                       "gelu g2 approximate=none\n"
                       "flatten f\n"
                       "linear fc out=classes\n";
    struct adapt_graph *g = parse_ok(text, 10, NULL);
    ck_assert_str_eq(adapt_graph_kind_name(g->nodes[0].kind), "gelu");
    ck_assert_int_eq(g->nodes[0].approximate, 0);
    ck_assert_int_eq(g->nodes[1].approximate, 1);
    ck_assert_int_eq(g->nodes[2].approximate, 0);
    ck_assert_int_eq(g->nodes[1].elementwise, 32);
    ck_assert_int_eq(g->nodes[1].params, 0);
    adapt_graph_free(g);
}
END_TEST

/* concat of three inputs (one of them read twice): channels add up, inputs in order */
START_TEST(test_concat_three)
{
    const char *text = "input 2 6 6\n"
                       "conv2d a out=3 k=3 pad=1\n"
                       "conv2d b in=input out=5 k=1\n"
                       "concat cat in=a,b,input,a\n"
                       "avgpool2d gap global=1\n"
                       "flatten f\n"
                       "linear fc out=classes\n";
    struct adapt_graph *g = parse_ok(text, 10, NULL);
    const struct adapt_graph_node *c = &g->nodes[2];
    ck_assert_int_eq(c->n_in, 4);
    ck_assert_int_eq(c->in[0], 0);
    ck_assert_int_eq(c->in[1], 1);
    ck_assert_int_eq(c->in[2], -1);
    ck_assert_int_eq(c->in[3], 0);
    ck_assert_int_eq(c->out_dim[0], 3 + 5 + 2 + 3);
    ck_assert_int_eq(c->out_dim[1], 6);
    ck_assert_int_eq(c->in_dim[1][0], 5);
    ck_assert_int_eq(c->elementwise, 0);
    adapt_graph_free(g);
}
END_TEST

/* Pools with padding: PyTorch's shapes floor((H + 2 pad - k) / stride) + 1, and as element-wise
 * cost the input cells the windows read (padding is not read): per axis the clipped window
 * lengths, worked out by hand below. */
START_TEST(test_padded_pools)
{
    const char *text = "input 3 7 7\n"
                       "maxpool2d mp k=3 stride=2 pad=1\n"
                       "avgpool2d ap k=2 stride=1 pad=1 count_include_pad=0\n"
                       "avgpool2d aq k=3 stride=1 pad=1\n"
                       "flatten f\n"
                       "linear fc out=classes\n";
    struct adapt_graph *g = parse_ok(text, 10, NULL);
    const struct adapt_graph_node *mp = &g->nodes[0], *ap = &g->nodes[1], *aq = &g->nodes[2];
    /* (7 + 2 - 3) / 2 + 1 = 4; windows [-1,2) [1,4) [3,6) [5,8) read 2 + 3 + 3 + 2 = 10 */
    ck_assert_int_eq(mp->out_dim[1], 4);
    ck_assert_int_eq(mp->out_dim[2], 4);
    ck_assert_int_eq(mp->pad, 1);
    ck_assert_int_eq(mp->elementwise, 3 * 10 * 10);
    /* (4 + 2 - 2) / 1 + 1 = 5; windows [-1,1) [0,2) [1,3) [2,4) [3,5) read 1+2+2+2+1 = 8 */
    ck_assert_int_eq(ap->out_dim[1], 5);
    ck_assert_int_eq(ap->count_include_pad, 0);
    ck_assert_int_eq(ap->elementwise, 3 * 8 * 8);
    /* (5 + 2 - 3) / 1 + 1 = 5; windows read 2+3+3+3+2 = 13; count_include_pad defaults to 1 */
    ck_assert_int_eq(aq->out_dim[1], 5);
    ck_assert_int_eq(aq->count_include_pad, 1);
    ck_assert_int_eq(aq->elementwise, 3 * 13 * 13);
    adapt_graph_free(g);
}
END_TEST

/* A file: found by path; a NUL byte and a missing file are refused with the path. */
START_TEST(test_files)
{
    char dir[256], path[300];
    tu_tmpdir_make(dir, sizeof dir, "graph");
    snprintf(path, sizeof path, "%s/mlp.model", dir);
    tu_write_text(path, "input 1 4 4\nflatten f\nlinear h out=8\nrelu r\nlinear o out=classes\n");
    struct adapt_graph *g = NULL;
    ck_assert_int_eq(adapt_graph_load(&g, path, 3, NULL), ADAPT_OK);
    ck_assert_str_eq(g->name, "mlp");
    ck_assert_int_eq(g->params, 16 * 8 + 8 + 8 * 3 + 3);
    ck_assert_ptr_nonnull(strstr(g->text, "linear h out=8"));
    adapt_graph_free(g);
    tu_write_file(path, "input 1 4 4\n\0", 13);
    ck_assert_int_eq(adapt_graph_load(&g, path, 3, NULL), ADAPT_EFORMAT);
    ck_assert_ptr_nonnull(strstr(adapt_error_message(), "NUL byte"));
    snprintf(path, sizeof path, "%s/none.model", dir);
    ck_assert_int_eq(adapt_graph_load(&g, path, 3, NULL), ADAPT_ENOENT);
    ck_assert_ptr_nonnull(strstr(adapt_error_message(), "none.model"));
    tu_tmpdir_remove(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("graph");
    TCase *tc = tcase_create("graph");
    tcase_add_test(tc, test_expressions);
    tcase_add_test(tc, test_repeat_labels_shapes);
    tcase_add_test(tc, test_builtin_files);
    tcase_add_test(tc, test_bad_descriptions);
    tcase_add_test(tc, test_more_kinds);
    tcase_add_test(tc, test_padded_pools);
    tcase_add_test(tc, test_concat_three);
    tcase_add_test(tc, test_gelu_kind);
    tcase_add_test(tc, test_files);
    tcase_add_test(tc, test_utf8);
    tcase_add_test(tc, test_engine_limits);
    tcase_add_test(tc, test_name_depth);
    suite_add_tcase(s, tc);
    /* descriptions at the bounds: 10^4 layers, 10^7 characters run (about 1 s on an idle
     * machine, several times that in the sanitizer build) */
    TCase *tb = tcase_create("bounds");
    tcase_set_timeout(tb, 120);
    tcase_add_test(tb, test_run_bounds);
    tcase_add_test(tb, test_size_bounds);
    suite_add_tcase(s, tb);
    return tu_run_suite(s, CK_FORK);
}
