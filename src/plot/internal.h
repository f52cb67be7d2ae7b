/* src/plot/internal.h: what the files of src/plot share (not a public API): the size of
 * the colour map (colour.c) and the text and axis toolkit of the figures (axes.c).
 *
 * A figure computes its layout on a scratch context (text extents), then
 * plot_render creates a PNG image, SVG or PDF surface of that size, calls the
 * figure's draw function on it and writes the picture atomically.
 *
 *   enum plot_image kind;
 *   if ((st = plot_image_kind(path, &kind)) != ADAPT_OK) return st;
 *   cairo_surface_t *s;
 *   cairo_t *cr = plot_scratch_context(&s);
 *   plot_set_font(cr, 12, 0);
 *   double w = plot_text_width(cr, "label");
 *   cairo_destroy(cr);
 *   cairo_surface_destroy(s);
 *   st = plot_render(path, kind, width, height, draw, &figure);
 */
#ifndef PLOT_INTERNAL_H
#define PLOT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include <cairo.h>

#include "src/base/status.h"
#include "src/trace/trace.h"

/* Colours the map is sampled at (perf_colormap interpolates between them). */
#define PLOT_CMAP_N 256

enum plot_image { PLOT_PNG, PLOT_SVG, PLOT_PDF };

/* The picture type from path's extension (.png, .svg, .pdf, any case). */
enum adapt_status plot_image_kind(const char *path, enum plot_image *kind);
/* The checks every per-run picture (heatmap, word-length shares) makes first: the picture
 * type of path, step records and precision units in t, a width in 500..4000. */
enum adapt_status plot_check_trace_picture(const struct adapt_trace *t, int width,
                                           const char *path, enum plot_image *kind);
/* The same for a picture of n runs (cost curve, accuracy): the type of path, n >= 1, and a
 * size in 500..4000 x 300..4000. */
enum adapt_status plot_check_runs_picture(int n, int width, int height, const char *path,
                                          enum plot_image *kind);

/* A plot box: pixels (x0, y0)-(x1, y1) showing x in [xlo, xhi] and y in [ylo, yhi]. */
struct plot_box {
    double x0, y0, x1, y1;
    double xlo, xhi, ylo, yhi;
};
double plot_box_x(const struct plot_box *b, double x);
double plot_box_y(const struct plot_box *b, double y);
/* Ticks labelled under the box at nice x values (at most max_ticks; whole numbers only when
 * integer), each drawn from y_top down to 6 px below the box. */
void plot_x_ticks(cairo_t *cr, const struct plot_box *b, int max_ticks, int integer,
                  double y_top);
/* Horizontal grid lines labelled at nice y ticks (at most 7), x ticks labelled under the box
 * (at most one per x_px pixels; whole numbers only when x_integer), and the frame. */
void plot_box_axes(cairo_t *cr, const struct plot_box *b, int x_px, int x_integer);

/* "Nice" tick values (1, 2, 2.5, 5 x 10^k) covering [lo, hi]; integer steps
 * when integer. Writes at most 64 to out; returns the count (<= max). */
int plot_nice_ticks(double lo, double hi, int max, int integer, double *out);
/* A tick label: an integer without decimals, else %g. */
void plot_format_tick(char *buf, size_t n, double v);

void plot_set_font(cairo_t *cr, double size, int bold);
double plot_text_width(cairo_t *cr, const char *s);
/* Draws s anchored at (x, y): ax 0 left, 0.5 centre, 1 right end at x;
 * ay 1 puts the baseline at y, otherwise the cap height is centred on y. */
void plot_text_at(cairo_t *cr, double x, double y, const char *s, double ax, double ay);
/* Text rotated by -90 degrees, centred on (x, y). */
void plot_text_vertical(cairo_t *cr, double x, double y, const char *s);
/* The title (bold, 17) and the subtitle (12, grey; none when NULL or "") of a figure at
 * its top left. */
void plot_titles(cairo_t *cr, const char *title, const char *subtitle);
/* How far below the top the plot area of a figure may start: 86 with a subtitle, 66
 * without (NULL or ""). */
double plot_top(const char *subtitle);

/* A vertical colour bar 18 px wide at x from cy0 (vmax) down to cy1 (vmin), with ticks
 * (integers when integer), the label beside them, and an arrow beyond an end whose values
 * were clamped (arrow_lo, arrow_hi). Needs about 26 + tick width + 24 px to its right. */
void plot_colour_bar(cairo_t *cr, double x, double cy0, double cy1, double vmin, double vmax,
                     int integer, const char *label, int arrow_lo, int arrow_hi);

/* A context on a small image surface (*s) for measuring text, with the
 * font options of plot_render. */
cairo_t *plot_scratch_context(cairo_surface_t **s);

/* Cost curves (costcurve.c): run r's colour (one of PLOT_CURVE_COLOURS) and dash pattern
 * (one of PLOT_CURVE_DASHES, n_dash 0 solid); runs 0 .. COLOURS * DASHES - 1 differ. */
#define PLOT_CURVE_COLOURS 7
#define PLOT_CURVE_DASHES 4
void plot_curve_style(int r, double rgb[3], const double **dash, int *n_dash);
/* Sets run r's colour (at alpha), dash pattern and line width lw on cr (dash lengths scale
 * with lw; dots stay round). */
void plot_set_curve_style(cairo_t *cr, int r, double lw, double alpha);

#define PLOT_LEG_ROW 20.0    /* legend row height */
#define PLOT_LEG_SAMPLE 34.0 /* legend line sample length (the text starts 8 px after it) */
/* The legend of a picture of runs, from (x, y) down: one row per run, a line sample in the
 * run's style at width lw and the text label(ctx, r, buf, cap) returns (buf, or a string of
 * its own); then, when key is not NULL, after half
 * a row, two grey samples keying the thick line (width key_lw[0], key[0]) and the thin,
 * lighter one (key_lw[1] at key_alpha, key[1]). */
void plot_run_legend(cairo_t *cr, double x, double y, int n, double lw,
                     const char *(*label)(const void *ctx, int r, char *buf, size_t cap),
                     const void *ctx, const char *const *key, const double *key_lw,
                     double key_alpha);

struct perf_run;
/* Run r's points: the per-interval ratios sum Cq / sum C32 in at most max_pts bins of equal
 * epoch width (each point one bin when n_points <= max_pts) at the bin's last epoch_x (x),
 * and the cumulative ratio there (cum). smooth > 1 first replaces each interval's costs by
 * their mean over the `smooth` logged intervals centred on it (i - (smooth-1)/2 to
 * i + smooth/2, cut at the ends); the cumulative ratio is never smoothed. x, y, cum hold
 * max_pts values; returns the count, -1 out of memory. */
int plot_curve_points(const struct perf_run *r, double xmax, int max_pts, int smooth, double *x,
                      double *y, double *cum);

/* Word lengths plot_wl_fractions counts (0..PLOT_WL_MAX, the trace's range). */
#define PLOT_WL_MAX 64
struct adapt_trace;
/* Unit u's share of the optimizer steps at each word length (frac[wl], summing to 1): step
 * record i stands for the steps after the record before it (from step 0) up to its own.
 * Returns the steps counted (0: frac all 0). */
int64_t plot_wl_fractions(const struct adapt_trace *t, int u, double frac[PLOT_WL_MAX + 1]);

typedef void (*plot_draw_fn)(cairo_t *cr, void *ctx);
/* Creates a w x h surface of that kind on a white background, draws with
 * draw(cr, ctx) and writes the picture to path atomically. */
enum adapt_status plot_render(const char *path, enum plot_image kind, int w, int h,
                              plot_draw_fn draw, void *ctx);

#endif
