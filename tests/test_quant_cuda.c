/* tests/test_quant_cuda.c: CUDA kernels of src/quant/ against the CPU kernels, bit for bit.
 * Exits 77 (skip) when the build has no CUDA or the machine no GPU; runs without fork
 * (CUDA does not survive fork()). */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    x[0] = NAN;
    x[1] = INFINITY;
    x[2] = -0.0f;
}

static const char *formats[] = {"fixed(8,4)", "fixed(32,28)", "fixed(32,31)", "bfp(8)", "muppet(8)",
                                "fp16", "bf16", "float(4,3)", "float(2,1)", "e4m3", "e5m2",
                                "mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e2m3", "mxfp6_e3m2", "mxfp4",
                                "mxint8", "float(4,3,bias=11,nan=fn,ovf=inf)",
                                "float(2,1,nan=none)", "float(6,4,bias=127,sub=0)",
                                "float(5,3,bias=123)"};

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
    ck_assert_msg(quant_cuda_rows_host(s, x, yg, rows, cols, key, mg, &b) == ADAPT_OK, "%s",
                  adapt_error_message());
    quant_cuda_set_launch(0, 0);
    char buf[QUANT_SPEC_STR_MAX];
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(tu_same_bits(yc[i], yg[i]) && mc[i] == mg[i],
                      "%s mode %d: x[%zu] = %a: CPU %a, GPU %a", quant_spec_str(s, buf, sizeof buf),
                      (int)s->rounding, i, x[i], yc[i], yg[i]);
    ck_assert_uint_eq(a.saturated, b.saturated);
    ck_assert_uint_eq(a.flushed, b.flushed);
    ck_assert_uint_eq(a.zeros, b.zeros);
    free(x), free(yc), free(yg), free(mc), free(mg);
}

/* Every format and rounding mode: CPU and GPU give the same bits, masks and counters (the
 * stochastic ones prove cuRAND's Philox equals src/base/rng.h for these keys). */
START_TEST(test_cuda_parity)
{
    for (size_t f = 0; f < sizeof formats / sizeof formats[0]; f++)
        for (int mode = 0; mode < 3; mode++) {
            struct quant_spec s;
            ck_assert_int_eq(quant_spec_parse(formats[f], &s), ADAPT_OK);
            s.rounding = mode == 2 ? QUANT_ROUND_STOCHASTIC : QUANT_ROUND_NEAREST;
            s.tie = mode == 1 ? QUANT_TIE_AWAY : QUANT_TIE_EVEN;
            compare(&s, 1, 300001, 5 + f, 0, 0);
        }
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
    ck_assert_int_eq(quant_cuda_rows_host(&s, x, x, 1, n, key, NULL, NULL), ADAPT_OK);
    for (size_t i = 0; i < n; i++) ck_assert(tu_same_bits(x[i], y[i]));
    free(x), free(y);
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
    char buf[QUANT_SPEC_STR_MAX];
    for (int i = 0; i < K; i++) {
        for (size_t j = 0; j < jobs[i].n; j++)
            ck_assert_msg(tu_same_bits(yc[i][j], yg[i][j]),
                          "job %d %s: x[%zu] = %a: CPU %a, GPU %a", i,
                          quant_spec_str(&s[i], buf, sizeof buf), j, x[i][j], yc[i][j], yg[i][j]);
        ck_assert_uint_eq(a[i].saturated, b[i].saturated);
        ck_assert_uint_eq(a[i].flushed, b[i].flushed);
        ck_assert_uint_eq(a[i].zeros, b[i].zeros);
        free(x[i]), free(yc[i]), free(yg[i]);
    }
    /* a format whose scale comes from the data is refused by name */
    struct quant_spec bad;
    ck_assert_int_eq(quant_spec_parse("bfp(8)", &bad), ADAPT_OK);
    float v = 1.0f;
    struct quant_cuda_job j = {&bad, &v, &v, 1, {1, 2, 3}, NULL};
    ck_assert_int_eq(quant_cuda_list_host(&j, 1, NULL), ADAPT_EINVAL);
    ck_assert_ptr_nonnull(strstr(adapt_error_message(), "bfp"));
}
END_TEST

int main(void)
{
    char desc[256];
    if (!tu_cuda_device("test_quant_cuda", quant_cuda_built(), desc, sizeof desc)) return 77;
    Suite *su = suite_create("quant_cuda");
    TCase *tc = tcase_create("parity");
    tu_watchdog(tc, "parity", 120);
    tcase_add_test(tc, test_cuda_parity);
    tcase_add_test(tc, test_cuda_launch_shape);
    tcase_add_test(tc, test_cuda_inplace);
    tcase_add_test(tc, test_cuda_list);
    suite_add_tcase(su, tc);
    return tu_run_suite(su, CK_NOFORK);
}
