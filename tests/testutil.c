/* tests/testutil.c: see testutil.h. */
#define _GNU_SOURCE /* nftw, program_invocation_short_name */
#include "tests/testutil.h"

#include <errno.h>
#include <float.h>
#include <ftw.h>
#include <signal.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "src/base/rng.h"

/* ---- temporary directories ---- */

void tu_tmpdir_make(char *dir, size_t cap, const char *tag)
{
    int n = snprintf(dir, cap, "/tmp/adapt-test-%s-XXXXXX", tag);
    ck_assert_msg(n > 0 && (size_t)n < cap, "temporary directory name too long for %zu bytes", cap);
    ck_assert_msg(mkdtemp(dir) != NULL, "mkdtemp %s: %s", dir, strerror(errno));
}

static int tu_remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

void tu_tmpdir_remove(const char *dir)
{
    struct stat sb;
    if (lstat(dir, &sb) != 0 && errno == ENOENT) return;
    ck_assert_msg(nftw(dir, tu_remove_entry, 16, FTW_DEPTH | FTW_PHYS) == 0, "cannot remove %s: %s",
                  dir, strerror(errno));
}

/* ---- files ---- */

const char *tu_path(char *buf, size_t cap, const char *dir, const char *name)
{
    int n = snprintf(buf, cap, "%s/%s", dir, name);
    ck_assert_msg(n > 0 && (size_t)n < cap, "path %s/%s longer than %zu bytes", dir, name, cap);
    return buf;
}

unsigned char *tu_read_file(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s: %s", path, strerror(errno));
    ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
    long sz = ftell(f);
    ck_assert_int_ge(sz, 0);
    rewind(f);
    unsigned char *b = malloc((size_t)sz + 1);
    ck_assert_ptr_nonnull(b);
    ck_assert_uint_eq(fread(b, 1, (size_t)sz, f), (size_t)sz);
    fclose(f);
    b[sz] = 0;
    if (n) *n = (size_t)sz;
    return b;
}

void tu_write_file(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    ck_assert_msg(f != NULL, "cannot create %s: %s", path, strerror(errno));
    ck_assert_uint_eq(fwrite(data, 1, n, f), n);
    ck_assert_int_eq(fclose(f), 0);
}

void tu_write_text(const char *path, const char *text) { tu_write_file(path, text, strlen(text)); }

size_t tu_count_lines(const char *path)
{
    size_t n, lines = 0;
    unsigned char *b = tu_read_file(path, &n);
    for (size_t i = 0; i < n; i++) lines += b[i] == '\n';
    free(b);
    return lines;
}

/* ---- commands ---- */

int tu_run(char *out, size_t cap, const char *fmt, ...)
{
    char cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    ck_assert_msg(len >= 0 && (size_t)len + 5 < sizeof cmd, "command too long: %.200s...", cmd);
    strcat(cmd, " 2>&1");
    FILE *p = popen(cmd, "r");
    ck_assert_msg(p != NULL, "popen %s: %s", cmd, strerror(errno));
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

void tu_strip_times(const char *in, const char *out)
{
    char msg[4096];
    int rc = tu_run(msg, sizeof msg,
                    "sed -E 's/\"(wall_s|images_per_s|created)\":[^,}]*//g' %s > %s", in, out);
    ck_assert_msg(rc == 0, "cannot strip the times of %s: %s", in, msg);
}

int tu_have_program(const char *path)
{
    if (access(path, X_OK) == 0) return 1;
    fprintf(stderr, "%s: %s not built\n", program_invocation_short_name, path);
    return 0;
}

/* ---- data sets ---- */

int tu_quick(void)
{
    const char *q = getenv("ADAPT_TEST_QUICK");
    return q && q[0] && strcmp(q, "0") != 0;
}

int tu_have_data(const char *path)
{
    if (access(path, R_OK) == 0) return 1;
    fprintf(stderr, "SKIP %s: %s is missing: the checks that need this data set did nothing\n",
            tcase_name(), path);
    return 0;
}

/* ---- deterministic fills ---- */

void tu_fill_uniform(float *v, size_t n, uint64_t seed, float lo, float hi)
{
    struct adapt_rng r;
    adapt_rng_init(&r, seed, ADAPT_STREAM_INIT);
    for (size_t i = 0; i < n; i++) v[i] = lo + (hi - lo) * (float)adapt_rng_uniform(&r);
}

void tu_fill_dyadic(float *v, size_t n, uint64_t seed, int lo, int hi, int frac_bits)
{
    struct adapt_rng r;
    adapt_rng_init(&r, seed, ADAPT_STREAM_INIT);
    const float scale = ldexpf(1.0f, -frac_bits);
    for (size_t i = 0; i < n; i++)
        v[i] = (float)(lo + (int)adapt_rng_below(&r, (uint32_t)(hi - lo + 1))) * scale;
}

void tu_fill_away_from_zero(float *v, size_t n, uint64_t seed, float min_abs, float max_abs)
{
    struct adapt_rng r;
    adapt_rng_init(&r, seed, ADAPT_STREAM_INIT);
    for (size_t i = 0; i < n; i++) {
        float m = min_abs + (max_abs - min_abs) * (float)adapt_rng_uniform(&r);
        v[i] = (adapt_rng_u32(&r) & 1u) ? m : -m;
    }
}

/* ---- float comparisons ---- */

long tu_first_bit_diff(const float *a, const float *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], sizeof(float)) != 0) return (long)i;
    return -1;
}

double tu_nmse(const float *a, const double *ref, size_t n)
{
    double e = 0.0, s = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - ref[i];
        e += d * d;
        s += ref[i] * ref[i];
    }
    if (s == 0.0) return e == 0.0 ? 0.0 : INFINITY;
    return e / s;
}

double tu_ulp_error(float a, double r)
{
    float rf = (float)r;
    if (isnan(r)) return isnan(a) ? 0.0 : INFINITY;
    if (isinf(r)) return a == rf ? 0.0 : INFINITY;
    int e;
    frexpf(rf == 0.0f ? FLT_MIN : rf, &e);
    int lsb = (e - 1 < FLT_MIN_EXP - 1 ? FLT_MIN_EXP - 1 : e - 1) - (FLT_MANT_DIG - 1);
    return fabs((double)a - r) / ldexp(1.0, lsb);
}

void tu_expect_same_bits(const char *what, const float *got, const float *want, size_t n)
{
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++)
        if (!tu_same_bits(got[i], want[i]) && bad++ == 0) first = i;
    if (bad == 0) return;
    uint32_t gb, wb;
    memcpy(&gb, &got[first], sizeof gb);
    memcpy(&wb, &want[first], sizeof wb);
    ck_abort_msg("%s: %zu of %zu elements differ; first [%zu]: CPU %a (0x%08x) GPU %a (0x%08x)",
                 what, bad, n, first, (double)want[first], (unsigned)wb, (double)got[first],
                 (unsigned)gb);
}

/* ---- main ---- */

enum { WD_SLOTS = 8 };
static unsigned wd_seconds[WD_SLOTS];
static const char *wd_case[WD_SLOTS];
static volatile sig_atomic_t wd_current = -1;

static void wd_fire(int sig)
{
    (void)sig;
    char msg[256];
    int k = wd_current;
    int n = snprintf(msg, sizeof msg, "\nwatchdog: a test of case '%s' ran longer than %u s; "
                     "stopped (exit 124)\n", k >= 0 ? wd_case[k] : "?", k >= 0 ? wd_seconds[k] : 0);
    if (n > 0) (void)!write(STDERR_FILENO, msg, (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1);
    _exit(124);
}

static void wd_arm(int k)
{
    double mult = 1.0;
    const char *m = getenv("CK_TIMEOUT_MULTIPLIER");
    if (m && *m) {
        char *end;
        double v = strtod(m, &end);
        if (*end == '\0' && v > 0 && v < 1e6) mult = v;
    }
    double s = wd_seconds[k] * mult;
    wd_current = k;
    signal(SIGALRM, wd_fire);
    alarm(s < 1 ? 1 : s > 1e8 ? 100000000u : (unsigned)s);
}

static void wd_disarm(void)
{
    alarm(0);
    wd_current = -1;
}

#define WD_SETUP(k) static void wd_setup##k(void) { wd_arm(k); }
WD_SETUP(0) WD_SETUP(1) WD_SETUP(2) WD_SETUP(3) WD_SETUP(4) WD_SETUP(5) WD_SETUP(6) WD_SETUP(7)
static void (*const wd_setup[WD_SLOTS])(void) = {
    wd_setup0, wd_setup1, wd_setup2, wd_setup3, wd_setup4, wd_setup5, wd_setup6, wd_setup7,
};

void tu_watchdog(TCase *tc, const char *name, unsigned seconds)
{
    static int used;
    if (used == WD_SLOTS) {
        fprintf(stderr, "tu_watchdog: more than %d test cases\n", WD_SLOTS);
        abort();
    }
    wd_seconds[used] = seconds;
    wd_case[used] = name;
    tcase_set_timeout(tc, seconds);
    tcase_add_checked_fixture(tc, wd_setup[used], wd_disarm);
    used++;
}

int tu_run_suite(Suite *s, enum fork_status fs)
{
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, fs);
    srunner_run_all(sr, CK_ENV);
    int nf = srunner_ntests_failed(sr);
    srunner_free(sr);
    return nf ? EXIT_FAILURE : EXIT_SUCCESS;
}
