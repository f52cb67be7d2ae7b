/* src/quant/quant_cpu.h: internal declarations shared by the CPU files of src/quant/ (not
 * installed, not for the engine: use src/quant/quant.h).
 *
 * Work is split in index space: OpenMP chunks and random-number pieces start at multiples of
 * QUANT_CHUNK and QUANT_PIECE of the global element index, so every Philox block except at
 * the ends of a call is generated whole, and the split does not depend on the thread count.
 */
#ifndef QUANT_QUANT_CPU_H
#define QUANT_QUANT_CPU_H

#include <stddef.h>
#include <stdint.h>

#include "src/quant/quant.h"

/* Elements per OpenMP work item (a multiple of QUANT_PIECE). */
#define QUANT_CHUNK ((size_t)65536)
/* Elements per random-number buffer (a multiple of 128). */
#define QUANT_PIECE ((size_t)1024)
/* Room for one piece: the SIMD generator writes whole groups of 32 blocks (128 values). */
#define QUANT_PIECE_BUF (QUANT_PIECE + 256)

/* Philox generators (src/quant/philox.c). */
enum { QUANT_ISA_SCALAR = 0, QUANT_ISA_AVX2 = 1, QUANT_ISA_AVX512 = 2 };

/* Fill buf (QUANT_PIECE_BUF values) with the Philox values of (seed, stream) for indices
 * index .. index + n - 1, n <= QUANT_PIECE; returns the address of the value for `index`
 * (inside buf). Uses the best generator this CPU has (run-time dispatch). */
const uint32_t *quant_philox_fill(uint32_t *buf, uint64_t seed, uint64_t stream, uint64_t index,
                                  size_t n);
/* The same with a chosen generator; NULL when this CPU does not have it. */
const uint32_t *quant_philox_fill_isa(int isa, uint32_t *buf, uint64_t seed, uint64_t stream,
                                      uint64_t index, size_t n);
int quant_philox_best_isa(void);
/* The random bits of a stochastic rounding (quant_sr_bits_at): bits 32 as quant_philox_fill_isa,
 * bits 16 half as many Philox values, each spread over two elements; returns the address of the
 * bits of `index` inside buf (QUANT_PIECE_BUF values), NULL when this CPU lacks the generator. */
const uint32_t *quant_sr_fill_isa(int isa, int bits, uint32_t *buf, uint64_t seed,
                                  uint64_t stream, uint64_t index, size_t n);
/* The same with the plan's seed, stream and sr_bits and the best generator. */
const uint32_t *quant_sr_fill(uint32_t *buf, const struct quant_plan *p, uint64_t index, size_t n);
/* Timing only (adapt-bench quant --bits-free): with bits non-NULL (QUANT_PIECE values, kept by
 * the caller) quant_sr_fill hands every piece these same bits instead of generating its own, so
 * a stochastic rounding costs what the rounding alone costs; its results are then not those of
 * the rounding's definition. NULL restores the generator. Not for concurrent use with rounding. */
void quant_sr_bits_reuse(const uint32_t *bits);
const char *quant_philox_isa_name(int isa);

/* Serial kernels over one contiguous run with one plan (SIMD, run-time dispatched clones).
 * counts (NULL: not wanted) [0..2] += saturated, flushed to zero, zeros. */
void quant_grid_run(const struct quant_plan *p, const float *x, float *y, size_t n, uint64_t index,
                    uint8_t *mask, uint64_t *counts);
void quant_fmt_run(const struct quant_plan *p, const float *x, float *y, size_t n, uint64_t index,
                   uint8_t *mask, uint64_t *counts);
/* Plugins (src/quant/plugin.c): the widest vector variant, the scalar function for the rest. */
void quant_plugin_run(const struct quant_plan *p, const float *x, float *y, size_t n,
                      uint64_t index, uint8_t *mask, uint64_t *counts);
/* MX: x[0] starts a block, blocks of bl <= QUANT_MX_BLOCK elements (the last may be shorter;
 * bl < QUANT_MX_BLOCK: rows of bl elements, one block each). */
void quant_mx_run(const struct quant_plan *p, const float *x, float *y, size_t n, uint64_t index,
                  uint8_t *mask, uint64_t *counts, size_t bl);
/* MX down columns [c0, c1) of a row-major (R, C) matrix: the blocks and bits of quant_mx_run
 * over the transpose (element (r, c) at index + c R + r), QUANT_MX_LANES columns at a time in
 * SIMD lanes. */
#define QUANT_MX_LANES 64
void quant_mx_cols(const struct quant_plan *p, const float *x, float *y, size_t R, size_t C,
                   size_t c0, size_t c1, uint64_t index, uint64_t *counts);

/* Serial range reduction over finite values (SIMD): k[0] = max, k[1] = min of the order keys. */
void quant_range_keys(const float *x, size_t n, uint32_t k[2]);

#endif
