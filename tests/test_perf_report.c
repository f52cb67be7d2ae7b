/* tests/test_perf_report.c: adapt-perf's reports, part of tests/test_perf: the names and
 * labels of runs (from the configuration, the file or the command line), the report formats
 * (text, CSV, JSON, Markdown) with the synthetic run's costs, and Markdown's escapes. */
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
#include "tests/testutil.h"

/* Runs are named by their configuration file, with the AdaPT compat mode
 * when it is "reference" and the seed when it is not 1 (the synthetic
 * trace's seed is 7); the paper-compat table names both conventions and
 * adds SU2 ref, SU2 ref i/n and SU3. */
START_TEST(test_report_names)
{
    char path[128];
    tu_path(path, sizeof path, tmpdir, "trace.jsonl");
    struct syn_opts o = syn_default();
    o.config_file = "experiments/configs/reference/lenet_msgd_fp_fmnist.ini";
    o.compat = "reference";
    syn_write(path, &o);
    struct perf_params p;
    perf_params_init(&p);
    struct perf_run *r = analyze_file(path, &p, NULL);
    ck_assert_str_eq(r->name, "lenet_msgd_fp_fmnist [reference] seed 7");
    ck_assert_str_eq(r->compat, "reference");
    perf_run_free(r);
    o.compat = NULL; /* corrected by default */
    syn_write(path, &o);
    r = analyze_file(path, &p, NULL);
    ck_assert_str_eq(r->name, "lenet_msgd_fp_fmnist seed 7");
    ck_assert_str_eq(r->compat, "corrected");
    p.paper_compat = 1;
    char *txt = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&txt, &len);
    struct perf_run *rows[1] = {r};
    ck_assert_int_eq(perf_report_write(f, PERF_FORMAT_TEXT, rows, 1, &p, 0), ADAPT_OK);
    fclose(f);
    static const char *const heads[] = {"SU1 paper", "SU2 paper", "SU2 ref", "SU2 ref i/n",
                                        "SU3", "compat",
                                        "corrected", "lenet_msgd_fp_fmnist seed 7"};
    for (size_t i = 0; i < sizeof heads / sizeof heads[0]; i++)
        ck_assert_msg(strstr(txt, heads[i]) != NULL, "lacks '%s':\n%s", heads[i], txt);
    free(txt);
    perf_run_free(r);
}
END_TEST

/* A synthetic run of experiments/configs/fmnist_lenet5.ini (run.name `name`, NULL: none) at
 * tmpdir/DIR/trace.jsonl; its path in `path`. */
static void labelled_write(char *path, size_t cap, const char *dir, const char *name)
{
    char out[512], d[256];
    tu_path(d, sizeof d, tmpdir, dir);
    ck_assert_int_eq(tu_run(out, sizeof out, "mkdir -p '%s'", d), 0);
    tu_path(path, cap, d, "trace.jsonl");
    struct syn_opts o = syn_default();
    o.config_file = "experiments/configs/fmnist_lenet5.ini";
    o.run_name = name;
    syn_write(path, &o);
}

/* adapt-perf on two runs of one configuration file in runs/long/adapt and runs/my/adapt:
 * each row is named with the end of its path that tells them apart; a run.name names its
 * row. */
START_TEST(test_run_labels_cli)
{
    if (!tu_have_program("./adapt-perf")) return;
    char a[256], b[256], out[8192];
    labelled_write(a, sizeof a, "runs/long/adapt", NULL);
    labelled_write(b, sizeof b, "runs/my/adapt", NULL);
    char da[256], db[256];
    snprintf(da, sizeof da, "%.*s", (int)(strrchr(a, '/') - a), a);
    snprintf(db, sizeof db, "%.*s", (int)(strrchr(b, '/') - b), b);
    ck_assert_msg(tu_run(out, sizeof out, "./adapt-perf --format csv %s %s", da, db) == 0, "%s",
                  out);
    ck_assert_msg(strstr(out, "\nfmnist_lenet5 seed 7 (long/adapt),"), "%s", out);
    ck_assert_msg(strstr(out, "\nfmnist_lenet5 seed 7 (my/adapt),"), "%s", out);
    /* a run.name wins: the named run is "mxfp8", the other keeps its stem */
    labelled_write(b, sizeof b, "runs/my/adapt", "mxfp8");
    ck_assert_msg(tu_run(out, sizeof out, "./adapt-perf --format csv %s %s", da, db) == 0, "%s",
                  out);
    ck_assert_msg(strstr(out, "\nfmnist_lenet5 seed 7,"), "%s", out);
    ck_assert_msg(strstr(out, "\nmxfp8,"), "%s", out);
    /* markdown and text tables name them alike */
    ck_assert_msg(tu_run(out, sizeof out, "./adapt-perf --format markdown %s %s", da, db) == 0,
                  "%s", out);
    ck_assert_msg(strstr(out, "\n| mxfp8 | adapt |"), "%s", out);
    ck_assert_msg(tu_run(out, sizeof out, "./adapt-perf %s %s", da, db) == 0, "%s", out);
    ck_assert_msg(strstr(out, "mxfp8 "), "%s", out);
}
END_TEST

/* perf_runs_label: runs of one name get the fewest trailing path components that tell them
 * apart (the folder alone when it does, as before); unique names, and runs.name, are kept. */
START_TEST(test_run_labels)
{
    static const struct {
        const char *dir[3], *name[3], *want[3];
    } cases[] = {
        {{"runs/long/adapt", "runs/my/adapt", NULL}, {NULL, NULL, NULL},
         {"fmnist_lenet5 seed 7 (long/adapt)", "fmnist_lenet5 seed 7 (my/adapt)", NULL}},
        /* the folder alone tells them apart: today's labels */
        {{"runs/fixed8", "runs/mxfp8", NULL}, {NULL, NULL, NULL},
         {"fmnist_lenet5 seed 7 (fixed8)", "fmnist_lenet5 seed 7 (mxfp8)", NULL}},
        /* a run.name wins; names that differ get nothing appended */
        {{"runs/long/adapt", "runs/my/adapt", NULL}, {"fixed8", "mxfp8", NULL},
         {"fixed8", "mxfp8", NULL}},
        {{"runs/long/adapt", "runs/my/adapt", NULL}, {NULL, "mxfp8", NULL},
         {"fmnist_lenet5 seed 7", "mxfp8", NULL}},
        /* each run the fewest components: a/x and b/x need two, c/y one */
        {{"a/x", "b/x", "c/y"}, {NULL, NULL, NULL},
         {"fmnist_lenet5 seed 7 (a/x)", "fmnist_lenet5 seed 7 (b/x)", "fmnist_lenet5 seed 7 (y)"}},
        /* one run.name twice: told apart by the path as well */
        {{"p/q/r", "s/q/r", NULL}, {"same", "same", NULL}, {"same (p/q/r)", "same (s/q/r)", NULL}},
    };
    struct perf_params p;
    perf_params_init(&p);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        struct perf_run *r[3] = {NULL, NULL, NULL};
        int n = 0;
        char path[256];
        for (; n < 3 && cases[c].dir[n]; n++) {
            char dir[64];
            snprintf(dir, sizeof dir, "c%zu/%s", c, cases[c].dir[n]);
            labelled_write(path, sizeof path, dir, cases[c].name[n]);
            r[n] = analyze_file(path, &p, NULL);
        }
        ck_assert_int_eq(perf_runs_label(r, n), ADAPT_OK);
        for (int i = 0; i < n; i++) {
            ck_assert_msg(!strcmp(r[i]->name, cases[c].want[i]), "case %zu run %d: \"%s\", not "
                          "\"%s\"", c, i, r[i]->name, cases[c].want[i]);
            perf_run_free(r[i]);
        }
    }
    ck_assert_int_eq(perf_runs_label(NULL, 0), ADAPT_OK);
}
END_TEST

/* ==================================================================== report */

START_TEST(test_report_formats)
{
    char path[128];
    tu_path(path, sizeof path, tmpdir, "adapt.jsonl");
    struct syn_opts o = syn_default();
    syn_write(path, &o);
    struct perf_params p;
    perf_params_init(&p);
    struct perf_run *r = analyze_file(path, &p, NULL);
    struct perf_run *rows[1] = {r};
    /* with per-unit tables; CSV then holds only the table of one row per run and unit */
    static const char *const want[4] = {"SU1", "run,unit,macs,", "\"su1\": 1.7334", "| SU1 |"};
    for (int fi = 0; fi < 4; fi++) {
        char *txt = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&txt, &len);
        ck_assert_int_eq(perf_report_write(f, (enum perf_format)fi, rows, 1, &p, 1), ADAPT_OK);
        fclose(f);
        ck_assert_msg(strstr(txt, want[fi]) != NULL, "format %d lacks %s:\n%s", fi, want[fi], txt);
        ck_assert_msg(strstr(txt, "c1") != NULL, "format %d lacks the unit table", fi);
        if (fi == PERF_FORMAT_CSV) {
            ck_assert_msg(!strncmp(txt, "run,unit,", 9) && !strstr(txt, "su1"),
                          "csv --per-unit is not one unit table:\n%s", txt);
            free(txt);
            f = open_memstream(&txt, &len);
            ck_assert_int_eq(perf_report_write(f, PERF_FORMAT_CSV, rows, 1, &p, 0), ADAPT_OK);
            fclose(f);
            ck_assert_msg(strstr(txt, "su1,su2") && !strstr(txt, "run,unit,"),
                          "csv without per-unit:\n%s", txt);
        }
        if (fi == PERF_FORMAT_JSON) {
            json_error_t err;
            json_t *j = json_loads(txt, 0, &err);
            ck_assert_msg(j != NULL, "json: %s", err.text);
            json_t *r0 = json_array_get(json_object_get(j, "runs"), 0);
            /* 5768 / 3327.5, see test_synthetic_costs; the JSON carries 12 significant digits */
            double su1 = json_real_value(json_object_get(r0, "su1"));
            ck_assert_msg(fabs(su1 - SYN_C32 / SYN_CQ) < 1e-11, "su1 %.17g", su1);
            ck_assert(json_is_null(json_object_get(r0, "su2")));
            json_decref(j);
        }
        free(txt);
    }
    enum perf_format fmt;
    ck_assert_int_eq(perf_format_parse("markdown", &fmt), ADAPT_OK);
    ck_assert_int_eq(fmt, PERF_FORMAT_MARKDOWN);
    ck_assert_int_eq(perf_format_parse("html", &fmt), ADAPT_EINVAL);
    ck_assert_msg_has("html");
    perf_run_free(r);
}
END_TEST

/* The table cells of line (Markdown): its '|' not escaped by a backslash, less one. */
static int md_cells(const char *line, size_t n)
{
    int pipes = 0;
    for (size_t i = 0; i < n; i++) {
        size_t k = 0;
        while (k < i && line[i - 1 - k] == '\\') k++;
        if (line[i] == '|' && k % 2 == 0) pipes++;
    }
    return pipes - 1;
}

/* Names from a trace cannot break adapt-perf's Markdown or carry HTML: a run (its configuration
 * file's stem), model and unit named with '|', '<', '>', '&', '`', '\\' and a line break come out
 * escaped (cells keep their count; entities, backslashes, a space for the line break), in the
 * tables, the per-unit heading and the note on an incomplete run. */
START_TEST(test_report_markdown_escapes)
{
    char path[128];
    tu_path(path, sizeof path, tmpdir, "md.jsonl");
    struct syn_opts o = syn_default();
    o.config_file = "cfg/a|b<script>&`x`\\\n.ini";
    o.model_name = "m|<b>";
    o.unit0_name = "c|1";
    syn_write(path, &o);
    struct perf_params p;
    perf_params_init(&p);
    struct perf_run *r = analyze_file(path, &p, NULL);
    r->complete = 0;
    struct perf_run *rows[1] = {r};
    char *txt = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&txt, &len);
    ck_assert_int_eq(perf_report_write(f, PERF_FORMAT_MARKDOWN, rows, 1, &p, 1), ADAPT_OK);
    fclose(f);
    const char *name = "a\\|b&lt;script&gt;&amp;\\`x\\`\\\\  seed 7";
    char want[512];
    snprintf(want, sizeof want, "\n| %s | adapt | m\\|&lt;b&gt; | synthetic | corrected | 2 |",
             name);
    ck_assert_msg(strstr(txt, want), "no row \"%s\" in:\n%s", want, txt);
    snprintf(want, sizeof want, "\n#### %s: per unit\n", name);
    ck_assert_msg(strstr(txt, want), "no heading \"%s\" in:\n%s", want, txt);
    ck_assert_msg(strstr(txt, "\n| c\\|1 | 72 | 18 |"), "no unit row in:\n%s", txt);
    snprintf(want, sizeof want, "\n- %s: the trace has no end record", name);
    ck_assert_msg(strstr(txt, want), "no note \"%s\" in:\n%s", want, txt);
    ck_assert_msg(!strchr(txt, '<'), "HTML in:\n%s", txt);
    /* every table line has as many cells as its header line */
    int cells = -1, tables = 0;
    for (const char *l = txt; *l; l += strcspn(l, "\n") + 1) {
        size_t n = strcspn(l, "\n");
        int c = n && l[0] == '|' ? md_cells(l, n) : -1;
        if (c >= 0 && cells < 0) tables++; /* a table's first line */
        else if (c >= 0) ck_assert_msg(c == cells, "%d cells, not %d: %.*s", c, cells, (int)n, l);
        cells = c;
        if (!l[n]) break;
    }
    ck_assert_int_eq(tables, 2);
    free(txt);
    perf_run_free(r);
}
END_TEST

void test_perf_add_report(TCase *cost)
{
    tcase_add_test(cost, test_report_names);
    tcase_add_test(cost, test_run_labels_cli);
    tcase_add_test(cost, test_run_labels);
    tcase_add_test(cost, test_report_formats);
    tcase_add_test(cost, test_report_markdown_escapes);
}
