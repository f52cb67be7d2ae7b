/* tests/fuzz/fuzz_format.c: libFuzzer harness for number format texts (quant_spec_parse,
 * src/quant/spec.c) and the configuration's [format NAME] sections (src/config/config.c,
 * src/quant/named.c).
 *
 * Input: the first line is a format text; the rest, when there is more, an INI file whose
 * [format NAME] sections are defined first, so that the text may name them. Every format that
 * parses (the text, and each section) must keep these promises of src/quant/quant.h; a broken
 * one aborts with the format and the values:
 *   - its canonical text (quant_spec_str) parses back to the same format, which rounds the same;
 *   - the fast kernels (quant_rows: SIMD and OpenMP) equal their scalar twins (quant_rows_ref)
 *     bit for bit, with the same masks and counts, in every rounding mode (nearest with ties to
 *     even or away, stochastic), and so do quant_range_compute and its twin;
 *   - rounding is idempotent (a rounded array rounds to itself, in every mode) and, to nearest,
 *     monotone on a sorted block of values (one scale, one MX block);
 *   - NaN stays NaN, and a format that saturates never gives an infinity.
 * Plugins are never loaded: loading is turned off in this process (quant_plugin_forbid), and a
 * text naming one is parsed up to the load, which is refused; quant_spec_plugin_text must say
 * exactly which texts reach it (what a checkpoint's stored format is checked by).
 */
#include <float.h>
#include <math.h>

#include "src/base/rng.h"
#include "src/config/config.h"
#include "src/quant/quant.h"
#include "tests/fuzz/fuzz.h"

#define ROWS 3
#define COLS 67 /* SIMD bodies and tails; three MX blocks per row, the last one short */
#define N (ROWS * COLS)
#define SORTED 32 /* one MX block */

static char fmt_buf[QUANT_SPEC_STR_MAX];

static const char *name_of(const struct quant_spec *s)
{
    return quant_spec_str(s, fmt_buf, sizeof fmt_buf);
}

#define fail(...)                                                                                \
    do {                                                                                         \
        fprintf(stderr, "fuzz_format: ");                                                        \
        fprintf(stderr, __VA_ARGS__);                                                            \
        fputc('\n', stderr);                                                                     \
        abort();                                                                                 \
    } while (0)

static uint32_t f2u(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* Same bits, or both NaN (a NaN's payload is kept, but two NaNs of different origin may differ). */
static int same(float a, float b) { return f2u(a) == f2u(b) || (isnan(a) && isnan(b)); }

static const float specials[] = {
    0.0f,         -0.0f,       1.0f,       -1.0f,      0.5f,        1.5f,        2.5f,
    -2.5f,        3.0f,        0.1f,       -0.1f,      1e-3f,       1e-30f,      -1e-30f,
    1e30f,        -1e30f,      FLT_MAX,    -FLT_MAX,   FLT_MIN,     -FLT_MIN,    FLT_TRUE_MIN,
    -FLT_TRUE_MIN, 65504.0f,   65520.0f,   448.0f,     464.0f,      57344.0f,    6.0f,
    7.5f,         28.0f,       0x1.01p0f,  0x1.008p0f, 0x1.8p-3f,   0x1p-14f,    0x1p-24f,
    0x1p-133f,    0x1.fffep127f, INFINITY, -INFINITY,  NAN};
#define NSPECIAL (sizeof specials / sizeof specials[0])

/* x[0..N): the specials, then values keyed by the input (bit patterns, and values in [-64, 64)
 * at several scales). finite: the same without infinities and NaNs. */
static void fill(float *x, uint64_t key, int finite)
{
    size_t i = 0;
    for (size_t k = 0; k < NSPECIAL && i < N; k++)
        if (!finite || isfinite(specials[k])) x[i++] = specials[k];
    for (uint64_t j = 0; i < N; j++) {
        uint32_t u = adapt_rng_u32_at(key, 1, j);
        float v = j % 3 == 0 ? ldexpf((float)(int32_t)u, -25 - (int)(j % 40))
                             : j % 3 == 1 ? (float)(int32_t)u * 0x1p-25f : 0.0f;
        if (j % 3 == 2) memcpy(&v, &u, sizeof v);
        if (!finite || isfinite(v)) x[i++] = v;
    }
}

static int saturates(const struct quant_spec *s)
{
    switch (s->format) {
    case QUANT_FORMAT_FIXED:
    case QUANT_FORMAT_BFP:
    case QUANT_FORMAT_MUPPET: return 1;
    case QUANT_FORMAT_PLUGIN: return 0;
    default: return quant_format_is_mx(s->format) || s->overflow == QUANT_OVERFLOW_SATURATE;
    }
}

/* The format's fields that say what it is (those quant_spec_str prints). */
static int same_format(const struct quant_spec *a, const struct quant_spec *b)
{
    if (a->format != b->format) return 0;
    switch (a->format) {
    case QUANT_FORMAT_FIXED: return a->wl == b->wl && a->fl == b->fl;
    case QUANT_FORMAT_BFP:
    case QUANT_FORMAT_MUPPET: return a->wl == b->wl;
    case QUANT_FORMAT_PLUGIN: return a->plugin == b->plugin;
    default:
        return a->exp_bits == b->exp_bits && a->man_bits == b->man_bits &&
               quant_spec_bias(a) == quant_spec_bias(b) && a->nan == b->nan &&
               a->subnormals == b->subnormals && a->overflow == b->overflow;
    }
}

static void round_rows(const struct quant_spec *s, const float *x, float *y, size_t rows,
                       size_t cols, struct quant_key key, uint8_t *mask, struct quant_stats *st)
{
    enum adapt_status e = quant_rows(s, x, y, rows, cols, key, mask, st);
    if (e != ADAPT_OK) fail("%s: quant_rows: %s", name_of(s), adapt_error_message());
}

static void round_ref(const struct quant_spec *s, const float *x, float *y, size_t rows,
                      size_t cols, struct quant_key key, uint8_t *mask, struct quant_stats *st)
{
    enum adapt_status e = quant_rows_ref(s, x, y, rows, cols, key, mask, st);
    if (e != ADAPT_OK) fail("%s: quant_rows_ref: %s", name_of(s), adapt_error_message());
}

/* The fast kernels against the scalar twins, NaN kept, no infinity from a saturating format. */
static void check_kernels(const struct quant_spec *s, const float *x, uint64_t seed)
{
    static float y[N], z[N], w[N];
    static uint8_t m1[N], m2[N];
    struct quant_key key = {seed, ADAPT_STREAM_QUANT + 3, seed % 1000};
    struct quant_stats a = {0, 0, 0}, b = {0, 0, 0};
    round_rows(s, x, y, ROWS, COLS, key, m1, &a);
    round_ref(s, x, z, ROWS, COLS, key, m2, &b);
    for (size_t i = 0; i < N; i++)
        if (f2u(y[i]) != f2u(z[i]) || m1[i] != m2[i])
            fail("%s rounding %d tie %d block %d: x[%zu] = %a: fast %a (mask %d), ref %a (mask %d)",
                 name_of(s), (int)s->rounding, (int)s->tie, (int)s->block, i, (double)x[i],
                 (double)y[i], m1[i], (double)z[i], m2[i]);
    if (memcmp(&a, &b, sizeof a))
        fail("%s rounding %d tie %d: counts fast %llu/%llu/%llu, ref %llu/%llu/%llu", name_of(s),
             (int)s->rounding, (int)s->tie, (unsigned long long)a.saturated,
             (unsigned long long)a.flushed, (unsigned long long)a.zeros,
             (unsigned long long)b.saturated, (unsigned long long)b.flushed,
             (unsigned long long)b.zeros);
    /* in place, without mask and counts: the same values */
    memcpy(w, x, sizeof w);
    round_rows(s, w, w, ROWS, COLS, key, NULL, NULL);
    for (size_t i = 0; i < N; i++)
        if (f2u(w[i]) != f2u(z[i]))
            fail("%s rounding %d: in place x[%zu] = %a: %a, ref %a", name_of(s), (int)s->rounding,
                 i, (double)x[i], (double)w[i], (double)z[i]);
    /* NaN stays NaN; a saturating format gives no infinity (muppet: unless the tensor's largest
     * value exceeds FLT_MAX / 2, src/quant/quant.h) */
    int huge = 0;
    for (size_t i = 0; i < N; i++) huge |= isfinite(x[i]) && fabsf(x[i]) > FLT_MAX / 2;
    int sat = saturates(s) && !(s->format == QUANT_FORMAT_MUPPET && huge);
    for (size_t i = 0; i < N; i++) {
        if (isnan(x[i]) && !isnan(y[i]))
            fail("%s rounding %d: x[%zu] = NaN became %a", name_of(s), (int)s->rounding, i,
                 (double)y[i]);
        if (sat && isinf(y[i]))
            fail("%s rounding %d: saturates, but x[%zu] = %a became %a", name_of(s),
                 (int)s->rounding, i, (double)x[i], (double)y[i]);
    }
}

/* A rounded array rounds to itself (every mode: a grid point has no fraction to round). The
 * formats whose grid comes from the data (bfp, muppet, MX) are given finite values; muppet none
 * above FLT_MAX / 2 (whose saturated values become +-inf, src/quant/quant.h). */
static void check_idempotent(const struct quant_spec *s, const float *in, uint64_t seed)
{
    static float x[N], y[N], z[N];
    struct quant_key k1 = {seed, 7, 0}, k2 = {seed + 1, 9, 5};
    for (size_t i = 0; i < N; i++)
        x[i] = s->format == QUANT_FORMAT_MUPPET && fabsf(in[i]) > FLT_MAX / 2 ? 0.0f : in[i];
    round_rows(s, x, y, ROWS, COLS, k1, NULL, NULL);
    round_rows(s, y, z, ROWS, COLS, k2, NULL, NULL);
    for (size_t i = 0; i < N; i++)
        if (!same(y[i], z[i]))
            fail("%s rounding %d tie %d block %d: not idempotent: x[%zu] = %a -> %a -> %a",
                 name_of(s), (int)s->rounding, (int)s->tie, (int)s->block, i, (double)x[i],
                 (double)y[i], (double)z[i]);
}

static int cmp_float(const void *a, const void *b)
{
    float u = *(const float *)a, v = *(const float *)b;
    return (u > v) - (u < v);
}

/* Nearest rounding of an ascending block (one scale, one MX block) is non-decreasing. */
static void check_monotone(const struct quant_spec *s, const float *finite)
{
    float x[SORTED], y[SORTED];
    x[0] = -INFINITY;
    for (size_t i = 1; i + 1 < SORTED; i++) x[i] = finite[(i * 7) % N]; /* specials and keyed */
    x[SORTED - 1] = INFINITY;
    qsort(x + 1, SORTED - 2, sizeof *x, cmp_float);
    if (quant_array(s, x, y, SORTED, (struct quant_key){1, 2, 3}, NULL, NULL) != ADAPT_OK)
        fail("%s: quant_array: %s", name_of(s), adapt_error_message());
    float last = -INFINITY;
    size_t at = 0;
    for (size_t i = 0; i < SORTED; i++) {
        if (isnan(y[i])) continue;
        if (y[i] < last)
            fail("%s tie %d: not monotone: x[%zu] = %a -> %a, but x[%zu] = %a -> %a", name_of(s),
                 (int)s->tie, at, (double)x[at], (double)last, i, (double)x[i], (double)y[i]);
        last = y[i];
        at = i;
    }
}

/* Every promise for one parsed spec. */
static void check_spec(const struct quant_spec *parsed, uint64_t seed)
{
    struct quant_spec s = *parsed, t;
    char text[QUANT_SPEC_STR_MAX], again[QUANT_SPEC_STR_MAX];
    quant_spec_str(&s, text, sizeof text);
    if (quant_spec_parse(text, &t) != ADAPT_OK)
        fail("canonical text '%s' does not parse: %s", text, adapt_error_message());
    quant_spec_str(&t, again, sizeof again);
    if (strcmp(text, again) || !same_format(&s, &t))
        fail("canonical text '%s' parses to another format, '%s'", text, again);
    static float x[N], finite[N], y1[N], y2[N];
    fill(x, seed, 0);
    fill(finite, seed, 1);
    struct quant_key key = {seed, 1, 0};
    round_rows(&s, x, y1, ROWS, COLS, key, NULL, NULL);
    round_rows(&t, x, y2, ROWS, COLS, key, NULL, NULL);
    for (size_t i = 0; i < N; i++)
        if (f2u(y1[i]) != f2u(y2[i]))
            fail("'%s' and its canonical text round x[%zu] = %a to %a and %a", text, i,
                 (double)x[i], (double)y1[i], (double)y2[i]);
    struct quant_range r1, r2;
    quant_range_compute(x, N, &r1);
    quant_range_compute_ref(x, N, &r2);
    if (memcmp(&r1, &r2, sizeof r1)) fail("quant_range_compute differs from its twin");

    int from_data = quant_type_of(s.format)->needs_range || quant_format_is_mx(s.format);
    int blocks = s.format == QUANT_FORMAT_BFP || s.format == QUANT_FORMAT_MUPPET ? 2 : 1;
    for (int b = 0; b < blocks; b++)
        for (int mode = 0; mode < 3; mode++) {
            s.block = b ? QUANT_BLOCK_DIM0 : QUANT_BLOCK_TENSOR;
            s.rounding = mode == 2 ? QUANT_ROUND_STOCHASTIC : QUANT_ROUND_NEAREST;
            s.tie = mode == 1 ? QUANT_TIE_AWAY : QUANT_TIE_EVEN;
            check_kernels(&s, x, seed + (uint64_t)mode);
            check_kernels(&s, finite, seed + 3 + (uint64_t)mode);
            check_idempotent(&s, from_data ? finite : x, seed + (uint64_t)mode);
            if (mode < 2) check_monotone(&s, finite);
        }
}

/* FNV-1a of the input: the key of its values. */
static uint64_t hash(const uint8_t *data, size_t size)
{
    uint64_t h = 0xcbf29ce484222325u;
    for (size_t i = 0; i < size; i++) h = (h ^ data[i]) * 0x100000001b3u;
    return h;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int started;
    if (!started) {
        quant_plugin_forbid(); /* nothing this harness reads may load code */
        adapt_log_set_level(ADAPT_LOG_ERROR);
        started = 1;
    }
    quant_format_clear(); /* each input defines its own names */
    const uint64_t seed = hash(data, size);
    const uint8_t *nl = memchr(data, '\n', size);
    size_t len = nl ? (size_t)(nl - data) : size;
    char text[4096];
    if (len >= sizeof text) len = sizeof text - 1;
    memcpy(text, data, len);
    text[len] = '\0'; /* a NUL byte ends the text early, as in a C string */

    /* the [format NAME] sections after the first line */
    static struct adapt_config cfg;
    adapt_config_init(&cfg);
    if (nl) {
        const char *p = fuzz_file(nl + 1, size - (size_t)(nl + 1 - data), "x.ini");
        if (adapt_config_load(&cfg, p) == ADAPT_OK && adapt_config_check(&cfg) == ADAPT_OK)
            for (int i = 0; i < cfg.formats.n; i++) {
                const struct adapt_config_format *f = &cfg.formats.f[i];
                struct quant_spec s, named;
                if (adapt_config_format_spec(&cfg, f, &s) != ADAPT_OK)
                    fail("[format %s] was registered, but its spec is refused: %s", f->head.name,
                         adapt_error_message());
                if (quant_format_lookup(f->head.name, &named) != ADAPT_OK ||
                    !same_format(&s, &named))
                    fail("[format %s] is not registered as its spec", f->head.name);
                check_spec(&s, seed + (uint64_t)i);
            }
    }

    /* the format text: the plugin it names, said without loading it, is the load refused */
    char inner[QUANT_PLUGIN_TEXT_MAX + 1];
    int names = quant_spec_plugin_text(text, inner);
    struct quant_spec s;
    enum adapt_status st = quant_spec_parse(text, &s);
    int load = st == ADAPT_EUNSUPPORTED && strstr(adapt_error_message(), "turned off");
    if (load != (names && inner[0]))
        fail("'%s': quant_spec_plugin_text says %d ('%s'), but parsing %s a plugin", text, names,
             inner, load ? "tried to load" : "did not try to load");
    if (st == ADAPT_OK) {
        if (s.format == QUANT_FORMAT_PLUGIN) fail("'%s': a plugin format was loaded", text);
        check_spec(&s, seed);
    }
    return 0;
}
