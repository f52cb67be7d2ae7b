# src/policy: precision policies.
libadapt_a_SOURCES += src/policy/policy_core.c src/policy/policy_core.h

check_PROGRAMS += tests/test_policy
tests_test_policy_SOURCES = tests/test_policy.c
tests_test_policy_CFLAGS = $(TEST_CFLAGS)
tests_test_policy_LDADD = $(TEST_LDADD)
TESTS += tests/test_policy
libadapt_a_SOURCES += src/policy/policy.c src/policy/policy.h src/policy/adapt.c \
	src/policy/muppet.c
libadapt_a_SOURCES += src/precision.c src/precision.h
