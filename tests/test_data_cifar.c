/* tests/test_data_cifar.c: CIFAR files, part of tests/test_data: CIFAR-10 and CIFAR-100
 * batch folders, the CIFAR-10 .tar.gz (written with libarchive) with its member cap, the default
 * path, normalisation, and damaged folders and archives refused with what is wrong. */
#include <archive.h>
#include <archive_entry.h>
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "src/base/log.h"
#include "src/base/rng.h"
#include "src/base/status.h"
#include "src/data/data.h"
#include "tests/test_data.h"
#include "tests/testutil.h"

/* ---- CIFAR ---- */

/* tests/test_data.h */
int cpix(int s, int ch, int r, int c)
{
    return (53 * s + 101 * ch + 7 * r + 3 * c + 1) % 256;
}
int c10_label(int s) { return (3 * s + 1) % 10; }
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

void test_data_add_cifar(TCase *files)
{
    tcase_add_test(files, test_cifar10_folder);
    tcase_add_test(files, test_cifar100_folder);
    tcase_add_test(files, test_cifar10_archive);
    tcase_add_test(files, test_cifar_default_path);
    tcase_add_test(files, test_cifar_member_cap);
    tcase_add_test(files, test_cifar_errors);
    tcase_add_test(files, test_cifar_normalisation);
}
