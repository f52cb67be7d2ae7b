/* tests/test_io.h: what the source files of tests/test_io share: the test's temporary
 * directory, files in it, the trace the writer tests write (its header, steps and epochs), and
 * the functions by which each file adds its tests to the program's test cases (created in
 * tests/test_io.c). */
#ifndef ADAPT_TESTS_TEST_IO_H
#define ADAPT_TESTS_TEST_IO_H

#include <check.h>
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "src/base/status.h"
#include "src/trace/trace.h"

/* the running test's temporary directory (made and removed by the test cases' fixture) */
extern char tmpdir[64];

/* "<tmpdir>/<name>" into path */
void tmp_file(char *path, size_t size, const char *name);
/* With ADAPT_TRACE_SAMPLES set to a directory, keeps a copy of a trace the
 * writer produced there as NAME (tests/python.test validates those copies
 * against doc/trace.schema.json). */
void keep_sample(const char *path, const char *name);
int file_exists(const char *path);

/* the last error message contains s */
#define ck_assert_msg_has(s)                                                                       \
    ck_assert_msg(strstr(adapt_error_message(), (s)) != NULL, "message \"%s\" lacks \"%s\"",       \
                  adapt_error_message(), (s))

/* A small LeNet-like model (conv (unit 0), tanh, pool, linear (unit 1)) and its trace records */
extern const struct adapt_trace_layer layers[4];
struct adapt_trace_header make_header(json_t *config);
struct adapt_trace_step make_step(int i);
struct adapt_trace_epoch make_epoch(int e);
/* Writes header, steps 0-1, epoch 1, step 2, epoch 2, test, end; returns the byte
 * offset after epoch 1. */
int64_t write_trace(const char *path);

void test_io_add_read(TCase *trace);     /* test_io_read.c */
void test_io_add_oom(TCase *trace);      /* test_io_oom.c */
void test_io_add_safetensors(TCase *st); /* test_io_safetensors.c */

#endif
