/* src/bench/gemm_int.h: integer GEMM kernels timed by `adapt-bench gemm`.
 *
 * C (m x n, int32) = A (m x k) B (k x n), all row-major, for int8 and int16
 * inputs, in three instruction-set versions chosen at run time:
 *   avx512vnni  int8: VPDPBUSD (unsigned x signed bytes; A is offset by +128
 *               and the column sums of B correct it), int16: VPDPWSSD
 *   avx2        both: VPMADDWD on int16 pairs (int8 inputs sign-extended)
 *   scalar      plain loops (what a baseline x86-64 build vectorises)
 * Each call packs A and B into panel layouts in the caller's workspace (the
 * packing is part of the call, as in a library GEMM) and runs OpenMP over
 * output tiles. Sums accumulate in int32 and wrap like the hardware
 * instructions: inputs must keep every |dot product| below 2^31 (int8 always
 * does for k < 2^17). adapt_gemm_s8_ref / _s16_ref are the scalar twins that
 * tests compare every version against.
 *
 * Non-goals: no transposes, no output scaling or requantization, no
 * training use; these kernels exist to measure what integer arithmetic
 * buys on the machine at hand.
 *
 *   size_t ws = adapt_gemm_int_workspace(ADAPT_GEMM_S8, m, n, k);
 *   void *w = adapt_aligned_alloc(ws);
 *   adapt_gemm_s8(ADAPT_GEMM_ISA_AVX512VNNI, m, n, k, A, B, C, w);
 *
 * Ownership: the caller owns every array; the workspace is 64-byte aligned
 * and at least adapt_gemm_int_workspace bytes.
 */
#ifndef ADAPT_BENCH_GEMM_INT_H
#define ADAPT_BENCH_GEMM_INT_H

#include <stddef.h>
#include <stdint.h>

enum adapt_gemm_isa { ADAPT_GEMM_ISA_SCALAR = 0, ADAPT_GEMM_ISA_AVX2, ADAPT_GEMM_ISA_AVX512VNNI };
enum adapt_gemm_type { ADAPT_GEMM_S8 = 0, ADAPT_GEMM_S16 };

/* 1 when this CPU runs the version. */
int adapt_gemm_isa_available(enum adapt_gemm_isa isa);
/* "scalar", "avx2", "avx512vnni" */
const char *adapt_gemm_isa_name(enum adapt_gemm_isa isa);
/* The fastest version this CPU runs. */
enum adapt_gemm_isa adapt_gemm_isa_best(void);

size_t adapt_gemm_int_workspace(enum adapt_gemm_type t, int m, int n, int k);

void adapt_gemm_s8(enum adapt_gemm_isa isa, int m, int n, int k, const int8_t *A, const int8_t *B,
                   int32_t *C, void *ws);
void adapt_gemm_s16(enum adapt_gemm_isa isa, int m, int n, int k, const int16_t *A,
                    const int16_t *B, int32_t *C, void *ws);

/* Scalar references (no workspace). */
void adapt_gemm_s8_ref(int m, int n, int k, const int8_t *A, const int8_t *B, int32_t *C);
void adapt_gemm_s16_ref(int m, int n, int k, const int16_t *A, const int16_t *B, int32_t *C);

#endif
