/* src/bench/bench_gemm.c: adapt-bench gemm, the timing table of the
 * hardware-calibrated performance model (src/perfmodel/perf.h).
 *
 * For each GEMM shape (row-major C (m x n) = A (m x k) B (k x n)) and number
 * type, the median seconds per call over --repeats samples, each timing
 * enough calls to last --min-sample-s, after one warm-up call:
 *   cpu   fp32  OpenBLAS cblas_sgemm (called from serial code; OpenBLAS threads)
 *         int8, int16  the kernels of src/quant/gemm_int.h (packing included),
 *               each result checked against exact dot products at 64 sampled
 *               entries before it is timed
 *         onednn-int8  oneDNN's s8 x s8 -> s32 matrix product (its own JIT kernels and
 *               packing, a primitive made once per shape), checked alike, for comparison
 *               with the kernels above: only when built with oneDNN 2.x (configure
 *               --with-dnnl), only when asked for, and never written to the -o table,
 *               which prices what the engine runs
 *   cuda  fp32, tf32, fp16, bf16, int8 (src/bench/gemm_cuda.h); without a GPU the
 *         benchmark says "no GPU" and skips
 * and element-wise throughput per type: y = max(a x + b, 0) over 2^24
 * elements (integers: (a x + b) >> 8 clamped at 0 and the type's maximum).
 * -o FILE writes the table as JSON (schema 1, see src/perfmodel/hw.c) with the
 * machine, date, thread count, OpenBLAS configuration, load average and the
 * command line; the table is printed to standard output (JSON lines with
 * --json).
 */
#include <config.h> /* autoconf's (HAVE_DNNL) */

#include <cblas.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "src/base/fileio.h"
#include "src/base/hd.h"
#include "src/base/rng.h"
#include "src/bench/bench.h"
#include "src/bench/gemm_cuda.h"
#include "src/quant/gemm_int.h"
#include "src/net/tensor.h"

#ifdef HAVE_DNNL
#include <dnnl.h>
#include <dnnl_debug.h>
#endif

#define MAX_SHAPES 256
#define EW_ELEMENTS ((size_t)1 << 24)

static const char *const default_shapes =
    "256x256x256,512x512x512,1024x1024x1024,64x8192x576,576x8192x64,64x576x8192";

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: adapt-bench gemm [--shapes MxNxK,...] [--device cpu|cuda] [--types T,...]\n"
            "                        [--isa best|all|scalar,avx2,avx512vnni] [--repeats R]\n"
            "                        [--min-sample-s S] [-o FILE] [--json]\n"
            "  --shapes   GEMM shapes (default %s);\n"
            "             a model's: --shapes \"$(adapt-perf --gemm-shapes --model lenet5 --batch "
            "256)\"\n"
            "  --device   cpu (default) or cuda\n"
            "  --types    cpu: fp32,int8,int16 (default), and onednn-int8 (oneDNN's int8\n"
            "             matmul, when built with it; not written to -o)\n"
            "  --isa      integer kernel versions: best (default), all, or a list\n"
            "  --repeats  samples per measurement (default 3); --min-sample-s (default 0.2)\n"
            "  -o FILE    write the timing table (JSON) for adapt-perf --hw FILE\n",
            default_shapes);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef void (*bench_fn)(void *ctx);

/* Median seconds per call. */
static double time_median(bench_fn f, void *ctx, int repeats, double min_s)
{
    f(ctx);
    double t0 = adapt_bench_now();
    f(ctx);
    double one = adapt_bench_now() - t0;
    long iters = (long)ceil(min_s / (one > 1e-7 ? one : 1e-7));
    if (iters < 1) iters = 1;
    if (iters > 1000000) iters = 1000000;
    double v[64];
    if (repeats > 64) repeats = 64;
    for (int r = 0; r < repeats; r++) {
        t0 = adapt_bench_now();
        for (long i = 0; i < iters; i++) f(ctx);
        v[r] = (adapt_bench_now() - t0) / (double)iters;
    }
    qsort(v, (size_t)repeats, sizeof v[0], cmp_double);
    return repeats % 2 ? v[repeats / 2] : 0.5 * (v[repeats / 2 - 1] + v[repeats / 2]);
}

struct gemm_ctx {
    int m, n, k;
    const char *type;
    enum adapt_gemm_isa isa;
    void *A, *B, *C, *ws;
};

static void run_gemm(void *p)
{
    struct gemm_ctx *g = p;
    if (!strcmp(g->type, "fp32"))
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, g->m, g->n, g->k, 1.0f, g->A, g->k,
                    g->B, g->n, 0.0f, g->C, g->n);
    else if (!strcmp(g->type, "int8"))
        adapt_gemm_s8(g->isa, g->m, g->n, g->k, g->A, g->B, g->C, g->ws);
    else adapt_gemm_s16(g->isa, g->m, g->n, g->k, g->A, g->B, g->C, g->ws);
}

#ifdef HAVE_DNNL
/* oneDNN's int8 matrix product: C (s32) = A (s8, m x k) B (s8, k x n), all row-major, from the
 * buffers of a gemm_ctx. */
struct dnnl_ctx {
    dnnl_engine_t eng;
    dnnl_stream_t strm;
    dnnl_primitive_t prim;
    dnnl_memory_t a, b, c;
};

static void dnnl_free(struct dnnl_ctx *d)
{
    if (d->a) dnnl_memory_destroy(d->a);
    if (d->b) dnnl_memory_destroy(d->b);
    if (d->c) dnnl_memory_destroy(d->c);
    if (d->prim) dnnl_primitive_destroy(d->prim);
    if (d->strm) dnnl_stream_destroy(d->strm);
    if (d->eng) dnnl_engine_destroy(d->eng);
    memset(d, 0, sizeof *d);
}

static int dnnl_make(struct dnnl_ctx *d, const struct gemm_ctx *g)
{
    memset(d, 0, sizeof *d);
    dnnl_memory_desc_t amd, bmd, cmd;
    dnnl_dims_t ad = {g->m, g->k}, bd = {g->k, g->n}, cd = {g->m, g->n};
    dnnl_matmul_desc_t mm;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_status_t st;
    if ((st = dnnl_engine_create(&d->eng, dnnl_cpu, 0)) ||
        (st = dnnl_stream_create(&d->strm, d->eng, dnnl_stream_default_flags)) ||
        (st = dnnl_memory_desc_init_by_tag(&amd, 2, ad, dnnl_s8, dnnl_ab)) ||
        (st = dnnl_memory_desc_init_by_tag(&bmd, 2, bd, dnnl_s8, dnnl_ab)) ||
        (st = dnnl_memory_desc_init_by_tag(&cmd, 2, cd, dnnl_s32, dnnl_ab)) ||
        (st = dnnl_matmul_desc_init(&mm, &amd, &bmd, NULL, &cmd)) ||
        (st = dnnl_primitive_desc_create(&pd, &mm, NULL, d->eng, NULL)) ||
        (st = dnnl_primitive_create(&d->prim, pd)) ||
        (st = dnnl_memory_create(&d->a, &amd, d->eng, g->A)) ||
        (st = dnnl_memory_create(&d->b, &bmd, d->eng, g->B)) ||
        (st = dnnl_memory_create(&d->c, &cmd, d->eng, g->C))) {
        fprintf(stderr, "adapt-bench gemm: oneDNN int8 matmul %dx%dx%d: %s\n", g->m, g->n, g->k,
                dnnl_status2str(st));
        if (pd) dnnl_primitive_desc_destroy(pd);
        dnnl_free(d);
        return 0;
    }
    dnnl_primitive_desc_destroy(pd);
    return 1;
}

static void run_dnnl(void *p)
{
    struct dnnl_ctx *d = p;
    dnnl_exec_arg_t args[3] = {
        {DNNL_ARG_SRC, d->a}, {DNNL_ARG_WEIGHTS, d->b}, {DNNL_ARG_DST, d->c}};
    dnnl_status_t st = dnnl_primitive_execute(d->prim, d->strm, 3, args);
    if (st == dnnl_success) st = dnnl_stream_wait(d->strm);
    ADAPT_ASSERT(st == dnnl_success);
}
#endif

/* Checks 64 sampled entries of an integer result against exact dot
 * products (int32 wrap-around, as the instructions do). */
static int check_int(const struct gemm_ctx *g)
{
    struct adapt_rng r;
    adapt_rng_init(&r, 2385, 77);
    for (int s = 0; s < 64; s++) {
        int i = (int)adapt_rng_below(&r, (uint32_t)g->m),
            j = (int)adapt_rng_below(&r, (uint32_t)g->n);
        uint32_t acc = 0;
        for (int kk = 0; kk < g->k; kk++) {
            int32_t a, b;
            if (!strcmp(g->type, "int8")) {
                a = ((const int8_t *)g->A)[(size_t)i * g->k + kk];
                b = ((const int8_t *)g->B)[(size_t)kk * g->n + j];
            } else {
                a = ((const int16_t *)g->A)[(size_t)i * g->k + kk];
                b = ((const int16_t *)g->B)[(size_t)kk * g->n + j];
            }
            acc += (uint32_t)(a * b);
        }
        if ((int32_t)acc != ((const int32_t *)g->C)[(size_t)i * g->n + j]) return 0;
    }
    return 1;
}

static void fill(void *p, size_t n, const char *type, uint64_t stream)
{
    struct adapt_rng r;
    adapt_rng_init(&r, 2385, stream);
    for (size_t i = 0; i < n; i++) {
        uint32_t u = adapt_rng_u32(&r);
        if (!strcmp(type, "fp32")) ((float *)p)[i] = (float)((int)(u % 2001u) - 1000) * 1e-3f;
        else if (!strcmp(type, "int8")) ((int8_t *)p)[i] = (int8_t)(u & 0xffu);
        else ((int16_t *)p)[i] = (int16_t)((int)(u % 511u) - 255);
    }
}

/* ------------------------------------------------------------ element-wise */

ADAPT_HOT_CLONES static void ew_f32_span(const float *x, float *y, size_t n, float a, float b)
{
    for (size_t i = 0; i < n; i++) {
        float v = x[i] * a + b;
        y[i] = v > 0.0f ? v : 0.0f;
    }
}

ADAPT_HOT_CLONES static void ew_s16_span(const int16_t *x, int16_t *y, size_t n, int32_t a,
                                         int32_t b)
{
    for (size_t i = 0; i < n; i++) {
        int32_t v = (x[i] * a + b) >> 8;
        v = v < 0 ? 0 : v;
        y[i] = (int16_t)(v > 32767 ? 32767 : v);
    }
}

ADAPT_HOT_CLONES static void ew_s8_span(const int8_t *x, int8_t *y, size_t n, int32_t a, int32_t b)
{
    for (size_t i = 0; i < n; i++) {
        int32_t v = (x[i] * a + b) >> 8;
        v = v < 0 ? 0 : v;
        y[i] = (int8_t)(v > 127 ? 127 : v);
    }
}

struct ew_ctx {
    const char *type;
    void *x, *y;
    size_t n;
};

static void run_ew(void *p)
{
    struct ew_ctx *e = p;
    const size_t chunk = 1 << 16;
    const long nchunks = (long)((e->n + chunk - 1) / chunk);
#pragma omp parallel for schedule(static)
    for (long c = 0; c < nchunks; c++) {
        size_t lo = (size_t)c * chunk, len = e->n - lo < chunk ? e->n - lo : chunk;
        if (!strcmp(e->type, "fp32"))
            ew_f32_span((const float *)e->x + lo, (float *)e->y + lo, len, 0.75f, 0.125f);
        else if (!strcmp(e->type, "int16"))
            ew_s16_span((const int16_t *)e->x + lo, (int16_t *)e->y + lo, len, 192, 32);
        else ew_s8_span((const int8_t *)e->x + lo, (int8_t *)e->y + lo, len, 192, 32);
    }
}

/* ------------------------------------------------------------------ output */

static size_t type_size(const char *type)
{
    return !strcmp(type, "fp32") ? 4 : !strcmp(type, "int16") ? 2 : 1;
}

static void machine_line(char *buf, size_t n)
{
    char model[256] = "unknown CPU";
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        char line[512];
        while (fgets(line, sizeof line, f))
            if (!strncmp(line, "model name", 10)) {
                char *c = strchr(line, ':');
                if (c) {
                    c++;
                    while (*c == ' ') c++;
                    c[strcspn(c, "\n")] = 0;
                    snprintf(model, sizeof model, "%s", c);
                }
                break;
            }
        fclose(f);
    }
    char host[128] = "?";
    gethostname(host, sizeof host);
    host[sizeof host - 1] = 0;
    snprintf(buf, n, "%s, %ld online CPUs, host %s", model, sysconf(_SC_NPROCESSORS_ONLN), host);
}

static json_t *timing_json(const struct adapt_bench_timing *t)
{
    if (t->elements > 0)
        return json_pack("{s:s,s:s,s:I,s:f,s:f}", "type", t->type, "impl", t->impl, "elements",
                         (json_int_t)t->elements, "seconds", t->seconds, "gops",
                         (double)t->elements / t->seconds / 1e9);
    return json_pack("{s:s,s:s,s:I,s:I,s:I,s:f,s:f}", "type", t->type, "impl", t->impl, "m",
                     (json_int_t)t->m, "n", (json_int_t)t->n, "k", (json_int_t)t->k, "seconds",
                     t->seconds, "gops",
                     2.0 * (double)t->m * (double)t->n * (double)t->k / t->seconds / 1e9);
}

static void print_timing(const struct adapt_bench_timing *t, int json)
{
    if (json) {
        json_t *o = timing_json(t);
        char *s = json_dumps(o, JSON_COMPACT);
        printf("%s\n", s);
        free(s);
        json_decref(o);
        return;
    }
    if (t->elements > 0)
        printf("  elementwise %-6s %-24s %12lld elements %12.3f ms %9.2f Gop/s\n", t->type, t->impl,
               (long long)t->elements, t->seconds * 1e3, (double)t->elements / t->seconds / 1e9);
    else
        printf("  gemm  %-6s %-24s %6lld x %7lld x %7lld %12.3f ms %9.2f Gop/s\n", t->type, t->impl,
               (long long)t->m, (long long)t->n, (long long)t->k, t->seconds * 1e3,
               2.0 * (double)t->m * (double)t->n * (double)t->k / t->seconds / 1e9);
    fflush(stdout);
}

static int write_table(const char *path, const char *device, const char *machine, int argc,
                       char **argv, const struct adapt_bench_timing *t, int n)
{
    char date[32], cmd[2048] = "adapt-bench";
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", &tm);
    for (int i = 0; i < argc; i++) {
        size_t l = strlen(cmd);
        snprintf(cmd + l, sizeof cmd - l, " %s", argv[i]);
    }
    double load[3] = {0, 0, 0};
    getloadavg(load, 3);
    int threads = 1;
#ifdef _OPENMP
    threads = omp_get_max_threads();
#endif
    json_t *root = json_pack("{s:i,s:s,s:s,s:s,s:s,s:i,s:s,s:[f,f,f]}", "schema", 1, "device",
                             strcmp(device, "cpu") ? "cuda" : "cpu", "machine", machine, "date",
                             date, "command", cmd, "threads", threads, "openblas",
                             openblas_get_config(), "load_average", load[0], load[1], load[2]);
    json_t *g = json_array(), *e = json_array();
    if (!root || !g || !e) {
        fprintf(stderr, "adapt-bench gemm: out of memory\n");
        return 1;
    }
    json_object_set_new(root, "gemm", g);
    json_object_set_new(root, "elementwise", e);
    for (int i = 0; i < n; i++)
        if (strncmp(t[i].impl, "onednn", 6)) /* a comparison, not what the engine runs */
            json_array_append_new(t[i].elements > 0 ? e : g, timing_json(&t[i]));
    struct adapt_atomic a;
    enum adapt_status st = adapt_atomic_open(&a, path);
    if (st == ADAPT_OK) {
        if (json_dumpf(root, a.f, JSON_INDENT(1) | JSON_REAL_PRECISION(6)) != 0) {
            adapt_atomic_abort(&a);
            st = ADAPT_ERROR(ADAPT_EIO, "%s: cannot write the table", path);
        } else {
            st = adapt_atomic_commit(&a);
        }
    }
    json_decref(root);
    if (st != ADAPT_OK) {
        fprintf(stderr, "adapt-bench gemm: %s\n", adapt_error_message());
        return 1;
    }
    return 0;
}

static int parse_shapes(const char *s, int64_t *sh, int *n)
{
    *n = 0;
    while (*s) {
        char *end;
        long long v[3];
        for (int d = 0; d < 3; d++) {
            v[d] = strtoll(s, &end, 10);
            if (end == s || v[d] < 1 || v[d] > (1 << 24)) return 0;
            if (d < 2 && *end != 'x') return 0;
            s = d < 2 ? end + 1 : end;
        }
        if (*s && *s != ',') return 0;
        if (*n == MAX_SHAPES) return 0;
        for (int d = 0; d < 3; d++) sh[3 * *n + d] = v[d];
        (*n)++;
        if (*s == ',') {
            s++;
            if (!*s) return 0;
        }
    }
    return *n > 0;
}

static int has_item(const char *list, const char *item)
{
    size_t l = strlen(item);
    for (const char *p = list; (p = strstr(p, item)); p += l)
        if ((p == list || p[-1] == ',') && (p[l] == 0 || p[l] == ',')) return 1;
    return 0;
}

static int bench_cpu(const int64_t *sh, int ns, const char *types, const char *isas, int repeats,
                     double min_s, struct adapt_bench_timing *out, int cap, int json)
{
    int n = 0;
    static const char *const all_types[3] = {"fp32", "int8", "int16"};
    for (int i = 0; i < ns; i++) {
        int m = (int)sh[3 * i], nn = (int)sh[3 * i + 1], k = (int)sh[3 * i + 2];
        struct gemm_ctx g = {m, nn, k, "fp32", ADAPT_GEMM_ISA_SCALAR, NULL, NULL, NULL, NULL};
        size_t ws = adapt_gemm_int_workspace(ADAPT_GEMM_S16, m, nn, k);
        size_t ws8 = adapt_gemm_int_workspace(ADAPT_GEMM_S8, m, nn, k);
        g.A = adapt_aligned_alloc((size_t)m * k * 4);
        g.B = adapt_aligned_alloc((size_t)k * nn * 4);
        g.C = adapt_aligned_alloc((size_t)m * nn * 4);
        g.ws = adapt_aligned_alloc(ws > ws8 ? ws : ws8);
        if (!g.A || !g.B || !g.C || !g.ws) {
            fprintf(stderr, "adapt-bench gemm: out of memory for %dx%dx%d\n", m, nn, k);
            return -1;
        }
        for (int t = 0; t < 3; t++) {
            if (!has_item(types, all_types[t])) continue;
            g.type = all_types[t];
            fill(g.A, (size_t)m * k, g.type, 1);
            fill(g.B, (size_t)k * nn, g.type, 2);
            for (int isa = ADAPT_GEMM_ISA_AVX512VNNI; isa >= ADAPT_GEMM_ISA_SCALAR; isa--) {
                if (t == 0 && isa != ADAPT_GEMM_ISA_SCALAR) continue; /* fp32: OpenBLAS only */
                if (t > 0) {
                    const char *name = adapt_gemm_isa_name((enum adapt_gemm_isa)isa);
                    int want = !strcmp(isas, "all") ||
                               (!strcmp(isas, "best") && isa == (int)adapt_gemm_isa_best()) ||
                               has_item(isas, name);
                    if (!want || !adapt_gemm_isa_available((enum adapt_gemm_isa)isa)) continue;
                }
                g.isa = (enum adapt_gemm_isa)isa;
                if (t > 0) {
                    run_gemm(&g);
                    if (!check_int(&g)) {
                        fprintf(stderr,
                                "adapt-bench gemm: %s %s kernel gives wrong results for %dx%dx%d\n",
                                g.type, adapt_gemm_isa_name(g.isa), m, nn, k);
                        return -1;
                    }
                }
                if (n == cap) break;
                struct adapt_bench_timing *r = &out[n++];
                memset(r, 0, sizeof *r);
                snprintf(r->type, sizeof r->type, "%s", g.type);
                if (t == 0) snprintf(r->impl, sizeof r->impl, "openblas-sgemm");
                else
                    snprintf(r->impl, sizeof r->impl, "%s-%s", adapt_gemm_isa_name(g.isa),
                             t == 1 ? (isa == ADAPT_GEMM_ISA_AVX512VNNI ? "vpdpbusd"
                                       : isa == ADAPT_GEMM_ISA_AVX2     ? "vpmaddwd"
                                                                        : "loops")
                                    : (isa == ADAPT_GEMM_ISA_AVX512VNNI ? "vpdpwssd"
                                       : isa == ADAPT_GEMM_ISA_AVX2     ? "vpmaddwd"
                                                                        : "loops"));
                r->m = m, r->n = nn, r->k = k;
                r->seconds = time_median(run_gemm, &g, repeats, min_s);
                print_timing(r, json);
            }
        }
#ifdef HAVE_DNNL
        if (has_item(types, "onednn-int8") && n < cap) {
            struct dnnl_ctx d;
            g.type = "int8";
            fill(g.A, (size_t)m * k, g.type, 1);
            fill(g.B, (size_t)k * nn, g.type, 2);
            if (!dnnl_make(&d, &g)) return -1;
            run_dnnl(&d);
            if (!check_int(&g)) {
                fprintf(stderr,
                        "adapt-bench gemm: oneDNN's int8 matmul gives wrong results for "
                        "%dx%dx%d\n",
                        m, nn, k);
                dnnl_free(&d);
                return -1;
            }
            struct adapt_bench_timing *r = &out[n++];
            memset(r, 0, sizeof *r);
            snprintf(r->type, sizeof r->type, "int8");
            const dnnl_version_t *v = dnnl_version();
            snprintf(r->impl, sizeof r->impl, "onednn%d.%d-matmul", v->major, v->minor);
            r->m = m, r->n = nn, r->k = k;
            r->seconds = time_median(run_dnnl, &d, repeats, min_s);
            print_timing(r, json);
            dnnl_free(&d);
        }
#endif
        adapt_aligned_free(g.A);
        adapt_aligned_free(g.B);
        adapt_aligned_free(g.C);
        adapt_aligned_free(g.ws);
    }
    for (int t = 0; t < 3 && n < cap; t++) {
        if (!has_item(types, all_types[t])) continue;
        struct ew_ctx e = {all_types[t], NULL, NULL, EW_ELEMENTS};
        e.x = adapt_aligned_alloc(EW_ELEMENTS * type_size(e.type));
        e.y = adapt_aligned_alloc(EW_ELEMENTS * type_size(e.type));
        if (!e.x || !e.y) {
            fprintf(stderr, "adapt-bench gemm: out of memory\n");
            return -1;
        }
        fill(e.x, EW_ELEMENTS, e.type, 3);
        struct adapt_bench_timing *r = &out[n++];
        memset(r, 0, sizeof *r);
        snprintf(r->type, sizeof r->type, "%s", e.type);
        snprintf(r->impl, sizeof r->impl, "openmp-scale-add-relu");
        r->elements = (int64_t)EW_ELEMENTS;
        r->seconds = time_median(run_ew, &e, repeats, min_s);
        print_timing(r, json);
        adapt_aligned_free(e.x);
        adapt_aligned_free(e.y);
    }
    return n;
}

int adapt_bench_gemm(int argc, char **argv)
{
    const char *shapes = default_shapes, *device = "cpu", *types = "fp32,int8,int16",
               *isas = "best", *output = NULL;
    int repeats = 3, json = 0;
    double min_s = 0.2;
    static const struct option opts[] = {{"shapes", required_argument, 0, 's'},
                                         {"device", required_argument, 0, 'd'},
                                         {"types", required_argument, 0, 't'},
                                         {"isa", required_argument, 0, 'i'},
                                         {"repeats", required_argument, 0, 'r'},
                                         {"min-sample-s", required_argument, 0, 'm'},
                                         {"output", required_argument, 0, 'o'},
                                         {"json", no_argument, 0, 'j'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
        char *end = NULL;
        switch (c) {
        case 's': shapes = optarg; break;
        case 'd': device = optarg; break;
        case 't': types = optarg; break;
        case 'i': isas = optarg; break;
        case 'r': repeats = (int)strtol(optarg, &end, 10); break;
        case 'm': min_s = strtod(optarg, &end); break;
        case 'o': output = optarg; break;
        case 'j': json = 1; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
        if (end && (*end || end == optarg)) {
            fprintf(stderr, "adapt-bench gemm: expected a number, got '%s'\n", optarg);
            return 2;
        }
    }
    if (optind < argc || repeats < 1 || repeats > 64 || !(min_s > 0)) {
        usage(stderr);
        return 2;
    }
    int64_t sh[3 * MAX_SHAPES];
    int ns;
    if (!parse_shapes(shapes, sh, &ns)) {
        fprintf(stderr, "adapt-bench gemm: --shapes expects MxNxK,... (each 1..%d), got '%s'\n",
                1 << 24, shapes);
        return 2;
    }
    int cap = ns * 8 + 8;
    struct adapt_bench_timing *t = calloc((size_t)cap, sizeof *t);
    if (!t) return 1;
    char machine[512], why[512];
    int n, rc = 0;
    if (!strcmp(device, "cpu")) {
        for (const char *p = types; *p;) {
            size_t l = strcspn(p, ",");
            if (!((l == 4 && !strncmp(p, "fp32", 4)) || (l == 4 && !strncmp(p, "int8", 4)) ||
                  (l == 5 && !strncmp(p, "int16", 5)) ||
                  (l == 11 && !strncmp(p, "onednn-int8", 11)))) {
                fprintf(stderr,
                        "adapt-bench gemm: cpu types are fp32, int8, int16, onednn-int8; got "
                        "'%s'\n",
                        types);
                free(t);
                return 2;
            }
#ifndef HAVE_DNNL
            if (l == 11) {
                fprintf(stderr, "adapt-bench gemm: --types onednn-int8: this adapt-bench was "
                                "built without oneDNN (install libdnnl-dev and configure "
                                "--with-dnnl)\n");
                free(t);
                return 2;
            }
#endif
            p += l + (p[l] == ',');
        }
        machine_line(machine, sizeof machine);
        if (!json)
            printf("cpu: %s; %d threads; OpenBLAS %s\n", machine,
#ifdef _OPENMP
                   omp_get_max_threads(),
#else
                   1,
#endif
                   openblas_get_config());
        n = bench_cpu(sh, ns, types, isas, repeats, min_s, t, cap, json);
        if (n < 0) rc = 1;
    } else if (!strcmp(device, "cuda")) {
        n = adapt_bench_gemm_cuda(sh, ns, min_s, repeats, t, cap, machine, sizeof machine, why,
                                  sizeof why);
        if (n < 0) {
            fprintf(stderr, "adapt-bench gemm: cuda: %s; skipped\n", why);
            free(t);
            return strncmp(why, "no GPU", 6) ? 1 : 0;
        }
        if (!json) printf("cuda: %s\n", machine);
        for (int i = 0; i < n; i++) print_timing(&t[i], json);
    } else {
        fprintf(stderr, "adapt-bench gemm: --device expects cpu or cuda, got '%s'\n", device);
        free(t);
        return 2;
    }
    if (rc == 0 && output) rc = write_table(output, device, machine, argc, argv, t, n);
    free(t);
    return rc;
}
