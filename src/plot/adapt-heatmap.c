/* src/plot/adapt-heatmap.c: pictures of training runs (PNG, SVG or PDF, by the
 * output name's extension).
 *
 *   adapt-heatmap TRACE -o FILE [--metric M] [--vmin V] [--vmax V]
 *                 [--title T] [--subtitle T | --no-subtitle] [--width PX]
 *   adapt-heatmap --cost-curve TRACE... -o FILE [--cumulative-only] [--smooth N] [--title T]
 *                 [--subtitle T | --no-subtitle] [--width PX] [--height PX]
 *   adapt-heatmap --accuracy TRACE... -o FILE [--title T] [--subtitle T | --no-subtitle]
 *                 [--width PX] [--height PX]
 *   adapt-heatmap --wl-dist TRACE -o FILE [--vmin V] [--vmax V] [--title T]
 *                 [--subtitle T | --no-subtitle] [--width PX]
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <config.h>
#include "src/base/version.h"
#include "src/perfmodel/perf.h"
#include "src/plot/plot.h"

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: adapt-heatmap TRACE -o FILE [--metric M] [--vmin V] "
            "[--vmax V]\n"
            "                     [--title T] [--subtitle T | --no-subtitle] [--width PX]\n"
            "   or: adapt-heatmap --cost-curve TRACE... -o FILE [--cumulative-only] [--smooth N]\n"
            "                     [--title T] [--subtitle T | --no-subtitle] [--width PX] "
            "[--height PX]\n"
            "   or: adapt-heatmap --accuracy TRACE... -o FILE [--title T] [--subtitle T | "
            "--no-subtitle]\n"
            "                     [--width PX] [--height PX]\n"
            "   or: adapt-heatmap --wl-dist TRACE -o FILE [--vmin V] [--vmax V] [--title T]\n"
            "                     [--subtitle T | --no-subtitle] [--width PX]\n"
            "Draws a heatmap of one run's per-unit state (units in network order against\n"
            "optimizer steps), the training cost of runs relative to float32 over epochs\n"
            "(--cost-curve), their training and validation loss and accuracy per epoch\n"
            "(--accuracy), or per unit the share of a run's training steps at each word\n"
            "length (--wl-dist).\n"
            "FILE ends in .png, .svg or .pdf. A TRACE may also be a run directory (its\n"
            "trace.jsonl). Legends name runs as adapt-perf does: by run.name, else by the\n"
            "configuration file, with the end of the path that tells apart runs that\n"
            "share a name, e.g. \"fmnist_lenet5 (long/adapt)\".\n"
            "  --metric M       wl (default), fl, lb (lookback), r (histogram resolution),\n"
            "                   sparsity; with [roles] scaling, scale_weight, scale_input,\n"
            "                   scale_grad_output (log2 of the role's scale)\n"
            "  --vmin V, --vmax V  a fixed colour scale of a heatmap or --wl-dist (default:\n"
            "                   the run's range; a metric that never changes, its own\n"
            "                   range: WL and FL 0-32, sparsity 0-1); values outside it\n"
            "                   take the colour of the nearer end\n"
            "  --title T        the title (default: metric, configuration, model, policy)\n"
            "  --subtitle T     the line under the title (default: the trace, its step\n"
            "                   records and epochs; for cost curves, what the lines show)\n"
            "  --no-subtitle    no line under the title\n"
            "  --cumulative-only  cost curves: only the cumulative lines, not each interval's\n"
            "  --smooth N       cost curves: each interval's line is the centred moving\n"
            "                   average over N logged intervals (the subtitle says so)\n"
            "  --width PX, --height PX  the picture's size (heatmaps: width only)\n"
            "  --partial        accept traces whose last line is incomplete (a live run)\n");
}

/* A finite number for --vmin or --vmax. */
static int parse_double(const char *s, double *v)
{
    char *end;
    double x = strtod(s, &end);
    if (end == s || *end || !isfinite(x)) return 0;
    *v = x;
    return 1;
}

static int parse_int(const char *s, int *v)
{
    char *end;
    long x = strtol(s, &end, 10);
    if (end == s || *end || x < 1 || x > 100000) return 0;
    *v = (int)x;
    return 1;
}

int main(int argc, char **argv)
{
    const char *output = NULL, *title = NULL, *subtitle = NULL, *metric = "wl";
    enum { HEATMAP, COST, ACCURACY, WLDIST } mode = HEATMAP;
    static const char *const mode_name[] = {"heatmaps", "--cost-curve", "--accuracy",
                                            "--wl-dist"};
    int curve = 0, partial = 0, width = 0, height = 0, no_subtitle = 0, cum_only = 0, smooth = 0;
    double vmin = NAN, vmax = NAN;
    static const struct option opts[] = {{"output", required_argument, 0, 'o'},
                                         {"metric", required_argument, 0, 'm'},
                                         {"title", required_argument, 0, 't'},
                                         {"subtitle", required_argument, 0, 's'},
                                         {"no-subtitle", no_argument, 0, 'S'},
                                         {"vmin", required_argument, 0, 'a'},
                                         {"vmax", required_argument, 0, 'b'},
                                         {"width", required_argument, 0, 'w'},
                                         {"height", required_argument, 0, 'H'},
                                         {"cost-curve", no_argument, 0, 'c'},
                                         {"accuracy", no_argument, 0, 'A'},
                                         {"wl-dist", no_argument, 0, 'D'},
                                         {"cumulative-only", no_argument, 0, 'C'},
                                         {"smooth", required_argument, 0, 'n'},
                                         {"partial", no_argument, 0, 'p'},
                                         {"help", no_argument, 0, 'h'},
                                         {"version", no_argument, 0, 'V'},
                                         {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "o:m:h", opts, NULL)) != -1) {
        switch (c) {
        case 'o': output = optarg; break;
        case 'm': metric = optarg; break;
        case 't': title = optarg; break;
        case 's': subtitle = optarg; break;
        case 'S': no_subtitle = 1; break;
        case 'a':
        case 'b':
            if (!parse_double(optarg, c == 'a' ? &vmin : &vmax)) {
                fprintf(stderr, "adapt-heatmap: --%s expects a number, got '%s'\n",
                        c == 'a' ? "vmin" : "vmax", optarg);
                return 2;
            }
            break;
        case 'w':
        case 'H':
        case 'n':
            if (!parse_int(optarg, c == 'w' ? &width : c == 'H' ? &height : &smooth)) {
                fprintf(stderr, "adapt-heatmap: --%s expects a positive integer, got '%s'\n",
                        c == 'w' ? "width" : c == 'H' ? "height" : "smooth", optarg);
                return 2;
            }
            break;
        case 'C': cum_only = 1; break;
        case 'c':
        case 'A':
        case 'D':
            if (mode != HEATMAP && mode != (c == 'c' ? COST : c == 'A' ? ACCURACY : WLDIST)) {
                fprintf(stderr, "adapt-heatmap: --cost-curve, --accuracy and --wl-dist "
                                "exclude each other\n");
                return 2;
            }
            mode = c == 'c' ? COST : c == 'A' ? ACCURACY : WLDIST;
            curve = mode == COST || mode == ACCURACY;
            break;
        case 'p': partial = 1; break;
        case 'h': usage(stdout); return 0;
        case 'V': adapt_version_print(stdout, "adapt-heatmap"); return 0;
        default: usage(stderr); return 2;
        }
    }
    int n = argc - optind;
    if (!isnan(vmin) && !isnan(vmax) && !(vmin < vmax)) {
        fprintf(stderr, "adapt-heatmap: --vmin %g must be below --vmax %g\n", vmin, vmax);
        return 2;
    }
    if (curve && (!isnan(vmin) || !isnan(vmax))) {
        fprintf(stderr, "adapt-heatmap: --vmin and --vmax set the colour scale of a heatmap or "
                        "--wl-dist; %s has none\n",
                mode_name[mode]);
        return 2;
    }
    if (mode != COST && (cum_only || smooth)) {
        fprintf(stderr, "adapt-heatmap: --%s applies to --cost-curve, not to %s\n",
                cum_only ? "cumulative-only" : "smooth", mode_name[mode]);
        return 2;
    }
    if (cum_only && smooth) {
        fprintf(stderr, "adapt-heatmap: --smooth smooths each interval's line, which "
                        "--cumulative-only leaves out\n");
        return 2;
    }
    if (subtitle && no_subtitle) {
        fprintf(stderr, "adapt-heatmap: --subtitle and --no-subtitle exclude each other\n");
        return 2;
    }
    if (no_subtitle) subtitle = "";
    if (!curve && n > 1) {
        fprintf(stderr, "adapt-heatmap: %s shows one run, and %d traces were given: draw "
                        "one file per trace, or compare runs with --cost-curve or --accuracy\n",
                mode == WLDIST ? "--wl-dist" : "a heatmap", n);
        return 2;
    }
    if (!output || n < 1) {
        fprintf(stderr, "adapt-heatmap: %s\n",
                n < 1 ? "no trace given" : "no output file given (-o FILE)");
        usage(stderr);
        return 2;
    }
    unsigned flags = partial ? ADAPT_TRACE_LOAD_PARTIAL : 0;
    if (!curve) {
        struct perf_heatmap_opts o;
        perf_heatmap_opts_init(&o);
        if (perf_metric_parse(metric, &o.metric) != ADAPT_OK) {
            fprintf(stderr, "adapt-heatmap: %s\n", adapt_error_message());
            return 2;
        }
        if (width) o.width = width;
        o.title = title;
        o.subtitle = subtitle;
        o.vmin = vmin;
        o.vmax = vmax;
        struct adapt_trace *t;
        struct perf_params pp;
        perf_params_init(&pp);
        if (perf_trace_load(argv[optind], flags, &pp, NULL, &t, NULL) != ADAPT_OK) {
            fprintf(stderr, "adapt-heatmap: %s\n", adapt_error_message());
            return 1;
        }
        enum adapt_status st = mode == WLDIST ? perf_wldist_write(t, &o, output)
                                              : perf_heatmap_write(t, &o, output);
        adapt_trace_free(t);
        if (st != ADAPT_OK) {
            fprintf(stderr, "adapt-heatmap: %s\n", adapt_error_message());
            return 1;
        }
        return 0;
    }
    struct perf_params p;
    perf_params_init(&p);
    struct perf_run **runs = calloc((size_t)n, sizeof *runs);
    struct adapt_trace **traces = calloc((size_t)n, sizeof *traces);
    const char **names = calloc((size_t)n, sizeof *names);
    int rc = 1, nr = 0;
    if (!runs || !traces || !names) goto free_runs;
    for (int i = 0; i < n; i++) {
        struct adapt_trace **tp = mode == ACCURACY ? &traces[nr] : NULL;
        enum adapt_status st = perf_trace_load(argv[optind + i], flags, &p, NULL, tp, &runs[nr]);
        if (st != ADAPT_OK) {
            fprintf(stderr, "adapt-heatmap: %s\n", adapt_error_message());
            goto free_runs;
        }
        nr++;
    }
    /* the legends name runs as adapt-perf's rows do */
    if (perf_runs_label(runs, nr) != ADAPT_OK) {
        fprintf(stderr, "adapt-heatmap: %s\n", adapt_error_message());
        goto free_runs;
    }
    for (int i = 0; i < nr; i++) names[i] = runs[i]->name;
    struct perf_curve_opts o;
    perf_curve_opts_init(&o);
    if (width) o.width = width;
    if (height) o.height = height;
    o.title = title;
    o.subtitle = subtitle;
    o.cumulative_only = cum_only;
    if (smooth) o.smooth = smooth;
    enum adapt_status st =
        mode == ACCURACY
            ? perf_accuracy_write((const struct adapt_trace *const *)traces, names, nr, &o, output)
            : perf_costcurve_write(runs, nr, &o, output);
    if (st != ADAPT_OK) {
        fprintf(stderr, "adapt-heatmap: %s\n", adapt_error_message());
        goto free_runs;
    }
    rc = 0;
free_runs:
    for (int i = 0; i < nr; i++) {
        perf_run_free(runs[i]);
        if (traces) adapt_trace_free(traces[i]);
    }
    free(runs);
    free(traces);
    free(names);
    return rc;
}
