/* tests/test_plot.c: src/plot (heatmaps, cost curves, colour map).
 *
 * Set ADAPT_PLOT_KEEP=DIR to keep the pictures (and the synthetic traces
 * they are drawn from) in DIR for a look.
 *
 * This file: the synthetic runs and the checks of pictures (tests/test_plot.h), bad input, the
 * colour map, and main. The heatmaps (and word-length shares) are checked in
 * test_plot_heatmap.c, the cost and accuracy curves in test_plot_curves.c. */
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

char tmpdir[256];

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

/* tests/test_plot.h */
void synth_write(const char *path, const char *model, int epochs, int fp32)
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

/* ---- checks of the pictures (declared in tests/test_plot.h) ---- */

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

void check_png(const char *path, uint32_t w, uint32_t h)
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

void check_svg(const char *path, int w, int h)
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

void check_pdf(const char *path)
{
    size_t n;
    char *b = (char *)tu_read_file(path, &n);
    ck_assert_uint_ge(n, 64);
    ck_assert_msg(!memcmp(b, "%PDF-", 5), "%s does not start with %%PDF-", path);
    ck_assert_msg(strstr(b + n - 16, "%%EOF") != NULL, "%s lacks the final %%%%EOF", path);
    free(b);
}

cairo_surface_t *png_load(const char *path)
{
    cairo_surface_t *s = cairo_image_surface_create_from_png(path);
    ck_assert_int_eq(cairo_surface_status(s), CAIRO_STATUS_SUCCESS);
    ck_assert_int_eq(cairo_image_surface_get_format(s), CAIRO_FORMAT_RGB24);
    return s;
}

void surface_pixel(cairo_surface_t *s, int x, int y, int rgb[3])
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

void check_level(const char *path, int x, int y, int k)
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

int png_inked(const char *path, int x0, int y0, int x1, int y1)
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

struct adapt_trace *load(const char *path)
{
    struct adapt_trace *t;
    ck_assert_int_eq(adapt_trace_load(&t, path, 0), ADAPT_OK);
    return t;
}

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
    test_plot_add_heatmap(tc);
    test_plot_add_curves(tc);
    tcase_add_test(tc, test_bad_input);
    tcase_add_test(tc, test_programs_agree_on_bad_traces);
    tcase_add_test(tc, test_colormap);
    tcase_set_timeout(tc, 30);
    suite_add_tcase(s, tc);
    return tu_run_suite(s, CK_FORK_GETENV);
}
