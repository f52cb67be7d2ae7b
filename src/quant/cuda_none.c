/* src/quant/cuda_none.c: the CUDA entry points of src/quant/quant.h in builds without CUDA. */
#include "src/quant/quant.h"

int quant_cuda_built(void) { return 0; }

enum adapt_status quant_cuda_rows(const struct quant_spec *s, const float *d_x, float *d_y,
                                  size_t rows, size_t cols, struct quant_key key, uint8_t *d_mask,
                                  struct quant_stats *stats)
{
    (void)s, (void)d_x, (void)d_y, (void)rows, (void)cols, (void)key, (void)d_mask, (void)stats;
    return ADAPT_ERROR(ADAPT_EUNSUPPORTED, "quant: built without CUDA (configure --with-cuda)");
}

enum adapt_status quant_cuda_rows_host(const struct quant_spec *s, const float *x, float *y,
                                       size_t rows, size_t cols, struct quant_key key,
                                       uint8_t *mask, struct quant_stats *stats)
{
    (void)s, (void)x, (void)y, (void)rows, (void)cols, (void)key, (void)mask, (void)stats;
    return ADAPT_ERROR(ADAPT_EUNSUPPORTED, "quant: built without CUDA (configure --with-cuda)");
}

size_t quant_cuda_scratch_bytes(const struct quant_spec *s, size_t rows, size_t cols)
{
    (void)s, (void)rows, (void)cols;
    return 0;
}

enum adapt_status quant_cuda_rows_on(const struct quant_spec *s, const float *d_x, float *d_y,
                                     size_t rows, size_t cols, struct quant_key key,
                                     uint8_t *d_mask, unsigned long long *d_counts, void *scratch,
                                     size_t scratch_bytes, void *stream)
{
    (void)s, (void)d_x, (void)d_y, (void)rows, (void)cols, (void)key, (void)d_mask;
    (void)d_counts, (void)scratch, (void)scratch_bytes, (void)stream;
    return ADAPT_ERROR(ADAPT_EUNSUPPORTED, "quant: built without CUDA (configure --with-cuda)");
}

enum adapt_status quant_cuda_list_on(const struct quant_cuda_job *jobs, int k, void *stream)
{
    (void)jobs, (void)k, (void)stream;
    return ADAPT_ERROR(ADAPT_EUNSUPPORTED, "quant: built without CUDA (configure --with-cuda)");
}

enum adapt_status quant_cuda_list_host(const struct quant_cuda_job *jobs, int k,
                                       struct quant_stats *stats)
{
    (void)jobs, (void)k, (void)stats;
    return ADAPT_ERROR(ADAPT_EUNSUPPORTED, "quant: built without CUDA (configure --with-cuda)");
}

enum adapt_status quant_cuda_range_on(const float *d_x, size_t n, uint32_t *d_keys, void *stream)
{
    (void)d_x, (void)n, (void)d_keys, (void)stream;
    return ADAPT_ERROR(ADAPT_EUNSUPPORTED, "quant: built without CUDA (configure --with-cuda)");
}

void quant_cuda_set_launch(int threads, int blocks) { (void)threads, (void)blocks; }
