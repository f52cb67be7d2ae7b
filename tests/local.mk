# tests/: one Check program per module.
TEST_LDADD = $(ADAPT_LIBS) $(CHECK_LIBS) $(ADAPT_EXT_LIBS)
TEST_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)

check_PROGRAMS += tests/test_base
tests_test_base_SOURCES = tests/test_base.c
tests_test_base_CFLAGS = $(TEST_CFLAGS)
tests_test_base_LDADD = $(TEST_LDADD)
TESTS += tests/test_base

check_PROGRAMS += tests/test_models tests/test_optim
tests_test_models_SOURCES = tests/test_models.c
tests_test_models_CFLAGS = $(TEST_CFLAGS)
tests_test_models_LDADD = $(TEST_LDADD)
tests_test_optim_SOURCES = tests/test_optim.c
tests_test_optim_CFLAGS = $(TEST_CFLAGS)
tests_test_optim_LDADD = $(TEST_LDADD)
TESTS += tests/test_models tests/test_optim

check_PROGRAMS += tests/test_train
tests_test_train_SOURCES = tests/test_train.c
tests_test_train_CFLAGS = $(TEST_CFLAGS)
tests_test_train_LDADD = $(TEST_LDADD)
TESTS += tests/test_train

check_PROGRAMS += tests/test_checkpoint
tests_test_checkpoint_SOURCES = tests/test_checkpoint.c
tests_test_checkpoint_CFLAGS = $(TEST_CFLAGS)
tests_test_checkpoint_LDADD = $(TEST_LDADD)
TESTS += tests/test_checkpoint
