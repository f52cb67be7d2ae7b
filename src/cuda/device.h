/* src/cuda/device.h: what CUDA devices this process can use.
 *
 * Compiled from device.cu when configure found the CUDA toolkit, otherwise
 * from device_none.c. A machine without a driver or GPU reports zero devices
 * and the program carries on on the CPU.
 *
 *   char desc[256];
 *   int n = adapt_cuda_device_count(desc, sizeof desc);   // 0 when none
 */
#ifndef ADAPT_CUDA_DEVICE_H
#define ADAPT_CUDA_DEVICE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* 1 when this build contains the CUDA kernels. */
int adapt_cuda_built(void);
/* Number of usable devices (0 when none or no driver); desc gets a one-line
 * description of device 0, or the reason there is none. */
int adapt_cuda_device_count(char *desc, size_t len);

#ifdef __cplusplus
}
#endif
#endif
