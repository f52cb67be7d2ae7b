/* tests/test_io.c: src/trace (JSON-lines writer, reader, truncation) and src/safetensors. */
#include <config.h> /* PACKAGE_VERSION */

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
#include "tests/testutil.h"

static char tmpdir[64];

static void setup(void) { tu_tmpdir_make(tmpdir, sizeof tmpdir, "io"); }

static void teardown(void) { tu_tmpdir_remove(tmpdir); }

static void tmp_file(char *path, size_t size, const char *name)
{
    tu_path(path, size, tmpdir, name);
}

/* With ADAPT_TRACE_SAMPLES set to a directory, keeps a copy of a trace the
 * writer produced there as NAME (tests/python.test validates those copies
 * against doc/trace.schema.json). */
static void keep_sample(const char *path, const char *name)
{
    const char *dir = getenv("ADAPT_TRACE_SAMPLES");
    if (!dir || !dir[0]) return;
    char dst[512];
    size_t n;
    unsigned char *b = tu_read_file(path, &n);
    tu_write_file(tu_path(dst, sizeof dst, dir, name), b, n);
    free(b);
}

static int file_exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

#define ck_assert_msg_has(s)                                                                       \
    ck_assert_msg(strstr(adapt_error_message(), (s)) != NULL, "message \"%s\" lacks \"%s\"",       \
                  adapt_error_message(), (s))

/* ------------------------------------------------- allocation-failure injection
 *
 * test_io is linked with -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc (tests/local.mk), so
 * every allocation made by the code linked into it (the trace reader and src/base) goes through
 * the wrappers below. With
 * fail_at >= 0 the allocation numbered fail_at (counting from 0 since n_allocs was reset) fails
 * as malloc does when memory runs out. */
void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
static long fail_at = -1, n_allocs;

static int alloc_fails(void)
{
    if (fail_at < 0) return 0;
    if (n_allocs++ != fail_at) return 0;
    errno = ENOMEM;
    return 1;
}

void *__wrap_malloc(size_t n);
void *__wrap_malloc(size_t n) { return alloc_fails() ? NULL : __real_malloc(n); }

void *__wrap_calloc(size_t n, size_t size);
void *__wrap_calloc(size_t n, size_t size)
{
    return alloc_fails() ? NULL : __real_calloc(n, size);
}

void *__wrap_realloc(void *p, size_t n);
void *__wrap_realloc(void *p, size_t n) { return alloc_fails() ? NULL : __real_realloc(p, n); }

/* jansson's allocator in test_trace_out_of_memory: every allocation fails. (Failing one in the
 * middle of a parse is not tried: jansson 2.14 then writes a byte past a string buffer.) */
static void *json_malloc_none(size_t n)
{
    (void)n;
    errno = ENOMEM;
    return NULL;
}

/* =============================================================== trace */

/* A small LeNet-like description: conv (unit 0), tanh, pool, linear (unit 1). */
static const struct adapt_trace_layer layers[4] = {
    {"features.0", "conv2d", 3, 3, {1, 32, 32, 0}, {6, 28, 28, 0}, 156, 117600, 0, 0, 5, 1, 0, 1,
     1, NULL, NULL, NULL, 0},
    {"features.1", "tanh", 3, 3, {6, 28, 28, 0}, {6, 28, 28, 0}, 0, 0, 4704, -1, 0, 0, 0, 1, 1,
     NULL, NULL, NULL, 0},
    {"features.2", "avgpool2d", 3, 3, {6, 28, 28, 0}, {6, 14, 14, 0}, 0, 0, 4704, -1, 2, 2, 0, 1,
     1, NULL, NULL, NULL, 0},
    {"classifier.0", "linear", 1, 1, {1176, 0, 0, 0}, {10, 0, 0, 0}, 11770, 11760, 0, 1, 0, 0, 0,
     1, 1, NULL, NULL, NULL, 0},
};
static const struct adapt_trace_unit units[2] = {
    {"features.0", 0, 150, 117600},
    {"classifier.0", 3, 11760, 11760},
};
static const char *const overrides[2] = {"train.epochs=2", "optim.lr=0.02385"};

static struct adapt_trace_header make_header(json_t *config)
{
    struct adapt_trace_header h;
    memset(&h, 0, sizeof h);
    h.created = "2024-05-01T12:34:56Z";
    h.seed = 2385;
    h.threads = 3;
    h.policy = "adapt";
    h.config = config;
    h.config_file = "experiments/configs/lenet5.ini";
    h.n_overrides = 2;
    h.overrides = overrides;
    h.dataset.name = "fashion-mnist";
    h.dataset.train = 55000;
    h.dataset.val = 5000;
    h.dataset.test = 10000;
    h.dataset.classes = 10;
    h.model.name = "lenet5";
    h.model.input[0] = 1;
    h.model.input[1] = 32;
    h.model.input[2] = 32;
    h.model.classes = 10;
    h.model.params = 156 + 11770;
    h.model.macs = 117600 + 11760;
    h.model.n_layers = 4;
    h.model.layers = layers;
    h.n_units = 2;
    h.units = units;
    return h;
}

static struct adapt_trace_unit_state ustate[3][2] = {
    {{8, 4, 37.25, 51, 0.0625, 12, 345, 0.25}, {10, 6, 25.0, 50, 0.125, 0, 7, 0.0}},
    {{32, 0, NAN, -1, NAN, -1, -1, NAN}, {32, 0, NAN, -1, NAN, -1, -1, NAN}},
    {{9, 5, 99.5, 150, 0.5, 1, 2, 0.5}, {12, 8, 100.0, 149, 0.2385, 3, 4, NAN}},
};
static struct adapt_trace_event events[2] = {
    {1, ADAPT_TRACE_EVENT_PD, {10, 6}, {8, 5}, 4, 5, 4096, 0},
    {0, ADAPT_TRACE_EVENT_PU, {8, 4}, {10, 7}, 0, 0, 0, 3},
};

static struct adapt_trace_step make_step(int i)
{
    struct adapt_trace_step s;
    memset(&s, 0, sizeof s);
    s.step = 10 * (i + 1);
    s.epoch = i < 2 ? 1 : 2;
    s.lr = 0.02385 / (i + 1);
    s.loss = i == 1 ? NAN : 2.385 - 0.5 * i;
    s.strategy = i == 0 ? ADAPT_TRACE_STRATEGY_MIN : i == 1 ? ADAPT_TRACE_STRATEGY_NONE
                                                            : ADAPT_TRACE_STRATEGY_MAX;
    s.n_units = 2;
    s.units = ustate[i];
    s.n_events = i == 0 ? 2 : 0;
    s.events = events;
    s.accum = 4 + i;
    s.overflow = i == 1;
    return s;
}

static struct adapt_trace_epoch make_epoch(int e)
{
    struct adapt_trace_epoch ep = {e, 20 * e, 0.02385, 1.5 / e, 0.4 + 0.1 * e, 1.75 / e,
                                   0.35 + 0.1 * e, 12.5 * e, 4321.5};
    if (e == 2) ep.val_loss = ep.val_acc = NAN; /* no validation split */
    return ep;
}

/* Writes header, steps 0-1, epoch 1, step 2, epoch 2, test, end; returns the byte
 * offset after epoch 1. */
static int64_t write_trace(const char *path)
{
    struct adapt_trace_writer *w;
    json_t *cfg = json_pack("{s:{s:i,s:f},s:{s:s}}", "train", "epochs", 2, "lr", 0.02385, "policy",
                            "name", "adapt");
    ck_assert_int_eq(adapt_trace_writer_create(&w, path), ADAPT_OK);
    struct adapt_trace_header h = make_header(cfg);
    ck_assert_int_eq(adapt_trace_write_header(w, &h), ADAPT_OK);
    for (int i = 0; i < 2; i++) {
        struct adapt_trace_step s = make_step(i);
        ck_assert_int_eq(adapt_trace_write_step(w, &s), ADAPT_OK);
    }
    struct adapt_trace_epoch e1 = make_epoch(1);
    ck_assert_int_eq(adapt_trace_write_epoch(w, &e1), ADAPT_OK);
    ck_assert_int_eq(adapt_trace_flush(w), ADAPT_OK);
    int64_t off = adapt_trace_writer_offset(w);
    struct stat sb;
    ck_assert_int_eq(stat(path, &sb), 0);
    ck_assert_int_eq((int64_t)sb.st_size, off); /* flushed: the offset is the file size */
    struct adapt_trace_step s2 = make_step(2);
    ck_assert_int_eq(adapt_trace_write_step(w, &s2), ADAPT_OK);
    struct adapt_trace_epoch e2 = make_epoch(2);
    ck_assert_int_eq(adapt_trace_write_epoch(w, &e2), ADAPT_OK);
    struct adapt_trace_test t = {2, 0.625, 0.8125};
    ck_assert_int_eq(adapt_trace_write_test(w, &t), ADAPT_OK);
    struct adapt_trace_end end = {ADAPT_TRACE_END_STOPPED, 26.25};
    ck_assert_int_eq(adapt_trace_write_end(w, &end), ADAPT_OK);
    ck_assert_int_eq(adapt_trace_writer_close(w), ADAPT_OK);
    json_decref(cfg);
    return off;
}

/* NaN-aware equality for doubles that went through %.17g. */
static int same(double a, double b)
{
    return (isnan(a) && isnan(b)) || a == b;
}

static void check_step(const struct adapt_trace_step *got, int i)
{
    struct adapt_trace_step s = make_step(i);
    ck_assert_int_eq(got->step, s.step);
    ck_assert_int_eq(got->epoch, s.epoch);
    ck_assert(same(got->lr, s.lr));
    ck_assert(same(got->loss, s.loss));
    ck_assert_int_eq(got->strategy, s.strategy);
    ck_assert_int_eq(got->accum, s.accum);
    ck_assert_int_eq(got->overflow, s.overflow);
    ck_assert_int_eq(got->n_units, 2);
    for (int u = 0; u < 2; u++) {
        const struct adapt_trace_unit_state *a = &got->units[u], *b = &s.units[u];
        ck_assert_int_eq(a->wl, b->wl);
        ck_assert_int_eq(a->fl, b->fl);
        ck_assert(same(a->lb, b->lb));
        ck_assert_int_eq(a->r, b->r);
        ck_assert(same(a->sparsity, b->sparsity));
        ck_assert(same(a->act_sat, b->act_sat));
        ck_assert_int_eq(a->sat, b->sat);
        ck_assert_int_eq(a->flush, b->flush);
    }
    ck_assert_int_eq(got->n_events, s.n_events);
    for (int k = 0; k < s.n_events; k++) {
        const struct adapt_trace_event *a = &got->events[k], *b = &s.events[k];
        ck_assert_int_eq(a->unit, b->unit);
        ck_assert_int_eq(a->kind, b->kind);
        ck_assert_int_eq(a->before[0], b->before[0]);
        ck_assert_int_eq(a->before[1], b->before[1]);
        ck_assert_int_eq(a->after[0], b->after[0]);
        ck_assert_int_eq(a->after[1], b->after[1]);
        ck_assert_int_eq(a->bisect_steps, b->bisect_steps);
        ck_assert_int_eq(a->kl_evals, b->kl_evals);
        ck_assert_int_eq(a->sample, b->sample);
        ck_assert_int_eq(a->s, b->s);
    }
}

static void check_epoch(const struct adapt_trace_epoch *a, int e)
{
    struct adapt_trace_epoch b = make_epoch(e);
    ck_assert_int_eq(a->epoch, b.epoch);
    ck_assert_int_eq(a->step, b.step);
    ck_assert(same(a->lr, b.lr) && same(a->train_loss, b.train_loss) &&
              same(a->train_acc, b.train_acc));
    ck_assert(same(a->val_loss, b.val_loss) && same(a->val_acc, b.val_acc));
    ck_assert(same(a->wall_s, b.wall_s) && same(a->images_per_s, b.images_per_s));
}

START_TEST(test_trace_roundtrip)
{
    char path[256];
    tmp_file(path, sizeof path, "trace.jsonl");
    write_trace(path);
    keep_sample(path, "io_roundtrip.jsonl");

    /* the first line as written: type first, schema 1, this build's version */
    size_t n;
    unsigned char *raw = tu_read_file(path, &n);
    const char *want =
        "{\"type\":\"header\",\"schema\":1,\"program\":\"adapt-sim\",\"version\":\"" PACKAGE_VERSION
        "\",\"created\":\"2024-05-01T12:34:56Z\",\"seed\":2385,\"threads\":3,";
    ck_assert_int_eq(strncmp((const char *)raw, want, strlen(want)), 0);
    /* the fp32-style step omits lb, r, sparsity, sat and flush; the NaN loss is null */
    ck_assert_ptr_nonnull(strstr((const char *)raw, "\"loss\":null,\"strategy\":null,\"units\":"
                                                    "[{\"wl\":32,\"fl\":0},{\"wl\":32,\"fl\":0}]"));
    ck_assert_ptr_nonnull(strstr((const char *)raw, "{\"type\":\"end\",\"status\":\"stopped\","
                                                    "\"wall_s\":26.25}\n"));
    ck_assert_uint_eq(tu_count_lines(path), 8);
    free(raw);

    struct adapt_trace *t;
    ck_assert_int_eq(adapt_trace_load(&t, path, 0), ADAPT_OK);
    const struct adapt_trace_header *h = &t->header;
    ck_assert_int_eq(h->schema, 1);
    ck_assert_str_eq(h->program, "adapt-sim");
    ck_assert_str_eq(h->version, PACKAGE_VERSION);
    ck_assert_str_eq(h->created, "2024-05-01T12:34:56Z");
    ck_assert_int_eq(h->seed, 2385);
    ck_assert_int_eq(h->threads, 3);
    ck_assert_str_eq(h->policy, "adapt");
    ck_assert_int_eq(
        json_integer_value(json_object_get(json_object_get(h->config, "train"), "epochs")), 2);
    ck_assert_str_eq(h->config_file, "experiments/configs/lenet5.ini");
    ck_assert_int_eq(h->n_overrides, 2);
    ck_assert_str_eq(h->overrides[1], "optim.lr=0.02385");
    ck_assert_str_eq(h->dataset.name, "fashion-mnist");
    ck_assert_int_eq(h->dataset.train, 55000);
    ck_assert_int_eq(h->dataset.val, 5000);
    ck_assert_int_eq(h->dataset.test, 10000);
    ck_assert_int_eq(h->dataset.classes, 10);
    ck_assert_str_eq(h->model.name, "lenet5");
    ck_assert_int_eq(h->model.input[0], 1);
    ck_assert_int_eq(h->model.input[2], 32);
    ck_assert_int_eq(h->model.classes, 10);
    ck_assert_int_eq(h->model.params, 11926);
    ck_assert_int_eq(h->model.macs, 129360);
    ck_assert_int_eq(h->model.n_layers, 4);
    for (int i = 0; i < 4; i++) {
        const struct adapt_trace_layer *a = &h->model.layers[i], *b = &layers[i];
        ck_assert_str_eq(a->name, b->name);
        ck_assert_str_eq(a->kind, b->kind);
        ck_assert_int_eq(a->in_ndim, b->in_ndim);
        ck_assert_int_eq(a->out_ndim, b->out_ndim);
        for (int d = 0; d < b->in_ndim; d++) ck_assert_int_eq(a->in[d], b->in[d]);
        for (int d = 0; d < b->out_ndim; d++) ck_assert_int_eq(a->out[d], b->out[d]);
        ck_assert_int_eq(a->params, b->params);
        ck_assert_int_eq(a->macs, b->macs);
        ck_assert_int_eq(a->elementwise, b->elementwise);
        ck_assert_int_eq(a->unit, b->unit);
        ck_assert_int_eq(a->k, b->k);
        ck_assert_int_eq(a->stride, b->stride);
        ck_assert_int_eq(a->pad, b->pad);
        /* no graph precision propagation: the fields are absent */
        ck_assert_ptr_null(a->graph_set);
        ck_assert_ptr_null(a->graph_source);
        ck_assert_ptr_null(a->precision);
    }
    ck_assert_int_eq(h->n_units, 2);
    ck_assert_str_eq(h->units[1].name, "classifier.0");
    ck_assert_int_eq(h->units[1].layer, 3);
    ck_assert_int_eq(h->units[1].weights, 11760);
    ck_assert_int_eq(h->units[0].macs, 117600);

    ck_assert_int_eq(t->n_steps, 3);
    for (int i = 0; i < 3; i++) check_step(&t->steps[i], i);
    ck_assert_int_eq(t->n_epochs, 2);
    check_epoch(&t->epochs[0], 1);
    check_epoch(&t->epochs[1], 2);
    ck_assert(t->has_test);
    ck_assert_int_eq(t->test.epoch, 2);
    ck_assert(t->test.test_loss == 0.625 && t->test.test_acc == 0.8125);
    ck_assert(t->has_end);
    ck_assert_int_eq(t->end.status, ADAPT_TRACE_END_STOPPED);
    ck_assert(t->end.wall_s == 26.25);
    ck_assert_int_eq(t->n_lines, 8);
    ck_assert(!t->truncated);
    adapt_trace_free(t);

    /* a header written without a creation time gets the current UTC time */
    struct adapt_trace_writer *w;
    struct adapt_trace_header hn = make_header(NULL);
    hn.created = NULL;
    ck_assert_int_eq(adapt_trace_writer_create(&w, path), ADAPT_OK);
    ck_assert_int_eq(adapt_trace_write_header(w, &hn), ADAPT_OK);
    ck_assert_int_eq(adapt_trace_writer_close(w), ADAPT_OK);
    keep_sample(path, "io_header_only.jsonl");
    ck_assert_int_eq(adapt_trace_load(&t, path, 0), ADAPT_OK);
    ck_assert_int_eq(strlen(t->header.created), 20); /* YYYY-MM-DDTHH:MM:SSZ */
    ck_assert_int_eq(t->header.created[10], 'T');
    ck_assert_int_eq(t->header.created[19], 'Z');
    ck_assert_int_eq(json_object_size(t->header.config), 0);
    ck_assert_int_eq(t->n_steps, 0);
    adapt_trace_free(t);
}
END_TEST

/* The reader's typed view of the config values downstream tools use, and the file line of
 * every step and epoch record. */
START_TEST(test_trace_typed_header_and_lines)
{
    char path[256];
    struct adapt_trace *t;
    tmp_file(path, sizeof path, "trace.jsonl");
    /* write_trace's config has none of the values: header, step, step, epoch 1, step,
     * epoch 2, test, end */
    write_trace(path);
    ck_assert_int_eq(adapt_trace_load(&t, path, 0), ADAPT_OK);
    ck_assert_int_eq(t->header.cfg.batch, 0);
    ck_assert_int_eq(t->header.cfg.accumulation, 1);
    ck_assert_int_eq(t->header.cfg.muppet_r, 0);
    ck_assert_ptr_null(t->header.cfg.compat);
    ck_assert_ptr_null(t->header.cfg.name);
    ck_assert_int_eq(t->n_steps, 3);
    ck_assert_int_eq(t->step_line[0], 2);
    ck_assert_int_eq(t->step_line[1], 3);
    ck_assert_int_eq(t->step_line[2], 5);
    ck_assert_int_eq(t->n_epochs, 2);
    ck_assert_int_eq(t->epoch_line[0], 4);
    ck_assert_int_eq(t->epoch_line[1], 6);
    adapt_trace_free(t);

    /* every value set: header, epoch 1, then 70 steps (the arrays grow past 64) */
    json_t *cfg = json_pack("{s:{s:i,s:i,s:i},s:{s:i},s:{s:s},s:{s:s}}", "train", "batch", 64,
                            "accumulation_steps", 4, "epochs", 2, "policy", "muppet_r", 5,
                            "quantization", "compat", "reference", "run", "name", "mxfp8");
    struct adapt_trace_writer *w;
    ck_assert_int_eq(adapt_trace_writer_create(&w, path), ADAPT_OK);
    struct adapt_trace_header h = make_header(cfg);
    ck_assert_int_eq(adapt_trace_write_header(w, &h), ADAPT_OK);
    struct adapt_trace_epoch e1 = make_epoch(1);
    ck_assert_int_eq(adapt_trace_write_epoch(w, &e1), ADAPT_OK);
    for (int i = 0; i < 70; i++) {
        struct adapt_trace_step s = make_step(i % 3);
        s.step = i + 1;
        s.epoch = 1 + i / 35; /* epoch numbers do not decrease */
        ck_assert_int_eq(adapt_trace_write_step(w, &s), ADAPT_OK);
    }
    ck_assert_int_eq(adapt_trace_writer_close(w), ADAPT_OK);
    json_decref(cfg);
    ck_assert_int_eq(adapt_trace_load(&t, path, 0), ADAPT_OK);
    ck_assert_int_eq(t->header.cfg.batch, 64);
    ck_assert_int_eq(t->header.cfg.accumulation, 4);
    ck_assert_int_eq(t->header.cfg.muppet_r, 5);
    ck_assert_str_eq(t->header.cfg.compat, "reference");
    ck_assert_str_eq(t->header.cfg.name, "mxfp8");
    ck_assert_int_eq(t->n_epochs, 1);
    ck_assert_int_eq(t->epoch_line[0], 2);
    ck_assert_int_eq(t->n_steps, 70);
    for (int i = 0; i < 70; i++) ck_assert_int_eq(t->step_line[i], i + 3);
    adapt_trace_free(t);
}
END_TEST

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

/* Running out of memory anywhere while reading a trace is reported as such (ADAPT_ENOMEM, "out
 * of memory", with the file), never as a malformed or empty trace, and frees what it had: each
 * allocation the reader makes (counted by the wrappers above) is made to fail in turn, until the
 * load needs fewer allocations than the index that would fail. Under
 * the sanitizer build LeakSanitizer checks that every failed load freed everything. */
START_TEST(test_trace_out_of_memory)
{
    char path[256];
    tmp_file(path, sizeof path, "oom.jsonl");
    write_trace(path);
    static const unsigned flags[2] = {0, ADAPT_TRACE_LOAD_PARTIAL};
    for (int f = 0; f < 2; f++) {
        long k;
        for (k = 0;; k++) {
            struct adapt_trace *t = NULL;
            adapt_error_clear();
            n_allocs = 0;
            fail_at = k;
            enum adapt_status st = adapt_trace_load(&t, path, flags[f]);
            fail_at = -1;
            if (n_allocs <= k) { /* this load made fewer than k + 1 allocations: none failed */
                ck_assert_int_eq(st, ADAPT_OK);
                ck_assert_int_eq(t->n_steps, 3);
                adapt_trace_free(t);
                break;
            }
            ck_assert_msg(st == ADAPT_ENOMEM, "allocation %ld of the load failed: status %d, "
                          "message \"%s\"", k, (int)st, adapt_error_message());
            ck_assert_ptr_null(t);
            ck_assert_msg_has("out of memory");
            ck_assert_msg_has("oom.jsonl");
        }
        /* the line buffer, the trace, its header's strings and arrays, the step and epoch
         * arrays and their per-unit states: over 30 points */
        ck_assert_int_gt(k, 30);
    }
    /* the same for the resume truncation, which reads the trace up to an epoch record */
    long k;
    for (k = 0;; k++) {
        adapt_error_clear();
        n_allocs = 0;
        fail_at = k;
        enum adapt_status st = adapt_trace_truncate_after_epoch(path, 1);
        fail_at = -1;
        if (n_allocs <= k) {
            ck_assert_int_eq(st, ADAPT_OK);
            break;
        }
        ck_assert_msg(st == ADAPT_ENOMEM, "allocation %ld of the truncation failed: status %d, "
                      "message \"%s\"", k, (int)st, adapt_error_message());
        ck_assert_msg_has("out of memory");
    }
    ck_assert_int_gt(k, 0); /* its line buffer */
    /* jansson out of memory: reported as such, not as malformed JSON */
    struct adapt_trace *t = NULL;
    json_set_alloc_funcs(json_malloc_none, free);
    adapt_error_clear();
    ck_assert_int_eq(adapt_trace_load(&t, path, 0), ADAPT_ENOMEM);
    ck_assert_msg_has("oom.jsonl:1: out of memory");
    ck_assert_int_eq(adapt_trace_truncate_after_epoch(path, 1), ADAPT_ENOMEM);
    ck_assert_msg_has("oom.jsonl:1: out of memory");
    json_set_alloc_funcs(malloc, free);
    ck_assert_int_eq(adapt_trace_load(&t, path, 0), ADAPT_OK);
    ck_assert_int_eq(t->n_steps, 2); /* truncated after epoch 1, intact otherwise */
    adapt_trace_free(t);
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

/* ========================================================= safetensors */

/* The checkpoint used by several tests: two F32 and two I64 tensors, two metadata keys. */
static float weight[150], bias[6];
static int64_t counts[3] = {2385, -7, INT64_MAX};
static int64_t step_no = 123456789012LL;

static void fill(void)
{
    /* high-entropy values, exactly representable: (i * 2.385) rounded to float */
    for (int i = 0; i < 150; i++) weight[i] = (float)((i - 75) * 2.385);
    for (int i = 0; i < 6; i++) bias[i] = (float)(-0.5 + i * 0.02385);
}

static enum adapt_status write_ckpt(const char *path)
{
    fill();
    struct adapt_safetensors_tensor t[4] = {
        {"weight", ADAPT_ST_F32, 4, {6, 1, 5, 5}, weight},
        {"bias", ADAPT_ST_F32, 1, {6}, bias},
        {"step", ADAPT_ST_I64, 0, {0}, &step_no},
        {"counts", ADAPT_ST_I64, 1, {3}, counts},
    };
    struct adapt_safetensors_meta m[2] = {{"format", "adapt-sim checkpoint"}, {"epoch", "7"}};
    return adapt_safetensors_write(path, t, 4, m, 2);
}

START_TEST(test_st_roundtrip)
{
    char path[256];
    tmp_file(path, sizeof path, "ckpt.safetensors");
    ck_assert_int_eq(write_ckpt(path), ADAPT_OK);
    struct adapt_safetensors *f;
    ck_assert_int_eq(adapt_safetensors_load(&f, path), ADAPT_OK);
    ck_assert_int_eq(f->n_tensors, 4);
    ck_assert_int_eq(f->n_meta, 2);
    ck_assert_str_eq(adapt_safetensors_meta_get(f, "format"), "adapt-sim checkpoint");
    ck_assert_str_eq(adapt_safetensors_meta_get(f, "epoch"), "7");
    ck_assert_ptr_null(adapt_safetensors_meta_get(f, "missing"));

    const struct adapt_safetensors_tensor *w = adapt_safetensors_find(f, "weight");
    ck_assert_ptr_nonnull(w);
    ck_assert_int_eq(w->dtype, ADAPT_ST_F32);
    ck_assert_int_eq(w->ndim, 4);
    ck_assert_int_eq(w->shape[0], 6);
    ck_assert_int_eq(w->shape[3], 5);
    ck_assert_int_eq(adapt_safetensors_numel(w), 150);
    ck_assert_int_eq(((uintptr_t)w->data) % 4, 0);
    ck_assert_int_eq(memcmp(w->data, weight, sizeof weight), 0);
    const struct adapt_safetensors_tensor *s = adapt_safetensors_find(f, "step");
    ck_assert_int_eq(s->ndim, 0);
    ck_assert_int_eq(adapt_safetensors_numel(s), 1);
    ck_assert_int_eq(((uintptr_t)s->data) % 8, 0);
    ck_assert_ptr_null(adapt_safetensors_find(f, "nope"));

    float b[6];
    int64_t c[3], shape6[1] = {6}, shape3[1] = {3}, shape5[1] = {5};
    ck_assert_int_eq(adapt_safetensors_copy(f, "bias", ADAPT_ST_F32, 1, shape6, b), ADAPT_OK);
    ck_assert_int_eq(memcmp(b, bias, sizeof b), 0);
    ck_assert_int_eq(adapt_safetensors_copy(f, "counts", ADAPT_ST_I64, 1, shape3, c), ADAPT_OK);
    ck_assert_int_eq(c[0], 2385);
    ck_assert_int_eq(c[1], -7);
    ck_assert_int_eq(c[2], INT64_MAX);
    int64_t st;
    ck_assert_int_eq(adapt_safetensors_copy(f, "step", ADAPT_ST_I64, 0, NULL, &st), ADAPT_OK);
    ck_assert_int_eq(st, 123456789012LL);
    ck_assert_int_eq(adapt_safetensors_copy(f, "bias", ADAPT_ST_F32, 1, shape5, b), ADAPT_EINVAL);
    ck_assert_msg_has("tensor \"bias\" is F32 (6), expected F32 (5)");
    ck_assert_int_eq(adapt_safetensors_copy(f, "bias", ADAPT_ST_F64, 1, shape6, b), ADAPT_EINVAL);
    ck_assert_int_eq(adapt_safetensors_copy(f, "gamma", ADAPT_ST_F32, 1, shape6, b), ADAPT_ENOENT);
    ck_assert_msg_has("no tensor \"gamma\"");
    adapt_safetensors_free(f);

    /* no tensors and no metadata: "{}" padded to 8 bytes */
    ck_assert_int_eq(adapt_safetensors_write(path, NULL, 0, NULL, 0), ADAPT_OK);
    size_t n;
    unsigned char *raw = tu_read_file(path, &n);
    ck_assert_uint_eq(n, 16);
    ck_assert_int_eq(memcmp(raw, "\x08\0\0\0\0\0\0\0{}      ", 16), 0);
    free(raw);
    ck_assert_int_eq(adapt_safetensors_load(&f, path), ADAPT_OK);
    ck_assert_int_eq(f->n_tensors, 0);
    adapt_safetensors_free(f);
}
END_TEST

START_TEST(test_st_layout)
{
    char path[256];
    tmp_file(path, sizeof path, "ckpt.safetensors");
    ck_assert_int_eq(write_ckpt(path), ADAPT_OK);
    size_t n;
    unsigned char *raw = tu_read_file(path, &n);
    uint64_t hlen = 0;
    for (int i = 0; i < 8; i++) hlen |= (uint64_t)raw[i] << (8 * i);
    ck_assert_uint_eq(hlen % 8, 0);
    /* The expected header, compact JSON in the writer's order: metadata first, then
     * I64 tensors by name (counts 3*8 = 24 bytes, step 8), then F32 by name
     * (bias 6*4 = 24, weight 150*4 = 600). */
    const char *want =
        "{\"__metadata__\":{\"format\":\"adapt-sim checkpoint\",\"epoch\":\"7\"},"
        "\"counts\":{\"dtype\":\"I64\",\"shape\":[3],\"data_offsets\":[0,24]},"
        "\"step\":{\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":[24,32]},"
        "\"bias\":{\"dtype\":\"F32\",\"shape\":[6],\"data_offsets\":[32,56]},"
        "\"weight\":{\"dtype\":\"F32\",\"shape\":[6,1,5,5],\"data_offsets\":[56,656]}}";
    size_t wl = strlen(want);
    ck_assert_uint_eq(hlen, (wl + 7) / 8 * 8);
    ck_assert_int_eq(memcmp(raw + 8, want, wl), 0);
    for (size_t i = wl; i < hlen; i++) ck_assert_int_eq(raw[8 + i], ' ');
    ck_assert_uint_eq(n, 8 + hlen + 656);
    const unsigned char *data = raw + 8 + hlen;
    ck_assert_int_eq(memcmp(data, counts, 24), 0);
    ck_assert_int_eq(memcmp(data + 24, &step_no, 8), 0);
    ck_assert_int_eq(memcmp(data + 32, bias, 24), 0);
    ck_assert_int_eq(memcmp(data + 56, weight, 600), 0);
    /* little-endian on disk: the first count, 2385 = 0x0951 */
    ck_assert_int_eq(data[0], 0x51);
    ck_assert_int_eq(data[1], 0x09);
    free(raw);
}
END_TEST

/* Builds a file: 8-byte length, the header text (unpadded), then the data. */
static void write_st(const char *path, const char *header, const void *data, size_t n)
{
    size_t h = strlen(header);
    unsigned char *b = malloc(8 + h + n);
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)h >> (8 * i));
    memcpy(b + 8, header, h);
    if (n) memcpy(b + 8 + h, data, n);
    tu_write_file(path, b, 8 + h + n);
    free(b);
}

START_TEST(test_st_hand_written)
{
    char path[256];
    tmp_file(path, sizeof path, "hand.safetensors");
    /* keys in no particular order, metadata last, a zero-size tensor, and no padding
     * (the header length need not be a multiple of 8) */
    const char *hdr = "{\"b\":{\"dtype\":\"I64\",\"shape\":[2],\"data_offsets\":[0,16]},"
                      "\"a\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[16,32]},"
                      "\"c\":{\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":[32,35]},"
                      "\"e\":{\"dtype\":\"F32\",\"shape\":[0,4],\"data_offsets\":[35,35]},"
                      "\"__metadata__\":{\"k\":\"v\",\"name\":\"hand\"}}";
    unsigned char data[35];
    int64_t bv[2] = {-2385, 42};
    float av[4] = {2.385f, -0.5f, 1e-30f, 65504.0f};
    memcpy(data, bv, 16);
    memcpy(data + 16, av, 16);
    data[32] = 7;
    data[33] = 0;
    data[34] = 255;
    write_st(path, hdr, data, sizeof data);
    struct adapt_safetensors *f;
    ck_assert_int_eq(adapt_safetensors_load(&f, path), ADAPT_OK);
    ck_assert_int_eq(f->n_tensors, 4);
    ck_assert_str_eq(f->tensors[0].name, "b"); /* file order */
    ck_assert_str_eq(adapt_safetensors_meta_get(f, "name"), "hand");
    int64_t b[2], s2[1] = {2}, s22[2] = {2, 2}, s3[1] = {3};
    float a[4];
    unsigned char c[3];
    ck_assert_int_eq(adapt_safetensors_copy(f, "b", ADAPT_ST_I64, 1, s2, b), ADAPT_OK);
    ck_assert_int_eq(b[0], -2385);
    ck_assert_int_eq(b[1], 42);
    ck_assert_int_eq(adapt_safetensors_copy(f, "a", ADAPT_ST_F32, 2, s22, a), ADAPT_OK);
    ck_assert_int_eq(memcmp(a, av, 16), 0);
    ck_assert_int_eq(adapt_safetensors_copy(f, "c", ADAPT_ST_U8, 1, s3, c), ADAPT_OK);
    ck_assert_int_eq(c[2], 255);
    const struct adapt_safetensors_tensor *e = adapt_safetensors_find(f, "e");
    ck_assert_int_eq(adapt_safetensors_numel(e), 0);
    adapt_safetensors_free(f);
}
END_TEST

struct bad_st {
    const char *header;  /* NULL: raw bytes below */
    size_t data_len;
    const char *what;
};

#define T8 "{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":"
static const struct bad_st bad_sts[] = {
    {"{\"a\":" T8 "[0,8]}}", 4, "data_offsets [0, 8] out of bounds (the data buffer has 4 bytes)"},
    {"{\"a\":" T8 "[0,8]}", 8, "malformed JSON"},
    {"[1,2]", 0, "does not start with a JSON object"},
    {"{\"a\":" T8 "[0,12]}}", 12, "F32 (2) needs 8 bytes but data_offsets [0, 12] hold 12"},
    {"{\"a\":" T8 "[0,8]},\"b\":" T8 "[4,12]}}", 12, "overlap the previous tensor"},
    {"{\"a\":" T8 "[0,8]},\"b\":" T8 "[12,20]}}", 20, "gap before data_offsets [12, 20]"},
    {"{\"a\":" T8 "[0,8]},\"a\":" T8 "[8,16]}}", 16, "duplicate name"},
    {"{\"a\":{\"dtype\":\"F128\",\"shape\":[2],\"data_offsets\":[0,32]}}", 32,
     "unknown dtype \"F128\""},
    {"{\"a\":" T8 "[0,8]},\"__metadata__\":{\"epoch\":7}}", 8,
     "__metadata__ value of \"epoch\" is not a string"},
    {"{\"a\":" T8 "[0,8]}}", 12, "the tensors cover 8 bytes but the data buffer has 12"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8,
     "non-negative integers"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", 8,
     "invalid data_offsets [8, 0]"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8, "needs \"dtype\""},
};

START_TEST(test_st_corrupt)
{
    const struct bad_st *b = &bad_sts[_i];
    char path[256];
    unsigned char zeros[64] = {0};
    tmp_file(path, sizeof path, "bad.safetensors");
    write_st(path, b->header, zeros, b->data_len);
    struct adapt_safetensors *f = NULL;
    adapt_error_clear();
    ck_assert_int_eq(adapt_safetensors_load(&f, path), ADAPT_EFORMAT);
    ck_assert_msg_has("bad.safetensors");
    ck_assert_msg_has(b->what);
    ck_assert_ptr_null(f);
}
END_TEST

START_TEST(test_st_corrupt_length_and_truncation)
{
    char path[256], cut[256];
    struct adapt_safetensors *f;
    tmp_file(path, sizeof path, "ckpt.safetensors");
    ck_assert_int_eq(write_ckpt(path), ADAPT_OK);
    size_t n;
    unsigned char *raw = tu_read_file(path, &n);

    /* shorter than the length field */
    tmp_file(cut, sizeof cut, "short.safetensors");
    tu_write_file(cut, raw, 5);
    ck_assert_int_eq(adapt_safetensors_load(&f, cut), ADAPT_EFORMAT);
    ck_assert_msg_has("short.safetensors: 5 bytes: too short");

    /* header length beyond the end of the file */
    unsigned char big[16] = {0xff, 0xff, 0, 0, 0, 0, 0, 0, '{', '}', ' ', ' ', ' ', ' ', ' ', ' '};
    tu_write_file(cut, big, sizeof big);
    ck_assert_int_eq(adapt_safetensors_load(&f, cut), ADAPT_EFORMAT);
    ck_assert_msg_has("header length 65535 does not fit the file (16 bytes");

    /* the data cut short by 100 bytes: the last tensor (weight) runs out of the file */
    tu_write_file(cut, raw, n - 100);
    ck_assert_int_eq(adapt_safetensors_load(&f, cut), ADAPT_EFORMAT);
    ck_assert_msg_has("tensor \"weight\": data_offsets [56, 656] out of bounds");

    /* the header cut in the middle */
    tu_write_file(cut, raw, 40);
    ck_assert_int_eq(adapt_safetensors_load(&f, cut), ADAPT_EFORMAT);
    ck_assert_msg_has("does not fit the file");

    tmp_file(cut, sizeof cut, "absent.safetensors");
    ck_assert_int_eq(adapt_safetensors_load(&f, cut), ADAPT_ENOENT);
    ck_assert_msg_has("absent.safetensors");
    free(raw);
}
END_TEST

START_TEST(test_st_atomic)
{
    char path[256], tmp[300], other[256];
    size_t n0, n1;
    tmp_file(path, sizeof path, "ckpt.safetensors");
    ck_assert_int_eq(write_ckpt(path), ADAPT_OK);
    unsigned char *orig = tu_read_file(path, &n0);
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    float x[4] = {1.5f, 2.385f, -3.0f, 0.25f};
    struct adapt_safetensors_tensor t = {"x", ADAPT_ST_F32, 1, {4}, x};

    /* a directory that does not exist */
    tmp_file(other, sizeof other, "missing/ckpt.safetensors");
    ck_assert_int_eq(adapt_safetensors_write(other, &t, 1, NULL, 0), ADAPT_EIO);
    ck_assert_msg_has("missing/ckpt.safetensors");
    ck_assert_msg_has("No such file");

    /* the temporary file cannot be created (its name is taken by a directory) */
    ck_assert_int_eq(mkdir(tmp, 0755), 0);
    ck_assert_int_eq(adapt_safetensors_write(path, &t, 1, NULL, 0), ADAPT_EIO);
    ck_assert_int_eq(rmdir(tmp), 0);
    unsigned char *now = tu_read_file(path, &n1);
    ck_assert_uint_eq(n1, n0);
    ck_assert_int_eq(memcmp(now, orig, n0), 0);
    free(now);

    /* the rename fails (the target is a non-empty directory): the temporary file is removed */
    tmp_file(other, sizeof other, "dir.safetensors");
    ck_assert_int_eq(mkdir(other, 0755), 0);
    char inner[300];
    snprintf(inner, sizeof inner, "%s/keep", other);
    tu_write_file(inner, "k", 1);
    ck_assert_int_eq(adapt_safetensors_write(other, &t, 1, NULL, 0), ADAPT_EIO);
    ck_assert_msg_has("cannot rename");
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", other, (long)getpid());
    ck_assert(!file_exists(tmp));
    ck_assert(file_exists(inner));

    /* an invalid argument writes nothing */
    struct adapt_safetensors_tensor dup[2] = {t, t};
    ck_assert_int_eq(adapt_safetensors_write(path, dup, 2, NULL, 0), ADAPT_EINVAL);
    ck_assert_msg_has("duplicate tensor name \"x\"");
    struct adapt_safetensors_tensor nodata = {"y", ADAPT_ST_F32, 1, {4}, NULL};
    ck_assert_int_eq(adapt_safetensors_write(path, &nodata, 1, NULL, 0), ADAPT_EINVAL);
    struct adapt_safetensors_tensor neg = {"y", ADAPT_ST_F32, 2, {4, -1}, x};
    ck_assert_int_eq(adapt_safetensors_write(path, &neg, 1, NULL, 0), ADAPT_EINVAL);
    ck_assert_msg_has("invalid shape (4, -1)");
    struct adapt_safetensors_meta m[2] = {{"a", "1"}, {"a", "2"}};
    ck_assert_int_eq(adapt_safetensors_write(path, &t, 1, m, 2), ADAPT_EINVAL);
    now = tu_read_file(path, &n1);
    ck_assert_uint_eq(n1, n0);
    ck_assert_int_eq(memcmp(now, orig, n0), 0);
    free(now);

    /* an unwritable directory (permissions do not stop root, so only as another user) */
    if (geteuid() != 0) {
        ck_assert_int_eq(chmod(tmpdir, 0500), 0);
        ck_assert_int_eq(adapt_safetensors_write(path, &t, 1, NULL, 0), ADAPT_EIO);
        ck_assert_int_eq(chmod(tmpdir, 0700), 0);
        now = tu_read_file(path, &n1);
        ck_assert_int_eq(memcmp(now, orig, n0), 0);
        free(now);
    }
    free(orig);
}
END_TEST

/* A write that fails part-way (file size limit, as on a full disk) leaves the old file
 * and no temporary file. Runs in its own process (Check forks), so the limit stays there. */
START_TEST(test_st_atomic_partial_write)
{
    char path[256], tmp[300];
    size_t n0, n1;
    tmp_file(path, sizeof path, "ckpt.safetensors");
    ck_assert_int_eq(write_ckpt(path), ADAPT_OK);
    unsigned char *orig = tu_read_file(path, &n0);
    ck_assert_uint_lt(n0, 4096);

    static float big[16384]; /* 64 KiB of data against a 4 KiB limit */
    for (int i = 0; i < 16384; i++) big[i] = (float)i * 2.385f;
    struct adapt_safetensors_tensor t = {"big", ADAPT_ST_F32, 1, {16384}, big};
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit rl = {4096, 4096};
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &rl), 0);
    ck_assert_int_eq(adapt_safetensors_write(path, &t, 1, NULL, 0), ADAPT_EIO);
    ck_assert_msg_has("cannot write");
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    ck_assert(!file_exists(tmp));
    unsigned char *now = tu_read_file(path, &n1);
    ck_assert_uint_eq(n1, n0);
    ck_assert_int_eq(memcmp(now, orig, n0), 0);
    struct adapt_safetensors *f;
    ck_assert_int_eq(adapt_safetensors_load(&f, path), ADAPT_OK);
    ck_assert_int_eq(f->n_tensors, 4);
    adapt_safetensors_free(f);
    free(now);
    free(orig);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("io");
    TCase *tt = tcase_create("trace");
    tcase_add_checked_fixture(tt, setup, teardown);
    tcase_add_test(tt, test_trace_roundtrip);
    tcase_add_test(tt, test_trace_typed_header_and_lines);
    tcase_add_test(tt, test_trace_layer_precision);
    tcase_add_test(tt, test_trace_samples);
    tcase_add_loop_test(tt, test_trace_errors, 0, (int)(sizeof bad_traces / sizeof bad_traces[0]));
    tcase_add_test(tt, test_trace_partial_and_missing);
    tcase_add_test(tt, test_trace_bounds);
    tcase_add_test(tt, test_trace_long_line);
    tcase_add_test(tt, test_trace_out_of_memory);
    tcase_add_test(tt, test_trace_truncate_and_append);
    suite_add_tcase(s, tt);
    TCase *ts = tcase_create("safetensors");
    tcase_add_checked_fixture(ts, setup, teardown);
    tcase_add_test(ts, test_st_roundtrip);
    tcase_add_test(ts, test_st_layout);
    tcase_add_test(ts, test_st_hand_written);
    tcase_add_loop_test(ts, test_st_corrupt, 0, (int)(sizeof bad_sts / sizeof bad_sts[0]));
    tcase_add_test(ts, test_st_corrupt_length_and_truncation);
    tcase_add_test(ts, test_st_atomic);
    tcase_add_test(ts, test_st_atomic_partial_write);
    suite_add_tcase(s, ts);
    return tu_run_suite(s, CK_FORK_GETENV);
}
