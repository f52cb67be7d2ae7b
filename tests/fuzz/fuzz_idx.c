/* tests/fuzz/fuzz_idx.c: libFuzzer harness for the IDX readers (plain and
 * gzip; zlib tells them apart), as images and as labels. */
#include "src/data/data.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *p = fuzz_file(data, size, "x-idx3-ubyte");
    int n, rows, cols;
    uint8_t *px = NULL, *lab = NULL;
    if (adapt_idx_images_read(p, &n, &rows, &cols, &px) == ADAPT_OK) {
        /* every pixel is there: touch the last one */
        volatile uint8_t last = px[(size_t)n * rows * cols - 1];
        (void)last;
        free(px);
    }
    if (adapt_idx_labels_read(p, &n, &lab) == ADAPT_OK) {
        volatile uint8_t last = lab[n - 1];
        (void)last;
        free(lab);
    }
    return 0;
}
