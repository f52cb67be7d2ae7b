/* src/quant/accum_fast.h: the internals of quant_acc_gemm (src/quant/accum_fast.c) that tests
 * and adapt-bench reach: the instruction set and the narrowest integer path, forced, and the
 * path that ran.
 *
 * Paths (doc/numerics.md, "Accumulators", the fast path):
 *   int8   exact sums in int32 over the whole of k (VPDPBUSD on avx512vnni; scalar loops)
 *   int16  int16 pairs (VPDPWSSD / VPMADDWD; scalar loops), int32 sums over blocks of k short
 *          enough to stay exact, added into int64
 *   int64  int64 sums, vectorised over output columns
 *   seq    int registers that may overflow, are counted, saturate or drop product bits: every
 *          addition in order, int64 lanes over output columns
 *   wide   operands or sums beyond 64-bit arithmetic: scalar, 128-bit sums, as the reference
 *   f32    float32 sums in order, vectorised over output columns
 *   float  narrow float accumulators: sums in order, rounded a tile at a time
 */
#ifndef ADAPT_QUANT_ACCUM_FAST_H
#define ADAPT_QUANT_ACCUM_FAST_H

#include "src/quant/gemm_int.h"
#include "src/quant/quant.h"

enum quant_acc_path {
    QUANT_ACC_PATH_INT8 = 0,
    QUANT_ACC_PATH_INT16,
    QUANT_ACC_PATH_INT64,
    QUANT_ACC_PATH_SEQ,
    QUANT_ACC_PATH_WIDE,
    QUANT_ACC_PATH_F32,
    QUANT_ACC_PATH_FLOAT,
    QUANT_ACC_PATH_INT128 /* exact sums of int32 codes beyond 2^63: two 64-bit words a lane */
};
const char *quant_acc_path_name(enum quant_acc_path p);

/* isa: the instruction set (an unavailable one: the best available); min_path: the narrowest
 * integer GEMM path allowed (INT8: any; INT16: not int8; INT64: neither), wider ones are taken
 * when the operands need them. *used (may be NULL): the path that ran. */
struct quant_acc_opts {
    enum adapt_gemm_isa isa;
    enum quant_acc_path min_path;
};
enum adapt_status quant_acc_gemm_opts(const struct quant_acc_opts *o, const struct quant_acc *acc,
                                      int m, int n, int k, const float *A, ptrdiff_t lda, int fla,
                                      const float *B, ptrdiff_t ldb, int flb, float *C,
                                      ptrdiff_t ldc, struct quant_acc_stats *st,
                                      enum quant_acc_path *used);

#endif
