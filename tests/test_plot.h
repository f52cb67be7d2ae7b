/* tests/test_plot.h: what the source files of tests/test_plot share: the test's temporary
 * folder, synthetic runs, checks of the pictures drawn (PNG, SVG, PDF, pixels, colour levels)
 * and the functions by which each file adds its tests to the program's one test case (created
 * in tests/test_plot.c). */
#ifndef ADAPT_TESTS_TEST_PLOT_H
#define ADAPT_TESTS_TEST_PLOT_H

#include <check.h>
#include <stdint.h>
#include <string.h>

#include <cairo.h>

#include "src/base/status.h"
#include "src/trace/trace.h"

/* where the running test draws (ADAPT_PLOT_KEEP, or a temporary folder removed after it) */
extern char tmpdir[256];

#define ck_assert_msg_has(s)                                                                       \
    ck_assert_msg(strstr(adapt_error_message(), (s)) != NULL, "message \"%s\" lacks \"%s\"",       \
                  adapt_error_message(), (s))

/* A synthetic AdaPT-like run of a built-in model: `epochs` epochs of 120
 * steps; each unit starts at <8,4>, is pushed down and up on its own
 * lookback period (random walk keyed by seed), its resolution drifts in
 * [50,150] and its sparsity grows towards 0.3. fp32: the float32 policy
 * (WL 32, nothing else recorded). */
void synth_write(const char *path, const char *model, int epochs, int fp32);
/* PNG signature, then the IHDR chunk first with the expected size. */
void check_png(const char *path, uint32_t w, uint32_t h);
/* Well-formed XML (tags nest and close, attributes quoted) whose root is an
 * <svg> element of the expected width and height in points. */
void check_svg(const char *path, int w, int h);
/* A PDF file: the header first, the end-of-file marker last. */
void check_pdf(const char *path);
/* A PNG as an opaque image surface. */
cairo_surface_t *png_load(const char *path);
/* The 8-bit sRGB colour of pixel (x, y). */
void surface_pixel(cairo_surface_t *s, int x, int y, int rgb[3]);
/* Pixel (x, y) has the colour map's colour at level k of PLOT_CMAP_N = 256 (within one
 * 8-bit step: cairo rounds the components). */
void check_level(const char *path, int x, int y, int k);
/* Whether any pixel of the rectangle [x0,x1) x [y0,y1) is not white. */
int png_inked(const char *path, int x0, int y0, int x1, int y1);
/* The trace at path (a Check failure if it does not load). */
struct adapt_trace *load(const char *path);

void test_plot_add_heatmap(TCase *tc); /* test_plot_heatmap.c */
void test_plot_add_curves(TCase *tc);  /* test_plot_curves.c */

#endif
