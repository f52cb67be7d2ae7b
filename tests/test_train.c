/* tests/test_train.c: the adapt-train program end to end: bad input is
 * refused with clear messages (config, command line, data files, output
 * directory), short real runs are deterministic, --resume reproduces the
 * uninterrupted trace, checkpoints load back (--eval-only).
 *
 * Runs ./adapt-train from the build directory on small subsets of the real
 * Fashion-MNIST (Debian package dataset-fashion-mnist). Without it the tests
 * that need it return at once, so Check counts them as passed; each prints a
 * "SKIP <test>: ... is missing" line saying that its checks did nothing. */
#include <check.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/testutil.h"

#define FMNIST "/usr/share/datasets/fashion-mnist"

static char tmpdir[256];
static char out_buf[1 << 16];

/* Runs a shell command; returns its exit status and keeps stdout+stderr in out_buf. */
#define run(...) tu_run(out_buf, sizeof out_buf, __VA_ARGS__)

static void write_file(const char *name, const char *text)
{
    char path[512];
    tu_write_text(tu_path(path, sizeof path, tmpdir, name), text);
}

/* The last 3,000 bytes of out_buf, for failure messages (Check limits their length; a dry
 * run's output is longer). */
static const char *out_tail(void)
{
    size_t n = strlen(out_buf);
    return n > 3000 ? out_buf + n - 3000 : out_buf;
}

static void expect_fail(const char *what, int rc, const char *needle1, const char *needle2)
{
    if (rc == 0 || rc >= 128)
        ck_abort_msg("%s: exit status %d (expected a clean failure); output:\n%s", what, rc,
                     out_tail());
    if (!strstr(out_buf, needle1) || (needle2 && !strstr(out_buf, needle2)))
        ck_abort_msg("%s: message lacks '%s'%s%s; output:\n%s", what, needle1,
                     needle2 ? " / " : "", needle2 ? needle2 : "", out_tail());
}

/* 2,500 training images (and 500 for validation) in batches of 100; in quick mode (tu_quick)
 * 800 (and 200) in batches of 50 (16 steps), enough for AdaPT's push-downs to happen within the
 * 3 epochs. */
static const char *small_cfg_full =
    "[run]\nseed = 7\n[data]\ndataset = fashion-mnist\npath = " FMNIST "\n"
    "val_size = 500\ntrain_limit = 2500\ntest_limit = 1000\n"
    "[model]\nname = lenet5\n[train]\nepochs = 3\nbatch = 100\n[optim]\nlr = 0.05\nmomentum = "
    "0.9\n";
static const char *small_cfg_quick =
    "[run]\nseed = 7\n[data]\ndataset = fashion-mnist\npath = " FMNIST "\n"
    "val_size = 200\ntrain_limit = 800\ntest_limit = 300\n"
    "[model]\nname = lenet5\n[train]\nepochs = 3\nbatch = 50\n[optim]\nlr = 0.05\nmomentum = "
    "0.9\n";
#define small_cfg (tu_quick() ? small_cfg_quick : small_cfg_full)

static int have_fmnist(void) { return tu_have_data(FMNIST "/train-images-idx3-ubyte.gz"); }

static void setup(void) { tu_tmpdir_make(tmpdir, sizeof tmpdir, "train"); }

static void teardown(void) { tu_tmpdir_remove(tmpdir); }

START_TEST(test_cli_errors)
{
    int rc = run("./adapt-train");
    expect_fail("no --config", rc, "--config", NULL);
    rc = run("./adapt-train --config %s/nope.ini", tmpdir);
    expect_fail("missing config", rc, "nope.ini", NULL);
    write_file("unknown.ini", "[train]\nepochs = 2\nbatchsize = 3\n");
    rc = run("./adapt-train --config %s/unknown.ini --dry-run", tmpdir);
    expect_fail("unknown key", rc, "unknown.ini", "batchsize");
    expect_fail("unknown key line", rc, ":3", NULL);
    write_file("badval.ini", "[train]\nepochs = many\n");
    rc = run("./adapt-train --config %s/badval.ini --dry-run", tmpdir);
    expect_fail("bad value", rc, "train.epochs", "many");
    write_file("range.ini", "[optim]\nmomentum = 1.5\n");
    rc = run("./adapt-train --config %s/range.ini --dry-run", tmpdir);
    expect_fail("out of range", rc, "optim.momentum", NULL);
    write_file("malformed.ini", "[train\nepochs = 2\n");
    rc = run("./adapt-train --config %s/malformed.ini --dry-run", tmpdir);
    expect_fail("malformed", rc, "malformed.ini", NULL);
    write_file("ok.ini", small_cfg);
    rc = run("./adapt-train --config %s/ok.ini --set train.nope=1 --dry-run", tmpdir);
    expect_fail("bad --set", rc, "--set", "train.nope");
    rc = run("./adapt-train --config %s/ok.ini --frobnicate", tmpdir);
    expect_fail("unknown option", rc, "frobnicate", NULL);
    rc = run("./adapt-train --eval-only --config %s/ok.ini", tmpdir);
    expect_fail("eval-only without weights", rc, "--init-from", NULL);
}
END_TEST

/* A long --out (1150 characters) is used exactly as given, not cut to a
 * shorter path; one beyond the run's path limit is refused with exit status 1. */
START_TEST(test_long_out)
{
    if (!have_fmnist()) return;
    char dir[1400];
    int n = snprintf(dir, sizeof dir, "%s/", tmpdir);
    while (n < 1150) n += snprintf(dir + n, sizeof dir - n, "d123456789/");
    dir[n - 1] = '\0';
    write_file("ok.ini", small_cfg);
    int rc = run("./adapt-train --config %s/ok.ini --out %s --set train.epochs=1 "
                 "--set data.train_limit=600 --quiet", tmpdir, dir);
    ck_assert_msg(rc == 0, "long --out: exit %d: %s", rc, out_buf);
    char p[1500];
    snprintf(p, sizeof p, "%s/trace.jsonl", dir);
    ck_assert_msg(access(p, F_OK) == 0, "no trace in the --out directory");
    /* where a 1100-byte copy would have cut it */
    char cut[1100];
    memcpy(cut, dir, sizeof cut - 1);
    cut[sizeof cut - 1] = '\0';
    ck_assert_msg(access(cut, F_OK) != 0, "%s was created", cut);
    dir[n - 1] = '/';
    while (n < 1300) n += snprintf(dir + n, sizeof dir - n, "d123456789/");
    rc = run("./adapt-train --config %s/ok.ini --out %s --set train.epochs=1 --quiet", tmpdir,
             dir);
    expect_fail("too long --out", rc, "too long", NULL);
}
END_TEST

START_TEST(test_dry_run)
{
    write_file("ok.ini", small_cfg);
    int rc = run("./adapt-train --config %s/ok.ini --dry-run --set model.name=resnet20 "
                 "--set data.dataset=cifar10",
                 tmpdir);
    /* the resolved config and the model summary with the models' totals (doc/models.md),
     * then the data check: no CIFAR-10 under the test's data.path, so exit status 1 */
    ck_assert_msg(rc == 1, "dry run without CIFAR-10: exit status %d: %s", rc, out_tail());
    ck_assert_ptr_nonnull(strstr(out_buf, "name = \"resnet20\""));
    ck_assert_ptr_nonnull(strstr(out_buf, "layer1.0.conv1"));
    ck_assert_ptr_nonnull(strstr(out_buf, "272474 parameters"));
    ck_assert_ptr_nonnull(strstr(out_buf, "40813184 MACs"));
    ck_assert_msg(strstr(out_buf, "data:   not available: ") &&
                      strstr(out_buf, "CIFAR-10 data not found") &&
                      strstr(out_buf, "dry run: the data set is missing"),
                  "%s", out_tail());
    /* a per-unit list that does not match the model */
    rc = run("./adapt-train --config %s/ok.ini --dry-run --set policy.name=fixed "
             "--set policy.per_unit=8:4,8:4",
             tmpdir);
    expect_fail("per_unit of 2 formats for lenet5", rc,
                "policy.per_unit lists 2 formats, but lenet5 has 5 precision units", NULL);
    if (!have_fmnist()) return;
    /* with the data: its line, the policy's, and with --estimate the time of the run */
    rc = run("./adapt-train --config %s/ok.ini --dry-run --estimate=2 --set policy.name=adapt",
             tmpdir);
    ck_assert_msg(rc == 0, "dry run with --estimate: %s", out_tail());
    const int n_train = tu_quick() ? 800 : 2500, n_val = tu_quick() ? 200 : 500;
    char want[200];
    snprintf(want, sizeof want, "data:   fashion-mnist from " FMNIST ": %d train + %d validation "
             "images (of the training file's 60000), %d test, 10 classes, 1 x 32 x 32 input",
             n_train, n_val, tu_quick() ? 300 : 1000);
    ck_assert_msg(strstr(out_buf, want), "expected '%s' in: %s", want, out_tail());
    ck_assert_ptr_nonnull(strstr(out_buf, "policy: adapt, 5 precision units"));
    ck_assert_msg(strstr(out_buf, "estimate: ") && strstr(out_buf, "2 timed after 2 warm-up") &&
                      strstr(out_buf, "3 epochs: training "),
                  "%s", out_tail());
    /* nothing written: no run directory */
    ck_assert_int_ne(run("test -e runs/ok"), 0);
    rc = run("./adapt-train --config %s/ok.ini --estimate=0", tmpdir);
    expect_fail("--estimate=0", rc, "--estimate=N expects a number of steps in 1..1000", NULL);
}
END_TEST

/* Dataset problems: missing directory, truncated file, wrong magic. */
START_TEST(test_data_errors)
{
    write_file("ok.ini", small_cfg);
    int rc = run("./adapt-train --config %s/ok.ini --out %s/r --set data.path=%s/nodata", tmpdir,
                 tmpdir, tmpdir);
    expect_fail("missing data", rc, "nodata", NULL);
    /* A copy of Fashion-MNIST with a truncated image file and one with a bad magic. */
    if (!tu_have_data(FMNIST "/t10k-images-idx3-ubyte.gz")) return;
    ck_assert_int_eq(run("mkdir -p %s/trunc %s/magic && cp " FMNIST "/* %s/trunc/ && cp " FMNIST
                         "/* %s/magic/",
                         tmpdir, tmpdir, tmpdir, tmpdir),
                     0);
    ck_assert_int_eq(run("cd %s/trunc && zcat t10k-images-idx3-ubyte.gz | head -c 100000 | gzip "
                         "> t.gz && mv t.gz t10k-images-idx3-ubyte.gz",
                         tmpdir),
                     0);
    rc = run("./adapt-train --config %s/ok.ini --out %s/r --set data.path=%s/trunc", tmpdir,
             tmpdir, tmpdir);
    expect_fail("truncated", rc, "t10k-images-idx3-ubyte", NULL);
    ck_assert_int_eq(run("cd %s/magic && printf '\\000\\000\\010\\004' > m && zcat "
                         "t10k-labels-idx1-ubyte.gz | tail -c +5 >> m && gzip -c m > "
                         "t10k-labels-idx1-ubyte.gz && rm m",
                         tmpdir),
                     0);
    rc = run("./adapt-train --config %s/ok.ini --out %s/r --set data.path=%s/magic", tmpdir,
             tmpdir, tmpdir);
    expect_fail("wrong magic", rc, "t10k-labels-idx1-ubyte", "magic");
}
END_TEST

START_TEST(test_train_determinism_resume)
{
    if (!have_fmnist()) return;
    write_file("ok.ini", small_cfg);
    int rc = run("./adapt-train --config %s/ok.ini --out %s/a --quiet", tmpdir, tmpdir);
    ck_assert_msg(rc == 0, "run a failed: %s", out_buf);
    rc = run("./adapt-train --config %s/ok.ini --out %s/b", tmpdir, tmpdir);
    ck_assert_msg(rc == 0, "run b failed: %s", out_buf);
    ck_assert_ptr_nonnull(strstr(out_buf, "test  loss"));
    ck_assert_ptr_nonnull(strstr(out_buf, "trace:"));
    char a[600], b[600];
    snprintf(a, sizeof a, "%s/a.stripped", tmpdir);
    snprintf(b, sizeof b, "%s/b.stripped", tmpdir);
    char ta[600], tb[600];
    snprintf(ta, sizeof ta, "%s/a/trace.jsonl", tmpdir);
    snprintf(tb, sizeof tb, "%s/b/trace.jsonl", tmpdir);
    tu_strip_times(ta, a);
    tu_strip_times(tb, b);
    ck_assert_msg(run("cmp %s %s", a, b) == 0, "same seed, different traces: %s", out_buf);
    /* The weights are bit-identical too. */
    ck_assert_int_eq(run("cmp %s/a/model.safetensors %s/b/model.safetensors", tmpdir, tmpdir), 0);

    /* An existing run is not overwritten. */
    rc = run("./adapt-train --config %s/ok.ini --out %s/a --quiet", tmpdir, tmpdir);
    expect_fail("existing out", rc, "already holds a run", NULL);
    ck_assert_int_eq(run("cmp %s/a/trace.jsonl %s/a/trace.jsonl", tmpdir, tmpdir), 0);

    /* Resume: 1 epoch, then --resume to 3, equals the uninterrupted run. */
    rc = run("./adapt-train --config %s/ok.ini --out %s/c --set train.epochs=1 --quiet", tmpdir,
             tmpdir);
    ck_assert_msg(rc == 0, "run c failed: %s", out_buf);
    rc = run("./adapt-train --config %s/ok.ini --out %s/c --resume --quiet", tmpdir, tmpdir);
    ck_assert_msg(rc == 0, "resume failed: %s", out_buf);
    char c[600], tc[600];
    snprintf(c, sizeof c, "%s/c.stripped", tmpdir);
    snprintf(tc, sizeof tc, "%s/c/trace.jsonl", tmpdir);
    tu_strip_times(tc, c);
    /* Every record after the header is identical; the header of run c records
     * that it was started with train.epochs = 1. */
    ck_assert_msg(run("tail -n +2 %s > %s.body && tail -n +2 %s > %s.body && cmp %s.body %s.body",
                      a, a, c, c, a, c) == 0,
                  "resumed trace differs: %s", out_buf);
    ck_assert_int_eq(run("cmp %s/a/model.safetensors %s/c/model.safetensors", tmpdir, tmpdir), 0);

    /* A different configuration cannot resume the run. */
    rc = run("./adapt-train --config %s/ok.ini --out %s/c --resume --set optim.lr=0.1", tmpdir,
             tmpdir);
    expect_fail("resume with other config", rc, "optim.lr", NULL);

    /* The checkpoint scores the same on the test set as the run reported. */
    rc = run("./adapt-train --config %s/ok.ini --out %s/b --quiet --force", tmpdir, tmpdir);
    ck_assert_msg(rc == 0, "forced run failed: %s", out_buf);
    rc = run("grep '\"type\":\"test\"' %s/b/trace.jsonl", tmpdir);
    ck_assert_int_eq(rc, 0);
    static char test_line[sizeof out_buf];
    snprintf(test_line, sizeof test_line, "%s", out_buf);
    char *acc = strstr(test_line, "\"test_acc\":");
    ck_assert_ptr_nonnull(acc);
    double want = strtod(acc + 11, NULL);
    rc = run("./adapt-train --eval-only --config %s/ok.ini --init-from %s/b/model.safetensors",
             tmpdir, tmpdir);
    ck_assert_msg(rc == 0, "eval-only failed: %s", out_buf);
    char *p = strstr(out_buf, "accuracy ");
    ck_assert_ptr_nonnull(p);
    ck_assert_double_eq_tol(strtod(p + 9, NULL), 100.0 * want, 0.006);
}
END_TEST

/* Quantized policies: the same seed gives the same trace (stochastic
 * rounding included), and --resume restores the policy's state (AdaPT's
 * formats, lookbacks and accumulated gradients; MuPPET's level and kept
 * gradients; AMP's loss scale) so the resumed trace equals the uninterrupted
 * one. */
START_TEST(test_policies_determinism_resume)
{
    if (!have_fmnist()) return;
    write_file("ok.ini", small_cfg);
    static const char *pols[] = {"adapt", "muppet", "amp", "fixed"};
    for (int k = 0; k < 4; k++) {
        const char *pol = pols[k];
        int rc = run("./adapt-train --config %s/ok.ini --set policy.name=%s --out %s/%s_a --quiet",
                     tmpdir, pol, tmpdir, pol);
        ck_assert_msg(rc == 0, "%s run failed: %s", pol, out_buf);
        rc = run("./adapt-train --config %s/ok.ini --set policy.name=%s --out %s/%s_b --quiet",
                 tmpdir, pol, tmpdir, pol);
        ck_assert_msg(rc == 0, "%s run failed: %s", pol, out_buf);
        rc = run("./adapt-train --config %s/ok.ini --set policy.name=%s --out %s/%s_c --quiet "
                 "--set train.epochs=1 && ./adapt-train --config %s/ok.ini --set policy.name=%s "
                 "--out %s/%s_c --quiet --resume",
                 tmpdir, pol, tmpdir, pol, tmpdir, pol, tmpdir, pol);
        ck_assert_msg(rc == 0, "%s resume failed: %s", pol, out_buf);
        char a[600], b[600], c[600], t[600];
        snprintf(a, sizeof a, "%s/%s_a.s", tmpdir, pol);
        snprintf(b, sizeof b, "%s/%s_b.s", tmpdir, pol);
        snprintf(c, sizeof c, "%s/%s_c.s", tmpdir, pol);
        snprintf(t, sizeof t, "%s/%s_a/trace.jsonl", tmpdir, pol);
        tu_strip_times(t, a);
        snprintf(t, sizeof t, "%s/%s_b/trace.jsonl", tmpdir, pol);
        tu_strip_times(t, b);
        snprintf(t, sizeof t, "%s/%s_c/trace.jsonl", tmpdir, pol);
        tu_strip_times(t, c);
        ck_assert_msg(run("cmp %s %s", a, b) == 0, "%s: same seed, different traces", pol);
        ck_assert_msg(
            run("tail -n +2 %s > %s.body && tail -n +2 %s > %s.body && cmp %s.body %s.body", a, a,
                c, c, a, c) == 0,
            "%s: resumed trace differs: %s", pol, out_buf);
    }
    /* the quantized policies did quantize: AdaPT logged push-downs */
    ck_assert_int_eq(run("grep -q '\"kind\":\"pd\"' %s/adapt_a/trace.jsonl", tmpdir), 0);
}
END_TEST

/* --eval-only on a quantized run's checkpoint scores exactly the run's final
 * test accuracy: the per-unit formats stored with the checkpoint and its
 * step (the key of the last stochastic weight rounding) reproduce the weight
 * copies the run was tested with. Before the formats were stored, eval-only
 * scored the start formats (<8,4> for AdaPT) and missed. The JSON record
 * holds the same numbers at full precision. */
START_TEST(test_eval_only_quantized)
{
    if (!have_fmnist()) return;
    write_file("ok.ini", small_cfg);
    static const char *pols[] = {"adapt", "muppet"};
    static const int epochs[] = {2, 1};
    for (int k = 0; k < 2; k++) {
        const char *pol = pols[k];
        int rc = run("./adapt-train --config %s/ok.ini --set policy.name=%s --set train.epochs=%d "
                     "--out %s/%s_e --quiet",
                     tmpdir, pol, epochs[k], tmpdir, pol);
        ck_assert_msg(rc == 0, "%s run failed: %s", pol, out_buf);
        rc = run("grep '\"type\":\"test\"' %s/%s_e/trace.jsonl", tmpdir, pol);
        ck_assert_int_eq(rc, 0);
        char *a = strstr(out_buf, "\"test_acc\":");
        ck_assert_ptr_nonnull(a);
        double want = strtod(a + 11, NULL);
        rc = run("./adapt-train --eval-only --config %s/ok.ini --set policy.name=%s "
                 "--init-from %s/%s_e/model.safetensors --eval-json %s/%s_e/eval.json",
                 tmpdir, pol, tmpdir, pol, tmpdir, pol);
        ck_assert_msg(rc == 0, "%s eval-only failed: %s", pol, out_buf);
        ck_assert_msg(strstr(out_buf, "formats ("), "%s: formats not printed: %s", pol, out_buf);
        char acc_txt[32];
        snprintf(acc_txt, sizeof acc_txt, "accuracy %.2f%%", 100.0 * want);
        ck_assert_msg(strstr(out_buf, acc_txt), "%s: expected '%s' (the run's): %s", pol, acc_txt,
                      out_buf);
        char path[600];
        snprintf(path, sizeof path, "%s/%s_e/eval.json", tmpdir, pol);
        json_error_t jerr;
        json_t *j = json_load_file(path, 0, &jerr);
        ck_assert_msg(j != NULL, "%s: %s", path, jerr.text);
        double got = json_real_value(json_object_get(j, "accuracy"));
        json_int_t n = json_integer_value(json_object_get(j, "test_images"));
        json_int_t correct = json_integer_value(json_object_get(j, "correct"));
        const int n_test = tu_quick() ? 300 : 1000; /* test_limit of small_cfg */
        ck_assert_int_eq(n, n_test);
        /* the same images right: the trace's accuracy times the test images is an integer */
        ck_assert_int_eq(correct, (json_int_t)llround(want * n_test));
        ck_assert_double_eq_tol(got, want, 1e-9); /* 10 significant digits in the record */
        /* reals with 10 significant digits, not jansson's 17 ("0.88539999999999996") */
        char *text = (char *)tu_read_file(path, NULL);
        const char *acc = strstr(text, "\"accuracy\": ");
        ck_assert_ptr_nonnull(acc);
        ck_assert_msg(strspn(acc + 12, "0123456789.") <= 12, "%s", acc);
        free(text);
        ck_assert_int_eq(json_array_size(json_object_get(j, "unit_formats")), 5);
        json_decref(j);
    }
    /* without --eval-only, --eval-json is refused */
    int rc = run("./adapt-train --config %s/ok.ini --eval-json %s/x.json", tmpdir, tmpdir);
    expect_fail("eval-json without eval-only", rc, "--eval-json", NULL);
}
END_TEST

START_TEST(test_unwritable_out)
{
    if (!have_fmnist()) return;
    write_file("ok.ini", small_cfg);
    ck_assert_int_eq(run("mkdir -p %s/ro && chmod 555 %s/ro", tmpdir, tmpdir), 0);
    if (geteuid() == 0) {
        /* root writes anyway: use a path below a regular file instead */
        write_file("file", "x");
        int rc = run("./adapt-train --config %s/ok.ini --out %s/file/sub --quiet", tmpdir, tmpdir);
        expect_fail("out below a file", rc, "file/sub", NULL);
        return;
    }
    int rc = run("./adapt-train --config %s/ok.ini --out %s/ro/run --quiet", tmpdir, tmpdir);
    expect_fail("unwritable out", rc, "ro/run", NULL);
}
END_TEST

int main(void)
{
    if (!tu_have_program("./adapt-train")) return 99;
    Suite *s = suite_create("train");
    TCase *tc = tcase_create("cli");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_cli_errors);
    tcase_add_test(tc, test_dry_run);
    tcase_add_test(tc, test_long_out);
    tcase_add_test(tc, test_data_errors);
    tcase_add_test(tc, test_unwritable_out);
    suite_add_tcase(s, tc);
    TCase *tr = tcase_create("runs");
    tcase_add_checked_fixture(tr, setup, teardown);
    tcase_set_timeout(tr, 300);
    tcase_add_test(tr, test_train_determinism_resume);
    tcase_add_test(tr, test_policies_determinism_resume);
    tcase_add_test(tr, test_eval_only_quantized);
    suite_add_tcase(s, tr);
    return tu_run_suite(s, CK_FORK_GETENV);
}
