/* src/plot/costcurve.c: the training cost of runs relative to float32 over epochs (see
 * plot.h): per run, the cumulative ratio Cq / C32 (thick) and each logged interval's
 * ratio (thin, lighter; optionally a centred moving average), binned to at most two points
 * per pixel. Runs differ by colour (seven of the Okabe-Ito palette) and then by dash
 * pattern; the legend sits right of the plot area. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cairo.h>

#include "src/plot/internal.h"
#include "src/plot/plot.h"

void perf_curve_opts_init(struct perf_curve_opts *o)
{
    o->width = 1000;
    o->height = 560;
    o->title = NULL;
    o->subtitle = NULL;
    o->cumulative_only = 0;
    o->smooth = 1;
}

/* The Okabe-Ito palette without its yellow (too light on white), black last. */
static const double palette[PLOT_CURVE_COLOURS][3] = {
    {0.902, 0.624, 0.000}, {0.337, 0.706, 0.914}, {0.000, 0.620, 0.451}, {0.000, 0.447, 0.698},
    {0.835, 0.369, 0.000}, {0.800, 0.475, 0.655}, {0.000, 0.000, 0.000}};
/* Solid, dashed, dotted, dash-dot (in units of the line width 1; scaled when drawn). */
static const double dashes[PLOT_CURVE_DASHES][4] = {{0}, {6, 3}, {1, 2.5}, {6, 2.5, 1, 2.5}};
static const int n_dashes[PLOT_CURVE_DASHES] = {0, 2, 2, 4};

void plot_curve_style(int r, double rgb[3], const double **dash, int *n_dash)
{
    int c = r % PLOT_CURVE_COLOURS, d = r / PLOT_CURVE_COLOURS % PLOT_CURVE_DASHES;
    memcpy(rgb, palette[c], sizeof palette[c]);
    *dash = dashes[d];
    *n_dash = n_dashes[d];
}

void plot_set_curve_style(cairo_t *cr, int r, double lw, double alpha)
{
    double rgb[3], d[4];
    const double *dash;
    int nd;
    plot_curve_style(r, rgb, &dash, &nd);
    for (int i = 0; i < nd; i++) d[i] = dash[i] * (dash[i] < 2 ? 1 : fmax(1, lw * 0.7));
    cairo_set_source_rgba(cr, rgb[0], rgb[1], rgb[2], alpha);
    cairo_set_line_width(cr, lw);
    cairo_set_dash(cr, nd ? d : NULL, nd, 0);
    cairo_set_line_cap(cr, nd ? CAIRO_LINE_CAP_ROUND : CAIRO_LINE_CAP_BUTT);
}

struct curve {
    struct perf_run *const *runs;
    int n;
    int W, H;
    const char *title, *subtitle;
    int cumulative_only, smooth;
    struct plot_box b; /* the plot: epochs 0..xhi against cost 0..yhi */
    double leg_x;      /* the legend's left edge, right of the plot */
    int max_pts;
};

int plot_curve_points(const struct perf_run *r, double xmax, int max_pts, int smooth, double *x,
                      double *y, double *cum)
{
    int n = 0;
    int64_t np = r->n_points;
    double s32 = 0, sq = 0, b32 = 0, bq = 0;
    int bin = -1;
    double bx = 0;
    /* prefix sums of the costs for the moving average */
    double *pre = smooth > 1 ? malloc(sizeof(double) * 2 * (size_t)(np + 1)) : NULL;
    if (smooth > 1 && !pre) return -1;
    if (pre) {
        pre[0] = pre[np + 1] = 0;
        for (int64_t i = 0; i < np; i++) {
            pre[i + 1] = pre[i] + r->points[i].c32;
            pre[np + 2 + i] = pre[np + 1 + i] + r->points[i].cq;
        }
    }
    for (int64_t i = 0; i < np; i++) {
        const struct perf_point *p = &r->points[i];
        int b = np <= max_pts ? (int)i : (int)(p->epoch_x / xmax * (max_pts - 1));
        if (b != bin && bin >= 0 && b32 > 0) {
            x[n] = bx, y[n] = bq / b32, cum[n] = sq / s32, n++;
            b32 = bq = 0;
        }
        bin = b;
        bx = p->epoch_x;
        double c32 = p->c32, cq = p->cq;
        if (pre) {
            int64_t lo = i - (smooth - 1) / 2, hi = i + smooth / 2 + 1; /* [lo, hi) */
            if (lo < 0) lo = 0;
            if (hi > np) hi = np;
            c32 = (pre[hi] - pre[lo]) / (double)(hi - lo);
            cq = (pre[np + 1 + hi] - pre[np + 1 + lo]) / (double)(hi - lo);
        }
        b32 += c32;
        bq += cq;
        s32 += p->c32;
        sq += p->cq;
    }
    if (b32 > 0) x[n] = bx, y[n] = bq / b32, cum[n] = sq / s32, n++;
    free(pre);
    return n;
}

/* Grid, ticks, frame and axis labels, and the dotted float32 reference at 1. */
static void draw_axes(cairo_t *cr, const struct curve *c)
{
    const struct plot_box *b = &c->b;
    plot_box_axes(cr, b, 80, 0);
    plot_set_font(cr, 13, 0);
    cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
    plot_text_at(cr, 0.5 * (b->x0 + b->x1), b->y1 + 42, "training progress (epochs)", 0.5, 1);
    plot_text_vertical(cr, 22, 0.5 * (b->y0 + b->y1), "cost relative to float32");
    double y1 = floor(plot_box_y(b, 1.0)) + 0.5;
    cairo_set_source_rgb(cr, 0.35, 0.35, 0.35);
    double dash[2] = {2, 3};
    cairo_set_dash(cr, dash, 2, 0);
    cairo_move_to(cr, b->x0, y1);
    cairo_line_to(cr, b->x1, y1);
    cairo_stroke(cr);
    cairo_set_dash(cr, NULL, 0, 0);
    plot_set_font(cr, 11, 0);
    plot_text_at(cr, b->x0 + 6, y1 - 5, "float32 = 1", 0, 1);
}

/* One polyline through (x[i], v[i]). */
static void polyline(cairo_t *cr, const struct plot_box *b, const double *x, const double *v,
                     int n)
{
    for (int i = 0; i < n; i++) {
        if (i == 0) cairo_move_to(cr, plot_box_x(b, x[i]), plot_box_y(b, v[i]));
        else cairo_line_to(cr, plot_box_x(b, x[i]), plot_box_y(b, v[i]));
    }
}

/* Line widths of the cumulative and the per-interval lines, and the latter's opacity. */
#define CUM_LW 2.6
#define INT_LW 1.2
#define INT_ALPHA 0.55

/* The curves, clipped to the plot area: first every run's per-interval line, then the
 * cumulative lines on top. */
static void draw_curves(cairo_t *cr, const struct curve *c)
{
    double *x = malloc(sizeof(double) * 3 * (size_t)c->max_pts);
    if (!x) return;
    double *y = x + c->max_pts, *cum = y + c->max_pts;
    const struct plot_box *b = &c->b;
    cairo_save(cr);
    cairo_rectangle(cr, b->x0, b->y0, b->x1 - b->x0, b->y1 - b->y0);
    cairo_clip(cr);
    cairo_set_line_join(cr, CAIRO_LINE_JOIN_ROUND);
    for (int pass = c->cumulative_only; pass < 2; pass++)
        for (int r = 0; r < c->n; r++) {
            int n = plot_curve_points(c->runs[r], b->xhi, c->max_pts, c->smooth, x, y, cum);
            if (n < 1) continue;
            if (pass == 0) plot_set_curve_style(cr, r, INT_LW, INT_ALPHA);
            else plot_set_curve_style(cr, r, CUM_LW, 1);
            polyline(cr, b, x, pass ? cum : y, n);
            if (n == 1) cairo_line_to(cr, plot_box_x(b, 0), plot_box_y(b, pass ? cum[0] : y[0]));
            cairo_stroke(cr);
        }
    cairo_restore(cr);
    free(x);
}

/* A legend entry's text. */
static const char *legend_text(const void *ctx, int r, char *buf, size_t n)
{
    const struct perf_run *run = ((const struct curve *)ctx)->runs[r];
    snprintf(buf, n, "%s (%s): SU1 %.2f", run->name, run->policy, run->su1);
    return buf;
}

void plot_run_legend(cairo_t *cr, double x, double y, int n, double lw,
                     const char *(*label)(const void *ctx, int r, char *buf, size_t cap),
                     const void *ctx, const char *const *key, const double *key_lw,
                     double key_alpha)
{
    char buf[256];
    plot_set_font(cr, 12, 0);
    for (int r = 0; r < n; r++, y += PLOT_LEG_ROW) {
        plot_set_curve_style(cr, r, lw, 1);
        cairo_move_to(cr, x, y);
        cairo_line_to(cr, x + PLOT_LEG_SAMPLE, y);
        cairo_stroke(cr);
        cairo_set_dash(cr, NULL, 0, 0);
        cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
        plot_text_at(cr, x + PLOT_LEG_SAMPLE + 8, y, label(ctx, r, buf, sizeof buf), 0, 0.5);
    }
    if (!key) return;
    y += 0.5 * PLOT_LEG_ROW;
    cairo_set_line_cap(cr, CAIRO_LINE_CAP_BUTT);
    for (int k = 0; k < 2; k++, y += PLOT_LEG_ROW) {
        cairo_set_source_rgba(cr, 0.3, 0.3, 0.3, k ? key_alpha : 1);
        cairo_set_line_width(cr, key_lw[k]);
        cairo_move_to(cr, x, y);
        cairo_line_to(cr, x + PLOT_LEG_SAMPLE, y);
        cairo_stroke(cr);
        cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
        plot_text_at(cr, x + PLOT_LEG_SAMPLE + 8, y, key[k], 0, 0.5);
    }
}

/* The legend right of the plot: one row per run (its cumulative line's style), then, with
 * per-interval lines, a key to the two line weights. */
static void draw_legend(cairo_t *cr, const struct curve *c)
{
    char buf[64];
    static const double key_lw[2] = {CUM_LW, INT_LW};
    snprintf(buf, sizeof buf, "each interval, mean of %d", c->smooth);
    const char *key[2] = {"cumulative", c->smooth > 1 ? buf : "each logged interval"};
    plot_run_legend(cr, c->leg_x, c->b.y0 + 8, c->n, CUM_LW, legend_text, c,
                    c->cumulative_only ? NULL : key, key_lw, INT_ALPHA);
}

/* The legend's width (samples and the widest text). */
static double legend_width(const struct curve *c)
{
    char buf[256];
    cairo_surface_t *ss;
    cairo_t *cr = plot_scratch_context(&ss);
    plot_set_font(cr, 12, 0);
    double w = plot_text_width(cr, "each interval, mean of 10000");
    for (int r = 0; r < c->n; r++) {
        w = fmax(w, plot_text_width(cr, legend_text(c, r, buf, sizeof buf)));
    }
    cairo_destroy(cr);
    cairo_surface_destroy(ss);
    return PLOT_LEG_SAMPLE + 8 + w;
}

static void curve_draw(cairo_t *cr, void *ctx)
{
    struct curve *c = ctx;
    plot_titles(cr, c->title ? c->title : "Training cost relative to float32", c->subtitle);
    draw_axes(cr, c);
    draw_curves(cr, c);
    draw_legend(cr, c);
}

/* The default subtitle: what the lines show. */
static void curve_subtitle(const struct perf_curve_opts *o, char *buf, size_t n)
{
    if (o->cumulative_only)
        snprintf(buf, n, "cumulative Cq / C32 since the start of training");
    else if (o->smooth > 1)
        snprintf(buf, n,
                 "thick: cumulative Cq / C32 since the start of training; thin: each logged "
                 "interval, centred moving average over %d intervals",
                 o->smooth);
    else
        snprintf(buf, n,
                 "thick: cumulative Cq / C32 since the start of training; thin: each logged "
                 "interval (Cq / C32 of the same steps)");
}

enum adapt_status perf_costcurve_write(struct perf_run *const *runs, int n,
                                       const struct perf_curve_opts *o, const char *path)
{
    enum plot_image kind = PLOT_PNG;
    enum adapt_status st;
    struct perf_curve_opts def;
    if (!o) {
        perf_curve_opts_init(&def);
        o = &def;
    }
    if ((st = plot_check_runs_picture(n, o->width, o->height, path, &kind)) != ADAPT_OK)
        return st;
    if (o->smooth < 1 || o->smooth > 10000)
        return ADAPT_ERROR(ADAPT_EINVAL,
                           "%s: smoothing over %d logged intervals (expected 1..10000)", path,
                           o->smooth);
    char subtitle[256];
    curve_subtitle(o, subtitle, sizeof subtitle);
    struct curve c;
    memset(&c, 0, sizeof c);
    c.runs = runs;
    c.n = n;
    c.W = o->width;
    c.H = o->height;
    c.title = o->title;
    c.subtitle = o->subtitle ? o->subtitle : subtitle;
    c.cumulative_only = o->cumulative_only;
    c.smooth = o->smooth;
    c.b.x0 = 70;
    c.b.x1 = floor(c.W - 24 - legend_width(&c)); /* whole pixels: a sharp frame */
    c.leg_x = c.b.x1 + 20;
    if (c.b.x1 - c.b.x0 < 200)
        return ADAPT_ERROR(ADAPT_EINVAL,
                           "%s: picture width %d leaves no room for the plot beside the legend",
                           path, c.W);
    c.max_pts = (int)(c.b.x1 - c.b.x0) * 2;
    c.b.xhi = 0;
    for (int r = 0; r < n; r++) {
        if (runs[r]->n_points < 1)
            return ADAPT_ERROR(ADAPT_EINVAL, "%s: run %s has no cost points", path, runs[r]->name);
        double last = runs[r]->points[runs[r]->n_points - 1].epoch_x;
        if (last > c.b.xhi) c.b.xhi = last;
    }
    if (!(c.b.xhi > 0)) c.b.xhi = 1;
    /* The y range: every value, unless a run's first steps carry a cost far above the rest (a
     * search before training, counted into the first interval): then the values after the
     * first tenth of the x range, and what lies above is clipped (the subtitle says so). */
    double ymax = 1.0, ylate = 1.0;
    double *x = malloc(sizeof(double) * 3 * (size_t)c.max_pts);
    if (!x) return ADAPT_ERROR(ADAPT_ENOMEM, "%s: out of memory", path);
    for (int r = 0; r < n; r++) {
        int np = plot_curve_points(runs[r], c.b.xhi, c.max_pts, c.smooth, x, x + c.max_pts,
                                   x + 2 * c.max_pts);
        if (np < 0) {
            free(x);
            return ADAPT_ERROR(ADAPT_ENOMEM, "%s: out of memory", path);
        }
        for (int i = 0; i < np; i++) {
            double v = x[2 * c.max_pts + i];
            if (!c.cumulative_only) v = fmax(v, x[c.max_pts + i]);
            ymax = fmax(ymax, v);
            if (x[i] >= 0.1 * c.b.xhi) ylate = fmax(ylate, v);
        }
    }
    free(x);
    char clipped[384];
    if (ymax > 3.0 * ylate) {
        ymax = ylate;
        if (!o->subtitle) {
            snprintf(clipped, sizeof clipped, "%s; values above the top clipped", c.subtitle);
            c.subtitle = clipped;
        }
    }
    double t[64];
    int nt = plot_nice_ticks(0, ymax * 1.12, 7, 0, t);
    c.b.yhi = t[nt - 1] >= ymax * 1.12 ? t[nt - 1] : ymax * 1.12;
    c.b.y0 = plot_top(c.subtitle) - 16;
    c.b.y1 = c.H - 58;
    double leg_h = PLOT_LEG_ROW * (c.n + (c.cumulative_only ? 0 : 2.5));
    if (leg_h > c.b.y1 - c.b.y0 + 40)
        return ADAPT_ERROR(ADAPT_EINVAL,
                           "%s: picture height %d leaves no room for the legend of %d runs",
                           path, c.H, c.n);
    return plot_render(path, kind, c.W, c.H, curve_draw, &c);
}
