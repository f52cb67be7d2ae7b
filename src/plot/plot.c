/* src/plot/plot.c: heatmaps and cost curves with cairo (see plot.h).
 *
 * Layout is computed first on a scratch surface (text extents), then the
 * figure is drawn on a PNG image surface or an SVG surface of the computed
 * size, written atomically (src/base/fileio.h).
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <cairo-svg.h>
#include <cairo.h>

#include "src/plot/plot.h"
#include "src/base/fileio.h"

/* ============================================================== colour map */

#define CMAP_N 256

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

static double cmap[CMAP_N][3];
static pthread_once_t cmap_once = PTHREAD_ONCE_INIT;

static double srgb_gamma(double v)
{
    return v <= 0.0031308 ? 12.92 * v : 1.055 * pow(v, 1.0 / 2.4) - 0.055;
}

static double srgb_linear(double v)
{
    return v <= 0.04045 ? v / 12.92 : pow((v + 0.055) / 1.055, 2.4);
}

/* OKLab to linear sRGB (Ottosson 2020). */
static void oklab_to_linear(const double lab[3], double rgb[3])
{
    double l_ = lab[0] + 0.3963377774 * lab[1] + 0.2158037573 * lab[2];
    double m_ = lab[0] - 0.1055613458 * lab[1] - 0.0638541728 * lab[2];
    double s_ = lab[0] - 0.0894841775 * lab[1] - 1.2914855480 * lab[2];
    double l = l_ * l_ * l_, m = m_ * m_ * m_, s = s_ * s_ * s_;
    rgb[0] = 4.0767416621 * l - 3.3077115913 * m + 0.2309699292 * s;
    rgb[1] = -1.2684380046 * l + 2.6097574011 * m - 0.3413193965 * s;
    rgb[2] = -0.0041960863 * l - 0.7034186147 * m + 1.7076147010 * s;
}

void perf_srgb_to_oklab(const double rgb[3], double lab[3])
{
    double r = srgb_linear(rgb[0]), g = srgb_linear(rgb[1]), b = srgb_linear(rgb[2]);
    double l = cbrt(0.4122214708 * r + 0.5363325363 * g + 0.0514459929 * b);
    double m = cbrt(0.2119034982 * r + 0.6806995451 * g + 0.1073969566 * b);
    double s = cbrt(0.0883024619 * r + 0.2817188376 * g + 0.6299787005 * b);
    lab[0] = 0.2104542553 * l + 0.7936177850 * m - 0.0040720468 * s;
    lab[1] = 1.9779984951 * l - 2.4285922050 * m + 0.4505937099 * s;
    lab[2] = 0.0259040371 * l + 0.7827717662 * m - 0.8086757660 * s;
}

static int in_gamut(const double rgb[3])
{
    for (int i = 0; i < 3; i++)
        if (rgb[i] < -1e-9 || rgb[i] > 1 + 1e-9) return 0;
    return 1;
}

/* The design path: OKLCh with lightness 0.27 -> 0.91 (linear), hue 295 deg
 * (blue-purple) -> 100 deg (yellow), chroma 0.12, easing to 0.09 through
 * the blues and teals (where sRGB runs out of red) and rising to 0.17 in
 * the yellows; reduced further only where sRGB cannot show it. */
static void cmap_path(double t, double lab[3])
{
    double L = 0.27 + 0.64 * t, h = (295.0 - 195.0 * t) * M_PI / 180.0;
    double C = t < 0.6 ? 0.12 - 0.03 * sin(M_PI * t / 0.6) : 0.12 + 0.05 * (t - 0.6) / 0.4;
    double lo = 0, hi = C, rgb[3];
    double trial[3] = {L, C * cos(h), C * sin(h)};
    oklab_to_linear(trial, rgb);
    if (!in_gamut(rgb)) {
        for (int it = 0; it < 40; it++) {
            double mid = 0.5 * (lo + hi);
            trial[1] = mid * cos(h);
            trial[2] = mid * sin(h);
            oklab_to_linear(trial, rgb);
            if (in_gamut(rgb)) lo = mid;
            else hi = mid;
        }
        trial[1] = lo * cos(h);
        trial[2] = lo * sin(h);
    }
    memcpy(lab, trial, sizeof trial);
}

/* Samples the path densely and keeps CMAP_N colours at equal OKLab arc length. */
static void cmap_build(void)
{
    enum { DENSE = 4096 };
    static double lab[DENSE][3], arc[DENSE];
    for (int i = 0; i < DENSE; i++) {
        cmap_path((double)i / (DENSE - 1), lab[i]);
        if (i == 0) arc[i] = 0;
        else {
            double d0 = lab[i][0] - lab[i - 1][0], d1 = lab[i][1] - lab[i - 1][1],
                   d2 = lab[i][2] - lab[i - 1][2];
            arc[i] = arc[i - 1] + sqrt(d0 * d0 + d1 * d1 + d2 * d2);
        }
    }
    int j = 0;
    for (int k = 0; k < CMAP_N; k++) {
        double target = arc[DENSE - 1] * k / (CMAP_N - 1);
        while (j < DENSE - 2 && arc[j + 1] < target) j++;
        double f = arc[j + 1] > arc[j] ? (target - arc[j]) / (arc[j + 1] - arc[j]) : 0;
        if (f < 0) f = 0;
        if (f > 1) f = 1;
        double x[3], rgb[3];
        for (int c = 0; c < 3; c++) x[c] = lab[j][c] + f * (lab[j + 1][c] - lab[j][c]);
        oklab_to_linear(x, rgb);
        for (int c = 0; c < 3; c++) {
            double v = rgb[c] < 0 ? 0 : rgb[c] > 1 ? 1 : rgb[c];
            cmap[k][c] = srgb_gamma(v);
        }
    }
}

void perf_colormap(double t, double rgb[3])
{
    pthread_once(&cmap_once, cmap_build);
    if (!(t >= 0)) t = 0;
    if (t > 1) t = 1;
    double x = t * (CMAP_N - 1);
    int i = (int)x;
    if (i >= CMAP_N - 1) i = CMAP_N - 2;
    double f = x - i;
    for (int c = 0; c < 3; c++) rgb[c] = cmap[i][c] + f * (cmap[i + 1][c] - cmap[i][c]);
}

/* ================================================================ helpers */

enum adapt_status perf_metric_parse(const char *s, enum perf_metric *out)
{
    static const char *const names[] = {"wl", "fl", "lb", "r", "sparsity"};
    for (int i = 0; i < 5; i++)
        if (!strcmp(s, names[i])) {
            *out = (enum perf_metric)i;
            return ADAPT_OK;
        }
    return ADAPT_ERROR(ADAPT_EINVAL, "unknown metric '%s' (expected wl, fl, lb, r or sparsity)", s);
}

const char *perf_metric_name(enum perf_metric m)
{
    static const char *const names[] = {"wl", "fl", "lb", "r", "sparsity"};
    return names[m];
}

static const char *metric_title(enum perf_metric m)
{
    static const char *const t[] = {"Word length", "Fraction length", "Lookback",
                                    "Histogram resolution", "Weight sparsity"};
    return t[m];
}

static const char *metric_axis(enum perf_metric m)
{
    static const char *const t[] = {"word length (bits)", "fraction length (bits)",
                                    "lookback (steps)", "resolution (bins)",
                                    "sparsity (fraction of zero weights)"};
    return t[m];
}

static int metric_integer(enum perf_metric m) { return m != PERF_METRIC_LB && m != PERF_METRIC_SPARSITY; }

static double metric_value(const struct adapt_trace_unit_state *u, enum perf_metric m)
{
    switch (m) {
    case PERF_METRIC_WL: return u->wl;
    case PERF_METRIC_FL: return u->fl;
    case PERF_METRIC_LB: return u->lb;
    case PERF_METRIC_R: return u->r < 0 ? NAN : u->r;
    case PERF_METRIC_SPARSITY: return u->sparsity;
    }
    return NAN;
}

enum image_kind { IMAGE_PNG, IMAGE_SVG };

static enum adapt_status image_kind(const char *path, enum image_kind *k)
{
    const char *dot = strrchr(path, '.');
    if (dot && !strcasecmp(dot, ".png")) *k = IMAGE_PNG;
    else if (dot && !strcasecmp(dot, ".svg")) *k = IMAGE_SVG;
    else
        return ADAPT_ERROR(ADAPT_EINVAL, "%s: unknown picture type (expected a .png or .svg name)",
                           path);
    return ADAPT_OK;
}

/* "Nice" tick values (1, 2, 2.5, 5 x 10^k) covering [lo, hi]; integer steps
 * when integer. Returns the count (<= max). */
static int nice_ticks(double lo, double hi, int max, int integer, double *out)
{
    if (max < 2) max = 2;
    double span = hi - lo;
    if (!(span > 0)) {
        out[0] = lo;
        return 1;
    }
    double raw = span / (max - 1), p = pow(10, floor(log10(raw))), step = 10 * p;
    static const double mult[4] = {1, 2, 2.5, 5};
    for (int i = 0; i < 4; i++)
        if (mult[i] * p >= raw) {
            step = mult[i] * p;
            break;
        }
    if (integer && step < 1) step = 1;
    if (integer) step = ceil(step);
    int n = 0;
    for (double v = ceil(lo / step - 1e-9) * step; v <= hi + 1e-9 * step && n < 64; v += step)
        out[n++] = fabs(v) < 1e-12 * step ? 0 : v;
    return n;
}

static void format_tick(char *buf, size_t n, double v)
{
    if (fabs(v - round(v)) < 1e-9) snprintf(buf, n, "%.0f", v);
    else snprintf(buf, n, "%g", v);
}

static void set_font(cairo_t *cr, double size, int bold)
{
    cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL,
                           bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_font_size(cr, size);
}

static double text_width(cairo_t *cr, const char *s)
{
    cairo_text_extents_t e;
    cairo_text_extents(cr, s, &e);
    return e.x_advance;
}

/* Draws s anchored at (x, y): ax 0 left, 0.5 centre, 1 right end at x;
 * ay 1 puts the baseline at y, otherwise the cap height is centred on y. */
static void text_at(cairo_t *cr, double x, double y, const char *s, double ax, double ay)
{
    cairo_text_extents_t e;
    cairo_font_extents_t fe;
    cairo_text_extents(cr, s, &e);
    cairo_font_extents(cr, &fe);
    double cap = fe.ascent * 0.72;
    double by = ay >= 1 ? y : y + cap * 0.5;
    cairo_move_to(cr, x - ax * e.x_advance, by);
    cairo_show_text(cr, s);
}

/* Text rotated by -90 degrees, centred on (x, y). */
static void text_vertical(cairo_t *cr, double x, double y, const char *s)
{
    cairo_save(cr);
    cairo_translate(cr, x, y);
    cairo_rotate(cr, -M_PI / 2);
    text_at(cr, 0, 0, s, 0.5, 0.5);
    cairo_restore(cr);
}

static cairo_t *scratch_context(cairo_surface_t **s)
{
    *s = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, 4, 4);
    cairo_t *cr = cairo_create(*s);
    cairo_font_options_t *fo = cairo_font_options_create();
    cairo_font_options_set_hint_metrics(fo, CAIRO_HINT_METRICS_OFF);
    cairo_set_font_options(cr, fo);
    cairo_font_options_destroy(fo);
    return cr;
}

typedef void (*draw_fn)(cairo_t *cr, void *ctx);

static cairo_status_t to_stream(void *closure, const unsigned char *data, unsigned int len)
{
    return fwrite(data, 1, len, closure) == len ? CAIRO_STATUS_SUCCESS : CAIRO_STATUS_WRITE_ERROR;
}

/* Creates the surface, draws, and writes the picture atomically. */
static enum adapt_status render(const char *path, enum image_kind kind, int w, int h, draw_fn draw,
                                void *ctx)
{
    struct adapt_atomic a;
    enum adapt_status st = adapt_atomic_open(&a, path);
    if (st) return st;
    cairo_surface_t *s = kind == IMAGE_SVG
                             ? cairo_svg_surface_create_for_stream(to_stream, a.f, w, h)
                             : cairo_image_surface_create(CAIRO_FORMAT_ARGB32, w, h);
    cairo_t *cr = cairo_create(s);
    cairo_font_options_t *fo = cairo_font_options_create();
    cairo_font_options_set_hint_metrics(fo, CAIRO_HINT_METRICS_OFF);
    cairo_set_font_options(cr, fo);
    cairo_font_options_destroy(fo);
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_paint(cr);
    draw(cr, ctx);
    cairo_status_t cs = cairo_status(cr);
    cairo_destroy(cr);
    if (cs == CAIRO_STATUS_SUCCESS && kind == IMAGE_PNG)
        cs = cairo_surface_write_to_png_stream(s, to_stream, a.f);
    cairo_surface_finish(s);
    if (cs == CAIRO_STATUS_SUCCESS) cs = cairo_surface_status(s);
    cairo_surface_destroy(s);
    if (cs != CAIRO_STATUS_SUCCESS) {
        adapt_atomic_abort(&a);
        return ADAPT_ERROR(ADAPT_EIO, "%s: cannot write the picture: %s", path,
                           cairo_status_to_string(cs));
    }
    return adapt_atomic_commit(&a);
}

/* ================================================================= heatmap */

void perf_heatmap_opts_init(struct perf_heatmap_opts *o)
{
    o->metric = PERF_METRIC_WL;
    o->width = 1100;
    o->title = NULL;
}

struct heatmap {
    const struct adapt_trace *t;
    enum perf_metric metric;
    int W, H;
    char title[512], subtitle[512];
    double label_font;
    double x0, x1, y0, y1, row_h; /* plot area */
    double cb_x;                  /* colour bar left edge */
    int rows, cols;
    double *val;                  /* (rows, cols), NaN = not recorded */
    double vmin, vmax;
    int any_nan;
    double s_hi;                  /* last step */
};

static double hm_x(const struct heatmap *h, double step)
{
    return h->x0 + (h->x1 - h->x0) * step / h->s_hi;
}

static void heatmap_draw(cairo_t *cr, void *ctx)
{
    struct heatmap *h = ctx;
    const struct adapt_trace *t = h->t;
    char buf[64];
    double ticks[64];
    /* title */
    cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
    set_font(cr, 17, 1);
    text_at(cr, 16, 30, h->title, 0, 1);
    set_font(cr, 12, 0);
    cairo_set_source_rgb(cr, 0.35, 0.35, 0.35);
    text_at(cr, 16, 50, h->subtitle, 0, 1);
    /* cells, one run of equal colour at a time */
    cairo_save(cr);
    cairo_set_antialias(cr, CAIRO_ANTIALIAS_NONE);
    for (int r = 0; r < h->rows; r++) {
        double y = h->y0 + r * h->row_h;
        int c = 0;
        while (c < h->cols) {
            double v = h->val[r * h->cols + c];
            int idx = isnan(v) ? -1 : (int)lround((v - h->vmin) / (h->vmax - h->vmin) * (CMAP_N - 1));
            int e = c + 1;
            while (e < h->cols) {
                double w = h->val[r * h->cols + e];
                int j = isnan(w) ? -1 : (int)lround((w - h->vmin) / (h->vmax - h->vmin) * (CMAP_N - 1));
                if (j != idx) break;
                e++;
            }
            double rgb[3] = {0.86, 0.86, 0.86};
            if (idx >= 0) perf_colormap((double)idx / (CMAP_N - 1), rgb);
            cairo_set_source_rgb(cr, rgb[0], rgb[1], rgb[2]);
            double xa = h->x0 + (h->x1 - h->x0) * c / h->cols,
                   xb = h->x0 + (h->x1 - h->x0) * e / h->cols;
            cairo_rectangle(cr, floor(xa), floor(y), ceil(xb) - floor(xa), ceil(y + h->row_h) - floor(y));
            cairo_fill(cr);
            c = e;
        }
    }
    cairo_restore(cr);
    /* frame */
    cairo_set_line_width(cr, 1);
    cairo_set_source_rgb(cr, 0.25, 0.25, 0.25);
    cairo_rectangle(cr, h->x0 - 0.5, h->y0 - 0.5, h->x1 - h->x0 + 1, h->y1 - h->y0 + 1);
    cairo_stroke(cr);
    /* unit names, network order from the top */
    set_font(cr, h->label_font, 0);
    cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
    for (int r = 0; r < h->rows; r++) {
        char lab[160];
        text_at(cr, h->x0 - 8, h->y0 + (r + 0.5) * h->row_h, unit_label(t, r, lab, sizeof lab), 1,
                0.5);
    }
    set_font(cr, 13, 0);
    text_vertical(cr, 24, 0.5 * (h->y0 + h->y1), "precision unit (network order)");
    /* step axis */
    set_font(cr, 12, 0);
    int nt = nice_ticks(0, h->s_hi, (int)((h->x1 - h->x0) / 90), 1, ticks);
    for (int i = 0; i < nt; i++) {
        double x = floor(hm_x(h, ticks[i])) + 0.5;
        cairo_move_to(cr, x, h->y1 + 0.5);
        cairo_line_to(cr, x, h->y1 + 6);
        cairo_stroke(cr);
        format_tick(buf, sizeof buf, ticks[i]);
        text_at(cr, x, h->y1 + 20, buf, 0.5, 1);
    }
    set_font(cr, 13, 0);
    text_at(cr, 0.5 * (h->x0 + h->x1), h->y1 + 42, "optimizer step", 0.5, 1);
    /* epoch marks above the plot, labels thinned so they never overlap */
    set_font(cr, 11, 0);
    cairo_set_source_rgb(cr, 0.3, 0.3, 0.3);
    double last_end = -1e9;
    int every = 1;
    if (t->n_epochs > 0) {
        double gap = (h->x1 - h->x0) / t->n_epochs;
        snprintf(buf, sizeof buf, "%d", t->n_epochs);
        double need = text_width(cr, buf) + 8;
        while (every * gap < need) every = every < 5 ? every + 1 : every * 2;
    }
    text_at(cr, h->x0 - 8, h->y0 - 10, "epoch", 1, 1);
    for (int e = 0; e < t->n_epochs; e++) {
        double x = floor(hm_x(h, (double)t->epochs[e].step)) + 0.5;
        cairo_move_to(cr, x, h->y0 - 5);
        cairo_line_to(cr, x, h->y0 - 0.5);
        cairo_stroke(cr);
        if ((e + 1) % every) continue;
        snprintf(buf, sizeof buf, "%d", e + 1);
        double w = text_width(cr, buf);
        if (x - w / 2 > last_end + 4 && x + w / 2 <= h->cb_x - 4) {
            text_at(cr, x, h->y0 - 10, buf, 0.5, 1);
            last_end = x + w / 2;
        }
    }
    /* colour bar */
    double cb_w = 18, cy0 = h->y0, cy1 = h->y1;
    cairo_save(cr);
    cairo_set_antialias(cr, CAIRO_ANTIALIAS_NONE);
    for (int i = 0; i < 256; i++) {
        double rgb[3];
        perf_colormap(i / 255.0, rgb);
        cairo_set_source_rgb(cr, rgb[0], rgb[1], rgb[2]);
        double ya = cy1 - (cy1 - cy0) * (i + 1) / 256.0, yb = cy1 - (cy1 - cy0) * i / 256.0;
        cairo_rectangle(cr, h->cb_x, floor(ya), cb_w, ceil(yb) - floor(ya));
        cairo_fill(cr);
    }
    cairo_restore(cr);
    cairo_set_source_rgb(cr, 0.25, 0.25, 0.25);
    cairo_rectangle(cr, h->cb_x - 0.5, cy0 - 0.5, cb_w + 1, cy1 - cy0 + 1);
    cairo_stroke(cr);
    set_font(cr, 12, 0);
    cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
    int maxt = (int)((cy1 - cy0) / 28) + 1;
    nt = nice_ticks(h->vmin, h->vmax, maxt < 2 ? 2 : maxt, metric_integer(h->metric), ticks);
    double tick_w = 0;
    for (int i = 0; i < nt; i++) {
        double y = cy1 - (cy1 - cy0) * (ticks[i] - h->vmin) / (h->vmax - h->vmin);
        y = floor(y) + 0.5;
        cairo_move_to(cr, h->cb_x + cb_w, y);
        cairo_line_to(cr, h->cb_x + cb_w + 5, y);
        cairo_stroke(cr);
        format_tick(buf, sizeof buf, ticks[i]);
        text_at(cr, h->cb_x + cb_w + 8, y, buf, 0, 0.5);
        if (text_width(cr, buf) > tick_w) tick_w = text_width(cr, buf);
    }
    set_font(cr, 13, 0);
    text_vertical(cr, h->cb_x + cb_w + 8 + tick_w + 16, 0.5 * (cy0 + cy1), metric_axis(h->metric));
    if (h->any_nan) {
        cairo_set_source_rgb(cr, 0.86, 0.86, 0.86);
        cairo_rectangle(cr, h->cb_x, cy1 + 30, cb_w, 12);
        cairo_fill(cr);
        cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
        set_font(cr, 12, 0);
        text_at(cr, h->cb_x + cb_w + 6, cy1 + 36, "not recorded", 0, 0.5);
    }
}

enum adapt_status perf_heatmap_write(const struct adapt_trace *t, const struct perf_heatmap_opts *o,
                                     const char *path)
{
    enum image_kind kind = IMAGE_PNG;
    enum adapt_status st;
    if ((st = image_kind(path, &kind)) != ADAPT_OK) return st;
    if (t->n_steps < 1)
        return ADAPT_ERROR(ADAPT_EINVAL, "%s: no step records: nothing to draw", t->path);
    if (t->header.n_units < 1)
        return ADAPT_ERROR(ADAPT_EINVAL, "%s: the header lists no precision units", t->path);
    if (o->width < 500 || o->width > 4000)
        return ADAPT_ERROR(ADAPT_EINVAL, "picture width %d outside 500..4000", o->width);
    struct heatmap h;
    memset(&h, 0, sizeof h);
    h.t = t;
    h.metric = o->metric;
    h.rows = t->header.n_units;
    h.s_hi = (double)t->steps[t->n_steps - 1].step;
    if (!(h.s_hi > 0))
        return ADAPT_ERROR(ADAPT_EINVAL, "%s: the last step record has step %.0f", t->path, h.s_hi);
    /* value range */
    h.vmin = INFINITY;
    h.vmax = -INFINITY;
    for (int64_t i = 0; i < t->n_steps; i++)
        for (int u = 0; u < h.rows; u++) {
            double v = metric_value(&t->steps[i].units[u], o->metric);
            if (isnan(v)) continue;
            if (v < h.vmin) h.vmin = v;
            if (v > h.vmax) h.vmax = v;
        }
    if (!(h.vmin <= h.vmax))
        return ADAPT_ERROR(ADAPT_EINVAL,
                           "%s: metric '%s' is not recorded in any step record (policy %s)",
                           t->path, perf_metric_name(o->metric), t->header.policy);
    if (h.vmax - h.vmin < 1e-12) {
        /* one value: a band around it, so the colour bar shows one tick */
        double pad = metric_integer(o->metric) ? 0.5 : (fabs(h.vmin) > 0 ? 0.05 * fabs(h.vmin) : 0.05);
        h.vmin -= pad;
        h.vmax += pad;
    }
    /* text and layout */
    if (o->title) snprintf(h.title, sizeof h.title, "%s", o->title);
    else {
        /* the configuration file's stem and, for AdaPT, its compat mode */
        const char *cf = t->header.config_file && t->header.config_file[0]
                             ? t->header.config_file : NULL;
        const char *stem = cf ? (strrchr(cf, '/') ? strrchr(cf, '/') + 1 : cf) : NULL;
        size_t sl = stem ? strlen(stem) : 0;
        if (sl > 4 && !strcmp(stem + sl - 4, ".ini")) sl -= 4;
        const char *compat = NULL;
        if (t->header.policy && !strcmp(t->header.policy, "adapt")) {
            compat = t->header.cfg.compat ? t->header.cfg.compat : "corrected";
        }
        snprintf(h.title, sizeof h.title, "%s per unit: %.*s%s%s on %s, policy %s%s%s%s",
                 metric_title(o->metric), (int)sl, stem ? stem : "", stem ? ", " : "",
                 t->header.model.name, t->header.dataset.name,
                 t->header.policy, compat ? " (" : "", compat ? compat : "", compat ? ")" : "");
    }
    snprintf(h.subtitle, sizeof h.subtitle, "%s: %lld step records up to step %.0f, %d epochs",
             t->path, (long long)t->n_steps, h.s_hi, t->n_epochs);
    cairo_surface_t *ss;
    cairo_t *cr = scratch_context(&ss);
    h.W = o->width;
    h.row_h = 420.0 / h.rows;
    if (h.row_h > 40) h.row_h = 40;
    if (h.row_h < 16) h.row_h = 16;
    h.label_font = fmin(13.0, 0.72 * h.row_h);
    set_font(cr, h.label_font, 0);
    double lw = 0;
    for (int u = 0; u < h.rows; u++) {
        char lab[160];
        lw = fmax(lw, text_width(cr, unit_label(t, u, lab, sizeof lab)));
    }
    set_font(cr, 11, 0);
    lw = fmax(lw, text_width(cr, "epoch"));
    set_font(cr, 12, 0);
    double tw = text_width(cr, h.metric == PERF_METRIC_SPARSITY ? "0.25" : "150") + 4;
    cairo_destroy(cr);
    cairo_surface_destroy(ss);
    h.x0 = 44 + lw + 10;
    h.x1 = h.W - (16 + 26 + tw + 8 + 18 + 24);
    h.cb_x = h.x1 + 24;
    h.y0 = 86;
    double ph = h.rows * h.row_h;
    if (ph < 180) {
        ph = 180;
        h.row_h = ph / h.rows;
    }
    h.y1 = h.y0 + ph;
    h.H = (int)ceil(h.y1 + 62);
    if (h.x1 - h.x0 < 200)
        return ADAPT_ERROR(ADAPT_EINVAL, "picture width %d leaves no room for the plot", h.W);
    /* columns: at most one per pixel; a column shows the mean of the step
     * records in its step span, or the next record's value (its state
     * holds since the record before it) */
    int px = (int)(h.x1 - h.x0);
    h.cols = t->n_steps < px ? (int)t->n_steps : px;
    h.val = malloc(sizeof(double) * (size_t)h.rows * h.cols);
    double *sum = calloc((size_t)h.rows * h.cols, sizeof(double));
    int *cnt = calloc((size_t)h.rows * h.cols, sizeof(int));
    if (!h.val || !sum || !cnt) {
        free(h.val);
        free(sum);
        free(cnt);
        return ADAPT_ERROR(ADAPT_ENOMEM, "%s: out of memory drawing the heatmap", path);
    }
    for (int64_t i = 0; i < t->n_steps; i++) {
        int c = (int)ceil((double)t->steps[i].step / h.s_hi * h.cols) - 1;
        if (c < 0) c = 0;
        if (c >= h.cols) c = h.cols - 1;
        for (int u = 0; u < h.rows; u++) {
            double v = metric_value(&t->steps[i].units[u], o->metric);
            if (isnan(v)) continue;
            sum[u * h.cols + c] += v;
            cnt[u * h.cols + c]++;
        }
    }
    /* a column is empty when no record falls in it; records without the
     * metric leave it NaN */
    int *any = calloc((size_t)h.cols, sizeof(int));
    if (!any) {
        free(h.val);
        free(sum);
        free(cnt);
        return ADAPT_ERROR(ADAPT_ENOMEM, "%s: out of memory drawing the heatmap", path);
    }
    for (int64_t i = 0; i < t->n_steps; i++) {
        int c = (int)ceil((double)t->steps[i].step / h.s_hi * h.cols) - 1;
        any[c < 0 ? 0 : c >= h.cols ? h.cols - 1 : c] = 1;
    }
    for (int u = 0; u < h.rows; u++) {
        double next = NAN;
        for (int c = h.cols - 1; c >= 0; c--) {
            int k = u * h.cols + c;
            if (any[c]) next = cnt[k] ? sum[k] / cnt[k] : NAN;
            h.val[k] = next;
            if (isnan(next)) h.any_nan = 1;
        }
    }
    free(any);
    free(sum);
    free(cnt);
    if (h.any_nan) h.H += 24;
    st = render(path, kind, h.W, h.H, heatmap_draw, &h);
    free(h.val);
    return st;
}

/* ============================================================== cost curve */

void perf_curve_opts_init(struct perf_curve_opts *o)
{
    o->width = 1000;
    o->height = 560;
    o->title = NULL;
}

/* Okabe-Ito palette without black and yellow (too light on white). */
static const double palette[6][3] = {{0.902, 0.624, 0.000}, {0.337, 0.706, 0.914},
                                     {0.000, 0.620, 0.451}, {0.000, 0.447, 0.698},
                                     {0.835, 0.369, 0.000}, {0.800, 0.475, 0.655}};

struct curve {
    struct perf_run *const *runs;
    int n;
    int W, H;
    const char *title;
    double x0, x1, y0, y1;
    double xmax, ymax;
    int max_pts;
};

static double cv_x(const struct curve *c, double e) { return c->x0 + (c->x1 - c->x0) * e / c->xmax; }
static double cv_y(const struct curve *c, double v) { return c->y1 - (c->y1 - c->y0) * v / c->ymax; }

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

static void curve_draw(cairo_t *cr, void *ctx)
{
    struct curve *c = ctx;
    char buf[256];
    double ticks[64];
    cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
    set_font(cr, 17, 1);
    text_at(cr, 16, 30, c->title ? c->title : "Training cost relative to float32", 0, 1);
    set_font(cr, 12, 0);
    cairo_set_source_rgb(cr, 0.35, 0.35, 0.35);
    text_at(cr, 16, 50,
            "solid: each logged interval (Cq / C32 of the same steps); dashed: cumulative since "
            "the start of training",
            0, 1);
    /* grid and axes */
    set_font(cr, 12, 0);
    cairo_set_line_width(cr, 1);
    int nt = nice_ticks(0, c->ymax, 7, 0, ticks);
    for (int i = 0; i < nt; i++) {
        double y = floor(cv_y(c, ticks[i])) + 0.5;
        cairo_set_source_rgb(cr, 0.9, 0.9, 0.9);
        cairo_move_to(cr, c->x0, y);
        cairo_line_to(cr, c->x1, y);
        cairo_stroke(cr);
        cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
        format_tick(buf, sizeof buf, ticks[i]);
        text_at(cr, c->x0 - 8, y, buf, 1, 0.5);
    }
    nt = nice_ticks(0, c->xmax, (int)((c->x1 - c->x0) / 80), 0, ticks);
    for (int i = 0; i < nt; i++) {
        double x = floor(cv_x(c, ticks[i])) + 0.5;
        cairo_set_source_rgb(cr, 0.25, 0.25, 0.25);
        cairo_move_to(cr, x, c->y1);
        cairo_line_to(cr, x, c->y1 + 6);
        cairo_stroke(cr);
        format_tick(buf, sizeof buf, ticks[i]);
        cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
        text_at(cr, x, c->y1 + 20, buf, 0.5, 1);
    }
    cairo_set_source_rgb(cr, 0.25, 0.25, 0.25);
    cairo_rectangle(cr, c->x0 - 0.5, c->y0 - 0.5, c->x1 - c->x0 + 1, c->y1 - c->y0 + 1);
    cairo_stroke(cr);
    set_font(cr, 13, 0);
    cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
    text_at(cr, 0.5 * (c->x0 + c->x1), c->y1 + 42, "training progress (epochs)", 0.5, 1);
    text_vertical(cr, 22, 0.5 * (c->y0 + c->y1), "cost relative to float32");
    /* float32 reference */
    double y1 = floor(cv_y(c, 1.0)) + 0.5;
    cairo_set_source_rgb(cr, 0.35, 0.35, 0.35);
    double dash[2] = {2, 3};
    cairo_set_dash(cr, dash, 2, 0);
    cairo_move_to(cr, c->x0, y1);
    cairo_line_to(cr, c->x1, y1);
    cairo_stroke(cr);
    cairo_set_dash(cr, NULL, 0, 0);
    set_font(cr, 11, 0);
    text_at(cr, c->x0 + 6, y1 - 5, "float32 = 1", 0, 1);
    /* curves */
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
        for (int i = 0; i < n; i++) {
            if (i == 0) cairo_move_to(cr, cv_x(c, x[i]), cv_y(c, y[i]));
            else cairo_line_to(cr, cv_x(c, x[i]), cv_y(c, y[i]));
        }
        if (n == 1) cairo_line_to(cr, cv_x(c, 0), cv_y(c, y[0]));
        cairo_stroke(cr);
        double d[2] = {7, 4};
        cairo_set_dash(cr, d, 2, 0);
        cairo_set_line_width(cr, 1.4);
        for (int i = 0; i < n; i++) {
            if (i == 0) cairo_move_to(cr, cv_x(c, x[i]), cv_y(c, cum[i]));
            else cairo_line_to(cr, cv_x(c, x[i]), cv_y(c, cum[i]));
        }
        cairo_stroke(cr);
        cairo_set_dash(cr, NULL, 0, 0);
    }
    cairo_restore(cr);
    free(x);
    /* legend, top right inside the plot */
    set_font(cr, 12, 0);
    double lw = 0;
    for (int r = 0; r < c->n; r++) {
        snprintf(buf, sizeof buf, "%s (%s): SU1 %.2f", c->runs[r]->name, c->runs[r]->policy,
                 c->runs[r]->su1);
        lw = fmax(lw, text_width(cr, buf));
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
        text_at(cr, bx + 38, yy, buf, 0, 0.5);
    }
}

enum adapt_status perf_costcurve_write(struct perf_run *const *runs, int n,
                                       const struct perf_curve_opts *o, const char *path)
{
    enum image_kind kind = IMAGE_PNG;
    enum adapt_status st;
    struct perf_curve_opts def;
    if (!o) {
        perf_curve_opts_init(&def);
        o = &def;
    }
    if ((st = image_kind(path, &kind)) != ADAPT_OK) return st;
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
    c.x0 = 70;
    c.x1 = c.W - 24;
    c.y0 = 70;
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
    int nt = nice_ticks(0, ymax * 1.12, 7, 0, t);
    c.ymax = t[nt - 1] >= ymax * 1.12 ? t[nt - 1] : ymax * 1.12;
    return render(path, kind, c.W, c.H, curve_draw, &c);
}
