/* tests/test_data.h: what the source files of tests/test_data share: the test's temporary
 * folder and files in it, the status-and-message check, the synthetic CIFAR pixels and labels,
 * and the functions by which each file adds its tests to the program's test cases (created in
 * tests/test_data.c). */
#ifndef ADAPT_TESTS_TEST_DATA_H
#define ADAPT_TESTS_TEST_DATA_H

#include <check.h>
#include <stddef.h>

#include "src/base/status.h"

/* Float32 normalisation vs the exact value: p/255, the subtraction and the division each
 * round once (relative 2^-24 = 6e-8) on operands below 1, then the result (at most 2.9 in
 * magnitude here) rounds once more; with std >= 0.1994 the total stays below 5e-7. */
#define NORM_TOL 1e-6

/* the running test's temporary folder (made and removed by the "files" test case's fixture) */
extern char tmp[256];

/* "<tmp>/<name>" into buf; returns buf */
const char *in_tmp(char *buf, size_t len, const char *name);
/* writes len bytes of data to path, gzip-compressed when gz */
void write_file(const char *path, const void *data, size_t len, int gz);
/* st is want, and the error message holds s1 and s2 (either may be NULL) */
void expect_error(enum adapt_status st, enum adapt_status want, const char *s1, const char *s2);

/* Synthetic CIFAR pixel for global record s, channel ch, row r, column c, and its CIFAR-10
 * label (tests/test_data_cifar.c). */
int cpix(int s, int ch, int r, int c);
int c10_label(int s);

void test_data_add_cifar(TCase *files); /* test_data_cifar.c */
void test_data_add_order(TCase *order); /* test_data_order.c */

#endif
