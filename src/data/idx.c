/* src/data/idx.c: IDX files (MNIST family), raw or gzip, through zlib.
 *
 * Format (LeCun's MNIST page): a 4-byte big-endian magic 0x00000800 | (ndim), where
 * 0x08 is the unsigned-byte element type, then ndim big-endian 32-bit dimensions,
 * then the elements in row-major order. gzopen/gzread read gzip and plain files alike.
 */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "src/data/data.h"

#define IDX_MAGIC_LABELS 0x00000801u
#define IDX_MAGIC_IMAGES 0x00000803u
/* Reads at most this much per gzread call (its length argument is unsigned int). */
#define IDX_CHUNK (1u << 28)
/* Larger than any data set this reads (EMNIST byclass is 0.6 GB); rejects garbage dims. */
#define IDX_MAX_BYTES ((uint64_t)1 << 34)

static uint32_t be32(const unsigned char *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3];
}

static enum adapt_status idx_open(const char *path, gzFile *out, uint64_t *file_size)
{
    struct stat sb;
    if (stat(path, &sb) != 0)
        return ADAPT_ERROR(errno == ENOENT ? ADAPT_ENOENT : ADAPT_EIO, "%s: cannot open: %s", path,
                           strerror(errno));
    if (!S_ISREG(sb.st_mode))
        return ADAPT_ERROR(ADAPT_EIO, "%s: not a regular file", path);
    gzFile f = gzopen(path, "rb");
    if (!f)
        return ADAPT_ERROR(ADAPT_EIO, "%s: cannot open: %s", path,
                           errno ? strerror(errno) : "zlib could not allocate its state");
    gzbuffer(f, 1u << 17);
    *out = f;
    *file_size = (uint64_t)sb.st_size;
    return ADAPT_OK;
}

/* Deflate expands at most 1032:1 (zlib's FAQ); a plain file holds exactly its
 * size. A header that declares more payload than the file can hold is refused
 * before anything is allocated for it. */
#define IDX_GZIP_MAX_RATIO 1032

static enum adapt_status idx_check_size(gzFile f, const char *path, uint64_t file_size,
                                        uint64_t header, uint64_t payload, const char *what)
{
    uint64_t have = file_size > header ? file_size - header : 0;
    if (gzdirect(f)) {
        if (payload > have)
            return ADAPT_ERROR(ADAPT_EFORMAT,
                               "%s: truncated: expected %llu %s after the header, found %llu",
                               path, (unsigned long long)payload, what, (unsigned long long)have);
    } else if (payload > file_size * IDX_GZIP_MAX_RATIO) {
        return ADAPT_ERROR(ADAPT_EFORMAT,
                           "%s: the header declares %llu %s, more than a gzip file of %llu "
                           "bytes can hold (at most %d times its size)",
                           path, (unsigned long long)payload, what,
                           (unsigned long long)file_size, IDX_GZIP_MAX_RATIO);
    }
    return ADAPT_OK;
}

/* Reads up to len bytes; *got is what arrived. Returns a zlib error text or NULL. */
static const char *idx_read(gzFile f, void *buf, size_t len, size_t *got)
{
    unsigned char *p = buf;
    size_t done = 0;
    const char *zerr = NULL;
    while (done < len) {
        size_t want = len - done;
        if (want > IDX_CHUNK) want = IDX_CHUNK;
        int r = gzread(f, p + done, (unsigned)want);
        if (r < 0) {
            int code;
            zerr = gzerror(f, &code);
            break;
        }
        if (r == 0) break;
        done += (size_t)r;
    }
    *got = done;
    return zerr;
}

/* After the payload the file must end. */
static enum adapt_status idx_expect_end(gzFile f, const char *path, size_t payload)
{
    unsigned char extra;
    int r = gzread(f, &extra, 1);
    if (r > 0)
        return ADAPT_ERROR(ADAPT_EFORMAT,
                           "%s: trailing data: expected the file to end after the header and %zu "
                           "payload bytes, found more",
                           path, payload);
    if (r < 0) {
        int code;
        const char *zerr = gzerror(f, &code);
        return ADAPT_ERROR(ADAPT_EFORMAT, "%s: corrupt after %zu payload bytes: %s", path, payload,
                           zerr);
    }
    return ADAPT_OK;
}

static enum adapt_status idx_check_magic(const char *path, uint32_t magic, uint32_t want)
{
    if (magic == want) return ADAPT_OK;
    const char *what = want == IDX_MAGIC_IMAGES ? "IDX unsigned-byte 3-D images"
                                                : "IDX unsigned-byte 1-D labels";
    const char *hint = "";
    if (magic == IDX_MAGIC_IMAGES) hint = " (this is an image file)";
    else if (magic == IDX_MAGIC_LABELS) hint = " (this is a label file)";
    return ADAPT_ERROR(ADAPT_EFORMAT, "%s: bad magic number 0x%08x: expected 0x%08x (%s)%s", path,
                       (unsigned)magic, (unsigned)want, what, hint);
}

enum adapt_status adapt_idx_images_read(const char *path, int *n_out, int *rows_out,
                                        int *cols_out, uint8_t **pixels_out)
{
    enum adapt_status st;
    gzFile f;
    unsigned char hdr[16];
    size_t got;
    const char *zerr;
    uint8_t *pix = NULL;

    uint64_t fsize;
    if ((st = idx_open(path, &f, &fsize)) != ADAPT_OK) return st;
    zerr = idx_read(f, hdr, sizeof hdr, &got);
    if (got >= 4 && (st = idx_check_magic(path, be32(hdr), IDX_MAGIC_IMAGES)) != ADAPT_OK)
        goto close_file;
    if (got < sizeof hdr) {
        st = ADAPT_ERROR(ADAPT_EFORMAT, "%s: truncated header: expected 16 bytes, found %zu%s%s",
                         path, got, zerr ? ": " : "", zerr ? zerr : "");
        goto close_file;
    }
    uint32_t n = be32(hdr + 4), rows = be32(hdr + 8), cols = be32(hdr + 12);
    if (n == 0 || rows == 0 || cols == 0 || n > INT_MAX || rows > 65535 || cols > 65535 ||
        (uint64_t)n * rows * cols > IDX_MAX_BYTES) {
        st = ADAPT_ERROR(ADAPT_EFORMAT,
                         "%s: implausible image dimensions %u x %u x %u: expected 1 <= count <= "
                         "%d and 1 <= rows, cols <= 65535",
                         path, (unsigned)n, (unsigned)rows, (unsigned)cols, INT_MAX);
        goto close_file;
    }
    size_t bytes = (size_t)n * rows * cols;
    if ((st = idx_check_size(f, path, fsize, sizeof hdr, bytes, "bytes of pixels")) != ADAPT_OK)
        goto close_file;
    pix = malloc(bytes);
    if (!pix) {
        st = ADAPT_ERROR(ADAPT_ENOMEM, "%s: cannot allocate %zu bytes for %u images", path, bytes,
                         (unsigned)n);
        goto close_file;
    }
    zerr = idx_read(f, pix, bytes, &got);
    if (got < bytes) {
        st = ADAPT_ERROR(ADAPT_EFORMAT,
                         "%s: truncated: expected %zu bytes of pixels (%u images of %ux%u) after "
                         "the header, found %zu%s%s",
                         path, bytes, (unsigned)n, (unsigned)rows, (unsigned)cols, got,
                         zerr ? ": " : "", zerr ? zerr : "");
        goto free_pixels;
    }
    if ((st = idx_expect_end(f, path, bytes)) != ADAPT_OK) goto free_pixels;
    gzclose(f);
    *n_out = (int)n;
    *rows_out = (int)rows;
    *cols_out = (int)cols;
    *pixels_out = pix;
    return ADAPT_OK;

free_pixels:
    free(pix);
close_file:
    gzclose(f);
    return st;
}

enum adapt_status adapt_idx_labels_read(const char *path, int *n_out, uint8_t **labels_out)
{
    enum adapt_status st;
    gzFile f;
    unsigned char hdr[8];
    size_t got;
    const char *zerr;
    uint8_t *lab = NULL;

    uint64_t fsize;
    if ((st = idx_open(path, &f, &fsize)) != ADAPT_OK) return st;
    zerr = idx_read(f, hdr, sizeof hdr, &got);
    if (got >= 4 && (st = idx_check_magic(path, be32(hdr), IDX_MAGIC_LABELS)) != ADAPT_OK)
        goto close_file;
    if (got < sizeof hdr) {
        st = ADAPT_ERROR(ADAPT_EFORMAT, "%s: truncated header: expected 8 bytes, found %zu%s%s",
                         path, got, zerr ? ": " : "", zerr ? zerr : "");
        goto close_file;
    }
    uint32_t n = be32(hdr + 4);
    if (n == 0 || n > INT_MAX) {
        st = ADAPT_ERROR(ADAPT_EFORMAT, "%s: implausible label count %u: expected 1 .. %d", path,
                         (unsigned)n, INT_MAX);
        goto close_file;
    }
    if ((st = idx_check_size(f, path, fsize, sizeof hdr, n, "label bytes")) != ADAPT_OK)
        goto close_file;
    lab = malloc(n);
    if (!lab) {
        st = ADAPT_ERROR(ADAPT_ENOMEM, "%s: cannot allocate %u labels", path, (unsigned)n);
        goto close_file;
    }
    zerr = idx_read(f, lab, n, &got);
    if (got < n) {
        st = ADAPT_ERROR(ADAPT_EFORMAT,
                         "%s: truncated: expected %u label bytes after the header, found %zu%s%s",
                         path, (unsigned)n, got, zerr ? ": " : "", zerr ? zerr : "");
        goto free_labels;
    }
    if ((st = idx_expect_end(f, path, n)) != ADAPT_OK) goto free_labels;
    gzclose(f);
    *n_out = (int)n;
    *labels_out = lab;
    return ADAPT_OK;

free_labels:
    free(lab);
close_file:
    gzclose(f);
    return st;
}
