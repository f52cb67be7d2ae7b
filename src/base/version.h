/* src/base/version.h: what --version prints, the same for every program. */
#ifndef ADAPT_BASE_VERSION_H
#define ADAPT_BASE_VERSION_H

#include <stdio.h>

/* Writes "PROG (adapt-sim) VERSION", then one line each for the commit the program was built
 * from ("unknown" outside a git checkout or release tarball), the compiler and its options,
 * OpenMP, CUDA, the instruction sets of the hot loops (and which one this CPU runs), and the
 * sanitizers when built with them. */
void adapt_version_print(FILE *f, const char *prog);

#endif
