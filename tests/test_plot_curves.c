/* tests/test_plot_curves.c: curves, part of tests/test_plot: the runs' colours and dashes,
 * smoothing of the cost ratio, the cost curve's legend and lines, accuracy curves (and epoch
 * numbers at the end of int's range), the runs' names in the legend, and cost curves drawn
 * from analysed runs. */
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

/* Run styles: the first 28 runs (7 colours x 4 dash patterns) have distinct (colour, dash)
 * pairs, so 12 runs certainly do; the colours are the Okabe-Ito palette's (M. Okabe, K. Ito,
 * "Color Universal Design", 2008: #E69F00 #56B4E9 #009E73 #0072B2 #D55E00 #CC79A7 #000000)
 * without its yellow #F0E442, which is too light on white; the first 7 runs are solid. */
START_TEST(test_curve_styles)
{
    static const int okabe_ito[7] = {0xE69F00, 0x56B4E9, 0x009E73, 0x0072B2,
                                     0xD55E00, 0xCC79A7, 0x000000};
    int n = PLOT_CURVE_COLOURS * PLOT_CURVE_DASHES;
    ck_assert_int_ge(n, 12);
    int colour[64];
    const double *dash[64];
    int nd[64];
    for (int r = 0; r < n; r++) {
        double rgb[3];
        plot_curve_style(r, rgb, &dash[r], &nd[r]);
        int hex = (int)lround(rgb[0] * 255) << 16 | (int)lround(rgb[1] * 255) << 8 |
                  (int)lround(rgb[2] * 255);
        int found = 0;
        for (int k = 0; k < 7; k++) found |= hex == okabe_ito[k];
        ck_assert_msg(found, "run %d: colour #%06X is not one of Okabe-Ito's", r, hex);
        colour[r] = hex;
        if (r < 7) ck_assert_int_eq(nd[r], 0);
        for (int q = 0; q < r; q++) {
            int same_dash = nd[q] == nd[r] && !memcmp(dash[q], dash[r], sizeof(double) * nd[r]);
            ck_assert_msg(colour[q] != colour[r] || !same_dash, "runs %d and %d look alike", q, r);
        }
    }
}
END_TEST

/* Smoothing, on a hand-made run of 9 intervals with C32 = i + 1 and Cq = 0.5 (i = 0..8):
 * each interval's ratio is 0.5 / (i + 1); the centred moving average over 3 is
 * sum Cq / sum C32 over intervals i-1..i+1 (two at the ends), e.g. 1.5 / 15 = 0.1 at i = 4 and
 * 1 / 3 at i = 0; over 2, intervals i..i+1 (0.5 + 0.5) / (1 + 2) at i = 0, and the last
 * alone; the cumulative ratio is never smoothed: 0.5 (i + 1) / ((i + 1)(i + 2) / 2). */
START_TEST(test_curve_smoothing)
{
    struct perf_point pts[9];
    memset(pts, 0, sizeof pts);
    for (int i = 0; i < 9; i++) {
        pts[i].step = i + 1;
        pts[i].epoch_x = (i + 1) / 9.0;
        pts[i].c32 = i + 1;
        pts[i].cq = 0.5;
    }
    struct perf_run run;
    memset(&run, 0, sizeof run);
    run.n_points = 9;
    run.points = pts;
    double x[9], y[9], cum[9];
    ck_assert_int_eq(plot_curve_points(&run, 1.0, 100, 1, x, y, cum), 9);
    for (int i = 0; i < 9; i++) {
        ck_assert_double_eq_tol(x[i], (i + 1) / 9.0, 1e-15);
        ck_assert_double_eq_tol(y[i], 0.5 / (i + 1), 1e-15);
        ck_assert_double_eq_tol(cum[i], 0.5 * (i + 1) / ((i + 1) * (i + 2) / 2.0), 1e-15);
    }
    ck_assert_int_eq(plot_curve_points(&run, 1.0, 100, 3, x, y, cum), 9);
    ck_assert_double_eq_tol(y[0], 1.0 / 3.0, 1e-15);
    ck_assert_double_eq_tol(y[4], 0.1, 1e-15);
    ck_assert_double_eq_tol(y[8], 1.0 / 17.0, 1e-15); /* (0.5 + 0.5) / (8 + 9) */
    for (int i = 0; i < 9; i++)
        ck_assert_double_eq_tol(cum[i], 0.5 * (i + 1) / ((i + 1) * (i + 2) / 2.0), 1e-15);
    ck_assert_int_eq(plot_curve_points(&run, 1.0, 100, 2, x, y, cum), 9);
    ck_assert_double_eq_tol(y[0], 1.0 / 3.0, 1e-15);
    ck_assert_double_eq_tol(y[4], 1.0 / 11.0, 1e-15); /* intervals 4 and 5: 1 / (5 + 6) */
    ck_assert_double_eq_tol(y[8], 0.5 / 9.0, 1e-15);
    /* a window wider than the run: every interval's value is the whole run's ratio */
    ck_assert_int_eq(plot_curve_points(&run, 1.0, 100, 50, x, y, cum), 9);
    for (int i = 0; i < 9; i++) ck_assert_double_eq_tol(y[i], 4.5 / 45.0, 1e-15);
}
END_TEST

/* The column of the cost curve's frame: the one x where rows 100, 300 and 480 (inside the
 * plot area at the default height) all have the frame's grey (0.25 -> 64), searched from the
 * right; -1 if none. */
static int frame_right(cairo_surface_t *s, int w)
{
    for (int x = w - 1; x >= 0; x--) {
        int ok = 1;
        for (int k = 0; k < 3 && ok; k++) {
            int p[3];
            surface_pixel(s, x, (int[]){100, 300, 480}[k], p);
            ok = abs(p[0] - 64) <= 2 && abs(p[1] - 64) <= 2 && abs(p[2] - 64) <= 2;
        }
        if (ok) return x;
    }
    return -1;
}

/* Pixels of a saturated colour (a curve, not text or grid) left of column x1. */
static int coloured_pixels(cairo_surface_t *s, int x1, int y0, int y1)
{
    int n = 0;
    for (int y = y0; y < y1; y++)
        for (int x = 72; x < x1 - 2; x++) {
            int p[3];
            surface_pixel(s, x, y, p);
            int mx = p[0] > p[1] ? p[0] : p[1], mn = p[0] < p[1] ? p[0] : p[1];
            mx = mx > p[2] ? mx : p[2];
            mn = mn < p[2] ? mn : p[2];
            n += mx - mn > 40;
        }
    return n;
}

/* The legend of 12 runs lies right of the plot area (its frame well inside the picture, ink
 * beyond it in every legend row); --cumulative-only draws fewer coloured pixels than both
 * kinds of line; smoothing outside 1..10000 is refused. */
START_TEST(test_curve_legend_and_lines)
{
    char tr[300], png[300];
    snprintf(tr, sizeof tr, "%s/adapt.jsonl", tmpdir);
    synth_write(tr, "lenet5", 3, 0);
    struct adapt_trace *t = load(tr);
    struct perf_params p;
    perf_params_init(&p);
    struct perf_run *run, *runs[12];
    ck_assert_int_eq(perf_run_analyze(&run, t, &p, NULL), ADAPT_OK);
    adapt_trace_free(t);
    for (int i = 0; i < 12; i++) runs[i] = run;
    struct perf_curve_opts o;
    perf_curve_opts_init(&o);
    ck_assert_int_eq(o.smooth, 1);
    ck_assert_int_eq(o.cumulative_only, 0);
    snprintf(png, sizeof png, "%s/cost12.png", tmpdir);
    ck_assert_msg(perf_costcurve_write(runs, 12, &o, png) == ADAPT_OK, "%s",
                  adapt_error_message());
    check_png(png, 1000, 560);
    cairo_surface_t *s = png_load(png);
    int fx = frame_right(s, 1000);
    ck_assert_msg(fx > 500 && fx < 1000 - 150, "frame's right edge at %d", fx);
    for (int r = 0; r < 12; r++) { /* row r's centre: y0 + 8 + 20 r, y0 = 70 */
        int inked = 0;
        for (int y = 70 + 8 + 20 * r - 6; y <= 70 + 8 + 20 * r + 6 && !inked; y++)
            for (int x = fx + 10; x < 1000 && !inked; x++) {
                int px[3];
                surface_pixel(s, x, y, px);
                inked = px[0] < 200 || px[1] < 200 || px[2] < 200;
            }
        ck_assert_msg(inked, "no legend row %d right of the plot", r);
    }
    cairo_surface_destroy(s);

    snprintf(png, sizeof png, "%s/cost_both.png", tmpdir);
    ck_assert_int_eq(perf_costcurve_write(&run, 1, &o, png), ADAPT_OK);
    s = png_load(png);
    fx = frame_right(s, 1000);
    int both = coloured_pixels(s, fx, 70, 502);
    cairo_surface_destroy(s);
    o.cumulative_only = 1;
    snprintf(png, sizeof png, "%s/cost_cum.png", tmpdir);
    ck_assert_int_eq(perf_costcurve_write(&run, 1, &o, png), ADAPT_OK);
    s = png_load(png);
    ck_assert_int_eq(frame_right(s, 1000), fx); /* same layout */
    int cum = coloured_pixels(s, fx, 70, 502);
    cairo_surface_destroy(s);
    ck_assert_msg(cum > 0 && cum < both, "coloured pixels: %d cumulative only, %d both", cum,
                  both);
    o.cumulative_only = 0;
    o.smooth = 5;
    snprintf(png, sizeof png, "%s/cost_smooth.png", tmpdir);
    ck_assert_int_eq(perf_costcurve_write(&run, 1, &o, png), ADAPT_OK);
    o.smooth = 0;
    snprintf(png, sizeof png, "%s/cost_bad.png", tmpdir);
    ck_assert_int_eq(perf_costcurve_write(&run, 1, &o, png), ADAPT_EINVAL);
    ck_assert_msg_has("smoothing over 0 logged intervals (expected 1..10000)");
    ck_assert_msg_has(png);
    ck_assert_int_eq(access(png, F_OK), -1);
    perf_run_free(run);
}
END_TEST

/* Accuracy curves of two runs: default size, the legend right of the right panel (whose
 * frame is found at rows 100, 300, 480 as the cost curve's), PDF; a trace without epoch
 * records is refused naming it. */
START_TEST(test_accuracy)
{
    char a[300], b[300], png[300];
    snprintf(a, sizeof a, "%s/fp32.jsonl", tmpdir);
    snprintf(b, sizeof b, "%s/adapt.jsonl", tmpdir);
    synth_write(a, "lenet5", 4, 1);
    synth_write(b, "lenet5", 4, 0);
    struct adapt_trace *t[2] = {load(a), load(b)};
    const char *names[2] = {"float32", "AdaPT"};
    snprintf(png, sizeof png, "%s/acc.png", tmpdir);
    ck_assert_msg(perf_accuracy_write((const struct adapt_trace *const *)t, names, 2, NULL, png) ==
                      ADAPT_OK,
                  "%s", adapt_error_message());
    check_png(png, 1000, 560);
    cairo_surface_t *s = png_load(png);
    int fx = frame_right(s, 1000);
    ck_assert_msg(fx > 600 && fx < 1000 - 100, "right panel's frame at %d", fx);
    ck_assert(png_inked(png, fx + 10, 90, 1000, 130)); /* the legend's first rows */
    cairo_surface_destroy(s);
    snprintf(png, sizeof png, "%s/acc.pdf", tmpdir);
    ck_assert_int_eq(perf_accuracy_write((const struct adapt_trace *const *)t, names, 2, NULL, png),
                     ADAPT_OK);
    check_pdf(png);
    t[1]->n_epochs = 0;
    snprintf(png, sizeof png, "%s/acc_bad.png", tmpdir);
    ck_assert_int_eq(perf_accuracy_write((const struct adapt_trace *const *)t, names, 2, NULL, png),
                     ADAPT_EINVAL);
    ck_assert_msg_has(b);
    ck_assert_msg_has("no epoch records");
    ck_assert_int_eq(access(png, F_OK), -1);
    adapt_trace_free(t[0]);
    adapt_trace_free(t[1]);
}
END_TEST

/* Epoch numbers are drawn as doubles: a trace whose last epoch record says epoch 2^31 - 1 (a
 * struct any caller may build) draws with its x axis to 2^31 instead of overflowing epoch + 1
 * (the sanitizer build stopped there before). In a file the reader refuses it, and
 * adapt-heatmap --accuracy says where. */
START_TEST(test_accuracy_epoch_numbers)
{
    char a[300], bad[300], png[300], cmd[1200], out[4096];
    snprintf(a, sizeof a, "%s/fp32.jsonl", tmpdir);
    snprintf(bad, sizeof bad, "%s/epoch.jsonl", tmpdir);
    snprintf(png, sizeof png, "%s/acc.png", tmpdir);
    synth_write(a, "lenet5", 2, 1);
    struct adapt_trace *t = load(a);
    const char *names[1] = {"float32"};
    t->epochs[t->n_epochs - 1].epoch = 2147483647;
    ck_assert_msg(perf_accuracy_write((const struct adapt_trace *const *)&t, names, 1, NULL, png) ==
                      ADAPT_OK,
                  "%s", adapt_error_message());
    check_png(png, 1000, 560);
    adapt_trace_free(t);
    if (access("./adapt-heatmap", X_OK) != 0) return;
    snprintf(cmd, sizeof cmd,
             "awk '/\"type\":\"epoch\"/ { n++; if (n == 2) sub(/\"epoch\":[0-9]+/, "
             "\"\\\"epoch\\\":2147483647\") } { print }' %s > %s",
             a, bad);
    ck_assert_int_eq(system(cmd), 0);
    int rc = tu_run(out, sizeof out, "./adapt-heatmap --accuracy %s -o %s", bad, png);
    ck_assert_msg(rc != 0, "adapt-heatmap accepted epoch 2^31 - 1: %s", out);
    ck_assert_msg(strstr(out, "epoch.jsonl:243: epoch record: field \"epoch\" = 2147483647 is out "
                              "of range [0, 99999]"),
                  "%s", out);
}
END_TEST

/* Sets the header's config_file, seed 1 and config.run.name (NULL: absent) of trace `path`. */
static void header_set(const char *path, const char *config_file, const char *run_name)
{
    size_t n;
    char *text = (char *)tu_read_file(path, &n);
    size_t h = strcspn(text, "\n");
    json_error_t err;
    json_t *hd = json_loadb(text, h, 0, &err);
    ck_assert_msg(hd != NULL, "%s", err.text);
    json_object_set_new(hd, "config_file", json_string(config_file));
    json_object_set_new(hd, "seed", json_integer(1)); /* no " seed N" in the run's name */
    if (run_name)
        json_object_set_new(json_object_get(hd, "config"), "run",
                            json_pack("{s:s}", "name", run_name));
    char *line = json_dumps(hd, JSON_COMPACT);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(line, f);
    fwrite(text + h, 1, n - h, f);
    ck_assert_int_eq(fclose(f), 0);
    free(line);
    json_decref(hd);
    free(text);
}

/* Whether two PNGs have the same pixels. */
static int same_pixels(const char *a, const char *b)
{
    cairo_surface_t *sa = png_load(a), *sb = png_load(b);
    int w = cairo_image_surface_get_width(sa), hh = cairo_image_surface_get_height(sa);
    int same = w == cairo_image_surface_get_width(sb) &&
               hh == cairo_image_surface_get_height(sb);
    for (int y = 0; y < hh && same; y++)
        for (int x = 0; x < w && same; x++) {
            int pa[3], pb[3];
            surface_pixel(sa, x, y, pa);
            surface_pixel(sb, x, y, pb);
            same = !memcmp(pa, pb, sizeof pa);
        }
    cairo_surface_destroy(sa);
    cairo_surface_destroy(sb);
    return same;
}

/* adapt-heatmap's --cost-curve and --accuracy legends name runs as adapt-perf does
 * (perf_runs_label): two runs of experiments/configs/fmnist_lenet5.ini in runs/long/adapt and
 * runs/my/adapt are "fmnist_lenet5 (long/adapt)" and "fmnist_lenet5 (my/adapt)"; with run.name
 * set, the names. Each picture is compared with the one drawn with those legend texts. */
START_TEST(test_legend_names)
{
    static const struct {
        const char *run_name[2], *want[2];
    } cases[] = {
        {{NULL, NULL}, {"fmnist_lenet5 (long/adapt)", "fmnist_lenet5 (my/adapt)"}},
        {{"fixed8", "mxfp8"}, {"fixed8", "mxfp8"}},
    };
    if (!tu_have_program("./adapt-heatmap")) return;
    char tr[2][300], dir[2][300], out[4096], got[300], want[300];
    static const char *const where[2] = {"runs/long/adapt", "runs/my/adapt"};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        for (int i = 0; i < 2; i++) {
            snprintf(dir[i], sizeof dir[i], "%s/c%zu/%s", tmpdir, c, where[i]);
            ck_assert_int_eq(tu_run(out, sizeof out, "mkdir -p '%s'", dir[i]), 0);
            snprintf(tr[i], sizeof tr[i], "%s/trace.jsonl", dir[i]);
            synth_write(tr[i], "lenet5", 3, 0);
            header_set(tr[i], "experiments/configs/fmnist_lenet5.ini", cases[c].run_name[i]);
        }
        struct perf_params p;
        perf_params_init(&p);
        struct perf_run *runs[2];
        struct adapt_trace *t[2];
        for (int i = 0; i < 2; i++) {
            ck_assert_int_eq(perf_trace_load(tr[i], 0, &p, NULL, &t[i], &runs[i]), ADAPT_OK);
            free(runs[i]->name);
            runs[i]->name = malloc(strlen(cases[c].want[i]) + 1);
            strcpy(runs[i]->name, cases[c].want[i]);
        }
        for (int acc = 0; acc < 2; acc++) {
            snprintf(got, sizeof got, "%s/c%zu/%s_got.png", tmpdir, c, acc ? "acc" : "cost");
            snprintf(want, sizeof want, "%s/c%zu/%s_want.png", tmpdir, c, acc ? "acc" : "cost");
            ck_assert_msg(tu_run(out, sizeof out, "./adapt-heatmap %s %s %s -o %s",
                                 acc ? "--accuracy" : "--cost-curve", dir[0], dir[1], got) == 0,
                          "%s", out);
            const char *names[2] = {cases[c].want[0], cases[c].want[1]};
            ck_assert_int_eq(acc ? perf_accuracy_write((const struct adapt_trace *const *)t, names,
                                                       2, NULL, want)
                                 : perf_costcurve_write(runs, 2, NULL, want),
                             ADAPT_OK);
            ck_assert_msg(same_pixels(got, want), "case %zu: adapt-heatmap %s's legend is not "
                          "\"%s\", \"%s\" (%s)", c, acc ? "--accuracy" : "--cost-curve",
                          cases[c].want[0], cases[c].want[1], got);
        }
        for (int i = 0; i < 2; i++) {
            perf_run_free(runs[i]);
            adapt_trace_free(t[i]);
        }
    }
}
END_TEST

START_TEST(test_cost_curve)
{
    char a[300], b[300], png[300], svg[300];
    snprintf(a, sizeof a, "%s/lenet5_fp32.jsonl", tmpdir);
    snprintf(b, sizeof b, "%s/lenet5_adapt.jsonl", tmpdir);
    synth_write(a, "lenet5", 3, 1);
    synth_write(b, "lenet5", 3, 0);
    struct perf_params p;
    perf_params_init(&p);
    struct perf_run *runs[2];
    struct adapt_trace *t = load(a);
    ck_assert_int_eq(perf_run_analyze(&runs[0], t, &p, NULL), ADAPT_OK);
    adapt_trace_free(t);
    t = load(b);
    ck_assert_int_eq(perf_run_analyze(&runs[1], t, &p, NULL), ADAPT_OK);
    adapt_trace_free(t);
    snprintf(png, sizeof png, "%s/cost.png", tmpdir);
    snprintf(svg, sizeof svg, "%s/cost.svg", tmpdir);
    ck_assert_int_eq(perf_costcurve_write(runs, 2, NULL, png), ADAPT_OK);
    check_png(png, 1000, 560); /* the default size */
    ck_assert_int_eq(perf_costcurve_write(runs, 2, NULL, svg), ADAPT_OK);
    check_svg(svg, 1000, 560);
    /* refusals */
    ck_assert_int_eq(perf_costcurve_write(runs, 0, NULL, png), ADAPT_EINVAL);
    snprintf(png, sizeof png, "%s/cost.jpg", tmpdir);
    ck_assert_int_eq(perf_costcurve_write(runs, 2, NULL, png), ADAPT_EINVAL);
    ck_assert_msg_has(".png, .svg or .pdf");
    ck_assert_int_eq(access(png, F_OK), -1); /* nothing written */
    perf_run_free(runs[0]);
    perf_run_free(runs[1]);
}
END_TEST

void test_plot_add_curves(TCase *tc)
{
    tcase_add_test(tc, test_curve_styles);
    tcase_add_test(tc, test_curve_smoothing);
    tcase_add_test(tc, test_curve_legend_and_lines);
    tcase_add_test(tc, test_accuracy);
    tcase_add_test(tc, test_accuracy_epoch_numbers);
    tcase_add_test(tc, test_cost_curve);
    tcase_add_test(tc, test_legend_names);
}
