/* tests/test_quant_cuda.c: CUDA kernels of src/quant/ against the CPU kernels, bit for bit.
 * Exits 77 (skip) when the build has no CUDA or the machine no GPU; runs without fork
 * (CUDA does not survive fork()).
 *
 * Every expected value comes from the CPU kernel (quant_rows): bit-for-bit parity with it is the
 * contract, with the same Philox stream on both sides (src/base/rng.h: element i takes value
 * key.index + i of (seed, stream)), so no case holds a hand-written expected value. Each
 * comparison counts its mismatches in a plain loop and asserts once per array; the loop tests
 * run one format (or mode) per iteration, so that one failure does not hide the others (in
 * CK_NOFORK mode a failed assertion leaves the test function).
 *
 * Paths of src/quant/cuda/quant.cu's round_part covered:
 * - masked, element by element: test_cuda_parity, test_cuda_launch_shape (compare passes a mask);
 * - float4 blocks (index % 4 == 0, x and y 16-byte aligned, no mask; the last n % 4 elements
 *   element by element): test_cuda_vec_rows (index 0 and 4, quant_cuda_rows_host's own device
 *   arrays), test_cuda_vec_offsets (aligned device sub-arrays), test_cuda_vec_list (list jobs);
 * - no mask, element by element (index % 4 != 0, or x or y not 16-byte aligned):
 *   test_cuda_inplace (index 3), test_cuda_list, test_cuda_vec_rows (index 1),
 *   test_cuda_vec_offsets and test_cuda_vec_list (device arrays 4, 8 or 12 bytes off);
 * - per-row grids looked up per element (bfp and muppet with block dim0, grids[j / cols]):
 *   test_cuda_launch_shape (masked), test_cuda_vec_rows and test_cuda_vec_offsets (float4 blocks
 *   that cross row boundaries, cols not a multiple of 4). */
#include <config.h>

#include <check.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef ADAPT_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#include "src/quant/quant.h"
#include "src/base/rng.h"
#include "src/cuda/device.h"
#include "tests/testutil.h"
#include "tests/testutil_cuda.h"

/* Random magnitudes over many binades, raw bit patterns (NaN, inf, subnormals) and values on
 * half steps of 2^-j (ties for the grid formats). */
static void fill(float *x, size_t n, uint64_t seed)
{
    struct adapt_rng r;
    adapt_rng_init(&r, seed, 7);
    for (size_t i = 0; i < n; i++) {
        uint32_t u = adapt_rng_u32(&r), w = adapt_rng_u32(&r);
        switch (w % 4) {
        case 0: x[i] = quant_u2f(u); break;
        case 1: x[i] = ldexpf((float)((int32_t)u >> 8) + 0.5f, -(int)(w >> 8) % 30); break;
        default:
            x[i] = ldexpf(1.0f + (float)(u & 0x7fffff) * 0x1p-23f, (int)(w >> 8) % 61 - 30) *
                   (u >> 31 ? -1.0f : 1.0f);
        }
    }
    /* the first three (as many as there are) NaN, inf and -0 */
    if (n > 0) x[0] = NAN;
    if (n > 1) x[1] = INFINITY;
    if (n > 2) x[2] = -0.0f;
}

static const char *formats[] = {"fixed(8,4)", "fixed(32,28)", "fixed(32,31)", "bfp(8)", "muppet(8)",
                                "fp16", "bf16", "float(4,3)", "float(2,1)", "e4m3", "e5m2",
                                "mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e2m3", "mxfp6_e3m2", "mxfp4",
                                "mxint8", "float(4,3,bias=11,nan=fn,ovf=inf)",
                                "float(2,1,nan=none)", "float(6,4,bias=127,sub=0)",
                                "float(5,3,bias=123)"};

static uint32_t bits_of(float v)
{
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    return u;
}

/* printf into buf after what it holds (truncated at cap; messages only). */
static void appendf(char *buf, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void appendf(char *buf, size_t cap, const char *fmt, ...)
{
    size_t len = strlen(buf);
    if (len + 1 >= cap) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + len, cap - len, fmt, ap);
    va_end(ap);
}

/* Elements of got whose bits differ from want's (tu_same_bits: any NaN equals any NaN); the
 * first of them in *first. */
static size_t diff_floats(const float *want, const float *got, size_t n, size_t *first)
{
    size_t bad = 0;
    *first = 0;
    for (size_t i = 0; i < n; i++)
        if (!tu_same_bits(want[i], got[i]) && bad++ == 0) *first = i;
    return bad;
}

/* Appends to buf what diff_floats found ("" when nothing differs); x[i] is element i's input. */
static void describe_floats(char *buf, size_t cap, const char *what, const float *x,
                            const float *want, const float *got, size_t n)
{
    size_t first, bad = diff_floats(want, got, n, &first);
    if (!bad) return;
    appendf(buf, cap,
            "%s: %zu of %zu values differ, first [%zu]: x = %a (0x%08" PRIx32
            "), CPU %a (0x%08" PRIx32 "), GPU %a (0x%08" PRIx32 ")\n",
            what, bad, n, first, x[first], bits_of(x[first]), want[first], bits_of(want[first]),
            got[first], bits_of(got[first]));
}

/* One assertion for an array of results. */
static void expect_floats(const char *what, const float *x, const float *want, const float *got,
                          size_t n)
{
    char msg[1024] = "";
    describe_floats(msg, sizeof msg, what, x, want, got, n);
    ck_assert_msg(msg[0] == '\0', "%s", msg);
}

/* One assertion for an array of saturation masks. */
static void expect_masks(const char *what, const float *x, const uint8_t *want, const uint8_t *got,
                         size_t n)
{
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++)
        if (want[i] != got[i] && bad++ == 0) first = i;
    ck_assert_msg(bad == 0,
                  "%s: %zu of %zu mask bytes differ, first [%zu]: x = %a (0x%08" PRIx32
                  "), CPU %u, GPU %u",
                  what, bad, n, first, x[first], bits_of(x[first]), (unsigned)want[first],
                  (unsigned)got[first]);
}

static int same_stats(const struct quant_stats *a, const struct quant_stats *b)
{
    return a->saturated == b->saturated && a->flushed == b->flushed && a->zeros == b->zeros;
}

/* Appends a difference of counters to buf. */
static void describe_stats(char *buf, size_t cap, const char *what, const struct quant_stats *a,
                           const struct quant_stats *b)
{
    if (same_stats(a, b)) return;
    appendf(buf, cap,
            "%s: counts saturated / flushed / zeros: CPU %" PRIu64 " / %" PRIu64 " / %" PRIu64
            ", GPU %" PRIu64 " / %" PRIu64 " / %" PRIu64 "\n",
            what, a->saturated, a->flushed, a->zeros, b->saturated, b->flushed, b->zeros);
}

/* One assertion for the three counters. */
static void expect_stats(const char *what, const struct quant_stats *a, const struct quant_stats *b)
{
    char msg[512] = "";
    describe_stats(msg, sizeof msg, what, a, b);
    ck_assert_msg(msg[0] == '\0', "%s", msg);
}

/* Rounding mode m: 0 nearest ties to even, 1 nearest ties away, 2 stochastic. */
static void set_mode(struct quant_spec *s, int m)
{
    s->rounding = m == 2 ? QUANT_ROUND_STOCHASTIC : QUANT_ROUND_NEAREST;
    s->tie = m == 1 ? QUANT_TIE_AWAY : QUANT_TIE_EVEN;
}

/* "fixed(8,4) stochastic" and the like into buf. */
static const char *spec_name(const struct quant_spec *s, char *buf, size_t cap)
{
    char t[QUANT_SPEC_STR_MAX];
    buf[0] = '\0';
    appendf(buf, cap, "%s %s%s", quant_spec_str(s, t, sizeof t),
            s->rounding == QUANT_ROUND_STOCHASTIC ? "stochastic" : "nearest",
            s->rounding == QUANT_ROUND_STOCHASTIC ? ""
            : s->tie == QUANT_TIE_AWAY            ? " away"
                                                  : " even");
    return buf;
}

/* quant_rows against quant_cuda_rows_host with a mask (the masked kernels: element by element)
 * and the given launch shape. */
static void compare(const struct quant_spec *s, size_t rows, size_t cols, uint64_t index,
                    int threads, int blocks)
{
    size_t n = rows * cols;
    float *x = malloc(n * sizeof *x), *yc = malloc(n * sizeof *yc), *yg = malloc(n * sizeof *yg);
    uint8_t *mc = malloc(n), *mg = malloc(n);
    ck_assert(x && yc && yg && mc && mg);
    fill(x, n, index + 17);
    struct quant_key key = {0x2385, ADAPT_STREAM_QUANT + 3, index};
    struct quant_stats a = {0, 0, 0}, b = {0, 0, 0};
    ck_assert_int_eq(quant_rows(s, x, yc, rows, cols, key, mc, &a), ADAPT_OK);
    quant_cuda_set_launch(threads, blocks);
    enum adapt_status st = quant_cuda_rows_host(s, x, yg, rows, cols, key, mg, &b);
    quant_cuda_set_launch(0, 0); /* before any assertion: later tests use the default shape */
    ck_assert_msg(st == ADAPT_OK, "%s", adapt_error_message());
    char name[QUANT_SPEC_STR_MAX + 32], what[QUANT_SPEC_STR_MAX + 128];
    what[0] = '\0';
    appendf(what, sizeof what, "%s, %zu x %zu, index %" PRIu64 ", launch %d x %d",
            spec_name(s, name, sizeof name), rows, cols, index, blocks, threads);
    expect_floats(what, x, yc, yg, n);
    expect_masks(what, x, mc, mg, n);
    expect_stats(what, &a, &b);
    free(x), free(yc), free(yg), free(mc), free(mg);
}

/* Every format and rounding mode: CPU and GPU give the same bits, masks and counters (the
 * stochastic ones prove cuRAND's Philox equals src/base/rng.h for these keys). A loop test: one
 * iteration per (format, mode), iteration i = 3 format + mode. */
enum { NFORMATS = sizeof formats / sizeof formats[0] };
START_TEST(test_cuda_parity)
{
    const size_t f = (size_t)_i / 3;
    struct quant_spec s;
    ck_assert_int_eq(quant_spec_parse(formats[f], &s), ADAPT_OK);
    set_mode(&s, _i % 3);
    compare(&s, 1, 300001, 5 + f, 0, 0);
}
END_TEST

/* The launch shape does not change the bits; bfp and muppet per dim-0 slice reduce on the
 * device, MX blocks follow the rows. */
START_TEST(test_cuda_launch_shape)
{
    struct quant_spec s;
    ck_assert_int_eq(quant_spec_parse("fixed(12,7)", &s), ADAPT_OK);
    s.rounding = QUANT_ROUND_STOCHASTIC;
    compare(&s, 1, 100003, 1, 64, 3);
    compare(&s, 1, 100003, 1, 1024, 1000);
    ck_assert_int_eq(quant_spec_parse("bfp(6)", &s), ADAPT_OK);
    s.block = QUANT_BLOCK_DIM0;
    s.rounding = QUANT_ROUND_STOCHASTIC;
    compare(&s, 64, 577, 2, 96, 5);
    compare(&s, 64, 577, 2, 0, 0);
    /* muppet per dim-0 slice (MuPPET's one scale per image, a batch in one call) */
    ck_assert_int_eq(quant_spec_parse("muppet(8)", &s), ADAPT_OK);
    s.block = QUANT_BLOCK_DIM0;
    s.rounding = QUANT_ROUND_STOCHASTIC;
    compare(&s, 128, 784, 2, 96, 5);
    compare(&s, 128, 784, 2, 0, 0);
    /* MX: one warp per 32-element block, blocks restart at every row (577 = 18 x 32 + 1) */
    ck_assert_int_eq(quant_spec_parse("mxfp6_e3m2", &s), ADAPT_OK);
    s.rounding = QUANT_ROUND_STOCHASTIC;
    compare(&s, 64, 577, 2, 96, 5);
    compare(&s, 64, 577, 2, 0, 0);
    ck_assert_int_eq(quant_spec_parse("mxint8", &s), ADAPT_OK);
    compare(&s, 33, 70, 9, 32, 1);
}
END_TEST

/* In place on the device gives the same result. */
START_TEST(test_cuda_inplace)
{
    const size_t n = 4099;
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    ck_assert(x && y);
    fill(x, n, 3);
    struct quant_spec s;
    ck_assert_int_eq(quant_spec_parse("fp16", &s), ADAPT_OK);
    s.rounding = QUANT_ROUND_STOCHASTIC;
    struct quant_key key = {1, 2, 3};
    ck_assert_int_eq(quant_rows(&s, x, y, 1, n, key, NULL, NULL), ADAPT_OK);
    float *x0 = malloc(n * sizeof *x0);
    ck_assert(x0);
    memcpy(x0, x, n * sizeof *x0);
    ck_assert_int_eq(quant_cuda_rows_host(&s, x, x, 1, n, key, NULL, NULL), ADAPT_OK);
    expect_floats("fp16 stochastic in place, index 3", x0, y, x, n);
    free(x), free(y), free(x0);
}
END_TEST

/* Several roundings in one launch (quant_cuda_list_on, what the GPU engine uses for a step's
 * weight copies and gradients): each job's bits and counts are those of quant_rows on that job
 * alone. 70 jobs, so that the list takes two launches; formats and modes mixed, lengths from 0
 * to 300001, odd Philox offsets, one in place. */
START_TEST(test_cuda_list)
{
    static const char *fits[] = {
        "fixed(8,4)", "fixed(32,28)", "fp16",        "bf16",       "float(4,3)",
        "e4m3",       "e5m2",         "fixed(12,7)", "float(2,1)", "float(6,4,bias=127,sub=0)"};
    static const size_t lens[] = {1, 5, 300001, 0, 4097, 33, 2, 1024, 77, 3};
    enum { K = 70 };
    struct quant_spec s[K];
    struct quant_cuda_job jobs[K];
    struct quant_stats a[K], b[K];
    float *x[K], *yc[K], *yg[K];
    for (int i = 0; i < K; i++) {
        const size_t n = i < 10 ? lens[i] : 1 + (size_t)i * 37;
        ck_assert_int_eq(quant_spec_parse(fits[i % 10], &s[i]), ADAPT_OK);
        s[i].rounding = i % 3 == 2 ? QUANT_ROUND_NEAREST : QUANT_ROUND_STOCHASTIC;
        s[i].tie = i % 3 == 1 ? QUANT_TIE_AWAY : QUANT_TIE_EVEN;
        ck_assert(quant_cuda_list_fits(&s[i]));
        x[i] = malloc((n + 1) * sizeof(float));
        yc[i] = malloc((n + 1) * sizeof(float));
        yg[i] = malloc((n + 1) * sizeof(float));
        ck_assert(x[i] && yc[i] && yg[i]);
        if (n) fill(x[i], n, 100 + (uint64_t)i);
        memcpy(yg[i], x[i], n * sizeof(float));
        struct quant_key key = {0x77 + (uint64_t)i, ADAPT_STREAM_QUANT + (uint64_t)i,
                                3 + 5 * (uint64_t)i};
        a[i] = b[i] = (struct quant_stats){0, 0, 0};
        ck_assert_int_eq(quant_rows(&s[i], x[i], yc[i], 1, n, key, NULL, &a[i]), ADAPT_OK);
        /* job 6 in place */
        jobs[i] = (struct quant_cuda_job){&s[i], i == 6 ? yg[i] : x[i], yg[i], n, key, NULL};
    }
    ck_assert_msg(quant_cuda_list_host(jobs, K, b) == ADAPT_OK, "%s", adapt_error_message());
    /* every job compared, then one assertion naming the jobs that differ */
    char msg[3072] = "", name[QUANT_SPEC_STR_MAX + 32], what[QUANT_SPEC_STR_MAX + 64];
    int nbad = 0;
    for (int i = 0; i < K; i++) {
        size_t first;
        nbad += diff_floats(yc[i], yg[i], jobs[i].n, &first) || !same_stats(&a[i], &b[i]);
        what[0] = '\0';
        appendf(what, sizeof what, "job %d %s, n %zu", i, spec_name(&s[i], name, sizeof name),
                jobs[i].n);
        describe_floats(msg, sizeof msg, what, x[i], yc[i], yg[i], jobs[i].n);
        describe_stats(msg, sizeof msg, what, &a[i], &b[i]);
        free(x[i]), free(yc[i]), free(yg[i]);
    }
    ck_assert_msg(nbad == 0, "%d of %d jobs differ:\n%s", nbad, K, msg);
    /* a format whose scale comes from the data is refused by name */
    struct quant_spec bad;
    ck_assert_int_eq(quant_spec_parse("bfp(8)", &bad), ADAPT_OK);
    float v = 1.0f;
    struct quant_cuda_job j = {&bad, &v, &v, 1, {1, 2, 3}, NULL};
    ck_assert_int_eq(quant_cuda_list_host(&j, 1, NULL), ADAPT_EINVAL);
    ck_assert_ptr_nonnull(strstr(adapt_error_message(), "bfp"));
}
END_TEST

/* ---- 16 random bits per element (struct quant_spec's sr_bits = 16) ----
 * Element i takes half i & 1 of Philox value i / 2 (quant_sr_bits_at): the GPU's round_part16
 * takes eight elements per Philox block (two float4 when index % 8 == 0, x and y aligned and no
 * mask), the MX kernel one value per element; CPU and GPU agree bit for bit. Every format,
 * masked (element by element) at odd and even starting indices, and without a mask at index 0
 * and 8 (the float4 path; 70001 elements leave a tail of 1) and 4 and 1 (element by element). A
 * loop test: one iteration per format. */
START_TEST(test_cuda_sr16)
{
    struct quant_spec s;
    ck_assert_int_eq(quant_spec_parse(formats[_i], &s), ADAPT_OK);
    s.rounding = QUANT_ROUND_STOCHASTIC;
    s.sr_bits = QUANT_SR_BITS_16;
    compare(&s, 1, 100003, 5 + (uint64_t)_i, 0, 0);
    compare(&s, 3, 1027, 2, 96, 5);
    compare(&s, 1, 4099, 7, 64, 3);
    char name[QUANT_SPEC_STR_MAX + 32], what[QUANT_SPEC_STR_MAX + 96];
    const uint64_t starts[4] = {0, 8, 4, 1};
    const size_t n = 70001;
    float *x = malloc(n * sizeof *x), *yc = malloc(n * sizeof *yc), *yg = malloc(n * sizeof *yg);
    ck_assert(x && yc && yg);
    fill(x, n, 31 + (uint64_t)_i);
    for (int k = 0; k < 4; k++) {
        struct quant_key key = {0x16, ADAPT_STREAM_QUANT + 11, starts[k]};
        ck_assert_int_eq(quant_rows(&s, x, yc, 1, n, key, NULL, NULL), ADAPT_OK);
        ck_assert_msg(quant_cuda_rows_host(&s, x, yg, 1, n, key, NULL, NULL) == ADAPT_OK, "%s",
                      adapt_error_message());
        what[0] = '\0';
        appendf(what, sizeof what, "%s, 16 bits, no mask, index %" PRIu64,
                spec_name(&s, name, sizeof name), starts[k]);
        expect_floats(what, x, yc, yg, n);
    }
    free(x), free(yc), free(yg);
}
END_TEST

/* 16 random bits in a list launch (round_part from round_list_kernel): jobs at odd and even
 * indices, mixed with 32-bit jobs. */
START_TEST(test_cuda_sr16_list)
{
    static const char *fits[] = {"fixed(8,4)", "fp16", "bf16", "e4m3", "float(2,1)"};
    enum { K = 10 };
    struct quant_spec s[K];
    struct quant_cuda_job jobs[K];
    struct quant_stats a[K], b[K];
    float *x[K], *yc[K], *yg[K];
    for (int i = 0; i < K; i++) {
        const size_t n = 1 + (size_t)i * 4093;
        ck_assert_int_eq(quant_spec_parse(fits[i % 5], &s[i]), ADAPT_OK);
        s[i].rounding = QUANT_ROUND_STOCHASTIC;
        s[i].sr_bits = i < 5 || i % 2 ? QUANT_SR_BITS_16 : QUANT_SR_BITS_32;
        x[i] = malloc(n * sizeof(float));
        yc[i] = malloc(n * sizeof(float));
        yg[i] = malloc(n * sizeof(float));
        ck_assert(x[i] && yc[i] && yg[i]);
        fill(x[i], n, 500 + (uint64_t)i);
        struct quant_key key = {0x99, ADAPT_STREAM_QUANT + (uint64_t)i, (uint64_t)i};
        a[i] = b[i] = (struct quant_stats){0, 0, 0};
        ck_assert_int_eq(quant_rows(&s[i], x[i], yc[i], 1, n, key, NULL, &a[i]), ADAPT_OK);
        jobs[i] = (struct quant_cuda_job){&s[i], x[i], yg[i], n, key, NULL};
    }
    ck_assert_msg(quant_cuda_list_host(jobs, K, b) == ADAPT_OK, "%s", adapt_error_message());
    char msg[3072] = "", name[QUANT_SPEC_STR_MAX + 32], what[QUANT_SPEC_STR_MAX + 64];
    int nbad = 0;
    for (int i = 0; i < K; i++) {
        size_t first;
        nbad += diff_floats(yc[i], yg[i], jobs[i].n, &first) || !same_stats(&a[i], &b[i]);
        what[0] = '\0';
        appendf(what, sizeof what, "job %d %s, %d bits, n %zu", i,
                spec_name(&s[i], name, sizeof name), s[i].sr_bits, jobs[i].n);
        describe_floats(msg, sizeof msg, what, x[i], yc[i], yg[i], jobs[i].n);
        describe_stats(msg, sizeof msg, what, &a[i], &b[i]);
        free(x[i]), free(yc[i]), free(yg[i]);
    }
    ck_assert_msg(nbad == 0, "%d of %d jobs differ:\n%s", nbad, K, msg);
}
END_TEST

/* ---- the float4 path of round_part (src/quant/cuda/quant.cu) ----
 * round_part reads and writes a Philox block of four elements as one float4 when the kernel has
 * no mask, key.index % 4 == 0 and x and y are both 16-byte aligned; the block must also lie
 * wholly inside the array (4t + 4 <= n): the last n % 4 elements go element by element. Any
 * other case (index % 4 != 0, x or y off a 16-byte boundary) goes element by element throughout.
 * bfp and muppet with block dim0 look their row's grid up per element (grids[j / cols]), also
 * inside a float4 block that crosses a row boundary. */

/* bfp and muppet with block dim0 (one grid per row, PERROW kernels), fixed and fp16 (one plan). */
static const char *vec_formats[] = {"fixed(8,4)", "fp16", "bfp(8)", "muppet(8)"};
enum { NVEC = sizeof vec_formats / sizeof vec_formats[0] };

static void vec_spec(int i, struct quant_spec *s)
{
    ck_assert_int_eq(quant_spec_parse(vec_formats[i / 3], s), ADAPT_OK);
    if (s->format == QUANT_FORMAT_BFP || s->format == QUANT_FORMAT_MUPPET)
        s->block = QUANT_BLOCK_DIM0;
    set_mode(s, i % 3);
}

/* (rows, cols): n = rows * cols with n % 4 = 3, 1, 2, 0, 0, 3, 0, 3, 2; cols 13, 37, 7, 577,
 * 1027, 3 and 1 are not multiples of 4, so float4 blocks cross row boundaries (with per-row
 * grids: two grids in one float4); cols 12 and 4 are. 64 x 577 and 33 x 1027 take many
 * threads and blocks. */
static const size_t vec_shapes[][2] = {{7, 13},    {9, 37}, {6, 7}, {5, 12}, {64, 577},
                                       {33, 1027}, {1, 4},  {1, 3}, {2, 1}};
enum { NSHAPES = sizeof vec_shapes / sizeof vec_shapes[0] };

/* quant_cuda_rows_host with mask NULL against quant_rows with mask NULL: its device arrays come
 * from cudaMalloc (256-byte aligned), so index 0 and 4 take the float4 path (tails of n % 4
 * elements element by element) and index 1 the element-by-element path (its first Philox block
 * holds elements 0..2 only); one shape also in place (x == y: one device array, float4 path).
 * A loop test: iteration i = 3 format + mode. */
START_TEST(test_cuda_vec_rows)
{
    struct quant_spec s;
    vec_spec(_i, &s);
    static const uint64_t indices[] = {0, 4, 1};
    char msg[3072] = "", name[QUANT_SPEC_STR_MAX + 32], what[QUANT_SPEC_STR_MAX + 128];
    int nbad = 0, ncases = 0;
    spec_name(&s, name, sizeof name);
    for (size_t k = 0; k < NSHAPES; k++)
        for (size_t m = 0; m < sizeof indices / sizeof indices[0]; m++)
            for (int inplace = 0; inplace < (k == 0 && m == 0 ? 2 : 1); inplace++) {
                const size_t rows = vec_shapes[k][0], cols = vec_shapes[k][1], n = rows * cols;
                float *x = malloc(n * sizeof *x), *yc = malloc(n * sizeof *yc),
                      *yg = malloc(n * sizeof *yg);
                ck_assert(x && yc && yg);
                fill(x, n, 40 + k);
                struct quant_key key = {0x9e37 + k, ADAPT_STREAM_QUANT + 5, indices[m]};
                struct quant_stats a = {0, 0, 0}, b = {0, 0, 0};
                ck_assert_int_eq(quant_rows(&s, x, yc, rows, cols, key, NULL, &a), ADAPT_OK);
                if (inplace) memcpy(yg, x, n * sizeof *yg);
                ck_assert_msg(quant_cuda_rows_host(&s, inplace ? yg : x, yg, rows, cols, key, NULL,
                                                   &b) == ADAPT_OK,
                              "%s", adapt_error_message());
                what[0] = '\0';
                appendf(what, sizeof what, "%s, %zu x %zu, index %" PRIu64 "%s", name, rows, cols,
                        indices[m], inplace ? ", in place" : "");
                size_t first;
                nbad += diff_floats(yc, yg, n, &first) || !same_stats(&a, &b);
                ncases++;
                describe_floats(msg, sizeof msg, what, x, yc, yg, n);
                describe_stats(msg, sizeof msg, what, &a, &b);
                free(x), free(yc), free(yg);
            }
    ck_assert_msg(nbad == 0, "%d of %d roundings differ:\n%s", nbad, ncases, msg);
}
END_TEST

#ifdef ADAPT_HAVE_CUDA
/* Device arrays for the cases that place x and y themselves (quant_cuda_rows_host and
 * quant_cuda_list_host choose their own device addresses). */
static void *dev_alloc(size_t bytes)
{
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, bytes);
    ck_assert_msg(e == cudaSuccess, "cudaMalloc(%zu): %s", bytes, cudaGetErrorString(e));
    return p;
}

static void dev_copy(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind)
{
    cudaError_t e = cudaMemcpy(dst, src, bytes, kind);
    ck_assert_msg(e == cudaSuccess, "cudaMemcpy(%zu bytes): %s", bytes, cudaGetErrorString(e));
}

/* What device and host arrays hold outside the elements a rounding may write: finite, with more
 * mantissa bits than fixed(8,4), fp16 or the 8-bit formats keep, so a stray write of a rounded
 * value changes it (and, unlike a NaN, tu_same_bits sees the change). */
static const float kGuard = 0x1.3579bdp-3f;

/* Counts elements of v[0..n) whose bits are not kGuard's. */
static size_t guards_changed(const float *v, size_t n)
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++) c += bits_of(v[i]) != bits_of(kGuard);
    return c;
}

/* Where x and y lie in their device allocations (cudaMalloc: 256-byte aligned), in floats. */
struct placement {
    size_t xoff, yoff;
    int inplace; /* y = x (yoff unused) */
    const char *path;
};
static const struct placement places[] = {
    {0, 0, 0, "x and y aligned: float4 blocks"},
    {4, 4, 0, "x + 4, y + 4 (16 bytes in, aligned): float4 blocks"},
    {1, 0, 0, "x + 1 (4 bytes off): element by element"},
    {0, 1, 0, "y + 1: element by element"},
    {1, 1, 0, "x + 1, y + 1: element by element"},
    {2, 2, 0, "x + 2, y + 2 (8 bytes off): element by element"},
    {0, 0, 1, "in place, aligned: float4 blocks"},
    {3, 3, 1, "in place at x + 3 (12 bytes off): element by element"},
};

/* quant_cuda_rows (mask NULL, key index 0) on device sub-arrays at the offsets of places[]
 * against quant_rows on host arrays at the same offsets (the CPU kernel on unaligned arrays too),
 * for every shape (tails n % 4 = 0, 1, 2, 3; per-row grids across float4 blocks). Both
 * allocations are (n + 8) floats of kGuard around the data: the elements outside [off, off + n)
 * must keep it (a float4 store past the end would change them), and x must keep its input
 * unless in place. Loop test: iteration i = 3 format + mode. */
START_TEST(test_cuda_vec_offsets)
{
    struct quant_spec s;
    vec_spec(_i, &s);
    char msg[3072] = "", name[QUANT_SPEC_STR_MAX + 32], what[QUANT_SPEC_STR_MAX + 192];
    int nbad = 0, ncases = 0;
    spec_name(&s, name, sizeof name);
    for (size_t k = 0; k < NSHAPES; k++)
        for (size_t pl = 0; pl < sizeof places / sizeof places[0]; pl++) {
            const struct placement *P = &places[pl];
            const size_t rows = vec_shapes[k][0], cols = vec_shapes[k][1], n = rows * cols;
            const size_t cap = n + 8, xoff = P->xoff, yoff = P->inplace ? P->xoff : P->yoff;
            /* hx: x's allocation; hc: the CPU's output allocation (x's when in place); hin:
             * element i's input at the output's index i (for messages); hg, hx2: read back */
            float *hx = malloc(cap * sizeof *hx), *hc = malloc(cap * sizeof *hc),
                  *hin = malloc(cap * sizeof *hin), *hg = malloc(cap * sizeof *hg),
                  *hx2 = malloc(cap * sizeof *hx2);
            ck_assert(hx && hc && hin && hg && hx2);
            for (size_t i = 0; i < cap; i++) hx[i] = hc[i] = hin[i] = kGuard;
            fill(hx + xoff, n, 60 + k);
            memcpy(hin + yoff, hx + xoff, n * sizeof *hin);
            if (P->inplace) memcpy(hc, hx, cap * sizeof *hc);
            struct quant_key key = {0x4f1b + k, ADAPT_STREAM_QUANT + 9, 0};
            struct quant_stats a = {0, 0, 0}, b = {0, 0, 0};
            ck_assert_int_eq(quant_rows(&s, P->inplace ? hc + xoff : hx + xoff, hc + yoff, rows,
                                        cols, key, NULL, &a),
                             ADAPT_OK);

            float *dx = dev_alloc(cap * sizeof *dx);
            float *dy = P->inplace ? dx : dev_alloc(cap * sizeof *dy);
            dev_copy(dx, hx, cap * sizeof *hx, cudaMemcpyHostToDevice);
            if (!P->inplace) {
                for (size_t i = 0; i < cap; i++) hg[i] = kGuard;
                dev_copy(dy, hg, cap * sizeof *hg, cudaMemcpyHostToDevice);
            }
            enum adapt_status st =
                quant_cuda_rows(&s, dx + xoff, dy + yoff, rows, cols, key, NULL, &b);
            ck_assert_msg(st == ADAPT_OK, "%s", adapt_error_message());
            dev_copy(hg, dy, cap * sizeof *hg, cudaMemcpyDeviceToHost);
            dev_copy(hx2, dx, cap * sizeof *hx2, cudaMemcpyDeviceToHost);
            if (!P->inplace) cudaFree(dy);
            cudaFree(dx);

            what[0] = '\0';
            appendf(what, sizeof what, "%s, %zu x %zu, %s (allocation of n + 8)", name, rows, cols,
                    P->path);
            size_t first,
                g = guards_changed(hg, yoff) + guards_changed(hg + yoff + n, cap - yoff - n);
            int bad = diff_floats(hc, hg, cap, &first) || !same_stats(&a, &b) || g;
            describe_floats(msg, sizeof msg, what, hin, hc, hg, cap);
            describe_stats(msg, sizeof msg, what, &a, &b);
            if (g)
                appendf(msg, sizeof msg, "%s: %zu elements outside the array changed\n", what, g);
            if (!P->inplace) { /* the input stays */
                bad |= diff_floats(hx, hx2, cap, &first) != 0;
                char w2[sizeof what + 16];
                w2[0] = '\0';
                appendf(w2, sizeof w2, "%s, input", what);
                describe_floats(msg, sizeof msg, w2, hx, hx, hx2, cap);
            }
            nbad += bad;
            ncases++;
            free(hx), free(hc), free(hin), free(hg), free(hx2);
        }
    ck_assert_msg(nbad == 0, "%d of %d roundings differ:\n%s", nbad, ncases, msg);
}
END_TEST

/* A list job's length, key index and placement (floats from 256-byte boundaries; in place: y =
 * x), and the path its Philox blocks take in round_part. */
static const struct {
    size_t n;
    uint64_t index;
    size_t xoff, yoff;
    int inplace;
} ljobs[] = {
    {1024, 0, 0, 0, 0},   /* n % 4 == 0, index 0, x and y aligned: all float4 */
    {300000, 0, 0, 0, 0}, /* the same over 293 blocks of 256 threads */
    {4096, 4, 4, 8, 0},   /* index 4, x and y 16 and 32 bytes in: all float4 */
    {2048, 0, 0, 0, 1},   /* in place, aligned: all float4 */
    {4, 0, 0, 0, 0},      /* one float4 */
    {1024, 0, 1, 0, 0},   /* x 4 bytes off: element by element */
    {1024, 0, 0, 2, 0},   /* y 8 bytes off: element by element */
    {1024, 0, 3, 3, 1},   /* in place, 12 bytes off: element by element */
    {1024, 1, 0, 0, 0},   /* index 1: element by element, blocks straddle the start */
    {1026, 2, 0, 0, 0},   /* index 2 */
    {0, 0, 0, 0, 0},      /* empty, NULL arrays: no blocks */
    {1023, 0, 0, 0, 0},   /* float4, then a tail of 3 element by element */
    {1025, 8, 0, 0, 0},   /* float4, tail of 1 */
    {1026, 0, 0, 0, 0},   /* float4, tail of 2 */
    {3, 0, 0, 0, 0},      /* the tail only */
    {0, 4, 0, 0, 0},      /* empty, with arrays: nothing written */
    {77, 0, 1, 1, 0},     /* both 4 bytes off, n % 4 == 1 */
};
enum { NLJOBS = sizeof ljobs / sizeof ljobs[0] };

/* quant_cuda_list_on over the jobs of ljobs[] in device arrays this test places (one
 * allocation; each job's x and y in regions of their own that start on 256-byte boundaries and
 * hold kGuard around the data), against quant_rows on each job alone. Formats rotate over those
 * a list takes; the loop's iteration is the rounding mode (0 even, 1 away, 2 stochastic). */
START_TEST(test_cuda_vec_list)
{
    static const char *fits[] = {
        "fixed(8,4)", "fp16",        "bf16",       "e4m3",
        "e5m2",       "fixed(12,7)", "float(4,3)", "float(6,4,bias=127,sub=0)"};
    enum { NF = sizeof fits / sizeof fits[0] };
    struct quant_spec s[NLJOBS];
    struct quant_cuda_job jobs[NLJOBS];
    struct quant_stats a[NLJOBS], b[NLJOBS];
    size_t xpos[NLJOBS], ypos[NLJOBS], region[NLJOBS], total = 0;
    for (int i = 0; i < NLJOBS; i++) {
        /* a region: the data, its offset and guards, rounded up to 64 floats (256 bytes) */
        region[i] = (ljobs[i].n + 8 + 63) / 64 * 64;
        xpos[i] = total + ljobs[i].xoff;
        total += region[i];
        if (ljobs[i].inplace) {
            ypos[i] = xpos[i];
        } else {
            ypos[i] = total + ljobs[i].yoff;
            total += region[i];
        }
    }
    float *hx = malloc(total * sizeof *hx), *hc = malloc(total * sizeof *hc),
          *hin = malloc(total * sizeof *hin), *hg = malloc(total * sizeof *hg);
    ck_assert(hx && hc && hin && hg);
    for (size_t i = 0; i < total; i++) hx[i] = hin[i] = kGuard;
    for (int i = 0; i < NLJOBS; i++) {
        fill(hx + xpos[i], ljobs[i].n, 200 + (uint64_t)i);
        memcpy(hin + ypos[i], hx + xpos[i], ljobs[i].n * sizeof *hin);
    }
    memcpy(hc, hx, total * sizeof *hc);
    float *d = dev_alloc(total * sizeof *d);
    unsigned long long *dc = dev_alloc(3 * NLJOBS * sizeof *dc);
    dev_copy(d, hx, total * sizeof *hx, cudaMemcpyHostToDevice);
    ck_assert(cudaMemset(dc, 0, 3 * NLJOBS * sizeof *dc) == cudaSuccess);
    for (int i = 0; i < NLJOBS; i++) {
        ck_assert_int_eq(quant_spec_parse(fits[(i + _i) % NF], &s[i]), ADAPT_OK);
        set_mode(&s[i], _i);
        ck_assert(quant_cuda_list_fits(&s[i]));
        struct quant_key key = {0x51 + (uint64_t)i, ADAPT_STREAM_QUANT + 11 + (uint64_t)i,
                                ljobs[i].index};
        a[i] = (struct quant_stats){0, 0, 0};
        if (ljobs[i].n) /* hc's x regions hold the inputs until their job rounds */
            ck_assert_int_eq(
                quant_rows(&s[i], hc + xpos[i], hc + ypos[i], 1, ljobs[i].n, key, NULL, &a[i]),
                ADAPT_OK);
        /* the empty job at index 0 passes NULL arrays, the one at index 4 real ones */
        const int null = ljobs[i].n == 0 && ljobs[i].index == 0;
        jobs[i] = (struct quant_cuda_job){
            &s[i], null ? NULL : d + xpos[i], null ? NULL : d + ypos[i], ljobs[i].n,
            key,   dc + 3 * (size_t)i};
    }
    ck_assert_msg(quant_cuda_list_on(jobs, NLJOBS, NULL) == ADAPT_OK, "%s", adapt_error_message());
    cudaError_t e = cudaDeviceSynchronize();
    ck_assert_msg(e == cudaSuccess, "list kernel: %s", cudaGetErrorString(e));
    unsigned long long hcnt[3 * NLJOBS];
    dev_copy(hg, d, total * sizeof *hg, cudaMemcpyDeviceToHost);
    dev_copy(hcnt, dc, sizeof hcnt, cudaMemcpyDeviceToHost);
    cudaFree(d);
    cudaFree(dc);

    /* each job's regions compared whole: results, guards, and x's input when not in place */
    char msg[3072] = "", name[QUANT_SPEC_STR_MAX + 32], what[QUANT_SPEC_STR_MAX + 96];
    int nbad = 0;
    for (int i = 0; i < NLJOBS; i++) {
        b[i] = (struct quant_stats){hcnt[3 * i], hcnt[3 * i + 1], hcnt[3 * i + 2]};
        const size_t x0 = xpos[i] - ljobs[i].xoff,
                     span = ljobs[i].inplace ? region[i] : 2 * region[i];
        what[0] = '\0';
        appendf(what, sizeof what, "job %d %s, n %zu, index %" PRIu64 ", x + %zu, y + %zu%s", i,
                spec_name(&s[i], name, sizeof name), ljobs[i].n, ljobs[i].index, ljobs[i].xoff,
                ljobs[i].yoff, ljobs[i].inplace ? " (in place)" : "");
        size_t first;
        nbad += diff_floats(hc + x0, hg + x0, span, &first) || !same_stats(&a[i], &b[i]);
        describe_floats(msg, sizeof msg, what, hin + x0, hc + x0, hg + x0, span);
        describe_stats(msg, sizeof msg, what, &a[i], &b[i]);
    }
    ck_assert_msg(nbad == 0, "%d of %d jobs differ:\n%s", nbad, (int)NLJOBS, msg);
    free(hx), free(hc), free(hin), free(hg);
}
END_TEST
#endif

int main(void)
{
    char desc[256];
    if (!tu_cuda_device("test_quant_cuda", quant_cuda_built(), desc, sizeof desc)) return 77;
    Suite *su = suite_create("quant_cuda");
    TCase *tc = tcase_create("parity");
    tu_watchdog(tc, "parity", 120);
    tcase_add_loop_test(tc, test_cuda_parity, 0, 3 * NFORMATS);
    tcase_add_test(tc, test_cuda_launch_shape);
    tcase_add_test(tc, test_cuda_inplace);
    tcase_add_test(tc, test_cuda_list);
    tcase_add_loop_test(tc, test_cuda_sr16, 0, NFORMATS);
    tcase_add_test(tc, test_cuda_sr16_list);
    suite_add_tcase(su, tc);
    /* the float4 path: well under a second an iteration on a GPU, the budget leaves room for the
     * CUDA context's start when the case runs alone (CK_RUN_CASE=vector) */
    TCase *tv = tcase_create("vector");
    tu_watchdog(tv, "vector", 30);
    tcase_add_loop_test(tv, test_cuda_vec_rows, 0, 3 * NVEC);
#ifdef ADAPT_HAVE_CUDA
    tcase_add_loop_test(tv, test_cuda_vec_offsets, 0, 3 * NVEC);
    tcase_add_loop_test(tv, test_cuda_vec_list, 0, 3);
#endif
    suite_add_tcase(su, tv);
    return tu_run_suite(su, CK_NOFORK);
}
