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
 * Not yet on the device: the precision policies' activation and gradient hooks and their
 * statistics (AdaPT, MuPPET, AMP run on the CPU engine).
 */
#ifndef ADAPT_NET_CUDA_H
#define ADAPT_NET_CUDA_H

#include <stddef.h>

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
 * arg-max is the label. */
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

#ifdef __cplusplus
}
#endif
#endif
