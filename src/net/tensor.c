/* src/net/tensor.c */
#include "src/net/tensor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/hd.h"

void adapt_tensor_shape(struct adapt_tensor *t, int ndim, const int *dim)
{
    ADAPT_ASSERT(ndim >= 0 && ndim <= ADAPT_MAX_DIMS);
    t->ndim = ndim;
    t->numel = 1;
    for (int i = 0; i < ADAPT_MAX_DIMS; i++) {
        t->dim[i] = i < ndim ? dim[i] : 1;
        if (i < ndim) t->numel *= (size_t)dim[i];
    }
}

const char *adapt_tensor_shape_str(const struct adapt_tensor *t, char *buf, size_t len)
{
    size_t off = 0;
    off += (size_t)snprintf(buf + off, len - off, "(");
    for (int i = 0; i < t->ndim && off < len; i++)
        off += (size_t)snprintf(buf + off, len - off, i ? ", %d" : "%d", t->dim[i]);
    if (off < len) snprintf(buf + off, len - off, ")");
    return buf;
}

size_t adapt_arena_take_size(size_t nfloats)
{
    size_t b = nfloats * sizeof(float);
    return (b + ADAPT_ALIGN - 1) / ADAPT_ALIGN * ADAPT_ALIGN;
}

void *adapt_aligned_alloc(size_t bytes)
{
    void *p = NULL;
    if (bytes == 0) bytes = ADAPT_ALIGN;
    if (posix_memalign(&p, ADAPT_ALIGN, bytes) != 0) return NULL;
    return p;
}

void adapt_aligned_free(void *p) { free(p); }

enum adapt_status adapt_arena_alloc(struct adapt_arena *a, size_t bytes)
{
    a->base = adapt_aligned_alloc(bytes);
    a->cap = bytes;
    a->used = 0;
    if (!a->base) return ADAPT_ERROR(ADAPT_ENOMEM, "cannot allocate %zu bytes", bytes);
    memset(a->base, 0, bytes);
    return ADAPT_OK;
}

void adapt_arena_free(struct adapt_arena *a)
{
    adapt_aligned_free(a->base);
    a->base = NULL;
    a->cap = a->used = 0;
}

float *adapt_arena_take(struct adapt_arena *a, size_t nfloats)
{
    size_t b = adapt_arena_take_size(nfloats);
    ADAPT_ASSERT(a->used + b <= a->cap);
    float *p = (float *)(a->base + a->used);
    a->used += b;
    return p;
}
