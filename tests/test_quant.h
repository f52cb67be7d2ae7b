/* tests/test_quant.h: what the source files of tests/test_quant share: parsing a spec with a
 * chosen rounding, the high-entropy inputs most kernel checks round, and the functions by which
 * each file adds its tests to the program's one test case (created in tests/test_quant.c). */
#ifndef ADAPT_TESTS_TEST_QUANT_H
#define ADAPT_TESTS_TEST_QUANT_H

#include <check.h>
#include <stddef.h>
#include <stdint.h>

#include "src/quant/quant.h"

/* The spec text parses (a Check failure otherwise), with the rounding and tie rule given. */
struct quant_spec spec_of(const char *text, enum quant_rounding rnd, enum quant_tie tie);

/* High-entropy inputs for spec s: wide random magnitudes, raw bit patterns (NaN, inf,
 * subnormals included), exact ties of the format's grid at several scales, and specials. */
void fill_inputs(float *x, size_t n, const struct quant_spec *s, uint64_t seed);

void test_quant_add_kernels(TCase *tc); /* test_quant_kernels.c */
void test_quant_add_fixed(TCase *tc);   /* test_quant_fixed.c */
void test_quant_add_float(TCase *tc);   /* test_quant_float.c */
void test_quant_add_custom(TCase *tc);  /* test_quant_custom.c */
void test_quant_add_stats(TCase *tc);   /* test_quant_stats.c */
void test_quant_add_accum(TCase *tc);   /* test_quant_accum.c */
void test_quant_add_sr16(TCase *tc);    /* test_quant_sr16.c */

#endif
