/* src/quant/accum.c: the scalar reference of the accumulator models (src/quant/quant.h,
 * quant_acc_gemm_ref; doc/numerics.md, "Accumulators"): a matrix product whose sums run in a
 * fixed order p = 0 .. k-1 in float32, exactly, in a finite two's-complement integer register
 * that wraps or saturates, or in a narrow float format with chunks summed in float32.
 *
 * It is written for clarity, not speed: one dot product at a time, every addition as the model
 * defines it. Faster paths are checked against it. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "src/quant/accum_impl.h"
#include "src/quant/quant.h"

const char *quant_acc_kind_name(enum quant_acc_kind k)
{
    switch (k) {
    case QUANT_ACC_FLOAT32: return "float32";
    case QUANT_ACC_EXACT: return "exact";
    case QUANT_ACC_INT: return "int";
    case QUANT_ACC_FLOAT: return "float";
    }
    return "?";
}

enum adapt_status quant_acc_check(const struct quant_acc *a)
{
    switch (a->kind) {
    case QUANT_ACC_FLOAT32:
    case QUANT_ACC_EXACT: return ADAPT_OK;
    case QUANT_ACC_INT:
        if (a->bits < 2 || a->bits > 64)
            return ADAPT_ERROR(ADAPT_EINVAL, "accumulator int(%d): the width must be 2..64 bits",
                               a->bits);
        if (a->fl < -1 || a->fl > 62)
            return ADAPT_ERROR(ADAPT_EINVAL, "accumulator int(%d): %d fractional bits (expected "
                                             "0..62, or -1 for the products' own)",
                               a->bits, a->fl);
        if (a->overflow != QUANT_ACC_WRAP && a->overflow != QUANT_ACC_SATURATE)
            return ADAPT_ERROR(ADAPT_EINVAL, "accumulator int(%d): overflow must be wrap or "
                                             "saturate", a->bits);
        if (a->align != QUANT_ACC_ALIGN_FLOOR && a->align != QUANT_ACC_ALIGN_NEAREST)
            return ADAPT_ERROR(ADAPT_EINVAL,
                               "accumulator int(%d): products aligned by floor "
                               "or nearest",
                               a->bits);
        if (a->align == QUANT_ACC_ALIGN_NEAREST && a->fl < 0)
            return ADAPT_ERROR(ADAPT_EINVAL,
                               "accumulator int(%d): nearest rounds products to "
                               "the register's binary point, which must be given "
                               "(int(%d, %s, FL, nearest)); at the products' own "
                               "point nothing is rounded",
                               a->bits, a->bits,
                               a->overflow == QUANT_ACC_SATURATE ? "saturate" : "wrap");
        return ADAPT_OK;
    case QUANT_ACC_FLOAT: {
        enum adapt_status st = quant_spec_check(&a->fmt);
        if (st) return st;
        if (a->fmt.format != QUANT_FORMAT_FLOAT && a->fmt.format != QUANT_FORMAT_FP16 &&
            a->fmt.format != QUANT_FORMAT_BF16)
            return ADAPT_ERROR(ADAPT_EINVAL, "a float accumulator takes float(e,m), fp16 or "
                                             "bf16 formats");
        if (a->fmt.man_bits > 21)
            return ADAPT_ERROR(ADAPT_EINVAL, "a float accumulator of %d mantissa bits: at most "
                                             "21 (wider: float32 accumulation)", a->fmt.man_bits);
        if (a->chunk < 0)
            return ADAPT_ERROR(ADAPT_EINVAL, "accumulator chunk %d: expected 0 (one chunk) or "
                                             "more products", a->chunk);
        return ADAPT_OK;
    }
    }
    return ADAPT_ERROR(ADAPT_EINVAL, "unknown accumulator kind %d", (int)a->kind);
}





static float round_to(const struct quant_spec *s, float x)
{
    float y = x;
    struct quant_key k = {0, 0, 0};
    quant_array(s, &x, &y, 1, k, NULL, NULL); /* valid spec, one value: cannot fail */
    return y;
}

static enum adapt_status check_args(const struct quant_acc *acc, int m, int n, int k, int fla,
                                    int flb)
{
    enum adapt_status e = quant_acc_check(acc);
    if (e) return e;
    if (m < 0 || n < 0 || k < 0) return ADAPT_ERROR(ADAPT_EINVAL, "gemm of %d x %d x %d", m, n, k);
    const int integer = acc->kind == QUANT_ACC_EXACT || acc->kind == QUANT_ACC_INT;
    if (integer && (fla < 0 || flb < 0 || fla + flb > 124))
        return ADAPT_ERROR(ADAPT_EINVAL, "integer accumulation of operands with %d and %d "
                                         "fractional bits (expected 0 .. 62 each)", fla, flb);
    return ADAPT_OK;
}

/* Rows i0 .. i1-1 of C, operands and result with row strides; arguments checked. */
static enum adapt_status gemm_rows(const struct quant_acc *acc, int i0, int i1, int n, int k,
                                   const float *A, ptrdiff_t lda, int fla, const float *B,
                                   ptrdiff_t ldb, int flb, float *C, ptrdiff_t ldc,
                                   struct quant_acc_stats *st)
{
    const int pfl = fla + flb;                              /* the products' fractional bits */
    const int afl = acc->kind == QUANT_ACC_INT && acc->fl >= 0 ? acc->fl : pfl;
    struct quant_spec fs = acc->fmt;
    fs.rounding = QUANT_ROUND_NEAREST;
    for (int i = i0; i < i1; i++)
        for (int j = 0; j < n; j++) {
            float out = 0.0f;
            if (acc->kind == QUANT_ACC_FLOAT32) {
                for (int p = 0; p < k; p++)
                    out = out + A[(ptrdiff_t)i * lda + p] * B[(ptrdiff_t)p * ldb + j];
            } else if (acc->kind == QUANT_ACC_FLOAT) {
                float part = 0.0f; /* the chunk's sum, in the accumulator's format */
                for (int p = 0; p < k; p++) {
                    /* the product exactly in double (two float32 significands: 48 bits), the
                     * sum rounded once to the format */
                    double prod =
                        (double)A[(ptrdiff_t)i * lda + p] * (double)B[(ptrdiff_t)p * ldb + j];
                    part = round_to(&fs, odd_sum((double)part, prod));
                    if (acc->chunk > 0 && (p + 1) % acc->chunk == 0) {
                        out = out + part;
                        part = 0.0f;
                    }
                }
                out = out + part;
            } else {
                __int128 s = 0;
                for (int p = 0; p < k; p++) {
                    int64_t a, b;
                    const float va = A[(ptrdiff_t)i * lda + p], vb = B[(ptrdiff_t)p * ldb + j];
                    if (grid_int(va, fla, &a))
                        return ADAPT_ERROR(ADAPT_EINVAL, "A[%d][%d] = %.9g is not a multiple of "
                                                         "2^-%d", i, p, (double)va, fla);
                    if (grid_int(vb, flb, &b))
                        return ADAPT_ERROR(ADAPT_EINVAL, "B[%d][%d] = %.9g is not a multiple of "
                                                         "2^-%d", p, j, (double)vb, flb);
                    __int128 prod = (__int128)a * b; /* at 2^-pfl, exact */
                    if (acc->kind == QUANT_ACC_INT) {
                        uint64_t ov = 0;
                        s = acc_int_add(acc, s, prod, pfl, afl, &ov);
                        if (st) st->overflows += ov;
                    } else {
                        s += prod;
                    }
                }
                out = float_of(s, afl); /* the register's value, rounded once */
            }
            C[(ptrdiff_t)i * ldc + j] = out;
        }
    return ADAPT_OK;
}

enum adapt_status quant_acc_gemm_ref(const struct quant_acc *acc, int m, int n, int k,
                                     const float *A, int fla, const float *B, int flb, float *C,
                                     struct quant_acc_stats *st)
{
    enum adapt_status e = check_args(acc, m, n, k, fla, flb);
    return e ? e : gemm_rows(acc, 0, m, n, k, A, k, fla, B, n, flb, C, n, st);
}
