/* src/plot/accuracy.c: training and validation loss and accuracy per epoch of several runs
 * (see plot.h): two panels side by side, loss on the left and accuracy (percent) on the
 * right, epochs 1..E on both; per run, validation thick with a dot at each epoch and
 * training thin and lighter, in the run's colour and dash pattern (costcurve.c's styles);
 * the legend sits right of the panels. Epoch values the trace lacks (NaN) leave a gap. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cairo.h>

#include "src/plot/internal.h"
#include "src/plot/plot.h"

#define VAL_LW 2.4
#define TRAIN_LW 1.3
#define TRAIN_ALPHA 0.6

struct acc_fig {
    const struct adapt_trace *const *t;
    const char *const *names;
    int n;
    int W, H;
    const char *title, *subtitle;
    double xmax;          /* epochs */
    struct plot_box p[2]; /* loss, accuracy: x from epoch 1 to xmax */
    double leg_x;
};

/* Value k of epoch record e: 0 train loss, 1 validation loss, 2 train accuracy and 3
 * validation accuracy in percent. */
static double epoch_value(const struct adapt_trace_epoch *e, int k)
{
    switch (k) {
    case 0: return e->train_loss;
    case 1: return e->val_loss;
    case 2: return 100 * e->train_acc;
    default: return 100 * e->val_acc;
    }
}

static void draw_panel_axes(cairo_t *cr, const struct plot_box *p, const char *ylabel,
                            const char *name)
{
    plot_box_axes(cr, p, 60, 1);
    cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
    plot_set_font(cr, 13, 0);
    plot_text_at(cr, 0.5 * (p->x0 + p->x1), p->y1 + 42, "epoch", 0.5, 1);
    plot_text_vertical(cr, p->x0 - 52, 0.5 * (p->y0 + p->y1), ylabel);
    plot_set_font(cr, 13, 1);
    plot_text_at(cr, p->x0, p->y0 - 8, name, 0, 1);
}

/* Value k of run r as a polyline (gaps at NaN), dots at validation points. */
static void draw_series(cairo_t *cr, const struct acc_fig *f, const struct plot_box *p, int r,
                        int k)
{
    const struct adapt_trace *t = f->t[r];
    int val = k & 1, open = 0;
    plot_set_curve_style(cr, r, val ? VAL_LW : TRAIN_LW, val ? 1 : TRAIN_ALPHA);
    for (int e = 0; e < t->n_epochs; e++) {
        double v = epoch_value(&t->epochs[e], k);
        if (isnan(v)) {
            open = 0;
            continue;
        }
        double x = plot_box_x(p, (double)t->epochs[e].epoch + 1), y = plot_box_y(p, v);
        if (open) cairo_line_to(cr, x, y);
        else cairo_move_to(cr, x, y);
        open = 1;
    }
    cairo_stroke(cr);
    if (!val) return;
    cairo_set_dash(cr, NULL, 0, 0);
    for (int e = 0; e < t->n_epochs; e++) {
        double v = epoch_value(&t->epochs[e], k);
        if (isnan(v)) continue;
        cairo_new_sub_path(cr);
        cairo_arc(cr, plot_box_x(p, (double)t->epochs[e].epoch + 1), plot_box_y(p, v), 2.8, 0,
                  2 * M_PI);
    }
    cairo_fill(cr);
}

static const char *run_name(const void *ctx, int r, char *buf, size_t n)
{
    (void)buf, (void)n;
    return ((const struct acc_fig *)ctx)->names[r];
}

static void draw_legend(cairo_t *cr, const struct acc_fig *f)
{
    static const char *const key[2] = {"validation", "training"};
    static const double key_lw[2] = {VAL_LW, TRAIN_LW};
    plot_run_legend(cr, f->leg_x, f->p[0].y0 + 8, f->n, VAL_LW, run_name, f, key, key_lw,
                    TRAIN_ALPHA);
}

static void acc_draw(cairo_t *cr, void *ctx)
{
    struct acc_fig *f = ctx;
    plot_titles(cr, f->title, f->subtitle);
    draw_panel_axes(cr, &f->p[0], "loss", "Loss");
    draw_panel_axes(cr, &f->p[1], "accuracy (%)", "Accuracy");
    for (int i = 0; i < 2; i++) {
        const struct plot_box *p = &f->p[i];
        cairo_save(cr);
        cairo_rectangle(cr, p->x0 - 4, p->y0 - 4, p->x1 - p->x0 + 8, p->y1 - p->y0 + 8);
        cairo_clip(cr);
        cairo_set_line_join(cr, CAIRO_LINE_JOIN_ROUND);
        for (int pass = 0; pass < 2; pass++) /* training lines first, validation on top */
            for (int r = 0; r < f->n; r++) draw_series(cr, f, p, r, 2 * i + pass);
        cairo_restore(cr);
    }
    draw_legend(cr, f);
}

/* A panel's value range over the runs: loss from 0, accuracy padded and within 0..100. */
static void panel_range(struct acc_fig *f, int i)
{
    double lo = INFINITY, hi = -INFINITY, ticks[64];
    for (int r = 0; r < f->n; r++)
        for (int e = 0; e < f->t[r]->n_epochs; e++)
            for (int k = 2 * i; k < 2 * i + 2; k++) {
                double v = epoch_value(&f->t[r]->epochs[e], k);
                if (isnan(v)) continue;
                lo = fmin(lo, v);
                hi = fmax(hi, v);
            }
    if (!(lo <= hi)) lo = 0, hi = i ? 100 : 1;
    if (i == 0) lo = 0;
    double pad = fmax(0.05 * (hi - lo), i ? 1 : 0.05);
    lo = i ? fmax(0, lo - pad) : 0;
    hi = i ? fmin(100, hi + pad) : hi + pad;
    int nt = plot_nice_ticks(lo, hi, 7, 0, ticks);
    double step = nt > 1 ? ticks[1] - ticks[0] : 1;
    f->p[i].ylo = floor(lo / step + 1e-9) * step;
    f->p[i].yhi = ceil(hi / step - 1e-9) * step;
}

enum adapt_status perf_accuracy_write(const struct adapt_trace *const *traces,
                                      const char *const *names, int n,
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
    struct acc_fig f;
    memset(&f, 0, sizeof f);
    f.t = traces;
    f.names = names;
    f.n = n;
    f.W = o->width;
    f.H = o->height;
    f.title = o->title ? o->title : "Loss and accuracy per epoch";
    f.subtitle = o->subtitle ? o->subtitle
                             : "thick with dots: validation split; thin: training (mean over "
                               "the epoch's batches)";
    for (int r = 0; r < n; r++) {
        if (traces[r]->n_epochs < 1)
            return ADAPT_ERROR(ADAPT_EINVAL, "%s: no epoch records: nothing to draw",
                               traces[r]->path);
        f.xmax = fmax(f.xmax, (double)traces[r]->epochs[traces[r]->n_epochs - 1].epoch + 1);
    }
    if (f.xmax < 2) f.xmax = 2;
    cairo_surface_t *ss;
    cairo_t *cr = plot_scratch_context(&ss);
    plot_set_font(cr, 12, 0);
    double lw = plot_text_width(cr, "validation");
    for (int r = 0; r < n; r++) lw = fmax(lw, plot_text_width(cr, names[r]));
    cairo_destroy(cr);
    cairo_surface_destroy(ss);
    double right = floor(f.W - 24 - (PLOT_LEG_SAMPLE + 8 + lw)), gap = 84;
    double y0 = plot_top(f.subtitle) + 4, y1 = f.H - 58;
    double pw = floor((right - 76 - gap) / 2);
    if (pw < 150)
        return ADAPT_ERROR(ADAPT_EINVAL,
                           "%s: picture width %d leaves no room for the panels beside the legend",
                           path, f.W);
    if (PLOT_LEG_ROW * (n + 2.5) > y1 - y0 + 40)
        return ADAPT_ERROR(ADAPT_EINVAL,
                           "%s: picture height %d leaves no room for the legend of %d runs",
                           path, f.H, n);
    f.p[0] = (struct plot_box){76, y0, 76 + pw, y1, 1, f.xmax, 0, 0};
    f.p[1] = (struct plot_box){76 + pw + gap, y0, 76 + 2 * pw + gap, y1, 1, f.xmax, 0, 0};
    f.leg_x = f.p[1].x1 + 20;
    panel_range(&f, 0);
    panel_range(&f, 1);
    return plot_render(path, kind, f.W, f.H, acc_draw, &f);
}
