# src/policy: per-unit precision state (precision.c), graph precision propagation (graphamp.c)
# and the precision policies over them (comp.c: the CoMP plan search and policy).
noinst_LIBRARIES += libpolicy.a
libpolicy_a_SOURCES = \
	src/policy/precision.c src/policy/precision.h src/policy/roles.c src/policy/roles.h \
	src/policy/mx_gemm.c src/policy/arith.c \
	src/policy/graphamp.c src/policy/graphamp.h \
	src/policy/policy_core.c src/policy/policy_core.h \
	src/policy/policy.c src/policy/policy.h src/policy/adapt.c src/policy/muppet.c \
	src/policy/comp.c src/policy/comp.h
