/* tests/test_layers.h: what the source files of tests/test_layers share (the program checks
 * the CPU layer kinds; tests/test_layers.c says against what): the tolerance of a float sum, the
 * gradient check against finite differences of a double-precision reference, and the functions
 * by which each file adds its tests to the program's test cases.
 *
 * Tolerances. The finite differences are central differences of the
 * double-precision reference, so their own error (truncation h^2 |f'''| / 6
 * with h = 2^-10 or 2^-12, and rounding ~2^-52 sum|y dy| / h) stays below
 * 1e-7 of the values compared; what the tolerance has to cover is the
 * float32 rounding of the layer's analytic gradient. An element that is a
 * float sum of m terms bounded by T has an error of at most about
 * lambda sqrt(m) u sum|t| <= lambda sqrt(m) u m T (u = 2^-24, probabilistic
 * bound of Higham & Mary 2019 with lambda = 4); sum_tol(m, T) below. Inputs
 * are uniform, so sum|t| is typically m T / 4 and the bound has a wide margin
 * while still far below any real error (gradients here are O(0.1 .. 10)). */
#ifndef ADAPT_TESTS_TEST_LAYERS_H
#define ADAPT_TESTS_TEST_LAYERS_H

#include <check.h>
#include <stddef.h>

#include "tests/testutil_net.h"

#define U 5.9604644775390625e-08 /* 2^-24 */

/* lambda sqrt(m) u m tmax: the error bound of a float sum of m terms of at most tmax */
double sum_tol(double m, double tmax);

/* A double-precision forward of the layer under test: t's inputs and parameters (arg: the
 * shape, as the reference needs it) into y, one value per output element. */
typedef void (*ref_fn)(const struct tu_layer *t, const void *arg, double *y);

/* Forward + backward of the float layer with the current dy (gradients
 * zeroed first), then finite differences for every input i with
 * atol_x[i] >= 0 (atol_x has an entry per input) and every trained parameter p with
 * atol_p[p] >= 0. */
void check_grads(struct tu_layer *t, ref_fn ref, const void *arg, float h, const double *atol_x,
                 const double atol_p[4], size_t max_checks);

/* Each file's tests, added to the test cases that tests/test_layers.c creates */
void test_layers_add_gconv(TCase *conv);                    /* test_layers_gconv.c */
void test_layers_add_act(TCase *conv, TCase *elementwise);  /* test_layers_act.c */
void test_layers_add_join(TCase *conv, TCase *elementwise); /* test_layers_join.c */
void test_layers_add_pool(TCase *pool);                     /* test_layers_pool.c */
void test_layers_add_bn(TCase *batchnorm);                  /* test_layers_bn.c */
void test_layers_add_api(TCase *accumulate, TCase *api);    /* test_layers_api.c */

#endif
