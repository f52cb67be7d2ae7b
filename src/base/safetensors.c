/* src/base/safetensors.c: safetensors writer (atomic) and validating reader. See safetensors.h. */
#include "src/base/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "src/base/fileio.h"

static const struct {
    const char *name;
    size_t size;
} dtypes[ADAPT_ST_NDTYPES] = {
    {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1},
    {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},
    {"U32", 4},  {"F32", 4}, {"F64", 8}, {"I64", 8},     {"U64", 8},
};

const char *adapt_safetensors_dtype_name(enum adapt_safetensors_dtype d)
{
    return (int)d >= 0 && d < ADAPT_ST_NDTYPES ? dtypes[d].name : NULL;
}

size_t adapt_safetensors_dtype_size(enum adapt_safetensors_dtype d)
{
    return (int)d >= 0 && d < ADAPT_ST_NDTYPES ? dtypes[d].size : 0;
}

int64_t adapt_safetensors_numel(const struct adapt_safetensors_tensor *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
    return n;
}

static int host_little_endian(void)
{
    const uint16_t one = 1;
    return *(const unsigned char *)&one == 1;
}

/* Bytes of a tensor of this dtype and shape; -1 when a dimension is negative
 * or the size does not fit in 63 bits. */
static int64_t tensor_bytes(enum adapt_safetensors_dtype d, int ndim, const int64_t *shape)
{
    int64_t n = (int64_t)dtypes[d].size;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0) return -1;
        if (shape[i] && n > INT64_MAX / shape[i]) return -1;
        n *= shape[i];
    }
    return n;
}

/* "(6, 1, 5, 5)" */
static const char *shape_str(int ndim, const int64_t *shape, char *buf, size_t size)
{
    size_t len = 0;
    buf[0] = '\0';
    len += (size_t)snprintf(buf, size, "(");
    for (int i = 0; i < ndim && len < size; i++)
        len +=
            (size_t)snprintf(buf + len, size - len, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (len < size) snprintf(buf + len, size - len, ")");
    return buf;
}

/* ----------------------------------------------------------------- writer */

struct order {
    const struct adapt_safetensors_tensor *t;
    int64_t begin, end;
};

/* Largest element first (keeps every tensor aligned), then by name. */
static int order_cmp(const void *a, const void *b)
{
    const struct adapt_safetensors_tensor *x = ((const struct order *)a)->t;
    const struct adapt_safetensors_tensor *y = ((const struct order *)b)->t;
    size_t sx = dtypes[x->dtype].size, sy = dtypes[y->dtype].size;
    if (sx != sy) return sx > sy ? -1 : 1;
    return strcmp(x->name, y->name);
}

static enum adapt_status check_args(const char *path, const struct adapt_safetensors_tensor *t,
                                    int n, const struct adapt_safetensors_meta *meta, int n_meta)
{
    char sh[256];
    if (n < 0 || n_meta < 0 || (n && !t) || (n_meta && !meta))
        return ADAPT_ERROR(ADAPT_EINVAL, "%s: invalid tensor or metadata count", path);
    for (int i = 0; i < n; i++) {
        const struct adapt_safetensors_tensor *x = &t[i];
        if (!x->name || !x->name[0] || !strcmp(x->name, "__metadata__"))
            return ADAPT_ERROR(ADAPT_EINVAL, "%s: tensor %d: invalid name \"%s\"", path, i,
                               x->name ? x->name : "(null)");
        if ((int)x->dtype < 0 || x->dtype >= ADAPT_ST_NDTYPES)
            return ADAPT_ERROR(ADAPT_EINVAL, "%s: tensor %s: invalid dtype %d", path, x->name,
                               (int)x->dtype);
        if (x->ndim < 0 || x->ndim > ADAPT_ST_MAX_DIMS)
            return ADAPT_ERROR(ADAPT_EINVAL, "%s: tensor %s: %d dimensions (at most %d)", path,
                               x->name, x->ndim, ADAPT_ST_MAX_DIMS);
        int64_t bytes = tensor_bytes(x->dtype, x->ndim, x->shape);
        if (bytes < 0)
            return ADAPT_ERROR(ADAPT_EINVAL, "%s: tensor %s: invalid shape %s", path, x->name,
                               shape_str(x->ndim, x->shape, sh, sizeof sh));
        if (bytes > 0 && !x->data)
            return ADAPT_ERROR(ADAPT_EINVAL, "%s: tensor %s: no data", path, x->name);
        for (int j = 0; j < i; j++)
            if (!strcmp(t[j].name, x->name))
                return ADAPT_ERROR(ADAPT_EINVAL, "%s: duplicate tensor name \"%s\"", path, x->name);
    }
    for (int i = 0; i < n_meta; i++) {
        if (!meta[i].key || !meta[i].value)
            return ADAPT_ERROR(ADAPT_EINVAL, "%s: metadata entry %d has no key or value", path, i);
        for (int j = 0; j < i; j++)
            if (!strcmp(meta[j].key, meta[i].key))
                return ADAPT_ERROR(ADAPT_EINVAL, "%s: duplicate metadata key \"%s\"", path,
                                   meta[i].key);
    }
    return ADAPT_OK;
}

/* The JSON header, space-padded to a multiple of 8; offsets filled into ord. */
static enum adapt_status build_header(const char *path, struct order *ord, int n,
                                      const struct adapt_safetensors_meta *meta, int n_meta,
                                      char **text, size_t *len)
{
    int bad = 0;
    json_t *root = json_object();
    if (n_meta) {
        json_t *m = json_object();
        for (int i = 0; i < n_meta; i++)
            if (json_object_set_new(m, meta[i].key, json_string(meta[i].value))) bad = 1;
        if (json_object_set_new(root, "__metadata__", m)) bad = 1;
    }
    int64_t off = 0;
    for (int i = 0; i < n; i++) {
        const struct adapt_safetensors_tensor *x = ord[i].t;
        ord[i].begin = off;
        off += tensor_bytes(x->dtype, x->ndim, x->shape);
        ord[i].end = off;
        json_t *shape = json_array();
        for (int d = 0; d < x->ndim; d++)
            if (json_array_append_new(shape, json_integer(x->shape[d]))) bad = 1;
        json_t *e = json_pack("{s:s,s:o,s:[II]}", "dtype", dtypes[x->dtype].name, "shape", shape,
                              "data_offsets", (json_int_t)ord[i].begin, (json_int_t)ord[i].end);
        if (json_object_set_new(root, x->name, e)) bad = 1;
    }
    char *s = bad || !root ? NULL : json_dumps(root, JSON_COMPACT);
    json_decref(root);
    if (!s)
        return ADAPT_ERROR(ADAPT_EINVAL,
                           "%s: cannot encode the header (out of memory, or a name or "
                           "metadata string that is not UTF-8)",
                           path);
    size_t raw = strlen(s), padded = (raw + 7) / 8 * 8;
    char *p = realloc(s, padded + 1);
    if (!p) {
        free(s);
        return ADAPT_ERROR(ADAPT_ENOMEM, "%s: out of memory", path);
    }
    memset(p + raw, ' ', padded - raw);
    p[padded] = '\0';
    *text = p;
    *len = padded;
    return ADAPT_OK;
}

enum adapt_status adapt_safetensors_write(const char *path,
                                          const struct adapt_safetensors_tensor *t, int n,
                                          const struct adapt_safetensors_meta *meta, int n_meta)
{
    enum adapt_status st;
    if (!host_little_endian())
        return ADAPT_ERROR(ADAPT_EUNSUPPORTED, "%s: safetensors needs a little-endian host", path);
    if ((st = check_args(path, t, n, meta, n_meta)) != ADAPT_OK) return st;

    struct order *ord = calloc(n ? (size_t)n : 1, sizeof *ord);
    char *header = NULL;
    size_t hlen = 0;
    if (!ord) {
        st = ADAPT_ERROR(ADAPT_ENOMEM, "%s: out of memory", path);
        goto free_mem;
    }
    for (int i = 0; i < n; i++) ord[i].t = &t[i];
    qsort(ord, (size_t)n, sizeof *ord, order_cmp);
    if ((st = build_header(path, ord, n, meta, n_meta, &header, &hlen)) != ADAPT_OK) goto free_mem;

    struct adapt_atomic a;
    if ((st = adapt_atomic_open(&a, path)) != ADAPT_OK) goto free_mem;
    unsigned char len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (unsigned char)((uint64_t)hlen >> (8 * i));
    int bad = fwrite(len8, 1, 8, a.f) != 8 || fwrite(header, 1, hlen, a.f) != hlen;
    for (int i = 0; i < n && !bad; i++) {
        size_t len = (size_t)(ord[i].end - ord[i].begin);
        bad = fwrite(ord[i].t->data, 1, len, a.f) != len;
    }
    if (bad) {
        st = ADAPT_ERROR(ADAPT_EIO, "%s: cannot write %s: %s", path, a.tmp, strerror(errno));
        adapt_atomic_abort(&a);
    } else {
        st = adapt_atomic_commit(&a);
    }
free_mem:
    free(header);
    free(ord);
    return st;
}

/* ----------------------------------------------------------------- reader */

void adapt_safetensors_free(struct adapt_safetensors *f)
{
    if (!f) return;
    for (int i = 0; i < f->n_tensors; i++) free((char *)f->tensors[i].name);
    for (int i = 0; i < f->n_meta; i++) {
        free((char *)f->meta[i].key);
        free((char *)f->meta[i].value);
    }
    free(f->tensors);
    free(f->meta);
    free(f->bytes);
    free(f->path);
    free(f);
}

static enum adapt_status read_file(const char *path, struct adapt_safetensors *f)
{
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return ADAPT_ERROR(errno == ENOENT ? ADAPT_ENOENT : ADAPT_EIO, "%s: cannot open: %s", path,
                           strerror(errno));
    struct stat sb;
    enum adapt_status st = ADAPT_OK;
    if (fstat(fileno(fp), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        st = ADAPT_ERROR(ADAPT_EIO, "%s: not a regular file", path);
        goto close_fp;
    }
    f->size = (size_t)sb.st_size;
    if (!(f->bytes = malloc(f->size ? f->size : 1))) {
        st = ADAPT_ERROR(ADAPT_ENOMEM, "%s: out of memory for %zu bytes", path, f->size);
        goto close_fp;
    }
    if (fread(f->bytes, 1, f->size, fp) != f->size)
        st = ADAPT_ERROR(ADAPT_EIO, "%s: cannot read: %s", path,
                         ferror(fp) ? strerror(errno) : "file shrank while reading");
close_fp:
    fclose(fp);
    return st;
}

static int offsets_cmp(const void *a, const void *b)
{
    const int64_t *x = a, *y = b; /* (begin, end, index) */
    if (x[0] != y[0]) return x[0] < y[0] ? -1 : 1;
    if (x[1] != y[1]) return x[1] < y[1] ? -1 : 1;
    return 0;
}

/* Parses one tensor entry into t and its byte range into off[0..1]. */
static enum adapt_status parse_entry(const char *path, const char *name, json_t *e,
                                     struct adapt_safetensors_tensor *t, int64_t *off)
{
    char sh[256];
    if (!json_is_object(e))
        return ADAPT_ERROR(ADAPT_EFORMAT, "%s: tensor \"%s\": entry is not an object", path, name);
    const char *dt = json_string_value(json_object_get(e, "dtype"));
    json_t *shape = json_object_get(e, "shape");
    json_t *offs = json_object_get(e, "data_offsets");
    if (!dt || !json_is_array(shape) || !json_is_array(offs))
        return ADAPT_ERROR(ADAPT_EFORMAT,
                           "%s: tensor \"%s\": needs \"dtype\" (string), \"shape\" and "
                           "\"data_offsets\" (arrays)",
                           path, name);
    int d;
    for (d = 0; d < ADAPT_ST_NDTYPES; d++)
        if (!strcmp(dt, dtypes[d].name)) break;
    if (d == ADAPT_ST_NDTYPES)
        return ADAPT_ERROR(ADAPT_EFORMAT, "%s: tensor \"%s\": unknown dtype \"%s\"", path, name,
                           dt);
    t->dtype = (enum adapt_safetensors_dtype)d;
    size_t nd = json_array_size(shape);
    if (nd > ADAPT_ST_MAX_DIMS)
        return ADAPT_ERROR(ADAPT_EFORMAT, "%s: tensor \"%s\": %zu dimensions (at most %d)", path,
                           name, nd, ADAPT_ST_MAX_DIMS);
    t->ndim = (int)nd;
    for (size_t i = 0; i < nd; i++) {
        json_t *v = json_array_get(shape, i);
        if (!json_is_integer(v) || json_integer_value(v) < 0)
            return ADAPT_ERROR(ADAPT_EFORMAT,
                               "%s: tensor \"%s\": shape entries must be non-negative integers",
                               path, name);
        t->shape[i] = json_integer_value(v);
    }
    if (json_array_size(offs) != 2 || !json_is_integer(json_array_get(offs, 0)) ||
        !json_is_integer(json_array_get(offs, 1)))
        return ADAPT_ERROR(ADAPT_EFORMAT, "%s: tensor \"%s\": data_offsets must be [begin, end]",
                           path, name);
    off[0] = json_integer_value(json_array_get(offs, 0));
    off[1] = json_integer_value(json_array_get(offs, 1));
    if (off[0] < 0 || off[1] < off[0])
        return ADAPT_ERROR(ADAPT_EFORMAT, "%s: tensor \"%s\": invalid data_offsets [%lld, %lld]",
                           path, name, (long long)off[0], (long long)off[1]);
    int64_t bytes = tensor_bytes(t->dtype, t->ndim, t->shape);
    if (bytes != off[1] - off[0])
        return ADAPT_ERROR(
            ADAPT_EFORMAT,
            "%s: tensor \"%s\": %s %s needs %lld bytes but data_offsets [%lld, %lld] "
            "hold %lld",
            path, name, dtypes[d].name, shape_str(t->ndim, t->shape, sh, sizeof sh),
            (long long)bytes, (long long)off[0], (long long)off[1], (long long)(off[1] - off[0]));
    return ADAPT_OK;
}

static enum adapt_status parse_header(struct adapt_safetensors *f, json_t *root, size_t data_start)
{
    const char *path = f->path;
    enum adapt_status st = ADAPT_OK;
    size_t n = json_object_size(root);
    int64_t buf_len = (int64_t)(f->size - data_start);
    json_t *meta = json_object_get(root, "__metadata__");
    size_t nt = n - (meta ? 1 : 0);
    int64_t *ranges = calloc(nt ? nt : 1, 3 * sizeof *ranges);
    f->tensors = calloc(nt ? nt : 1, sizeof *f->tensors);
    if (meta && json_is_object(meta))
        f->meta = calloc(json_object_size(meta) ? json_object_size(meta) : 1, sizeof *f->meta);
    if (!ranges || !f->tensors || (meta && json_is_object(meta) && !f->meta)) {
        st = ADAPT_ERROR(ADAPT_ENOMEM, "%s: out of memory", path);
        goto free_ranges;
    }
    if (meta) {
        const char *k;
        json_t *v;
        if (!json_is_object(meta)) {
            st = ADAPT_ERROR(ADAPT_EFORMAT, "%s: __metadata__ is not an object", path);
            goto free_ranges;
        }
        json_object_foreach(meta, k, v) {
            if (!json_is_string(v)) {
                st = ADAPT_ERROR(ADAPT_EFORMAT, "%s: __metadata__ value of \"%s\" is not a string",
                                 path, k);
                goto free_ranges;
            }
            struct adapt_safetensors_meta *m = &f->meta[f->n_meta];
            m->key = adapt_strdup(k);
            m->value = adapt_strdup(json_string_value(v));
            f->n_meta++;
            if (!m->key || !m->value) {
                st = ADAPT_ERROR(ADAPT_ENOMEM, "%s: out of memory", path);
                goto free_ranges;
            }
        }
    }
    const char *name;
    json_t *e;
    json_object_foreach(root, name, e) {
        if (!strcmp(name, "__metadata__")) continue;
        int i = f->n_tensors;
        struct adapt_safetensors_tensor *t = &f->tensors[i];
        if ((st = parse_entry(path, name, e, t, &ranges[3 * i])) != ADAPT_OK) goto free_ranges;
        if (ranges[3 * i + 1] > buf_len) {
            st = ADAPT_ERROR(ADAPT_EFORMAT,
                             "%s: tensor \"%s\": data_offsets [%lld, %lld] out of bounds (the data "
                             "buffer has %lld bytes)",
                             path, name, (long long)ranges[3 * i], (long long)ranges[3 * i + 1],
                             (long long)buf_len);
            goto free_ranges;
        }
        ranges[3 * i + 2] = i;
        t->data = f->bytes + data_start + ranges[3 * i];
        if (!(t->name = adapt_strdup(name))) {
            st = ADAPT_ERROR(ADAPT_ENOMEM, "%s: out of memory", path);
            goto free_ranges;
        }
        f->n_tensors++;
    }
    /* The tensors must tile the buffer: sorted by offset, each starts where the last ended. */
    qsort(ranges, (size_t)f->n_tensors, 3 * sizeof *ranges, offsets_cmp);
    int64_t expect = 0;
    for (int i = 0; i < f->n_tensors; i++) {
        const int64_t *r = &ranges[3 * i];
        const char *tn = f->tensors[r[2]].name;
        if (r[0] < expect) {
            st = ADAPT_ERROR(ADAPT_EFORMAT, "%s: tensor \"%s\": data_offsets [%lld, %lld] overlap "
                                            "the previous tensor (which ends at %lld)",
                             path, tn, (long long)r[0], (long long)r[1], (long long)expect);
            goto free_ranges;
        }
        if (r[0] > expect) {
            st = ADAPT_ERROR(ADAPT_EFORMAT,
                             "%s: tensor \"%s\": gap before data_offsets [%lld, %lld] "
                             "(previous data ends at %lld)",
                             path, tn, (long long)r[0], (long long)r[1], (long long)expect);
            goto free_ranges;
        }
        expect = r[1];
    }
    if (expect != buf_len)
        st = ADAPT_ERROR(ADAPT_EFORMAT,
                         "%s: the tensors cover %lld bytes but the data buffer has %lld", path,
                         (long long)expect, (long long)buf_len);
free_ranges:
    free(ranges);
    return st;
}

enum adapt_status adapt_safetensors_load(struct adapt_safetensors **out, const char *path)
{
    enum adapt_status st;
    if (!host_little_endian())
        return ADAPT_ERROR(ADAPT_EUNSUPPORTED, "%s: safetensors needs a little-endian host", path);
    struct adapt_safetensors *f = calloc(1, sizeof *f);
    if (!f || !(f->path = adapt_strdup(path))) {
        free(f);
        return ADAPT_ERROR(ADAPT_ENOMEM, "%s: out of memory", path);
    }
    if ((st = read_file(path, f)) != ADAPT_OK) goto free_file;
    if (f->size < 8) {
        st = ADAPT_ERROR(ADAPT_EFORMAT, "%s: %zu bytes: too short for the 8-byte header length",
                         path, f->size);
        goto free_file;
    }
    uint64_t hlen = 0;
    for (int i = 0; i < 8; i++) hlen |= (uint64_t)f->bytes[i] << (8 * i);
    if (hlen > f->size - 8 || hlen > ADAPT_ST_HEADER_MAX) {
        st = ADAPT_ERROR(ADAPT_EFORMAT,
                         "%s: header length %llu does not fit the file (%zu bytes; at most %u "
                         "allowed)",
                         path, (unsigned long long)hlen, f->size, ADAPT_ST_HEADER_MAX);
        goto free_file;
    }
    if (hlen < 2 || f->bytes[8] != '{') {
        st = ADAPT_ERROR(ADAPT_EFORMAT, "%s: the header does not start with a JSON object", path);
        goto free_file;
    }
    json_error_t err;
    json_t *root =
        json_loadb((const char *)f->bytes + 8, (size_t)hlen, JSON_REJECT_DUPLICATES, &err);
    if (!root) {
        if (json_error_code(&err) == json_error_duplicate_key)
            st = ADAPT_ERROR(ADAPT_EFORMAT, "%s: header: duplicate name (%s)", path, err.text);
        else
            st = ADAPT_ERROR(ADAPT_EFORMAT, "%s: header: malformed JSON at byte %d: %s", path,
                             err.position + 8, err.text);
        goto free_file;
    }
    if (!json_is_object(root)) {
        json_decref(root);
        st = ADAPT_ERROR(ADAPT_EFORMAT, "%s: the header is not a JSON object", path);
        goto free_file;
    }
    st = parse_header(f, root, 8 + (size_t)hlen);
    json_decref(root);
    if (st != ADAPT_OK) goto free_file;
    *out = f;
    return ADAPT_OK;
free_file:
    adapt_safetensors_free(f);
    return st;
}

const struct adapt_safetensors_tensor *adapt_safetensors_find(const struct adapt_safetensors *f,
                                                              const char *name)
{
    for (int i = 0; i < f->n_tensors; i++)
        if (!strcmp(f->tensors[i].name, name)) return &f->tensors[i];
    return NULL;
}

enum adapt_status adapt_safetensors_copy(const struct adapt_safetensors *f, const char *name,
                                         enum adapt_safetensors_dtype dtype, int ndim,
                                         const int64_t *shape, void *dst)
{
    char a[256], b[256];
    const struct adapt_safetensors_tensor *t = adapt_safetensors_find(f, name);
    if (!t) return ADAPT_ERROR(ADAPT_ENOENT, "%s: no tensor \"%s\"", f->path, name);
    int same = t->dtype == dtype && t->ndim == ndim;
    for (int i = 0; same && i < ndim; i++) same = t->shape[i] == shape[i];
    if (!same)
        return ADAPT_ERROR(ADAPT_EINVAL, "%s: tensor \"%s\" is %s %s, expected %s %s", f->path,
                           name, dtypes[t->dtype].name, shape_str(t->ndim, t->shape, a, sizeof a),
                           adapt_safetensors_dtype_name(dtype) ? adapt_safetensors_dtype_name(dtype)
                                                               : "?",
                           shape_str(ndim, shape, b, sizeof b));
    int64_t bytes = tensor_bytes(t->dtype, t->ndim, t->shape);
    if (bytes) memcpy(dst, t->data, (size_t)bytes);
    return ADAPT_OK;
}

const char *adapt_safetensors_meta_get(const struct adapt_safetensors *f, const char *key)
{
    for (int i = 0; i < f->n_meta; i++)
        if (!strcmp(f->meta[i].key, key)) return f->meta[i].value;
    return NULL;
}
