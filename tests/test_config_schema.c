/* tests/test_config_schema.c: the schema engine under src/config on tables of its own, part
 * of tests/test_config (see the tables' comments). */
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

/* The schema engine on a small table of its own, unrelated to adapt's keys: defaults, a
 * file with line numbers, an assignment with its own source name, an enum whose values
 * are listed out of value order and one value without a name, errors, printing read back,
 * JSON and equality. */
struct toy {
    int count;
    double ratio;
    bool loud;
    char name[8];
    int colour; /* 0 = (no name), 1 = red, 2 = blue; listed blue, red */
    struct adapt_schema_ints steps;
    struct adapt_schema_pairs sizes;
    int64_t big;
};
static const char *const toy_colours[] = {NULL, "red", "blue"};
static const int toy_colour_order[] = {2, 1, 0};
static const struct adapt_schema_enum toy_colour = {toy_colours, 3, toy_colour_order};
static const char *const toy_labels[] = {"W", "H"};
#define TOY(f) ADAPT_SCHEMA_FIELD(struct toy, f)
static const struct adapt_schema_key toy_keys[] = {
    {"a", "count", ADAPT_SCHEMA_INT, TOY(count), "3", "[1, 10]", .help = "how many"},
    {"a", "ratio", ADAPT_SCHEMA_DOUBLE, TOY(ratio), "0.5", "(0, 1]", .help = "share"},
    {"a", "loud", ADAPT_SCHEMA_BOOL, TOY(loud), "no", .help = "talk"},
    {"b", "name", ADAPT_SCHEMA_STRING, TOY(name), "toy", .help = "label"},
    {"b", "colour", ADAPT_SCHEMA_ENUM, TOY(colour), "red", .choices = &toy_colour,
     .help = "paint"},
    {"b", "steps", ADAPT_SCHEMA_INTS, TOY(steps), "1,2", "[0, 9]", .flags =
     ADAPT_SCHEMA_INCREASING, .help = "stairs"},
    {"b", "sizes", ADAPT_SCHEMA_PAIRS, TOY(sizes), "", "[1, 4]", "[5, 8]", .labels = toy_labels,
     .help = "boxes"},
    {"b", "big", ADAPT_SCHEMA_I64, TOY(big), "-1", "[-5, 5000000000]", .help = "wide"},
};
static const struct adapt_schema toy_schema = {toy_keys, 8, sizeof(struct toy), NULL, 0};

START_TEST(test_schema_engine)
{
    struct toy t, u, before;
    int lines[8];
    char path[256], out[256], diff[32];
    adapt_schema_init(&toy_schema, &t);
    ck_assert_int_eq(t.count, 3);
    ck_assert(t.ratio == 0.5 && !t.loud);
    ck_assert_str_eq(t.name, "toy");
    ck_assert_int_eq(t.colour, 1);
    ck_assert_int_eq(t.steps.n, 2);
    ck_assert_int_eq(t.steps.v[1], 2);
    ck_assert_int_eq(t.sizes.n, 0);
    ck_assert(t.big == -1);
    ck_assert_int_eq(adapt_schema_find(&toy_schema, "b", "colour"), 4);
    ck_assert_int_eq(adapt_schema_find(&toy_schema, "a", "colour"), -1);
    ck_assert_str_eq(adapt_schema_enum_str(&toy_schema, &t, "b", "colour"), "red");
    ck_assert_ptr_null(adapt_schema_enum_str(&toy_schema, &t, "a", "count"));

    write_file(path, sizeof path, "toy.ini",
               "; toy\n[b]\n  colour = blue\nsizes = 2:6, 4:8\n\n[a]\ncount: 7\n");
    ck_assert_int_eq(adapt_schema_load(&toy_schema, &t, path, lines), ADAPT_OK);
    ck_assert_int_eq(t.colour, 2);
    ck_assert_int_eq(t.sizes.n, 2);
    ck_assert_int_eq(t.sizes.b[1], 8);
    ck_assert_int_eq(t.count, 7);
    static const int want_lines[8] = {7, 0, 0, 0, 3, 0, 4, 0};
    for (int i = 0; i < 8; i++) ck_assert_int_eq(lines[i], want_lines[i]);

    int row = -1;
    ck_assert_int_eq(adapt_schema_set(&toy_schema, &t, "--opt", " b.big = 4000000000 ", &row),
                     ADAPT_OK);
    ck_assert_int_eq(row, 7);
    ck_assert(t.big == 4000000000LL);

    /* errors leave the struct unchanged and name the source, the key and what it takes */
    before = t;
    static const char *const bad[][2] = {
        {"b.colour=green",
         "--opt: b.colour = \"green\": value not allowed; expected one of blue, red"},
        {"b.colour=", "value not allowed"},
        {"b.steps=1,5,3", "entries not increasing (3 after 5)"},
        {"b.sizes=2:6,5:6", "pair 2 (5:6): entry 5 is out of range; expected a comma-separated "
                            "list of W:H pairs with W in [1, 4] and H in [5, 8]"},
        {"a.ratio=0", "out of range; expected a number in (0, 1]"},
        {"b.name=toolonger", "longer than 7 characters"},
        {"c.x=1", "--opt: unknown section [c] (sections: a, b)"},
        {"a.size=1", "unknown key a.size (keys of [a]: count, ratio, loud)"},
        {"a.count", "--opt \"a.count\": expected section.key=value"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_int_eq(adapt_schema_set(&toy_schema, &t, "--opt", bad[i][0], &row),
                         ADAPT_EINVAL);
        ck_assert_msg_has(bad[i][1]);
        ck_assert(adapt_schema_equal(&toy_schema, &t, &before, NULL, 0));
    }
    write_file(path, sizeof path, "bad.ini", "[a]\ncount = 2\n[z]\n");
    ck_assert_int_eq(adapt_schema_load(&toy_schema, &t, path, lines), ADAPT_EINVAL);
    ck_assert_msg_has("bad.ini:3: unknown section [z] (sections: a, b)");
    ck_assert(adapt_schema_equal(&toy_schema, &t, &before, NULL, 0));

    /* printed with help, read back equal */
    snprintf(out, sizeof out, "%s/toy-printed.ini", tmpdir);
    FILE *f = fopen(out, "w");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(adapt_schema_print(&toy_schema, &t, f, ADAPT_SCHEMA_PRINT_HELP), ADAPT_OK);
    fclose(f);
    adapt_schema_init(&toy_schema, &u);
    ck_assert(!adapt_schema_equal(&toy_schema, &t, &u, diff, sizeof diff));
    ck_assert_str_eq(diff, "a.count");
    ck_assert_int_eq(adapt_schema_load(&toy_schema, &u, out, lines), ADAPT_OK);
    ck_assert_msg(adapt_schema_equal(&toy_schema, &t, &u, diff, sizeof diff), "differs at %s",
                  diff);
    char *buf = NULL;
    size_t len = 0;
    f = open_memstream(&buf, &len);
    ck_assert_int_eq(adapt_schema_print(&toy_schema, &t, f, ADAPT_SCHEMA_PRINT_HELP), ADAPT_OK);
    fclose(f);
    ck_assert_ptr_nonnull(strstr(buf, "\n[b]\n# label (a string of at most 7 characters; "
                                      "default toy)\nname = \"toy\"\n"));
    ck_assert_ptr_nonnull(strstr(buf, "# paint (one of blue, red; default red)\ncolour = blue\n"));
    ck_assert_ptr_nonnull(strstr(buf, "# boxes (a comma-separated list of W:H pairs with W in "
                                      "[1, 4] and H in [5, 8]; default empty)\nsizes = 2:6,4:8\n"));
    free(buf);

    json_t *j = adapt_schema_to_json(&toy_schema, &t);
    ck_assert_ptr_nonnull(j);
    char *js = json_dumps(j, JSON_COMPACT);
    ck_assert_str_eq(js, "{\"a\":{\"count\":7,\"ratio\":0.5,\"loud\":false},\"b\":{\"name\":"
                         "\"toy\",\"colour\":\"blue\",\"steps\":[1,2],\"sizes\":[[2,6],[4,8]],"
                         "\"big\":4000000000}}");
    free(js);
    json_decref(j);
}
END_TEST

/* Named sections in the engine, on a toy table: "[box NAME]" items with two keys. */
struct toy_box {
    struct adapt_schema_item head;
    int size;
    char label[8];
};
struct toy2 {
    int count;
    int nbox;
    struct toy_box box[2];
};
#define TOY2(f) ADAPT_SCHEMA_FIELD(struct toy2, f)
#define BOX(f) ADAPT_SCHEMA_FIELD(struct toy_box, f)
static const struct adapt_schema_key toy2_keys[] = {
    {"a", "count", ADAPT_SCHEMA_INT, TOY2(count), "3", "[1, 10]", .help = "how many"}};
static const struct adapt_schema_key box_keys[] = {
    {"box", "size", ADAPT_SCHEMA_INT, BOX(size), "1", "[1, 9]", .help = "edge"},
    {"box", "label", ADAPT_SCHEMA_STRING, BOX(label), "", .help = "tag"}};
static const struct adapt_schema_named toy2_named[] = {
    {"box", box_keys, 2, sizeof(struct toy_box), offsetof(struct toy2, box),
     offsetof(struct toy2, nbox), 2}};
static const struct adapt_schema toy2_schema = {toy2_keys, 1, sizeof(struct toy2), toy2_named, 1};

START_TEST(test_schema_named)
{
    struct toy2 t, u;
    int lines[1], row = 0;
    char path[256], diff[32];
    adapt_schema_init(&toy2_schema, &t);
    ck_assert_int_eq(t.nbox, 0);
    /* an assignment makes an item; a file's section then defines it whole */
    ck_assert_int_eq(adapt_schema_set(&toy2_schema, &t, "--opt", "box.b1.label=old", &row),
                     ADAPT_OK);
    ck_assert_int_eq(row, -1);
    ck_assert_int_eq(t.nbox, 1);
    ck_assert_int_eq(t.box[0].head.line, 0);
    ck_assert_int_eq(t.box[0].head.set[1], -1);
    write_file(path, sizeof path, "boxes.ini",
               "[box b2]\nsize = 4\n[a]\ncount = 2\n[ box   b1 ]\nsize: 3\n");
    ck_assert_msg(adapt_schema_load(&toy2_schema, &t, path, lines) == ADAPT_OK, "%s",
                  adapt_error_message());
    ck_assert_int_eq(t.nbox, 2);
    ck_assert_str_eq(t.box[0].head.name, "b1");
    ck_assert_int_eq(t.box[0].head.line, 5);
    ck_assert_int_eq(t.box[0].size, 3);
    ck_assert_str_eq(t.box[0].label, ""); /* reset by the section */
    ck_assert_int_eq(t.box[0].head.set[1], 0);
    ck_assert_int_eq(t.box[1].head.set[0], 2);
    ck_assert_int_eq(lines[0], 4);
    /* errors: a third item, a duplicate, an unknown key; the struct unchanged */
    u = t;
    write_file(path, sizeof path, "more.ini", "[box b3]\n");
    ck_assert_int_eq(adapt_schema_load(&toy2_schema, &t, path, lines), ADAPT_EINVAL);
    ck_assert_msg_has("more.ini:1: [box b3]: more than 2 [box NAME] sections");
    ck_assert_int_eq(adapt_schema_set(&toy2_schema, &t, "--opt", "box.b3.size=2", &row),
                     ADAPT_EINVAL);
    ck_assert_msg_has("more than 2");
    ck_assert_int_eq(adapt_schema_set(&toy2_schema, &t, "--opt", "box.b1.depth=2", &row),
                     ADAPT_EINVAL);
    ck_assert_msg_has("unknown key box.b1.depth (keys of [box NAME]: size, label)");
    ck_assert(adapt_schema_equal(&toy2_schema, &t, &u, NULL, 0));
    /* printed and read back (keys set only), JSON */
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ck_assert_int_eq(adapt_schema_print(&toy2_schema, &t, f, 0), ADAPT_OK);
    fclose(f);
    ck_assert_str_eq(buf, "[a]\ncount = 2\n\n[box b1]\nsize = 3\n\n[box b2]\nsize = 4\n");
    write_file(path, sizeof path, "back.ini", buf);
    free(buf);
    adapt_schema_init(&toy2_schema, &u);
    ck_assert_int_eq(adapt_schema_load(&toy2_schema, &u, path, lines), ADAPT_OK);
    ck_assert_msg(adapt_schema_equal(&toy2_schema, &t, &u, diff, sizeof diff), "%s", diff);
    u.box[1].head.set[1] = 9; /* b2.label now counts as set, to its default "" */
    ck_assert(!adapt_schema_equal(&toy2_schema, &t, &u, diff, sizeof diff));
    ck_assert_str_eq(diff, "box.b2.label");
    json_t *j = adapt_schema_to_json(&toy2_schema, &t);
    char *js = json_dumps(j, JSON_COMPACT);
    ck_assert_str_eq(js, "{\"a\":{\"count\":2},\"box\":{\"b1\":{\"size\":3},\"b2\":{\"size\":4}}}");
    free(js);
    json_decref(j);
}
END_TEST

void test_config_add_schema(TCase *tc)
{
    tcase_add_test(tc, test_schema_engine);
    tcase_add_test(tc, test_schema_named);
}
