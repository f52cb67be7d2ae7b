/* src/quant/gemm_int.h: integer GEMM kernels: the exact accumulators' fast path
 * (quant_acc_gemm, src/quant/accum_fast.c) runs their tiles, and `adapt-bench gemm`
 * times them.
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
 * Non-goals: no transposes, no output scaling or requantization. The
 * training engine reaches the tiles through quant_acc_gemm, which packs
 * its own panels (same layouts) and runs the tiles over blocks of k.
 *
 *   size_t ws = adapt_gemm_int_workspace(ADAPT_GEMM_S8, m, n, k);
 *   void *w = adapt_aligned_alloc(ws);
 *   adapt_gemm_s8(ADAPT_GEMM_ISA_AVX512VNNI, m, n, k, A, B, C, w);
 *
 * Ownership: the caller owns every array; the workspace is 64-byte aligned
 * and at least adapt_gemm_int_workspace bytes.
 */
#ifndef ADAPT_QUANT_GEMM_INT_H
#define ADAPT_QUANT_GEMM_INT_H

#include <stddef.h>
#include <stdint.h>

enum adapt_gemm_isa { ADAPT_GEMM_ISA_SCALAR = 0, ADAPT_GEMM_ISA_AVX2, ADAPT_GEMM_ISA_AVX512VNNI };
enum adapt_gemm_type { ADAPT_GEMM_S8 = 0, ADAPT_GEMM_S16 };

/* 1 when this CPU runs the version. */
int adapt_gemm_isa_available(enum adapt_gemm_isa isa);
/* "scalar", "avx2", "avx512vnni" */
const char *adapt_gemm_isa_name(enum adapt_gemm_isa isa);
/* The fastest version this CPU runs, or the one the environment's ADAPT_GEMM_ISA names (scalar,
 * avx2 or avx512vnni: a cap, for timing a slower machine's kernels; the results are the same bits
 * on every version) when this CPU runs it. */
enum adapt_gemm_isa adapt_gemm_isa_best(void);
/* NULL when ADAPT_GEMM_ISA is unset, empty or names a version this CPU runs; else the message
 * that says why not (the programs refuse to start with it). */
const char *adapt_gemm_isa_env_error(void);

size_t adapt_gemm_int_workspace(enum adapt_gemm_type t, int m, int n, int k);

void adapt_gemm_s8(enum adapt_gemm_isa isa, int m, int n, int k, const int8_t *A, const int8_t *B,
                   int32_t *C, void *ws);
void adapt_gemm_s16(enum adapt_gemm_isa isa, int m, int n, int k, const int16_t *A,
                    const int16_t *B, int32_t *C, void *ws);

/* The tiles, on the packed layouts of gemm_int.c: kg groups of k from a (R rows, row stride
 * a_stride bytes, 4 bytes a group per row) and two panels b0, b1 (16 columns x 4 bytes a group
 * for avx512vnni, 8 x 4 for avx2); out[r][c] = the int32 sums (wrapping) of row r, column c of
 * the two panels. avx512vnni: R = 8, s16 selects VPDPWSSD (int16 pairs) over VPDPBUSD
 * (unsigned x signed bytes); avx2: R = 6, VPMADDWD on int16 pairs. Callers check the ISA. */
void adapt_gemm_tile_vnni(const uint8_t *a, size_t a_stride, const uint8_t *b0, const uint8_t *b1,
                          int kg, int s16, int32_t out[8][32]);
void adapt_gemm_tile_avx2(const uint8_t *a, size_t a_stride, const uint8_t *b0, const uint8_t *b1,
                          int kg, int32_t out[6][16]);

/* Scalar references (no workspace). */
void adapt_gemm_s8_ref(int m, int n, int k, const int8_t *A, const int8_t *B, int32_t *C);
void adapt_gemm_s16_ref(int m, int n, int k, const int16_t *A, const int16_t *B, int32_t *C);

#endif
