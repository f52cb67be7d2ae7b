/* src/bench/bench_quant.c: adapt-bench quant (filled in with quant/). */
#include <stdio.h>

#include "src/bench/bench.h"

int adapt_bench_quant(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "adapt-bench quant: not available in this build\n");
    return 2;
}
