/* src/net/cuda/kernels.h: the training engine's own CUDA kernels (everything cuBLAS and cuDNN
 * do not do), with C-linkage launchers. CUDA builds only (included from .cu files).
 *
 * Every pointer is device memory; every launcher enqueues on `s` and returns at once (no
 * synchronisation, no allocation). Layouts and semantics are those of the CPU layers in
 * src/net/layers/ (NCHW float32, per-sample shapes (C, H, W)), so that a GPU step and a CPU
 * step agree to rounding: see each CPU file named below. `acc` = 1 means "add into dx" (an
 * activation read by two layers), 0 means "overwrite dx", as the CPU ops' acc bits.
 * Launch configuration is the launcher's business (grid-stride loops; results never depend on
 * it except through floating-point summation order in the reductions).
 */
#ifndef ADAPT_NET_CUDA_KERNELS_H
#define ADAPT_NET_CUDA_KERNELS_H

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Activations (src/net/layers/act.c): kinds in the order of enum acu_act (ACU_GELU_TANH: gelu's
 * tanh form). The backward takes both x and y; each kind reads the one its CPU backward reads. */
enum acu_act {
    ACU_RELU = 0,
    ACU_RELU6,
    ACU_TANH,
    ACU_SIGMOID,
    ACU_HARDSWISH,
    ACU_GELU,
    ACU_GELU_TANH
};
void acu_act_forward(int kind, const float *x, float *y, size_t count, cudaStream_t s);
void acu_act_backward(int kind, const float *x, const float *y, const float *dy, float *dx,
                      size_t count, int acc, cudaStream_t s);

/* dst = src (acc 0) or dst += src (acc 1), count floats (flatten, the add layer's backward). */
void acu_copy(const float *src, float *dst, size_t count, int acc, cudaStream_t s);
/* y = a + b (the add layer's forward). */
void acu_add(const float *a, const float *b, float *y, size_t count, cudaStream_t s);
/* x = 0. */
void acu_zero(float *x, size_t count, cudaStream_t s);

/* Pooling (src/net/layers/pool.c), padding 0 <= pad <= k / 2, output
 * Ho = (H + 2 pad - k) / stride + 1 (floor). Max: padding never wins; the backward sends each
 * output's gradient to the input element the CPU picks (same tie rule), added where windows
 * overlap; it may recompute the choice from x and y. */
void acu_maxpool_forward(const float *x, float *y, int n, int c, int h, int w, int k, int stride,
                         int pad, cudaStream_t s);
void acu_maxpool_backward(const float *x, const float *y, const float *dy, float *dx, int n,
                          int c, int h, int w, int k, int stride, int pad, int acc,
                          cudaStream_t s);
/* Average: divided by k*k when count_include_pad, else by the window's cells inside the input;
 * k == 0: global average pool (output C x 1 x 1). */
void acu_avgpool_forward(const float *x, float *y, int n, int c, int h, int w, int k, int stride,
                         int pad, int count_include_pad, cudaStream_t s);
void acu_avgpool_backward(const float *dy, float *dx, int n, int c, int h, int w, int k,
                          int stride, int pad, int count_include_pad, int acc, cudaStream_t s);

/* Batch norm (src/net/layers/batchnorm.c, PyTorch BatchNorm2d): training forward uses the
 * batch mean and biased variance, writes saved[0..c) = mean, saved[c..2c) = 1/sqrt(var + eps)
 * and updates running_mean/running_var with momentum (running var from the unbiased batch
 * variance, n*h*w / (n*h*w - 1)), exactly as the CPU layer; eval forward uses the running
 * statistics. Backward (training statistics) adds into dgamma and dbeta and writes or adds dx. */
void acu_bn_forward_train(const float *x, float *y, const float *gamma, const float *beta,
                          float *running_mean, float *running_var, float *saved, int n, int c,
                          int hw, float eps, float momentum, cudaStream_t s);
void acu_bn_forward_eval(const float *x, float *y, const float *gamma, const float *beta,
                         const float *running_mean, const float *running_var, int n, int c,
                         int hw, float eps, cudaStream_t s);
void acu_bn_backward(const float *x, const float *dy, const float *gamma, const float *saved,
                     float *dx, float *dgamma, float *dbeta, int n, int c, int hw, int acc,
                     cudaStream_t s);

/* Bias of conv2d / linear: y[i, ch, p] += b[ch] over (n, c, hw); db[ch] += sum of dy[i, ch, p]. */
void acu_bias_add(float *y, const float *b, int n, int c, int hw, cudaStream_t s);
void acu_bias_grad(const float *dy, float *db, int n, int c, int hw, cudaStream_t s);

/* Dropout (src/net/layers/dropout.c): the same keep/drop decision for every element as the
 * CPU layer given (seed, stream, element index), kept values scaled by 1 / (1 - p). */
void acu_dropout_forward(const float *x, float *y, size_t count, float p, uint64_t seed,
                         uint64_t stream, cudaStream_t s);
void acu_dropout_backward(const float *dy, float *dx, size_t count, float p, uint64_t seed,
                          uint64_t stream, int acc, cudaStream_t s);

/* One input of a concat along channels (src/net/layers/concat.c), called once per input: per
 * sample, x (ci x hw) goes to channels [c0, c0 + ci) of y (ctot x hw); backward: dx (=|+=) that
 * block of dy. */
void acu_concat_forward(const float *x, float *y, int n, int c0, int ci, int ctot, int hw,
                        cudaStream_t s);
void acu_concat_backward(const float *dy, float *dx, int n, int c0, int ci, int ctot, int hw,
                         int acc, cudaStream_t s);

/* Softmax cross-entropy (src/net/layers/xent.c): rows of c logits, labels[n] (device ints).
 * out[0] = sum over rows of the row loss (double, so the host divides by n), out[1] = rows
 * whose arg-max (first maximum, as the CPU) equals the label; out is overwritten. dlogits may be
 * NULL; else dlogits = (softmax - onehot) / n. */
void acu_softmax_xent(const float *logits, const int *labels, int n, int c, float *dlogits,
                      double *out, cudaStream_t s);

/* One SGD step on one parameter (src/net/optim.c, adapt_sgd_prepare + adapt_sgd_update):
 * g *= grad_scale; g += l1_coef * sign(l1_src) when l1_coef != 0 (l1_src: the master or the
 * copy in use, as the CPU's l1_quantized); d = g + l2 * l2_src; first step: b = d, else
 * b = momentum * b + d (b = d when momentum is 0, as the CPU); w -= lr * (nesterov and
 * momentum != 0 ? d + momentum * b : b); then g = 0. */
void acu_sgd_update(float *w, float *g, float *b, const float *l1_src, const float *l2_src,
                    size_t count, float lr, float momentum, float l2, float l1_coef,
                    float grad_scale, int nesterov, int first, cudaStream_t s);

/* Lowering for convolutions without cuDNN (src/net/layers/im2col.c layout): col is
 * (C*k*k) x (Ho*Wo) for one sample, row index (ci*k + ky)*k + kx, zero padding pad, stride,
 * dilation. col2im adds col back into x (x must be zeroed or hold what to add to). */
void acu_im2col(const float *x, float *col, int c, int h, int w, int k, int stride, int pad,
                int dil, int ho, int wo, cudaStream_t s);
void acu_col2im(const float *col, float *x, int c, int h, int w, int k, int stride, int pad,
                int dil, int ho, int wo, cudaStream_t s);

/* Half-precision conv and linear (tensor cores): element types of the half copies. */
enum { ACU_FLOAT = 0, ACU_FP16 = 1, ACU_BF16 = 2 };
/* im2col of n samples at once, stored as `half` (ACU_FP16 or ACU_BF16, rounded to nearest):
 * col is (C*k*k) x (n*Ho*Wo), row index as above, column i*Ho*Wo + oy*Wo + ox. col2im_batch is
 * col2im of that layout in float32, adding into x (n samples; zeroed or what to add to), with
 * the sums grouped as acu_col2im's. */
void acu_im2col_half(const float *x, void *col, int half, int n, int c, int h, int w, int k,
                     int stride, int pad, int dil, int ho, int wo, cudaStream_t s);
void acu_col2im_batch(const float *col, float *x, int n, int c, int h, int w, int k, int stride,
                      int pad, int dil, int ho, int wo, cudaStream_t s);
/* y (b, a, p) = x (a, b, p), stored as `half` (ACU_FLOAT: float32): with p = 1, b = 1 a copy
 * converted to the half type */
void acu_swap(const float *x, void *y, int half, size_t a, size_t b, size_t p, cudaStream_t s);

/* The precision policies' vector work (src/policy/precision.c, src/policy/adapt.c), with
 * explicitly rounded float operations (no contraction) so the values are the CPU loops':
 * g *= scale (scale != 1), then acc += g when acc is not NULL. */
void acu_scale_acc(float *g, float *acc, size_t count, float scale, cudaStream_t s);

/* Reductions and AdaPT's normalisation over a list of tensors, one launch each for all of them
 * (a step's many small tensors would otherwise cost a launch or two apiece). t: a device table
 * of k + 1 entries; entry i covers `count` floats at x (and at acc, which may be NULL) with the
 * blocks t[i].first .. t[i + 1].first - 1, where t[i + 1].first = t[i].first +
 * acu_list_blocks(x, count); t[k].first = `blocks`, the blocks in all.
 * - acu_sumsq_list: out[2i] = the sum of x^2 of entry i (double), out[2i + 1] = the sum of |x|
 *   (out zeroed first);
 * - acu_normalize_acc_list: x *= (float)(1 / sqrt(sumsq[2i])) when sumsq[2i] > 0, then
 *   acc += x when acc is not NULL (AdaPT's per-tensor normalisation, the norm read on the
 *   device: no wait). */
struct acu_tensor {
    float *x, *acc;
    size_t count;
    unsigned first;
};
unsigned acu_list_blocks(const float *x, size_t count);
void acu_sumsq_list(const struct acu_tensor *t, int k, unsigned blocks, double *out,
                    cudaStream_t s);
void acu_normalize_acc_list(const struct acu_tensor *t, int k, unsigned blocks, const double *sumsq,
                            cudaStream_t s);
/* adapt_sgd_prepare: g = g * scale, then g += l1 * sign(w) when l1 != 0 (w: the master or the
 * copy in use). */
void acu_sgd_prepare(float *g, const float *w, size_t count, float scale, float l1, cudaStream_t s);
/* The saturating straight-through rule (src/policy/precision.c, dout_hook): dy = 0 where
 * (y >= hi and dy < 0) or (y <= lo and dy > 0). */
void acu_ste_clip(const float *y, float *dy, size_t count, float lo, float hi, cudaStream_t s);
/* Scaled roles (src/policy/roles.c): amax[r] = the largest bits of |x| over row r of x (rows x
 * cols floats), as quant_amax_compute reads them (from 0x7f800000 up: an inf or NaN); and
 * y[i] = x[i] * f[i / c] over n floats. */
void acu_amax_rows(const float *x, size_t rows, size_t cols, unsigned *amax, cudaStream_t s);
void acu_scale_rows(const float *x, float *y, size_t n, size_t c, const float *f,
                    cudaStream_t s);
/* dst[i] = src[i * stride], i < count. */
void acu_gather(const float *src, size_t stride, float *dst, size_t count, cudaStream_t s);
/* counts[0..bins-1] = quant_hist(x, count, 1, lo, hi, bins, QUANT_HIST_CLAMP) (src/quant/kl.c:
 * the same bin arithmetic in double; lo < hi: the caller widens an empty range as quant_hist
 * does). The counts are overwritten. */
void acu_hist(const float *x, size_t count, double lo, double hi, int bins,
              unsigned long long *counts, cudaStream_t s);
/* MuPPET (src/policy/muppet.c): dst = x + a * w (the product rounded, then the sum, as the
 * CPU's g + l2 * w); the two sums of adapt_muppet_gd over ring, r slices of n floats each
 * (out[0] = sum of squares, out[1] = sum of the squared slice sums, both double; out
 * overwritten). */
void acu_add_scaled(float *dst, const float *x, const float *w, float a, size_t count,
                    cudaStream_t s);
void acu_gd(const float *ring, int r, size_t n, double *out, cudaStream_t s);
/* AMP's overflow check: *flag = 1 when x[0 .. count-1] holds an inf or NaN (flag is not
 * cleared). */
void acu_nonfinite(const float *x, size_t count, unsigned *flag, cudaStream_t s);

#ifdef __cplusplus
}
#endif
#endif
