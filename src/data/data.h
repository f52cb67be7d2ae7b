/* src/data/data.h: image classification data sets, held-out validation split,
 * epoch order, batch assembly with normalisation and augmentation.
 *
 * Data sets and files:
 *   "mnist", "fashion-mnist"  IDX files train-images-idx3-ubyte, train-labels-idx1-ubyte,
 *                             t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte (raw or .gz)
 *   "emnist-balanced"         emnist-balanced-{train,test}-{images-idx3,labels-idx1}-ubyte
 *                             (raw or .gz); 47 classes; images are stored transposed in
 *                             the EMNIST files and are transposed back here (upright)
 *   "cifar10"                 binary version: cifar-10-batches-bin/data_batch_{1..5}.bin,
 *                             test_batch.bin, or the archive cifar-10-binary.tar.gz
 *   "cifar100"                binary version: cifar-100-binary/{train,test}.bin (label
 *                             bytes coarse then fine; the fine label is used, 100
 *                             classes), or the archive cifar-100-binary.tar.gz
 * For IDX data the path is the folder holding the files (a raw file is preferred to its
 * .gz twin). For CIFAR the path may be the folder holding the batches, its parent, or the
 * .tar.gz archive itself (read with libarchive). NULL selects adapt_dataset_default_path().
 *
 * Images are kept in memory as uint8 (N, C, H, W). MNIST-family 28x28 images are brought to
 * 32x32 when loaded, in one of two ways (enum adapt_data_resize):
 *   ADAPT_DATA_RESIZE_PAD       zero-padding 2 pixels on each side of the raw image (value 0
 *                               before normalisation, the digits' own background), not
 *                               resizing: LeNet-5's 32x32 input as in LeCun et al. 1998;
 *   ADAPT_DATA_RESIZE_BILINEAR  a bilinear resize 28 -> 32 with the 8-bit arithmetic of
 *                               Pillow's resize(BILINEAR) on "L" images, what torchvision's
 *                               Resize((32, 32)) does in the AdaPT reference code
 *                               (adapt_resize_bilinear, src/data/resize.c).
 * CIFAR images are 32x32 already and are left as they are by either.
 *
 * Normalisation: x = (p / 255 - mean[c]) / std[c] in float32, in this order of operations
 * (torchvision ToTensor then Normalize). MNIST family: mean 0.1307, std 0.3081. CIFAR:
 * mean (0.4914, 0.4822, 0.4465), std (0.2023, 0.1994, 0.2010).
 *
 * Augmentation (CIFAR training): torchvision RandomCrop(32, padding=4) followed by
 * RandomHorizontalFlip(0.5), applied to the uint8 image before normalisation, so padded
 * pixels are value 0 and normalise to (0 - mean[c]) / std[c], as with torchvision's
 * transform order. The crop offsets dy, dx in [0, 8] and the flip are drawn from one
 * Philox block keyed by (seed, stream ADAPT_STREAM_AUGMENT | epoch << 8, block = dataset
 * index of the sample): the result depends on neither the thread count, the batch size,
 * nor the sample's position in the epoch.
 *
 * Random streams: the low 8 bits of a stream number name the consumer (src/base/rng.h),
 * higher bits carry the epoch. Validation split: (seed, ADAPT_STREAM_SPLIT). Epoch e's
 * order: Fisher-Yates over the caller's index list with (seed, ADAPT_STREAM_SHUFFLE |
 * e << 8), starting from that list every epoch (an epoch's order depends only on seed,
 * epoch and the list). All of it runs serially except batch filling, which is OpenMP
 * parallel over samples and writes the same bits for any thread count.
 *
 *   struct adapt_dataset train, test;
 *   struct adapt_holdout ho;
 *   struct adapt_loader tl, vl;
 *   adapt_dataset_load(&train, "cifar10", "data", ADAPT_DATA_TRAIN);
 *   adapt_dataset_load(&test, "cifar10", "data", ADAPT_DATA_TEST);
 *   adapt_holdout_alloc(&ho, train.n, 5000, seed);
 *   adapt_loader_alloc(&tl, &train, ho.train, ho.n_train, 128,
 *                      ADAPT_LOADER_SHUFFLE | ADAPT_LOADER_AUGMENT, seed);
 *   adapt_loader_alloc(&vl, &train, ho.val, ho.n_val, 256, 0, seed);
 *   float *x = ...;  // (128, train.c, train.h, train.w)
 *   int y[128], nb;
 *   for (epoch = 0; epoch < epochs; epoch++) {
 *       adapt_loader_start(&tl, epoch);
 *       while ((nb = adapt_loader_next(&tl, x, y)) > 0) train_step(x, y, nb);
 *   }
 *   adapt_loader_free(&vl); adapt_loader_free(&tl); adapt_holdout_free(&ho);
 *   adapt_dataset_free(&test); adapt_dataset_free(&train);
 *
 * Ownership: a dataset owns its images and labels; a holdout owns its index lists; a
 * loader owns a copy of its index list and its order, and borrows the dataset (which must
 * outlive it). Batch buffers belong to the caller.
 *
 * Non-goals: no downloading, no streaming from disk (everything is loaded at once), no
 * colour-jitter or other augmentations, no prefetch threads.
 */
#ifndef ADAPT_DATA_H
#define ADAPT_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "src/base/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Which part of a data set's files to load. */
enum adapt_data_part { ADAPT_DATA_TRAIN = 0, ADAPT_DATA_TEST };

#define ADAPT_DATA_MAX_C 3
#define ADAPT_DATA_NAME_MAX 32

/* How 28x28 images become the 32x32 the models read (data.resize). */
enum adapt_data_resize { ADAPT_DATA_RESIZE_PAD = 0, ADAPT_DATA_RESIZE_BILINEAR };

struct adapt_dataset {
    char name[ADAPT_DATA_NAME_MAX]; /* "fashion-mnist", "cifar10", ... */
    enum adapt_data_part part;
    int n;                          /* samples */
    int c, h, w;                    /* per-sample shape after padding: (1, 32, 32) or (3, 32, 32) */
    int classes;                    /* labels lie in [0, classes) */
    uint8_t *images;                /* (n, c, h, w), raw pixel values */
    int *labels;                    /* (n) */
    float mean[ADAPT_DATA_MAX_C];   /* per-channel normalisation, first c used */
    float std[ADAPT_DATA_MAX_C];
    int augment;                    /* 1 where the usual training recipe augments (CIFAR) */
    enum adapt_data_resize resize;  /* how 28x28 images were brought to 32x32 */
};

/* The built-in default location of a data set ("/usr/share/datasets/fashion-mnist",
 * "data/mnist", "data" for CIFAR, ...), or NULL for an unknown name. */
const char *adapt_dataset_default_path(const char *name);

/* The number of classes of a data set by name (10, 47 for emnist-balanced, 100 for cifar100),
 * known before its files are read; 0 for an unknown name. */
int adapt_dataset_classes_of(const char *name);

/* Loads the train or test part of data set `name` from `path` (NULL: the default path).
 * On error nothing is allocated and the message names the file and what was expected. */
enum adapt_status adapt_dataset_load(struct adapt_dataset *ds, const char *name, const char *path,
                                     enum adapt_data_part part);
/* The same with a choice of how 28x28 images become 32x32 (adapt_dataset_load pads). The
 * resize happens once, here; batches read the stored 32x32 bytes. */
enum adapt_status adapt_dataset_load_resized(struct adapt_dataset *ds, const char *name,
                                             const char *path, enum adapt_data_part part,
                                             enum adapt_data_resize resize);
void adapt_dataset_free(struct adapt_dataset *ds);

/* Lower level: one IDX file (raw or gzip). Images: magic 0x00000803, dims (n, rows, cols),
 * *pixels (n, rows, cols) malloc'd for the caller to free(). Labels: magic 0x00000801, dims
 * (n), *labels (n) malloc'd. The whole payload must be present and nothing may follow it. */
enum adapt_status adapt_idx_images_read(const char *path, int *n, int *rows, int *cols,
                                        uint8_t **pixels);
enum adapt_status adapt_idx_labels_read(const char *path, int *n, uint8_t **labels);

/* Resizes n 8-bit single-channel images (n, sh, sw) into dst (n, dh, dw) with Pillow's
 * Image.resize((dw, dh), BILINEAR) arithmetic on "L" images, byte for byte: per axis a
 * triangle filter (support max(1, in / out)) centred at (o + 0.5) * in / out, its weights
 * normalised to sum 1 and rounded to 22 fraction bits, each output rounded half up and
 * clamped to [0, 255]; rows first into an 8-bit intermediate, then columns; an axis whose
 * size is unchanged is copied. The formulas are in src/data/resize.c. */
enum adapt_status adapt_resize_bilinear(const uint8_t *src, int n, int sh, int sw, uint8_t *dst,
                                        int dh, int dw);

/* Held-out validation split of n training samples: a seeded random choice of n_val of them
 * (Fisher-Yates permutation with (seed, ADAPT_STREAM_SPLIT); its first n_val entries), both
 * lists sorted ascending. 0 <= val_count < n. */
struct adapt_holdout {
    int n_train, n_val;
    int *train; /* (n_train) dataset indices, ascending */
    int *val;   /* (n_val) dataset indices, ascending */
};

enum adapt_status adapt_holdout_alloc(struct adapt_holdout *ho, int n, int val_count,
                                      uint64_t seed);
void adapt_holdout_free(struct adapt_holdout *ho);

/* Epoch order: order[] = indices[] permuted by Fisher-Yates with (seed, ADAPT_STREAM_SHUFFLE
 * | epoch << 8). order may be indices itself (shuffled in place, same result). */
void adapt_epoch_order(int *order, const int *indices, int n, uint64_t seed, int64_t epoch);

/* One sample's augmentation draw: crop offsets *dy, *dx in [0, 2 * ADAPT_AUG_PAD] into the
 * zero-padded image and *flip (0/1). Offsets use the high half of a 32-bit draw times 9
 * (multiply-shift, bias below 9 / 2^32); flip is the top bit of a third draw. */
#define ADAPT_AUG_PAD 4
void adapt_augment_draw(uint64_t seed, int64_t epoch, int sample, int *dy, int *dx, int *flip);

/* Fills x (n, ds->c, ds->h, ds->w) with normalised images and y (n) with labels of samples
 * idx[0..n). augment != 0 applies random crop + flip keyed by (seed, epoch, idx[i]).
 * OpenMP parallel over samples. */
void adapt_batch_fill(const struct adapt_dataset *ds, const int *idx, int n, int augment,
                      uint64_t seed, int64_t epoch, float *x, int *y);

/* Iterator over a subset of a data set in batches. */
enum adapt_loader_flag {
    ADAPT_LOADER_SHUFFLE = 1,  /* new seeded order every epoch */
    ADAPT_LOADER_AUGMENT = 2,  /* random crop + flip */
    ADAPT_LOADER_DROP_LAST = 4 /* skip a final partial batch */
};

struct adapt_loader {
    const struct adapt_dataset *ds; /* borrowed */
    int n;                          /* samples in the subset */
    int *indices;                   /* (n) the subset, owned copy */
    int *order;                     /* (n) this epoch's order */
    int batch_size;
    unsigned flags;                 /* enum adapt_loader_flag bits */
    uint64_t seed;
    int64_t epoch;
    int pos;                        /* next position in order */
};

/* indices == NULL: the whole data set (0 .. ds->n - 1, and n is ignored). Starts at epoch 0. */
enum adapt_status adapt_loader_alloc(struct adapt_loader *l, const struct adapt_dataset *ds,
                                     const int *indices, int n, int batch_size, unsigned flags,
                                     uint64_t seed);
/* Begins epoch `epoch`: computes its order and rewinds. */
void adapt_loader_start(struct adapt_loader *l, int64_t epoch);
/* Fills the next batch; returns its size (<= batch_size), 0 at the end of the epoch. */
int adapt_loader_next(struct adapt_loader *l, float *x, int *y);
/* Batches per epoch. */
int adapt_loader_batches(const struct adapt_loader *l);
void adapt_loader_free(struct adapt_loader *l);

#ifdef __cplusplus
}
#endif
#endif
