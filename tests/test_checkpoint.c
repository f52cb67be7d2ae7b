/* tests/test_checkpoint.c: checkpoints survive being interrupted anywhere.
 *
 * A short AdaPT run on a small synthetic IDX data set is stopped (SIGKILL,
 * from the fault-injection hook of src/base/fileio.h) at every step of every
 * checkpoint write, or has that step fail as on a full disk; `adapt-train
 * --resume` must then finish the run with a trace and weights identical to
 * the uninterrupted run, leaving no temporaries or stale checkpoints. Hostile
 * checkpoint contents are refused with a message naming the file and field,
 * and a rounding plugin named in a checkpoint's stored formats is loaded only
 * when the user allows that file.
 *
 * Runs ./adapt-train from the build directory; the interrupted runs are
 * adapt_train_run() in a child process, since the hook is a test-only API. */
#include <check.h>
#include <dirent.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "src/base/fileio.h"
#include "src/config/config.h"
#include "src/base/safetensors.h"
#include "src/quant/quant.h"
#include "src/train/train.h"
#include "tests/testutil.h"

static char tmpdir[256];
static char out_buf[1 << 16];

/* Runs a shell command; returns its exit status and keeps stdout+stderr in out_buf. */
#define run(...) tu_run(out_buf, sizeof out_buf, __VA_ARGS__)

static void put_be32(FILE *f, uint32_t v)
{
    unsigned char b[4] = {(unsigned char)(v >> 24), (unsigned char)(v >> 16),
                          (unsigned char)(v >> 8), (unsigned char)v};
    fwrite(b, 1, 4, f);
}

/* An IDX image / label pair of n 28x28 images, pixels from a fixed LCG. */
static void write_idx(const char *tag, int n, uint32_t seed)
{
    char p[512];
    snprintf(p, sizeof p, "%s/data/%s-images-idx3-ubyte", tmpdir, tag);
    FILE *f = fopen(p, "wb");
    ck_assert_ptr_nonnull(f);
    put_be32(f, 0x803);
    put_be32(f, (uint32_t)n);
    put_be32(f, 28);
    put_be32(f, 28);
    for (int i = 0; i < n * 28 * 28; i++) {
        seed = seed * 1664525u + 1013904223u;
        fputc((int)(seed >> 24), f);
    }
    ck_assert_int_eq(fclose(f), 0);
    snprintf(p, sizeof p, "%s/data/%s-labels-idx1-ubyte", tmpdir, tag);
    f = fopen(p, "wb");
    ck_assert_ptr_nonnull(f);
    put_be32(f, 0x801);
    put_be32(f, (uint32_t)n);
    for (int i = 0; i < n; i++) fputc(i % 10, f);
    ck_assert_int_eq(fclose(f), 0);
}

static void setup(void)
{
    tu_tmpdir_make(tmpdir, sizeof tmpdir, "ckpt");
    ck_assert_int_eq(run("mkdir -p %s/data", tmpdir), 0);
    /* 100 training images after the 20 kept for validation: 4 steps an epoch */
    write_idx("train", 120, 11);
    write_idx("t10k", 30, 12);
    char p[512], ini[1024];
    snprintf(ini, sizeof ini,
             "[run]\nseed = 5\nthreads = 1\n[data]\ndataset = fashion-mnist\npath = %s/data\n"
             "val_size = 20\n[model]\nname = lenet5\n[train]\nepochs = 2\nbatch = 25\n"
             "[optim]\nlr = 0.05\nmomentum = 0.9\n[policy]\nname = adapt\n"
             "[quantization]\nlb_lwr = 2\nlb_upr = 4\n",
             tmpdir);
    tu_write_text(tu_path(p, sizeof p, tmpdir, "c.ini"), ini);
}

static void teardown(void) { tu_tmpdir_remove(tmpdir); }

/* The hook: counts the steps of checkpoint writes (files below a ckpt-
 * directory and the links of the run directory); at step `target` it kills
 * the process or fails the step. */
struct fault {
    int count, target, fail;
};

static int is_checkpoint_path(const char *path)
{
    return strstr(path, "/ckpt-") || strstr(path, "/checkpoint") ||
           strstr(path, "/model.safetensors") || strstr(path, "/optim.safetensors");
}

static int fault_hook(enum adapt_fileio_step step, const char *path, void *ctx)
{
    struct fault *f = ctx;
    (void)step;
    if (!is_checkpoint_path(path) || ++f->count != f->target) return 0;
    if (f->fail) return 1;
    raise(SIGKILL);
    return 0;
}

/* adapt_train_run in a child with the hook at `target`; the wait status. */
static int interrupted_run(const char *out, int target, int fail)
{
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        static struct adapt_config cfg;
        char p[512];
        snprintf(p, sizeof p, "%s/c.ini", tmpdir);
        adapt_config_init(&cfg);
        if (adapt_config_load(&cfg, p) || adapt_config_check(&cfg)) _exit(3);
        struct fault f = {0, target, fail};
        adapt_fileio_set_hook(fault_hook, &f);
        struct adapt_train_opts o = {.out_dir = out, .quiet = 1};
        enum adapt_status st = adapt_train_run(&cfg, &o);
        if (st != ADAPT_OK) {
            /* the failure must say why */
            _exit(strstr(adapt_error_message(), "No space left on device") ? 1 : 4);
        }
        _exit(0);
    }
    int ws;
    ck_assert_int_eq(waitpid(pid, &ws, 0), pid);
    return ws;
}

/* No temporaries and exactly one checkpoint directory are left. */
static void check_tidy(const char *dir, int k)
{
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    int nckpt = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        ck_assert_msg(!adapt_fileio_is_tmp_name(e->d_name), "step %d: leftover %s/%s", k, dir,
                      e->d_name);
        nckpt += !strncmp(e->d_name, "ckpt-", 5);
    }
    closedir(d);
    ck_assert_msg(nckpt == 1, "step %d: %d checkpoint directories in %s", k, nckpt, dir);
}

static void check_same_as_reference(const char *out, int k)
{
    char a[600], b[600];
    snprintf(a, sizeof a, "%s/trace.jsonl", out);
    snprintf(b, sizeof b, "%s/k.stripped", tmpdir);
    tu_strip_times(a, b);
    ck_assert_msg(run("cmp %s/ref.stripped %s", tmpdir, b) == 0,
                  "step %d: resumed trace differs: %s", k, out_buf);
    ck_assert_msg(run("cmp %s/ref/model.safetensors %s/model.safetensors", tmpdir, out) == 0,
                  "step %d: resumed weights differ: %s", k, out_buf);
    ck_assert_msg(run("cmp %s/ref/optim.safetensors %s/optim.safetensors", tmpdir, out) == 0,
                  "step %d: resumed optimizer state differs: %s", k, out_buf);
    check_tidy(out, k);
}

static void reference_run(void)
{
    int rc = run("./adapt-train --config %s/c.ini --out %s/ref --quiet", tmpdir, tmpdir);
    ck_assert_msg(rc == 0, "reference run failed: %s", out_buf);
    char t[600], s[600];
    snprintf(t, sizeof t, "%s/ref/trace.jsonl", tmpdir);
    snprintf(s, sizeof s, "%s/ref.stripped", tmpdir);
    tu_strip_times(t, s);
}

/* The steps of the two checkpoint writes of a 2-epoch run, counted by the
 * hook: model and optimizer files (5 each: created, written, synced,
 * renamed, directory synced), the "checkpoint" link (3: created, renamed,
 * directory synced), on the first write the two file links (3 each), on the
 * second the removal of the first checkpoint's two files: 19 + 15. */
#define CKPT_STEPS 34

START_TEST(test_kill_at_every_step)
{
    reference_run();
    int k;
    for (k = 1;; k++) {
        char out[600];
        snprintf(out, sizeof out, "%s/k%d", tmpdir, k);
        int ws = interrupted_run(out, k, 0);
        if (WIFEXITED(ws) && WEXITSTATUS(ws) == 0) break; /* past the last step */
        ck_assert_msg(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL, "step %d: status 0x%x", k, ws);
        int rc = run("./adapt-train --config %s/c.ini --out %s --resume --quiet", tmpdir, out);
        ck_assert_msg(rc == 0, "step %d: --resume failed: %s", k, out_buf);
        check_same_as_reference(out, k);
        ck_assert_int_eq(run("rm -rf %s", out), 0);
    }
    ck_assert_int_eq(k - 1, CKPT_STEPS);
}
END_TEST

/* Each step failing as on a full disk: a clear error, the previous checkpoint
 * intact, and --resume completes the run. */
START_TEST(test_full_disk_at_every_step)
{
    reference_run();
    int k;
    for (k = 1;; k++) {
        char out[600];
        snprintf(out, sizeof out, "%s/f%d", tmpdir, k);
        int ws = interrupted_run(out, k, 1);
        ck_assert_msg(WIFEXITED(ws), "step %d: status 0x%x", k, ws);
        if (WEXITSTATUS(ws) == 0) break;
        ck_assert_msg(WEXITSTATUS(ws) == 1, "step %d: exit %d (4: message lacks the reason)", k,
                      WEXITSTATUS(ws));
        int rc = run("./adapt-train --config %s/c.ini --out %s --resume --quiet", tmpdir, out);
        ck_assert_msg(rc == 0, "step %d: --resume failed: %s", k, out_buf);
        check_same_as_reference(out, k);
        ck_assert_int_eq(run("rm -rf %s", out), 0);
    }
    ck_assert_int_eq(k - 1, CKPT_STEPS);
}
END_TEST

/* Leftovers of a killed write are removed by --force as well. */
START_TEST(test_force_removes_leftovers)
{
    char out[600];
    snprintf(out, sizeof out, "%s/kf", tmpdir);
    int ws = interrupted_run(out, 14, 0); /* during the first checkpoint's links */
    ck_assert(WIFSIGNALED(ws));
    ck_assert_int_eq(run("touch %s/model.safetensors.tmp.123 %s/ckpt-000009", out, out), 0);
    int rc = run("./adapt-train --config %s/c.ini --out %s --force --quiet", tmpdir, out);
    ck_assert_msg(rc == 0, "--force failed: %s", out_buf);
    check_tidy(out, 14);
}
END_TEST

/* Rewrites the safetensors file p with one metadata value replaced. */
static void set_file_meta(const char *p, const char *key, const char *value)
{
    struct adapt_safetensors *f = NULL;
    ck_assert_int_eq(adapt_safetensors_load(&f, p), ADAPT_OK);
    struct adapt_safetensors_meta *m = calloc((size_t)f->n_meta + 1, sizeof *m);
    ck_assert_ptr_nonnull(m);
    for (int i = 0; i < f->n_meta; i++) {
        m[i].key = f->meta[i].key;
        m[i].value = strcmp(f->meta[i].key, key) ? f->meta[i].value : value;
    }
    ck_assert_int_eq(adapt_safetensors_write(p, f->tensors, f->n_tensors, m, f->n_meta), ADAPT_OK);
    free(m);
    adapt_safetensors_free(f);
}

/* Rewrites the checkpoint's optim.safetensors with one metadata value replaced. */
static void set_meta(const char *dir, const char *key, const char *value)
{
    char p[700];
    snprintf(p, sizeof p, "%s/checkpoint/optim.safetensors", dir);
    set_file_meta(p, key, value);
}

/* Hostile policy states and metadata: refused with the file and the field. */
START_TEST(test_hostile_checkpoint)
{
    static const struct {
        const char *policy, *key, *value, *needle;
    } cases[] = {
        {"adapt", "policy_state", NULL, "wl 99"},
        {"adapt", "policy_state", NULL, "wl -3"},
        {"adapt", "policy_state", NULL, "fl 40"},
        {"adapt", "policy_state", NULL, "lb = -1e+09"},
        {"adapt", "policy_state", NULL, "strategy = 7"},
        {"muppet", "policy_state", "{\"level\":-1,\"max_gd\":0,\"violations\":0,\"ring_n\":0,"
                                   "\"fp32_epochs\":0}", "level = -1"},
        {"muppet", "policy_state", "{\"level\":0,\"max_gd\":0,\"violations\":0,\"ring_n\":-5,"
                                   "\"fp32_epochs\":0}", "ring_n = -5"},
        {"muppet", "policy_state", "{\"level\":0,\"max_gd\":0,\"violations\":0,\"ring_n\":"
                                   "2147483647,\"fp32_epochs\":0}", "ring_n = 2147483647"},
        {"adapt", "sgd_steps", "-4", "sgd_steps"},
        {"adapt", "lr", "nan", "lr"},
        {"adapt", "sched_num_bad", "-1", "sched_num_bad"},
    };
    static const char *adapt_edits[][2] = {{"\"wl\":", "\"wl\":99,\"x\":"},
                                           {"\"wl\":", "\"wl\":-3,\"x\":"},
                                           {"\"fl\":", "\"fl\":40,\"x\":"},
                                           {"\"lb\":", "\"lb\":-1e9,\"x\":"},
                                           {"\"strategy\":", "\"strategy\":7,\"x\":"}};
    for (int pol = 0; pol < 2; pol++) {
        const char *name = pol ? "muppet" : "adapt";
        int rc = run("./adapt-train --config %s/c.ini --out %s/%s --set policy.name=%s "
                     "--set train.epochs=1 --quiet",
                     tmpdir, tmpdir, name, name);
        ck_assert_msg(rc == 0, "%s run failed: %s", name, out_buf);
        ck_assert_int_eq(run("cp -a %s/%s %s/%s.orig", tmpdir, name, tmpdir, name), 0);
    }
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const char *name = cases[c].policy;
        char dir[600];
        snprintf(dir, sizeof dir, "%s/%s", tmpdir, name);
        ck_assert_int_eq(run("rm -rf %s && cp -a %s.orig %s", dir, dir, dir), 0);
        const char *value = cases[c].value;
        static char edited[1 << 14];
        if (!value) {
            /* the first unit's field replaced: JSON objects keep the last duplicate key,
             * so the new value is put after the old one */
            char p[700];
            snprintf(p, sizeof p, "%s/checkpoint/optim.safetensors", dir);
            struct adapt_safetensors *f = NULL;
            ck_assert_int_eq(adapt_safetensors_load(&f, p), ADAPT_OK);
            const char *js = adapt_safetensors_meta_get(f, "policy_state");
            ck_assert_ptr_nonnull(js);
            const char *from = adapt_edits[c][0], *to = adapt_edits[c][1];
            const char *at = strstr(js, from);
            ck_assert_ptr_nonnull(at);
            snprintf(edited, sizeof edited, "%.*s%s%s", (int)(at - js), js, to, at + strlen(from));
            adapt_safetensors_free(f);
            value = edited;
        }
        set_meta(dir, cases[c].key, value);
        int rc = run("./adapt-train --config %s/c.ini --out %s --set policy.name=%s --resume "
                     "--quiet",
                     tmpdir, dir, name);
        ck_assert_msg(rc == 1, "case %zu (%s): exit %d, expected 1: %s", c, cases[c].needle, rc,
                      out_buf);
        ck_assert_msg(strstr(out_buf, "optim.safetensors") && strstr(out_buf, cases[c].needle),
                      "case %zu: message lacks the file or '%s': %s", c, cases[c].needle,
                      out_buf);
    }
}
END_TEST

/* Layer names whose checkpoint tensors would share a name (a layer "adapt.G" has the momentum
 * "adapt.G.weight" in optim.safetensors, and AdaPT keeps its state of a unit "weight" under the
 * same name) are refused by --dry-run and by a run before the run directory is made; a muppet
 * run of the same model, whose state has other names, trains. */
START_TEST(test_colliding_tensor_names)
{
    char p[512];
    tu_write_text(tu_path(p, sizeof p, tmpdir, "collide.model"),
                  "input 1 32 32\nconv2d adapt.G out=2 k=5\nflatten f\n"
                  "linear weight out=classes\n");
    const char *needle = "two tensors of a checkpoint's optim.safetensors would both be named "
                         "'adapt.G.weight'";
    int rc = run("./adapt-train --config %s/c.ini --set model.file=%s --dry-run", tmpdir, p);
    ck_assert_msg(rc == 1 && strstr(out_buf, needle), "--dry-run: exit %d: %.400s", rc, out_buf);
    rc = run("./adapt-train --config %s/c.ini --set model.file=%s --out %s/collide --quiet",
             tmpdir, p, tmpdir);
    ck_assert_msg(rc == 1 && strstr(out_buf, needle), "a run: exit %d: %.400s", rc, out_buf);
    struct stat sb;
    char dir[600];
    snprintf(dir, sizeof dir, "%s/collide", tmpdir);
    ck_assert_msg(stat(dir, &sb) != 0, "the refused run made %s", dir);
    rc = run("./adapt-train --config %s/c.ini --set model.file=%s --set policy.name=muppet "
             "--set train.epochs=1 --out %s/collide --quiet",
             tmpdir, p, tmpdir);
    ck_assert_msg(rc == 0, "muppet run: exit %d: %.400s", rc, out_buf);
}
END_TEST

/* The checkpoint's model.safetensors with unit 0 of its stored formats (metadata unit_formats)
 * set to the plugin format `spec`, and its policy metadata set to `policy` unless NULL; the
 * unit's name in unit. */
static void store_plugin_format(const char *dir, const char *spec, const char *policy, char *unit,
                                size_t cap)
{
    char p[700];
    snprintf(p, sizeof p, "%s/checkpoint/model.safetensors", dir);
    struct adapt_safetensors *f = NULL;
    ck_assert_int_eq(adapt_safetensors_load(&f, p), ADAPT_OK);
    const char *js = adapt_safetensors_meta_get(f, "unit_formats");
    ck_assert_ptr_nonnull(js);
    json_error_t jerr;
    json_t *a = json_loads(js, 0, &jerr), *o = json_array_get(a, 0);
    ck_assert_ptr_nonnull(o);
    snprintf(unit, cap, "%s", json_string_value(json_object_get(o, "unit")));
    ck_assert_int_eq(json_object_set_new(o, "active", json_true()), 0);
    ck_assert_int_eq(json_object_set_new(o, "format", json_integer(QUANT_FORMAT_PLUGIN)), 0);
    ck_assert_int_eq(json_object_set_new(o, "spec", json_string(spec)), 0);
    char *edited = json_dumps(a, JSON_COMPACT);
    ck_assert_ptr_nonnull(edited);
    json_decref(a);
    adapt_safetensors_free(f);
    set_file_meta(p, "unit_formats", edited);
    free(edited);
    if (policy) set_file_meta(p, "policy", policy);
}

/* Runs --eval-only on the run directory dir with the extra options; checks the exit status and,
 * when refused, that the message names the file, the unit, the stored format, and how to allow
 * it; when evaluated, that the plugin's format was used. */
static void expect_eval(const char *dir, const char *options, const char *unit, const char *spec,
                        const char *allow, int want)
{
    int rc = run("./adapt-train --eval-only --init-from %s --config %s/c.ini %s", dir, tmpdir,
                 options);
    ck_assert_msg(rc == want, "%s: exit %d, expected %d: %s", options, rc, want, out_buf);
    if (want == 1) {
        char hint[4200], u[160];
        snprintf(hint, sizeof hint, "--allow-plugin %s", allow);
        snprintf(u, sizeof u, "unit %s ", unit);
        const char *needles[] = {"model.safetensors", u, spec, hint};
        for (int k = 0; k < 4; k++)
            ck_assert_msg(strstr(out_buf, needles[k]), "%s: message lacks '%s': %s", options,
                          needles[k], out_buf);
        ck_assert_msg(!strstr(out_buf, "accuracy"), "%s: evaluated: %s", options, out_buf);
    } else if (spec) {
        ck_assert_msg(strstr(out_buf, spec) && strstr(out_buf, "accuracy"),
                      "%s: not evaluated at %s: %s", options, spec, out_buf);
    }
}

/* A checkpoint is data: a rounding plugin named by its stored formats is loaded only when the
 * user names the file: --allow-plugin PATH (any spelling of the same file; a bare name, which
 * dlopen searches for, only as written) or the same plugin in the configuration. Without that,
 * --eval-only loaded and called whatever the checkpoint named (plugin(libc.so.6:exit) ended the
 * evaluation with exit status 0 and no result). */
START_TEST(test_stored_plugin_needs_allowance)
{
    char dir[600], so[4096], abs[PATH_MAX], spec[PATH_MAX + 16], unit[128], opt[PATH_MAX + 64];
    snprintf(dir, sizeof dir, "%s/p", tmpdir);
    int rc = run("./adapt-train --config %s/c.ini --out %s --set train.epochs=1 --quiet", tmpdir,
                 dir);
    ck_assert_msg(rc == 0, "run failed: %s", out_buf);
    ck_assert_int_eq(run("cp -a %s %s.orig", dir, dir), 0);
    const char *bd = getenv("ADAPT_BUILDDIR");
    snprintf(so, sizeof so, "%s/src/quant/plugins/bf16_sr.so", bd && *bd ? bd : ".");
    ck_assert_ptr_nonnull(realpath(so, abs));
    snprintf(spec, sizeof spec, "plugin(%s)", abs);

    /* the example plugin, stored with its absolute path */
    store_plugin_format(dir, spec, NULL, unit, sizeof unit);
    expect_eval(dir, "", unit, spec, abs, 1);
    expect_eval(dir, "--allow-plugin /nonexistent/bf16_sr.so", unit, spec, abs, 1);
    snprintf(opt, sizeof opt, "--allow-plugin %s:other_rule", abs);
    expect_eval(dir, opt, unit, spec, abs, 1); /* another function of the file */
    /* the same file by a relative path through "..", and by its path and function */
    expect_eval(dir, "--allow-plugin src/quant/plugins/../plugins/bf16_sr.so", unit, spec, abs, 0);
    snprintf(opt, sizeof opt, "--allow-plugin /nonexistent.so --allow-plugin %s:bf16_sr", abs);
    expect_eval(dir, opt, unit, spec, abs, 0);
    /* named by the configuration (policy.format, relative path): the checkpoint of a fixed run */
    store_plugin_format(dir, spec, "fixed", unit, sizeof unit);
    expect_eval(dir, "--set policy.name=fixed --set 'policy.format=plugin(./src/quant/plugins/"
                "bf16_sr.so)'", unit, spec, abs, 0);

    /* a bare name is searched for by dlopen: allowed only as written */
    ck_assert_int_eq(run("rm -rf %s && cp -a %s.orig %s", dir, dir, dir), 0);
    store_plugin_format(dir, "plugin(libc.so.6:exit)", NULL, unit, sizeof unit);
    expect_eval(dir, "", unit, "plugin(libc.so.6:exit)", "libc.so.6", 1);
    expect_eval(dir, "--allow-plugin /usr/lib/libc.so.6", unit, "plugin(libc.so.6:exit)",
                "libc.so.6", 1);
    expect_eval(dir, "--allow-plugin libc.so.6:abort", unit, "plugin(libc.so.6:exit)",
                "libc.so.6", 1);
    /* allowed, it is loaded, and its check calls exit(0): no result (what happened before to any
     * checkpoint naming it) */
    expect_eval(dir, "--allow-plugin libc.so.6", unit, NULL, NULL, 0);
    ck_assert_msg(!strstr(out_buf, "accuracy"), "libc.so.6:exit was not called: %s", out_buf);
}
END_TEST

int main(void)
{
    if (!tu_have_program("./adapt-train")) return 99;
    Suite *s = suite_create("checkpoint");
    TCase *tc = tcase_create("interrupted");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_kill_at_every_step);
    tcase_add_test(tc, test_full_disk_at_every_step);
    tcase_add_test(tc, test_force_removes_leftovers);
    tcase_add_test(tc, test_hostile_checkpoint);
    tcase_add_test(tc, test_colliding_tensor_names);
    suite_add_tcase(s, tc);
    TCase *tp = tcase_create("plugins");
    tcase_add_checked_fixture(tp, setup, teardown);
    tcase_set_timeout(tp, 300);
    tcase_add_test(tp, test_stored_plugin_needs_allowance);
    suite_add_tcase(s, tp);
    return tu_run_suite(s, CK_FORK_GETENV);
}
