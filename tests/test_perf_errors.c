/* tests/test_perf_errors.c: traces the analysis refuses or must survive, part of
 * tests/test_perf: the synthetic trace edited line by line into bad traces (each refused with
 * what is wrong), step numbers so large that sizing by them would allocate without end, and
 * counts that overflow. */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "src/perfmodel/perf.h"
#include "src/net/net.h"
#include "src/trace/trace.h"
#include "tests/test_perf.h"

/* a unit state's scale statistics when no role is scaled */
#define NO_SCALES {{0, 0, 0, 0}, {0, 0, 0, 0}, {0, 0, 0, 0}}, 0, {0, 0, 0}, {0, 0, 0}
#include "tests/testutil.h"

/* ==================================================================== errors */

/* Replaces line `n` (1-based) of a file by `text` (NULL: drops the newline of
 * the last line, i.e. truncates it). */
static void edit_line(const char *path, int n, const char *text)
{
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    char *lines[64], *line = NULL;
    size_t cap = 0;
    int nl = 0;
    while (getline(&line, &cap, f) > 0 && nl < 64) lines[nl++] = strdup(line);
    free(line);
    fclose(f);
    f = fopen(path, "w");
    for (int i = 0; i < nl; i++) {
        if (i == n - 1 && text) fputs(text, f);
        else if (!text && i == nl - 1) fwrite(lines[i], 1, strlen(lines[i]) - 1, f);
        else fputs(lines[i], f);
        free(lines[i]);
    }
    fclose(f);
}

static enum adapt_status try_analyze(const char *path)
{
    struct adapt_trace *t;
    enum adapt_status st = adapt_trace_load(&t, path, 0);
    if (st != ADAPT_OK) return st;
    struct perf_params p;
    perf_params_init(&p);
    struct perf_run *r = NULL;
    st = perf_run_analyze(&r, t, &p, NULL);
    perf_run_free(r);
    adapt_trace_free(t);
    return st;
}

START_TEST(test_bad_traces)
{
    char path[128], msg[256];
    tu_path(path, sizeof path, tmpdir, "bad.jsonl");
    struct syn_opts o = syn_default();
    /* truncated: the end record lost its newline (line 11: header, 6 steps,
     * 2 epochs, test, end) */
    syn_write(path, &o);
    edit_line(path, 0, NULL);
    ck_assert_int_eq(try_analyze(path), ADAPT_EFORMAT);
    snprintf(msg, sizeof msg, "%s:11: truncated", path);
    ck_assert_msg_has(msg);
    /* malformed JSON on line 3 */
    syn_write(path, &o);
    edit_line(path, 3, "{\"type\":\"step\",\"step\":2,\n");
    ck_assert_int_eq(try_analyze(path), ADAPT_EFORMAT);
    snprintf(msg, sizeof msg, "%s:3: malformed JSON", path);
    ck_assert_msg_has(msg);
    /* a word length of 40 in the step on line 3 (step 2) */
    syn_write(path, &o);
    edit_line(
        path, 3,
        "{\"type\":\"step\",\"step\":2,\"epoch\":0,\"lr\":0.01,\"loss\":1.2,\"strategy\":"
        "null,\"units\":[{\"wl\":8,\"fl\":4},{\"wl\":40,\"fl\":4}],\"events\":[],\"accum\":1}\n");
    ck_assert_int_eq(try_analyze(path), ADAPT_EFORMAT);
    snprintf(msg, sizeof msg, "%s:3: step record: field \"wl\" = 40 is out of range [1, 32]",
             path);
    ck_assert_msg_has(msg);
    /* steps out of order: line 4 repeats step 2 */
    syn_write(path, &o);
    edit_line(
        path, 4,
        "{\"type\":\"step\",\"step\":2,\"epoch\":0,\"lr\":0.01,\"loss\":1.2,\"strategy\":"
        "null,\"units\":[{\"wl\":8,\"fl\":4},{\"wl\":8,\"fl\":4}],\"events\":[],\"accum\":1}\n");
    ck_assert_int_eq(try_analyze(path), ADAPT_EFORMAT);
    snprintf(msg, sizeof msg, "%s:4: step record: step 2 does not follow step 2 (line 3)",
             path);
    ck_assert_msg_has(msg);
    /* header: unit 1's MACs disagree with its layer */
    o.unit1_macs = 25;
    syn_write(path, &o);
    ck_assert_int_eq(try_analyze(path), ADAPT_EFORMAT);
    snprintf(msg, sizeof msg, "%s:1: units[1] (\"fc\")", path);
    ck_assert_msg_has(msg);
    /* header without config.train.batch */
    o = syn_default();
    o.batch = 0;
    syn_write(path, &o);
    ck_assert_int_eq(try_analyze(path), ADAPT_EFORMAT);
    ck_assert_msg_has("config.train.batch");
    /* no step records */
    o = syn_default();
    o.last_step = 0;
    syn_write(path, &o);
    ck_assert_int_eq(try_analyze(path), ADAPT_EFORMAT);
    ck_assert_msg_has("no step records");
    /* missing file */
    tu_path(path, sizeof path, tmpdir, "none.jsonl");
    ck_assert_int_eq(try_analyze(path), ADAPT_ENOENT);
    ck_assert_msg_has(path);
}
END_TEST

/* A trace of the synthetic model trained one sample a step (dataset.train 1, batch 1, the given
 * accumulation): step records at steps[0..ns) with fixed formats (unit 0 at WL 8, unit 1 at
 * WL 16), then epoch records at epoch_steps[0..ne) (epochs 0, 1, ...). */
static void one_sample_write(const char *path, const int64_t *steps, int ns,
                             const int64_t *epoch_steps, int ne, int accumulation)
{
    struct adapt_trace_header h;
    struct adapt_trace_unit units[2];
    json_t *cfg;
    syn_header(&h, &cfg, 1, 24, units);
    json_object_set_new(json_object_get(cfg, "train"), "accumulation_steps",
                        json_integer(accumulation));
    h.dataset.train = 1;
    struct adapt_trace_writer *w;
    ck_assert_int_eq(adapt_trace_writer_create(&w, path), ADAPT_OK);
    ck_assert_int_eq(adapt_trace_write_header(w, &h), ADAPT_OK);
    json_decref(cfg);
    for (int i = 0; i < ns; i++) {
        struct adapt_trace_unit_state us[2] = {{8, 4, NAN, -1, NAN, -1, -1, NAN, NO_SCALES},
                                              {16, 8, NAN, -1, NAN, -1, -1, NAN, NO_SCALES}};
        struct adapt_trace_step st = {steps[i], 0, 0.01, 1.0, ADAPT_TRACE_STRATEGY_NONE, 2, us,
                                      0, NULL, 1, 0};
        ck_assert_int_eq(adapt_trace_write_step(w, &st), ADAPT_OK);
    }
    for (int e = 0; e < ne; e++) {
        struct adapt_trace_epoch ep = {e, epoch_steps[e], 0.01, 1.0, 0.5, 1.0, 0.5, 1.0, 1.0};
        ck_assert_int_eq(adapt_trace_write_epoch(w, &ep), ADAPT_OK);
    }
    ck_assert_int_eq(adapt_trace_writer_close(w), ADAPT_OK);
}

/* Step numbers size nothing: a run of 2^53 steps (the most a trace may record) of one sample
 * each (dataset.train 1, so every step is an epoch) is priced from its two step records, in the
 * memory and time of any two-record trace. Every interval trains one sample a step at the same
 * formats, so each cost is proportional to the steps: the run costs 2^52 times the same trace
 * ending at step 2, and has its SU1. Its last step ends epoch 2^53 - 1 (0-based), at x = 2^53.
 * Before, the analysis allocated one epoch boundary per step (2^56 bytes) and failed. */
START_TEST(test_step_numbers_size_nothing)
{
    char big[128], small[128];
    tu_path(big, sizeof big, tmpdir, "big.jsonl");
    tu_path(small, sizeof small, tmpdir, "small.jsonl");
    const int64_t sb[2] = {1, ADAPT_TRACE_STEP_MAX}, ss[2] = {1, 2};
    one_sample_write(big, sb, 2, NULL, 0, 1);
    one_sample_write(small, ss, 2, NULL, 0, 1);
    struct perf_params p;
    perf_params_init(&p);
    struct perf_run *r = analyze_file(big, &p, NULL), *r2 = analyze_file(small, &p, NULL);
    ck_assert_int_eq(r->steps, ADAPT_TRACE_STEP_MAX);
    ck_assert_close(r->samples, 0x1p53);
    ck_assert_int_eq(r->n_points, 2);
    ck_assert_close(r->points[1].epoch_x, 0x1p53);
    ck_assert_close(r->c32, r2->c32 * 0x1p52);
    ck_assert_close(r->cq, r2->cq * 0x1p52);
    ck_assert_close(r->su1, r2->su1);
    perf_run_free(r);
    perf_run_free(r2);
}
END_TEST

/* Counts multiplied from the file are checked: steps after the last step record (up to an epoch
 * record at 2^53) times accumulation_steps 2^31 - 1 do not fit 64 bits, and are refused naming
 * the field; a layer shape of 2^80 elements and parameters adding up past 2^63 are refused. */
START_TEST(test_counts_overflow)
{
    char path[128];
    tu_path(path, sizeof path, tmpdir, "ovf.jsonl");
    const int64_t s1[1] = {1}, e1[1] = {ADAPT_TRACE_STEP_MAX};
    one_sample_write(path, s1, 1, e1, 1, 2147483647);
    ck_assert_int_eq(try_analyze(path), ADAPT_EFORMAT);
    ck_assert_msg_has(path);
    ck_assert_msg_has(":1: config.train.accumulation_steps = 2147483647 times the "
                      "9007199254740991 steps after the last step record overflows");

    struct adapt_trace_layer ls[4];
    memcpy(ls, syn_layers, sizeof ls);
    ls[1].out[0] = ls[1].out[1] = (int64_t)1 << 40; /* the tanh's output: 2^81 elements */
    struct syn_opts o = syn_default();
    o.layers = ls;
    syn_write(path, &o);
    ck_assert_int_eq(try_analyze(path), ADAPT_EFORMAT);
    ck_assert_msg_has(":1: model.layers[1] (\"t1\"): its in or out shape holds more elements "
                      "than a 64-bit count");
    memcpy(ls, syn_layers, sizeof ls);
    ls[1].params = ls[2].params = INT64_MAX / 2 + 1;
    syn_write(path, &o);
    ck_assert_int_eq(try_analyze(path), ADAPT_EFORMAT);
    ck_assert_msg_has(":1: the layers' params or the units' weights add up to more than a "
                      "64-bit count");

    /* a schedule of 100000 epochs of 2^63 - 1 samples in batches of 1 */
    struct perf_model *m;
    ck_assert_int_eq(perf_model_alloc(&m, "lenet5", 10), ADAPT_OK);
    struct perf_params p;
    perf_params_init(&p);
    struct perf_run *r = NULL;
    ck_assert_int_eq(perf_schedule_price(&r, "8:100000", m, 1, INT64_MAX, &p, NULL), ADAPT_EINVAL);
    ck_assert_msg_has("schedule: 100000 epochs of 9223372036854775807 steps (batch 1) are more "
                      "than 9007199254740992 optimizer steps");
    ck_assert_ptr_null(r);
    perf_model_free(m);
}
END_TEST

void test_perf_add_errors(TCase *cost)
{
    tcase_add_test(cost, test_bad_traces);
    tcase_add_test(cost, test_step_numbers_size_nothing);
    tcase_add_test(cost, test_counts_overflow);
}
