/* tests/testutil_cuda.h: the start of a CUDA test program. Header-only, so that
 * tests/libtestutil.a keeps needing src/base alone; the programs that include it link src/cuda.
 *
 *   char desc[256];
 *   if (!tu_cuda_device("test_net_cuda", adapt_cuda_net_built(), desc, sizeof desc)) return 77;
 */
#ifndef ADAPT_TESTS_TESTUTIL_CUDA_H
#define ADAPT_TESTS_TESTUTIL_CUDA_H

#include <stdio.h>

#include "src/cuda/device.h"

/* 1 when the build has the CUDA part under test (built != 0) and the machine a GPU, whose
 * description goes into desc and is printed after prog's name; otherwise prints why prog skips
 * and returns 0 (the program then exits 77, Automake's skip). */
static inline int tu_cuda_device(const char *prog, int built, char *desc, size_t size)
{
    desc[0] = '\0';
    if (!built || adapt_cuda_device_count(desc, size) == 0) {
        printf("%s: skipped: %s\n", prog, built ? desc : "built without CUDA");
        return 0;
    }
    printf("%s: %s\n", prog, desc);
    return 1;
}

#endif
