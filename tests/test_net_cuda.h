/* tests/test_net_cuda.h: what the source files of tests/test_net_cuda share: fills, the
 * comparisons and their tolerances (tests/test_net_cuda.c explains them), the engine and network
 * a case holds, the one-layer network with the check of a layer on it, and the functions by
 * which each file adds its tests to the program's test cases (created in tests/test_net_cuda.c). */
#ifndef ADAPT_TESTS_TEST_NET_CUDA_H
#define ADAPT_TESTS_TEST_NET_CUDA_H

#include <check.h>
#include <stddef.h>
#include <stdint.h>

#include "src/net/net.h"
#include "src/net/net_cuda.h"

#define U 0x1p-24

/* x[i] uniform in [lo, hi), y[i] uniform in [0, classes) (Philox, seeded) */
void fill_uniform(float *x, size_t n, uint64_t seed, double lo, double hi);
void fill_labels(int *y, int n, int classes, uint64_t seed);
/* max |g - c| <= rtol max|c| (and no NaN) */
void expect_close(const char *what, const float *gpu, const float *cpu, size_t n, double rtol);
/* sqrt(sum (a - b)^2 / sum b^2), or the absolute norm when b is zero */
double rel_norm_diff(const float *a, const float *b, size_t n);
/* |gpu - cpu| allowed for a sum of k terms, relative to max|cpu| (4 k u, at least 4 u), and the
 * same for a convolution that may go through cuDNN (at least 2e-5 when it does) */
double tol_sum(double k);
double tol_conv(double k);

/* What a case holds, global so that the checked teardown (release_live) frees it when an
 * assertion ends the case early (CK_NOFORK: the next case runs in this process and on this
 * GPU). */
extern struct adapt_cuda_net *live_d;
extern struct adapt_net *live_net;
void release_live(void);

/* one layer on the same input: x -> dropout(p = 0) (exact copy, so the layer's input gets a
 * gradient) -> LAYER -> flatten -> softmax cross-entropy over all outputs */
struct one {
    struct adapt_net *net;
    int a_in, a_out; /* the layer's input and output activations */
};

/* extra: the layer's inputs beyond the first (0 to 2): tanh and sigmoid of it; the network
 * holds batches of up to cap samples */
struct one one_layer(struct adapt_layer *layer, const int in[3], int extra, int cap);

/* How the GPU computes the layer: PLAIN float32 kernels and cuBLAS; CONV a convolution
 * through cuDNN when the build has it; HALF16, HALFBF16 a conv or linear in fp16 / bf16 on
 * tensor cores (adapt_cuda_net_half). */
enum path { PLAIN = 0, CONV = 1, HALF16, HALFBF16 };

/* Runs the CPU and the GPU step on a batch of n samples (at most the capacity one_layer gave
 * the network) and compares the layer's output (k_fwd terms per output), its input gradient
 * (k_bwd) and each parameter gradient (k_par[i]). */
void check_layer(const char *what, struct one o, int n, double k_fwd, double k_bwd,
                 const double *k_par, enum path path);

void test_net_cuda_add_layers(TCase *products, TCase *elementwise); /* test_net_cuda_layers.c */
void test_net_cuda_add_models(TCase *models, TCase *pipeline);      /* test_net_cuda_models.c */
void test_net_cuda_add_reductions(TCase *reductions);               /* test_net_cuda_reductions.c */

#endif
