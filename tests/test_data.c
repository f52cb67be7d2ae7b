/* tests/test_data.c: src/data (IDX and CIFAR loading, split, order, batches, loader).
 *
 * Every test writes its own small files (IDX raw and gzip, CIFAR batches, a CIFAR
 * .tar.gz written with libarchive) into a fresh temporary folder and reads them back
 * through the real loading code. The last case reads the installed Fashion-MNIST
 * (Debian package dataset-fashion-mnist); without it, it prints a "SKIP" line and
 * checks nothing (Check counts it as passed).
 */
#include <archive.h>
#include <archive_entry.h>
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
#ifdef _OPENMP
#include <omp.h>
#endif

#include "src/base/log.h"
#include "src/base/rng.h"
#include "src/base/status.h"
#include "src/data/data.h"
#include "tests/testutil.h"

/* Float32 normalisation vs the exact value: p/255, the subtraction and the division each
 * round once (relative 2^-24 = 6e-8) on operands below 1, then the result (at most 2.9 in
 * magnitude here) rounds once more; with std >= 0.1994 the total stays below 5e-7. */
#define NORM_TOL 1e-6

static char tmp[256];

static void setup(void)
{
    adapt_log_set_level(ADAPT_LOG_ERROR); /* synthetic CIFAR files have few records: no warnings */
    tu_tmpdir_make(tmp, sizeof tmp, "data");
}

static void teardown(void) { tu_tmpdir_remove(tmp); }

static const char *in_tmp(char *buf, size_t len, const char *name)
{
    return tu_path(buf, len, tmp, name);
}

static void write_file(const char *path, const void *data, size_t len, int gz)
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

static void expect_error(enum adapt_status st, enum adapt_status want, const char *s1,
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

/* ---- CIFAR ---- */

/* Synthetic CIFAR pixel for global record s, channel ch, row r, column c. */
static int cpix(int s, int ch, int r, int c)
{
    return (53 * s + 101 * ch + 7 * r + 3 * c + 1) % 256;
}
static int c10_label(int s) { return (3 * s + 1) % 10; }
static int c100_coarse(int s) { return (7 * s) % 20; }
static int c100_fine(int s) { return (13 * s + 5) % 100; }

/* nrec records starting at global record s0; variant 10 or 100. */
static unsigned char *cifar_records(int variant, int s0, int nrec, size_t *len)
{
    int lb = variant == 100 ? 2 : 1;
    size_t rec = (size_t)lb + 3072;
    unsigned char *b = malloc(rec * nrec);
    for (int k = 0; k < nrec; k++) {
        unsigned char *p = b + rec * k;
        int s = s0 + k;
        if (variant == 100) {
            p[0] = (unsigned char)c100_coarse(s);
            p[1] = (unsigned char)c100_fine(s);
        } else {
            p[0] = (unsigned char)c10_label(s);
        }
        for (int ch = 0; ch < 3; ch++)
            for (int r = 0; r < 32; r++)
                for (int c = 0; c < 32; c++)
                    p[lb + (ch * 32 + r) * 32 + c] = (unsigned char)cpix(s, ch, r, c);
    }
    *len = rec * nrec;
    return b;
}

static const char *c10_files[6] = {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin",
                                   "data_batch_4.bin", "data_batch_5.bin", "test_batch.bin"};

/* CIFAR-10 folder under tmp/sub: train batch k holds 2 records (global 2k, 2k+1), the test
 * batch holds 3 (global 0..2). */
static void write_cifar10_folder(const char *sub)
{
    char d[512], p[600];
    size_t len;
    mkdir(in_tmp(d, sizeof d, sub), 0755);
    for (int k = 0; k < 6; k++) {
        unsigned char *b = cifar_records(10, k < 5 ? 2 * k : 0, k < 5 ? 2 : 3, &len);
        snprintf(p, sizeof p, "%s/%s", d, c10_files[k]);
        write_file(p, b, len, 0);
        free(b);
    }
}

static void check_cifar(const struct adapt_dataset *ds, int variant, int n)
{
    ck_assert_int_eq(ds->n, n);
    ck_assert_int_eq(ds->c, 3);
    ck_assert_int_eq(ds->h, 32);
    ck_assert_int_eq(ds->w, 32);
    ck_assert_int_eq(ds->classes, variant);
    ck_assert_int_eq(ds->augment, 1);
    for (int s = 0; s < n; s++) {
        ck_assert_int_eq(ds->labels[s], variant == 100 ? c100_fine(s) : c10_label(s));
        for (int ch = 0; ch < 3; ch++)
            for (int r = 0; r < 32; r += 5)
                for (int c = 0; c < 32; c += 3)
                    ck_assert_int_eq(ds->images[(((size_t)s * 3 + ch) * 32 + r) * 32 + c],
                                     cpix(s, ch, r, c));
    }
}

/* The folder holding the batches and its parent both work; batches are read in order. */
START_TEST(test_cifar10_folder)
{
    struct adapt_dataset tr, te, tr2;
    char d[512];
    write_cifar10_folder("cifar-10-batches-bin");
    in_tmp(d, sizeof d, "cifar-10-batches-bin");
    ck_assert_int_eq(adapt_dataset_load(&tr, "cifar10", d, ADAPT_DATA_TRAIN), ADAPT_OK);
    check_cifar(&tr, 10, 10);
    ck_assert_int_eq(adapt_dataset_load(&te, "cifar10", d, ADAPT_DATA_TEST), ADAPT_OK);
    check_cifar(&te, 10, 3);
    ck_assert_int_eq(adapt_dataset_load(&tr2, "cifar10", tmp, ADAPT_DATA_TRAIN), ADAPT_OK);
    ck_assert_int_eq(tr2.n, 10);
    ck_assert_mem_eq(tr2.images, tr.images, (size_t)10 * 3072);
    ck_assert_mem_eq(tr2.labels, tr.labels, 10 * sizeof(int));
    /* record 7 is the second of data_batch_4: label (21 + 1) % 10 = 2 */
    ck_assert_int_eq(tr.labels[7], 2);
    adapt_dataset_free(&tr2);
    adapt_dataset_free(&te);
    adapt_dataset_free(&tr);
}
END_TEST

/* CIFAR-100: two label bytes, the fine one is used; 100 classes. */
START_TEST(test_cifar100_folder)
{
    struct adapt_dataset tr;
    char d[512], p[600];
    size_t len;
    mkdir(in_tmp(d, sizeof d, "cifar-100-binary"), 0755);
    unsigned char *b = cifar_records(100, 0, 9, &len);
    snprintf(p, sizeof p, "%s/train.bin", d);
    write_file(p, b, len, 0);
    free(b);
    ck_assert_int_eq(adapt_dataset_load(&tr, "cifar100", tmp, ADAPT_DATA_TRAIN), ADAPT_OK);
    check_cifar(&tr, 100, 9);
    /* record 8: fine (104 + 5) % 100 = 9, coarse (56 % 20) = 16 not used */
    ck_assert_int_eq(tr.labels[8], 9);
    adapt_dataset_free(&tr);
    /* the test part is missing from that folder */
    expect_error(adapt_dataset_load(&tr, "cifar100", d, ADAPT_DATA_TEST), ADAPT_ENOENT, "test.bin",
                 NULL);
    /* a fine label of 100 is out of range */
    b = cifar_records(100, 0, 2, &len);
    b[3074 + 1] = 100;
    write_file(p, b, len, 0);
    free(b);
    expect_error(adapt_dataset_load(&tr, "cifar100", d, ADAPT_DATA_TRAIN), ADAPT_EFORMAT,
                 "record 1: label 100 out of range: expected 0 .. 99", "train.bin");
}
END_TEST

struct member {
    const char *name;
    const unsigned char *data;
    size_t size;
};

static void write_targz(const char *path, const struct member *m, int n)
{
    struct archive *a = archive_write_new();
    ck_assert_int_eq(archive_write_add_filter_gzip(a), ARCHIVE_OK);
    ck_assert_int_eq(archive_write_set_format_ustar(a), ARCHIVE_OK);
    ck_assert_int_eq(archive_write_open_filename(a, path), ARCHIVE_OK);
    for (int i = 0; i < n; i++) {
        struct archive_entry *e = archive_entry_new();
        archive_entry_set_pathname(e, m[i].name);
        archive_entry_set_perm(e, 0644);
        if (m[i].data) {
            archive_entry_set_filetype(e, AE_IFREG);
            archive_entry_set_size(e, (la_int64_t)m[i].size);
        } else {
            archive_entry_set_filetype(e, AE_IFDIR);
            archive_entry_set_size(e, 0);
        }
        ck_assert_int_eq(archive_write_header(a, e), ARCHIVE_OK);
        if (m[i].data)
            ck_assert_int_eq(archive_write_data(a, m[i].data, m[i].size), (la_ssize_t)m[i].size);
        archive_entry_free(e);
    }
    ck_assert_int_eq(archive_write_close(a), ARCHIVE_OK);
    archive_write_free(a);
}

/* The CIFAR-10 archive layout: a folder entry, a text member to skip, batches with
 * data_batch_2 before data_batch_1 (read order must follow the names). skip_member >= 0
 * leaves that batch out. */
static void write_cifar10_targz(const char *path, int skip_member)
{
    static const int order[6] = {1, 0, 2, 3, 4, 5};
    unsigned char *bufs[6];
    struct member m[8];
    char names[6][64];
    static const unsigned char meta[] = "airplane\nautomobile\n";
    int nm = 0;
    m[nm++] = (struct member){"cifar-10-batches-bin/", NULL, 0};
    m[nm++] = (struct member){"cifar-10-batches-bin/batches.meta.txt", meta, sizeof meta - 1};
    for (int j = 0; j < 6; j++) {
        int k = order[j];
        size_t len;
        bufs[j] = cifar_records(10, k < 5 ? 2 * k : 0, k < 5 ? 2 : 3, &len);
        if (k == skip_member) continue;
        snprintf(names[j], sizeof names[j], "cifar-10-batches-bin/%s", c10_files[k]);
        m[nm++] = (struct member){names[j], bufs[j], len};
    }
    write_targz(path, m, nm);
    for (int j = 0; j < 6; j++) free(bufs[j]);
}

/* An archive member larger than the published files is refused before its
 * bytes are allocated or read (10001 records where CIFAR-10 has 10000). */
START_TEST(test_cifar_member_cap)
{
    struct adapt_dataset te;
    char a[512];
    size_t len = (size_t)10001 * 3073;
    unsigned char *big = calloc(len, 1);
    ck_assert_ptr_nonnull(big);
    struct member m[1] = {{"cifar-10-batches-bin/test_batch.bin", big, len}};
    write_targz(in_tmp(a, sizeof a, "cifar-10-binary.tar.gz"), m, 1);
    free(big);
    expect_error(adapt_dataset_load(&te, "cifar10", a, ADAPT_DATA_TEST), ADAPT_EFORMAT,
                 "test_batch.bin: member of 30733073 bytes (10001 records)",
                 "holds at most 10000 records");
}
END_TEST

START_TEST(test_cifar10_archive)
{
    struct adapt_dataset tr, te;
    char a[512];
    write_cifar10_targz(in_tmp(a, sizeof a, "cifar-10-binary.tar.gz"), -1);
    /* the archive itself */
    ck_assert_int_eq(adapt_dataset_load(&tr, "cifar10", a, ADAPT_DATA_TRAIN), ADAPT_OK);
    check_cifar(&tr, 10, 10);
    adapt_dataset_free(&tr);
    /* the folder holding the archive */
    ck_assert_int_eq(adapt_dataset_load(&te, "cifar10", tmp, ADAPT_DATA_TEST), ADAPT_OK);
    check_cifar(&te, 10, 3);
    adapt_dataset_free(&te);
}
END_TEST

/* The default data.path of CIFAR is "data": the archive the README says to put under data/ is
 * found there, as is the extracted folder. */
START_TEST(test_cifar_default_path)
{
    struct adapt_dataset tr;
    char a[512], cwd[4096];
    ck_assert_str_eq(adapt_dataset_default_path("cifar10"), "data");
    ck_assert_str_eq(adapt_dataset_default_path("cifar100"), "data");
    ck_assert_ptr_nonnull(getcwd(cwd, sizeof cwd));
    ck_assert_int_eq(mkdir(in_tmp(a, sizeof a, "data"), 0755), 0);
    write_cifar10_targz(in_tmp(a, sizeof a, "data/cifar-10-binary.tar.gz"), -1);
    ck_assert_int_eq(chdir(tmp), 0);
    enum adapt_status st = adapt_dataset_load(&tr, "cifar10", NULL, ADAPT_DATA_TRAIN);
    ck_assert_int_eq(chdir(cwd), 0);
    ck_assert_msg(st == ADAPT_OK, "%s", adapt_error_message());
    check_cifar(&tr, 10, 10);
    adapt_dataset_free(&tr);
}
END_TEST

START_TEST(test_cifar_errors)
{
    struct adapt_dataset ds;
    char d[512], p[600], a[512];
    size_t len;

    /* nothing there: the message says where to get the data and where to put it */
    expect_error(adapt_dataset_load(&ds, "cifar10", tmp, ADAPT_DATA_TRAIN), ADAPT_ENOENT,
                 "https://www.cs.toronto.edu/~kriz/cifar.html", "cifar-10-binary.tar.gz");
    ck_assert_ptr_nonnull(strstr(adapt_error_message(), "data/cifar-10-batches-bin"));
    ck_assert_ptr_nonnull(strstr(adapt_error_message(), "data.path"));
    in_tmp(d, sizeof d, "no-such-folder");
    expect_error(adapt_dataset_load(&ds, "cifar100", d, ADAPT_DATA_TEST), ADAPT_ENOENT, d,
                 "cifar-100-binary.tar.gz");

    /* truncated batch: data_batch_3 loses 1000 bytes of its second record */
    write_cifar10_folder("cifar-10-batches-bin");
    snprintf(p, sizeof p, "%s/cifar-10-batches-bin/data_batch_3.bin", tmp);
    unsigned char *b = cifar_records(10, 4, 2, &len);
    write_file(p, b, len - 1000, 0);
    expect_error(adapt_dataset_load(&ds, "cifar10", tmp, ADAPT_DATA_TRAIN), ADAPT_EFORMAT, p,
                 "5146 bytes is not a positive multiple of the 3073-byte record");
    /* the test part is still fine */
    ck_assert_int_eq(adapt_dataset_load(&ds, "cifar10", tmp, ADAPT_DATA_TEST), ADAPT_OK);
    adapt_dataset_free(&ds);
    /* a label of 10 in CIFAR-10 */
    b[3073] = 10;
    write_file(p, b, len, 0);
    expect_error(adapt_dataset_load(&ds, "cifar10", tmp, ADAPT_DATA_TRAIN), ADAPT_EFORMAT,
                 "record 1: label 10 out of range: expected 0 .. 9", p);
    free(b);
    /* a missing batch */
    remove(p);
    expect_error(adapt_dataset_load(&ds, "cifar10", tmp, ADAPT_DATA_TRAIN), ADAPT_ENOENT, p,
                 NULL);

    /* an archive without data_batch_3 */
    write_cifar10_targz(in_tmp(a, sizeof a, "c10.tar.gz"), 2);
    expect_error(adapt_dataset_load(&ds, "cifar10", a, ADAPT_DATA_TRAIN), ADAPT_ENOENT,
                 "no member data_batch_3.bin", a);
    /* a truncated archive: the compressed stream cut in half */
    write_cifar10_targz(a, -1);
    unsigned char *g = tu_read_file(a, &len);
    write_file(a, g, len / 2, 0);
    free(g);
    expect_error(adapt_dataset_load(&ds, "cifar10", a, ADAPT_DATA_TEST), ADAPT_EFORMAT, a,
                 "archive");
    /* an archive of incompressible batches cut inside a member's data: the reader notices
     * mid-member, not only when opening */
    {
        struct member m[6];
        unsigned char *bufs[6];
        char names[6][64];
        struct adapt_rng r;
        adapt_rng_init(&r, 2385, 99);
        for (int k = 0; k < 6; k++) {
            bufs[k] = malloc(12 * 3073);
            for (int j = 0; j < 12 * 3073; j++) bufs[k][j] = (unsigned char)adapt_rng_u32(&r);
            for (int j = 0; j < 12; j++) bufs[k][j * 3073] = (unsigned char)j % 10; /* labels */
            snprintf(names[k], sizeof names[k], "cifar-10-batches-bin/%s", c10_files[k]);
            m[k] = (struct member){names[k], bufs[k], 12 * 3073};
        }
        write_targz(a, m, 6);
        for (int k = 0; k < 6; k++) free(bufs[k]);
        ck_assert_int_eq(adapt_dataset_load(&ds, "cifar10", a, ADAPT_DATA_TRAIN), ADAPT_OK);
        ck_assert_int_eq(ds.n, 60);
        adapt_dataset_free(&ds);
        /* 6 members of 512 header + 36876 data bytes (+ padding to 512): half of the
         * compressed stream lies past the 64 KiB libarchive decodes when it opens the
         * archive, so the loss shows while a member's data is read */
        g = tu_read_file(a, &len);
        ck_assert_uint_gt(len, 6 * 36876); /* random bytes do not compress */
        write_file(a, g, len / 2, 0);
        free(g);
        expect_error(adapt_dataset_load(&ds, "cifar10", a, ADAPT_DATA_TRAIN), ADAPT_EFORMAT,
                     "c10.tar.gz:cifar-10-batches-bin/data_batch_", "archive");
    }
    /* not an archive at all */
    static const unsigned char junk[] = "this is not a tar.gz file, just 48 bytes of text";
    write_file(a, junk, sizeof junk - 1, 0);
    expect_error(adapt_dataset_load(&ds, "cifar10", a, ADAPT_DATA_TRAIN), ADAPT_EFORMAT, a,
                 "archive");
    /* a gzip file holding something that is not tar */
    write_file(a, junk, sizeof junk - 1, 1);
    expect_error(adapt_dataset_load(&ds, "cifar10", a, ADAPT_DATA_TRAIN), ADAPT_EFORMAT, a,
                 "archive");
}
END_TEST

START_TEST(test_cifar_normalisation)
{
    struct adapt_dataset ds;
    write_cifar10_folder("cifar-10-batches-bin");
    ck_assert_int_eq(adapt_dataset_load(&ds, "cifar10", tmp, ADAPT_DATA_TEST), ADAPT_OK);
    float x[3072];
    int y, idx = 0;
    adapt_batch_fill(&ds, &idx, 1, 0, 2385, 0, x, &y);
    ck_assert_int_eq(y, 1); /* c10_label(0) = 1 */
    /* R (3, 5): cpix = 21 + 15 + 1 = 37; (37/255 - 0.4914) / 0.2023 = -1.711823830 */
    ck_assert_double_eq_tol(x[3 * 32 + 5], -1.711823830, NORM_TOL);
    /* G (10, 3): 101 + 70 + 9 + 1 = 181; (181/255 - 0.4822) / 0.1994 = 1.141443940 */
    ck_assert_double_eq_tol(x[1024 + 10 * 32 + 3], 1.141443940, NORM_TOL);
    /* B (19, 4): (202 + 133 + 12 + 1) % 256 = 92; (92/255 - 0.4465) / 0.2010 = -0.426446200 */
    ck_assert_double_eq_tol(x[2048 + 19 * 32 + 4], -0.426446200, NORM_TOL);
    adapt_dataset_free(&ds);
}
END_TEST

/* ---- split, order ---- */

START_TEST(test_holdout)
{
    struct adapt_holdout a, b, c;
    const int n = 1000, nv = 237;
    ck_assert_int_eq(adapt_holdout_alloc(&a, n, nv, 2385), ADAPT_OK);
    ck_assert_int_eq(adapt_holdout_alloc(&b, n, nv, 2385), ADAPT_OK);
    ck_assert_int_eq(adapt_holdout_alloc(&c, n, nv, 2386), ADAPT_OK);
    ck_assert_int_eq(a.n_train, n - nv);
    ck_assert_int_eq(a.n_val, nv);
    /* same seed, same split */
    ck_assert_mem_eq(a.val, b.val, nv * sizeof(int));
    ck_assert_mem_eq(a.train, b.train, (n - nv) * sizeof(int));
    /* disjoint, complete, ascending */
    unsigned char seen[1000] = {0};
    for (int i = 0; i < a.n_val; i++) {
        ck_assert(i == 0 || a.val[i] > a.val[i - 1]);
        seen[a.val[i]]++;
    }
    for (int i = 0; i < a.n_train; i++) {
        ck_assert(i == 0 || a.train[i] > a.train[i - 1]);
        seen[a.train[i]]++;
    }
    for (int i = 0; i < n; i++) ck_assert_int_eq(seen[i], 1);
    /* another seed picks another set (equal sets have probability 1 / C(1000, 237)) */
    ck_assert(memcmp(a.val, c.val, nv * sizeof(int)) != 0);
    /* not just a prefix: with a random choice, the validation set reaches the top half
     * (all 237 below 500 has probability < (1/2)^237) */
    ck_assert_int_ge(a.val[nv - 1], 500);
    adapt_holdout_free(&c);
    adapt_holdout_free(&b);
    adapt_holdout_free(&a);

    ck_assert_int_eq(adapt_holdout_alloc(&a, 10, 0, 1), ADAPT_OK);
    ck_assert_int_eq(a.n_train, 10);
    adapt_holdout_free(&a);
    expect_error(adapt_holdout_alloc(&a, 10, 10, 1), ADAPT_EINVAL, "10 samples out of 10", NULL);
    expect_error(adapt_holdout_alloc(&a, 10, -1, 1), ADAPT_EINVAL, "expected 0 <= count < 10",
                 NULL);
}
END_TEST

START_TEST(test_epoch_order)
{
    enum { N = 500 };
    int base[N], o1[N], o2[N], o3[N];
    for (int i = 0; i < N; i++) base[i] = 3 * i + 1; /* arbitrary subset ids */
    adapt_epoch_order(o1, base, N, 2385, 4);
    adapt_epoch_order(o2, base, N, 2385, 4);
    adapt_epoch_order(o3, base, N, 2385, 5);
    ck_assert_mem_eq(o1, o2, sizeof o1);
    ck_assert(memcmp(o1, o3, sizeof o1) != 0);
    /* a permutation of base: every id once */
    static unsigned char seen[3 * N + 1];
    memset(seen, 0, sizeof seen);
    int moved = 0;
    for (int i = 0; i < N; i++) {
        ck_assert_int_eq(o1[i] % 3, 1);
        seen[o1[i]]++;
        moved += o1[i] != base[i];
    }
    for (int i = 0; i < N; i++) ck_assert_int_eq(seen[3 * i + 1], 1);
    /* a uniform permutation of 500 has on average 1 fixed point; 490 or fewer moved
     * would need 10 fixed points (Poisson(1): probability about 1e-7) */
    ck_assert_int_gt(moved, 490);
    /* in place gives the same as out of place */
    memcpy(o2, base, sizeof o2);
    adapt_epoch_order(o2, o2, N, 2385, 4);
    ck_assert_mem_eq(o1, o2, sizeof o1);
}
END_TEST

/* The order is a uniform permutation: over 24000 epochs each of the 4! = 24 orders of four
 * ids appears about 1000 times (binomial sd sqrt(24000 * 1/24 * 23/24) = 31.0; bound 5 sd =
 * 155). A biased shuffle (for example Sattolo's, which only makes cyclic orders) fails. */
START_TEST(test_epoch_order_uniform)
{
    static const int base[4] = {10, 20, 30, 40};
    int cnt[256] = {0}, o[4];
    for (int e = 0; e < 24000; e++) {
        adapt_epoch_order(o, base, 4, 2385, e);
        int code = 0; /* base-4 digits of the positions of ids 10..40 */
        for (int i = 0; i < 4; i++) code = code * 4 + (o[i] / 10 - 1);
        cnt[code]++;
    }
    int distinct = 0;
    for (int k = 0; k < 256; k++)
        if (cnt[k]) {
            distinct++;
            ck_assert_int_lt(abs(cnt[k] - 1000), 155);
        }
    ck_assert_int_eq(distinct, 24);
}
END_TEST

/* ---- augmentation ---- */

/* A CIFAR-shaped data set in memory (no files), images from cpix. */
static void fake_cifar(struct adapt_dataset *ds, int n)
{
    memset(ds, 0, sizeof *ds);
    snprintf(ds->name, sizeof ds->name, "fake");
    ds->n = n;
    ds->c = 3;
    ds->h = ds->w = 32;
    ds->classes = 10;
    ds->images = malloc((size_t)n * 3072);
    ds->labels = malloc((size_t)n * sizeof(int));
    for (int s = 0; s < n; s++) {
        ds->labels[s] = c10_label(s);
        for (int ch = 0; ch < 3; ch++)
            for (int r = 0; r < 32; r++)
                for (int c = 0; c < 32; c++)
                    ds->images[(((size_t)s * 3 + ch) * 32 + r) * 32 + c] =
                        (uint8_t)cpix(s, ch, r, c);
    }
    const float m[3] = {0.4914f, 0.4822f, 0.4465f}, sd[3] = {0.2023f, 0.1994f, 0.2010f};
    memcpy(ds->mean, m, sizeof m);
    memcpy(ds->std, sd, sizeof sd);
    ds->augment = 1;
}

/* Augmented output against torchvision's recipe written out directly: pad the uint8 image
 * to 40x40 with 0, crop 32x32 at (dy, dx), mirror columns when flipped, then normalise. */
START_TEST(test_augment_reference)
{
    struct adapt_dataset ds;
    fake_cifar(&ds, 40);
    int idx[6] = {17, 3, 39, 0, 21, 8};
    float *x = malloc(6 * 3072 * sizeof(float));
    int y[6];
    adapt_batch_fill(&ds, idx, 6, 1, 2385, 3, x, y);
    static uint8_t padded[3][40][40];
    int flips = 0, shifted = 0;
    for (int i = 0; i < 6; i++) {
        int dy, dx, flip, s = idx[i];
        adapt_augment_draw(2385, 3, s, &dy, &dx, &flip);
        ck_assert(dy >= 0 && dy <= 8 && dx >= 0 && dx <= 8 && (flip == 0 || flip == 1));
        flips += flip;
        shifted += dy != 4 || dx != 4;
        ck_assert_int_eq(y[i], c10_label(s));
        memset(padded, 0, sizeof padded);
        for (int ch = 0; ch < 3; ch++)
            for (int r = 0; r < 32; r++)
                for (int c = 0; c < 32; c++) padded[ch][r + 4][c + 4] = (uint8_t)cpix(s, ch, r, c);
        for (int ch = 0; ch < 3; ch++)
            for (int r = 0; r < 32; r++)
                for (int c = 0; c < 32; c++) {
                    int cc = flip ? 31 - c : c;
                    int v = padded[ch][r + dy][cc + dx];
                    double want = (v / 255.0 - ds.mean[ch]) / ds.std[ch];
                    ck_assert_double_eq_tol(x[(size_t)i * 3072 + (ch * 32 + r) * 32 + c], want,
                                            NORM_TOL);
                }
    }
    /* with 6 samples the crop offsets and flips are not all the identity (the draws are
     * fixed by the seed; this guards against a draw that never moves) */
    ck_assert_int_gt(shifted, 0);
    ck_assert_int_gt(flips, 0);
    ck_assert_int_lt(flips, 6);
    free(x);
    adapt_dataset_free(&ds);
}
END_TEST

/* Over 2000 samples every offset 0..8 appears about 2000/9 = 222 times (binomial sd
 * sqrt(2000 * 1/9 * 8/9) = 14.1; bound 5 sd = 70), flips 1000 +- 5 * 22.4. */
START_TEST(test_augment_distribution)
{
    int cy[9] = {0}, cx[9] = {0}, flips = 0;
    for (int s = 0; s < 2000; s++) {
        int dy, dx, f;
        adapt_augment_draw(2385, 7, s, &dy, &dx, &f);
        cy[dy]++;
        cx[dx]++;
        flips += f;
    }
    for (int k = 0; k < 9; k++) {
        ck_assert_int_lt(abs(cy[k] - 222), 70);
        ck_assert_int_lt(abs(cx[k] - 222), 70);
    }
    ck_assert_int_lt(abs(flips - 1000), 112);
    /* another epoch draws differently for the same sample */
    int differ = 0;
    for (int s = 0; s < 50; s++) {
        int a[3], b[3];
        adapt_augment_draw(2385, 7, s, &a[0], &a[1], &a[2]);
        adapt_augment_draw(2385, 8, s, &b[0], &b[1], &b[2]);
        differ += memcmp(a, b, sizeof a) != 0;
    }
    ck_assert_int_gt(differ, 40); /* equal draws have probability 1/162 per sample */
}
END_TEST

/* Same bits for 1 and 2 threads, and for a sample alone or inside a batch. */
START_TEST(test_augment_threads)
{
    struct adapt_dataset ds;
    enum { B = 64 };
    fake_cifar(&ds, 100);
    int idx[B];
    for (int i = 0; i < B; i++) idx[i] = (i * 37 + 11) % 100;
    float *x1 = malloc(B * 3072 * sizeof(float)), *x2 = malloc(B * 3072 * sizeof(float));
    float *x3 = malloc(3072 * sizeof(float));
    int y1[B], y2[B], y3;
#ifdef _OPENMP
    omp_set_num_threads(1);
#endif
    adapt_batch_fill(&ds, idx, B, 1, 2385, 5, x1, y1);
#ifdef _OPENMP
    omp_set_num_threads(2);
#endif
    adapt_batch_fill(&ds, idx, B, 1, 2385, 5, x2, y2);
    ck_assert_mem_eq(x1, x2, B * 3072 * sizeof(float));
    ck_assert_mem_eq(y1, y2, sizeof y1);
    adapt_batch_fill(&ds, &idx[17], 1, 1, 2385, 5, x3, &y3);
    ck_assert_mem_eq(x3, x1 + 17 * 3072, 3072 * sizeof(float));
    /* a different seed changes the batch */
    adapt_batch_fill(&ds, idx, B, 1, 2386, 5, x2, y2);
    ck_assert(memcmp(x1, x2, B * 3072 * sizeof(float)) != 0);
    free(x3);
    free(x2);
    free(x1);
    adapt_dataset_free(&ds);
}
END_TEST

/* ---- loader ---- */

START_TEST(test_loader)
{
    struct adapt_dataset ds;
    struct adapt_loader l;
    fake_cifar(&ds, 30);
    int sub[10] = {29, 3, 14, 15, 9, 26, 5, 8, 0, 22};
    float x[4 * 3072], ref[4 * 3072];
    int y[4], yref[4], order[10];

    ck_assert_int_eq(adapt_loader_alloc(&l, &ds, sub, 10, 4,
                                        ADAPT_LOADER_SHUFFLE | ADAPT_LOADER_AUGMENT, 2385),
                     ADAPT_OK);
    ck_assert_int_eq(adapt_loader_batches(&l), 3); /* ceil(10 / 4) */
    /* jump straight to epoch 2: the order depends only on (seed, epoch, subset) */
    adapt_loader_start(&l, 2);
    adapt_epoch_order(order, sub, 10, 2385, 2);
    int sizes[3] = {4, 4, 2}, pos = 0;
    for (int b = 0; b < 3; b++) {
        ck_assert_int_eq(adapt_loader_next(&l, x, y), sizes[b]);
        adapt_batch_fill(&ds, order + pos, sizes[b], 1, 2385, 2, ref, yref);
        ck_assert_mem_eq(x, ref, (size_t)sizes[b] * 3072 * sizeof(float));
        ck_assert_mem_eq(y, yref, (size_t)sizes[b] * sizeof(int));
        pos += sizes[b];
    }
    ck_assert_int_eq(adapt_loader_next(&l, x, y), 0);
    adapt_loader_free(&l);

    /* drop-last, no shuffle, whole data set: 30 samples give 7 batches of 4 in order */
    ck_assert_int_eq(adapt_loader_alloc(&l, &ds, NULL, 0, 4, ADAPT_LOADER_DROP_LAST, 1), ADAPT_OK);
    ck_assert_int_eq(adapt_loader_batches(&l), 7);
    int nb = 0, got;
    while ((got = adapt_loader_next(&l, x, y)) > 0) {
        ck_assert_int_eq(got, 4);
        for (int i = 0; i < 4; i++) ck_assert_int_eq(y[i], c10_label(4 * nb + i));
        nb++;
    }
    ck_assert_int_eq(nb, 7);
    adapt_loader_free(&l);

    int bad[2] = {3, 30};
    expect_error(adapt_loader_alloc(&l, &ds, bad, 2, 4, 0, 1), ADAPT_ERANGE,
                 "index 30 at position 1: expected 0 .. 29", NULL);
    expect_error(adapt_loader_alloc(&l, &ds, NULL, 0, 0, 0, 1), ADAPT_EINVAL, "batch size 0",
                 NULL);
    adapt_dataset_free(&ds);
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

int main(void)
{
    Suite *s = suite_create("data");
    TCase *tc = tcase_create("files");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_idx_raw_and_gzip);
    tcase_add_test(tc, test_idx_readers);
    tcase_add_test(tc, test_emnist_transpose);
    tcase_add_test(tc, test_mnist_normalisation);
    tcase_add_test(tc, test_idx_errors);
    tcase_add_test(tc, test_idx_declared_sizes);
    tcase_add_test(tc, test_cifar10_folder);
    tcase_add_test(tc, test_cifar100_folder);
    tcase_add_test(tc, test_cifar10_archive);
    tcase_add_test(tc, test_cifar_default_path);
    tcase_add_test(tc, test_cifar_member_cap);
    tcase_add_test(tc, test_cifar_errors);
    tcase_add_test(tc, test_cifar_normalisation);
    suite_add_tcase(s, tc);

    TCase *to = tcase_create("order");
    tcase_add_test(to, test_holdout);
    tcase_add_test(to, test_epoch_order);
    tcase_add_test(to, test_epoch_order_uniform);
    tcase_add_test(to, test_augment_reference);
    tcase_add_test(to, test_augment_distribution);
    tcase_add_test(to, test_augment_threads);
    tcase_add_test(to, test_loader);
    suite_add_tcase(s, to);

    TCase *tr = tcase_create("real");
    /* 60000 + 10000 gzip-compressed images: about a second on a loaded machine */
    tcase_set_timeout(tr, 30);
    tcase_add_test(tr, test_fashion_mnist_real);
    suite_add_tcase(s, tr);

    return tu_run_suite(s, CK_FORK_GETENV);
}
