/* src/base/safetensors.h: checkpoints in the Hugging Face safetensors format.
 *
 * Layout: an 8-byte little-endian unsigned header length N; N bytes of JSON
 *   {"__metadata__":{"key":"value",...},
 *    "<name>":{"dtype":"F32","shape":[d0,...],"data_offsets":[begin,end]},...}
 * padded with spaces to a multiple of 8; then the byte buffer, in which each
 * tensor occupies [begin, end) (row-major, little-endian). The writer orders
 * tensors by element size (largest first) and then by name, so every tensor
 * is aligned to its element size; the buffer is exactly covered.
 *
 * The writer is atomic: it writes "<path>.tmp.<pid>", fsyncs it and renames
 * it over path; on any failure the temporary file is removed and a file
 * already at path is left untouched. The reader loads the whole file and
 * validates it (header length against the file size, JSON, dtypes, shapes
 * against byte ranges, offsets in bounds, non-overlapping and contiguous,
 * duplicate names, string-only metadata); errors name the file and the
 * problem.
 *
 * Non-goals: no memory mapping, no big-endian hosts (ADAPT_EUNSUPPORTED),
 * no conversion between dtypes (adapt_safetensors_copy checks, not casts).
 *
 *   struct adapt_safetensors_tensor t[2] = {
 *       {"conv1.weight", ADAPT_ST_F32, 4, {6, 1, 5, 5}, w},
 *       {"step", ADAPT_ST_I64, 0, {0}, &step}};
 *   struct adapt_safetensors_meta m[1] = {{"format", "adapt-sim checkpoint 1"}};
 *   st = adapt_safetensors_write("runs/x/ckpt.safetensors", t, 2, m, 1);
 *
 *   struct adapt_safetensors *f;
 *   st = adapt_safetensors_load(&f, "runs/x/ckpt.safetensors");
 *   int64_t shape[4] = {6, 1, 5, 5};
 *   st = adapt_safetensors_copy(f, "conv1.weight", ADAPT_ST_F32, 4, shape, w);
 *   const char *fmt = adapt_safetensors_meta_get(f, "format");
 *   adapt_safetensors_free(f);
 *
 * Ownership: the writer borrows its arguments. A loaded struct owns the file
 * contents, the tensor names and the metadata strings; tensor data pointers
 * point into the file contents (aligned to the element size in files from
 * this writer, possibly not in others: adapt_safetensors_copy is always
 * safe). All of it lives until adapt_safetensors_free.
 */
#ifndef ADAPT_SAFETENSORS_H
#define ADAPT_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "src/base/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ADAPT_ST_MAX_DIMS 8
#define ADAPT_ST_HEADER_MAX (100u << 20) /* bytes of JSON header accepted (as the reference) */

/* The dtypes of the format; the writer accepts any of them. */
enum adapt_safetensors_dtype {
    ADAPT_ST_BOOL = 0,
    ADAPT_ST_U8,
    ADAPT_ST_I8,
    ADAPT_ST_F8_E5M2,
    ADAPT_ST_F8_E4M3,
    ADAPT_ST_I16,
    ADAPT_ST_U16,
    ADAPT_ST_F16,
    ADAPT_ST_BF16,
    ADAPT_ST_I32,
    ADAPT_ST_U32,
    ADAPT_ST_F32,
    ADAPT_ST_F64,
    ADAPT_ST_I64,
    ADAPT_ST_U64,
    ADAPT_ST_NDTYPES
};

struct adapt_safetensors_tensor {
    const char *name;
    enum adapt_safetensors_dtype dtype;
    int ndim;                        /* 0 (a scalar) .. ADAPT_ST_MAX_DIMS */
    int64_t shape[ADAPT_ST_MAX_DIMS]; /* (ndim) */
    const void *data;                /* elements, row-major; may be NULL when there are none */
};

struct adapt_safetensors_meta {
    const char *key, *value;
};

/* A loaded file. */
struct adapt_safetensors {
    char *path;
    unsigned char *bytes;            /* the whole file */
    size_t size;
    int n_tensors;
    struct adapt_safetensors_tensor *tensors; /* (n_tensors), in file order */
    int n_meta;
    struct adapt_safetensors_meta *meta;      /* (n_meta) */
};

const char *adapt_safetensors_dtype_name(enum adapt_safetensors_dtype d); /* "F32" */
size_t adapt_safetensors_dtype_size(enum adapt_safetensors_dtype d);      /* bytes */
/* Elements of a tensor (1 for a scalar). */
int64_t adapt_safetensors_numel(const struct adapt_safetensors_tensor *t);

/* Writes n tensors and n_meta metadata strings to path atomically.
 * ADAPT_EINVAL for an invalid argument (empty or duplicate name, name
 * "__metadata__", bad shape, missing data, duplicate metadata key), ADAPT_EIO
 * when the file cannot be written. */
enum adapt_status adapt_safetensors_write(const char *path,
                                          const struct adapt_safetensors_tensor *t, int n,
                                          const struct adapt_safetensors_meta *meta, int n_meta);

/* Reads and validates a file (ADAPT_EFORMAT for a malformed one). */
enum adapt_status adapt_safetensors_load(struct adapt_safetensors **out, const char *path);
void adapt_safetensors_free(struct adapt_safetensors *f);

/* The tensor called name, or NULL. */
const struct adapt_safetensors_tensor *adapt_safetensors_find(const struct adapt_safetensors *f,
                                                              const char *name);
/* Copies tensor name into dst after checking its dtype and shape:
 * ADAPT_ENOENT when absent, ADAPT_EINVAL on a dtype or shape mismatch. */
enum adapt_status adapt_safetensors_copy(const struct adapt_safetensors *f, const char *name,
                                         enum adapt_safetensors_dtype dtype, int ndim,
                                         const int64_t *shape, void *dst);
/* A metadata value, or NULL. */
const char *adapt_safetensors_meta_get(const struct adapt_safetensors *f, const char *key);

#ifdef __cplusplus
}
#endif
#endif
