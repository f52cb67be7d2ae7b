/* src/base/version.c: --version. The commit and the compiler options come from
 * src/base/buildinfo.h, which make writes (src/base/local.mk). */
#include <config.h>

#include "src/base/buildinfo.h"
#include "src/base/hd.h"
#include "src/base/version.h"

#if defined(__SANITIZE_ADDRESS__)
#define ADAPT_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ADAPT_ASAN 1
#endif
#endif

/* The x86-64 micro-architecture level this CPU supports (the clone the loader picks). */
static const char *cpu_level(void)
{
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
        return "x86-64-v4";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
        __builtin_cpu_supports("bmi2"))
        return "x86-64-v3";
    return "baseline x86-64";
#else
    return "not x86";
#endif
}

void adapt_version_print(FILE *f, const char *prog)
{
    fprintf(f, "%s (%s) %s\n", prog, PACKAGE_NAME, PACKAGE_VERSION);
    fprintf(f, "commit:     %s\n", ADAPT_BUILD_COMMIT);
#if defined(__VERSION__)
    fprintf(f, "compiler:   %s (%s)\n", ADAPT_BUILD_CC, __VERSION__);
#else
    fprintf(f, "compiler:   %s\n", ADAPT_BUILD_CC);
#endif
    fprintf(f, "options:    %s\n", ADAPT_BUILD_CFLAGS);
#if defined(_OPENMP)
    fprintf(f, "OpenMP:     yes (version %d)\n", _OPENMP);
#else
    fprintf(f, "OpenMP:     no (one thread)\n");
#endif
#if defined(ADAPT_HAVE_CUDA)
    fprintf(f, "CUDA:       yes (%s)\n", ADAPT_BUILD_NVCC);
#else
    fprintf(f, "CUDA:       no (configured without CUDA)\n");
#endif
#if defined(ADAPT_HAVE_CUDNN)
    fprintf(f, "cuDNN:      yes (%s)\n", ADAPT_CUDNN_DIR);
#elif defined(ADAPT_HAVE_CUDA)
    fprintf(f, "cuDNN:      no (GPU convolutions by im2col and cuBLAS)\n");
#endif
#if defined(ADAPT_NATIVE)
    fprintf(f, "ISA:        -march=native of the build machine; this CPU: %s\n", cpu_level());
#elif defined(ADAPT_HAVE_HOT_CLONES)
    fprintf(f, "ISA:        hot loops built for x86-64-v4, x86-64-v3 and baseline, picked at "
               "load time; this CPU: %s\n",
            cpu_level());
#else
    fprintf(f, "ISA:        compiler default (no per-level clones); this CPU: %s\n", cpu_level());
#endif
#if defined(ADAPT_ASAN)
    fprintf(f, "sanitizers: address, undefined\n");
#endif
}
