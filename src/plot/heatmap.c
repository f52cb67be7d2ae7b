/* src/plot/heatmap.c: the heatmap of one run's per-unit state (see plot.h).
 *
 * Units are rows in network order, optimizer steps are columns (at most one
 * per pixel: a column shows the mean of the step records in its step span,
 * or the next record's value); colours come from the colour map, quantized
 * to its PLOT_CMAP_N levels, grey where the metric was not recorded. A fixed
 * colour scale (vmin, vmax) clamps the values outside it to its ends, and the
 * colour bar gets an arrow at each end that clamps.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cairo.h>

#include "src/plot/internal.h"
#include "src/plot/plot.h"

/* ---------------------------------------------------------------- metrics */

static const char *const metric_names[] = {"wl",       "fl",           "lb",         "r",
                                           "sparsity", "scale_weight", "scale_input",
                                           "scale_grad_output"};
#define N_METRICS ((int)(sizeof metric_names / sizeof metric_names[0]))

enum adapt_status perf_metric_parse(const char *s, enum perf_metric *out)
{
    for (int i = 0; i < N_METRICS; i++)
        if (!strcmp(s, metric_names[i])) {
            *out = (enum perf_metric)i;
            return ADAPT_OK;
        }
    return ADAPT_ERROR(ADAPT_EINVAL,
                       "unknown metric '%s' (expected wl, fl, lb, r, sparsity, scale_weight, "
                       "scale_input or scale_grad_output)",
                       s);
}

const char *perf_metric_name(enum perf_metric m)
{
    return metric_names[m];
}

static const char *metric_title(enum perf_metric m)
{
    static const char *const t[] = {"Word length",          "Fraction length",
                                    "Lookback",             "Histogram resolution",
                                    "Weight sparsity",      "Weight scale",
                                    "Input scale",          "Output-gradient scale"};
    return t[m];
}

static const char *metric_axis(enum perf_metric m)
{
    static const char *const t[] = {"word length (bits)", "fraction length (bits)",
                                    "lookback (steps)", "resolution (bins)",
                                    "sparsity (fraction of zero weights)",
                                    "log2 of the weight scale", "log2 of the input scale",
                                    "log2 of the output-gradient scale"};
    return t[m];
}

static int metric_integer(enum perf_metric m)
{
    return m != PERF_METRIC_LB && m != PERF_METRIC_SPARSITY && m < PERF_METRIC_SCALE_WEIGHT;
}

static double metric_value(const struct adapt_trace_unit_state *u, enum perf_metric m)
{
    switch (m) {
    case PERF_METRIC_WL: return u->wl;
    case PERF_METRIC_FL: return u->fl;
    case PERF_METRIC_LB: return u->lb;
    case PERF_METRIC_R: return u->r < 0 ? NAN : u->r;
    case PERF_METRIC_SPARSITY: return u->sparsity;
    case PERF_METRIC_SCALE_WEIGHT:
    case PERF_METRIC_SCALE_INPUT:
    case PERF_METRIC_SCALE_GRAD_OUTPUT: {
        double s = u->scaled[m - PERF_METRIC_SCALE_WEIGHT].scale;
        return s > 0 ? log2(s) : NAN;
    }
    }
    return NAN;
}

/* Row label of unit u: its module name and layer kind ("3 conv2d",
 * "layer2.0.shortcut.0 conv2d"), so nn.Sequential indices read at a glance. */
static const char *unit_label(const struct adapt_trace *t, int u, char *buf, size_t n)
{
    const struct adapt_trace_unit *un = &t->header.units[u];
    const char *kind = un->layer >= 0 && un->layer < t->header.model.n_layers
                           ? t->header.model.layers[un->layer].kind
                           : NULL;
    snprintf(buf, n, kind ? "%s %s" : "%s", un->name, kind);
    return buf;
}

/* ---------------------------------------------------------------- drawing */

void perf_heatmap_opts_init(struct perf_heatmap_opts *o)
{
    o->metric = PERF_METRIC_WL;
    o->width = 1100;
    o->title = NULL;
    o->subtitle = NULL;
    o->vmin = NAN;
    o->vmax = NAN;
}

struct heatmap {
    const struct adapt_trace *t;
    enum perf_metric metric;
    int W, H;
    char title[512], subtitle[512]; /* subtitle "": none */
    double label_font;
    double x0, x1, y0, y1, row_h; /* plot area */
    double cb_x;                  /* colour bar left edge */
    int rows, cols;
    double *val;                  /* (rows, cols), NaN = not recorded */
    double vmin, vmax;            /* the colour scale */
    double dmin, dmax;            /* the metric's range in the run */
    int any_nan;
    double s_hi;                  /* last step */
};

static double hm_x(const struct heatmap *h, double step)
{
    return h->x0 + (h->x1 - h->x0) * step / h->s_hi;
}

/* The colour level of value v, clamped to the scale; -1 for NaN. */
static int cell_level(const struct heatmap *h, double v)
{
    if (isnan(v)) return -1;
    double t = (v - h->vmin) / (h->vmax - h->vmin);
    return (int)lround(fmin(1, fmax(0, t)) * (PLOT_CMAP_N - 1));
}

/* The cells, one run of equal colour at a time. */
static void draw_cells(cairo_t *cr, const struct heatmap *h)
{
    cairo_save(cr);
    cairo_set_antialias(cr, CAIRO_ANTIALIAS_NONE);
    for (int r = 0; r < h->rows; r++) {
        double y = h->y0 + r * h->row_h;
        int c = 0;
        while (c < h->cols) {
            int idx = cell_level(h, h->val[r * h->cols + c]);
            int e = c + 1;
            while (e < h->cols && cell_level(h, h->val[r * h->cols + e]) == idx) e++;
            double rgb[3] = {0.86, 0.86, 0.86};
            if (idx >= 0) perf_colormap((double)idx / (PLOT_CMAP_N - 1), rgb);
            cairo_set_source_rgb(cr, rgb[0], rgb[1], rgb[2]);
            double xa = h->x0 + (h->x1 - h->x0) * c / h->cols,
                   xb = h->x0 + (h->x1 - h->x0) * e / h->cols;
            cairo_rectangle(cr, floor(xa), floor(y), ceil(xb) - floor(xa),
                            ceil(y + h->row_h) - floor(y));
            cairo_fill(cr);
            c = e;
        }
    }
    cairo_restore(cr);
}

/* The frame, the unit names (network order from the top) and the step axis. */
static void draw_axes(cairo_t *cr, const struct heatmap *h)
{
    char buf[64];
    double ticks[64];
    cairo_set_line_width(cr, 1);
    cairo_set_source_rgb(cr, 0.25, 0.25, 0.25);
    cairo_rectangle(cr, h->x0 - 0.5, h->y0 - 0.5, h->x1 - h->x0 + 1, h->y1 - h->y0 + 1);
    cairo_stroke(cr);
    plot_set_font(cr, h->label_font, 0);
    cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
    for (int r = 0; r < h->rows; r++) {
        char lab[160];
        plot_text_at(cr, h->x0 - 8, h->y0 + (r + 0.5) * h->row_h,
                     unit_label(h->t, r, lab, sizeof lab), 1, 0.5);
    }
    plot_set_font(cr, 13, 0);
    plot_text_vertical(cr, 24, 0.5 * (h->y0 + h->y1), "precision unit (network order)");
    plot_set_font(cr, 12, 0);
    int nt = plot_nice_ticks(0, h->s_hi, (int)((h->x1 - h->x0) / 90), 1, ticks);
    for (int i = 0; i < nt; i++) {
        double x = floor(hm_x(h, ticks[i])) + 0.5;
        cairo_move_to(cr, x, h->y1 + 0.5);
        cairo_line_to(cr, x, h->y1 + 6);
        cairo_stroke(cr);
        plot_format_tick(buf, sizeof buf, ticks[i]);
        plot_text_at(cr, x, h->y1 + 20, buf, 0.5, 1);
    }
    plot_set_font(cr, 13, 0);
    plot_text_at(cr, 0.5 * (h->x0 + h->x1), h->y1 + 42, "optimizer step", 0.5, 1);
}

/* Epoch marks above the plot, labels thinned so they never overlap. */
static void draw_epochs(cairo_t *cr, const struct heatmap *h)
{
    const struct adapt_trace *t = h->t;
    char buf[64];
    plot_set_font(cr, 11, 0);
    cairo_set_source_rgb(cr, 0.3, 0.3, 0.3);
    double last_end = -1e9;
    int every = 1;
    if (t->n_epochs > 0) {
        double gap = (h->x1 - h->x0) / t->n_epochs;
        snprintf(buf, sizeof buf, "%d", t->n_epochs);
        double need = plot_text_width(cr, buf) + 8;
        while (every * gap < need) every = every < 5 ? every + 1 : every * 2;
    }
    plot_text_at(cr, h->x0 - 8, h->y0 - 10, "epoch", 1, 1);
    for (int e = 0; e < t->n_epochs; e++) {
        double x = floor(hm_x(h, (double)t->epochs[e].step)) + 0.5;
        cairo_move_to(cr, x, h->y0 - 5);
        cairo_line_to(cr, x, h->y0 - 0.5);
        cairo_stroke(cr);
        if ((e + 1) % every) continue;
        snprintf(buf, sizeof buf, "%d", e + 1);
        double w = plot_text_width(cr, buf);
        if (x - w / 2 > last_end + 4 && x + w / 2 <= h->cb_x - 4) {
            plot_text_at(cr, x, h->y0 - 10, buf, 0.5, 1);
            last_end = x + w / 2;
        }
    }
}

/* The colour bar with its ticks and label, and the "not recorded" swatch. */
static void draw_colour_bar(cairo_t *cr, const struct heatmap *h)
{
    double cb_w = 18, cy1 = h->y1;
    plot_colour_bar(cr, h->cb_x, h->y0, h->y1, h->vmin, h->vmax, metric_integer(h->metric),
                    metric_axis(h->metric), h->dmin < h->vmin, h->dmax > h->vmax);
    if (h->any_nan) {
        cairo_set_source_rgb(cr, 0.86, 0.86, 0.86);
        cairo_rectangle(cr, h->cb_x, cy1 + 30, cb_w, 12);
        cairo_fill(cr);
        cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
        plot_set_font(cr, 12, 0);
        plot_text_at(cr, h->cb_x + cb_w + 6, cy1 + 36, "not recorded", 0, 0.5);
    }
}

static void heatmap_draw(cairo_t *cr, void *ctx)
{
    struct heatmap *h = ctx;
    plot_titles(cr, h->title, h->subtitle);
    draw_cells(cr, h);
    draw_axes(cr, h);
    draw_epochs(cr, h);
    draw_colour_bar(cr, h);
}

/* ----------------------------------------------------------------- layout */

/* A run whose metric never changes: the metric's own range (word and fraction length 0 to
 * 32 bits, sparsity 0 to 1; lookback and resolution 0 to the next 1, 2 or 5 times a power of
 * ten at or above the value), widened to hold the value, so that one colour means one value
 * in every picture instead of the middle of a band around it. */
static void degenerate_range(struct heatmap *h)
{
    double v = h->vmin, lo = 0, hi;
    switch (h->metric) {
    case PERF_METRIC_WL:
    case PERF_METRIC_FL: hi = 32; break;
    case PERF_METRIC_SPARSITY: hi = 1; break;
    default: {
        double a = fabs(v) > 1 ? fabs(v) : 1, p = pow(10, floor(log10(a)));
        hi = a <= p ? p : a <= 2 * p ? 2 * p : a <= 5 * p ? 5 * p : 10 * p;
        break;
    }
    }
    if (v < lo) lo = metric_integer(h->metric) ? floor(v) : v - 0.05 * (hi - v);
    if (v > hi) hi = v;
    h->vmin = lo;
    h->vmax = hi;
}

/* The range of the metric over the step records (the metric's own range for a single
 * value), or the options' fixed scale. */
static enum adapt_status heatmap_range(struct heatmap *h, const struct perf_heatmap_opts *o)
{
    const struct adapt_trace *t = h->t;
    h->vmin = INFINITY;
    h->vmax = -INFINITY;
    for (int64_t i = 0; i < t->n_steps; i++)
        for (int u = 0; u < h->rows; u++) {
            double v = metric_value(&t->steps[i].units[u], h->metric);
            if (isnan(v)) continue;
            if (v < h->vmin) h->vmin = v;
            if (v > h->vmax) h->vmax = v;
        }
    if (!(h->vmin <= h->vmax))
        return ADAPT_ERROR(ADAPT_EINVAL,
                           "%s: metric '%s' is not recorded in any step record (policy %s)",
                           t->path, perf_metric_name(h->metric), t->header.policy);
    h->dmin = h->vmin;
    h->dmax = h->vmax;
    if (h->vmax - h->vmin < 1e-12) degenerate_range(h);
    if (!isnan(o->vmin)) h->vmin = o->vmin;
    if (!isnan(o->vmax)) h->vmax = o->vmax;
    if (!isfinite(h->vmin) || !isfinite(h->vmax) || !(h->vmin < h->vmax))
        return ADAPT_ERROR(ADAPT_EINVAL,
                           "%s: colour scale of '%s': vmin %g%s must be below vmax %g%s",
                           t->path, perf_metric_name(h->metric), h->vmin,
                           isnan(o->vmin) ? " (the run's least value)" : "", h->vmax,
                           isnan(o->vmax) ? " (the run's greatest value)" : "");
    return ADAPT_OK;
}

/* The title (o->title, or the metric, the configuration file's stem, model,
 * data set and policy with AdaPT's compat mode) and the subtitle. */
static void heatmap_titles(struct heatmap *h, const struct perf_heatmap_opts *o)
{
    const struct adapt_trace *t = h->t;
    if (o->title) snprintf(h->title, sizeof h->title, "%s", o->title);
    else {
        const char *cf = t->header.config_file && t->header.config_file[0]
                             ? t->header.config_file : NULL;
        const char *stem = cf ? (strrchr(cf, '/') ? strrchr(cf, '/') + 1 : cf) : NULL;
        size_t sl = stem ? strlen(stem) : 0;
        if (sl > 4 && !strcmp(stem + sl - 4, ".ini")) sl -= 4;
        const char *compat = NULL;
        if (t->header.policy && !strcmp(t->header.policy, "adapt"))
            compat = t->header.cfg.compat ? t->header.cfg.compat : "corrected";
        snprintf(h->title, sizeof h->title, "%s per unit: %.*s%s%s on %s, policy %s%s%s%s",
                 metric_title(o->metric), (int)sl, stem ? stem : "", stem ? ", " : "",
                 t->header.model.name, t->header.dataset.name,
                 t->header.policy, compat ? " (" : "", compat ? compat : "", compat ? ")" : "");
    }
    if (o->subtitle) snprintf(h->subtitle, sizeof h->subtitle, "%s", o->subtitle);
    else
        snprintf(h->subtitle, sizeof h->subtitle,
                 "%s: %lld step records up to step %.0f, %d epochs", t->path,
                 (long long)t->n_steps, h->s_hi, t->n_epochs);
}

/* The plot area, the colour bar and the picture height, from the label widths. */
static enum adapt_status heatmap_layout(struct heatmap *h, int width)
{
    cairo_surface_t *ss;
    cairo_t *cr = plot_scratch_context(&ss);
    h->W = width;
    h->row_h = 420.0 / h->rows;
    if (h->row_h > 40) h->row_h = 40;
    if (h->row_h < 16) h->row_h = 16;
    h->label_font = fmin(13.0, 0.72 * h->row_h);
    plot_set_font(cr, h->label_font, 0);
    double lw = 0;
    for (int u = 0; u < h->rows; u++) {
        char lab[160];
        lw = fmax(lw, plot_text_width(cr, unit_label(h->t, u, lab, sizeof lab)));
    }
    plot_set_font(cr, 11, 0);
    lw = fmax(lw, plot_text_width(cr, "epoch"));
    plot_set_font(cr, 12, 0);
    double tw = plot_text_width(cr, h->metric == PERF_METRIC_SPARSITY ? "0.25" : "150") + 4;
    cairo_destroy(cr);
    cairo_surface_destroy(ss);
    h->x0 = 44 + lw + 10;
    h->x1 = h->W - (16 + 26 + tw + 8 + 18 + 24);
    h->cb_x = h->x1 + 24;
    h->y0 = plot_top(h->subtitle);
    double ph = h->rows * h->row_h;
    if (ph < 180) {
        ph = 180;
        h->row_h = ph / h->rows;
    }
    h->y1 = h->y0 + ph;
    h->H = (int)ceil(h->y1 + 62);
    if (h->x1 - h->x0 < 200)
        return ADAPT_ERROR(ADAPT_EINVAL, "picture width %d leaves no room for the plot", h->W);
    return ADAPT_OK;
}

/* The column of step record i. */
static int step_column(const struct heatmap *h, int64_t i)
{
    int c = (int)ceil((double)h->t->steps[i].step / h->s_hi * h->cols) - 1;
    return c < 0 ? 0 : c >= h->cols ? h->cols - 1 : c;
}

/* Columns: at most one per pixel; a column shows the mean of the step
 * records in its step span, or the next record's value (its state holds
 * since the record before it). A column is empty when no record falls in
 * it; records without the metric leave it NaN. h->val is the caller's to free. */
static enum adapt_status heatmap_columns(struct heatmap *h, const char *path)
{
    const struct adapt_trace *t = h->t;
    enum adapt_status st = ADAPT_OK;
    int px = (int)(h->x1 - h->x0);
    h->cols = t->n_steps < px ? (int)t->n_steps : px;
    h->val = malloc(sizeof(double) * (size_t)h->rows * h->cols);
    double *sum = calloc((size_t)h->rows * h->cols, sizeof(double));
    int *cnt = calloc((size_t)h->rows * h->cols, sizeof(int));
    int *any = calloc((size_t)h->cols, sizeof(int));
    if (!h->val || !sum || !cnt || !any) {
        st = ADAPT_ERROR(ADAPT_ENOMEM, "%s: out of memory drawing the heatmap", path);
        goto free_sums;
    }
    for (int64_t i = 0; i < t->n_steps; i++) {
        int c = step_column(h, i);
        any[c] = 1;
        for (int u = 0; u < h->rows; u++) {
            double v = metric_value(&t->steps[i].units[u], h->metric);
            if (isnan(v)) continue;
            sum[u * h->cols + c] += v;
            cnt[u * h->cols + c]++;
        }
    }
    for (int u = 0; u < h->rows; u++) {
        double next = NAN;
        for (int c = h->cols - 1; c >= 0; c--) {
            int k = u * h->cols + c;
            if (any[c]) next = cnt[k] ? sum[k] / cnt[k] : NAN;
            h->val[k] = next;
            if (isnan(next)) h->any_nan = 1;
        }
    }
free_sums:
    free(any);
    free(sum);
    free(cnt);
    return st;
}

enum adapt_status perf_heatmap_write(const struct adapt_trace *t, const struct perf_heatmap_opts *o,
                                     const char *path)
{
    enum plot_image kind = PLOT_PNG;
    enum adapt_status st;
    if ((st = plot_check_trace_picture(t, o->width, path, &kind)) != ADAPT_OK) return st;
    struct heatmap h;
    memset(&h, 0, sizeof h);
    h.t = t;
    h.metric = o->metric;
    h.rows = t->header.n_units;
    h.s_hi = (double)t->steps[t->n_steps - 1].step;
    if (!(h.s_hi > 0))
        return ADAPT_ERROR(ADAPT_EINVAL, "%s: the last step record has step %.0f", t->path, h.s_hi);
    if ((st = heatmap_range(&h, o)) != ADAPT_OK) return st;
    heatmap_titles(&h, o);
    if ((st = heatmap_layout(&h, o->width)) != ADAPT_OK) return st;
    if ((st = heatmap_columns(&h, path)) == ADAPT_OK) {
        if (h.any_nan) h.H += 24;
        st = plot_render(path, kind, h.W, h.H, heatmap_draw, &h);
    }
    free(h.val);
    return st;
}
