/* tests/test_plot_heatmap.c: heatmaps, part of tests/test_plot: their layout for models of
 * 5 and 22 units, fixed colour scales, subtitles and PDF, adapt-heatmap's options, and the
 * word-length shares. */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cairo.h>

#include "src/perfmodel/perf.h"
#include "src/plot/internal.h"
#include "src/plot/plot.h"
#include "src/base/rng.h"
#include "src/trace/trace.h"
#include "tests/test_plot.h"
#include "tests/testutil.h"
/* Layout: the plot starts 86 px down; rows are 420/units px high within
 * [16, 40] and the plot at least 180 px; 62 px below for the step axis.
 * LeNet-5 (5 units): 86 + 5*40 + 62 = 348; ResNet-20 (22 units):
 * 86 + 22*(420/22) + 62 = 568. */
START_TEST(test_heatmaps)
{
    char tr[300], png[300], svg[300];
    snprintf(tr, sizeof tr, "%s/lenet5_adapt.jsonl", tmpdir);
    synth_write(tr, "lenet5", 3, 0);
    struct adapt_trace *t = load(tr);
    struct perf_heatmap_opts o;
    perf_heatmap_opts_init(&o);
    static const char *const metrics[5] = {"wl", "fl", "lb", "r", "sparsity"};
    for (int i = 0; i < 5; i++) {
        ck_assert_int_eq(perf_metric_parse(metrics[i], &o.metric), ADAPT_OK);
        snprintf(png, sizeof png, "%s/lenet5_%s.png", tmpdir, metrics[i]);
        ck_assert_msg(perf_heatmap_write(t, &o, png) == ADAPT_OK, "%s", adapt_error_message());
        check_png(png, 1100, 348);
    }
    o.metric = PERF_METRIC_WL;
    snprintf(svg, sizeof svg, "%s/lenet5_wl.svg", tmpdir);
    ck_assert_int_eq(perf_heatmap_write(t, &o, svg), ADAPT_OK);
    check_svg(svg, 1100, 348);
    /* SVG text is text, not glyph outlines: the title (escaped for XML) and the rotated axis
     * label are <text> elements, and cairo wrote no glyph symbols */
    o.title = "a < b & \"c\"";
    ck_assert_int_eq(perf_heatmap_write(t, &o, svg), ADAPT_OK);
    check_svg(svg, 1100, 348);
    char *doc = (char *)tu_read_file(svg, NULL);
    ck_assert_ptr_nonnull(strstr(doc, "font-weight=\"bold\" text-anchor=\"start\""));
    ck_assert_ptr_nonnull(strstr(doc, ">a &lt; b &amp; &quot;c&quot;</text>"));
    ck_assert_ptr_nonnull(strstr(doc, "transform=\"rotate(-90.00 "));
    ck_assert_ptr_nonnull(strstr(doc, ">word length (bits)</text>"));
    ck_assert_ptr_null(strstr(doc, "glyph"));
    free(doc);
    o.title = NULL;
    adapt_trace_free(t);

    snprintf(tr, sizeof tr, "%s/resnet20_adapt.jsonl", tmpdir);
    synth_write(tr, "resnet20", 2, 0);
    t = load(tr);
    o.width = 1300;
    snprintf(png, sizeof png, "%s/resnet20_wl.png", tmpdir);
    ck_assert_int_eq(perf_heatmap_write(t, &o, png), ADAPT_OK);
    check_png(png, 1300, 568);
    snprintf(svg, sizeof svg, "%s/resnet20_wl.svg", tmpdir);
    ck_assert_int_eq(perf_heatmap_write(t, &o, svg), ADAPT_OK);
    check_svg(svg, 1300, 568);
    adapt_trace_free(t);
}
END_TEST

/* A fixed colour scale: the float32 run (WL 32 everywhere) drawn on [0, 64] is the map's
 * middle (level round(0.5 * 255) = 128) in every cell, on [8, 32] its top, and on [4, 16]
 * clamped to the top; with no scale given, on WL's own range [0, 32], its top; vmin >= vmax
 * is refused naming the trace, and nothing is written.
 * The pixel (600, 106) lies in the first row (86 + 40/2) of LeNet-5's plot area (x from
 * about 130 to 990 at width 1100). */
START_TEST(test_heatmap_scale)
{
    char tr[300], png[300];
    snprintf(tr, sizeof tr, "%s/fp32.jsonl", tmpdir);
    synth_write(tr, "lenet5", 2, 1);
    struct adapt_trace *t = load(tr);
    struct perf_heatmap_opts o;
    perf_heatmap_opts_init(&o);
    ck_assert(isnan(o.vmin) && isnan(o.vmax) && o.subtitle == NULL);
    static const struct {
        double lo, hi;
        int level;
    } cases[] = {{0, 64, 128}, {8, 32, 255}, {4, 16, 255}, {32, 40, 0}, {40, 64, 0}};
    for (int i = 0; i < 5; i++) {
        o.vmin = cases[i].lo;
        o.vmax = cases[i].hi;
        snprintf(png, sizeof png, "%s/scale%d.png", tmpdir, i);
        ck_assert_msg(perf_heatmap_write(t, &o, png) == ADAPT_OK, "%s", adapt_error_message());
        check_png(png, 1100, 348);
        check_level(png, 600, 106, cases[i].level);
        check_level(png, 600, 86 + 4 * 40 + 20, cases[i].level); /* the last row */
    }
    /* no scale given: a metric that never changes is drawn on its own range (WL 0 to 32 bits),
     * so the float32 run's 32 bits are the map's top, not the middle of a band around 32 */
    o.vmin = o.vmax = NAN;
    snprintf(png, sizeof png, "%s/scale_const.png", tmpdir);
    ck_assert_int_eq(perf_heatmap_write(t, &o, png), ADAPT_OK);
    check_level(png, 600, 106, 255);
    /* only one end given: the other is the run's value (32) */
    o.vmin = 0;
    o.vmax = NAN;
    snprintf(png, sizeof png, "%s/scale_lo.png", tmpdir);
    ck_assert_int_eq(perf_heatmap_write(t, &o, png), ADAPT_OK);
    check_level(png, 600, 106, 255);
    o.vmin = 32;
    snprintf(png, sizeof png, "%s/scale_bad.png", tmpdir);
    ck_assert_int_eq(perf_heatmap_write(t, &o, png), ADAPT_EINVAL);
    ck_assert_msg_has(tr);
    ck_assert_msg_has("vmin 32 must be below vmax 32 (the run's greatest value)");
    o.vmax = 16;
    ck_assert_int_eq(perf_heatmap_write(t, &o, png), ADAPT_EINVAL);
    ck_assert_msg_has("vmin 32 must be below vmax 16");
    ck_assert_int_eq(access(png, F_OK), -1);
    adapt_trace_free(t);
}
END_TEST

/* Subtitles: the default one and a given one put ink where the subtitle goes (the band
 * of baseline 50); "" leaves it white and moves the heatmap up by 20 px (348 - 20 high) and
 * the cost curve's plot area up (same picture size). PDF: both figures. */
START_TEST(test_subtitles_and_pdf)
{
    char tr[300], png[300], pdf[300];
    snprintf(tr, sizeof tr, "%s/adapt.jsonl", tmpdir);
    synth_write(tr, "lenet5", 2, 0);
    struct adapt_trace *t = load(tr);
    struct perf_heatmap_opts o;
    perf_heatmap_opts_init(&o);
    snprintf(png, sizeof png, "%s/sub_default.png", tmpdir);
    ck_assert_int_eq(perf_heatmap_write(t, &o, png), ADAPT_OK);
    check_png(png, 1100, 348);
    ck_assert(png_inked(png, 16, 40, 200, 53));
    o.subtitle = "8-bit start, 2 epochs";
    snprintf(png, sizeof png, "%s/sub_given.png", tmpdir);
    ck_assert_int_eq(perf_heatmap_write(t, &o, png), ADAPT_OK);
    check_png(png, 1100, 348);
    ck_assert(png_inked(png, 16, 40, 200, 53));
    ck_assert(!png_inked(png, 200, 40, 400, 53)); /* shorter than the default */
    o.subtitle = "";
    snprintf(png, sizeof png, "%s/sub_none.png", tmpdir);
    ck_assert_int_eq(perf_heatmap_write(t, &o, png), ADAPT_OK);
    check_png(png, 1100, 328);
    ck_assert(!png_inked(png, 16, 38, 1100, 46));
    snprintf(pdf, sizeof pdf, "%s/heatmap.PDF", tmpdir);
    ck_assert_msg(perf_heatmap_write(t, &o, pdf) == ADAPT_OK, "%s", adapt_error_message());
    check_pdf(pdf);

    struct perf_params p;
    perf_params_init(&p);
    struct perf_run *run;
    ck_assert_int_eq(perf_run_analyze(&run, t, &p, NULL), ADAPT_OK);
    struct perf_curve_opts co;
    perf_curve_opts_init(&co);
    ck_assert_ptr_null(co.subtitle);
    snprintf(png, sizeof png, "%s/cost_sub.png", tmpdir);
    ck_assert_int_eq(perf_costcurve_write(&run, 1, &co, png), ADAPT_OK);
    ck_assert(png_inked(png, 16, 40, 200, 53));
    co.subtitle = "";
    snprintf(png, sizeof png, "%s/cost_nosub.png", tmpdir);
    ck_assert_int_eq(perf_costcurve_write(&run, 1, &co, png), ADAPT_OK);
    check_png(png, 1000, 560);
    ck_assert(!png_inked(png, 16, 38, 1000, 48));
    snprintf(pdf, sizeof pdf, "%s/cost.pdf", tmpdir);
    ck_assert_int_eq(perf_costcurve_write(&run, 1, &co, pdf), ADAPT_OK);
    check_pdf(pdf);
    perf_run_free(run);
    adapt_trace_free(t);
}
END_TEST

/* adapt-heatmap's new options: a bad or empty colour scale and contradictory subtitle
 * options exit with status 2 naming the options, and write nothing; good ones draw. */
START_TEST(test_program_options)
{
    if (access("./adapt-heatmap", X_OK) != 0) return;
    char tr[300], out[4096];
    snprintf(tr, sizeof tr, "%s/fp32.jsonl", tmpdir);
    synth_write(tr, "lenet5", 1, 1);
    static const struct {
        const char *args, *msg;
    } bad[] = {
        {"--vmin 16 --vmax 8", "--vmin 16 must be below --vmax 8"},
        {"--vmin 8 --vmax 8", "--vmin 8 must be below --vmax 8"},
        {"--vmin eight", "--vmin expects a number, got 'eight'"},
        {"--vmax inf", "--vmax expects a number, got 'inf'"},
        {"--subtitle x --no-subtitle", "--subtitle and --no-subtitle exclude each other"},
        {"--cost-curve --vmin 0", "--cost-curve has none"},
        {"--smooth 3", "--smooth applies to --cost-curve, not to heatmaps"},
        {"--cumulative-only", "--cumulative-only applies to --cost-curve"},
        {"--cost-curve --smooth 0", "--smooth expects a positive integer, got '0'"},
        {"--cost-curve --cumulative-only --smooth 3", "which --cumulative-only leaves out"},
        {"--accuracy --wl-dist", "--cost-curve, --accuracy and --wl-dist exclude each other"},
        {"--accuracy --vmax 3", "--accuracy has none"},
        {"--wl-dist --smooth 3", "--smooth applies to --cost-curve, not to --wl-dist"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = tu_run(out, sizeof out, "./adapt-heatmap %s %s -o %s/bad.png", bad[i].args, tr,
                        tmpdir);
        ck_assert_msg(rc == 2, "%s: exit status %d, expected 2: %s", bad[i].args, rc, out);
        ck_assert_msg(strstr(out, bad[i].msg), "%s: \"%s\" lacks \"%s\"", bad[i].args, out,
                      bad[i].msg);
    }
    char path[400];
    snprintf(path, sizeof path, "%s/bad.png", tmpdir);
    ck_assert_int_eq(access(path, F_OK), -1);
    int rc = tu_run(out, sizeof out,
                    "./adapt-heatmap %s --vmin 0 --vmax 64 --no-subtitle -o %s/ok.png && "
                    "./adapt-heatmap --cost-curve %s --subtitle 'two runs' -o %s/ok.pdf && "
                    "./adapt-heatmap --cost-curve %s %s --smooth 9 -o %s/s.png && "
                    "./adapt-heatmap --cost-curve %s --cumulative-only -o %s/c.svg && "
                    "./adapt-heatmap --accuracy %s %s -o %s/acc.png && "
                    "./adapt-heatmap --wl-dist %s --vmin 4 -o %s/wl.svg",
                    tr, tmpdir, tr, tmpdir, tr, tr, tmpdir, tr, tmpdir, tr, tr, tmpdir, tr,
                    tmpdir);
    ck_assert_msg(rc == 0, "%s", out);
    rc = tu_run(out, sizeof out, "./adapt-heatmap --wl-dist %s %s -o %s/two.png", tr, tr, tmpdir);
    ck_assert_msg(rc == 2 && strstr(out, "--wl-dist shows one run, and 2 traces were given"),
                  "--wl-dist with two traces: exit status %d: %s", rc, out);
    snprintf(path, sizeof path, "%s/ok.png", tmpdir);
    check_png(path, 1100, 328);
    check_level(path, 600, 86, 128);
    snprintf(path, sizeof path, "%s/ok.pdf", tmpdir);
    check_pdf(path);
}
END_TEST

/* Word-length shares: the float32 synthetic run (120 records of WL 32) renumbered so that
 * records 0..29 stand for 3 steps each (steps 1..90) and records 30..119 for one each
 * (91..180), with unit 0 at WL 8 in the first 30 records and 16 after: 90/180 at each; the
 * other units: all 180 steps at 32. Drawn with the scale 8..16 (the run's range without
 * --vmin/--vmax would be 8..32), the left of unit 0's bar has the map's bottom colour and
 * its right the top; vmin >= vmax and a trace without step records are refused. */
START_TEST(test_wl_dist)
{
    char tr[300], png[300];
    snprintf(tr, sizeof tr, "%s/fp32.jsonl", tmpdir);
    synth_write(tr, "lenet5", 1, 1);
    struct adapt_trace *t = load(tr);
    ck_assert_int_eq(t->n_steps, 120);
    for (int i = 0; i < 120; i++) {
        t->steps[i].step = i < 30 ? 3 * (i + 1) : 90 + (i - 29);
        t->steps[i].units[0].wl = i < 30 ? 8 : 16;
    }
    double frac[PLOT_WL_MAX + 1];
    ck_assert_int_eq(plot_wl_fractions(t, 0, frac), 180);
    for (int w = 0; w <= PLOT_WL_MAX; w++)
        ck_assert_double_eq_tol(frac[w], w == 8 || w == 16 ? 0.5 : 0, 1e-15);
    ck_assert_int_eq(plot_wl_fractions(t, 1, frac), 180);
    ck_assert_double_eq(frac[32], 1);
    struct perf_heatmap_opts o;
    perf_heatmap_opts_init(&o);
    o.vmin = 8;
    o.vmax = 16;
    snprintf(png, sizeof png, "%s/wldist.png", tmpdir);
    ck_assert_msg(perf_wldist_write(t, &o, png) == ADAPT_OK, "%s", adapt_error_message());
    check_png(png, 1100, 348); /* the heatmap's layout */
    check_level(png, 200, 106, 0);
    check_level(png, 900, 106, 255);
    check_level(png, 900, 86 + 40 + 20, 255); /* unit 1: WL 32, clamped to the top */
    snprintf(png, sizeof png, "%s/wldist.pdf", tmpdir);
    ck_assert_int_eq(perf_wldist_write(t, &o, png), ADAPT_OK);
    check_pdf(png);
    o.vmin = 16;
    snprintf(png, sizeof png, "%s/wldist_bad.png", tmpdir);
    ck_assert_int_eq(perf_wldist_write(t, &o, png), ADAPT_EINVAL);
    ck_assert_msg_has("vmin 16 must be below vmax 16");
    ck_assert_msg_has(tr);
    o.vmin = NAN;
    o.vmax = NAN;
    t->n_steps = 0;
    ck_assert_int_eq(perf_wldist_write(t, &o, png), ADAPT_EINVAL);
    ck_assert_msg_has("no step records");
    ck_assert_int_eq(access(png, F_OK), -1);
    t->n_steps = 120;
    adapt_trace_free(t);
}
END_TEST

void test_plot_add_heatmap(TCase *tc)
{
    tcase_add_test(tc, test_heatmaps);
    tcase_add_test(tc, test_heatmap_scale);
    tcase_add_test(tc, test_subtitles_and_pdf);
    tcase_add_test(tc, test_program_options);
    tcase_add_test(tc, test_wl_dist);
}
