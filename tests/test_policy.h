/* tests/test_policy.h: what the source files of tests/test_policy share: the network the
 * engine tests train and set gradients on, and the functions by which each file adds its tests
 * to the "engine" test case (created in tests/test_policy.c). */
#ifndef ADAPT_TESTS_TEST_POLICY_H
#define ADAPT_TESTS_TEST_POLICY_H

#include <check.h>

#include "src/net/net.h"

#include "tests/testutil_net.h" /* small_lenet */
/* every element of every trained parameter's gradient set to v */
void set_grads(struct adapt_net *net, float v);

void test_policy_add_engine(TCase *engine);     /* test_policy_engine.c */
void test_policy_add_amp_muppet(TCase *engine); /* test_policy_amp_muppet.c */

#endif
