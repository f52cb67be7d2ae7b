/* tests/test_config.h: what the source files of tests/test_config share: the test's
 * temporary directory and files in it, the complete configuration file of test_full_file, printing
 * a configuration and reading it back, and the functions by which each file adds its tests to the
 * program's one test case (created in tests/test_config.c). */
#ifndef ADAPT_TESTS_TEST_CONFIG_H
#define ADAPT_TESTS_TEST_CONFIG_H

#include <check.h>
#include <stddef.h>
#include <string.h>

#include "src/base/status.h"
#include "src/config/config.h"

/* A fresh temporary directory per test (Check forks each test). */
extern char tmpdir[64];

/* Writes text to <tmpdir>/<name>; returns the path (in path). */
const char *write_file(char *path, size_t size, const char *name, const char *text);
/* Loads text as a file; returns the status. */
enum adapt_status load_text(struct adapt_config *cfg, const char *text);

#define ck_assert_msg_has(s)                                                                       \
    ck_assert_msg(strstr(adapt_error_message(), (s)) != NULL, "message \"%s\" lacks \"%s\"",       \
                  adapt_error_message(), (s))

/* a file that sets every key to something other than its default (tests/test_config.c) */
extern const char *full_ini;

/* Prints c with flags to <tmpdir>/printed<flags>.ini and loads that into d, which must
 * equal c (tests/test_config_print.c). */
void print_and_reload(const struct adapt_config *c, struct adapt_config *d, unsigned flags);

void test_config_add_errors(TCase *tc);  /* test_config_errors.c */
void test_config_add_formats(TCase *tc); /* test_config_formats.c */
void test_config_add_print(TCase *tc);   /* test_config_print.c */
void test_config_add_schema(TCase *tc);  /* test_config_schema.c */

#endif
