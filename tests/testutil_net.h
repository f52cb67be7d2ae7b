/* tests/testutil_net.h: layer helpers for the programs that test and time src/net layers
 * (tests/libtestutil_net.a: test_layers, bench_layers). The helpers every test uses are in
 * tests/testutil.h, included here.
 *
 * - tu_layer: one layer run standalone, with its own memory for parameters
 *   (value, grad, use = value), saved state, workspace and n-sample
 *   input / output / gradient buffers, as a network would bind them;
 * - tu_gradcheck: central finite differences of a scalar loss against an
 *   analytic gradient, with the tolerance supplied by the caller.
 *
 * Non-goals: no timing, no CUDA. Test code only (asserts on allocation).
 *
 *   struct tu_layer t;
 *   tu_layer_bind(&t, adapt_relu_create("r", chw), 4, 1);
 *   tu_fill_uniform(t.x[0], tu_layer_in_len(&t, 0), 7, -1.0f, 1.0f);
 *   tu_layer_forward(&t);
 *   tu_layer_backward(&t, 0);
 *   tu_layer_release(&t);
 */
#ifndef ADAPT_TESTS_TESTUTIL_NET_H
#define ADAPT_TESTS_TESTUTIL_NET_H

#include <stddef.h>
#include <stdint.h>

#include "src/net/layer.h"
#include "src/net/net.h"
#include "tests/testutil.h"

/* LeNet-5 (10 classes) finalised for batches of n, parameters initialised with seed 2385 and
 * gain 0.5 (the network the precision tests round: test_policy, test_roles) */
struct adapt_net *small_lenet(int n);

struct tu_layer {
    struct adapt_layer *l;            /* owned: released by tu_layer_release */
    int n;                            /* samples */
    float *x[ADAPT_LAYER_MAX_IN];     /* (n, in numel) */
    float *dx[ADAPT_LAYER_MAX_IN];    /* (n, in numel) */
    float *y, *dy;                    /* (n, out numel) */
    float *ws;                        /* ops->workspace(l, n) floats (or NULL) */
    float *saved;                     /* ops->saved(l, n) floats (or NULL) */
    struct adapt_exec ex;
    int64_t counter;                  /* bound to l->counter when the layer has one */
};

/* Allocates every buffer (zeroed, 64-byte aligned) for n samples; parameter
 * values, grads (not for buffers) and use = value.data. Takes ownership of l
 * (which must not be NULL). */
void tu_layer_bind(struct tu_layer *t, struct adapt_layer *l, int n, int training);
void tu_layer_release(struct tu_layer *t);
size_t tu_layer_in_len(const struct tu_layer *t, int i);  /* n * in numel */
size_t tu_layer_out_len(const struct tu_layer *t);        /* n * out numel */
void tu_layer_forward(struct tu_layer *t);
/* Passes dx (entries NULL where want_dx bit i is clear) to backward. */
void tu_layer_backward_sel(struct tu_layer *t, unsigned want_dx, unsigned acc);
void tu_layer_backward(struct tu_layer *t, unsigned acc);
/* Zeroes every parameter gradient. */
void tu_layer_zero_grads(struct tu_layer *t);

/* Finite-difference gradient check. f(ctx) evaluates the scalar loss from
 * the current contents of v (and whatever else ctx points at). For a
 * deterministic subset of at most max_checks indices i, the central
 * difference (f(v_i + h) - f(v_i - h)) / (actual step) is compared with
 * an[i]: the check passes when |an[i] - fd| <= atol + rtol * |fd|. v is
 * restored afterwards. Returns the number of failing indices (0 = pass). */
typedef double (*tu_loss_fn)(void *ctx);
struct tu_fd_opts {
    float h;           /* step */
    double rtol, atol; /* tolerance */
    size_t max_checks; /* 0: all */
};
struct tu_fd_result {
    size_t checked, failed;
    size_t worst;      /* index with the largest |an - fd| / tolerance */
    double worst_ratio;
    double worst_an, worst_fd;
};
size_t tu_gradcheck(tu_loss_fn f, void *ctx, float *v, size_t n, const float *an,
                    const struct tu_fd_opts *o, struct tu_fd_result *r);

#endif
