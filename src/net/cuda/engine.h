/* src/net/cuda/engine.h: what the GPU engine's files share: its layer table, the engine
 * itself, the error macros and the helpers one file defines for another
 * (src/net/cuda/net_cuda.cu: the engine, its memory and its step; conv_linear.cu: convolutions
 * and linear layers, in float32 and half precision; policy_api.cu: what the precision policies
 * build on). Internal to those files: the engine's interface is src/net/net_cuda.h. */
#ifndef ADAPT_NET_CUDA_ENGINE_H
#define ADAPT_NET_CUDA_ENGINE_H

#include "config.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#if ADAPT_HAVE_CUDNN
#include <cudnn.h>
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/rng.h"
#include "src/cuda/device.h"
#include "src/net/cuda/kernels.h"
#include "src/net/net_cuda.h"
#include "src/net/optim.h"
#include "src/quant/quant_impl.h"

namespace acu_net
{


enum dkind {
    K_CONV = 0,
    K_LINEAR,
    K_ACT,
    K_MAXPOOL,
    K_AVGPOOL,
    K_BN,
    K_ADD,
    K_FLATTEN,
    K_DROPOUT,
    K_CONCAT
};

struct dlayer {
    int kind, act;
    int half; /* conv, linear: products in ACU_FP16 / ACU_BF16 on tensor cores (0: float32) */
    struct adapt_layer *l;
    int pidx[ADAPT_LAYER_MAX_PARAMS]; /* net->param index of each of the layer's parameters */
    float *saved;                     /* batch-norm: mean, invstd */
#if ADAPT_HAVE_CUDNN
    cudnnTensorDescriptor_t xd, yd;
    cudnnFilterDescriptor_t wd;
    cudnnConvolutionDescriptor_t cd;
    cudnnConvolutionFwdAlgo_t fwd;
    cudnnConvolutionBwdDataAlgo_t bwd_data;
    cudnnConvolutionBwdFilterAlgo_t bwd_filter;
    /* the algorithms cudnnFind* picked at n_max; fwd, bwd_data and bwd_filter are those of
     * desc_n, re-checked at every other batch size (conv_describe) */
    cudnnConvolutionFwdAlgo_t fwd_max;
    cudnnConvolutionBwdDataAlgo_t bwd_data_max;
    cudnnConvolutionBwdFilterAlgo_t bwd_filter_max;
    int desc_n; /* batch size the tensor descriptors describe */
#endif
};

/* A list of tensors on the device for the one-launch reductions (acu_sumsq_list,
 * acu_normalize_acc_list): the host's pointers and counts it was made from, and its device
 * table. */
struct dlist {
    int k;
    float **x, **acc; /* acc: NULL when the list has no second pointers */
    size_t *n;
    struct acu_tensor *table; /* k + 1 entries */
    unsigned blocks;
};
/* lists kept per engine (a policy's step uses two or three, each the same every step) */
constexpr int kLists = 8;
void list_clear(struct dlist *l);


} // namespace acu_net

struct adapt_cuda_net {
    struct adapt_net *net;
    int gpu, n_max;
    char device[256];
    cudaStream_t s, up;
    cudaEvent_t ready[2], consumed[2];
    cublasHandle_t blas;
#if ADAPT_HAVE_CUDNN
    cudnnHandle_t dnn;
#endif
    float *vals, *grads, *bufs, *quants;
    size_t nvals, ngrads;
    float **pval, **pgrad, **pbuf, **puse;
    float **act, **dact;
    unsigned char *written;
    float *ws;
    size_t ws_bytes;
    float *dx_tmp; /* cuDNN: an input gradient to add into one already written */
    float *xin[2];
    int *yin[2];
    float *h_x[2];
    int *h_y[2];
    int slot, n, has_labels, pending_slot;
    double *d_stats, *h_stats;
    int step_stats; /* the last step computed the loss into h_stats (it had labels) */
    struct acu_net::dlayer *L;
    long steps;
    /* quantized training (src/policy/precision.c) */
    struct adapt_cuda_hooks hooks;
    uint64_t id;   /* adapt_cuda_net_id */
    void **allocs; /* adapt_cuda_net_alloc's arrays */
    int nallocs;
    unsigned long long *counters, *h_counters; /* (3 * ncounters), on the device and pinned */
    int ncounters;
    void *qscratch; /* the rounding's scratch (reused in stream order) */
    size_t qscratch_bytes;
    double *d_sums, *h_sums; /* (2 * nsums) reductions */
    int nsums;
    unsigned long long *d_hist, *h_hist; /* (nhist) histogram counts */
    int nhist;
    uint32_t *d_keys, *h_keys; /* (2) a range's order keys, or an overflow flag */
    int nkeys;
    /* scaled roles (adapt_cuda_net_amax_rows, adapt_cuda_net_round_scaled): per-row amax bits,
     * per-row scales and their inverses, and one rounding's counts */
    unsigned *d_amax, *h_amax;
    int namax;
    float *d_rsc, *h_rsc;
    int nrsc;
    unsigned long long *d_rcnt, *h_rcnt;
    int nrcnt;
    float loss_scale; /* d(loss)/d(logits) is multiplied by it (AMP) */
    /* half-precision units (adapt_cuda_net_half): their half copies and float32 scratch */
    void *hws;
    size_t hws_bytes;
    float *fws;
    size_t fws_bytes;
    struct acu_net::dlist lists[acu_net::kLists]; /* list_of's tables, replaced round-robin */
    int next_list;
};

namespace acu_net
{

enum adapt_status cu_fail(cudaError_t e, const char *what, const char *file, int line);
#define CU(call, what)                                                                             \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) return cu_fail(e_, what, __FILE__, __LINE__);                       \
    } while (0)
#define BLAS(call, what)                                                                           \
    do {                                                                                           \
        cublasStatus_t b_ = (call);                                                                \
        if (b_ != CUBLAS_STATUS_SUCCESS)                                                           \
            return adapt_error_at(__FILE__, __LINE__, ADAPT_EIO, "cublas: %s: status %d", what,    \
                                  (int)b_);                                                        \
    } while (0)
#if ADAPT_HAVE_CUDNN
#define DNN(call, what)                                                                            \
    do {                                                                                           \
        cudnnStatus_t d_ = (call);                                                                 \
        if (d_ != CUDNN_STATUS_SUCCESS)                                                            \
            return adapt_error_at(__FILE__, __LINE__, ADAPT_EIO, "cudnn: %s: %s", what,            \
                                  cudnnGetErrorString(d_));                                        \
    } while (0)
#endif

/* net_cuda.cu */
int kind_of(const struct adapt_layer *l, int *act);
int conv_groups(const struct adapt_layer *l);
int conv_dil(const struct adapt_layer *l);
int has_bias(const struct adapt_layer *l);
#if !ADAPT_HAVE_CUDNN
size_t im2col_floats(const struct adapt_layer *l);
#endif
size_t param_numel(const struct adapt_param *p);

/* conv_linear.cu */
#if ADAPT_HAVE_CUDNN
enum adapt_status conv_setup(struct adapt_cuda_net *d, struct dlayer *dl, size_t *ws_bytes);
#endif
void half_needs(const struct adapt_layer *l, int kind, int n, size_t *hbytes, size_t *floats);
enum adapt_status conv_forward(struct adapt_cuda_net *d, struct dlayer *dl, const float *x,
                               float *y, int n);
enum adapt_status conv_backward(struct adapt_cuda_net *d, struct dlayer *dl, const float *x,
                                const float *dy, float *dx, int acc, int n);
enum adapt_status linear_forward(struct adapt_cuda_net *d, struct dlayer *dl, const float *x,
                                 float *y, int n);
enum adapt_status linear_backward(struct adapt_cuda_net *d, struct dlayer *dl, const float *x,
                                  const float *dy, float *dx, int acc, int n);

} // namespace acu_net

#endif
