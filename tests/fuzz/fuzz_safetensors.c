/* tests/fuzz/fuzz_safetensors.c: libFuzzer harness for the safetensors
 * reader: load, look every tensor and metadata key up, copy the tensors out. */
#include "src/base/safetensors.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct adapt_safetensors *f = NULL;
    const char *p = fuzz_file(data, size, "x.safetensors");
    if (adapt_safetensors_load(&f, p) != ADAPT_OK) return 0;
    for (int i = 0; i < f->n_meta; i++)
        if (adapt_safetensors_meta_get(f, f->meta[i].key) == NULL) abort();
    for (int i = 0; i < f->n_tensors; i++) {
        const struct adapt_safetensors_tensor *t = &f->tensors[i];
        if (adapt_safetensors_find(f, t->name) == NULL) abort();
        int64_t numel = 1;
        for (int d = 0; d < t->ndim; d++) numel *= t->shape[d];
        if (numel > (1 << 20)) continue;
        void *buf = malloc((size_t)numel * 8 + 8);
        if (!buf) abort();
        adapt_safetensors_copy(f, t->name, t->dtype, t->ndim, t->shape, buf);
        if (t->dtype != ADAPT_ST_F32)
            adapt_safetensors_copy(f, t->name, ADAPT_ST_F32, t->ndim, t->shape, buf);
        free(buf);
    }
    adapt_safetensors_free(f);
    return 0;
}
