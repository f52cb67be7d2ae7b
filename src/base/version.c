/* src/base/version.c: --version. The commit and the compiler options come from
 * src/base/buildinfo.h, which make writes (src/base/local.mk). */
#include <config.h>

#include <string.h>
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#include <cpuid.h>
#endif

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

const char *adapt_version_cpu_level(void)
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

const char *adapt_version_commit(void)
{
    return ADAPT_BUILD_COMMIT;
}

const char *adapt_version_compiler(void)
{
#if defined(__VERSION__)
    return ADAPT_BUILD_CC " " __VERSION__;
#else
    return ADAPT_BUILD_CC;
#endif
}

const char *adapt_version_line(char *dst, size_t n, const char *src)
{
    size_t k = 0;
    int space = 0;
    if (!dst || n == 0) return dst;
    for (const char *p = src ? src : ""; *p && k + 1 < n; p++) {
        if ((unsigned char)*p <= 0x20 || (unsigned char)*p >= 0x7f) {
            space = k > 0;
            continue;
        }
        if (space && k + 2 < n) dst[k++] = ' ';
        space = 0;
        dst[k++] = *p;
    }
    dst[k] = '\0';
    return dst;
}

const char *adapt_version_cpu_name(char *buf, size_t n)
{
    char raw[256] = "";
    if (!buf || n == 0) return buf;
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
    unsigned r[12], top = __get_cpuid_max(0x80000000u, NULL);
    if (top >= 0x80000004u) {
        for (unsigned i = 0; i < 3; i++)
            __get_cpuid(0x80000002u + i, &r[4 * i], &r[4 * i + 1], &r[4 * i + 2], &r[4 * i + 3]);
        memcpy(raw, r, sizeof r);
        raw[sizeof r] = '\0';
    }
#endif
    if (!raw[0]) { /* other architectures: what the kernel says */
        FILE *f = fopen("/proc/cpuinfo", "r");
        char line[512];
        while (f && fgets(line, sizeof line, f)) {
            char *c = strchr(line, ':');
            if (c && (!strncmp(line, "model name", 10) || !strncmp(line, "Model", 5) ||
                      !strncmp(line, "cpu model", 9))) {
                snprintf(raw, sizeof raw, "%s", c + 1);
                break;
            }
        }
        if (f) fclose(f);
    }
    adapt_version_line(buf, n, raw);
    if (!buf[0]) snprintf(buf, n, "unknown");
    return buf;
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
    fprintf(f, "ISA:        -march=native of the build machine; this CPU: %s\n",
            adapt_version_cpu_level());
#elif defined(ADAPT_HAVE_HOT_CLONES)
    fprintf(f,
            "ISA:        hot loops built for x86-64-v4, x86-64-v3 and baseline, picked at "
            "load time; this CPU: %s\n",
            adapt_version_cpu_level());
#else
    fprintf(f, "ISA:        compiler default (no per-level clones); this CPU: %s\n",
            adapt_version_cpu_level());
#endif
    char cpu[128];
    fprintf(f, "CPU:        %s\n", adapt_version_cpu_name(cpu, sizeof cpu));
#if defined(ADAPT_ASAN)
    fprintf(f, "sanitizers: address, undefined\n");
#endif
}
