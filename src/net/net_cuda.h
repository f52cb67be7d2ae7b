/* src/net/net_cuda.h: a network's training step on a CUDA GPU.
 *
 * A device network mirrors a finalized host network (src/net/net.h) on one GPU: parameters
 * and batch-norm buffers, their gradients, the SGD momentum buffers, the copies the layers
 * compute with, activations, their gradients and the layers' saved state all live in device
 * memory. One step (upload, forward, softmax cross-entropy, backward, SGD update) runs on the
 * device; only the batch goes in (from pinned memory, on a second stream, overlapping the
 * previous step) and only the loss sum and the count of correct predictions come back.
 *
 * Layers run on the device implementation of their kind (src/net/cuda/): conv2d through
 * cuDNN (FMA math: real float32, no TF32) when the build has it, otherwise im2col and cuBLAS;
 * linear through cuBLAS (float32); the rest through the engine's own kernels, which follow the
 * CPU layers' definitions (src/net/cuda/kernels.h). Results agree with the CPU step to
 * floating-point summation order.
 *
 *   struct adapt_cuda_net *d;
 *   if (adapt_cuda_net_create(net, 0, &d) != ADAPT_OK) ...   // copies the host parameters
 *   adapt_cuda_net_upload(d, x, labels, n);                   // returns once x is copied
 *   adapt_cuda_net_step(d, n, 1);                             // forward, loss, backward
 *   adapt_cuda_net_sgd(d, lr, momentum, l2, nesterov, 1.0);   // update, zero gradients
 *   adapt_cuda_net_result(d, &loss_sum, &correct);            // waits for this step
 *   adapt_cuda_net_pull_params(d);                            // device -> host values
 *   adapt_cuda_net_free(d);
 *
 * Builds without CUDA get src/net/net_cuda_none.c: create reports ADAPT_EUNSUPPORTED.
 *
 * Quantized training: the precision module (src/policy/precision.h) installs device hooks
 * (struct adapt_cuda_hooks) that round activations, inputs and gradients with the CUDA rounding
 * kernels on the step's stream, and the policies compute their statistics with the reductions
 * below; only scalars and histogram counts come back to the host.
 */
#ifndef ADAPT_NET_CUDA_H
#define ADAPT_NET_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "src/base/status.h"
#include "src/net/net.h"
#include "src/quant/quant.h"

#ifdef __cplusplus
extern "C" {
#endif

struct adapt_cuda_net;

/* 1 when this build has the GPU engine; 2 when its convolutions use cuDNN. */
int adapt_cuda_net_built(void);

/* Mirrors the finalized network on GPU `gpu` and copies its parameters and buffers there.
 * ADAPT_EUNSUPPORTED without CUDA or without a usable device (the message says which). */
enum adapt_status adapt_cuda_net_create(struct adapt_net *net, int gpu,
                                        struct adapt_cuda_net **out);
void adapt_cuda_net_free(struct adapt_cuda_net *d);

/* Host parameter values and buffers -> device (and back); the gradients, for tests. */
enum adapt_status adapt_cuda_net_push_params(struct adapt_cuda_net *d);
enum adapt_status adapt_cuda_net_pull_params(struct adapt_cuda_net *d);
enum adapt_status adapt_cuda_net_pull_grads(struct adapt_cuda_net *d);

/* The SGD state: momentum buffers and the step count, device <-> an optimizer made for the
 * same network (adapt_sgd_init; checkpoints hold it). */
struct adapt_sgd;
enum adapt_status adapt_cuda_net_push_sgd(struct adapt_cuda_net *d, const struct adapt_sgd *o);
enum adapt_status adapt_cuda_net_pull_sgd(struct adapt_cuda_net *d, struct adapt_sgd *o);

/* Queues n <= n_max samples x (n, C, H, W) and labels (NULL: no loss) for the next step;
 * returns once both are copied out of the caller's arrays. */
enum adapt_status adapt_cuda_net_upload(struct adapt_cuda_net *d, const float *x, const int *labels,
                                        int n);
/* Forward of the last uploaded batch (training: batch statistics, saved state), softmax
 * cross-entropy when labels were given, and with backward the gradients (added into the
 * parameter gradients, as the CPU). Asynchronous. */
enum adapt_status adapt_cuda_net_step(struct adapt_cuda_net *d, int training, int backward);
/* Waits for the last step; *loss_sum = sum of the rows' losses, *correct = rows whose
 * arg-max is the label (NaN and 0 after a step of a batch without labels). */
enum adapt_status adapt_cuda_net_result(struct adapt_cuda_net *d, double *loss_sum, int *correct);
/* SGD on every trainable parameter (src/net/optim.h: adapt_sgd_prepare without L1, then
 * adapt_sgd_update), then zero gradients. The first call starts the momentum buffers. */
enum adapt_status adapt_cuda_net_sgd(struct adapt_cuda_net *d, double lr, double momentum,
                                     double l2, int nesterov, double grad_scale);
/* The copy parameter p (net->param order) computes with: spec NULL -> the FP32 master;
 * otherwise quant_rows(spec) of the master with `key`, rows = the parameter's first
 * dimension, into a device copy (bit for bit the CPU's quant_rows). Applies from the next
 * step until changed. */
enum adapt_status adapt_cuda_net_quantize(struct adapt_cuda_net *d, int p,
                                          const struct quant_spec *spec, struct quant_key key);
/* Copies activation a (which 0) or its gradient (which 1) of the last step, n samples, to
 * host memory; for tests. */
enum adapt_status adapt_cuda_net_read(struct adapt_cuda_net *d, int which, int a, int n,
                                      float *host);
/* The device's description ("NVIDIA H100 ..., sm_90, ..."). */
const char *adapt_cuda_net_device(const struct adapt_cuda_net *d);

/* ---- what the precision policies build on (src/policy/precision.c, src/policy/adapt.c) ----
 * Every function below queues its work on the step's stream (in order with the step) unless it
 * says that it waits. Device arrays are float * into device memory. */

/* Hooks with the contract of struct adapt_net's (src/net/net.h), on the device arrays of the
 * step: called on the host while the step is being queued, they queue their own work with the
 * functions below (adapt_cuda_net_round, ...). in also runs before each node's backward
 * (backward = 1), so the backward reads the inputs the forward used. A hook's failure stops the
 * step with its status. */
struct adapt_cuda_hooks {
    void *ctx;
    enum adapt_status (*in)(void *ctx, int node, const float **xs, int n, int training,
                            int backward);
    enum adapt_status (*out)(void *ctx, int node, float *y, int n, int training);
    enum adapt_status (*dout)(void *ctx, int node, const float *y, float *dy, int n);
    enum adapt_status (*grad)(void *ctx, int node, float **dxs, int n);
};
/* Installs the hooks (copied; NULL removes them). Hooks left NULL are not called. */
void adapt_cuda_net_set_hooks(struct adapt_cuda_net *d, const struct adapt_cuda_hooks *h);

/* floats of device memory, zeroed, owned by the engine (freed with it). */
enum adapt_status adapt_cuda_net_alloc(struct adapt_cuda_net *d, size_t floats, float **out);
/* Frees an array adapt_cuda_net_alloc made on d before d is freed, after the work queued so
 * far (a policy attached again frees its earlier arrays); NULL, or an array d does not own
 * (an earlier engine's), is left alone. */
void adapt_cuda_net_release(struct adapt_cuda_net *d, float *array);
/* How many arrays adapt_cuda_net_alloc made on d are held. */
int adapt_cuda_net_arrays(const struct adapt_cuda_net *d);
/* A number no other engine of this process has had (0 for NULL): a policy keeps the one of the
 * engine its arrays are on, so that it frees them only on that engine, never on a later one
 * that happens to have the same address. */
uint64_t adapt_cuda_net_id(const struct adapt_cuda_net *d);
/* k counter slots of (saturated, flushed, zeros), zeroed; replaces earlier slots. */
enum adapt_status adapt_cuda_net_counters(struct adapt_cuda_net *d, int k);
/* Waits for the queued work, adds the slots' counts to host[0 .. 3k-1] and zeroes them. */
enum adapt_status adapt_cuda_net_take_counters(struct adapt_cuda_net *d, uint64_t *host);
/* Zeroes the `count` slots from `first` in stream order (one memset; nothing waits). */
enum adapt_status adapt_cuda_net_zero_counters(struct adapt_cuda_net *d, int first, int count);
/* quant_rows(s, x, y, rows, cols, key) on device arrays (quant_cuda_rows_on, bit for bit the
 * CPU's); counts added to slot `slot` (-1: not counted). */
enum adapt_status adapt_cuda_net_round(struct adapt_cuda_net *d, const struct quant_spec *s,
                                       const float *x, float *y, size_t rows, size_t cols,
                                       struct quant_key key, int slot);
/* Several such roundings of one row each in one launch (quant_cuda_list_on): rounding i is
 * adapt_cuda_net_round(d, s[i], x[i], y[i], 1, n[i], key[i], slot[i]). Only for the formats
 * quant_cuda_list_fits accepts. */
struct adapt_cuda_round {
    const struct quant_spec *s;
    const float *x;
    float *y;
    size_t n;
    struct quant_key key;
    int slot;
};
enum adapt_status adapt_cuda_net_round_list(struct adapt_cuda_net *d,
                                            const struct adapt_cuda_round *r, int k);
/* dy = 0 where (y >= hi and dy < 0) or (y <= lo and dy > 0): the saturating straight-through
 * rule. */
enum adapt_status adapt_cuda_net_ste_clip(struct adapt_cuda_net *d, const float *y, float *dy,
                                          size_t count, float lo, float hi);

/* Parameter p's (net->param order) master values, gradient (NULL for buffers) or the array its
 * layer computes with. */
enum adapt_cuda_array { ADAPT_CUDA_VALUE = 0, ADAPT_CUDA_GRAD, ADAPT_CUDA_USE };
float *adapt_cuda_net_param(struct adapt_cuda_net *d, int p, enum adapt_cuda_array which);
/* The layer computes with `use` (a device array of the parameter's size) from the next step;
 * NULL: with the master. */
void adapt_cuda_net_use(struct adapt_cuda_net *d, int p, const float *use);

/* out[2i] = sum of x_i^2, out[2i+1] = sum |x_i| over x[i][0 .. n[i]-1] (double sums, summation
 * order the device's); waits. One launch for the k tensors, from a device table of the list
 * that the engine keeps for the next call with the same pointers and counts (a few lists are
 * kept; a new list costs a wait and an upload once). */
enum adapt_status adapt_cuda_net_sums(struct adapt_cuda_net *d, float *const *x, const size_t *n,
                                      int k, double *out);
/* For each of the k tensors g[i] (n[i] floats): g[i] *= (float)(1 / sqrt(sum of g[i]^2)) when
 * that sum is positive (in double, on the device: nothing waits), then acc[i] += g[i] when
 * acc[i] is not NULL; AdaPT's per-tensor normalisation and accumulation, the CPU's
 * arithmetic. Two launches for the k tensors, the list kept as adapt_cuda_net_sums keeps it. */
enum adapt_status adapt_cuda_net_normalize_acc(struct adapt_cuda_net *d, float *const *g,
                                               float *const *acc, const size_t *n, int k);
/* Device <-> host copies of count floats; they wait. */
enum adapt_status adapt_cuda_net_get(struct adapt_cuda_net *d, const float *dev, float *host,
                                     size_t count);
enum adapt_status adapt_cuda_net_put(struct adapt_cuda_net *d, float *dev, const float *host,
                                     size_t count);
/* Scaled rounding of the tensor roles (src/policy/roles.c), on device arrays, each waiting for
 * its result: amax[r] = the largest |x| of row r of x (rows x cols floats), inf where the row
 * holds an inf or NaN (quant_amax_compute); and y = Q(x s) (1 / s) with format s over rows x
 * cols values (MX blocks and key as adapt_cuda_net_round), s = scale[i] on the i-th of srows
 * equal rows of the tensor (x may be y), its saturated, flushed and zero counts added to
 * counts[0..2]: quant_rows_scaled's values and counts bit for bit. */
enum adapt_status adapt_cuda_net_amax_rows(struct adapt_cuda_net *d, const float *x, size_t rows,
                                           size_t cols, float *amax);
enum adapt_status adapt_cuda_net_round_scaled(struct adapt_cuda_net *d, const struct quant_spec *s,
                                              const float *x, float *y, size_t rows, size_t cols,
                                              size_t srows, const float *scale,
                                              struct quant_key key, uint64_t counts[3]);
/* The push-down's histogram statistics: dst[i] = src[i * stride] (i < count); the finite range
 * of x (*lo > *hi when none; waits); and counts[0 .. bins-1] = quant_hist(x, count, 1, lo, hi,
 * bins, QUANT_HIST_CLAMP) with lo <= hi, lo == hi widened to [lo - 1, hi + 1] as quant_hist
 * does (waits). */
enum adapt_status adapt_cuda_net_gather(struct adapt_cuda_net *d, const float *src, size_t stride,
                                        float *dst, size_t count);
enum adapt_status adapt_cuda_net_range(struct adapt_cuda_net *d, const float *x, size_t count,
                                       double *lo, double *hi);
enum adapt_status adapt_cuda_net_hist(struct adapt_cuda_net *d, const float *x, size_t count,
                                      double lo, double hi, int bins, uint64_t *counts);

/* MuPPET's statistics: dst = x + a * w (count floats; a * w rounded before the sum, as the
 * CPU's g + l2 * w); and for k rings of r slices of n[i] floats each (slice j of ring i at
 * ring[i] + j * n[i]) the two sums of adapt_muppet_gd (src/policy/policy_core.h):
 * out[2i] = sum over the elements and slices of g^2, out[2i+1] = sum over the elements of
 * (sum over the slices of g)^2, in double (waits). */
enum adapt_status adapt_cuda_net_add_scaled(struct adapt_cuda_net *d, float *dst, const float *x,
                                            const float *w, float a, size_t count);
enum adapt_status adapt_cuda_net_gd(struct adapt_cuda_net *d, float *const *ring, const size_t *n,
                                    int k, int r, double *out);
/* AMP's loss scaling: *finite = 0 when any trainable gradient holds an inf or NaN (waits);
 * every trainable gradient *= scale; and from the next step on, the gradient of the loss with
 * respect to the logits is multiplied by `scale` (1 at creation), as the CPU trainer multiplies
 * its own. */
enum adapt_status adapt_cuda_net_grads_finite(struct adapt_cuda_net *d, int *finite);
enum adapt_status adapt_cuda_net_scale_grads(struct adapt_cuda_net *d, float scale);
void adapt_cuda_net_loss_scale(struct adapt_cuda_net *d, double scale);
/* Conv2d or linear node `node` computes its products in half precision from now on (AMP):
 * ADAPT_CUDA_FP16 or ADAPT_CUDA_BF16 (ADAPT_CUDA_FLOAT: float32 again). Its input, weights
 * and output gradient are converted to that type, rounded to nearest, which is exact for
 * values already in it (AMP rounds them: adapt_precision_half_backward), and multiplied on
 * tensor cores (cublasGemmEx) with float32 accumulation into float32 outputs and gradients;
 * the bias stays float32. A convolution is lowered for the whole batch (im2col), not through
 * cuDNN. Allocates the half copies and scratch for batches up to n_max. */
enum adapt_cuda_half { ADAPT_CUDA_FLOAT = 0, ADAPT_CUDA_FP16 = 1, ADAPT_CUDA_BF16 = 2 };
enum adapt_status adapt_cuda_net_half(struct adapt_cuda_net *d, int node,
                                      enum adapt_cuda_half type);

/* adapt_sgd_prepare on the device: every trainable gradient g = g * grad_scale, then
 * g += l1 * sign(w), w the master or (l1_quantized) the copy in use. */
enum adapt_status adapt_cuda_net_sgd_prepare(struct adapt_cuda_net *d, double grad_scale, double l1,
                                             int l1_quantized);
/* adapt_sgd_update on the device with o's lr, momentum, l2, nesterov and l2_quantized (the L2
 * term reads the copy in use), then zero gradients; the first call starts the momentum
 * buffers. */
enum adapt_status adapt_cuda_net_sgd_update(struct adapt_cuda_net *d, const struct adapt_sgd *o);
/* sum over the trainable parameters of |w| (w: the master or, l1_quantized, the copy in use);
 * waits. adapt_sgd_l1_norm on the device. */
enum adapt_status adapt_cuda_net_l1_norm(struct adapt_cuda_net *d, int l1_quantized, double *out);
/* Zeroes every gradient (a skipped step), or count floats at x. */
enum adapt_status adapt_cuda_net_zero_grads(struct adapt_cuda_net *d);
enum adapt_status adapt_cuda_net_zero(struct adapt_cuda_net *d, float *x, size_t count);

#ifdef __cplusplus
}
#endif
#endif
