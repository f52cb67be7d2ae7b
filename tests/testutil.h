/* tests/testutil.h: helpers every Check test program links (tests/libtestutil.a).
 *
 * Only libc, Check and src/base below them, so any module's test can use them:
 * - temporary directories: a fresh one per test, removed with everything in it;
 * - files: paths below a directory, whole-file reads and writes, line counts;
 * - shell commands with their output kept (tu_run), trace comparisons without the
 *   fields that measure time;
 * - data sets that may be absent: a test says that it did nothing instead of passing
 *   silently (Check has no per-test skip);
 * - deterministic fills (Philox, so tests do not depend on libc's rand);
 * - float comparisons: bits, normalised mean squared error, ulps;
 * - the suite runner every main() ends with.
 * The layer helpers (they need src/net) are in tests/testutil_net.h.
 *
 * Test code only: failures are Check assertions, which end the running test.
 *
 *   static char tmpdir[256];
 *   static void setup(void) { tu_tmpdir_make(tmpdir, sizeof tmpdir, "io"); }
 *   static void teardown(void) { tu_tmpdir_remove(tmpdir); }
 *   ...
 *   char path[512];
 *   tu_write_text(tu_path(path, sizeof path, tmpdir, "a.ini"), "[train]\nepochs = 2\n");
 *   ...
 *   return tu_run_suite(s, CK_FORK_GETENV);
 */
#ifndef ADAPT_TESTS_TESTUTIL_H
#define ADAPT_TESTS_TESTUTIL_H

#include <check.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* ---- temporary directories ---- */

/* Creates /tmp/adapt-test-<tag>-XXXXXX (mkdtemp) and writes its path into dir. */
void tu_tmpdir_make(char *dir, size_t cap, const char *tag);
/* Removes dir and everything below it (as rm -rf; links are removed, not followed). */
void tu_tmpdir_remove(const char *dir);

/* ---- files ---- */

/* "<dir>/<name>" into buf (which must hold it); returns buf. */
const char *tu_path(char *buf, size_t cap, const char *dir, const char *name);
/* The whole file in a malloc'd buffer with a NUL after its *n bytes (n may be NULL). */
unsigned char *tu_read_file(const char *path, size_t *n);
void tu_write_file(const char *path, const void *data, size_t n);
void tu_write_text(const char *path, const char *text);
/* Number of newline characters in the file. */
size_t tu_count_lines(const char *path);

/* ---- commands ---- */

/* Runs the command (printf-style) in a shell with stderr joined to stdout, keeps the first
 * cap - 1 bytes of that output, NUL-terminated, in out; returns its exit status (128 + the
 * signal number when a signal ended it). */
int tu_run(char *out, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Copies the trace in to out without the fields that measure time (wall_s, images_per_s,
 * created), so that two runs' traces compare with cmp. */
void tu_strip_times(const char *in, const char *out);
/* 1 when the program (a path) can be run; otherwise says so on stderr and returns 0 (a test
 * program then exits with 99, a hard error for the test harness). */
int tu_have_program(const char *path);

/* ---- quick mode ---- */

/* 1 when the environment variable ADAPT_TEST_QUICK is set to something other than "" or "0".
 * The slowest tests then do less of the same work (fewer images, fewer sampled points, a
 * sparser sweep of bit patterns) with the same code paths and the same checks: CI's sanitizer
 * build, where everything runs several times slower, uses it (HACKING.md, "Tests"). */
int tu_quick(void);

/* ---- data sets ---- */

/* 1 when the file can be read. Otherwise prints on stderr that the running test skips the
 * checks that need it ("SKIP <test>: <path> is missing ...") and returns 0: call it at the
 * start of those checks and return when it says 0. */
int tu_have_data(const char *path);

/* ---- deterministic fills ---- */

/* v[i] uniform in [lo, hi) from Philox (seed, stream ADAPT_STREAM_INIT). */
void tu_fill_uniform(float *v, size_t n, uint64_t seed, float lo, float hi);
/* v[i] = k / 2^frac_bits with k uniform integer in [lo, hi]: values whose
 * sums and products stay exact in float, for bit-exact comparisons. */
void tu_fill_dyadic(float *v, size_t n, uint64_t seed, int lo, int hi, int frac_bits);
/* v[i] = magnitudes at least min_abs apart from 0 (|v| in [min_abs, max_abs], random sign). */
void tu_fill_away_from_zero(float *v, size_t n, uint64_t seed, float min_abs, float max_abs);

/* ---- float comparisons ---- */

/* 1 when a and b have the same bits, or are both NaN (inline: tests call it per element
 * over hundreds of millions of values). */
static inline int tu_same_bits(float a, float b)
{
    return (isnan(a) && isnan(b)) || memcmp(&a, &b, sizeof a) == 0;
}

/* One Check assertion for a whole array: when any element of got differs in its bits from want
 * (any NaN equals any NaN), fails with how many differ and the first one's index, both values
 * (%a) and bit patterns; got is the GPU's, want the CPU's in the CUDA tests' messages. */
void tu_expect_same_bits(const char *what, const float *got, const float *want, size_t n);
/* Index of the first element whose bits differ, -1 when a and b are bit-identical. */
long tu_first_bit_diff(const float *a, const float *b, size_t n);
/* sum (a - ref)^2 / sum ref^2 (0 when both are zero). */
double tu_nmse(const float *a, const double *ref, size_t n);
/* Units in the last place between float a and the double reference r,
 * measured in ulps of (float)r. */
double tu_ulp_error(float a, double r);

/* ---- main ---- */

/* A watchdog for the tests of tc when the suite runs in CK_NOFORK mode, where Check's own
 * tcase_set_timeout sets no timer: before each test an alarm of seconds (times
 * CK_TIMEOUT_MULTIPLIER when set, as Check does) is armed, and when it goes off the program
 * prints the name of the test case that timed out and exits 124, like timeout(1). Also sets Check's timeout,
 * which holds in fork mode. At most 8 test cases per program. */
void tu_watchdog(TCase *tc, const char *name, unsigned seconds);

/* Runs every test of s (fs: CK_FORK_GETENV, Check's default, or CK_NOFORK for programs
 * whose state does not survive fork, such as CUDA), prints Check's report (CK_VERBOSITY,
 * normal by default), frees s and returns EXIT_SUCCESS or EXIT_FAILURE for main. */
int tu_run_suite(Suite *s, enum fork_status fs);

#endif
