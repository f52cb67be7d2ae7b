/* src/bench/bench_kl.c: adapt-bench kl, the push-down's KL test on a model's weights.
 *
 *   adapt-bench kl --model lenet5 [--weights FILE] [--seed S] [--bins 50,100,150]
 *                  [--samples 0,4096] [--noise C]
 *
 * For every precision unit (conv / linear weight) and every histogram resolution r and sample
 * size m (0 = the whole tensor; otherwise m elements at stride n / m, as the push-down takes
 * them) it prints KL(P||Q) of nearest rounding at FL = 4 .. 28 (WL = FL + 8, so no value
 * saturates) next to the sampling noise of an r-bin histogram of m values:
 *   expected  (r - 1) / (2 m), the mean KL of an m-sample histogram against the distribution
 *             it is drawn from (2 m KL is asymptotically chi-square with r - 1 degrees of
 *             freedom);
 *   measured  the symmetrised KL between the histograms of the two interleaved halves of the
 *             sample (even and odd positions), which by the same argument has mean
 *             4 (r - 1) / (2 m) for independent draws; divided by 4 here, to put it on the
 *             scale of "expected".
 * and the smallest FL whose KL is <= 0 (the strict test) and <= C (r - 1) / (2 m) (the noise
 * test, C = --noise, default 1). Weights: the initialisation of adapt-train (seed S, gain 0.5)
 * or a checkpoint (model.safetensors of a run). doc/algorithms.md uses these figures.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/quant/quant.h"
#include "src/bench/bench.h"
#include "src/net/net.h"
#include "src/base/safetensors.h"

#define KL_MAX_LIST 16

static void usage(FILE *f)
{
    fprintf(f, "Usage: adapt-bench kl --model NAME [--weights FILE] [--seed S] [--bins LIST]\n"
               "                      [--samples LIST] [--noise C]\n"
               "  --model    lenet5, alexnet_mnist, alexnet_cifar, resnet20\n"
               "  --weights  safetensors checkpoint (default: the initialisation)\n"
               "  --seed     initialisation seed (default 1)\n"
               "  --bins     histogram resolutions (default 50,100,150)\n"
               "  --samples  sample sizes, 0 = whole tensor (default 0,4096)\n"
               "  --noise    multiple of (r - 1) / (2 m) counted as lossless (default 1)\n");
}

static int parse_ints(const char *t, long *v, int max)
{
    int n = 0;
    char *end;
    while (*t && n < max) {
        v[n++] = strtol(t, &end, 10);
        if (end == t) return -1;
        t = *end == ',' ? end + 1 : end;
        if (*end && *end != ',') return -1;
    }
    return n;
}

/* KL of two count histograms of the same bins, +inf when p has counts where q has none. */
static double kl_halves(const float *w, size_t m, size_t stride, double lo, double hi, int bins,
                        uint64_t *h)
{
    if (stride < 2) return NAN;
    quant_hist(w, m, stride, lo, hi, bins, QUANT_HIST_CLAMP, h);
    quant_hist(w + stride / 2, m, stride, lo, hi, bins, QUANT_HIST_CLAMP, h + bins);
    double a = quant_kl_counts(h, h + bins, bins), b = quant_kl_counts(h + bins, h, bins);
    return 0.5 * (a + b); /* symmetrised */
}

int adapt_bench_kl(int argc, char **argv)
{
    const char *model = NULL, *weights = NULL;
    long seed = 1, bins[KL_MAX_LIST] = {50, 100, 150}, samples[KL_MAX_LIST] = {0, 4096};
    int nbins = 3, nsamples = 2;
    double noise = 1.0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
        if (!v) {
            fprintf(stderr, "adapt-bench kl: %s needs a value\n", a);
            return 2;
        }
        i++;
        if (!strcmp(a, "--model")) model = v;
        else if (!strcmp(a, "--weights")) weights = v;
        else if (!strcmp(a, "--seed")) seed = strtol(v, NULL, 10);
        else if (!strcmp(a, "--noise")) noise = strtod(v, NULL);
        else if (!strcmp(a, "--bins")) {
            if ((nbins = parse_ints(v, bins, KL_MAX_LIST)) < 1) {
                fprintf(stderr, "adapt-bench kl: --bins %s: expected integers like 50,100\n", v);
                return 2;
            }
        } else if (!strcmp(a, "--samples")) {
            if ((nsamples = parse_ints(v, samples, KL_MAX_LIST)) < 1) {
                fprintf(stderr, "adapt-bench kl: --samples %s: expected integers like 0,4096\n", v);
                return 2;
            }
        } else {
            fprintf(stderr, "adapt-bench kl: unknown option %s\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (!model) {
        usage(stderr);
        return 2;
    }
    struct adapt_net *net = adapt_model_build(model, 10);
    if (!net || adapt_net_finalize(net, 1) != ADAPT_OK) {
        fprintf(stderr, "adapt-bench kl: %s\n", adapt_error_message());
        adapt_net_free(net);
        return 1;
    }
    adapt_net_init_params(net, (uint64_t)seed, 0.5);
    if (weights) {
        struct adapt_safetensors *f;
        if (adapt_safetensors_load(&f, weights) != ADAPT_OK) {
            fprintf(stderr, "adapt-bench kl: %s\n", adapt_error_message());
            adapt_net_free(net);
            return 1;
        }
        for (int k = 0; k < net->nparam; k++) {
            struct adapt_param *pp = net->param[k];
            int64_t shape[8];
            for (int d = 0; d < pp->value.ndim; d++) shape[d] = pp->value.dim[d];
            if (adapt_safetensors_copy(f, pp->name, ADAPT_ST_F32, pp->value.ndim, shape,
                                       pp->value.data) != ADAPT_OK) {
                fprintf(stderr, "adapt-bench kl: %s: %s\n", weights, adapt_error_message());
                adapt_safetensors_free(f);
                adapt_net_free(net);
                return 1;
            }
        }
        adapt_safetensors_free(f);
    }
    printf("# model %s, weights %s; KL(P||Q) of nearest rounding at FL (WL = FL + 8)\n", model,
           weights ? weights : "initialisation");
    printf("%-12s %8s %4s %7s %10s %10s %5s %5s  KL at FL = 4 6 8 ... 24\n", "unit", "n", "r",
           "m", "expected", "measured", "FL=0", "FL<=C");
    uint64_t *h = malloc(2 * 4096 * sizeof *h);
    for (int u = 0; u < net->nunits; u++) {
        const struct adapt_param *w = &net->nodes[net->unit_node[u]].layer->param[0];
        size_t n = w->value.numel;
        for (int bi = 0; bi < nbins; bi++)
            for (int si = 0; si < nsamples; si++) {
                int r = (int)bins[bi];
                size_t m = samples[si] > 0 && (size_t)samples[si] < n ? (size_t)samples[si] : n;
                size_t stride = m < n ? n / m : 1;
                struct quant_range rg;
                float *xs = malloc(sizeof(float) * m);
                for (size_t i = 0; i < m; i++) xs[i] = w->value.data[i * stride];
                quant_range_compute(xs, m, &rg);
                free(xs);
                double expected = (r - 1) / (2.0 * (double)m);
                /* two halves of the sample: stride 2 * stride, m / 2 values each */
                double measured = 0.25 * kl_halves(w->value.data, m / 2, 2 * stride, rg.min, rg.max,
                                                  r > 4096 ? 4096 : r, h);
                double kl[32];
                int fl0 = -1, flc = -1;
                for (int fl = 4; fl <= 28; fl++) {
                    struct quant_spec s;
                    quant_spec_init(&s, QUANT_FORMAT_FIXED);
                    s.wl = fl + 8 > 32 ? 32 : fl + 8;
                    s.fl = fl;
                    s.rounding = QUANT_ROUND_NEAREST;
                    struct quant_key key = {1, 0, 0};
                    quant_kl(&s, w->value.data, n, m < n ? m : 0, r, key, &kl[fl]);
                    if (fl0 < 0 && kl[fl] <= 0.0) fl0 = fl;
                    if (flc < 0 && kl[fl] <= noise * expected) flc = fl;
                }
                printf("%-12s %8zu %4d %7zu %10.3g %10.3g %5d %5d ", w->name, n, r, m, expected,
                       measured, fl0, flc);
                for (int fl = 4; fl <= 24; fl += 2) printf(" %.2g", kl[fl]);
                printf("\n");
            }
    }
    free(h);
    adapt_net_free(net);
    return 0;
}
