/* tests/test_io.c: src/trace (JSON-lines writer, reader, truncation) and src/safetensors.
 *
 * This file: the shared helpers and the trace the writer tests write (tests/test_io.h), the
 * writer's round trip through the reader, and main. Hand-written traces, good and bad, are in
 * test_io_read.c, the reader out of memory in test_io_oom.c, safetensors in
 * test_io_safetensors.c. */
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
#include "tests/test_io.h"

/* a unit state's scale statistics when no role is scaled */
#define NO_SCALES {{0, 0, 0, 0}, {0, 0, 0, 0}, {0, 0, 0, 0}}, 0, {0, 0, 0}, {0, 0, 0}
#include "tests/testutil.h"

char tmpdir[64];

static void setup(void) { tu_tmpdir_make(tmpdir, sizeof tmpdir, "io"); }

static void teardown(void) { tu_tmpdir_remove(tmpdir); }

void tmp_file(char *path, size_t size, const char *name)
{
    tu_path(path, size, tmpdir, name);
}

/* tests/test_io.h */
void keep_sample(const char *path, const char *name)
{
    const char *dir = getenv("ADAPT_TRACE_SAMPLES");
    if (!dir || !dir[0]) return;
    char dst[512];
    size_t n;
    unsigned char *b = tu_read_file(path, &n);
    tu_write_file(tu_path(dst, sizeof dst, dir, name), b, n);
    free(b);
}

int file_exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}
/* =============================================================== trace */

/* A small LeNet-like description: conv (unit 0), tanh, pool, linear (unit 1). */
const struct adapt_trace_layer layers[4] = {
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

struct adapt_trace_header make_header(json_t *config)
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
    {{8, 4, 37.25, 51, 0.0625, 12, 345, 0.25, NO_SCALES}, {10, 6, 25.0, 50, 0.125, 0, 7, 0.0, NO_SCALES}},
    {{32, 0, NAN, -1, NAN, -1, -1, NAN, NO_SCALES}, {32, 0, NAN, -1, NAN, -1, -1, NAN, NO_SCALES}},
    /* [roles] scale statistics: weight and grad_output scaled, input not; an amax of inf */
    {{9, 5, 99.5, 150, 0.5, 1, 2, 0.5, {{1.5, 256.0, 3, 1}, {0, 0, 0, 0}, {INFINITY, 4096.0, 0, 2}},
      /* [arithmetic]: GEMM calls and register overflows per GEMM */
      1, {2, 2, 0}, {17, 0, 5}},
     {12, 8, 100.0, 149, 0.2385, 3, 4, NAN, NO_SCALES}},
};
static struct adapt_trace_event events[2] = {
    {1, ADAPT_TRACE_EVENT_PD, {10, 6}, {8, 5}, 4, 5, 4096, 0},
    {0, ADAPT_TRACE_EVENT_PU, {8, 4}, {10, 7}, 0, 0, 0, 3},
};

struct adapt_trace_step make_step(int i)
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

struct adapt_trace_epoch make_epoch(int e)
{
    struct adapt_trace_epoch ep = {e, 20 * e, 0.02385, 1.5 / e, 0.4 + 0.1 * e, 1.75 / e,
                                   0.35 + 0.1 * e, 12.5 * e, 4321.5};
    if (e == 2) ep.val_loss = ep.val_acc = NAN; /* no validation split */
    return ep;
}

/* tests/test_io.h */
int64_t write_trace(const char *path)
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
        for (int k = 0; k < ADAPT_TRACE_SCALED_ROLES; k++) { /* an inf amax reads back NaN */
            ck_assert(isinf(b->scaled[k].amax) ? isnan(a->scaled[k].amax)
                                               : same(a->scaled[k].amax, b->scaled[k].amax));
            ck_assert(same(a->scaled[k].scale, b->scaled[k].scale));
            ck_assert_int_eq(a->scaled[k].sat, b->scaled[k].sat);
            ck_assert_int_eq(a->scaled[k].flush, b->scaled[k].flush);
        }
        ck_assert_int_eq(a->sat, b->sat);
        ck_assert_int_eq(a->flush, b->flush);
        ck_assert_int_eq(a->acc_set, b->acc_set);
        for (int g = 0; g < 3; g++) {
            ck_assert_int_eq(a->acc_gemms[g], b->acc_gemms[g]);
            ck_assert_int_eq(a->acc_overflows[g], b->acc_overflows[g]);
        }
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
    ck_assert_int_eq(h->sr_bits, 32); /* not written: 32 random bits per stochastic rounding */
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

    /* 16 random bits per stochastic rounding are recorded after the threads and read back */
    hn.sr_bits = 16;
    ck_assert_int_eq(adapt_trace_writer_create(&w, path), ADAPT_OK);
    ck_assert_int_eq(adapt_trace_write_header(w, &hn), ADAPT_OK);
    ck_assert_int_eq(adapt_trace_writer_close(w), ADAPT_OK);
    raw = tu_read_file(path, &n);
    ck_assert_ptr_nonnull(strstr((const char *)raw, "\"threads\":3,\"sr_bits\":16,"));
    free(raw);
    ck_assert_int_eq(adapt_trace_load(&t, path, 0), ADAPT_OK);
    ck_assert_int_eq(t->header.sr_bits, 16);
    /* a header without "build" (written before traces recorded their machine) reads as NULLs */
    ck_assert_ptr_null(t->header.build.commit);
    ck_assert_ptr_null(t->header.build.cpu);
    adapt_trace_free(t);

    /* the machine and build are written as one object and read back field by field */
    hn.build.commit = "0123456789ab";
    hn.build.compiler = "gcc 12.2.0";
    hn.build.cpu = "AMD EPYC 9B14 96-Core Processor";
    hn.build.isa = "x86-64-v4";
    hn.build.blas = "OpenBLAS 0.3.21 DYNAMIC_ARCH Haswell";
    hn.build.device = "cpu";
    ck_assert_int_eq(adapt_trace_writer_create(&w, path), ADAPT_OK);
    ck_assert_int_eq(adapt_trace_write_header(w, &hn), ADAPT_OK);
    ck_assert_int_eq(adapt_trace_writer_close(w), ADAPT_OK);
    raw = tu_read_file(path, &n);
    ck_assert_ptr_nonnull(strstr((const char *)raw,
                                 "\"build\":{\"commit\":\"0123456789ab\",\"compiler\":\"gcc "
                                 "12.2.0\",\"cpu\":\"AMD EPYC 9B14 96-Core Processor\",\"isa\":"
                                 "\"x86-64-v4\",\"blas\":\"OpenBLAS 0.3.21 DYNAMIC_ARCH "
                                 "Haswell\",\"device\":\"cpu\"}"));
    free(raw);
    ck_assert_int_eq(adapt_trace_load(&t, path, 0), ADAPT_OK);
    ck_assert_str_eq(t->header.build.commit, "0123456789ab");
    ck_assert_str_eq(t->header.build.compiler, "gcc 12.2.0");
    ck_assert_str_eq(t->header.build.cpu, "AMD EPYC 9B14 96-Core Processor");
    ck_assert_str_eq(t->header.build.isa, "x86-64-v4");
    ck_assert_str_eq(t->header.build.blas, "OpenBLAS 0.3.21 DYNAMIC_ARCH Haswell");
    ck_assert_str_eq(t->header.build.device, "cpu");
    adapt_trace_free(t);

    /* a CPU name that is not UTF-8 is refused by name, before anything is written */
    hn.build.cpu = "CPU \xff";
    ck_assert_int_eq(adapt_trace_writer_create(&w, path), ADAPT_OK);
    ck_assert_int_eq(adapt_trace_write_header(w, &hn), ADAPT_EINVAL);
    ck_assert_ptr_nonnull(strstr(adapt_error_message(), "CPU name: byte 5 is not UTF-8"));
    adapt_trace_writer_close(w);
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

int main(void)
{
    Suite *s = suite_create("io");
    TCase *tt = tcase_create("trace");
    tcase_add_checked_fixture(tt, setup, teardown);
    tcase_add_test(tt, test_trace_roundtrip);
    tcase_add_test(tt, test_trace_typed_header_and_lines);
    test_io_add_read(tt);
    test_io_add_oom(tt);
    suite_add_tcase(s, tt);
    TCase *ts = tcase_create("safetensors");
    tcase_add_checked_fixture(ts, setup, teardown);
    test_io_add_safetensors(ts);
    suite_add_tcase(s, ts);
    return tu_run_suite(s, CK_FORK_GETENV);
}
