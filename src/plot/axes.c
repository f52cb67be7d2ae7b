/* src/plot/axes.c: the text and axis toolkit of the figures and their atomic output
 * (see src/plot/internal.h).
 *
 * Layout is computed first on a scratch surface (text extents), then the
 * figure is drawn on a PNG image surface or an SVG or PDF surface of the
 * computed size (1 px = 1 pt), written atomically (src/base/fileio.h). Font metrics are not hinted,
 * so the layout does not depend on the surface.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cairo-pdf.h>
#include <cairo-svg.h>
#include <cairo.h>

#include "src/base/fileio.h"
#include "src/plot/internal.h"
#include "src/plot/plot.h"

enum adapt_status plot_image_kind(const char *path, enum plot_image *k)
{
    const char *dot = strrchr(path, '.');
    if (dot && !strcasecmp(dot, ".png")) *k = PLOT_PNG;
    else if (dot && !strcasecmp(dot, ".svg")) *k = PLOT_SVG;
    else if (dot && !strcasecmp(dot, ".pdf")) *k = PLOT_PDF;
    else
        return ADAPT_ERROR(ADAPT_EINVAL,
                           "%s: unknown picture type (expected a .png, .svg or .pdf name)", path);
    return ADAPT_OK;
}

enum adapt_status plot_check_trace_picture(const struct adapt_trace *t, int width,
                                           const char *path, enum plot_image *kind)
{
    enum adapt_status st;
    if ((st = plot_image_kind(path, kind)) != ADAPT_OK) return st;
    if (t->n_steps < 1)
        return ADAPT_ERROR(ADAPT_EINVAL, "%s: no step records: nothing to draw", t->path);
    if (t->header.n_units < 1)
        return ADAPT_ERROR(ADAPT_EINVAL, "%s: the header lists no precision units", t->path);
    if (width < 500 || width > 4000)
        return ADAPT_ERROR(ADAPT_EINVAL, "picture width %d outside 500..4000", width);
    return ADAPT_OK;
}

enum adapt_status plot_check_runs_picture(int n, int width, int height, const char *path,
                                          enum plot_image *kind)
{
    enum adapt_status st;
    if ((st = plot_image_kind(path, kind)) != ADAPT_OK) return st;
    if (n < 1) return ADAPT_ERROR(ADAPT_EINVAL, "%s: no runs to draw", path);
    if (width < 500 || width > 4000 || height < 300 || height > 4000)
        return ADAPT_ERROR(ADAPT_EINVAL, "picture size %dx%d outside 500..4000 x 300..4000",
                           width, height);
    return ADAPT_OK;
}

double plot_box_x(const struct plot_box *b, double x)
{
    return b->x0 + (b->x1 - b->x0) * (x - b->xlo) / (b->xhi - b->xlo);
}

double plot_box_y(const struct plot_box *b, double y)
{
    return b->y1 - (b->y1 - b->y0) * (y - b->ylo) / (b->yhi - b->ylo);
}

void plot_x_ticks(cairo_t *cr, const struct plot_box *b, int max_ticks, int integer,
                  double y_top)
{
    char buf[64];
    double ticks[64];
    int nt = plot_nice_ticks(b->xlo, b->xhi, max_ticks, integer, ticks);
    for (int i = 0; i < nt; i++) {
        double x = floor(plot_box_x(b, ticks[i])) + 0.5;
        cairo_set_source_rgb(cr, 0.25, 0.25, 0.25);
        cairo_move_to(cr, x, y_top);
        cairo_line_to(cr, x, b->y1 + 6);
        cairo_stroke(cr);
        plot_format_tick(buf, sizeof buf, ticks[i]);
        cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
        plot_text_at(cr, x, b->y1 + 20, buf, 0.5, 1);
    }
}

void plot_box_axes(cairo_t *cr, const struct plot_box *b, int x_px, int x_integer)
{
    char buf[64];
    double ticks[64];
    plot_set_font(cr, 12, 0);
    cairo_set_line_width(cr, 1);
    int nt = plot_nice_ticks(b->ylo, b->yhi, 7, 0, ticks);
    for (int i = 0; i < nt; i++) {
        double y = floor(plot_box_y(b, ticks[i])) + 0.5;
        cairo_set_source_rgb(cr, 0.9, 0.9, 0.9);
        cairo_move_to(cr, b->x0, y);
        cairo_line_to(cr, b->x1, y);
        cairo_stroke(cr);
        cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
        plot_format_tick(buf, sizeof buf, ticks[i]);
        plot_text_at(cr, b->x0 - 8, y, buf, 1, 0.5);
    }
    plot_x_ticks(cr, b, (int)((b->x1 - b->x0) / x_px), x_integer, b->y1);
    cairo_set_source_rgb(cr, 0.25, 0.25, 0.25);
    cairo_rectangle(cr, b->x0 - 0.5, b->y0 - 0.5, b->x1 - b->x0 + 1, b->y1 - b->y0 + 1);
    cairo_stroke(cr);
}

int plot_nice_ticks(double lo, double hi, int max, int integer, double *out)
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

void plot_format_tick(char *buf, size_t n, double v)
{
    if (fabs(v - round(v)) < 1e-9) snprintf(buf, n, "%.0f", v);
    else snprintf(buf, n, "%g", v);
}

void plot_set_font(cairo_t *cr, double size, int bold)
{
    cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL,
                           bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_font_size(cr, size);
}

double plot_text_width(cairo_t *cr, const char *s)
{
    cairo_text_extents_t e;
    cairo_text_extents(cr, s, &e);
    return e.x_advance;
}

/* ------------------------------------------------------------ SVG text
 *
 * cairo's SVG surface writes text as glyph outlines, which an editor or a
 * journal's typesetting cannot change or search. So on an SVG surface the
 * figures' text is not drawn by cairo: each string is kept (its anchor point
 * in page coordinates, rotation, size, weight and colour) and written as an SVG
 * <text> element, with text-anchor for the alignment, before the closing
 * </svg>. Text is the last thing drawn in every figure, so drawing it on top
 * changes nothing. The layout still measures text with cairo's metrics. */

struct svg_text {
    double x, y, angle, size, rgb[3];
    int bold, anchor; /* 0 start, 1 middle, 2 end */
    char *s;
};

struct svg_texts {
    struct svg_text *v;
    int n, cap, failed;
};

static const cairo_user_data_key_t svg_texts_key;

static void svg_text_keep(cairo_t *cr, struct svg_texts *st, double x, double y, const char *s,
                          double ax)
{
    if (st->n == st->cap) {
        int cap = st->cap ? 2 * st->cap : 64;
        struct svg_text *v = realloc(st->v, (size_t)cap * sizeof *v);
        if (!v) {
            st->failed = 1;
            return;
        }
        st->v = v;
        st->cap = cap;
    }
    struct svg_text *t = &st->v[st->n];
    cairo_matrix_t m;
    cairo_get_matrix(cr, &m);
    t->x = x;
    t->y = y;
    cairo_user_to_device(cr, &t->x, &t->y);
    t->angle = atan2(m.yx, m.xx) * 180 / M_PI;
    cairo_matrix_t fm;
    cairo_get_font_matrix(cr, &fm);
    t->size = hypot(fm.xx, fm.yx) * hypot(m.xx, m.yx);
    t->bold = cairo_toy_font_face_get_weight(cairo_get_font_face(cr)) == CAIRO_FONT_WEIGHT_BOLD;
    t->anchor = ax <= 0.25 ? 0 : ax >= 0.75 ? 2 : 1;
    double a;
    if (cairo_pattern_get_rgba(cairo_get_source(cr), &t->rgb[0], &t->rgb[1], &t->rgb[2], &a) !=
        CAIRO_STATUS_SUCCESS)
        t->rgb[0] = t->rgb[1] = t->rgb[2] = 0;
    if (!(t->s = adapt_strdup(s))) {
        st->failed = 1;
        return;
    }
    st->n++;
}

static void svg_texts_free(struct svg_texts *st)
{
    for (int i = 0; i < st->n; i++) free(st->v[i].s);
    free(st->v);
}

/* s with XML's five special characters escaped and control characters (not allowed in XML)
 * as '?'. */
static void svg_escaped(FILE *f, const char *s)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '&') fputs("&amp;", f);
        else if (c == '<') fputs("&lt;", f);
        else if (c == '>') fputs("&gt;", f);
        else if (c == '"') fputs("&quot;", f);
        else if (c == '\'') fputs("&apos;", f);
        else if (c < 0x20 || c == 0x7f) fputc('?', f);
        else fputc(c, f);
    }
}

static void svg_texts_write(FILE *f, const struct svg_texts *st)
{
    static const char *const anchor[] = {"start", "middle", "end"};
    for (int i = 0; i < st->n; i++) {
        const struct svg_text *t = &st->v[i];
        fprintf(f,
                "<text x=\"%.2f\" y=\"%.2f\" font-family=\"DejaVu Sans, sans-serif\" "
                "font-size=\"%.2f\"%s text-anchor=\"%s\" fill=\"rgb(%d,%d,%d)\"",
                t->x, t->y, t->size, t->bold ? " font-weight=\"bold\"" : "", anchor[t->anchor],
                (int)lround(255 * t->rgb[0]), (int)lround(255 * t->rgb[1]),
                (int)lround(255 * t->rgb[2]));
        if (fabs(t->angle) > 1e-9)
            fprintf(f, " transform=\"rotate(%.2f %.2f %.2f)\"", t->angle, t->x, t->y);
        fputs(" xml:space=\"preserve\">", f);
        svg_escaped(f, t->s);
        fputs("</text>\n", f);
    }
}

void plot_text_at(cairo_t *cr, double x, double y, const char *s, double ax, double ay)
{
    cairo_text_extents_t e;
    cairo_font_extents_t fe;
    cairo_text_extents(cr, s, &e);
    cairo_font_extents(cr, &fe);
    double cap = fe.ascent * 0.72;
    double by = ay >= 1 ? y : y + cap * 0.5;
    struct svg_texts *st = cairo_surface_get_user_data(cairo_get_target(cr), &svg_texts_key);
    if (st) {
        svg_text_keep(cr, st, x, by, s, ax);
        return;
    }
    cairo_move_to(cr, x - ax * e.x_advance, by);
    cairo_show_text(cr, s);
}

void plot_text_vertical(cairo_t *cr, double x, double y, const char *s)
{
    cairo_save(cr);
    cairo_translate(cr, x, y);
    cairo_rotate(cr, -M_PI / 2);
    plot_text_at(cr, 0, 0, s, 0.5, 0.5);
    cairo_restore(cr);
}

void plot_titles(cairo_t *cr, const char *title, const char *subtitle)
{
    cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
    plot_set_font(cr, 17, 1);
    plot_text_at(cr, 16, 30, title, 0, 1);
    if (!subtitle || !*subtitle) return;
    plot_set_font(cr, 12, 0);
    cairo_set_source_rgb(cr, 0.35, 0.35, 0.35);
    plot_text_at(cr, 16, 50, subtitle, 0, 1);
}

double plot_top(const char *subtitle)
{
    return subtitle && *subtitle ? 86 : 66;
}

cairo_t *plot_scratch_context(cairo_surface_t **s)
{
    *s = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, 4, 4);
    cairo_t *cr = cairo_create(*s);
    cairo_font_options_t *fo = cairo_font_options_create();
    cairo_font_options_set_hint_metrics(fo, CAIRO_HINT_METRICS_OFF);
    cairo_set_font_options(cr, fo);
    cairo_font_options_destroy(fo);
    return cr;
}

static cairo_status_t to_stream(void *closure, const unsigned char *data, unsigned int len)
{
    return fwrite(data, 1, len, closure) == len ? CAIRO_STATUS_SUCCESS : CAIRO_STATUS_WRITE_ERROR;
}

/* The SVG document cairo wrote to mem (n bytes), with the kept text before its closing
 * </svg>, to f. */
static cairo_status_t svg_with_text(FILE *f, const char *mem, size_t n,
                                    const struct svg_texts *st)
{
    const char *end = NULL;
    for (size_t i = n >= 6 ? n - 6 + 1 : 0; i-- > 0 && !end;)
        if (!memcmp(mem + i, "</svg>", 6)) end = mem + i;
    if (!end || st->failed) return CAIRO_STATUS_NO_MEMORY;
    fwrite(mem, 1, (size_t)(end - mem), f);
    svg_texts_write(f, st);
    fwrite(end, 1, n - (size_t)(end - mem), f);
    return ferror(f) ? CAIRO_STATUS_WRITE_ERROR : CAIRO_STATUS_SUCCESS;
}

enum adapt_status plot_render(const char *path, enum plot_image kind, int w, int h,
                              plot_draw_fn draw, void *ctx)
{
    struct adapt_atomic a;
    enum adapt_status st = adapt_atomic_open(&a, path);
    if (st) return st;
    cairo_surface_t *s;
    struct svg_texts texts = {0};
    char *mem = NULL;
    size_t mem_n = 0;
    FILE *svg = kind == PLOT_SVG ? open_memstream(&mem, &mem_n) : NULL;
    if (kind == PLOT_SVG && !svg) {
        adapt_atomic_abort(&a);
        return ADAPT_ERROR(ADAPT_ENOMEM, "%s: cannot write the picture: out of memory", path);
    }
    if (kind == PLOT_SVG) {
        s = cairo_svg_surface_create_for_stream(to_stream, svg, w, h);
        cairo_surface_set_user_data(s, &svg_texts_key, &texts, NULL);
    } else if (kind == PLOT_PDF) s = cairo_pdf_surface_create_for_stream(to_stream, a.f, w, h);
    else s = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, w, h);
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
    if (cs == CAIRO_STATUS_SUCCESS && kind == PLOT_PNG)
        cs = cairo_surface_write_to_png_stream(s, to_stream, a.f);
    cairo_surface_finish(s);
    if (cs == CAIRO_STATUS_SUCCESS) cs = cairo_surface_status(s);
    cairo_surface_destroy(s);
    if (svg) {
        if (fclose(svg) != 0 && cs == CAIRO_STATUS_SUCCESS) cs = CAIRO_STATUS_NO_MEMORY;
        if (cs == CAIRO_STATUS_SUCCESS) cs = svg_with_text(a.f, mem, mem_n, &texts);
        free(mem);
        svg_texts_free(&texts);
    }
    if (cs != CAIRO_STATUS_SUCCESS) {
        adapt_atomic_abort(&a);
        return ADAPT_ERROR(ADAPT_EIO, "%s: cannot write the picture: %s", path,
                           cairo_status_to_string(cs));
    }
    return adapt_atomic_commit(&a);
}

void plot_colour_bar(cairo_t *cr, double x, double cy0, double cy1, double vmin, double vmax,
                     int integer, const char *label, int arrow_lo, int arrow_hi)
{
    char buf[64];
    double ticks[64];
    double cb_w = 18;
    cairo_save(cr);
    cairo_set_antialias(cr, CAIRO_ANTIALIAS_NONE);
    for (int i = 0; i < 256; i++) {
        double rgb[3];
        perf_colormap(i / 255.0, rgb);
        cairo_set_source_rgb(cr, rgb[0], rgb[1], rgb[2]);
        double ya = cy1 - (cy1 - cy0) * (i + 1) / 256.0, yb = cy1 - (cy1 - cy0) * i / 256.0;
        cairo_rectangle(cr, x, floor(ya), cb_w, ceil(yb) - floor(ya));
        cairo_fill(cr);
    }
    cairo_restore(cr);
    cairo_set_line_width(cr, 1);
    cairo_set_source_rgb(cr, 0.25, 0.25, 0.25);
    cairo_rectangle(cr, x - 0.5, cy0 - 0.5, cb_w + 1, cy1 - cy0 + 1);
    cairo_stroke(cr);
    /* an arrow in the end's colour where values beyond the scale were clamped */
    for (int end = 0; end < 2; end++) {
        if (!(end ? arrow_hi : arrow_lo)) continue;
        double rgb[3], yb = end ? cy0 - 0.5 : cy1 + 0.5, tip = end ? yb - 12 : yb + 12;
        perf_colormap(end, rgb);
        cairo_move_to(cr, x - 0.5, yb);
        cairo_line_to(cr, x + cb_w + 0.5, yb);
        cairo_line_to(cr, x + 0.5 * cb_w, tip);
        cairo_close_path(cr);
        cairo_set_source_rgb(cr, rgb[0], rgb[1], rgb[2]);
        cairo_fill_preserve(cr);
        cairo_set_source_rgb(cr, 0.25, 0.25, 0.25);
        cairo_stroke(cr);
    }
    plot_set_font(cr, 12, 0);
    cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
    int maxt = (int)((cy1 - cy0) / 28) + 1;
    int nt = plot_nice_ticks(vmin, vmax, maxt < 2 ? 2 : maxt, integer, ticks);
    double tick_w = 0;
    for (int i = 0; i < nt; i++) {
        double y = cy1 - (cy1 - cy0) * (ticks[i] - vmin) / (vmax - vmin);
        y = floor(y) + 0.5;
        cairo_move_to(cr, x + cb_w, y);
        cairo_line_to(cr, x + cb_w + 5, y);
        cairo_stroke(cr);
        plot_format_tick(buf, sizeof buf, ticks[i]);
        plot_text_at(cr, x + cb_w + 8, y, buf, 0, 0.5);
        if (plot_text_width(cr, buf) > tick_w) tick_w = plot_text_width(cr, buf);
    }
    plot_set_font(cr, 13, 0);
    plot_text_vertical(cr, x + cb_w + 8 + tick_w + 16, 0.5 * (cy0 + cy1), label);
}
