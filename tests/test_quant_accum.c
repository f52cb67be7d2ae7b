/* tests/test_quant_accum.c: the accumulator models' scalar reference (quant_acc_gemm_ref,
 * src/quant/accum.c) on hand-derived sums, and against independent properties: a register wide
 * enough is the exact sum, a wrapping one is the exact sum modulo 2^bits, exact sums of values
 * whose sums float32 holds are float32's. Every expected value is worked out in the comment
 * beside it. */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "src/base/rng.h"
#include "tests/test_quant.h"

static struct quant_acc int_acc(int bits, int fl, enum quant_acc_overflow o)
{
    struct quant_acc a;
    memset(&a, 0, sizeof a);
    a.kind = QUANT_ACC_INT;
    a.bits = bits;
    a.fl = fl;
    a.overflow = o;
    return a;
}

/* one dot product of a (1 x k) and b (k x 1) */
static float dot(const struct quant_acc *acc, const float *a, int fla, const float *b, int flb,
                 int k, uint64_t *overflows)
{
    float c = NAN;
    struct quant_acc_stats st = {0};
    ck_assert_msg(quant_acc_gemm_ref(acc, 1, 1, k, a, fla, b, flb, &c, &st) == ADAPT_OK, "%s",
                  adapt_error_message());
    if (overflows) *overflows = st.overflows;
    return c;
}

START_TEST(test_acc_wrap_saturate)
{
    /* an 8-bit register at the products' binary point (integers here): 100 + 100 = 200 leaves
     * [-128, 127]; wrapped, 200 - 256 = -56; saturated, 127 */
    const float a[] = {100, 100, -100}, b[] = {1, 1, 1};
    struct quant_acc w = int_acc(8, -1, QUANT_ACC_WRAP), s = int_acc(8, -1, QUANT_ACC_SATURATE);
    uint64_t ov;
    ck_assert_float_eq(dot(&w, a, 0, b, 0, 2, &ov), -56.0f);
    ck_assert_uint_eq(ov, 1);
    ck_assert_float_eq(dot(&s, a, 0, b, 0, 2, &ov), 127.0f);
    ck_assert_uint_eq(ov, 1);
    /* with -100 after: wrap -56 - 100 = -156, outside again, + 256 = 100, the exact sum (two's
     * complement forgives intermediate overflow); saturate 127 - 100 = 27, order-dependent */
    ck_assert_float_eq(dot(&w, a, 0, b, 0, 3, &ov), 100.0f);
    ck_assert_uint_eq(ov, 2);
    ck_assert_float_eq(dot(&s, a, 0, b, 0, 3, &ov), 27.0f);
    ck_assert_uint_eq(ov, 1);
    /* the same values in the other order, -100 first: -100, 0, 100, all inside: 100 both */
    const float a2[] = {-100, 100, 100};
    ck_assert_float_eq(dot(&s, a2, 0, b, 0, 3, &ov), 100.0f);
    ck_assert_uint_eq(ov, 0);
    /* the lower bound: -100 - 100 = -200 saturates to -128, wraps to 56 */
    const float a3[] = {-100, -100};
    ck_assert_float_eq(dot(&s, a3, 0, b, 0, 2, NULL), -128.0f);
    ck_assert_float_eq(dot(&w, a3, 0, b, 0, 2, NULL), 56.0f);
}
END_TEST

START_TEST(test_acc_binary_point)
{
    /* operands <8,4>: 0.0625 = 1 x 2^-4; products at 2^-8. A register at 4 fractional bits keeps
     * floor(P / 16) of a product P (in units of 2^-8): 1 x 1 = 1 -> floor(1/16) = 0, so 0.0625^2
     * is lost; -1 x 1 = -1 -> floor(-1/16) = -1, i.e. -2^-4 = -0.0625 */
    const float a[] = {0.0625f}, b[] = {0.0625f}, an[] = {-0.0625f};
    struct quant_acc r = int_acc(16, 4, QUANT_ACC_SATURATE);
    ck_assert_float_eq(dot(&r, a, 4, b, 4, 1, NULL), 0.0f);
    ck_assert_float_eq(dot(&r, an, 4, b, 4, 1, NULL), -0.0625f);
    /* at the products' own point (-1): exact, 2^-8 */
    struct quant_acc e = int_acc(16, -1, QUANT_ACC_SATURATE);
    ck_assert_float_eq(dot(&e, a, 4, b, 4, 1, NULL), 0.00390625f);
    /* a register with more fractional bits than the products: shifted left, exact; 12 bits at
     * 10 fractional bits hold [-2, 2 - 2^-10]: 1.5 x 1.5 = 2.25 saturates to 2 - 2^-10 */
    const float c[] = {1.5f}, d[] = {1.5f};
    struct quant_acc n = int_acc(12, 10, QUANT_ACC_SATURATE);
    ck_assert_float_eq(dot(&n, c, 1, d, 1, 1, NULL), 2.0f - 0x1p-10f);
    /* wrapped: 2.25 x 2^10 = 2304, minus 2^12 = -1792, x 2^-10 = -1.75 */
    struct quant_acc nw = int_acc(12, 10, QUANT_ACC_WRAP);
    ck_assert_float_eq(dot(&nw, c, 1, d, 1, 1, NULL), -1.75f);
}
END_TEST

START_TEST(test_acc_align_nearest)
{
    /* products at 2^-8 (operands <8,4>) rounded to a register at 4 fractional bits, ties up:
     * (P + 8) >> 4 in units of 2^-8. 0.0625 x 0.0625 = P 1 -> (1 + 8) >> 4 = 0; 0.5 x 0.0625
     * = 2^-5, P 8, a tie -> 16 >> 4 = 1, i.e. 0.0625 (floor: 0); -0.5 x 0.0625, P -8 -> 0 >> 4
     * = 0 (the tie goes up; floor: -1, -0.0625); -0.5625 x 0.0625, P -9 -> -1 >> 4 = -1 (floor:
     * -1 too); 0.5 x 0.5625 = P 8 x 9 = 72 -> 80 >> 4 = 5, 0.3125 (floor: 4, 0.25) */
    struct quant_acc r = int_acc(16, 4, QUANT_ACC_SATURATE), f = r;
    r.align = QUANT_ACC_ALIGN_NEAREST;
    const float one[] = {0.0625f}, two[] = {0.5f}, mtwo[] = {-0.5f}, x[] = {0.5f}, y[] = {0.5625f};
    ck_assert_float_eq(dot(&r, one, 4, one, 4, 1, NULL), 0.0f);
    ck_assert_float_eq(dot(&r, two, 4, one, 4, 1, NULL), 0.0625f);
    ck_assert_float_eq(dot(&f, two, 4, one, 4, 1, NULL), 0.0f);
    ck_assert_float_eq(dot(&r, mtwo, 4, one, 4, 1, NULL), 0.0f);
    ck_assert_float_eq(dot(&f, mtwo, 4, one, 4, 1, NULL), -0.0625f);
    const float m9[] = {-0.5625f}, o16[] = {0.0625f};
    ck_assert_float_eq(dot(&r, m9, 4, o16, 4, 1, NULL), -0.0625f); /* P -9 */
    ck_assert_float_eq(dot(&r, x, 4, y, 4, 1, NULL), 0.3125f);
    ck_assert_float_eq(dot(&f, x, 4, y, 4, 1, NULL), 0.25f);
    /* the bias of a long sum: 64 products of P 1 (2^-8 each, exact sum 0.25) sum to 0 either
     * way; 64 of P 12 (0.75 x 0.0625, exact sum 3) floor to 0 each, round to 1 each: 64 x
     * 2^-4 = 4 against floor's 0 */
    float a64[64], b64[64];
    for (int i = 0; i < 64; i++) a64[i] = 0.75f, b64[i] = 0.0625f;
    ck_assert_float_eq(dot(&f, a64, 4, b64, 4, 64, NULL), 0.0f);
    ck_assert_float_eq(dot(&r, a64, 4, b64, 4, 64, NULL), 4.0f);
    /* at or above the products' point nothing is rounded: 12 fractional bits, exact */
    struct quant_acc up = int_acc(24, 12, QUANT_ACC_WRAP);
    up.align = QUANT_ACC_ALIGN_NEAREST;
    ck_assert_float_eq(dot(&up, one, 4, one, 4, 1, NULL), 0.00390625f);
    /* nearest without a binary point of its own is refused */
    struct quant_acc bad = int_acc(16, -1, QUANT_ACC_WRAP);
    bad.align = QUANT_ACC_ALIGN_NEAREST;
    ck_assert_int_eq(quant_acc_check(&bad), ADAPT_EINVAL);
    ck_assert_ptr_nonnull(strstr(adapt_error_message(), "which must be given"));
}
END_TEST

START_TEST(test_acc_exact_and_float32)
{
    /* 2^24 + 1 - 2^24: float32 rounds 2^24 + 1 to 2^24 (a tie, to even), so it gets 0; exact 1 */
    const float a[] = {0x1p24f, 1.0f, -0x1p24f}, b[] = {1, 1, 1};
    struct quant_acc f32 = {.kind = QUANT_ACC_FLOAT32}, ex = {.kind = QUANT_ACC_EXACT};
    ck_assert_float_eq(dot(&f32, a, 0, b, 0, 3, NULL), 0.0f);
    ck_assert_float_eq(dot(&ex, a, 0, b, 0, 3, NULL), 1.0f);
    /* the exact sum rounded once: 2^24 + 1 + 1 = 2^24 + 2 (representable); and 2^60 + 1 as
     * products 2^30 x 2^30 and 1 x 1 rounds to 2^60 (ties and below go down here) */
    const float c[] = {0x1p30f, 1.0f}, d[] = {0x1p30f, 1.0f};
    ck_assert_float_eq(dot(&ex, c, 0, d, 0, 2, NULL), 0x1p60f);
    /* 2^25 + 3 rounds to nearest even multiple of 4 ... of the float grid at 2^25 (step 4):
     * 33554435 -> 33554436 (3 is above half of 4) */
    const float e[] = {0x1p25f, 3.0f}, o[] = {1.0f, 1.0f};
    ck_assert_float_eq(dot(&ex, e, 0, o, 0, 2, NULL), 33554436.0f);
    /* an operand off its grid is refused with its place */
    const float bad[] = {0.03f};
    float out;
    ck_assert_int_eq(quant_acc_gemm_ref(&ex, 1, 1, 1, bad, 4, o, 0, &out, NULL), ADAPT_EINVAL);
    ck_assert_ptr_nonnull(strstr(adapt_error_message(), "A[0][0]"));
}
END_TEST

START_TEST(test_acc_float_chunks)
{
    /* an fp16 accumulator: at 2048 its step is 2, so 2048 + 1 is a tie and goes to even, 2048.
     * One chunk: 2048, +1 -> 2048, four times: 2048. Chunks of 2 summed in float32:
     * (2048 + 1 -> 2048) + (1 + 1 = 2) + (1) = 2051. Exact: 2052. */
    const float a[] = {2048, 1, 1, 1, 1}, b[] = {1, 1, 1, 1, 1};
    struct quant_acc h = {.kind = QUANT_ACC_FLOAT, .chunk = 0};
    h.fmt = spec_of("fp16", QUANT_ROUND_NEAREST, QUANT_TIE_EVEN);
    ck_assert_float_eq(dot(&h, a, 0, b, 0, 5, NULL), 2048.0f);
    h.chunk = 2;
    ck_assert_float_eq(dot(&h, a, 0, b, 0, 5, NULL), 2051.0f);
    h.chunk = 1; /* every product its own chunk: float32 sums, exact here */
    ck_assert_float_eq(dot(&h, a, 0, b, 0, 5, NULL), 2052.0f);
    /* bf16 (8 significant bits): 1 + 2^-8 is a tie between 1 and 1 + 2^-7, to even: 1. The
     * product 2^-8 x (1 + 2^-22) = 2^-8 + 2^-30 puts the exact sum above the tie, so it rounds
     * up to 1 + 2^-7; a sum rounded to float32 first (nearest) would lose the 2^-30, land on
     * the tie and round down to 1 (the double rounding the reference avoids) */
    struct quant_acc bf = {.kind = QUANT_ACC_FLOAT, .chunk = 0};
    bf.fmt = spec_of("bf16", QUANT_ROUND_NEAREST, QUANT_TIE_EVEN);
    const float t1[] = {1.0f, 0x1p-8f}, one[] = {1.0f, 1.0f};
    ck_assert_float_eq(dot(&bf, t1, 0, one, 0, 2, NULL), 1.0f);
    const float t2[] = {1.0f, 0x1p-8f}, u2[] = {1.0f, 1.0f + 0x1p-22f}; /* 2^-8 + 2^-30 */
    ck_assert_float_eq(dot(&bf, t2, 0, u2, 0, 2, NULL), 1.0f + 0x1p-7f);
    /* refused: a fixed-point accumulator format, more than 21 mantissa bits, a negative chunk */
    struct quant_acc bad = {.kind = QUANT_ACC_FLOAT};
    bad.fmt = spec_of("fixed(8,4)", QUANT_ROUND_NEAREST, QUANT_TIE_EVEN);
    ck_assert_int_eq(quant_acc_check(&bad), ADAPT_EINVAL);
    bad.fmt = spec_of("float(8,22)", QUANT_ROUND_NEAREST, QUANT_TIE_EVEN);
    ck_assert_int_eq(quant_acc_check(&bad), ADAPT_EINVAL);
    bad.fmt = spec_of("fp16", QUANT_ROUND_NEAREST, QUANT_TIE_EVEN);
    bad.chunk = -1;
    ck_assert_int_eq(quant_acc_check(&bad), ADAPT_EINVAL);
    struct quant_acc w = int_acc(65, -1, QUANT_ACC_WRAP);
    ck_assert_int_eq(quant_acc_check(&w), ADAPT_EINVAL);
}
END_TEST

/* Random <8,4> x <8,4> products of k = 1000 terms, each at most 64 in magnitude: exact equals a
 * 64-bit register and equals float32 (every partial sum is a multiple of 2^-8 below 64000, at
 * most 2^24 steps of 2^-8, which float32 holds); a 12-bit wrapping register equals the exact sum
 * modulo 2^12 (in units of 2^-8), and a saturating one stays in [-2048, 2047] units. */
START_TEST(test_acc_properties)
{
    enum { M = 3, N = 4, K = 1000 };
    static float A[M * K], B[K * N], E[M * N], I64[M * N], F[M * N], W[M * N], S[M * N];
    struct adapt_rng r;
    adapt_rng_init(&r, 77, 1);
    for (int i = 0; i < M * K; i++) A[i] = ldexpf((float)((int)adapt_rng_below(&r, 256) - 128), -4);
    for (int i = 0; i < K * N; i++) B[i] = ldexpf((float)((int)adapt_rng_below(&r, 256) - 128), -4);
    struct quant_acc ex = {.kind = QUANT_ACC_EXACT}, f32 = {.kind = QUANT_ACC_FLOAT32};
    struct quant_acc i64 = int_acc(64, -1, QUANT_ACC_WRAP), w = int_acc(12, -1, QUANT_ACC_WRAP);
    struct quant_acc s = int_acc(12, -1, QUANT_ACC_SATURATE);
    struct quant_acc_stats st = {0};
    ck_assert_int_eq(quant_acc_gemm_ref(&ex, M, N, K, A, 4, B, 4, E, NULL), ADAPT_OK);
    ck_assert_int_eq(quant_acc_gemm_ref(&i64, M, N, K, A, 4, B, 4, I64, &st), ADAPT_OK);
    ck_assert_uint_eq(st.overflows, 0);
    ck_assert_int_eq(quant_acc_gemm_ref(&f32, M, N, K, A, 4, B, 4, F, NULL), ADAPT_OK);
    ck_assert_int_eq(quant_acc_gemm_ref(&w, M, N, K, A, 4, B, 4, W, NULL), ADAPT_OK);
    ck_assert_int_eq(quant_acc_gemm_ref(&s, M, N, K, A, 4, B, 4, S, NULL), ADAPT_OK);
    for (int i = 0; i < M * N; i++) {
        ck_assert_float_eq(E[i], I64[i]);
        ck_assert_float_eq(E[i], F[i]);
        long long e = (long long)ldexp(E[i], 8), x = (long long)ldexp(W[i], 8);
        long long m = ((e % 4096) + 4096) % 4096;
        if (m >= 2048) m -= 4096;
        ck_assert_int_eq(x, m);
        ck_assert(S[i] >= -8.0f && S[i] <= ldexpf(2047.0f, -8));
    }
}
END_TEST

void test_quant_add_accum(TCase *tc)
{
    tcase_add_test(tc, test_acc_wrap_saturate);
    tcase_add_test(tc, test_acc_binary_point);
    tcase_add_test(tc, test_acc_align_nearest);
    tcase_add_test(tc, test_acc_exact_and_float32);
    tcase_add_test(tc, test_acc_float_chunks);
    tcase_add_test(tc, test_acc_properties);
}
