/* src/plot/plot.h: pictures of runs with cairo (PNG, SVG and PDF).
 *
 *   heatmap     units (rows, network order, labelled) against training steps
 *               (columns), colour = WL, FL, lookback, resolution or sparsity,
 *               with a colour bar, axis labels, epoch marks and a title (the
 *               AdaPT paper's figures 4 and 5)
 *   cost curve  per run, the cumulative cost relative to float32 (thick) and
 *               the ratio of each logged interval (thin, optionally smoothed)
 *               over training epochs (the paper's figure 6); runs differ by
 *               colour, then dash pattern; the legend is right of the plot
 *
 * The colour map is perceptually uniform and viridis-like (dark blue-purple
 * through teal and green to yellow, lightness rising linearly): it is built
 * in the OKLab colour space (B. Ottosson, "A perceptual color space for
 * image processing", 2020), following the design of viridis (S. van der
 * Walt, N. Smith, "A better default colormap for matplotlib", SciPy 2015),
 * and resampled so that equal steps in value are equal OKLab distances.
 * Curves use the Okabe-Ito colour-blind-safe palette (M. Okabe, K. Ito,
 * "Color Universal Design", 2008).
 *
 *   accuracy    loss and accuracy per epoch of several runs (training thin,
 *               validation thick), the cost curve's run styles
 *   WL shares   per unit, the share of training steps at each word length
 *
 * Non-goals: no general plotting library; layouts are fixed for these
 * figures. Outputs are written only on success (temporary file, rename).
 *
 *   struct perf_heatmap_opts o;
 *   perf_heatmap_opts_init(&o);
 *   o.metric = PERF_METRIC_WL;
 *   if (perf_heatmap_write(trace, &o, "wl.png") != ADAPT_OK) ...message...
 *   perf_costcurve_write(runs, n, NULL, "cost.svg");
 *
 * Ownership: the functions borrow their inputs.
 */
#ifndef PERF_PLOT_H
#define PERF_PLOT_H

#include "src/perfmodel/perf.h"
#include "src/trace/trace.h"

#ifdef __cplusplus
extern "C" {
#endif

enum perf_metric {
    PERF_METRIC_WL = 0,
    PERF_METRIC_FL,
    PERF_METRIC_LB,
    PERF_METRIC_R,
    PERF_METRIC_SPARSITY,
    /* [roles] with scaling: log2 of the scale of the weight, input or grad_output role */
    PERF_METRIC_SCALE_WEIGHT,
    PERF_METRIC_SCALE_INPUT,
    PERF_METRIC_SCALE_GRAD_OUTPUT
};

/* "wl", "fl", "lb", "r", "sparsity", "scale_weight", "scale_input" or "scale_grad_output". */
enum adapt_status perf_metric_parse(const char *s, enum perf_metric *out);
const char *perf_metric_name(enum perf_metric m);

struct perf_heatmap_opts {
    enum perf_metric metric;
    int width;         /* image width in pixels (default 1100; 500..4000) */
    const char *title; /* NULL: "<metric> per unit: <model> on <data set>, policy <policy>" */
    /* NULL: "<trace>: <n> step records up to step <s>, <e> epochs"; "": no subtitle (the
     * plot moves up) */
    const char *subtitle;
    /* The colour scale: NAN (the default) takes the metric's least or greatest value in
     * the run. Values outside [vmin, vmax] get the colour of the nearer end, and the colour
     * bar shows an arrow at that end. vmin < vmax. */
    double vmin, vmax;
};
void perf_heatmap_opts_init(struct perf_heatmap_opts *o);

/* Writes path (.png, .svg or .pdf). Refuses a trace without step records, a
 * metric that no step records, vmin >= vmax, an unknown extension. */
enum adapt_status perf_heatmap_write(const struct adapt_trace *t, const struct perf_heatmap_opts *o,
                                     const char *path);

struct perf_curve_opts {
    int width, height; /* default 1000 x 560 */
    const char *title;    /* NULL: "Training cost relative to float32" */
    const char *subtitle; /* NULL: what the lines show; "": no subtitle (the plot moves up) */
    int cumulative_only;  /* only the cumulative lines (default 0: also each interval's) */
    int smooth;           /* per-interval lines: centred moving average over this many logged
                             intervals (default 1: none; 1..10000) */
};
void perf_curve_opts_init(struct perf_curve_opts *o);

/* One curve per run (runs from perf_run_analyze, in legend order); path ends in .png, .svg
 * or .pdf. */
enum adapt_status perf_costcurve_write(struct perf_run *const *runs, int n,
                                       const struct perf_curve_opts *o, const char *path);

/* Loss (left panel) and accuracy in percent (right) per epoch of n runs, validation thick
 * with dots and training thin, one style per run as in cost curves, names[i] in the legend.
 * o (NULL: defaults): size, title, subtitle; cumulative_only and smooth are ignored.
 * Refuses a trace without epoch records. */
enum adapt_status perf_accuracy_write(const struct adapt_trace *const *traces,
                                      const char *const *names, int n,
                                      const struct perf_curve_opts *o, const char *path);

/* Per unit (rows, network order), the share of the run's optimizer steps at each word
 * length, a bar split by word length and coloured as a WL heatmap. o: width, title,
 * subtitle, vmin and vmax (the metric is ignored). */
enum adapt_status perf_wldist_write(const struct adapt_trace *t, const struct perf_heatmap_opts *o,
                                    const char *path);

/* The colour map at t in [0, 1] (clamped), sRGB components in [0, 1]. */
void perf_colormap(double t, double rgb[3]);
/* OKLab lightness, a, b of an sRGB colour (for tests of the map). */
void perf_srgb_to_oklab(const double rgb[3], double lab[3]);

#ifdef __cplusplus
}
#endif
#endif
