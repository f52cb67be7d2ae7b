/* src/quant/plugin.c: rounding plugins (src/quant/quant.h, "rounding plugins"): the registry,
 * loading and checking a shared object, and the serial kernel the OpenMP row driver runs.
 *
 * The vector variants follow the x86-64 Vector Function ABI that gcc uses for
 * `#pragma omp declare simd`: _ZGV<isa>N<lanes>vv_NAME takes the lanes of x and of the random
 * bits in one vector register each and returns the lanes of y. We call the unmasked variants for
 * SSE2 (b, 4 lanes), AVX2 (d, 8) and AVX-512 (e, 16) from functions compiled for that ISA, so the
 * vectors travel in xmm, ymm or zmm registers as the ABI says; the tail of a piece and every CPU
 * without a usable variant go through the scalar function.
 */
#include <dlfcn.h>
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/quant/quant.h"
#include "src/quant/quant_cpu.h"
#include "src/base/rng.h"

typedef float (*plugin_scalar_fn)(float, uint32_t);
typedef int (*plugin_bits_fn)(void);

/* Random bits of every element when the rounding is nearest: u = 1/2. */
#define PLUGIN_NEAREST_BITS 0x80000000u
/* Elements of the load-time test vector (a multiple of every variant's lanes). */
#define PLUGIN_CHECK_N 512

#if defined(__x86_64__) && defined(__GNUC__)
#define PLUGIN_X86 1
typedef float pv4f __attribute__((vector_size(16)));
typedef uint32_t pv4u __attribute__((vector_size(16)));
typedef float pv8f __attribute__((vector_size(32)));
typedef uint32_t pv8u __attribute__((vector_size(32)));
typedef float pv16f __attribute__((vector_size(64)));
typedef uint32_t pv16u __attribute__((vector_size(64)));
typedef pv4f (*plugin_v4_fn)(pv4f, pv4u);
typedef pv8f (*plugin_v8_fn)(pv8f, pv8u);
typedef pv16f (*plugin_v16_fn)(pv16f, pv16u);
#else
#define PLUGIN_X86 0
#endif

/* The vector variants, narrowest first. */
enum { PLUGIN_V4 = 0, PLUGIN_V8, PLUGIN_V16, PLUGIN_NVARIANTS };
static const struct {
    const char *prefix;
    int lanes;
} plugin_variants[PLUGIN_NVARIANTS] = {
    {"_ZGVbN4vv_", 4}, {"_ZGVdN8vv_", 8}, {"_ZGVeN16vv_", 16}};

struct plugin {
    char text[QUANT_PLUGIN_TEXT_MAX + 1]; /* as loaded: PATH or PATH:NAME */
    char path[QUANT_PLUGIN_TEXT_MAX + 1];
    char symbol[QUANT_PLUGIN_TEXT_MAX + 1];
    char kernel[QUANT_PLUGIN_TEXT_MAX + 16]; /* the symbol that runs whole vectors */
    plugin_scalar_fn scalar;
    void *vec;   /* widest vector variant that agrees; NULL: scalar only */
    int variant; /* its PLUGIN_V*, or -1 */
    int bits;
};

static struct plugin plugins[QUANT_PLUGIN_MAX];
static int nplugins; /* entries below it are complete and never change (acquire/release) */
static pthread_mutex_t plugins_lock = PTHREAD_MUTEX_INITIALIZER;

static const struct plugin *plugin_get(int id)
{
    int n = __atomic_load_n(&nplugins, __ATOMIC_ACQUIRE);
    return id >= 0 && id < n ? &plugins[id] : NULL;
}

int quant_plugin_valid(int id) { return plugin_get(id) != NULL; }

const char *quant_plugin_text(int id)
{
    const struct plugin *e = plugin_get(id);
    return e ? e->text : "";
}

int quant_plugin_bits(int id)
{
    const struct plugin *e = plugin_get(id);
    return e ? e->bits : 32;
}

const char *quant_plugin_kernel(int id, int *lanes)
{
    const struct plugin *e = plugin_get(id);
    if (lanes) *lanes = e && e->variant >= 0 ? plugin_variants[e->variant].lanes : 1;
    return e ? e->kernel : "";
}

static inline uint32_t plugin_sat(float y)
{
    return (quant_f2u(y) & 0x7fffffffu) == 0x7f800000u;
}

float quant_plugin_round(int id, float v, uint32_t r, uint32_t *sat)
{
    const struct plugin *e = plugin_get(id);
    ADAPT_ASSERT(e != NULL);
    float y = e->scalar(v, r);
    *sat = plugin_sat(y);
    return y;
}

/* ---- calling the variants ---- */

static int cpu_runs(int variant)
{
#if PLUGIN_X86
    switch (variant) {
    case PLUGIN_V4: return 1; /* SSE2 is part of x86-64 */
    case PLUGIN_V8: return __builtin_cpu_supports("avx2");
    case PLUGIN_V16: return __builtin_cpu_supports("avx512f");
    default: return 0;
    }
#else
    (void)variant;
    return 0;
#endif
}

/* y[0..n) = f(x, r) in whole vectors of the variant's lanes, the rest through the scalar
 * function. x == y is allowed. */
#if PLUGIN_X86
static void apply_v4(void *fn, plugin_scalar_fn sc, const float *x, const uint32_t *r, float *y,
                     size_t n)
{
    plugin_v4_fn f = (plugin_v4_fn)fn;
    size_t j = 0;
    for (; j + 4 <= n; j += 4) {
        pv4f xv, yv;
        pv4u rv;
        memcpy(&xv, x + j, sizeof xv);
        memcpy(&rv, r + j, sizeof rv);
        yv = f(xv, rv);
        memcpy(y + j, &yv, sizeof yv);
    }
    for (; j < n; j++) y[j] = sc(x[j], r[j]);
}

__attribute__((target("avx2"))) static void apply_v8(void *fn, plugin_scalar_fn sc,
                                                     const float *x, const uint32_t *r, float *y,
                                                     size_t n)
{
    plugin_v8_fn f = (plugin_v8_fn)fn;
    size_t j = 0;
    for (; j + 8 <= n; j += 8) {
        pv8f xv, yv;
        pv8u rv;
        memcpy(&xv, x + j, sizeof xv);
        memcpy(&rv, r + j, sizeof rv);
        yv = f(xv, rv);
        memcpy(y + j, &yv, sizeof yv);
    }
    for (; j < n; j++) y[j] = sc(x[j], r[j]);
}

__attribute__((target("avx512f"))) static void apply_v16(void *fn, plugin_scalar_fn sc,
                                                         const float *x, const uint32_t *r,
                                                         float *y, size_t n)
{
    plugin_v16_fn f = (plugin_v16_fn)fn;
    size_t j = 0;
    for (; j + 16 <= n; j += 16) {
        pv16f xv, yv;
        pv16u rv;
        memcpy(&xv, x + j, sizeof xv);
        memcpy(&rv, r + j, sizeof rv);
        yv = f(xv, rv);
        memcpy(y + j, &yv, sizeof yv);
    }
    for (; j < n; j++) y[j] = sc(x[j], r[j]);
}
#endif

static void apply(int variant, void *fn, plugin_scalar_fn sc, const float *x, const uint32_t *r,
                  float *y, size_t n)
{
#if PLUGIN_X86
    switch (variant) {
    case PLUGIN_V4: apply_v4(fn, sc, x, r, y, n); return;
    case PLUGIN_V8: apply_v8(fn, sc, x, r, y, n); return;
    case PLUGIN_V16: apply_v16(fn, sc, x, r, y, n); return;
    default: break;
    }
#else
    (void)variant, (void)fn;
#endif
    for (size_t j = 0; j < n; j++) y[j] = sc(x[j], r[j]);
}

/* ---- loading ---- */

/* The fixed test vector: special values and ties with chosen random bits, then random floats
 * (bit patterns, and values in [-8, 8)) with Philox random bits. NaNs are quiet ones. */
static void check_vector(float *x, uint32_t *r)
{
    static const float specials[] = {
        0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, FLT_MAX, -FLT_MAX, FLT_MIN, -FLT_MIN,
        FLT_TRUE_MIN, -FLT_TRUE_MIN, 0x1.fffffcp-127f, 1.0f, -1.0f, 0.5f, 1.5f, -1.5f, 2.5f,
        -2.5f, 3.5f, 0x1.01p0f, -0x1.01p0f, 0x1.03p0f, 0x1.008p0f, 0x1.1p0f, 0x1.3p0f, 0x1.8p-3f,
        0x1.fffep127f, 0x1.ff8p15f, 65504.0f, 65520.0f, 448.0f, 464.0f, 57344.0f, 0x1p-14f,
        0x1p-24f, 0x1p-25f, 0x1.8p-25f, 0x1p-133f, 0x1.00008p0f, 0x1.000002p0f, 3.0f, 6.0f,
        7.5f, 28.0f, -0.1f, 0.1f, 1e-30f, -1e30f};
    static const uint32_t bits[] = {0u, PLUGIN_NEAREST_BITS, 0xffffffffu, 0x7fffffffu,
                                    0x00010000u, 0x0000ffffu};
    const size_t ns = sizeof specials / sizeof specials[0], nb = sizeof bits / sizeof bits[0];
    size_t i = 0;
    for (size_t b = 0; b < nb; b++)
        for (size_t k = 0; k < ns; k++, i++) {
            x[i] = specials[k];
            r[i] = bits[b];
        }
    for (; i < PLUGIN_CHECK_N; i++) {
        uint32_t u = adapt_rng_u32_at(0x5eed, 1, i);
        if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu)) u |= 0x00400000u;
        x[i] = i % 2 ? quant_u2f(u) : (float)(int32_t)u * 0x1p-28f;
        r[i] = adapt_rng_u32_at(0x5eed, 2, i);
    }
}

/* Default NAME: the file name without its folder, up to its first dot. */
static int default_symbol(const char *path, char *sym, size_t len)
{
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    size_t n = strcspn(b, ".");
    if (n == 0 || n >= len) return -1;
    memcpy(sym, b, n);
    sym[n] = '\0';
    return 0;
}

static int is_identifier(const char *s)
{
    if (!*s || (*s >= '0' && *s <= '9')) return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
              (*s >= '0' && *s <= '9') || *s == '_'))
            return 0;
    return 1;
}

/* Opens and checks one plugin into *e (under the lock). */
static enum adapt_status plugin_open(struct plugin *e)
{
    const char *path = e->path, *sym = e->symbol;
    dlerror();
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *why = dlerror();
        return ADAPT_ERROR(ADAPT_EIO, "quant plugin %s: cannot load it: %s", path,
                           why ? why : "unknown error");
    }
    enum adapt_status st = ADAPT_OK;
    dlerror();
    void *f = dlsym(h, sym);
    if (!f) {
        const char *why = dlerror();
        st = ADAPT_ERROR(ADAPT_ENOENT, "quant plugin %s: no rounding function '%s': %s", path,
                         sym, why ? why : "symbol is NULL");
        goto close_handle;
    }
    e->scalar = (plugin_scalar_fn)f;
    char name[sizeof e->kernel];
    snprintf(name, sizeof name, "%s_bits", sym);
    void *fb = dlsym(h, name);
    e->bits = 32;
    if (fb) {
        e->bits = ((plugin_bits_fn)fb)();
        if (e->bits < 1 || e->bits > 32) {
            st = ADAPT_ERROR(ADAPT_EFORMAT, "quant plugin %s: %s() returns %d, not 1..32", path,
                             name, e->bits);
            goto close_handle;
        }
    }
    float x[PLUGIN_CHECK_N], want[PLUGIN_CHECK_N], got[PLUGIN_CHECK_N];
    uint32_t r[PLUGIN_CHECK_N];
    check_vector(x, r);
    for (size_t i = 0; i < PLUGIN_CHECK_N; i++) want[i] = e->scalar(x[i], r[i]);
    e->vec = NULL;
    e->variant = -1;
    snprintf(e->kernel, sizeof e->kernel, "%s", sym);
    for (int v = 0; v < PLUGIN_NVARIANTS; v++) {
        if (!cpu_runs(v)) continue;
        snprintf(name, sizeof name, "%s%s", plugin_variants[v].prefix, sym);
        dlerror();
        void *fv = dlsym(h, name);
        if (!fv) continue;
        apply(v, fv, e->scalar, x, r, got, PLUGIN_CHECK_N);
        for (size_t i = 0; i < PLUGIN_CHECK_N; i++)
            if (quant_f2u(got[i]) != quant_f2u(want[i])) {
                st = ADAPT_ERROR(ADAPT_EFORMAT,
                                 "quant plugin %s: vector variant %s disagrees with %s at test "
                                 "element %zu: %s(%a, 0x%08x) = %a (bits 0x%08x), the vector "
                                 "variant gives %a (bits 0x%08x)",
                                 path, name, sym, i, sym, (double)x[i], r[i], (double)want[i],
                                 quant_f2u(want[i]), (double)got[i], quant_f2u(got[i]));
                goto close_handle;
            }
        e->vec = fv; /* variants are narrowest first: the last that agrees is the widest */
        e->variant = v;
        snprintf(e->kernel, sizeof e->kernel, "%s", name);
    }
    return ADAPT_OK; /* the handle stays open for the life of the process */
close_handle:
    dlclose(h);
    return st;
}

enum adapt_status quant_plugin_load(const char *text, int *id)
{
    if (!text || !*text) return ADAPT_ERROR(ADAPT_EINVAL, "quant plugin: no file named");
    if (strlen(text) > QUANT_PLUGIN_TEXT_MAX)
        return ADAPT_ERROR(ADAPT_ERANGE, "quant plugin '%.40s...': longer than %d characters",
                           text, QUANT_PLUGIN_TEXT_MAX);
    struct plugin *cand = calloc(1, sizeof *cand);
    if (!cand) return ADAPT_ERROR(ADAPT_ENOMEM, "quant plugin: out of memory");
    enum adapt_status st = ADAPT_OK;
    snprintf(cand->text, sizeof cand->text, "%s", text);
    snprintf(cand->path, sizeof cand->path, "%s", text);
    const char *colon = strrchr(text, ':');
    if (colon && is_identifier(colon + 1)) {
        cand->path[colon - text] = '\0';
        snprintf(cand->symbol, sizeof cand->symbol, "%s", colon + 1);
    } else if (default_symbol(cand->path, cand->symbol, sizeof cand->symbol) ||
               !is_identifier(cand->symbol)) {
        st = ADAPT_ERROR(ADAPT_EINVAL,
                         "quant plugin %s: no function name in the file name; write "
                         "plugin(PATH:NAME)",
                         text);
        goto free_cand;
    }
    if (!cand->path[0]) {
        st = ADAPT_ERROR(ADAPT_EINVAL, "quant plugin '%s': no file named", text);
        goto free_cand;
    }
    pthread_mutex_lock(&plugins_lock);
    for (int i = 0; i < nplugins; i++)
        if (!strcmp(plugins[i].path, cand->path) && !strcmp(plugins[i].symbol, cand->symbol)) {
            *id = i;
            goto unlock;
        }
    if (nplugins == QUANT_PLUGIN_MAX) {
        st = ADAPT_ERROR(ADAPT_ERANGE, "quant plugin %s: %d plugins are loaded already",
                         cand->path, QUANT_PLUGIN_MAX);
        goto unlock;
    }
    if ((st = plugin_open(cand)) != ADAPT_OK) goto unlock;
    plugins[nplugins] = *cand;
    *id = nplugins;
    __atomic_store_n(&nplugins, nplugins + 1, __ATOMIC_RELEASE);
unlock:
    pthread_mutex_unlock(&plugins_lock);
free_cand:
    free(cand);
    return st;
}

/* ---- the serial kernel behind the OpenMP row driver ---- */

void quant_plugin_run(const struct quant_plan *p, const float *x, float *y, size_t n,
                      uint64_t index, uint8_t *mask, uint64_t *counts)
{
    const struct plugin *e = plugin_get(p->plugin);
    ADAPT_ASSERT(e != NULL);
    uint32_t buf[QUANT_PIECE_BUF] __attribute__((aligned(64)));
    uint32_t half[QUANT_PIECE] __attribute__((aligned(64)));
    float in[QUANT_PIECE] __attribute__((aligned(64))); /* inputs for the counters: x may be y */
    const int stochastic = p->mode == QUANT_MODE_STOCHASTIC;
    if (!stochastic)
        for (size_t k = 0; k < QUANT_PIECE; k++) half[k] = PLUGIN_NEAREST_BITS;
    size_t j = 0;
    while (j < n) {
        uint64_t i = index + j;
        size_t len = QUANT_PIECE - (size_t)(i % QUANT_PIECE);
        if (len > n - j) len = n - j;
        const uint32_t *r =
            stochastic ? quant_philox_fill(buf, p->seed, p->stream, i, len) : half;
        if (counts) memcpy(in, x + j, len * sizeof *in);
        apply(e->variant, e->vec, e->scalar, x + j, r, y + j, len);
        if (mask)
            for (size_t k = 0; k < len; k++) mask[j + k] = (uint8_t)plugin_sat(y[j + k]);
        if (counts) {
            uint64_t ns = 0, nf = 0, nz = 0;
            for (size_t k = 0; k < len; k++) {
                float q = y[j + k];
                ns += plugin_sat(q);
                nf += (q == 0.0f && in[k] != 0.0f);
                nz += (q == 0.0f);
            }
            counts[0] += ns;
            counts[1] += nf;
            counts[2] += nz;
        }
        j += len;
    }
}
