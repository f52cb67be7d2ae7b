/* src/data/dataset.c: the table of data sets and loading one part of one into memory. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "src/base/log.h"
#include "src/data/internal.h"

enum dataset_source { SOURCE_IDX = 0, SOURCE_CIFAR10, SOURCE_CIFAR100 };

struct dataset_desc {
    const char *name;
    enum dataset_source source;
    const char *default_path;
    const char *prefix;       /* IDX file name prefix */
    const char *part_tag[2];  /* IDX file name part for train and test */
    int classes;
    int transpose;            /* IDX images stored column-major (EMNIST) */
    int augment;
    float mean[ADAPT_DATA_MAX_C];
    float std[ADAPT_DATA_MAX_C];
    const char *get_it;       /* where the files come from, for "not found" messages */
};

/* Normalisation constants: the values used by the AdaPT reference code and the usual
 * torchvision recipes (MNIST: 0.1307 / 0.3081; CIFAR: per-channel, doc/models.md). */
static const struct dataset_desc datasets[] = {
    {"mnist", SOURCE_IDX, "data/mnist", "", {"train", "t10k"}, 10, 0, 0,
     {0.1307f, 0, 0}, {0.3081f, 1, 1},
     "get the four MNIST IDX files (train-images-idx3-ubyte.gz, ...) from "
     "https://yann.lecun.com/exdb/mnist/ or a mirror and put them in data/mnist (under the "
     "current directory) or the folder given by data.path"},
    {"fashion-mnist", SOURCE_IDX, "/usr/share/datasets/fashion-mnist", "", {"train", "t10k"}, 10,
     0, 0, {0.1307f, 0, 0}, {0.3081f, 1, 1},
     "install the Debian package dataset-fashion-mnist, or get the four IDX files from "
     "https://github.com/zalandoresearch/fashion-mnist and put them in the folder given by "
     "data.path"},
    {"emnist-balanced", SOURCE_IDX, "data/emnist", "emnist-balanced-", {"train", "test"}, 47, 1, 0,
     {0.1307f, 0, 0}, {0.3081f, 1, 1},
     "get gzip.zip from https://www.nist.gov/itl/products-and-services/emnist-dataset, unpack "
     "its emnist-balanced-* files into data/emnist (under the current directory) or the folder "
     "given by data.path"},
    /* CIFAR: "data" holds the extracted folder or the .tar.gz (cifar.c looks for both) */
    {"cifar10", SOURCE_CIFAR10, "data", NULL, {NULL, NULL}, 10, 0, 1,
     {0.4914f, 0.4822f, 0.4465f}, {0.2023f, 0.1994f, 0.2010f}, NULL},
    {"cifar100", SOURCE_CIFAR100, "data", NULL, {NULL, NULL}, 100, 0, 1,
     {0.4914f, 0.4822f, 0.4465f}, {0.2023f, 0.1994f, 0.2010f}, NULL},
};

#define NDATASETS ((int)(sizeof datasets / sizeof datasets[0]))
#define MNIST_SIDE 28
#define PADDED_SIDE 32
#define MNIST_PAD ((PADDED_SIDE - MNIST_SIDE) / 2)

static const struct dataset_desc *find_desc(const char *name)
{
    for (int i = 0; i < NDATASETS; i++)
        if (name && strcmp(datasets[i].name, name) == 0) return &datasets[i];
    return NULL;
}

const char *adapt_dataset_default_path(const char *name)
{
    const struct dataset_desc *d = find_desc(name);
    return d ? d->default_path : NULL;
}

static int is_file(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
}

/* dir/base if present, else dir/base.gz; out holds the chosen path. */
static enum adapt_status idx_find(const struct dataset_desc *d, const char *dir, const char *base,
                                  char *out, size_t len)
{
    if (snprintf(out, len, "%s/%s.gz", dir, base) >= (int)len)
        return ADAPT_ERROR(ADAPT_EINVAL, "%s: path too long for data set %s", dir, d->name);
    snprintf(out, len, "%s/%s", dir, base);
    if (is_file(out)) return ADAPT_OK;
    snprintf(out, len, "%s/%s.gz", dir, base);
    if (is_file(out)) return ADAPT_OK;
    return ADAPT_ERROR(ADAPT_ENOENT, "%s/%s: not found (nor %s/%s.gz) for data set %s: %s", dir,
                       base, dir, base, d->name, d->get_it);
}

/* Copies 28x28 images into the centre of zeroed 32x32 ones, transposing when asked. */
static void pad_images(const uint8_t *src, uint8_t *dst, int n, int transpose)
{
    for (int i = 0; i < n; i++) {
        const uint8_t *s = src + (size_t)i * MNIST_SIDE * MNIST_SIDE;
        uint8_t *t = dst + (size_t)i * PADDED_SIDE * PADDED_SIDE;
        for (int r = 0; r < MNIST_SIDE; r++)
            for (int c = 0; c < MNIST_SIDE; c++)
                t[(r + MNIST_PAD) * PADDED_SIDE + c + MNIST_PAD] =
                    transpose ? s[c * MNIST_SIDE + r] : s[r * MNIST_SIDE + c];
    }
}

/* 28x28 images (transposed back when asked) resized to 32x32 in place of padding. */
static enum adapt_status resize_images(const uint8_t *src, uint8_t *dst, int n, int transpose)
{
    uint8_t *up = NULL;
    if (transpose) {
        if (!(up = malloc((size_t)(unsigned)n * MNIST_SIDE * MNIST_SIDE)))
            return ADAPT_ERROR(ADAPT_ENOMEM, "cannot allocate %d images to transpose", n);
        for (int i = 0; i < n; i++) {
            const uint8_t *s = src + (size_t)i * MNIST_SIDE * MNIST_SIDE;
            uint8_t *t = up + (size_t)i * MNIST_SIDE * MNIST_SIDE;
            for (int r = 0; r < MNIST_SIDE; r++)
                for (int c = 0; c < MNIST_SIDE; c++) t[r * MNIST_SIDE + c] = s[c * MNIST_SIDE + r];
        }
        src = up;
    }
    enum adapt_status st = adapt_resize_bilinear(src, n, MNIST_SIDE, MNIST_SIDE, dst, PADDED_SIDE,
                                                 PADDED_SIDE);
    free(up);
    return st;
}

static enum adapt_status load_idx(const struct dataset_desc *d, const char *dir,
                                  enum adapt_data_part part, enum adapt_data_resize resize,
                                  struct adapt_dataset *ds)
{
    enum adapt_status st;
    char ipath[4096], lpath[4096], base[256];
    const char *tag = d->part_tag[part == ADAPT_DATA_TEST ? 1 : 0];
    int n, rows, cols, nl;
    uint8_t *pix = NULL, *lab = NULL, *img = NULL;
    int *labels = NULL;

    snprintf(base, sizeof base, "%s%s-images-idx3-ubyte", d->prefix, tag);
    if ((st = idx_find(d, dir, base, ipath, sizeof ipath)) != ADAPT_OK) return st;
    snprintf(base, sizeof base, "%s%s-labels-idx1-ubyte", d->prefix, tag);
    if ((st = idx_find(d, dir, base, lpath, sizeof lpath)) != ADAPT_OK) return st;

    if ((st = adapt_idx_images_read(ipath, &n, &rows, &cols, &pix)) != ADAPT_OK) return st;
    if (rows != MNIST_SIDE || cols != MNIST_SIDE) {
        st = ADAPT_ERROR(ADAPT_EFORMAT, "%s: images are %dx%d: expected %dx%d for data set %s",
                         ipath, rows, cols, MNIST_SIDE, MNIST_SIDE, d->name);
        goto free_pixels;
    }
    if ((st = adapt_idx_labels_read(lpath, &nl, &lab)) != ADAPT_OK) goto free_pixels;
    if (nl != n) {
        st = ADAPT_ERROR(ADAPT_EFORMAT, "%s: %d labels, but %s holds %d images: expected equal "
                         "counts", lpath, nl, ipath, n);
        goto free_labels;
    }
    for (int i = 0; i < n; i++)
        if (lab[i] >= d->classes) {
            st = ADAPT_ERROR(ADAPT_EFORMAT,
                             "%s: label %d at index %d out of range: expected 0 .. %d for %s",
                             lpath, lab[i], i, d->classes - 1, d->name);
            goto free_labels;
        }
    img = calloc((size_t)(unsigned)n, PADDED_SIDE * PADDED_SIDE);
    labels = malloc((size_t)(unsigned)n * sizeof *labels);
    if (!img || !labels) {
        st = ADAPT_ERROR(ADAPT_ENOMEM, "%s: cannot allocate %d padded images", ipath, n);
        goto free_out;
    }
    if (resize == ADAPT_DATA_RESIZE_BILINEAR) {
        if ((st = resize_images(pix, img, n, d->transpose)) != ADAPT_OK) goto free_out;
    } else {
        pad_images(pix, img, n, d->transpose);
    }
    for (int i = 0; i < n; i++) labels[i] = lab[i];
    free(lab);
    free(pix);
    ds->n = n;
    ds->c = 1;
    ds->h = PADDED_SIDE;
    ds->w = PADDED_SIDE;
    ds->classes = d->classes;
    ds->images = img;
    ds->labels = labels;
    return ADAPT_OK;

free_out:
    free(labels);
    free(img);
free_labels:
    free(lab);
free_pixels:
    free(pix);
    return st;
}

int adapt_dataset_classes_of(const char *name)
{
    static const struct {
        const char *name;
        int classes;
    } known[] = {{"mnist", 10},    {"fashion-mnist", 10}, {"emnist-balanced", 47},
                 {"cifar10", 10}, {"cifar100", 100}};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (!strcmp(known[i].name, name)) return known[i].classes;
    return 0;
}

enum adapt_status adapt_dataset_load(struct adapt_dataset *ds, const char *name, const char *path,
                                     enum adapt_data_part part)
{
    return adapt_dataset_load_resized(ds, name, path, part, ADAPT_DATA_RESIZE_PAD);
}

enum adapt_status adapt_dataset_load_resized(struct adapt_dataset *ds, const char *name,
                                             const char *path, enum adapt_data_part part,
                                             enum adapt_data_resize resize)
{
    const struct dataset_desc *d = find_desc(name);
    struct adapt_dataset t;
    enum adapt_status st;

    if (!d)
        return ADAPT_ERROR(ADAPT_EINVAL,
                           "unknown data set '%s': expected one of mnist, fashion-mnist, "
                           "emnist-balanced, cifar10, cifar100",
                           name ? name : "(null)");
    if (part != ADAPT_DATA_TRAIN && part != ADAPT_DATA_TEST)
        return ADAPT_ERROR(ADAPT_EINVAL, "data set %s: part %d: expected train (0) or test (1)",
                           d->name, (int)part);
    if (resize != ADAPT_DATA_RESIZE_PAD && resize != ADAPT_DATA_RESIZE_BILINEAR)
        return ADAPT_ERROR(ADAPT_EINVAL, "data set %s: resize %d: expected pad (0) or bilinear (1)",
                           d->name, (int)resize);
    if (!path || !*path) path = d->default_path;
    memset(&t, 0, sizeof t);
    switch (d->source) {
    case SOURCE_IDX: st = load_idx(d, path, part, resize, &t); break;
    case SOURCE_CIFAR10: st = adapt_cifar_load(&t, 10, path, part); break;
    case SOURCE_CIFAR100: st = adapt_cifar_load(&t, 100, path, part); break;
    default: ADAPT_ASSERT(!"unknown data source"); return ADAPT_EINVAL;
    }
    if (st != ADAPT_OK) return st;
    snprintf(t.name, sizeof t.name, "%s", d->name);
    t.part = part;
    t.augment = d->augment;
    t.resize = resize;
    for (int c = 0; c < ADAPT_DATA_MAX_C; c++) {
        t.mean[c] = d->mean[c];
        t.std[c] = d->std[c];
    }
    adapt_log(ADAPT_LOG_DEBUG, "%s %s: %d images (%d, %d, %d), %d classes, from %s", t.name,
              part == ADAPT_DATA_TEST ? "test" : "train", t.n, t.c, t.h, t.w, t.classes, path);
    *ds = t;
    return ADAPT_OK;
}

void adapt_dataset_free(struct adapt_dataset *ds)
{
    if (!ds) return;
    free(ds->labels);
    free(ds->images);
    memset(ds, 0, sizeof *ds);
}
