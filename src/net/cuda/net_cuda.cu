/* src/net/cuda/net_cuda.cu: the training step on a CUDA GPU (src/net/net_cuda.h).
 *
 * Memory: one device block each for parameter values (net->param order, buffers included),
 * gradients, momentum buffers and quantized copies (made on first use), plus the activations,
 * their gradients, per-layer saved state and one workspace sized for the largest layer at the
 * batch capacity. Nothing is allocated per step.
 *
 * Streams: every kernel runs on `s`; batches go up on `up` from pinned staging buffers (two,
 * used in turn), and the step waits for its batch's event, so the next upload overlaps the
 * current step.
 *
 * Convolutions: cuDNN (legacy API) with CUDNN_FMA_MATH, i.e. float32 multiply-adds and no
 * TF32, the algorithms chosen once at the batch capacity by cudnnFind* (as PyTorch's
 * cudnn.benchmark); the workspace is the largest any chosen algorithm asks for. Without cuDNN:
 * per sample im2col (src/net/cuda/conv.cu) and a cuBLAS SGEMM per group, col2im for the
 * input gradient, as the CPU lowering in src/net/layers/conv2d.c. Linear layers: cuBLAS SGEMM
 * in CUBLAS_DEFAULT_MATH (float32). Everything else: src/net/cuda/kernels.h.
 *
 * The convolutions and linear layers are in src/net/cuda/conv_linear.cu, what the precision
 * policies build on in src/net/cuda/policy_api.cu; src/net/cuda/engine.h is what they share.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/net/cuda/engine.h"

using namespace acu_net;

namespace acu_net
{

enum adapt_status cu_fail(cudaError_t e, const char *what, const char *file, int line)
{
    enum adapt_status st = e == cudaErrorMemoryAllocation ? ADAPT_ENOMEM
                           : (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver)
                               ? ADAPT_EUNSUPPORTED
                               : ADAPT_EIO;
    cudaGetLastError();
    return adapt_error_at(file, line, st, "cuda: %s: %s", what, cudaGetErrorString(e));
}

int kind_of(const struct adapt_layer *l, int *act)
{
    const char *k = l->ops->kind;
    *act = -1;
    if (!strcmp(k, "conv2d")) return K_CONV;
    if (!strcmp(k, "linear")) return K_LINEAR;
    if (!strcmp(k, "relu")) return *act = ACU_RELU, K_ACT;
    if (!strcmp(k, "relu6")) return *act = ACU_RELU6, K_ACT;
    if (!strcmp(k, "tanh")) return *act = ACU_TANH, K_ACT;
    if (!strcmp(k, "sigmoid")) return *act = ACU_SIGMOID, K_ACT;
    if (!strcmp(k, "hardswish")) return *act = ACU_HARDSWISH, K_ACT;
    if (!strcmp(k, "gelu")) return *act = l->approximate ? ACU_GELU_TANH : ACU_GELU, K_ACT;
    if (!strcmp(k, "maxpool2d")) return K_MAXPOOL;
    if (!strcmp(k, "avgpool2d")) return K_AVGPOOL;
    if (!strcmp(k, "batchnorm2d")) return K_BN;
    if (!strcmp(k, "add")) return K_ADD;
    if (!strcmp(k, "flatten")) return K_FLATTEN;
    if (!strcmp(k, "dropout")) return K_DROPOUT;
    if (!strcmp(k, "concat")) return K_CONCAT;
    return -1;
}

int conv_groups(const struct adapt_layer *l)
{
    return l->groups > 0 ? l->groups : 1;
}
int conv_dil(const struct adapt_layer *l)
{
    return l->dilation > 0 ? l->dilation : 1;
}
int has_bias(const struct adapt_layer *l)
{
    return l->nparam > 1;
}

#if !ADAPT_HAVE_CUDNN
/* floats of scratch the im2col lowering needs for one sample: the column matrix */
size_t im2col_floats(const struct adapt_layer *l)
{
    int g = conv_groups(l);
    return (size_t)(l->in_dim[0][0] / g) * g * l->k * l->k * l->out_dim[1] * l->out_dim[2];
}
#endif

} // namespace acu_net

namespace
{

uint64_t dropout_stream(const struct adapt_layer *l, int64_t iter)
{
    return (uint64_t)ADAPT_STREAM_DROPOUT + ((uint64_t)(l->node & 0xffff) << 8) +
           ((uint64_t)iter << 24);
}

enum adapt_status node_compute(struct adapt_cuda_net *d, int i, const float *const *xs, int n,
                               int training);

enum adapt_status node_forward(struct adapt_cuda_net *d, int i, int n, int training)
{
    struct adapt_net *net = d->net;
    struct adapt_node *nd = &net->nodes[i];
    struct dlayer *dl = &d->L[i];
    const struct adapt_layer *l = dl->l;
    const float *xs[ADAPT_LAYER_MAX_IN] = {NULL};
    for (int k = 0; k < l->nin; k++) xs[k] = d->act[nd->in[k]];
    if (d->hooks.in) {
        enum adapt_status st = d->hooks.in(d->hooks.ctx, i, xs, n, training, 0);
        if (st != ADAPT_OK) return st;
    }
    enum adapt_status st = node_compute(d, i, xs, n, training);
    if (st == ADAPT_OK && d->hooks.out)
        st = d->hooks.out(d->hooks.ctx, i, d->act[nd->out], n, training);
    return st;
}

enum adapt_status node_compute(struct adapt_cuda_net *d, int i, const float *const *xs, int n,
                               int training)
{
    struct adapt_net *net = d->net;
    struct adapt_node *nd = &net->nodes[i];
    struct dlayer *dl = &d->L[i];
    const struct adapt_layer *l = dl->l;
    const float *x = xs[0];
    float *y = d->act[nd->out];
    size_t cnt = adapt_layer_out_numel(l) * (size_t)n;
    int c = l->in_dim[0][0], h = l->in_dim[0][1], w = l->in_dim[0][2];
    switch (dl->kind) {
    case K_CONV: return conv_forward(d, dl, x, y, n);
    case K_LINEAR: return linear_forward(d, dl, x, y, n);
    case K_ACT: acu_act_forward(dl->act, x, y, cnt, d->s); break;
    case K_MAXPOOL: acu_maxpool_forward(x, y, n, c, h, w, l->k, l->stride, l->pad, d->s); break;
    case K_AVGPOOL:
        acu_avgpool_forward(x, y, n, c, h, w, l->global ? 0 : l->k, l->stride, l->pad,
                            l->count_include_pad, d->s);
        break;
    case K_BN:
        if (training) {
            acu_bn_forward_train(x, y, d->puse[dl->pidx[0]], d->puse[dl->pidx[1]],
                                 d->pval[dl->pidx[2]], d->pval[dl->pidx[3]], dl->saved, n, c, h * w,
                                 l->eps, l->momentum, d->s);
            if (l->counter) (*l->counter)++;
        } else {
            acu_bn_forward_eval(x, y, d->puse[dl->pidx[0]], d->puse[dl->pidx[1]],
                                d->pval[dl->pidx[2]], d->pval[dl->pidx[3]], n, c, h * w, l->eps,
                                d->s);
        }
        break;
    case K_ADD: acu_add(x, xs[1], y, cnt, d->s); break;
    case K_FLATTEN: acu_copy(x, y, cnt, 0, d->s); break;
    case K_DROPOUT:
        if (training && l->p > 0.0f)
            acu_dropout_forward(x, y, cnt, l->p, net->rng_seed, dropout_stream(l, net->rng_iter),
                                d->s);
        else
            acu_copy(x, y, cnt, 0, d->s);
        break;
    case K_CONCAT:
        for (int k = 0, c0 = 0; k < l->nin; c0 += l->in_dim[k][0], k++)
            acu_concat_forward(xs[k], y, n, c0, l->in_dim[k][0], l->out_dim[0], h * w, d->s);
        break;
    default: break;
    }
    return ADAPT_OK;
}

enum adapt_status node_gradients(struct adapt_cuda_net *d, int i, const float *const *xs,
                                 float *const *dxs, const int *acc, int any_dx, int n);

enum adapt_status node_backward(struct adapt_cuda_net *d, int i, int n)
{
    struct adapt_net *net = d->net;
    struct adapt_node *nd = &net->nodes[i];
    struct dlayer *dl = &d->L[i];
    const struct adapt_layer *l = dl->l;
    float *dxs[ADAPT_LAYER_MAX_IN] = {NULL};
    int acc[ADAPT_LAYER_MAX_IN] = {0};
    int any_dx = 0;
    for (int k = 0; k < l->nin; k++) {
        int a = nd->in[k];
        if (a == 0) continue; /* the input needs no gradient */
        dxs[k] = d->dact[a];
        acc[k] = d->written[a];
        d->written[a] = 1;
        any_dx = 1;
    }
    const float *xs[ADAPT_LAYER_MAX_IN] = {NULL};
    for (int k = 0; k < l->nin; k++) xs[k] = d->act[nd->in[k]];
    enum adapt_status st = ADAPT_OK;
    /* straight-through: the gradient of a rounded input goes to the activation unchanged, but
     * the layer sees what it computed with */
    if (d->hooks.in && (st = d->hooks.in(d->hooks.ctx, i, xs, n, 1, 1))) return st;
    if (d->hooks.dout &&
        (st = d->hooks.dout(d->hooks.ctx, i, d->act[nd->out], d->dact[nd->out], n)))
        return st;
    if ((st = node_gradients(d, i, xs, dxs, acc, any_dx, n))) return st;
    if (d->hooks.grad) st = d->hooks.grad(d->hooks.ctx, i, dxs, n);
    return st;
}

enum adapt_status node_gradients(struct adapt_cuda_net *d, int i, const float *const *xs,
                                 float *const *dxs, const int *acc, int any_dx, int n)
{
    struct adapt_net *net = d->net;
    struct adapt_node *nd = &net->nodes[i];
    struct dlayer *dl = &d->L[i];
    const struct adapt_layer *l = dl->l;
    const float *x = xs[0], *y = d->act[nd->out], *dy = d->dact[nd->out];
    size_t cnt = adapt_layer_out_numel(l) * (size_t)n;
    int c = l->in_dim[0][0], h = l->in_dim[0][1], w = l->in_dim[0][2];
    switch (dl->kind) {
    case K_CONV: return conv_backward(d, dl, x, dy, dxs[0], acc[0], n);
    case K_LINEAR: return linear_backward(d, dl, x, dy, dxs[0], acc[0], n);
    default: break;
    }
    if (!any_dx && dl->kind != K_BN) return ADAPT_OK;
    switch (dl->kind) {
    case K_ACT: acu_act_backward(dl->act, x, y, dy, dxs[0], cnt, acc[0], d->s); break;
    case K_MAXPOOL:
        acu_maxpool_backward(x, y, dy, dxs[0], n, c, h, w, l->k, l->stride, l->pad, acc[0], d->s);
        break;
    case K_AVGPOOL:
        acu_avgpool_backward(dy, dxs[0], n, c, h, w, l->global ? 0 : l->k, l->stride, l->pad,
                             l->count_include_pad, acc[0], d->s);
        break;
    case K_BN:
        acu_bn_backward(x, dy, d->puse[dl->pidx[0]], dl->saved, dxs[0], d->pgrad[dl->pidx[0]],
                        d->pgrad[dl->pidx[1]], n, c, h * w, acc[0], d->s);
        break;
    case K_ADD:
        if (dxs[0]) acu_copy(dy, dxs[0], cnt, acc[0], d->s);
        if (dxs[1]) acu_copy(dy, dxs[1], cnt, acc[1], d->s);
        break;
    case K_FLATTEN: acu_copy(dy, dxs[0], cnt, acc[0], d->s); break;
    case K_DROPOUT:
        if (l->p > 0.0f)
            acu_dropout_backward(dy, dxs[0], cnt, l->p, net->rng_seed,
                                 dropout_stream(l, net->rng_iter), acc[0], d->s);
        else
            acu_copy(dy, dxs[0], cnt, acc[0], d->s);
        break;
    case K_CONCAT:
        for (int k = 0, c0 = 0; k < l->nin; c0 += l->in_dim[k][0], k++)
            acu_concat_backward(dy, dxs[k], n, c0, l->in_dim[k][0], l->out_dim[0], h * w, acc[k],
                                d->s);
        break;
    default: break;
    }
    return ADAPT_OK;
}

} // namespace

size_t acu_net::param_numel(const struct adapt_param *p)
{
    return p->value.numel;
}

extern "C" int adapt_cuda_net_built(void)
{
#if ADAPT_HAVE_CUDNN
    return 2;
#else
    return 1;
#endif
}

extern "C" const char *adapt_cuda_net_device(const struct adapt_cuda_net *d)
{
    return d ? d->device : "";
}

extern "C" void adapt_cuda_net_free(struct adapt_cuda_net *d)
{
    if (!d) return;
    if (d->s) cudaStreamSynchronize(d->s);
    if (d->up) cudaStreamSynchronize(d->up);
    if (d->L) {
        for (int i = 0; i < d->net->nnodes; i++) {
            struct dlayer *dl = &d->L[i];
            (void)dl;
#if ADAPT_HAVE_CUDNN
            if (dl->kind == K_CONV) {
                if (dl->xd) cudnnDestroyTensorDescriptor(dl->xd);
                if (dl->yd) cudnnDestroyTensorDescriptor(dl->yd);
                if (dl->wd) cudnnDestroyFilterDescriptor(dl->wd);
                if (dl->cd) cudnnDestroyConvolutionDescriptor(dl->cd);
            }
#endif
            if (dl->saved) cudaFree(dl->saved);
        }
        free(d->L);
    }
    if (d->act) {
        for (int a = 0; a < d->net->nact; a++) {
            if (a > 0 && d->act[a]) cudaFree(d->act[a]);
            if (d->dact[a]) cudaFree(d->dact[a]);
        }
    }
    for (int k = 0; k < 2; k++) {
        if (d->xin[k]) cudaFree(d->xin[k]);
        if (d->yin[k]) cudaFree(d->yin[k]);
        if (d->h_x[k]) cudaFreeHost(d->h_x[k]);
        if (d->h_y[k]) cudaFreeHost(d->h_y[k]);
        if (d->ready[k]) cudaEventDestroy(d->ready[k]);
        if (d->consumed[k]) cudaEventDestroy(d->consumed[k]);
    }
    free(d->act);
    free(d->dact);
    free(d->written);
    if (d->vals) cudaFree(d->vals);
    if (d->grads) cudaFree(d->grads);
    if (d->bufs) cudaFree(d->bufs);
    if (d->quants) cudaFree(d->quants);
    if (d->ws) cudaFree(d->ws);
    if (d->dx_tmp) cudaFree(d->dx_tmp);
    if (d->d_stats) cudaFree(d->d_stats);
    if (d->h_stats) cudaFreeHost(d->h_stats);
    for (int k = 0; k < d->nallocs; k++) cudaFree(d->allocs[k]);
    free(d->allocs);
    if (d->counters) cudaFree(d->counters);
    if (d->h_counters) cudaFreeHost(d->h_counters);
    if (d->qscratch) cudaFree(d->qscratch);
    if (d->d_sums) cudaFree(d->d_sums);
    if (d->h_sums) cudaFreeHost(d->h_sums);
    if (d->d_hist) cudaFree(d->d_hist);
    if (d->h_hist) cudaFreeHost(d->h_hist);
    if (d->d_keys) cudaFree(d->d_keys);
    if (d->h_keys) cudaFreeHost(d->h_keys);
    if (d->d_amax) cudaFree(d->d_amax);
    if (d->h_amax) cudaFreeHost(d->h_amax);
    if (d->d_rsc) cudaFree(d->d_rsc);
    if (d->h_rsc) cudaFreeHost(d->h_rsc);
    if (d->d_rcnt) cudaFree(d->d_rcnt);
    if (d->h_rcnt) cudaFreeHost(d->h_rcnt);
    if (d->hws) cudaFree(d->hws);
    if (d->fws) cudaFree(d->fws);
    for (int k = 0; k < kLists; k++) list_clear(&d->lists[k]);
    free(d->pval);
    free(d->pgrad);
    free(d->pbuf);
    free(d->puse);
    if (d->blas) cublasDestroy(d->blas);
#if ADAPT_HAVE_CUDNN
    if (d->dnn) cudnnDestroy(d->dnn);
#endif
    if (d->s) cudaStreamDestroy(d->s);
    if (d->up) cudaStreamDestroy(d->up);
    free(d);
}

namespace
{

enum adapt_status create(struct adapt_net *net, int gpu, struct adapt_cuda_net *d)
{
    d->net = net;
    d->gpu = gpu;
    d->n_max = net->n_max;
    static uint64_t serial; /* engines are made one at a time (adapt_cuda_net_create) */
    d->id = __atomic_add_fetch(&serial, 1, __ATOMIC_RELAXED);
    d->loss_scale = 1.0f;
    int ndev = adapt_cuda_device_count(d->device, sizeof d->device);
    if (ndev <= 0) return ADAPT_ERROR(ADAPT_EUNSUPPORTED, "%s", d->device);
    if (gpu < 0 || gpu >= ndev)
        return ADAPT_ERROR(ADAPT_EINVAL, "run.gpu = %d, but this machine has %d CUDA device%s", gpu,
                           ndev, ndev == 1 ? "" : "s");
    CU(cudaSetDevice(gpu), "cudaSetDevice");
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, gpu) == cudaSuccess)
        snprintf(d->device, sizeof d->device, "%.200s (GPU %d, sm_%d%d)", prop.name, gpu,
                 prop.major, prop.minor);
    CU(cudaStreamCreateWithFlags(&d->s, cudaStreamNonBlocking), "stream");
    CU(cudaStreamCreateWithFlags(&d->up, cudaStreamNonBlocking), "stream");
    for (int k = 0; k < 2; k++) {
        CU(cudaEventCreateWithFlags(&d->ready[k], cudaEventDisableTiming), "event");
        CU(cudaEventCreateWithFlags(&d->consumed[k], cudaEventDisableTiming), "event");
    }
    BLAS(cublasCreate(&d->blas), "cublasCreate");
    BLAS(cublasSetStream(d->blas, d->s), "cublasSetStream");
    BLAS(cublasSetMathMode(d->blas, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
#if ADAPT_HAVE_CUDNN
    DNN(cudnnCreate(&d->dnn), "cudnnCreate");
    DNN(cudnnSetStream(d->dnn, d->s), "cudnnSetStream");
#endif
    /* parameters */
    int np = net->nparam;
    d->pval = (float **)calloc((size_t)np + 1, sizeof(float *));
    d->pgrad = (float **)calloc((size_t)np + 1, sizeof(float *));
    d->pbuf = (float **)calloc((size_t)np + 1, sizeof(float *));
    d->puse = (float **)calloc((size_t)np + 1, sizeof(float *));
    if (!d->pval || !d->pgrad || !d->pbuf || !d->puse)
        return ADAPT_ERROR(ADAPT_ENOMEM, "cannot allocate the device parameter table");
    for (int p = 0; p < np; p++) {
        d->nvals += param_numel(net->param[p]);
        if (net->param[p]->role != ADAPT_PARAM_BUFFER) d->ngrads += param_numel(net->param[p]);
    }
    CU(cudaMalloc(&d->vals, (d->nvals + 1) * sizeof(float)), "parameters");
    CU(cudaMalloc(&d->grads, (d->ngrads + 1) * sizeof(float)), "gradients");
    CU(cudaMalloc(&d->bufs, (d->ngrads + 1) * sizeof(float)), "momentum buffers");
    CU(cudaMemsetAsync(d->grads, 0, (d->ngrads + 1) * sizeof(float), d->s), "memset");
    CU(cudaMemsetAsync(d->bufs, 0, (d->ngrads + 1) * sizeof(float), d->s), "memset");
    size_t ov = 0, og = 0;
    for (int p = 0; p < np; p++) {
        d->pval[p] = d->puse[p] = d->vals + ov;
        ov += param_numel(net->param[p]);
        if (net->param[p]->role != ADAPT_PARAM_BUFFER) {
            d->pgrad[p] = d->grads + og;
            d->pbuf[p] = d->bufs + og;
            og += param_numel(net->param[p]);
        }
    }
    /* activations */
    d->act = (float **)calloc((size_t)net->nact, sizeof(float *));
    d->dact = (float **)calloc((size_t)net->nact, sizeof(float *));
    d->written = (unsigned char *)calloc((size_t)net->nact, 1);
    d->L = (struct dlayer *)calloc((size_t)net->nnodes, sizeof(struct dlayer));
    if (!d->act || !d->dact || !d->written || !d->L)
        return ADAPT_ERROR(ADAPT_ENOMEM, "cannot allocate the device network's tables");
    for (int a = 1; a < net->nact; a++) {
        size_t bytes = net->act_numel[a] * (size_t)d->n_max * sizeof(float);
        CU(cudaMalloc(&d->act[a], bytes), "activations");
        CU(cudaMalloc(&d->dact[a], bytes), "activation gradients");
    }
#if ADAPT_HAVE_CUDNN
    size_t most = 0;
    for (int a = 1; a < net->nact; a++)
        if (net->act_numel[a] > most) most = net->act_numel[a];
    CU(cudaMalloc(&d->dx_tmp, most * (size_t)d->n_max * sizeof(float)), "gradient scratch");
#endif
    size_t in_bytes = net->act_numel[0] * (size_t)d->n_max * sizeof(float);
    for (int k = 0; k < 2; k++) {
        CU(cudaMalloc(&d->xin[k], in_bytes), "input batch");
        CU(cudaMalloc(&d->yin[k], (size_t)d->n_max * sizeof(int)), "labels");
        CU(cudaHostAlloc(&d->h_x[k], in_bytes, cudaHostAllocDefault), "pinned input");
        CU(cudaHostAlloc(&d->h_y[k], (size_t)d->n_max * sizeof(int), cudaHostAllocDefault),
           "pinned labels");
    }
    d->act[0] = d->xin[0];
    CU(cudaMalloc(&d->d_stats, 2 * sizeof(double)), "loss");
    CU(cudaHostAlloc(&d->h_stats, 2 * sizeof(double), cudaHostAllocDefault), "pinned loss");
    /* layers */
    size_t ws_bytes = 0;
    for (int i = 0; i < net->nnodes; i++) {
        struct dlayer *dl = &d->L[i];
        struct adapt_layer *l = net->nodes[i].layer;
        dl->l = l;
        dl->kind = kind_of(l, &dl->act);
        if (dl->kind < 0)
            return ADAPT_ERROR(ADAPT_EUNSUPPORTED, "%s: layer kind %s has no GPU version", l->name,
                               l->ops->kind);
        for (int k = 0; k < l->nparam; k++) {
            dl->pidx[k] = -1;
            for (int p = 0; p < np; p++)
                if (net->param[p] == &l->param[k]) dl->pidx[k] = p;
            if (dl->pidx[k] < 0)
                return ADAPT_ERROR(ADAPT_EINVAL, "%s: parameter %s not bound to the network",
                                   l->name, l->param[k].name);
        }
        if (dl->kind == K_BN)
            CU(cudaMalloc(&dl->saved, 2 * (size_t)l->in_dim[0][0] * sizeof(float)),
               "batch-norm state");
#if !ADAPT_HAVE_CUDNN
        if (dl->kind == K_CONV && im2col_floats(l) * sizeof(float) > ws_bytes)
            ws_bytes = im2col_floats(l) * sizeof(float);
#endif
    }
#if ADAPT_HAVE_CUDNN
    /* the algorithm search runs convolutions: give it real buffers (activations) */
    for (int i = 0; i < net->nnodes; i++) {
        if (d->L[i].kind != K_CONV) continue;
        enum adapt_status st = conv_setup(d, &d->L[i], &ws_bytes);
        if (st != ADAPT_OK) return st;
    }
#endif
    d->ws_bytes = ws_bytes;
    if (ws_bytes) CU(cudaMalloc(&d->ws, ws_bytes), "workspace");
    return adapt_cuda_net_push_params(d);
}

} // namespace

extern "C" enum adapt_status adapt_cuda_net_create(struct adapt_net *net, int gpu,
                                                   struct adapt_cuda_net **out)
{
    *out = NULL;
    if (!net || !net->finalized)
        return ADAPT_ERROR(ADAPT_EINVAL, "adapt_cuda_net_create: the network is not finalized");
    struct adapt_cuda_net *d = (struct adapt_cuda_net *)calloc(1, sizeof *d);
    if (!d) return ADAPT_ERROR(ADAPT_ENOMEM, "cannot allocate a device network");
    enum adapt_status st = create(net, gpu, d);
    if (st != ADAPT_OK) {
        adapt_cuda_net_free(d);
        return st;
    }
    *out = d;
    return ADAPT_OK;
}

extern "C" enum adapt_status adapt_cuda_net_push_params(struct adapt_cuda_net *d)
{
    for (int p = 0; p < d->net->nparam; p++)
        CU(cudaMemcpyAsync(d->pval[p], d->net->param[p]->value.data,
                           param_numel(d->net->param[p]) * sizeof(float), cudaMemcpyHostToDevice,
                           d->s),
           "parameters to the device");
    CU(cudaStreamSynchronize(d->s), "parameters to the device");
    return ADAPT_OK;
}

extern "C" enum adapt_status adapt_cuda_net_pull_params(struct adapt_cuda_net *d)
{
    for (int p = 0; p < d->net->nparam; p++)
        CU(cudaMemcpyAsync(d->net->param[p]->value.data, d->pval[p],
                           param_numel(d->net->param[p]) * sizeof(float), cudaMemcpyDeviceToHost,
                           d->s),
           "parameters from the device");
    CU(cudaStreamSynchronize(d->s), "parameters from the device");
    return ADAPT_OK;
}

extern "C" enum adapt_status adapt_cuda_net_pull_grads(struct adapt_cuda_net *d)
{
    for (int p = 0; p < d->net->nparam; p++)
        if (d->pgrad[p] && d->net->param[p]->grad.data)
            CU(cudaMemcpyAsync(d->net->param[p]->grad.data, d->pgrad[p],
                               param_numel(d->net->param[p]) * sizeof(float),
                               cudaMemcpyDeviceToHost, d->s),
               "gradients from the device");
    CU(cudaStreamSynchronize(d->s), "gradients from the device");
    return ADAPT_OK;
}

extern "C" enum adapt_status adapt_cuda_net_upload(struct adapt_cuda_net *d, const float *x,
                                                   const int *labels, int n)
{
    if (n < 1 || n > d->n_max)
        return ADAPT_ERROR(ADAPT_EINVAL, "batch of %d samples; the device network holds 1..%d", n,
                           d->n_max);
    int k = d->slot ^ 1;
    /* the step that last read this slot must be done with it before it is overwritten */
    CU(cudaEventSynchronize(d->consumed[k]), "waiting for a staging buffer");
    size_t in = d->net->act_numel[0] * (size_t)n;
    memcpy(d->h_x[k], x, in * sizeof(float));
    if (labels) memcpy(d->h_y[k], labels, (size_t)n * sizeof(int));
    CU(cudaMemcpyAsync(d->xin[k], d->h_x[k], in * sizeof(float), cudaMemcpyHostToDevice, d->up),
       "batch upload");
    if (labels)
        CU(cudaMemcpyAsync(d->yin[k], d->h_y[k], (size_t)n * sizeof(int), cudaMemcpyHostToDevice,
                           d->up),
           "label upload");
    CU(cudaEventRecord(d->ready[k], d->up), "event");
    d->slot = k;
    d->n = n;
    d->has_labels = labels != NULL;
    return ADAPT_OK;
}

extern "C" enum adapt_status adapt_cuda_net_step(struct adapt_cuda_net *d, int training,
                                                 int backward)
{
    struct adapt_net *net = d->net;
    int n = d->n, k = d->slot;
    if (n < 1) return ADAPT_ERROR(ADAPT_EINVAL, "adapt_cuda_net_step: no batch uploaded");
    CU(cudaStreamWaitEvent(d->s, d->ready[k], 0), "waiting for the batch");
    d->act[0] = d->xin[k];
    for (int i = 0; i < net->nnodes; i++) {
        enum adapt_status st = node_forward(d, i, n, training);
        if (st != ADAPT_OK) return st;
    }
    int last = net->nact - 1;
    d->step_stats = d->has_labels; /* what adapt_cuda_net_result reads of this step */
    if (d->has_labels) {
        acu_softmax_xent(d->act[last], d->yin[k], n, net->classes, backward ? d->dact[last] : NULL,
                         d->d_stats, d->s);
        if (backward && d->loss_scale != 1.0f) /* as the trainer scales the CPU's */
            acu_scale_acc(d->dact[last], NULL, (size_t)n * (size_t)net->classes, d->loss_scale,
                          d->s);
        CU(cudaMemcpyAsync(d->h_stats, d->d_stats, 2 * sizeof(double), cudaMemcpyDeviceToHost,
                           d->s),
           "loss to the host");
    } else if (backward) {
        return ADAPT_ERROR(ADAPT_EINVAL, "adapt_cuda_net_step: backward needs labels");
    }
    if (backward) {
        memset(d->written, 0, (size_t)net->nact);
        d->written[last] = 1;
        for (int i = net->nnodes - 1; i >= 0; i--) {
            enum adapt_status st = node_backward(d, i, n);
            if (st != ADAPT_OK) return st;
        }
    }
    CU(cudaEventRecord(d->consumed[k], d->s), "event");
    CU(cudaGetLastError(), "kernel launch");
    return ADAPT_OK;
}

extern "C" enum adapt_status adapt_cuda_net_result(struct adapt_cuda_net *d, double *loss_sum,
                                                   int *correct)
{
    CU(cudaStreamSynchronize(d->s), "step");
    /* a step without labels computed no loss: NaN and 0, never an earlier step's */
    if (loss_sum) *loss_sum = d->step_stats ? d->h_stats[0] : NAN;
    if (correct) *correct = d->step_stats ? (int)d->h_stats[1] : 0;
    return ADAPT_OK;
}

extern "C" enum adapt_status adapt_cuda_net_sgd(struct adapt_cuda_net *d, double lr,
                                                double momentum, double l2, int nesterov,
                                                double grad_scale)
{
    struct adapt_net *net = d->net;
    for (int p = 0; p < net->nparam; p++) {
        if (!d->pgrad[p]) continue;
        acu_sgd_update(d->pval[p], d->pgrad[p], d->pbuf[p], d->pval[p], d->pval[p],
                       param_numel(net->param[p]), (float)lr, (float)momentum, (float)l2, 0.0f,
                       (float)grad_scale, nesterov, d->steps == 0, d->s);
    }
    d->steps++;
    CU(cudaGetLastError(), "sgd launch");
    return ADAPT_OK;
}

