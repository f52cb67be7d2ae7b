/* tests/test_config_errors.c: configurations refused, part of tests/test_config: a table of
 * malformed files (status, and a message naming the file, the line and the key), files that
 * cannot be read, and [format NAME] sections refused when they are resolved. */
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

/* One malformed file: status, and the message must name the file, the line and the key. */
struct bad_case {
    const char *text;
    enum adapt_status st;
    const char *line;     /* ":N:" */
    const char *needle1;  /* usually section.key */
    const char *needle2;  /* what was expected or what is wrong */
};

static const struct bad_case bad_cases[] = {
    {"[run]\nseed = 3\n[foo]\nx = 1\n", ADAPT_EINVAL, ":3:", "unknown section [foo]",
     "quantization"},
    {"[run]\nseed = 3\n[bar]\n", ADAPT_EINVAL, ":3:", "unknown section [bar]", "sections:"},
    {"[run]\n\nsed = 3\n", ADAPT_EINVAL, ":3:", "run.sed", "keys of [run]: seed, out"},
    {"[run]\nSeed = 3\n", ADAPT_EINVAL, ":2:", "unknown key run.Seed", "keys of [run]"},
    {"[RUN]\nseed = 3\n", ADAPT_EINVAL, ":1:", "unknown section [RUN]", "sections: run"},
    {"[run]\nseed = 3\n# again\nseed = 4\n", ADAPT_EINVAL, ":4:", "duplicate key run.seed",
     "first set on line 2"},
    {"[train]\nepochs = abc\n", ADAPT_EINVAL, ":2:", "train.epochs",
     "not an integer; expected an integer in [1, 100000]"},
    {"[train]\nepochs = 2.5\n", ADAPT_EINVAL, ":2:", "train.epochs", "not an integer"},
    {"[run]\nthreads = 1025\n", ADAPT_EINVAL, ":2:", "run.threads",
     "out of range; expected an integer in [0, 1024]"},
    {"[run]\nseed = -1\n", ADAPT_EINVAL, ":2:", "run.seed", "out of range"},
    {"[run]\nseed = 9223372036854775808\n", ADAPT_EINVAL, ":2:", "run.seed", "out of range"},
    {"[optim]\nmomentum = 1\n", ADAPT_EINVAL, ":2:", "optim.momentum", "a number in [0, 1)"},
    {"[optim]\nlr = 0\n", ADAPT_EINVAL, ":2:", "optim.lr", "a number in (0, 100]"},
    {"[optim]\nlr = fast\n", ADAPT_EINVAL, ":2:", "optim.lr", "not a number"},
    {"[optim]\nlr = nan\n", ADAPT_EINVAL, ":2:", "optim.lr", "out of range"},
    {"[optim]\nnesterov = maybe\n", ADAPT_EINVAL, ":2:", "optim.nesterov", "true or false"},
    {"[data]\ndataset = imagenet\n", ADAPT_EINVAL, ":2:", "data.dataset",
     "one of mnist, fashion-mnist, emnist-balanced, cifar10, cifar100"},
    {"[model]\nname = a123456789b123456789c123456789d123456789e123456789f123456789g1234\n",
     ADAPT_EINVAL, ":2:", "model.name", "at most 63 characters"},
    {"[schedule]\nmilestones = 5,5,9\n", ADAPT_EINVAL, ":2:", "schedule.milestones",
     "not increasing"},
    {"[schedule]\nmilestones = 5,,9\n", ADAPT_EINVAL, ":2:", "schedule.milestones",
     "entry 2 is empty"},
    {"[schedule]\nmilestones = 5,9,\n", ADAPT_EINVAL, ":2:", "schedule.milestones",
     "entry 3 is empty"},
    {"[policy]\nmuppet_levels = 1,8\n", ADAPT_EINVAL, ":2:", "policy.muppet_levels",
     "out of range"},
    {"[policy]\nper_unit = 16:8,33:4\n", ADAPT_EINVAL, ":2:", "policy.per_unit", "pair 2 (33:4)"},
    {"[policy]\nper_unit = 16-8\n", ADAPT_EINVAL, ":2:", "policy.per_unit", "is not WL:FL"},
    {"[policy]\nmuppet_schedule = 8:0\n", ADAPT_EINVAL, ":2:", "policy.muppet_schedule",
     "EPOCHS in [1, 100000]"},
    {"[policy]\nformat = \"fixed\n", ADAPT_EINVAL, ":2:", "policy.format", "unterminated quote"},
    {"[policy]\nformat = fi\"xed\n", ADAPT_EINVAL, ":2:", "policy.format", "contains a '\"'"},
    /* a trace and config.ini are UTF-8: Latin-1 "café" is refused at its line */
    {"[data]\npath = /d/caf\xe9\n", ADAPT_EINVAL, ":2:", "data.path", "byte 7 is not UTF-8"},
    {"seed = 1\n[run]\n", ADAPT_EINVAL, ":1:", "\"seed\"", "before any [section]"},
    {"[run]\nseed 5\n", ADAPT_EFORMAT, ":2:", "malformed line \"seed 5\"", "key = value"},
    {"[run\nseed = 5\n", ADAPT_EFORMAT, ":1:", "malformed line \"[run\"", "[section]"},
    {"[run]\nseed = 1\nthreads = 0\nthreads 3\nseed = 2\n", ADAPT_EFORMAT, ":4:", "malformed line",
     "threads 3"},
    {"[run]\nseed = 1\n\nlog_every = 0\n", ADAPT_EINVAL, ":4:", "run.log_every", "[1, 1000000]"},
    /* [format NAME] sections: what the file itself gets wrong */
    {"[format f8]\nkind = float\nexp_bits = 4\nmantissa = 3\n", ADAPT_EINVAL, ":4:",
     "unknown key format.f8.mantissa", "keys of [format NAME]: kind, exp_bits, man_bits"},
    {"[format f8]\nkind = float\nnan = ocp\n", ADAPT_EINVAL, ":3:", "format.f8.nan = \"ocp\"",
     "expected one of ieee, fn, none"},
    {"[format f8]\nkind = posit\n", ADAPT_EINVAL, ":2:", "format.f8.kind", "one of float, fixed"},
    {"[format f8]\nexp_bits = 9\n", ADAPT_EINVAL, ":2:", "format.f8.exp_bits",
     "an integer in [2, 8]"},
    {"[format f8]\nkind = float\n[policy]\nname = fixed\n[format f8]\nkind = fixed\n",
     ADAPT_EINVAL, ":5:", "duplicate section [format f8]", "first on line 1"},
    {"[format f8]\nkind = float\nkind = fixed\n", ADAPT_EINVAL, ":3:",
     "duplicate key format.f8.kind", "first set on line 2"},
    {"[run]\n[format]\nkind = float\n", ADAPT_EINVAL, ":2:", "section [format] needs one name",
     "[format NAME]"},
    {"[format 8bit]\n", ADAPT_EINVAL, ":1:", "[format 8bit]", "a letter or '_'"},
    {"[format a b]\n", ADAPT_EINVAL, ":1:", "[format a b]", "needs one name"},
    {"[formats f8]\n", ADAPT_EINVAL, ":1:", "unknown section [formats f8]", "format NAME"},
    /* '#' after a value is part of the value (inih's inline comments start with ';') */
    {"[train]\nepochs = 2 # two\n", ADAPT_EINVAL, ":2:", "train.epochs = \"2 # two\": not an "
     "integer", "inline comments start with ';'"},
    {"[optim]\nlr = 0.1\t# lower later\n", ADAPT_EINVAL, ":2:", "not a number",
     "inline comments start with ';'"},
    {"[format f8]\nexp_bits = 4 # four\n", ADAPT_EINVAL, ":2:", "format.f8.exp_bits",
     "inline comments start with ';'"},
};

START_TEST(test_file_errors)
{
    const struct bad_case *b = &bad_cases[_i];
    struct adapt_config c, def;
    adapt_config_init(&c);
    adapt_config_init(&def);
    adapt_error_clear();
    enum adapt_status st = load_text(&c, b->text);
    ck_assert_msg(st == b->st, "case %d: status %d, expected %d (%s)", _i, st, b->st,
                  adapt_error_message());
    ck_assert_msg_has(tmpdir); /* the file name */
    ck_assert_msg_has("t.ini");
    ck_assert_msg_has(b->line);
    ck_assert_msg_has(b->needle1);
    ck_assert_msg_has(b->needle2);
    /* nothing applied, not even the valid lines before the error */
    ck_assert(adapt_config_equal(&c, &def, NULL, 0));
    ck_assert_str_eq(c.file, "");
}
END_TEST

START_TEST(test_file_access_errors)
{
    struct adapt_config c;
    char path[256];
    adapt_config_init(&c);

    tu_path(path, sizeof path, tmpdir, "missing.ini");
    ck_assert_int_eq(adapt_config_load(&c, path), ADAPT_ENOENT);
    ck_assert_msg_has("missing.ini");
    ck_assert_msg_has("No such file");

    /* a directory opens but cannot be read as a file */
    ck_assert_int_eq(adapt_config_load(&c, tmpdir), ADAPT_EIO);
    ck_assert_msg_has(tmpdir);
    ck_assert_msg_has("directory");

    /* a NUL byte on line 2 */
    tu_write_file(tu_path(path, sizeof path, tmpdir, "bin.ini"), "[run]\nse\0ed = 1\n", 16);
    ck_assert_int_eq(adapt_config_load(&c, path), ADAPT_EFORMAT);
    ck_assert_msg_has("bin.ini:2:");
    ck_assert_msg_has("NUL");

    /* a line longer than inih's buffer (200 bytes in Debian's build) */
    char text[512];
    snprintf(text, sizeof text, "[run]\nseed = 1\nout = %0300d\n", 7);
    ck_assert_int_eq(load_text(&c, text), ADAPT_EFORMAT);
    ck_assert_msg_has("t.ini:3:");
    ck_assert_msg_has("longer than");

    /* a long comment is fine: comments never reach the value parser */
    snprintf(text, sizeof text, "[run]\n# %0300d\nseed = 2385\n", 7);
    ck_assert_int_eq(load_text(&c, text), ADAPT_OK);
    ck_assert_int_eq(c.run.seed, 2385);
    adapt_config_init(&c);

    /* an empty file and a comment-only file are valid and change nothing */
    ck_assert_int_eq(load_text(&c, ""), ADAPT_OK);
    struct adapt_config d;
    adapt_config_init(&d);
    ck_assert_int_eq(load_text(&d, "; nothing\n# here\n\n"), ADAPT_OK);
    ck_assert(adapt_config_equal(&c, &d, NULL, 0));
}
END_TEST

/* Errors found when the sections are resolved and registered (adapt_config_check): each names
 * the file and line of the section, or of the key at fault. */
static const struct bad_case bad_formats[] = {
    {"[format f8]\nkind = float\nexp_bits = 4\n", ADAPT_EINVAL, ":1:",
     "[format f8] (kind = float) needs exp_bits and man_bits", "man_bits is not set"},
    {"[format f8]\nexp_bits = 4\nman_bits = 3\n", ADAPT_EINVAL, ":1:", "[format f8]",
     "needs kind = float or fixed"},
    {"[format q]\nkind = fixed\nfl = 3\n", ADAPT_EINVAL, ":1:", "needs wl and fl",
     "wl is not set"},
    {"[format e4m3]\nkind = float\nexp_bits = 4\nman_bits = 3\n", ADAPT_EINVAL, ":1:",
     "[format e4m3]", "taken by a built-in format"},
    {"[format float32]\nkind = fixed\nwl = 8\nfl = 4\n", ADAPT_EINVAL, ":1:", "[format float32]",
     "taken by a built-in format"},
    {"[format f8]\nkind = float\nexp_bits = 4\nman_bits = 3\n\nbias = -200\n", ADAPT_ERANGE,
     ":6:", "[format f8]: quant float(4,3) with bias -200",
     "a bias in -113..124 or 127 fits"},
    {"[format f8]\nkind = float\nexp_bits = 8\nman_bits = 7\nnan = fn\n", ADAPT_ERANGE, ":1:",
     "[format f8]", "no bias at all"},
    {"[format f8]\nkind = float\nexp_bits = 2\nman_bits = 1\nnan = none\noverflow = inf\n",
     ADAPT_EINVAL, ":6:", "[format f8]", "every code is finite"},
    {"[format q]\nkind = fixed\nwl = 8\nfl = 4\nnan = fn\n", ADAPT_EINVAL, ":5:",
     "format.q.nan is a key of kind = float", "[format q] is kind = fixed"},
    {"[format f8]\nkind = float\nexp_bits = 4\nman_bits = 3\nfl = 4\n", ADAPT_EINVAL, ":5:",
     "format.f8.fl is a key of kind = fixed", "kind = float"},
    {"[policy]\nname = fixed\nformat = f9\n[format f8]\nkind = fixed\nwl = 8\nfl = 4\n",
     ADAPT_EINVAL, ":3:", "policy.format = f9", "unknown"},
};

START_TEST(test_format_errors)
{
    const struct bad_case *b = &bad_formats[_i];
    struct adapt_config c;
    adapt_config_init(&c);
    ck_assert_msg(load_text(&c, b->text) == ADAPT_OK, "case %d: %s", _i, adapt_error_message());
    adapt_error_clear();
    enum adapt_status st = adapt_config_check(&c);
    ck_assert_msg(st == b->st, "case %d: status %d, expected %d (%s)", _i, st, b->st,
                  adapt_error_message());
    ck_assert_msg_has("t.ini");
    ck_assert_msg_has(b->line);
    ck_assert_msg_has(b->needle1);
    ck_assert_msg_has(b->needle2);
}
END_TEST

void test_config_add_errors(TCase *tc)
{
    tcase_add_loop_test(tc, test_file_errors, 0, (int)(sizeof bad_cases / sizeof bad_cases[0]));
    tcase_add_test(tc, test_file_access_errors);
    tcase_add_loop_test(tc, test_format_errors, 0,
                        (int)(sizeof bad_formats / sizeof bad_formats[0]));
}
