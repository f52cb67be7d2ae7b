/* tests/test_base.c: src/base (status, RNG) and src/tensor. */
#include <check.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "src/base/fileio.h"
#include "src/base/rng.h"
#include "src/base/status.h"
#include "src/base/version.h"
#include "src/cuda/device.h"
#include "src/net/tensor.h"
#include "tests/testutil.h"

/* Known-answer vectors for Philox4x32-10 from Random123's kat_vectors file
 * (lines "philox4x32 10 ..."). */
START_TEST(test_philox_kat)
{
    static const uint32_t in[3][6] = {
        {0, 0, 0, 0, 0, 0},
        {0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
        {0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u, 0xa4093822u, 0x299f31d0u}};
    static const uint32_t out[3][4] = {
        {0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u},
        {0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu},
        {0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}};
    for (int t = 0; t < 3; t++) {
        adapt_u32x4 c;
        for (int i = 0; i < 4; i++) c.v[i] = in[t][i];
        adapt_u32x4 r = adapt_philox4x32_10(c, in[t][4], in[t][5]);
        for (int i = 0; i < 4; i++) ck_assert_uint_eq(r.v[i], out[t][i]);
    }
}
END_TEST

/* The (seed, stream, index) mapping is cuRAND's: index i lives in block i/4, lane i%4. */
START_TEST(test_rng_index_mapping)
{
    uint64_t seed = 0x123456789abcdefULL, stream = 77;
    adapt_u32x4 b = adapt_rng_block(seed, stream, 5);
    for (int lane = 0; lane < 4; lane++)
        ck_assert_uint_eq(adapt_rng_u32_at(seed, stream, 20 + lane), b.v[lane]);
    struct adapt_rng r;
    adapt_rng_init(&r, seed, stream);
    for (int i = 0; i < 24; i++) {
        uint32_t v = adapt_rng_u32(&r);
        ck_assert_uint_eq(v, adapt_rng_u32_at(seed, stream, (uint64_t)i));
    }
    /* different streams give different bits */
    ck_assert_uint_ne(adapt_rng_u32_at(seed, 1, 0), adapt_rng_u32_at(seed, 2, 0));
}
END_TEST

/* adapt_rng_below is unbiased: 60000 draws in [0, 6) land within 5 sigma of
 * 10000 per bin (binomial sd = sqrt(60000 * 1/6 * 5/6) = 91.3). */
START_TEST(test_rng_below_uniform)
{
    struct adapt_rng r;
    adapt_rng_init(&r, 2385, ADAPT_STREAM_SHUFFLE);
    int cnt[6] = {0};
    for (int i = 0; i < 60000; i++) {
        uint32_t v = adapt_rng_below(&r, 6);
        ck_assert_uint_lt(v, 6);
        cnt[v]++;
    }
    for (int i = 0; i < 6; i++) ck_assert_int_lt(abs(cnt[i] - 10000), 457);
    double u = adapt_rng_uniform(&r);
    ck_assert(u >= 0.0 && u < 1.0);
    ck_assert(adapt_u32_to_unit_float(0xffffffffu) < 1.0f);
}
END_TEST

START_TEST(test_error_record)
{
    adapt_error_clear();
    ck_assert_str_eq(adapt_error_message(), "");
    enum adapt_status st = ADAPT_ERROR(ADAPT_EFORMAT, "%s: line %d: bad", "x.ini", 3);
    ck_assert_int_eq(st, ADAPT_EFORMAT);
    ck_assert_str_eq(adapt_error_message(), "x.ini: line 3: bad");
    ck_assert_ptr_nonnull(strstr(adapt_error_where(), "test_base.c"));
    ck_assert_str_eq(adapt_status_name(ADAPT_ENOMEM), "out of memory");
}
END_TEST

/* A message may quote the previous one: ADAPT_ERROR formats before it stores,
 * so an argument that is the message buffer itself arrives intact. */
START_TEST(test_error_aliasing)
{
    ADAPT_ERROR(ADAPT_EINVAL, "unknown rounding '%s'", "up");
    enum adapt_status st = ADAPT_ERROR(ADAPT_EFORMAT, "policy.format = q8: %s",
                                       adapt_error_message());
    ck_assert_int_eq(st, ADAPT_EFORMAT);
    ck_assert_str_eq(adapt_error_message(), "policy.format = q8: unknown rounding 'up'");
    /* twice over, and longer than half the buffer */
    char big[700];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    ADAPT_ERROR(ADAPT_EINVAL, "%s", big);
    ADAPT_ERROR(ADAPT_EINVAL, "a: %s", adapt_error_message());
    ADAPT_ERROR(ADAPT_EINVAL, "b: %s", adapt_error_message());
    ck_assert_int_eq(strncmp(adapt_error_message(), "b: a: xxx", 9), 0);
    ck_assert_uint_eq(strlen(adapt_error_message()), 6 + sizeof big - 1);
}
END_TEST

START_TEST(test_arena_alignment)
{
    struct adapt_arena a;
    size_t need = adapt_arena_take_size(3) + adapt_arena_take_size(100) + adapt_arena_take_size(1);
    ck_assert_int_eq(adapt_arena_alloc(&a, need), ADAPT_OK);
    float *p = adapt_arena_take(&a, 3);
    float *q = adapt_arena_take(&a, 100);
    float *s = adapt_arena_take(&a, 1);
    ck_assert_uint_eq((uintptr_t)p % 64, 0);
    ck_assert_uint_eq((uintptr_t)q % 64, 0);
    ck_assert_uint_eq((uintptr_t)s % 64, 0);
    ck_assert_uint_eq(a.used, need);
    for (int i = 0; i < 100; i++) ck_assert(q[i] == 0.0f);
    adapt_arena_free(&a);

    struct adapt_tensor t;
    int d[4] = {6, 1, 5, 5};
    char buf[64];
    adapt_tensor_shape(&t, 4, d);
    ck_assert_uint_eq(t.numel, 150);
    ck_assert_str_eq(adapt_tensor_shape_str(&t, buf, sizeof buf), "(6, 1, 5, 5)");
}
END_TEST

/* adapt_utf8_invalid_at against the well-formed byte sequences of RFC 3629, section 4 (Table
 * 3-7 of the Unicode Standard): the boundaries of each row pass, and one step outside them
 * (overlong forms, surrogates, above U+10FFFF, stray continuation bytes, cut sequences) is
 * reported at the sequence's first byte. */
/* adapt_version_line: the text a trace header keeps for a CPU or a library, one line of
 * printable ASCII: tabs, a control byte and a UTF-8 e-acute (two bytes outside ASCII) become
 * white space, runs of it one space, the ends trimmed; a buffer too small cuts the line */
START_TEST(test_version_line)
{
    char b[64], s[8];
    ck_assert_str_eq(adapt_version_line(b, sizeof b, "  Intel(R)\tXeon\x01 \xc3\xa9 8480+ \n"),
                     "Intel(R) Xeon 8480+");
    ck_assert_str_eq(adapt_version_line(b, sizeof b, "OpenBLAS 0.3.21 Haswell "),
                     "OpenBLAS 0.3.21 Haswell");
    ck_assert_str_eq(adapt_version_line(b, sizeof b, " \t\r\n"), "");
    ck_assert_str_eq(adapt_version_line(s, sizeof s, "AMD EPYC 9B14"), "AMD EPY");
}
END_TEST

START_TEST(test_utf8_check)
{
    static const struct {
        const char *s;
        long bad;
    } cases[] = {
        {"", -1},
        {"plain ASCII ~\x7f", -1},
        {"\xc2\x80 \xdf\xbf", -1},                 /* U+0080, U+07FF */
        {"\xe0\xa0\x80 \xef\xbf\xbf", -1},         /* U+0800, U+FFFF */
        {"\xed\x9f\xbf \xee\x80\x80", -1},         /* U+D7FF, U+E000 */
        {"\xf0\x90\x80\x80 \xf4\x8f\xbf\xbf", -1}, /* U+10000, U+10FFFF */
        {"caf\xc3\xa9", -1},
        {"caf\xe9", 3},                           /* Latin-1 */
        {"ab\x80", 2},                            /* a lone continuation byte */
        {"\xc0\xaf", 0},                          /* overlong '/' */
        {"\xc1\xbf", 0},
        {"\xe0\x9f\xbf", 0},                      /* overlong U+07FF */
        {"\xed\xa0\x80", 0},                      /* U+D800, a surrogate */
        {"x\xf0\x8f\xbf\xbf", 1},                 /* overlong U+FFFF */
        {"\xf4\x90\x80\x80", 0},                  /* U+110000 */
        {"\xf5\x80\x80\x80", 0},
        {"\xff", 0},
        {"ok\xe2\x82", 2},                        /* cut short at the end */
        {"\xe2\x28\xa1", 0},                      /* a bad third byte */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        long got = adapt_utf8_invalid_at(cases[i].s, strlen(cases[i].s));
        ck_assert_msg(got == cases[i].bad, "case %zu: %ld, expected %ld", i, got, cases[i].bad);
    }
    /* the length bounds the scan: a sequence cut by n is cut */
    ck_assert_int_eq(adapt_utf8_invalid_at("\xc3\xa9", 1), 0);
    ck_assert_int_eq(adapt_utf8_invalid_at("a\xff" "b", 1), -1);
}
END_TEST

/* adapt_fileio_remove_tmp removes what dead writers left, this process's temporaries included,
 * and leaves alone the write in progress of another live process (the pid in the name). */
START_TEST(test_remove_tmp_spares_live_writers)
{
    char dir[256], p[512];
    tu_tmpdir_make(dir, sizeof dir, "tmpfiles");
    pid_t dead = fork();
    if (dead == 0) _exit(0);
    ck_assert_int_gt(dead, 0);
    pid_t live = fork();
    if (live == 0) {
        pause();
        _exit(0);
    }
    ck_assert_int_gt(live, 0);
    ck_assert_int_eq(waitpid(dead, NULL, 0), dead);
    const long pids[3] = {(long)getpid(), (long)dead, (long)live};
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s/f%d.tmp.%ld", dir, i, pids[i]);
        tu_write_text(p, "x");
    }
    tu_write_text(tu_path(p, sizeof p, dir, "kept.tmp.x"), "not a temporary");
    int n = -1;
    ck_assert_int_eq(adapt_fileio_remove_tmp(dir, &n), ADAPT_OK);
    kill(live, SIGKILL);
    waitpid(live, NULL, 0);
    ck_assert_int_eq(n, 2);
    struct stat sb;
    snprintf(p, sizeof p, "%s/f2.tmp.%ld", dir, (long)live);
    ck_assert_msg(stat(p, &sb) == 0, "the live writer's %s was removed", p);
    for (int i = 0; i < 2; i++) {
        snprintf(p, sizeof p, "%s/f%d.tmp.%ld", dir, i, pids[i]);
        ck_assert_msg(stat(p, &sb) != 0, "%s was left", p);
    }
    ck_assert_int_eq(stat(tu_path(p, sizeof p, dir, "kept.tmp.x"), &sb), 0);
    tu_tmpdir_remove(dir);
}
END_TEST

/* Without a GPU (or without a CUDA build) the device query reports zero and a reason. */
START_TEST(test_cuda_query_runs)
{
    char desc[256] = "";
    int n = adapt_cuda_device_count(desc, sizeof desc);
    ck_assert_int_ge(n, 0);
    ck_assert(strlen(desc) > 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("base");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_philox_kat);
    tcase_add_test(tc, test_rng_index_mapping);
    tcase_add_test(tc, test_rng_below_uniform);
    tcase_add_test(tc, test_error_record);
    tcase_add_test(tc, test_error_aliasing);
    tcase_add_test(tc, test_arena_alignment);
    tcase_add_test(tc, test_utf8_check);
    tcase_add_test(tc, test_version_line);
    tcase_add_test(tc, test_remove_tmp_spares_live_writers);
    suite_add_tcase(s, tc);
    TCase *tcu = tcase_create("cuda");
    tcase_add_test(tcu, test_cuda_query_runs);
    suite_add_tcase(s, tcu);
    /* CUDA does not survive fork(): run without forking. */
    return tu_run_suite(s, CK_NOFORK);
}
