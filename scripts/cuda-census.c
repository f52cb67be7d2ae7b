/* scripts/cuda-census.c: a stand-in for the CUDA runtime, cuBLAS and cuDNN that runs no kernel
 * and counts every call, so that what a GPU training step asks of the device can be counted on a
 * machine without one (scripts/cuda-census.sh builds it and loads it with LD_PRELOAD ahead of
 * the real libraries). Device memory is host memory; copies and memsets are done, kernels and
 * library computations are not, so the numbers a program prints under it mean nothing: only the
 * counts do. At exit it writes to $CENSUS_OUT (default stderr) the launches of kernels whose
 * name contains $CENSUS_STEP (scripts/cuda-census.sh: the softmax cross-entropy's, one per
 * training step), the count of each kind of call, and each kernel's launches under its mangled
 * name. A call it does not define reaches the real library, which reports no
 * device: the run then fails visibly. */
#define _GNU_SOURCE
#include <cuda_runtime_api.h>
#include <cublas_v2.h>
#include <cudnn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>

/* the stand-ins take the real signatures and use few of their parameters */
#pragma GCC diagnostic ignored "-Wunused-parameter"

#define MAXK 512
static struct {
    const void *fun;
    const char *name;
    unsigned long long n;
} kern[MAXK];
static int nkern;
static unsigned long long c_memset, c_memcpy_d2h, c_memcpy_h2d, c_memcpy_d2d, c_sync, c_evsync,
    c_evrec, c_wait, c_malloc, c_free, c_sgemm, c_gemmex, c_cudnn_fwd, c_cudnn_bd, c_cudnn_bf,
    c_launch;
static const char *mark_name;
static unsigned long long marks;

/* "steps N", one "name count" line per counter, then "kernel NAME count" per kernel launched. */
static void report(void)
{
    const char *path = getenv("CENSUS_OUT");
    FILE *f = path ? fopen(path, "w") : NULL;
    if (!f) f = stderr;
    const struct {
        const char *name;
        unsigned long long n;
    } c[] = {{"kernels", c_launch},
             {"memsets", c_memset},
             {"copies_to_host", c_memcpy_d2h},
             {"copies_to_device", c_memcpy_h2d},
             {"copies_on_device", c_memcpy_d2d},
             {"stream_waits", c_sync},
             {"event_waits", c_evsync},
             {"event_records", c_evrec},
             {"stream_event_waits", c_wait},
             {"sgemm", c_sgemm},
             {"gemmex", c_gemmex},
             {"cudnn_forward", c_cudnn_fwd},
             {"cudnn_backward_data", c_cudnn_bd},
             {"cudnn_backward_filter", c_cudnn_bf},
             {"mallocs", c_malloc},
             {"frees", c_free}};
    fprintf(f, "steps %llu\n", marks);
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) fprintf(f, "%s %llu\n", c[i].name, c[i].n);
    for (int i = 0; i < nkern; i++)
        if (kern[i].n) fprintf(f, "kernel %s %llu\n", kern[i].name, kern[i].n);
    if (f != stderr) fclose(f);
}

static void init(void) __attribute__((constructor));
static void init(void)
{
    mark_name = getenv("CENSUS_STEP");
    atexit(report);
}

/* ---- registration and launch */
void **__cudaRegisterFatBinary(void *fatCubin)
{
    static void *h;
    return &h;
}
void __cudaRegisterFatBinaryEnd(void **h) {}
void __cudaUnregisterFatBinary(void **h) {}
void __cudaRegisterFunction(void **h, const char *hostFun, char *deviceFun, const char *deviceName,
                            int tl, uint3 *tid, uint3 *bid, dim3 *bDim, dim3 *gDim, int *wSize)
{
    if (nkern < MAXK) {
        kern[nkern].fun = hostFun;
        kern[nkern].name = deviceName;
        nkern++;
    }
}
void __cudaRegisterVar(void **h, char *hostVar, char *deviceAddress, const char *deviceName,
                       int ext, size_t size, int constant, int global)
{
}
static dim3 cfg_g, cfg_b;
static size_t cfg_sh;
static void *cfg_s;
unsigned __cudaPushCallConfiguration(dim3 g, dim3 b, size_t sh, void *s)
{
    cfg_g = g;
    cfg_b = b;
    cfg_sh = sh;
    cfg_s = s;
    return 0;
}
cudaError_t __cudaPopCallConfiguration(dim3 *g, dim3 *b, size_t *sh, void *s)
{
    *g = cfg_g;
    *b = cfg_b;
    *sh = cfg_sh;
    *(void **)s = cfg_s;
    return cudaSuccess;
}
cudaError_t __cudaGetKernel(cudaKernel_t *k, const void *fun)
{
    *k = (cudaKernel_t)fun;
    return cudaSuccess;
}
cudaError_t __cudaLaunchKernel(cudaKernel_t k, dim3 g, dim3 b, void **args, size_t sh,
                               cudaStream_t s)
{
    if (g.x == 0 || g.y == 0 || g.z == 0 || b.x == 0 || b.x * b.y * b.z > 1024) {
        fprintf(stderr,
                "cuda-census: a launch with an empty grid or more than 1024 threads a block\n");
        abort();
    }
    /* a real device refuses gridDim.y or gridDim.z above 65535 (cudaErrorInvalidConfiguration) */
    if (g.y > 65535 || g.z > 65535) {
        fprintf(stderr,
                "cuda-census: a launch with gridDim (%u, %u, %u): y and z may not exceed 65535\n",
                g.x, g.y, g.z);
        abort();
    }
    c_launch++;
    for (int i = 0; i < nkern; i++)
        if (kern[i].fun == (const void *)k) {
            kern[i].n++;
            if (mark_name && strstr(kern[i].name, mark_name)) marks++;
            break;
        }
    return cudaSuccess;
}

/* ---- runtime */
cudaError_t cudaGetDeviceCount(int *n)
{
    *n = 1;
    return cudaSuccess;
}
cudaError_t cudaSetDevice(int d)
{
    return cudaSuccess;
}
cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int d)
{
    memset(p, 0, sizeof *p);
    strcpy(p->name, "cuda-census (no kernel runs)");
    p->major = 9;
    p->minor = 0;
    p->totalGlobalMem = 80ull << 30;
    p->multiProcessorCount = 132;
    p->maxThreadsPerBlock = 1024;
    p->warpSize = 32;
    return cudaSuccess;
}
cudaError_t cudaDeviceGetAttribute(int *v, enum cudaDeviceAttr a, int d)
{
    *v = 1;
    return cudaSuccess;
}
cudaError_t cudaDriverGetVersion(int *v)
{
    *v = 13000;
    return cudaSuccess;
}
cudaError_t cudaRuntimeGetVersion(int *v)
{
    *v = 13000;
    return cudaSuccess;
}
cudaError_t cudaDeviceSynchronize(void)
{
    c_sync++;
    return cudaSuccess;
}
cudaError_t cudaGetLastError(void)
{
    return cudaSuccess;
}
const char *cudaGetErrorString(cudaError_t e)
{
    return "cuda-census error";
}
/* Device memory starts as 0xFF bytes, not zeros (the real cudaMalloc does not clear it): a float
 * read before anything wrote it is a NaN, which shows in what the program prints. */
cudaError_t cudaMalloc(void **p, size_t n)
{
    c_malloc++;
    *p = malloc(n ? n : 1);
    if (*p) memset(*p, 0xff, n ? n : 1);
    return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}
cudaError_t cudaFree(void *p)
{
    c_free++;
    free(p);
    return cudaSuccess;
}
cudaError_t cudaHostAlloc(void **p, size_t n, unsigned f)
{
    *p = calloc(1, n ? n : 1);
    return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}
cudaError_t cudaFreeHost(void *p)
{
    free(p);
    return cudaSuccess;
}
static void count_copy(enum cudaMemcpyKind k)
{
    if (k == cudaMemcpyDeviceToHost)
        c_memcpy_d2h++;
    else if (k == cudaMemcpyHostToDevice)
        c_memcpy_h2d++;
    else
        c_memcpy_d2d++;
}
cudaError_t cudaMemcpy(void *d, const void *s, size_t n, enum cudaMemcpyKind k)
{
    count_copy(k);
    memmove(d, s, n);
    return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t n, enum cudaMemcpyKind k,
                            cudaStream_t st)
{
    count_copy(k);
    memmove(d, s, n);
    return cudaSuccess;
}
cudaError_t cudaMemset(void *d, int v, size_t n)
{
    c_memset++;
    memset(d, v, n);
    return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void *d, int v, size_t n, cudaStream_t s)
{
    c_memset++;
    memset(d, v, n);
    return cudaSuccess;
}
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned f)
{
    static int x[16];
    static int i;
    *s = (cudaStream_t)&x[i++ % 16];
    return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t s)
{
    return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
    c_sync++;
    return cudaSuccess;
}
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned f)
{
    c_wait++;
    return cudaSuccess;
}
cudaError_t cudaEventCreate(cudaEvent_t *e)
{
    static int x[64];
    static int i;
    *e = (cudaEvent_t)&x[i++ % 64];
    return cudaSuccess;
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned f)
{
    return cudaEventCreate(e);
}
cudaError_t cudaEventDestroy(cudaEvent_t e)
{
    return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s)
{
    c_evrec++;
    return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t e)
{
    c_evsync++;
    return cudaSuccess;
}
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b)
{
    *ms = 1.0f;
    return cudaSuccess;
}

/* ---- cuBLAS */
cublasStatus_t cublasCreate_v2(cublasHandle_t *h)
{
    static int x;
    *h = (cublasHandle_t)&x;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasDestroy_v2(cublasHandle_t h)
{
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetStream_v2(cublasHandle_t h, cudaStream_t s)
{
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t m)
{
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSgemm_v2(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                              int n, int k, const float *al, const float *A, int lda,
                              const float *B, int ldb, const float *be, float *C, int ldc)
{
    c_sgemm++;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                            int n, int k, const void *al, const void *A, cudaDataType Atype,
                            int lda, const void *B, cudaDataType Btype, int ldb, const void *be,
                            void *C, cudaDataType Ctype, int ldc, cublasComputeType_t ct,
                            cublasGemmAlgo_t algo)
{
    c_gemmex++;
    return CUBLAS_STATUS_SUCCESS;
}

/* ---- cuDNN */

/* cudnnFind*'s answer: one float32 (FMA) algorithm that ran */
#define ONE_ALGO(r, ret)                                                                           \
    (memset(r, 0, sizeof *(r)), (r)->status = CUDNN_STATUS_SUCCESS,                                \
     (r)->mathType = CUDNN_FMA_MATH, (r)->time = 1.0f, *(ret) = 1, CUDNN_STATUS_SUCCESS)
static int dummy[4096];
static int ndummy;
#define NEWH(T, p) (*(p) = (T)&dummy[ndummy++ % 4096], CUDNN_STATUS_SUCCESS)
cudnnStatus_t cudnnCreate(cudnnHandle_t *h)
{
    return NEWH(cudnnHandle_t, h);
}
cudnnStatus_t cudnnDestroy(cudnnHandle_t h)
{
    return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnSetStream(cudnnHandle_t h, cudaStream_t s)
{
    return CUDNN_STATUS_SUCCESS;
}
const char *cudnnGetErrorString(cudnnStatus_t s)
{
    return "cuda-census cuDNN error";
}
cudnnStatus_t cudnnCreateTensorDescriptor(cudnnTensorDescriptor_t *d)
{
    return NEWH(cudnnTensorDescriptor_t, d);
}
cudnnStatus_t cudnnCreateFilterDescriptor(cudnnFilterDescriptor_t *d)
{
    return NEWH(cudnnFilterDescriptor_t, d);
}
cudnnStatus_t cudnnCreateConvolutionDescriptor(cudnnConvolutionDescriptor_t *d)
{
    return NEWH(cudnnConvolutionDescriptor_t, d);
}
cudnnStatus_t cudnnDestroyTensorDescriptor(cudnnTensorDescriptor_t d)
{
    return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnDestroyFilterDescriptor(cudnnFilterDescriptor_t d)
{
    return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnDestroyConvolutionDescriptor(cudnnConvolutionDescriptor_t d)
{
    return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnSetTensor4dDescriptor(cudnnTensorDescriptor_t d, cudnnTensorFormat_t f,
                                         cudnnDataType_t t, int n, int c, int h, int w)
{
    return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnSetFilter4dDescriptor(cudnnFilterDescriptor_t d, cudnnDataType_t t,
                                         cudnnTensorFormat_t f, int k, int c, int h, int w)
{
    return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnSetConvolution2dDescriptor(cudnnConvolutionDescriptor_t d, int ph, int pw, int u,
                                              int v, int dh, int dw, cudnnConvolutionMode_t m,
                                              cudnnDataType_t t)
{
    return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnSetConvolutionGroupCount(cudnnConvolutionDescriptor_t d, int g)
{
    return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t d, cudnnMathType_t m)
{
    return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnFindConvolutionForwardAlgorithm(cudnnHandle_t h, const cudnnTensorDescriptor_t x,
                                                   const cudnnFilterDescriptor_t w,
                                                   const cudnnConvolutionDescriptor_t c,
                                                   const cudnnTensorDescriptor_t y, const int req,
                                                   int *ret, cudnnConvolutionFwdAlgoPerf_t *r)
{
    return ONE_ALGO(r, ret);
}
cudnnStatus_t cudnnFindConvolutionBackwardDataAlgorithm(
    cudnnHandle_t h, const cudnnFilterDescriptor_t w, const cudnnTensorDescriptor_t dy,
    const cudnnConvolutionDescriptor_t c, const cudnnTensorDescriptor_t dx, const int req, int *ret,
    cudnnConvolutionBwdDataAlgoPerf_t *r)
{
    return ONE_ALGO(r, ret);
}
cudnnStatus_t cudnnFindConvolutionBackwardFilterAlgorithm(
    cudnnHandle_t h, const cudnnTensorDescriptor_t x, const cudnnTensorDescriptor_t dy,
    const cudnnConvolutionDescriptor_t c, const cudnnFilterDescriptor_t dw, const int req, int *ret,
    cudnnConvolutionBwdFilterAlgoPerf_t *r)
{
    return ONE_ALGO(r, ret);
}
cudnnStatus_t cudnnConvolutionForward(cudnnHandle_t h, const void *al,
                                      const cudnnTensorDescriptor_t xd, const void *x,
                                      const cudnnFilterDescriptor_t wd, const void *w,
                                      const cudnnConvolutionDescriptor_t cd,
                                      cudnnConvolutionFwdAlgo_t a, void *ws, size_t wsb,
                                      const void *be, const cudnnTensorDescriptor_t yd, void *y)
{
    c_cudnn_fwd++;
    return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnConvolutionBackwardData(cudnnHandle_t h, const void *al,
                                           const cudnnFilterDescriptor_t wd, const void *w,
                                           const cudnnTensorDescriptor_t dyd, const void *dy,
                                           const cudnnConvolutionDescriptor_t cd,
                                           cudnnConvolutionBwdDataAlgo_t a, void *ws, size_t wsb,
                                           const void *be, const cudnnTensorDescriptor_t dxd,
                                           void *dx)
{
    c_cudnn_bd++;
    return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnConvolutionBackwardFilter(cudnnHandle_t h, const void *al,
                                             const cudnnTensorDescriptor_t xd, const void *x,
                                             const cudnnTensorDescriptor_t dyd, const void *dy,
                                             const cudnnConvolutionDescriptor_t cd,
                                             cudnnConvolutionBwdFilterAlgo_t a, void *ws,
                                             size_t wsb, const void *be,
                                             const cudnnFilterDescriptor_t dwd, void *dw)
{
    c_cudnn_bf++;
    return CUDNN_STATUS_SUCCESS;
}
