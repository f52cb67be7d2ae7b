/* src/data/cifar.c: CIFAR-10 / CIFAR-100 binary version, from the unpacked folder or
 * from the original .tar.gz (libarchive).
 *
 * Format (https://www.cs.toronto.edu/~kriz/cifar.html, "binary version"): fixed-size
 * records; CIFAR-10: 1 label byte then 3072 pixel bytes; CIFAR-100: 1 coarse label byte,
 * 1 fine label byte, then 3072 pixel bytes. Pixels are the red, green and blue 32x32
 * planes in row-major order, i.e. already (C, H, W).
 */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "src/base/log.h"
#include "src/data/internal.h"

#define CIFAR_PIXELS 3072 /* 3 * 32 * 32 */
#define CIFAR_MAX_FILES 5
#define CIFAR_URL "https://www.cs.toronto.edu/~kriz/cifar.html"

struct cifar_layout {
    int variant;               /* 10 or 100 */
    const char *title;         /* "CIFAR-10" */
    const char *folder;        /* folder name inside the archive */
    const char *archive;       /* archive file name */
    int label_bytes;           /* 1 or 2 */
    int classes;
    int nfiles[2];             /* per enum adapt_data_part */
    const char *files[2][CIFAR_MAX_FILES];
    int records_per_file[2];   /* the published sizes, for a warning only */
};

static const struct cifar_layout cifar10_layout = {
    10, "CIFAR-10", "cifar-10-batches-bin", "cifar-10-binary.tar.gz", 1, 10,
    {5, 1},
    {{"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin",
      "data_batch_5.bin"},
     {"test_batch.bin"}},
    {10000, 10000}};

static const struct cifar_layout cifar100_layout = {
    100, "CIFAR-100", "cifar-100-binary", "cifar-100-binary.tar.gz", 2, 100,
    {1, 1},
    {{"train.bin"}, {"test.bin"}},
    {50000, 10000}};

/* One file's bytes, before parsing. */
struct cifar_blob {
    unsigned char *data;
    size_t size;
    char where[4400]; /* file name for messages ("a.tar.gz:cifar-10-batches-bin/x.bin") */
};

static int is_dir(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
}

static int is_file(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
}

/* Does folder hold any of this variant's batch files? */
static int has_batches(const struct cifar_layout *L, const char *dir)
{
    char p[4096];
    for (int part = 0; part < 2; part++)
        for (int i = 0; i < L->nfiles[part]; i++) {
            if (snprintf(p, sizeof p, "%s/%s", dir, L->files[part][i]) >= (int)sizeof p) continue;
            if (is_file(p)) return 1;
        }
    return 0;
}

static enum adapt_status cifar_missing(const struct cifar_layout *L, const char *path,
                                       const char *why)
{
    char cwd[512];
    if (!getcwd(cwd, sizeof cwd)) snprintf(cwd, sizeof cwd, "the current directory");
    return ADAPT_ERROR(ADAPT_ENOENT,
                       "%s: %s data not found (%s). Get the binary version, %s, from %s and "
                       "either unpack it so that the batches are in data/%s under the current "
                       "directory (%s/data/%s), or in the %s folder under the path given by "
                       "data.path, or set data.path to the .tar.gz itself",
                       path, L->title, why, L->archive, CIFAR_URL, L->folder, cwd, L->folder,
                       L->folder);
}

static size_t record_bytes(const struct cifar_layout *L) { return L->label_bytes + CIFAR_PIXELS; }

static enum adapt_status check_size(const struct cifar_layout *L, const char *where, long long size)
{
    size_t rec = record_bytes(L);
    if (size <= 0 || size % (long long)rec != 0)
        return ADAPT_ERROR(ADAPT_EFORMAT,
                           "%s: truncated or not a %s batch: size %lld bytes is not a positive "
                           "multiple of the %zu-byte record (%d label byte%s + %d pixel bytes)",
                           where, L->title, size, rec, L->label_bytes,
                           L->label_bytes > 1 ? "s" : "", CIFAR_PIXELS);
    return ADAPT_OK;
}

static enum adapt_status read_folder(const struct cifar_layout *L, const char *dir, int part,
                                     struct cifar_blob *blobs)
{
    for (int i = 0; i < L->nfiles[part]; i++) {
        struct cifar_blob *b = &blobs[i];
        if (snprintf(b->where, sizeof b->where, "%s/%s", dir, L->files[part][i]) >=
            (int)sizeof b->where)
            return ADAPT_ERROR(ADAPT_EINVAL, "%s: path too long", dir);
        FILE *f = fopen(b->where, "rb");
        if (!f)
            return ADAPT_ERROR(errno == ENOENT ? ADAPT_ENOENT : ADAPT_EIO,
                               "%s: cannot open %s batch: %s", b->where, L->title, strerror(errno));
        struct stat sb;
        enum adapt_status st;
        if (fstat(fileno(f), &sb) != 0) {
            st = ADAPT_ERROR(ADAPT_EIO, "%s: cannot stat: %s", b->where, strerror(errno));
            fclose(f);
            return st;
        }
        if ((st = check_size(L, b->where, (long long)sb.st_size)) != ADAPT_OK) {
            fclose(f);
            return st;
        }
        b->size = (size_t)sb.st_size;
        b->data = malloc(b->size);
        if (!b->data) {
            fclose(f);
            return ADAPT_ERROR(ADAPT_ENOMEM, "%s: cannot allocate %zu bytes", b->where, b->size);
        }
        size_t got = fread(b->data, 1, b->size, f);
        int err = ferror(f);
        fclose(f);
        if (got != b->size)
            return ADAPT_ERROR(err ? ADAPT_EIO : ADAPT_EFORMAT,
                               "%s: read %zu of %zu bytes%s", b->where, got, b->size,
                               err ? ": read error" : " (file shrank while reading)");
    }
    return ADAPT_OK;
}

static const char *base_name(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

static enum adapt_status read_archive(const struct cifar_layout *L, const char *path, int part,
                                      struct cifar_blob *blobs)
{
    enum adapt_status st = ADAPT_OK;
    int nwant = L->nfiles[part], found = 0, r = ARCHIVE_OK;
    struct archive_entry *e;
    struct archive *a = archive_read_new();
    if (!a) return ADAPT_ERROR(ADAPT_ENOMEM, "%s: cannot allocate an archive reader", path);
    archive_read_support_filter_gzip(a);
    archive_read_support_format_tar(a);
    if (archive_read_open_filename(a, path, 1 << 16) != ARCHIVE_OK) {
        st = ADAPT_ERROR(ADAPT_EFORMAT, "%s: cannot read as a tar.gz archive: %s", path,
                         archive_error_string(a));
        goto free_reader;
    }
    while (found < nwant && ((r = archive_read_next_header(a, &e)) == ARCHIVE_OK ||
                             r == ARCHIVE_WARN)) {
        if (archive_entry_filetype(e) != AE_IFREG) continue;
        const char *name = archive_entry_pathname(e);
        int k;
        for (k = 0; k < nwant; k++)
            if (strcmp(base_name(name), L->files[part][k]) == 0) break;
        if (k == nwant || blobs[k].data) continue;
        struct cifar_blob *b = &blobs[k];
        snprintf(b->where, sizeof b->where, "%s:%s", path, name);
        if (!archive_entry_size_is_set(e)) {
            st = ADAPT_ERROR(ADAPT_EFORMAT, "%s: member size missing from the tar header",
                             b->where);
            goto free_reader;
        }
        if ((st = check_size(L, b->where, (long long)archive_entry_size(e))) != ADAPT_OK)
            goto free_reader;
        /* the published files are the largest there are: nothing is allocated
         * for a member that declares more */
        long long cap = (long long)L->records_per_file[part] * (long long)record_bytes(L);
        if ((long long)archive_entry_size(e) > cap) {
            st = ADAPT_ERROR(ADAPT_EFORMAT, "%s: member of %lld bytes (%lld records): a %s %s "
                             "file holds at most %d records (%lld bytes)", b->where,
                             (long long)archive_entry_size(e),
                             (long long)archive_entry_size(e) / (long long)record_bytes(L),
                             L->title, part == ADAPT_DATA_TRAIN ? "training" : "test",
                             L->records_per_file[part], cap);
            goto free_reader;
        }
        b->size = (size_t)archive_entry_size(e);
        b->data = malloc(b->size);
        if (!b->data) {
            st = ADAPT_ERROR(ADAPT_ENOMEM, "%s: cannot allocate %zu bytes", b->where, b->size);
            goto free_reader;
        }
        size_t done = 0;
        while (done < b->size) {
            la_ssize_t got = archive_read_data(a, b->data + done, b->size - done);
            if (got < 0) {
                st = ADAPT_ERROR(ADAPT_EFORMAT, "%s: broken archive after %zu of %zu bytes: %s",
                                 b->where, done, b->size, archive_error_string(a));
                goto free_reader;
            }
            if (got == 0) break;
            done += (size_t)got;
        }
        if (done != b->size) {
            st = ADAPT_ERROR(ADAPT_EFORMAT, "%s: truncated archive: expected %zu bytes, found %zu",
                             b->where, b->size, done);
            goto free_reader;
        }
        found++;
    }
    if (found < nwant) {
        if (r != ARCHIVE_EOF) {
            st = ADAPT_ERROR(ADAPT_EFORMAT, "%s: broken or not a tar.gz archive: %s", path,
                             archive_error_string(a) ? archive_error_string(a) : "read error");
            goto free_reader;
        }
        for (int k = 0; k < nwant; k++)
            if (!blobs[k].data) {
                st = ADAPT_ERROR(ADAPT_ENOENT, "%s: archive has no member %s (expected %s/%s)",
                                 path, L->files[part][k], L->folder, L->files[part][k]);
                goto free_reader;
            }
    }
free_reader:
    archive_read_free(a);
    return st;
}

/* Parses the blobs (in file order) into ds; frees each blob once parsed. */
static enum adapt_status assemble(const struct cifar_layout *L, int part, struct cifar_blob *blobs,
                                  struct adapt_dataset *ds)
{
    size_t rec = record_bytes(L), total = 0;
    int nf = L->nfiles[part];
    for (int i = 0; i < nf; i++) {
        size_t cnt = blobs[i].size / rec;
        if (cnt != (size_t)L->records_per_file[part])
            adapt_log(ADAPT_LOG_WARN, "%s: %zu records (the published %s file has %d)",
                      blobs[i].where, cnt, L->title, L->records_per_file[part]);
        total += cnt;
    }
    uint8_t *img = malloc(total * CIFAR_PIXELS);
    int *lab = malloc(total * sizeof *lab);
    if (!img || !lab) {
        free(lab);
        free(img);
        return ADAPT_ERROR(ADAPT_ENOMEM, "%s data: cannot allocate %zu images", L->title, total);
    }
    size_t s = 0;
    for (int i = 0; i < nf; i++) {
        size_t cnt = blobs[i].size / rec;
        for (size_t j = 0; j < cnt; j++, s++) {
            const unsigned char *p = blobs[i].data + j * rec;
            int label = p[L->label_bytes - 1];
            if (L->label_bytes == 2 && p[0] >= 20) {
                free(lab);
                free(img);
                return ADAPT_ERROR(ADAPT_EFORMAT,
                                   "%s: record %zu: coarse label %d out of range: expected 0 .. 19",
                                   blobs[i].where, j, p[0]);
            }
            if (label >= L->classes) {
                free(lab);
                free(img);
                return ADAPT_ERROR(ADAPT_EFORMAT,
                                   "%s: record %zu: label %d out of range: expected 0 .. %d",
                                   blobs[i].where, j, label, L->classes - 1);
            }
            lab[s] = label;
            memcpy(img + s * CIFAR_PIXELS, p + L->label_bytes, CIFAR_PIXELS);
        }
        free(blobs[i].data);
        blobs[i].data = NULL;
    }
    ds->n = (int)total;
    ds->c = 3;
    ds->h = 32;
    ds->w = 32;
    ds->classes = L->classes;
    ds->images = img;
    ds->labels = lab;
    return ADAPT_OK;
}

enum adapt_status adapt_cifar_load(struct adapt_dataset *ds, int variant, const char *path,
                                   enum adapt_data_part part)
{
    const struct cifar_layout *L = variant == 100 ? &cifar100_layout : &cifar10_layout;
    struct cifar_blob blobs[CIFAR_MAX_FILES];
    char sub[4096];
    enum adapt_status st;
    int p = part == ADAPT_DATA_TEST ? 1 : 0;

    ADAPT_ASSERT(variant == 10 || variant == 100);
    memset(blobs, 0, sizeof blobs);
    if (is_file(path)) {
        st = read_archive(L, path, p, blobs);
    } else if (is_dir(path)) {
        if (has_batches(L, path)) {
            st = read_folder(L, path, p, blobs);
        } else {
            if (snprintf(sub, sizeof sub, "%s/%s", path, L->folder) >= (int)sizeof sub)
                return ADAPT_ERROR(ADAPT_EINVAL, "%s: path too long", path);
            if (is_dir(sub) && has_batches(L, sub)) {
                st = read_folder(L, sub, p, blobs);
            } else {
                if (snprintf(sub, sizeof sub, "%s/%s", path, L->archive) >= (int)sizeof sub)
                    return ADAPT_ERROR(ADAPT_EINVAL, "%s: path too long", path);
                if (is_file(sub)) {
                    st = read_archive(L, sub, p, blobs);
                } else {
                    char why[512];
                    snprintf(why, sizeof why, "no %s there, nor a %s folder or %s", L->files[p][0],
                             L->folder, L->archive);
                    return cifar_missing(L, path, why);
                }
            }
        }
    } else {
        return cifar_missing(L, path, "no such file or folder");
    }
    if (st == ADAPT_OK) st = assemble(L, p, blobs, ds);
    for (int i = 0; i < CIFAR_MAX_FILES; i++) free(blobs[i].data);
    return st;
}
