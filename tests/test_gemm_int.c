/* tests/test_gemm_int.c: the integer GEMM kernels of adapt-bench gemm
 * (src/quant/gemm_int.h) against their scalar references, bit for bit. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/rng.h"
#include "src/quant/gemm_int.h"
#include "src/net/tensor.h"
#include "tests/testutil.h"

/* Odd shapes that leave partial tiles in every direction (8 x 32 and 6 x 16
 * tiles, k groups of 4 and 2), a 1 x 1 x 1 product and exact multiples. */
static const int shapes[][3] = {{13, 37, 29}, {1, 1, 1}, {9, 33, 130}, {16, 32, 8},
                                {6, 16, 2},   {7, 50, 3}, {40, 9, 257}};
#define NSHAPES ((int)(sizeof shapes / sizeof shapes[0]))

static void check_type(enum adapt_gemm_type t, int extreme)
{
    for (int s = 0; s < NSHAPES; s++) {
        int m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
        size_t es = t == ADAPT_GEMM_S8 ? 1 : 2;
        void *A = malloc((size_t)m * k * es), *B = malloc((size_t)k * n * es);
        int32_t *C = malloc(sizeof(int32_t) * (size_t)m * n),
                *R = malloc(sizeof(int32_t) * (size_t)m * n);
        void *ws = adapt_aligned_alloc(adapt_gemm_int_workspace(t, m, n, k));
        ck_assert(A && B && C && R && ws);
        struct adapt_rng r;
        adapt_rng_init(&r, 2385, (uint64_t)s);
        for (size_t i = 0; i < (size_t)m * k + (size_t)k * n; i++) {
            uint32_t u = adapt_rng_u32(&r);
            void *dst = i < (size_t)m * k ? A : B;
            size_t j = i < (size_t)m * k ? i : i - (size_t)m * k;
            /* full range, or the most negative value everywhere (int16:
             * (-2^15)^2 pairs wrap int32 exactly as VPMADDWD / VPDPWSSD do) */
            if (t == ADAPT_GEMM_S8) ((int8_t *)dst)[j] = extreme ? INT8_MIN : (int8_t)(u & 0xff);
            else ((int16_t *)dst)[j] = extreme ? INT16_MIN : (int16_t)(u & 0xffff);
        }
        if (t == ADAPT_GEMM_S8) adapt_gemm_s8_ref(m, n, k, A, B, R);
        else adapt_gemm_s16_ref(m, n, k, A, B, R);
        for (int isa = ADAPT_GEMM_ISA_SCALAR; isa <= ADAPT_GEMM_ISA_AVX512VNNI; isa++) {
            if (!adapt_gemm_isa_available((enum adapt_gemm_isa)isa)) continue;
            memset(C, 0x5a, sizeof(int32_t) * (size_t)m * n);
            if (t == ADAPT_GEMM_S8) adapt_gemm_s8((enum adapt_gemm_isa)isa, m, n, k, A, B, C, ws);
            else adapt_gemm_s16((enum adapt_gemm_isa)isa, m, n, k, A, B, C, ws);
            for (int i = 0; i < m * n; i++)
                ck_assert_msg(C[i] == R[i], "%s %s %dx%dx%d entry %d: %d, reference %d",
                              t == ADAPT_GEMM_S8 ? "int8" : "int16",
                              adapt_gemm_isa_name((enum adapt_gemm_isa)isa), m, n, k, i, C[i],
                              R[i]);
        }
        free(A);
        free(B);
        free(C);
        free(R);
        adapt_aligned_free(ws);
    }
}

START_TEST(test_s8) { check_type(ADAPT_GEMM_S8, 0); }
END_TEST
START_TEST(test_s16) { check_type(ADAPT_GEMM_S16, 0); }
END_TEST
START_TEST(test_extremes)
{
    check_type(ADAPT_GEMM_S8, 1);
    check_type(ADAPT_GEMM_S16, 1);
}
END_TEST

/* The reference itself on a 2 x 2 x 3 product worked by hand:
 * A = [[1, -2, 3], [-4, 5, -6]], B = [[7, -8], [9, 10], [-11, 12]]
 * C = [[7 - 18 - 33, -8 - 20 + 36], [-28 + 45 + 66, 32 + 50 - 72]] = [[-44, 8], [83, 10]] */
START_TEST(test_reference_by_hand)
{
    const int8_t A[6] = {1, -2, 3, -4, 5, -6}, B[6] = {7, -8, 9, 10, -11, 12};
    const int16_t A16[6] = {1, -2, 3, -4, 5, -6}, B16[6] = {7, -8, 9, 10, -11, 12};
    int32_t C[4];
    adapt_gemm_s8_ref(2, 2, 3, A, B, C);
    ck_assert_int_eq(C[0], -44);
    ck_assert_int_eq(C[1], 8);
    ck_assert_int_eq(C[2], 83);
    ck_assert_int_eq(C[3], 10);
    adapt_gemm_s16_ref(2, 2, 3, A16, B16, C);
    ck_assert_int_eq(C[2], 83);
    ck_assert(adapt_gemm_isa_available(ADAPT_GEMM_ISA_SCALAR));
    ck_assert(adapt_gemm_isa_available(adapt_gemm_isa_best()));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("gemm_int");
    TCase *tc = tcase_create("kernels");
    tcase_add_test(tc, test_reference_by_hand);
    tcase_add_test(tc, test_s8);
    tcase_add_test(tc, test_s16);
    tcase_add_test(tc, test_extremes);
    suite_add_tcase(s, tc);
    return tu_run_suite(s, CK_FORK_GETENV);
}
