/* src/net/net_cuda_none.c: the GPU engine's entry points in builds without CUDA. Creating a
 * device network reports that this build has no CUDA; nothing else can be reached. */
#include "src/net/net_cuda.h"

int adapt_cuda_net_built(void)
{
    return 0;
}

enum adapt_status adapt_cuda_net_create(struct adapt_net *net, int gpu, struct adapt_cuda_net **out)
{
    (void)net;
    (void)gpu;
    *out = NULL;
    return ADAPT_ERROR(ADAPT_EUNSUPPORTED,
                       "this build has no CUDA (configure found no CUDA toolkit, or "
                       "--without-cuda): run.device = cuda is not available");
}

void adapt_cuda_net_free(struct adapt_cuda_net *d)
{
    (void)d;
}

#define NO_CUDA return ADAPT_ERROR(ADAPT_EUNSUPPORTED, "this build has no CUDA")

enum adapt_status adapt_cuda_net_push_params(struct adapt_cuda_net *d)
{
    (void)d;
    NO_CUDA;
}
enum adapt_status adapt_cuda_net_pull_params(struct adapt_cuda_net *d)
{
    (void)d;
    NO_CUDA;
}
enum adapt_status adapt_cuda_net_pull_grads(struct adapt_cuda_net *d)
{
    (void)d;
    NO_CUDA;
}

enum adapt_status adapt_cuda_net_push_sgd(struct adapt_cuda_net *d, const struct adapt_sgd *o)
{
    (void)d, (void)o;
    NO_CUDA;
}

enum adapt_status adapt_cuda_net_pull_sgd(struct adapt_cuda_net *d, struct adapt_sgd *o)
{
    (void)d, (void)o;
    NO_CUDA;
}

enum adapt_status adapt_cuda_net_upload(struct adapt_cuda_net *d, const float *x, const int *labels,
                                        int n)
{
    (void)d, (void)x, (void)labels, (void)n;
    NO_CUDA;
}

enum adapt_status adapt_cuda_net_step(struct adapt_cuda_net *d, int training, int backward)
{
    (void)d, (void)training, (void)backward;
    NO_CUDA;
}

enum adapt_status adapt_cuda_net_result(struct adapt_cuda_net *d, double *loss_sum, int *correct)
{
    (void)d, (void)loss_sum, (void)correct;
    NO_CUDA;
}

enum adapt_status adapt_cuda_net_sgd(struct adapt_cuda_net *d, double lr, double momentum,
                                     double l2, int nesterov, double grad_scale)
{
    (void)d, (void)lr, (void)momentum, (void)l2, (void)nesterov, (void)grad_scale;
    NO_CUDA;
}

enum adapt_status adapt_cuda_net_quantize(struct adapt_cuda_net *d, int p,
                                          const struct quant_spec *spec, struct quant_key key)
{
    (void)d, (void)p, (void)spec, (void)key;
    NO_CUDA;
}

enum adapt_status adapt_cuda_net_read(struct adapt_cuda_net *d, int which, int a, int n,
                                      float *host)
{
    (void)d, (void)which, (void)a, (void)n, (void)host;
    NO_CUDA;
}

const char *adapt_cuda_net_device(const struct adapt_cuda_net *d)
{
    (void)d;
    return "";
}
