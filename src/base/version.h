/* src/base/version.h: what --version prints, the same for every program. */
#ifndef ADAPT_BASE_VERSION_H
#define ADAPT_BASE_VERSION_H

#include <stddef.h>
#include <stdio.h>

/* Writes "PROG (adapt-sim) VERSION", then one line each for the commit the program was built
 * from ("unknown" outside a git checkout or release tarball), the compiler and its options,
 * OpenMP, CUDA, the instruction sets of the hot loops (and which one this CPU runs), the CPU's
 * model name, and the sanitizers when built with them. */
void adapt_version_print(FILE *f, const char *prog);

/* What a trace header records about the program and the machine that ran it (its "build"
 * object, doc/running.md "What a run records about its machine"): the commit the program was
 * built from, "unknown" when neither git nor a release tarball said; the compiler with its
 * version; the x86-64 level this CPU supports ("x86-64-v4", "x86-64-v3", "baseline x86-64",
 * "not x86"); and the CPU's model name (the CPUID brand string on x86, else /proc/cpuinfo's
 * "model name", else "unknown"), written into buf (n bytes) by adapt_version_line. Static
 * strings, except the CPU name. */
const char *adapt_version_commit(void);
const char *adapt_version_compiler(void);
const char *adapt_version_cpu_level(void);
const char *adapt_version_cpu_name(char *buf, size_t n);
/* dst (n bytes) = src as one line of printable ASCII: control characters, spaces and bytes
 * outside ASCII taken as white space, each run of it made one space, the ends trimmed (for a
 * library's or the CPU's description in a trace header). Returns dst. */
const char *adapt_version_line(char *dst, size_t n, const char *src);

#endif
