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

#include "src/perfmodel/perf.h"
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
    ck_assert_msg_has(".png or .svg");
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
        ck_assert_msg(strstr(out, "back.jsonl:4: step 1: step numbers must"),
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
    tcase_add_test(tc, test_cost_curve);
    tcase_add_test(tc, test_bad_input);
    tcase_add_test(tc, test_programs_agree_on_bad_traces);
    tcase_add_test(tc, test_colormap);
    tcase_set_timeout(tc, 30);
    suite_add_tcase(s, tc);
    return tu_run_suite(s, CK_FORK_GETENV);
}
