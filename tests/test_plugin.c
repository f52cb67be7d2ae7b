/* tests/test_plugin.c: rounding plugins (src/quant/plugin.c). The example plugin
 * src/quant/plugins/bf16_sr.so is compared with its rule written here independently (in double
 * arithmetic on the grid, not on bit patterns) and with the built-in bf16 format, whose rounding
 * it reproduces; a plugin whose vector variant disagrees with its scalar function
 * (tests/plugins/bad_simd.so), missing files and symbols, symbols that are data
 * (tests/plugins/data_symbols.so) and files that are not shared objects of this machine (copies of
 * the example cut short or with a header field changed, made here) are refused with messages that
 * name them. What a format text names is found without loading it, and a plugin named by data is
 * allowed only by the user's list or by being loaded already. The shared objects are found in the
 * build tree named by ADAPT_BUILDDIR (make check sets it; "." otherwise). */
#include <check.h>
#include <elf.h>
#include <float.h>
#include <link.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "src/quant/quant.h"
#include "src/base/rng.h"
#include "src/base/status.h"
#include "tests/testutil.h"

static const char *builddir(void)
{
    const char *d = getenv("ADAPT_BUILDDIR");
    return d && *d ? d : ".";
}

static void example_path(char *buf, size_t cap)
{
    snprintf(buf, cap, "%s/src/quant/plugins/bf16_sr.so", builddir());
}

static struct quant_spec example_spec(enum quant_rounding rnd)
{
    char path[4096], text[4200];
    example_path(path, sizeof path);
    snprintf(text, sizeof text, "plugin(%s)", path);
    struct quant_spec s;
    ck_assert_msg(quant_spec_parse(text, &s) == ADAPT_OK, "%s", adapt_error_message());
    s.rounding = rnd;
    return s;
}

/* The example's rule, written from its description: |x| on the bfloat16 grid (spacing
 * 2^(max(E, -126) - 7) for |x| in [2^E, 2^(E+1))), rounded up when floor(frac 2^16) + (r >> 16)
 * reaches 2^16, infinity above the largest finite value (2 - 2^-7) 2^127, sign kept, NaN
 * unchanged. */
static float rule_bf16_sr(float x, uint32_t r)
{
    if (isnan(x) || isinf(x) || x == 0.0f) return x;
    double a = fabs((double)x);
    int e;
    frexp(a, &e); /* a in [2^(e-1), 2^e) */
    int E = e - 1 < -126 ? -126 : e - 1;
    double spacing = ldexp(1.0, E - 7);
    double t = a / spacing, fl = floor(t);
    double frac16 = floor((t - fl) * 65536.0);
    double q = (fl + (frac16 + (double)(r >> 16) >= 65536.0 ? 1.0 : 0.0)) * spacing;
    float y = q > ldexp(2.0 - ldexp(1.0, -7), 127) ? INFINITY : (float)q;
    return signbit(x) ? -y : y;
}

/* Random bit patterns (NaNs included), values around training magnitudes, bfloat16 ties and
 * specials. */
static void fill(float *x, size_t n, uint64_t seed)
{
    static const float specials[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, FLT_MAX, -FLT_MAX,
                                     FLT_MIN, FLT_TRUE_MIN, 0x1.fffep127f, 0x1.01p0f, -0x1.03p0f};
    const size_t ns = sizeof specials / sizeof specials[0];
    for (size_t i = 0; i < n; i++) {
        uint32_t u = adapt_rng_u32_at(seed, 7, i);
        if (i < ns) x[i] = specials[i];
        else if (i % 3 == 0) x[i] = quant_u2f(u);
        else if (i % 3 == 1) x[i] = (float)(int32_t)u * 0x1p-29f;
        else x[i] = quant_u2f((u & 0xffff0000u) | 0x8000u); /* a tie */
    }
}

START_TEST(test_example_rule)
{
    const size_t n = 3 * 65536 + 777;
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y), *z = malloc(n * sizeof *z);
    uint8_t *m = malloc(n), *mb = malloc(n);
    ck_assert(x && y && z && m && mb);
    fill(x, n, 3);
    for (int rnd = 0; rnd < 2; rnd++) {
        struct quant_spec s = example_spec((enum quant_rounding)rnd);
        struct quant_key key = {11, ADAPT_STREAM_QUANT + 2, 1001};
        struct quant_stats st = {0, 0, 0}, sb = {0, 0, 0};
        ck_assert_int_eq(quant_array(&s, x, y, n, key, m, &st), ADAPT_OK);
        for (size_t i = 0; i < n; i++) {
            uint32_t r = rnd ? adapt_rng_u32_at(key.seed, key.stream, key.index + i) : 0x80000000u;
            float e = rule_bf16_sr(x[i], r);
            if (!tu_same_bits(y[i], e))
                ck_abort_msg("rounding %d, x[%zu] = %a (r 0x%08x): plugin %a, rule %a", rnd, i,
                             (double)x[i], r, (double)y[i], (double)e);
        }
        /* the built-in bf16 rounds the same way: stochastic, or nearest with ties away */
        struct quant_spec b;
        ck_assert_int_eq(quant_spec_parse("bf16", &b), ADAPT_OK);
        b.rounding = (enum quant_rounding)rnd;
        b.tie = QUANT_TIE_AWAY;
        ck_assert_int_eq(quant_array(&b, x, z, n, key, mb, &sb), ADAPT_OK);
        ck_assert_int_eq(tu_first_bit_diff(y, z, n), -1);
        ck_assert_int_eq(memcmp(m, mb, n), 0);
        ck_assert_uint_eq(st.saturated, sb.saturated);
        ck_assert_uint_eq(st.flushed, sb.flushed);
        ck_assert_uint_eq(st.zeros, sb.zeros);
    }
    free(x), free(y), free(z), free(m), free(mb);
}
END_TEST

START_TEST(test_example_names)
{
    char path[4096], text[4200], buf[QUANT_SPEC_STR_MAX];
    example_path(path, sizeof path);
    struct quant_spec s = example_spec(QUANT_ROUND_NEAREST), t, u;
    snprintf(text, sizeof text, "plugin(%s)", path);
    ck_assert_str_eq(quant_spec_str(&s, buf, sizeof buf), text);
    ck_assert_int_eq(quant_spec_bits(&s), 16); /* bf16_sr_bits() */
    /* the printed name loads the same registry entry; so does the explicit NAME */
    ck_assert_int_eq(quant_spec_parse(buf, &t), ADAPT_OK);
    ck_assert_int_eq(t.plugin, s.plugin);
    snprintf(text, sizeof text, "  plugin( %s:bf16_sr ) ", path);
    ck_assert_int_eq(quant_spec_parse(text, &u), ADAPT_OK);
    ck_assert_int_eq(u.format, QUANT_FORMAT_PLUGIN);
    ck_assert_int_eq(u.plugin, s.plugin); /* same file and function: the entry loaded first */
    int lanes;
    const char *k = quant_plugin_kernel(s.plugin, &lanes);
    printf("bf16_sr runs through %s (%d lanes)\n", k, lanes);
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
    /* gcc emits the b, c, d and e variants of a declare simd function: the widest we call */
    int want = __builtin_cpu_supports("avx512f") ? 16 : __builtin_cpu_supports("avx2") ? 8 : 4;
    ck_assert_int_eq(lanes, want);
    ck_assert(strstr(k, "_ZGV") == k);
#endif
    /* CPU only */
    ck_assert_int_eq(quant_cuda_rows(&s, NULL, NULL, 1, 1, (struct quant_key){0, 0, 0}, NULL,
                                     NULL),
                     ADAPT_EUNSUPPORTED);
}
END_TEST

START_TEST(test_example_threads_ref)
{
    const size_t rows = 7, cols = 65536 + 4321, n = rows * cols; /* rows cross chunks */
    float *x = malloc(n * sizeof *x), *y1 = malloc(n * sizeof *y1), *y2 = malloc(n * sizeof *y2);
    float *y3 = malloc(n * sizeof *y3);
    uint8_t *m1 = malloc(n), *m2 = malloc(n), *m3 = malloc(n);
    ck_assert(x && y1 && y2 && y3 && m1 && m2 && m3);
    fill(x, n, 5);
    int saved = omp_get_max_threads();
    for (int rnd = 0; rnd < 2; rnd++) {
        struct quant_spec s = example_spec((enum quant_rounding)rnd);
        struct quant_key key = {4, ADAPT_STREAM_QUANT, 333};
        struct quant_stats a = {0, 0, 0}, b = {0, 0, 0}, c = {0, 0, 0};
        omp_set_num_threads(1);
        ck_assert_int_eq(quant_rows(&s, x, y1, rows, cols, key, m1, &a), ADAPT_OK);
        omp_set_num_threads(2);
        ck_assert_int_eq(quant_rows(&s, x, y2, rows, cols, key, m2, &b), ADAPT_OK);
        ck_assert_int_eq(quant_rows_ref(&s, x, y3, rows, cols, key, m3, &c), ADAPT_OK);
        ck_assert_int_eq(tu_first_bit_diff(y1, y2, n), -1);
        ck_assert_int_eq(tu_first_bit_diff(y1, y3, n), -1);
        ck_assert_int_eq(memcmp(m1, m2, n), 0);
        ck_assert_int_eq(memcmp(m1, m3, n), 0);
        ck_assert(!memcmp(&a, &b, sizeof a) && !memcmp(&a, &c, sizeof a));
        /* in place, in two calls cut at an odd offset: the same bits */
        memcpy(y2, x, n * sizeof *x);
        struct quant_key k2 = key;
        k2.index += 1001;
        ck_assert_int_eq(quant_array(&s, y2, y2, 1001, key, NULL, NULL), ADAPT_OK);
        ck_assert_int_eq(quant_array(&s, y2 + 1001, y2 + 1001, n - 1001, k2, NULL, NULL),
                         ADAPT_OK);
        ck_assert_int_eq(tu_first_bit_diff(y1, y2, n), -1);
    }
    omp_set_num_threads(saved);
    free(x), free(y1), free(y2), free(y3), free(m1), free(m2), free(m3);
}
END_TEST

static void expect_refused(const char *text, enum adapt_status want, const char *const *parts)
{
    struct quant_spec s;
    enum adapt_status st = quant_spec_parse(text, &s);
    const char *msg = adapt_error_message();
    ck_assert_msg(st == want, "%s: status %d, expected %d (%s)", text, (int)st, (int)want, msg);
    for (const char *const *p = parts; *p; p++)
        ck_assert_msg(strstr(msg, *p), "%s: message '%s' lacks '%s'", text, msg, *p);
}

START_TEST(test_refused)
{
    char path[4096], text[4200];
    example_path(path, sizeof path);
    /* a file that is not there: dlopen's reason, with the file's name */
    snprintf(text, sizeof text, "plugin(%s/no_such_plugin.so)", builddir());
    const char *nofile[] = {"no_such_plugin.so", "cannot load", NULL};
    expect_refused(text, ADAPT_EIO, nofile);
    /* a function that is not there: the file and the symbol */
    snprintf(text, sizeof text, "plugin(%s:no_such_rule)", path);
    const char *nosym[] = {path, "no_such_rule", NULL};
    expect_refused(text, ADAPT_ENOENT, nosym);
    /* bad syntax */
    const char *syntax[] = {"plugin(PATH)", NULL};
    expect_refused("plugin", ADAPT_EINVAL, syntax);
    expect_refused("plugin(x.so", ADAPT_EINVAL, syntax);
    expect_refused("plugin()", ADAPT_EINVAL, (const char *const[]){"no file", NULL});
#if defined(__x86_64__)
    /* the vector variant flips a bit of lane 2: test element 2 is the first to differ */
    char bad[4096];
    snprintf(bad, sizeof bad, "%s/tests/plugins/bad_simd.so", builddir());
    snprintf(text, sizeof text, "plugin(%s)", bad);
    const char *simd[] = {bad, "_ZGVbN4vv_bad_simd", "disagrees with bad_simd",
                          "test element 2:", NULL};
    expect_refused(text, ADAPT_EFORMAT, simd);
#endif
    /* a spec whose plugin number was never loaded */
    struct quant_spec s;
    quant_spec_init(&s, QUANT_FORMAT_PLUGIN);
    s.plugin = QUANT_PLUGIN_MAX - 1;
    ck_assert_int_eq(quant_spec_check(&s), ADAPT_EINVAL);
}
END_TEST

/* Files that are not shared objects of this machine, made from the example: each refused before
 * it is mapped (a copy cut to 600 bytes made dlopen die of SIGBUS clearing a bss past the end of
 * the file). */
START_TEST(test_refused_files)
{
    char path[4096], dir[256], bad[600], text[800];
    example_path(path, sizeof path);
    size_t n;
    unsigned char *so = tu_read_file(path, &n);
    ElfW(Ehdr) eh;
    ck_assert(so && n > 4096);
    memcpy(&eh, so, sizeof eh);
    tu_tmpdir_make(dir, sizeof dir, "plugin");
    static const struct {
        const char *name;
        int what; /* 0: cut to `size` bytes, 1: e_machine, 2: e_type, 3: class, 4: not ELF */
        size_t size;
        const char *why;
    } cases[] = {
        {"cut600.so", 0, 600, "past the end of the file"},
        {"cuthalf.so", 0, 0, "past the end of the file"},
        {"machine.so", 1, 0, "machine"},
        {"exec.so", 2, 0, "not a shared object"},
        {"class.so", 3, 0, "32-bit"},
        {"text.so", 4, 0, "not an ELF file"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        ElfW(Ehdr) h = eh;
        size_t len = n;
        unsigned char *copy = malloc(n);
        ck_assert_ptr_nonnull(copy);
        memcpy(copy, so, n);
        switch (cases[c].what) {
        case 0: len = cases[c].size ? cases[c].size : n / 2; break;
        case 1: h.e_machine = h.e_machine == EM_X86_64 ? EM_AARCH64 : EM_X86_64; break;
        case 2: h.e_type = ET_EXEC; break;
        case 3: h.e_ident[EI_CLASS] = ELFCLASS32; break;
        default: memcpy(copy, "#!/bin/sh\nexit 0\n", 18); len = 18; break;
        }
        if (cases[c].what >= 1 && cases[c].what <= 3) memcpy(copy, &h, sizeof h);
        tu_write_file(tu_path(bad, sizeof bad, dir, cases[c].name), copy, len);
        free(copy);
        snprintf(text, sizeof text, "plugin(%s)", bad);
        const char *parts[] = {bad, cases[c].why, NULL};
        expect_refused(text, ADAPT_EFORMAT, parts);
    }
    free(so);
    tu_tmpdir_remove(dir);
}
END_TEST

/* A rounding function or a NAME_bits that is data: refused, not called (calling them was a
 * SIGSEGV). A function chosen by an IFUNC resolver loads. */
START_TEST(test_data_symbols)
{
    char ds[4096], text[4200];
    snprintf(ds, sizeof ds, "%s/tests/plugins/data_symbols.so", builddir());
    snprintf(text, sizeof text, "plugin(%s:data_rule)", ds);
    const char *rule[] = {ds, "data_rule", "is a data object, not a function", NULL};
    expect_refused(text, ADAPT_EFORMAT, rule);
    snprintf(text, sizeof text, "plugin(%s:good_rule)", ds);
    const char *bits[] = {ds, "good_rule_bits", "is a data object, not a function", NULL};
    expect_refused(text, ADAPT_EFORMAT, bits);
    snprintf(text, sizeof text, "plugin(%s:ifunc_rule)", ds);
    struct quant_spec s;
    ck_assert_msg(quant_spec_parse(text, &s) == ADAPT_OK, "%s", adapt_error_message());
    float x[3] = {1.5f, -0x1.234p-7f, 3e30f}, y[3];
    ck_assert_int_eq(quant_array(&s, x, y, 3, (struct quant_key){1, 2, 3}, NULL, NULL), ADAPT_OK);
    ck_assert_int_eq(tu_first_bit_diff(x, y, 3), -1); /* the identity */
}
END_TEST

/* Which plugin a format text names, without loading it (what a checkpoint's stored format is
 * checked by before it is parsed), against what quant_spec_parse does with the same text. */
START_TEST(test_plugin_text)
{
    static const struct {
        const char *text, *inner; /* inner NULL: names no plugin */
    } cases[] = {
        {"plugin(a.so)", "a.so"},
        {"  plugin ( /x/y.so:f ) ", "/x/y.so:f"},
        {"plugin(libc.so.6:exit)", "libc.so.6:exit"},
        {"plugin(a(b).so)", "a(b).so"},
        {"plugin", ""},
        {"plugin(a.so", ""},
        {"plugin(a.so) x", ""},
        {"fixed(8,4)", NULL},
        {"pluginx(a.so)", NULL},
        {"PLUGIN(a.so)", NULL},
        {"(plugin(a.so))", NULL},
        {"", NULL},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char inner[QUANT_PLUGIN_TEXT_MAX + 1];
        int named = quant_spec_plugin_text(cases[c].text, inner);
        ck_assert_msg(named == (cases[c].inner != NULL), "'%s': %d", cases[c].text, named);
        if (named) ck_assert_str_eq(inner, cases[c].inner);
        struct quant_spec s;
        if (!named && quant_spec_parse(cases[c].text, &s) == ADAPT_OK)
            ck_assert_int_ne(s.format, QUANT_FORMAT_PLUGIN);
    }
}
END_TEST

/* A plugin named by data is loaded only when allowed: by file (realpath of both, or a bare name
 * exactly), by file and function, or by being loaded already (the configuration's). */
START_TEST(test_plugin_allowed)
{
    char ds[4096], abs[4096], dir[256], link[512], text[4200], with[4200], other[4200];
    snprintf(ds, sizeof ds, "%s/tests/plugins/data_symbols.so", builddir());
    ck_assert_ptr_nonnull(realpath(ds, abs));
    tu_tmpdir_make(dir, sizeof dir, "allow");
    ck_assert_int_eq(symlink(abs, tu_path(link, sizeof link, dir, "renamed.so")), 0);
    /* good_rule is never loaded: it is refused (good_rule_bits is data) */
    snprintf(text, sizeof text, "%s:good_rule", abs);
    snprintf(with, sizeof with, "%s:good_rule", link);
    snprintf(other, sizeof other, "%s:data_rule", abs);
    const char *none[] = {NULL, "data_symbols.so", "/nonexistent/data_symbols.so", other};
    ck_assert(!quant_plugin_allowed(text, NULL, 0));
    ck_assert(!quant_plugin_allowed(text, none, 4));
    const char *by_link[] = {"x.so", link}, *by_fn[] = {with}, *by_path[] = {ds};
    ck_assert(quant_plugin_allowed(text, by_link, 2)); /* another name of the same file */
    ck_assert(quant_plugin_allowed(text, by_fn, 1));
    ck_assert(quant_plugin_allowed(text, by_path, 1));
    /* a bare name is searched for by dlopen: only the same bare name allows it */
    const char *bare[] = {"libc.so.6"}, *bare_fn[] = {"libc.so.6:exit"},
               *bare_other[] = {"libc.so.6:abort"}, *as_path[] = {"./libc.so.6", "/libc.so.6"};
    ck_assert(quant_plugin_allowed("libc.so.6:exit", bare, 1));
    ck_assert(quant_plugin_allowed("libc.so.6:exit", bare_fn, 1));
    ck_assert(!quant_plugin_allowed("libc.so.6:exit", bare_other, 1));
    ck_assert(!quant_plugin_allowed("libc.so.6:exit", as_path, 2));
    ck_assert(!quant_plugin_allowed("libc.so.6", bare_fn, 1)); /* function libc: not exit */
    /* files that do not exist: the same text only */
    const char *missing[] = {"/nonexistent/a.so"};
    ck_assert(quant_plugin_allowed("/nonexistent/a.so", missing, 1));
    ck_assert(!quant_plugin_allowed("/nonexistent/b.so", missing, 1));
    ck_assert(!quant_plugin_allowed("", missing, 1));
    /* loaded already (as the configuration's formats are): that file and function */
    struct quant_spec s = example_spec(QUANT_ROUND_NEAREST);
    char ex[4096], ex_abs[4096];
    example_path(ex, sizeof ex);
    ck_assert_ptr_nonnull(realpath(ex, ex_abs));
    ck_assert(quant_plugin_valid(s.plugin));
    ck_assert(quant_plugin_allowed(ex_abs, NULL, 0));
    snprintf(text, sizeof text, "%s:bf16_sr", ex_abs);
    ck_assert(quant_plugin_allowed(text, NULL, 0));
    snprintf(text, sizeof text, "%s:bf16_sr_bits", ex_abs);
    ck_assert(!quant_plugin_allowed(text, NULL, 0));
    tu_tmpdir_remove(dir);
}
END_TEST

/* quant_plugin_forbid: no plugin loads afterwards (in a child process, which it cannot undo). */
START_TEST(test_plugin_forbid)
{
    char ex[4096], text[4200];
    example_path(ex, sizeof ex);
    snprintf(text, sizeof text, "plugin(%s)", ex);
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        quant_plugin_forbid();
        struct quant_spec s;
        enum adapt_status st = quant_spec_parse(text, &s);
        _exit(st == ADAPT_EUNSUPPORTED && strstr(adapt_error_message(), "turned off") ? 0 : 1);
    }
    int ws;
    ck_assert_int_eq(waitpid(pid, &ws, 0), pid);
    ck_assert_msg(WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "status 0x%x", ws);
}
END_TEST

int main(void)
{
    Suite *su = suite_create("plugin");
    TCase *tc = tcase_create("plugins");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_example_rule);
    tcase_add_test(tc, test_example_names);
    tcase_add_test(tc, test_example_threads_ref);
    tcase_add_test(tc, test_refused);
    tcase_add_test(tc, test_refused_files);
    tcase_add_test(tc, test_data_symbols);
    tcase_add_test(tc, test_plugin_text);
    tcase_add_test(tc, test_plugin_allowed);
    tcase_add_test(tc, test_plugin_forbid);
    suite_add_tcase(su, tc);
    return tu_run_suite(su, CK_FORK_GETENV);
}
