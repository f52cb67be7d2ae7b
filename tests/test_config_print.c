/* tests/test_config_print.c: a configuration written out, part of tests/test_config: printed
 * and read back equal, the printed format, JSON, and the adapt-sim.ini(5) man page. */
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

/* tests/test_config.h */
void print_and_reload(const struct adapt_config *c, struct adapt_config *d, unsigned flags)
{
    char out[256], diff[64] = "?";
    snprintf(out, sizeof out, "%s/printed%u.ini", tmpdir, flags);
    FILE *f = fopen(out, "w");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(adapt_config_print(c, f, flags), ADAPT_OK);
    fclose(f);
    adapt_config_init(d);
    ck_assert_msg(adapt_config_load(d, out) == ADAPT_OK, "%s", adapt_error_message());
    ck_assert_msg(adapt_config_equal(c, d, diff, sizeof diff), "differs at %s", diff);
}

/* Print, load back, compare: every value survives (doubles are printed to round-trip). */
START_TEST(test_print_roundtrip)
{
    struct adapt_config c, d, e;
    char path[256], out[256];
    adapt_config_init(&c);
    write_file(path, sizeof path, "full.ini", full_ini);
    ck_assert_int_eq(adapt_config_load(&c, path), ADAPT_OK);
    ck_assert_int_eq(adapt_config_set(&c, "optim.lr=0.1"), ADAPT_OK); /* not exact in binary */
    ck_assert_int_eq(adapt_config_set(&c, "model.init_gain=0.30000000000000004"), ADAPT_OK);
    ck_assert_int_eq(adapt_config_set(&c, "run.seed=9223372036854775807"), ADAPT_OK);
    ck_assert_int_eq(adapt_config_set(&c, "run.out=a;b"), ADAPT_OK);

    for (unsigned flags = 0; flags <= ADAPT_CONFIG_PRINT_HELP; flags++) {
        print_and_reload(&c, &d, flags);
        ck_assert(d.model.init_gain == 0.30000000000000004);
    }
    /* defaults too */
    adapt_config_init(&c);
    snprintf(out, sizeof out, "%s/defaults.ini", tmpdir);
    FILE *f = fopen(out, "w");
    ck_assert_int_eq(adapt_config_print(&c, f, ADAPT_CONFIG_PRINT_HELP), ADAPT_OK);
    fclose(f);
    adapt_config_init(&e);
    ck_assert_int_eq(adapt_config_set(&e, "train.epochs=16"), ADAPT_OK);
    ck_assert_int_eq(adapt_config_load(&e, out), ADAPT_OK);
    ck_assert(adapt_config_equal(&c, &e, NULL, 0));

    /* equal() reports the first differing key */
    char diff[64];
    e.quantization.buffer_bits = 5;
    ck_assert(!adapt_config_equal(&c, &e, diff, sizeof diff));
    ck_assert_str_eq(diff, "quantization.buffer_bits");
}
END_TEST

START_TEST(test_print_format)
{
    struct adapt_config c;
    adapt_config_init(&c);
    ck_assert_int_eq(adapt_config_set(&c, "policy.per_unit=16:8,12:6"), ADAPT_OK);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ck_assert_int_eq(adapt_config_print(&c, f, ADAPT_CONFIG_PRINT_HELP), ADAPT_OK);
    fclose(f);
    ck_assert_ptr_nonnull(strstr(buf, "# --set policy.per_unit=16:8,12:6\n"));
    ck_assert_ptr_nonnull(strstr(buf, "\n[run]\n"));
    ck_assert_ptr_nonnull(strstr(buf, "\nseed = 1\n"));
    ck_assert_ptr_nonnull(strstr(buf, "\nout = \"\"\n"));
    ck_assert_ptr_nonnull(strstr(buf, "\nlr = 0.01\n"));
    ck_assert_ptr_nonnull(strstr(buf, "\nthreshold = 0.0001\n"));
    ck_assert_ptr_nonnull(strstr(buf, "\nmuppet_levels = 8,12,14,16\n"));
    ck_assert_ptr_nonnull(strstr(buf, "\nper_unit = 16:8,12:6\n"));
    ck_assert_ptr_nonnull(strstr(buf, "\nmilestones = \n"));
    ck_assert_ptr_nonnull(strstr(buf, "\nnesterov = false\n"));
    ck_assert_ptr_nonnull(strstr(buf, "# learning rate (a number in (0, 100]; default 0.01)\n"));
    ck_assert_ptr_nonnull(strstr(buf, "\n[quantization]\n"));
    free(buf);
}
END_TEST

START_TEST(test_json)
{
    struct adapt_config c;
    adapt_config_init(&c);
    ck_assert_int_eq(adapt_config_set(&c, "policy.muppet_schedule=8:16,32:45"), ADAPT_OK);
    ck_assert_int_eq(adapt_config_set(&c, "run.seed=2385"), ADAPT_OK);
    ck_assert_int_eq(adapt_config_set(&c, "run.name=fixed8"), ADAPT_OK);
    ck_assert_str_eq(c.run.name, "fixed8");
    json_t *j = adapt_config_to_json(&c);
    ck_assert_ptr_nonnull(j);
    /* the run's name goes into the trace header's config like every key */
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(j, "run"), "name")),
                     "fixed8");
    /* run data model train optim schedule policy quantization reference roles */
    ck_assert_int_eq(json_object_size(j), 10);
    ck_assert_int_eq(json_object_size(json_object_get(j, "reference")), ADAPT_REF_N);
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(j, "run"), "seed")), 2385);
    json_t *optim = json_object_get(j, "optim");
    ck_assert(json_is_real(json_object_get(optim, "lr")));
    ck_assert(json_real_value(json_object_get(optim, "lr")) == 0.01);
    ck_assert(json_is_false(json_object_get(optim, "nesterov")));
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(j, "data"), "dataset")),
                     "fashion-mnist");
    json_t *levels = json_object_get(json_object_get(j, "policy"), "muppet_levels");
    ck_assert_int_eq(json_array_size(levels), 4);
    ck_assert_int_eq(json_integer_value(json_array_get(levels, 3)), 16);
    json_t *sched = json_object_get(json_object_get(j, "policy"), "muppet_schedule");
    ck_assert_int_eq(json_array_size(sched), 2);
    ck_assert_int_eq(json_integer_value(json_array_get(json_array_get(sched, 1), 0)), 32);
    ck_assert_int_eq(json_integer_value(json_array_get(json_array_get(sched, 1), 1)), 45);
    /* every [quantization] key of the schema table (29) */
    ck_assert_int_eq(json_object_size(json_object_get(j, "quantization")), 29);
    json_t *q = json_object_get(j, "quantization");
    ck_assert_str_eq(json_string_value(json_object_get(q, "precision_propagation")), "unit");
    ck_assert_str_eq(json_string_value(json_object_get(q, "graph_preset")), "default");
    ck_assert_str_eq(json_string_value(json_object_get(q, "graph_float")), "");
    char *s = json_dumps(json_object_get(j, "schedule"), JSON_COMPACT);
    ck_assert_str_eq(s, "{\"name\":\"constant\",\"milestones\":[],\"gamma\":0.10000000000000001,"
                        "\"factor\":0.10000000000000001,\"patience\":10,\"threshold\":0.0001,"
                        "\"min_lr\":0.0,\"cooldown\":0}");
    free(s);
    json_decref(j);
}
END_TEST

/* adapt-sim.ini(5): the page frame, a heading per section and a paragraph per key, with the
 * key's default; text is escaped for roff */
START_TEST(test_print_man)
{
    char path[256];
    tu_path(path, sizeof path, tmpdir, "a.5");
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(adapt_config_print_man(f, "9.9"), ADAPT_OK);
    fclose(f);
    char *text = (char *)tu_read_file(path, NULL);
    ck_assert_ptr_nonnull(strstr(text, ".TH ADAPT\\-SIM.INI 5 \"\" \"adapt\\-sim 9.9\""));
    ck_assert_ptr_nonnull(strstr(text, ".SH KEYS\n.SS \"[run]\"\n.TP\n.B seed\n"));
    ck_assert_ptr_nonnull(strstr(text, ".SS \"[train]\"\n"));
    ck_assert_ptr_nonnull(strstr(text, ".TP\n.B epochs\n"));
    ck_assert_ptr_nonnull(strstr(text, ".SS \"[format NAME]\"\n"));
    ck_assert_ptr_nonnull(strstr(text, "default \\fBfashion\\-mnist\\fR."));
    /* no line starts with a character roff would take for a request, bar the requests */
    for (const char *l = text; *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : l + strlen(l))
        if (*l == '\'') ck_abort_msg("a line starts with a quote: %.60s", l);
    free(text);
    /* the escaping on its own */
    tu_path(path, sizeof path, tmpdir, "t.roff");
    f = fopen(path, "w");
    adapt_schema_roff_text(f, ".a-b\\c\n'd");
    fclose(f);
    text = (char *)tu_read_file(path, NULL);
    ck_assert_str_eq(text, "\\&.a\\-b\\ec\n\\&'d");
    free(text);
}
END_TEST

void test_config_add_print(TCase *tc)
{
    tcase_add_test(tc, test_print_roundtrip);
    tcase_add_test(tc, test_print_format);
    tcase_add_test(tc, test_json);
    tcase_add_test(tc, test_print_man);
}
