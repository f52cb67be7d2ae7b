/* src/plot/wldist.c: the word-length distribution of one run (see plot.h): per unit (rows,
 * network order) a bar split into the fractions of training steps spent at each word length,
 * in increasing order, coloured by word length with the heatmaps' colour map and scale
 * options, labelled with the word length where the part is wide enough. A step record holds
 * for the optimizer steps since the record before it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cairo.h>

#include "src/plot/internal.h"
#include "src/plot/plot.h"

int64_t plot_wl_fractions(const struct adapt_trace *t, int u, double frac[PLOT_WL_MAX + 1])
{
    int64_t prev = 0, total = 0;
    for (int w = 0; w <= PLOT_WL_MAX; w++) frac[w] = 0;
    for (int64_t i = 0; i < t->n_steps; i++) {
        int64_t s = t->steps[i].step, d = s - prev;
        int wl = t->steps[i].units[u].wl;
        prev = s;
        if (d <= 0 || wl < 0 || wl > PLOT_WL_MAX) continue;
        frac[wl] += (double)d;
        total += d;
    }
    for (int w = 0; w <= PLOT_WL_MAX && total > 0; w++) frac[w] /= (double)total;
    return total;
}

struct wldist {
    const struct adapt_trace *t;
    int W, H, rows;
    char title[512], subtitle[512];
    double label_font, row_h;
    double x0, x1, y0, y1, cb_x;
    double vmin, vmax, dmin, dmax;
    double *frac; /* (rows, PLOT_WL_MAX + 1) */
};

static void unit_label(const struct adapt_trace *t, int u, char *buf, size_t n)
{
    const struct adapt_trace_unit *un = &t->header.units[u];
    const char *kind = un->layer >= 0 && un->layer < t->header.model.n_layers
                           ? t->header.model.layers[un->layer].kind
                           : NULL;
    snprintf(buf, n, kind ? "%s %s" : "%s", un->name, kind);
}

static void wd_draw(cairo_t *cr, void *ctx)
{
    struct wldist *d = ctx;
    char buf[160];
    plot_titles(cr, d->title, d->subtitle);
    for (int u = 0; u < d->rows; u++) {
        const double *fr = d->frac + (size_t)u * (PLOT_WL_MAX + 1);
        double yc = d->y0 + (u + 0.5) * d->row_h, bh = 0.72 * d->row_h, acc = 0;
        for (int w = 0; w <= PLOT_WL_MAX; w++) {
            if (fr[w] <= 0) continue;
            double xa = d->x0 + (d->x1 - d->x0) * acc, xb = d->x0 + (d->x1 - d->x0) * (acc + fr[w]);
            acc += fr[w];
            double rgb[3], lab[3], tv = (w - d->vmin) / (d->vmax - d->vmin);
            perf_colormap(fmin(1, fmax(0, tv)), rgb);
            cairo_set_source_rgb(cr, rgb[0], rgb[1], rgb[2]);
            cairo_rectangle(cr, xa, yc - bh / 2, xb - xa, bh);
            cairo_fill(cr);
            cairo_set_source_rgb(cr, 1, 1, 1); /* a hairline between parts */
            cairo_set_line_width(cr, 0.75);
            cairo_move_to(cr, xb, yc - bh / 2);
            cairo_line_to(cr, xb, yc + bh / 2);
            cairo_stroke(cr);
            snprintf(buf, sizeof buf, "%d", w);
            plot_set_font(cr, fmin(12, 0.6 * d->row_h), 0);
            if (xb - xa >= plot_text_width(cr, buf) + 6) {
                perf_srgb_to_oklab(rgb, lab);
                if (lab[0] < 0.62) cairo_set_source_rgb(cr, 1, 1, 1);
                else cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
                plot_text_at(cr, 0.5 * (xa + xb), yc, buf, 0.5, 0.5);
            }
        }
        cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
        plot_set_font(cr, d->label_font, 0);
        unit_label(d->t, u, buf, sizeof buf);
        plot_text_at(cr, d->x0 - 8, yc, buf, 1, 0.5);
    }
    cairo_set_line_width(cr, 1);
    plot_set_font(cr, 12, 0);
    const struct plot_box share = {d->x0, d->y0, d->x1, d->y1, 0, 100, 0, 1}; /* percent */
    plot_x_ticks(cr, &share, 6, 1, d->y1 + 0.5);
    cairo_set_source_rgb(cr, 0.25, 0.25, 0.25);
    cairo_move_to(cr, d->x0, d->y1 + 0.5);
    cairo_line_to(cr, d->x1, d->y1 + 0.5);
    cairo_stroke(cr);
    cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
    plot_set_font(cr, 13, 0);
    plot_text_at(cr, 0.5 * (d->x0 + d->x1), d->y1 + 42, "share of training steps (%)", 0.5, 1);
    plot_text_vertical(cr, 24, 0.5 * (d->y0 + d->y1), "precision unit (network order)");
    plot_colour_bar(cr, d->cb_x, d->y0, d->y1, d->vmin, d->vmax, 1, "word length (bits)",
                    d->dmin < d->vmin, d->dmax > d->vmax);
}

enum adapt_status perf_wldist_write(const struct adapt_trace *t, const struct perf_heatmap_opts *o,
                                    const char *path)
{
    enum plot_image kind = PLOT_PNG;
    enum adapt_status st;
    if ((st = plot_check_trace_picture(t, o->width, path, &kind)) != ADAPT_OK) return st;
    struct wldist d;
    memset(&d, 0, sizeof d);
    d.t = t;
    d.rows = t->header.n_units;
    d.W = o->width;
    d.frac = malloc(sizeof(double) * (size_t)d.rows * (PLOT_WL_MAX + 1));
    if (!d.frac) return ADAPT_ERROR(ADAPT_ENOMEM, "%s: out of memory", path);
    d.dmin = INFINITY;
    d.dmax = -INFINITY;
    int64_t total = 0;
    for (int u = 0; u < d.rows; u++) {
        double *fr = d.frac + (size_t)u * (PLOT_WL_MAX + 1);
        total = plot_wl_fractions(t, u, fr);
        for (int w = 0; w <= PLOT_WL_MAX; w++)
            if (fr[w] > 0) d.dmin = fmin(d.dmin, w), d.dmax = fmax(d.dmax, w);
    }
    if (total < 1 || !(d.dmin <= d.dmax)) {
        free(d.frac);
        return ADAPT_ERROR(ADAPT_EINVAL, "%s: the step records cover no optimizer step",
                           t->path);
    }
    d.vmin = isnan(o->vmin) ? (d.dmin == d.dmax ? d.dmin - 0.5 : d.dmin) : o->vmin;
    d.vmax = isnan(o->vmax) ? (d.dmin == d.dmax ? d.dmax + 0.5 : d.dmax) : o->vmax;
    if (!(d.vmin < d.vmax)) {
        free(d.frac);
        return ADAPT_ERROR(ADAPT_EINVAL, "%s: colour scale of 'wl': vmin %g must be below vmax %g",
                           t->path, d.vmin, d.vmax);
    }
    if (o->title) snprintf(d.title, sizeof d.title, "%s", o->title);
    else
        snprintf(d.title, sizeof d.title, "Word lengths per unit: %s on %s, policy %s",
                 t->header.model.name, t->header.dataset.name, t->header.policy);
    if (o->subtitle) snprintf(d.subtitle, sizeof d.subtitle, "%s", o->subtitle);
    else
        snprintf(d.subtitle, sizeof d.subtitle, "%s: share of the %lld optimizer steps at each "
                 "word length", t->path, (long long)total);
    /* layout: heatmap.c's rows and margins */
    d.row_h = fmin(40, fmax(16, 420.0 / d.rows));
    d.label_font = fmin(13.0, 0.72 * d.row_h);
    cairo_surface_t *ss;
    cairo_t *cr = plot_scratch_context(&ss);
    plot_set_font(cr, d.label_font, 0);
    double lw = 0;
    for (int u = 0; u < d.rows; u++) {
        char lab[160];
        unit_label(t, u, lab, sizeof lab);
        lw = fmax(lw, plot_text_width(cr, lab));
    }
    plot_set_font(cr, 12, 0);
    double tw = plot_text_width(cr, "150") + 4;
    cairo_destroy(cr);
    cairo_surface_destroy(ss);
    d.x0 = 44 + lw + 10;
    d.x1 = d.W - (16 + 26 + tw + 8 + 18 + 24);
    d.cb_x = d.x1 + 24;
    d.y0 = plot_top(d.subtitle);
    double ph = fmax(180, d.rows * d.row_h);
    d.row_h = ph / d.rows;
    d.y1 = d.y0 + ph;
    d.H = (int)ceil(d.y1 + 62);
    if (d.x1 - d.x0 < 200) st = ADAPT_ERROR(ADAPT_EINVAL, "picture width %d leaves no room for "
                                            "the plot", d.W);
    else st = plot_render(path, kind, d.W, d.H, wd_draw, &d);
    free(d.frac);
    return st;
}
