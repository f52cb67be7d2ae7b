/* tests/test_config_formats.c: number formats in the configuration, part of
 * tests/test_config: [format NAME] sections (read, resolved, named, set, printed, in JSON) and
 * fixed-point formats without an integer bit, refused unless policy.allow_no_int_bits. */
#include <check.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "src/config/config.h"
#include "src/config/schema.h"
#include "tests/test_config.h"
#include "tests/testutil.h"

/* A fixed-point format with FL >= WL (no integer bit) is refused wherever it is configured,
 * naming the keys and values, unless policy.allow_no_int_bits; FL = WL - 1 passes. */
START_TEST(test_no_int_bits)
{
    static struct adapt_config c;
    adapt_config_init(&c);
    ck_assert_int_eq(adapt_config_set(&c, "policy.name=fixed"), ADAPT_OK);
    ck_assert_int_eq(adapt_config_set(&c, "policy.wl=8"), ADAPT_OK);
    ck_assert_int_eq(adapt_config_set(&c, "policy.fl=10"), ADAPT_OK);
    ck_assert_int_eq(adapt_config_check(&c), ADAPT_EINVAL);
    ck_assert_msg_has("--set policy.fl=10: policy.wl = 8, policy.fl = 10: fixed(8,10) has FL = "
                      "10 >= WL = 8, no integer bit");
    ck_assert_msg_has("policy.allow_no_int_bits = true");
    ck_assert_int_eq(adapt_config_set(&c, "policy.allow_no_int_bits=true"), ADAPT_OK);
    ck_assert_int_eq(adapt_config_check(&c), ADAPT_OK);
    ck_assert_int_eq(adapt_config_set(&c, "policy.allow_no_int_bits=false"), ADAPT_OK);
    ck_assert_int_eq(adapt_config_set(&c, "policy.fl=7"), ADAPT_OK); /* a sign bit: warned */
    ck_assert_int_eq(adapt_config_check(&c), ADAPT_OK);
    ck_assert_int_eq(adapt_config_set(&c, "policy.format=fixed(32,32)"), ADAPT_OK);
    ck_assert_int_eq(adapt_config_check(&c), ADAPT_EINVAL);
    ck_assert_msg_has("policy.format = fixed(32,32): fixed(32,32) has FL = 32 >= WL = 32");
    ck_assert_int_eq(adapt_config_set(&c, "policy.format=fixed(32,28)"), ADAPT_OK);
    ck_assert_int_eq(adapt_config_check(&c), ADAPT_OK);
    ck_assert_int_eq(adapt_config_set(&c, "policy.per_unit=8:4,6:6"), ADAPT_OK);
    ck_assert_int_eq(adapt_config_check(&c), ADAPT_EINVAL);
    ck_assert_msg_has("policy.per_unit entry 2 = 6:6: fixed(6,6) has FL = 6 >= WL = 6");
    ck_assert_int_eq(adapt_config_set(&c, "policy.per_unit="), ADAPT_OK);
    ck_assert_int_eq(adapt_config_set(&c, "format.q.kind=fixed"), ADAPT_OK);
    ck_assert_int_eq(adapt_config_set(&c, "format.q.wl=4"), ADAPT_OK);
    ck_assert_int_eq(adapt_config_set(&c, "format.q.fl=5"), ADAPT_OK);
    ck_assert_int_eq(adapt_config_check(&c), ADAPT_EINVAL);
    ck_assert_msg_has("format.q.wl = 4, format.q.fl = 5: fixed(4,5) has FL = 5 >= WL = 4");
    ck_assert_int_eq(adapt_config_set(&c, "format.q.fl=2"), ADAPT_OK);
    ck_assert_int_eq(adapt_config_set(&c, "policy.name=adapt"), ADAPT_OK);
    ck_assert_int_eq(adapt_config_set(&c, "quantization.start_wl=6"), ADAPT_OK);
    ck_assert_int_eq(adapt_config_set(&c, "quantization.start_fl=6"), ADAPT_OK);
    ck_assert_int_eq(adapt_config_check(&c), ADAPT_EINVAL);
    ck_assert_msg_has("quantization.start_wl = 6, quantization.start_fl = 6: fixed(6,6) has FL");
}
END_TEST

/* [format NAME] sections: read from anywhere in the file (here after [policy], which names
 * one), resolved and registered by adapt_config_check, named by policy.format and by
 * quant_spec_parse, set by --set, printed and read back, in JSON, compared by name. */
static const char *formats_ini = "[policy]\n"
                                 "name = fixed\n"
                                 "format = myfp8\n"
                                 "\n"
                                 "[format myfp8]\n"
                                 "kind = float          ; float | fixed\n"
                                 "exp_bits = 4\n"
                                 "man_bits = 3\n"
                                 "bias = 7\n"
                                 "subnormals = true\n"
                                 "overflow = saturate\n"
                                 "nan = fn\n"
                                 "\n"
                                 "[format q8]\n"
                                 "kind = fixed\n"
                                 "wl = 8\n"
                                 "fl = 5\n"
                                 "[format _e2m1]\n"
                                 "kind = float\n"
                                 "exp_bits = 2\n"
                                 "man_bits = 1\n"
                                 "nan = none\n";

START_TEST(test_format_sections)
{
    struct adapt_config c, d;
    char path[256], out[256], diff[64], buf[QUANT_SPEC_STR_MAX];
    struct quant_spec s;
    adapt_config_init(&c);
    write_file(path, sizeof path, "formats.ini", formats_ini);
    ck_assert_msg(adapt_config_load(&c, path) == ADAPT_OK, "%s", adapt_error_message());
    ck_assert_int_eq(c.formats.n, 3);
    const struct adapt_config_format *f = &c.formats.f[0];
    ck_assert_str_eq(f->head.name, "myfp8");
    ck_assert_int_eq(f->head.line, 5);
    ck_assert_int_eq(f->kind, ADAPT_CONFIG_FORMAT_FLOAT);
    ck_assert(f->exp_bits == 4 && f->man_bits == 3 && f->bias == 7 && f->subnormals);
    ck_assert_int_eq(f->nan, QUANT_NAN_FN);
    ck_assert_int_eq(f->head.set[1], 7); /* exp_bits, line 7 */
    ck_assert_str_eq(c.formats.f[1].head.name, "q8");
    ck_assert_int_eq(c.formats.f[1].head.set[7], 16); /* wl, line 16 */
    ck_assert_int_eq(quant_spec_parse("myfp8", &s), ADAPT_EINVAL); /* not registered by load */
    ck_assert_msg(adapt_config_check(&c) == ADAPT_OK, "%s", adapt_error_message());
    /* the canonical texts (quant.h), parsed back to the same spec */
    static const char *const canon[][2] = {
        {"myfp8", "float(4,3,nan=fn)"}, {"q8", "fixed(8,5)"}, {"_e2m1", "float(2,1,nan=none)"}};
    for (int i = 0; i < 3; i++) {
        struct quant_spec t;
        ck_assert_int_eq(quant_spec_parse(canon[i][0], &s), ADAPT_OK);
        ck_assert_str_eq(quant_spec_str(&s, buf, sizeof buf), canon[i][1]);
        ck_assert_int_eq(quant_spec_parse(buf, &t), ADAPT_OK);
        ck_assert_str_eq(quant_spec_str(&t, out, sizeof out), canon[i][1]);
        ck_assert_int_eq(adapt_config_format_spec(&c, &c.formats.f[i], &t), ADAPT_OK);
        ck_assert_str_eq(quant_spec_str(&t, out, sizeof out), canon[i][1]);
    }
    /* --set changes a key of a section and makes a new one */
    ck_assert_int_eq(adapt_config_set(&c, "format.myfp8.bias=8"), ADAPT_OK);
    ck_assert_int_eq(c.formats.f[0].bias, 8);
    ck_assert_int_eq(c.formats.f[0].head.set[3], -1);
    ck_assert_int_eq(adapt_config_set(&c, "format.q12.kind=fixed"), ADAPT_OK);
    ck_assert_int_eq(adapt_config_set(&c, " format . q12 . wl = 12"), ADAPT_OK);
    ck_assert_int_eq(adapt_config_set(&c, "format.q12.fl=6"), ADAPT_OK);
    ck_assert_int_eq(c.formats.n, 4);
    ck_assert_int_eq(c.formats.f[3].head.line, 0);
    ck_assert_int_eq(c.n_overrides, 4);
    ck_assert_int_eq(adapt_config_set(&c, "policy.format=q12"), ADAPT_OK);
    ck_assert_msg(adapt_config_check(&c) == ADAPT_OK, "%s", adapt_error_message());
    ck_assert_int_eq(quant_spec_parse("myfp8", &s), ADAPT_OK); /* redefined by the check */
    ck_assert_str_eq(quant_spec_str(&s, buf, sizeof buf), "float(4,3,bias=8,nan=fn)");
    ck_assert_int_eq(quant_spec_parse("q12", &s), ADAPT_OK);
    ck_assert_str_eq(quant_spec_str(&s, buf, sizeof buf), "fixed(12,6)");
    struct adapt_config before = c;
    static const char *const bad[][2] = {
        {"format.q12=1", "expected format.NAME.KEY=value"},
        {"format.q-1.kind=fixed", "a letter or '_'"},
        {"format.q12.size=3", "unknown key format.q12.size"},
        {"format.q12.wl=33", "format.q12.wl = \"33\": out of range"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_int_eq(adapt_config_set(&c, bad[i][0]), ADAPT_EINVAL);
        ck_assert_msg_has(bad[i][1]);
        ck_assert(adapt_config_equal(&c, &before, NULL, 0));
    }

    /* printed (the keys each section set), read back equal; with help, the resolved texts */
    for (unsigned flags = 0; flags <= ADAPT_CONFIG_PRINT_HELP; flags++) {
        print_and_reload(&c, &d, flags);
        ck_assert_msg(adapt_config_check(&d) == ADAPT_OK, "%s", adapt_error_message());
    }
    char *text = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&text, &len);
    ck_assert_int_eq(adapt_config_print(&c, fp, ADAPT_CONFIG_PRINT_HELP), ADAPT_OK);
    fclose(fp);
    ck_assert_ptr_nonnull(strstr(text, "# format myfp8 = float(4,3,bias=8,nan=fn)\n"));
    ck_assert_ptr_nonnull(strstr(text, "# format q12 = fixed(12,6)\n"));
    ck_assert_ptr_nonnull(strstr(text, "\n[format q8]\n"));
    ck_assert_ptr_nonnull(strstr(text, "\nkind = fixed\n# fixed: word length; required (an "
                                       "integer in [1, 32])\nwl = 8\n"));
    ck_assert_ptr_null(strstr(text, "\n[format q8]\n# float (sign, exponent, mantissa) or fixed "
                                    "(two's complement <WL,FL>); required (one of float, fixed)"
                                    "\nkind = fixed\n# float: exponent bits"));
    free(text);

    /* JSON: {"format": {NAME: {the keys set}}} */
    json_t *j = adapt_config_to_json(&c);
    ck_assert_int_eq(json_object_size(j), 11); /* the sections of test_json, and format */
    char *js = json_dumps(json_object_get(json_object_get(j, "format"), "q8"), JSON_COMPACT);
    ck_assert_str_eq(js, "{\"kind\":\"fixed\",\"wl\":8,\"fl\":5}");
    free(js);
    js = json_dumps(json_object_get(json_object_get(j, "format"), "myfp8"), JSON_COMPACT);
    ck_assert_str_eq(js, "{\"kind\":\"float\",\"exp_bits\":4,\"man_bits\":3,\"bias\":8,\"nan\":"
                         "\"fn\",\"subnormals\":true,\"overflow\":\"saturate\"}");
    free(js);
    json_decref(j);

    /* equality: by name whatever the order; a key set to its default differs from unset */
    d = c;
    d.formats.f[0] = c.formats.f[1];
    d.formats.f[1] = c.formats.f[0];
    ck_assert(adapt_config_equal(&c, &d, NULL, 0));
    d.formats.f[1].head.set[4] = 0; /* myfp8.nan unset */
    ck_assert(!adapt_config_equal(&c, &d, diff, sizeof diff));
    ck_assert_str_eq(diff, "format.myfp8.nan");
    d = c;
    d.formats.n = 3;
    ck_assert(!adapt_config_equal(&c, &d, diff, sizeof diff));
    ck_assert_str_eq(diff, "format.q12");
    d = c;
    d.formats.f[2].head.name[1] = 'x';
    ck_assert(!adapt_config_equal(&c, &d, diff, sizeof diff));
    ck_assert_str_eq(diff, "format._e2m1");
}
END_TEST

void test_config_add_formats(TCase *tc)
{
    tcase_add_test(tc, test_format_sections);
    tcase_add_test(tc, test_no_int_bits);
}
