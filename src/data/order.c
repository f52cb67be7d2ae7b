/* src/data/order.c: held-out validation split and per-epoch sample order. */
#include <stdlib.h>
#include <string.h>

#include "src/base/rng.h"
#include "src/data/data.h"

/* Fisher-Yates (Durstenfeld): for i = n-1 .. 1 swap a[i] with a[j], j uniform in [0, i]. */
static void shuffle(int *a, int n, struct adapt_rng *r)
{
    for (int i = n - 1; i > 0; i--) {
        int j = (int)adapt_rng_below(r, (uint32_t)i + 1u);
        int t = a[i];
        a[i] = a[j];
        a[j] = t;
    }
}

enum adapt_status adapt_holdout_alloc(struct adapt_holdout *ho, int n, int val_count,
                                      uint64_t seed)
{
    enum adapt_status st = ADAPT_OK;
    struct adapt_rng r;
    if (n < 1 || val_count < 0 || val_count >= n)
        return ADAPT_ERROR(ADAPT_EINVAL,
                           "validation split: %d samples out of %d: expected 0 <= count < %d "
                           "(at least one training sample must remain)",
                           val_count, n, n);
    int *perm = malloc((size_t)n * sizeof *perm);
    unsigned char *is_val = calloc((size_t)n, 1);
    int *train = malloc((size_t)(n - val_count) * sizeof *train);
    int *val = malloc((size_t)(val_count > 0 ? val_count : 1) * sizeof *val);
    if (!perm || !is_val || !train || !val) {
        st = ADAPT_ERROR(ADAPT_ENOMEM, "validation split: cannot allocate index lists for %d "
                         "samples", n);
        free(val);
        free(train);
        goto free_scratch;
    }
    for (int i = 0; i < n; i++) perm[i] = i;
    adapt_rng_init(&r, seed, ADAPT_STREAM_SPLIT);
    shuffle(perm, n, &r);
    for (int i = 0; i < val_count; i++) is_val[perm[i]] = 1;
    int nt = 0, nv = 0;
    for (int i = 0; i < n; i++) {
        if (is_val[i]) val[nv++] = i;
        else train[nt++] = i;
    }
    ADAPT_ASSERT(nv == val_count && nt == n - val_count);
    ho->n_train = nt;
    ho->n_val = nv;
    ho->train = train;
    ho->val = val;
free_scratch:
    free(is_val);
    free(perm);
    return st;
}

void adapt_holdout_free(struct adapt_holdout *ho)
{
    if (!ho) return;
    free(ho->val);
    free(ho->train);
    memset(ho, 0, sizeof *ho);
}

void adapt_epoch_order(int *order, const int *indices, int n, uint64_t seed, int64_t epoch)
{
    struct adapt_rng r;
    ADAPT_ASSERT(n >= 0 && epoch >= 0 && epoch < ((int64_t)1 << 55));
    if (order != indices) memmove(order, indices, (size_t)n * sizeof *order);
    adapt_rng_init(&r, seed, (uint64_t)ADAPT_STREAM_SHUFFLE | ((uint64_t)epoch << 8));
    shuffle(order, n, &r);
}
