/* src/plot/colour.c: the heatmaps' colour map (see plot.h).
 *
 * Perceptually uniform and viridis-like: a path through OKLab (Ottosson
 * 2020) with lightness rising linearly, chroma reduced where sRGB cannot
 * show it, resampled to PLOT_CMAP_N colours at equal OKLab arc length and
 * built once (pthread_once).
 */
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "src/plot/internal.h"
#include "src/plot/plot.h"

static double cmap[PLOT_CMAP_N][3];
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

/* Samples the path densely and keeps PLOT_CMAP_N colours at equal OKLab arc length. */
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
    for (int k = 0; k < PLOT_CMAP_N; k++) {
        double target = arc[DENSE - 1] * k / (PLOT_CMAP_N - 1);
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
    double x = t * (PLOT_CMAP_N - 1);
    int i = (int)x;
    if (i >= PLOT_CMAP_N - 1) i = PLOT_CMAP_N - 2;
    double f = x - i;
    for (int c = 0; c < 3; c++) rgb[c] = cmap[i][c] + f * (cmap[i + 1][c] - cmap[i][c]);
}
