/* src/net/tensor.h: dense float tensors and the arenas that hold them.
 *
 * A tensor is a view: a pointer into an arena plus a shape of up to four
 * dimensions (activations are NCHW; a conv weight is (Cout, Cin, K, K), a
 * linear weight (out, in), a bias (C)). Tensors never own memory. An arena is
 * one 64-byte-aligned block carved by a bump allocator; a network owns one
 * arena each for parameters, gradients, optimizer state and activations, so
 * nothing is allocated inside the training loop.
 *
 *   struct adapt_arena a;
 *   adapt_arena_alloc(&a, bytes_needed);           // one malloc
 *   float *w = adapt_arena_take(&a, 1000);         // 64-byte aligned, zeroed
 *   ...
 *   adapt_arena_free(&a);
 *
 * adapt_arena_take_size() gives the bytes one take of n floats consumes, so a
 * caller can size an arena exactly before allocating it.
 */
#ifndef ADAPT_TENSOR_H
#define ADAPT_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#include "src/base/status.h"

#define ADAPT_MAX_DIMS 4

struct adapt_tensor {
    float *data;                /* (dim[0], ..., dim[ndim-1]), row-major */
    int ndim;
    int dim[ADAPT_MAX_DIMS];
    size_t numel;
};

/* Sets shape and numel; data stays as it is. */
void adapt_tensor_shape(struct adapt_tensor *t, int ndim, const int *dim);
/* "(6, 1, 5, 5)" into buf. */
const char *adapt_tensor_shape_str(const struct adapt_tensor *t, char *buf, size_t len);

struct adapt_arena {
    unsigned char *base;
    size_t cap;  /* bytes */
    size_t used; /* bytes */
};

size_t adapt_arena_take_size(size_t nfloats);
enum adapt_status adapt_arena_alloc(struct adapt_arena *a, size_t bytes);
void adapt_arena_free(struct adapt_arena *a);
/* n floats, 64-byte aligned, zeroed; asserts the arena is large enough. */
float *adapt_arena_take(struct adapt_arena *a, size_t nfloats);

/* 64-byte aligned malloc/free for buffers outside arenas (NULL on failure). */
void *adapt_aligned_alloc(size_t bytes);
void adapt_aligned_free(void *p);

#endif
