/* tests/test_data_order.c: what happens to a loaded data set, part of tests/test_data: the
 * hold-out split, the epoch order (and its uniformity), augmentation against a reference, its
 * distribution and its independence of the thread count, and the batch loader. Data sets are
 * made in memory from the synthetic CIFAR pixels. */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "src/base/log.h"
#include "src/base/rng.h"
#include "src/base/status.h"
#include "src/data/data.h"
#include "tests/test_data.h"
#include "tests/testutil.h"

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

void test_data_add_order(TCase *order)
{
    tcase_add_test(order, test_holdout);
    tcase_add_test(order, test_epoch_order);
    tcase_add_test(order, test_epoch_order_uniform);
    tcase_add_test(order, test_augment_reference);
    tcase_add_test(order, test_augment_distribution);
    tcase_add_test(order, test_augment_threads);
    tcase_add_test(order, test_loader);
}
