/* src/data/batch.c: batch assembly (normalisation, random crop + flip) and the loader. */
#include <stdlib.h>
#include <string.h>

#include "src/base/hd.h"
#include "src/base/rng.h"
#include "src/data/data.h"

void adapt_augment_draw(uint64_t seed, int64_t epoch, int sample, int *dy, int *dx, int *flip)
{
    const uint32_t span = 2 * ADAPT_AUG_PAD + 1;
    ADAPT_ASSERT(epoch >= 0 && epoch < ((int64_t)1 << 55) && sample >= 0);
    adapt_u32x4 b = adapt_rng_block(seed, (uint64_t)ADAPT_STREAM_AUGMENT | ((uint64_t)epoch << 8),
                                    (uint64_t)sample);
    *dy = (int)(((uint64_t)b.v[0] * span) >> 32);
    *dx = (int)(((uint64_t)b.v[1] * span) >> 32);
    *flip = (int)(b.v[2] >> 31);
}

/* One sample: dst (C, H, W) = lut[c][pixel]; with aug, output (r, x) reads the zero-padded
 * source at (r + dy - pad, x' + dx - pad), x' = W-1-x when flipped, else x. */
ADAPT_HOT_CLONES
static void fill_sample(const uint8_t *ADAPT_RESTRICT src, int C, int H, int W,
                        const float (*lut)[256], int aug, int dy, int dx, int flip,
                        float *ADAPT_RESTRICT dst)
{
    if (!aug) {
        for (int c = 0; c < C; c++) {
            const float *L = lut[c];
            const uint8_t *s = src + (size_t)c * H * W;
            float *d = dst + (size_t)c * H * W;
            for (int k = 0; k < H * W; k++) d[k] = L[s[k]];
        }
        return;
    }
    for (int c = 0; c < C; c++) {
        const float *L = lut[c];
        for (int r = 0; r < H; r++) {
            int sr = r + dy - ADAPT_AUG_PAD;
            float *d = dst + ((size_t)c * H + r) * W;
            if (sr < 0 || sr >= H) {
                for (int x = 0; x < W; x++) d[x] = L[0];
                continue;
            }
            const uint8_t *s = src + ((size_t)c * H + sr) * W;
            for (int x = 0; x < W; x++) {
                int sx = (flip ? W - 1 - x : x) + dx - ADAPT_AUG_PAD;
                d[x] = (sx >= 0 && sx < W) ? L[s[sx]] : L[0];
            }
        }
    }
}

void adapt_batch_fill(const struct adapt_dataset *ds, const int *idx, int n, int augment,
                      uint64_t seed, int64_t epoch, float *x, int *y)
{
    float lut[ADAPT_DATA_MAX_C][256];
    const int C = ds->c, H = ds->h, W = ds->w;
    const size_t chw = (size_t)C * H * W;

    ADAPT_ASSERT(C >= 1 && C <= ADAPT_DATA_MAX_C);
    /* ToTensor then Normalize, in float32 and in this order (torchvision). */
    for (int c = 0; c < C; c++)
        for (int p = 0; p < 256; p++) lut[c][p] = ((float)p / 255.0f - ds->mean[c]) / ds->std[c];

#pragma omp parallel for schedule(static)
    for (int i = 0; i < n; i++) {
        int s = idx[i], dy = 0, dx = 0, flip = 0;
        ADAPT_ASSERT(s >= 0 && s < ds->n);
        if (augment) adapt_augment_draw(seed, epoch, s, &dy, &dx, &flip);
        fill_sample(ds->images + (size_t)s * chw, C, H, W, (const float(*)[256])lut, augment, dy,
                    dx, flip, x + (size_t)i * chw);
        y[i] = ds->labels[s];
    }
}

enum adapt_status adapt_loader_alloc(struct adapt_loader *l, const struct adapt_dataset *ds,
                                     const int *indices, int n, int batch_size, unsigned flags,
                                     uint64_t seed)
{
    if (!ds || !ds->images || ds->n < 1)
        return ADAPT_ERROR(ADAPT_EINVAL, "loader: expected a loaded, non-empty data set");
    if (!indices) n = ds->n;
    if (n < 1)
        return ADAPT_ERROR(ADAPT_EINVAL, "loader over %s: %d samples: expected at least 1",
                           ds->name, n);
    if (batch_size < 1)
        return ADAPT_ERROR(ADAPT_EINVAL, "loader over %s: batch size %d: expected >= 1", ds->name,
                           batch_size);
    if (flags & ~(unsigned)(ADAPT_LOADER_SHUFFLE | ADAPT_LOADER_AUGMENT | ADAPT_LOADER_DROP_LAST))
        return ADAPT_ERROR(ADAPT_EINVAL, "loader over %s: unknown flags 0x%x", ds->name, flags);
    if ((flags & ADAPT_LOADER_DROP_LAST) && n < batch_size)
        return ADAPT_ERROR(ADAPT_EINVAL,
                           "loader over %s: %d samples with batch size %d and drop-last: "
                           "expected at least one full batch",
                           ds->name, n, batch_size);
    if (indices)
        for (int i = 0; i < n; i++)
            if (indices[i] < 0 || indices[i] >= ds->n)
                return ADAPT_ERROR(ADAPT_ERANGE,
                                   "loader over %s: index %d at position %d: expected 0 .. %d",
                                   ds->name, indices[i], i, ds->n - 1);
    int *ind = malloc((size_t)n * sizeof *ind);
    int *order = malloc((size_t)n * sizeof *order);
    if (!ind || !order) {
        free(order);
        free(ind);
        return ADAPT_ERROR(ADAPT_ENOMEM, "loader over %s: cannot allocate %d indices", ds->name,
                           n);
    }
    for (int i = 0; i < n; i++) ind[i] = indices ? indices[i] : i;
    l->ds = ds;
    l->n = n;
    l->indices = ind;
    l->order = order;
    l->batch_size = batch_size;
    l->flags = flags;
    l->seed = seed;
    adapt_loader_start(l, 0);
    return ADAPT_OK;
}

void adapt_loader_start(struct adapt_loader *l, int64_t epoch)
{
    if (l->flags & ADAPT_LOADER_SHUFFLE)
        adapt_epoch_order(l->order, l->indices, l->n, l->seed, epoch);
    else
        memcpy(l->order, l->indices, (size_t)l->n * sizeof *l->order);
    l->epoch = epoch;
    l->pos = 0;
}

int adapt_loader_next(struct adapt_loader *l, float *x, int *y)
{
    int b = l->n - l->pos;
    if (b > l->batch_size) b = l->batch_size;
    if (b <= 0 || ((l->flags & ADAPT_LOADER_DROP_LAST) && b < l->batch_size)) {
        l->pos = l->n;
        return 0;
    }
    adapt_batch_fill(l->ds, l->order + l->pos, b, (l->flags & ADAPT_LOADER_AUGMENT) != 0, l->seed,
                     l->epoch, x, y);
    l->pos += b;
    return b;
}

int adapt_loader_batches(const struct adapt_loader *l)
{
    if (l->flags & ADAPT_LOADER_DROP_LAST) return l->n / l->batch_size;
    return (l->n + l->batch_size - 1) / l->batch_size;
}

void adapt_loader_free(struct adapt_loader *l)
{
    if (!l) return;
    free(l->order);
    free(l->indices);
    memset(l, 0, sizeof *l);
}
