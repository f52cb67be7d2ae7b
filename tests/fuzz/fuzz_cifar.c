/* tests/fuzz/fuzz_cifar.c: libFuzzer harness for the CIFAR readers: the input
 * as a CIFAR-10 / CIFAR-100 .tar.gz archive and as a folder's test batch. */
#include <sys/stat.h>

#include "src/data/data.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct adapt_dataset ds;
    const char *p = fuzz_file(data, size, "cifar-10-binary.tar.gz");
    if (adapt_dataset_load(&ds, "cifar10", p, ADAPT_DATA_TEST) == ADAPT_OK)
        adapt_dataset_free(&ds);
    p = fuzz_file(data, size, "cifar-100-binary.tar.gz");
    if (adapt_dataset_load(&ds, "cifar100", p, ADAPT_DATA_TEST) == ADAPT_OK)
        adapt_dataset_free(&ds);
    /* a folder holding the batch file itself */
    static char dir[256];
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "%s/c10", fuzz_dir);
        mkdir(dir, 0755);
        snprintf(dir + strlen(dir), sizeof dir - strlen(dir), "/cifar-10-batches-bin");
        mkdir(dir, 0755);
    }
    fuzz_file(data, size, "c10/cifar-10-batches-bin/test_batch.bin");
    char folder[256];
    snprintf(folder, sizeof folder, "%s/c10", fuzz_dir);
    if (adapt_dataset_load(&ds, "cifar10", folder, ADAPT_DATA_TEST) == ADAPT_OK)
        adapt_dataset_free(&ds);
    return 0;
}
