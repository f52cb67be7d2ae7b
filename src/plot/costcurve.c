/* src/plot/costcurve.c: the training cost of runs relative to float32 over epochs (see
 * plot.h): per run, each logged interval's Cq / C32 (solid) and the cumulative ratio
 * (dashed), binned to at most two points per pixel. */
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
}

/* Okabe-Ito palette without black and yellow (too light on white). */
static const double palette[6][3] = {{0.902, 0.624, 0.000}, {0.337, 0.706, 0.914},
                                     {0.000, 0.620, 0.451}, {0.000, 0.447, 0.698},
                                     {0.835, 0.369, 0.000}, {0.800, 0.475, 0.655}};

struct curve {
    struct perf_run *const *runs;
    int n;
    int W, H;
    const char *title, *subtitle;
    double x0, x1, y0, y1;
    double xmax, ymax;
    int max_pts;
};

static double cv_x(const struct curve *c, double e)
{
    return c->x0 + (c->x1 - c->x0) * e / c->xmax;
}

static double cv_y(const struct curve *c, double v)
{
    return c->y1 - (c->y1 - c->y0) * v / c->ymax;
}

/* Per-interval ratios averaged into at most max_pts bins of equal epoch width
 * (weights: float32 cost), and the cumulative ratio at each bin's end. */
static int curve_points(const struct perf_run *r, double xmax, int max_pts, double *x, double *y,
                        double *cum)
{
    int n = 0;
    double s32 = 0, sq = 0, b32 = 0, bq = 0;
    int bin = -1;
    double bx = 0;
    for (int64_t i = 0; i < r->n_points; i++) {
        const struct perf_point *p = &r->points[i];
        int b = r->n_points <= max_pts ? (int)i : (int)(p->epoch_x / xmax * (max_pts - 1));
        if (b != bin && bin >= 0 && b32 > 0) {
            x[n] = bx, y[n] = bq / b32, cum[n] = sq / s32, n++;
            b32 = bq = 0;
        }
        bin = b;
        bx = p->epoch_x;
        b32 += p->c32;
        bq += p->cq;
        s32 += p->c32;
        sq += p->cq;
    }
    if (b32 > 0) x[n] = bx, y[n] = bq / b32, cum[n] = sq / s32, n++;
    return n;
}

/* Grid, ticks, frame and axis labels, and the dotted float32 reference at 1. */
static void draw_axes(cairo_t *cr, const struct curve *c)
{
    char buf[64];
    double ticks[64];
    plot_set_font(cr, 12, 0);
    cairo_set_line_width(cr, 1);
    int nt = plot_nice_ticks(0, c->ymax, 7, 0, ticks);
    for (int i = 0; i < nt; i++) {
        double y = floor(cv_y(c, ticks[i])) + 0.5;
        cairo_set_source_rgb(cr, 0.9, 0.9, 0.9);
        cairo_move_to(cr, c->x0, y);
        cairo_line_to(cr, c->x1, y);
        cairo_stroke(cr);
        cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
        plot_format_tick(buf, sizeof buf, ticks[i]);
        plot_text_at(cr, c->x0 - 8, y, buf, 1, 0.5);
    }
    nt = plot_nice_ticks(0, c->xmax, (int)((c->x1 - c->x0) / 80), 0, ticks);
    for (int i = 0; i < nt; i++) {
        double x = floor(cv_x(c, ticks[i])) + 0.5;
        cairo_set_source_rgb(cr, 0.25, 0.25, 0.25);
        cairo_move_to(cr, x, c->y1);
        cairo_line_to(cr, x, c->y1 + 6);
        cairo_stroke(cr);
        plot_format_tick(buf, sizeof buf, ticks[i]);
        cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
        plot_text_at(cr, x, c->y1 + 20, buf, 0.5, 1);
    }
    cairo_set_source_rgb(cr, 0.25, 0.25, 0.25);
    cairo_rectangle(cr, c->x0 - 0.5, c->y0 - 0.5, c->x1 - c->x0 + 1, c->y1 - c->y0 + 1);
    cairo_stroke(cr);
    plot_set_font(cr, 13, 0);
    cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
    plot_text_at(cr, 0.5 * (c->x0 + c->x1), c->y1 + 42, "training progress (epochs)", 0.5, 1);
    plot_text_vertical(cr, 22, 0.5 * (c->y0 + c->y1), "cost relative to float32");
    double y1 = floor(cv_y(c, 1.0)) + 0.5;
    cairo_set_source_rgb(cr, 0.35, 0.35, 0.35);
    double dash[2] = {2, 3};
    cairo_set_dash(cr, dash, 2, 0);
    cairo_move_to(cr, c->x0, y1);
    cairo_line_to(cr, c->x1, y1);
    cairo_stroke(cr);
    cairo_set_dash(cr, NULL, 0, 0);
    plot_set_font(cr, 11, 0);
    plot_text_at(cr, c->x0 + 6, y1 - 5, "float32 = 1", 0, 1);
}

/* One polyline through (x[i], v[i]). */
static void polyline(cairo_t *cr, const struct curve *c, const double *x, const double *v, int n)
{
    for (int i = 0; i < n; i++) {
        if (i == 0) cairo_move_to(cr, cv_x(c, x[i]), cv_y(c, v[i]));
        else cairo_line_to(cr, cv_x(c, x[i]), cv_y(c, v[i]));
    }
}

/* The curves, clipped to the plot area. */
static void draw_curves(cairo_t *cr, const struct curve *c)
{
    double *x = malloc(sizeof(double) * 3 * (size_t)c->max_pts);
    if (!x) return;
    double *y = x + c->max_pts, *cum = y + c->max_pts;
    cairo_save(cr);
    cairo_rectangle(cr, c->x0, c->y0, c->x1 - c->x0, c->y1 - c->y0);
    cairo_clip(cr);
    cairo_set_line_join(cr, CAIRO_LINE_JOIN_ROUND);
    for (int r = 0; r < c->n; r++) {
        const double *col = palette[r % 6];
        int n = curve_points(c->runs[r], c->xmax, c->max_pts, x, y, cum);
        cairo_set_source_rgb(cr, col[0], col[1], col[2]);
        cairo_set_line_width(cr, 1.8);
        polyline(cr, c, x, y, n);
        if (n == 1) cairo_line_to(cr, cv_x(c, 0), cv_y(c, y[0]));
        cairo_stroke(cr);
        double d[2] = {7, 4};
        cairo_set_dash(cr, d, 2, 0);
        cairo_set_line_width(cr, 1.4);
        polyline(cr, c, x, cum, n);
        cairo_stroke(cr);
        cairo_set_dash(cr, NULL, 0, 0);
    }
    cairo_restore(cr);
    free(x);
}

/* The legend, top right inside the plot. */
static void draw_legend(cairo_t *cr, const struct curve *c)
{
    char buf[256];
    plot_set_font(cr, 12, 0);
    double lw = 0;
    for (int r = 0; r < c->n; r++) {
        snprintf(buf, sizeof buf, "%s (%s): SU1 %.2f", c->runs[r]->name, c->runs[r]->policy,
                 c->runs[r]->su1);
        lw = fmax(lw, plot_text_width(cr, buf));
    }
    double bw = lw + 46, bh = 20.0 * c->n + 10, bx = c->x1 - bw - 10, by = c->y0 + 10;
    cairo_set_source_rgba(cr, 1, 1, 1, 0.9);
    cairo_rectangle(cr, bx, by, bw, bh);
    cairo_fill_preserve(cr);
    cairo_set_source_rgb(cr, 0.7, 0.7, 0.7);
    cairo_stroke(cr);
    for (int r = 0; r < c->n; r++) {
        const double *col = palette[r % 6];
        double yy = by + 15 + 20.0 * r;
        cairo_set_source_rgb(cr, col[0], col[1], col[2]);
        cairo_set_line_width(cr, 2.5);
        cairo_move_to(cr, bx + 8, yy);
        cairo_line_to(cr, bx + 32, yy);
        cairo_stroke(cr);
        cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
        snprintf(buf, sizeof buf, "%s (%s): SU1 %.2f", c->runs[r]->name, c->runs[r]->policy,
                 c->runs[r]->su1);
        plot_text_at(cr, bx + 38, yy, buf, 0, 0.5);
    }
}

static void curve_draw(cairo_t *cr, void *ctx)
{
    struct curve *c = ctx;
    plot_titles(cr, c->title ? c->title : "Training cost relative to float32", c->subtitle);
    draw_axes(cr, c);
    draw_curves(cr, c);
    draw_legend(cr, c);
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
    if ((st = plot_image_kind(path, &kind)) != ADAPT_OK) return st;
    if (n < 1) return ADAPT_ERROR(ADAPT_EINVAL, "%s: no runs to draw", path);
    if (o->width < 500 || o->width > 4000 || o->height < 300 || o->height > 4000)
        return ADAPT_ERROR(ADAPT_EINVAL, "picture size %dx%d outside 500..4000 x 300..4000",
                           o->width, o->height);
    struct curve c;
    memset(&c, 0, sizeof c);
    c.runs = runs;
    c.n = n;
    c.W = o->width;
    c.H = o->height;
    c.title = o->title;
    c.subtitle = o->subtitle ? o->subtitle
                             : "solid: each logged interval (Cq / C32 of the same steps); dashed: "
                               "cumulative since the start of training";
    c.x0 = 70;
    c.x1 = c.W - 24;
    c.y0 = plot_top(c.subtitle) - 16;
    c.y1 = c.H - 58;
    c.max_pts = (int)(c.x1 - c.x0) * 2;
    c.xmax = 0;
    double ymax = 1.0;
    for (int r = 0; r < n; r++) {
        if (runs[r]->n_points < 1)
            return ADAPT_ERROR(ADAPT_EINVAL, "%s: run %s has no cost points", path, runs[r]->name);
        double last = runs[r]->points[runs[r]->n_points - 1].epoch_x;
        if (last > c.xmax) c.xmax = last;
    }
    if (!(c.xmax > 0)) c.xmax = 1;
    double *x = malloc(sizeof(double) * 3 * (size_t)c.max_pts);
    if (!x) return ADAPT_ERROR(ADAPT_ENOMEM, "%s: out of memory", path);
    for (int r = 0; r < n; r++) {
        int np = curve_points(runs[r], c.xmax, c.max_pts, x, x + c.max_pts, x + 2 * c.max_pts);
        for (int i = 0; i < np; i++) {
            ymax = fmax(ymax, x[c.max_pts + i]);
            ymax = fmax(ymax, x[2 * c.max_pts + i]);
        }
    }
    free(x);
    double t[64];
    int nt = plot_nice_ticks(0, ymax * 1.12, 7, 0, t);
    c.ymax = t[nt - 1] >= ymax * 1.12 ? t[nt - 1] : ymax * 1.12;
    return plot_render(path, kind, c.W, c.H, curve_draw, &c);
}
