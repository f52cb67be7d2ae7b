/* tests/test_io_read.c: the trace reader on hand-written traces, part of tests/test_io: a
 * table of malformed traces, each refused with the line and what is wrong; layer precision and
 * comp search records; bounds, nesting and a long line; partial reads and missing records; and
 * truncation after an epoch with appending after it (the resume path). */
#include <check.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "src/base/safetensors.h"
#include "src/trace/trace.h"
#include "tests/test_io.h"
#include "tests/testutil.h"

/* A valid header line for hand-written traces (2 units), with the given config object. */
#define HDR_CONFIG(cfg)                                                                            \
    "{\"type\":\"header\",\"schema\":1,\"program\":\"adapt-sim\",\"version\":\"0\","               \
    "\"created\":\"x\",\"seed\":1,\"threads\":0,\"policy\":\"fp32\",\"config\":" cfg ","          \
    "\"config_file\":null,\"overrides\":[],\"dataset\":{\"name\":\"d\",\"train\":1,"               \
    "\"val\":0,\"test\":1,\"classes\":10},\"model\":{\"name\":\"m\",\"input\":[1,32,32],"          \
    "\"classes\":10,\"params\":1,\"macs\":1,\"layers\":[{\"name\":\"a\",\"kind\":\"linear\","      \
    "\"in\":[4],\"out\":[2],\"params\":10,\"macs\":8,\"elementwise\":0,\"unit\":0}]},"             \
    "\"units\":[{\"name\":\"a\",\"layer\":0,\"weights\":8,\"macs\":8},"                            \
    "{\"name\":\"b\",\"layer\":0,\"weights\":8,\"macs\":8}]}\n"
#define HDR HDR_CONFIG("{}")
/* the same header with the layer marked grouped: 3 groups cannot split 4 inputs */
#define HDR_GROUPS3                                                                                \
    "{\"type\":\"header\",\"schema\":1,\"program\":\"adapt-sim\",\"version\":\"0\","               \
    "\"created\":\"x\",\"seed\":1,\"threads\":0,\"policy\":\"fp32\",\"config\":{},"               \
    "\"config_file\":null,\"overrides\":[],\"dataset\":{\"name\":\"d\",\"train\":1,"               \
    "\"val\":0,\"test\":1,\"classes\":10},\"model\":{\"name\":\"m\",\"input\":[1,32,32],"          \
    "\"classes\":10,\"params\":1,\"macs\":1,\"layers\":[{\"name\":\"a\",\"kind\":\"linear\","      \
    "\"in\":[4],\"out\":[2],\"params\":10,\"macs\":8,\"elementwise\":0,\"unit\":0,"                \
    "\"groups\":3}]},\"units\":[{\"name\":\"a\",\"layer\":0,\"weights\":8,\"macs\":8},"           \
    "{\"name\":\"b\",\"layer\":0,\"weights\":8,\"macs\":8}]}\n"
/* the same header with extra fields in its layer (graph precision propagation) */
#define HDR_LAYER(extra)                                                                           \
    "{\"type\":\"header\",\"schema\":1,\"program\":\"adapt-sim\",\"version\":\"0\","               \
    "\"created\":\"x\",\"seed\":1,\"threads\":0,\"policy\":\"amp\",\"config\":{},"                \
    "\"config_file\":null,\"overrides\":[],\"dataset\":{\"name\":\"d\",\"train\":1,"               \
    "\"val\":0,\"test\":1,\"classes\":10},\"model\":{\"name\":\"m\",\"input\":[1,32,32],"          \
    "\"classes\":10,\"params\":1,\"macs\":1,\"layers\":[{\"name\":\"a\",\"kind\":\"linear\","      \
    "\"in\":[4],\"out\":[2],\"params\":10,\"macs\":8,\"elementwise\":0,\"unit\":0," extra "}]},"   \
    "\"units\":[{\"name\":\"a\",\"layer\":0,\"weights\":8,\"macs\":8},"                            \
    "{\"name\":\"b\",\"layer\":0,\"weights\":8,\"macs\":8}]}\n"
#define STEP "{\"type\":\"step\",\"step\":1,\"epoch\":1,\"lr\":0.1,\"loss\":2.3," \
             "\"strategy\":null," \
             "\"units\":[{\"wl\":32,\"fl\":0},{\"wl\":32,\"fl\":0}],\"events\":[],\"accum\":1," \
             "\"overflow\":false}\n"
#define EPOCH "{\"type\":\"epoch\",\"epoch\":1,\"step\":1,\"lr\":0.1,\"train_loss\":1," \
              "\"train_acc\":0.5," \
              "\"val_loss\":1,\"val_acc\":0.5,\"wall_s\":1,\"images_per_s\":1}\n"

/* A step record of step `step` in epoch `epoch` whose units have `units` (2 states), and an
 * epoch record with the given fields (strings of JSON). */
#define STEP_AT(step, epoch, units)                                                                \
    "{\"type\":\"step\",\"step\":" step ",\"epoch\":" epoch ",\"lr\":0.1,\"loss\":2.3,"            \
    "\"strategy\":null,\"units\":" units ",\"events\":[],\"accum\":1,\"overflow\":false}\n"
#define UNITS32 "[{\"wl\":32,\"fl\":0},{\"wl\":32,\"fl\":0}]"
#define EPOCH_WITH(epoch, step, acc, wall)                                                         \
    "{\"type\":\"epoch\",\"epoch\":" epoch ",\"step\":" step ",\"lr\":0.1,\"train_loss\":1,"       \
    "\"train_acc\":" acc ",\"val_loss\":1,\"val_acc\":0.5,\"wall_s\":" wall ","                   \
    "\"images_per_s\":1}\n"
#define EVENT_STEP(before, after)                                                                  \
    "{\"type\":\"step\",\"step\":1,\"epoch\":0,\"lr\":0.1,\"loss\":2.3,\"strategy\":null,"        \
    "\"units\":" UNITS32 ",\"events\":[{\"unit\":0,\"kind\":\"pu\",\"before\":" before ","        \
    "\"after\":" after ",\"s\":1}],\"accum\":1,\"overflow\":false}\n"

/* A comp search record for HDR's model (1 layer, 2 units). */
#define SAMPLE(plan, wl, gov)                                                                  \
    "{\"type\":\"sample\",\"stage\":1,\"plan\":\"" plan "\",\"steps\":3,\"samples\":300,"     \
    "\"loss\":2.25,\"cost\":1e6,\"safe\":true,\"chosen\":false,\"wl\":" wl ",\"gov\":" gov "}\n"

struct bad_trace {
    const char *text;
    const char *where;  /* "t.jsonl:N:" */
    const char *what;
};

static const struct bad_trace bad_traces[] = {
    {HDR_GROUPS3 STEP EPOCH, "t.jsonl:1:", "groups 3 does not divide its 4 input and 2 output"},
    {HDR_LAYER("\"graph_set\":\"maybe\",\"graph_source\":\"preset\",\"precision\":\"fp16\","
               "\"precision_unit\":0") STEP,
     "t.jsonl:1:", "field \"graph_set\" has an unknown value"},
    {HDR_LAYER("\"graph_set\":\"deny\",\"graph_source\":\"preset\",\"precision\":\"fp16\","
               "\"precision_unit\":-1") STEP,
     "t.jsonl:1:", "precision fp16 with precision_unit -1"},
    {HDR_LAYER("\"graph_set\":\"allow\",\"graph_source\":\"kind\",\"precision\":\"fp16\","
               "\"precision_unit\":2") STEP,
     "t.jsonl:1:", "precision_unit 2 is not a unit (2 units)"},
    {HDR_LAYER("\"precision_unit\":0") STEP, "t.jsonl:1:", "field \"precision\" is missing"},
    {HDR_CONFIG("{},\"sr_bits\":24") STEP, "t.jsonl:1:", "field \"sr_bits\" is 24: 16 or 32"},
    {HDR_CONFIG("{},\"build\":[]") STEP, "t.jsonl:1:", "field \"build\" must be an object"},
    {HDR_CONFIG("{},\"build\":{\"commit\":\"a\",\"compiler\":\"b\",\"cpu\":7,\"isa\":\"c\","
                "\"blas\":\"d\",\"device\":\"cpu\"}") STEP,
     "t.jsonl:1:", "field \"cpu\" must be a string"},
    {HDR_CONFIG("{},\"build\":{\"commit\":\"a\"}") STEP, "t.jsonl:1:",
     "field \"compiler\" is missing"},
    {HDR STEP "{\"type\":\"step\",\"step\":2,\n" EPOCH, "t.jsonl:3:", "malformed JSON"},
    {HDR STEP "{\"type\":\"ep", "t.jsonl:3:", "truncated trace: the last line is incomplete"},
    {HDR STEP EPOCH "{\"type\":\"epoch\",\"epoch\":2,\"step\":2,\"lr\":0.1",
     "t.jsonl:4:", "truncated"},
    {STEP EPOCH, "t.jsonl:1:", "missing header: the first line is a step record"},
    {"", "t.jsonl:", "missing header: the trace is empty"},
    /* a configuration file given for a trace: said so, not "malformed JSON at column 1" */
    {"; a run\n[run]\nseed = 1\n", "t.jsonl:1:", "not a trace (it looks like a configuration file)"},
    {"[train]\nepochs = 2\n", "t.jsonl:1:", "not a trace (it looks like a configuration file)"},
    {"epochs = 2\n", "t.jsonl:1:", "not a trace (it looks like a configuration file)"},
    {"[1, 2\n", "t.jsonl:1:", "malformed JSON"},
    {"{\"type\":\n", "t.jsonl:1:", "malformed JSON"},
    {"{\"type\":\"header\",\"schema\":2}\n", "t.jsonl:1:", "unknown schema version 2"},
    {"{\"type\":\"header\",\"schema\":\"1\"}\n", "t.jsonl:1:", "\"schema\" must be an integer"},
    {HDR "{\"type\":\"step\",\"step\":1,\"epoch\":1,\"lr\":\"fast\",\"loss\":2.3,\"strategy\":null,"
         "\"units\":[]}\n",
     "t.jsonl:2:", "step record: field \"lr\" must be a number"},
    {HDR "{\"type\":\"step\",\"step\":1,\"epoch\":1,\"lr\":0.1,\"loss\":2.3,\"strategy\":null,"
         "\"units\":[{\"wl\":32,\"fl\":0}]}\n",
     "t.jsonl:2:", "1 units, but the header lists 2"},
    {HDR STEP
     "{\"type\":\"step\",\"step\":1,\"epoch\":1,\"lr\":0.1,\"loss\":2.3,\"strategy\":\"median\","
     "\"units\":[]}\n",
     "t.jsonl:3:", "field \"strategy\" has an unknown value"},
    {HDR "{\"type\":\"step\",\"step\":1,\"epoch\":1,\"lr\":0.1,\"loss\":2.3,\"strategy\":null,"
         "\"units\":[{\"wl\":32,\"fl\":0},{\"wl\":32,\"fl\":0}],\"events\":[{\"unit\":2,\"kind\":"
         "\"pd\","
         "\"before\":[8,4],\"after\":[8,3]}]}\n",
     "t.jsonl:2:", "field \"unit\" = 2 is out of range [0, 1]"},
    {HDR "{\"type\":\"step\",\"step\":1,\"epoch\":1,\"lr\":0.1,\"loss\":2.3,\"strategy\":null,"
         "\"units\":[{\"wl\":32,\"fl\":0},{\"fl\":0}]}\n",
     "t.jsonl:2:", "field \"wl\" is missing"},
    {HDR STEP
     "{\"type\":\"epoch\",\"epoch\":1,\"step\":1,\"lr\":0.1,\"train_loss\":1,\"train_acc\":0.5,"
     "\"val_loss\":1,\"wall_s\":1,\"images_per_s\":1}\n",
     "t.jsonl:3:", "epoch record: field \"val_acc\" is missing"},
    {HDR STEP "{\"type\":\"checkpoint\"}\n",
     "t.jsonl:3:", "checkpoint record: unknown record type"},
    {HDR HDR, "t.jsonl:2:", "a second header"},
    {HDR STEP SAMPLE("0", "[16,16]", "[0]"), "t.jsonl:3:", "a sample record after the first step"},
    {HDR SAMPLE("0", "[16]", "[0]"), "t.jsonl:2:", "field \"wl\" must hold 2 integers"},
    {HDR SAMPLE("00", "[16,16]", "[0]"), "t.jsonl:2:", "has 2 digits, the model 1 layers"},
    {HDR SAMPLE("0", "[16,16]", "[2]"), "t.jsonl:2:",
     "field \"gov\"[0] must be an integer in [-1, 1]"},
    {HDR "[1,2]\n", "t.jsonl:2:", "not a trace record"},
    {HDR "\n", "t.jsonl:2:", "malformed JSON"},
    {HDR "{\"type\":\"end\",\"status\":\"ok\",\"wall_s\":1}\n" STEP,
     "t.jsonl:3:", "record after the end record"},
    {HDR_CONFIG("{\"train\":{\"batch\":0}}") STEP, "t.jsonl:1:",
     "header record: field \"config.train.batch\" must be an integer in [1, 2147483647]"},
    {HDR_CONFIG("{\"train\":{\"batch\":8,\"accumulation_steps\":\"2\"}}"), "t.jsonl:1:",
     "field \"config.train.accumulation_steps\" must be an integer"},
    {HDR_CONFIG("{\"policy\":{\"muppet_r\":3000000000}}"), "t.jsonl:1:",
     "field \"config.policy.muppet_r\" must be an integer"},
    {HDR_CONFIG("{\"quantization\":{\"compat\":1}}"), "t.jsonl:1:",
     "field \"config.quantization.compat\" must be a string"},
    {HDR_CONFIG("{\"run\":{\"name\":[\"a\"]}}"), "t.jsonl:1:",
     "field \"config.run.name\" must be a string"},
    {HDR_CONFIG("{\"train\":[]}"), "t.jsonl:1:", "field \"config.train\" must be an object"},
    /* numbers a consumer counts with are bounded by what a run writes (trace.h) */
    {HDR STEP_AT("9223372036854775807", "0", UNITS32), "t.jsonl:2:",
     "step record: field \"step\" = 9223372036854775807 is out of range [1, 9007199254740992]"},
    {HDR STEP_AT("0", "0", UNITS32), "t.jsonl:2:", "field \"step\" = 0 is out of range"},
    {HDR STEP_AT("1", "-7", UNITS32), "t.jsonl:2:",
     "step record: field \"epoch\" = -7 is out of range [0, 99999]"},
    {HDR STEP EPOCH_WITH("2147483647", "1", "0.5", "1"), "t.jsonl:3:",
     "epoch record: field \"epoch\" = 2147483647 is out of range [0, 99999]"},
    {HDR "{\"type\":\"test\",\"epoch\":100001,\"test_loss\":1,\"test_acc\":0.5}\n",
     "t.jsonl:2:", "test record: field \"epoch\" = 100001 is out of range [0, 100000]"},
    {HDR STEP_AT("2", "1", UNITS32) STEP_AT("2", "1", UNITS32), "t.jsonl:3:",
     "step record: step 2 does not follow step 2 (line 2): step numbers increase"},
    {HDR STEP_AT("1", "3", UNITS32) STEP_AT("2", "2", UNITS32), "t.jsonl:3:",
     "step record: epoch 2 is before epoch 3 of step 1 (line 2)"},
    {HDR EPOCH_WITH("1", "5", "0.5", "1") EPOCH_WITH("1", "6", "0.5", "1"), "t.jsonl:3:",
     "epoch record: epoch 1 does not follow epoch 1 (line 2)"},
    {HDR EPOCH_WITH("1", "5", "0.5", "1") EPOCH_WITH("1000000000", "6", "0.5", "1"),
     "t.jsonl:3:", "epoch record: field \"epoch\" = 1000000000 is out of range [0, 99999]"},
    {HDR EPOCH_WITH("1", "5", "0.5", "1") EPOCH_WITH("2", "5", "0.5", "1"), "t.jsonl:3:",
     "epoch record: step 5 does not follow step 5 of epoch 1 (line 2)"},
    {HDR STEP EPOCH_WITH("1", "1", "5.0", "1"), "t.jsonl:3:",
     "epoch record: field \"train_acc\" = 5 is out of range [0, 1]"},
    {HDR STEP EPOCH_WITH("1", "1", "-3.0", "1"), "t.jsonl:3:",
     "field \"train_acc\" = -3 is out of range [0, 1]"},
    {HDR STEP EPOCH_WITH("1", "1", "0.5", "-1e300"), "t.jsonl:3:",
     "epoch record: field \"wall_s\" = -1e+300 is out of range: expected >= 0"},
    {HDR STEP EPOCH_WITH("1", "1", "0.5", "null"), "t.jsonl:3:",
     "epoch record: field \"wall_s\" must be a number"},
    {HDR "{\"type\":\"end\",\"status\":\"ok\",\"wall_s\":-1}\n", "t.jsonl:2:",
     "end record: field \"wall_s\" = -1 is out of range: expected >= 0"},
    {HDR "{\"type\":\"test\",\"epoch\":1,\"test_loss\":1,\"test_acc\":1.5}\n", "t.jsonl:2:",
     "test record: field \"test_acc\" = 1.5 is out of range [0, 1]"},
    {HDR "{\"type\":\"step\",\"step\":1,\"epoch\":0,\"lr\":-0.1,\"loss\":2.3,\"strategy\":null,"
         "\"units\":" UNITS32 "}\n",
     "t.jsonl:2:", "step record: field \"lr\" = -0.1 is out of range: expected >= 0"},
    {HDR STEP_AT("1", "0", "[{\"wl\":2,\"fl\":64},{\"wl\":32,\"fl\":0}]"), "t.jsonl:2:",
     "step record: field \"fl\" = 64 is out of range [0, 32]"},
    {HDR STEP_AT("1", "0", "[{\"wl\":0,\"fl\":0},{\"wl\":32,\"fl\":0}]"), "t.jsonl:2:",
     "step record: field \"wl\" = 0 is out of range [1, 32]"},
    {HDR STEP_AT("1", "0", "[{\"wl\":8,\"fl\":-1},{\"wl\":32,\"fl\":0}]"), "t.jsonl:2:",
     "step record: field \"fl\" = -1 is out of range [0, 32]"},
    {HDR STEP_AT("1", "0", "[{\"wl\":8,\"fl\":4,\"sparsity\":1.5},{\"wl\":32,\"fl\":0}]"),
     "t.jsonl:2:", "step record: field \"sparsity\" = 1.5 is out of range [0, 1]"},
    {HDR STEP_AT("1", "0", "[{\"wl\":8,\"fl\":4,\"act_sat\":-0.5},{\"wl\":32,\"fl\":0}]"),
     "t.jsonl:2:", "step record: field \"act_sat\" = -0.5 is out of range [0, 1]"},
    {HDR EVENT_STEP("[8,4]", "[2,64]"), "t.jsonl:2:",
     "step record: field \"after\"[1] = 64 is out of range [0, 32]"},
    {HDR EVENT_STEP("[0,0]", "[9,5]"), "t.jsonl:2:",
     "step record: field \"before\" = [0, 0]: the word length must be in [1, 32]"},
};

/* Graph precision propagation's per-layer fields are written only where set and read back;
 * a hand-written header with them (and a float32 layer) loads too. */
START_TEST(test_trace_layer_precision)
{
    char path[256];
    tmp_file(path, sizeof path, "prec.jsonl");
    struct adapt_trace_layer ls[4];
    memcpy(ls, layers, sizeof ls);
    static const char *const sets[4] = {"allow", "deny", "infer", "allow"};
    static const char *const srcs[4] = {"preset", "preset", "kind", "layer"};
    static const char *const precs[4] = {"fp16", "float32", "fp16", "fp16"};
    static const int pu[4] = {0, -1, 1, 1};
    for (int i = 0; i < 4; i++) {
        ls[i].graph_set = sets[i];
        ls[i].graph_source = srcs[i];
        ls[i].precision = precs[i];
        ls[i].precision_unit = pu[i];
    }
    struct adapt_trace_header h = make_header(NULL);
    h.model.layers = ls;
    struct adapt_trace_writer *w;
    ck_assert_int_eq(adapt_trace_writer_create(&w, path), ADAPT_OK);
    ck_assert_int_eq(adapt_trace_write_header(w, &h), ADAPT_OK);
    ck_assert_int_eq(adapt_trace_writer_close(w), ADAPT_OK);
    keep_sample(path, "io_layer_precision.jsonl");
    size_t n;
    char *raw = (char *)tu_read_file(path, &n);
    ck_assert_ptr_nonnull(strstr(raw, "\"unit\":-1,\"graph_set\":\"deny\",\"graph_source\":"
                                      "\"preset\",\"precision\":\"float32\","
                                      "\"precision_unit\":-1}"));
    free(raw);
    struct adapt_trace *t;
    ck_assert_int_eq(adapt_trace_load(&t, path, 0), ADAPT_OK);
    for (int i = 0; i < 4; i++) {
        const struct adapt_trace_layer *a = &t->header.model.layers[i];
        ck_assert_str_eq(a->graph_set, sets[i]);
        ck_assert_str_eq(a->graph_source, srcs[i]);
        ck_assert_str_eq(a->precision, precs[i]);
        ck_assert_int_eq(a->precision_unit, pu[i]);
    }
    adapt_trace_free(t);
    const char *text = HDR_LAYER("\"graph_set\":\"deny\",\"graph_source\":\"layer\","
                                 "\"precision\":\"float32\",\"precision_unit\":-1") STEP;
    tu_write_file(path, text, strlen(text));
    ck_assert_int_eq(adapt_trace_load(&t, path, 0), ADAPT_OK);
    ck_assert_str_eq(t->header.model.layers[0].precision, "float32");
    ck_assert_str_eq(t->header.model.layers[0].graph_source, "layer");
    adapt_trace_free(t);
}
END_TEST

/* The comp policy's search records are read back field by field. */
START_TEST(test_trace_samples)
{
    char path[256];
    tmp_file(path, sizeof path, "samples.jsonl");
    const char *text = HDR SAMPLE("1", "[32,32]", "[-1]") SAMPLE("0", "[16,32]", "[0]") STEP EPOCH;
    tu_write_file(path, text, strlen(text));
    struct adapt_trace *t;
    ck_assert_int_eq(adapt_trace_load(&t, path, 0), ADAPT_OK);
    ck_assert_int_eq(t->n_samples, 2);
    const struct adapt_trace_sample *s = &t->samples[1];
    ck_assert_int_eq(s->stage, 1);
    ck_assert_str_eq(s->plan, "0");
    ck_assert_int_eq(s->steps, 3);
    ck_assert_int_eq(s->samples, 300);
    ck_assert(s->loss == 2.25 && s->cost == 1e6 && s->safe && !s->chosen);
    ck_assert_int_eq(s->n_units, 2);
    ck_assert_int_eq(s->wl[0], 16);
    ck_assert_int_eq(s->wl[1], 32);
    ck_assert_int_eq(s->n_layers, 1);
    ck_assert_int_eq(s->gov[0], 0);
    ck_assert_int_eq(t->samples[0].gov[0], -1);
    ck_assert_int_eq(t->n_steps, 1);
    adapt_trace_free(t);
}
END_TEST

START_TEST(test_trace_errors)
{
    const struct bad_trace *b = &bad_traces[_i];
    char path[256];
    tmp_file(path, sizeof path, "t.jsonl");
    tu_write_file(path, b->text, strlen(b->text));
    struct adapt_trace *t = NULL;
    adapt_error_clear();
    ck_assert_int_eq(adapt_trace_load(&t, path, 0), ADAPT_EFORMAT);
    ck_assert_msg_has(b->where);
    ck_assert_msg_has(b->what);
    ck_assert_msg_has(tmpdir);
}
END_TEST

/* Replaces the first `from` in text by `to` into out. */
static void replace_first(char *out, size_t n, const char *text, const char *from, const char *to)
{
    const char *at = strstr(text, from);
    ck_assert_ptr_nonnull(at);
    int k = snprintf(out, n, "%.*s%s%s", (int)(at - text), text, to, at + strlen(from));
    ck_assert(k > 0 && (size_t)k < n);
}

/* A step record on line 2 with an unknown field nesting `depth` - 1 arrays inside the record. */
static enum adapt_status load_nested(const char *path, int depth)
{
    size_t hl = strlen(HDR), n = hl + 2 * (size_t)depth + 200;
    char *text = malloc(n);
    ck_assert_ptr_nonnull(text);
    char *p = text + sprintf(text, "%s{\"type\":\"step\",\"x\":", HDR);
    for (int i = 1; i < depth; i++) *p++ = '[';
    for (int i = 1; i < depth; i++) *p++ = ']';
    p += sprintf(p, ",\"step\":1,\"epoch\":0,\"lr\":0.1,\"loss\":2.3,\"strategy\":null,"
                    "\"units\":" UNITS32 "}\n");
    tu_write_file(path, text, (size_t)(p - text));
    free(text);
    struct adapt_trace *t = NULL;
    enum adapt_status st = adapt_trace_load(&t, path, 0);
    adapt_trace_free(t);
    return st;
}

/* What trace.h bounds is accepted up to its bounds: a format with FL > WL (quant's fixed(2,8)),
 * step 2^53, epoch 99999, a test after 100000 epochs, records nested ADAPT_TRACE_DEPTH_MAX deep;
 * negative shapes, one past the nesting bound and JSON nested 100000 deep are refused. */
START_TEST(test_trace_bounds)
{
    char path[256], text[4096];
    tmp_file(path, sizeof path, "bounds.jsonl");
    struct adapt_trace *t = NULL;
    const char *ok = HDR STEP_AT("1", "0", "[{\"wl\":2,\"fl\":8},{\"wl\":32,\"fl\":32}]")
        STEP_AT("9007199254740992", "99999", UNITS32) EPOCH_WITH("99999", "9007199254740992", "1",
                                                                 "0")
        "{\"type\":\"test\",\"epoch\":100000,\"test_loss\":1,\"test_acc\":0}\n";
    tu_write_file(path, ok, strlen(ok));
    ck_assert_msg(adapt_trace_load(&t, path, 0) == ADAPT_OK, "%s", adapt_error_message());
    ck_assert_int_eq(t->steps[0].units[0].wl, 2);
    ck_assert_int_eq(t->steps[0].units[0].fl, 8);
    ck_assert_int_eq(t->steps[1].step, ADAPT_TRACE_STEP_MAX);
    ck_assert_int_eq(t->epochs[0].epoch, ADAPT_TRACE_EPOCH_MAX - 1);
    ck_assert_int_eq(t->test.epoch, ADAPT_TRACE_EPOCH_MAX);
    adapt_trace_free(t);

    replace_first(text, sizeof text, HDR STEP, "\"in\":[4]", "\"in\":[-4]");
    tu_write_file(path, text, strlen(text));
    ck_assert_int_eq(adapt_trace_load(&t, path, 0), ADAPT_EFORMAT);
    ck_assert_msg_has("bounds.jsonl:1: header record: field \"in\"[0] = -4 is out of range");
    replace_first(text, sizeof text, HDR STEP, "\"input\":[1,32,32]", "\"input\":[1,32,0]");
    tu_write_file(path, text, strlen(text));
    ck_assert_int_eq(adapt_trace_load(&t, path, 0), ADAPT_EFORMAT);
    ck_assert_msg_has("field \"input\"[2] = 0 is out of range [1, 2147483647]");

    ck_assert_msg(load_nested(path, ADAPT_TRACE_DEPTH_MAX) == ADAPT_OK, "%s",
                  adapt_error_message());
    ck_assert_int_eq(load_nested(path, ADAPT_TRACE_DEPTH_MAX + 1), ADAPT_EFORMAT);
    ck_assert_msg_has("bounds.jsonl:2: JSON nested deeper than 64 arrays and objects");
    ck_assert_int_eq(load_nested(path, 100000), ADAPT_EFORMAT);
    ck_assert_msg_has("bounds.jsonl:2: JSON nested deeper than 64 arrays and objects");
}
END_TEST

/* A line of 5 MiB is refused as too long, by the reader and by the resume
 * truncation, with its line number. */
START_TEST(test_trace_long_line)
{
    char path[256];
    tmp_file(path, sizeof path, "long.jsonl");
    size_t hl = strlen(HDR), n = hl + ((size_t)5 << 20) + 1;
    char *text = malloc(n + 1);
    ck_assert_ptr_nonnull(text);
    memcpy(text, HDR, hl);
    memset(text + hl, ' ', n - hl - 1);
    text[n - 1] = '\n';
    tu_write_file(path, text, n);
    free(text);
    struct adapt_trace *t = NULL;
    ck_assert_int_eq(adapt_trace_load(&t, path, 0), ADAPT_EFORMAT);
    ck_assert_msg_has("long.jsonl:2: line longer than 4194304 bytes");
    ck_assert_int_eq(adapt_trace_truncate_after_epoch(path, 0), ADAPT_EFORMAT);
    ck_assert_msg_has("long.jsonl:2: line longer than 4194304 bytes");
}
END_TEST

START_TEST(test_trace_partial_and_missing)
{
    char path[256];
    struct adapt_trace *t;
    struct adapt_trace_writer *w;
    tmp_file(path, sizeof path, "t.jsonl");
    const char *text = HDR STEP EPOCH "{\"type\":\"st";
    tu_write_file(path, text, strlen(text));
    ck_assert_int_eq(adapt_trace_load(&t, path, 0), ADAPT_EFORMAT);
    ck_assert_int_eq(adapt_trace_load(&t, path, ADAPT_TRACE_LOAD_PARTIAL), ADAPT_OK);
    ck_assert(t->truncated);
    ck_assert_int_eq(t->n_lines, 3);
    ck_assert_int_eq(t->n_steps, 1);
    ck_assert_int_eq(t->n_epochs, 1);
    ck_assert_int_eq(t->steps[0].n_events, 0);
    ck_assert(!t->has_test && !t->has_end);
    adapt_trace_free(t);

    tmp_file(path, sizeof path, "none.jsonl");
    ck_assert_int_eq(adapt_trace_load(&t, path, 0), ADAPT_ENOENT);
    ck_assert_msg_has("none.jsonl");
    ck_assert_int_eq(adapt_trace_writer_append(&w, path, -1), ADAPT_ENOENT);
    tmp_file(path, sizeof path, "no/such/dir/t.jsonl");
    ck_assert_int_eq(adapt_trace_writer_create(&w, path), ADAPT_ENOENT);
    ck_assert_msg_has("no/such/dir/t.jsonl");
}
END_TEST

START_TEST(test_trace_truncate_and_append)
{
    char path[256];
    size_t n_full, n_cut;
    struct adapt_trace *t;
    struct adapt_trace_writer *w;
    tmp_file(path, sizeof path, "trace.jsonl");
    int64_t after_e1 = write_trace(path);
    unsigned char *full = tu_read_file(path, &n_full);

    /* no epoch 5: refused, file unchanged */
    ck_assert_int_eq(adapt_trace_truncate_after_epoch(path, 5), ADAPT_ENOENT);
    ck_assert_msg_has("no epoch record for epoch 5");
    unsigned char *cut = tu_read_file(path, &n_cut);
    ck_assert_uint_eq(n_cut, n_full);
    free(cut);

    /* after epoch 1: the header, two steps and the epoch line, byte for byte */
    ck_assert_int_eq(adapt_trace_truncate_after_epoch(path, 1), ADAPT_OK);
    cut = tu_read_file(path, &n_cut);
    ck_assert_uint_eq(n_cut, (size_t)after_e1);
    ck_assert_int_eq(memcmp(cut, full, n_cut), 0);
    free(cut);
    char tmp[300];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    ck_assert(!file_exists(tmp));
    ck_assert_int_eq(adapt_trace_load(&t, path, 0), ADAPT_OK);
    ck_assert_int_eq(t->n_steps, 2);
    ck_assert_int_eq(t->n_epochs, 1);
    ck_assert(!t->has_test && !t->has_end);
    adapt_trace_free(t);
    /* truncating at the last epoch again is a no-op */
    ck_assert_int_eq(adapt_trace_truncate_after_epoch(path, 1), ADAPT_OK);
    cut = tu_read_file(path, &n_cut);
    ck_assert_uint_eq(n_cut, (size_t)after_e1);
    free(cut);

    /* resume: append the rest; the file is again what one uninterrupted run writes */
    ck_assert_int_eq(adapt_trace_writer_append(&w, path, -1), ADAPT_OK);
    ck_assert_int_eq(adapt_trace_writer_offset(w), after_e1);
    struct adapt_trace_step s2 = make_step(2);
    struct adapt_trace_epoch e2 = make_epoch(2);
    struct adapt_trace_test te = {2, 0.625, 0.8125};
    struct adapt_trace_end end = {ADAPT_TRACE_END_STOPPED, 26.25};
    ck_assert_int_eq(adapt_trace_write_step(w, &s2), ADAPT_OK);
    ck_assert_int_eq(adapt_trace_write_epoch(w, &e2), ADAPT_OK);
    ck_assert_int_eq(adapt_trace_write_test(w, &te), ADAPT_OK);
    ck_assert_int_eq(adapt_trace_write_end(w, &end), ADAPT_OK);
    ck_assert_int_eq(adapt_trace_writer_offset(w), (int64_t)n_full);
    ck_assert_int_eq(adapt_trace_writer_close(w), ADAPT_OK);
    cut = tu_read_file(path, &n_cut);
    ck_assert_uint_eq(n_cut, n_full);
    ck_assert_int_eq(memcmp(cut, full, n_full), 0);
    free(cut);

    /* append at a saved byte offset drops what followed it */
    ck_assert_int_eq(adapt_trace_writer_append(&w, path, after_e1), ADAPT_OK);
    ck_assert_int_eq(adapt_trace_writer_close(w), ADAPT_OK);
    cut = tu_read_file(path, &n_cut);
    ck_assert_uint_eq(n_cut, (size_t)after_e1);
    free(cut);
    /* an offset inside a line, or past the end, is refused and changes nothing */
    ck_assert_int_eq(adapt_trace_writer_append(&w, path, after_e1 - 3), ADAPT_EINVAL);
    ck_assert_msg_has("not the end of a line");
    ck_assert_int_eq(adapt_trace_writer_append(&w, path, after_e1 + 1), ADAPT_EINVAL);
    cut = tu_read_file(path, &n_cut);
    ck_assert_uint_eq(n_cut, (size_t)after_e1);
    free(cut);

    /* append with -1 cuts an incomplete last line (a run killed mid-write) */
    FILE *f = fopen(path, "ab");
    fputs("{\"type\":\"step\",\"st", f);
    fclose(f);
    ck_assert_int_eq(adapt_trace_writer_append(&w, path, -1), ADAPT_OK);
    ck_assert_int_eq(adapt_trace_writer_close(w), ADAPT_OK);
    cut = tu_read_file(path, &n_cut);
    ck_assert_uint_eq(n_cut, (size_t)after_e1);
    free(cut);

    /* truncation refuses a trace that is malformed before the epoch */
    const char *bad = HDR "{oops}\n" EPOCH;
    tu_write_file(path, bad, strlen(bad));
    ck_assert_int_eq(adapt_trace_truncate_after_epoch(path, 1), ADAPT_EFORMAT);
    ck_assert_msg_has(":2:");
    free(full);
}
END_TEST

void test_io_add_read(TCase *trace)
{
    tcase_add_test(trace, test_trace_layer_precision);
    tcase_add_test(trace, test_trace_samples);
    tcase_add_loop_test(trace, test_trace_errors, 0,
                        (int)(sizeof bad_traces / sizeof bad_traces[0]));
    tcase_add_test(trace, test_trace_partial_and_missing);
    tcase_add_test(trace, test_trace_bounds);
    tcase_add_test(trace, test_trace_long_line);
    tcase_add_test(trace, test_trace_truncate_and_append);
}
