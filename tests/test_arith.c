/* tests/test_arith.c: arithmetic.accumulator in the training engine (src/policy/arith.c,
 * src/net/layers/arith_gemm.c; doc/numerics.md, "Accumulators"): the configuration's grammar,
 * a hand-derived step through a linear unit whose forward and weight-gradient sums overflow an
 * 8-bit register, and properties of LeNet-5 that hold whatever the kernels: a wide enough
 * register equals exact arithmetic, and exact equals float32 where every partial sum is a
 * float32 (products of <8,4> values are multiples of 2^-8 below 2^14 in magnitude, so sums of
 * fewer than 2^10 of them keep 24 significant bits). */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "src/config/config.h"
#include "src/net/layers/layers_impl.h"
#include "src/net/net.h"
#include "src/policy/precision.h"
#include "src/quant/accum_fast.h"
#include "tests/testutil_net.h"

/* ---- the grammar ---- */

START_TEST(test_parse_roundtrip)
{
    static const char *const in[][2] = {
        {"float32", "float32"},
        {" exact ", "exact"},
        {"int(24)", "int(24, wrap)"},
        {"int(16,saturate)", "int(16, saturate)"},
        {"int(32, wrap, 12)", "int(32, wrap, 12)"},
        {"int(16, saturate, 8, nearest)", "int(16, saturate, 8, nearest)"},
        {"int(16,saturate,8,floor)", "int(16, saturate, 8)"},
        {"float(bf16)", "float(bf16, 0)"},
        {"float(fp16, 32)", "float(fp16, 32)"},
    };
    for (size_t i = 0; i < sizeof in / sizeof in[0]; i++) {
        struct quant_acc a, b;
        char buf[QUANT_SPEC_STR_MAX + 32], buf2[QUANT_SPEC_STR_MAX + 32];
        ck_assert_msg(quant_acc_parse(in[i][0], &a) == ADAPT_OK, "%s: %s", in[i][0],
                      adapt_error_message());
        ck_assert_str_eq(quant_acc_str(&a, buf, sizeof buf), in[i][1]);
        /* what a trace or checkpoint stores parses to the same model */
        ck_assert_int_eq(quant_acc_parse(buf, &b), ADAPT_OK);
        ck_assert_str_eq(quant_acc_str(&b, buf2, sizeof buf2), buf);
    }
}
END_TEST

START_TEST(test_parse_errors)
{
    static const char *const bad[][2] = {
        {"int(1)", "2..64"},
        {"int(65)", "2..64"},
        {"int(24, clamp)", "clamp"},
        {"int(24, wrap, 99)", "99"},
        {"float(nope)", "nope"},
        {"float(fp16, -1)", "-1"},
        {"float(fp32)", "fp32"},
        {"sum", "expected float32"},
        {"int(24", "expected"},
        {"wide(8)", "unknown kind"},
        {"int(16, wrap, 8, up)", "alignment \"up\""},
        {"int(16, wrap, , nearest)", "fractional bits \"\""},
        {"int(16, wrap, 8, nearest, 1)", "expected int(BITS"},
        {"int(2, 3, 4, 5, 6, 7, 8)", "expected int(BITS"},
        {"float(fp16, 3, 4, 5, 6)", "expected float(FORMAT"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct quant_acc a;
        ck_assert_msg(quant_acc_parse(bad[i][0], &a) != ADAPT_OK, "%s parsed", bad[i][0]);
        ck_assert_msg(strstr(adapt_error_message(), bad[i][1]) != NULL, "%s: %s", bad[i][0],
                      adapt_error_message());
    }
}
END_TEST

static void config_error(const char *a, const char *b, const char *want)
{
    struct adapt_config cfg;
    adapt_config_init(&cfg);
    ck_assert_int_eq(adapt_config_set(&cfg, "policy.name=fixed"), ADAPT_OK);
    ck_assert_int_eq(adapt_config_set(&cfg, a), ADAPT_OK);
    if (b) ck_assert_int_eq(adapt_config_set(&cfg, b), ADAPT_OK);
    ck_assert_int_ne(adapt_config_check(&cfg), ADAPT_OK);
    ck_assert_msg(strstr(adapt_error_message(), want) != NULL, "%s: %s", a, adapt_error_message());
}

START_TEST(test_config_errors)
{
    config_error("arithmetic.accumulator=int(0)", NULL, "arithmetic.accumulator");
    config_error("arithmetic.units=conv1 exact", NULL, "expected NAME: MODEL");
    config_error("arithmetic.units=conv1: int(8, up)", NULL, "unit conv1");
    config_error("arithmetic.accumulator=exact", "policy.name=fp32", "precision units");
    config_error("arithmetic.accumulator=exact", "roles.recipe=mxfp8_gemm", "not combined");
}
END_TEST

/* The trace header's configuration: no [arithmetic] while it holds its defaults (traces of
 * default runs stay what they were), the keys as set otherwise. */
START_TEST(test_config_json)
{
    struct adapt_config cfg;
    adapt_config_init(&cfg);
    json_t *j = adapt_config_to_json(&cfg);
    ck_assert_ptr_null(json_object_get(j, "arithmetic"));
    json_decref(j);
    ck_assert_int_eq(adapt_config_set(&cfg, "arithmetic.units=0: int(16, saturate)"), ADAPT_OK);
    j = adapt_config_to_json(&cfg);
    json_t *a = json_object_get(j, "arithmetic");
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_null(json_object_get(a, "accumulator"));
    ck_assert_str_eq(json_string_value(json_object_get(a, "units")), "0: int(16, saturate)");
    json_decref(j);
}
END_TEST

/* quant_acc_gemm, the engine's entry, against the reference on packed copies: strided
 * operands and result, every kind, threaded and called from a parallel region; the same values
 * bit for bit and the same overflow count (the reference is the definition). */
START_TEST(test_strided_equals_reference)
{
    static const char *const kinds[] = {"float32",
                                        "exact",
                                        "int(12, wrap)",
                                        "int(12, saturate)",
                                        "int(20, saturate, 6)",
                                        "float(fp16, 8)",
                                        "float(bf16)"};
    const int m = 9, n = 7, k = 33, lda = 40, ldb = 11, ldc = 13;
    float A[9 * 40], B[33 * 11], C[9 * 13], a[9 * 33], b[33 * 7], r[9 * 7];
    uint64_t seed = 1;
    for (int i = 0; i < m * lda; i++)
        A[i] = (float)((int)(seed = seed * 6364136223846793005ULL + 1) >> 24) / 16.0f;
    for (int i = 0; i < k * ldb; i++)
        B[i] = (float)((int)(seed = seed * 6364136223846793005ULL + 1) >> 25) / 32.0f;
    for (int i = 0; i < m; i++) memcpy(a + i * k, A + i * lda, sizeof(float) * k);
    for (int p = 0; p < k; p++) memcpy(b + p * n, B + p * ldb, sizeof(float) * n);
    for (size_t t = 0; t < sizeof kinds / sizeof kinds[0]; t++) {
        struct quant_acc acc;
        ck_assert_int_eq(quant_acc_parse(kinds[t], &acc), ADAPT_OK);
        struct quant_acc_stats s1 = {0}, s2 = {0}, s3 = {0};
        ck_assert_int_eq(quant_acc_gemm_ref(&acc, m, n, k, a, 4, b, 5, r, &s1), ADAPT_OK);
        ck_assert_int_eq(quant_acc_gemm(&acc, m, n, k, A, lda, 4, B, ldb, 5, C, ldc, &s2),
                         ADAPT_OK);
        for (int i = 0; i < m; i++)
            ck_assert_int_eq(memcmp(C + i * ldc, r + i * n, sizeof(float) * n), 0);
        ck_assert_uint_eq(s1.overflows, s2.overflows);
        memset(C, 0, sizeof C);
#pragma omp parallel num_threads(2)
#pragma omp single
        ck_assert_int_eq(quant_acc_gemm(&acc, m, n, k, A, lda, 4, B, ldb, 5, C, ldc, &s3),
                         ADAPT_OK);
        for (int i = 0; i < m; i++)
            ck_assert_int_eq(memcmp(C + i * ldc, r + i * n, sizeof(float) * n), 0);
        ck_assert_uint_eq(s1.overflows, s3.overflows);
    }
    /* off its grid: an error naming the operand */
    struct quant_acc ex;
    ck_assert_int_eq(quant_acc_parse("exact", &ex), ADAPT_OK);
    ck_assert_int_ne(quant_acc_gemm(&ex, m, n, k, A, lda, 3, B, ldb, 5, C, ldc, NULL), ADAPT_OK);
    ck_assert_ptr_nonnull(strstr(adapt_error_message(), "is not a multiple of 2^-3"));
}
END_TEST

/* Each path of the fast kernels on each instruction set this CPU runs, on GEMM shapes of the
 * engine's units (a LeNet-5 conv2 forward: 100 pixels x 16 outputs x 150 taps; a weight
 * gradient: 16 x 25 x 3200 samples-and-pixels; a linear layer: 16 x 84 x 120), with codes of
 * 8 and 12 bits: the reference's values bit for bit and its overflow counts. The path that ran
 * is asserted, so each one is reached. */
START_TEST(test_paths_equal_reference)
{
    static const int shape[][3] = {{100, 16, 150}, {16, 25, 3200}, {16, 84, 120}};
    static const char *const kinds[] = {"exact", "int(20, wrap)", "int(20, saturate)",
                                        "int(24, saturate, 6)"};
    const enum adapt_gemm_isa isas[] = {ADAPT_GEMM_ISA_SCALAR, ADAPT_GEMM_ISA_AVX2,
                                        ADAPT_GEMM_ISA_AVX512VNNI};
    for (int sh = 0; sh < 3; sh++) {
        const int m = shape[sh][0], n = shape[sh][1], k = shape[sh][2];
        float *a = malloc(sizeof(float) * (size_t)m * k),
              *b = malloc(sizeof(float) * (size_t)k * n);
        float *r = malloc(sizeof(float) * (size_t)m * n),
              *c = malloc(sizeof(float) * (size_t)m * n);
        for (int wl = 8; wl <= 12; wl += 4) {
            const int lim = 1 << (wl - 1);
            uint64_t seed = 99 + (uint64_t)wl + (uint64_t)sh;
            for (size_t i = 0; i < (size_t)m * k; i++) {
                seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
                a[i] = (float)((int)((seed >> 33) % (uint64_t)(2 * lim)) - lim) / 16.0f;
            }
            for (size_t i = 0; i < (size_t)k * n; i++) {
                seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
                b[i] = (float)((int)((seed >> 33) % (uint64_t)(2 * lim)) - lim) / 64.0f;
            }
            for (size_t t = 0; t < sizeof kinds / sizeof kinds[0]; t++) {
                struct quant_acc acc;
                ck_assert_int_eq(quant_acc_parse(kinds[t], &acc), ADAPT_OK);
                struct quant_acc_stats s1 = {0};
                ck_assert_int_eq(quant_acc_gemm_ref(&acc, m, n, k, a, 4, b, 6, r, &s1), ADAPT_OK);
                for (int is = 0; is < 3; is++) {
                    if (!adapt_gemm_isa_available(isas[is])) continue;
                    for (int mp = QUANT_ACC_PATH_INT8; mp <= QUANT_ACC_PATH_INT64; mp++) {
                        struct quant_acc_opts o = {isas[is], (enum quant_acc_path)mp};
                        struct quant_acc_stats s2 = {0};
                        enum quant_acc_path used;
                        ck_assert_int_eq(quant_acc_gemm_opts(&o, &acc, m, n, k, a, k, 4, b, n, 6, c,
                                                             n, &s2, &used),
                                         ADAPT_OK);
                        ck_assert_msg(!memcmp(c, r, sizeof(float) * (size_t)m * n),
                                      "%s, %dx%dx%d, WL %d, %s, path %s: values differ", kinds[t],
                                      m, n, k, wl, adapt_gemm_isa_name(isas[is]),
                                      quant_acc_path_name(used));
                        ck_assert_uint_eq(s1.overflows, s2.overflows);
                        if (acc.kind == QUANT_ACC_EXACT)
                            ck_assert_int_ge((int)used, mp); /* never narrower than allowed */
                    }
                }
            }
        }
        free(a);
        free(b);
        free(r);
        free(c);
    }
}
END_TEST

/* quant_acc_gemm (dense m x n x k, fractional bits fla and flb) against the reference: the same
 * values bit for bit and the same overflow count (into *ov when ov is set); the path that ran. */
static enum quant_acc_path equals_ref(const char *kind, int m, int n, int k, const float *a,
                                      int fla, const float *b, int flb, float *c, float *r,
                                      const char *what, uint64_t *ov)
{
    struct quant_acc acc;
    ck_assert_int_eq(quant_acc_parse(kind, &acc), ADAPT_OK);
    struct quant_acc_stats s1 = {0}, s2 = {0};
    enum quant_acc_path used;
    ck_assert_int_eq(quant_acc_gemm_ref(&acc, m, n, k, a, fla, b, flb, r, &s1), ADAPT_OK);
    ck_assert_int_eq(
        quant_acc_gemm_opts(NULL, &acc, m, n, k, a, k, fla, b, n, flb, c, n, &s2, &used), ADAPT_OK);
    ck_assert_msg(!memcmp(c, r, sizeof(float) * (size_t)m * n), "%s, %s, path %s: values differ",
                  kind, what, quant_acc_path_name(used));
    ck_assert_uint_eq(s1.overflows, s2.overflows);
    if (ov) *ov = s1.overflows;
    return used;
}

/* Codes of up to 31 bits (WL 32 operands, the widths AdaPT pushes units to), whose sums need
 * more than 64 bits (values from +-2^23 steps times 2^7, so products reach 2^60): exact sums in
 * 128-bit lanes on each instruction set this CPU runs, with rows and scattered entries of zeros
 * in A (skipped); codes beyond 32 bits (exact, the 128-bit scalar path); and 63- and 64-bit
 * registers that wrap and saturate (300 products overflow a 63-bit one), added in order: the
 * reference's values bit for bit and its overflow counts, and the path that ran. */
START_TEST(test_wide_codes_equal_reference)
{
    enum { M = 9, N = 37, K = 300 };
    float *a = malloc(sizeof(float) * M * K), *b = malloc(sizeof(float) * K * N);
    float *r = malloc(sizeof(float) * M * N), *c = malloc(sizeof(float) * M * N);
    uint64_t seed = 2024;
    for (int i = 0; i < M * K; i++) {
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        int v = (int)((seed >> 33) % (1u << 24)) - (1 << 23);
        a[i] = (i / K) % 3 == 1 || (i % 5) == 2 ? 0.0f : ldexpf((float)v, 7);
    }
    for (int i = 0; i < K * N; i++) {
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        int v = (int)((seed >> 33) % (1u << 24)) - (1 << 23);
        b[i] = ldexpf((float)v, 7 - 3); /* 3 fractional bits: codes v 2^7 */
    }
    struct quant_acc ex;
    ck_assert_int_eq(quant_acc_parse("exact", &ex), ADAPT_OK);
    struct quant_acc_stats s1 = {0};
    ck_assert_int_eq(quant_acc_gemm_ref(&ex, M, N, K, a, 0, b, 3, r, &s1), ADAPT_OK);
    const enum adapt_gemm_isa isas[] = {ADAPT_GEMM_ISA_SCALAR, ADAPT_GEMM_ISA_AVX2,
                                        ADAPT_GEMM_ISA_AVX512VNNI};
    for (int is = 0; is < 3; is++) {
        if (!adapt_gemm_isa_available(isas[is])) continue;
        struct quant_acc_opts o = {isas[is], QUANT_ACC_PATH_INT8};
        enum quant_acc_path used;
        ck_assert_int_eq(quant_acc_gemm_opts(&o, &ex, M, N, K, a, K, 0, b, N, 3, c, N, NULL, &used),
                         ADAPT_OK);
        ck_assert_int_eq((int)used, (int)QUANT_ACC_PATH_INT128);
        ck_assert_msg(!memcmp(c, r, sizeof(float) * M * N), "exact, %s: values differ",
                      adapt_gemm_isa_name(isas[is]));
    }
    /* 12 fractional bits on A: codes up to 2^35, beyond int32 */
    ck_assert_int_eq((int)equals_ref("exact", M, N, K, a, 12, b, 3, c, r, "wide codes", NULL),
                     (int)QUANT_ACC_PATH_WIDE);
    static const char *const kinds[] = {"int(64, wrap)", "int(63, saturate)",
                                        "int(64, saturate, 2)"};
    uint64_t ov = 0;
    for (size_t t = 0; t < sizeof kinds / sizeof kinds[0]; t++) {
        uint64_t o = 0;
        ck_assert_int_eq((int)equals_ref(kinds[t], M, N, K, a, 0, b, 3, c, r, "31-bit codes", &o),
                         (int)QUANT_ACC_PATH_WIDE);
        ov += o;
    }
    ck_assert_uint_gt(ov, 0); /* the 63-bit register saturated */
    free(a);
    free(b);
    free(r);
    free(c);
}
END_TEST

/* The int8 path reads B straight from its floats when A's codes fit int8, and falls back to
 * the general path when B's do not: B with 12-bit codes (int16 or int64 path), B with the
 * int8 extremes -128 and 127 (int8 path, A's -128 too), B with a value off its grid or a NaN
 * (the reference's error). Shapes with a last, partial panel of columns (n = 37) and a last,
 * partial group of rows (k = 41). Values against the reference bit for bit. */
START_TEST(test_int8_from_floats_falls_back)
{
    enum { M = 9, N = 37, K = 41 };
    static float a[M * K], b[K * N], c[M * N], r[M * N];
    static const char *const kinds[] = {"exact", "int(20, saturate)", "int(32, wrap)"};
    for (int bw = 8; bw <= 12; bw += 4) {
        const int lim = 1 << (bw - 1);
        uint64_t seed = 7 + (uint64_t)bw;
        for (int i = 0; i < M * K; i++) {
            seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
            a[i] = (float)((int)((seed >> 33) % 256u) - 128) / 16.0f;
        }
        for (int i = 0; i < K * N; i++) {
            seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
            b[i] = (float)((int)((seed >> 33) % (uint64_t)(2 * lim)) - lim) / 64.0f;
        }
        a[0] = -8.0f;               /* code -128 */
        b[0] = (float)-lim / 64.0f; /* -128 or -2048 */
        b[K * N - 1] = (float)(lim - 1) / 64.0f;
        for (size_t t = 0; t < sizeof kinds / sizeof kinds[0]; t++) {
            const enum quant_acc_path used =
                equals_ref(kinds[t], M, N, K, a, 4, b, 6, c, r,
                           bw == 8 ? "B of 8 bits" : "B of 12 bits", NULL);
            if (bw == 12) ck_assert_int_ne((int)used, QUANT_ACC_PATH_INT8);
        }
    }
    struct quant_acc ex;
    ck_assert_int_eq(quant_acc_parse("exact", &ex), ADAPT_OK);
    for (int i = 0; i < K * N; i++) b[i] = (float)((i % 255) - 127) / 64.0f;
    b[5 * N + 3] = 1.0f / 128.0f; /* off the grid of 2^-6 */
    ck_assert_int_ne(quant_acc_gemm(&ex, M, N, K, a, K, 4, b, N, 6, c, N, NULL), ADAPT_OK);
    ck_assert_ptr_nonnull(strstr(adapt_error_message(), "B[5][3] = 0.0078125 is not a multiple"));
    b[5 * N + 3] = NAN;
    ck_assert_int_ne(quant_acc_gemm(&ex, M, N, K, a, K, 4, b, N, 6, c, N, NULL), ADAPT_OK);
    ck_assert_ptr_nonnull(strstr(adapt_error_message(), "B[5][3] = nan"));
}
END_TEST

/* Registers that may overflow add in order in int64 lanes; their products are formed in
 * 32 bits when every one fits, else in 64. Codes of 19 and 17 bits (products up to 2^36) and
 * 36-bit registers, and of 8 bits (products up to 2^14) in 12-bit ones, wrapping and
 * saturating: the reference's values and overflow counts (some), on the sequential path. */
START_TEST(test_seq_products_32_and_64)
{
    enum { M = 5, N = 70, K = 33 };
    static float a[M * K], b[K * N], c[M * N], r[M * N];
    static const char *const kinds[2][2] = {{"int(12, wrap)", "int(12, saturate)"},
                                            {"int(36, wrap)", "int(36, saturate)"}};
    for (int big = 0; big < 2; big++) {
        const int la = big ? 1 << 18 : 128, lb = big ? 1 << 16 : 128;
        uint64_t seed = 11 + (uint64_t)big;
        for (int i = 0; i < M * K; i++) {
            seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
            a[i] = (float)((int)((seed >> 33) % (uint64_t)(2 * la)) - la) / 4.0f;
        }
        for (int i = 0; i < K * N; i++) {
            seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
            b[i] = (float)((int)((seed >> 33) % (uint64_t)(2 * lb)) - lb) / 2.0f;
        }
        for (int i = 0; i < M * K; i += 3) a[i] = (float)(la - 1) / 4.0f; /* long runs up */
        for (int i = 0; i < K * N; i += 2) b[i] = (float)(lb - 1) / 2.0f;
        for (int t = 0; t < 2; t++) {
            uint64_t ov;
            ck_assert_int_eq((int)equals_ref(kinds[big][t], M, N, K, a, 2, b, 1, c, r,
                                             big ? "codes of 19/17 bits" : "codes of 8 bits", &ov),
                             QUANT_ACC_PATH_SEQ);
            ck_assert_uint_gt(ov, 0);
        }
    }
}
END_TEST

/* The sequential path in int16 lanes (AVX-512: 8-bit codes in registers of 12 and 13 bits, and
 * of 16, VPADDSW's saturation), int32 lanes (registers of at most 31 bits whose sums and
 * products stay below 2^31) and int64 lanes, on every instruction set this CPU runs: 8-bit
 * codes in 12-, 13-, 14-, 16- and 31-bit registers, the products shifted up to a binary point
 * below them (int(14, saturate, 12) over products of FL 10) and floored or rounded to one
 * above them (int(16, wrap, 7), int(13, saturate, 9), each also with nearest; 16- and 15-bit
 * codes rounded in a 24-bit register, int32 lanes, and 17- and 16-bit ones in a 27-bit one,
 * int64 lanes), codes of 17 and 6 bits (32-bit multiplies) in 24-bit ones,
 * codes of 17 and 12 bits in a 31-bit one (products up to 2^27), and codes of 17 and 15 bits
 * in 32- and 34-bit registers (int64 lanes), and codes of 24 and 21 bits (products up to 2^43,
 * past a 32-bit multiply) in registers of 36, 44 and 50 bits, at the products' binary point,
 * above it (floored, and rounded) and below it (int64 lanes); every third row of small codes,
 * which cannot overflow and takes the sums without the checks; rows over two panels' chunks and
 * a partial one, columns over two full kernels and a partial one. The reference's values bit
 * for bit and its overflow counts, nonzero. */
START_TEST(test_seq_lanes)
{
    enum { M = 70, N = 130, K = 57 };
    static float a[M * K], b[K * N], c[M * N], r[M * N];
    static const struct {
        const char *kind;
        int la, lb; /* codes in [-la, la) and [-lb, lb) */
    } cs[] = {{"int(12, wrap)", 128, 128},
              {"int(12, saturate)", 128, 128},
              {"int(14, saturate, 12)", 128, 128},
              {"int(16, wrap, 7)", 128, 128},
              {"int(16, wrap, 7, nearest)", 128, 128},
              {"int(13, saturate, 9, nearest)", 128, 128},
              {"int(24, saturate, 5, nearest)", 1 << 16, 1 << 14},
              {"int(27, saturate, 2, nearest)", 1 << 16, 1 << 15},
              {"int(16, wrap)", 128, 128},
              {"int(16, saturate)", 128, 128},
              {"int(13, saturate, 9)", 128, 128},
              {"int(31, saturate)", 1 << 16, 1 << 11},
              {"int(24, wrap)", 1 << 16, 32},
              {"int(24, saturate)", 1 << 16, 32},
              {"int(32, saturate)", 1 << 16, 1 << 14},
              {"int(32, wrap)", 1 << 16, 1 << 14},
              {"int(34, wrap)", 1 << 15, 1 << 14},
              {"int(36, saturate, 0, nearest)", 1 << 23, 1 << 20},
              {"int(36, wrap, 2)", 1 << 23, 1 << 20},
              {"int(50, saturate, 14)", 1 << 23, 1 << 20},
              {"int(44, wrap)", 1 << 23, 1 << 20}};
    const enum adapt_gemm_isa isas[] = {ADAPT_GEMM_ISA_SCALAR, ADAPT_GEMM_ISA_AVX2,
                                        ADAPT_GEMM_ISA_AVX512VNNI};
    for (size_t t = 0; t < sizeof cs / sizeof cs[0]; t++) {
        uint64_t seed = 5 + t;
        for (int i = 0; i < M * K; i++) {
            seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
            a[i] = (float)((int)((seed >> 33) % (uint64_t)(2 * cs[t].la)) - cs[t].la) / 16.0f;
        }
        for (int i = 0; i < K * N; i++) {
            seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
            b[i] = (float)((int)((seed >> 33) % (uint64_t)(2 * cs[t].lb)) - cs[t].lb) / 64.0f;
        }
        /* runs of the largest codes, so that every register overflows somewhere */
        for (int i = 0; i < M * K; i += 3) a[i] = (float)(cs[t].la - 1) / 16.0f;
        /* and every third row small (codes -2..2), which no register here can overflow
         * against B: the rows summed without the checks */
        for (int i = 1; i < M; i += 3)
            for (int p = 0; p < K; p++) a[i * K + p] = (float)((i + p) % 5 - 2) / 16.0f;
        for (int i = 0; i < K * N; i += 2) b[i] = (float)(cs[t].lb - 1) / 64.0f;
        struct quant_acc acc;
        ck_assert_int_eq(quant_acc_parse(cs[t].kind, &acc), ADAPT_OK);
        struct quant_acc_stats s1 = {0};
        ck_assert_int_eq(quant_acc_gemm_ref(&acc, M, N, K, a, 4, b, 6, r, &s1), ADAPT_OK);
        ck_assert_msg(s1.overflows > 0, "%s: no overflow", cs[t].kind);
        for (int is = 0; is < 3; is++) {
            if (!adapt_gemm_isa_available(isas[is])) continue;
            struct quant_acc_opts o = {isas[is], QUANT_ACC_PATH_INT8};
            struct quant_acc_stats s2 = {0};
            enum quant_acc_path used;
            ck_assert_int_eq(
                quant_acc_gemm_opts(&o, &acc, M, N, K, a, K, 4, b, N, 6, c, N, &s2, &used),
                ADAPT_OK);
            ck_assert_int_eq((int)used, QUANT_ACC_PATH_SEQ);
            ck_assert_msg(!memcmp(c, r, sizeof c), "%s, %s: values differ", cs[t].kind,
                          adapt_gemm_isa_name(isas[is]));
            ck_assert_msg(s1.overflows == s2.overflows, "%s, %s: %llu overflows, reference %llu",
                          cs[t].kind, adapt_gemm_isa_name(isas[is]),
                          (unsigned long long)s2.overflows, (unsigned long long)s1.overflows);
        }
    }
}
END_TEST

/* The sequential path split over threads (work above quant_acc_gemm's threshold of 2^24
 * multiply-adds, items of rows x 64 columns, a last partial item each way), from a parallel
 * region and outside one: the reference's values and overflow counts. */
START_TEST(test_seq_threads)
{
    enum { M = 301, N = 197, K = 290 };
    float *a = malloc(sizeof(float) * M * K), *b = malloc(sizeof(float) * K * N);
    float *c = malloc(sizeof(float) * M * N), *r = malloc(sizeof(float) * M * N);
    uint64_t seed = 3;
    for (int i = 0; i < M * K; i++) {
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        a[i] = (float)((int)((seed >> 33) % 256u) - 128) / 16.0f;
    }
    for (int i = 0; i < K * N; i++) {
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        b[i] = (float)((int)((seed >> 33) % 256u) - 128) / 64.0f;
    }
    static const char *const kinds[] = {"int(12, saturate)", "int(16, wrap)", "int(20, saturate)"};
    for (size_t t = 0; t < sizeof kinds / sizeof kinds[0]; t++) {
        struct quant_acc acc;
        ck_assert_int_eq(quant_acc_parse(kinds[t], &acc), ADAPT_OK);
        struct quant_acc_stats s1 = {0}, s2 = {0}, s3 = {0};
        ck_assert_int_eq(quant_acc_gemm_ref(&acc, M, N, K, a, 4, b, 6, r, &s1), ADAPT_OK);
        enum quant_acc_path used;
        ck_assert_int_eq(
            quant_acc_gemm_opts(NULL, &acc, M, N, K, a, K, 4, b, N, 6, c, N, &s2, &used), ADAPT_OK);
        ck_assert_int_eq((int)used, QUANT_ACC_PATH_SEQ);
        ck_assert_msg(!memcmp(c, r, sizeof(float) * M * N), "%s: values differ", kinds[t]);
        ck_assert_uint_eq(s1.overflows, s2.overflows);
        memset(c, 0, sizeof(float) * M * N);
#pragma omp parallel num_threads(2)
#pragma omp single
        ck_assert_int_eq(quant_acc_gemm(&acc, M, N, K, a, K, 4, b, N, 6, c, N, &s3), ADAPT_OK);
        ck_assert_msg(!memcmp(c, r, sizeof(float) * M * N), "%s, nested: values differ", kinds[t]);
        ck_assert_uint_eq(s1.overflows, s3.overflows);
    }
    free(a);
    free(b);
    free(c);
    free(r);
}
END_TEST

/* ---- a hand-derived step ---- */

/* A precision state on net as the policy makes one: every unit in `fmt`, the output gradients
 * rounded to it too (roles.grad_output), and every unit's sums under `acc`. */
static struct adapt_precision *state_g(struct adapt_net *net, const char *fmt, const char *acc,
                                       int grads);

static struct adapt_precision *state(struct adapt_net *net, const char *fmt, const char *acc)
{
    return state_g(net, fmt, acc, 1);
}

/* state, the output gradients rounded to fmt when grads, float32 otherwise */
static struct adapt_precision *state_g(struct adapt_net *net, const char *fmt, const char *acc,
                                       int grads)
{
    struct adapt_precision *p;
    ck_assert_int_eq(adapt_precision_alloc(&p, net, 1, ADAPT_QOUT_ALL, QUANT_ROUND_NEAREST, 7),
                     ADAPT_OK);
    struct quant_spec s;
    ck_assert_int_eq(quant_spec_parse(fmt, &s), ADAPT_OK);
    for (int u = 0; u < p->nunits; u++) adapt_precision_set(p, u, &s);
    struct adapt_config cfg;
    adapt_config_init(&cfg);
    char a[96];
    ck_assert_int_eq(adapt_config_set(&cfg, "policy.name=fixed"), ADAPT_OK);
    snprintf(a, sizeof a, "roles.grad_output=%s", grads ? fmt : "float32");
    ck_assert_int_eq(adapt_config_set(&cfg, a), ADAPT_OK);
    ck_assert_int_eq(adapt_config_check(&cfg), ADAPT_OK);
    struct adapt_role_fmt roles[ADAPT_ROLE_N];
    for (int r = 0; r < ADAPT_ROLE_N; r++)
        ck_assert_int_eq(adapt_config_role(&cfg, (enum adapt_role)r, &roles[r]), ADAPT_OK);
    struct adapt_roles_opts o = {16, 0, 0, 0};
    ck_assert_int_eq(adapt_precision_set_roles(p, roles, &o), ADAPT_OK);
    struct quant_acc *m = malloc(sizeof *m * (size_t)p->nunits);
    for (int u = 0; u < p->nunits; u++) ck_assert_int_eq(quant_acc_parse(acc, &m[u]), ADAPT_OK);
    ck_assert_int_eq(adapt_precision_set_arith(p, m, NULL), ADAPT_OK);
    free(m);
    ck_assert_int_eq(adapt_precision_refresh_weights(p, 1), ADAPT_OK);
    return p;
}

/* A linear unit of 3 inputs and 1 output, 3 samples, every value an integer of fixed(8,0):
 *   x[n] = (100, 100, 100) for each n,  W = (1, 1, -1),  bias 0,  dy = (1, 1, -1).
 * Forward, per sample: 100 + 100 - 100 in the order k = 0, 1, 2. Weight gradient, per weight:
 * dy[0] x[0][k] + dy[1] x[1][k] + dy[2] x[2][k] = 100 + 100 - 100 in sample order. In an
 * 8-bit register [-128, 127] (doc/numerics.md): wrapped, 200 -> -56, then -156 -> 100, two
 * overflows, the exact sum; saturated, 200 -> 127, then 27, one overflow. Exact: 100. The input
 * gradient dy[n] W[0][k] is one product (no sum): (1, 1, -1) dy[n]. The bias gradient sums dy
 * in float32: 1. */
START_TEST(test_linear_hand)
{
    static const char *const acc[] = {"exact", "int(8, wrap)", "int(8, saturate)", "float32"};
    static const float want[] = {100, 100, 27, 100};
    static const uint64_t ovf[] = {0, 2, 1, 0};
    for (int c = 0; c < 4; c++) {
        const int in[3] = {3, 1, 1};
        struct adapt_net *net = adapt_net_alloc("lin", in, 1);
        /* a relu first (identity here): the network input takes no gradient */
        ck_assert_int_eq(adapt_net_add(net, adapt_relu_create("r", in), 0, -1), 1);
        ck_assert_int_eq(adapt_net_add(net, adapt_linear_create("fc", in, 1, 1), 1, -1), 2);
        ck_assert_int_eq(adapt_net_finalize(net, 3), ADAPT_OK);
        const float w[3] = {1, 1, -1};
        memcpy(net->param[0]->value.data, w, sizeof w);
        net->param[1]->value.data[0] = 0.0f;
        struct adapt_precision *p = state(net, "fixed(8,0)", acc[c]);
        float x[9], dy[3] = {1, 1, -1};
        for (int i = 0; i < 9; i++) x[i] = 100.0f;
        adapt_net_forward(net, x, 3, 1);
        adapt_net_zero_grad(net);
        adapt_net_backward(net, dy, 3);
        const float *y = net->act[2], *dx = net->dact[1], *dw = net->param[0]->grad.data;
        for (int n = 0; n < 3; n++) ck_assert_float_eq(y[n], want[c]);
        for (int k = 0; k < 3; k++) ck_assert_float_eq(dw[k], want[c]);
        for (int n = 0; n < 3; n++)
            for (int k = 0; k < 3; k++) ck_assert_float_eq(dx[n * 3 + k], w[k] * dy[n]);
        ck_assert_float_eq(net->param[1]->grad.data[0], 1.0f);
        if (c < 3) { /* the counts of the forward (3 samples) and weight gradient (3 weights) */
            const struct adapt_arith *a = &p->arith[0];
            ck_assert_uint_eq(a->overflows[ADAPT_ARITH_FWD], 3 * ovf[c]);
            ck_assert_uint_eq(a->overflows[ADAPT_ARITH_WGRAD], 3 * ovf[c]);
            ck_assert_uint_eq(a->overflows[ADAPT_ARITH_DGRAD], 0);
            ck_assert_uint_eq(a->gemms[ADAPT_ARITH_FWD], 1);
            ck_assert_uint_eq(a->gemms[ADAPT_ARITH_WGRAD], 1);
            ck_assert_uint_eq(a->gemms[ADAPT_ARITH_DGRAD], 1);
        } else {
            ck_assert_ptr_null(p->arith); /* float32 everywhere: no models at all */
        }
        adapt_precision_free(p);
        adapt_net_free(net);
    }
}
END_TEST

/* ---- LeNet-5 ---- */

struct pass {
    float *y, *dx1, *dw; /* logits, the first conv's output gradient... (copies) */
    size_t ny, ndx, ndw;
    uint64_t overflows; /* of every unit and GEMM */
};

/* One training step of small_lenet(4) in fmt with accumulator acc: copies of the logits, of
 * the gradient every unit sends back (all of net->dact past the input) and of every weight
 * gradient. */
static struct pass lenet_pass(const char *fmt, const char *acc)
{
    const int n = 4;
    struct adapt_net *net = small_lenet(n);
    struct adapt_precision *p = state(net, fmt, acc);
    size_t nx = (size_t)n * 32 * 32;
    float *x = malloc(sizeof(float) * nx), *dl = malloc(sizeof(float) * n * 10);
    tu_fill_uniform(x, nx, 11, -2.0f, 2.0f);
    tu_fill_uniform(dl, (size_t)n * 10, 12, -1.0f, 1.0f);
    const float *logits = adapt_net_forward(net, x, n, 1);
    struct pass r = {0};
    r.ny = (size_t)n * 10;
    r.y = malloc(sizeof(float) * r.ny);
    memcpy(r.y, logits, sizeof(float) * r.ny);
    adapt_net_zero_grad(net);
    adapt_net_backward(net, dl, n);
    for (int a = 2; a < net->nact; a++) r.ndx += (size_t)n * net->act_numel[a];
    for (int q = 0; q < net->nparam; q++) r.ndw += net->param[q]->grad.numel;
    r.dx1 = malloc(sizeof(float) * r.ndx);
    r.dw = malloc(sizeof(float) * r.ndw);
    size_t o = 0;
    for (int a = 2; a < net->nact; a++) {
        size_t m = (size_t)n * net->act_numel[a];
        memcpy(r.dx1 + o, net->dact[a], sizeof(float) * m);
        o += m;
    }
    o = 0;
    for (int q = 0; q < net->nparam; q++) {
        memcpy(r.dw + o, net->param[q]->grad.data, sizeof(float) * net->param[q]->grad.numel);
        o += net->param[q]->grad.numel;
    }
    for (int u = 0; p->arith && u < p->nunits; u++)
        for (int g = 0; g < 3; g++) r.overflows += p->arith[u].overflows[g];
    adapt_precision_free(p);
    adapt_net_free(net);
    free(x);
    free(dl);
    return r;
}

static void pass_free(struct pass *r)
{
    free(r->y);
    free(r->dx1);
    free(r->dw);
}

static size_t mismatches(const float *a, const float *b, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) k += memcmp(&a[i], &b[i], sizeof(float)) != 0;
    return k;
}

/* ---- a convolution's input gradient over several blocks of samples ---- */

/* Values on fixed(8,4): integers in [-lim, lim] over 16. */
static void grid_fill(float *v, size_t n, uint64_t seed, int lim)
{
    tu_fill_uniform(v, n, seed, -(float)lim - 0.49f, (float)lim + 0.49f);
    for (size_t i = 0; i < n; i++) v[i] = nearbyintf(v[i]) / 16.0f;
}

/* A convolution whose input-gradient GEMM runs on several blocks of whole samples (K x P x n
 * above the block of 2^20 floats in src/net/layers/arith_gemm.c: K = 144, P = 1024 gives blocks
 * of 7 samples, P = 256 blocks of 28). Under exact, every dXcol entry is the exact sum over o
 * of W[o][k] dY[n][o][p]: codes of at most 32 x 64 over 8 outputs, below 2^24 at 2^-8, so
 * float32 holds it exactly; the reference forms it per sample in int64 and lays it back with
 * col2im one sample at a time, as the engine did before it blocked samples: dx must equal it
 * bit for bit, whatever the blocking. */
START_TEST(test_conv_dgrad_blocks)
{
    static const int geo[][3] = {{1, 1, 9}, {2, 1, 30}}; /* stride, pad, batch */
    for (int t = 0; t < 2; t++) {
        const int n = geo[t][2], in[3] = {16, 32, 32}, cout = 8;
        struct adapt_conv_geom g = {16, 32, 32, 3, geo[t][0], geo[t][1], 0, 0};
        g.ho = (g.h + 2 * g.pad - g.k) / g.stride + 1;
        g.wo = (g.w + 2 * g.pad - g.k) / g.stride + 1;
        const size_t K = 144, P = (size_t)g.ho * g.wo, nin = (size_t)16 * 32 * 32;
        struct adapt_net *net = adapt_net_alloc("conv", in, (int)(cout * P));
        /* a relu first (identity for the gradient read here): the conv then sends one back */
        ck_assert_int_eq(adapt_net_add(net, adapt_relu_create("r", in), 0, -1), 1);
        ck_assert_int_eq(
            adapt_net_add(net, adapt_conv2d_create("c", in, cout, 3, g.stride, g.pad, 1), 1, -1),
            2);
        ck_assert_int_eq(adapt_net_finalize(net, n), ADAPT_OK);
        float *w = net->param[0]->value.data;
        grid_fill(w, (size_t)cout * K, 21, 32);
        memset(net->param[1]->value.data, 0, sizeof(float) * cout);
        struct adapt_precision *p = state(net, "fixed(8,4)", "exact");
        float *x = malloc(sizeof(float) * n * nin), *dy = malloc(sizeof(float) * n * cout * P);
        float *ref = malloc(sizeof(float) * n * nin), *col = malloc(sizeof(float) * K * P);
        float *pad = malloc(sizeof(float) * (adapt_im2col_scratch(&g) + 1));
        grid_fill(x, (size_t)n * nin, 22, 64);
        grid_fill(dy, (size_t)n * cout * P, 23, 64);
        adapt_net_forward(net, x, n, 1);
        adapt_net_zero_grad(net);
        adapt_net_backward(net, dy, n);
        for (int j = 0; j < n; j++) {
            for (size_t k = 0; k < K; k++)
                for (size_t q = 0; q < P; q++) {
                    int64_t s = 0;
                    for (int o = 0; o < cout; o++)
                        s += (int64_t)(w[(size_t)o * K + k] * 16.0f) *
                             (int64_t)(dy[((size_t)j * cout + o) * P + q] * 16.0f);
                    col[k * P + q] = (float)s / 256.0f;
                }
            adapt_col2im_sample(&g, col, P, ref + (size_t)j * nin, 0, pad);
        }
        ck_assert_uint_eq(p->arith[0].gemms[ADAPT_ARITH_DGRAD], 1);
        ck_assert_uint_eq(mismatches(net->dact[1], ref, (size_t)n * nin), 0);
        adapt_precision_free(p);
        adapt_net_free(net);
        free(x);
        free(dy);
        free(ref);
        free(col);
        free(pad);
    }
}
END_TEST

/* A convolution on a plane no larger than its kernel runs as a dense layer whose expanded
 * weights the layer's own forward builds (src/net/layers/conv2d.c); with the forward under
 * exact and float32 error gradients, the backward is the layer's own and needs them too. Its
 * <8,4> forward sums (64 products, multiples of 2^-8 below 2^13 in all) are exact in float32,
 * so the whole step equals the float32 one bit for bit: the gradients sent back and the weight
 * gradient. */
START_TEST(test_dense_conv_float_backward)
{
    const int n = 3, in[3] = {16, 2, 2}, cout = 4;
    struct pass r[2];
    static const char *const acc[] = {"float32", "exact"};
    for (int c = 0; c < 2; c++) {
        struct adapt_net *net = adapt_net_alloc("dense", in, cout * 4);
        ck_assert_int_eq(adapt_net_add(net, adapt_relu_create("r", in), 0, -1), 1);
        ck_assert_int_eq(adapt_net_add(net, adapt_conv2d_create("c", in, cout, 3, 1, 1, 1), 1, -1),
                         2);
        ck_assert_int_eq(adapt_net_finalize(net, n), ADAPT_OK);
        grid_fill(net->param[0]->value.data, (size_t)cout * 144, 31, 32);
        memset(net->param[1]->value.data, 0, sizeof(float) * cout);
        struct adapt_precision *p = state_g(net, "fixed(8,4)", acc[c], 0);
        float x[3 * 64], dy[3 * 16];
        grid_fill(x, 3 * 64, 32, 64);
        tu_fill_uniform(dy, 3 * 16, 33, -1.0f, 1.0f);
        const float *y = adapt_net_forward(net, x, n, 1);
        r[c].ny = (size_t)n * 16;
        r[c].y = malloc(sizeof(float) * r[c].ny);
        memcpy(r[c].y, y, sizeof(float) * r[c].ny);
        adapt_net_zero_grad(net);
        adapt_net_backward(net, dy, n);
        r[c].ndx = (size_t)n * 64;
        r[c].dx1 = malloc(sizeof(float) * r[c].ndx);
        memcpy(r[c].dx1, net->dact[1], sizeof(float) * r[c].ndx);
        r[c].ndw = (size_t)cout * 144;
        r[c].dw = malloc(sizeof(float) * r[c].ndw);
        memcpy(r[c].dw, net->param[0]->grad.data, sizeof(float) * r[c].ndw);
        if (c) ck_assert_uint_eq(p->arith[0].gemms[ADAPT_ARITH_FWD], 1);
        adapt_precision_free(p);
        adapt_net_free(net);
    }
    ck_assert_uint_eq(mismatches(r[0].y, r[1].y, r[0].ny), 0);
    ck_assert_uint_eq(mismatches(r[0].dx1, r[1].dx1, r[0].ndx), 0);
    ck_assert_uint_eq(mismatches(r[0].dw, r[1].dw, r[0].ndw), 0);
    pass_free(&r[0]);
    pass_free(&r[1]);
}
END_TEST

/* A 48-bit register at the products' binary point never overflows here (|sum| < 2^40 at
 * 2^-16), so it gives the exact sums: the whole step bit for bit. */
START_TEST(test_lenet_wide_register_is_exact)
{
    struct pass e = lenet_pass("fixed(16,8)", "exact"), w = lenet_pass("fixed(16,8)", "int(48)");
    ck_assert_uint_eq(mismatches(e.y, w.y, e.ny), 0);
    ck_assert_uint_eq(mismatches(e.dx1, w.dx1, e.ndx), 0);
    ck_assert_uint_eq(mismatches(e.dw, w.dw, e.ndw), 0);
    pass_free(&e);
    pass_free(&w);
}
END_TEST

/* <8,4>: the forward sums (at most 400 products of codes below 2^14) and the input-gradient
 * sums (at most 120) stay below 2^23, exact in float32: the logits and every error gradient
 * equal float32 arithmetic's bit for bit. Weight gradients sum 4 x 784 products and may round
 * in float32: they agree within float32's bound, n u sum |terms| <= 3136 x 2^-24 x 3136 x 2^6
 * (every |code product| <= 2^14 at 2^-8), far above what occurs; checked relative to 1e-4. */
START_TEST(test_lenet_exact_vs_float32)
{
    struct pass e = lenet_pass("fixed(8,4)", "exact"), f = lenet_pass("fixed(8,4)", "float32");
    ck_assert_uint_eq(mismatches(e.y, f.y, e.ny), 0);
    ck_assert_uint_eq(mismatches(e.dx1, f.dx1, e.ndx), 0);
    double worst = 0;
    for (size_t i = 0; i < e.ndw; i++) {
        double d = fabs((double)e.dw[i] - f.dw[i]) / (fabs((double)f.dw[i]) + 1e-3);
        if (d > worst) worst = d;
    }
    ck_assert_msg(worst < 1e-4, "weight gradients differ by %g (relative)", worst);
    pass_free(&e);
    pass_free(&f);
}
END_TEST

/* A narrow register changes the step: an 8-bit one at <8,4>'s products (2^-8) holds
 * [-0.5, 0.5): LeNet-5's sums of inputs in [-2, 2] leave it, and it counts them. */
START_TEST(test_lenet_narrow_differs)
{
    struct pass e = lenet_pass("fixed(8,4)", "exact"),
                s = lenet_pass("fixed(8,4)", "int(8, saturate)");
    ck_assert_uint_gt(mismatches(e.y, s.y, e.ny) + mismatches(e.dw, s.dw, e.ndw), 0);
    ck_assert_uint_gt(s.overflows, 0);
    ck_assert_uint_eq(e.overflows, 0);
    pass_free(&e);
    pass_free(&s);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("arith");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_parse_roundtrip);
    tcase_add_test(tc, test_parse_errors);
    tcase_add_test(tc, test_config_errors);
    tcase_add_test(tc, test_config_json);
    tcase_add_test(tc, test_strided_equals_reference);
    tcase_add_test(tc, test_paths_equal_reference);
    tcase_add_test(tc, test_int8_from_floats_falls_back);
    tcase_add_test(tc, test_seq_products_32_and_64);
    tcase_add_test(tc, test_seq_lanes);
    tcase_add_test(tc, test_seq_threads);
    tcase_add_test(tc, test_linear_hand);
    tcase_add_test(tc, test_lenet_wide_register_is_exact);
    tcase_add_test(tc, test_wide_codes_equal_reference);
    tcase_add_test(tc, test_conv_dgrad_blocks);
    tcase_add_test(tc, test_dense_conv_float_backward);
    tcase_add_test(tc, test_lenet_exact_vs_float32);
    tcase_add_test(tc, test_lenet_narrow_differs);
    suite_add_tcase(s, tc);
    return tu_run_suite(s, CK_FORK_GETENV);
}
