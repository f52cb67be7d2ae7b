/* tests/test_io_safetensors.c: src/base/safetensors, part of tests/test_io: a checkpoint's
 * round trip, its byte layout, a file written by hand from the format's description, a table of
 * corrupt files each refused with what is wrong, lengths and truncation, and atomic replacement
 * (a failed write leaves the old file as it was). */
#include <check.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "src/base/safetensors.h"
#include "src/trace/trace.h"
#include "tests/test_io.h"
#include "tests/testutil.h"

/* The checkpoint used by several tests: two F32 and two I64 tensors, two metadata keys. */
static float weight[150], bias[6];
static int64_t counts[3] = {2385, -7, INT64_MAX};
static int64_t step_no = 123456789012LL;

static void fill(void)
{
    /* high-entropy values, exactly representable: (i * 2.385) rounded to float */
    for (int i = 0; i < 150; i++) weight[i] = (float)((i - 75) * 2.385);
    for (int i = 0; i < 6; i++) bias[i] = (float)(-0.5 + i * 0.02385);
}

static enum adapt_status write_ckpt(const char *path)
{
    fill();
    struct adapt_safetensors_tensor t[4] = {
        {"weight", ADAPT_ST_F32, 4, {6, 1, 5, 5}, weight},
        {"bias", ADAPT_ST_F32, 1, {6}, bias},
        {"step", ADAPT_ST_I64, 0, {0}, &step_no},
        {"counts", ADAPT_ST_I64, 1, {3}, counts},
    };
    struct adapt_safetensors_meta m[2] = {{"format", "adapt-sim checkpoint"}, {"epoch", "7"}};
    return adapt_safetensors_write(path, t, 4, m, 2);
}

START_TEST(test_st_roundtrip)
{
    char path[256];
    tmp_file(path, sizeof path, "ckpt.safetensors");
    ck_assert_int_eq(write_ckpt(path), ADAPT_OK);
    struct adapt_safetensors *f;
    ck_assert_int_eq(adapt_safetensors_load(&f, path), ADAPT_OK);
    ck_assert_int_eq(f->n_tensors, 4);
    ck_assert_int_eq(f->n_meta, 2);
    ck_assert_str_eq(adapt_safetensors_meta_get(f, "format"), "adapt-sim checkpoint");
    ck_assert_str_eq(adapt_safetensors_meta_get(f, "epoch"), "7");
    ck_assert_ptr_null(adapt_safetensors_meta_get(f, "missing"));

    const struct adapt_safetensors_tensor *w = adapt_safetensors_find(f, "weight");
    ck_assert_ptr_nonnull(w);
    ck_assert_int_eq(w->dtype, ADAPT_ST_F32);
    ck_assert_int_eq(w->ndim, 4);
    ck_assert_int_eq(w->shape[0], 6);
    ck_assert_int_eq(w->shape[3], 5);
    ck_assert_int_eq(adapt_safetensors_numel(w), 150);
    ck_assert_int_eq(((uintptr_t)w->data) % 4, 0);
    ck_assert_int_eq(memcmp(w->data, weight, sizeof weight), 0);
    const struct adapt_safetensors_tensor *s = adapt_safetensors_find(f, "step");
    ck_assert_int_eq(s->ndim, 0);
    ck_assert_int_eq(adapt_safetensors_numel(s), 1);
    ck_assert_int_eq(((uintptr_t)s->data) % 8, 0);
    ck_assert_ptr_null(adapt_safetensors_find(f, "nope"));

    float b[6];
    int64_t c[3], shape6[1] = {6}, shape3[1] = {3}, shape5[1] = {5};
    ck_assert_int_eq(adapt_safetensors_copy(f, "bias", ADAPT_ST_F32, 1, shape6, b), ADAPT_OK);
    ck_assert_int_eq(memcmp(b, bias, sizeof b), 0);
    ck_assert_int_eq(adapt_safetensors_copy(f, "counts", ADAPT_ST_I64, 1, shape3, c), ADAPT_OK);
    ck_assert_int_eq(c[0], 2385);
    ck_assert_int_eq(c[1], -7);
    ck_assert_int_eq(c[2], INT64_MAX);
    int64_t st;
    ck_assert_int_eq(adapt_safetensors_copy(f, "step", ADAPT_ST_I64, 0, NULL, &st), ADAPT_OK);
    ck_assert_int_eq(st, 123456789012LL);
    ck_assert_int_eq(adapt_safetensors_copy(f, "bias", ADAPT_ST_F32, 1, shape5, b), ADAPT_EINVAL);
    ck_assert_msg_has("tensor \"bias\" is F32 (6), expected F32 (5)");
    ck_assert_int_eq(adapt_safetensors_copy(f, "bias", ADAPT_ST_F64, 1, shape6, b), ADAPT_EINVAL);
    ck_assert_int_eq(adapt_safetensors_copy(f, "gamma", ADAPT_ST_F32, 1, shape6, b), ADAPT_ENOENT);
    ck_assert_msg_has("no tensor \"gamma\"");
    adapt_safetensors_free(f);

    /* no tensors and no metadata: "{}" padded to 8 bytes */
    ck_assert_int_eq(adapt_safetensors_write(path, NULL, 0, NULL, 0), ADAPT_OK);
    size_t n;
    unsigned char *raw = tu_read_file(path, &n);
    ck_assert_uint_eq(n, 16);
    ck_assert_int_eq(memcmp(raw, "\x08\0\0\0\0\0\0\0{}      ", 16), 0);
    free(raw);
    ck_assert_int_eq(adapt_safetensors_load(&f, path), ADAPT_OK);
    ck_assert_int_eq(f->n_tensors, 0);
    adapt_safetensors_free(f);
}
END_TEST

START_TEST(test_st_layout)
{
    char path[256];
    tmp_file(path, sizeof path, "ckpt.safetensors");
    ck_assert_int_eq(write_ckpt(path), ADAPT_OK);
    size_t n;
    unsigned char *raw = tu_read_file(path, &n);
    uint64_t hlen = 0;
    for (int i = 0; i < 8; i++) hlen |= (uint64_t)raw[i] << (8 * i);
    ck_assert_uint_eq(hlen % 8, 0);
    /* The expected header, compact JSON in the writer's order: metadata first, then
     * I64 tensors by name (counts 3*8 = 24 bytes, step 8), then F32 by name
     * (bias 6*4 = 24, weight 150*4 = 600). */
    const char *want =
        "{\"__metadata__\":{\"format\":\"adapt-sim checkpoint\",\"epoch\":\"7\"},"
        "\"counts\":{\"dtype\":\"I64\",\"shape\":[3],\"data_offsets\":[0,24]},"
        "\"step\":{\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":[24,32]},"
        "\"bias\":{\"dtype\":\"F32\",\"shape\":[6],\"data_offsets\":[32,56]},"
        "\"weight\":{\"dtype\":\"F32\",\"shape\":[6,1,5,5],\"data_offsets\":[56,656]}}";
    size_t wl = strlen(want);
    ck_assert_uint_eq(hlen, (wl + 7) / 8 * 8);
    ck_assert_int_eq(memcmp(raw + 8, want, wl), 0);
    for (size_t i = wl; i < hlen; i++) ck_assert_int_eq(raw[8 + i], ' ');
    ck_assert_uint_eq(n, 8 + hlen + 656);
    const unsigned char *data = raw + 8 + hlen;
    ck_assert_int_eq(memcmp(data, counts, 24), 0);
    ck_assert_int_eq(memcmp(data + 24, &step_no, 8), 0);
    ck_assert_int_eq(memcmp(data + 32, bias, 24), 0);
    ck_assert_int_eq(memcmp(data + 56, weight, 600), 0);
    /* little-endian on disk: the first count, 2385 = 0x0951 */
    ck_assert_int_eq(data[0], 0x51);
    ck_assert_int_eq(data[1], 0x09);
    free(raw);
}
END_TEST

/* Builds a file: 8-byte length, the header text (unpadded), then the data. */
static void write_st(const char *path, const char *header, const void *data, size_t n)
{
    size_t h = strlen(header);
    unsigned char *b = malloc(8 + h + n);
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)h >> (8 * i));
    memcpy(b + 8, header, h);
    if (n) memcpy(b + 8 + h, data, n);
    tu_write_file(path, b, 8 + h + n);
    free(b);
}

START_TEST(test_st_hand_written)
{
    char path[256];
    tmp_file(path, sizeof path, "hand.safetensors");
    /* keys in no particular order, metadata last, a zero-size tensor, and no padding
     * (the header length need not be a multiple of 8) */
    const char *hdr = "{\"b\":{\"dtype\":\"I64\",\"shape\":[2],\"data_offsets\":[0,16]},"
                      "\"a\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[16,32]},"
                      "\"c\":{\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":[32,35]},"
                      "\"e\":{\"dtype\":\"F32\",\"shape\":[0,4],\"data_offsets\":[35,35]},"
                      "\"__metadata__\":{\"k\":\"v\",\"name\":\"hand\"}}";
    unsigned char data[35];
    int64_t bv[2] = {-2385, 42};
    float av[4] = {2.385f, -0.5f, 1e-30f, 65504.0f};
    memcpy(data, bv, 16);
    memcpy(data + 16, av, 16);
    data[32] = 7;
    data[33] = 0;
    data[34] = 255;
    write_st(path, hdr, data, sizeof data);
    struct adapt_safetensors *f;
    ck_assert_int_eq(adapt_safetensors_load(&f, path), ADAPT_OK);
    ck_assert_int_eq(f->n_tensors, 4);
    ck_assert_str_eq(f->tensors[0].name, "b"); /* file order */
    ck_assert_str_eq(adapt_safetensors_meta_get(f, "name"), "hand");
    int64_t b[2], s2[1] = {2}, s22[2] = {2, 2}, s3[1] = {3};
    float a[4];
    unsigned char c[3];
    ck_assert_int_eq(adapt_safetensors_copy(f, "b", ADAPT_ST_I64, 1, s2, b), ADAPT_OK);
    ck_assert_int_eq(b[0], -2385);
    ck_assert_int_eq(b[1], 42);
    ck_assert_int_eq(adapt_safetensors_copy(f, "a", ADAPT_ST_F32, 2, s22, a), ADAPT_OK);
    ck_assert_int_eq(memcmp(a, av, 16), 0);
    ck_assert_int_eq(adapt_safetensors_copy(f, "c", ADAPT_ST_U8, 1, s3, c), ADAPT_OK);
    ck_assert_int_eq(c[2], 255);
    const struct adapt_safetensors_tensor *e = adapt_safetensors_find(f, "e");
    ck_assert_int_eq(adapt_safetensors_numel(e), 0);
    adapt_safetensors_free(f);
}
END_TEST

struct bad_st {
    const char *header;  /* NULL: raw bytes below */
    size_t data_len;
    const char *what;
};

#define T8 "{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":"
static const struct bad_st bad_sts[] = {
    {"{\"a\":" T8 "[0,8]}}", 4, "data_offsets [0, 8] out of bounds (the data buffer has 4 bytes)"},
    {"{\"a\":" T8 "[0,8]}", 8, "malformed JSON"},
    {"[1,2]", 0, "does not start with a JSON object"},
    {"{\"a\":" T8 "[0,12]}}", 12, "F32 (2) needs 8 bytes but data_offsets [0, 12] hold 12"},
    {"{\"a\":" T8 "[0,8]},\"b\":" T8 "[4,12]}}", 12, "overlap the previous tensor"},
    {"{\"a\":" T8 "[0,8]},\"b\":" T8 "[12,20]}}", 20, "gap before data_offsets [12, 20]"},
    {"{\"a\":" T8 "[0,8]},\"a\":" T8 "[8,16]}}", 16, "duplicate name"},
    {"{\"a\":{\"dtype\":\"F128\",\"shape\":[2],\"data_offsets\":[0,32]}}", 32,
     "unknown dtype \"F128\""},
    {"{\"a\":" T8 "[0,8]},\"__metadata__\":{\"epoch\":7}}", 8,
     "__metadata__ value of \"epoch\" is not a string"},
    {"{\"a\":" T8 "[0,8]}}", 12, "the tensors cover 8 bytes but the data buffer has 12"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8,
     "non-negative integers"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", 8,
     "invalid data_offsets [8, 0]"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8, "needs \"dtype\""},
};

START_TEST(test_st_corrupt)
{
    const struct bad_st *b = &bad_sts[_i];
    char path[256];
    unsigned char zeros[64] = {0};
    tmp_file(path, sizeof path, "bad.safetensors");
    write_st(path, b->header, zeros, b->data_len);
    struct adapt_safetensors *f = NULL;
    adapt_error_clear();
    ck_assert_int_eq(adapt_safetensors_load(&f, path), ADAPT_EFORMAT);
    ck_assert_msg_has("bad.safetensors");
    ck_assert_msg_has(b->what);
    ck_assert_ptr_null(f);
}
END_TEST

START_TEST(test_st_corrupt_length_and_truncation)
{
    char path[256], cut[256];
    struct adapt_safetensors *f;
    tmp_file(path, sizeof path, "ckpt.safetensors");
    ck_assert_int_eq(write_ckpt(path), ADAPT_OK);
    size_t n;
    unsigned char *raw = tu_read_file(path, &n);

    /* shorter than the length field */
    tmp_file(cut, sizeof cut, "short.safetensors");
    tu_write_file(cut, raw, 5);
    ck_assert_int_eq(adapt_safetensors_load(&f, cut), ADAPT_EFORMAT);
    ck_assert_msg_has("short.safetensors: 5 bytes: too short");

    /* header length beyond the end of the file */
    unsigned char big[16] = {0xff, 0xff, 0, 0, 0, 0, 0, 0, '{', '}', ' ', ' ', ' ', ' ', ' ', ' '};
    tu_write_file(cut, big, sizeof big);
    ck_assert_int_eq(adapt_safetensors_load(&f, cut), ADAPT_EFORMAT);
    ck_assert_msg_has("header length 65535 does not fit the file (16 bytes");

    /* the data cut short by 100 bytes: the last tensor (weight) runs out of the file */
    tu_write_file(cut, raw, n - 100);
    ck_assert_int_eq(adapt_safetensors_load(&f, cut), ADAPT_EFORMAT);
    ck_assert_msg_has("tensor \"weight\": data_offsets [56, 656] out of bounds");

    /* the header cut in the middle */
    tu_write_file(cut, raw, 40);
    ck_assert_int_eq(adapt_safetensors_load(&f, cut), ADAPT_EFORMAT);
    ck_assert_msg_has("does not fit the file");

    tmp_file(cut, sizeof cut, "absent.safetensors");
    ck_assert_int_eq(adapt_safetensors_load(&f, cut), ADAPT_ENOENT);
    ck_assert_msg_has("absent.safetensors");
    free(raw);
}
END_TEST

START_TEST(test_st_atomic)
{
    char path[256], tmp[300], other[256];
    size_t n0, n1;
    tmp_file(path, sizeof path, "ckpt.safetensors");
    ck_assert_int_eq(write_ckpt(path), ADAPT_OK);
    unsigned char *orig = tu_read_file(path, &n0);
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    float x[4] = {1.5f, 2.385f, -3.0f, 0.25f};
    struct adapt_safetensors_tensor t = {"x", ADAPT_ST_F32, 1, {4}, x};

    /* a directory that does not exist */
    tmp_file(other, sizeof other, "missing/ckpt.safetensors");
    ck_assert_int_eq(adapt_safetensors_write(other, &t, 1, NULL, 0), ADAPT_EIO);
    ck_assert_msg_has("missing/ckpt.safetensors");
    ck_assert_msg_has("No such file");

    /* the temporary file cannot be created (its name is taken by a directory) */
    ck_assert_int_eq(mkdir(tmp, 0755), 0);
    ck_assert_int_eq(adapt_safetensors_write(path, &t, 1, NULL, 0), ADAPT_EIO);
    ck_assert_int_eq(rmdir(tmp), 0);
    unsigned char *now = tu_read_file(path, &n1);
    ck_assert_uint_eq(n1, n0);
    ck_assert_int_eq(memcmp(now, orig, n0), 0);
    free(now);

    /* the rename fails (the target is a non-empty directory): the temporary file is removed */
    tmp_file(other, sizeof other, "dir.safetensors");
    ck_assert_int_eq(mkdir(other, 0755), 0);
    char inner[300];
    snprintf(inner, sizeof inner, "%s/keep", other);
    tu_write_file(inner, "k", 1);
    ck_assert_int_eq(adapt_safetensors_write(other, &t, 1, NULL, 0), ADAPT_EIO);
    ck_assert_msg_has("cannot rename");
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", other, (long)getpid());
    ck_assert(!file_exists(tmp));
    ck_assert(file_exists(inner));

    /* an invalid argument writes nothing */
    struct adapt_safetensors_tensor dup[2] = {t, t};
    ck_assert_int_eq(adapt_safetensors_write(path, dup, 2, NULL, 0), ADAPT_EINVAL);
    ck_assert_msg_has("duplicate tensor name \"x\"");
    struct adapt_safetensors_tensor nodata = {"y", ADAPT_ST_F32, 1, {4}, NULL};
    ck_assert_int_eq(adapt_safetensors_write(path, &nodata, 1, NULL, 0), ADAPT_EINVAL);
    struct adapt_safetensors_tensor neg = {"y", ADAPT_ST_F32, 2, {4, -1}, x};
    ck_assert_int_eq(adapt_safetensors_write(path, &neg, 1, NULL, 0), ADAPT_EINVAL);
    ck_assert_msg_has("invalid shape (4, -1)");
    struct adapt_safetensors_meta m[2] = {{"a", "1"}, {"a", "2"}};
    ck_assert_int_eq(adapt_safetensors_write(path, &t, 1, m, 2), ADAPT_EINVAL);
    now = tu_read_file(path, &n1);
    ck_assert_uint_eq(n1, n0);
    ck_assert_int_eq(memcmp(now, orig, n0), 0);
    free(now);

    /* an unwritable directory (permissions do not stop root, so only as another user) */
    if (geteuid() != 0) {
        ck_assert_int_eq(chmod(tmpdir, 0500), 0);
        ck_assert_int_eq(adapt_safetensors_write(path, &t, 1, NULL, 0), ADAPT_EIO);
        ck_assert_int_eq(chmod(tmpdir, 0700), 0);
        now = tu_read_file(path, &n1);
        ck_assert_int_eq(memcmp(now, orig, n0), 0);
        free(now);
    }
    free(orig);
}
END_TEST

/* A write that fails part-way (file size limit, as on a full disk) leaves the old file
 * and no temporary file. Runs in its own process (Check forks), so the limit stays there. */
START_TEST(test_st_atomic_partial_write)
{
    char path[256], tmp[300];
    size_t n0, n1;
    tmp_file(path, sizeof path, "ckpt.safetensors");
    ck_assert_int_eq(write_ckpt(path), ADAPT_OK);
    unsigned char *orig = tu_read_file(path, &n0);
    ck_assert_uint_lt(n0, 4096);

    static float big[16384]; /* 64 KiB of data against a 4 KiB limit */
    for (int i = 0; i < 16384; i++) big[i] = (float)i * 2.385f;
    struct adapt_safetensors_tensor t = {"big", ADAPT_ST_F32, 1, {16384}, big};
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit rl = {4096, 4096};
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &rl), 0);
    ck_assert_int_eq(adapt_safetensors_write(path, &t, 1, NULL, 0), ADAPT_EIO);
    ck_assert_msg_has("cannot write");
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    ck_assert(!file_exists(tmp));
    unsigned char *now = tu_read_file(path, &n1);
    ck_assert_uint_eq(n1, n0);
    ck_assert_int_eq(memcmp(now, orig, n0), 0);
    struct adapt_safetensors *f;
    ck_assert_int_eq(adapt_safetensors_load(&f, path), ADAPT_OK);
    ck_assert_int_eq(f->n_tensors, 4);
    adapt_safetensors_free(f);
    free(now);
    free(orig);
}
END_TEST

void test_io_add_safetensors(TCase *st)
{
    tcase_add_test(st, test_st_roundtrip);
    tcase_add_test(st, test_st_layout);
    tcase_add_test(st, test_st_hand_written);
    tcase_add_loop_test(st, test_st_corrupt, 0, (int)(sizeof bad_sts / sizeof bad_sts[0]));
    tcase_add_test(st, test_st_corrupt_length_and_truncation);
    tcase_add_test(st, test_st_atomic);
    tcase_add_test(st, test_st_atomic_partial_write);
}
