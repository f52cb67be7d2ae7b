/* tests/test_plot.c: src/plot (heatmaps, cost curves, colour map).
 *
 * Set ADAPT_PLOT_KEEP=DIR to keep the pictures (and the synthetic traces
 * they are drawn from) in DIR for a look. */
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
#include "tests/testutil.h"

static char tmpdir[256];

static void setup(void)
{
    const char *keep = getenv("ADAPT_PLOT_KEEP");
    if (keep && *keep) {
        snprintf(tmpdir, sizeof tmpdir, "%s", keep);
        mkdir(tmpdir, 0755);
        return;
    }
    tu_tmpdir_make(tmpdir, sizeof tmpdir, "plot");
}

static void teardown(void)
{
    const char *keep = getenv("ADAPT_PLOT_KEEP");
    if (!keep || !*keep) tu_tmpdir_remove(tmpdir);
}

#define ck_assert_msg_has(s)                                                                       \
    ck_assert_msg(strstr(adapt_error_message(), (s)) != NULL, "message \"%s\" lacks \"%s\"",       \
                  adapt_error_message(), (s))

/* A synthetic AdaPT-like run of a built-in model: `epochs` epochs of 120
 * steps; each unit starts at <8,4>, is pushed down and up on its own
 * lookback period (random walk keyed by seed), its resolution drifts in
 * [50,150] and its sparsity grows towards 0.3. fp32: the float32 policy
 * (WL 32, nothing else recorded). */
static void synth_write(const char *path, const char *model, int epochs, int fp32)
{
    struct perf_model *m;
    ck_assert_int_eq(perf_model_alloc(&m, model, 10), ADAPT_OK);
    struct adapt_trace_header h;
    memset(&h, 0, sizeof h);
    json_t *cfg = json_pack("{s:{s:i,s:i}}", "train", "batch", 128, "accumulation_steps", 1);
    h.policy = fp32 ? "fp32" : "adapt";
    h.config = cfg;
    h.dataset.name = "synthetic";
    h.dataset.train = 120 * 128;
    h.dataset.classes = 10;
    h.model.name = m->name;
    memcpy(h.model.input, m->input, sizeof h.model.input);
    h.model.classes = 10;
    h.model.params = m->params;
    h.model.macs = m->macs;
    h.model.n_layers = m->n_layers;
    h.model.layers = m->layers;
    h.n_units = m->n_units;
    h.units = m->units;
    struct adapt_trace_writer *w;
    ck_assert_int_eq(adapt_trace_writer_create(&w, path), ADAPT_OK);
    ck_assert_int_eq(adapt_trace_write_header(w, &h), ADAPT_OK);
    json_decref(cfg);
    int nu = m->n_units;
    struct adapt_trace_unit_state *us = calloc((size_t)nu, sizeof *us);
    struct adapt_trace_event *ev = calloc((size_t)nu * 2, sizeof *ev);
    double *lb = calloc((size_t)nu, sizeof *lb);
    int *since = calloc((size_t)nu, sizeof *since);
    struct adapt_rng r;
    adapt_rng_init(&r, 2385, 5);
    for (int u = 0; u < nu; u++) {
        us[u].wl = fp32 ? 32 : 8;
        us[u].fl = fp32 ? 0 : 4;
        us[u].r = fp32 ? -1 : 100;
        lb[u] = 25 + 3 * u;
    }
    int64_t step = 0;
    for (int e = 0; e < epochs; e++) {
        for (int s = 0; s < 120; s++) {
            step++;
            int ne = 0;
            for (int u = 0; u < nu && !fp32; u++) {
                lb[u] = fmin(100, fmax(25, lb[u] + (adapt_rng_uniform(&r) - 0.45) * 4));
                us[u].lb = lb[u];
                us[u].r =
                    (int)fmin(150, fmax(50, us[u].r + (adapt_rng_uniform(&r) < 0.5 ? -1 : 1)));
                us[u].sparsity = 0.3 * (1 - exp(-(double)step / 150.0)) * (0.5 + 0.5 * u / nu) +
                                 0.01 * adapt_rng_uniform(&r);
                if (++since[u] >= (int)lb[u]) {
                    since[u] = 0;
                    struct adapt_trace_event *pd = &ev[ne++];
                    memset(pd, 0, sizeof *pd);
                    pd->unit = u;
                    pd->kind = ADAPT_TRACE_EVENT_PD;
                    pd->before[0] = us[u].wl, pd->before[1] = us[u].fl;
                    int down = (int)adapt_rng_below(&r, 3);
                    us[u].wl = us[u].wl - down < 4 ? 4 : us[u].wl - down;
                    us[u].fl = us[u].fl > us[u].wl - 1 ? us[u].wl - 1 : us[u].fl;
                    pd->after[0] = us[u].wl, pd->after[1] = us[u].fl;
                    pd->bisect_steps = pd->kl_evals = 3 + down;
                    pd->sample = 0;
                    struct adapt_trace_event *pu = &ev[ne++];
                    memset(pu, 0, sizeof *pu);
                    pu->unit = u;
                    pu->kind = ADAPT_TRACE_EVENT_PU;
                    pu->before[0] = us[u].wl, pu->before[1] = us[u].fl;
                    pu->s = 1 + (int)adapt_rng_below(&r, 3) + (step > 200 && u % 3 == 0);
                    us[u].fl = us[u].fl + pu->s > 24 ? 24 : us[u].fl + pu->s;
                    us[u].wl = us[u].fl + 1 > us[u].wl ? us[u].fl + 1 : us[u].wl;
                    if (us[u].wl > 28) us[u].wl = 28;
                    pu->after[0] = us[u].wl, pu->after[1] = us[u].fl;
                }
            }
            for (int u = 0; u < nu; u++) {
                us[u].sat = us[u].flush = -1;
                if (fp32) {
                    us[u].lb = NAN;
                    us[u].sparsity = NAN;
                }
            }
            struct adapt_trace_step st;
            memset(&st, 0, sizeof st);
            st.step = step;
            st.epoch = e;
            st.lr = 0.01;
            st.loss = 2.3 * exp(-(double)step / 300.0);
            st.strategy = fp32 ? ADAPT_TRACE_STRATEGY_NONE : ADAPT_TRACE_STRATEGY_MIN;
            st.n_units = nu;
            st.units = us;
            st.n_events = ne;
            st.events = ev;
            st.accum = 1;
            ck_assert_int_eq(adapt_trace_write_step(w, &st), ADAPT_OK);
        }
        double acc = 0.5 + 0.4 * (1 - exp(-(e + 1) / 2.0)) - (fp32 ? 0 : 0.004);
        struct adapt_trace_epoch er = {e, step, 0.01, 1.0, acc, 1.0, acc, 2.0 * (e + 1), 5000.0};
        ck_assert_int_eq(adapt_trace_write_epoch(w, &er), ADAPT_OK);
    }
    struct adapt_trace_end en = {ADAPT_TRACE_END_OK, 10.0};
    ck_assert_int_eq(adapt_trace_write_end(w, &en), ADAPT_OK);
    ck_assert_int_eq(adapt_trace_writer_close(w), ADAPT_OK);
    free(us);
    free(ev);
    free(lb);
    free(since);
    perf_model_free(m);
}

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* PNG signature, then the IHDR chunk first with the expected size. */
static void check_png(const char *path, uint32_t w, uint32_t h)
{
    size_t n;
    unsigned char *b = tu_read_file(path, &n);
    static const unsigned char sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    ck_assert_uint_ge(n, 33);
    ck_assert_int_eq(memcmp(b, sig, 8), 0);
    ck_assert_uint_eq(be32(b + 8), 13); /* IHDR length */
    ck_assert_int_eq(memcmp(b + 12, "IHDR", 4), 0);
    ck_assert_uint_eq(be32(b + 16), w);
    ck_assert_uint_eq(be32(b + 20), h);
    ck_assert_int_eq(memcmp(b + n - 8, "IEND", 4), 0);
    free(b);
}

/* Well-formed XML (tags nest and close, attributes quoted) whose root is an
 * <svg> element of the expected width and height in points. */
static void check_svg(const char *path, int w, int h)
{
    size_t n;
    char *b = (char *)tu_read_file(path, &n);
    char *stack[64];
    int depth = 0, roots = 0;
    char *p = b;
    while ((p = strchr(p, '<'))) {
        if (!strncmp(p, "<?", 2)) {
            p = strstr(p, "?>");
            ck_assert_ptr_nonnull(p);
            continue;
        }
        if (!strncmp(p, "<!--", 4)) {
            p = strstr(p, "-->");
            ck_assert_ptr_nonnull(p);
            continue;
        }
        if (!strncmp(p, "<!", 2)) {
            p = strchr(p, '>');
            ck_assert_ptr_nonnull(p);
            continue;
        }
        char *end = p + 1;
        int quote = 0;
        while (*end && (quote || *end != '>')) {
            if (*end == '"' || *end == '\'') quote = quote == *end ? 0 : quote ? quote : *end;
            end++;
        }
        ck_assert_msg(*end == '>', "%s: unterminated tag", path);
        int closing = p[1] == '/', selfclose = end[-1] == '/';
        char *name = p + 1 + closing;
        size_t len = strcspn(name, " \t\r\n/>");
        ck_assert_uint_gt(len, 0);
        if (closing) {
            ck_assert_msg(depth > 0, "%s: </%.*s> closes nothing", path, (int)len, name);
            depth--;
            ck_assert_msg(strlen(stack[depth]) == len && !strncmp(stack[depth], name, len),
                          "%s: </%.*s> closes <%s>", path, (int)len, name, stack[depth]);
            free(stack[depth]);
        } else {
            if (depth == 0) {
                roots++;
                ck_assert_msg(len == 3 && !strncmp(name, "svg", 3), "%s: root is not <svg>", path);
                char want[64];
                snprintf(want, sizeof want, "width=\"%dpt\"", w);
                ck_assert_msg(strstr(p, want) && strstr(p, want) < end, "%s lacks %s", path, want);
                snprintf(want, sizeof want, "height=\"%dpt\"", h);
                ck_assert_msg(strstr(p, want) && strstr(p, want) < end, "%s lacks %s", path, want);
            }
            if (!selfclose) {
                ck_assert_int_lt(depth, 64);
                stack[depth++] = strndup(name, len);
            }
        }
        p = end + 1;
    }
    ck_assert_int_eq(depth, 0);
    ck_assert_int_eq(roots, 1);
    free(b);
}

/* A PDF file: the header first, the end-of-file marker last. */
static void check_pdf(const char *path)
{
    size_t n;
    char *b = (char *)tu_read_file(path, &n);
    ck_assert_uint_ge(n, 64);
    ck_assert_msg(!memcmp(b, "%PDF-", 5), "%s does not start with %%PDF-", path);
    ck_assert_msg(strstr(b + n - 16, "%%EOF") != NULL, "%s lacks the final %%%%EOF", path);
    free(b);
}

/* A PNG as an opaque image surface. */
static cairo_surface_t *png_load(const char *path)
{
    cairo_surface_t *s = cairo_image_surface_create_from_png(path);
    ck_assert_int_eq(cairo_surface_status(s), CAIRO_STATUS_SUCCESS);
    ck_assert_int_eq(cairo_image_surface_get_format(s), CAIRO_FORMAT_RGB24);
    return s;
}

/* The 8-bit sRGB colour of pixel (x, y). */
static void surface_pixel(cairo_surface_t *s, int x, int y, int rgb[3])
{
    const unsigned char *d = cairo_image_surface_get_data(s);
    uint32_t px;
    memcpy(&px, d + (size_t)y * cairo_image_surface_get_stride(s) + 4 * (size_t)x, 4);
    rgb[0] = px >> 16 & 255, rgb[1] = px >> 8 & 255, rgb[2] = px & 255;
}

static void png_pixel(const char *path, int x, int y, int rgb[3])
{
    cairo_surface_t *s = png_load(path);
    surface_pixel(s, x, y, rgb);
    cairo_surface_destroy(s);
}

/* Pixel (x, y) has the colour map's colour at level k of PLOT_CMAP_N = 256 (within one
 * 8-bit step: cairo rounds the components). */
static void check_level(const char *path, int x, int y, int k)
{
    int got[3];
    double want[3];
    png_pixel(path, x, y, got);
    perf_colormap(k / 255.0, want);
    for (int c = 0; c < 3; c++)
        ck_assert_msg(abs(got[c] - (int)lround(want[c] * 255)) <= 1,
                      "%s (%d,%d): component %d is %d, level %d of the map is %.1f", path, x, y,
                      c, got[c], k, want[c] * 255);
}

/* Whether any pixel of the rectangle [x0,x1) x [y0,y1) is not white. */
static int png_inked(const char *path, int x0, int y0, int x1, int y1)
{
    cairo_surface_t *s = png_load(path);
    int inked = 0;
    for (int y = y0; y < y1 && !inked; y++)
        for (int x = x0; x < x1 && !inked; x++) {
            int p[3];
            surface_pixel(s, x, y, p);
            inked = p[0] < 250 || p[1] < 250 || p[2] < 250;
        }
    cairo_surface_destroy(s);
    return inked;
}

static struct adapt_trace *load(const char *path)
{
    struct adapt_trace *t;
    ck_assert_int_eq(adapt_trace_load(&t, path, 0), ADAPT_OK);
    return t;
}

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

START_TEST(test_bad_input)
{
    char tr[300], png[300];
    snprintf(tr, sizeof tr, "%s/fp32.jsonl", tmpdir);
    synth_write(tr, "lenet5", 1, 1);
    struct adapt_trace *t = load(tr);
    struct perf_heatmap_opts o;
    perf_heatmap_opts_init(&o);
    snprintf(png, sizeof png, "%s/lb.png", tmpdir);
    o.metric = PERF_METRIC_LB; /* float32 runs record no lookback */
    ck_assert_int_eq(perf_heatmap_write(t, &o, png), ADAPT_EINVAL);
    ck_assert_msg_has(tr);
    ck_assert_msg_has("'lb' is not recorded");
    ck_assert_int_eq(access(png, F_OK), -1);
    o.metric = PERF_METRIC_WL;
    o.width = 100;
    ck_assert_int_eq(perf_heatmap_write(t, &o, png), ADAPT_EINVAL);
    ck_assert_msg_has("width");
    o.width = 1100;
    snprintf(png, sizeof png, "%s/wl.gif", tmpdir);
    ck_assert_int_eq(perf_heatmap_write(t, &o, png), ADAPT_EINVAL);
    snprintf(png, sizeof png, "%s/no/such/dir/wl.png", tmpdir);
    ck_assert_int_eq(perf_heatmap_write(t, &o, png), ADAPT_EIO);
    ck_assert_msg_has(png);
    t->n_steps = 0; /* a trace with a header only */
    snprintf(png, sizeof png, "%s/empty.png", tmpdir);
    ck_assert_int_eq(perf_heatmap_write(t, &o, png), ADAPT_EINVAL);
    ck_assert_msg_has("no step records");
    t->n_steps = 120;
    adapt_trace_free(t);
    enum perf_metric m;
    ck_assert_int_eq(perf_metric_parse("bits", &m), ADAPT_EINVAL);
    ck_assert_msg_has("bits");
}
END_TEST

/* The colour map: OKLab lightness rises from dark (< 0.3) to light (> 0.9);
 * 64 equal steps in value are equal OKLab distances within 3% (the table
 * is resampled at equal arc length; 8-bit-free doubles here, so only the
 * linear interpolation between the 256 entries deviates); it starts
 * blue-purple (b < 0, a > 0) and ends yellow (b > 0.1). */
/* adapt-heatmap and adapt-perf read traces with one validating reader: a
 * trace whose step numbers go back is refused by both, naming the line. */
START_TEST(test_programs_agree_on_bad_traces)
{
    if (access("./adapt-heatmap", X_OK) != 0 || access("./adapt-perf", X_OK) != 0) return;
    char tr[300], bad[300], cmd[1200];
    snprintf(tr, sizeof tr, "%s/fp32.jsonl", tmpdir);
    snprintf(bad, sizeof bad, "%s/back.jsonl", tmpdir);
    synth_write(tr, "lenet5", 1, 1);
    /* the third step record gets the first one's step number */
    snprintf(
        cmd, sizeof cmd,
        "awk '/\"type\":\"step\"/ { n++; if (n == 3) sub(/\"step\":[0-9]+/, \"\\\"step\\\":1\") } "
        "{ print }' %s > %s",
        tr, bad);
    ck_assert_int_eq(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "./adapt-heatmap %s -o %s/ok.png > /dev/null 2>&1", tr, tmpdir);
    ck_assert_int_eq(system(cmd), 0);
    static const char *progs[] = {"./adapt-heatmap %s -o %s/bad.png", "./adapt-perf %s"};
    for (int i = 0; i < 2; i++) {
        char c[900], out[4096];
        snprintf(c, sizeof c, progs[i], bad, tmpdir);
        int rc = tu_run(out, sizeof out, "%s", c);
        ck_assert_msg(rc != 0, "%s accepted a trace whose steps go back: %s", c, out);
        ck_assert_msg(strstr(out, "back.jsonl:4: step record: step 1 does not follow step 2"),
                      "%s: message lacks the line and the reason: %s", c, out);
    }
}
END_TEST

START_TEST(test_colormap)
{
    double prev[3], rgb[3], lab[3], dmin = 1e9, dmax = 0;
    for (int i = 0; i <= 64; i++) {
        perf_colormap(i / 64.0, rgb);
        for (int c = 0; c < 3; c++) ck_assert(rgb[c] >= 0 && rgb[c] <= 1);
        perf_srgb_to_oklab(rgb, lab);
        if (i == 0) {
            ck_assert(lab[0] < 0.3);
            ck_assert(lab[2] < 0 && lab[1] > 0);
        } else {
            ck_assert(lab[0] > prev[0]);
            double d = sqrt(pow(lab[0] - prev[0], 2) + pow(lab[1] - prev[1], 2) +
                            pow(lab[2] - prev[2], 2));
            dmin = fmin(dmin, d);
            dmax = fmax(dmax, d);
        }
        memcpy(prev, lab, sizeof lab);
    }
    ck_assert(lab[0] > 0.9 && lab[2] > 0.1);
    ck_assert_msg(dmax / dmin < 1.03, "OKLab steps from %g to %g", dmin, dmax);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("plot");
    TCase *tc = tcase_create("plot");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_heatmaps);
    tcase_add_test(tc, test_heatmap_scale);
    tcase_add_test(tc, test_subtitles_and_pdf);
    tcase_add_test(tc, test_program_options);
    tcase_add_test(tc, test_curve_styles);
    tcase_add_test(tc, test_curve_smoothing);
    tcase_add_test(tc, test_curve_legend_and_lines);
    tcase_add_test(tc, test_wl_dist);
    tcase_add_test(tc, test_accuracy);
    tcase_add_test(tc, test_accuracy_epoch_numbers);
    tcase_add_test(tc, test_cost_curve);
    tcase_add_test(tc, test_legend_names);
    tcase_add_test(tc, test_bad_input);
    tcase_add_test(tc, test_programs_agree_on_bad_traces);
    tcase_add_test(tc, test_colormap);
    tcase_set_timeout(tc, 30);
    suite_add_tcase(s, tc);
    return tu_run_suite(s, CK_FORK_GETENV);
}
