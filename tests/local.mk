# tests/: one Check program per module.
TEST_LDADD = $(ADAPT_LIBS) $(CHECK_LIBS) $(ADAPT_EXT_LIBS)
TEST_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)

check_PROGRAMS += tests/test_base
tests_test_base_SOURCES = tests/test_base.c
tests_test_base_CFLAGS = $(TEST_CFLAGS)
tests_test_base_LDADD = $(TEST_LDADD)
TESTS += tests/test_base
