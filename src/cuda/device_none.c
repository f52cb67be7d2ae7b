/* src/cuda/device_none.c: device query for builds without CUDA. */
#include <stdio.h>

#include "src/cuda/device.h"

int adapt_cuda_built(void) { return 0; }

int adapt_cuda_device_count(char *desc, size_t len)
{
    if (desc && len) snprintf(desc, len, "built without CUDA (configure --with-cuda)");
    return 0;
}
