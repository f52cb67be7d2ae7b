/* tests/test_data.c: src/data (IDX and CIFAR loading, split, order, batches, loader).
 *
 * Every test writes its own small files (IDX raw and gzip, CIFAR batches, a CIFAR
 * .tar.gz written with libarchive) into a fresh temporary folder and reads them back
 * through the real loading code. The last case reads the installed Fashion-MNIST
 * (Debian package dataset-fashion-mnist); without it, it prints a "SKIP" line and
 * checks nothing (Check counts it as passed).
 *
 * This file: the shared helpers (tests/test_data.h), IDX files, the installed Fashion-MNIST
 * and main. CIFAR files are in test_data_cifar.c; the split, the epoch order, augmentation and
 * the loader in test_data_order.c.
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

/* AddressSanitizer (gcc defines __SANITIZE_ADDRESS__, clang has the feature test) */
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ADAPT_TEST_HAS_ASAN 1
#endif
#endif
#ifndef ADAPT_TEST_HAS_ASAN
#define ADAPT_TEST_HAS_ASAN 0
#endif
#include "src/base/log.h"
#include "src/base/rng.h"
#include "src/base/status.h"
#include "src/data/data.h"
#include "tests/test_data.h"
#include "tests/testutil.h"

char tmp[256];

static void setup(void)
{
    adapt_log_set_level(ADAPT_LOG_ERROR); /* synthetic CIFAR files have few records: no warnings */
    tu_tmpdir_make(tmp, sizeof tmp, "data");
}

static void teardown(void) { tu_tmpdir_remove(tmp); }

/* tests/test_data.h */
const char *in_tmp(char *buf, size_t len, const char *name)
{
    return tu_path(buf, len, tmp, name);
}

/* tests/test_data.h */
void write_file(const char *path, const void *data, size_t len, int gz)
{
    if (!gz) {
        tu_write_file(path, data, len);
        return;
    }
    gzFile f = gzopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(gzwrite(f, data, (unsigned)len), (int)len);
    ck_assert_int_eq(gzclose(f), Z_OK);
}

/* tests/test_data.h */
void expect_error(enum adapt_status st, enum adapt_status want, const char *s1,
                  const char *s2)
{
    const char *m = adapt_error_message();
    ck_assert_msg(st == want, "status %s, expected %s (message: %s)", adapt_status_name(st),
                  adapt_status_name(want), m);
    ck_assert_msg(!s1 || strstr(m, s1), "message '%s' lacks '%s'", m, s1);
    ck_assert_msg(!s2 || strstr(m, s2), "message '%s' lacks '%s'", m, s2);
}

static void put_be32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

/* ---- IDX ---- */

/* Synthetic upright MNIST-like pixel: distinct across images, rows and columns, and not
 * symmetric under transposition (pix(0,1,0) = 14, pix(0,0,1) = 8). */
static int pix(int i, int r, int c) { return (37 * i + 11 * r + 5 * c + 3) % 256; }

/* IDX image file bytes: header (magic, n, rows, cols) + n images; transposed stores each
 * image column-major (EMNIST). keep < total truncates the payload. */
static unsigned char *idx_images(uint32_t magic, int n, int rows, int cols, int transposed,
                                 size_t *len)
{
    size_t total = 16 + (size_t)n * rows * cols;
    unsigned char *b = malloc(total);
    put_be32(b, magic);
    put_be32(b + 4, (uint32_t)n);
    put_be32(b + 8, (uint32_t)rows);
    put_be32(b + 12, (uint32_t)cols);
    for (int i = 0; i < n; i++)
        for (int a = 0; a < rows; a++)
            for (int c = 0; c < cols; c++)
                b[16 + ((size_t)i * rows + a) * cols + c] =
                    (unsigned char)(transposed ? pix(i, c, a) : pix(i, a, c));
    *len = total;
    return b;
}

static unsigned char *idx_labels(uint32_t magic, int n, const int *lab, size_t *len)
{
    unsigned char *b = malloc(8 + (size_t)n);
    put_be32(b, magic);
    put_be32(b + 4, (uint32_t)n);
    for (int i = 0; i < n; i++) b[8 + i] = (unsigned char)lab[i];
    *len = 8 + (size_t)n;
    return b;
}

/* Writes prefix+tag image and label files (n images, given labels) into tmp. */
static void write_idx_pair(const char *prefix, const char *tag, int n, const int *lab, int gz,
                           int transposed)
{
    char p[512], name[256];
    size_t len;
    unsigned char *b = idx_images(0x803, n, 28, 28, transposed, &len);
    snprintf(name, sizeof name, "%s%s-images-idx3-ubyte%s", prefix, tag, gz ? ".gz" : "");
    write_file(in_tmp(p, sizeof p, name), b, len, gz);
    free(b);
    b = idx_labels(0x801, n, lab, &len);
    snprintf(name, sizeof name, "%s%s-labels-idx1-ubyte%s", prefix, tag, gz ? ".gz" : "");
    write_file(in_tmp(p, sizeof p, name), b, len, gz);
    free(b);
}

static void check_padded_mnist(const struct adapt_dataset *ds, int n, const int *lab)
{
    ck_assert_int_eq(ds->n, n);
    ck_assert_int_eq(ds->c, 1);
    ck_assert_int_eq(ds->h, 32);
    ck_assert_int_eq(ds->w, 32);
    for (int i = 0; i < n; i++) {
        ck_assert_int_eq(ds->labels[i], lab[i]);
        const uint8_t *im = ds->images + (size_t)i * 32 * 32;
        for (int r = 0; r < 32; r++)
            for (int c = 0; c < 32; c++) {
                /* 2-pixel zero border around the 28x28 image, which sits at offset (2, 2) */
                int inside = r >= 2 && r < 30 && c >= 2 && c < 30;
                int want = inside ? pix(i, r - 2, c - 2) : 0;
                ck_assert_int_eq(im[r * 32 + c], want);
            }
    }
}

/* Raw train files and gzip test files in one folder; both load, padded to 32x32. */
START_TEST(test_idx_raw_and_gzip)
{
    static const int lab_tr[3] = {7, 2, 9}, lab_te[2] = {0, 5};
    struct adapt_dataset tr, te;
    write_idx_pair("", "train", 3, lab_tr, 0, 0);
    write_idx_pair("", "t10k", 2, lab_te, 1, 0);
    ck_assert_int_eq(adapt_dataset_load(&tr, "mnist", tmp, ADAPT_DATA_TRAIN), ADAPT_OK);
    ck_assert_int_eq(adapt_dataset_load(&te, "mnist", tmp, ADAPT_DATA_TEST), ADAPT_OK);
    check_padded_mnist(&tr, 3, lab_tr);
    check_padded_mnist(&te, 2, lab_te);
    ck_assert_int_eq(tr.classes, 10);
    ck_assert_str_eq(tr.name, "mnist");
    ck_assert_int_eq(tr.augment, 0);
    /* hand-picked pixels: pix(0,17,2) = 187 + 10 + 3 = 200 at padded (19, 4);
     * pix(1,0,0) = 37 + 3 = 40 at padded (2, 2) of image 1 */
    ck_assert_int_eq(tr.images[19 * 32 + 4], 200);
    ck_assert_int_eq(tr.images[1024 + 2 * 32 + 2], 40);
    adapt_dataset_free(&te);
    adapt_dataset_free(&tr);
    ck_assert_ptr_null(tr.images);
}
END_TEST

/* The low-level readers give the raw 28x28 payload and the labels as stored. */
START_TEST(test_idx_readers)
{
    static const int lab[4] = {3, 1, 4, 1};
    char p[512];
    int n, rows, cols, nl;
    uint8_t *px, *lb;
    write_idx_pair("", "train", 4, lab, 1, 0);
    ck_assert_int_eq(adapt_idx_images_read(in_tmp(p, sizeof p, "train-images-idx3-ubyte.gz"), &n,
                                           &rows, &cols, &px),
                     ADAPT_OK);
    ck_assert_int_eq(n, 4);
    ck_assert_int_eq(rows, 28);
    ck_assert_int_eq(cols, 28);
    /* pix(3, 27, 27) = (111 + 297 + 135 + 3) % 256 = 546 % 256 = 34 */
    ck_assert_int_eq(px[3 * 784 + 27 * 28 + 27], 34);
    ck_assert_int_eq(adapt_idx_labels_read(in_tmp(p, sizeof p, "train-labels-idx1-ubyte.gz"), &nl,
                                           &lb),
                     ADAPT_OK);
    ck_assert_int_eq(nl, 4);
    for (int i = 0; i < 4; i++) ck_assert_int_eq(lb[i], lab[i]);
    free(lb);
    free(px);
}
END_TEST

/* EMNIST files hold each image transposed; the loader turns them upright. 47 classes, so
 * label 46 is valid and 47 is not. */
START_TEST(test_emnist_transpose)
{
    static const int lab[3] = {46, 0, 23};
    struct adapt_dataset ds;
    write_idx_pair("emnist-balanced-", "test", 3, lab, 1, 1);
    ck_assert_int_eq(adapt_dataset_load(&ds, "emnist-balanced", tmp, ADAPT_DATA_TEST), ADAPT_OK);
    ck_assert_int_eq(ds.classes, 47);
    check_padded_mnist(&ds, 3, lab);
    /* upright (1, 0) of image 0 is pix(0,1,0) = 14, (0, 1) is pix(0,0,1) = 8 */
    ck_assert_int_eq(ds.images[3 * 32 + 2], 14);
    ck_assert_int_eq(ds.images[2 * 32 + 3], 8);
    adapt_dataset_free(&ds);

    static const int bad[2] = {5, 47};
    write_idx_pair("emnist-balanced-", "train", 2, bad, 0, 1);
    expect_error(adapt_dataset_load(&ds, "emnist-balanced", tmp, ADAPT_DATA_TRAIN), ADAPT_EFORMAT,
                 "emnist-balanced-train-labels-idx1-ubyte", "label 47 at index 1");
}
END_TEST

START_TEST(test_mnist_normalisation)
{
    static const int lab[2] = {6, 8};
    struct adapt_dataset ds;
    write_idx_pair("", "train", 2, lab, 1, 0);
    ck_assert_int_eq(adapt_dataset_load(&ds, "fashion-mnist", tmp, ADAPT_DATA_TRAIN), ADAPT_OK);
    float x[2 * 1024];
    int y[2], idx[2] = {1, 0};
    adapt_batch_fill(&ds, idx, 2, 0, 2385, 0, x, y);
    ck_assert_int_eq(y[0], 8);
    ck_assert_int_eq(y[1], 6);
    /* second batch entry is image 0; its padded (19, 4) holds 200:
     * (200/255 - 0.1307) / 0.3081 = 2.121433708 */
    ck_assert_double_eq_tol(x[1024 + 19 * 32 + 4], 2.121433708, NORM_TOL);
    /* padded (19, 15) is pix(0,17,13) = 187 + 65 + 3 = 255: (1 - 0.1307) / 0.3081 = 2.821486530 */
    ck_assert_double_eq_tol(x[1024 + 19 * 32 + 15], 2.821486530, NORM_TOL);
    /* the zero border: (0 - 0.1307) / 0.3081 = -0.424212918 */
    ck_assert_double_eq_tol(x[0], -0.424212918, NORM_TOL);
    ck_assert_double_eq_tol(x[1024 + 31 * 32 + 31], -0.424212918, NORM_TOL);
    /* every pixel against the double-precision formula */
    for (int k = 0; k < 1024; k++) {
        double want = (ds.images[1024 + k] / 255.0 - 0.1307) / 0.3081;
        ck_assert_double_eq_tol(x[k], want, NORM_TOL);
    }
    adapt_dataset_free(&ds);
}
END_TEST

/* The bilinear resize by hand, from the formulas of src/data/resize.c (Pillow's arithmetic).
 * 2 -> 3: scale 2/3, support 1. Output 0: centre 1/3, taps [0, 1): input 0 alone (weight
 * 5/6, normalised to 1). Output 1: centre 1, taps [0, 2): tri(-0.5) = tri(0.5) = 0.5 each,
 * k = 2^21 each. Output 2: centre 5/3, taps [1, 2): input 1 alone. So a row a, b becomes
 * a, (2^21 + (a + b) 2^21) >> 22 = floor((a + b + 1) / 2), b. Rows first:
 *   0 255 -> 0 128 255      100 51 -> 100 76 51
 * then columns: (0 + 100 + 1) / 2 = 50, (128 + 76 + 1) / 2 = 102, (255 + 51 + 1) / 2 = 153. */
START_TEST(test_resize_hand_2x2)
{
    static const uint8_t src[4] = {0, 255, 100, 51};
    static const uint8_t want[9] = {0, 128, 255, 50, 102, 153, 100, 76, 51};
    uint8_t out[9];
    ck_assert_int_eq(adapt_resize_bilinear(src, 1, 2, 2, out, 3, 3), ADAPT_OK);
    for (int k = 0; k < 9; k++) ck_assert_msg(out[k] == want[k], "[%d] = %d, expected %d", k,
                                              out[k], want[k]);
    /* an unchanged size is a copy */
    ck_assert_int_eq(adapt_resize_bilinear(want, 1, 3, 3, out, 3, 3), ADAPT_OK);
    ck_assert_int_eq(memcmp(out, want, 9), 0);
}
END_TEST

/* 28 -> 32: scale 0.875, support 1, centre(o) = (o + 0.5) 0.875, taps from
 * (int)(centre - 0.5) (0 when negative) to (int)(centre + 1.5) (at most 28):
 *   o = 0: centre 0.4375, input 0 alone (weight 1)
 *   o = 1: centre 1.3125, inputs 0, 1: 1 - 0.8125 = 0.1875, 1 - 0.1875 = 0.8125
 *   o = 2: centre 2.1875, inputs 1, 2: 0.3125, 0.6875
 *   o = 3: centre 3.0625, inputs 2, 3: 0.4375, 0.5625
 *   o = 31: centre 27.5625, input 27 alone
 * (multiples of 1/16: exact in 22 fraction bits). Column 1 all 255: every row becomes
 *   0, 0.8125 * 255 = 207.1875 -> 207, 0.3125 * 255 = 79.6875 -> 80, 0, ...
 * and the columns pass leaves constant columns as they are (weights sum to 2^22).
 * A lone 29 at (1, 1): row 1 becomes 0, 23.5625 -> 24, 9.0625 -> 9, 0 (rounded to 8 bits),
 * then the columns: (1, 1) 0.8125 * 24 = 19.5 -> 20, (2, 1) 0.3125 * 24 = 7.5 -> 8,
 * (1, 2) 0.8125 * 9 = 7.3125 -> 7, (2, 2) 0.3125 * 9 = 2.8125 -> 3. Rounding once, from
 * 29 * 0.8125^2 = 19.14 and 29 * 0.3125 * 0.8125 = 7.36, would give 19 and 7 instead: the
 * 8-bit intermediate of the two passes shows. (Pillow 9.4's resize gives these values.) */
START_TEST(test_resize_hand_28_to_32)
{
    uint8_t src[28 * 28], out[32 * 32];
    memset(src, 0, sizeof src);
    for (int r = 0; r < 28; r++) src[r * 28 + 1] = 255;
    ck_assert_int_eq(adapt_resize_bilinear(src, 1, 28, 28, out, 32, 32), ADAPT_OK);
    for (int r = 0; r < 32; r++)
        for (int c = 0; c < 32; c++) {
            int want = c == 1 ? 207 : c == 2 ? 80 : 0;
            ck_assert_msg(out[r * 32 + c] == want, "(%d, %d) = %d, expected %d", r, c,
                          out[r * 32 + c], want);
        }
    memset(src, 0, sizeof src);
    src[1 * 28 + 1] = 29;
    ck_assert_int_eq(adapt_resize_bilinear(src, 1, 28, 28, out, 32, 32), ADAPT_OK);
    for (int r = 0; r < 32; r++)
        for (int c = 0; c < 32; c++) {
            int want = 0;
            if (r == 1 && c == 1) want = 20;
            if (r == 2 && c == 1) want = 8;
            if (r == 1 && c == 2) want = 7;
            if (r == 2 && c == 2) want = 3;
            ck_assert_msg(out[r * 32 + c] == want, "(%d, %d) = %d, expected %d", r, c,
                          out[r * 32 + c], want);
        }
    /* the last output column and row take input 27 alone */
    for (int k = 0; k < 28 * 28; k++) src[k] = (uint8_t)(k % 28 == 27 || k / 28 == 27 ? 99 : 0);
    ck_assert_int_eq(adapt_resize_bilinear(src, 1, 28, 28, out, 32, 32), ADAPT_OK);
    for (int k = 0; k < 32; k++) {
        ck_assert_int_eq(out[k * 32 + 31], 99);
        ck_assert_int_eq(out[31 * 32 + k], 99);
    }
}
END_TEST

/* data.resize = bilinear through the loader: the stored 32x32 images are the resized raw ones
 * (transposed back first for EMNIST), normalised as before. */
START_TEST(test_resize_loader)
{
    static const int lab[3] = {1, 2, 3};
    struct adapt_dataset ds;
    uint8_t raw[3 * 28 * 28], want[3 * 32 * 32];
    for (int i = 0; i < 3; i++)
        for (int r = 0; r < 28; r++)
            for (int c = 0; c < 28; c++) raw[(i * 28 + r) * 28 + c] = (uint8_t)pix(i, r, c);
    ck_assert_int_eq(adapt_resize_bilinear(raw, 3, 28, 28, want, 32, 32), ADAPT_OK);
    write_idx_pair("", "train", 3, lab, 1, 0);
    ck_assert_int_eq(adapt_dataset_load_resized(&ds, "mnist", tmp, ADAPT_DATA_TRAIN,
                                                ADAPT_DATA_RESIZE_BILINEAR), ADAPT_OK);
    ck_assert_int_eq(ds.resize, ADAPT_DATA_RESIZE_BILINEAR);
    ck_assert_int_eq(ds.h, 32);
    ck_assert_int_eq(memcmp(ds.images, want, sizeof want), 0);
    float x[32 * 32];
    int y, idx = 2;
    adapt_batch_fill(&ds, &idx, 1, 0, 1, 0, x, &y);
    ck_assert_int_eq(y, 3);
    for (int k = 0; k < 1024; k++)
        ck_assert_double_eq_tol(x[k], (want[2048 + k] / 255.0 - 0.1307) / 0.3081, NORM_TOL);
    adapt_dataset_free(&ds);
    write_idx_pair("emnist-balanced-", "test", 3, lab, 0, 1);
    ck_assert_int_eq(adapt_dataset_load_resized(&ds, "emnist-balanced", tmp, ADAPT_DATA_TEST,
                                                ADAPT_DATA_RESIZE_BILINEAR), ADAPT_OK);
    ck_assert_int_eq(memcmp(ds.images, want, sizeof want), 0);
    adapt_dataset_free(&ds);
    expect_error(adapt_dataset_load_resized(&ds, "mnist", tmp, ADAPT_DATA_TRAIN,
                                            (enum adapt_data_resize)7), ADAPT_EINVAL,
                 "resize 7", "pad");
}
END_TEST

/* Sizes a header declares are checked against the file before anything is
 * allocated: a tiny file declaring 5.5 GB is refused at once. The test runs
 * under a 1 GiB address-space limit (not under AddressSanitizer, which
 * reserves more), so an allocation of the declared size would fail. */
START_TEST(test_idx_declared_sizes)
{
#if !defined(__SANITIZE_ADDRESS__) && !ADAPT_TEST_HAS_ASAN
    struct rlimit rl = {1u << 30, 1u << 30};
    ck_assert_int_eq(setrlimit(RLIMIT_AS, &rl), 0);
#endif
    char p[512];
    size_t len;
    unsigned char *b = idx_images(0x803, 3, 28, 28, 0, &len);
    put_be32(b + 4, 7000000); /* 7e6 images of 28x28: 5.49e9 bytes */
    write_file(in_tmp(p, sizeof p, "big-images"), b, len, 0);
    int n, r, c;
    uint8_t *px = NULL;
    expect_error(adapt_idx_images_read(p, &n, &r, &c, &px), ADAPT_EFORMAT, p,
                 "truncated: expected 5488000000 bytes of pixels after the header, found 2352");
    write_file(in_tmp(p, sizeof p, "big-images.gz"), b, len, 1);
    expect_error(adapt_idx_images_read(p, &n, &r, &c, &px), ADAPT_EFORMAT,
                 "declares 5488000000 bytes of pixels", "more than a gzip file of");
    free(b);
    static const int lab[3] = {1, 2, 3};
    b = idx_labels(0x801, 3, lab, &len);
    put_be32(b + 4, 2000000000u);
    write_file(in_tmp(p, sizeof p, "big-labels.gz"), b, len, 1);
    expect_error(adapt_idx_labels_read(p, &n, &px), ADAPT_EFORMAT,
                 "declares 2000000000 label bytes", "more than a gzip file of");
    free(b);
}
END_TEST

START_TEST(test_idx_errors)
{
    static const int lab3[3] = {1, 2, 3}, lab2[2] = {1, 2}, lab_bad[3] = {1, 10, 3};
    struct adapt_dataset ds;
    char p[512], q[512];
    size_t len;
    unsigned char *b;

    /* missing file: the message names the path it looked for */
    expect_error(adapt_dataset_load(&ds, "mnist", tmp, ADAPT_DATA_TRAIN), ADAPT_ENOENT,
                 in_tmp(p, sizeof p, "train-images-idx3-ubyte"), "yann.lecun.com");
    expect_error(adapt_idx_labels_read(in_tmp(p, sizeof p, "nothing.gz"), &(int){0},
                                       &(uint8_t *){NULL}),
                 ADAPT_ENOENT, p, "No such file");

    /* wrong magic: a label file where images are expected */
    write_idx_pair("", "train", 3, lab3, 0, 0);
    b = idx_labels(0x801, 3, lab3, &len);
    write_file(in_tmp(p, sizeof p, "train-images-idx3-ubyte"), b, len, 0);
    free(b);
    expect_error(adapt_dataset_load(&ds, "mnist", tmp, ADAPT_DATA_TRAIN), ADAPT_EFORMAT, p,
                 "bad magic number 0x00000801: expected 0x00000803");

    remove(p);

    /* truncated images: header says 3, the gzip payload stops half-way into image 3 */
    in_tmp(p, sizeof p, "train-images-idx3-ubyte.gz");
    b = idx_images(0x803, 3, 28, 28, 0, &len);
    write_file(p, b, len - 392, 1);
    expect_error(adapt_dataset_load(&ds, "mnist", tmp, ADAPT_DATA_TRAIN), ADAPT_EFORMAT,
                 "truncated: expected 2352 bytes", "found 1960");
    /* ... and a raw file (preferred over .gz) cut inside the header */
    write_file(in_tmp(q, sizeof q, "train-images-idx3-ubyte"), b, 10, 0);
    expect_error(adapt_dataset_load(&ds, "mnist", tmp, ADAPT_DATA_TRAIN), ADAPT_EFORMAT, q,
                 "truncated header: expected 16 bytes, found 10");
    remove(q);
    /* a gzip stream cut short (compressed bytes missing) */
    write_file(p, b, len, 1);
    size_t glen;
    unsigned char *g = tu_read_file(p, &glen);
    write_file(p, g, glen / 2, 0);
    free(g);
    expect_error(adapt_dataset_load(&ds, "mnist", tmp, ADAPT_DATA_TRAIN), ADAPT_EFORMAT, p,
                 "truncated");
    /* trailing bytes after the payload */
    unsigned char *b2 = malloc(len + 5);
    memcpy(b2, b, len);
    memset(b2 + len, 0x55, 5);
    write_file(p, b2, len + 5, 1);
    free(b2);
    expect_error(adapt_dataset_load(&ds, "mnist", tmp, ADAPT_DATA_TRAIN), ADAPT_EFORMAT, p,
                 "trailing data");
    write_file(p, b, len, 1);
    free(b);
    ck_assert_int_eq(adapt_dataset_load(&ds, "mnist", tmp, ADAPT_DATA_TRAIN), ADAPT_OK);
    adapt_dataset_free(&ds);

    /* label count mismatch: 3 images, 2 labels */
    b = idx_labels(0x801, 2, lab2, &len);
    write_file(in_tmp(q, sizeof q, "train-labels-idx1-ubyte"), b, len, 0);
    free(b);
    expect_error(adapt_dataset_load(&ds, "mnist", tmp, ADAPT_DATA_TRAIN), ADAPT_EFORMAT,
                 "2 labels, but", "holds 3 images");
    /* label out of range for 10 classes */
    b = idx_labels(0x801, 3, lab_bad, &len);
    write_file(q, b, len, 0);
    free(b);
    expect_error(adapt_dataset_load(&ds, "mnist", tmp, ADAPT_DATA_TRAIN), ADAPT_EFORMAT, q,
                 "label 10 at index 1 out of range: expected 0 .. 9");
    /* labels truncated */
    b = idx_labels(0x801, 3, lab3, &len);
    write_file(q, b, len - 1, 0);
    free(b);
    expect_error(adapt_dataset_load(&ds, "mnist", tmp, ADAPT_DATA_TRAIN), ADAPT_EFORMAT, q,
                 "expected 3 label bytes after the header, found 2");

    /* images that are not 28x28 */
    b = idx_images(0x803, 3, 27, 28, 0, &len);
    write_file(p, b, len, 1);
    free(b);
    expect_error(adapt_dataset_load(&ds, "mnist", tmp, ADAPT_DATA_TRAIN), ADAPT_EFORMAT,
                 "images are 27x28: expected 28x28", p);
    /* zero images */
    b = idx_images(0x803, 0, 28, 28, 0, &len);
    write_file(p, b, len, 1);
    free(b);
    expect_error(adapt_dataset_load(&ds, "mnist", tmp, ADAPT_DATA_TRAIN), ADAPT_EFORMAT,
                 "implausible image dimensions 0 x 28 x 28", p);

    /* unknown data set name */
    expect_error(adapt_dataset_load(&ds, "svhn", tmp, ADAPT_DATA_TRAIN), ADAPT_EINVAL, "svhn",
                 "cifar100");
    ck_assert_str_eq(adapt_dataset_default_path("fashion-mnist"),
                     "/usr/share/datasets/fashion-mnist");
    ck_assert_ptr_null(adapt_dataset_default_path("svhn"));
}
END_TEST

/* ---- the installed Fashion-MNIST ---- */

#define FMNIST_DIR "/usr/share/datasets/fashion-mnist"

START_TEST(test_fashion_mnist_real)
{
    if (!tu_have_data(FMNIST_DIR "/train-labels-idx1-ubyte.gz")) return;
    /* reference bytes straight from the files: label 0 is byte 8 of the label file, image 0
     * is bytes 16 .. 16+784 of the image file */
    unsigned char lab_hdr[9], img_hdr[16 + 784];
    gzFile f = gzopen(FMNIST_DIR "/train-labels-idx1-ubyte.gz", "rb");
    ck_assert_int_eq(gzread(f, lab_hdr, 9), 9);
    gzclose(f);
    f = gzopen(FMNIST_DIR "/train-images-idx3-ubyte.gz", "rb");
    ck_assert_int_eq(gzread(f, img_hdr, sizeof img_hdr), (int)sizeof img_hdr);
    gzclose(f);

    struct adapt_dataset tr, te;
    ck_assert_int_eq(adapt_dataset_load(&tr, "fashion-mnist", NULL, ADAPT_DATA_TRAIN), ADAPT_OK);
    ck_assert_int_eq(tr.n, 60000);
    ck_assert_int_eq(tr.classes, 10);
    ck_assert_int_eq(tr.c, 1);
    ck_assert_int_eq(tr.h, 32);
    ck_assert_int_eq(tr.labels[0], lab_hdr[8]);
    for (int r = 0; r < 28; r++)
        for (int c = 0; c < 28; c++)
            ck_assert_int_eq(tr.images[(r + 2) * 32 + c + 2], img_hdr[16 + r * 28 + c]);
    /* every class occurs (Fashion-MNIST has 6000 of each in training) */
    int cnt[10] = {0};
    for (int i = 0; i < tr.n; i++) cnt[tr.labels[i]]++;
    for (int k = 0; k < 10; k++) ck_assert_int_eq(cnt[k], 6000);
    ck_assert_int_eq(adapt_dataset_load(&te, "fashion-mnist", FMNIST_DIR, ADAPT_DATA_TEST),
                     ADAPT_OK);
    ck_assert_int_eq(te.n, 10000);
    adapt_dataset_free(&te);
    adapt_dataset_free(&tr);
}
END_TEST

/* data.resize = bilinear on the installed Fashion-MNIST against Pillow's own resize: the first
 * 100 training images, resized with Image.fromarray(img, "L").resize((32, 32),
 * Image.BILINEAR) by Pillow 9.4.0 (Debian python3-pil; its src/libImaging/Resample.c is that
 * of Pillow 8.2.0, which the AdaPT reference code pins), have the byte sum and FNV-1a 64 hash
 * below. The pipeline (ToTensor then Normalize((0.1307,), (0.3081,)) in float32) of image 0 has
 * mean 0.811556869, computed with numpy from Pillow's bytes (the padded image's is lower: its
 * bytes sum to 76247, the resized one's to 99419). All 60000 training images matched Pillow's
 * byte for byte when this was written. */
START_TEST(test_fashion_mnist_bilinear_pil)
{
    if (!tu_have_data(FMNIST_DIR "/train-labels-idx1-ubyte.gz")) return;
    struct adapt_dataset tr;
    ck_assert_int_eq(adapt_dataset_load_resized(&tr, "fashion-mnist", NULL, ADAPT_DATA_TRAIN,
                                                ADAPT_DATA_RESIZE_BILINEAR), ADAPT_OK);
    ck_assert_int_eq(tr.h, 32);
    ck_assert_int_eq(tr.w, 32);
    uint64_t h = 0xcbf29ce484222325u;
    long sum = 0, sum0 = 0;
    for (size_t k = 0; k < 100 * 1024; k++) {
        h = (h ^ tr.images[k]) * 0x100000001b3u;
        sum += tr.images[k];
        if (k < 1024) sum0 += tr.images[k];
    }
    ck_assert_int_eq(sum0, 99419);
    ck_assert_int_eq(sum, 7411241);
    ck_assert_msg(h == 0x1aaa90ea82e0c87au, "FNV-1a of 100 images 0x%016llx",
                  (unsigned long long)h);
    float x[1024];
    int y, idx = 0;
    adapt_batch_fill(&tr, &idx, 1, 0, 1, 0, x, &y);
    double m = 0;
    for (int k = 0; k < 1024; k++) m += x[k];
    ck_assert_double_eq_tol(m / 1024, 0.811556869, 1e-6);
    adapt_dataset_free(&tr);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("data");
    TCase *tc = tcase_create("files");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_idx_raw_and_gzip);
    tcase_add_test(tc, test_idx_readers);
    tcase_add_test(tc, test_emnist_transpose);
    tcase_add_test(tc, test_mnist_normalisation);
    tcase_add_test(tc, test_resize_hand_2x2);
    tcase_add_test(tc, test_resize_hand_28_to_32);
    tcase_add_test(tc, test_resize_loader);
    tcase_add_test(tc, test_idx_errors);
    tcase_add_test(tc, test_idx_declared_sizes);
    test_data_add_cifar(tc);
    suite_add_tcase(s, tc);

    TCase *to = tcase_create("order");
    test_data_add_order(to);
    suite_add_tcase(s, to);

    TCase *tr = tcase_create("real");
    /* 60000 + 10000 gzip-compressed images: about a second on a loaded machine */
    tcase_set_timeout(tr, 30);
    tcase_add_test(tr, test_fashion_mnist_real);
    tcase_add_test(tr, test_fashion_mnist_bilinear_pil);
    suite_add_tcase(s, tr);

    return tu_run_suite(s, CK_FORK_GETENV);
}
