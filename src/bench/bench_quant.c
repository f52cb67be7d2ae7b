/* src/bench/bench_quant.c: adapt-bench quant, rounding-kernel throughput next to a plain copy.
 *
 *   adapt-bench quant [--json] [--sizes 4K,64K,1M,16M,64M] [--formats fixed(8,4),fp16,...]
 *                     [--threads N] [--time SECONDS] [--mask] [--no-stats] [--bits-free]
 *
 * For every size, format and rounding mode (nearest, stochastic with 32 random bits per element,
 * stochastic16 with 16: struct quant_spec's sr_bits) it times quant_array (out of place, with
 * counters, as the engine calls it) and, right before it, a plain copy loop over the same arrays
 * with the same threads; each figure is the best of several timed batches. Bandwidth counts 8
 * bytes per element (one float read, one written); ratio = format GB/s / copy GB/s.
 * --bits-free times the stochastic rows with one piece of random bits made beforehand and handed
 * to every piece (quant_sr_bits_reuse): what the rounding costs without the generator, a bound on
 * what any cheaper random-bit scheme could reach (not a valid stochastic rounding).
 */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <omp.h>

#include "src/quant/quant.h"
#include "src/quant/quant_cpu.h"
#include "src/base/status.h"
#include "src/bench/bench.h"
#include "src/bench/gemm_cuda.h"
#include "src/cuda/device.h"

#define BENCH_MAX_SIZES 16
#define BENCH_MAX_FORMATS 32

static const char *default_sizes = "4K,64K,1M,16M,64M";
static const char *default_formats =
    "fixed(8,4),fixed(32,28),bfp(8),muppet(8),fp16,bf16,e4m3,e5m2,float(4,3),mxfp8_e4m3,"
    "mxfp8_e5m2,mxfp6_e2m3,mxfp6_e3m2,mxfp4,mxint8";

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: adapt-bench quant [--json] [--sizes LIST] [--formats LIST] [--threads N]\n"
            "                         [--time SECONDS] [--mask] [--no-stats] [--bits-free]\n"
            "                         [--device cpu|cuda]\n"
            "  --sizes    element counts, K/M suffixes (default %s)\n"
            "  --formats  formats as in configs, ';' or ',' between them (default %s)\n"
            "  --threads  OpenMP threads for the kernels and the copy (default: OMP_NUM_THREADS)\n"
            "  --device   cpu (default) or cuda: the GPU kernels against a device-to-device copy\n"
            "  --time     seconds per timed batch (default 0.02); best of 5 batches\n"
            "  --mask     also write the saturation mask\n"
            "  --no-stats do not count saturated / flushed / zero elements\n"
            "  --bits-free stochastic rows with one piece of random bits reused for every piece:\n"
            "             the rounding without the Philox generator (timing only; CPU)\n",
            default_sizes, default_formats);
}

static int parse_size(const char *t, size_t *out)
{
    char *end;
    double v = strtod(t, &end);
    if (end == t || v <= 0) return -1;
    if (*end == 'K' || *end == 'k') v *= 1024, end++;
    else if (*end == 'M' || *end == 'm') v *= 1024 * 1024, end++;
    else if (*end == 'G' || *end == 'g') v *= 1024.0 * 1024 * 1024, end++;
    if (*end) return -1;
    *out = (size_t)v;
    return 0;
}

/* Split a list at commas that are not inside parentheses. */
static int split_list(char *text, char **items, int max)
{
    int n = 0, depth = 0;
    char *start = text;
    for (char *p = text;; p++) {
        if (*p == '(') depth++;
        if (*p == ')') depth--;
        if ((*p == ',' && depth == 0) || *p == ';' || *p == '\0') {
            int last = *p == '\0';
            *p = '\0';
            if (*start) {
                if (n == max) return -1;
                items[n++] = start;
            }
            if (last) break;
            start = p + 1;
        }
    }
    return n;
}

/* Row label of rounding mode 0 (nearest), 1 (stochastic, 32 random bits per element) or 2
 * (stochastic, 16). */
static const char *rounding_name(int mode)
{
    return mode == 2 ? "stochastic16" : mode ? "stochastic" : "nearest";
}

static void copy_loop(const float *x, float *y, size_t n)
{
#pragma omp parallel for schedule(static) if (n > 65536)
    for (size_t i = 0; i < n; i++) y[i] = x[i];
}

/* Best seconds per call of fn over 5 batches of at least `batch` seconds each. */
struct job {
    int is_copy;
    const struct quant_spec *spec;
    const float *x;
    float *y;
    uint8_t *mask;
    size_t n;
    int stats;
    int failed;
};

static void job_run(struct job *j, uint64_t rep)
{
    if (j->is_copy) {
        copy_loop(j->x, j->y, j->n);
        return;
    }
    struct quant_key key = {2385, 16, rep * j->n};
    struct quant_stats st = {0, 0, 0};
    if (quant_array(j->spec, j->x, j->y, j->n, key, j->mask, j->stats ? &st : NULL) != ADAPT_OK)
        j->failed = 1;
}

static double job_time(struct job *j, double batch)
{
    double best = 1e30;
    uint64_t rep = 0;
    job_run(j, rep++); /* warm up */
    for (int b = 0; b < 5; b++) {
        double t0 = adapt_bench_now(), t;
        uint64_t calls = 0;
        do {
            job_run(j, rep++);
            calls++;
            t = adapt_bench_now() - t0;
        } while (t < batch);
        if (t / (double)calls < best) best = t / (double)calls;
    }
    return best;
}

/* --device cuda: the device rounding kernels against a device-to-device copy, one run */
static int bench_quant_gpu(const struct quant_spec *specs, char **names, int nfmt,
                           const size_t *sizes, int nsizes, double batch, int json)
{
    char dev[256] = "", why[256] = "";
    double gb[2 * BENCH_MAX_SIZES];
    if (!quant_cuda_built() || adapt_cuda_device_count(dev, sizeof dev) == 0) {
        fprintf(stderr, "adapt-bench quant: --device cuda: %s\n",
                quant_cuda_built() ? dev : "this build has no CUDA");
        return 1;
    }
    if (!json) {
        printf(
            "adapt-bench quant --device cuda: best of 5 x %.3f s, no mask, counted on the device\n",
            batch);
        printf("%-14s %-12s %12s %10s %12s %7s\n", "format", "rounding", "elements", "GB/s",
               "copy GB/s", "ratio");
    }
    for (int f = 0; f < nfmt; f++)
        for (int mode = 0; mode < 3; mode++) {
            struct quant_spec s = specs[f];
            s.rounding = mode ? QUANT_ROUND_STOCHASTIC : QUANT_ROUND_NEAREST;
            s.sr_bits = mode == 2 ? QUANT_SR_BITS_16 : QUANT_SR_BITS_32;
            if (adapt_bench_quant_cuda(&s, sizes, nsizes, batch, gb, dev, sizeof dev, why,
                                       sizeof why)) {
                fprintf(stderr, "adapt-bench quant: --device cuda: %s\n", why);
                return 1;
            }
            for (int i = 0; i < nsizes; i++) {
                const char *rname = rounding_name(mode);
                if (json) {
                    json_t *o = json_pack("{s:s,s:s,s:s,s:s,s:I,s:f,s:f,s:f}", "bench", "quant",
                                          "device", dev, "format", names[f], "rounding", rname,
                                          "elements", (json_int_t)sizes[i], "gb_per_s", gb[2 * i],
                                          "copy_gb_per_s", gb[2 * i + 1], "ratio",
                                          gb[2 * i] / gb[2 * i + 1]);
                    char *line = o ? json_dumps(o, JSON_COMPACT) : NULL;
                    json_decref(o);
                    if (line) printf("%s\n", line);
                    free(line);
                } else {
                    printf("%-14s %-12s %12zu %10.1f %12.1f %7.3f\n", names[f], rname, sizes[i],
                           gb[2 * i], gb[2 * i + 1], gb[2 * i] / gb[2 * i + 1]);
                }
            }
        }
    if (!json) printf("device: %s\n", dev);
    return 0;
}

int adapt_bench_quant(int argc, char **argv)
{
    int json = 0, want_mask = 0, stats = 1, threads = 0, cuda = 0, bits_free = 0;
    double batch = 0.02;
    char sizes_buf[256], formats_buf[512];
    snprintf(sizes_buf, sizeof sizes_buf, "%s", default_sizes);
    snprintf(formats_buf, sizeof formats_buf, "%s", default_formats);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--json")) json = 1;
        else if (!strcmp(a, "--mask")) want_mask = 1;
        else if (!strcmp(a, "--no-stats")) stats = 0;
        else if (!strcmp(a, "--bits-free"))
            bits_free = 1;
        else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (i + 1 < argc && !strcmp(a, "--sizes"))
            snprintf(sizes_buf, sizeof sizes_buf, "%s", argv[++i]);
        else if (i + 1 < argc && !strcmp(a, "--formats"))
            snprintf(formats_buf, sizeof formats_buf, "%s", argv[++i]);
        else if (i + 1 < argc && !strcmp(a, "--threads")) threads = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(a, "--device")) {
            const char *d = argv[++i];
            if (strcmp(d, "cpu") && strcmp(d, "cuda")) {
                fprintf(stderr, "adapt-bench quant: --device expects cpu or cuda, got '%s'\n", d);
                return 2;
            }
            cuda = !strcmp(d, "cuda");
        }
        else if (i + 1 < argc && !strcmp(a, "--time")) batch = atof(argv[++i]);
        else {
            fprintf(stderr, "adapt-bench quant: unknown option '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (threads > 0) omp_set_num_threads(threads);
    if (batch <= 0 || batch > 10) {
        fprintf(stderr, "adapt-bench quant: --time %g out of range (0, 10]\n", batch);
        return 2;
    }

    char *size_items[BENCH_MAX_SIZES], *fmt_items[BENCH_MAX_FORMATS];
    int nsizes = split_list(sizes_buf, size_items, BENCH_MAX_SIZES);
    int nfmt = split_list(formats_buf, fmt_items, BENCH_MAX_FORMATS);
    if (nsizes <= 0 || nfmt <= 0) {
        fprintf(stderr, "adapt-bench quant: empty or too long --sizes / --formats list\n");
        return 2;
    }
    size_t sizes[BENCH_MAX_SIZES], nmax = 0;
    for (int i = 0; i < nsizes; i++) {
        if (parse_size(size_items[i], &sizes[i])) {
            fprintf(stderr, "adapt-bench quant: bad size '%s' (e.g. 4K, 16M)\n", size_items[i]);
            return 2;
        }
        if (sizes[i] > nmax) nmax = sizes[i];
    }
    struct quant_spec specs[BENCH_MAX_FORMATS];
    for (int f = 0; f < nfmt; f++)
        if (quant_spec_parse(fmt_items[f], &specs[f]) != ADAPT_OK) {
            fprintf(stderr, "adapt-bench quant: %s\n", adapt_error_message());
            return 2;
        }

    if (cuda && bits_free) {
        fprintf(stderr, "adapt-bench quant: --bits-free times the CPU kernels only\n");
        return 2;
    }
    if (cuda) return bench_quant_gpu(specs, fmt_items, nfmt, sizes, nsizes, batch, json);

    float *x = aligned_alloc(64, (nmax * sizeof(float) + 63) / 64 * 64);
    float *y = aligned_alloc(64, (nmax * sizeof(float) + 63) / 64 * 64);
    uint8_t *mask = want_mask ? aligned_alloc(64, (nmax + 63) / 64 * 64) : NULL;
    if (!x || !y || (want_mask && !mask)) {
        fprintf(stderr, "adapt-bench quant: cannot allocate 2 x %zu floats\n", nmax);
        free(x), free(y), free(mask);
        return 1;
    }
    /* activations-like data: symmetric, about 2^-4 .. 2^3, a few beyond the <8,4> range */
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < nmax; i++) {
        uint32_t h = (uint32_t)i * 2654435761u;
        h ^= h >> 15;
        h *= 2246822519u;
        h ^= h >> 13;
        x[i] = (float)(int32_t)h * 0x1p-28f;
        y[i] = 0.0f;
        if (mask) mask[i] = 0;
    }

    static uint32_t reuse[QUANT_PIECE_BUF] __attribute__((aligned(64))); /* --bits-free */
    int nth = omp_get_max_threads();
    const char *isa = quant_philox_isa_name(quant_philox_best_isa());
    int width = 13; /* the format column: the longest canonical name */
    for (int f = 0; f < nfmt; f++) {
        char name[QUANT_SPEC_STR_MAX];
        int len = (int)strlen(quant_spec_str(&specs[f], name, sizeof name));
        width = len > width ? len : width;
    }
    if (!json) {
        printf("adapt-bench quant: %d threads, Philox %s, counters %s, mask %s, best of 5 x %.3f "
               "s%s\n",
               nth, isa, stats ? "on" : "off", want_mask ? "on" : "off", batch,
               bits_free ? ", random bits reused (--bits-free: the rounding alone, not valid "
                           "stochastic rounding)"
                         : "");
        printf("%9s  %-*s %-12s %10s %8s %10s %6s\n", "elements", width, "format", "rounding",
               "Melem/s", "GB/s", "copy GB/s", "ratio");
    }
    int failed = 0;
    for (int si = 0; si < nsizes; si++) {
        size_t n = sizes[si];
        for (int f = 0; f < nfmt; f++)
            for (int rm = 0; rm < 3; rm++) {
                struct quant_spec s = specs[f];
                s.rounding = rm ? QUANT_ROUND_STOCHASTIC : QUANT_ROUND_NEAREST;
                s.sr_bits = rm == 2 ? QUANT_SR_BITS_16 : QUANT_SR_BITS_32;
                struct job copy = {1, NULL, x, y, NULL, n, 0, 0};
                struct job q = {0, &s, x, y, mask, n, stats, 0};
                double tc = job_time(&copy, batch);
                if (bits_free && rm) /* one piece's bits, as the generator writes them */
                    quant_sr_bits_reuse(quant_sr_fill_isa(quant_philox_best_isa(), s.sr_bits, reuse,
                                                          2385, 16, 0, QUANT_PIECE));
                double tq = job_time(&q, batch);
                quant_sr_bits_reuse(NULL);
                if (q.failed) {
                    fprintf(stderr, "adapt-bench quant: %s\n", adapt_error_message());
                    failed = 1;
                    continue;
                }
                double gbq = 8.0 * (double)n / tq / 1e9, gbc = 8.0 * (double)n / tc / 1e9;
                char name[QUANT_SPEC_STR_MAX];
                quant_spec_str(&s, name, sizeof name);
                const char *rname = rounding_name(rm);
                if (json) {
                    json_t *o = json_pack(
                        "{s:s,s:I,s:s,s:s,s:i,s:s,s:b,s:b,s:b,s:f,s:f,s:f,s:f}", "bench", "quant",
                        "elements", (json_int_t)n, "format", name, "rounding", rname, "threads",
                        nth, "isa", isa, "counters", stats, "mask", want_mask, "bits_free",
                        bits_free && rm, "elements_per_s", (double)n / tq, "gb_per_s", gbq,
                        "copy_gb_per_s", gbc, "ratio", gbq / gbc);
                    char *line = o ? json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(6)) : NULL;
                    json_decref(o);
                    if (!line) {
                        fprintf(stderr, "adapt-bench quant: out of memory\n");
                        failed = 1;
                        continue;
                    }
                    printf("%s\n", line);
                    free(line);
                }
                else
                    printf("%9zu  %-*s %-12s %10.1f %8.2f %10.2f %6.2f\n", n, width, name,
                           rname, (double)n / tq / 1e6, gbq, gbc, gbq / gbc);
                fflush(stdout);
            }
    }
    free(x), free(y), free(mask);
    return failed;
}
