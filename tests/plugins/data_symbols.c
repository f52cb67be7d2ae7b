/* tests/plugins/data_symbols.c: symbols a plugin text may name that are data, not functions,
 * which adapt-sim must refuse on load instead of calling them (tests/test_plugin.c):
 * plugin(PATH:data_rule) names an array, plugin(PATH:good_rule) a function whose good_rule_bits
 * is an int variable. ifunc_rule is a function chosen at load time by an IFUNC resolver (what gcc's
 * target_clones make), whose address lies in no exported symbol: it must still load. */
#include <stdint.h>

float data_rule[4] = {1.0f, 2.0f, 3.0f, 4.0f};

float good_rule(float x, uint32_t random_bits)
{
    (void)random_bits;
    return x;
}

int good_rule_bits = 16;

static float ifunc_rule_impl(float x, uint32_t random_bits)
{
    (void)random_bits;
    return x;
}

typedef float (*rule_fn)(float, uint32_t);
__attribute__((used)) static rule_fn ifunc_rule_resolve(void) { return ifunc_rule_impl; }
float ifunc_rule(float x, uint32_t random_bits) __attribute__((ifunc("ifunc_rule_resolve")));
